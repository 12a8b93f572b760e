//! The chart's pod, run on this machine as processes, the way the kubelet and a
//! container runtime would run it, for the chart pod test (tests/e2e/chart_pod.rs).
//!
//! - [`RenderedChart`]: `helm template` of the chart, parsed into k8s-openapi types: its
//!   Deployment or DaemonSet.
//! - [`Sandbox`]: the pod's network, UTS and IPC namespaces, held by a `sleep` process
//!   (the pause container), loopback up, hostname and namespaced sysctls set. The test
//!   opens sockets inside it (the fake API server, echo backends, probes, requests).
//!   A `hostNetwork` pod's sandbox ([`Sandbox::host_network`]) keeps the node's network
//!   and hostname, which here are the test's own.
//! - [`Pod`]: the containers of a rendered `PodSpec`, each in its own mount and PID
//!   namespaces (util-linux `nsenter` into the sandbox, then `unshare`), assembled by
//!   `tugboat-pod-exec` from a [`ContainerPlan`]: only the volumes it mounts, at their
//!   mount paths, read-only where the spec says so (and its root file system when
//!   `readOnlyRootFilesystem`), as the spec's uid, gid and fsGroup, with the spec's
//!   capabilities, running exactly the spec's command and args. Init containers run
//!   first, to completion. Probes, logs (stdout and stderr apart, as `kubectl logs`
//!   shows them) and termination (preStop, then the image's stop signal, SIGKILL after
//!   the grace period) follow the kubelet.
//!
//! Images are not pulled: an [`Image`] maps an image onto files of this machine (the
//! haproxy binaries of `scripts/get-haproxy.sh`, the controller built by Cargo) with the
//! image's entrypoint, cmd, user, working directory, environment and stop signal.
//! Binaries of this machine need its shared libraries: `/usr/lib` and friends are
//! mounted read-only into every container, which the real images do not have, and so
//! are the folders a binary names as its interpreter's or its run path (haproxy 3.0,
//! when it is Debian trixie's binary with trixie's libraries beside it).

use std::collections::BTreeMap;
use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::AsFd as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{
    Container, HTTPGetAction, PodSpec, PodTemplateSpec, Probe, ServiceAccount, Volume,
    VolumeMount as K8sMount,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use rustix::process::{Pid, Signal};
use rustix::thread::LinkNameSpaceType;
use serde_json::Value;
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, Command};

use crate::Reply;
pub use crate::container_plan::{ContainerPlan, ImageDir, ImageFile, VolumeMount};

/// Where the service-account token, CA and namespace are mounted.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The capabilities containerd gives a container before `drop` and `add`.
const RUNTIME_DEFAULT_CAPABILITIES: [&str; 14] = [
    "CHOWN",
    "DAC_OVERRIDE",
    "FSETID",
    "FOWNER",
    "MKNOD",
    "NET_RAW",
    "SETGID",
    "SETUID",
    "SETFCAP",
    "SETPCAP",
    "NET_BIND_SERVICE",
    "SYS_CHROOT",
    "KILL",
    "AUDIT_WRITE",
];

/// What this machine lacks to run a pod (not root, util-linux or iproute2 missing).
pub fn missing_prerequisites() -> Vec<String> {
    let mut missing = Vec::new();
    if !rustix::process::geteuid().is_root() {
        missing.push("root (namespaces, mounts and other uids)".to_string());
    }
    for (tool, package) in [
        ("unshare", "util-linux"),
        ("nsenter", "util-linux"),
        ("ip", "iproute2"),
    ] {
        let found = std::process::Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !found {
            missing.push(format!("`{tool}` ({package})"));
        }
    }
    missing
}

/// `helm template` of a chart, as parsed objects.
#[derive(Debug, Clone)]
pub struct RenderedChart {
    /// Every rendered object, as JSON.
    pub objects: Vec<Value>,
    /// The kind of the workload that runs the pod: `Deployment` or `DaemonSet`.
    pub workload_kind: String,
    /// The workload's pod template.
    pub pod_template: PodTemplateSpec,
    pub service_account: Option<ServiceAccount>,
    pub namespace: String,
}

impl RenderedChart {
    /// Runs `helm template RELEASE CHART -n NAMESPACE [-f values] [--set ...]`.
    pub fn render(
        helm: &Path,
        chart: &Path,
        release: &str,
        namespace: &str,
        values: Option<&Path>,
        set: &[String],
    ) -> anyhow::Result<Self> {
        let mut command = std::process::Command::new(helm);
        command
            .arg("template")
            .arg(release)
            .arg(chart)
            .arg("--namespace")
            .arg(namespace);
        if let Some(values) = values {
            command.arg("--values").arg(values);
        }
        for s in set {
            command.arg("--set").arg(s);
        }
        let output = command
            .output()
            .with_context(|| format!("cannot run {}", helm.display()))?;
        ensure!(
            output.status.success(),
            "helm template failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Self::parse(&String::from_utf8_lossy(&output.stdout), namespace)
    }

    /// Parses rendered manifests; exactly one Deployment or DaemonSet.
    pub fn parse(text: &str, namespace: &str) -> anyhow::Result<Self> {
        use serde::Deserialize as _;
        let mut objects = Vec::new();
        for document in serde_yaml_ng::Deserializer::from_str(text) {
            let mut value = Value::deserialize(document).context("rendered YAML")?;
            yaml11_file_modes(&mut value);
            if !value.is_null() {
                objects.push(value);
            }
        }
        fn of_kind<'a>(objects: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> {
            objects.iter().filter(move |o| o["kind"] == kind)
        }
        let workloads: Vec<&Value> = of_kind(&objects, "Deployment")
            .chain(of_kind(&objects, "DaemonSet"))
            .collect();
        ensure!(
            workloads.len() == 1,
            "expected one Deployment or DaemonSet, rendered {}",
            workloads.len()
        );
        let workload = workloads[0].clone();
        let workload_kind = workload["kind"].as_str().unwrap_or_default().to_string();
        let pod_template = if workload_kind == "Deployment" {
            let deployment: Deployment = serde_json::from_value(workload)
                .context("the rendered Deployment does not parse as apps/v1 Deployment")?;
            deployment.spec.map(|s| s.template)
        } else {
            let daemon_set: DaemonSet = serde_json::from_value(workload)
                .context("the rendered DaemonSet does not parse as apps/v1 DaemonSet")?;
            daemon_set.spec.map(|s| s.template)
        }
        .with_context(|| format!("the {workload_kind} has no spec"))?;
        let service_account = of_kind(&objects, "ServiceAccount")
            .next()
            .map(|sa| serde_json::from_value(sa.clone()))
            .transpose()
            .context("ServiceAccount")?;
        Ok(Self {
            objects,
            workload_kind,
            pod_template,
            service_account,
            namespace: namespace.to_string(),
        })
    }

