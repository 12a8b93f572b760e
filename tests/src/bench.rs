//! What the benchmarks that run the release controller as a subprocess share: finding
//! the binary, waiting for its first apply, the EndpointSlices they move, and medians.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

/// The namespace of the benchmarks' objects.
pub const NAMESPACE: &str = "bench";

/// The release controller: `TUGBOAT_BIN`, else the `tugboat` next to this program.
pub fn tugboat_binary() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("TUGBOAT_BIN") {
        return Ok(path.into());
    }
    let exe = std::env::current_exe().context("cannot find this program")?;
    let path = exe.with_file_name("tugboat");
    if !path.is_file() {
        bail!(
            "{} not found: build it first (cargo build --release -p tugboat) or set TUGBOAT_BIN",
            path.display()
        );
    }
    Ok(path)
}

/// Waits until the controller's `/readyz` on `admin` answers 200 (its first successful
/// apply), failing when it exits or after `limit`.
pub async fn wait_until_ready(
    child: &mut tokio::process::Child,
    admin: SocketAddr,
    limit: Duration,
) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        if started.elapsed() > limit {
            bail!("no successful apply within {limit:?}");
        }
        if let Some(status) = child.try_wait()? {
            bail!("the controller exited: {status}");
        }
        if let Ok(reply) = crate::get(admin, "localhost", "/readyz").await
            && reply.status == 200
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The EndpointSlice of Service `svc-{index}`: 5 ready endpoints on loopback addresses
/// that nothing listens on (haproxy never contacts them: no health checks, no traffic),
/// the first one at `first_address` when given.
pub fn endpoint_slice(index: usize, first_address: Option<&str>) -> Value {
    let name = format!("svc-{index}");
    let endpoints: Vec<_> = (0..5)
        .map(|e| {
            let address = match first_address {
                Some(address) if e == 0 => address.to_string(),
                _ => endpoint_address(index, e),
            };
            json!({
                "addresses": [address],
                "conditions": {"ready": true},
                "targetRef": {"kind": "Pod", "namespace": NAMESPACE, "name": format!("{name}-pod-{e}")}
            })
        })
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{name}-abcde"), "namespace": NAMESPACE,
                     "labels": {"kubernetes.io/service-name": name}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": endpoints
    })
}

/// The address of endpoint `endpoint` of Service `svc-{index}`, unique in the cluster.
pub fn endpoint_address(index: usize, endpoint: usize) -> String {
    let n = index * 5 + endpoint;
    format!("127.{}.{}.{}", 1 + n / 65536, (n / 256) % 256, n % 256)
}

/// The median of `values`, in milliseconds (0 for none).
pub fn median_ms(values: &[Duration]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort();
    sorted
        .get(sorted.len() / 2)
        .map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// Where the controller reads the objects.
pub enum ObjectSource<'a> {
    /// The API server of this kubeconfig, as the chart's pod does.
    Kubeconfig(&'a std::path::Path),
    /// A folder of manifests.
    Manifests(&'a std::path::Path),
}

/// The command that starts the release controller for `haproxy` on the objects of
/// `source`, as the chart's pod runs it: loopback binds, the admin endpoints
/// (`/readyz`, `/metrics`) on 127.0.0.1:`admin_port`, one replica called `bench`.
pub fn controller_command(
    tugboat: &std::path::Path,
    haproxy: &crate::Haproxy,
    source: ObjectSource<'_>,
    admin_port: u16,
) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(tugboat);
    command
        .arg("run")
        .arg("--master-socket")
        .arg(&haproxy.master_socket)
        .arg("--config-dir")
        .arg(&haproxy.config_dir)
        .arg("--lib-dir")
        .arg(&haproxy.lib_dir)
        .args(["--bind-address", "127.0.0.1"])
        .args(["--http-port", &haproxy.http_port.to_string()])
        .args(["--https-port", &haproxy.https_port.to_string()])
        .args(["--controller-address", "127.0.0.1"])
        .args(["--controller-port", &admin_port.to_string()])
        .env("POD_NAME", "bench")
        .env("POD_NAMESPACE", "tugboat-system")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    match source {
        ObjectSource::Kubeconfig(path) => command.arg("--kubeconfig").arg(path),
        ObjectSource::Manifests(folder) => command.arg("--manifests").arg(folder),
    };
    command
}
