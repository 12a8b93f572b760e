//! The controller loop: every new snapshot is built, rendered, planned and applied, one
//! at a time, with one log line per update and its timings.
//!
//! Changes are coalesced here and only here, with no timer: a change that arrives while
//! nothing is applied goes out at once; the changes that arrive during an apply are
//! gathered into the next one (the source's channel keeps only its latest snapshot).
//! Reloads alone wait, for `reload_window`. A configuration haproxy refuses
//! is not retried until the desired state changes; a failure to reach haproxy is retried
//! with backoff.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use anyhow::Context;
use tokio::sync::watch;
use tugboat_haproxy::apply::fingerprint;
use tugboat_haproxy::blocking::blocking;
use tugboat_haproxy::{
    Applier, ApplyError, ApplyReport, Delivery, MasterCli, ReloadWindow, RenderSettings,
};
use tugboat_model::backoff::Backoff;
use tugboat_model::class::ClassFilter;
use tugboat_model::features::Snippet;
use tugboat_model::gateway::GatewayStatus;
use tugboat_model::problem::ProblemReason;
use tugboat_model::{
    BuildOutput, Desired, Model, ObjectKeys, ObjectProblem, Patch, Rebuilt, Settings, Snapshot,
    Update,
};

use crate::metrics::{ApplyOutcome, Metrics};
pub use crate::status::ControllerStatus;
use crate::status::{ApplyRecord, ApplyResult, ReloadRecord, SourceSync};

/// What the controller loop needs to know.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    pub master_socket: PathBuf,
    pub render: RenderSettings,
    /// How long changes that need a reload are collected into one reload. Runtime
    /// changes never wait for it.
    pub reload_window: Duration,
    /// How objects become the desired state (`now` is set at every update).
    pub model: Settings,
    /// How often haproxy is checked for a restart between updates.
    pub haproxy_check_interval: Duration,
    /// Where to count applies and problems (None: not counted).
    pub metrics: Option<Arc<Metrics>>,
}

impl ControllerConfig {
    pub fn new(master_socket: PathBuf, render: RenderSettings) -> Self {
        Self {
            master_socket,
            render,
            reload_window: Duration::from_millis(500),
            model: Settings::new(0),
            haproxy_check_interval: Duration::from_secs(5),
            metrics: None,
        }
    }
}

const RETRY_FIRST: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// Changes what only `/status` reads, without waking the status' receivers.
pub fn note(status: &watch::Sender<ControllerStatus>, change: impl FnOnce(&mut ControllerStatus)) {
    status.send_if_modified(|status| {
        change(status);
        false
    });
}

/// Runs the controller on a folder of manifests, followed live, until an error. `class`
/// picks the Ingresses served, as on the cluster.
pub async fn run_with_manifests(
    config: ControllerConfig,
    manifests: PathBuf,
    class: ClassFilter,
    status: watch::Sender<ControllerStatus>,
) -> anyhow::Result<()> {
    note(&status, |status| {
        status.source = SourceSync::new("manifests", &[])
    });
    let (tx, rx) = watch::channel(Arc::new(Snapshot::default()));
    let source = tokio::spawn(tugboat_kube::watch_folder(
        manifests,
        class,
        config.model.clone(),
        tx,
    ));
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
    let mut applier = Applier::new(MasterCli::new(&config.master_socket), config.render.clone());
    applier.cli().wait_until_ready().await;
    let mut state = LoopState::default();
    let mut retry_in: Option<Duration> = None;
    let mut backoff = Backoff::new(RETRY_FIRST, RETRY_MAX);
    let mut health = tokio::time::interval(config.haproxy_check_interval);
    health.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut synced = false;
    loop {
        let retry = sleep_or_never(retry_in.map(|d| Instant::now() + d));
        let reload_due = sleep_or_never(reload_wake(&state, config.reload_window, retry_in));
        tokio::select! {
            changed = snapshots.changed() => {
                if changed.is_err() {
                    return Ok(());
                }
                synced = true;
            }
            () = retry => {}
            () = reload_due => {}
            _ = health.tick() => {
                // A restarted haproxy gets the current state again at once.
                if !check_haproxy(&mut applier).await {
                    continue;
                }
            }
        }
        if !synced {
            continue;
        }
        if status.borrow().source.synced_at.is_none() {
            note(&status, |status| {
                status.source.synced_at = Some(k8s_openapi::jiff::Timestamp::now());
            });
        }
        let snapshot = snapshots.borrow_and_update().clone();
        retry_in = match update(&config, &mut applier, &mut state, &snapshot, &status).await {
            Next::OnChange => {
                backoff.reset();
                None
            }
            Next::Now => Some(Duration::ZERO),
            Next::AfterBackoff => Some(backoff.next_delay()),
        };
    }
}

