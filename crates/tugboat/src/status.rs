//! The controller's state at a glance: the record the controller keeps of its applies
//! and of its source (in [`ControllerStatus`], which the controller sends after every
//! update), the report `/status` serves (that
//! record with what haproxy and the process say at the time of the request), its
//! one-screen text form, and `tugboat status`, which fetches it from a running
//! controller. Field names of the JSON are stable: docs/operations.md lists them.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use k8s_openapi::jiff::{RoundMode, SignedDuration, Timestamp, TimestampRound, Unit};
use serde::{Deserialize, Serialize};
use tugboat_model::ObjectProblem;

/// What the controller tells the rest of the process (health, status, Events) after
/// every update.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ControllerStatus {
    /// True once haproxy runs a configuration built from a complete snapshot.
    pub ready: bool,
    /// Problems of the last build, sorted.
    pub problems: Vec<ObjectProblem>,
    /// Ingresses with at least one route (or the default backend) in the applied state.
    pub served_ingresses: tugboat_model::ObjectKeys,
    /// The status of the Gateway API objects of the last build.
    pub gateway: std::sync::Arc<tugboat_model::gateway::GatewayStatus>,
    /// The last apply and reload, and the applies by how they went. Changes to it do
    /// not wake the receivers (nobody waits on it: `/status` reads it when asked).
    pub activity: Activity,
    /// Whether this replica leads (`None`: no election, as with a folder). Set by the
    /// cluster wiring, without waking the receivers.
    pub leader: Option<bool>,
    /// The source and its watches, without waking the receivers.
    pub source: SourceSync,
}

/// How an apply ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApplyResult {
    /// haproxy took it.
    Applied,
    /// haproxy refused the new configuration and keeps serving the previous one.
    Refused,
    /// It did not get through (a file, haproxy not answering, a runtime command).
    Failed,
}

impl ApplyResult {
    fn as_str(self) -> &'static str {
        match self {
            ApplyResult::Applied => "applied",
            ApplyResult::Refused => "refused",
            ApplyResult::Failed => "failed",
        }
    }
}

/// The last apply that sent something to haproxy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApplyRecord {
    /// When it ended.
    pub at: Timestamp,
    /// `patch` (runtime commands planned from what changed) or `full`.
    pub built: String,
    /// `runtime`, `reload`, `runtime-fallback-reload` or `nothing`.
    pub delivery: String,
    pub result: ApplyResult,
    /// From the start of the update to the end of the apply.
    pub duration_ms: f64,
    /// What went wrong, shortened (no payload of a command ever appears).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The last reload the controller asked haproxy for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReloadRecord {
    pub at: Timestamp,
    /// Why: a [`ReloadReason`](tugboat_haproxy::ReloadReason)'s name or
    /// `runtime-not-taken`.
    pub reason: String,
    pub result: ApplyResult,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Applies since the controller started, by how they went.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyCounts {
    pub runtime: u64,
    pub reload: u64,
    pub refused: u64,
    pub failed: u64,
}

/// What the controller applied, as [`crate::controller`] concludes each apply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Activity {
    pub last_apply: Option<ApplyRecord>,
    pub last_reload: Option<ReloadRecord>,
    pub applies: ApplyCounts,
}

/// One watched kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchSync {
    pub kind: String,
    /// When its first complete list arrived (`None`: not yet).
    pub synced_at: Option<Timestamp>,
}

/// Where the objects come from, and since when they are complete.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceSync {
    /// `api` (the Kubernetes API) or `manifests` (a folder).
    pub source: String,
    /// When the controller got the source's first complete snapshot.
    pub synced_at: Option<Timestamp>,
    /// The API source's watches, per kind (empty for a folder).
    pub watches: Vec<WatchSync>,
}

impl SourceSync {
    /// A source named `source` (`api` or `manifests`) with `watches` (the API source's
    /// kinds), not synced yet.
    pub fn new(source: &str, watches: &[&str]) -> Self {
        Self {
            source: source.to_string(),
            synced_at: None,
            watches: watches
                .iter()
                .map(|kind| WatchSync {
                    kind: kind.to_string(),
                    synced_at: None,
                })
                .collect(),
        }
    }
}