    /// The pod template's spec.
    pub fn pod_spec(&self) -> anyhow::Result<&PodSpec> {
        self.pod_template
            .spec
            .as_ref()
            .with_context(|| format!("the {} has no spec.template.spec", self.workload_kind))
    }

    /// The container named `name` of the pod template.
    pub fn container(&self, name: &str) -> anyhow::Result<&Container> {
        self.pod_spec()?
            .containers
            .iter()
            .find(|c| c.name == name)
            .with_context(|| format!("the pod has no container {name}"))
    }

    /// The ServiceAccount the pod runs as.
    pub fn service_account_name(&self) -> String {
        self.pod_spec()
            .ok()
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_else(|| "default".to_string())
    }
}

/// File modes as Kubernetes reads them. helm and kubectl parse YAML 1.1, where `0444`
/// is an octal number (292); serde_yaml_ng follows YAML 1.2 and keeps it a string. Only
/// the mode fields (`defaultMode`, `mode`) take octal numbers in a pod spec.
fn yaml11_file_modes(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            for (key, field) in fields.iter_mut() {
                if (key == "defaultMode" || key == "mode")
                    && let Some(octal) = field
                        .as_str()
                        .and_then(|s| s.strip_prefix('0'))
                        .and_then(|s| i64::from_str_radix(s, 8).ok())
                {
                    *field = Value::from(octal);
                }
                yaml11_file_modes(field);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(yaml11_file_modes),
        _ => {}
    }
}

/// An image, mapped onto this machine.
#[derive(Debug, Clone)]
pub struct Image {
    pub files: Vec<ImageFile>,
    pub dirs: Vec<ImageDir>,
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    pub env: Vec<(String, String)>,
    pub uid: u32,
    pub gid: u32,
    pub working_dir: PathBuf,
    /// The image's STOPSIGNAL (SIGTERM when it sets none).
    pub stop_signal: Signal,
}

/// `PATH` of the official images (Docker's default).
const IMAGE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

impl Image {
    /// The official haproxy image (docker-library/haproxy, `-alpine` tags): `haproxy` at
    /// /usr/local/sbin/haproxy on the default `PATH`, `ENTRYPOINT
    /// ["docker-entrypoint.sh"]`, `CMD ["haproxy", "-f",
    /// "/usr/local/etc/haproxy/haproxy.cfg"]`, `USER haproxy` (99:99), `WORKDIR
    /// /var/lib/haproxy`, `STOPSIGNAL SIGUSR1`. `binary` stands for the image's haproxy.
    /// The entrypoint script is not there: a pod that relies on it (no `command`) fails
    /// to start here, visibly.
    pub fn official_haproxy(binary: &Path) -> Self {
        Self {
            files: vec![ImageFile {
                source: binary.to_path_buf(),
                path: "/usr/local/sbin/haproxy".into(),
            }],
            dirs: vec![
                ImageDir {
                    path: "/var/lib/haproxy".into(),
                    uid: 99,
                    gid: 99,
                    mode: 0o755,
                },
                ImageDir {
                    path: "/usr/local/etc/haproxy".into(),
                    uid: 0,
                    gid: 0,
                    mode: 0o755,
                },
            ],
            entrypoint: vec!["docker-entrypoint.sh".into()],
            cmd: vec![
                "haproxy".into(),
                "-f".into(),
                "/usr/local/etc/haproxy/haproxy.cfg".into(),
            ],
            env: vec![("PATH".into(), IMAGE_PATH.into())],
            uid: 99,
            gid: 99,
            working_dir: "/var/lib/haproxy".into(),
            stop_signal: Signal::USR1,
        }
    }

    /// The controller image (deploy/docker/Dockerfile): /usr/bin/tugboat, a `cp` at
    /// /usr/bin/cp, the seed config at /usr/share/tugboat/haproxy.cfg, `ENTRYPOINT
    /// ["/usr/bin/tugboat"]`, `CMD ["--help"]`, `USER 65532:65532`, no STOPSIGNAL.
    /// `tugboat` is the binary Cargo built (glibc, where the image's is static musl);
    /// `cp` is this machine's.
    pub fn tugboat_controller(tugboat: &Path, seed_config: &Path) -> Self {
        Self {
            files: vec![
                ImageFile {
                    source: tugboat.to_path_buf(),
                    path: "/usr/bin/tugboat".into(),
                },
                ImageFile {
                    source: "/usr/bin/cp".into(),
                    path: "/usr/bin/cp".into(),
                },
                ImageFile {
                    source: seed_config.to_path_buf(),
                    path: "/usr/share/tugboat/haproxy.cfg".into(),
                },
            ],
            dirs: Vec::new(),
            entrypoint: vec!["/usr/bin/tugboat".into()],
            cmd: vec!["--help".into()],
            env: vec![
                ("PATH".into(), IMAGE_PATH.into()),
                (
                    "SSL_CERT_FILE".into(),
                    "/etc/ssl/certs/ca-certificates.crt".into(),
                ),
            ],
            uid: 65532,
            gid: 65532,
            working_dir: "/".into(),
            stop_signal: Signal::TERM,
        }
    }
}

/// Gives a copy of the file at `source` the file capabilities `capabilities` (bits
/// of `CAP_*` numbers, permitted and effective), as `setcap cap_...=+ep` does, in
/// `dir`; returns the copy's path.
pub fn with_file_capabilities(
    source: &Path,
    dir: &Path,
    capabilities: u64,
) -> anyhow::Result<PathBuf> {
    let copy = dir.join(source.file_name().context("a file name")?);
    std::fs::copy(source, &copy).with_context(|| format!("copy {}", source.display()))?;
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755))?;
    // struct vfs_cap_data, revision 2: magic_etc (revision | effective flag), then
    // (permitted, inheritable) for the low and the high 32 bits.
    const VFS_CAP_REVISION_2: u32 = 0x0200_0000;
    const VFS_CAP_FLAGS_EFFECTIVE: u32 = 0x1;
    let mut value = Vec::with_capacity(20);
    for word in [
        VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE,
        (capabilities & 0xffff_ffff) as u32,
        0,
        (capabilities >> 32) as u32,
        0,
    ] {
        value.extend_from_slice(&word.to_le_bytes());
    }
    rustix::fs::setxattr(
        &copy,
        "security.capability",
        &value,
        rustix::fs::XattrFlags::empty(),
    )
    .with_context(|| format!("set file capabilities on {}", copy.display()))?;
    Ok(copy)
}

