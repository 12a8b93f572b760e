//! What the end-to-end tests (and the quickstart) need around Tugboat: real haproxy
//! processes started the way the official image starts them, echo backends that say
//! which service and endpoint answered, banner backends for TCP services, a small HTTP
//! client, and the controller itself.
#![allow(
    clippy::disallowed_methods,
    reason = "test code: blocking file work is fine here"
)]

pub mod banner;
pub mod bench;
pub mod cluster_pod;
pub mod container_plan;
pub mod echo;
pub mod elf_loader;
pub mod fake_apiserver;
pub mod gateway_objects;
pub mod haproxy;
pub mod http;
pub mod manifests;
pub mod master_relay;
pub mod objects;
pub mod pod_runner;
pub mod prometheus;
pub mod rbac;
pub mod scene;
pub mod tls;

pub use cluster_pod::ClusterPod;
pub use echo::EchoServer;
pub use fake_apiserver::FakeApiServer;
pub use haproxy::{Haproxy, HaproxyBinary, Pod};
pub use http::{Reply, get};
pub use scene::{Scene, Source};

use std::future::Future;
use std::time::Duration;

/// Serves the controller's admin port (`/metrics`, `/status`, ...) with `state` on a
/// free loopback port: its address, and the task (stopped when dropped or aborted).
pub async fn serve_admin(
    state: tugboat::admin::AdminState,
) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the admin port");
    let address = listener.local_addr().expect("admin address");
    (
        address,
        tokio::spawn(tugboat::admin::serve(listener, state)),
    )
}

/// Polls `check` until it returns `Some`, or panics with `what` after `limit`.
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A free TCP port on 127.0.0.1 (bound, then released).
///
/// Tests run as parallel processes, and a port the kernel picks (`bind :0`) can be
/// picked again by another process before the first one's haproxy binds it; haproxy
/// binds with `SO_REUSEPORT`, so both would then serve the port, each answering the
/// other's requests. So each process takes its ports from its own slice below the
/// ephemeral range (by its pid), checked free; the kernel's pick is the last resort.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    const FIRST: u16 = 10_000;
    const SLICE: u16 = 32;
    const SLICES: u16 = 700;
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let slice = (std::process::id() % u32::from(SLICES)) as u16;
    for _ in 0..SLICE {
        let port = FIRST + slice * SLICE + NEXT.fetch_add(1, Ordering::Relaxed) % SLICE;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free port on 127.0.0.1")
}

/// The haproxy series every end-to-end scenario runs on (`haproxy_tests!`).
pub const HAPROXY_SERIES: [&str; 4] = ["2.6", "3.0", "3.2", "3.4"];

/// Declares one test per haproxy series of [`HAPROXY_SERIES`] for each scenario
/// `fn name(HaproxyBinary)`. A series that is not installed fails the test, unless
/// `TUGBOAT_SKIP_MISSING_HAPROXY` opts out for it: then the test is skipped with a line on
/// stderr (see [`HaproxyBinary::find`]).
#[macro_export]
macro_rules! haproxy_tests {
    ($($name:ident),* $(,)?) => {
        $crate::haproxy_tests!(@series haproxy_2_6 "2.6" $($name),*);
        $crate::haproxy_tests!(@series haproxy_3_0 "3.0" $($name),*);
        $crate::haproxy_tests!(@series haproxy_3_2 "3.2" $($name),*);
        $crate::haproxy_tests!(@series haproxy_3_4 "3.4" $($name),*);
    };
    (@series $module:ident $series:literal $($name:ident),*) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Some(binary) = $crate::HaproxyBinary::find($series) {
                        super::$name(binary).await;
                    }
                }
            )*
        }
    };
}