/// The controller process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessReport {
    pub version: String,
    pub uptime_seconds: u64,
    /// Resident set size (`None` off Linux).
    pub resident_bytes: Option<u64>,
    /// Whether this replica holds the leader Lease (`None`: no election, a folder).
    pub leader: Option<bool>,
}

/// What haproxy says through its master CLI (`show proc`, `@1 show info`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HaproxyReport {
    pub version: Option<String>,
    pub master_pid: Option<u32>,
    pub worker_pid: Option<u32>,
    /// Reloads since the master started, successful or not.
    pub reloads: Option<u64>,
    /// Failed reloads since the last successful one.
    pub failed_reloads: Option<u64>,
    pub worker_uptime_seconds: Option<u64>,
    pub current_connections: Option<u64>,
    /// Why some of the above is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One problem of one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProblemReport {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub field: String,
    pub reason: String,
    pub message: String,
}

impl From<&ObjectProblem> for ProblemReport {
    fn from(problem: &ObjectProblem) -> Self {
        Self {
            kind: problem.object.kind.to_string(),
            namespace: problem.object.namespace.to_string(),
            name: problem.object.name.to_string(),
            field: problem.field.clone(),
            reason: problem.reason.as_str().to_string(),
            message: problem.message.clone(),
        }
    }
}

/// What `/status` answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusReport {
    /// When the report was made.
    pub now: Timestamp,
    /// haproxy runs a configuration built from a complete snapshot.
    pub ready: bool,
    pub controller: ProcessReport,
    pub haproxy: HaproxyReport,
    #[serde(flatten)]
    pub activity: Activity,
    pub source: SourceSync,
    pub problems: Vec<ProblemReport>,
}

impl StatusReport {
    /// The report of `status` with the figures of the moment.
    pub fn new(
        status: &ControllerStatus,
        controller: ProcessReport,
        haproxy: HaproxyReport,
    ) -> Self {
        Self {
            now: Timestamp::now(),
            ready: status.ready,
            controller,
            haproxy,
            activity: status.activity.clone(),
            source: status.source.clone(),
            problems: status.problems.iter().map(ProblemReport::from).collect(),
        }
    }
}

/// Objects listed with their problems on the screen; the rest are counted.
const OBJECTS_SHOWN: usize = 10;
/// Problems listed per object; the rest are counted.
const PROBLEMS_SHOWN_PER_OBJECT: usize = 3;
/// Longest message kept of an error.
const MESSAGE_LIMIT: usize = 300;

/// An error's text fit for the status: its first line, cut before any payload (`<<`)
/// and at [`MESSAGE_LIMIT`] characters, so a certificate's key sent in a command never
/// shows.
pub fn safe_message(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    let line = line.split_once("<<").map_or(line, |(before, _)| before);
    line.trim().chars().take(MESSAGE_LIMIT).collect()
}

/// The one-screen text form of a report.
pub fn render_text(report: &StatusReport) -> String {
    let mut out = String::new();
    let controller = &report.controller;
    let leader = match controller.leader {
        Some(true) => "leader",
        Some(false) => "not the leader",
        None => "no leader election",
    };
    let rss = controller
        .resident_bytes
        .map_or_else(|| "RSS unknown".to_string(), |b| format!("RSS {}", mib(b)));
    let _ = writeln!(
        out,
        "Tugboat {}: {}, up {}, {rss}, {leader}",
        controller.version,
        if report.ready {
            "ready"
        } else {
            "NOT READY (no configuration applied yet)"
        },
        span(controller.uptime_seconds),
    );
    let _ = writeln!(out, "haproxy     {}", haproxy_line(&report.haproxy));
    let now = report.now;
    let _ = writeln!(
        out,
        "Last apply  {}",
        report.activity.last_apply.as_ref().map_or_else(
            || "none yet".to_string(),
            |apply| {
                let mut line = format!(
                    "{}: {} ({}), {} in {} ms",
                    when(apply.at, now),
                    apply.delivery,
                    apply.built,
                    apply.result.as_str(),
                    apply.duration_ms
                );
                if let Some(message) = &apply.message {
                    let _ = write!(line, ": {message}");
                }
                line
            }
        )
    );
    let _ = writeln!(
        out,
        "Last reload {}",
        report.activity.last_reload.as_ref().map_or_else(
            || "none since the controller started".to_string(),
            |reload| {
                let result = match reload.result {
                    ApplyResult::Applied => "loaded",
                    other => other.as_str(),
                };
                let mut line = format!("{}: {}, {result}", when(reload.at, now), reload.reason);
                if let Some(message) = &reload.message {
                    let _ = write!(line, ": {message}");
                }
                line
            }
        )
    );
    let counts = &report.activity.applies;
    let _ = writeln!(
        out,
        "Applies     {} runtime, {} reload, {} refused, {} failed",
        counts.runtime, counts.reload, counts.refused, counts.failed
    );
    let _ = writeln!(out, "Source      {}", source_line(&report.source, now));
    problems_lines(&mut out, &report.problems);
    out
}

