//! The Gateway API kinds on the API source: how they are decoded and kept, and their
//! watches, started only when `--enable-gateway-api` is set.
//!
//! The CRDs are the cluster's to install. Each kind is first listed once: when the API
//! server does not know it (404), a warning says so, the kind counts as listed and
//! empty (Ingresses are served as before), and it is looked for again every minute
//! until the CRDs are installed. No status is kept: the controller writes it, and a status
//! write must not wake a build (the generation, which moves with the spec only, is
//! kept for `observedGeneration`).

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::ListParams;
use kube::runtime::{WatchStreamExt, watcher};
use serde::Deserialize;
use tugboat_model::gateway::objects::{
    Gateway, GatewayClass, GatewayClassSpec, GatewayMeta, GatewaySpec, HttpRoute, HttpRouteSpec,
    Namespace, ReferenceGrant, ReferenceGrantSpec, TcpRoute, TcpRouteSpec, TlsRoute, TlsRouteSpec,
};

use crate::store::{ObjectStore, Union, object_store};
use crate::watched::Watched;

/// The metadata the Gateway API model reads, from the full metadata the watch decodes.
fn gateway_meta(meta: ObjectMeta, labels: bool) -> GatewayMeta {
    GatewayMeta {
        name: meta.name,
        namespace: meta.namespace,
        labels: meta.labels.filter(|l| labels && !l.is_empty()),
        generation: meta.generation,
        uid: meta.uid,
        creation_timestamp: meta
            .creation_timestamp
            .map(|t| t.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
    }
}

/// A wire type: full metadata (the watch reads the resource version) and the lean spec.
macro_rules! gateway_wire {
    ($wire:ident, $kept:ty, $spec:ty, $group:literal, $version:literal, $kind:literal,
     $plural:literal, $scope:ty, $labels:literal) => {
        #[derive(Debug, Clone, Default, Deserialize)]
        pub struct $wire {
            #[serde(default)]
            metadata: ObjectMeta,
            #[serde(default)]
            spec: $spec,
        }

        impl k8s_openapi::Resource for $wire {
            const API_VERSION: &'static str = concat!($group, "/", $version);
            const GROUP: &'static str = $group;
            const KIND: &'static str = $kind;
            const VERSION: &'static str = $version;
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = $scope;
        }

        impl k8s_openapi::Metadata for $wire {
            type Ty = ObjectMeta;

            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }

            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }

        impl Watched for $kept {
            type Wire = $wire;
            fn keep(wire: $wire) -> Self {
                Self {
                    metadata: gateway_meta(wire.metadata, $labels),
                    spec: wire.spec,
                }
            }
        }
    };
}

gateway_wire!(
    GatewayClassWire,
    GatewayClass,
    GatewayClassSpec,
    "gateway.networking.k8s.io",
    "v1",
    "GatewayClass",
    "gatewayclasses",
    k8s_openapi::ClusterResourceScope,
    false
);
gateway_wire!(
    GatewayWire,
    Gateway,
    GatewaySpec,
    "gateway.networking.k8s.io",
    "v1",
    "Gateway",
    "gateways",
    k8s_openapi::NamespaceResourceScope,
    false
);
gateway_wire!(
    HttpRouteWire,
    HttpRoute,
    HttpRouteSpec,
    "gateway.networking.k8s.io",
    "v1",
    "HTTPRoute",
    "httproutes",
    k8s_openapi::NamespaceResourceScope,
    false
);
gateway_wire!(
    TlsRouteWire,
    TlsRoute,
    TlsRouteSpec,
    "gateway.networking.k8s.io",
    "v1",
    "TLSRoute",
    "tlsroutes",
    k8s_openapi::NamespaceResourceScope,
    false
);
gateway_wire!(
    TcpRouteWire,
    TcpRoute,
    TcpRouteSpec,
    "gateway.networking.k8s.io",
    "v1",
    "TCPRoute",
    "tcproutes",
    k8s_openapi::NamespaceResourceScope,
    false
);
gateway_wire!(
    ReferenceGrantWire,
    ReferenceGrant,
    ReferenceGrantSpec,
    "gateway.networking.k8s.io",
    "v1beta1",
    "ReferenceGrant",
    "referencegrants",
    k8s_openapi::NamespaceResourceScope,
    false
);

