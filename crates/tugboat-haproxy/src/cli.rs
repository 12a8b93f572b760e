//! A client for haproxy's master CLI (`-S <socket>`), for haproxy 2.6 and later.
//!
//! One command per connection: connect, send the command line, half-close, read to EOF.
//! The master re-executes itself on every reload and refuses connections for ~50-100 ms
//! meanwhile, so connection errors (`ECONNREFUSED`, `ENOENT`, `ECONNRESET`) and empty
//! replies are treated as "not there right now" and retried with backoff until a deadline.
//!
//! `reload` differs by version: 3.0 answers `Success=1|0` followed by the startup log;
//! 2.6 answers nothing and closes, and the outcome shows only in `show proc` (the reload
//! counter moves, and `[failed: N]` counts failures since the last success).
//!
//! Right after haproxy (re)starts, its worker is not reachable yet: the master answers
//! `@1 ...` with `Can't find the target PID matching the prefix '@1'` (on 3.2+ while
//! `show proc` already lists the worker, for as long as it initializes), and on 3.4.0
//! about one such connection in fifty then stays open with no more answer. So no
//! exchange waits longer than [`EXCHANGE_IDLE`] for a byte: a silent connection is
//! abandoned; an exchange the master answered that way is abandoned at once; both are
//! tried again on a new connection, once `show proc` lists a worker, until the command's
//! deadline.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::time::{Instant, sleep, timeout, timeout_at};
use tugboat_model::backoff::Backoff;

/// What went wrong talking to the master CLI.
#[derive(Debug, Error)]
pub enum CliError {
    #[error("haproxy master socket {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("haproxy master socket {path}: no answer to '{command}' within {waited:?}")]
    Timeout {
        path: PathBuf,
        command: String,
        waited: Duration,
    },
    #[error("haproxy answered '{command}' with something unexpected: {reply}")]
    UnexpectedReply { command: String, reply: String },
    #[error("haproxy's worker did not become reachable for '{command}' within {waited:?}: {last}")]
    NoWorker {
        command: String,
        waited: Duration,
        last: String,
    },
}

/// Bounds of the retry loop for one command.
const RETRY_FIRST: Duration = Duration::from_millis(10);
const RETRY_MAX: Duration = Duration::from_millis(500);
/// The longest wait between two tries while the worker is not reachable yet.
const NO_WORKER_RETRY_MAX: Duration = Duration::from_millis(100);

/// How long an exchange may go without a byte from haproxy before it is abandoned and
/// tried again on a new connection. haproxy answers a command in milliseconds; a batch
/// answers command after command. Well below the command timeout, so that a connection
/// the master left hanging costs about this much, not the whole timeout.
pub const EXCHANGE_IDLE: Duration = Duration::from_secs(1);

/// What the master answers to `@1 ...` while there is no worker it can reach: before the
/// first worker is forked, or (3.2+) while it still initializes.
const NO_WORKER_YET: &str = "Can't find the target PID matching the prefix '@1'";

/// Client of one master socket. Cheap to clone; holds no connection.
#[derive(Debug, Clone)]
pub struct MasterCli {
    path: PathBuf,
    /// How long one command may take, retries included.
    command_timeout: Duration,
    /// How long a reload may take (3.0 answers when the new worker is up).
    reload_timeout: Duration,
    /// How long an exchange may wait for a byte before it is tried again.
    exchange_idle: Duration,
}

/// The master and current worker, from `show proc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcInfo {
    pub master_pid: u32,
    /// Reloads since the master started, successful or not.
    pub reloads: u64,
    /// Failed reloads since the last successful one.
    pub failed_reloads: u64,
    pub version: String,
    /// The current worker's pid, when there is one.
    pub worker_pid: Option<u32>,
}

/// How a reload ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReloadOutcome {
    /// The new configuration is live. `log` is haproxy's startup log when it sends one.
    Loaded { log: String },
    /// haproxy refused the configuration and keeps running the previous one.
    Refused { message: String },
}

