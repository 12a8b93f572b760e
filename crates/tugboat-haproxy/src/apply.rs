//! Carrying out a [`Plan`]: files first, then haproxy (runtime commands, or a reload);
//! the last good files come back when haproxy refuses new ones.
//!
//! The [`Applier`] is the only owner of the master socket. It remembers what haproxy is
//! known to run ([`Applied`]), so that a refused reload leaves the folder exactly as
//! haproxy last loaded it, a runtime command with an unexpected answer falls back to a
//! reload of the (already written) files, and a restarted controller can adopt a running
//! haproxy without reloading it (see [`Applier::adopt`]).
//!
//! Its file work (publishing, removing, restoring, syncing, reading back, the marker and
//! the fingerprint of the files) runs on a blocking thread ([`blocking`]): the plan and
//! the state it needs move there and back, so the runtime's workers never wait for the
//! disk.

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use thiserror::Error;
use tugboat_model::{Desired, Patch, stable_hash};

use crate::blocking::{blocking, blocking_with};
use crate::cli::{CliError, MasterCli, ProcInfo, ReloadOutcome};
use crate::files::{self, FileError};
use crate::layout::{Layout, Server};
use crate::plan::{self, Applied, Plan, ReloadReason, ReloadWindow};
use crate::render::{self, RenderSettings, RenderedFiles};
use crate::runtime::{CliStep, Phase, RuntimeChange, is_slot_line};

/// Why an apply did not make the desired state live.
#[derive(Debug, Error)]
pub enum ApplyError {
    #[error("writing haproxy's files failed: {0}")]
    Files(#[from] FileError),
    #[error("talking to haproxy failed: {0}")]
    Cli(#[from] CliError),
    /// haproxy refused the new configuration; it keeps serving the previous one, and the
    /// previous files are back in place.
    #[error("haproxy refused the new configuration and keeps the previous one: {message}")]
    Refused { message: String },
    /// A runtime command of a patch was not taken: what haproxy runs is not known, and
    /// the next apply reloads the whole state.
    #[error("haproxy did not take a runtime update: {0}")]
    RuntimeNotTaken(String),
}

/// How haproxy took an apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Nothing to do.
    Nothing,
    /// Runtime commands only.
    Runtime,
    /// A reload, for this reason.
    Reload(ReloadReason),
    /// Runtime commands were refused and a reload followed.
    RuntimeThenReload,
}

impl Delivery {
    pub fn as_str(self) -> &'static str {
        match self {
            Delivery::Nothing => "nothing",
            Delivery::Runtime => "runtime",
            Delivery::Reload(_) => "reload",
            Delivery::RuntimeThenReload => "runtime-fallback-reload",
        }
    }

    pub fn reloaded(self) -> bool {
        matches!(self, Delivery::Reload(_) | Delivery::RuntimeThenReload)
    }
}

/// What one apply did, with its timings.
#[derive(Debug, Clone)]
pub struct ApplyReport {
    pub delivery: Delivery,
    pub files_written: usize,
    pub runtime_commands: usize,
    pub write: Duration,
    pub runtime: Duration,
    pub reload: Duration,
}

/// The marker written after every successful apply: which master, after how many
/// reloads, ran which files. It lets a restarted controller adopt a running haproxy.
const MARKER: &str = ".tugboat-applied";

/// The width of the marker's header line: its longest (the largest pid and reload
/// count) is 69 characters.
const MARKER_HEADER_WIDTH: usize = 80;

/// Applies plans to one haproxy, one at a time.
pub struct Applier {
    cli: MasterCli,
    /// Shared with the blocking threads that do the file work.
    settings: Arc<RenderSettings>,
    applied: Option<Applied>,
    master: Option<ProcInfo>,
    /// New backends may go at runtime where haproxy can take them
    /// (`--dynamic-backends`); whether it can is `settings.dynamic_backends`.
    dynamic_backends_allowed: bool,
    /// The master whose worker refused `add backend`: until haproxy restarts, new
    /// backends reload.
    add_backend_refused_by: Option<u32>,
    /// What the marker on disk was written from; moves to the blocking thread that
    /// writes the next one, and back.
    marker: MarkerState,
}