/// When the loop wakes for a reload its window held back. Not while a failed update
/// waits for its backoff: the window's end is then in the past, and waking for it would
/// retry the failed update at once, over and over (a full volume made ~80 tries a
/// second); the retry after the backoff applies the held reload too.
fn reload_wake(state: &LoopState, window: Duration, retry_in: Option<Duration>) -> Option<Instant> {
    if retry_in.is_some_and(|delay| !delay.is_zero()) {
        return None;
    }
    state.reload_due(window)
}

async fn sleep_or_never(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Whether haproxy restarted since the last check.
async fn check_haproxy(applier: &mut Applier) -> bool {
    match applier.haproxy_restarted().await {
        Ok(true) => {
            tracing::warn!("haproxy restarted (new master): applying the current state again");
            true
        }
        Ok(false) => false,
        Err(err) => {
            tracing::warn!("haproxy does not answer: {err}");
            false
        }
    }
}

#[derive(Default)]
struct LoopState {
    /// The model kept between updates: most changes are patches of its last output.
    model: Model,
    /// Whether haproxy runs the model's last output (so that a patch of it applies).
    in_sync: bool,
    problems: BTreeSet<ObjectProblem>,
    /// Fingerprint of the files haproxy refused; not tried again until they change.
    refused: Option<u64>,
    /// When the first change still waiting for a reload arrived.
    reload_pending_since: Option<Instant>,
    /// Whether adopting a running haproxy was tried (once, at the first update).
    adoption_tried: bool,
    /// Snippets haproxy refused (where, lines) and what it said: left out while they
    /// stay the same.
    refused_snippets: BTreeMap<(String, Vec<String>), String>,
    /// Whether the running haproxy lacks the Lua that `custom-http-errors` needs, as it
    /// said after the last reload (`None`: not asked yet).
    without_lua: Option<bool>,
    /// Why the last full plan sent reloads, for the status when haproxy refuses it or
    /// the reload does not get through.
    planned_reload: Option<tugboat_haproxy::ReloadReason>,
}

impl LoopState {
    fn reload_due(&self, window: Duration) -> Option<Instant> {
        self.reload_pending_since.map(|since| since + window)
    }

    /// Whether a reload may happen now: with a window of `window` after the first
    /// change that needed one.
    fn reload_window(&self, window: Duration) -> ReloadWindow {
        let open = window.is_zero()
            || self
                .reload_pending_since
                .is_some_and(|since| since.elapsed() >= window);
        if open {
            ReloadWindow::Open
        } else {
            ReloadWindow::Closed
        }
    }
}

/// What the loop does after an update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Nothing until the next change (applied, or refused by haproxy: the same state
    /// would be refused again).
    OnChange,
    /// Update again at once (without the snippets haproxy refused, or the whole state
    /// after a patch haproxy did not take).
    Now,
    /// Update again after the backoff (haproxy did not answer, a file could not be
    /// written).
    AfterBackoff,
}

/// The model brought to `snapshot`: a patch when haproxy runs its last output and the
/// change allows one, else a full build. Built on a blocking thread: a large state would
/// hold up the runtime's other tasks (the watches, the admin server) for as long.
async fn build(
    state: &mut LoopState,
    snapshot: &Arc<Snapshot>,
    settings: Settings,
    patch_allowed: bool,
) -> Update {
    if !patch_allowed {
        let output = build_full(state, snapshot, settings).await;
        return Update::Full(Box::new(output), Rebuilt::First);
    }
    let mut model = std::mem::take(&mut state.model);
    let snapshot = snapshot.clone();
    let (model, update) = blocking(move || {
        let update = model.update(&snapshot, &settings);
        (model, update)
    })
    .await;
    state.model = model;
    update
}