impl MasterCli {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            command_timeout: Duration::from_secs(10),
            reload_timeout: Duration::from_secs(60),
            exchange_idle: EXCHANGE_IDLE,
        }
    }

    /// The same client with another [`EXCHANGE_IDLE`].
    pub fn with_exchange_idle(mut self, idle: Duration) -> Self {
        self.exchange_idle = idle;
        self
    }

    /// The same client with other time limits: `command` for one command (retries
    /// included), `reload` for a reload.
    pub fn with_timeouts(mut self, command: Duration, reload: Duration) -> Self {
        self.command_timeout = command;
        self.reload_timeout = reload;
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs one command, retrying while the socket is away (reloading, restarting), while
    /// an `@1` command finds no worker to reach, and after an exchange that stalled, for up
    /// to the command timeout. Returns the full reply.
    pub async fn command(&self, command: &str) -> Result<String, CliError> {
        self.command_within(command, self.command_timeout).await
    }

    async fn command_within(&self, command: &str, limit: Duration) -> Result<String, CliError> {
        let deadline = Instant::now() + limit;
        let to_worker = targets_worker(command);
        let mut backoff = Backoff::new(RETRY_FIRST, RETRY_MAX);
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let last_error = match self.exchange(command, remaining).await {
                Ok(ReadEnd::Eof(reply)) if reply.is_empty() => CliError::Io {
                    path: self.path.clone(),
                    source: io::Error::new(io::ErrorKind::UnexpectedEof, "empty reply"),
                },
                Ok(ReadEnd::Eof(reply)) if to_worker && is_no_worker(&reply) => {
                    self.no_worker(command, limit, &reply)
                }
                Ok(ReadEnd::Eof(reply)) => return Ok(reply),
                Ok(ReadEnd::NoWorker(reply)) => self.no_worker(command, limit, &reply),
                Ok(ReadEnd::Stalled(_)) => self.stalled(command),
                Err(err @ CliError::Io { .. }) if is_transient(&err) => err,
                Err(err) => return Err(err),
            };
            if Instant::now() + backoff.peek() > deadline {
                return Err(last_error);
            }
            sleep(backoff.next_delay()).await;
        }
    }

    fn no_worker(&self, command: &str, waited: Duration, reply: &str) -> CliError {
        CliError::NoWorker {
            command: first_line(command).to_string(),
            waited,
            last: reply.trim().chars().take(200).collect(),
        }
    }

    fn stalled(&self, command: &str) -> CliError {
        CliError::Timeout {
            path: self.path.clone(),
            command: first_line(command).to_string(),
            waited: self.exchange_idle,
        }
    }

    /// Runs one command on the current worker (`@1 <command>`).
    pub async fn worker_command(&self, command: &str) -> Result<String, CliError> {
        self.command(&format!("@1 {command}")).await
    }

    /// Runs several commands on one connection, in order, and returns one answer per
    /// command. Each command is a line, or a line ending in `<<` followed by its payload
    /// lines and an empty line. The session runs in `prompt` mode, whose prompt after
    /// every answer is what tells the answers apart.
    ///
    /// A batch the master answers with "no worker to reach" (haproxy just started), or
    /// that stalls for [`EXCHANGE_IDLE`], is abandoned and sent again on a new
    /// connection once `show proc` lists a worker, until the command timeout: haproxy
    /// took none of it, or (a worker lost in the middle) what it took again gives an
    /// unexpected answer, and the caller reloads. A connection lost in the middle
    /// returns an error and the caller decides (the applier reloads).
    pub async fn batch(&self, commands: &[String]) -> Result<Vec<String>, CliError> {
        let mut request = String::from("prompt\n");
        for command in commands {
            request.push_str(command);
            if !command.ends_with('\n') {
                request.push('\n');
            }
        }
        let what = format!("a batch of {} commands", commands.len());
        let limit = self.command_timeout + Duration::from_millis(commands.len() as u64);
        let deadline = Instant::now() + limit;
        let to_worker = commands.iter().any(|command| targets_worker(command));
        let mut backoff = Backoff::new(RETRY_FIRST, NO_WORKER_RETRY_MAX);
        let mut tries = 0;
        let reply = loop {
            tries += 1;
            let attempt = timeout_at(deadline, self.batch_once(&request, to_worker))
                .await
                .map_err(|_| CliError::Timeout {
                    path: self.path.clone(),
                    command: what.clone(),
                    waited: limit,
                })??;
            let problem = match attempt {
                ReadEnd::Eof(reply) => break reply,
                ReadEnd::NoWorker(reply) => self.no_worker(&what, limit, &reply),
                ReadEnd::Stalled(_) => self.stalled(&what),
            };
            tracing::debug!(tries, "{problem}; sending the batch again");
            if Instant::now() + backoff.peek() >= deadline {
                return Err(problem);
            }
            sleep(backoff.next_delay()).await;
            if to_worker {
                self.wait_for_worker(deadline, &what).await?;
            }
        };
        let answers = split_prompted(&reply);
        // The first answer is the one to `prompt` itself.
        if answers.len() < commands.len() + 1 {
            return Err(CliError::UnexpectedReply {
                command: what,
                reply: format!(
                    "{} answers: the connection closed early",
                    answers.len().saturating_sub(1)
                ),
            });
        }
        Ok(answers
            .into_iter()
            .skip(1)
            .take(commands.len())
            .map(|answer| answer.trim_start_matches("+ ").to_string())
            .collect())
    }

    /// One connection for a whole batch: the request written while the answers are
    /// read (a large batch must not fill both socket buffers).
    async fn batch_once(&self, request: &str, to_worker: bool) -> Result<ReadEnd, CliError> {
        let io_error = |source| CliError::Io {
            path: self.path.clone(),
            source,
        };
        let stream = connect_retrying(&self.path, self.command_timeout)
            .await
            .map_err(io_error)?;
        let (mut reader, mut writer) = stream.into_split();
        let write = async {
            writer.write_all(request.as_bytes()).await?;
            writer.shutdown().await
        };
        let read = read_reply(&mut reader, self.exchange_idle, to_worker);
        tokio::pin!(write, read);
        let mut written = None;
        let end = loop {
            tokio::select! {
                result = &mut write, if written.is_none() => written = Some(result),
                end = &mut read => break end,
            }
        };
        let end = end.map_err(io_error)?;
        // A write that failed matters only when the master closed without a reason.
        if let (ReadEnd::Eof(_), Some(Err(source))) = (&end, written) {
            return Err(io_error(source));
        }
        Ok(end)
    }

    /// Waits until `show proc` lists a worker (not yet right after a start, before the
    /// master forks it), up to `deadline`.
    async fn wait_for_worker(&self, deadline: Instant, what: &str) -> Result<(), CliError> {
        let mut backoff = Backoff::new(RETRY_FIRST, NO_WORKER_RETRY_MAX);
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let reply = self.command_within("show proc", remaining).await?;
            if parse_show_proc(&reply).is_some_and(|info| info.worker_pid.is_some()) {
                return Ok(());
            }
            if Instant::now() + backoff.peek() >= deadline {
                return Err(self.no_worker(what, remaining, "'show proc' lists no worker"));
            }
            sleep(backoff.next_delay()).await;
        }
    }

    /// `show proc`, parsed.
    pub async fn show_proc(&self) -> Result<ProcInfo, CliError> {
        let reply = self.command("show proc").await?;
        parse_show_proc(&reply).ok_or_else(|| CliError::UnexpectedReply {
            command: "show proc".into(),
            reply: reply.chars().take(500).collect(),
        })
    }

    /// Reloads haproxy and waits for the outcome, on 2.6 and on 3.0+.
    pub async fn reload(&self) -> Result<ReloadOutcome, CliError> {
        let before = self.show_proc().await?;
        let reply = self.send_reload_when_idle().await?;
        if let Some(rest) = reply.strip_prefix("Success=") {
            let log = rest
                .split_once("\n--\n")
                .map_or("", |(_, log)| log)
                .trim_end()
                .to_string();
            return Ok(if rest.starts_with('1') {
                ReloadOutcome::Loaded { log }
            } else {
                ReloadOutcome::Refused { message: log }
            });
        }
        if !reply.trim().is_empty() {
            return Err(CliError::UnexpectedReply {
                command: "reload".into(),
                reply: reply.chars().take(500).collect(),
            });
        }
        // haproxy < 2.7: no answer; the reload counter tells when it is done.
        let deadline = Instant::now() + self.reload_timeout;
        loop {
            sleep(Duration::from_millis(5)).await;
            match self.show_proc().await {
                Ok(after) if after.master_pid != before.master_pid => {
                    // A new master: haproxy was restarted and loaded the files from scratch.
                    return Ok(ReloadOutcome::Loaded { log: String::new() });
                }
                Ok(after) if after.reloads > before.reloads => {
                    return Ok(if after.failed_reloads > 0 {
                        ReloadOutcome::Refused {
                            message: format!(
                                "haproxy {} refused the new configuration ([failed: {}] in \
                                 'show proc'); this version does not report the cause on \
                                 its master socket: see the haproxy container's log",
                                after.version, after.failed_reloads
                            ),
                        }
                    } else {
                        ReloadOutcome::Loaded { log: String::new() }
                    });
                }
                Ok(_) => {}
                Err(err) if Instant::now() > deadline => return Err(err),
                Err(_) => {}
            }
            if Instant::now() > deadline {
                return Err(CliError::Timeout {
                    path: self.path.clone(),
                    command: "reload".into(),
                    waited: self.reload_timeout,
                });
            }
        }
    }

    /// Sends `reload`, again (with backoff, up to the reload timeout) while haproxy 3.1+
    /// answers that the previous reload or its start-up is still loading: since 3.1 the
    /// master no longer re-executes itself, so its socket answers while a new worker is
    /// still parsing, and a second reload meanwhile is refused with
    /// `Success=0 ... Another reload is still in progress.` without touching anything.
    async fn send_reload_when_idle(&self) -> Result<String, CliError> {
        let deadline = Instant::now() + self.reload_timeout;
        let mut backoff = Backoff::new(RETRY_FIRST, RETRY_MAX);
        loop {
            let reply = self.send_reload().await?;
            if !is_busy_reloading(&reply) || Instant::now() + backoff.peek() > deadline {
                return Ok(reply);
            }
            sleep(backoff.next_delay()).await;
        }
    }

    /// Sends `reload`. Connecting is retried (another reload may be in progress); once
    /// the command is sent, a closed or reset connection is the 2.6 answer, not an error.
    async fn send_reload(&self) -> Result<String, CliError> {
        let deadline = Instant::now() + self.command_timeout;
        let mut backoff = Backoff::new(RETRY_FIRST, RETRY_MAX);
        let mut stream = loop {
            match UnixStream::connect(&self.path).await {
                Ok(stream) => break stream,
                Err(source)
                    if is_transient_io(&source) && Instant::now() + backoff.peek() < deadline =>
                {
                    sleep(backoff.next_delay()).await;
                }
                Err(source) => {
                    return Err(CliError::Io {
                        path: self.path.clone(),
                        source,
                    });
                }
            }
        };
        stream
            .write_all(b"reload\n")
            .await
            .map_err(|source| CliError::Io {
                path: self.path.clone(),
                source,
            })?;
        let _ = stream.shutdown().await;
        let mut reply = Vec::new();
        match timeout(self.reload_timeout, stream.read_to_end(&mut reply)).await {
            Ok(Ok(_)) => {}
            Ok(Err(err)) if is_transient_io(&err) => {}
            Ok(Err(source)) => {
                return Err(CliError::Io {
                    path: self.path.clone(),
                    source,
                });
            }
            Err(_) => {
                return Err(CliError::Timeout {
                    path: self.path.clone(),
                    command: "reload".into(),
                    waited: self.reload_timeout,
                });
            }
        }
        Ok(String::from_utf8_lossy(&reply).into_owned())
    }

    /// One connection, one command: the whole reply, or where the reading stopped.
    async fn exchange(&self, command: &str, limit: Duration) -> Result<ReadEnd, CliError> {
        let io_error = |source| CliError::Io {
            path: self.path.clone(),
            source,
        };
        let work = async {
            let mut stream = UnixStream::connect(&self.path).await.map_err(io_error)?;
            let mut line = Vec::with_capacity(command.len() + 1);
            line.extend_from_slice(command.as_bytes());
            line.push(b'\n');
            stream.write_all(&line).await.map_err(io_error)?;
            stream.shutdown().await.map_err(io_error)?;
            read_reply(&mut stream, self.exchange_idle, targets_worker(command))
                .await
                .map_err(io_error)
        };
        timeout(limit, work).await.map_err(|_| CliError::Timeout {
            path: self.path.clone(),
            command: first_line(command).to_string(),
            waited: limit,
        })?
    }

    /// Waits, forever, until the master socket answers `show proc`. Logs the first
    /// failure and then one line every ten seconds, so a user sees why nothing happens.
    pub async fn wait_until_ready(&self) -> ProcInfo {
        let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
        let started = Instant::now();
        let mut next_log = started;
        loop {
            match self.show_proc().await {
                Ok(info) => {
                    tracing::info!(
                        socket = %self.path.display(),
                        version = %info.version,
                        master_pid = info.master_pid,
                        "haproxy master socket is ready"
                    );
                    return info;
                }
                Err(err) => {
                    if Instant::now() >= next_log {
                        tracing::warn!(
                            waited_s = started.elapsed().as_secs(),
                            "waiting for haproxy: {err}"
                        );
                        next_log = Instant::now() + Duration::from_secs(10);
                    }
                }
            }
            sleep(backoff.next_delay()).await;
        }
    }
}