/// What the next marker is written from.
#[derive(Debug, Default)]
struct MarkerState {
    /// The hash of each applied file, for the marker's fingerprint.
    hashes: FileHashes,
    /// The listing of the marker on disk, when this applier wrote it.
    listing: Option<String>,
}

/// The hash of each file, kept between applies, so that the fingerprint of a large
/// state costs the files that changed.
#[derive(Debug, Default)]
struct FileHashes {
    by_path: HashMap<PathBuf, u64>,
    /// The fingerprint: the sum of the hashes.
    total: u64,
}

impl FileHashes {
    /// [`fingerprint`] of `files`, of which only `changed` and `removed` differ from
    /// the last call.
    fn fingerprint(
        &mut self,
        files: &RenderedFiles,
        changed: &[PathBuf],
        removed: &[PathBuf],
    ) -> u64 {
        for path in changed.iter().chain(removed) {
            if let Some(old) = self.by_path.remove(path) {
                self.total = self.total.wrapping_sub(old);
            }
        }
        for path in changed {
            if let Some(contents) = files.files.get(path) {
                let hash = file_hash(path, contents);
                self.by_path.insert(path.clone(), hash);
                self.total = self.total.wrapping_add(hash);
            }
        }
        // Not what was given before (the first call, or files that changed unsaid):
        // every file again.
        if self.by_path.len() != files.files.len() {
            self.by_path = files
                .files
                .iter()
                .map(|(path, contents)| (path.clone(), file_hash(path, contents)))
                .collect();
            self.total = self.by_path.values().fold(0, |sum, h| sum.wrapping_add(*h));
        }
        self.total
    }
}

impl Applier {
    /// An applier for the haproxy behind `cli`. Nothing is known about what it runs until
    /// [`Applier::adopt`] or the first apply (a reload).
    ///
    /// `settings.dynamic_backends` says whether new backends may go at runtime; they do
    /// once the running haproxy is known to take them ([`supports_dynamic_backends`]).
    pub fn new(cli: MasterCli, mut settings: RenderSettings) -> Self {
        let dynamic_backends_allowed = settings.dynamic_backends;
        settings.dynamic_backends = false;
        Self {
            cli,
            settings: Arc::new(settings),
            applied: None,
            master: None,
            dynamic_backends_allowed,
            add_backend_refused_by: None,
            marker: MarkerState::default(),
        }
    }

    /// Remembers the master `info` (from `show proc`), and with it whether haproxy takes
    /// new backends at runtime: its version says it can, it is allowed, and this master's
    /// worker has not refused one.
    fn learn_master(&mut self, info: Option<ProcInfo>) {
        let dynamic = info.as_ref().is_some_and(|info| {
            self.dynamic_backends_allowed
                && supports_dynamic_backends(&info.version)
                && self.add_backend_refused_by != Some(info.master_pid)
        });
        if info.is_some() && dynamic != self.settings.dynamic_backends {
            if dynamic {
                tracing::info!("haproxy adds new backends at runtime, with no reload");
            }
            Arc::make_mut(&mut self.settings).dynamic_backends = dynamic;
        }
        self.master = info;
    }

    /// Whether haproxy runs new backends at runtime now.
    pub fn dynamic_backends(&self) -> bool {
        self.settings.dynamic_backends
    }

    pub fn cli(&self) -> &MasterCli {
        &self.cli
    }

    pub fn settings(&self) -> &RenderSettings {
        &self.settings
    }

    /// What haproxy is known to run.
    pub fn applied(&self) -> Option<&Applied> {
        self.applied.as_ref()
    }

    /// Plans the change to `desired` without doing anything.
    pub fn plan(&self, desired: Desired) -> Plan {
        plan::plan(self.applied.as_ref(), desired, &self.settings)
    }

    /// Plans the change to `desired` within the reload window ([`plan::plan_within`]) on
    /// a blocking thread, so that the runtime's other tasks (the watches, the admin
    /// server) go on while a large state renders.
    pub async fn plan_blocking(&mut self, desired: Desired, window: ReloadWindow) -> Plan {
        let applied = self.applied.take();
        let settings = self.settings.clone();
        let (applied, plan) = blocking_with(applied, move |applied| {
            plan::plan_within(applied.as_ref(), desired, &settings, window)
        })
        .await;
        self.applied = applied;
        plan
    }