/// A full build of `snapshot`, whatever changed.
async fn build_full(
    state: &mut LoopState,
    snapshot: &Arc<Snapshot>,
    settings: Settings,
) -> BuildOutput {
    let mut model = std::mem::take(&mut state.model);
    let snapshot = snapshot.clone();
    let (model, output) = blocking(move || {
        let output = model.rebuild(&snapshot, &settings);
        (model, output)
    })
    .await;
    state.model = model;
    output
}

async fn update(
    config: &ControllerConfig,
    applier: &mut Applier,
    state: &mut LoopState,
    snapshot: &Arc<Snapshot>,
    status: &watch::Sender<ControllerStatus>,
) -> Next {
    let started = Instant::now();
    let settings = Settings {
        now: crate::tls::now(),
        ..config.model.clone()
    };
    // Set again only when this update leaves haproxy running the model's output.
    let patch_allowed = std::mem::take(&mut state.in_sync) && applier.applied().is_some();
    let output = match build(state, snapshot, settings.clone(), patch_allowed).await {
        Update::Patch(patch) => {
            let build = started.elapsed();
            if let Some(problems) = patch_problems(applier, state, &patch) {
                report_problems(config, &mut state.problems, status, problems, None);
            }
            if let Some(outcome) = apply_patch(applier, &patch, snapshot, started, build).await {
                return conclude(config, applier, state, status, outcome);
            }
            // The patch needs the whole state planned.
            build_full(state, snapshot, settings).await
        }
        Update::Full(output, reason) => {
            tracing::debug!(
                reason = reason.as_str(),
                detail = reason.detail().unwrap_or(""),
                "full build"
            );
            *output
        }
    };
    let output = without_refused_snippets(state, output);
    let build = started.elapsed();
    report_problems(
        config,
        &mut state.problems,
        status,
        Cow::Owned(output.problems),
        Some(output.gateway),
    );
    let outcome = apply_full(
        config,
        applier,
        state,
        snapshot,
        output.desired,
        started,
        build,
    )
    .await;
    conclude(config, applier, state, status, outcome)
}

/// How one apply ended. [`conclude`] derives everything that follows from it, in one
/// place: the metrics, the status, the log line, what the loop remembers, and what it
/// does next. (The problems of the build are reported before the apply, by
/// [`report_problems`]: the status names them by the time haproxy serves the state.)
struct UpdateOutcome<'p> {
    built: Built<'p>,
    /// The objects of the snapshot.
    objects: usize,
    timings: Timings,
    result: UpdateResult,
}

/// What an update built and planned.
#[derive(Clone, Copy)]
enum Built<'p> {
    /// A patch of the state haproxy runs: runtime commands only.
    Patch(&'p Patch),
    /// The whole desired state.
    Full,
}

impl Built<'_> {
    fn as_str(self) -> &'static str {
        match self {
            Built::Patch(_) => "patch",
            Built::Full => "full",
        }
    }
}

/// Where the time of an update went (the apply's own timings are in its report).
struct Timings {
    build: Duration,
    render: Duration,
    /// From the start of the update to the end of the apply.
    total: Duration,
    /// From the moment the source saw the first change the snapshot carries to the end
    /// of the apply: what a change costs in the controller and haproxy, without its
    /// delivery to the source (`None`: not known, as for the first snapshot). In a burst
    /// it counts from the first change of the snapshot applied: the changes of the
    /// snapshots it replaced in the channel came earlier.
    since_change: Option<Duration>,
}

