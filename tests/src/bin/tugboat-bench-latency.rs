//! `tugboat-bench-latency [--source api|folder|both] [--ingresses N] [--changes N]
//! [--burst N] [--haproxy X.Y]`: what one change costs on its way to haproxy, through
//! each source, on a small cluster (100 Ingresses, Services and EndpointSlices of 5
//! endpoints by default).
//!
//! The release `tugboat` binary runs as a subprocess against the fake API server
//! (`--kubeconfig`) or a folder of manifests (`--manifests`, one YAML file per object),
//! with a real haproxy (3.4 unless `--haproxy` names another series). After a quiet
//! spell, one endpoint of one EndpointSlice moves, `--changes` times (30 by default),
//! each undone before the next. Each is measured twice:
//! - the controller's and haproxy's share: the `since_change_ms` of the controller's
//!   `applied` log line, from the moment its source saw the change (the watch event, the
//!   folder's notification) to haproxy's answer; the API server's or the file system's
//!   delivery of the change is not in it;
//! - end to end: from the write (the API request, the file written) to haproxy's
//!   `show servers state` showing the new address, polled every millisecond.
//!
//! Both are printed as medians next to a bare runtime-API round trip (`@1 show info`
//! through the master socket) measured between the changes of the same run. Then a
//! burst: `--burst` EndpointSlices (50 by default) change back to back, and the run
//! prints how long until haproxy had them all, and how many applies carried them
//! (a burst is gathered, not applied change by change). A controller that does not log
//! `since_change_ms` gets the end-to-end figures only. A benchmark, not a test.
//!
//! Build first: `cargo build --release -p tugboat -p tugboat-testkit --bins` (the
//! controller is taken from next to this program, or from `TUGBOAT_BIN`).
#![allow(
    clippy::disallowed_methods,
    reason = "benchmark code: blocking file work is fine here"
)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use tugboat_haproxy::MasterCli;
use tugboat_testkit::bench::{
    NAMESPACE, ObjectSource, controller_command, endpoint_address, endpoint_slice, median_ms,
    tugboat_binary, wait_until_ready,
};
use tugboat_testkit::{FakeApiServer, Haproxy, HaproxyBinary};
/// How long the first apply, or one change, may take before the run fails.
const LIMIT: Duration = Duration::from_secs(60);
/// The quiet spell before each lone change.
const SPACING: Duration = Duration::from_millis(300);

/// Where the objects live for one run.
enum Cluster {
    Api(FakeApiServer),
    Folder(PathBuf),
}

impl Cluster {
    fn put(&self, object: &Value) -> anyhow::Result<()> {
        match self {
            Cluster::Api(server) => {
                server.put(object.clone());
                Ok(())
            }
            Cluster::Folder(dir) => {
                let name = format!(
                    "{}-{}.yaml",
                    object["kind"].as_str().unwrap_or("object"),
                    object["metadata"]["name"].as_str().unwrap_or("unnamed")
                );
                let text = serde_yaml_ng::to_string(object).context("cannot write YAML")?;
                std::fs::write(dir.join(name), text).context("cannot write a manifest")
            }
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Cluster::Api(_) => "API source",
            Cluster::Folder(_) => "manifests folder",
        }
    }
}

struct Options {
    sources: Vec<&'static str>,
    ingresses: usize,
    changes: usize,
    burst: usize,
    series: String,
}