    /// Plans a patch of what haproxy runs (see [`plan::plan_patch`]); `None` when the
    /// patch needs the whole state planned. The state haproxy runs moves into the plan:
    /// until [`Applier::apply`] carries it out, nothing is known.
    pub fn plan_patch(&mut self, patch: &Patch) -> Option<Plan> {
        let applied = self.applied.take()?;
        match plan::plan_patch(applied, patch, &self.settings) {
            Ok(plan) => Some(plan),
            Err(refused) => {
                tracing::debug!(why = refused.why, "the patch is planned as a whole state");
                self.applied = Some(refused.applied);
                None
            }
        }
    }

    /// Adopts the running haproxy when the marker says that this very master, with no
    /// reload since, runs the files that are on disk now (a restarted controller). The
    /// server slots are read back from the config. Returns whether it adopted.
    ///
    /// The files may hold more than `desired` renders: backends no route uses any more
    /// stay until the next reload, and a restarted controller does not know them. The
    /// next plan drops them from the files without a reload (see the planner), so a
    /// restart with unchanged inputs costs no reload.
    pub async fn adopt(&mut self, desired: &Desired) -> bool {
        // No marker (a fresh haproxy): nothing to adopt, nothing to render.
        let marker_path = self.settings.config_dir.join(MARKER);
        let Ok(marker) = blocking(move || files::read_text(&marker_path)).await else {
            return false;
        };
        let Ok(info) = self.cli.show_proc().await else {
            return false;
        };
        let mut lines = marker.lines();
        let header = lines.next().unwrap_or("").trim();
        // The files `desired` renders, those the marker lists (the files of unused
        // backends and access lists, which a fresh render does not have), and the config
        // files on disk: the backends may be spread over more files than `desired`
        // needs, or fewer.
        let mut paths: BTreeSet<PathBuf> = lines
            .filter(|line| !line.is_empty())
            .map(PathBuf::from)
            .collect();
        paths.extend(render::rendered_paths(desired, &self.settings));
        let settings = self.settings.clone();
        let (on_disk, on_disk_fingerprint) = blocking(move || {
            paths.extend(files::config_files_in(&settings.config_dir).unwrap_or_default());
            let on_disk = files::read_current(paths.iter());
            // Only files that are all there can match the marker.
            let on_disk_fingerprint =
                (on_disk.files.len() == paths.len()).then(|| fingerprint(&on_disk));
            (on_disk, on_disk_fingerprint)
        })
        .await;
        let adopted =
            on_disk_fingerprint.is_some_and(|sum| header == marker_header(&info, sum).trim_end());
        let settings = &self.settings;
        if adopted {
            let mut layout = Layout::default();
            for (path, config) in &on_disk.files {
                if settings.is_config(path) {
                    layout.backends.extend(parse_layout(config).backends);
                }
            }
            self.applied = Some(Applied {
                desired: desired.clone(),
                layout,
                files: on_disk,
            });
            self.learn_master(Some(info));
        }
        adopted
    }

