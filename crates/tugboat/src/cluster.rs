//! Wiring for the Kubernetes API source: watches feed the controller loop; the
//! leader (a Lease) writes Ingress status and posts Events for object problems; every
//! replica configures its own haproxy, leader or not.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kube::Api;
use kube::Client;
use tokio::sync::watch;
use tugboat_kube::api_source::{ApiSource, ApiSourceConfig, ClusterStores, ObjectCounts};
use tugboat_kube::events::ProblemEvents;
use tugboat_kube::gateway_status::GatewayStatusWriter;
use tugboat_kube::leader::{self, LeaderElection};
use tugboat_kube::status::{self, ApiPatch, PublishTarget, StatusPace, StatusWriter, WriteResult};
use tugboat_model::{ObjectKey, ObjectRef, Snapshot};

use crate::controller::{self, ControllerConfig, ControllerStatus};
use crate::status::SourceSync;

/// Who takes part in the leader election, and how.
#[derive(Debug, Clone)]
pub struct Election {
    /// The Lease's name (`--election-id`).
    pub lease_name: String,
    /// The controller's own namespace, where the Lease lives.
    pub namespace: String,
    /// This replica's identity (the pod name).
    pub identity: String,
    /// How long a Lease holds without renewal.
    pub lease_duration: Duration,
}

/// Everything the Kubernetes side needs besides the client.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    pub source: ApiSourceConfig,
    pub election: Election,
    pub publish: PublishTarget,
    /// How often the leader re-checks status (the publish Service may change).
    pub status_interval: Duration,
    /// How fast the leader writes status.
    pub status_pace: StatusPace,
}

/// Runs the controller on the objects of the cluster `client` talks to, until an error.
pub async fn run_with_cluster(
    config: ControllerConfig,
    client: Client,
    options: ClusterOptions,
    status: watch::Sender<ControllerStatus>,
) -> anyhow::Result<()> {
    run_with_cluster_until(config, client, options, status, std::future::pending()).await
}

/// Runs the controller until an error or until `shutdown` completes; either way, a
/// replica that holds the leader Lease releases it before returning, so that another
/// replica takes over at once rather than when the Lease expires.
pub async fn run_with_cluster_until(
    config: ControllerConfig,
    client: Client,
    options: ClusterOptions,
    status: watch::Sender<ControllerStatus>,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    controller::note(&status, |status| {
        status.source = SourceSync::new("api", &watched_kinds(&options));
    });
    let source = ApiSource::start(client.clone(), options.source.clone());
    let (snapshots_tx, snapshots_rx) = watch::channel(Arc::new(Snapshot::default()));
    let (counts_tx, mut counts_rx) = watch::channel(ObjectCounts::new());
    let (leader_tx, leader) = watch::channel(false);
    let leader_rx_for_status = leader.clone();
    // Dropping `stop_tx` (also when this future is dropped) ends the election, which
    // then releases the Lease if it holds it.
    let (stop_tx, stop_rx) = watch::channel(false);
    let election = tokio::spawn(leader::run(
        Api::namespaced(client.clone(), &options.election.namespace),
        LeaderElection {
            namespace: options.election.namespace.clone(),
            lease_name: options.election.lease_name.clone(),
            identity: options.election.identity.clone(),
            lease_duration: options.election.lease_duration,
        },
        leader_tx,
        stop_rx,
    ));
    let metrics = config.metrics.clone();
    let counts_metrics = metrics.clone();
    let counts = async move {
        while counts_rx.changed().await.is_ok() {
            if let Some(metrics) = &counts_metrics {
                metrics.set_objects(&counts_rx.borrow_and_update());
            }
        }
    };
    let gateway_duties = gateway_status_duties(
        client.clone(),
        options.clone(),
        leader.clone(),
        status.subscribe(),
        metrics.clone(),
    );
    let leader_duties = lead(
        client,
        source.stores().clone(),
        options,
        leader,
        status.subscribe(),
        metrics,
    );
    let status_notes =
        note_leader_and_watches(status.clone(), leader_rx_for_status, source.stores());
    let result = tokio::select! {
        () = status_notes => Ok(()),
        result = controller::run(config, snapshots_rx, status) => result,
        () = source.publish(snapshots_tx, Some(counts_tx)) => Ok(()),
        () = counts => Ok(()),
        () = leader_duties => Ok(()),
        () = gateway_duties => Ok(()),
        () = shutdown => Ok(()),
    };
    stop_tx.send_replace(true);
    if tokio::time::timeout(RELEASE_LIMIT, election).await.is_err() {
        tracing::warn!("the leader Lease was not released within {RELEASE_LIMIT:?}");
    }
    result
}