/// What became of the desired state.
enum UpdateResult {
    /// haproxy already runs it. `runs`: the state after a full plan, whose Ingresses the
    /// status names as served (a patch leaves them as they are).
    Unchanged { runs: Option<Box<Desired>> },
    /// Only a reload is left to do, and its window is closed: nothing is sent now.
    ReloadHeld,
    /// Its files are those haproxy refused last: not sent again.
    RefusedBefore,
    /// haproxy took it. `reload_pending`: a reload its window holds back follows;
    /// `lua_changed`: haproxy answered otherwise than before on Lua, so the problems
    /// change.
    Applied {
        report: ApplyReport,
        reload_pending: bool,
        lua_changed: bool,
    },
    /// haproxy refused the new configuration and keeps serving the previous one.
    /// `files`: the fingerprint of the refused files; `new_snippets`: the snippets (by
    /// where and lines) haproxy did not run before, the likely cause.
    Refused {
        message: String,
        files: u64,
        new_snippets: Vec<(String, Vec<String>)>,
    },
    /// The update did not get through: a file could not be written, haproxy did not
    /// answer, or it did not take a runtime command. `reload`: the plan reloaded.
    Failed { error: ApplyError, reload: bool },
}

impl UpdateResult {
    /// How the metrics, the status and the log count it; `None` when nothing was sent to
    /// haproxy. `planned`: why the last full plan reloaded, the reason of a reload that
    /// was refused or did not get through.
    fn counted(&self, planned: Option<tugboat_haproxy::ReloadReason>) -> Option<ApplyOutcome> {
        let planned = planned
            .unwrap_or(tugboat_haproxy::ReloadReason::UnknownState)
            .as_str();
        match self {
            UpdateResult::Applied { report, .. } => Some(match report.delivery {
                Delivery::Reload(reason) => ApplyOutcome::Reloaded {
                    reason: reason.as_str(),
                },
                Delivery::RuntimeThenReload => ApplyOutcome::RuntimeFellBack,
                Delivery::Runtime | Delivery::Nothing => ApplyOutcome::Runtime,
            }),
            UpdateResult::Refused { .. } => Some(ApplyOutcome::Refused { reason: planned }),
            UpdateResult::Failed { reload, .. } => Some(ApplyOutcome::Failed {
                reload: reload.then_some(planned),
            }),
            UpdateResult::Unchanged { .. }
            | UpdateResult::ReloadHeld
            | UpdateResult::RefusedBefore => None,
        }
    }
}

/// The problems of a patch that changes them, with those of a haproxy without Lua.
fn patch_problems<'p>(
    applier: &Applier,
    state: &LoopState,
    patch: &'p Patch,
) -> Option<Cow<'p, [ObjectProblem]>> {
    match (&patch.problems, applier.applied()) {
        (Some(problems), Some(applied)) if state.without_lua == Some(true) => Some(Cow::Owned(
            with_without_lua_problems(problems.clone(), &applied.desired),
        )),
        (problems, _) => problems.as_deref().map(Cow::Borrowed),
    }
}

/// Carries out a patch of what haproxy runs (endpoints, certificates, the routes of
/// some Ingresses): runtime commands only, planned at the cost of what changed. `None`
/// when the patch needs the whole state planned.
async fn apply_patch<'p>(
    applier: &mut Applier,
    patch: &'p Patch,
    snapshot: &Snapshot,
    started: Instant,
    build: Duration,
) -> Option<UpdateOutcome<'p>> {
    let outcome = |result, render| UpdateOutcome {
        built: Built::Patch(patch),
        objects: snapshot.len(),
        timings: Timings {
            build,
            render,
            total: started.elapsed(),
            since_change: snapshot.first_change.map(|first| first.elapsed()),
        },
        result,
    };
    if patch.is_empty() {
        return Some(outcome(
            UpdateResult::Unchanged { runs: None },
            Duration::ZERO,
        ));
    }
    let plan_started = Instant::now();
    let plan = applier.plan_patch(patch)?;
    let render = plan_started.elapsed();
    let result = match applier.apply(plan).await {
        Ok(report) => UpdateResult::Applied {
            report,
            reload_pending: false,
            lua_changed: false,
        },
        Err(error) => UpdateResult::Failed {
            error,
            reload: false,
        },
    };
    Some(outcome(result, render))
}

