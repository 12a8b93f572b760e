//! Ingresses (rules, paths, TLS, default backend, class) and IngressClasses.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, Ingress, IngressBackend, IngressClass, IngressClassSpec,
    IngressRule, IngressServiceBackend, IngressSpec, IngressTLS, ServiceBackendPort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::{meta, with_annotations};

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

/// `path` of `path_type` (any text: a test may want a wrong one) to `service` port 80.
pub fn mk_path<'a>(path: &'a str, path_type: &'a str, service: &'a str) -> PathTo<'a> {
    PathTo {
        path,
        path_type,
        service,
        port: 80,
        port_name: None,
    }
}

/// `path` (Prefix) to `service` port 80.
pub fn prefix<'a>(path: &'a str, service: &'a str) -> PathTo<'a> {
    mk_path(path, "Prefix", service)
}

/// `path` (Exact) to `service` port 80.
pub fn exact<'a>(path: &'a str, service: &'a str) -> PathTo<'a> {
    mk_path(path, "Exact", service)
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

/// A backend of Service `service` at `port` (a number or a name).
pub fn mk_backend_to(service: &str, port: ServiceBackendPort) -> IngressBackend {
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
