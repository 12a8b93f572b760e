//! Typed Kubernetes objects for tests, shared by every suite: Ingresses, Services,
//! EndpointSlices, Secrets and ConfigMaps built as k8s-openapi values, then serialized
//! with serde: as JSON for the fake API server ([`crate::FakeApiServer::apply`]) or
//! as YAML for the manifests folder ([`to_yaml`]). No YAML text is assembled by hand.
//!
//! Every object lives in namespace `default` unless [`in_namespace`] moves it.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, Ingress, IngressBackend, IngressClass, IngressClassSpec,
    IngressRule, IngressServiceBackend, IngressSpec, IngressTLS, ServiceBackendPort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::ResourceExt;
use serde::Serialize;

/// The namespace objects are made in.
pub const NAMESPACE: &str = "default";
/// The prefix of Tugboat's annotation keys.
pub const KEY_PREFIX: &str = "tugboat.dev/";

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(NAMESPACE.to_string()),
        ..ObjectMeta::default()
    }
}

/// One path of an Ingress rule: `path` of `path_type` to `service` port `port`, or to
/// its port named `port_name` when set.
#[derive(Debug, Clone, Copy)]
pub struct PathTo<'a> {
    pub path: &'a str,
    pub path_type: &'a str,
    pub service: &'a str,
    pub port: i32,
    pub port_name: Option<&'a str>,
}

impl<'a> PathTo<'a> {
    /// The same path to the Service's port named `name` instead of a number.
    pub fn port_named(self, name: &'a str) -> Self {
        Self {
            port_name: Some(name),
            ..self
        }
    }

    /// The same path to port number `port`.
    pub fn port(self, port: i32) -> Self {
        Self { port, ..self }
    }
}

/// `path` (Prefix) to `service` port 80.
pub fn prefix<'a>(path: &'a str, service: &'a str) -> PathTo<'a> {
    PathTo {
        path,
        path_type: "Prefix",
        service,
        port: 80,
        port_name: None,
    }
}

/// `path` (Exact) to `service` port 80.
pub fn exact<'a>(path: &'a str, service: &'a str) -> PathTo<'a> {
    PathTo {
        path_type: "Exact",
        ..prefix(path, service)
    }
}

/// A backend of Service `service` port `port`.
pub fn mk_backend(service: &str, port: i32) -> IngressBackend {
    mk_backend_to(
        service,
        ServiceBackendPort {
            number: Some(port),
            ..ServiceBackendPort::default()
        },
    )
}

fn mk_backend_to(service: &str, port: ServiceBackendPort) -> IngressBackend {
    IngressBackend {
        service: Some(IngressServiceBackend {
            name: service.to_string(),
            port: Some(port),
        }),
        ..IngressBackend::default()
    }
}

