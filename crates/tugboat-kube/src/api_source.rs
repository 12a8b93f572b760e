//! The Kubernetes API as the source of objects: one watch per kind (and per watched
//! namespace) filling a [`crate::store`], stores awaited before the first snapshot,
//! then a snapshot at once after each change (changes that arrive while one is built go
//! into the next, with no timer).
//!
//! What reaches a snapshot is decided by the model, as for the manifests folder: the
//! Ingresses this controller serves ([`ClassFilter::served_ingresses`]) and the Secrets
//! and ConfigMaps they, their Services, the controller's ConfigMap and the flags refer to
//! ([`tugboat_model::references`]). A new snapshot is published only when its content
//! differs from the last one: a re-list after `410 Gone`, a dropped watch or a restarted
//! API server that brings back the same objects publishes nothing. Objects lose their
//! `managedFields` and the `kubectl.kubernetes.io/last-applied-configuration` annotation
//! (and, per kind, the fields the controller never reads) as they arrive. Secrets are
//! watched except the types no Ingress uses (tokens, image pull secrets, Helm releases).
//! ConfigMaps are watched by name: the ones the flags name from the start (awaited
//! before the first snapshot), the others from the moment an object names them (the
//! snapshot that first names one waits for its first list).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::networking::v1::IngressClass;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use tokio::sync::watch;
use tugboat_model::class::{ClassFilter, ClassInfo, ServedMemo};
use tugboat_model::objects::Ingress;
use tugboat_model::objects::{EndpointSlice, Service};
use tugboat_model::snapshot::DiffItem;
use tugboat_model::{
    NarrowMemo, ObjectKey, Objects, References, ReferencesMemo, Settings, Snapshot,
};

use crate::store::{ObjectStore, Union, merged, object_store};
use crate::watch_backoff::WatchBackoff;
pub use crate::watch_driver::ObjectCounts;
use crate::watch_driver::{Changes, drive};
use crate::watched::Watched;

/// Secrets are watched except the kinds no Ingress can use (and that can be large or
/// many): service-account and bootstrap tokens, image pull secrets, Helm releases.
const SECRET_TYPES_NOT_READ: &str = "type!=kubernetes.io/service-account-token,\
type!=bootstrap.kubernetes.io/token,type!=kubernetes.io/dockerconfigjson,\
type!=kubernetes.io/dockercfg,type!=helm.sh/release.v1";

/// How long a snapshot waits for the first list of a ConfigMap an object just named
/// (a list takes milliseconds; a watch the API refuses never lists).
const NAMED_CONFIG_MAP_WAIT: Duration = Duration::from_secs(3);

/// What the API source watches and how it filters.
#[derive(Debug, Clone)]
pub struct ApiSourceConfig {
    /// Namespaces to watch; empty: the whole cluster.
    pub namespaces: Vec<String>,
    pub class: ClassFilter,
    /// The model's settings, for the flags that name objects (`--configmap`,
    /// `--configmap-errorfiles`, `--default-ssl-certificate`): see
    /// [`tugboat_model::references`].
    pub settings: Settings,
    /// How often a Gateway API kind the API server does not serve is looked for again.
    pub gateway_recheck: Duration,
}

impl Default for ApiSourceConfig {
    fn default() -> Self {
        Self {
            namespaces: Vec::new(),
            class: ClassFilter::default(),
            settings: Settings::new(0),
            gateway_recheck: crate::gateway::ABSENT_KIND_RECHECK,
        }
    }
}

/// The stores of every kind the source watches. Cheap to clone; the readers see the
/// watches' latest state.
#[derive(Clone)]
pub struct ClusterStores {
    pub ingresses: Vec<ObjectStore<Ingress>>,
    pub ingress_classes: ObjectStore<IngressClass>,
    pub services: Vec<ObjectStore<Service>>,
    pub endpoint_slices: Vec<ObjectStore<EndpointSlice>>,
    pub secrets: Vec<ObjectStore<Secret>>,
    pub config_maps: Vec<ObjectStore<ConfigMap>>,
    /// The Gateway API kinds, when enabled.
    pub gateway: Option<crate::gateway::GatewayStores>,
}

