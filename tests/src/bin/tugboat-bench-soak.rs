//! `tugboat-bench-soak [--duration 30m] [--haproxy 3.4] [--seed N] [--fault-gap 30s]`:
//! the soak benchmark with faults, against real haproxy and the real controller binary.
//!
//! The controller (the `tugboat` binary, a process of its own so that it can be killed)
//! reads the fake API server, as the chart's pod does, and drives a real haproxy. Client
//! tasks keep a steady, bounded HTTP keep-alive load on 20 hosts while the objects churn:
//! endpoints, routes, certificates (Secrets), structure (new Services and Ingresses, an
//! annotation that needs a reload) and malformed objects. Between spells of churn a
//! schedule of faults runs, one at a time, in a fixed order:
//! - haproxy's worker killed (SIGKILL): the master exits with it, and haproxy is started
//!   again on the same files and socket paths, as a container restart does;
//! - haproxy's master killed (SIGKILL) and started again the same way;
//! - the controller killed (SIGKILL) while it applies a change, and started again;
//! - the API server unreachable for 30 s (the objects change meanwhile), then every watch
//!   expired (`410 Gone`) when it returns;
//! - the config volume full during an apply: the config folder is a size-limited tmpfs
//!   (in a private mount namespace: the program re-runs itself under `unshare --mount`
//!   when it is root), filled before a change that needs a reload, then emptied;
//! - a burst of 1,000 object changes in one second;
//! - a batch of malformed objects (bad annotation values, bad PEM, a missing port).
//!
//! Around each fault, with the churn paused: the state converges (every host answers as
//! the objects say, checked by requests), the files are snapshotted, the fault runs, the
//! files on disk are checked loadable (`haproxy -c`) while the fault holds, and after
//! convergence every file must be either as before the fault or as after it (a partial
//! file fails). At the end the controller is killed and started again with nothing
//! changed: it must adopt haproxy without a reload.
//!
//! It prints requests sent and failed outside the windows where a fault must cost
//! something (only haproxy's kills: from the kill to convergence), failures inside the
//! windows of each kind, the time to converge after each kind, reloads seen against the
//! structural changes made, and the RSS of the controller and of haproxy sampled over
//! time. It exits with an error on a failed request outside the windows, a file state
//! that does not load or is partial, an adoption reload, or a fault it did not recover
//! from. Every loop is bounded in count and time; everything listens on loopback.
//!
//! Build the controller first (`cargo build -p tugboat`; taken from next to this program
//! or from `TUGBOAT_BIN`).
#![allow(
    clippy::disallowed_methods,
    reason = "benchmark code: blocking file work is fine here"
)]

use std::collections::{BTreeMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tugboat::metrics::ProcessUsage;
use tugboat_haproxy::MasterCli;
use tugboat_testkit::bench::{ObjectSource, controller_command, tugboat_binary, wait_until_ready};
use tugboat_testkit::cluster_pod::TUGBOAT_CLASS;
use tugboat_testkit::http::{read_answer, request_with_body};
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{
    mk_endpoint_slice, mk_ingress, mk_service, mk_tls_secret, to_json, with_keys, with_tls,
};
use tugboat_testkit::tls::{certificate, exchange};
use tugboat_testkit::{EchoServer, FakeApiServer, Haproxy, HaproxyBinary};

/// Hosts under steady load, one Service of 4 echo backends each.
const HOSTS: usize = 20;
/// Hosts served over TLS whose certificates rotate.
const TLS_HOSTS: usize = 4;
/// Hosts whose route moves between Services, or goes.
const ROUTE_HOSTS: usize = 4;
/// New Services and Ingresses kept at once (the oldest goes when one more comes).
const NEW_KEPT: usize = 3;
const LOAD_CLIENTS: usize = 8;
/// The whole load, in requests per second, and its bound in count.
const LOAD_RATE: u64 = 160;
const MAX_REQUESTS: u64 = 20_000_000;
/// Failures kept with their times (more are counted only).
const MAX_FAILURES_KEPT: usize = 100_000;
const CHURN_EVERY: Duration = Duration::from_millis(500);
/// Structural changes are at least this far apart, so that each makes its own reload.
const STRUCTURAL_SPACING: Duration = Duration::from_secs(3);
const API_OUTAGE: Duration = Duration::from_secs(30);
const BURST_CHANGES: usize = 1_000;
const CONVERGE_LIMIT: Duration = Duration::from_secs(60);
const READY_LIMIT: Duration = Duration::from_secs(60);
/// The size of the config volume (a tmpfs): a few times what the files take.
const VOLUME_SIZE: &str = "8m";
/// The variable that tells the program it runs in its private mount namespace.
const IN_NAMESPACE: &str = "TUGBOAT_SOAK_IN_MOUNT_NAMESPACE";
/// Samples of RSS taken once the controller has run this long (its start-up is not
/// the steady state).
const RSS_SETTLE: Duration = Duration::from_secs(30);

#[derive(Parser)]
#[command(about = "The soak benchmark with faults, against real haproxy")]
struct Args {
    /// How long the run lasts (e.g. 3m, 30m, 90s).
    #[arg(long, default_value = "30m", value_parser = parse_duration)]
    duration: Duration,
    /// The haproxy series.
    #[arg(long, default_value = "3.4")]
    haproxy: String,
    /// The seed of the churn's and the faults' choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The steady churn between two faults.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    fault_gap: Duration,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = text
        .find(|c: char| !c.is_ascii_digit())
        .map_or((text, "s"), |at| text.split_at(at));
    let number: u64 = number
        .parse()
        .map_err(|_| format!("not a duration: {text}"))?;
    match unit {
        "s" => Ok(Duration::from_secs(number)),
        "m" => Ok(Duration::from_secs(number * 60)),
        "h" => Ok(Duration::from_secs(number * 3600)),
        _ => Err(format!("not a duration (s, m or h): {text}")),
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let volume_fault = enter_private_mount_namespace()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let passed = runtime.block_on(run(args, volume_fault))?;
    if !passed {
        std::process::exit(1);
    }
    Ok(())
}

/// Runs this program again in a private mount namespace (`unshare --mount`), where it
/// may mount the size-limited config volume, when it is root and not there yet (the
/// call then does not return). Whether the full-volume fault can run.
fn enter_private_mount_namespace() -> anyhow::Result<bool> {
    if std::env::var_os(IN_NAMESPACE).is_some() {
        return Ok(true);
    }
    if !rustix::process::geteuid().is_root() {
        println!("not root: the full-volume fault is skipped (it mounts a tmpfs)");
        return Ok(false);
    }
    use std::os::unix::process::CommandExt;
    let err = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "--"])
        .arg(std::env::current_exe().context("cannot find this program")?)
        .args(std::env::args_os().skip(1))
        .env(IN_NAMESPACE, "1")
        .exec();
    Err(err).context("cannot run unshare --mount (util-linux)")
}

/// A small deterministic generator (xorshift64*), so that a seed replays a run's choices.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// The kinds of fault, in the order the schedule runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    WorkerKilled,
    MasterKilled,
    ControllerKilled,
    ApiOutage,
    VolumeFull,
    Burst,
    Malformed,
}

