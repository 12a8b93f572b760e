//! `tugboat-bench-reload [--rate N] [--reloads N] [SERIES...]`: what reloads cost new
//! connections, against real haproxy.
//!
//! haproxy runs the configuration the controller renders (a controller in this process),
//! for one Ingress with a body limit and custom error pages, so that the internal
//! frontends on abstract sockets are there to be handed over too. The benchmark's
//! requests name another host: each gets haproxy's own 404, so no backend limits the
//! rate.
//! Client tasks open new connections at a bounded rate (`--rate`, default 3000 per
//! second; no keep-alive: one request per connection, `Connection: close`) on 127.0.0.1,
//! first for a few seconds with no reload, then across a series of reloads (`--reloads`,
//! default 20, one every 250 ms) sent on the master socket. It prints, for each phase,
//! the connections tried and how each ended: answered, refused, reset, closed without an
//! answer, timed out. It also counts the lines in haproxy's log saying that the new
//! worker did not get the listening sockets from the old one (`Failed to get the
//! sockets from the old process!`), apart from the controller's first reload, whose old
//! worker (the seeded configuration) has no listener to hand over.
//!
//! Run: `cargo run --release -p tugboat-testkit --bin tugboat-bench-reload [2.6] [3.0] [3.2] [3.4]`.
#![allow(
    clippy::disallowed_methods,
    reason = "test code: blocking file work is fine here"
)]

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tugboat_haproxy::ReloadOutcome;
use tugboat_testkit::cluster_pod::TUGBOAT_CLASS;
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{mk_ingress, mk_service_of, to_json, to_yaml, with_keys};
use tugboat_testkit::{HaproxyBinary, Pod};

/// Upper bounds of the whole run, whatever happens.
const MAX_RATE: u64 = 20_000;
const MAX_RELOADS: usize = 200;
const CLIENTS: u64 = 16;
const STEADY: Duration = Duration::from_secs(3);
const RELOAD_EVERY: Duration = Duration::from_millis(250);
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(3);
/// What haproxy logs when the new worker could not take over the old one's sockets.
const NO_SOCKETS: &str = "Failed to get the sockets from the old process";

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let mut series = Vec::new();
    let mut rate = 3000;
    let mut reloads = 20;
    let mut without_transfer = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--rate" => rate = args.next().context("--rate N")?.parse()?,
            "--reloads" => reloads = args.next().context("--reloads N")?.parse()?,
            "--without-socket-transfer" => without_transfer = true,
            _ => series.push(arg),
        }
    }
    let rate = u64::min(rate, MAX_RATE);
    let reloads = usize::min(reloads, MAX_RELOADS);
    if series.is_empty() {
        series = ["2.6", "3.0", "3.2", "3.4"].map(String::from).to_vec();
    }
    println!(
        "new connections at up to {rate}/s ({CLIENTS} clients, one request each, no \
         keep-alive); {reloads} reloads, one every {RELOAD_EVERY:?}{}",
        if without_transfer {
            "; haproxy started with -x /dev/null (no socket transfer)"
        } else {
            ""
        }
    );
    let wrappers = tempfile::tempdir()?;
    for name in &series {
        let Some(mut binary) = HaproxyBinary::installed(name) else {
            bail!("haproxy {name} is not installed: run scripts/get-haproxy.sh");
        };
        if without_transfer {
            binary.path = without_socket_transfer(&binary, wrappers.path())?;
        }
        run(&binary, rate, reloads)
            .await
            .with_context(|| format!("haproxy {name}"))?;
    }
    Ok(())
}

/// A script that starts `binary` with `-x /dev/null` first: haproxy keeps that option
/// across its reloads, and no new worker then asks the old one for its sockets.
fn without_socket_transfer(
    binary: &HaproxyBinary,
    dir: &std::path::Path,
) -> anyhow::Result<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(format!("haproxy-{}", binary.series));
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nexec {} -x /dev/null \"$@\"\n",
            binary.path.display()
        ),
    )?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(path)
}

/// How the connections of one phase ended.
#[derive(Default)]
struct Counts {
    answered: AtomicU64,
    refused: AtomicU64,
    reset: AtomicU64,
    no_answer: AtomicU64,
    timed_out: AtomicU64,
    other: AtomicU64,
}

impl Counts {
    fn tried(&self) -> u64 {
        [
            &self.answered,
            &self.refused,
            &self.reset,
            &self.no_answer,
            &self.timed_out,
            &self.other,
        ]
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .sum()
    }

    fn failed(&self) -> u64 {
        self.tried() - self.answered.load(Ordering::Relaxed)
    }

    fn print(&self, phase: &str, took: Duration) {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        println!(
            "{phase:<22} {:>8} {:>8.0} {:>8} {:>8} {:>8} {:>9} {:>9} {:>6}",
            self.tried(),
            self.tried() as f64 / took.as_secs_f64(),
            get(&self.answered),
            get(&self.refused),
            get(&self.reset),
            get(&self.no_answer),
            get(&self.timed_out),
            get(&self.other),
        );
    }
}

