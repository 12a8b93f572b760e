//! The admin server on `--controller-port`: `/healthz` (the process runs and haproxy's
//! master socket answers), `/readyz` (the first apply is done), `/metrics` and
//! `/status` (the controller's state as JSON, or as one screen of text with
//! `?format=text` or `Accept: text/plain`; see [`crate::status`]). With `--profiling`,
//! also `/debug/pprof/profile?seconds=N` (a CPU profile in pprof's protobuf format, or an
//! SVG flame graph with `format=svg`), `/debug/pprof/flamegraph?seconds=N` and
//! `/debug/pprof/heap` (alias `/debug/heap`, the heap figures as JSON or text); without
//! it they answer 404. See [`crate::profiling`].

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tugboat_haproxy::MasterCli;
use tugboat_haproxy::blocking::blocking;

use crate::controller::ControllerStatus;
use crate::metrics::{Metrics, ProcessUsage};
use crate::profiling::{self, CpuFormat, ProfileError, Profiling};
use crate::status::{HaproxyReport, ProcessReport, StatusReport};

/// How long `/healthz` waits for haproxy's master socket.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);

/// What the admin endpoints look at.
#[derive(Clone)]
pub struct AdminState {
    pub metrics: Arc<Metrics>,
    pub status: watch::Receiver<ControllerStatus>,
    pub master_socket: PathBuf,
    /// Whether `/debug/pprof/` serves profiles (`--profiling`).
    pub profiling: Profiling,
}

/// Serves the admin endpoints on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, state: AdminState) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                tracing::warn!("admin server: cannot accept a connection: {err}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let state = state.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(route(&state, &request).await) }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn route(state: &AdminState, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n".into());
    }
    match request.uri().path() {
        "/healthz" => {
            let cli = MasterCli::new(&state.master_socket);
            match tokio::time::timeout(HEALTH_TIMEOUT, cli.show_proc()).await {
                Ok(Ok(_)) => text(StatusCode::OK, "ok\n".into()),
                Ok(Err(err)) => text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("haproxy master socket: {err}\n"),
                ),
                Err(_) => text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "haproxy master socket: no answer\n".into(),
                ),
            }
        }
        "/readyz" => {
            if state.status.borrow().ready {
                text(StatusCode::OK, "ok\n".into())
            } else {
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "waiting for the first apply\n".into(),
                )
            }
        }
        "/metrics" => {
            // The request counters come from haproxy; encoding reads the process figures
            // from `/proc`: off the runtime.
            let requests = state.metrics.requests.scrape(&state.master_socket).await;
            let metrics = state.metrics.clone();
            let body = blocking(move || metrics.encode_with(&requests)).await;
            with_content_type(
                text(StatusCode::OK, body),
                "text/plain; version=0.0.4; charset=utf-8",
            )
        }
        "/status" => {
            let report = status_report(state).await;
            if wants_text(request) {
                text(StatusCode::OK, crate::status::render_text(&report))
            } else {
                json(&report)
            }
        }
        "/debug/pprof/profile" | "/debug/pprof/flamegraph" if state.profiling.enabled() => {
            let wants_svg = request.uri().path() == "/debug/pprof/flamegraph"
                || query_value(request, "format") == Some("svg");
            cpu_profile(&state.profiling, request, wants_svg).await
        }
        "/debug/pprof/heap" | "/debug/heap" if state.profiling.enabled() => {
            match profiling::heap_figures().await {
                None => text(
                    StatusCode::NOT_IMPLEMENTED,
                    "no heap figures: /proc/self/status cannot be read\n".into(),
                ),
                Some(figures) if wants_text(request) => text(StatusCode::OK, figures.to_text()),
                Some(figures) => json(&figures),
            }
        }
        _ => text(StatusCode::NOT_FOUND, "not found\n".into()),
    }
}

/// A CPU profile over `?seconds=N` (default [`profiling::DEFAULT_SECONDS`], at most
/// [`profiling::MAX_SECONDS`]), one at a time.
async fn cpu_profile(
    profiling: &Profiling,
    request: &Request<Incoming>,
    wants_svg: bool,
) -> Response<Full<Bytes>> {
    let seconds = match query_value(request, "seconds") {
        None => profiling::DEFAULT_SECONDS,
        Some(value) => match value.parse::<u64>() {
            Ok(seconds @ 1..=profiling::MAX_SECONDS) => seconds,
            _ => {
                return text(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "seconds must be a whole number from 1 to {}\n",
                        profiling::MAX_SECONDS
                    ),
                );
            }
        },
    };
    let format = if wants_svg {
        CpuFormat::FlameGraph
    } else {
        CpuFormat::Pprof
    };
    match profiling
        .cpu_profile(Duration::from_secs(seconds), format)
        .await
    {
        Ok(body) => {
            let mut response = Response::new(Full::new(Bytes::from(body)));
            let content_type = match format {
                CpuFormat::Pprof => "application/octet-stream",
                CpuFormat::FlameGraph => "image/svg+xml",
            };
            response.headers_mut().insert(
                "content-type",
                hyper::header::HeaderValue::from_static(content_type),
            );
            response
        }
        Err(ProfileError::Disabled) => text(StatusCode::NOT_FOUND, "not found\n".into()),
        Err(ProfileError::Busy) => text(
            StatusCode::CONFLICT,
            "a CPU profile is already being taken; try again when it is done\n".into(),
        ),
        Err(ProfileError::Profiler(err)) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot take a CPU profile: {err}\n"),
        ),
    }
}

