//! Real haproxy for tests, started the way the official image starts it
//! (`haproxy -W -db -S <run>/master.sock,mode,600 -f <config-dir>`) on the config the
//! init container seeds, in a temporary folder, and the [`Pod`]: that haproxy plus a
//! Tugboat controller following a folder of manifests, as in the real pod.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tempfile::TempDir;
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;
use tugboat::controller::{self, ControllerConfig, ControllerStatus};
use tugboat_haproxy::{MasterCli, ProcInfo, RenderSettings};

/// The config the init container seeds, exactly as shipped.
pub const INIT_CONFIG: &str = include_str!("../../init-config/haproxy.cfg");

/// The whole config haproxy loads from `config_dir`: its `*.cfg` files in the order
/// haproxy reads them (by name), one after the other. `None` when the folder cannot be
/// read.
pub fn read_config(config_dir: &Path) -> Option<String> {
    let mut config = String::new();
    for path in tugboat_haproxy::files::config_files_in(config_dir).ok()? {
        config.push_str(&std::fs::read_to_string(path).ok()?);
    }
    Some(config)
}

/// One installed haproxy series.
#[derive(Debug, Clone)]
pub struct HaproxyBinary {
    pub series: String,
    pub path: PathBuf,
}

impl HaproxyBinary {
    /// Where `haproxy-versions.sh` put the binaries: `$TUGBOAT_HAPROXY_DIR`, else
    /// `~/.cache/tugboat/haproxy`.
    pub fn install_dir() -> PathBuf {
        std::env::var_os("TUGBOAT_HAPROXY_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
                PathBuf::from(home).join(".cache/tugboat/haproxy")
            })
    }

    /// Where the binary of `series` is, installed or not.
    pub fn path_of(series: &str) -> PathBuf {
        Self::install_dir().join(format!("haproxy-{series}/haproxy"))
    }

    /// The binary of `series` ("2.6", "3.0") when it is installed.
    pub fn installed(series: &str) -> Option<Self> {
        let path = Self::path_of(series);
        path.is_file().then(|| Self {
            series: series.to_string(),
            path,
        })
    }

    /// The binary of `series` for a test. A test that runs nothing must not pass: a
    /// missing series fails the test, saying how to get it, unless
    /// [`SKIP_MISSING_HAPROXY`] opts out for it (`1`: every series; else the series to
    /// skip, such as `3.2 3.4`): then `None`, and a line on stderr says the test was
    /// skipped.
    pub fn find(series: &str) -> Option<Self> {
        if let Some(binary) = Self::installed(series) {
            return Some(binary);
        }
        let path = Self::path_of(series);
        let skip = std::env::var(SKIP_MISSING_HAPROXY).unwrap_or_default();
        assert!(
            skips_series(&skip, series),
            "haproxy {series} is not installed at {}: the end-to-end tests run on real \
             haproxy. Run scripts/test.sh (the README's test command), or get the \
             binaries with scripts/get-haproxy.sh and set TUGBOAT_HAPROXY_DIR to their \
             folder (default ~/.cache/tugboat/haproxy); to run without this series \
             knowingly, set {SKIP_MISSING_HAPROXY}=1 (or to the series to skip, e.g. \"3.2 3.4\")",
            path.display()
        );
        eprintln!(
            "skipped: haproxy {series} is not installed at {} ({SKIP_MISSING_HAPROXY}={skip})",
            path.display()
        );
        None
    }
}

/// The variable that lets tests of haproxy series that are not installed be skipped
/// instead of failing: `1` for every series, else the series (`3.2 3.4`).
pub const SKIP_MISSING_HAPROXY: &str = "TUGBOAT_SKIP_MISSING_HAPROXY";

/// Whether the value of [`SKIP_MISSING_HAPROXY`] skips `series`.
fn skips_series(skip: &str, series: &str) -> bool {
    skip.split([' ', ',', '\t', '\n'])
        .any(|word| word == "1" || word == series)
}

/// A running haproxy in master-worker mode; killed when dropped.
pub struct Haproxy {
    pub binary: HaproxyBinary,
    pub dir: TempDir,
    pub config_dir: PathBuf,
    pub lib_dir: PathBuf,
    pub master_socket: PathBuf,
    pub http_port: u16,
    pub https_port: u16,
    pub stats_port: u16,
    child: Child,
}