fn options() -> anyhow::Result<Options> {
    let mut options = Options {
        sources: vec!["api", "folder"],
        ingresses: 100,
        changes: 30,
        burst: 50,
        series: "3.4".into(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args
            .next()
            .with_context(|| format!("{arg} takes a value"))?;
        match arg.as_str() {
            "--source" => {
                options.sources = match value.as_str() {
                    "api" => vec!["api"],
                    "folder" => vec!["folder"],
                    "both" => vec!["api", "folder"],
                    other => bail!("--source api|folder|both, not {other}"),
                }
            }
            "--ingresses" => options.ingresses = value.parse().context("--ingresses N")?,
            "--changes" => options.changes = value.parse().context("--changes N")?,
            "--burst" => options.burst = value.parse().context("--burst N")?,
            "--haproxy" => options.series = value,
            other => bail!(
                "unknown option {other}; usage: [--source api|folder|both] [--ingresses N] \
                 [--changes N] [--burst N] [--haproxy X.Y]"
            ),
        }
    }
    if options.burst > options.ingresses {
        bail!("--burst cannot exceed --ingresses");
    }
    Ok(options)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let options = options()?;
    let tugboat = tugboat_binary()?;
    let haproxy = HaproxyBinary::installed(&options.series).with_context(|| {
        format!(
            "haproxy {} not installed (scripts/get-haproxy.sh, or TUGBOAT_HAPROXY_DIR)",
            options.series
        )
    })?;
    println!(
        "{} Ingresses, Services and EndpointSlices x 5 endpoints; haproxy {}; controller {}",
        options.ingresses,
        options.series,
        tugboat.display()
    );
    for source in &options.sources {
        let folder = tempfile::tempdir().context("temporary folder")?;
        let cluster = match *source {
            "api" => Cluster::Api(FakeApiServer::start().await),
            _ => Cluster::Folder(folder.path().to_path_buf()),
        };
        run(&tugboat, &haproxy, &cluster, &options).await?;
    }
    Ok(())
}

async fn run(
    tugboat: &Path,
    binary: &HaproxyBinary,
    cluster: &Cluster,
    options: &Options,
) -> anyhow::Result<()> {
    load(cluster, options.ingresses)?;
    let haproxy = Haproxy::start(binary).await;
    let dir = tempfile::tempdir().context("temporary folder")?;
    // `TUGBOAT_BENCH_LOG=FILE` keeps the controller's log there (`RUST_LOG` passes on).
    let log_path = std::env::var_os("TUGBOAT_BENCH_LOG")
        .map_or_else(|| dir.path().join("controller.log"), PathBuf::from);
    let log = std::fs::File::create(&log_path).context("cannot create the log")?;
    let admin_port = tugboat_testkit::free_port();
    let kubeconfig = dir.path().join("kubeconfig");
    let source = match cluster {
        Cluster::Api(server) => {
            server.write_kubeconfig(&kubeconfig);
            ObjectSource::Kubeconfig(&kubeconfig)
        }
        Cluster::Folder(folder) => ObjectSource::Manifests(folder),
    };
    let mut command = controller_command(tugboat, &haproxy, source, admin_port);
    command
        .args(["--log-format", "json"])
        .env(
            "RUST_LOG",
            std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
        )
        .stdout(Stdio::from(log));
    let mut child = command
        .spawn()
        .with_context(|| format!("cannot start {}", tugboat.display()))?;
    let admin = std::net::SocketAddr::from(([127, 0, 0, 1], admin_port));
    wait_until_ready(&mut child, admin, LIMIT).await?;
    let cli = haproxy.cli();
    let mut log = AppliedLog::new(log_path);
    let mut round_trips = Vec::new();
    let mut shares = Vec::new();
    let mut end_to_end = Vec::new();
    let reloads_before = haproxy.show_proc().await.reloads;
    for index in 0..options.changes {
        let index = index % options.ingresses;
        tokio::time::sleep(SPACING).await;
        let asked = Instant::now();
        cli.worker_command("show info").await?;
        round_trips.push(asked.elapsed());
        log.skip_to_end()?;
        let address = format!("127.250.{}.{}", index / 256, index % 256);
        let written = Instant::now();
        cluster.put(&endpoint_slice(index, Some(&address)))?;
        wait_for_address(&cli, index, &address).await?;
        end_to_end.push(written.elapsed());
        if let Some(line) = log.first_applied().await? {
            shares.push(line);
        }
        tokio::time::sleep(SPACING).await;
        cluster.put(&endpoint_slice(index, None))?;
        wait_for_address(&cli, index, &endpoint_address(index, 0)).await?;
    }
    tokio::time::sleep(SPACING).await;
    log.skip_to_end()?;
    let written = Instant::now();
    for index in 0..options.burst {
        let address = format!("127.251.{}.{}", index / 256, index % 256);
        cluster.put(&endpoint_slice(index, Some(&address)))?;
    }
    for index in 0..options.burst {
        let address = format!("127.251.{}.{}", index / 256, index % 256);
        wait_for_address(&cli, index, &address).await?;
    }
    let burst_done = written.elapsed();
    // Applies still under way when the last change arrived end with it.
    tokio::time::sleep(SPACING).await;
    let burst_applies = log.applied_count()?;
    let reloads = haproxy.show_proc().await.reloads - reloads_before;
    child.kill().await.ok();

    let round_trip = median_ms(&round_trips);
    println!("\n== {} ==", cluster.name());
    println!(
        "runtime-API round trip: {round_trip:.2} ms median of {}",
        round_trips.len()
    );
    let share: Vec<Duration> = shares
        .iter()
        .filter_map(|line| field(line, "since_change_ms"))
        .collect();
    if share.is_empty() {
        println!("controller and haproxy's share: not logged by this controller");
    } else {
        println!(
            "lone endpoint change, controller and haproxy's share: {:.2} ms median of {} \
             ({:.1}x the round trip)",
            median_ms(&share),
            share.len(),
            median_ms(&share) / round_trip
        );
        // The rest of the share is the source's: reading the change, building the snapshot.
        let parts: Vec<String> = [
            "build_ms",
            "render_ms",
            "write_ms",
            "runtime_ms",
            "total_ms",
        ]
        .iter()
        .map(|name| {
            let values: Vec<Duration> =
                shares.iter().filter_map(|line| field(line, name)).collect();
            format!("{name} {:.2}", median_ms(&values))
        })
        .collect();
        let counts: Vec<String> = ["files_written", "runtime_commands"]
            .iter()
            .map(|name| {
                let mut values: Vec<f64> = shares
                    .iter()
                    .filter_map(|line| line[name].as_f64())
                    .collect();
                values.sort_by(f64::total_cmp);
                format!(
                    "{name} {}",
                    values.get(values.len() / 2).copied().unwrap_or(0.0)
                )
            })
            .collect();
        println!(
            "  of which, in the controller's update (medians): {}; {}",
            parts.join(", "),
            counts.join(", ")
        );
    }
    println!(
        "lone endpoint change, end to end (write to haproxy, polled each ms): {:.2} ms median \
         of {} ({:.1}x the round trip)",
        median_ms(&end_to_end),
        end_to_end.len(),
        median_ms(&end_to_end) / round_trip
    );
    println!(
        "burst of {} endpoint changes: all in haproxy after {:.1} ms, carried by {} applies",
        options.burst,
        burst_done.as_secs_f64() * 1e3,
        burst_applies
    );
    println!("reloads during the changes: {reloads}");
    Ok(())
}

/// The controller's log, read from where the last look stopped.
struct AppliedLog {
    path: PathBuf,
    offset: usize,
}

impl AppliedLog {
    fn new(path: PathBuf) -> Self {
        Self { path, offset: 0 }
    }

    fn new_lines(&mut self) -> anyhow::Result<Vec<Value>> {
        let text = std::fs::read_to_string(&self.path).context("cannot read the log")?;
        let fresh = &text[self.offset.min(text.len())..];
        // Only whole lines: the last may still be written.
        let complete = fresh.rfind('\n').map_or(0, |end| end + 1);
        self.offset += complete;
        Ok(fresh[..complete]
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|line| line["message"] == "applied")
            .collect())
    }

    fn skip_to_end(&mut self) -> anyhow::Result<()> {
        self.new_lines().map(drop)
    }

    /// The first `applied` line since the last look (waiting for it up to a second).
    async fn first_applied(&mut self) -> anyhow::Result<Option<Value>> {
        let deadline = Instant::now() + Duration::from_secs(1);
        loop {
            if let Some(line) = self.new_lines()?.into_iter().next() {
                return Ok(Some(line));
            }
            if Instant::now() > deadline {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn applied_count(&mut self) -> anyhow::Result<usize> {
        Ok(self.new_lines()?.len())
    }
}

async fn wait_for_address(cli: &MasterCli, index: usize, address: &str) -> anyhow::Result<()> {
    let command = format!("show servers state {NAMESPACE}_svc-{index}_80");
    let expected = format!(" {address} ");
    let started = Instant::now();
    loop {
        if cli.worker_command(&command).await?.contains(&expected) {
            return Ok(());
        }
        if started.elapsed() > LIMIT {
            bail!("'{command}' did not show '{address}' within {LIMIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The class, and per index a Service, its EndpointSlice and an Ingress routing
/// `host-{index}.example.com` to it.
fn load(cluster: &Cluster, count: usize) -> anyhow::Result<()> {
    cluster.put(&json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
        "metadata": {"name": "tugboat"}, "spec": {"controller": "tugboat.dev/ingress"}
    }))?;
    for index in 0..count {
        let name = format!("svc-{index}");
        cluster.put(&json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]}
        }))?;
        cluster.put(&endpoint_slice(index, None))?;
        cluster.put(&json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": format!("ing-{index}"), "namespace": NAMESPACE},
            "spec": {
                "ingressClassName": "tugboat",
                "rules": [{"host": format!("host-{index}.example.com"), "http": {"paths": [
                    {"path": "/", "pathType": "Prefix",
                     "backend": {"service": {"name": name, "port": {"number": 80}}}}
                ]}}]
            }
        }))?;
    }
    Ok(())
}

/// A duration field (in milliseconds) of a log line.
fn field(line: &Value, name: &str) -> Option<Duration> {
    line[name]
        .as_f64()
        .map(|ms| Duration::from_secs_f64(ms / 1e3))
}
