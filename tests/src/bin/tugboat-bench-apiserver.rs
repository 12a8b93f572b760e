//! `tugboat-bench-apiserver [--runs N] [--ingresses N] [--changes N] [--haproxy X.Y]
//! [--no-publish] [--unwritten-status]`: loads the fake API server with a large cluster (by default 10,000 Ingresses, 10,000
//! Services, 10,000 EndpointSlices of 5 endpoints, 1,000 TLS Secrets), starts the real
//! `tugboat` binary against it and a real haproxy (3.4 unless `--haproxy` names another
//! series), and prints the time to the first successful apply (wall clock and the
//! controller's CPU time) and the controller's peak RSS. Then, on the same cluster, it
//! makes `--changes` changes (20 by default) of each kind, one at a time: an endpoint
//! moves, a host's route moves to another Service, a TLS Secret gets another
//! certificate. It prints how long each kind took to reach haproxy (its servers, its
//! route map, its certificate), next to a bare runtime-API round trip measured in the
//! same run, the controller's CPU per change (idle CPU over the same time taken out),
//! and the reloads the changes caused.
//!
//! The controller publishes Ingress status (`--publish-address 127.0.0.1`). The
//! Ingresses start with that address in their status, as a restarted leader finds a
//! cluster it served, so each run should write none; a change of an Ingress' spec keeps
//! its status, as the API server does. With `--unwritten-status` they start without one,
//! and the status writes go on, at their pace, during the measures (the runs share the
//! cluster: a later run rewrites nothing already right). Each run prints how many writes
//! it made. `--no-publish` measures without publishing.
//! A benchmark, not a test.
//!
//! Build the controller first: `cargo build --release -p tugboat` (the binary is taken
//! from next to this one, or from `TUGBOAT_BIN`).
#![allow(
    clippy::disallowed_methods,
    reason = "test code: blocking file work is fine here"
)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;
use tugboat::metrics::ProcessUsage;
use tugboat_testkit::bench::{
    NAMESPACE, ObjectSource, controller_command, endpoint_address, endpoint_slice, median_ms,
    tugboat_binary, wait_until_ready,
};
use tugboat_testkit::{FakeApiServer, Haproxy, HaproxyBinary};
/// How long one run may take before it is called a failure.
const RUN_LIMIT: Duration = Duration::from_secs(300);

/// How long to wait for one endpoint change to reach haproxy.
const CHANGE_LIMIT: Duration = Duration::from_secs(30);
/// How long the controller's idle CPU is measured for: `/proc` counts it in 10 ms
/// ticks, and the idle rate is taken out of phases of about 15 s, so a longer spell
/// makes a steadier figure per change (10 ms over 10 s is 0.4 ms per change at most).
const IDLE_SPELL: Duration = Duration::from_secs(10);
/// The quiet spell before each change, so that each one is applied on its own.
const CHANGE_SPACING: Duration = Duration::from_millis(300);

struct Figures {
    wall: Duration,
    cpu_seconds: f64,
    peak_rss_bytes: u64,
    /// The resident memory mapped from files (the binary's code and data) at the first
    /// apply: part of the peak that the controller's state does not move.
    file_rss_bytes: u64,
    /// One entry per kind of change: endpoint, route, certificate.
    kinds: Vec<KindFigures>,
    /// A bare runtime-API round trip, measured between the changes.
    round_trips: Vec<Duration>,
    reloads_during_changes: u64,
}