/// A rule for `host` (any host when `None`) with `paths`.
pub fn mk_rule(host: Option<&str>, paths: &[PathTo<'_>]) -> IngressRule {
    IngressRule {
        host: host.map(str::to_string),
        http: Some(HTTPIngressRuleValue {
            paths: paths
                .iter()
                .map(|p| HTTPIngressPath {
                    path: Some(p.path.to_string()),
                    path_type: p.path_type.to_string(),
                    backend: match p.port_name {
                        Some(name) => mk_backend_to(
                            p.service,
                            ServiceBackendPort {
                                name: Some(name.to_string()),
                                ..ServiceBackendPort::default()
                            },
                        ),
                        None => mk_backend(p.service, p.port),
                    },
                })
                .collect(),
        }),
    }
}

/// An Ingress of class `tugboat` with `rules`.
pub fn mk_ingress_with_rules(name: &str, rules: Vec<IngressRule>) -> Ingress {
    Ingress {
        metadata: meta(name),
        spec: Some(IngressSpec {
            ingress_class_name: Some("tugboat".to_string()),
            rules: Some(rules),
            ..IngressSpec::default()
        }),
        ..Ingress::default()
    }
}

/// An Ingress of class `tugboat` routing `host` `/` (Prefix) to `service` port 80.
pub fn mk_ingress(name: &str, host: &str, service: &str) -> Ingress {
    mk_ingress_with_rules(name, vec![mk_rule(Some(host), &[prefix("/", service)])])
}

/// An Ingress of class `tugboat` routing `host` + `path` (Prefix) to `service` port 80,
/// with these annotations (full names).
pub fn mk_annotated_ingress(
    name: &str,
    host: &str,
    path: &str,
    service: &str,
    annotations: &[(&str, &str)],
) -> Ingress {
    with_annotations(
        mk_ingress_with_rules(name, vec![mk_rule(Some(host), &[prefix(path, service)])]),
        annotations,
    )
}

/// The Ingress with class `class` (none when `None`).
pub fn with_class(mut ingress: Ingress, class: Option<&str>) -> Ingress {
    ingress
        .spec
        .get_or_insert_with(IngressSpec::default)
        .ingress_class_name = class.map(str::to_string);
    ingress
}

/// The Ingress with one `spec.tls` entry per `(hosts, secretName)`, in order.
pub fn with_tls(mut ingress: Ingress, entries: &[(&[&str], &str)]) -> Ingress {
    let tls = entries
        .iter()
        .map(|(hosts, secret)| IngressTLS {
            hosts: Some(hosts.iter().map(|h| h.to_string()).collect()),
            secret_name: Some(secret.to_string()),
        })
        .collect();
    ingress.spec.get_or_insert_with(IngressSpec::default).tls = Some(tls);
    ingress
}

/// The Ingress with `spec.defaultBackend`: Service `service` port `port`, which takes
/// every request no rule matches.
pub fn with_default_backend(mut ingress: Ingress, service: &str, port: i32) -> Ingress {
    ingress
        .spec
        .get_or_insert_with(IngressSpec::default)
        .default_backend = Some(mk_backend(service, port));
    ingress
}

/// The cluster-wide IngressClass `name` of controller `controller` (Tugboat's is
/// `tugboat.dev/ingress`), annotated as the cluster's default class when `default`.
pub fn mk_ingress_class(name: &str, controller: &str, default: bool) -> IngressClass {
    let annotations = default.then(|| {
        BTreeMap::from([(
            "ingressclass.kubernetes.io/is-default-class".to_string(),
            "true".to_string(),
        )])
    });
    IngressClass {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            annotations,
            ..ObjectMeta::default()
        },
        spec: Some(IngressClassSpec {
            controller: Some(controller.to_string()),
            ..IngressClassSpec::default()
        }),
    }
}

/// The object with the annotations `tugboat.dev/KEY: value` for each `(KEY, value)`.
pub fn with_keys<K: ResourceExt>(mut object: K, keys: &[(&str, &str)]) -> K {
    let annotations = object.annotations_mut();
    for (key, value) in keys {
        annotations.insert(format!("{KEY_PREFIX}{key}"), value.to_string());
    }
    object
}

/// The object with these annotations, written with their full names (another
/// controller's prefix, for instance).
pub fn with_annotations<K: ResourceExt>(mut object: K, annotations: &[(&str, &str)]) -> K {
    let all = object.annotations_mut();
    for (name, value) in annotations {
        all.insert(name.to_string(), value.to_string());
    }
    object
}

/// The object in namespace `namespace`.
pub fn in_namespace<K: ResourceExt>(mut object: K, namespace: &str) -> K {
    object.meta_mut().namespace = Some(namespace.to_string());
    object
}

/// The object with `metadata.creationTimestamp` `rfc3339` (e.g. `2024-01-01T00:00:00Z`).
/// Only a manifests folder keeps it: an API server sets its own when it creates the
/// object.
pub fn with_creation_timestamp<K: ResourceExt>(mut object: K, rfc3339: &str) -> K {
    let timestamp = rfc3339.parse().expect("an RFC 3339 timestamp");
    object.meta_mut().creation_timestamp = Some(Time(timestamp));
    object
}

