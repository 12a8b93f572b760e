//! How each watched kind is decoded and what of it is kept.
//!
//! A watch decodes the type the API sends ([`Watched::Wire`]: full metadata, since the
//! watch reads the resource version from it) and the store keeps what the model reads
//! ([`Watched::keep`]), dropping the rest as objects arrive: a large cluster's stores are
//! most of the controller's memory. Services and EndpointSlices, which a cluster has by
//! the ten thousand, are kept as the model's lean types with [`LeanMeta`].

use std::collections::BTreeMap;
use std::fmt::Debug;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::networking::v1::IngressClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use tugboat_model::objects::{
    Endpoint, EndpointPort, EndpointSlice, Ingress, LeanMeta, Service, ServiceSpec,
};

/// The annotation `kubectl apply` leaves behind; the controller never reads it.
const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// A kind the API source watches.
pub trait Watched: Sized {
    /// What the watch decodes.
    type Wire: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + 'static;
    /// What the store keeps of a decoded object.
    fn keep(wire: Self::Wire) -> Self;

    /// Whether an update from `before` to `after` can change what the controller
    /// builds. An update that cannot (an Ingress' status) still reaches the store, for
    /// the status writer, but wakes no snapshot.
    fn differs_for_controller(_before: &Self, _after: &Self) -> bool {
        true
    }
}

/// Drops what the controller never reads. The resource version goes too: the watch has
/// read it before this runs, and without it an update that changes nothing the store
/// keeps compares equal and publishes nothing. So does the generation, which an API
/// server may move on a status write.
fn strip_metadata(meta: &mut ObjectMeta) {
    meta.generation = None;
    meta.managed_fields = None;
    meta.owner_references = None;
    meta.finalizers = None;
    meta.generate_name = None;
    meta.resource_version = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED_ANNOTATION);
    }
    // An empty map still holds a tree node of hundreds of bytes.
    if meta.annotations.as_ref().is_some_and(BTreeMap::is_empty) {
        meta.annotations = None;
    }
    if meta.labels.as_ref().is_some_and(BTreeMap::is_empty) {
        meta.labels = None;
    }
}

/// Gives back a list's spare room. Decoding grows a list to at least four elements, so
/// the one path of an Ingress rule or the one address of an endpoint would keep three
/// empty places (a path is 176 bytes): tens of megabytes across a large cluster.
fn shrink<T>(list: &mut Vec<T>) {
    list.shrink_to_fit();
}

/// Name, namespace and (when `annotations`) the annotations; labels are left out.
fn lean_meta(mut meta: ObjectMeta, annotations: bool) -> LeanMeta {
    strip_metadata(&mut meta);
    LeanMeta {
        name: meta.name,
        namespace: meta.namespace,
        labels: None,
        annotations: meta.annotations.filter(|_| annotations),
    }
}

impl Watched for Ingress {
    type Wire = k8s_openapi::api::networking::v1::Ingress;
    fn keep(mut ingress: Self::Wire) -> Self {
        strip_metadata(&mut ingress.metadata);
        if let Some(spec) = ingress.spec.as_mut() {
            for rule in spec.rules.iter_mut().flatten() {
                if let Some(http) = rule.http.as_mut() {
                    shrink(&mut http.paths);
                }
            }
            for tls in spec.tls.iter_mut().flatten() {
                tls.hosts.iter_mut().for_each(shrink);
            }
            spec.rules.iter_mut().for_each(shrink);
            spec.tls.iter_mut().for_each(shrink);
        }
        Ingress::from(ingress)
    }

    /// The model reads no status: what the leader writes there changes nothing.
    fn differs_for_controller(before: &Self, after: &Self) -> bool {
        before.metadata != after.metadata || before.spec != after.spec
    }
}

impl Watched for IngressClass {
    type Wire = Self;
    fn keep(mut class: Self) -> Self {
        strip_metadata(&mut class.metadata);
        class
    }
}

impl Watched for Secret {
    type Wire = Self;
    fn keep(mut secret: Self) -> Self {
        strip_metadata(&mut secret.metadata);
        secret.metadata.labels = None;
        secret.metadata.annotations = None;
        secret.metadata.uid = None;
        secret.string_data = None;
        secret
    }
}

