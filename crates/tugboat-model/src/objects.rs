//! Lean versions of the Kubernetes kinds a large cluster has many of.
//!
//! The controller holds every Ingress, Service and EndpointSlice of the cluster. The full
//! `k8s-openapi` types keep room for fields the controller never reads (metadata's
//! fifteen fields, a Service spec's thirty-odd, an endpoint's target reference, node
//! name, zone and hints: hundreds of bytes per object even when empty); these types
//! declare only what the model reads, so the rest is skipped while the JSON is decoded
//! and never allocated. The API source decodes the full metadata (its watch needs the
//! resource version) and keeps [`LeanMeta`] ([`IngressMeta`] for an Ingress).

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use k8s_openapi::api::networking::v1::{IngressSpec, IngressStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::de::{Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

/// The metadata the model reads: name, namespace, labels and annotations.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct LeanMeta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// `networking.k8s.io/v1` Ingress: the metadata the controller reads, the spec and the
/// status (which the status writer compares with the published addresses).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct Ingress {
    #[serde(default)]
    pub metadata: IngressMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<IngressSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<IngressStatus>,
}

/// What the controller reads of an Ingress' metadata: its name, the uid that Events
/// name it by, its age (the older of two claims on a route wins) and its annotations.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IngressMeta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

impl From<k8s_openapi::api::networking::v1::Ingress> for Ingress {
    fn from(ingress: k8s_openapi::api::networking::v1::Ingress) -> Self {
        let metadata = ingress.metadata;
        Ingress {
            metadata: IngressMeta {
                name: metadata.name,
                namespace: metadata.namespace,
                uid: metadata.uid,
                creation_timestamp: metadata.creation_timestamp,
                annotations: metadata.annotations,
            },
            spec: ingress.spec,
            status: ingress.status,
        }
    }
}

/// `discovery.k8s.io/v1` EndpointSlice: addresses, conditions and ports only.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointSlice {
    #[serde(default)]
    pub metadata: LeanMeta,
    #[serde(default)]
    pub address_type: String,
    #[serde(default)]
    pub endpoints: Vec<Endpoint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<EndpointPort>>,
    /// The Service this slice belongs to, when the API source has moved it out of the
    /// labels (a map of one label costs a whole tree node, hundreds of bytes per slice).
    /// Read it with [`EndpointSlice::service_name`].
    #[serde(skip)]
    pub service_name: Option<String>,
}

/// The label that names the Service of an EndpointSlice.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

impl EndpointSlice {
    /// The Service this slice belongs to (its `kubernetes.io/service-name` label).
    pub fn service_name(&self) -> Option<&str> {
        self.service_name.as_deref().or_else(|| {
            self.metadata
                .labels
                .as_ref()?
                .get(SERVICE_NAME_LABEL)
                .map(String::as_str)
        })
    }
}

/// The addresses of one endpoint: Kubernetes gives one (its consumers may use only the
/// first), held in place rather than in a list of its own.
pub type EndpointAddresses = SmallVec<[IpAddr; 1]>;

/// One endpoint of a slice.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// The addresses that are IP addresses: an `FQDN` slice's host names are left out,
    /// since haproxy's servers here are addresses.
    #[serde(default, deserialize_with = "ip_addresses")]
    pub addresses: EndpointAddresses,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<EndpointConditions>,
}

/// Readiness of an endpoint, as Kubernetes reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointConditions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminating: Option<bool>,
}

/// Reads a list of addresses, keeping those that parse as IP addresses (without a
/// string allocated for each).
fn ip_addresses<'de, D: Deserializer<'de>>(deserializer: D) -> Result<EndpointAddresses, D::Error> {
    /// One address: `None` when it is not an IP address.
    struct MaybeIp(Option<IpAddr>);

    impl<'de> Deserialize<'de> for MaybeIp {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct AddressVisitor;
            impl Visitor<'_> for AddressVisitor {
                type Value = MaybeIp;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("an address")
                }
                fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<MaybeIp, E> {
                    Ok(MaybeIp(text.parse().ok()))
                }
            }
            deserializer.deserialize_str(AddressVisitor)
        }
    }

    struct AddressesVisitor;
    impl<'de> Visitor<'de> for AddressesVisitor {
        type Value = EndpointAddresses;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list of addresses")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<EndpointAddresses, A::Error> {
            let mut addresses = EndpointAddresses::new();
            while let Some(MaybeIp(address)) = seq.next_element()? {
                addresses.extend(address);
            }
            Ok(addresses)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<EndpointAddresses, E> {
            Ok(EndpointAddresses::new())
        }
    }
    deserializer.deserialize_any(AddressesVisitor)
}

/// A port of a slice: its name (the Service port's) and number (the target port).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointPort {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

/// `v1` Service: its ports, type and ExternalName only.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct Service {
    #[serde(default)]
    pub metadata: LeanMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<ServiceSpec>,
}

/// What the model reads of a Service's spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<ServicePort>>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_name: Option<String>,
}

/// A Service port: its name and number.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct ServicePort {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub port: i32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_keeps_its_ip_addresses_only() {
        let endpoints: Vec<Endpoint> = serde_json::from_value(serde_json::json!([
            {"addresses": ["10.0.0.1", "web.example.com", "fd00::1"]},
            {"addresses": null},
            {}
        ]))
        .expect("endpoints");
        assert_eq!(
            endpoints[0].addresses.as_slice(),
            [
                IpAddr::from([10, 0, 0, 1]),
                IpAddr::from([0xfd00, 0, 0, 0, 0, 0, 0, 1])
            ]
        );
        assert!(endpoints[1].addresses.is_empty());
        assert!(endpoints[2].addresses.is_empty());
        let one: Endpoint = serde_json::from_value(serde_json::json!({"addresses": ["10.0.0.1"]}))
            .expect("endpoint");
        assert!(!one.addresses.spilled(), "one address is held in place");
    }

    #[test]
    fn reads_what_the_model_needs_and_skips_the_rest() {
        let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "web-1", "namespace": "shop",
                         "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "endpoints": [{
                "addresses": ["10.0.0.1"],
                "conditions": {"ready": true, "serving": true, "terminating": false},
                "nodeName": "node-a", "zone": "z1",
                "targetRef": {"kind": "Pod", "name": "web-abc", "namespace": "shop"}
            }],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]
        }))
        .expect("EndpointSlice");
        assert_eq!(slice.address_type, "IPv4");
        assert_eq!(
            slice.endpoints[0].addresses.as_slice(),
            [IpAddr::from([10, 0, 0, 1])]
        );
        assert_eq!(
            slice.endpoints[0].conditions.and_then(|c| c.ready),
            Some(true)
        );
        assert_eq!(slice.ports.as_ref().map(|p| p[0].port), Some(Some(8080)));
        assert_eq!(slice.service_name(), Some("web"));
    }

    #[test]
    fn services_keep_ports_type_and_external_name() {
        let service: Service = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"type": "ExternalName", "externalName": "db.example.com",
                     "clusterIP": "10.96.0.10", "selector": {"app": "web"},
                     "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}
        }))
        .expect("Service");
        let spec = service.spec.expect("spec");
        assert_eq!(spec.type_.as_deref(), Some("ExternalName"));
        assert_eq!(spec.external_name.as_deref(), Some("db.example.com"));
        let ports = spec.ports.expect("ports");
        assert_eq!(
            (ports[0].name.as_deref(), ports[0].port),
            (Some("http"), 80)
        );
    }
}