/// A Service with one TCP port `port` named `port_name`.
pub fn mk_service(name: &str, port_name: &str, port: i32) -> Service {
    Service {
        metadata: meta(name),
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                name: Some(port_name.to_string()),
                port,
                protocol: Some("TCP".to_string()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// A Service of type ExternalName: `external_name` (a DNS name), one unnamed TCP port
/// `port`.
pub fn mk_external_name_service(name: &str, external_name: &str, port: i32) -> Service {
    Service {
        metadata: meta(name),
        spec: Some(ServiceSpec {
            type_: Some("ExternalName".to_string()),
            external_name: Some(external_name.to_string()),
            ports: Some(vec![ServicePort {
                port,
                protocol: Some("TCP".to_string()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// The EndpointSlice `SERVICE-abc` of Service `service` whose ready endpoints are
/// `addrs` (which share one port, as the endpoints of one Service port do), for the
/// port named `port_name`.
pub fn mk_endpoint_slice(service: &str, port_name: &str, addrs: &[SocketAddr]) -> EndpointSlice {
    let mut metadata = meta(&format!("{service}-abc"));
    metadata.labels = Some(BTreeMap::from([(
        "kubernetes.io/service-name".to_string(),
        service.to_string(),
    )]));
    EndpointSlice {
        metadata,
        address_type: "IPv4".to_string(),
        ports: Some(vec![EndpointPort {
            name: Some(port_name.to_string()),
            port: addrs.first().map(|a| i32::from(a.port())),
            protocol: Some("TCP".to_string()),
            ..EndpointPort::default()
        }]),
        endpoints: addrs
            .iter()
            .map(|addr| Endpoint {
                addresses: vec![addr.ip().to_string()],
                conditions: Some(EndpointConditions {
                    ready: Some(true),
                    ..EndpointConditions::default()
                }),
                ..Endpoint::default()
            })
            .collect(),
    }
}

/// The EndpointSlice with the endpoint of address `ip` in state `conditions` (e.g. not
/// ready, or terminating but still serving).
pub fn with_endpoint_conditions(
    mut slice: EndpointSlice,
    ip: IpAddr,
    conditions: EndpointConditions,
) -> EndpointSlice {
    let address = ip.to_string();
    let endpoint = slice
        .endpoints
        .iter_mut()
        .find(|endpoint| endpoint.addresses.contains(&address))
        .expect("an endpoint with that address");
    endpoint.conditions = Some(conditions);
    slice
}

/// Service `name` (port 80 named `http`) and its EndpointSlice of `servers`, as JSON:
/// what a scenario needs for a Service of echo backends.
pub fn mk_service_of(name: &str, servers: &[crate::EchoServer]) -> [serde_json::Value; 2] {
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    [
        to_json(&mk_service(name, "http", 80)),
        to_json(&mk_endpoint_slice(name, "http", &addrs)),
    ]
}

/// `openssl passwd -6 -salt tugboatsalt s3cret`: a SHA-512-crypt hash of the password
/// `s3cret`, as a basic-auth Secret holds it.
pub const S3CRET_HASH: &str = "$6$tugboatsalt$6DCrLIVuHuI1gvyKjEQEpbFrO4u9Q.BH36L9Y.MGa2DB448gX.Mfgzsbvarlgb/aCVDOWmjnakgB8vKFBojCv1";
/// The `Authorization` value of user `ann` with password `s3cret`.
pub const ANN_S3CRET: &str = "Basic YW5uOnMzY3JldA==";

/// A Secret of type `type_` with `data` (base64 on the wire, as the API server stores it).
pub fn mk_secret(name: &str, type_: &str, data: &[(&str, &[u8])]) -> Secret {
    Secret {
        metadata: meta(name),
        type_: Some(type_.to_string()),
        data: Some(
            data.iter()
                .map(|(key, value)| (key.to_string(), ByteString(value.to_vec())))
                .collect(),
        ),
        ..Secret::default()
    }
}

/// A `kubernetes.io/tls` Secret holding a certificate and its key (PEM).
pub fn mk_tls_secret(name: &str, cert_pem: &str, key_pem: &str) -> Secret {
    mk_secret(
        name,
        "kubernetes.io/tls",
        &[
            ("tls.crt", cert_pem.as_bytes()),
            ("tls.key", key_pem.as_bytes()),
        ],
    )
}

/// An Opaque Secret holding a CA bundle (PEM) under `ca.crt`, as `server-ca` reads it.
pub fn mk_ca_secret(name: &str, ca_pem: &str) -> Secret {
    mk_secret(name, "Opaque", &[("ca.crt", ca_pem.as_bytes())])
}

/// An Opaque Secret for basic auth: key `auth` holds one `user:hash` line per user
/// (an htpasswd file).
pub fn mk_basic_auth_secret(name: &str, users: &[(&str, &str)]) -> Secret {
    let auth: String = users
        .iter()
        .map(|(user, hash)| format!("{user}:{hash}\n"))
        .collect();
    mk_secret(name, "Opaque", &[("auth", auth.as_bytes())])
}

/// A ConfigMap with `data`.
pub fn mk_config_map(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: meta(name),
        data: Some(
            data.iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect(),
        ),
        ..ConfigMap::default()
    }
}

/// An object as JSON, with its `apiVersion` and `kind`.
pub fn to_json(object: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(object).expect("a Kubernetes object serializes")
}

/// Objects as one YAML text of several documents, for a manifests folder file.
pub fn to_yaml(objects: &[serde_json::Value]) -> String {
    objects
        .iter()
        .map(|object| serde_yaml_ng::to_string(object).expect("a Kubernetes object serializes"))
        .collect::<Vec<_>>()
        .join("---\n")
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[test]
    fn objects_carry_their_kind_and_survive_a_yaml_round_trip() {
        let ingress = with_keys(
            with_tls(
                mk_ingress("site", "site.example.com", "web"),
                &[(&["site.example.com"], "site-tls")],
            ),
            &[("auth-type", "basic-auth")],
        );
        let json = to_json(&ingress);
        assert_eq!(json["apiVersion"], "networking.k8s.io/v1");
        assert_eq!(json["kind"], "Ingress");
        assert_eq!(
            json["metadata"]["annotations"]["tugboat.dev/auth-type"],
            "basic-auth"
        );
        assert_eq!(json["spec"]["tls"][0]["secretName"], "site-tls");
        let secret = to_json(&mk_basic_auth_secret("users", &[("ann", "$6$x$y")]));
        assert_eq!(secret["data"]["auth"], "YW5uOiQ2JHgkeQo=");
        let text = to_yaml(&[json.clone(), secret.clone()]);
        let back: Vec<serde_json::Value> = serde_yaml_ng::Deserializer::from_str(&text)
            .map(|d| serde_json::Value::deserialize(d).expect("YAML"))
            .collect();
        assert_eq!(back, vec![json, secret]);
        let slice = to_json(&mk_endpoint_slice(
            "web",
            "http",
            &["127.0.0.1:8080".parse().expect("address")],
        ));
        assert_eq!(slice["ports"][0]["port"], 8080);
        assert_eq!(slice["endpoints"][0]["addresses"][0], "127.0.0.1");
    }

    #[test]
    fn shapes_for_defaults_external_names_ages_and_endpoint_states() {
        let ingress = to_json(&with_creation_timestamp(
            with_default_backend(
                mk_ingress("site", "site.example.com", "web"),
                "fallback",
                8080,
            ),
            "2024-01-01T00:00:00Z",
        ));
        assert_eq!(
            ingress["spec"]["defaultBackend"]["service"]["name"],
            "fallback"
        );
        assert_eq!(
            ingress["spec"]["defaultBackend"]["service"]["port"]["number"],
            8080
        );
        assert_eq!(
            ingress["metadata"]["creationTimestamp"],
            "2024-01-01T00:00:00Z"
        );
        let outside = to_json(&mk_external_name_service("outside", "localhost", 8080));
        assert_eq!(outside["spec"]["type"], "ExternalName");
        assert_eq!(outside["spec"]["externalName"], "localhost");
        assert_eq!(outside["spec"]["ports"][0]["port"], 8080);
        let addrs: Vec<SocketAddr> = ["127.0.0.1:80", "127.0.0.2:80"]
            .iter()
            .map(|a| a.parse().expect("address"))
            .collect();
        let slice = to_json(&with_endpoint_conditions(
            mk_endpoint_slice("web", "http", &addrs),
            addrs[1].ip(),
            EndpointConditions {
                ready: Some(false),
                serving: Some(true),
                terminating: Some(true),
            },
        ));
        assert_eq!(slice["endpoints"][0]["conditions"]["ready"], true);
        assert_eq!(slice["endpoints"][1]["conditions"]["ready"], false);
        assert_eq!(slice["endpoints"][1]["conditions"]["terminating"], true);
        let class = to_json(&mk_ingress_class("tugboat", "tugboat.dev/ingress", true));
        assert_eq!(class["kind"], "IngressClass");
        assert!(class["metadata"]["namespace"].is_null());
        assert_eq!(class["spec"]["controller"], "tugboat.dev/ingress");
        assert_eq!(
            class["metadata"]["annotations"]["ingressclass.kubernetes.io/is-default-class"],
            "true"
        );
        let other = to_json(&mk_ingress_class("nginx", "k8s.io/ingress-nginx", false));
        assert!(other["metadata"]["annotations"].is_null());
    }
}