impl Fault {
    const ALL: [Fault; 7] = [
        Fault::WorkerKilled,
        Fault::MasterKilled,
        Fault::ControllerKilled,
        Fault::ApiOutage,
        Fault::VolumeFull,
        Fault::Burst,
        Fault::Malformed,
    ];

    fn name(self) -> &'static str {
        match self {
            Fault::WorkerKilled => "haproxy worker killed",
            Fault::MasterKilled => "haproxy master killed",
            Fault::ControllerKilled => "controller killed mid-apply",
            Fault::ApiOutage => "API unreachable 30 s + 410",
            Fault::VolumeFull => "config volume full",
            Fault::Burst => "burst of 1,000 changes",
            Fault::Malformed => "malformed objects",
        }
    }

    /// Whether requests may fail while it lasts: only when haproxy itself is gone.
    fn costs_requests(self) -> bool {
        matches!(self, Fault::WorkerKilled | Fault::MasterKilled)
    }
}

/// What the clients of one request expect of one host.
#[derive(Clone)]
enum Expect {
    /// An echo backend of `service` answers with 200, from one of `endpoints`.
    Served {
        host: String,
        service: String,
        endpoints: Vec<String>,
    },
    /// haproxy answers 404 (no route).
    NotFound { host: String },
    /// The TLS handshake for `host` shows the certificate `der`.
    Certificate { host: String, der: Vec<u8> },
    /// A body of [`LIMIT_PROBE`] bytes to `host` passes (a limit above 2 MiB) or gets
    /// 413 (a limit above 1 MiB): the annotation that needs a reload took effect.
    BodyLimit { host: String, large: bool },
}

/// A body between the two limits `h0`'s annotation switches between.
const LIMIT_PROBE: usize = 1_536 * 1024;

/// The objects of the cluster as the run last wrote them, and what haproxy must serve.
struct World {
    server: FakeApiServer,
    /// The addresses of the 4 echo backends of each steady Service `svc-{i}`.
    backends: Vec<Vec<SocketAddr>>,
    /// Which of them the Service's EndpointSlice holds now.
    endpoints: Vec<Vec<usize>>,
    /// The Service each route host goes to, or none (its Ingress deleted).
    routes: Vec<Option<usize>>,
    /// The certificate (DER) of each TLS host's Secret.
    certificates: Vec<Vec<u8>>,
    /// The new Services and Ingresses kept (their number, the steady Service they
    /// borrow backends from), oldest first, and the hosts of those gone.
    news: VecDeque<(u64, usize)>,
    gone: VecDeque<u64>,
    next_new: u64,
    body_size_large: bool,
    /// How many times `h0`'s body limit changed: each change is a new value (a new
    /// feature set, so a reload, even when a running haproxy still has an earlier one).
    body_size_changes: u64,
    rng: Rng,
    structural_changes: u64,
    changes: u64,
    malformed: u64,
    last_structural: Instant,
}

fn steady_host(i: usize) -> String {
    format!("h{i}.soak.test")
}

fn service(i: usize) -> String {
    format!("svc-{i}")
}

impl World {
    fn put(&mut self, object: Value) {
        self.server.put(object);
        self.changes += 1;
    }

    fn put_service(&mut self, name: &str, addrs: &[SocketAddr]) {
        self.put(to_json(&mk_service(name, "http", 80)));
        self.put(to_json(&mk_endpoint_slice(name, "http", addrs)));
    }

    fn set_endpoints(&mut self, i: usize, which: Vec<usize>) {
        let addrs: Vec<SocketAddr> = which.iter().map(|&e| self.backends[i][e]).collect();
        self.put(to_json(&mk_endpoint_slice(&service(i), "http", &addrs)));
        self.endpoints[i] = which;
    }

    fn random_endpoints(&mut self) -> Vec<usize> {
        const SUBSETS: [&[usize]; 6] = [&[0, 1], &[2, 3], &[0, 1, 2, 3], &[1], &[3], &[0, 2]];
        SUBSETS[self.rng.below(SUBSETS.len())].to_vec()
    }

    fn steady_ingress(&self, i: usize) -> Value {
        let ingress = mk_ingress(&format!("h{i}"), &steady_host(i), &service(i));
        if i == 0 {
            let base = if self.body_size_large { 2048 } else { 1024 };
            let size = format!("{}k", base + self.body_size_changes % 512);
            let size = size.as_str();
            to_json(&with_keys(ingress, &[("proxy-body-size", size)]))
        } else {
            to_json(&ingress)
        }
    }

    /// Route host `k` to Service `target`, or no route.
    fn set_route(&mut self, k: usize, target: Option<usize>) {
        let name = format!("route-{k}");
        match target {
            Some(t) => {
                let ingress = mk_ingress(&name, &format!("r{k}.soak.test"), &service(t));
                self.put(to_json(&ingress));
            }
            None => {
                self.server
                    .delete("Ingress", tugboat_testkit::objects::NAMESPACE, &name);
                self.changes += 1;
            }
        }
        self.routes[k] = target;
    }

    fn rotate_certificate(&mut self, k: usize) {
        let host = format!("t{k}.soak.test");
        let (cert, key, der) = certificate(&[&host], false);
        self.put(to_json(&mk_tls_secret(&format!("cert-{k}"), &cert, &key)));
        self.certificates[k] = der;
    }

    /// A new Service and Ingress (a new backend: a reload), and the oldest one gone
    /// beyond [`NEW_KEPT`].
    fn add_new_service(&mut self) {
        let n = self.next_new;
        self.next_new += 1;
        let borrowed = self.rng.below(HOSTS);
        let name = format!("new-{n}");
        // The echo backends answer with their own Service's name: a new Service reuses
        // the first two of a steady Service's.
        let addrs = self.backends[borrowed][..2].to_vec();
        self.put_service(&name, &addrs);
        self.put(to_json(&mk_ingress(
            &name,
            &format!("n{n}.soak.test"),
            &name,
        )));
        self.news.push_back((n, borrowed));
        if self.news.len() > NEW_KEPT
            && let Some((old, _)) = self.news.pop_front()
        {
            let old_name = format!("new-{old}");
            let namespace = tugboat_testkit::objects::NAMESPACE;
            self.server.delete("Ingress", namespace, &old_name);
            self.server.delete("Service", namespace, &old_name);
            self.server
                .delete("EndpointSlice", namespace, &format!("{old_name}-abc"));
            self.changes += 3;
            self.gone.push_back(old);
            if self.gone.len() > NEW_KEPT {
                self.gone.pop_front();
            }
        }
        self.structural_changes += 1;
        self.last_structural = Instant::now();
    }

    /// The annotation of `h0` that changes haproxy's config (a reload).
    fn toggle_annotation(&mut self) {
        self.body_size_large = !self.body_size_large;
        self.body_size_changes += 1;
        let ingress = self.steady_ingress(0);
        self.put(ingress);
        self.structural_changes += 1;
        self.last_structural = Instant::now();
    }