fn haproxy_line(haproxy: &HaproxyReport) -> String {
    let mut line = haproxy.version.clone().unwrap_or_else(|| "?".into());
    let pid = |pid: Option<u32>| pid.map_or_else(|| "none".to_string(), |p| p.to_string());
    if haproxy.master_pid.is_some() {
        let _ = write!(
            line,
            ", master pid {}, worker pid {}",
            pid(haproxy.master_pid),
            pid(haproxy.worker_pid)
        );
    }
    if let Some(uptime) = haproxy.worker_uptime_seconds {
        let _ = write!(line, " (up {}", span(uptime));
        if let Some(connections) = haproxy.current_connections {
            let _ = write!(line, ", {connections} connections");
        }
        line.push(')');
    }
    if let Some(reloads) = haproxy.reloads {
        let _ = write!(
            line,
            ", {reloads} reloads ({} failed since the last success)",
            haproxy.failed_reloads.unwrap_or(0)
        );
    }
    if let Some(error) = &haproxy.error {
        let _ = write!(line, "; {error}");
    }
    line
}

fn source_line(source: &SourceSync, now: Timestamp) -> String {
    let name = match source.source.as_str() {
        "api" => "Kubernetes API",
        "manifests" => "manifests folder",
        other => other,
    };
    let mut line = match source.synced_at {
        Some(at) => format!("{name}, synced {}", when(at, now)),
        None => format!("{name}, NOT SYNCED yet"),
    };
    let (synced, waiting): (Vec<&WatchSync>, Vec<&WatchSync>) =
        source.watches.iter().partition(|w| w.synced_at.is_some());
    if !synced.is_empty() {
        let kinds: Vec<&str> = synced.iter().map(|w| w.kind.as_str()).collect();
        let _ = write!(line, "\n            watches synced: {}", kinds.join(", "));
    }
    if !waiting.is_empty() {
        let kinds: Vec<&str> = waiting.iter().map(|w| w.kind.as_str()).collect();
        let _ = write!(line, "\n            NOT listed yet: {}", kinds.join(", "));
    }
    line
}

fn problems_lines(out: &mut String, problems: &[ProblemReport]) {
    let mut by_object: BTreeMap<(&str, &str, &str), Vec<&ProblemReport>> = BTreeMap::new();
    for problem in problems {
        by_object
            .entry((&problem.kind, &problem.namespace, &problem.name))
            .or_default()
            .push(problem);
    }
    if by_object.is_empty() {
        out.push_str("Problems    none\n");
        return;
    }
    let _ = writeln!(
        out,
        "Problems    {} on {} object{}",
        problems.len(),
        by_object.len(),
        if by_object.len() == 1 { "" } else { "s" }
    );
    for ((kind, namespace, name), problems) in by_object.iter().take(OBJECTS_SHOWN) {
        let object = if namespace.is_empty() {
            format!("{kind} {name}")
        } else {
            format!("{kind} {namespace}/{name}")
        };
        let _ = writeln!(out, "  {object}");
        for problem in problems.iter().take(PROBLEMS_SHOWN_PER_OBJECT) {
            let _ = writeln!(out, "    {}: {}", problem.field, problem.message);
        }
        if problems.len() > PROBLEMS_SHOWN_PER_OBJECT {
            let _ = writeln!(
                out,
                "    ... and {} more",
                problems.len() - PROBLEMS_SHOWN_PER_OBJECT
            );
        }
    }
    if by_object.len() > OBJECTS_SHOWN {
        let rest: usize = by_object.values().skip(OBJECTS_SHOWN).map(Vec::len).sum();
        let _ = writeln!(
            out,
            "  ... and {} more objects ({rest} problems): `tugboat status --output json` lists all",
            by_object.len() - OBJECTS_SHOWN
        );
    }
}