impl Watched for Namespace {
    type Wire = k8s_openapi::api::core::v1::Namespace;
    fn keep(namespace: Self::Wire) -> Self {
        Namespace {
            metadata: GatewayMeta {
                name: namespace.metadata.name,
                labels: namespace.metadata.labels.filter(|l| !l.is_empty()),
                ..GatewayMeta::default()
            },
        }
    }

    /// Only the labels are read.
    fn differs_for_controller(before: &Self, after: &Self) -> bool {
        before.metadata.labels != after.metadata.labels
    }
}

/// The stores of the Gateway API kinds (per watched namespace for the namespaced ones).
#[derive(Clone)]
pub struct GatewayStores {
    pub gateway_classes: ObjectStore<GatewayClass>,
    pub gateways: Vec<ObjectStore<Gateway>>,
    pub http_routes: Vec<ObjectStore<HttpRoute>>,
    pub tls_routes: Vec<ObjectStore<TlsRoute>>,
    pub tcp_routes: Vec<ObjectStore<TcpRoute>>,
    pub reference_grants: Vec<ObjectStore<ReferenceGrant>>,
    pub namespaces: ObjectStore<Namespace>,
}

/// The unions of the namespaced Gateway API kinds, kept between snapshots.
#[derive(Default)]
pub struct GatewayUnions {
    gateways: Union<Gateway>,
    http_routes: Union<HttpRoute>,
    tls_routes: Union<TlsRoute>,
    tcp_routes: Union<TcpRoute>,
    reference_grants: Union<ReferenceGrant>,
}

impl GatewayStores {
    /// Fills the snapshot's Gateway API maps.
    pub fn fill(&self, snapshot: &mut tugboat_model::Snapshot, unions: &mut GatewayUnions) {
        snapshot.gateway_classes = self.gateway_classes.objects();
        snapshot.gateways = unions.gateways.of(&self.gateways);
        snapshot.http_routes = unions.http_routes.of(&self.http_routes);
        snapshot.tls_routes = unions.tls_routes.of(&self.tls_routes);
        snapshot.tcp_routes = unions.tcp_routes.of(&self.tcp_routes);
        snapshot.reference_grants = unions.reference_grants.of(&self.reference_grants);
        snapshot.namespaces = self.namespaces.objects();
    }

    /// Every store, for the wait for the first lists.
    pub async fn wait_until_listed(&self) {
        futures::join!(
            self.gateway_classes.wait_until_listed(),
            futures::future::join_all(self.gateways.iter().map(ObjectStore::wait_until_listed)),
            futures::future::join_all(self.http_routes.iter().map(ObjectStore::wait_until_listed)),
            futures::future::join_all(self.tls_routes.iter().map(ObjectStore::wait_until_listed)),
            futures::future::join_all(self.tcp_routes.iter().map(ObjectStore::wait_until_listed)),
            futures::future::join_all(
                self.reference_grants
                    .iter()
                    .map(ObjectStore::wait_until_listed)
            ),
            self.namespaces.wait_until_listed(),
        );
    }

    pub fn counts(&self, counts: &mut crate::watch_driver::ObjectCounts) {
        fn total<K>(stores: &[ObjectStore<K>]) -> usize {
            stores.iter().map(ObjectStore::len).sum()
        }
        counts.insert("GatewayClass", self.gateway_classes.len());
        counts.insert("Gateway", total(&self.gateways));
        counts.insert("HTTPRoute", total(&self.http_routes));
        counts.insert("TLSRoute", total(&self.tls_routes));
        counts.insert("TCPRoute", total(&self.tcp_routes));
        counts.insert("ReferenceGrant", total(&self.reference_grants));
        counts.insert("Namespace", self.namespaces.len());
    }
}

/// How often a kind the API server does not serve is looked for again.
pub const ABSENT_KIND_RECHECK: std::time::Duration = std::time::Duration::from_secs(60);