    /// One malformed object (of several kinds, by `variant`): a value the API accepts
    /// that the controller must refuse without harming anything else.
    fn put_malformed(&mut self, variant: usize) {
        let host = |k: usize| format!("m{k}.soak.test");
        let object = match variant % 5 {
            0 => to_json(&with_keys(
                mk_ingress("bad-annotations", &host(0), &service(0)),
                &[
                    ("proxy-body-size", "lots"),
                    ("load-balance", "roundrobin\n  bogus_keyword"),
                    ("ssl-redirect", "maybe"),
                ],
            )),
            1 => json!({
                "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": {"name": "bad-pem", "namespace": tugboat_testkit::objects::NAMESPACE},
                "data": {
                    "tls.crt": k8s_openapi::ByteString(
                        b"-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n".to_vec()),
                    "tls.key": k8s_openapi::ByteString(b"\x00\xff garbage".to_vec())
                }
            }),
            2 => to_json(&with_tls(
                mk_ingress("bad-tls", &host(1), &service(1)),
                &[(&[host(1).as_str()], "bad-pem")],
            )),
            3 => {
                let mut ingress = to_json(&mk_ingress("bad-port", &host(2), &service(2)));
                ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["port"] =
                    json!({"name": "no-such-port"});
                ingress
            }
            _ => to_json(&with_keys(
                mk_ingress("bad-values", &host(3), &service(3)),
                &[
                    ("proxy-read-timeout", "-5"),
                    ("allowlist-source-range", "10.0.0.0/33, not-an-address"),
                    ("rewrite-target", "/$9\n"),
                ],
            )),
        };
        self.put(object);
        self.malformed += 1;
    }

    /// One step of the steady churn.
    fn churn(&mut self) {
        let structural_allowed = self.last_structural.elapsed() >= STRUCTURAL_SPACING;
        match self.rng.below(100) {
            0..50 => {
                let i = self.rng.below(HOSTS);
                let which = self.random_endpoints();
                self.set_endpoints(i, which);
            }
            50..65 => {
                let k = self.rng.below(ROUTE_HOSTS);
                let target = if self.rng.below(4) == 0 {
                    None
                } else {
                    Some(self.rng.below(HOSTS))
                };
                self.set_route(k, target);
            }
            65..75 => {
                let k = self.rng.below(TLS_HOSTS);
                self.rotate_certificate(k);
            }
            75..85 if structural_allowed => self.add_new_service(),
            85..95 if structural_allowed => self.toggle_annotation(),
            95..100 => {
                let variant = self.rng.below(5);
                self.put_malformed(variant);
            }
            _ => {
                let i = self.rng.below(HOSTS);
                let which = self.random_endpoints();
                self.set_endpoints(i, which);
            }
        }
    }

    /// What haproxy must serve for the objects as they are.
    fn expectations(&self) -> Vec<Expect> {
        let addresses = |i: usize, which: &[usize]| -> Vec<String> {
            which
                .iter()
                .map(|&e| self.backends[i][e].to_string())
                .collect()
        };
        let mut all = Vec::new();
        for i in 0..HOSTS {
            all.push(Expect::Served {
                host: steady_host(i),
                service: service(i),
                endpoints: addresses(i, &self.endpoints[i]),
            });
        }
        for (k, route) in self.routes.iter().enumerate() {
            let host = format!("r{k}.soak.test");
            all.push(match route {
                Some(t) => Expect::Served {
                    host,
                    service: service(*t),
                    endpoints: addresses(*t, &self.endpoints[*t]),
                },
                None => Expect::NotFound { host },
            });
        }
        for (k, der) in self.certificates.iter().enumerate() {
            all.push(Expect::Certificate {
                host: format!("t{k}.soak.test"),
                der: der.clone(),
            });
        }
        all.push(Expect::BodyLimit {
            host: steady_host(0),
            large: self.body_size_large,
        });
        for (n, borrowed) in &self.news {
            all.push(Expect::Served {
                host: format!("n{n}.soak.test"),
                service: service(*borrowed),
                endpoints: addresses(*borrowed, &[0, 1]),
            });
        }
        for n in &self.gone {
            all.push(Expect::NotFound {
                host: format!("n{n}.soak.test"),
            });
        }
        all
    }
}

/// Whether haproxy serves `expectations`; the first difference otherwise.
async fn check(http: SocketAddr, https: SocketAddr, expectations: &[Expect]) -> Result<(), String> {
    for expect in expectations {
        match expect {
            Expect::Served {
                host,
                service,
                endpoints,
            } => {
                // Two requests: with round robin, both endpoints of a pair answer.
                for _ in 0..2 {
                    let reply = tugboat_testkit::get(http, host, "/")
                        .await
                        .map_err(|e| format!("{host}: {e}"))?;
                    let endpoint = reply.endpoint().unwrap_or_default().to_string();
                    if reply.status != 200
                        || reply.service() != Some(service.as_str())
                        || !endpoints.contains(&endpoint)
                    {
                        return Err(format!(
                            "{host}: {} from {:?} at {endpoint}, not {service} at {endpoints:?}",
                            reply.status,
                            reply.service()
                        ));
                    }
                }
            }
            Expect::NotFound { host } => {
                let reply = tugboat_testkit::get(http, host, "/")
                    .await
                    .map_err(|e| format!("{host}: {e}"))?;
                if reply.status != 404 {
                    return Err(format!("{host}: {}, not 404", reply.status));
                }
            }
            Expect::BodyLimit { host, large } => {
                let body = vec![b'x'; LIMIT_PROBE];
                let reply = request_with_body(http, "POST", host, "/", &[], Some(&body))
                    .await
                    .map_err(|e| format!("{host} with a body: {e}"))?;
                let wanted = if *large { 200 } else { 413 };
                if reply.status != wanted {
                    return Err(format!(
                        "{host} with a {LIMIT_PROBE}-byte body: {}, not {wanted}",
                        reply.status
                    ));
                }
            }
            Expect::Certificate { host, der } => {
                let shown = exchange(https, host, "/", &[b"http/1.1"])
                    .await
                    .map_err(|e| format!("{host} over TLS: {e}"))?;
                if &shown.certificate != der {
                    return Err(format!("{host}: not the Secret's current certificate"));
                }
            }
        }
    }
    Ok(())
}

/// One failed request: when it started and ended (since the run's start), and why.
struct Failure {
    started: Duration,
    ended: Duration,
    why: String,
}

/// What the load clients count.
struct Load {
    start: Instant,
    stop: AtomicBool,
    sent: AtomicU64,
    /// Requests retried once on a new connection after a reused keep-alive connection
    /// closed without an answer (what HTTP clients do for idempotent requests).
    retried: AtomicU64,
    /// Requests sent per 100 ms, for the count inside each window.
    per_tenth: Vec<AtomicU64>,
    failures: std::sync::Mutex<Vec<Failure>>,
    failures_not_kept: AtomicU64,
}

impl Load {
    fn new(start: Instant, duration: Duration) -> Self {
        // Room for the run plus the faults that may overrun it, bounded.
        let tenths = ((duration.as_secs() + 1800) * 10) as usize;
        Self {
            start,
            stop: AtomicBool::new(false),
            sent: AtomicU64::new(0),
            retried: AtomicU64::new(0),
            per_tenth: (0..tenths).map(|_| AtomicU64::new(0)).collect(),
            failures: std::sync::Mutex::new(Vec::new()),
            failures_not_kept: AtomicU64::new(0),
        }
    }