/// `2026-11-26T14:50:03Z (12s ago)`.
fn when(at: Timestamp, now: Timestamp) -> String {
    let ago = now.duration_since(at).max(SignedDuration::ZERO);
    format!(
        "{} ({} ago)",
        at.round(
            TimestampRound::new()
                .smallest(Unit::Second)
                .mode(RoundMode::Trunc)
        )
        .unwrap_or(at),
        span(ago.as_secs().unsigned_abs())
    )
}

/// `3d04h`, `2h03m`, `5m02s`, `12s`.
fn span(seconds: u64) -> String {
    let (days, hours, minutes, secs) = (
        seconds / 86_400,
        seconds / 3_600 % 24,
        seconds / 60 % 60,
        seconds % 60,
    );
    if days > 0 {
        format!("{days}d{hours:02}h")
    } else if hours > 0 {
        format!("{hours}h{minutes:02}m")
    } else if minutes > 0 {
        format!("{minutes}m{secs:02}s")
    } else {
        format!("{secs}s")
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// How `tugboat status` prints the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// One screen for a person.
    Text,
    /// The JSON `/status` answers.
    Json,
}

/// `tugboat status`: asks a running controller for its status.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// The controller's admin address (`--controller-port`).
    #[arg(long, default_value = "http://127.0.0.1:6060")]
    pub address: String,
    #[arg(long, value_enum, default_value = "text")]
    pub output: Output,
}

/// How long `tugboat status` waits for the controller.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Prints the status of the controller at `args.address`. Exits 1 when it cannot be
/// reached or is not ready.
pub fn run(args: &StatusArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let body = runtime
        .block_on(async {
            tokio::time::timeout(FETCH_TIMEOUT, fetch_status(&args.address))
                .await
                .unwrap_or_else(|_| bail!("no answer within {FETCH_TIMEOUT:?}"))
        })
        .with_context(|| {
            format!(
                "cannot get the status of the controller at {}",
                args.address
            )
        })?;
    let report: StatusReport = serde_json::from_slice(&body).with_context(|| {
        format!(
            "the controller at {} answered /status with something else than its status",
            args.address
        )
    })?;
    match args.output {
        Output::Json => {
            let mut text = String::from_utf8_lossy(&body).into_owned();
            text.push('\n');
            crate::command_edges::print_out(&text);
        }
        Output::Text => crate::command_edges::print_out(&render_text(&report)),
    }
    Ok(if report.ready {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// GETs `/status` (JSON) from the admin server at `address` (`http://HOST:PORT`).
async fn fetch_status(address: &str) -> anyhow::Result<Bytes> {
    let base: hyper::Uri = address
        .parse()
        .with_context(|| format!("--address {address}: not a URL"))?;
    if base.scheme_str().is_some_and(|scheme| scheme != "http") {
        bail!("--address {address}: only http:// (the admin port serves plain HTTP)");
    }
    let host = base
        .host()
        .with_context(|| format!("--address {address}: no host"))?;
    let port = base.port_u16().unwrap_or(80);
    let stream = tokio::net::TcpStream::connect((host.trim_matches(['[', ']']), port)).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let request = hyper::Request::get("/status")
        .header(hyper::header::HOST, format!("{host}:{port}"))
        .header(hyper::header::ACCEPT, "application/json")
        .body(Empty::<Bytes>::new())?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    if !status.is_success() {
        bail!(
            "/status answered {status}: {}",
            String::from_utf8_lossy(&body).trim()
        );
    }
    Ok(body)
}

#[cfg(test)]
mod tests;