async fn run(binary: &HaproxyBinary, rate: u64, reloads: usize) -> anyhow::Result<()> {
    let shop = start_backends("shop", 90, 1).await;
    let mut objects: Vec<_> = mk_service_of("shop", &shop).into();
    objects.push(to_json(&with_keys(
        mk_ingress("shop", "shop.example.com", "shop"),
        &[("proxy-body-size", "1m"), ("custom-http-errors", "404,503")],
    )));
    let objects = to_yaml(&objects);
    let pod = Pod::start(
        binary,
        &[("class.yaml", TUGBOAT_CLASS), ("shop.yaml", &objects)],
    )
    .await;
    let addr = pod.http_addr();
    // The controller's first apply (a reload from the seeded configuration).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let shop = pod.get("shop.example.com", "/").await;
        if pod.status.borrow().ready && shop.is_ok_and(|reply| reply.status == 200) {
            break;
        }
        if Instant::now() > deadline {
            bail!("the controller's first apply did not happen within 20 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let first_reload_lines = pod.log().matches(NO_SOCKETS).count();
    let config = tugboat_testkit::haproxy::read_config(&pod.config_dir).unwrap_or_default();
    let binds = config
        .lines()
        .filter(|l| l.trim().starts_with("bind "))
        .count();
    let abstract_binds = config.matches("bind abns@").count();

    let steady = Arc::new(Counts::default());
    let took = load(addr, rate, steady.clone(), async {
        tokio::time::sleep(STEADY).await;
        Ok(())
    })
    .await?;

    let across = Arc::new(Counts::default());
    let cli = pod.cli();
    let before = pod.show_proc().await;
    let reloading_took = load(addr, rate, across.clone(), async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        for _ in 0..reloads {
            let started = Instant::now();
            match cli.reload().await? {
                ReloadOutcome::Loaded { .. } => {}
                ReloadOutcome::Refused { message } => bail!("reload refused: {message}"),
            }
            tokio::time::sleep(RELOAD_EVERY.saturating_sub(started.elapsed())).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        Ok(())
    })
    .await?;
    let after = pod.show_proc().await;
    let later_lines = pod.log().matches(NO_SOCKETS).count() - first_reload_lines;

    println!(
        "\n== haproxy {} ({}) ==",
        binary.series,
        binary.path.display()
    );
    println!(
        "{:<22} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>6}",
        "phase",
        "tried",
        "per s",
        "answered",
        "refused",
        "reset",
        "no answer",
        "timed out",
        "other"
    );
    steady.print("no reload", took);
    across.print(
        &format!("{} reloads", after.reloads - before.reloads),
        reloading_took,
    );
    println!("listening sockets to hand over: {binds} binds, {abstract_binds} of them abstract");
    println!(
        "'{NO_SOCKETS}' in haproxy's log: {first_reload_lines} at the controller's first \
         reload (from the seeded configuration), {later_lines} during the reloads"
    );
    println!(
        "failed connections: {} with no reload, {} across the reloads",
        steady.failed(),
        across.failed()
    );
    Ok(())
}

/// Runs the clients until `during` ends; returns how long they ran.
async fn load(
    addr: SocketAddr,
    rate: u64,
    counts: Arc<Counts>,
    during: impl Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<Duration> {
    let stop = Arc::new(AtomicBool::new(false));
    let per_client = Duration::from_secs_f64(CLIENTS as f64 / rate as f64);
    let started = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let stop = stop.clone();
            let counts = counts.clone();
            tokio::spawn(async move {
                let mut pace = tokio::time::interval(per_client);
                pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                while !stop.load(Ordering::Relaxed) {
                    pace.tick().await;
                    let counter = match tokio::time::timeout(ATTEMPT_TIMEOUT, attempt(addr)).await {
                        Ok(Ok(true)) => &counts.answered,
                        Ok(Ok(false)) => &counts.no_answer,
                        Ok(Err(err)) => match err.kind() {
                            io::ErrorKind::ConnectionRefused => &counts.refused,
                            io::ErrorKind::ConnectionReset
                            | io::ErrorKind::ConnectionAborted
                            | io::ErrorKind::BrokenPipe => &counts.reset,
                            _ => &counts.other,
                        },
                        Err(_) => &counts.timed_out,
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let result = during.await;
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        let _ = client.await;
    }
    result.map(|()| started.elapsed())
}

/// One new connection, one request: whether an HTTP answer came.
async fn attempt(addr: SocketAddr) -> io::Result<bool> {
    let mut stream = TcpStream::connect(addr).await?;
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: bench.example\r\nConnection: close\r\n\r\n")
        .await?;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).await?;
    Ok(reply.starts_with(b"HTTP/1.1 "))
}