/// A full build without the snippets haproxy refused, with the problems those cause and
/// those of a haproxy without Lua.
fn without_refused_snippets(state: &mut LoopState, mut output: BuildOutput) -> BuildOutput {
    leave_out_refused_snippets(
        &mut output.desired,
        &mut output.problems,
        &mut state.refused_snippets,
    );
    if state.without_lua == Some(true) {
        output.problems = with_without_lua_problems(output.problems, &output.desired);
    }
    output
}

/// Plans and carries out the whole desired state.
async fn apply_full(
    config: &ControllerConfig,
    applier: &mut Applier,
    state: &mut LoopState,
    snapshot: &Snapshot,
    desired: Desired,
    started: Instant,
    build: Duration,
) -> UpdateOutcome<'static> {
    if !state.adoption_tried {
        state.adoption_tried = true;
        if applier.adopt(&desired).await {
            tracing::info!("adopted the running haproxy: it runs the files on disk");
        }
    }

    let render_started = Instant::now();
    // The desired state moves into the plan (a large cluster's state is not copied).
    let plan = applier
        .plan_blocking(desired, state.reload_window(config.reload_window))
        .await;
    let render = render_started.elapsed();
    let outcome = |result, total| UpdateOutcome {
        built: Built::Full,
        objects: snapshot.len(),
        timings: Timings {
            build,
            render,
            total,
            since_change: snapshot.first_change.map(|first| first.elapsed()),
        },
        result,
    };
    // A reload waits for its window; what can go at runtime goes now.
    let reload_pending = plan.held.is_some();
    if reload_pending {
        state.reload_pending_since.get_or_insert_with(Instant::now);
        if plan.is_empty() {
            return outcome(UpdateResult::ReloadHeld, started.elapsed());
        }
    }
    if plan.is_empty() {
        let runs = Some(Box::new(plan.next.desired));
        return outcome(UpdateResult::Unchanged { runs }, started.elapsed());
    }
    // Hashing every file is a few milliseconds on a large cluster: done once per plan.
    let files = fingerprint(&plan.next.files);
    if state.refused == Some(files) {
        return outcome(UpdateResult::RefusedBefore, started.elapsed());
    }

    let applied_snippets = applier
        .applied()
        .map(|a| snippets(&a.desired))
        .unwrap_or_default();
    let new_snippets: Vec<(String, Vec<String>)> = snippets(&plan.next.desired)
        .into_keys()
        .filter(|place| !applied_snippets.contains_key(place))
        .collect();
    let reload = plan.reload.is_some();
    state.planned_reload = plan.reload;
    let result = applier.apply(plan).await;
    let total = started.elapsed();
    let result = match result {
        Ok(report) => {
            let lua_changed = (report.delivery.reloaded() || state.without_lua.is_none())
                && lua_changed(applier, state).await;
            UpdateResult::Applied {
                report,
                reload_pending,
                lua_changed,
            }
        }
        Err(ApplyError::Refused { message }) => UpdateResult::Refused {
            message,
            files,
            new_snippets,
        },
        Err(error) => UpdateResult::Failed { error, reload },
    };
    outcome(result, total)
}