    fn record_failure(&self, started: Duration, why: String) {
        let ended = self.start.elapsed();
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if failures.len() < MAX_FAILURES_KEPT {
            failures.push(Failure {
                started,
                ended,
                why,
            });
        } else {
            self.failures_not_kept.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn sent_between(&self, from: Duration, to: Duration) -> u64 {
        let first = (from.as_millis() / 100) as usize;
        let last = (to.as_millis() / 100) as usize;
        self.per_tenth
            .iter()
            .take(last + 1)
            .skip(first)
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }
}

/// One request on the client's keep-alive connection (opened when there is none); a
/// reused connection that closes without an answer is retried once on a new one.
async fn keep_alive_get(
    connection: &mut Option<TcpStream>,
    addr: SocketAddr,
    host: &str,
    load: &Load,
) -> Result<tugboat_testkit::Reply, String> {
    let request = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n");
    if let Some(stream) = connection.as_mut() {
        if stream.write_all(request.as_bytes()).await.is_ok()
            && let Some(reply) = read_answer(stream).await
        {
            return Ok(reply);
        }
        *connection = None;
        load.retried.fetch_add(1, Ordering::Relaxed);
    }
    let mut stream = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr))
        .await
        .map_err(|_| "connect timed out".to_string())?
        .map_err(|e| format!("connect: {e}"))?;
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("write: {e}"))?;
    let reply = read_answer(&mut stream)
        .await
        .ok_or_else(|| "no answer".to_string())?;
    *connection = Some(stream);
    Ok(reply)
}

async fn load_client(index: usize, addr: SocketAddr, load: Arc<Load>) {
    let period = Duration::from_secs_f64(LOAD_CLIENTS as f64 / LOAD_RATE as f64);
    let mut pace = tokio::time::interval(period);
    pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut connection = None;
    let mut n = 0usize;
    while !load.stop.load(Ordering::Relaxed)
        && load.sent.fetch_add(1, Ordering::Relaxed) < MAX_REQUESTS
    {
        pace.tick().await;
        let i = (index + n * LOAD_CLIENTS) % HOSTS;
        n += 1;
        let host = steady_host(i);
        let started = load.start.elapsed();
        if let Some(counter) = load.per_tenth.get((started.as_millis() / 100) as usize) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
        match keep_alive_get(&mut connection, addr, &host, &load).await {
            Ok(reply) if reply.status == 200 && reply.service() == Some(&service(i)) => {
                if reply
                    .header("connection")
                    .is_some_and(|v| v.eq_ignore_ascii_case("close"))
                {
                    connection = None;
                }
            }
            Ok(reply) => {
                connection = None;
                load.record_failure(
                    started,
                    format!("{host}: {} from {:?}", reply.status, reply.service()),
                );
            }
            Err(why) => {
                connection = None;
                load.record_failure(started, format!("{host}: {why}"));
            }
        }
    }
}

/// haproxy's reloads, counted across its restarts (a new master counts from 0).
#[derive(Default)]
struct ReloadCounter {
    total: u64,
    last: Option<(u32, u64)>,
}

impl ReloadCounter {
    async fn sample(&mut self, cli: &MasterCli) {
        let Ok(proc_info) = cli.show_proc().await else {
            return;
        };
        let (pid, reloads) = (proc_info.master_pid, proc_info.reloads);
        match self.last {
            Some((last_pid, last_reloads)) if last_pid == pid => {
                self.total += reloads.saturating_sub(last_reloads);
            }
            Some(_) => self.total += reloads,
            None => {}
        }
        self.last = Some((pid, reloads));
    }
}

/// One RSS sample: when, the controller's pid and age, its RSS and haproxy's.
struct RssSample {
    at: Duration,
    controller_pid: u32,
    controller_age: Duration,
    controller: u64,
    haproxy: u64,
}

fn rss_of(pid: u32) -> Option<u64> {
    ProcessUsage::read_pid(&pid.to_string()).map(|u| u.resident_bytes)
}

/// The controller process, started again after each kill.
struct Controller {
    tugboat: PathBuf,
    kubeconfig: PathBuf,
    log: PathBuf,
    admin_port: u16,
    child: tokio::process::Child,
    pid: Arc<AtomicU32>,
    started: Arc<std::sync::Mutex<Instant>>,
}

impl Controller {
    fn spawn(
        tugboat: &Path,
        haproxy: &Haproxy,
        kubeconfig: &Path,
        admin_port: u16,
        log: &Path,
    ) -> anyhow::Result<tokio::process::Child> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("cannot open {}", log.display()))?;
        controller_command(
            tugboat,
            haproxy,
            ObjectSource::Kubeconfig(kubeconfig),
            admin_port,
        )
        .env("RUST_LOG", "info")
        .stdout(file.try_clone()?)
        .stderr(file)
        .spawn()
        .with_context(|| format!("cannot start {}", tugboat.display()))
    }

    fn admin(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.admin_port))
    }

    async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }

    async fn start_again(&mut self, haproxy: &Haproxy) -> anyhow::Result<()> {
        self.child = Self::spawn(
            &self.tugboat,
            haproxy,
            &self.kubeconfig,
            self.admin_port,
            &self.log,
        )?;
        self.pid
            .store(self.child.id().unwrap_or_default(), Ordering::Relaxed);
        *self.started.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        let admin = self.admin();
        wait_until_ready(&mut self.child, admin, READY_LIMIT).await
    }

    /// The sum of the `tugboat_applies_total` counters whose result is not `applied`.
    async fn unsuccessful_applies(&self) -> Option<f64> {
        self.metric_sum("tugboat_applies_total{", |line| {
            !line.contains("\"applied\"")
        })
        .await
    }

    /// The sum of the `tugboat_object_problems` gauges.
    async fn object_problems(&self) -> Option<f64> {
        self.metric_sum("tugboat_object_problems{", |_| true).await
    }

    /// The sum of the samples of the controller's `/metrics` whose line starts with
    /// `series` and that `keep` keeps; `None` when `/metrics` does not answer.
    async fn metric_sum(&self, series: &str, keep: impl Fn(&str) -> bool) -> Option<f64> {
        let reply = tugboat_testkit::get(self.admin(), "localhost", "/metrics")
            .await
            .ok()?;
        Some(
            reply
                .body
                .lines()
                .filter(|line| line.starts_with(series) && keep(line))
                .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>()
                + 0.0,
        )
    }
}

/// The digest of every file under the config and lib folders, by path.
type FileState = BTreeMap<PathBuf, (u64, u64)>;

fn snapshot(dirs: &[&Path]) -> FileState {
    let mut state = FileState::new();
    let mut pending: Vec<PathBuf> = dirs.iter().map(|d| d.to_path_buf()).collect();
    // Bounded: the folders hold a few dozen files.
    let mut visited = 0;
    while let Some(dir) = pending.pop() {
        visited += 1;
        if visited > 10_000 {
            break;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                bytes.hash(&mut hasher);
                state.insert(path, (hasher.finish(), bytes.len() as u64));
            }
        }
    }
    state
}

