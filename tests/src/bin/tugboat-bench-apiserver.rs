//! `tugboat-bench-apiserver [--runs N] [--ingresses N] [--changes N] [--haproxy X.Y]`:
//! loads the fake API
//! server with a large cluster (by default 10,000 Ingresses, 10,000 Services, 10,000
//! EndpointSlices of 5 endpoints, 1,000 TLS Secrets), starts the real `tugboat` binary
//! against it and a real haproxy (3.4 unless `--haproxy` names another series), and prints the time to the first successful apply
//! (wall clock and the controller's CPU time) and the controller's peak RSS. Then, on the
//! same cluster, it moves one endpoint of a different EndpointSlice `--changes` times (20
//! by default) and prints how long each took to reach haproxy's running servers, next to
//! a bare runtime-API round trip measured in the same run, and the reloads they caused.
//! A benchmark, not a test.
//!
//! Build the controller first: `cargo build --release -p tugboat` (the binary is taken
//! from next to this one, or from `TUGBOAT_BIN`).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;
use tugboat::metrics::ProcessUsage;
use tugboat_testkit::{FakeApiServer, Haproxy, HaproxyBinary};

const NAMESPACE: &str = "bench";
/// How long one run may take before it is called a failure.
const RUN_LIMIT: Duration = Duration::from_secs(300);

/// How long to wait for one endpoint change to reach haproxy.
const CHANGE_LIMIT: Duration = Duration::from_secs(30);
/// The quiet spell before each change, so that each one is applied on its own.
const CHANGE_SPACING: Duration = Duration::from_millis(300);

struct Figures {
    wall: Duration,
    cpu_seconds: f64,
    peak_rss_bytes: u64,
    /// From the EndpointSlice write to the new address in haproxy's servers.
    changes: Vec<Duration>,
    /// A bare `show servers state` round trip, measured between the changes.
    round_trips: Vec<Duration>,
    reloads_during_changes: u64,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let mut runs = 3usize;
    let mut ingresses = 10_000usize;
    let mut changes = 20usize;
    let mut series = "3.4".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().context("every option takes a value")?;
        match arg.as_str() {
            "--runs" => runs = value.parse().context("--runs N")?,
            "--ingresses" => ingresses = value.parse().context("--ingresses N")?,
            "--changes" => changes = value.parse().context("--changes N")?,
            "--haproxy" => series = value,
            other => {
                bail!(
                    "unknown option {other}; usage: [--runs N] [--ingresses N] [--changes N] [--haproxy X.Y]"
                )
            }
        }
    }
    let tugboat = tugboat_binary()?;
    let haproxy = HaproxyBinary::find(&series).with_context(|| {
        format!("haproxy {series} not installed (scripts/get-haproxy.sh, or TUGBOAT_HAPROXY_DIR)")
    })?;
    let server = FakeApiServer::start().await;
    let started = Instant::now();
    load(&server, ingresses);
    println!(
        "loaded {ingresses} Ingresses, {ingresses} Services, {ingresses} EndpointSlices x 5 \
         endpoints, {} TLS Secrets in {:.1} s",
        ingresses / 10,
        started.elapsed().as_secs_f64()
    );
    let mut figures = Vec::new();
    for run in 1..=runs {
        let result = run_once(&tugboat, &haproxy, &server, changes.min(ingresses)).await?;
        println!(
            "run {run}: first apply after {:.2} s wall, {:.2} s controller CPU, peak RSS {:.1} MB",
            result.wall.as_secs_f64(),
            result.cpu_seconds,
            result.peak_rss_bytes as f64 / 1e6
        );
        if !result.changes.is_empty() {
            println!(
                "run {run}: {} endpoint changes reached haproxy in {:.1} ms median ({:.1} ms \
                 at most), {} reloads; runtime-API round trip {:.2} ms median",
                result.changes.len(),
                median_ms(&result.changes),
                result
                    .changes
                    .iter()
                    .max()
                    .map_or(0.0, |d| d.as_secs_f64() * 1e3),
                result.reloads_during_changes,
                median_ms(&result.round_trips),
            );
        }
        figures.push(result);
    }
    let median = |mut values: Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let all_changes: Vec<Duration> = figures.iter().flat_map(|f| f.changes.clone()).collect();
    let all_round_trips: Vec<Duration> =
        figures.iter().flat_map(|f| f.round_trips.clone()).collect();
    if !all_changes.is_empty() {
        println!(
            "all runs: endpoint change to haproxy {:.1} ms median over {} changes, {:.0}x the \
             runtime-API round trip ({:.2} ms median); {} reloads",
            median_ms(&all_changes),
            all_changes.len(),
            median_ms(&all_changes) / median_ms(&all_round_trips),
            median_ms(&all_round_trips),
            figures
                .iter()
                .map(|f| f.reloads_during_changes)
                .sum::<u64>(),
        );
    }
    println!(
        "median of {runs}: first apply {:.2} s wall, {:.2} s controller CPU, peak RSS {:.1} MB",
        median(figures.iter().map(|f| f.wall.as_secs_f64()).collect()),
        median(figures.iter().map(|f| f.cpu_seconds).collect()),
        median(
            figures
                .iter()
                .map(|f| f.peak_rss_bytes as f64 / 1e6)
                .collect()
        ),
    );
    Ok(())
}