fn total<K>(stores: &[ObjectStore<K>]) -> usize {
    stores.iter().map(ObjectStore::len).sum()
}

impl ClusterStores {
    /// Every Ingress in the watched namespaces, served or not.
    pub fn all_ingresses(&self) -> Objects<Ingress> {
        merged(&self.ingresses)
    }

    /// Number of objects per kind.
    pub fn counts(&self) -> ObjectCounts {
        let mut counts = ObjectCounts::from([
            ("Ingress", total(&self.ingresses)),
            ("IngressClass", self.ingress_classes.len()),
            ("Service", total(&self.services)),
            ("EndpointSlice", total(&self.endpoint_slices)),
            ("Secret", total(&self.secrets)),
            ("ConfigMap", total(&self.config_maps)),
        ]);
        if let Some(gateway) = &self.gateway {
            gateway.counts(&mut counts);
        }
        counts
    }

    /// The snapshot of what this controller serves, with the referenced Secrets and the
    /// referenced ConfigMaps that the `config_maps` stores hold, and what it refers to.
    fn snapshot(
        &self,
        config: &ApiSourceConfig,
        config_maps: &[&ObjectStore<ConfigMap>],
        memo: &mut SnapshotMemo,
    ) -> (Snapshot, References) {
        let classes: Vec<ClassInfo> = self
            .ingress_classes
            .objects()
            .values()
            .map(|c| ClassInfo::from_ingress_class(c))
            .collect();
        let mut snapshot = Snapshot {
            ingresses: memo.served.get(
                &config.class,
                &memo.ingresses.of(&self.ingresses),
                &classes,
            ),
            services: memo.services.of(&self.services),
            endpoint_slices: memo.endpoint_slices.of(&self.endpoint_slices),
            secrets: memo.secrets.of(&self.secrets),
            config_maps: Objects::unions(config_maps.iter().map(|store| store.objects())),
            ..Snapshot::default()
        };
        if let Some(gateway) = &self.gateway {
            gateway.fill(&mut snapshot, &mut memo.gateway);
        }
        let wanted = memo.references.get(&snapshot, &config.settings);
        memo.narrowed.narrow(&wanted, &mut snapshot);
        (snapshot, wanted)
    }
}

/// The memos that make a snapshot cost what changed since the last one.
#[derive(Default)]
struct SnapshotMemo {
    ingresses: Union<Ingress>,
    services: Union<Service>,
    endpoint_slices: Union<EndpointSlice>,
    secrets: Union<Secret>,
    gateway: crate::gateway::GatewayUnions,
    served: ServedMemo,
    references: ReferencesMemo,
    narrowed: NarrowMemo,
}

/// Whether two snapshots hold the same objects with the same content, as far as the
/// controller reads it (not an Ingress' status: see [`Watched::differs_for_controller`]).
/// Maps that share their unchanged parts cost what differs.
pub fn same_content(a: &Snapshot, b: &Snapshot) -> bool {
    fn same<V: PartialEq + Clone>(a: &Objects<V>, b: &Objects<V>) -> bool {
        a.ptr_eq(b) || a.diff(b).next().is_none()
    }
    let same_ingresses = a.ingresses.ptr_eq(&b.ingresses)
        || a.ingresses.diff(&b.ingresses).all(|item| match item {
            DiffItem::Update {
                old: (_, old),
                new: (_, new),
            } => !Ingress::differs_for_controller(old, new),
            DiffItem::Add(..) | DiffItem::Remove(..) => false,
        });
    same_ingresses
        && same(&a.services, &b.services)
        && same(&a.endpoint_slices, &b.endpoint_slices)
        && same(&a.secrets, &b.secrets)
        && same(&a.config_maps, &b.config_maps)
        && same(&a.gateway_classes, &b.gateway_classes)
        && same(&a.gateways, &b.gateways)
        && same(&a.http_routes, &b.http_routes)
        && same(&a.tls_routes, &b.tls_routes)
        && same(&a.tcp_routes, &b.tcp_routes)
        && same(&a.reference_grants, &b.reference_grants)
        && same(&a.namespaces, &b.namespaces)
}