/// The files of `during` that are neither as in `before` nor as in `after` (a partial
/// or stray file), and those missing from `during` while both others hold them. With
/// `other_contents_allowed` (a restarted controller may write the state its predecessor
/// applied again, without what it kept unused), a file of `before` or `after` may hold
/// other contents: only stray and missing files count.
fn partial_files(
    before: &FileState,
    during: &FileState,
    after: &FileState,
    other_contents_allowed: bool,
) -> Vec<String> {
    let mut wrong = Vec::new();
    for (path, digest) in during {
        let known = before.contains_key(path) || after.contains_key(path);
        if other_contents_allowed && known {
            continue;
        }
        if before.get(path) != Some(digest) && after.get(path) != Some(digest) {
            wrong.push(format!("{} ({} bytes)", path.display(), digest.1));
        }
    }
    for path in before.keys() {
        if after.contains_key(path) && !during.contains_key(path) {
            wrong.push(format!("{} missing", path.display()));
        }
    }
    wrong
}

/// `haproxy -c` on the config folder: `Err` with haproxy's words when it does not load.
async fn loadable(binary: &HaproxyBinary, config_dir: &Path) -> Result<(), String> {
    let output = tokio::process::Command::new(&binary.path)
        .args(["-c", "-q", "-f"])
        .arg(config_dir)
        .output()
        .await
        .map_err(|e| format!("cannot run haproxy -c: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        let text = String::from_utf8_lossy(&output.stderr);
        Err(text.lines().take(5).collect::<Vec<_>>().join(" | "))
    }
}

/// One fault as it ran.
struct FaultRun {
    kind: Fault,
    started: Duration,
    /// When the fault was lifted (haproxy or the controller back, the API back, space
    /// back, the burst done).
    lifted: Duration,
    /// When the served state matched the objects again; `None`: it never did.
    converged: Option<Duration>,
    reloads: u64,
    notes: Vec<String>,
}

/// Everything a fault acts on.
struct Rig {
    binary: HaproxyBinary,
    haproxy: Haproxy,
    controller: Controller,
    world: Arc<Mutex<World>>,
    reloads: Arc<Mutex<ReloadCounter>>,
    cli: MasterCli,
    load: Arc<Load>,
    churn_paused: Arc<AtomicBool>,
    volume_mounted: bool,
    rng: Rng,
    /// What the run must fail on.
    problems: Vec<String>,
}

impl Rig {
    fn dirs(&self) -> [&Path; 2] {
        [&self.haproxy.config_dir, &self.haproxy.lib_dir]
    }

    fn now(&self) -> Duration {
        self.load.start.elapsed()
    }

    /// Waits until haproxy serves what the objects say; the time it took.
    async fn converge(&self, limit: Duration) -> Result<Duration, String> {
        let started = Instant::now();
        let http = self.haproxy.http_addr();
        let https = self.haproxy.https_addr();
        let mut last = String::new();
        while started.elapsed() < limit {
            let expectations = self.world.lock().await.expectations();
            match check(http, https, &expectations).await {
                Ok(()) => return Ok(started.elapsed()),
                Err(why) => last = why,
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(last)
    }

    async fn reload_total(&self) -> u64 {
        let mut counter = self.reloads.lock().await;
        counter.sample(&self.cli).await;
        counter.total
    }

    /// `haproxy -c` on the files as they are now; a problem when they do not load.
    async fn check_loadable(&mut self, when: &str) {
        if let Err(why) = loadable(&self.binary, &self.haproxy.config_dir).await {
            self.problems
                .push(format!("files not loadable {when}: {why}"));
        }
    }

    /// Runs one fault with the churn paused: converges, snapshots, injects, converges.
    async fn run_fault(&mut self, kind: Fault) -> FaultRun {
        self.churn_paused.store(true, Ordering::Relaxed);
        // Past any churn step and its reload window, then a quiet, served state.
        drop(self.world.lock().await);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        if let Err(why) = self.converge(CONVERGE_LIMIT).await {
            self.problems
                .push(format!("before '{}': not converged: {why}", kind.name()));
        }
        let before = snapshot(&self.dirs());
        let reloads_before = self.reload_total().await;
        let started = self.now();
        let mut notes = Vec::new();
        // The files while the fault holds, when a single change (or none) is in flight.
        let during = self.inject(kind, &mut notes).await;
        let lifted = self.now();
        let limit = if kind == Fault::ApiOutage {
            CONVERGE_LIMIT * 2
        } else {
            CONVERGE_LIMIT
        };
        let converged = match self.converge(limit).await {
            Ok(took) => Some(lifted + took),
            Err(why) => {
                self.problems.push(format!(
                    "'{}' at {:.0} s: not converged within {limit:?}: {why}",
                    kind.name(),
                    started.as_secs_f64()
                ));
                None
            }
        };
        // Past the reload window: the files of the converged state.
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let after = snapshot(&self.dirs());
        self.check_loadable(&format!("after '{}'", kind.name()))
            .await;
        if let Some(during) = during {
            let wrong = partial_files(&before, &during, &after, kind == Fault::ControllerKilled);
            if !wrong.is_empty() {
                self.problems.push(format!(
                    "'{}': files neither as before nor as after: {}",
                    kind.name(),
                    wrong.join(", ")
                ));
            }
        }
        let reloads = self.reload_total().await.saturating_sub(reloads_before);
        self.churn_paused.store(false, Ordering::Relaxed);
        FaultRun {
            kind,
            started,
            lifted,
            converged,
            reloads,
            notes,
        }
    }

    /// Injects the fault and lifts it; the files while it held, when comparable.
    async fn inject(&mut self, kind: Fault, notes: &mut Vec<String>) -> Option<FileState> {
        match kind {
            Fault::WorkerKilled => {
                let worker = self.cli.show_proc().await.ok().and_then(|p| p.worker_pid);
                let Some(worker) = worker else {
                    notes.push("no worker to kill".into());
                    return None;
                };
                kill(worker);
                // The master exits with its worker (exit-on-failure); a master that
                // stays without a worker is stopped, as a failing liveness probe does.
                let deadline = Instant::now() + Duration::from_secs(5);
                while self.haproxy.is_running() && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                if self.haproxy.is_running() {
                    notes.push("the master outlived its worker; stopped".into());
                }
                self.restart_haproxy().await
            }
            Fault::MasterKilled => {
                if let Ok(proc_info) = self.cli.show_proc().await {
                    kill(proc_info.master_pid);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                self.restart_haproxy().await
            }
            Fault::ControllerKilled => {
                // A change that needs a reload, then the kill within the apply: after
                // the reload window (500 ms), within the next 250 ms.
                let reloads = self.reload_total().await;
                self.world.lock().await.toggle_annotation();
                let delay = 450 + self.rng.below(300) as u64;
                tokio::time::sleep(Duration::from_millis(delay)).await;
                self.controller.kill().await;
                let reloaded = self.reload_total().await > reloads;
                notes.push(format!(
                    "killed {delay} ms after the change, {} its reload",
                    if reloaded { "after" } else { "before" }
                ));
                self.check_loadable("with the controller killed").await;
                let during = snapshot(&self.dirs());
                if let Err(err) = self.controller.start_again(&self.haproxy).await {
                    self.problems
                        .push(format!("the controller did not start again: {err:#}"));
                }
                Some(during)
            }
            Fault::ApiOutage => {
                {
                    let mut world = self.world.lock().await;
                    world.server.stop();
                }
                tokio::time::sleep(API_OUTAGE / 2).await;
                {
                    // The cluster moves on meanwhile: the controller learns it on return.
                    let mut world = self.world.lock().await;
                    let i = world.rng.below(HOSTS);
                    let which = world.random_endpoints();
                    world.set_endpoints(i, which);
                    let target = world.rng.below(HOSTS);
                    world.set_route(0, Some(target));
                    world.rotate_certificate(0);
                }
                tokio::time::sleep(API_OUTAGE / 2).await;
                self.check_loadable("with the API server unreachable").await;
                let during = snapshot(&self.dirs());
                let mut world = self.world.lock().await;
                world.server.expire_watch_history();
                world.server.restart().await;
                Some(during)
            }
            Fault::VolumeFull => {
                if !self.volume_mounted {
                    notes.push("skipped: no tmpfs (not root)".into());
                    return None;
                }
                let filler = self.haproxy.config_dir.join("filler");
                fill(&filler);
                let failed_before = self.controller.unsuccessful_applies().await;
                self.world.lock().await.toggle_annotation();
                // The reload window, the apply, and a retry or two.
                tokio::time::sleep(Duration::from_secs(3)).await;
                let failed_after = self.controller.unsuccessful_applies().await;
                let reported = matches!((failed_before, failed_after), (Some(b), Some(a)) if a > b);
                notes.push(format!(
                    "unsuccessful applies reported: {:?} -> {:?}",
                    failed_before, failed_after
                ));
                if !reported {
                    self.problems
                        .push("config volume full: the controller reported no failed apply".into());
                }
                self.check_loadable("with the config volume full").await;
                let mut during = snapshot(&self.dirs());
                during.remove(&filler);
                let _ = std::fs::remove_file(&filler);
                Some(during)
            }
            Fault::Burst => {
                let started = Instant::now();
                for round in 0..BURST_CHANGES / 100 {
                    {
                        let mut world = self.world.lock().await;
                        for _ in 0..100 {
                            let i = world.rng.below(HOSTS);
                            let which = world.random_endpoints();
                            world.set_endpoints(i, which);
                        }
                    }
                    let next = Duration::from_millis(100 * (round as u64 + 1));
                    tokio::time::sleep(next.saturating_sub(started.elapsed())).await;
                }
                notes.push(format!(
                    "{BURST_CHANGES} EndpointSlice changes in {:.2} s",
                    started.elapsed().as_secs_f64()
                ));
                None
            }
            Fault::Malformed => {
                let problems_before = self.controller.object_problems().await;
                {
                    let mut world = self.world.lock().await;
                    for variant in 0..5 {
                        world.put_malformed(variant);
                    }
                    world.rotate_certificate(1);
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
                let problems_after = self.controller.object_problems().await;
                notes.push(format!(
                    "object problems reported: {problems_before:?} -> {problems_after:?}"
                ));
                if !problems_after.is_some_and(|p| p > 0.0) {
                    self.problems
                        .push("malformed objects: no object problem reported".into());
                }
                None
            }
        }
    }

    /// Starts haproxy again on the same files and sockets (a container restart), after
    /// checking the files it will load; the files it found.
    async fn restart_haproxy(&mut self) -> Option<FileState> {
        self.haproxy.kill().await;
        self.check_loadable("with haproxy down").await;
        let during = snapshot(&self.dirs());
        self.haproxy.start_again().await;
        Some(during)
    }
}

fn kill(pid: u32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}

/// Fills the volume of `path` with a file there until no byte more fits (bounded).
fn fill(path: &Path) {
    use std::io::Write;
    let Ok(mut file) = std::fs::File::create(path) else {
        return;
    };
    let chunk = vec![0u8; 64 * 1024];
    for _ in 0..100_000 {
        if file.write_all(&chunk).is_err() {
            break;
        }
    }
    for _ in 0..100_000 {
        if file.write_all(&[0]).is_err() {
            break;
        }
    }
    let _ = file.flush();
}

/// Mounts a size-limited tmpfs over `dir`, keeping what it held.
fn mount_volume(dir: &Path) -> anyhow::Result<()> {
    let saved: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(dir)?
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| Ok((e.file_name().into(), std::fs::read(e.path())?)))
        .collect::<std::io::Result<_>>()?;
    let status = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={VOLUME_SIZE}"), "tmpfs"])
        .arg(dir)
        .status()
        .context("cannot run mount")?;
    if !status.success() {
        bail!("mount tmpfs on {} failed: {status}", dir.display());
    }
    for (name, bytes) in saved {
        std::fs::write(dir.join(name), bytes)?;
    }
    Ok(())
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// The slope of `y` over `x` within groups (each group its own intercept), per unit of x.
fn pooled_slope(groups: &BTreeMap<u32, Vec<(f64, f64)>>) -> f64 {
    let (mut covariance, mut variance) = (0.0, 0.0);
    for points in groups.values() {
        if points.len() < 2 {
            continue;
        }
        let n = points.len() as f64;
        let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
        let my = points.iter().map(|p| p.1).sum::<f64>() / n;
        for (x, y) in points {
            covariance += (x - mx) * (y - my);
            variance += (x - mx) * (x - mx);
        }
    }
    if variance == 0.0 {
        0.0
    } else {
        covariance / variance
    }
}

const MB: f64 = 1_048_576.0;

async fn run(args: Args, volume_fault: bool) -> anyhow::Result<bool> {
    let binary = HaproxyBinary::installed(&args.haproxy).with_context(|| {
        format!(
            "haproxy {} is not installed: run scripts/get-haproxy.sh",
            args.haproxy
        )
    })?;
    let tugboat = tugboat_binary()?;
    println!(
        "soak: haproxy {} ({}), {} s, seed {}, a fault every {} s of churn; \
         {LOAD_RATE} requests/s keep-alive over {HOSTS} hosts",
        binary.series,
        binary.path.display(),
        args.duration.as_secs(),
        args.seed,
        args.fault_gap.as_secs()
    );
    let work = tempfile::tempdir().context("temporary folder")?;
    let server = FakeApiServer::start().await;
    let class: Value = serde_yaml_ng::from_str(TUGBOAT_CLASS)?;
    server.put(class);

    let mut echo: Vec<EchoServer> = Vec::new();
    let mut backends = Vec::new();
    for i in 0..HOSTS {
        let servers = start_backends(&service(i), 100 + i as u8, 4).await;
        backends.push(servers.iter().map(|s| s.addr).collect::<Vec<_>>());
        echo.extend(servers);
    }
    let mut world = World {
        server,
        backends,
        endpoints: vec![vec![0, 1]; HOSTS],
        routes: (0..ROUTE_HOSTS).map(Some).collect(),
        certificates: vec![Vec::new(); TLS_HOSTS],
        news: VecDeque::new(),
        gone: VecDeque::new(),
        next_new: 0,
        body_size_large: false,
        body_size_changes: 0,
        rng: Rng::new(args.seed),
        structural_changes: 0,
        changes: 0,
        malformed: 0,
        last_structural: Instant::now(),
    };
    for i in 0..HOSTS {
        let addrs = world.backends[i][..2].to_vec();
        world.put_service(&service(i), &addrs);
        let ingress = world.steady_ingress(i);
        world.put(ingress);
    }
    for k in 0..ROUTE_HOSTS {
        world.set_route(k, Some(k));
    }
    for k in 0..TLS_HOSTS {
        world.rotate_certificate(k);
        let host = format!("t{k}.soak.test");
        let ingress = with_tls(
            mk_ingress(&format!("tls-{k}"), &host, &service(k)),
            &[(&[host.as_str()], &format!("cert-{k}"))],
        );
        world.put(to_json(&ingress));
    }

    let haproxy = Haproxy::start(&binary).await;
    let volume_mounted = volume_fault && {
        mount_volume(&haproxy.config_dir)?;
        true
    };
    let kubeconfig = work.path().join("kubeconfig");
    world.server.write_kubeconfig(&kubeconfig);
    let log = work.path().join("controller.log");
    let admin_port = tugboat_testkit::free_port();
    let child = Controller::spawn(&tugboat, &haproxy, &kubeconfig, admin_port, &log)?;
    let controller_pid = Arc::new(AtomicU32::new(child.id().unwrap_or_default()));
    let controller_started = Arc::new(std::sync::Mutex::new(Instant::now()));
    let mut controller = Controller {
        tugboat: tugboat.clone(),
        kubeconfig,
        log: log.clone(),
        admin_port,
        child,
        pid: controller_pid.clone(),
        started: controller_started.clone(),
    };
    let admin = controller.admin();
    wait_until_ready(&mut controller.child, admin, READY_LIMIT).await?;

    let start = Instant::now();
    let load = Arc::new(Load::new(start, args.duration));
    let cli = haproxy.cli();
    let world = Arc::new(Mutex::new(world));
    let mut rig = Rig {
        binary: binary.clone(),
        haproxy,
        controller,
        world: world.clone(),
        reloads: Arc::new(Mutex::new(ReloadCounter::default())),
        cli: cli.clone(),
        load: load.clone(),
        churn_paused: Arc::new(AtomicBool::new(false)),
        volume_mounted,
        rng: Rng::new(args.seed ^ 0xfa17),
        problems: Vec::new(),
    };
    rig.converge(CONVERGE_LIMIT)
        .await
        .map_err(|why| anyhow::anyhow!("the first state was never served: {why}"))?;
    rig.reload_total().await;

    // The load, the churn and the samplers, until the end of the run.
    let http = rig.haproxy.http_addr();
    let mut tasks = Vec::new();
    for index in 0..LOAD_CLIENTS {
        tasks.push(tokio::spawn(load_client(index, http, load.clone())));
    }
    let end = start + args.duration;
    {
        let (world, paused, load) = (world.clone(), rig.churn_paused.clone(), load.clone());
        tasks.push(tokio::spawn(async move {
            while !load.stop.load(Ordering::Relaxed) && Instant::now() < end + API_OUTAGE * 4 {
                tokio::time::sleep(CHURN_EVERY).await;
                if !paused.load(Ordering::Relaxed) {
                    world.lock().await.churn();
                }
            }
        }));
    }
    let samples = Arc::new(std::sync::Mutex::new(Vec::<RssSample>::new()));
    {
        let (samples, load, reloads, cli) = (
            samples.clone(),
            load.clone(),
            rig.reloads.clone(),
            cli.clone(),
        );
        let (pid, started) = (controller_pid.clone(), controller_started.clone());
        tasks.push(tokio::spawn(async move {
            let mut tick = 0u64;
            while !load.stop.load(Ordering::Relaxed) && tick < 100_000 {
                tokio::time::sleep(Duration::from_secs(1)).await;
                tick += 1;
                reloads.lock().await.sample(&cli).await;
                if !tick.is_multiple_of(5) {
                    continue;
                }
                let controller_pid = pid.load(Ordering::Relaxed);
                let haproxy = match cli.show_proc().await {
                    Ok(p) => [Some(p.master_pid), p.worker_pid]
                        .into_iter()
                        .flatten()
                        .filter_map(rss_of)
                        .sum(),
                    Err(_) => continue,
                };
                let Some(controller) = rss_of(controller_pid) else {
                    continue;
                };
                let controller_age = started.lock().unwrap_or_else(|e| e.into_inner()).elapsed();
                samples
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(RssSample {
                        at: load.start.elapsed(),
                        controller_pid,
                        controller_age,
                        controller,
                        haproxy,
                    });
            }
        }));
    }
    let reloads_at_start = rig.reload_total().await;
    let structural_at_start = world.lock().await.structural_changes;

    // The schedule: churn, a fault, churn, the next fault, ... while a whole fault
    // (the longest is the API outage and its convergence) still fits in the run.
    let mut runs: Vec<FaultRun> = Vec::new();
    let mut next = 0usize;
    tokio::time::sleep(args.fault_gap.min(Duration::from_secs(10))).await;
    while Instant::now() + Duration::from_secs(15) < end && runs.len() < 10_000 {
        let kind = Fault::ALL[next % Fault::ALL.len()];
        if kind == Fault::ApiOutage && Instant::now() + API_OUTAGE + Duration::from_secs(15) > end {
            break;
        }
        next += 1;
        let fault = rig.run_fault(kind).await;
        println!(
            "[{:>5.0} s] {:<28} converged {} after it was lifted; {} reloads{}",
            fault.started.as_secs_f64(),
            kind.name(),
            fault.converged.map_or("never".to_string(), |c| format!(
                "{:.2} s",
                (c - fault.lifted).as_secs_f64()
            )),
            fault.reloads,
            if fault.notes.is_empty() {
                String::new()
            } else {
                format!("; {}", fault.notes.join("; "))
            }
        );
        runs.push(fault);
        let gap_end = Instant::now() + args.fault_gap;
        tokio::time::sleep_until(gap_end.min(end).into()).await;
    }
    tokio::time::sleep_until(end.into()).await;

    // The end: the churn stops, the state converges, the files load; then the
    // controller is killed and started again with nothing changed: no reload.
    rig.churn_paused.store(true, Ordering::Relaxed);
    drop(world.lock().await);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    if let Err(why) = rig.converge(CONVERGE_LIMIT).await {
        rig.problems
            .push(format!("at the end: not converged: {why}"));
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let load_end = rig.now();
    load.stop.store(true, Ordering::Relaxed);
    rig.check_loadable("at the end").await;
    let reloads_total = rig.reload_total().await - reloads_at_start;
    let (structural_total, changes_total, malformed_total) = {
        let w = world.lock().await;
        (
            w.structural_changes - structural_at_start,
            w.changes,
            w.malformed,
        )
    };
    let files_before = snapshot(&rig.dirs());
    let copy = |name: &str| {
        let _ = std::process::Command::new("cp")
            .arg("-r")
            .arg(&rig.haproxy.config_dir)
            .arg(work.path().join(name))
            .status();
    };
    copy("config-before-restart");
    let reloads_before_restart = rig.reload_total().await;
    rig.controller.kill().await;
    if let Err(err) = rig.controller.start_again(&rig.haproxy).await {
        rig.problems.push(format!(
            "the controller did not start again at the end: {err:#}"
        ));
    }
    // Past the reload window and a status tick or two.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let adoption_reloads = rig.reload_total().await - reloads_before_restart;
    copy("config-after-restart");
    let files_after = snapshot(&rig.dirs());
    let changed_files: Vec<String> = files_after
        .iter()
        .filter(|(path, digest)| files_before.get(*path) != Some(digest))
        .map(|(path, _)| path.display().to_string())
        .collect();
    if adoption_reloads > 0 {
        rig.problems.push(format!(
            "the controller restarted with nothing changed reloaded haproxy {adoption_reloads} times"
        ));
    }
    if let Err(why) = rig.converge(CONVERGE_LIMIT).await {
        rig.problems
            .push(format!("after the adoption: not converged: {why}"));
    }
    for task in tasks {
        task.abort();
    }

    // The figures.
    let failures = std::mem::take(&mut *load.failures.lock().unwrap_or_else(|e| e.into_inner()));
    let windows: Vec<(Fault, Duration, Duration)> = runs
        .iter()
        .map(|r| {
            (
                r.kind,
                r.started,
                r.converged.unwrap_or(r.lifted + CONVERGE_LIMIT),
            )
        })
        .collect();
    let overlaps = |f: &Failure, from: Duration, to: Duration| f.started <= to && f.ended >= from;
    let outside: Vec<&Failure> = failures
        .iter()
        .filter(|f| {
            !windows
                .iter()
                .any(|(kind, from, to)| kind.costs_requests() && overlaps(f, *from, *to))
        })
        .collect();
    let sent = load.sent.load(Ordering::Relaxed).min(MAX_REQUESTS);
    let sent_in_costly: u64 = windows
        .iter()
        .filter(|(kind, ..)| kind.costs_requests())
        .map(|(_, from, to)| load.sent_between(*from, *to))
        .sum();
    println!(
        "\n== soak, haproxy {} ({}), {:.0} s, seed {} ==",
        binary.series,
        binary.path.display(),
        load_end.as_secs_f64(),
        args.seed
    );
    println!(
        "requests: {sent} sent ({:.0}/s, keep-alive, {HOSTS} hosts), {} retried once on a \
         closed keep-alive connection",
        sent as f64 / load_end.as_secs_f64(),
        load.retried.load(Ordering::Relaxed)
    );
    println!(
        "outside the windows where a fault must cost something: {} sent, {} failed (goal 0)",
        sent.saturating_sub(sent_in_costly),
        outside.len()
    );
    for failure in outside.iter().take(10) {
        println!(
            "  failed at {:.1}-{:.1} s: {}",
            failure.started.as_secs_f64(),
            failure.ended.as_secs_f64(),
            failure.why
        );
    }
    if load.failures_not_kept.load(Ordering::Relaxed) > 0 {
        println!(
            "  ({} more failures not kept)",
            load.failures_not_kept.load(Ordering::Relaxed)
        );
    }
    println!(
        "{:<28} {:>5} {:>10} {:>8} {:>14} {:>14} {:>8}",
        "fault (window: start..converged)",
        "runs",
        "sent in",
        "failed",
        "converge med s",
        "converge max s",
        "reloads"
    );
    for kind in Fault::ALL {
        let of_kind: Vec<&FaultRun> = runs.iter().filter(|r| r.kind == kind).collect();
        if of_kind.is_empty() {
            continue;
        }
        let sent_in: u64 = of_kind
            .iter()
            .map(|r| load.sent_between(r.started, r.converged.unwrap_or(r.lifted)))
            .sum();
        let failed_in = failures
            .iter()
            .filter(|f| {
                of_kind.iter().any(|r| {
                    overlaps(
                        f,
                        r.started,
                        r.converged.unwrap_or(r.lifted + CONVERGE_LIMIT),
                    )
                })
            })
            .count();
        let mut took: Vec<f64> = of_kind
            .iter()
            .filter_map(|r| r.converged.map(|c| (c - r.lifted).as_secs_f64()))
            .collect();
        let never = of_kind.len() - took.len();
        let max = took.iter().copied().fold(0.0, f64::max);
        println!(
            "{:<28} {:>5} {:>10} {:>8} {:>14.2} {:>14.2} {:>8}{}{}",
            kind.name(),
            of_kind.len(),
            sent_in,
            failed_in,
            median(&mut took),
            max,
            of_kind.iter().map(|r| r.reloads).sum::<u64>(),
            if kind.costs_requests() {
                ""
            } else {
                "  (must cost nothing)"
            },
            if never > 0 {
                format!("; {never} never converged")
            } else {
                String::new()
            }
        );
    }
    println!(
        "reloads: {reloads_total} seen for {structural_total} structural changes (each may \
         make one; the fault recoveries and {malformed_total} malformed objects may add \
         some); {changes_total} object writes in all"
    );
    let samples = std::mem::take(&mut *samples.lock().unwrap_or_else(|e| e.into_inner()));
    let steady: Vec<&RssSample> = samples
        .iter()
        .filter(|s| s.controller_age >= RSS_SETTLE && s.at >= Duration::from_secs(60))
        .collect();
    if steady.is_empty() {
        println!("controller RSS: no sample once steady (the run is too short)");
    } else {
        let mut values: Vec<f64> = steady.iter().map(|s| s.controller as f64 / MB).collect();
        let (first, last) = (values[0], values[values.len() - 1]);
        let max = values.iter().copied().fold(0.0, f64::max);
        let mut groups: BTreeMap<u32, Vec<(f64, f64)>> = BTreeMap::new();
        for s in &steady {
            groups
                .entry(s.controller_pid)
                .or_default()
                .push((s.at.as_secs_f64() / 3600.0, s.controller as f64 / MB));
        }
        println!(
            "controller RSS once steady ({} samples, every 5 s, {} processes): first {first:.1} MB, \
             median {:.1} MB, max {max:.1} MB, last {last:.1} MB; slope {:+.2} MB/hour \
             (within each process)",
            steady.len(),
            groups.len(),
            median(&mut values),
            pooled_slope(&groups)
        );
        let mut haproxy: Vec<f64> = steady.iter().map(|s| s.haproxy as f64 / MB).collect();
        let (first, last) = (haproxy[0], haproxy[haproxy.len() - 1]);
        let max = haproxy.iter().copied().fold(0.0, f64::max);
        println!(
            "haproxy RSS (master + worker): first {first:.1} MB, median {:.1} MB, max {max:.1} MB, \
             last {last:.1} MB",
            median(&mut haproxy)
        );
    }
    println!(
        "restart with nothing changed: {adoption_reloads} reloads (goal 0); files changed: {}",
        if changed_files.is_empty() {
            "none".to_string()
        } else {
            changed_files.join(", ")
        }
    );
    if !outside.is_empty() {
        rig.problems.push(format!(
            "{} requests failed outside the fault windows",
            outside.len()
        ));
    }
    // Unmounted before the temporary folder goes (the namespace goes with the process).
    if rig.volume_mounted {
        let _ = std::process::Command::new("umount")
            .arg(&rig.haproxy.config_dir)
            .status();
    }
    if rig.problems.is_empty() {
        println!("result: passed");
        Ok(true)
    } else {
        println!("result: FAILED");
        for problem in &rig.problems {
            println!("  - {problem}");
        }
        println!("controller log: {}", log.display());
        // The log is in the temporary folder: kept for reading.
        let _ = work.keep();
        Ok(false)
    }
}