/// Polls haproxy until a server of `backend` has `address`.
async fn wait_for_server(
    cli: &tugboat_haproxy::MasterCli,
    backend: &str,
    address: &str,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let command = format!("show servers state {backend}");
    loop {
        if cli
            .worker_command(&command)
            .await?
            .contains(&format!(" {address} "))
        {
            return Ok(());
        }
        if started.elapsed() > CHANGE_LIMIT {
            bail!("{address} did not reach haproxy's {backend} within {CHANGE_LIMIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn median_ms(values: &[Duration]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort();
    sorted
        .get(sorted.len() / 2)
        .map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

fn tugboat_binary() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("TUGBOAT_BIN") {
        return Ok(path.into());
    }
    let exe = std::env::current_exe().context("cannot find this program")?;
    let path = exe.with_file_name("tugboat");
    if !path.is_file() {
        bail!(
            "{} not found: build it first (cargo build --release -p tugboat) or set TUGBOAT_BIN",
            path.display()
        );
    }
    Ok(path)
}

/// The EndpointSlice of Service `svc-{index}`: 5 ready endpoints on loopback addresses
/// that nothing listens on (haproxy never contacts them: no health checks, no traffic),
/// the first one at `first_address` when given.
fn endpoint_slice(index: usize, first_address: Option<&str>) -> serde_json::Value {
    let name = format!("svc-{index}");
    let endpoints: Vec<_> = (0..5)
        .map(|e| {
            let address = match first_address {
                Some(address) if e == 0 => address.to_string(),
                _ => endpoint_address(index, e),
            };
            json!({
                "addresses": [address],
                "conditions": {"ready": true},
                "targetRef": {"kind": "Pod", "namespace": NAMESPACE, "name": format!("{name}-pod-{e}")}
            })
        })
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{name}-abcde"), "namespace": NAMESPACE,
                     "labels": {"kubernetes.io/service-name": name}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": endpoints
    })
}

/// The address of endpoint `endpoint` of Service `svc-{index}`, unique in the cluster.
fn endpoint_address(index: usize, endpoint: usize) -> String {
    let n = index * 5 + endpoint;
    format!("127.{}.{}.{}", 1 + n / 65536, (n / 256) % 256, n % 256)
}

/// Fills the API server.
fn load(server: &FakeApiServer, count: usize) {
    server.put(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
        "metadata": {"name": "tugboat"}, "spec": {"controller": "tugboat.dev/ingress"}
    }));
    // A real RSA-2048 certificate and key, of the size most clusters carry: every Secret
    // passes the controller's checks and becomes a certificate file for haproxy.
    let base64 = |text: &str| json!(k8s_openapi::ByteString(text.as_bytes().to_vec()));
    let certificate = base64(include_str!(
        "../../../crates/tugboat-model/src/testdata/rsa.crt"
    ));
    let key = base64(include_str!(
        "../../../crates/tugboat-model/src/testdata/rsa-pkcs1.key"
    ));
    for i in 0..count {
        let name = format!("svc-{i}");
        server.put(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": name}},
            "spec": {"clusterIP": format!("10.96.{}.{}", i / 250, i % 250 + 1),
                     "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]}
        }));
        server.put(endpoint_slice(i, None));
        let tls = if i % 10 == 0 {
            let secret = format!("tls-{i}");
            server.put(json!({
                "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": {"name": secret, "namespace": NAMESPACE},
                "data": {"tls.crt": certificate, "tls.key": key}
            }));
            json!([{"hosts": [format!("host-{i}.example.com")], "secretName": secret}])
        } else {
            json!(null)
        };
        server.put(json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": format!("ing-{i}"), "namespace": NAMESPACE,
                         "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "spec": {
                "ingressClassName": "tugboat",
                "tls": tls,
                "rules": [{"host": format!("host-{i}.example.com"), "http": {"paths": [
                    {"path": "/", "pathType": "Prefix",
                     "backend": {"service": {"name": name, "port": {"number": 80}}}}
                ]}}]
            }
        }));
    }
}

