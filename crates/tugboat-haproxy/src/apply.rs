//! Carrying out a [`Plan`]: files first, then haproxy; the last good files come back
//! when haproxy refuses the new ones.
//!
//! The [`Applier`] is the only owner of the master socket. It remembers the files haproxy
//! is known to run, so that a refused reload leaves the folder exactly as haproxy last
//! loaded it, and a later reload (or a restart of haproxy) never picks up a broken config.

use std::time::{Duration, Instant};

use thiserror::Error;

use crate::cli::{CliError, MasterCli, ProcInfo, ReloadOutcome};
use crate::files::{self, FileError};
use crate::plan::{self, Plan};
use crate::render::RenderedFiles;

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
}

/// What one apply did, with its timings.
#[derive(Debug, Clone, Default)]
pub struct ApplyReport {
    pub files_written: usize,
    pub reloaded: bool,
    pub write: Duration,
    pub reload: Duration,
}

/// Applies plans to one haproxy, one at a time.
pub struct Applier {
    cli: MasterCli,
    /// The files haproxy is known to run (on disk and loaded).
    applied: RenderedFiles,
    /// Set when haproxy may not run `applied` (start-up, a failed command).
    state_unknown: bool,
    master: Option<ProcInfo>,
}

impl Applier {
    /// An applier for the haproxy behind `cli`. Nothing is known about what it runs, so
    /// the first apply reloads.
    pub fn new(cli: MasterCli) -> Self {
        Self {
            cli,
            applied: RenderedFiles::default(),
            state_unknown: true,
            master: None,
        }
    }

    pub fn cli(&self) -> &MasterCli {
        &self.cli
    }

    /// The files haproxy is known to run.
    pub fn applied(&self) -> &RenderedFiles {
        &self.applied
    }

    /// Plans the change to `desired` without doing anything.
    pub fn plan(&self, desired: RenderedFiles) -> Plan {
        plan::plan(&self.applied, desired, self.state_unknown)
    }

    /// Applies a plan made by [`Applier::plan`].
    pub async fn apply(&mut self, plan: Plan) -> Result<ApplyReport, ApplyError> {
        let mut report = ApplyReport::default();
        if plan.is_empty() {
            return Ok(report);
        }
        // What is on disk before the first write is the fallback, e.g. the init config.
        if self.state_unknown && self.applied.files.is_empty() {
            self.applied = files::read_current(plan.files.files.keys());
        }
        let started = Instant::now();
        let on_disk = files::read_current(plan.changed.iter());
        report.files_written = files::write_changed(&plan.files, &on_disk)?;
        report.write = started.elapsed();

        if plan.reload {
            let started = Instant::now();
            let outcome = self.cli.reload().await;
            report.reload = started.elapsed();
            report.reloaded = true;
            match outcome {
                Ok(ReloadOutcome::Loaded { log }) => {
                    tracing::debug!(%log, "haproxy reloaded");
                }
                Ok(ReloadOutcome::Refused { message }) => {
                    files::restore(&self.applied, &plan.files)?;
                    return Err(ApplyError::Refused { message });
                }
                Err(err) => {
                    // The new files are in place but haproxy may not run them: reload
                    // again next time.
                    self.state_unknown = true;
                    return Err(err.into());
                }
            }
            self.master = self.cli.show_proc().await.ok();
        }
        self.applied = plan.files;
        self.state_unknown = false;
        Ok(report)
    }

    /// Checks that haproxy is still the one the applied state was sent to. A restarted
    /// haproxy loaded the files from disk, which are the applied ones, so there is
    /// nothing to redo for files; the answer matters for state kept only at runtime.
    pub async fn haproxy_restarted(&mut self) -> Result<bool, CliError> {
        let now = self.cli.show_proc().await?;
        let restarted = self
            .master
            .as_ref()
            .is_some_and(|before| before.master_pid != now.master_pid);
        self.master = Some(now);
        Ok(restarted)
    }
}