impl Watched for ConfigMap {
    type Wire = Self;
    fn keep(mut config_map: Self) -> Self {
        strip_metadata(&mut config_map.metadata);
        config_map.binary_data = None;
        config_map
    }
}

/// A Service as the watch decodes it: full metadata, lean spec.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ServiceWire {
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: Option<ServiceSpec>,
}

impl Watched for Service {
    type Wire = ServiceWire;
    fn keep(mut wire: ServiceWire) -> Self {
        if let Some(spec) = wire.spec.as_mut() {
            spec.ports.iter_mut().for_each(shrink);
        }
        Service {
            // Annotations carry the Service's backend settings.
            metadata: lean_meta(wire.metadata, true),
            spec: wire.spec,
        }
    }
}

/// An EndpointSlice as the watch decodes it: full metadata, lean endpoints.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointSliceWire {
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default)]
    address_type: String,
    #[serde(default)]
    endpoints: Vec<Endpoint>,
    #[serde(default)]
    ports: Option<Vec<EndpointPort>>,
}

impl Watched for EndpointSlice {
    type Wire = EndpointSliceWire;
    fn keep(mut wire: EndpointSliceWire) -> Self {
        let service_name = wire
            .metadata
            .labels
            .as_mut()
            .and_then(|labels| labels.remove(tugboat_model::objects::SERVICE_NAME_LABEL));
        shrink(&mut wire.endpoints);
        wire.ports.iter_mut().for_each(shrink);
        EndpointSlice {
            metadata: lean_meta(wire.metadata, false),
            address_type: wire.address_type,
            endpoints: wire.endpoints,
            ports: wire.ports,
            service_name,
        }
    }
}

/// The kube-side identity of a wire type: its API group, version and path.
macro_rules! wire_resource {
    ($wire:ty, $group:literal, $version:literal, $kind:literal, $plural:literal) => {
        impl k8s_openapi::Resource for $wire {
            const API_VERSION: &'static str = if $group.is_empty() {
                $version
            } else {
                concat!($group, "/", $version)
            };
            const GROUP: &'static str = $group;
            const KIND: &'static str = $kind;
            const VERSION: &'static str = $version;
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = k8s_openapi::NamespaceResourceScope;
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
    };
}

wire_resource!(ServiceWire, "", "v1", "Service", "services");
wire_resource!(
    EndpointSliceWire,
    "discovery.k8s.io",
    "v1",
    "EndpointSlice",
    "endpointslices"
);

#[cfg(test)]
mod tests {
    use super::*;
    use kube::ResourceExt;

    #[test]
    fn strips_what_is_never_read() {
        let mut meta: ObjectMeta = serde_json::from_value(serde_json::json!({
            "name": "x",
            "annotations": {LAST_APPLIED_ANNOTATION: "{}", "keep": "me"},
            "managedFields": [{"manager": "kubectl"}]
        }))
        .expect("valid metadata");
        strip_metadata(&mut meta);
        assert!(meta.managed_fields.is_none());
        let annotations = meta.annotations.expect("annotations kept");
        assert_eq!(annotations.len(), 1);
        assert_eq!(annotations.get("keep").map(String::as_str), Some("me"));

        let mut meta: ObjectMeta = serde_json::from_value(serde_json::json!({
            "name": "x", "resourceVersion": "42", "generation": 3, "labels": {},
            "annotations": {LAST_APPLIED_ANNOTATION: "{}"}
        }))
        .expect("valid metadata");
        strip_metadata(&mut meta);
        assert_eq!(meta.resource_version, None);
        assert_eq!(meta.generation, None);
        assert_eq!(meta.annotations, None, "an emptied map is dropped");
        assert_eq!(meta.labels, None);
    }