/// The value of `name` in the request's query, if given.
fn query_value<'a>(request: &'a Request<Incoming>, name: &str) -> Option<&'a str> {
    request
        .uri()
        .query()?
        .split('&')
        .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
}

fn json(value: &impl serde::Serialize) -> Response<Full<Bytes>> {
    match serde_json::to_string_pretty(value) {
        Ok(body) => with_content_type(text(StatusCode::OK, body), "application/json"),
        Err(err) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot encode the answer: {err}\n"),
        ),
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
}

fn with_content_type(
    mut response: Response<Full<Bytes>>,
    value: &'static str,
) -> Response<Full<Bytes>> {
    response.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static(value),
    );
    response
}

/// Whether a request for JSON (`/status`, the heap figures) asks for text instead:
/// `?format=text`, or an `Accept` that names `text/plain` and not JSON.
fn wants_text(request: &Request<Incoming>) -> bool {
    if query_value(request, "format") == Some("text") {
        return true;
    }
    request
        .headers()
        .get_all(hyper::header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|accept| accept.contains("text/plain") && !accept.contains("application/json"))
}

/// The status of the moment: the controller's record, the process' figures and what
/// haproxy says through its master CLI.
async fn status_report(state: &AdminState) -> StatusReport {
    let haproxy = haproxy_report(&state.master_socket).await;
    let (uptime_seconds, resident_bytes) = blocking(|| {
        (
            process_uptime_seconds().unwrap_or(0),
            ProcessUsage::read().map(|usage| usage.resident_bytes),
        )
    })
    .await;
    let status = state.status.borrow().clone();
    let controller = ProcessReport {
        version: env!("CARGO_PKG_VERSION").to_string(),
        uptime_seconds,
        resident_bytes,
        leader: status.leader,
    };
    StatusReport::new(&status, controller, haproxy)
}

/// haproxy's version, pids and reloads (`show proc`, from the master) and its worker's
/// uptime and connections (`@1 show info`), each within [`HEALTH_TIMEOUT`].
async fn haproxy_report(master_socket: &std::path::Path) -> HaproxyReport {
    let cli = MasterCli::new(master_socket).with_timeouts(HEALTH_TIMEOUT, HEALTH_TIMEOUT);
    let mut report = HaproxyReport::default();
    let mut errors = Vec::new();
    match tokio::time::timeout(HEALTH_TIMEOUT, cli.show_proc()).await {
        Ok(Ok(proc)) => {
            report.version = Some(proc.version);
            report.master_pid = Some(proc.master_pid);
            report.worker_pid = proc.worker_pid;
            report.reloads = Some(proc.reloads);
            report.failed_reloads = Some(proc.failed_reloads);
        }
        Ok(Err(err)) => errors.push(format!("show proc: {err}")),
        Err(_) => errors.push("show proc: no answer".to_string()),
    }
    if report.worker_pid.is_some() {
        match tokio::time::timeout(HEALTH_TIMEOUT, cli.worker_command("show info")).await {
            Ok(Ok(info)) => {
                let field = |name: &str| {
                    info.lines()
                        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
                        .and_then(|value| value.trim().parse().ok())
                };
                report.worker_uptime_seconds = field("Uptime_sec");
                report.current_connections = field("CurrConns");
            }
            Ok(Err(err)) => errors.push(format!("@1 show info: {err}")),
            Err(_) => errors.push("@1 show info: no answer".to_string()),
        }
    }
    if !errors.is_empty() {
        report.error = Some(crate::status::safe_message(&errors.join("; ")));
    }
    report
}

/// How long this process has run, from `/proc` (`None` off Linux). Blocking.
#[allow(
    clippy::disallowed_methods,
    reason = "reads /proc; its async caller runs it through the blocking helper"
)]
fn process_uptime_seconds() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let system_uptime = std::fs::read_to_string("/proc/uptime").ok()?;
    // Field 22 (starttime, in clock ticks since boot); the command name in field 2 may
    // hold spaces, so count from its closing parenthesis (field 3 is index 0).
    let after_name = &stat[stat.rfind(')')? + 1..];
    let started_ticks: u64 = after_name.split_whitespace().nth(19)?.parse().ok()?;
    let system_seconds: f64 = system_uptime.split_whitespace().next()?.parse().ok()?;
    let started_seconds = started_ticks as f64 / crate::metrics::CLOCK_TICKS_PER_SECOND;
    Some((system_seconds - started_seconds).max(0.0) as u64)
}