    /// Carries out a plan made by [`Applier::plan`].
    pub async fn apply(&mut self, plan: Plan) -> Result<ApplyReport, ApplyError> {
        let mut report = ApplyReport {
            delivery: Delivery::Nothing,
            files_written: 0,
            runtime_commands: 0,
            write: Duration::ZERO,
            runtime: Duration::ZERO,
            reload: Duration::ZERO,
        };
        if plan.is_empty() {
            // Nothing to do: what haproxy runs is the plan's state (a patch plan holds
            // it), unless the plan holds back a reload, and with it the state.
            if plan.held.is_none() {
                self.applied = Some(plan.next);
            }
            return Ok(report);
        }
        // A reload with no applied state to go back to (the first apply, or after an
        // error): what is on disk now is put back if haproxy refuses the new files: the
        // files it renders, and config files it does not (removed before a reload). Read
        // for this apply only: kept, a large state's files would be held twice. (A patch
        // plan holds the applied state, and never reloads.)
        let read_on_disk = self.applied.is_none() && plan.reload.is_some();
        let settings = self.settings.clone();
        let (mut plan, on_disk, published) = blocking(move || {
            let on_disk = read_on_disk.then(|| {
                let configs = files::config_files_in(&settings.config_dir).unwrap_or_default();
                files::read_current(plan.next.files.files.keys().chain(&configs))
            });
            let started = Instant::now();
            // Published (renamed into place) now; flushed to disk after a reload.
            let published = files::publish(&plan.next.files, &plan.changed)
                .map(|written| (written, started.elapsed()));
            (plan, on_disk, published)
        })
        .await;
        (report.files_written, report.write) = published?;

        let mut reload = plan.reload;
        if reload.is_none() && !plan.runtime.is_empty() {
            // New backends first, in a batch of their own: what follows (servers, the
            // routes to them) goes only once haproxy has them.
            let (new_backends, rest): (Vec<&RuntimeChange>, Vec<&RuntimeChange>) = plan
                .runtime
                .iter()
                .partition(|c| c.phase() == Phase::NewBackend);
            let steps_of = |changes: Vec<&RuntimeChange>| -> Vec<CliStep> {
                changes.iter().flat_map(|c| c.steps()).collect()
            };
            let (first, steps) = (steps_of(new_backends), steps_of(rest));
            report.runtime_commands = first.len() + steps.len();
            let started = Instant::now();
            let mut result = Ok(());
            if !first.is_empty() {
                result = self.run_steps(&first).await;
                if let Err(problem) = &result
                    && let Some(refusal) = add_backend_refusal(problem)
                {
                    self.refuse_dynamic_backends(refusal);
                    reload = Some(ReloadReason::NewBackend);
                }
            }
            if reload.is_none() && result.is_ok() {
                result = self.run_steps(&steps).await;
            }
            report.runtime = started.elapsed();
            match result {
                _ if reload.is_some() => {}
                Ok(()) => report.delivery = Delivery::Runtime,
                Err(problem) if plan.patched => {
                    tracing::warn!("runtime update not taken ({problem}); the whole state follows");

                    return Err(ApplyError::RuntimeNotTaken(problem));
                }
                Err(problem) => {
                    tracing::warn!("runtime update not taken ({problem}); reloading instead");

                    reload = Some(ReloadReason::UnknownState);
                    report.delivery = Delivery::RuntimeThenReload;
                }
            }
        }
        if let Some(reason) = reload {
            if report.delivery != Delivery::RuntimeThenReload {
                report.delivery = Delivery::Reload(reason);
            }
            // haproxy loads every `*.cfg` of its folder: a backends' file left from a
            // state with more of them would define its backends twice.
            let settings = self.settings.clone();
            let removed;
            (plan, removed) = blocking_with(plan, move |plan| {
                remove_other_configs(&settings.config_dir, &plan.next.files)
            })
            .await;
            removed?;
            let started = Instant::now();
            let outcome = self.cli.reload().await;
            report.reload = started.elapsed();
            match outcome {
                Ok(ReloadOutcome::Loaded { log }) => tracing::debug!(%log, "haproxy reloaded"),
                Ok(ReloadOutcome::Refused { message }) => {
                    let applied = self.applied.take();
                    let (applied, restored) = blocking(move || {
                        let previous = applied.as_ref().map(|a| &a.files).or(on_disk.as_ref());
                        let restored = match previous {
                            Some(previous) => files::restore(previous, &plan.next.files),
                            None => Ok(()),
                        };
                        (applied, restored)
                    })
                    .await;
                    self.applied = applied;
                    restored?;
                    return Err(ApplyError::Refused { message });
                }
                Err(err) => {
                    // The new files are in place but haproxy may not run them.
                    self.applied = None;
                    return Err(err.into());
                }
            }
        }
        // A reload's files are flushed to disk, a runtime update's left to the kernel's
        // writeback (see [`sync_and_remove`]); files no longer needed go.
        let reloaded = reload.is_some();
        if reloaded || !plan.removed.is_empty() {
            let synced;
            (plan, synced) = blocking_with(plan, move |plan| sync_and_remove(plan, reloaded)).await;
            report.write += synced?;
        }
        // Only a reload (or a restart, which the next check finds) changes what
        // `show proc` says.
        if reload.is_some() || self.master.is_none() {
            let info = self.cli.show_proc().await.ok();
            self.learn_master(info);
        }
        if let Some(info) = self.master.clone() {
            let marker = std::mem::take(&mut self.marker);
            let settings = self.settings.clone();
            let ((returned, marker), written) =
                blocking_with((plan, marker), move |(plan, marker)| {
                    marker.write(plan, &info, &settings, reloaded)
                })
                .await;
            plan = returned;
            self.marker = marker;
            written?;
        }
        self.applied = Some(plan.next);
        Ok(report)
    }