/// The served Ingresses as the controller reads them: an Ingress whose change is only
/// where the controller does not read (its status, which the leader writes) keeps the
/// copy the controller already has, so that a status write costs no work downstream.
/// Each call costs the Ingresses that changed since the last one.
#[derive(Default)]
struct ControllerView {
    /// The Ingresses as last given, and their view.
    last: Option<(Objects<Ingress>, Objects<Ingress>)>,
}

impl ControllerView {
    fn view(&mut self, ingresses: Objects<Ingress>) -> Objects<Ingress> {
        let Some((last, view)) = &mut self.last else {
            self.last = Some((ingresses.clone(), ingresses.clone()));
            return ingresses;
        };
        if !last.ptr_eq(&ingresses) {
            for item in last.diff(&ingresses) {
                match item {
                    DiffItem::Add(key, new)
                    | DiffItem::Update {
                        new: (key, new), ..
                    } => {
                        let known = view.get(key);
                        if known.is_none_or(|known| Ingress::differs_for_controller(known, new)) {
                            view.insert(key.clone(), Arc::clone(new));
                        }
                    }
                    DiffItem::Remove(key, _) => {
                        view.remove(key);
                    }
                }
            }
            *last = ingresses;
        }
        view.clone()
    }
}

/// The ConfigMaps watched because an object names them, with their watch tasks.
type ListedConfigMaps = BTreeMap<ObjectKey, (ObjectStore<ConfigMap>, tokio::task::JoinHandle<()>)>;

/// Starts the watches and publishes snapshots on `snapshots` until the client is
/// dropped or every receiver is gone. `counts` gets the store sizes after every change.
pub struct ApiSource {
    stores: ClusterStores,
    config: ApiSourceConfig,
    changed: Arc<Changes>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    client: Client,
    /// ConfigMaps that objects name (`configmap:NAME/KEY`) and no flag does, watched by
    /// name from the moment an object names them.
    listed: std::sync::Mutex<ListedConfigMaps>,
    /// The served Ingresses and the references of the last snapshot, worked out again
    /// only for what changed (an EndpointSlice change does not walk every Ingress).
    /// Locked with `listed`, after it.
    memo: std::sync::Mutex<SnapshotMemo>,
    /// ConfigMaps the flags name, watched from the start (`stores.config_maps`).
    flagged_config_maps: BTreeSet<ObjectKey>,
}

impl Drop for ApiSource {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        if let Ok(listed) = self.listed.lock() {
            for (_, task) in listed.values() {
                task.abort();
            }
        }
    }
}