/// The pod's shared namespaces (network, hostname, IPC), held by a `sleep` process.
pub struct Sandbox {
    pause: Child,
    pid: u32,
    netns: File,
    /// The node's network and hostname (a `hostNetwork` pod), not namespaces of its own.
    host_network: bool,
}

impl Sandbox {
    /// New namespaces with loopback up and `hostname` set (the pod's name).
    pub async fn start(hostname: &str) -> anyhow::Result<Self> {
        let pause = Command::new("unshare")
            .args(["--net", "--uts", "--ipc", "--", "sleep", "infinity"])
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("cannot run unshare (util-linux)")?;
        let pid = pause.id().context("the pause process's pid")?;
        let own = std::fs::read_link("/proc/self/ns/net")?;
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::fs::read_link(format!("/proc/{pid}/ns/net"))
            .ok()
            .as_ref()
            == Some(&own)
        {
            ensure!(
                Instant::now() < deadline,
                "unshare made no network namespace"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let netns = File::open(format!("/proc/{pid}/ns/net"))?;
        let sandbox = Self {
            pause,
            pid,
            netns,
            host_network: false,
        };
        let status = Command::new("nsenter")
            .arg(format!("--net=/proc/{pid}/ns/net"))
            .args(["--", "ip", "link", "set", "lo", "up"])
            .status()
            .await
            .context("cannot run ip (iproute2)")?;
        ensure!(status.success(), "ip link set lo up: {status}");
        let uts = File::open(format!("/proc/{pid}/ns/uts"))?;
        let name = hostname.to_string();
        std::thread::scope(|s| {
            s.spawn(|| {
                rustix::thread::move_into_link_name_space(
                    uts.as_fd(),
                    Some(LinkNameSpaceType::HostNameAndNISDomainName),
                )?;
                rustix::system::sethostname(name.as_bytes())
            })
            .join()
        })
        .map_err(|_| anyhow::anyhow!("hostname thread panicked"))?
        .context("set the pod's hostname")?;
        Ok(sandbox)
    }

    /// The sandbox of a `hostNetwork` pod: the node's network and hostname, which on
    /// this machine are the test's own (the pod's ports are this machine's, and its
    /// processes see its interfaces), and an IPC namespace of its own.
    pub async fn host_network() -> anyhow::Result<Self> {
        let pause = Command::new("unshare")
            .args(["--ipc", "--", "sleep", "infinity"])
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("cannot run unshare (util-linux)")?;
        let pid = pause.id().context("the pause process's pid")?;
        let own = std::fs::read_link("/proc/self/ns/ipc")?;
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::fs::read_link(format!("/proc/{pid}/ns/ipc"))
            .ok()
            .as_ref()
            == Some(&own)
        {
            ensure!(Instant::now() < deadline, "unshare made no IPC namespace");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let netns = File::open("/proc/self/ns/net")?;
        Ok(Self {
            pause,
            pid,
            netns,
            host_network: true,
        })
    }

    /// Whether this is a `hostNetwork` pod's sandbox.
    pub fn is_host_network(&self) -> bool {
        self.host_network
    }

    /// Runs `f` on a thread inside the pod's network namespace: sockets it creates
    /// belong to the pod's network.
    pub fn in_netns<T: Send>(&self, f: impl FnOnce() -> T + Send) -> anyhow::Result<T> {
        std::thread::scope(|s| {
            s.spawn(|| {
                rustix::thread::move_into_link_name_space(
                    self.netns.as_fd(),
                    Some(LinkNameSpaceType::Network),
                )
                .map(|()| f())
            })
            .join()
        })
        .map_err(|_| anyhow::anyhow!("thread in the pod's network namespace panicked"))?
        .context("enter the pod's network namespace")
    }

    /// A listener on 127.0.0.1:`port` of the pod's network (0: any free port).
    pub fn listen(&self, port: u16) -> anyhow::Result<std::net::TcpListener> {
        self.in_netns(|| std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port)))?
            .with_context(|| format!("listen on 127.0.0.1:{port} in the pod"))
    }

    /// A namespaced sysctl (`net.*`) of the pod.
    pub fn set_sysctl(&self, name: &str, value: &str) -> anyhow::Result<()> {
        ensure!(
            !self.host_network,
            "sysctl {name}: a hostNetwork pod cannot set sysctls (they would be the node's)"
        );
        ensure!(
            name.starts_with("net."),
            "sysctl {name}: only net.* sysctls are namespaced here"
        );
        let path = format!("/proc/sys/{}", name.replace('.', "/"));
        self.in_netns(|| std::fs::write(&path, value))?
            .with_context(|| format!("sysctl {name}={value}"))
    }

    /// A TCP connection to 127.0.0.1:`port` in the pod.
    pub async fn connect(&self, port: u16) -> std::io::Result<tokio::net::TcpStream> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let stream = self
            .in_netns(|| {
                let stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
                stream.set_nonblocking(true)?;
                Ok::<_, std::io::Error>(stream)
            })
            .map_err(std::io::Error::other)??;
        tokio::net::TcpStream::from_std(stream)
    }

    /// A TCP connection to 127.0.0.1:`port` in the pod from the address `source` (any
    /// of 127.0.0.0/8), as a client elsewhere would connect.
    pub async fn connect_from(
        &self,
        source: Ipv4Addr,
        port: u16,
    ) -> std::io::Result<tokio::net::TcpStream> {
        let socket = self
            .in_netns(|| {
                let socket = tokio::net::TcpSocket::new_v4()?;
                socket.bind(SocketAddr::from((source, 0)))?;
                Ok::<_, std::io::Error>(socket)
            })
            .map_err(std::io::Error::other)??;
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        tokio::time::timeout(Duration::from_secs(2), socket.connect(addr))
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connect"))?
    }