    /// Remembers that this master's worker refused `add backend` (`answer`): new
    /// backends reload until haproxy restarts. Said once per master.
    fn refuse_dynamic_backends(&mut self, answer: &str) {
        let master = self.master.as_ref().map(|info| info.master_pid);
        tracing::warn!(
            answer,
            "haproxy refused to add a backend at runtime; new backends reload until \
             haproxy restarts"
        );
        self.add_backend_refused_by = master;
        Arc::make_mut(&mut self.settings).dynamic_backends = false;
    }

    /// Sends the steps in one batch and checks every answer.
    async fn run_steps(&self, steps: &[CliStep]) -> Result<(), String> {
        let commands: Vec<String> = steps.iter().map(|s| s.command.clone()).collect();
        let answers = self.cli.batch(&commands).await.map_err(|e| e.to_string())?;
        for (step, answer) in steps.iter().zip(&answers) {
            if !step.expect.accepts(answer) {
                return Err(format!(
                    "'{}' answered '{}'",
                    step.command.lines().next().unwrap_or(""),
                    answer.trim()
                ));
            }
        }
        Ok(())
    }

    /// Whether the running haproxy was built without Lua, when its config needs Lua
    /// for `custom-http-errors` (see [`crate::error_backend::WITHOUT_LUA_VARIABLE`]);
    /// `false` when it does not need it.
    pub async fn haproxy_without_lua(&self) -> Result<bool, CliError> {
        let needs = self
            .applied()
            .is_some_and(|a| crate::error_backend::needs_script(&a.desired.feature_sets));
        if !needs {
            return Ok(false);
        }
        let answer = self
            .cli
            .worker_command(&format!(
                "show env {}",
                crate::error_backend::WITHOUT_LUA_VARIABLE
            ))
            .await?;
        Ok(crate::error_backend::says_without_lua(&answer))
    }

    /// Checks whether haproxy is still the master the applied state was sent to. A
    /// restarted haproxy loaded the files on disk; what it runs is then not known for
    /// sure (a restart may have raced an update), so the next apply reloads.
    pub async fn haproxy_restarted(&mut self) -> Result<bool, CliError> {
        let now = self.cli.show_proc().await?;
        let restarted = self
            .master
            .as_ref()
            .is_some_and(|before| before.master_pid != now.master_pid);
        if restarted {
            self.applied = None;
        }
        self.learn_master(Some(now));
        Ok(restarted)
    }
}

/// Whether haproxy `version` (as `show proc` prints it) has `add backend`: 3.4 and
/// later.
pub fn supports_dynamic_backends(version: &str) -> bool {
    let mut numbers = version
        .split(|c: char| !c.is_ascii_digit())
        .map(|part| part.parse::<u32>().ok());
    match (numbers.next().flatten(), numbers.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= (3, 4),
        _ => false,
    }
}

/// The answer of a refused `add backend` in a batch's `problem`, when haproxy refused
/// it as a command it does not have or does not allow (not for a reason of this one
/// backend, such as a name it already has: those reload as any refused update does).
fn add_backend_refusal(problem: &str) -> Option<&str> {
    let answer = problem.strip_prefix("'@1 add backend ")?;
    let answer = answer.split_once("' answered '")?.1;
    let refused = [
        "Unknown command",
        "experimental",
        "Permission denied",
        "restricted",
    ];
    refused
        .iter()
        .any(|text| answer.contains(text))
        .then_some(answer.strip_suffix('\'').unwrap_or(answer))
}

/// Removes the config files of `config_dir` that `files` does not have: haproxy loads
/// every `*.cfg` of its folder. Blocking.
fn remove_other_configs(config_dir: &Path, files: &RenderedFiles) -> Result<(), FileError> {
    for path in files::config_files_in(config_dir)? {
        if !files.files.contains_key(&path) {
            files::remove(&path)?;
        }
    }
    Ok(())
}