async fn connect_retrying(path: &Path, limit: Duration) -> io::Result<UnixStream> {
    let deadline = Instant::now() + limit;
    let mut backoff = Backoff::new(RETRY_FIRST, RETRY_MAX);
    loop {
        match UnixStream::connect(path).await {
            Ok(stream) => return Ok(stream),
            Err(err) if is_transient_io(&err) && Instant::now() + backoff.peek() < deadline => {
                sleep(backoff.next_delay()).await;
            }
            Err(err) => return Err(err),
        }
    }
}

/// The length of the rest of a master prompt after its `master`: `> `, with first a
/// state (`[ReloadFailed]`, after a failed reload) and a mode (`(x)`, after
/// `experimental-mode on`) when it has them; `None` when `after` does not start one.
fn prompt_rest(after: &str) -> Option<usize> {
    let mut len = 0;
    for (open, close) in [('[', ']'), ('(', ')')] {
        if after[len..].starts_with(open) {
            let end = after[len..].find(close)?;
            if after[len..len + end].contains('\n') {
                return None;
            }
            len += end + 1;
        }
    }
    after[len..].starts_with("> ").then_some(len + 2)
}

/// Splits the output of a `prompt` session into answers: each answer ends where the
/// master's prompt (`master> `, `master[ReloadFailed]> ` after a failed reload,
/// `master(x)> ` in experimental mode) begins. Public for the fuzz targets (fuzz/),
/// which read any answer with it.
pub fn split_prompted(reply: &str) -> Vec<&str> {
    const MASTER: &str = "master";
    let mut answers = Vec::new();
    let mut start = 0;
    let mut search = 0;
    while let Some(found) = reply[search..].find(MASTER) {
        let at = search + found;
        let after = &reply[at + MASTER.len()..];
        let prompt_len = prompt_rest(after);
        match prompt_len {
            Some(len) => {
                answers.push(&reply[start..at]);
                start = at + MASTER.len() + len;
                search = start;
            }
            None => search = at + MASTER.len(),
        }
    }
    answers
}