impl Haproxy {
    /// Seeds the init config and starts haproxy; returns once its master CLI answers.
    pub async fn start(binary: &HaproxyBinary) -> Self {
        let dir = tempfile::tempdir().expect("temporary folder");
        let config_dir = dir.path().join("etc");
        let lib_dir = dir.path().join("lib");
        let run_dir = dir.path().join("run");
        for d in [&config_dir, &lib_dir, &run_dir] {
            std::fs::create_dir_all(d).expect("create folder");
        }
        std::fs::write(config_dir.join("haproxy.cfg"), INIT_CONFIG).expect("seed config");
        let master_socket = run_dir.join("master.sock");
        let child = launch(binary, &master_socket, &config_dir, dir.path());
        let haproxy = Self {
            binary: binary.clone(),
            dir,
            config_dir,
            lib_dir,
            master_socket,
            http_port: crate::free_port(),
            https_port: crate::free_port(),
            stats_port: crate::free_port(),
            child,
        };
        haproxy.wait_ready().await;
        haproxy
    }

    async fn wait_ready(&self) {
        let cli = self.cli();
        crate::eventually("haproxy's master socket", Duration::from_secs(10), || {
            let cli = cli.clone();
            async move { cli.show_proc().await.ok() }
        })
        .await;
    }

    /// Kills haproxy and starts it again on the same folders, as a container restart
    /// does; returns once the new master answers.
    pub async fn restart(&mut self) {
        self.kill().await;
        self.start_again().await;
    }

    /// Kills haproxy (master and worker), as a crash or a stopping container does; its
    /// master socket stays behind and refuses connections.
    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }

    /// Starts haproxy again on the same folders after [`Haproxy::kill`]; returns once
    /// the new master answers.
    pub async fn start_again(&mut self) {
        self.child = launch(
            &self.binary,
            &self.master_socket,
            &self.config_dir,
            self.dir.path(),
        );
        self.wait_ready().await;
    }

    pub fn cli(&self) -> MasterCli {
        MasterCli::new(&self.master_socket)
    }

    pub async fn show_proc(&self) -> ProcInfo {
        self.cli().show_proc().await.expect("show proc")
    }

    /// Where haproxy serves HTTP.
    pub fn http_addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.http_port))
    }

    /// What haproxy printed so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("haproxy.log")).unwrap_or_default()
    }

    /// The render settings a controller for this haproxy uses (loopback binds).
    pub fn render_settings(&self) -> RenderSettings {
        RenderSettings {
            config_dir: self.config_dir.clone(),
            lib_dir: self.lib_dir.clone(),
            bind_address: Ipv4Addr::LOCALHOST.into(),
            http_port: self.http_port,
            https_port: self.https_port,
            stats_port: self.stats_port,
            fallback_certificate: tugboat::tls::fallback_certificate(
                &self.lib_dir,
                tugboat::tls::now(),
            )
            .expect("default certificate"),
            // As the controller's default: the applier finds out whether haproxy can.
            dynamic_backends: true,
        }
    }

    /// Where haproxy serves HTTPS.
    pub fn https_addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.https_port))
    }

    /// `GET path` with `Host: host` through haproxy.
    pub async fn get(&self, host: &str, path: &str) -> std::io::Result<crate::Reply> {
        crate::get(self.http_addr(), host, path).await
    }

    /// Waits (15 s at most) until `GET host path` is answered by `service` with 200.
    pub async fn wait_for_service(&self, host: &str, path: &str, service: &str) {
        crate::eventually(
            &format!("{host}{path} answered by {service}"),
            Duration::from_secs(15),
            || async move {
                let reply = self.get(host, path).await.ok()?;
                (reply.status == 200 && reply.service() == Some(service)).then_some(())
            },
        )
        .await;
    }

    /// Waits (15 s at most) until `GET host path` gets `status`.
    pub async fn wait_for_status(&self, host: &str, path: &str, status: u16) {
        crate::eventually(
            &format!("{host}{path} answered with {status}"),
            Duration::from_secs(15),
            || async move { (self.get(host, path).await.ok()?.status == status).then_some(()) },
        )
        .await;
    }

    /// Asserts that plain-HTTP `GET host path` gets the permanent HTTPS redirect (308)
    /// to the same URL.
    pub async fn assert_https_redirect(&self, host: &str, path: &str) {
        let reply = self.get(host, path).await.expect("request");
        assert_eq!(reply.status, 308, "{host}{path}: {reply:?}");
        assert_eq!(
            reply.header("location"),
            Some(format!("https://{host}{path}").as_str()),
            "{host}{path}"
        );
    }

    /// Whether the haproxy process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