/// After haproxy took `plan`: flushes its files to disk after a reload (returns how
/// long that took), and removes the files it no longer needs. Blocking.
///
/// A reload's files are flushed to disk; a runtime update's are left to the kernel's
/// writeback (see the `files` module: only a machine crash loses them, and the
/// controller rewrites every file at its next start). An `fsync` per update was about
/// half of the controller's CPU for a change.
fn sync_and_remove(plan: &Plan, reloaded: bool) -> Result<Duration, FileError> {
    let mut took = Duration::ZERO;
    if reloaded {
        let synced = Instant::now();
        files::sync(&plan.changed)?;
        took = synced.elapsed();
    }
    for path in &plan.removed {
        files::remove(path)?;
    }
    Ok(took)
}

impl MarkerState {
    /// Writes the marker of `plan`'s files, run by the master `info`. Blocking.
    fn write(
        &mut self,
        plan: &Plan,
        info: &ProcInfo,
        settings: &RenderSettings,
        reloaded: bool,
    ) -> Result<(), FileError> {
        let files_fingerprint =
            self.hashes
                .fingerprint(&plan.next.files, &plan.changed, &plan.removed);
        let header = marker_header(info, files_fingerprint);
        let listing = marker_listing(&plan.next.files, settings);
        let marker = settings.config_dir.join(MARKER);
        // A runtime update that leaves the listing as it is rewrites the header in
        // place: no new file and rename for each change. A torn header (a crash during
        // the write) only fails to match: the next start reloads.
        let in_place = !reloaded
            && self.listing.as_ref() == Some(&listing)
            && files::overwrite_start(&marker, header.as_bytes()).is_ok();
        if !in_place {
            let text = format!("{header}\n{listing}");
            if reloaded {
                files::write_atomic(&marker, text.as_bytes(), 0o644)?;
            } else {
                files::write_visible(&marker, text.as_bytes(), 0o644)?;
            }
            self.listing = Some(listing);
        }
        Ok(())
    }
}

/// The marker's listing: the paths of the files that may belong to what lingers unused
/// until the next reload (backend TLS files, access-list patterns), one a line, which
/// a restarted controller's render does not have. The header line (which master, after
/// how many reloads, which files by fingerprint) comes first.
fn marker_listing(files: &RenderedFiles, settings: &RenderSettings) -> String {
    let mut text = String::new();
    for file in [settings.backend_file("-"), settings.pattern_file("-")] {
        let Some(folder) = file.parent() else {
            continue;
        };
        // A folder's files sort together, right after the folder: only they are walked,
        // not the thousands of certificates and maps beside them.
        let in_folder = files
            .files
            .range::<Path, _>((Bound::Excluded(folder), Bound::Unbounded))
            .map(|(path, _)| path)
            .take_while(|path| path.starts_with(folder));
        for path in in_folder.filter(|path| path.parent() == Some(folder)) {
            text.push_str(&path.to_string_lossy());
            text.push('\n');
        }
    }
    text
}

/// The marker's first line, padded to a fixed width so that the next one can replace
/// it in place (read back trimmed).
fn marker_header(info: &ProcInfo, files_fingerprint: u64) -> String {
    let header = format!(
        "master={} reloads={} files={files_fingerprint:016x}",
        info.master_pid, info.reloads,
    );
    format!("{header:<MARKER_HEADER_WIDTH$}")
}

/// A stable hash of paths and contents, enough to tell two sets of files apart: the
/// sum of the hashes of the files, so that it follows a change of a few files cheaply.
pub fn fingerprint(files: &RenderedFiles) -> u64 {
    files
        .files
        .iter()
        .map(|(path, contents)| file_hash(path, contents))
        .fold(0, u64::wrapping_add)
}

/// The hash of one file: its path and its contents.
fn file_hash(path: &Path, contents: &str) -> u64 {
    let path = stable_hash(path.as_os_str().as_encoded_bytes());
    let contents = stable_hash(contents.as_bytes());
    stable_hash(&[path.to_le_bytes(), contents.to_le_bytes()].concat())
}

/// Reads the server slots back from a config this crate rendered.
pub fn parse_layout(config: &str) -> Layout {
    let mut layout = Layout::default();
    let mut current = None;
    for line in config.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["backend", name, ..] => {
                current = tugboat_model::BackendName::parse(name);
                if let Some(name) = &current {
                    layout.backends.insert(name.clone(), Vec::new());
                }
            }
            ["server", name, addr, rest @ ..] if is_slot_line(&format!("server {name} ")) => {
                let Some(slots) = current.as_ref().and_then(|n| layout.backends.get_mut(n)) else {
                    continue;
                };
                let server = if rest.contains(&"disabled") {
                    None
                } else {
                    addr.parse::<std::net::SocketAddr>().ok().map(|a| Server {
                        endpoint: tugboat_model::Endpoint {
                            address: a.ip(),
                            port: a.port(),
                        },
                        draining: rest.windows(2).any(|w| w == ["weight", "0"]),
                    })
                };
                slots.push(server);
            }
            _ => {}
        }
    }
    layout
}