/// Whether a reload answer is haproxy 3.1+'s refusal to start a reload while the
/// previous one is still loading (nothing was done; the reload can be sent again).
fn is_busy_reloading(reply: &str) -> bool {
    reply.starts_with("Success=0") && reply.contains("Another reload is still in progress")
}

/// Where the reading of a reply stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ReadEnd {
    /// haproxy closed the connection: the whole reply.
    Eof(String),
    /// The master said it has no worker to reach (only looked for in exchanges that
    /// address the worker): what came so far.
    NoWorker(String),
    /// Nothing came for the idle time: what came so far.
    Stalled(String),
}

/// Reads a reply to EOF, giving up when nothing comes for `idle`, or as soon as the
/// master says it has no worker to reach when `to_worker`.
async fn read_reply<R: AsyncRead + Unpin>(
    reader: &mut R,
    idle: Duration,
    to_worker: bool,
) -> io::Result<ReadEnd> {
    let mut reply = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let Ok(read) = timeout(idle, reader.read(&mut chunk)).await else {
            return Ok(ReadEnd::Stalled(
                String::from_utf8_lossy(&reply).into_owned(),
            ));
        };
        let read = read?;
        if read == 0 {
            return Ok(ReadEnd::Eof(String::from_utf8_lossy(&reply).into_owned()));
        }
        // The marker may straddle two reads: look at the end of the reply so far.
        let from = reply.len().saturating_sub(NO_WORKER_YET.len());
        reply.extend_from_slice(&chunk[..read]);
        if to_worker && memchr::memmem::find(&reply[from..], NO_WORKER_YET.as_bytes()).is_some() {
            return Ok(ReadEnd::NoWorker(
                String::from_utf8_lossy(&reply).into_owned(),
            ));
        }
    }
}