/// Everything that follows from how an apply ended: the metrics, the status, the log
/// line, what the loop remembers, and what it does next.
fn conclude(
    config: &ControllerConfig,
    applier: &Applier,
    state: &mut LoopState,
    status: &watch::Sender<ControllerStatus>,
    outcome: UpdateOutcome<'_>,
) -> Next {
    let UpdateOutcome {
        built,
        objects,
        timings,
        result,
    } = outcome;
    let counted = result.counted(state.planned_reload);
    if let (Some(metrics), Some(counted)) = (&config.metrics, counted) {
        // The lag counts once haproxy serves all of the change: not the runtime part
        // sent while a reload waits for its window.
        let reload_pending = matches!(
            result,
            UpdateResult::Applied {
                reload_pending: true,
                ..
            }
        );
        let since_change = timings.since_change.filter(|_| !reload_pending);
        metrics.record_apply(counted, timings.total, since_change);
    }
    let reload_reason = counted.and_then(ApplyOutcome::reload_reason);
    record_activity(status, built, &result, reload_reason, timings.total);
    let total_ms = ms(timings.total);
    match result {
        UpdateResult::Unchanged { runs } => {
            tracing::debug!("no change");
            state.reload_pending_since = None;
            state.in_sync = true;
            if let Some(desired) = runs {
                mark_ready(status, &desired);
            }
            Next::OnChange
        }
        UpdateResult::ReloadHeld => Next::OnChange,
        UpdateResult::RefusedBefore => {
            tracing::debug!("desired state is the one haproxy refused; waiting for a change");
            Next::OnChange
        }
        UpdateResult::Applied {
            report,
            reload_pending,
            lua_changed,
        } => {
            if !reload_pending {
                state.reload_pending_since = None;
            }
            if let Some(applied) = applier.applied() {
                if let Some(metrics) = &config.metrics {
                    metrics.requests.set_routes(&applied.desired);
                }
                match built {
                    Built::Patch(patch) => mark_served(status, &applied.desired, patch),
                    Built::Full => mark_ready(status, &applied.desired),
                }
            }
            // A whole state taken ends the wait for a change of the refused one.
            if let Built::Full = built {
                state.refused = None;
            }
            log_applied(
                applier,
                built,
                objects,
                &timings,
                &report,
                reload_reason,
                reload_pending,
            );
            // With what haproxy said of Lua, the problems change: the whole state
            // again, to report them.
            state.in_sync = !reload_pending && !lua_changed;
            if lua_changed {
                Next::Now
            } else {
                Next::OnChange
            }
        }
        UpdateResult::Refused {
            message,
            new_snippets,
            ..
        } if !new_snippets.is_empty() => {
            // Snippets are the likely cause: leave the new ones out and apply the rest.
            tracing::error!(
                total_ms,
                reload_reason,
                snippets = new_snippets.len(),
                "haproxy refused the new configuration, which has new snippets; the previous \
                 files are back in place, and the rest is applied again without them. \
                 haproxy said:\n{message}"
            );
            let said = refusal_summary(&message);
            for place in new_snippets {
                state.refused_snippets.insert(place, said.clone());
            }
            Next::Now
        }
        UpdateResult::Refused { message, files, .. } => {
            tracing::error!(
                total_ms,
                reload_reason,
                "haproxy refused the new configuration; it keeps serving the previous one \
                 and the previous files are back in place. haproxy said:\n{message}"
            );
            state.refused = Some(files);
            state.reload_pending_since = None;
            Next::OnChange
        }
        UpdateResult::Failed { error, .. } => {
            match built {
                Built::Patch(_) => tracing::error!(total_ms, "update failed: {error}"),
                Built::Full => tracing::error!(
                    total_ms,
                    reload_reason,
                    "update failed, will retry: {error}"
                ),
            }
            match error {
                // The whole state follows at once, with a reload.
                ApplyError::RuntimeNotTaken(_) => Next::Now,
                _ => Next::AfterBackoff,
            }
        }
    }
}

/// Keeps the last apply and reload in the status, for `/status`, when the update sent
/// something to haproxy; `reload_reason`: why it reloaded, when it did.
fn record_activity(
    status: &watch::Sender<ControllerStatus>,
    built: Built<'_>,
    result: &UpdateResult,
    reload_reason: Option<&'static str>,
    total: Duration,
) {
    let (delivery, outcome, message) = match result {
        UpdateResult::Applied { report, .. } => {
            (report.delivery.as_str(), ApplyResult::Applied, None)
        }
        UpdateResult::Refused { message, .. } => (
            "reload",
            ApplyResult::Refused,
            Some(refusal_summary(message)),
        ),
        UpdateResult::Failed { error, reload } => (
            if *reload { "reload" } else { "runtime" },
            ApplyResult::Failed,
            Some(crate::status::safe_message(&error.to_string())),
        ),
        UpdateResult::Unchanged { .. } | UpdateResult::ReloadHeld | UpdateResult::RefusedBefore => {
            return;
        }
    };
    let at = k8s_openapi::jiff::Timestamp::now();
    note(status, |status| {
        let activity = &mut status.activity;
        let counts = &mut activity.applies;
        match outcome {
            ApplyResult::Applied if reload_reason.is_some() => counts.reload += 1,
            ApplyResult::Applied => counts.runtime += 1,
            ApplyResult::Refused => counts.refused += 1,
            ApplyResult::Failed => counts.failed += 1,
        }
        activity.last_apply = Some(ApplyRecord {
            at,
            built: built.as_str().to_string(),
            delivery: delivery.to_string(),
            result: outcome,
            duration_ms: ms(total),
            message: message.clone(),
        });
        if let Some(reason) = reload_reason {
            activity.last_reload = Some(ReloadRecord {
                at,
                reason: reason.to_string(),
                result: outcome,
                message,
            });
        }
    });
}