/// The path of the marker in a config folder (for tests and diagnostics).
pub fn marker_path(config_dir: &Path) -> PathBuf {
    config_dir.join(MARKER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_lists_the_files_an_unused_backend_may_leave_behind() {
        let settings = RenderSettings::example();
        let info = ProcInfo {
            master_pid: 7,
            reloads: 3,
            failed_reloads: 0,
            version: "3.0".into(),
            worker_pid: Some(8),
        };
        let files = RenderedFiles {
            files: [
                (settings.config_file(), "global\n".into()),
                (settings.backend_file("api-ca.pem"), "pem".into()),
                (settings.pattern_file("allow-1"), "10.0.0.0/8\n".into()),
                (settings.certificate("shop"), "pem".into()),
                (settings.external_auth_script(), "--".into()),
            ]
            .into(),
        };
        let header = marker_header(&info, fingerprint(&files));
        assert_eq!(header.len(), MARKER_HEADER_WIDTH);
        let longest = ProcInfo {
            master_pid: u32::MAX,
            reloads: u64::MAX,
            ..info
        };
        assert_eq!(marker_header(&longest, u64::MAX).len(), MARKER_HEADER_WIDTH);
        let listed: BTreeSet<PathBuf> = marker_listing(&files, &settings)
            .lines()
            .map(PathBuf::from)
            .collect();
        assert_eq!(
            listed,
            BTreeSet::from([
                settings.pattern_file("allow-1"),
                settings.backend_file("api-ca.pem")
            ])
        );
    }

    #[test]
    fn dynamic_backends_are_found_from_the_version_and_the_answer() {
        for (version, supports) in [
            ("2.6.12-1+deb12u4", false),
            ("3.0.11", false),
            ("3.2.0", false),
            ("3.4.0", true),
            ("3.10-dev1", true),
            ("4.0.1", true),
            ("unknown", false),
        ] {
            assert_eq!(supports_dynamic_backends(version), supports, "{version}");
        }
        let problem = |answer: &str| {
            format!("'@1 add backend ns_api_80 from tugboat mode http' answered '{answer}'")
        };
        assert_eq!(
            add_backend_refusal(&problem("Unknown command: 'add backend'")),
            Some("Unknown command: 'add backend'")
        );
        assert!(
            add_backend_refusal(&problem(
                "This command is restricted to experimental mode only."
            ))
            .is_some()
        );
        // A refusal of this one backend is not a refusal of the command.
        assert_eq!(
            add_backend_refusal(&problem("Backend 'x' already exists.")),
            None
        );
        assert_eq!(
            add_backend_refusal("'@1 add server a/s1 1.2.3.4:80' answered 'Unknown command'"),
            None
        );
    }

    #[test]
    fn kept_hashes_give_the_fingerprint_of_the_whole_files() {
        let mut files = RenderedFiles::default();
        for (path, contents) in [("/a", "one"), ("/b", "two"), ("/c", "three")] {
            files.files.insert(PathBuf::from(path), contents.into());
        }
        let mut hashes = FileHashes::default();
        assert_eq!(hashes.fingerprint(&files, &[], &[]), fingerprint(&files));
        files.files.insert("/b".into(), "changed".into());
        files.files.remove(Path::new("/c"));
        files.files.insert("/d".into(), "new".into());
        let changed = [PathBuf::from("/b"), PathBuf::from("/d")];
        let removed = [PathBuf::from("/c")];
        assert_eq!(
            hashes.fingerprint(&files, &changed, &removed),
            fingerprint(&files)
        );
        assert_eq!(hashes.by_path.len(), 3);
        // A change not said: found by the count, or not at all (the caller says them).
        files.files.insert("/e".into(), "unsaid".into());
        assert_eq!(hashes.fingerprint(&files, &[], &[]), fingerprint(&files));
    }
}