/// The kinds the API source watches, as `/status` names them: those of [`ClusterStores`].
pub const WATCHED_KINDS: [&str; 6] = [
    "Ingress",
    "IngressClass",
    "Service",
    "EndpointSlice",
    "Secret",
    "ConfigMap",
];
/// The Gateway API kinds watched when it is served.
pub const GATEWAY_KINDS: [&str; 6] = [
    "GatewayClass",
    "Gateway",
    "HTTPRoute",
    "TLSRoute",
    "ReferenceGrant",
    "Namespace",
];

/// The kinds `options` has the API source watch.
pub fn watched_kinds(options: &ClusterOptions) -> Vec<&'static str> {
    let mut kinds = WATCHED_KINDS.to_vec();
    if options.source.settings.gateway.is_some() {
        kinds.extend(GATEWAY_KINDS);
    }
    kinds
}

/// Keeps in the status (for `/status`) whether this replica leads, and when each
/// watched kind got its first complete list. Runs forever.
async fn note_leader_and_watches(
    status: watch::Sender<ControllerStatus>,
    mut leader: watch::Receiver<bool>,
    stores: &ClusterStores,
) {
    use futures::StreamExt;
    use futures::stream::FuturesUnordered;
    use tugboat_kube::store::ObjectStore;

    fn listed<'s, K>(
        kind: &'static str,
        stores: Vec<&'s ObjectStore<K>>,
    ) -> std::pin::Pin<Box<dyn Future<Output = &'static str> + Send + 's>>
    where
        K: Send + Sync,
    {
        Box::pin(async move {
            futures::future::join_all(stores.into_iter().map(ObjectStore::wait_until_listed)).await;
            kind
        })
    }
    let mut waits = FuturesUnordered::new();
    waits.push(listed("Ingress", stores.ingresses.iter().collect()));
    waits.push(listed("IngressClass", vec![&stores.ingress_classes]));
    waits.push(listed("Service", stores.services.iter().collect()));
    waits.push(listed(
        "EndpointSlice",
        stores.endpoint_slices.iter().collect(),
    ));
    waits.push(listed("Secret", stores.secrets.iter().collect()));
    waits.push(listed("ConfigMap", stores.config_maps.iter().collect()));
    if let Some(gateway) = &stores.gateway {
        waits.push(listed("GatewayClass", vec![&gateway.gateway_classes]));
        waits.push(listed("Gateway", gateway.gateways.iter().collect()));
        waits.push(listed("HTTPRoute", gateway.http_routes.iter().collect()));
        waits.push(listed("TLSRoute", gateway.tls_routes.iter().collect()));
        waits.push(listed(
            "ReferenceGrant",
            gateway.reference_grants.iter().collect(),
        ));
        waits.push(listed("Namespace", vec![&gateway.namespaces]));
    }
    let note_leader = |leader: bool| controller::note(&status, |s| s.leader = Some(leader));
    note_leader(*leader.borrow_and_update());
    let mut election_running = true;
    loop {
        tokio::select! {
            Some(kind) = waits.next() => {
                let now = k8s_openapi::jiff::Timestamp::now();
                controller::note(&status, |s| {
                    if let Some(watch) = s.source.watches.iter_mut().find(|w| w.kind == kind) {
                        watch.synced_at = Some(now);
                    }
                });
            }
            changed = leader.changed(), if election_running => match changed {
                Ok(()) => note_leader(*leader.borrow_and_update()),
                Err(_) => election_running = false,
            },
            else => return std::future::pending().await,
        }
    }
}

