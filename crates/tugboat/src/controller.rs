//! The controller loop: every new snapshot is built, rendered, planned and applied, one
//! at a time, with one log line per update and its timings.
//!
//! Bursts of changes are coalesced (a short debounce). A configuration haproxy refuses
//! is not retried until the desired state changes; a failure to reach haproxy is retried
//! with backoff.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::sync::watch;
use tugboat_haproxy::{Applier, ApplyError, MasterCli, RenderSettings, RenderedFiles};
use tugboat_model::{Desired, ObjectKey, ObjectProblem, Snapshot};

use crate::metrics::{ApplyOutcome, Metrics};

/// What the controller loop needs to know.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    pub master_socket: PathBuf,
    pub render: RenderSettings,
    /// How long to wait for more changes before applying.
    pub debounce: Duration,
    /// Where to count applies and problems (None: not counted).
    pub metrics: Option<Arc<Metrics>>,
}

impl ControllerConfig {
    pub fn new(master_socket: PathBuf, render: RenderSettings) -> Self {
        Self {
            master_socket,
            render,
            debounce: Duration::from_millis(20),
            metrics: None,
        }
    }
}

const RETRY_FIRST: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// What the controller tells the rest of the process (health, status, Events) after
/// every update.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControllerStatus {
    /// True once haproxy runs a configuration built from a complete snapshot.
    pub ready: bool,
    /// Problems of the last build, sorted.
    pub problems: Vec<ObjectProblem>,
    /// Ingresses with at least one route (or the default backend) in the applied state.
    pub served_ingresses: BTreeSet<ObjectKey>,
}

/// Runs the controller on a folder of manifests, followed live, until an error.
pub async fn run_with_manifests(
    config: ControllerConfig,
    manifests: PathBuf,
    status: watch::Sender<ControllerStatus>,
) -> anyhow::Result<()> {
    let (tx, rx) = watch::channel(Arc::new(Snapshot::default()));
    let source = tokio::spawn(tugboat_kube::watch_folder(manifests, tx));
    tokio::select! {
        result = run(config, rx, status) => result,
        result = source => {
            result.context("the manifests watcher stopped")?
                .context("cannot follow the manifests folder")?;
            Ok(())
        }
    }
}

/// Runs until the source closes its channel. The first apply waits for the source's
/// first complete snapshot and for haproxy's master socket. `status` is updated after
/// every update.
pub async fn run(
    config: ControllerConfig,
    mut snapshots: watch::Receiver<Arc<Snapshot>>,
    status: watch::Sender<ControllerStatus>,
) -> anyhow::Result<()> {
    let mut applier = Applier::new(MasterCli::new(&config.master_socket));
    applier.cli().wait_until_ready().await;
    let mut state = LoopState::default();
    let mut retry_in: Option<Duration> = None;
    loop {
        let retry = async {
            match retry_in {
                Some(delay) => tokio::time::sleep(delay).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = snapshots.changed() => {
                if changed.is_err() {
                    return Ok(());
                }
                tokio::time::sleep(config.debounce).await;
            }
            () = retry => {}
        }
        let snapshot = snapshots.borrow_and_update().clone();
        retry_in = match update(&config, &mut applier, &mut state, &snapshot, &status).await {
            Ok(()) => None,
            Err(UpdateFailure::Retry) => {
                Some(retry_in.map_or(RETRY_FIRST, |d| (d * 2).min(RETRY_MAX)))
            }
            Err(UpdateFailure::WaitForChange) => None,
        };
    }
}

#[derive(Default)]
struct LoopState {
    problems: BTreeSet<ObjectProblem>,
    /// Files haproxy refused; not tried again until the desired files change.
    refused: Option<RenderedFiles>,
}

enum UpdateFailure {
    Retry,
    WaitForChange,
}

async fn update(
    config: &ControllerConfig,
    applier: &mut Applier,
    state: &mut LoopState,
    snapshot: &Snapshot,
    status: &watch::Sender<ControllerStatus>,
) -> Result<(), UpdateFailure> {
    let started = Instant::now();
    let output = tugboat_model::build(snapshot);
    let build = started.elapsed();
    report_problems(&mut state.problems, &output.problems);
    if let Some(metrics) = &config.metrics {
        metrics.set_problems(&output.problems);
    }
    status.send_if_modified(|status| {
        let changed = status.problems != output.problems;
        status.problems.clone_from(&output.problems);
        changed
    });

    let render_started = Instant::now();
    let rendered = tugboat_haproxy::render(&output.desired, &config.render);
    let render = render_started.elapsed();

    if state.refused.as_ref() == Some(&rendered) {
        tracing::debug!("desired state is the one haproxy refused; waiting for a change");
        return Err(UpdateFailure::WaitForChange);
    }
    let plan = applier.plan(rendered.clone());
    if plan.is_empty() {
        tracing::debug!("no change");
        return Ok(());
    }
    let reload = plan.reload;
    let result = applier.apply(plan).await;
    if let Some(metrics) = &config.metrics {
        let outcome = match &result {
            Ok(report) if report.reloaded => ApplyOutcome::Reloaded,
            Ok(_) => ApplyOutcome::Runtime,
            Err(ApplyError::Refused { .. }) => ApplyOutcome::Refused,
            Err(_) => ApplyOutcome::Failed { reload },
        };
        metrics.record_apply(outcome, started.elapsed());
    }
    let ms = |d: Duration| (d.as_secs_f64() * 10_000.0).round() / 10.0;
    match result {
        Ok(report) => {
            state.refused = None;
            let served = served_ingresses(&output.desired);
            status.send_if_modified(|status| {
                let changed = !status.ready || status.served_ingresses != served;
                status.ready = true;
                status.served_ingresses = served;
                changed
            });
            tracing::info!(
                objects = snapshot.len(),
                backends = output.desired.backends.len(),
                routes = output.desired.routes.len(),
                files_written = report.files_written,
                reloaded = report.reloaded,
                build_ms = ms(build),
                render_ms = ms(render),
                write_ms = ms(report.write),
                reload_ms = ms(report.reload),
                total_ms = ms(started.elapsed()),
                "applied"
            );
            Ok(())
        }
        Err(ApplyError::Refused { message }) => {
            tracing::error!(
                total_ms = ms(started.elapsed()),
                "haproxy refused the new configuration; it keeps serving the previous one \
                 and the previous files are back in place. haproxy said:\n{message}"
            );
            state.refused = Some(rendered);
            Err(UpdateFailure::WaitForChange)
        }
        Err(err) => {
            tracing::error!(
                total_ms = ms(started.elapsed()),
                "update failed, will retry: {err}"
            );
            Err(UpdateFailure::Retry)
        }
    }
}

/// The Ingresses that contribute a route or the default backend.
fn served_ingresses(desired: &Desired) -> BTreeSet<ObjectKey> {
    desired
        .routes
        .iter()
        .map(|route| route.ingress.clone())
        .chain(desired.default_backend_owner.clone())
        .collect()
}

/// Logs problems that are new since the last update, and those that went away.
fn report_problems(known: &mut BTreeSet<ObjectProblem>, problems: &[ObjectProblem]) {
    let problems: BTreeSet<ObjectProblem> = problems.iter().cloned().collect();
    for problem in problems.difference(known) {
        tracing::warn!(reason = problem.reason.as_str(), "{problem}");
    }
    for problem in known.difference(&problems) {
        tracing::info!("resolved: {problem}");
    }
    *known = problems;
}