/// Starts a watch of one Gateway API kind, once the API server serves it: until then
/// (its CRD is not installed) the store is listed and empty, a warning says so once, and
/// the kind is looked for again every `recheck`.
pub(crate) fn spawn_watch_if_served<K>(
    api: Api<K::Wire>,
    changed: &Arc<crate::watch_driver::Changes>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
    recheck: std::time::Duration,
) -> ObjectStore<K>
where
    K: Watched + Send + Sync + 'static,
{
    let (store, mut writer) = object_store();
    let changed = changed.clone();
    tasks.push(tokio::spawn(async move {
        let kind = <K::Wire as kube::Resource>::kind(&()).into_owned();
        let version = <K::Wire as kube::Resource>::api_version(&()).into_owned();
        let mut told = false;
        loop {
            match api.list_metadata(&ListParams::default().limit(1)).await {
                Err(kube::Error::Api(status)) if status.is_not_found() => {
                    if !told {
                        tracing::warn!(
                            kind,
                            "the API server does not serve {version} {kind}: install the \
                             Gateway API CRDs (standard channel, v1.2 or later; v1.5 or \
                             later for TLSRoute); they are \
                             looked for again every {recheck:?}, and Ingresses are served \
                             as before"
                        );
                        writer.apply(watcher::Event::Init);
                        writer.apply(watcher::Event::InitDone);
                        changed.record();
                        told = true;
                    }
                    tokio::time::sleep(recheck).await;
                }
                // Served (or another failure, which the watch retries with backoff and
                // reports).
                _ => break,
            }
        }
        if told {
            tracing::info!(
                kind,
                "the API server now serves {version} {kind}: watching it"
            );
        }
        let stream = watcher(api, watcher::Config::default())
            .backoff(crate::watch_backoff::WatchBackoff::default());
        crate::watch_driver::drive(kind, stream, writer, changed).await;
    }));
    store
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use kube::Client;
    use serde_json::{Value, json};
    use tokio::sync::watch;
    use tugboat_model::gateway::GatewaySettings;
    use tugboat_model::{Settings, Snapshot};

    use crate::api_source::{ApiSource, ApiSourceConfig};

    /// An API that serves empty lists, except that the Gateway API paths answer 404
    /// until `installed` is set (then the GatewayClass `tugboat`), and holds every watch
    /// open.
    fn api(installed: Arc<AtomicBool>) -> Client {
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let installed = installed.clone();
            async move {
                let path = request.uri().path().to_string();
                let gateway = path.contains("gateway.networking.k8s.io");
                if gateway && !installed.load(Ordering::SeqCst) {
                    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                        "reason": "NotFound", "code": 404, "message": "not found"});
                    return http::Response::builder()
                        .status(404)
                        .header("content-type", "application/json")
                        .body(kube::client::Body::from(status.to_string().into_bytes()));
                }
                if request
                    .uri()
                    .query()
                    .unwrap_or_default()
                    .contains("watch=true")
                {
                    std::future::pending::<()>().await;
                }
                let items: Value = if path.ends_with("/gatewayclasses") {
                    json!([{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
                            "metadata": {"name": "tugboat", "resourceVersion": "2"},
                            "spec": {"controllerName": "tugboat.dev/gateway"}}])
                } else {
                    json!([])
                };
                let list = json!({"apiVersion": "v1", "kind": "List",
                                  "metadata": {"resourceVersion": "1"}, "items": items});
                http::Response::builder()
                    .header("content-type", "application/json")
                    .body(kube::client::Body::from(list.to_string().into_bytes()))
            }
        });
        Client::new(service, "default")
    }

    #[tokio::test]
    async fn missing_crds_do_not_stop_the_first_snapshot_and_are_picked_up_later() {
        let installed = Arc::new(AtomicBool::new(false));
        let config = ApiSourceConfig {
            settings: Settings {
                gateway: Some(GatewaySettings::new("tugboat.dev/gateway", 8080, 8443)),
                ..Settings::new(0)
            },
            gateway_recheck: Duration::from_millis(100),
            ..ApiSourceConfig::default()
        };
        let source = ApiSource::start(api(installed.clone()), config);
        let (sender, mut snapshots) = watch::channel(Arc::new(Snapshot::default()));
        let publishing = source.publish(sender, None);
        let check = async {
            snapshots.changed().await.expect("a first snapshot");
            assert!(snapshots.borrow().gateway_classes.is_empty());
            installed.store(true, Ordering::SeqCst);
            tokio::time::timeout(Duration::from_secs(10), async {
                loop {
                    snapshots.changed().await.expect("more snapshots");
                    if !snapshots.borrow().gateway_classes.is_empty() {
                        break;
                    }
                }
            })
            .await
            .expect("the GatewayClass once the CRDs are there");
        };
        tokio::select! {
            () = publishing => panic!("publishing stopped"),
            checked = tokio::time::timeout(Duration::from_secs(20), check) => {
                checked.expect("a first snapshot without the CRDs, then one with them");
            }
        }
    }
}