/// The changes of one kind: each one from the API write to haproxy running it.
struct KindFigures {
    kind: &'static str,
    latencies: Vec<Duration>,
    /// The controller's CPU per change, with what it burns idle over the same time
    /// taken out (its status ticks and health checks).
    cpu_per_change: Duration,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let mut runs = 3usize;
    let mut ingresses = 10_000usize;
    let mut changes = 20usize;
    let mut series = "3.4".to_string();
    let mut publish = true;
    let mut unwritten_status = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--no-publish" => {
                publish = false;
                continue;
            }
            "--publish" => {
                publish = true;
                continue;
            }
            "--unwritten-status" => {
                unwritten_status = true;
                continue;
            }
            _ => {}
        }
        let value = args.next().context(
            "every option but --publish, --no-publish and --unwritten-status takes a value",
        )?;
        match arg.as_str() {
            "--runs" => runs = value.parse().context("--runs N")?,
            "--ingresses" => ingresses = value.parse().context("--ingresses N")?,
            "--changes" => changes = value.parse().context("--changes N")?,
            "--haproxy" => series = value,
            other => {
                bail!(
                    "unknown option {other}; usage: [--runs N] [--ingresses N] [--changes N] \
                     [--haproxy X.Y] [--no-publish] [--unwritten-status]"
                )
            }
        }
    }
    let tugboat = tugboat_binary()?;
    let haproxy = HaproxyBinary::installed(&series).with_context(|| {
        format!("haproxy {series} not installed (scripts/get-haproxy.sh, or TUGBOAT_HAPROXY_DIR)")
    })?;
    let server = FakeApiServer::start().await;
    let started = Instant::now();
    let status = (publish && !unwritten_status).then(published_status);
    load(&server, ingresses, status.as_ref());
    println!(
        "loaded {ingresses} Ingresses, {ingresses} Services, {ingresses} EndpointSlices x 5 \
         endpoints, {} TLS Secrets in {:.1} s",
        ingresses / 10,
        started.elapsed().as_secs_f64()
    );
    println!(
        "status publishing {}",
        if publish {
            if unwritten_status {
                "on (--publish-address 127.0.0.1), Ingresses without status at the start"
            } else {
                "on (--publish-address 127.0.0.1), Ingresses holding that address at the start"
            }
        } else {
            "off (--no-publish)"
        }
    );
    let mut figures = Vec::new();
    for run in 1..=runs {
        let status_writes_before = status_writes(&server);
        let result = run_once(
            &tugboat,
            &haproxy,
            &server,
            ingresses,
            changes.min(ingresses / 10).max(1),
            publish,
        )
        .await?;
        println!(
            "run {run}: first apply after {:.2} s wall, {:.2} s controller CPU, peak RSS {:.1} MB \
             ({:.1} MB of it mapped from files: code and libraries)",
            result.wall.as_secs_f64(),
            result.cpu_seconds,
            result.peak_rss_bytes as f64 / 1e6,
            result.file_rss_bytes as f64 / 1e6
        );
        let round_trip = median_ms(&result.round_trips);
        for kind in &result.kinds {
            println!(
                "run {run}: {} {} changes reached haproxy in {:.1} ms median ({:.1}x the \
                 runtime-API round trip of {round_trip:.2} ms), {:.2} ms controller CPU each",
                kind.latencies.len(),
                kind.kind,
                median_ms(&kind.latencies),
                median_ms(&kind.latencies) / round_trip,
                kind.cpu_per_change.as_secs_f64() * 1e3,
            );
        }
        println!(
            "run {run}: {} reloads during the changes",
            result.reloads_during_changes
        );
        if publish {
            let with_status = server
                .list("Ingress")
                .iter()
                .filter(|i| !i["status"]["loadBalancer"]["ingress"].is_null())
                .count();
            println!(
                "run {run}: {} Ingress status writes; {with_status} of {ingresses} Ingresses \
                 hold a status",
                status_writes(&server) - status_writes_before
            );
        }
        figures.push(result);
    }
    let median = |mut values: Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let all_round_trips: Vec<Duration> =
        figures.iter().flat_map(|f| f.round_trips.clone()).collect();
    let round_trip = median_ms(&all_round_trips);
    for kind in ["endpoint", "route", "certificate"] {
        let of_kind = || {
            figures
                .iter()
                .flat_map(|f| f.kinds.iter().filter(move |k| k.kind == kind))
        };
        let latencies: Vec<Duration> = of_kind().flat_map(|k| k.latencies.clone()).collect();
        let cpu = median(
            of_kind()
                .map(|k| k.cpu_per_change.as_secs_f64() * 1e3)
                .collect(),
        );
        println!(
            "all runs, {ingresses} Ingresses: {kind} change to haproxy {:.1} ms median over {} \
             changes, {:.1}x the runtime-API round trip ({round_trip:.2} ms median); \
             controller CPU {cpu:.2} ms per change (median of runs)",
            median_ms(&latencies),
            latencies.len(),
            median_ms(&latencies) / round_trip,
        );
    }
    println!(
        "all runs: {} reloads during the changes",
        figures
            .iter()
            .map(|f| f.reloads_during_changes)
            .sum::<u64>()
    );
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

