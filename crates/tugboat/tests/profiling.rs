//! The admin server's profiles (`--profiling`): a CPU profile taken while work runs
//! decodes as pprof's protobuf with samples of that work, the flame graph is an SVG, a
//! second profile at the same time is refused, the heap figures are plausible; and
//! without `--profiling` every profiling endpoint answers 404.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pprof::protos::{Message, Profile};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tugboat::admin::{self, AdminState};
use tugboat::controller::ControllerStatus;
use tugboat::metrics::Metrics;
use tugboat::profiling::Profiling;

/// The binary's allocator, so the heap figures are those the controller reports.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const PROFILING_PATHS: [&str; 4] = [
    "/debug/pprof/profile?seconds=1",
    "/debug/pprof/flamegraph?seconds=1",
    "/debug/pprof/heap",
    "/debug/heap",
];

/// Starts an admin server on a free loopback port; returns its address.
async fn start_admin(profiling: bool) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let (_status, status_rx) = watch::channel(ControllerStatus::default());
    tokio::spawn(admin::serve(
        listener,
        AdminState {
            metrics: Arc::new(Metrics::new()),
            status: status_rx,
            master_socket: PathBuf::from("/nonexistent/master.sock"),
            profiling: Profiling::new(profiling),
        },
    ));
    address
}

/// One GET; the status code and the body.
async fn get(address: std::net::SocketAddr, path: &str) -> (u16, Vec<u8>) {
    let mut stream = TcpStream::connect(address).await.expect("connect");
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: admin\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("read");
    let split = answer
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .expect("an HTTP head");
    let head = String::from_utf8_lossy(&answer[..split]).to_string();
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("a status code");
    (code, answer[split + 4..].to_vec())
}

/// Work for the profiler to find: hashes numbers until `stop` is set.
#[inline(never)]
fn profiled_busy_work(stop: &AtomicBool) -> u64 {
    let mut total = 0u64;
    while !stop.load(Ordering::Relaxed) {
        for n in 0..10_000u64 {
            total = total
                .wrapping_mul(6364136223846793005)
                .wrapping_add(std::hint::black_box(n));
        }
    }
    total
}

/// Runs [`profiled_busy_work`] on a thread of its own until stopped, for at most `limit`.
fn busy_for(limit: Duration) -> (Arc<AtomicBool>, std::thread::JoinHandle<u64>) {
    let stop = Arc::new(AtomicBool::new(false));
    let worker_stop = stop.clone();
    let started = Instant::now();
    let handle = std::thread::spawn(move || {
        let watchdog_stop = worker_stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(limit.saturating_sub(started.elapsed()));
            watchdog_stop.store(true, Ordering::Relaxed);
        });
        profiled_busy_work(&worker_stop)
    });
    (stop, handle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profiles_on_demand_when_enabled() {
    let address = start_admin(true).await;

    let (stop, worker) = busy_for(Duration::from_secs(60));
    let profile = tokio::spawn(get(address, "/debug/pprof/profile?seconds=1"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (code, body) = get(address, "/debug/pprof/profile?seconds=1").await;
    assert_eq!(code, 409, "{}", String::from_utf8_lossy(&body));
    let (code, body) = profile.await.expect("the first profile");
    stop.store(true, Ordering::Relaxed);
    worker.join().expect("the busy worker");
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let profile = Profile::decode(body.as_slice()).expect("pprof's protobuf");
    assert!(!profile.sample.is_empty(), "samples");
    assert!(
        profile
            .string_table
            .iter()
            .any(|s| s.contains("profiled_busy_work")),
        "the busy function among the symbols"
    );
    assert!(
        !profile
            .string_table
            .iter()
            .any(|s| s.contains("pprof::backtrace")),
        "the profiler's own frames are left out"
    );
    assert!(profile.sample_type.len() == 2 && profile.period > 0);

    let (stop, worker) = busy_for(Duration::from_secs(60));
    let (code, body) = get(address, "/debug/pprof/flamegraph?seconds=1").await;
    stop.store(true, Ordering::Relaxed);
    worker.join().expect("the busy worker");
    assert_eq!(code, 200);
    let svg = String::from_utf8(body).expect("text");
    assert!(
        svg.contains("<svg") && svg.trim_end().ends_with("</svg>"),
        "{svg}"
    );
    assert!(
        svg.contains("profiled_busy_work"),
        "the busy function in the graph"
    );

    let (code, _) = get(address, "/debug/pprof/profile?seconds=1&format=svg").await;
    assert_eq!(code, 200, "the profile is free again, and takes format=svg");

    for bad in ["0", "301", "x"] {
        let (code, _) = get(address, &format!("/debug/pprof/profile?seconds={bad}")).await;
        assert_eq!(code, 400, "seconds={bad}");
    }

    for path in ["/debug/pprof/heap", "/debug/heap"] {
        let (code, body) = get(address, path).await;
        assert_eq!(code, 200, "{path}");
        let heap: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        let figure = |name: &str| heap[name].as_u64().unwrap_or(0);
        assert!(figure("resident_bytes") > 0, "{heap}");
        assert!(figure("anonymous_resident_bytes") > 0, "{heap}");
        assert!(
            figure("peak_resident_bytes") >= figure("resident_bytes"),
            "{heap}"
        );
        if cfg!(feature = "jemalloc") {
            assert_eq!(heap["allocator"], "jemalloc");
            assert!(figure("allocated_bytes") > 0, "{heap}");
            assert!(
                figure("allocator_resident_bytes") >= figure("allocated_bytes"),
                "{heap}"
            );
        }
    }
    let (code, body) = get(address, "/debug/heap?format=text").await;
    assert_eq!(code, 200);
    let text = String::from_utf8(body).expect("text");
    assert!(
        text.lines().any(|line| line.starts_with("resident_bytes ")),
        "{text}"
    );
}

#[tokio::test]
async fn profiling_endpoints_are_absent_when_off() {
    let address = start_admin(false).await;
    for path in PROFILING_PATHS {
        let (code, _) = get(address, path).await;
        assert_eq!(code, 404, "{path}");
    }
}
