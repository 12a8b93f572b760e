//! `tugboat-bench-churn [SERIES...]`: the churn benchmark, against real haproxy.
//!
//! A controller (in this process) drives a real haproxy while the input changes: a
//! backend scaled 1 -> 50 -> 1 endpoints three times, a pod replaced 20 times, 200 routes
//! added and removed, 50 certificate rotations, and 5 new backends (the structural
//! changes). Meanwhile client tasks send requests on new connections, bounded in count and
//! time. It prints the reloads haproxy performed, the change-to-live latency (from the
//! new snapshot to the first request that reaches the new target) beside the floors
//! measured in the same run (a bare runtime-API round trip, a bare reload of the same
//! config), and the failed requests.
//!
//! Run: `cargo run --release -p tugboat-testkit --bin tugboat-bench-churn [2.6] [3.0] [3.2] [3.4]`.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::sync::watch;
use tugboat::controller::{self, ControllerConfig};
use tugboat_kube::manifests::{FolderContents, parse_file};
use tugboat_model::Snapshot;
use tugboat_testkit::manifests::{service_with_endpoints, start_backends};
use tugboat_testkit::tls::{certificate, exchange, tls_secret};
use tugboat_testkit::{EchoServer, Haproxy, HaproxyBinary, get};

/// Upper bounds of the whole run, whatever happens.
const MAX_LOAD_REQUESTS: u64 = 2_000_000;
const MAX_WAIT: Duration = Duration::from_secs(10);
const CLIENTS: usize = 4;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let mut series: Vec<String> = std::env::args().skip(1).collect();
    if series.is_empty() {
        series = vec!["2.6".into(), "3.0".into()];
    }
    for name in &series {
        let Some(binary) = HaproxyBinary::installed(name) else {
            bail!("haproxy {name} is not installed: run scripts/get-haproxy.sh");
        };
        let report = run(&binary)
            .await
            .with_context(|| format!("haproxy {name}"))?;
        report.print(&binary);
    }
    Ok(())
}

/// The manifests of the run, by file name; a snapshot is parsed from all of them.
struct Input {
    files: std::collections::BTreeMap<String, String>,
    tx: watch::Sender<Arc<Snapshot>>,
}

impl Input {
    fn set(&mut self, name: &str, text: String) {
        self.files.insert(name.to_string(), text);
    }

    fn remove(&mut self, name: &str) {
        self.files.remove(name);
    }

    /// Publishes the snapshot of the current files; returns when it was sent.
    fn publish(&self) -> Instant {
        let mut contents = FolderContents::default();
        for (name, text) in &self.files {
            parse_file(Path::new(name), text, &mut contents);
        }
        let sent = Instant::now();
        let _ = self.tx.send(Arc::new(contents.snapshot));
        sent
    }
}

fn ingress(name: &str, host: &str, service: &str, tls_secret: Option<&str>) -> String {
    let tls = tls_secret.map_or(String::new(), |secret| {
        format!("  tls: [{{hosts: [{host}], secretName: {secret}}}]\n")
    });
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: {name}, namespace: default}}\n\
         spec:\n{tls}  rules: [{{host: {host}, http: {{paths: [{{path: /, pathType: Prefix, \
         backend: {{service: {{name: {service}, port: {{number: 80}}}}}}}}]}}}}]\n"
    )
}

/// Latencies of one kind of change.
#[derive(Default)]
struct Samples(Vec<Duration>);

impl Samples {
    fn push(&mut self, d: Duration) {
        self.0.push(d);
    }

    fn quantile(&self, q: f64) -> Duration {
        let mut sorted = self.0.clone();
        sorted.sort();
        if sorted.is_empty() {
            return Duration::ZERO;
        }
        let index = ((sorted.len() - 1) as f64 * q).round() as usize;
        sorted[index]
    }
}

