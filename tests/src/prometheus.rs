//! A real Prometheus for the tests: Debian's `prometheus` binary (unpacked by
//! scripts/get-prometheus.sh, never run as a service) started as the test's own process
//! on 127.0.0.1, with a temporary storage folder, scraping the given targets every
//! second, and queried through its HTTP API.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tempfile::TempDir;
use tokio::process::{Child, Command};

/// The variable that names the prometheus binary (scripts/test.sh sets it).
pub const PROMETHEUS: &str = "TUGBOAT_PROMETHEUS";
/// The variable that lets the tests that need Prometheus be skipped when it is missing
/// (`1`), as [`crate::haproxy::SKIP_MISSING_HAPROXY`] does for haproxy.
pub const SKIP_MISSING_PROMETHEUS: &str = "TUGBOAT_SKIP_MISSING_PROMETHEUS";

/// The prometheus binary: `$TUGBOAT_PROMETHEUS`, else where scripts/get-prometheus.sh
/// puts it (`~/.cache/tugboat/prometheus/prometheus`).
pub fn binary_path() -> PathBuf {
    std::env::var_os(PROMETHEUS)
        .filter(|path| !path.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
            PathBuf::from(home).join(".cache/tugboat/prometheus/prometheus")
        })
}

/// The prometheus binary for a test. A test that checks nothing must not pass: a missing
/// binary fails the test, saying how to get it, unless [`SKIP_MISSING_PROMETHEUS`] is
/// `1`: then `None`, and a line on stderr says the test was skipped.
pub fn find() -> Option<PathBuf> {
    let path = binary_path();
    if path.is_file() {
        return Some(path);
    }
    let skip = std::env::var(SKIP_MISSING_PROMETHEUS).unwrap_or_default();
    assert!(
        skip == "1",
        "prometheus is not installed at {}: the dashboards are checked against a real \
         Prometheus. Run scripts/test.sh (the README's test command), or get it with \
         scripts/get-prometheus.sh and set {PROMETHEUS} to the path it prints; to run \
         without it knowingly, set {SKIP_MISSING_PROMETHEUS}=1",
        path.display()
    );
    eprintln!(
        "skipped: prometheus is not installed at {} ({SKIP_MISSING_PROMETHEUS}=1)",
        path.display()
    );
    None
}

/// A running Prometheus; killed when dropped.
pub struct Prometheus {
    pub addr: SocketAddr,
    dir: TempDir,
    _child: Child,
}

impl Prometheus {
    /// Starts `binary` scraping `targets` (each `/metrics`) every second as job `job`,
    /// and waits until it is ready.
    pub async fn start(binary: &std::path::Path, job: &str, targets: &[SocketAddr]) -> Self {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: {job}\n    scrape_interval: 1s\n    \
             scrape_timeout: 900ms\n    static_configs:\n      - targets: [{}]\n",
            targets.join(", ")
        );
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).expect("write prometheus.yml");
        let addr = SocketAddr::from(([127, 0, 0, 1], crate::free_port()));
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log file");
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|err| panic!("start {}: {err}", binary.display()));
        let prometheus = Self {
            addr,
            dir,
            _child: child,
        };
        crate::eventually("Prometheus ready", Duration::from_secs(20), || async {
            let reply = crate::get(addr, "127.0.0.1", "/-/ready").await.ok()?;
            (reply.status == 200).then_some(())
        })
        .await;
        prometheus
    }

    /// The result of the instant query `expr` (`data.result`), or why it failed.
    pub async fn query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let query: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("query", expr)
            .finish();
        let reply = crate::get(self.addr, "127.0.0.1", &format!("/api/v1/query?{query}"))
            .await
            .map_err(|err| err.to_string())?;
        let answer: Value = serde_json::from_str(&reply.body)
            .map_err(|err| format!("{}: {err}: {}", reply.status, reply.body))?;
        if answer["status"] != "success" {
            return Err(format!("{}: {answer}", reply.status));
        }
        answer["data"]["result"]
            .as_array()
            .cloned()
            .ok_or_else(|| format!("no result in {answer}"))
    }

    /// The log Prometheus wrote so far (for a failure's message).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }
}