fn launch(binary: &HaproxyBinary, socket: &Path, config_dir: &Path, dir: &Path) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("haproxy.log"))
        .expect("log file");
    Command::new(&binary.path)
        .arg("-W")
        .arg("-db")
        .arg("-S")
        .arg(format!("{},mode,600", socket.display()))
        .arg("-f")
        .arg(config_dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log file"))
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.path.display()))
}

/// haproxy and a controller following a folder of manifests, as in the real pod.
pub struct Pod {
    pub haproxy: Haproxy,
    pub manifests: TempDir,
    /// What the controller reports after every update (problems, readiness).
    pub status: tokio::sync::watch::Receiver<ControllerStatus>,
    controller: JoinHandle<anyhow::Result<()>>,
    /// The controller's configuration, for [`Pod::restart_controller`].
    config: ControllerConfig,
}

/// Requests go through the pod's haproxy (`pod.get`, `pod.wait_for_service`, ...).
impl std::ops::Deref for Pod {
    type Target = Haproxy;

    fn deref(&self) -> &Haproxy {
        &self.haproxy
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        self.controller.abort();
    }
}

impl Pod {
    /// Starts haproxy, writes the given manifests, starts the controller.
    pub async fn start(binary: &HaproxyBinary, manifests: &[(&str, &str)]) -> Self {
        Self::start_with(binary, manifests, |_| {}).await
    }

    /// Same as [`Pod::start`], with the controller's configuration adjusted by `adjust`.
    pub async fn start_with(
        binary: &HaproxyBinary,
        manifests: &[(&str, &str)],
        adjust: impl FnOnce(&mut ControllerConfig),
    ) -> Self {
        tugboat::logging::init(tugboat::logging::LogFormat::Text);
        let haproxy = Haproxy::start(binary).await;
        let dir = tempfile::tempdir().expect("temporary folder");
        for (name, text) in manifests {
            std::fs::write(dir.path().join(name), text).expect("write manifest");
        }
        let mut config =
            ControllerConfig::new(haproxy.master_socket.clone(), haproxy.render_settings());
        adjust(&mut config);
        let (status, status_rx) = tokio::sync::watch::channel(Default::default());
        let controller = tokio::spawn(controller::run_with_manifests(
            config.clone(),
            dir.path().into(),
            tugboat_model::class::ClassFilter::default(),
            status,
        ));
        Self {
            haproxy,
            manifests: dir,
            status: status_rx,
            controller,
            config,
        }
    }

    /// Stops the controller and starts a new one with the same configuration, as a
    /// rolling update of the controller container does; haproxy keeps running. The new
    /// controller's status replaces the old one's.
    pub async fn restart_controller(&mut self) {
        self.controller.abort();
        let _ = (&mut self.controller).await;
        let (status, status_rx) = tokio::sync::watch::channel(Default::default());
        self.controller = tokio::spawn(controller::run_with_manifests(
            self.config.clone(),
            self.manifests.path().into(),
            tugboat_model::class::ClassFilter::default(),
            status,
        ));
        self.status = status_rx;
    }

    /// Writes (creates or replaces) one manifest file.
    pub fn write_manifest(&self, name: &str, text: &str) {
        let path = self.manifests.path().join(name);
        let tmp = self.manifests.path().join(format!(".{name}.tmp"));
        std::fs::write(&tmp, text).expect("write manifest");
        std::fs::rename(&tmp, path).expect("rename manifest");
    }

    pub fn remove_manifest(&self, name: &str) {
        std::fs::remove_file(self.manifests.path().join(name)).expect("remove manifest");
    }

    pub fn manifests_dir(&self) -> &Path {
        self.manifests.path()
    }

    /// Whether the controller task is still running.
    pub fn controller_running(&self) -> bool {
        !self.controller.is_finished()
    }
}

#[cfg(test)]
mod tests {
    use super::skips_series;

    #[test]
    fn the_skip_variable_names_every_series_or_some() {
        assert!(skips_series("1", "3.2"));
        assert!(skips_series("3.2 3.4 ", "3.4"));
        assert!(skips_series("3.2,3.4", "3.2"));
        assert!(!skips_series("", "3.2"));
        assert!(!skips_series("0", "3.2"));
        assert!(!skips_series("3.2 3.4", "3.0"));
        assert!(!skips_series("13.0", "3.0"));
    }
}