    /// `GET path` with `Host: host` and `headers` to 127.0.0.1:`port` in the pod, on a
    /// new connection; `limit` for the whole exchange.
    pub async fn get(
        &self,
        port: u16,
        host: &str,
        path: &str,
        headers: &[(&str, &str)],
        limit: Duration,
    ) -> std::io::Result<Reply> {
        self.get_from(Ipv4Addr::LOCALHOST, port, host, path, headers, limit)
            .await
    }

    /// [`Sandbox::get`] from the address `source` (any of 127.0.0.0/8).
    pub async fn get_from(
        &self,
        source: Ipv4Addr,
        port: u16,
        host: &str,
        path: &str,
        headers: &[(&str, &str)],
        limit: Duration,
    ) -> std::io::Result<Reply> {
        let mut request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        let exchange = async {
            let mut stream = self.connect_from(source, port).await?;
            stream.write_all(request.as_bytes()).await?;
            let mut raw = Vec::new();
            stream.read_to_end(&mut raw).await?;
            Ok::<_, std::io::Error>(raw)
        };
        let raw = tokio::time::timeout(limit, exchange).await.map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer in {limit:?}"),
            )
        })??;
        crate::http::parse(&raw)
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = self.pause.start_kill();
        let _ = self.pid;
    }
}

/// What the kubelet gives a pod besides its spec.
#[derive(Debug, Clone)]
pub struct PodIdentity {
    pub name: String,
    pub namespace: String,
    /// The ServiceAccount's token (what a TokenRequest would return).
    pub token: String,
    /// The cluster CA (the `kube-root-ca.crt` ConfigMap's `ca.crt`).
    pub ca_pem: String,
    /// Where the API server listens inside the pod (KUBERNETES_SERVICE_HOST/PORT).
    pub api_port: u16,
    /// The ServiceAccount's `automountServiceAccountToken`.
    pub service_account_automount: Option<bool>,
}

/// How the test reaches the programs a pod needs.
#[derive(Debug, Clone)]
pub struct Tools {
    /// `tugboat-pod-exec`.
    pub pod_exec: PathBuf,
}

/// One started container.
struct RunningContainer {
    name: String,
    child: Child,
    /// The host pid of the container's first process.
    pid: u32,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    stop_signal: Signal,
    exit: Option<ExitStatus>,
}

/// A container still running when its pod goes (a test that ends without deleting the
/// pod) is killed: its first process is the init of its pid namespace, so everything in
/// the namespace goes with it. `unshare --kill-child` does not reach it once it has
/// changed user, since a change of credentials clears the parent-death signal; without
/// this, haproxy masters outlive their tests. The process is killed only while it is
/// still in a pid namespace of its own, so a reused pid is never hit.
impl Drop for RunningContainer {
    fn drop(&mut self) {
        if self.exit.is_some() || self.pid == 0 {
            return;
        }
        let own = std::fs::read_link("/proc/self/ns/pid").ok();
        let its = std::fs::read_link(format!("/proc/{}/ns/pid", self.pid)).ok();
        if its.is_some()
            && its != own
            && let Some(pid) = Pid::from_raw(self.pid as i32)
        {
            let _ = rustix::process::kill_process(pid, Signal::KILL);
        }
    }
}

/// How one container ended when the pod was deleted.
#[derive(Debug, Clone)]
pub struct Termination {
    pub container: String,
    /// From the start of the deletion.
    pub after: Duration,
    /// When the stop signal was sent, from the start of the deletion.
    pub signalled_after: Duration,
    pub status: Option<ExitStatus>,
    /// Killed with SIGKILL at the end of the grace period.
    pub killed: bool,
}

/// The result of one probe.
#[derive(Debug, Clone)]
pub struct ProbeResult {
    pub container: String,
    /// startupProbe, livenessProbe, readinessProbe.
    pub kind: &'static str,
    /// What was probed (`GET :1024/healthz`, `TCP :6060`).
    pub target: String,
    pub outcome: Result<String, String>,
}

/// A running pod.
pub struct Pod {
    pub name: String,
    pub namespace: String,
    pub sandbox: Sandbox,
    spec: PodSpec,
    containers: Vec<RunningContainer>,
    /// Init containers' logs.
    init_logs: Vec<(String, String, String)>,
    dir: TempDir,
}

fn spawn_logger(
    stream: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    into: Arc<Mutex<String>>,
) {
    tokio::spawn(async move {
        let mut lines = BufReader::new(stream).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let mut text = into.lock().unwrap_or_else(|p| p.into_inner());
            text.push_str(&line);
            text.push('\n');
        }
    });
}