impl ApiSource {
    /// Starts one watch per kind and watched namespace.
    pub fn start(client: Client, config: ApiSourceConfig) -> Self {
        let changed = Arc::new(Changes::default());
        let mut tasks = Vec::new();
        let namespaced = |client: &Client| -> Vec<(String, Client)> {
            if config.namespaces.is_empty() {
                vec![(String::new(), client.clone())]
            } else {
                config
                    .namespaces
                    .iter()
                    .map(|ns| (ns.clone(), client.clone()))
                    .collect()
            }
        };
        let api_for = |ns: &str, client: Client| -> ApiScope {
            if ns.is_empty() {
                ApiScope::All(client)
            } else {
                ApiScope::Namespace(client, ns.to_string())
            }
        };
        let mut ingresses = Vec::new();
        let mut services = Vec::new();
        let mut endpoint_slices = Vec::new();
        let mut secrets = Vec::new();
        let gateway_api = config.settings.gateway.is_some();
        let (mut gateways, mut http_routes, mut tls_routes, mut reference_grants) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut tcp_routes = Vec::new();
        for (ns, client) in namespaced(&client) {
            let scope = api_for(&ns, client);
            ingresses.push(spawn_watch::<Ingress>(
                scope.api(),
                watcher::Config::default(),
                &changed,
                &mut tasks,
            ));
            services.push(spawn_watch::<Service>(
                scope.api(),
                watcher::Config::default(),
                &changed,
                &mut tasks,
            ));
            endpoint_slices.push(spawn_watch::<EndpointSlice>(
                scope.api(),
                watcher::Config::default(),
                &changed,
                &mut tasks,
            ));
            secrets.push(spawn_watch::<Secret>(
                scope.api(),
                watcher::Config::default().fields(SECRET_TYPES_NOT_READ),
                &changed,
                &mut tasks,
            ));
            if gateway_api {
                use crate::gateway::spawn_watch_if_served as watch_kind;
                let recheck = config.gateway_recheck;
                gateways.push(watch_kind(scope.api(), &changed, &mut tasks, recheck));
                http_routes.push(watch_kind(scope.api(), &changed, &mut tasks, recheck));
                tls_routes.push(watch_kind(scope.api(), &changed, &mut tasks, recheck));
                tcp_routes.push(watch_kind(scope.api(), &changed, &mut tasks, recheck));
                reference_grants.push(watch_kind(scope.api(), &changed, &mut tasks, recheck));
            }
        }
        let gateway = gateway_api.then(|| crate::gateway::GatewayStores {
            gateway_classes: crate::gateway::spawn_watch_if_served(
                Api::all(client.clone()),
                &changed,
                &mut tasks,
                config.gateway_recheck,
            ),
            gateways,
            http_routes,
            tls_routes,
            tcp_routes,
            reference_grants,
            namespaces: spawn_watch::<tugboat_model::gateway::objects::Namespace>(
                Api::all(client.clone()),
                watcher::Config::default(),
                &changed,
                &mut tasks,
            ),
        });
        let ingress_classes = spawn_watch::<IngressClass>(
            Api::all(client.clone()),
            watcher::Config::default(),
            &changed,
            &mut tasks,
        );
        // The ConfigMaps the flags name: what an empty snapshot refers to.
        let flagged_config_maps =
            tugboat_model::references(&Snapshot::default(), &config.settings).config_maps;
        let config_maps = flagged_config_maps
            .iter()
            .map(|key| {
                spawn_watch::<ConfigMap>(
                    Api::namespaced(client.clone(), &key.namespace),
                    watcher::Config::default().fields(&format!("metadata.name={}", key.name)),
                    &changed,
                    &mut tasks,
                )
            })
            .collect();
        Self {
            client: client.clone(),
            listed: std::sync::Mutex::new(BTreeMap::new()),
            memo: std::sync::Mutex::new(SnapshotMemo::default()),
            flagged_config_maps,
            stores: ClusterStores {
                ingresses,
                ingress_classes,
                services,
                endpoint_slices,
                secrets,
                config_maps,
                gateway,
            },
            config,
            changed,
            tasks,
        }
    }

    pub fn stores(&self) -> &ClusterStores {
        &self.stores
    }

    /// Waits until every store has its first complete list.
    pub async fn wait_until_synced(&self) {
        let stores = &self.stores;
        futures::join!(
            futures::future::join_all(stores.ingresses.iter().map(ObjectStore::wait_until_listed)),
            futures::future::join_all(stores.services.iter().map(ObjectStore::wait_until_listed)),
            futures::future::join_all(
                stores
                    .endpoint_slices
                    .iter()
                    .map(ObjectStore::wait_until_listed)
            ),
            futures::future::join_all(stores.secrets.iter().map(ObjectStore::wait_until_listed)),
            futures::future::join_all(
                stores
                    .config_maps
                    .iter()
                    .map(ObjectStore::wait_until_listed)
            ),
            stores.ingress_classes.wait_until_listed(),
            async {
                if let Some(gateway) = &stores.gateway {
                    gateway.wait_until_listed().await;
                }
            },
        );
    }