/// Whether a command line goes to the current worker.
fn targets_worker(command: &str) -> bool {
    command.starts_with("@1 ")
}

/// Whether a reply says that the master has no worker to reach.
fn is_no_worker(reply: &str) -> bool {
    reply.contains(NO_WORKER_YET)
}

fn first_line(command: &str) -> &str {
    command.lines().next().unwrap_or("")
}

fn is_transient_io(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::NotFound
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::UnexpectedEof
    )
}

fn is_transient(err: &CliError) -> bool {
    match err {
        CliError::Io { source, .. } => is_transient_io(source),
        _ => false,
    }
}

/// Parses the reply of `show proc` (same layout on 2.6 and 3.0).
pub fn parse_show_proc(reply: &str) -> Option<ProcInfo> {
    let mut master = None;
    let mut worker_pid = None;
    let mut section = "";
    for line in reply.lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix("# ") {
            section = name;
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        match (section, fields.get(1)) {
            ("", Some(&"master")) => {
                let pid = fields.first()?.parse().ok()?;
                let reloads = fields.get(2)?.parse().ok()?;
                let failed = line
                    .split_once("[failed:")
                    .and_then(|(_, rest)| rest.split(']').next())
                    .and_then(|n| n.trim().parse().ok())
                    .unwrap_or(0);
                let version = fields.last()?.to_string();
                master = Some((pid, reloads, failed, version));
            }
            ("workers", Some(&"worker")) if worker_pid.is_none() => {
                worker_pid = fields.first().and_then(|p| p.parse().ok());
            }
            _ => {}
        }
    }
    let (master_pid, reloads, failed_reloads, version) = master?;
    Some(ProcInfo {
        master_pid,
        reloads,
        failed_reloads,
        version,
        worker_pid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHOW_PROC: &str = "#<PID>          <type>          <reloads>       <uptime>        <version>       \n\
10937           master          27 [failed: 1]  0d00h03m37s     2.6.12-1+deb12u4\n\
# workers\n\
19107           worker          0               0d00h00m01s     2.6.12-1+deb12u4\n\
# old workers\n\
18924           worker          1               0d00h00m04s     2.6.12-1+deb12u4\n\
# programs\n\n";

    /// A fake master socket: each connection gets the next behaviour in `script` (the
    /// last one repeats); `show proc` is always answered with a worker.
    async fn fake_master(script: Vec<Fake>) -> (tempfile::TempDir, MasterCli) {
        let dir = tempfile::tempdir().expect("temporary folder");
        let path = dir.path().join("master.sock");
        let listener = tokio::net::UnixListener::bind(&path).expect("bind");
        tokio::spawn(async move {
            let mut script = script.into_iter().peekable();
            let mut hung = Vec::new();
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let mut request = Vec::new();
                if stream.read_to_end(&mut request).await.is_err() {
                    continue;
                }
                let request = String::from_utf8_lossy(&request).into_owned();
                if request.starts_with("show proc") {
                    let _ = stream.write_all(SHOW_PROC.as_bytes()).await;
                    continue;
                }
                let fake = match script.next() {
                    Some(fake) if script.peek().is_none() => {
                        let again = fake.clone();
                        script = vec![again].into_iter().peekable();
                        fake
                    }
                    Some(fake) => fake,
                    None => return,
                };
                match fake {
                    Fake::NoWorkerThenHang => {
                        let _ = stream
                            .write_all(format!("master> {NO_WORKER_YET}\n").as_bytes())
                            .await;
                        hung.push(stream);
                    }
                    Fake::Silent => hung.push(stream),
                    Fake::Answer => {
                        // One answer per line, as a prompt session gives them.
                        let mut reply = String::from("master> ");
                        for line in request.lines().skip(1) {
                            reply.push_str(&format!("done {line}\n\nmaster> "));
                        }
                        let _ = stream.write_all(reply.as_bytes()).await;
                    }
                }
            }
        });
        let cli = MasterCli::new(path)
            .with_timeouts(Duration::from_secs(5), Duration::from_secs(5))
            .with_exchange_idle(FAKE_IDLE);
        (dir, cli)
    }

    #[derive(Debug, Clone)]
    enum Fake {
        /// What 3.4.0 does to some connections right after it starts.
        NoWorkerThenHang,
        /// Never a byte.
        Silent,
        Answer,
    }

    /// The idle time of the fake master's client.
    const FAKE_IDLE: Duration = Duration::from_millis(300);

    fn batch_of(commands: &[&str]) -> Vec<String> {
        commands.iter().map(|c| c.to_string()).collect()
    }

    #[tokio::test]
    async fn a_batch_the_master_answers_with_no_worker_and_leaves_hanging_is_sent_again_at_once() {
        let (_dir, cli) = fake_master(vec![Fake::NoWorkerThenHang, Fake::Answer]).await;
        let started = Instant::now();
        let answers = cli
            .batch(&batch_of(&["@1 set map m k v", "@1 del map m x"]))
            .await
            .expect("the batch is answered on a new connection");
        assert_eq!(
            answers,
            ["done @1 set map m k v\n\n", "done @1 del map m x\n\n"]
        );
        // Not after the exchange's idle time, and far from the command timeout.
        assert!(
            started.elapsed() < Duration::from_millis(250),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn a_batch_left_without_any_answer_is_abandoned_after_the_idle_time() {
        let (_dir, cli) = fake_master(vec![Fake::Silent, Fake::Answer]).await;
        let started = Instant::now();
        let answers = cli
            .batch(&batch_of(&["@1 set map m k v"]))
            .await
            .expect("the batch is answered on a new connection");
        assert_eq!(answers, ["done @1 set map m k v\n\n"]);
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(300) && took < Duration::from_secs(2),
            "{took:?}"
        );
    }

    #[tokio::test]
    async fn a_worker_that_never_comes_ends_the_batch_at_its_deadline_with_the_reason() {
        let (_dir, cli) = fake_master(vec![Fake::NoWorkerThenHang]).await;
        let cli = cli.with_timeouts(Duration::from_millis(800), Duration::from_secs(1));
        let started = Instant::now();
        let err = cli
            .batch(&batch_of(&["@1 set map m k v"]))
            .await
            .expect_err("no worker, no answer");
        assert!(matches!(err, CliError::NoWorker { .. }), "{err}");
        assert!(err.to_string().contains(NO_WORKER_YET), "{err}");
        // Within the deadline and one idle period (a silent exchange in flight when the
        // deadline passes), with room for a loaded machine: never the 10 s of a batch.
        let bound = Duration::from_millis(800) + FAKE_IDLE + Duration::from_millis(700);
        assert!(started.elapsed() < bound, "{:?}", started.elapsed());
    }

    #[tokio::test]
    async fn a_worker_command_answered_with_no_worker_is_tried_again() {
        let (_dir, cli) = fake_master(vec![Fake::NoWorkerThenHang, Fake::Answer]).await;
        let started = Instant::now();
        cli.worker_command("show env X")
            .await
            .expect("answered on a new connection");
        assert!(
            started.elapsed() < Duration::from_millis(250),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_reload_refused_while_another_loads_is_told_apart_from_a_refused_config() {
        // Seen on 3.2.0 and 3.4.0 when `reload` comes while the worker still loads.
        assert!(is_busy_reloading(
            "Success=0\n--\nAnother reload is still in progress.\n\n"
        ));
        assert!(!is_busy_reloading(
            "Success=0\n--\n[ALERT]    (1) : config : parsing [/etc/haproxy/haproxy.cfg:3]\n"
        ));
        assert!(!is_busy_reloading(
            "Success=1\n--\n[NOTICE]   (1) : Loading success.\n"
        ));
    }

    #[test]
    fn splits_answers_prompted_in_experimental_mode() {
        let reply = "master> master(x)> New backend registered.\n\nmaster[ReloadFailed](x)> \n";
        assert_eq!(
            split_prompted(reply),
            vec!["", "", "New backend registered.\n\n"]
        );
    }

    #[test]
    fn splits_prompted_answers() {
        let reply = "master> + + + \nmaster> Key not found.\n\nmaster> \nmaster[ReloadFailed]> ok\n\nmaster> ";
        assert_eq!(
            split_prompted(reply),
            vec!["", "+ + + \n", "Key not found.\n\n", "\n", "ok\n\n"]
        );
    }

    #[test]
    fn parses_show_proc() {
        assert_eq!(
            parse_show_proc(SHOW_PROC),
            Some(ProcInfo {
                master_pid: 10937,
                reloads: 27,
                failed_reloads: 1,
                version: "2.6.12-1+deb12u4".into(),
                worker_pid: Some(19107),
            })
        );
        assert_eq!(parse_show_proc("Unknown command\n"), None);
    }
}