struct Report {
    runtime: Vec<(&'static str, Samples)>,
    structural: Samples,
    runtime_floor: Samples,
    reload_floor: Samples,
    reloads: u64,
    /// The reloads of the new backends (none where haproxy adds them at runtime).
    new_backend_reloads: u64,
    structural_changes: u64,
    requests: u64,
    failures: u64,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl Report {
    fn print(&self, binary: &HaproxyBinary) {
        let floor = self.runtime_floor.quantile(0.5);
        let reload_floor = self.reload_floor.quantile(0.5);
        println!(
            "\n== haproxy {} ({}) ==",
            binary.series,
            binary.path.display()
        );
        println!(
            "reloads: {} for {} new backends; 0 for {} runtime changes",
            self.reloads,
            self.structural_changes,
            self.runtime.iter().map(|(_, s)| s.0.len()).sum::<usize>()
        );
        println!(
            "floors (median): runtime-API round trip {:.2} ms, bare reload {:.1} ms",
            ms(floor),
            ms(reload_floor),
        );
        println!(
            "{:<28} {:>6} {:>10} {:>10} {:>22}",
            "change-to-live", "count", "median ms", "p99 ms", "median vs goal"
        );
        for (name, samples) in &self.runtime {
            let median = samples.quantile(0.5);
            let goal = floor * 2;
            println!(
                "{:<28} {:>6} {:>10.2} {:>10.2} {:>12.2}x (2xfloor)",
                name,
                samples.0.len(),
                ms(median),
                ms(samples.quantile(0.99)),
                median.as_secs_f64() / goal.as_secs_f64()
            );
        }
        let median = self.structural.quantile(0.5);
        println!(
            "{:<28} {:>6} {:>10.2} {:>10.2} {:>12.2}x (bare reload) {:.2}x (2xfloor)",
            format!("new backend ({} reloads)", self.new_backend_reloads),
            self.structural.0.len(),
            ms(median),
            ms(self.structural.quantile(0.99)),
            median.as_secs_f64() / reload_floor.as_secs_f64(),
            median.as_secs_f64() / (floor * 2).as_secs_f64()
        );
        println!(
            "requests during the run: {} on new connections, {} failed",
            self.requests, self.failures
        );
    }
}

/// Waits until `check` holds, polling as fast as it can; returns the time since `since`.
async fn until<F, Fut>(since: Instant, what: &str, mut check: F) -> anyhow::Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    loop {
        if check().await {
            return Ok(since.elapsed());
        }
        if since.elapsed() > MAX_WAIT {
            bail!("{what}: not live after {MAX_WAIT:?}");
        }
    }
}

async fn answered_by(addr: SocketAddr, host: &str, endpoint: Option<&str>) -> Option<String> {
    let reply = get(addr, host, "/").await.ok()?;
    let answered = reply.endpoint().map(str::to_string);
    match endpoint {
        Some(wanted) => (answered.as_deref() == Some(wanted)).then_some(wanted.to_string()),
        None => answered,
    }
}

async fn run(binary: &HaproxyBinary) -> anyhow::Result<Report> {
    let haproxy = Haproxy::start(binary).await;
    let http = haproxy.http_addr();
    let https = haproxy.https_addr();
    let churn = start_backends("churn", 70, 50).await;
    let swap = start_backends("swap", 71, 2).await;
    let steady = start_backends("steady", 72, 2).await;
    let mut extra: Vec<Vec<EchoServer>> = Vec::new();

    let (tx, rx) = watch::channel(Arc::new(Snapshot::default()));
    let mut input = Input {
        files: Default::default(),
        tx,
    };
    input.set("churn", service_with_endpoints("churn", &churn[..1]));
    input.set("swap", service_with_endpoints("swap", &swap[..1]));
    input.set("steady", service_with_endpoints("steady", &steady));
    input.set(
        "i-churn",
        ingress("churn", "churn.example.com", "churn", None),
    );
    input.set("i-swap", ingress("swap", "swap.example.com", "swap", None));
    input.set(
        "i-steady",
        ingress("steady", "steady.example.com", "steady", None),
    );
    let (cert, key, mut cert_der) = certificate(&["secure.example.com"], false);
    input.set("secret", tls_secret("secure-tls", &cert, &key));
    input.set(
        "i-secure",
        ingress("secure", "secure.example.com", "steady", Some("secure-tls")),
    );

    let mut config =
        ControllerConfig::new(haproxy.master_socket.clone(), haproxy.render_settings());
    config.reload_window = Duration::ZERO;
    let (status, _status_rx) = watch::channel(Default::default());
    let controller = tokio::spawn(controller::run(config, rx, status));
    input.publish();
    until(Instant::now(), "first apply", || async {
        answered_by(http, "steady.example.com", None)
            .await
            .is_some()
    })
    .await?;

    // Load: new-connection clients on the steady and churning hosts, for the whole run.
    let stop = Arc::new(AtomicBool::new(false));
    let requests = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    let mut clients = Vec::new();
    for index in 0..CLIENTS {
        let (stop, requests, failures) = (stop.clone(), requests.clone(), failures.clone());
        let host = if index % 2 == 0 {
            "steady.example.com"
        } else {
            "churn.example.com"
        };
        clients.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed)
                && requests.fetch_add(1, Ordering::Relaxed) < MAX_LOAD_REQUESTS
            {
                match get(http, host, "/").await {
                    Ok(reply) if reply.status == 200 => {}
                    _ => {
                        failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    let reloads_before = haproxy.show_proc().await.reloads;

    // Floors, measured in the same run.
    let cli = haproxy.cli();
    let exact_map = haproxy.config_dir.join("maps/routes-exact.map");
    let mut runtime_floor = Samples::default();
    for _ in 0..50 {
        let started = Instant::now();
        cli.worker_command(&format!("set map {} none none", exact_map.display()))
            .await
            .ok();
        runtime_floor.push(started.elapsed());
    }

    let mut scale = Samples::default();
    for _ in 0..3 {
        let old: Vec<String> = vec![churn[0].addr.to_string()];
        input.set("churn", service_with_endpoints("churn", &churn));
        let sent = input.publish();
        scale.push(
            until(sent, "scale up", || async {
                answered_by(http, "churn.example.com", None)
                    .await
                    .is_some_and(|e| !old.contains(&e))
            })
            .await?,
        );
        input.set("churn", service_with_endpoints("churn", &churn[..1]));
        input.publish();
        let only = churn[0].addr.to_string();
        until(Instant::now(), "scale down", || async {
            let mut all = true;
            for _ in 0..5 {
                all &= answered_by(http, "churn.example.com", Some(&only))
                    .await
                    .is_some();
            }
            all
        })
        .await?;
    }

    let mut replace = Samples::default();
    for round in 0..20 {
        let next = &swap[(round + 1) % 2];
        input.set(
            "swap",
            service_with_endpoints("swap", std::slice::from_ref(next)),
        );
        let sent = input.publish();
        let wanted = next.addr.to_string();
        replace.push(
            until(sent, "pod replaced", || async {
                answered_by(http, "swap.example.com", Some(&wanted))
                    .await
                    .is_some()
            })
            .await?,
        );
    }

    let mut route_add = Samples::default();
    let mut route_remove = Samples::default();
    for i in 0..200 {
        let host = format!("r{i}.example.com");
        input.set(
            &format!("route-{i}"),
            ingress(&format!("r{i}"), &host, "steady", None),
        );
        let sent = input.publish();
        route_add.push(
            until(sent, "route added", || async {
                answered_by(http, &host, None).await.is_some()
            })
            .await?,
        );
    }
    for i in 0..200 {
        let host = format!("r{i}.example.com");
        input.remove(&format!("route-{i}"));
        let sent = input.publish();
        route_remove.push(
            until(sent, "route removed", || async {
                get(http, &host, "/").await.is_ok_and(|r| r.status == 404)
            })
            .await?,
        );
    }

    let mut rotation = Samples::default();
    for _ in 0..50 {
        let (cert, key, der) = certificate(&["secure.example.com"], false);
        input.set("secret", tls_secret("secure-tls", &cert, &key));
        let sent = input.publish();
        rotation.push(
            until(sent, "certificate rotated", || async {
                exchange(https, "secure.example.com", "/", &[b"http/1.1"])
                    .await
                    .is_ok_and(|e| e.certificate == der)
            })
            .await?,
        );
        cert_der = der;
    }
    let _ = cert_der;

    let mut structural = Samples::default();
    let structural_changes = 5;
    let reloads_before_new = haproxy.show_proc().await.reloads;
    for i in 0..structural_changes {
        let name = format!("new{i}");
        let servers = start_backends(&name, 80 + i as u8, 1).await;
        input.set(&name, service_with_endpoints(&name, &servers));
        input.set(
            &format!("i-{name}"),
            ingress(&name, &format!("{name}.example.com"), &name, None),
        );
        let sent = input.publish();
        let host = format!("{name}.example.com");
        structural.push(
            until(sent, "new backend", || async {
                answered_by(http, &host, None).await.is_some()
            })
            .await?,
        );
        extra.push(servers);
    }
    let reloads_after = haproxy.show_proc().await.reloads;
    let (reloads, new_backend_reloads) = (
        reloads_after - reloads_before,
        reloads_after - reloads_before_new,
    );
    controller.abort();

    // The reload floor, under the same load.
    let mut reload_floor = Samples::default();
    for _ in 0..5 {
        let started = Instant::now();
        cli.reload().await.context("bare reload")?;
        reload_floor.push(started.elapsed());
    }
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        let _ = client.await;
    }

    Ok(Report {
        runtime: vec![
            ("scale 1 -> 50 endpoints", scale),
            ("pod replaced", replace),
            ("route added", route_add),
            ("route removed", route_remove),
            ("certificate rotated", rotation),
        ],
        structural,
        runtime_floor,
        reload_floor,
        reloads,
        new_backend_reloads,
        structural_changes,
        requests: requests.load(Ordering::Relaxed).min(MAX_LOAD_REQUESTS),
        failures: failures.load(Ordering::Relaxed),
    })
}