/// Polls haproxy with `command` until its answer contains `expected`.
async fn wait_for(
    cli: &tugboat_haproxy::MasterCli,
    command: &str,
    expected: &str,
) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        if cli.worker_command(command).await?.contains(expected) {
            return Ok(());
        }
        if started.elapsed() > CHANGE_LIMIT {
            bail!("'{command}' did not show '{expected}' within {CHANGE_LIMIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// A certificate and key (PEM) for [`ROTATED_SUBJECT`], valid now.
fn rotated_certificate() -> anyhow::Result<(String, String)> {
    let mut params = rcgen::CertificateParams::new(vec![ROTATED_SUBJECT.to_string()])?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, ROTATED_SUBJECT);
    let key = rcgen::KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// The Ingress status writes the API server took so far.
fn status_writes(server: &FakeApiServer) -> usize {
    server
        .writes()
        .iter()
        .filter(|w| w.path.contains("/ingresses/") && w.path.ends_with("/status"))
        .count()
}

/// Fills the API server.
/// A real RSA-2048 certificate and key, of the size most clusters carry: every Secret
/// passes the controller's checks and becomes a certificate file for haproxy.
const CERTIFICATE: &str = include_str!("../../../crates/tugboat-model/src/testdata/rsa.crt");
const KEY: &str = include_str!("../../../crates/tugboat-model/src/testdata/rsa-pkcs1.key");
/// The subject of the certificate TLS Secrets are rotated to.
const ROTATED_SUBJECT: &str = "rotated.bench.example";

/// TLS Secret `tls-{index}` holding `cert` and `key` (PEM).
fn tls_secret(index: usize, cert: &str, key: &str) -> serde_json::Value {
    let base64 = |text: &str| json!(k8s_openapi::ByteString(text.as_bytes().to_vec()));
    json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": format!("tls-{index}"), "namespace": NAMESPACE},
        "data": {"tls.crt": base64(cert), "tls.key": base64(key)}
    })
}

/// Ingress `ing-{index}`: `host-{index}.example.com/` to Service `svc-{service}`, with
/// TLS Secret `tls-{index}` for every tenth.
fn ingress(index: usize, service: usize) -> serde_json::Value {
    let tls = if index.is_multiple_of(10) {
        json!([{"hosts": [format!("host-{index}.example.com")], "secretName": format!("tls-{index}")}])
    } else {
        json!(null)
    };
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": format!("ing-{index}"), "namespace": NAMESPACE,
                     "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
        "spec": {
            "ingressClassName": "tugboat",
            "tls": tls,
            "rules": [{"host": format!("host-{index}.example.com"), "http": {"paths": [
                {"path": "/", "pathType": "Prefix",
                 "backend": {"service": {"name": format!("svc-{service}"), "port": {"number": 80}}}}
            ]}}]
        }
    })
}

/// The status of an Ingress that holds the published address.
fn published_status() -> serde_json::Value {
    json!({"loadBalancer": {"ingress": [{"ip": "127.0.0.1"}]}})
}

/// Puts `ingress` in place of the stored one, keeping the stored status: the API server
/// keeps an Ingress' status when its spec is written.
fn update_ingress(server: &FakeApiServer, mut ingress: serde_json::Value) {
    let name = ingress["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if let Some(stored) = server.get("Ingress", NAMESPACE, &name) {
        ingress["status"] = stored["status"].clone();
    }
    server.put(ingress);
}

/// Fills the API server; the Ingresses hold `status` when given.
fn load(server: &FakeApiServer, count: usize, status: Option<&serde_json::Value>) {
    server.put(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
        "metadata": {"name": "tugboat"}, "spec": {"controller": "tugboat.dev/ingress"}
    }));
    for i in 0..count {
        let name = format!("svc-{i}");
        server.put(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": name}},
            "spec": {"clusterIP": format!("10.96.{}.{}", i / 250, i % 250 + 1),
                     "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]}
        }));
        server.put(endpoint_slice(i, None));
        if i.is_multiple_of(10) {
            server.put(tls_secret(i, CERTIFICATE, KEY));
        }
        let mut ingress = ingress(i, i);
        if let Some(status) = status {
            ingress["status"] = status.clone();
        }
        server.put(ingress);
    }
}

