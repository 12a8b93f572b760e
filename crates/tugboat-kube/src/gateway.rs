//! The Gateway API kinds on the API source: how they are decoded and kept, and their
//! watches, started only when `--enable-gateway-api` is set.
//!
//! The CRDs are the cluster's to install. Each kind is first listed once: when the API
//! server does not know it (404), a warning says so, the kind counts as listed and
//! empty (Ingresses are served as before), and the controller must be restarted once
//! the CRDs are installed. No status is kept: the controller writes it, and a status
//! write must not wake a build (the generation, which moves with the spec only, is
//! kept for `observedGeneration`).

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::ListParams;
use kube::runtime::{WatchStreamExt, watcher};
use serde::Deserialize;
use tokio::sync::Notify;
use tugboat_model::Objects;
use tugboat_model::gateway::objects::{
    Gateway, GatewayClass, GatewayClassSpec, GatewayMeta, GatewaySpec, HttpRoute, HttpRouteSpec,
    Namespace, ReferenceGrant, ReferenceGrantSpec,
};

use crate::store::{ObjectStore, object_store};
use crate::watched::Watched;

/// The metadata the Gateway API model reads, from the full metadata the watch decodes.
fn gateway_meta(meta: ObjectMeta, labels: bool) -> GatewayMeta {
    GatewayMeta {
        name: meta.name,
        namespace: meta.namespace,
        labels: meta.labels.filter(|l| labels && !l.is_empty()),
        generation: meta.generation,
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
    pub reference_grants: Vec<ObjectStore<ReferenceGrant>>,
    pub namespaces: ObjectStore<Namespace>,
}

fn merged<K>(stores: &[ObjectStore<K>]) -> Objects<K> {
    Objects::unions(stores.iter().map(ObjectStore::objects))
}

impl GatewayStores {
    /// Fills the snapshot's Gateway API maps.
    pub fn fill(&self, snapshot: &mut tugboat_model::Snapshot) {
        snapshot.gateway_classes = self.gateway_classes.objects();
        snapshot.gateways = merged(&self.gateways);
        snapshot.http_routes = merged(&self.http_routes);
        snapshot.reference_grants = merged(&self.reference_grants);
        snapshot.namespaces = self.namespaces.objects();
    }

    /// Every store, for the wait for the first lists.
    pub async fn wait_until_listed(&self) {
        futures::join!(
            self.gateway_classes.wait_until_listed(),
            futures::future::join_all(self.gateways.iter().map(ObjectStore::wait_until_listed)),
            futures::future::join_all(self.http_routes.iter().map(ObjectStore::wait_until_listed)),
            futures::future::join_all(
                self.reference_grants
                    .iter()
                    .map(ObjectStore::wait_until_listed)
            ),
            self.namespaces.wait_until_listed(),
        );
    }

    pub fn counts(&self, counts: &mut crate::api_source::ObjectCounts) {
        fn total<K>(stores: &[ObjectStore<K>]) -> usize {
            stores.iter().map(ObjectStore::len).sum()
        }
        counts.insert("GatewayClass", self.gateway_classes.len());
        counts.insert("Gateway", total(&self.gateways));
        counts.insert("HTTPRoute", total(&self.http_routes));
        counts.insert("ReferenceGrant", total(&self.reference_grants));
        counts.insert("Namespace", self.namespaces.len());
    }
}

/// Starts a watch of one Gateway API kind, after checking that the API server knows it:
/// when it does not, the store is listed and empty, and a warning says what to do.
pub(crate) fn spawn_watch_if_served<K>(
    api: Api<K::Wire>,
    changed: &Arc<Notify>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> ObjectStore<K>
where
    K: Watched + Send + Sync + 'static,
{
    let (store, mut writer) = object_store();
    let changed = changed.clone();
    tasks.push(tokio::spawn(async move {
        let kind = <K::Wire as kube::Resource>::kind(&()).into_owned();
        let version = <K::Wire as kube::Resource>::api_version(&()).into_owned();
        match api.list_metadata(&ListParams::default().limit(1)).await {
            Err(kube::Error::Api(status)) if status.is_not_found() => {
                tracing::warn!(
                    kind,
                    "the API server does not serve {version} {kind}: install the Gateway API \
                     CRDs (standard channel) and restart the controller to serve them; \
                     Ingresses are served as before"
                );
                writer.apply(watcher::Event::Init);
                writer.apply(watcher::Event::InitDone);
                changed.notify_one();
                return;
            }
            // Any other failure: the watch retries with backoff and says why.
            _ => {}
        }
        let stream = watcher(api, watcher::Config::default()).default_backoff();
        crate::api_source::drive(kind, stream, writer, changed).await;
    }));
    store
}