    #[test]
    fn ingresses_keep_no_spare_room_in_their_lists() {
        // Decoded from text, as from the API: lists grow as they are read.
        let ingress: <Ingress as Watched>::Wire = serde_json::from_str(
            &serde_json::json!({
                "metadata": {"name": "shop", "namespace": "shop", "uid": "u-1",
                             "resourceVersion": "7", "labels": {"app": "shop"}},
                "spec": {
                    "tls": [{"hosts": ["shop.example.com"], "secretName": "shop-tls"}],
                    "rules": [{"host": "shop.example.com", "http": {"paths": [
                        {"path": "/", "pathType": "Prefix",
                         "backend": {"service": {"name": "web", "port": {"number": 80}}}}
                    ]}}]
                }
            })
            .to_string(),
        )
        .expect("Ingress");
        let paths_capacity = |spec: &Option<k8s_openapi::api::networking::v1::IngressSpec>| {
            let rules = spec.as_ref().and_then(|s| s.rules.as_ref());
            let http = rules.and_then(|r| r[0].http.as_ref()).expect("http");
            http.paths.capacity()
        };
        // What this guards against: decoding leaves room for more.
        assert!(paths_capacity(&ingress.spec) > 1);
        let original = ingress.clone();
        let kept = Ingress::keep(ingress);
        assert_eq!(paths_capacity(&kept.spec), 1);
        assert_eq!(kept.metadata.name.as_deref(), Some("shop"));
        assert_eq!(
            kept.metadata.uid.as_deref(),
            Some("u-1"),
            "Events name it by uid"
        );
        let spec = kept.spec.as_ref().expect("spec");
        assert_eq!(spec.rules.as_ref().map(Vec::capacity), Some(1));
        let tls = spec.tls.as_ref().expect("tls");
        assert_eq!(tls.capacity(), 1);
        assert_eq!(tls[0].hosts.as_ref().map(Vec::capacity), Some(1));
        assert_eq!(kept.spec, original.spec, "the content is unchanged");
    }

    #[test]
    fn services_keep_name_namespace_annotations_and_spec() {
        let wire: ServiceWire = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "shop", "uid": "u-1",
                         "resourceVersion": "9", "labels": {"app": "web"},
                         "annotations": {"tugboat.dev/balance": "leastconn",
                                         LAST_APPLIED_ANNOTATION: "{}"}},
            "spec": {"clusterIP": "10.96.0.10", "ports": [{"name": "http", "port": 80}]}
        }))
        .expect("Service");
        assert_eq!(wire.resource_version().as_deref(), Some("9"));
        let service = Service::keep(wire);
        let expected: BTreeMap<String, String> =
            [("tugboat.dev/balance".to_string(), "leastconn".to_string())].into();
        assert_eq!(
            service.metadata,
            LeanMeta {
                name: Some("web".into()),
                namespace: Some("shop".into()),
                labels: None,
                annotations: Some(expected),
            }
        );
        let ports = service.spec.and_then(|s| s.ports).expect("ports");
        assert_eq!(ports[0].port, 80);
    }

    #[test]
    fn endpoint_slices_keep_their_service_name_out_of_the_labels() {
        // Decoded from text, as from the API: lists grow as they are read.
        let wire: EndpointSliceWire = serde_json::from_str(
            &serde_json::json!({
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": "web-1", "namespace": "shop", "resourceVersion": "3",
                             "labels": {"kubernetes.io/service-name": "web",
                                        "endpointslice.kubernetes.io/managed-by": "x"}},
                "addressType": "IPv4",
                "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": true}}],
                "ports": [{"name": "http", "port": 8080}]
            })
            .to_string(),
        )
        .expect("EndpointSlice");
        let slice = EndpointSlice::keep(wire);
        assert_eq!(slice.endpoints.capacity(), 1, "no spare room is kept");
        assert_eq!(slice.metadata.labels, None);
        assert_eq!(slice.metadata.name.as_deref(), Some("web-1"));
        assert_eq!(slice.service_name(), Some("web"));
        assert_eq!(
            slice.endpoints[0].addresses.as_slice(),
            [std::net::IpAddr::from([10, 0, 0, 1])]
        );
        assert_eq!(
            <EndpointSliceWire as k8s_openapi::Resource>::API_VERSION,
            "discovery.k8s.io/v1"
        );
        assert_eq!(<ServiceWire as k8s_openapi::Resource>::API_VERSION, "v1");
    }
}