async fn run_once(
    tugboat: &std::path::Path,
    haproxy_binary: &HaproxyBinary,
    server: &FakeApiServer,
    ingresses: usize,
    changes: usize,
    publish: bool,
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
    let mut child = controller_command(
        tugboat,
        &haproxy,
        ObjectSource::Kubeconfig(&kubeconfig),
        admin_port,
    )
    .args(if publish {
        &["--publish-address", "127.0.0.1"][..]
    } else {
        &[]
    })
    .env("RUST_LOG", if log.is_some() { "info" } else { "warn" })
    .stdout(log.map_or_else(Stdio::null, Stdio::from))
    .spawn()
    .with_context(|| format!("cannot start {}", tugboat.display()))?;
    let pid = child.id().context("controller exited at once")?.to_string();
    let admin = std::net::SocketAddr::from(([127, 0, 0, 1], admin_port));
    wait_until_ready(&mut child, admin, RUN_LIMIT).await?;
    let wall = started.elapsed();
    let usage = ProcessUsage::read_pid(&pid).context("cannot read the controller's /proc")?;
    let cli = haproxy.cli();
    let cpu = || -> anyhow::Result<f64> {
        Ok(ProcessUsage::read_pid(&pid)
            .context("cannot read the controller's /proc")?
            .cpu_seconds)
    };
    // What the controller burns idle (status ticks, health checks), per second.
    let idle_started = (Instant::now(), cpu()?);
    tokio::time::sleep(IDLE_SPELL).await;
    let idle_rate = (cpu()? - idle_started.1) / idle_started.0.elapsed().as_secs_f64();
    let reloads_before = haproxy.show_proc().await.reloads;
    let rotated = rotated_certificate()?;
    let mut round_trips = Vec::new();
    let mut kinds = Vec::new();
    let settings = haproxy.render_settings();
    let prefix_map = settings.prefix_map();
    for kind in ["endpoint", "route", "certificate"] {
        let phase = (Instant::now(), cpu()?);
        let mut latencies = Vec::new();
        for index in 0..changes {
            tokio::time::sleep(CHANGE_SPACING).await;
            let asked = Instant::now();
            cli.worker_command("show info").await?;
            round_trips.push(asked.elapsed());
            // Each change is made, measured, then undone (for the next run) and let to
            // settle, so that each one is applied on its own.
            match kind {
                "endpoint" => {
                    // The first endpoint of the slice moves to an address no other has.
                    let backend = format!("{NAMESPACE}_svc-{index}_80");
                    let address = format!("127.250.{}.{}", index / 256, index % 256);
                    server.put(endpoint_slice(index, Some(&address)));
                    let written = Instant::now();
                    wait_for(
                        &cli,
                        &format!("show servers state {backend}"),
                        &format!(" {address} "),
                    )
                    .await?;
                    latencies.push(written.elapsed());
                    server.put(endpoint_slice(index, None));
                    wait_for(
                        &cli,
                        &format!("show servers state {backend}"),
                        &format!(" {} ", endpoint_address(index, 0)),
                    )
                    .await?;
                }
                "route" => {
                    // The host's route moves to the next Service.
                    let other = (index + 1) % ingresses;
                    let lookup =
                        format!("get map {} host-{index}.example.com/", prefix_map.display());
                    update_ingress(server, ingress(index, other));
                    let written = Instant::now();
                    wait_for(
                        &cli,
                        &lookup,
                        &format!("value=\"{NAMESPACE}_svc-{other}_80"),
                    )
                    .await?;
                    latencies.push(written.elapsed());
                    update_ingress(server, ingress(index, index));
                    wait_for(
                        &cli,
                        &lookup,
                        &format!("value=\"{NAMESPACE}_svc-{index}_80"),
                    )
                    .await?;
                }
                _ => {
                    // A TLS Secret gets another certificate (every tenth Ingress has one).
                    let secret = index * 10 % ingresses;
                    let path = settings.certificate(&format!("{NAMESPACE}_tls-{secret}"));
                    let show = format!("show ssl cert {}", path.display());
                    let original = cli.worker_command(&show).await?;
                    let original = original
                        .lines()
                        .find(|line| line.starts_with("Serial:"))
                        .with_context(|| format!("no serial in '{show}': {original}"))?
                        .to_string();
                    server.put(tls_secret(secret, &rotated.0, &rotated.1));
                    let written = Instant::now();
                    wait_for(&cli, &show, ROTATED_SUBJECT).await?;
                    latencies.push(written.elapsed());
                    server.put(tls_secret(secret, CERTIFICATE, KEY));
                    wait_for(&cli, &show, &original).await?;
                }
            }
        }
        let (wall, used) = (phase.0.elapsed().as_secs_f64(), cpu()? - phase.1);
        let per_change = ((used - idle_rate * wall) / (2 * changes).max(1) as f64).max(0.0);
        kinds.push(KindFigures {
            kind,
            latencies,
            cpu_per_change: Duration::from_secs_f64(per_change),
        });
    }
    let reloads_during_changes = haproxy.show_proc().await.reloads - reloads_before;
    child.kill().await.ok();
    Ok(Figures {
        wall,
        cpu_seconds: usage.cpu_seconds,
        peak_rss_bytes: usage.peak_resident_bytes,
        file_rss_bytes: usage.file_resident_bytes,
        kinds,
        round_trips,
        reloads_during_changes,
    })
}