fn ms(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 10_000.0).round() / 10.0
}

/// The update line: what was applied, how, and where the time went.
fn log_applied(
    applier: &Applier,
    built: Built<'_>,
    objects: usize,
    timings: &Timings,
    report: &ApplyReport,
    reload_reason: Option<&'static str>,
    reload_pending: bool,
) {
    let (backends, routes) = applier.applied().map_or((0, 0), |a| {
        (a.desired.backends.len(), a.desired.routes.len())
    });
    tracing::info!(
        objects,
        backends,
        routes,
        built = built.as_str(),
        delivery = report.delivery.as_str(),
        reload_reason,
        reload_pending,
        files_written = report.files_written,
        runtime_commands = report.runtime_commands,
        build_ms = ms(timings.build),
        render_ms = ms(timings.render),
        write_ms = ms(report.write),
        runtime_ms = ms(report.runtime),
        reload_ms = ms(report.reload),
        total_ms = ms(timings.total),
        since_change_ms = timings.since_change.map(ms),
        "applied"
    );
}

/// Asks haproxy whether it lacks Lua (when its config needs it) and keeps the answer;
/// whether that changed what it said before.
async fn lua_changed(applier: &Applier, state: &mut LoopState) -> bool {
    match applier.haproxy_without_lua().await {
        Ok(without) => {
            let before = state.without_lua.replace(without);
            if without && before != Some(true) {
                tracing::warn!(
                    "haproxy is built without Lua: custom-http-errors cannot replace answers"
                );
            }
            before.is_some_and(|before| before != without) || (before.is_none() && without)
        }
        Err(err) => {
            tracing::warn!("could not ask haproxy whether it has Lua: {err}");
            false
        }
    }
}

/// `problems` and those of a haproxy without Lua for `desired`, sorted.
fn with_without_lua_problems(
    mut problems: Vec<ObjectProblem>,
    desired: &Desired,
) -> Vec<ObjectProblem> {
    problems.extend(tugboat_haproxy::error_backend::without_lua_problems(
        desired,
    ));
    problems.sort();
    problems.dedup();
    problems
}

/// Every snippet of a desired state, by (where, lines): `global` or the backend.
fn snippets(desired: &Desired) -> BTreeMap<(String, Vec<String>), &Snippet> {
    let mut found = BTreeMap::new();
    if let Some(snippet) = &desired.global.snippet {
        found.insert(("global".to_string(), snippet.lines.clone()), snippet);
    }
    for (name, backend) in &desired.backends {
        if let Some(snippet) = &backend.options.snippet {
            found.insert((name.to_string(), snippet.lines.clone()), snippet);
        }
    }
    found
}