/// The host pid of the only child of `unshare` (the container's first process, forked
/// by `unshare --fork`); 0 when the container already ended.
async fn child_of(unshare: &mut Child) -> anyhow::Result<u32> {
    let parent = unshare.id().unwrap_or(0);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if unshare.try_wait()?.is_some() {
            return Ok(0);
        }
        for entry in std::fs::read_dir("/proc")?.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            if ppid == Some(parent) {
                return Ok(pid);
            }
        }
        ensure!(
            Instant::now() < deadline,
            "unshare {parent} started no container process"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

impl Pod {
    /// Prepares the volumes, runs the init containers to completion, then starts the
    /// containers, in the spec's order. `images` maps an image reference to an
    /// [`Image`].
    pub async fn start(
        sandbox: Sandbox,
        spec: &PodSpec,
        identity: &PodIdentity,
        images: &dyn Fn(&str) -> anyhow::Result<Image>,
        tools: &Tools,
    ) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir().context("pod folder")?;
        let mut pod = Self {
            name: identity.name.clone(),
            namespace: identity.namespace.clone(),
            sandbox,
            spec: spec.clone(),
            containers: Vec::new(),
            init_logs: Vec::new(),
            dir,
        };
        let host_network = spec.host_network == Some(true);
        ensure!(
            host_network == pod.sandbox.is_host_network(),
            "pod {}: hostNetwork is {host_network} but the sandbox is {}",
            pod.name,
            if pod.sandbox.is_host_network() {
                "the node's network"
            } else {
                "a network of its own"
            }
        );
        let host_ports: Vec<String> = spec
            .containers
            .iter()
            .flat_map(|c| c.ports.iter().flatten())
            .filter(|p| {
                p.host_port
                    .is_some_and(|h| !host_network || h != p.container_port)
            })
            .map(|p| format!("{:?} {:?}", p.name, p.host_port))
            .collect();
        ensure!(
            host_ports.is_empty(),
            "pod {}: hostPorts are not run here (the CNI's portmap maps them): {}",
            pod.name,
            host_ports.join(", ")
        );
        let security = spec.security_context.clone().unwrap_or_default();
        for sysctl in security.sysctls.iter().flatten() {
            pod.sandbox.set_sysctl(&sysctl.name, &sysctl.value)?;
        }
        let volumes = pod.prepare_volumes(identity)?;
        for container in spec.init_containers.iter().flatten() {
            let image = images(container.image.as_deref().unwrap_or_default())
                .with_context(|| format!("init container {}: image", container.name))?;
            let mut running = pod
                .launch(container, &image, &volumes, identity, tools)
                .await?;
            let status = tokio::time::timeout(Duration::from_secs(30), running.child.wait())
                .await
                .with_context(|| {
                    format!("init container {} did not end in 30 s", container.name)
                })??;
            tokio::time::sleep(Duration::from_millis(50)).await;
            let stdout = running
                .stdout
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            let stderr = running
                .stderr
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            ensure!(
                status.success(),
                "init container {} failed ({status}); stdout: {stdout} stderr: {stderr}",
                container.name
            );
            pod.init_logs.push((container.name.clone(), stdout, stderr));
        }
        for container in &spec.containers {
            let image = images(container.image.as_deref().unwrap_or_default())
                .with_context(|| format!("container {}: image", container.name))?;
            let running = pod
                .launch(container, &image, &volumes, identity, tools)
                .await?;
            pod.containers.push(running);
        }
        Ok(pod)
    }

    /// Host folders for the pod's volumes, as the kubelet prepares them; by volume name.
    fn prepare_volumes(&self, identity: &PodIdentity) -> anyhow::Result<BTreeMap<String, PathBuf>> {
        let security = self.spec.security_context.clone().unwrap_or_default();
        let fs_group = security.fs_group.map(|g| g as u32);
        let mut volumes: Vec<Volume> = self.spec.volumes.clone().unwrap_or_default();
        if self.automount_token(identity) {
            volumes.push(Volume {
                name: "kube-api-access-automount".into(),
                projected: Some(k8s_openapi::api::core::v1::ProjectedVolumeSource {
                    default_mode: Some(0o644),
                    sources: Some(vec![
                        serde_json::from_value(serde_json::json!({
                            "serviceAccountToken": {"path": "token", "expirationSeconds": 3607}
                        }))?,
                        serde_json::from_value(serde_json::json!({
                            "configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}
                        }))?,
                        serde_json::from_value(serde_json::json!({
                            "downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}
                        }))?,
                    ]),
                }),
                ..Volume::default()
            });
        }
        let mut out = BTreeMap::new();
        for volume in &volumes {
            let path = self.dir.path().join("volumes").join(&volume.name);
            std::fs::create_dir_all(&path)?;
            if volume.empty_dir.is_some() {
                // The kubelet makes emptyDirs 0777; with fsGroup, group-owned by it and
                // setgid, so that what is created inside carries the group.
                let mut mode = 0o777;
                if let Some(group) = fs_group {
                    std::os::unix::fs::chown(&path, None, Some(group))?;
                    mode |= 0o2000;
                }
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
            } else if let Some(projected) = &volume.projected {
                let mode = projected.default_mode.unwrap_or(0o644) as u32;
                for source in projected.sources.iter().flatten() {
                    let mut files: Vec<(String, String, Option<i32>)> = Vec::new();
                    if let Some(token) = &source.service_account_token {
                        files.push((token.path.clone(), identity.token.clone(), None));
                    } else if let Some(cm) = &source.config_map {
                        ensure!(
                            cm.name == "kube-root-ca.crt",
                            "volume {}: only the kube-root-ca.crt ConfigMap is known here, not {}",
                            volume.name,
                            cm.name
                        );
                        for item in cm.items.iter().flatten() {
                            ensure!(
                                item.key == "ca.crt",
                                "volume {}: kube-root-ca.crt has no key {}",
                                volume.name,
                                item.key
                            );
                            files.push((item.path.clone(), identity.ca_pem.clone(), item.mode));
                        }
                    } else if let Some(downward) = &source.downward_api {
                        for item in downward.items.iter().flatten() {
                            let field = item.field_ref.as_ref().with_context(|| {
                                format!("volume {}: {} has no fieldRef", volume.name, item.path)
                            })?;
                            files.push((
                                item.path.clone(),
                                self.field(&field.field_path, identity)?,
                                item.mode,
                            ));
                        }
                    } else {
                        bail!(
                            "volume {}: a projected source other than token, ConfigMap kube-root-ca.crt and downwardAPI",
                            volume.name
                        );
                    }
                    for (name, content, item_mode) in files {
                        let file = path.join(&name);
                        std::fs::write(&file, content)?;
                        let mut mode = item_mode.map_or(mode, |m| m as u32);
                        if let Some(group) = fs_group {
                            std::os::unix::fs::chown(&file, None, Some(group))?;
                            mode |= 0o440;
                        }
                        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode))?;
                    }
                }
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
            } else {
                bail!(
                    "volume {}: only emptyDir and projected volumes are run here",
                    volume.name
                );
            }
            out.insert(volume.name.clone(), path);
        }
        Ok(out)
    }

    /// Whether the service-account admission would mount a token into every container:
    /// the pod's `automountServiceAccountToken`, else the ServiceAccount's, else true.
    fn automount_token(&self, identity: &PodIdentity) -> bool {
        self.spec
            .automount_service_account_token
            .or(identity.service_account_automount)
            .unwrap_or(true)
    }

    /// A downward-API field.
    fn field(&self, path: &str, identity: &PodIdentity) -> anyhow::Result<String> {
        Ok(match path {
            "metadata.name" => identity.name.clone(),
            "metadata.namespace" => identity.namespace.clone(),
            "spec.serviceAccountName" => self
                .spec
                .service_account_name
                .clone()
                .unwrap_or_else(|| "default".into()),
            "spec.nodeName" => "node-1".into(),
            "status.podIP" | "status.hostIP" => "127.0.0.1".into(),
            other => bail!("fieldRef {other} is not known here"),
        })
    }

    /// The plan of one container: its image, the spec, and the kubelet's rules.
    fn plan(
        &self,
        container: &Container,
        image: &Image,
        volumes: &BTreeMap<String, PathBuf>,
        identity: &PodIdentity,
    ) -> anyhow::Result<ContainerPlan> {
        let name = &container.name;
        let pod_security = self.spec.security_context.clone().unwrap_or_default();
        let security = container.security_context.clone().unwrap_or_default();
        // Command: `command` replaces the image's ENTRYPOINT (and drops its CMD), `args`
        // replace CMD.
        let argv: Vec<String> = match (&container.command, &container.args) {
            (Some(command), args) => command
                .iter()
                .chain(args.iter().flatten())
                .cloned()
                .collect(),
            (None, Some(args)) => image.entrypoint.iter().chain(args).cloned().collect(),
            (None, None) => image.entrypoint.iter().chain(&image.cmd).cloned().collect(),
        };
        ensure!(!argv.is_empty(), "container {name}: no command");
        if let Some(lifecycle) = &container.lifecycle {
            ensure!(
                lifecycle.post_start.is_none(),
                "container {name}: postStart hooks are not run here"
            );
            ensure!(
                lifecycle.pre_stop.as_ref().is_none_or(|h| h.exec.is_none()),
                "container {name}: exec preStop hooks are not run here"
            );
        }
        let uid = security
            .run_as_user
            .or(pod_security.run_as_user)
            .map_or(image.uid, |u| u as u32);
        let gid = security
            .run_as_group
            .or(pod_security.run_as_group)
            .map_or(image.gid, |g| g as u32);
        let non_root = security.run_as_non_root.or(pod_security.run_as_non_root);
        ensure!(
            !(non_root == Some(true) && uid == 0),
            "container {name}: runAsNonRoot and runs as uid 0 (CreateContainerConfigError)"
        );
        let mut groups: Vec<u32> = Vec::new();
        if let Some(group) = pod_security.fs_group {
            groups.push(group as u32);
        }
        for group in pod_security.supplemental_groups.iter().flatten() {
            groups.push(*group as u32);
        }
        groups.sort_unstable();
        groups.dedup();
        let mut capabilities: Vec<String> = RUNTIME_DEFAULT_CAPABILITIES
            .iter()
            .map(|c| c.to_string())
            .collect();
        if let Some(caps) = &security.capabilities {
            for dropped in caps.drop.iter().flatten() {
                let dropped = dropped.trim_start_matches("CAP_").to_ascii_uppercase();
                if dropped == "ALL" {
                    capabilities.clear();
                } else {
                    capabilities.retain(|c| *c != dropped);
                }
            }
            for added in caps.add.iter().flatten() {
                capabilities.push(added.trim_start_matches("CAP_").to_ascii_uppercase());
            }
        }
        let mut mounts = Vec::new();
        for mount in container.volume_mounts.iter().flatten() {
            mounts.push(self.mount(name, mount, volumes)?);
        }
        if self.automount_token(identity)
            && !mounts
                .iter()
                .any(|m| m.path == Path::new(SERVICE_ACCOUNT_DIR))
        {
            mounts.push(VolumeMount {
                volume: "kube-api-access-automount".into(),
                source: volumes
                    .get("kube-api-access-automount")
                    .context("automount volume")?
                    .clone(),
                path: SERVICE_ACCOUNT_DIR.into(),
                read_only: true,
            });
        }
        // Environment: the image's, the kubelet's (the `kubernetes` Service, always,
        // enableServiceLinks or not; HOSTNAME), then the container's.
        let mut env: Vec<(String, String)> = image.env.clone();
        let port = identity.api_port.to_string();
        let kubelet = [
            ("HOSTNAME", identity.name.clone()),
            ("KUBERNETES_SERVICE_HOST", "127.0.0.1".into()),
            ("KUBERNETES_SERVICE_PORT", port.clone()),
            ("KUBERNETES_SERVICE_PORT_HTTPS", port.clone()),
            ("KUBERNETES_PORT", format!("tcp://127.0.0.1:{port}")),
            (
                &*format!("KUBERNETES_PORT_{port}_TCP"),
                format!("tcp://127.0.0.1:{port}"),
            ),
        ]
        .map(|(k, v)| (k.to_string(), v));
        let mut set = |key: String, value: String| {
            env.retain(|(k, _)| *k != key);
            env.push((key, value));
        };
        for (key, value) in kubelet {
            set(key, value);
        }
        for var in container.env.iter().flatten() {
            let value = match (&var.value, &var.value_from) {
                (Some(value), _) => value.clone(),
                (None, Some(from)) => {
                    let field = from.field_ref.as_ref().with_context(|| {
                        format!(
                            "container {name}: env {}: only fieldRef is known here",
                            var.name
                        )
                    })?;
                    self.field(&field.field_path, identity)?
                }
                (None, None) => String::new(),
            };
            set(var.name.clone(), value);
        }
        let (mut host_dirs, symlinks) = host_library_dirs();
        for folder in own_library_dirs(&image.files, &host_dirs)? {
            if !host_dirs.contains(&folder) {
                host_dirs.push(folder);
            }
        }
        Ok(ContainerPlan {
            name: name.clone(),
            root: self.dir.path().join("containers").join(name).join("root"),
            host_dirs,
            symlinks,
            image_dirs: image.dirs.clone(),
            image_files: image.files.clone(),
            mounts,
            read_only_root_filesystem: security.read_only_root_filesystem == Some(true),
            working_dir: container
                .working_dir
                .clone()
                .map_or_else(|| image.working_dir.clone(), PathBuf::from),
            uid,
            gid,
            groups,
            capabilities,
            no_new_privs: security.allow_privilege_escalation == Some(false),
            env,
            argv,
        })
    }

    fn mount(
        &self,
        container: &str,
        mount: &K8sMount,
        volumes: &BTreeMap<String, PathBuf>,
    ) -> anyhow::Result<VolumeMount> {
        let source = volumes.get(&mount.name).with_context(|| {
            format!(
                "container {container}: volumeMount {} names no volume of the pod",
                mount.name
            )
        })?;
        ensure!(
            mount.sub_path.is_none() && mount.sub_path_expr.is_none(),
            "container {container}: volumeMount {}: subPath is not run here",
            mount.name
        );
        let volume = self
            .spec
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == mount.name);
        // Secret, ConfigMap, downwardAPI and projected volumes are always read-only.
        let always_read_only = volume.is_some_and(|v| {
            v.projected.is_some()
                || v.secret.is_some()
                || v.config_map.is_some()
                || v.downward_api.is_some()
        });
        Ok(VolumeMount {
            volume: mount.name.clone(),
            source: source.clone(),
            path: mount.mount_path.clone().into(),
            read_only: mount.read_only == Some(true) || always_read_only,
        })
    }

    async fn launch(
        &self,
        container: &Container,
        image: &Image,
        volumes: &BTreeMap<String, PathBuf>,
        identity: &PodIdentity,
        tools: &Tools,
    ) -> anyhow::Result<RunningContainer> {
        let plan = self.plan(container, image, volumes, identity)?;
        std::fs::create_dir_all(&plan.root)?;
        let plan_path = self
            .dir
            .path()
            .join("containers")
            .join(&container.name)
            .join("plan.json");
        std::fs::write(&plan_path, serde_json::to_vec_pretty(&plan)?)?;
        let ns = |kind: &str| format!("--{kind}=/proc/{}/ns/{kind}", self.sandbox.pid);
        let mut child = Command::new("nsenter")
            .arg(ns("net"))
            .arg(ns("uts"))
            .arg(ns("ipc"))
            .args([
                "--",
                "unshare",
                "--mount",
                "--pid",
                "--fork",
                "--kill-child",
                "--propagation",
                "private",
                "--",
            ])
            .arg(&tools.pod_exec)
            .arg(&plan_path)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("cannot run nsenter (util-linux)")?;
        let stdout = Arc::new(Mutex::new(String::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(out) = child.stdout.take() {
            spawn_logger(out, stdout.clone());
        }
        if let Some(err) = child.stderr.take() {
            spawn_logger(err, stderr.clone());
        }
        let pid = child_of(&mut child).await?;
        Ok(RunningContainer {
            name: container.name.clone(),
            child,
            pid,
            stdout,
            stderr,
            stop_signal: image.stop_signal,
            exit: None,
        })
    }

    fn running(&self, name: &str) -> anyhow::Result<&RunningContainer> {
        self.containers
            .iter()
            .find(|c| c.name == name)
            .with_context(|| format!("pod {} has no container {name}", self.name))
    }

    fn spec_of(&self, name: &str) -> anyhow::Result<&Container> {
        self.spec
            .containers
            .iter()
            .find(|c| c.name == name)
            .with_context(|| format!("pod {} has no container {name}", self.name))
    }

    /// What the container wrote on stdout (`kubectl logs -c NAME`, stdout part).
    pub fn stdout(&self, name: &str) -> String {
        self.running(name)
            .map(|c| c.stdout.lock().unwrap_or_else(|p| p.into_inner()).clone())
            .unwrap_or_default()
    }

    /// What the container wrote on stderr.
    pub fn stderr(&self, name: &str) -> String {
        self.running(name)
            .map(|c| c.stderr.lock().unwrap_or_else(|p| p.into_inner()).clone())
            .unwrap_or_default()
    }

    /// Every container's output, for failure messages (the last `lines` of each).
    pub fn logs(&self, lines: usize) -> String {
        let tail = |text: &str| {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        };
        let mut out = String::new();
        for (name, stdout, stderr) in &self.init_logs {
            out.push_str(&format!(
                "--- {}/{name} (init) stdout:\n{}\n--- stderr:\n{}\n",
                self.name,
                tail(stdout),
                tail(stderr)
            ));
        }
        for c in &self.containers {
            out.push_str(&format!(
                "--- {}/{} stdout:\n{}\n--- {}/{} stderr:\n{}\n",
                self.name,
                c.name,
                tail(&self.stdout(&c.name)),
                self.name,
                c.name,
                tail(&self.stderr(&c.name))
            ));
        }
        out
    }

    /// `path` as the container sees it (through /proc/PID/root: its mount namespace
    /// and root).
    pub fn path_in(&self, name: &str, path: &str) -> anyhow::Result<PathBuf> {
        let c = self.running(name)?;
        Ok(PathBuf::from(format!("/proc/{}/root", c.pid)).join(path.trim_start_matches('/')))
    }

    /// The host pid of the container's first process.
    pub fn pid(&self, name: &str) -> anyhow::Result<u32> {
        Ok(self.running(name)?.pid)
    }

    /// Whether the container is still running (its exit status otherwise).
    pub fn exited(&mut self, name: &str) -> Option<ExitStatus> {
        let c = self.containers.iter_mut().find(|c| c.name == name)?;
        if c.exit.is_none() {
            c.exit = c.child.try_wait().ok().flatten();
        }
        c.exit
    }

    /// The container port a probe names (a number, or the name of a container port).
    fn port(container: &Container, port: &IntOrString) -> anyhow::Result<u16> {
        match port {
            IntOrString::Int(n) => Ok(*n as u16),
            IntOrString::String(name) => container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .map(|p| p.container_port as u16)
                .with_context(|| {
                    format!(
                        "container {}: probe port {name} names no container port",
                        container.name
                    )
                }),
        }
    }

    /// Runs every probe of every container once, as the kubelet does: httpGet succeeds
    /// on 200-399, tcpSocket on a connection.
    pub async fn probe_all(&self) -> Vec<ProbeResult> {
        let mut results = Vec::new();
        for container in &self.spec.containers {
            for (kind, probe) in [
                ("startupProbe", &container.startup_probe),
                ("livenessProbe", &container.liveness_probe),
                ("readinessProbe", &container.readiness_probe),
            ] {
                if let Some(probe) = probe {
                    results.push(self.probe(container, kind, probe).await);
                }
            }
        }
        results
    }

    async fn probe(&self, container: &Container, kind: &'static str, probe: &Probe) -> ProbeResult {
        let timeout = Duration::from_secs(probe.timeout_seconds.unwrap_or(1).max(1) as u64);
        let (target, outcome) = if let Some(http) = &probe.http_get {
            self.probe_http(container, http, timeout).await
        } else if let Some(tcp) = &probe.tcp_socket {
            match Self::port(container, &tcp.port) {
                Ok(port) => {
                    let outcome =
                        match tokio::time::timeout(timeout, self.sandbox.connect(port)).await {
                            Ok(Ok(_)) => Ok("connected".to_string()),
                            Ok(Err(err)) => Err(err.to_string()),
                            Err(_) => Err(format!("no connection in {timeout:?}")),
                        };
                    (format!("TCP :{port}"), outcome)
                }
                Err(err) => ("TCP ?".to_string(), Err(err.to_string())),
            }
        } else {
            (
                "?".to_string(),
                Err("only httpGet and tcpSocket probes are run here".to_string()),
            )
        };
        ProbeResult {
            container: container.name.clone(),
            kind,
            target,
            outcome,
        }
    }

    async fn probe_http(
        &self,
        container: &Container,
        http: &HTTPGetAction,
        timeout: Duration,
    ) -> (String, Result<String, String>) {
        let port = match Self::port(container, &http.port) {
            Ok(port) => port,
            Err(err) => return ("GET ?".to_string(), Err(err.to_string())),
        };
        let path = http.path.clone().unwrap_or_else(|| "/".into());
        let target = format!("GET :{port}{path}");
        if http.scheme.as_deref().is_some_and(|s| s != "HTTP") {
            return (target, Err("only HTTP probes are run here".into()));
        }
        let host = http
            .host
            .clone()
            .unwrap_or_else(|| format!("127.0.0.1:{port}"));
        let outcome = match self
            .sandbox
            .get(
                port,
                &host,
                &path,
                &[("User-Agent", "kube-probe/1.33")],
                timeout,
            )
            .await
        {
            Ok(reply) if (200..400).contains(&reply.status) => Ok(format!("{}", reply.status)),
            Ok(reply) => Err(format!("answered {}", reply.status)),
            Err(err) => Err(err.to_string()),
        };
        (target, outcome)
    }

    /// Deletes the pod as the kubelet does: for every container at once, its preStop
    /// hook, then the image's stop signal, then SIGKILL when the grace period
    /// (`terminationGracePeriodSeconds`, 30 s by default) is over.
    pub async fn delete(&mut self) -> Vec<Termination> {
        let grace = Duration::from_secs(
            self.spec
                .termination_grace_period_seconds
                .unwrap_or(30)
                .max(0) as u64,
        );
        let started = Instant::now();
        let deadline = started + grace;
        let specs: Vec<Container> = self.spec.containers.clone();
        let sandbox = &self.sandbox;
        let stops = self.containers.iter_mut().map(|c| {
            let spec = specs.iter().find(|s| s.name == c.name).cloned();
            async move {
                if let Some(hook) = spec
                    .as_ref()
                    .and_then(|s| s.lifecycle.as_ref())
                    .and_then(|l| l.pre_stop.as_ref())
                {
                    if let Some(sleep) = &hook.sleep {
                        let wanted = Duration::from_secs(sleep.seconds.max(0) as u64);
                        tokio::time::sleep(
                            wanted.min(deadline.saturating_duration_since(Instant::now())),
                        )
                        .await;
                    } else if let (Some(http), Some(spec)) = (&hook.http_get, &spec)
                        && let Ok(port) = Self::port(spec, &http.port)
                    {
                        let path = http.path.clone().unwrap_or_else(|| "/".into());
                        let _ = sandbox
                            .get(
                                port,
                                "127.0.0.1",
                                &path,
                                &[],
                                deadline.saturating_duration_since(Instant::now()),
                            )
                            .await;
                    }
                }
                let signalled_after = started.elapsed();
                if c.exit.is_none() {
                    let _ = rustix::process::kill_process(
                        Pid::from_raw(c.pid as i32).unwrap_or(Pid::INIT),
                        c.stop_signal,
                    );
                }
                let remaining = deadline
                    .saturating_duration_since(Instant::now())
                    // The kubelet grants at least 2 s after the hook.
                    .max(Duration::from_secs(2));
                let mut killed = false;
                let status = match c.exit {
                    Some(status) => Some(status),
                    None => match tokio::time::timeout(remaining, c.child.wait()).await {
                        Ok(status) => status.ok(),
                        Err(_) => {
                            killed = true;
                            let _ = c.child.kill().await;
                            c.child.wait().await.ok()
                        }
                    },
                };
                c.exit = status;
                Termination {
                    container: c.name.clone(),
                    after: started.elapsed(),
                    signalled_after,
                    status,
                    killed,
                }
            }
        });
        futures::future::join_all(stops).await
    }

    /// The container spec of `name`.
    pub fn container_spec(&self, name: &str) -> anyhow::Result<&Container> {
        self.spec_of(name)
    }
}

/// The folders outside `host_dirs` that the image's binaries load from: a binary that
/// carries its own libraries (haproxy 3.0 from Debian trixie's package, with trixie's
/// glibc beside it) names them as its interpreter and run paths, at their path on this
/// machine. A copy of such a binary (the setcap'ed one) names the original's folders.
fn own_library_dirs(files: &[ImageFile], host_dirs: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut folders = Vec::new();
    for file in files {
        let Some(paths) = crate::elf_loader::loader_paths(&file.source)? else {
            continue;
        };
        for folder in paths.folders() {
            let real = std::fs::canonicalize(&folder).with_context(|| {
                format!(
                    "{} loads from {}, which is not there",
                    file.source.display(),
                    folder.display()
                )
            })?;
            // /lib64 -> usr/lib64 and the like: already in every container.
            if !host_dirs.iter().any(|dir| real.starts_with(dir)) && !folders.contains(&folder) {
                folders.push(folder);
            }
        }
    }
    Ok(folders)
}

/// This machine's library folders, bound read-only into every container (the test's
/// binaries are linked against them), and the symbolic links among them.
fn host_library_dirs() -> (Vec<PathBuf>, Vec<(PathBuf, PathBuf)>) {
    let mut dirs = Vec::new();
    let mut links = Vec::new();
    for path in [
        "/usr/lib",
        "/usr/lib64",
        "/usr/lib32",
        "/lib",
        "/lib64",
        "/lib32",
        "/libx32",
    ] {
        let path = PathBuf::from(path);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(&path) {
                    links.push((path, target));
                }
            }
            Ok(meta) if meta.is_dir() => dirs.push(path),
            _ => {}
        }
    }
    (dirs, links)
}
