//! haproxy and a controller on the Kubernetes API (the fake API server), as one replica
//! of the controller Deployment: status and metrics are visible to the test.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tugboat::cluster::{self, ClusterOptions, Election};
use tugboat::controller::{ControllerConfig, ControllerStatus};
use tugboat::metrics::Metrics;
use tugboat_kube::api_source::ApiSourceConfig;
use tugboat_kube::status::{PublishTarget, StatusPace};

use crate::{FakeApiServer, Haproxy, HaproxyBinary};

/// The IngressClass Tugboat serves by default, as YAML.
pub const TUGBOAT_CLASS: &str = "\
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: tugboat
spec:
  controller: tugboat.dev/ingress
";

/// Options for one replica called `identity`: all namespaces, default class, the
/// Lease `tugboat-leader` in `tugboat-system`, short intervals for tests.
pub fn options(identity: &str) -> ClusterOptions {
    ClusterOptions {
        source: ApiSourceConfig::default(),
        election: Election {
            lease_name: "tugboat-leader".into(),
            namespace: "tugboat-system".into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(3),
        },
        publish: PublishTarget::default(),
        status_interval: Duration::from_millis(500),
        status_pace: StatusPace::default(),
    }
}

/// One replica: its own haproxy and controller.
pub struct ClusterPod {
    pub haproxy: Haproxy,
    pub status: watch::Receiver<ControllerStatus>,
    pub metrics: Arc<Metrics>,
    controller: JoinHandle<anyhow::Result<()>>,
    /// What the controller was started with, for [`ClusterPod::restart_controller`].
    config: ControllerConfig,
    client: kube::Client,
    options: ClusterOptions,
}

/// Requests go through the replica's haproxy (`pod.get`, `pod.wait_for_service`, ...).
impl std::ops::Deref for ClusterPod {
    type Target = Haproxy;

    fn deref(&self) -> &Haproxy {
        &self.haproxy
    }
}

impl Drop for ClusterPod {
    fn drop(&mut self) {
        self.controller.abort();
    }
}

impl ClusterPod {
    /// What the replica's admin port serves: its metrics, status and haproxy.
    pub fn admin_state(&self) -> tugboat::admin::AdminState {
        tugboat::admin::AdminState {
            metrics: self.metrics.clone(),
            status: self.status.clone(),
            master_socket: self.haproxy.master_socket.clone(),
            profiling: Default::default(),
        }
    }

    /// Starts haproxy and a controller watching `api`.
    pub async fn start(
        binary: &HaproxyBinary,
        api: &FakeApiServer,
        options: ClusterOptions,
    ) -> Self {
        Self::start_with(binary, api, options, |_| {}).await
    }

    /// Same as [`ClusterPod::start`], with the controller's configuration adjusted by
    /// `adjust`; its model flags become the source's too, as the binary has one set.
    pub async fn start_with(
        binary: &HaproxyBinary,
        api: &FakeApiServer,
        mut options: ClusterOptions,
        adjust: impl FnOnce(&mut ControllerConfig),
    ) -> Self {
        tugboat::logging::init(tugboat::logging::LogFormat::Text);
        let haproxy = Haproxy::start(binary).await;
        let mut config =
            ControllerConfig::new(haproxy.master_socket.clone(), haproxy.render_settings());
        config.model = options.source.settings.clone();
        adjust(&mut config);
        // One set of model flags, as the binary has: the source fetches what they name.
        options.source.settings = config.model.clone();
        // The test's own metrics when `adjust` set them.
        let metrics = config
            .metrics
            .clone()
            .unwrap_or_else(|| Arc::new(Metrics::new()));
        config.metrics = Some(metrics.clone());
        let (status_tx, status) = watch::channel(ControllerStatus::default());
        let client = api.client();
        let controller = tokio::spawn(cluster::run_with_cluster(
            config.clone(),
            client.clone(),
            options.clone(),
            status_tx,
        ));
        Self {
            haproxy,
            status,
            metrics,
            controller,
            config,
            client,
            options,
        }
    }

    /// Stops the controller and starts a new one with the same configuration and
    /// identity, as a rolling update of the controller container does; haproxy keeps
    /// running. The new controller's status replaces the old one's.
    pub async fn restart_controller(&mut self) {
        self.controller.abort();
        let _ = (&mut self.controller).await;
        let (status_tx, status) = watch::channel(ControllerStatus::default());
        self.controller = tokio::spawn(cluster::run_with_cluster(
            self.config.clone(),
            self.client.clone(),
            self.options.clone(),
            status_tx,
        ));
        self.status = status;
    }

    /// Waits until the controller has applied its first configuration.
    pub async fn wait_until_ready(&self) {
        crate::eventually("the first apply", Duration::from_secs(15), || async move {
            self.status.borrow().ready.then_some(())
        })
        .await;
    }

    /// haproxy's reload counter.
    pub async fn reloads(&self) -> u64 {
        self.haproxy.show_proc().await.reloads
    }

    /// Whether the controller task is still running.
    pub fn controller_running(&self) -> bool {
        !self.controller.is_finished()
    }
}
