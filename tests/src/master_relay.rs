//! A stand-in for haproxy's master socket between the controller and a real haproxy:
//! it passes every connection through, and can play, once, what haproxy 3.4.0 does to
//! about one `@1` connection in fifty right after it starts: answer "Can't find the
//! target PID matching the prefix '@1'" and then leave the connection open with no more
//! answer. Real haproxy does that by chance; the relay does it on demand, on every
//! series, so a test can count on it. It can also be away (connections refused), as the
//! socket of a haproxy that is not running.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::task::JoinHandle;

/// What 3.4.0's master answers to `@1 ...` while its worker starts.
pub const NO_WORKER_YET: &str = "Can't find the target PID matching the prefix '@1'\n";

#[derive(Default)]
struct State {
    /// haproxy's master socket; until it is known, connections are closed unanswered.
    upstream: Option<PathBuf>,
    /// The next connection carrying an `@1` command is answered [`NO_WORKER_YET`] and
    /// left hanging.
    hang_next_worker_connection: bool,
    /// How many connections were left hanging.
    hung: usize,
    /// Kept open until the relay is dropped.
    hanging: Vec<UnixStream>,
}

/// The relay; its socket is [`MasterRelay::path`].
pub struct MasterRelay {
    _dir: TempDir,
    path: PathBuf,
    state: Arc<Mutex<State>>,
    task: Option<JoinHandle<()>>,
}

impl Drop for MasterRelay {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl MasterRelay {
    /// A relay, serving; it passes connections on once [`MasterRelay::relay_to`] says
    /// where (until then it closes them unanswered, as a master socket that is not
    /// ready).
    pub fn start() -> Self {
        let dir = tempfile::tempdir().expect("temporary folder");
        let path = dir.path().join("master.sock");
        let mut relay = Self {
            _dir: dir,
            path,
            state: Arc::default(),
            task: None,
        };
        relay.serve();
        relay
    }

    /// Passes connections on to haproxy's master socket at `upstream`.
    pub fn relay_to(&self, upstream: &Path) {
        self.state().upstream = Some(upstream.to_path_buf());
    }

    /// Where the controller connects.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops serving: connections are refused (the socket file stays, as haproxy's does
    /// when it is not running).
    pub fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }

    /// Serves again.
    pub fn serve(&mut self) {
        self.stop();
        let _ = std::fs::remove_file(&self.path);
        let listener = UnixListener::bind(&self.path).expect("bind the relay's socket");
        let state = self.state.clone();
        self.task = Some(tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(relay(client, state.clone()));
            }
        }));
    }

    /// The next connection that carries an `@1` command gets [`NO_WORKER_YET`] and no
    /// more answer.
    pub fn hang_next_worker_connection(&self) {
        self.state().hang_next_worker_connection = true;
    }

    /// How many connections were left hanging so far.
    pub fn hung(&self) -> usize {
        self.state().hung
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Passes one connection through: the client's whole request (the controller
/// half-closes after it), then haproxy's whole answer.
async fn relay(mut client: UnixStream, state: Arc<Mutex<State>>) {
    let mut request = Vec::new();
    if client.read_to_end(&mut request).await.is_err() {
        return;
    }
    let to_worker = String::from_utf8_lossy(&request)
        .lines()
        .any(|line| line.starts_with("@1 "));
    let hang = to_worker && {
        let mut guard = state.lock().unwrap_or_else(|e| e.into_inner());
        let hang = std::mem::take(&mut guard.hang_next_worker_connection);
        if hang {
            guard.hung += 1;
        }
        hang
    };
    if hang {
        let prompt = request.starts_with(b"prompt\n");
        let answer = if prompt {
            format!("master> {NO_WORKER_YET}")
        } else {
            NO_WORKER_YET.to_string()
        };
        let _ = client.write_all(answer.as_bytes()).await;
        // Open, silent, until the client gives up (or the relay goes).
        state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .hanging
            .push(client);
        return;
    }
    let upstream = state
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .upstream
        .clone();
    let Some(upstream) = upstream else {
        return;
    };
    let Ok(mut server) = UnixStream::connect(&upstream).await else {
        return;
    };
    if server.write_all(&request).await.is_err() || server.shutdown().await.is_err() {
        return;
    }
    let mut reply = Vec::new();
    let _ = server.read_to_end(&mut reply).await;
    let _ = client.write_all(&reply).await;
    let _ = client.shutdown().await;
}