    /// The snapshot of what this controller serves, and the watches it started: the
    /// ConfigMaps it refers to that no flag names are watched from the moment an object
    /// names them; a newly named one's content is missing from this snapshot (see
    /// [`ApiSource::complete_snapshot`]).
    fn build_snapshot(&self) -> (Snapshot, Vec<ObjectStore<ConfigMap>>) {
        let mut stores: Vec<&ObjectStore<ConfigMap>> = self.stores.config_maps.iter().collect();
        let mut started = Vec::new();
        let (Ok(mut listed), Ok(mut memo)) = (self.listed.lock(), self.memo.lock()) else {
            let mut memo = SnapshotMemo::default();
            return (
                self.stores.snapshot(&self.config, &stores, &mut memo).0,
                started,
            );
        };
        stores.extend(listed.values().map(|(store, _)| store));
        let (snapshot, wanted) = self.stores.snapshot(&self.config, &stores, &mut memo);
        for key in &wanted.config_maps {
            if !self.flagged_config_maps.contains(key) && !listed.contains_key(key) {
                let mut tasks = Vec::new();
                let store = spawn_watch::<ConfigMap>(
                    Api::namespaced(self.client.clone(), &key.namespace),
                    watcher::Config::default().fields(&format!("metadata.name={}", key.name)),
                    &self.changed,
                    &mut tasks,
                );
                if let Some(task) = tasks.pop() {
                    started.push(store.clone());
                    listed.insert(key.clone(), (store, task));
                }
            }
        }
        (snapshot, started)
    }

    /// The snapshot of what this controller serves, with the ConfigMaps it names: when
    /// an object names a ConfigMap not watched yet, waits for the new watch's first list
    /// (at most [`NAMED_CONFIG_MAP_WAIT`]) and builds again. Without the wait, a
    /// `configmap:` access list would read as missing until the next snapshot: its route
    /// failing closed for everybody, and a Warning Event saying it does not exist.
    async fn complete_snapshot(&self) -> Snapshot {
        let deadline = tokio::time::Instant::now() + NAMED_CONFIG_MAP_WAIT;
        loop {
            let (snapshot, started) = self.build_snapshot();
            if started.is_empty() {
                return snapshot;
            }
            let listed =
                futures::future::join_all(started.iter().map(ObjectStore::wait_until_listed));
            if tokio::time::timeout_at(deadline, listed).await.is_err() {
                tracing::warn!(
                    "ConfigMaps named by objects are not listed after {NAMED_CONFIG_MAP_WAIT:?}; \
                     they join a later snapshot"
                );
                return snapshot;
            }
        }
    }

    /// Publishes the first snapshot once every store is synced, then a new one after
    /// every change that alters the served objects. Returns when every receiver is gone.
    pub async fn publish(
        &self,
        snapshots: watch::Sender<Arc<Snapshot>>,
        counts: Option<watch::Sender<ObjectCounts>>,
    ) {
        self.wait_until_synced().await;
        tracing::info!(
            objects = ?self.stores.counts(),
            "every watched kind is listed; building the first snapshot"
        );
        let mut last: Option<Arc<Snapshot>> = None;
        let mut view = ControllerView::default();
        loop {
            // Changes that arrive from here on wake the loop again and go into the next
            // snapshot: a burst is gathered while one snapshot is built and taken.
            let first_change = self.changed.take_first();
            let mut snapshot = self.complete_snapshot().await;
            snapshot.first_change = first_change;
            snapshot.ingresses = view.view(snapshot.ingresses);
            if let Some(counts) = &counts {
                counts.send_replace(self.stores.counts());
            }
            if last
                .as_ref()
                .is_none_or(|last| !same_content(last, &snapshot))
            {
                let snapshot = Arc::new(snapshot);
                last = Some(snapshot.clone());
                if snapshots.send(snapshot).is_err() {
                    return;
                }
            } else {
                tracing::debug!("cluster changed, served objects did not");
            }
            tokio::select! {
                () = self.changed.wait() => {}
                () = snapshots.closed() => return,
            }
        }
    }
}

