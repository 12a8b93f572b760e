//! What the commands share at their edges: the Kubernetes client a kubeconfig (or the
//! pod's service account) gives, and standard output that a reader may close early.

use std::path::Path;

use anyhow::Context;

/// A client from `--kubeconfig`, else `KUBECONFIG` / `~/.kube/config`, else the
/// in-cluster service account.
pub async fn kube_client(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("cannot read --kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &Default::default())
                .await
                .with_context(|| format!("cannot use --kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer().await.context(
            "cannot find the Kubernetes API: not in a cluster, and no --kubeconfig, \
             KUBECONFIG or ~/.kube/config (or pass --manifests DIR)",
        )?,
    };
    kube::Client::try_from(config).context("cannot create the Kubernetes client")
}

/// Writes `text` to standard output. A reader that stops early (`| head`) is not an
/// error: what it did not read is not wanted.
pub fn print_out(text: &str) {
    use std::io::Write as _;
    let _ = std::io::stdout().write_all(text.as_bytes());
}