/// How long stopping waits for the Lease to be released.
const RELEASE_LIMIT: Duration = Duration::from_secs(5);

/// The leader's duties: Ingress status and Events. Runs forever.
///
/// Status writes go on in the background of this loop, at their pace; a new served set
/// is handed to the writer, which checks only the Ingresses that joined or left it.
/// Events are reported when the controller's problems may have changed and on every
/// tick.
async fn lead(
    client: Client,
    stores: ClusterStores,
    options: ClusterOptions,
    mut leader: watch::Receiver<bool>,
    mut status: watch::Receiver<ControllerStatus>,
    metrics: Option<Arc<crate::metrics::Metrics>>,
) {
    let publishing = options.publish.is_set();
    let mut writer = StatusWriter::new(ApiPatch::new(client.clone()), options.status_pace);
    let mut events = ProblemEvents::new(client.clone(), options.election.identity.clone());
    let mut tick = tokio::time::interval(options.status_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut was_leader = false;
    // Writes since the writer was last idle, logged when it is.
    let mut written_unreported = 0;
    loop {
        let mut status_changed = false;
        let mut ticked = false;
        tokio::select! {
            changed = leader.changed() => {
                if changed.is_err() {
                    tracing::error!("leader election stopped; this replica no longer writes status");
                    writer.set_active(false);
                    std::future::pending::<()>().await;
                }
            }
            changed = status.changed() => {
                if changed.is_err() {
                    return;
                }
                status_changed = true;
            }
            _ = tick.tick() => ticked = true,
            () = writer.progress() => {}
        }
        let is_leader = *leader.borrow_and_update();
        let became_leader = is_leader && !was_leader;
        if is_leader != was_leader {
            tracing::info!(
                identity = %options.election.identity,
                "{}",
                if is_leader { "became the leader" } else { "no longer the leader" }
            );
            if let Some(metrics) = &metrics {
                metrics.set_leader(is_leader);
            }
            events.forget();
            writer.set_active(is_leader && publishing);
            was_leader = is_leader;
        }
        if !is_leader {
            continue;
        }
        // Once the controller is ready: its problems, and the served set for the writer
        // (read under the channel's lock, not copied).
        let problems = if status_changed || ticked || became_leader {
            let current = status.borrow_and_update();
            if current.ready && publishing {
                writer.set_served(&current.served_ingresses);
            }
            current.ready.then(|| current.problems.clone())
        } else {
            None
        };
        if publishing {
            if ticked || became_leader {
                match status::published_addresses(&client, &options.publish).await {
                    Ok(addresses) => writer.set_addresses(addresses),
                    Err(err) => tracing::warn!("{err}"),
                }
                writer.check_all();
            }
            if writer.is_busy() {
                writer.reconcile(&stores.all_ingresses());
            }
            let concluded = writer.take_concluded();
            written_unreported += concluded.count(WriteResult::Written);
            if let Some(metrics) = &metrics {
                metrics.add_status_writes(&concluded);
            }
            if written_unreported > 0 && !writer.is_busy() {
                tracing::info!(ingresses = written_unreported, "wrote Ingress status");
                written_unreported = 0;
            }
        }
        if let Some(problems) = problems {
            let uids = ingress_uids(&stores, &problems);
            let posted = events
                .report(&problems, |object: &ObjectRef| {
                    uids.iter()
                        .find(|(o, _)| o == object)
                        .map(|(_, uid)| uid.clone())
                })
                .await;
            if let Some(metrics) = &metrics {
                metrics.add_events_posted(posted);
            }
        }
    }
}

/// The leader's Gateway API duty: the status of the GatewayClasses, Gateways and
/// HTTPRoutes served, written when it changes (see `tugboat_kube::gateway_status`).
/// Returns at once when the Gateway API is off.
async fn gateway_status_duties(
    client: Client,
    options: ClusterOptions,
    mut leader: watch::Receiver<bool>,
    mut status: watch::Receiver<ControllerStatus>,
    metrics: Option<Arc<crate::metrics::Metrics>>,
) {
    let Some(gateway) = options.source.settings.gateway.clone() else {
        return std::future::pending().await;
    };
    let mut writer = GatewayStatusWriter::new(
        client.clone(),
        gateway.controller_name.clone(),
        options.status_pace,
    );
    let mut tick = tokio::time::interval(options.status_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut addresses = Vec::new();
    let mut was_leader = false;
    // The leadership changed while writing: look at it again at once.
    let mut leadership_moved = false;
    loop {
        let mut ticked = false;
        if !std::mem::take(&mut leadership_moved) {
            tokio::select! {
                changed = leader.changed() => if changed.is_err() {
                    return std::future::pending().await;
                },
                changed = status.changed() => if changed.is_err() {
                    return;
                },
                _ = tick.tick() => ticked = true,
            }
        }
        let is_leader = *leader.borrow_and_update();
        if !is_leader {
            if was_leader {
                writer.forget();
            }
            was_leader = false;
            continue;
        }
        if (ticked || !was_leader) && options.publish.is_set() {
            match status::published_addresses(&client, &options.publish).await {
                Ok(found) => addresses = found,
                Err(err) => tracing::warn!("{err}"),
            }
        }
        was_leader = true;
        let current = {
            let current = status.borrow_and_update();
            current.ready.then(|| current.gateway.clone())
        };
        if let Some(current) = current {
            // A replica that stops leading stops writing, mid-round too.
            let written = tokio::select! {
                written = writer.write_changes(&current, &addresses) => written,
                changed = leader.changed() => {
                    if changed.is_err() {
                        return std::future::pending().await;
                    }
                    leadership_moved = true;
                    0
                }
            };
            if let Some(metrics) = &metrics {
                metrics.add_status_writes(&writer.take_concluded());
            }
            if written > 0 {
                tracing::info!(objects = written, "wrote Gateway API status");
            }
        }
    }
}

/// The uids of the Ingresses, Gateways and routes that have problems (Events name
/// the object by uid).
fn ingress_uids(
    stores: &ClusterStores,
    problems: &[tugboat_model::ObjectProblem],
) -> Vec<(ObjectRef, String)> {
    let mut uids = only_ingress_uids(stores, problems);
    if let Some(gateway) = &stores.gateway {
        let mut snapshot = Snapshot::default();
        gateway.fill(&mut snapshot, &mut Default::default());
        for problem in problems {
            let key = ObjectKey::new(&problem.object.namespace, &problem.object.name);
            let uid = match problem.object.kind {
                "Gateway" => snapshot
                    .gateways
                    .get(&key)
                    .and_then(|g| g.metadata.uid.clone()),
                "HTTPRoute" => snapshot
                    .http_routes
                    .get(&key)
                    .and_then(|r| r.metadata.uid.clone()),
                "TLSRoute" => snapshot
                    .tls_routes
                    .get(&key)
                    .and_then(|r| r.metadata.uid.clone()),
                "TCPRoute" => snapshot
                    .tcp_routes
                    .get(&key)
                    .and_then(|r| r.metadata.uid.clone()),
                _ => None,
            };
            if let Some(uid) = uid {
                uids.push((problem.object.clone(), uid));
            }
        }
    }
    uids
}

/// The uids of the Ingresses that have problems.
fn only_ingress_uids(
    stores: &ClusterStores,
    problems: &[tugboat_model::ObjectProblem],
) -> Vec<(ObjectRef, String)> {
    let wanted: BTreeSet<ObjectKey> = problems
        .iter()
        .filter(|p| p.object.kind == "Ingress")
        .map(|p| ObjectKey::new(&p.object.namespace, &p.object.name))
        .collect();
    if wanted.is_empty() {
        return Vec::new();
    }
    let ingresses = stores.all_ingresses();
    wanted
        .into_iter()
        .filter_map(|key| {
            let uid = ingresses.get(&key)?.metadata.uid.clone()?;
            let object = ObjectRef {
                kind: "Ingress",
                namespace: key.namespace,
                name: key.name,
            };
            Some((object, uid))
        })
        .collect()
}