/// Takes the snippets haproxy refused out of `desired`, with a problem on the object
/// each comes from; forgets refusals whose snippet is gone or changed.
fn leave_out_refused_snippets(
    desired: &mut Desired,
    problems: &mut Vec<ObjectProblem>,
    refused: &mut BTreeMap<(String, Vec<String>), String>,
) {
    let present: BTreeSet<(String, Vec<String>)> = snippets(desired).into_keys().collect();
    refused.retain(|place, _| present.contains(place));
    if refused.is_empty() {
        return;
    }
    let mut problem = |snippet: &Snippet, field: &str, said: &str| {
        problems.push(ObjectProblem {
            object: snippet.source.clone(),
            field: field.to_string(),
            reason: ProblemReason::InvalidField,
            message: format!(
                "haproxy refused the configuration with this snippet, so it is left out until \
                 it changes; haproxy said: {said}"
            ),
        });
    };
    if let Some(snippet) = &desired.global.snippet
        && let Some(said) = refused.get(&("global".to_string(), snippet.lines.clone()))
    {
        problem(snippet, "data.global-config-snippet", said);
        desired.global.snippet = None;
    }
    for (name, backend) in desired.backends.iter_mut() {
        if let Some(snippet) = &backend.options.snippet
            && let Some(said) = refused.get(&(name.to_string(), snippet.lines.clone()))
        {
            let field = if snippet.source.kind == "ConfigMap" {
                "data.backend-config-snippet"
            } else {
                "metadata.annotations.tugboat.dev/backend-config-snippet"
            };
            problem(snippet, field, said);
            Arc::make_mut(&mut backend.options).snippet = None;
        }
    }
    problems.sort();
    problems.dedup();
}

/// The lines of haproxy's refusal that say what is wrong (its alerts), shortened.
fn refusal_summary(message: &str) -> String {
    let alerts: Vec<&str> = message
        .lines()
        .filter(|l| l.contains("ALERT"))
        .map(|l| l.split_once(" : ").map_or(l, |(_, rest)| rest).trim())
        .take(3)
        .collect();
    let text = if alerts.is_empty() {
        message.lines().next().unwrap_or("").trim().to_string()
    } else {
        alerts.join("; ")
    };
    text.chars().take(400).collect()
}

fn mark_ready(status: &watch::Sender<ControllerStatus>, applied: &Desired) {
    let served = served_ingresses(applied);
    status.send_if_modified(|status| {
        let changed = !status.ready || status.served_ingresses != served;
        status.ready = true;
        status.served_ingresses = served;
        changed
    });
}

/// Brings the served set up to date for the Ingresses whose routes a patch replaced.
fn mark_served(status: &watch::Sender<ControllerStatus>, applied: &Desired, patch: &Patch) {
    status.send_if_modified(|status| {
        let mut changed = false;
        for (key, routes) in &patch.routes {
            let served =
                !routes.after.is_empty() || applied.default_backend_owner.as_ref() == Some(key);
            changed |= if served {
                status.served_ingresses.insert(key.clone()).is_none()
            } else {
                status.served_ingresses.remove(key).is_some()
            };
        }
        changed
    });
}

/// The Ingresses that contribute a route or the default backend (routes of HTTPRoutes
/// left out).
fn served_ingresses(desired: &Desired) -> ObjectKeys {
    desired
        .routes
        .iter()
        .filter(|route| {
            desired.http_route_slots.is_empty()
                || !desired
                    .http_route_slots
                    .contains(&(route.host.clone(), route.path.clone()))
        })
        .map(|route| route.ingress.clone())
        .chain(desired.default_backend_owner.clone())
        .collect()
}

/// Reports what a build found, before its state is applied: logs the problems that are
/// new since the last update and those that went away, counts them in the metrics, and
/// puts them (with the status of the Gateway API objects, after a full build) in the
/// status.
fn report_problems(
    config: &ControllerConfig,
    known: &mut BTreeSet<ObjectProblem>,
    status: &watch::Sender<ControllerStatus>,
    problems: Cow<'_, [ObjectProblem]>,
    gateway: Option<GatewayStatus>,
) {
    if let Some(metrics) = &config.metrics {
        metrics.set_problems(&problems);
    }
    let found: BTreeSet<ObjectProblem> = problems.iter().cloned().collect();
    for problem in found.difference(known) {
        tracing::warn!(reason = problem.reason.as_str(), "{problem}");
    }
    for problem in known.difference(&found) {
        tracing::info!("resolved: {problem}");
    }
    *known = found;
    status.send_if_modified(|status| {
        let mut changed = false;
        if status.problems != *problems {
            status.problems = problems.into_owned();
            changed = true;
        }
        if let Some(gateway) = gateway
            && *status.gateway != gateway
        {
            status.gateway = Arc::new(gateway);
            changed = true;
        }
        changed
    });
}

#[cfg(test)]
mod tests;
