//! One container of the chart pod test, as a container runtime would start it: what its
//! root file system holds, which volumes it mounts where (read-only or not), as which
//! uid, gid and groups, with which capabilities, and the command line. The pod runner
//! ([`crate::pod_runner`]) writes a [`ContainerPlan`] as JSON; `tugboat-pod-exec PLAN`
//! ([`execute`]) carries it out as the first process of a fresh mount and PID namespace
//! (made by util-linux `unshare` inside the pod's network namespace), then becomes the
//! container's command.

use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use rustix::mount::{MountFlags, MountPropagationFlags};
use rustix::thread::{CapabilitySet, CapabilitySets};
use serde::{Deserialize, Serialize};

/// A file the image has, taken from this machine (read-only in the container).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ImageFile {
    /// On this machine.
    pub source: PathBuf,
    /// In the container.
    pub path: PathBuf,
}

/// A folder the image has (empty unless a volume is mounted over it).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ImageDir {
    pub path: PathBuf,
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
}

/// A volume mount: a folder of this machine at `path`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VolumeMount {
    pub volume: String,
    pub source: PathBuf,
    pub path: PathBuf,
    pub read_only: bool,
}

/// Everything `tugboat-pod-exec` needs to start one container.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContainerPlan {
    pub name: String,
    /// An empty folder of this machine where the root file system is assembled.
    pub root: PathBuf,
    /// Folders of this machine bound read-only at the same path (shared libraries: the
    /// test's binaries are linked against this machine's libc, not the image's, or
    /// against the libraries in a folder they name themselves).
    pub host_dirs: Vec<PathBuf>,
    /// Symbolic links to create (path, target), e.g. `/lib` -> `usr/lib`.
    pub symlinks: Vec<(PathBuf, PathBuf)>,
    pub image_dirs: Vec<ImageDir>,
    pub image_files: Vec<ImageFile>,
    pub mounts: Vec<VolumeMount>,
    pub read_only_root_filesystem: bool,
    pub working_dir: PathBuf,
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups (the pod's fsGroup and supplementalGroups).
    pub groups: Vec<u32>,
    /// Capability names without `CAP_` (the runtime's default set, minus `drop`, plus
    /// `add`): the bounding set, and the effective set of a root process.
    pub capabilities: Vec<String>,
    /// `allowPrivilegeEscalation: false`.
    pub no_new_privs: bool,
    pub env: Vec<(String, String)>,
    /// The command line; `argv[0]` is looked up in the container's `PATH`.
    pub argv: Vec<String>,
}

/// Carries out the plan in `path` and becomes the container's command; returns only on
/// error.
pub fn execute(path: &Path) -> anyhow::Error {
    match run(path) {
        Ok(never) => match never {},
        Err(err) => err,
    }
}

enum Never {}

fn run(path: &Path) -> anyhow::Result<Never> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the plan {}", path.display()))?;
    let plan: ContainerPlan = serde_json::from_str(&text).context("invalid plan")?;
    build_root(&plan).with_context(|| format!("container {}: root file system", plan.name))?;
    enter_root(&plan).with_context(|| format!("container {}: chroot", plan.name))?;
    drop_privileges(&plan).with_context(|| format!("container {}: privileges", plan.name))?;
    let mut command = std::process::Command::new(&plan.argv[0]);
    command
        .args(&plan.argv[1..])
        .env_clear()
        .envs(plan.env.iter().cloned());
    let err = command.exec();
    Err(anyhow::anyhow!(
        "container {}: cannot run {:?}: {err}",
        plan.name,
        plan.argv
    ))
}

/// `path` inside the root folder.
fn inside(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

fn bind(source: &Path, target: &Path, read_only: bool) -> anyhow::Result<()> {
    rustix::mount::mount_bind(source, target)
        .with_context(|| format!("bind {} at {}", source.display(), target.display()))?;
    if read_only {
        rustix::mount::mount_remount(
            target,
            // Not nosuid: an image's file capabilities (setcap) must take effect.
            MountFlags::BIND | MountFlags::RDONLY,
            "",
        )
        .with_context(|| format!("make {} read-only", target.display()))?;
    }
    Ok(())
}

fn touch(path: &Path) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, b"").with_context(|| format!("create {}", path.display()))
}