/// Where an `Api` looks: the whole cluster or one namespace.
enum ApiScope {
    All(Client),
    Namespace(Client, String),
}

impl ApiScope {
    fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        match self {
            ApiScope::All(client) => Api::all(client.clone()),
            ApiScope::Namespace(client, ns) => Api::namespaced(client.clone(), ns),
        }
    }
}

/// Starts a watch for one kind in one scope; the returned store fills as the watch
/// runs. Every change to the store wakes the snapshot builder.
fn spawn_watch<K>(
    api: Api<K::Wire>,
    config: watcher::Config,
    changed: &Arc<Changes>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> ObjectStore<K>
where
    K: Watched + Send + Sync + 'static,
{
    let (store, writer) = object_store();
    let kind = K::Wire::kind(&()).into_owned();
    let stream = watcher(api, config).backoff(WatchBackoff::default());
    tasks.push(tokio::spawn(drive(kind, stream, writer, changed.clone())));
    store
}

#[cfg(test)]
mod tests {

    use serde_json::{Value, json};

    use super::*;

    /// A client of an API that answers each list from `lists` (by path; an empty list
    /// for any other path), the ConfigMap lists after `config_map_delay`, and holds every
    /// watch open without events.
    fn fake_api(lists: BTreeMap<&'static str, Value>, config_map_delay: Duration) -> Client {
        let lists = Arc::new(lists);
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let lists = lists.clone();
            async move {
                let path = request.uri().path().to_string();
                let query = request.uri().query().unwrap_or_default().to_string();
                if query.contains("watch=true") {
                    std::future::pending::<()>().await;
                }
                if path.ends_with("/configmaps") {
                    tokio::time::sleep(config_map_delay).await;
                }
                let items = lists.get(path.as_str()).cloned().unwrap_or(json!([]));
                let list = json!({
                    "apiVersion": "v1",
                    "kind": "List",
                    "metadata": {"resourceVersion": "1"},
                    "items": items,
                });
                let body = kube::client::Body::from(list.to_string().into_bytes());
                http::Response::builder()
                    .header("content-type", "application/json")
                    .body(body)
            }
        });
        Client::new(service, "default")
    }

    #[tokio::test]
    async fn a_config_map_an_ingress_names_is_in_the_first_snapshot() {
        let ingress = json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {
                "name": "guarded",
                "namespace": "default",
                "annotations": {"tugboat.dev/allow-list": "configmap:networks/list"},
            },
            "spec": {"ingressClassName": "tugboat"},
        });
        let class = json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "IngressClass",
            "metadata": {"name": "tugboat"},
            "spec": {"controller": tugboat_model::class::DEFAULT_CONTROLLER_CLASS},
        });
        let networks = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "networks", "namespace": "default"},
            "data": {"list": "127.0.0.0/8\n"},
        });
        let client = fake_api(
            BTreeMap::from([
                ("/apis/networking.k8s.io/v1/ingresses", json!([ingress])),
                ("/apis/networking.k8s.io/v1/ingressclasses", json!([class])),
                ("/api/v1/namespaces/default/configmaps", json!([networks])),
            ]),
            Duration::from_millis(100),
        );
        let source = ApiSource::start(client, ApiSourceConfig::default());
        let (sender, mut snapshots) = watch::channel(Arc::new(Snapshot::default()));
        let publishing = async {
            source.publish(sender, None).await;
        };
        let first = async {
            snapshots.changed().await.expect("a first snapshot");
            snapshots.borrow().clone()
        };
        let first = tokio::select! {
            () = publishing => panic!("publishing stopped"),
            first = tokio::time::timeout(Duration::from_secs(10), first) => {
                first.expect("a first snapshot in time")
            }
        };
        assert_eq!(first.ingresses.len(), 1);
        assert!(
            first
                .config_maps
                .contains_key(&ObjectKey::new("default", "networks")),
            "the named ConfigMap is in the first snapshot"
        );
    }

    #[test]
    fn equal_objects_in_new_allocations_are_the_same_content() {
        let service: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "default"}
        }))
        .expect("valid Service");
        let mut a = Snapshot::default();
        a.services
            .insert(ObjectKey::new("default", "web"), Arc::new(service.clone()));
        let mut b = Snapshot::default();
        b.services
            .insert(ObjectKey::new("default", "web"), Arc::new(service.clone()));
        assert!(same_content(&a, &b));
        let mut changed = service;
        changed.metadata.annotations = Some([("a".into(), "b".into())].into());
        b.services
            .insert(ObjectKey::new("default", "web"), Arc::new(changed));
        assert!(!same_content(&a, &b));
    }

    #[test]
    fn an_ingress_status_is_not_content_but_its_spec_is() {
        let ingress = |status: serde_json::Value, host: &str| -> Arc<Ingress> {
            Arc::new(
                serde_json::from_value(serde_json::json!({
                    "metadata": {"name": "web", "namespace": "default"},
                    "spec": {"rules": [{"host": host}]},
                    "status": status
                }))
                .expect("valid Ingress"),
            )
        };
        let key = ObjectKey::new("default", "web");
        let mut a = Snapshot::default();
        a.ingresses
            .insert(key.clone(), ingress(serde_json::json!({}), "a.example.com"));
        let mut b = Snapshot::default();
        b.ingresses.insert(
            key.clone(),
            ingress(
                serde_json::json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}),
                "a.example.com",
            ),
        );
        assert!(same_content(&a, &b));
        b.ingresses
            .insert(key, ingress(serde_json::json!({}), "b.example.com"));
        assert!(!same_content(&a, &b));
    }

    #[test]
    fn ingresses_whose_status_alone_changed_are_the_last_snapshot_s() {
        let ingress = |name: &str, host: &str, ip: Option<&str>| -> Arc<Ingress> {
            Arc::new(
                serde_json::from_value(serde_json::json!({
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {"rules": [{"host": host}]},
                    "status": {"loadBalancer": {"ingress": ip.map(|ip| vec![serde_json::json!({"ip": ip})])}}
                }))
                .expect("valid Ingress"),
            )
        };
        let key = |name: &str| ObjectKey::new("default", name);
        let last: Objects<Ingress> = [
            (key("a"), ingress("a", "a.example.com", None)),
            (key("b"), ingress("b", "b.example.com", None)),
            (key("c"), ingress("c", "c.example.com", None)),
        ]
        .into_iter()
        .collect();
        let mut now: Objects<Ingress> = [
            // Status only: the last copy comes back.
            (key("a"), ingress("a", "a.example.com", Some("192.0.2.1"))),
            // Its spec changed: kept.
            (key("b"), ingress("b", "b2.example.com", Some("192.0.2.1"))),
            // New.
            (key("d"), ingress("d", "d.example.com", None)),
        ]
        .into_iter()
        .collect();
        let new_b = now[&key("b")].clone();
        let mut view = ControllerView::default();
        view.view(last.clone());
        let seen = view.view(now.clone());
        assert!(Arc::ptr_eq(&seen[&key("a")], &last[&key("a")]));
        assert!(Arc::ptr_eq(&seen[&key("b")], &new_b));
        assert_eq!(seen.len(), 3);
        assert!(seen.contains_key(&key("d")));
        // Another status write on the same Ingress: still the first copy.
        now.insert(key("a"), ingress("a", "a.example.com", Some("192.0.2.2")));
        let seen = view.view(now.clone());
        assert!(Arc::ptr_eq(&seen[&key("a")], &last[&key("a")]));
        // A real change after status writes: the new copy.
        now.insert(key("a"), ingress("a", "a2.example.com", Some("192.0.2.2")));
        let seen = view.view(now);
        assert_eq!(
            seen[&key("a")].spec,
            ingress("a", "a2.example.com", None).spec
        );
    }
}