async fn run_once(
    tugboat: &PathBuf,
    haproxy_binary: &HaproxyBinary,
    server: &FakeApiServer,
    changes: usize,
) -> anyhow::Result<Figures> {
    let haproxy = Haproxy::start(haproxy_binary).await;
    let dir = tempfile::tempdir().context("temporary folder")?;
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig);
    let admin_port = tugboat_testkit::free_port();
    // `TUGBOAT_BENCH_LOG=FILE`: the controller's info log (its update lines) goes there.
    let log = match std::env::var_os("TUGBOAT_BENCH_LOG") {
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .with_context(|| format!("cannot open {}", PathBuf::from(&path).display()))?,
        ),
        None => None,
    };
    let started = Instant::now();
    let mut child = tokio::process::Command::new(tugboat)
        .arg("run")
        .arg("--master-socket")
        .arg(&haproxy.master_socket)
        .arg("--config-dir")
        .arg(&haproxy.config_dir)
        .arg("--lib-dir")
        .arg(&haproxy.lib_dir)
        .args(["--bind-address", "127.0.0.1"])
        .args(["--http-port", &haproxy.http_port.to_string()])
        .args(["--https-port", &haproxy.https_port.to_string()])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--controller-address", "127.0.0.1"])
        .args(["--controller-port", &admin_port.to_string()])
        .env("POD_NAME", "bench")
        .env("POD_NAMESPACE", "tugboat-system")
        .env("RUST_LOG", if log.is_some() { "info" } else { "warn" })
        .stdin(Stdio::null())
        .stdout(log.map_or_else(Stdio::null, Stdio::from))
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {}", tugboat.display()))?;
    let pid = child.id().context("controller exited at once")?.to_string();
    let admin = std::net::SocketAddr::from(([127, 0, 0, 1], admin_port));
    loop {
        if started.elapsed() > RUN_LIMIT {
            bail!("no successful apply within {RUN_LIMIT:?}");
        }
        if let Some(status) = child.try_wait()? {
            bail!("the controller exited: {status}");
        }
        if let Ok(reply) = tugboat_testkit::get(admin, "localhost", "/readyz").await
            && reply.status == 200
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let wall = started.elapsed();
    let usage = ProcessUsage::read_pid(&pid).context("cannot read the controller's /proc")?;
    let cli = haproxy.cli();
    let reloads_before = haproxy.show_proc().await.reloads;
    let mut change_times = Vec::new();
    let mut round_trips = Vec::new();
    for index in 0..changes {
        tokio::time::sleep(CHANGE_SPACING).await;
        let backend = format!("{NAMESPACE}_svc-{index}_80");
        let command = format!("show servers state {backend}");
        let asked = Instant::now();
        cli.worker_command(&command).await?;
        round_trips.push(asked.elapsed());
        // The first endpoint of the slice moves to an address no other endpoint has.
        let address = format!("127.250.{}.{}", index / 256, index % 256);
        server.put(endpoint_slice(index, Some(&address)));
        let written = Instant::now();
        wait_for_server(&cli, &backend, &address).await?;
        change_times.push(written.elapsed());
        // Put the slice back (for the next run), and let that settle before the next
        // change so that each change is measured on its own.
        server.put(endpoint_slice(index, None));
        wait_for_server(&cli, &backend, &endpoint_address(index, 0)).await?;
    }
    let reloads_during_changes = haproxy.show_proc().await.reloads - reloads_before;
    child.kill().await.ok();
    Ok(Figures {
        wall,
        cpu_seconds: usage.cpu_seconds,
        peak_rss_bytes: usage.peak_resident_bytes,
        changes: change_times,
        round_trips,
        reloads_during_changes,
    })
}