fn build_root(plan: &ContainerPlan) -> anyhow::Result<()> {
    // Nothing mounted here reaches the machine's mount namespace.
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )
    .context("make mounts private")?;
    let root = &plan.root;
    rustix::mount::mount("rootfs", root, "tmpfs", MountFlags::NOSUID, c"mode=0755")
        .context("tmpfs root")?;
    for dir in &plan.host_dirs {
        let target = inside(root, dir);
        std::fs::create_dir_all(&target)?;
        bind(dir, &target, true)?;
    }
    for (link, target) in &plan.symlinks {
        let at = inside(root, link);
        if let Some(parent) = at.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::os::unix::fs::symlink(target, &at)
            .with_context(|| format!("symlink {}", link.display()))?;
    }
    for dir in &plan.image_dirs {
        let at = inside(root, &dir.path);
        std::fs::create_dir_all(&at)?;
        std::fs::set_permissions(&at, std::fs::Permissions::from_mode(dir.mode))?;
        std::os::unix::fs::chown(&at, Some(dir.uid), Some(dir.gid))?;
    }
    for file in &plan.image_files {
        let at = inside(root, &file.path);
        touch(&at)?;
        bind(&file.source, &at, true)?;
    }
    // /dev as a runtime makes it: a tmpfs with the usual device nodes.
    let dev = inside(root, Path::new("/dev"));
    std::fs::create_dir_all(&dev)?;
    rustix::mount::mount(
        "dev",
        &dev,
        "tmpfs",
        MountFlags::NOSUID | MountFlags::NOEXEC,
        c"mode=0755",
    )
    .context("tmpfs /dev")?;
    for node in ["null", "zero", "full", "random", "urandom", "tty"] {
        let host = Path::new("/dev").join(node);
        let at = dev.join(node);
        touch(&at)?;
        bind(&host, &at, false)?;
    }
    std::fs::create_dir_all(dev.join("shm"))?;
    std::os::unix::fs::symlink("/proc/self/fd", dev.join("fd"))?;
    for (i, name) in ["stdin", "stdout", "stderr"].into_iter().enumerate() {
        std::os::unix::fs::symlink(format!("/proc/self/fd/{i}"), dev.join(name))?;
    }
    // A fresh /proc: this container's PID namespace.
    let proc = inside(root, Path::new("/proc"));
    std::fs::create_dir_all(&proc)?;
    rustix::mount::mount(
        "proc",
        &proc,
        "proc",
        MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
        None,
    )
    .context("mount /proc")?;
    for dir in ["/tmp", "/etc", "/var", "/run"] {
        std::fs::create_dir_all(inside(root, Path::new(dir)))?;
    }
    for mount in &plan.mounts {
        let at = inside(root, &mount.path);
        std::fs::create_dir_all(&at)
            .with_context(|| format!("volume {}: create {}", mount.volume, mount.path.display()))?;
        bind(&mount.source, &at, mount.read_only)
            .with_context(|| format!("volume {}", mount.volume))?;
    }
    if plan.read_only_root_filesystem {
        rustix::mount::mount_remount(root, MountFlags::RDONLY | MountFlags::NOSUID, "")
            .context("read-only root file system")?;
    }
    Ok(())
}

fn enter_root(plan: &ContainerPlan) -> anyhow::Result<()> {
    std::env::set_current_dir(&plan.root)?;
    rustix::process::chroot(".")?;
    std::env::set_current_dir(&plan.working_dir)
        .with_context(|| format!("working directory {}", plan.working_dir.display()))?;
    Ok(())
}

/// Every capability the kernel knows, by name (without `CAP_`), in the order of their
/// numbers (`CAP_CHOWN` is 0).
const CAPABILITIES: [&str; 41] = [
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
];

/// The set holding the capability numbered `number`.
fn capability_set(number: usize) -> CapabilitySet {
    CapabilitySet::from_bits_retain(1 << number)
}

fn drop_privileges(plan: &ContainerPlan) -> anyhow::Result<()> {
    let mut keep = CapabilitySet::empty();
    for name in &plan.capabilities {
        let name = name.trim_start_matches("CAP_").to_ascii_uppercase();
        let number = CAPABILITIES
            .iter()
            .position(|n| *n == name)
            .with_context(|| format!("unknown capability {name}"))?;
        keep |= capability_set(number);
    }
    for (number, name) in CAPABILITIES.into_iter().enumerate() {
        let capability = capability_set(number);
        if !keep.contains(capability)
            && rustix::thread::capability_is_in_bounding_set(capability).unwrap_or(false)
        {
            rustix::thread::remove_capability_from_bounding_set(capability)
                .with_context(|| format!("drop {name} from the bounding set"))?;
        }
    }
    // This program is single-threaded: the thread's ids are the process's.
    let groups: Vec<rustix::process::Gid> = plan
        .groups
        .iter()
        .map(|g| rustix::process::Gid::from_raw(*g))
        .collect();
    rustix::thread::set_thread_groups(&groups).context("supplementary groups")?;
    rustix::thread::set_thread_res_gid(
        rustix::process::Gid::from_raw(plan.gid),
        rustix::process::Gid::from_raw(plan.gid),
        rustix::process::Gid::from_raw(plan.gid),
    )
    .context("gid")?;
    if plan.uid != 0 {
        // Leaving uid 0 clears every capability (keep-caps is off).
        rustix::thread::set_thread_res_uid(
            rustix::process::Uid::from_raw(plan.uid),
            rustix::process::Uid::from_raw(plan.uid),
            rustix::process::Uid::from_raw(plan.uid),
        )
        .context("uid")?;
    } else {
        rustix::thread::set_capabilities(
            None,
            CapabilitySets {
                effective: keep,
                permitted: keep,
                inheritable: CapabilitySet::empty(),
            },
        )
        .context("capabilities")?;
    }
    if plan.no_new_privs {
        rustix::thread::set_no_new_privs(true).context("no_new_privs")?;
    }
    Ok(())
}
