//! Typed Gateway API objects for tests: GatewayClass, Gateway, HTTPRoute and
//! ReferenceGrant built from the model's own types (`tugboat_model::gateway::objects`),
//! then given their `apiVersion` and `kind` as JSON for the fake API server or the
//! manifests folder. Objects live in namespace `default` unless a builder says otherwise.

use serde::Serialize;
use serde_json::Value;
use tugboat_model::gateway::objects::{
    AllowedRoutes, Gateway, GatewayClass, GatewayClassSpec, GatewayMeta, GatewaySpec,
    HttpBackendRef, HttpPathMatch, HttpRoute, HttpRouteFilter, HttpRouteMatch, HttpRouteRule,
    HttpRouteSpec, Listener, ListenerTls, ObjectReference, ParentReference, ReferenceGrant,
    ReferenceGrantFrom, ReferenceGrantSpec, ReferenceGrantTo, RouteNamespaces,
};

use crate::objects::NAMESPACE;

/// The controller name the tests' controller serves (the default).
pub const GATEWAY_CONTROLLER: &str = tugboat_model::gateway::DEFAULT_CONTROLLER_NAME;

fn meta(namespace: Option<&str>, name: &str) -> GatewayMeta {
    GatewayMeta {
        name: Some(name.to_string()),
        namespace: namespace.map(str::to_string),
        ..GatewayMeta::default()
    }
}

fn typed(api_version: &str, kind: &str, object: &impl Serialize) -> Value {
    let mut value = serde_json::to_value(object).expect("a serializable object");
    value["apiVersion"] = Value::String(api_version.to_string());
    value["kind"] = Value::String(kind.to_string());
    value
}

const V1: &str = "gateway.networking.k8s.io/v1";

/// A GatewayClass of `controller`.
pub fn mk_gateway_class(name: &str, controller: &str) -> Value {
    typed(
        V1,
        "GatewayClass",
        &GatewayClass {
            metadata: meta(None, name),
            spec: GatewayClassSpec {
                controller_name: controller.to_string(),
                parameters_ref: None,
            },
        },
    )
}

/// A listener of `protocol` on `port`, maybe for `hostname` only.
pub fn mk_listener(name: &str, protocol: &str, port: i32, hostname: Option<&str>) -> Listener {
    Listener {
        name: name.to_string(),
        hostname: hostname.map(str::to_string),
        port,
        protocol: protocol.to_string(),
        tls: None,
        allowed_routes: None,
    }
}

/// The listener, taking routes from every namespace.
pub fn from_all_namespaces(mut listener: Listener) -> Listener {
    listener.allowed_routes = Some(AllowedRoutes {
        namespaces: Some(RouteNamespaces {
            from: Some("All".into()),
            selector: None,
        }),
        kinds: None,
    });
    listener
}

/// A Gateway of class `class` with `listeners`.
pub fn mk_gateway(name: &str, class: &str, listeners: Vec<Listener>) -> Value {
    typed(
        V1,
        "Gateway",
        &Gateway {
            metadata: meta(Some(NAMESPACE), name),
            spec: GatewaySpec {
                gateway_class_name: class.to_string(),
                listeners,
                addresses: None,
            },
        },
    )
}

/// A rule: `matches` (path type and value) to one Service port.
pub fn mk_rule_to(matches: &[(&str, &str)], service: &str, port: i32) -> HttpRouteRule {
    HttpRouteRule {
        matches: matches
            .iter()
            .map(|(type_, value)| HttpRouteMatch {
                path: Some(HttpPathMatch {
                    type_: Some(type_.to_string()),
                    value: Some(value.to_string()),
                }),
                ..HttpRouteMatch::default()
            })
            .collect(),
        backend_refs: vec![mk_backend_ref(None, service, port)],
        ..HttpRouteRule::default()
    }
}

/// A backend reference to Service `service` port `port`, in `namespace` or the route's.
pub fn mk_backend_ref(namespace: Option<&str>, service: &str, port: i32) -> HttpBackendRef {
    HttpBackendRef {
        name: service.to_string(),
        namespace: namespace.map(str::to_string),
        port: Some(port),
        ..HttpBackendRef::default()
    }
}

/// The rule with a filter of `type_` (and nothing else of it set).
pub fn with_filter(mut rule: HttpRouteRule, type_: &str) -> HttpRouteRule {
    rule.filters.push(HttpRouteFilter {
        type_: type_.to_string(),
        ..HttpRouteFilter::default()
    });
    rule
}

/// The rule with a filter given as JSON (`{"type": ..., "<type>": {...}}`), as the
/// user writes it.
pub fn with_filter_json(mut rule: HttpRouteRule, filter: Value) -> HttpRouteRule {
    rule.filters
        .push(serde_json::from_value(filter).expect("a filter of the model's type"));
    rule
}

/// The rule with its matches given as JSON (`[{"path": ..., "headers": ...}]`), as the
/// user writes them.
pub fn with_matches_json(mut rule: HttpRouteRule, matches: Value) -> HttpRouteRule {
    rule.matches = serde_json::from_value(matches).expect("matches of the model's type");
    rule
}

/// A rule of one `PathPrefix` match to weighted Services: `(service, port, weight)`.
pub fn mk_weighted_rule(prefix: &str, backends: &[(&str, i32, i32)]) -> HttpRouteRule {
    let mut rule = mk_rule_to(&[("PathPrefix", prefix)], "unused", 80);
    rule.backend_refs = backends
        .iter()
        .map(|(service, port, weight)| HttpBackendRef {
            weight: Some(*weight),
            ..mk_backend_ref(None, service, *port)
        })
        .collect();
    rule
}

/// An HTTPRoute of namespace `default` attached to the Gateway `gateway`, for
/// `hostnames`, with `rules`.
pub fn mk_http_route(
    name: &str,
    gateway: &str,
    hostnames: &[&str],
    rules: Vec<HttpRouteRule>,
) -> HttpRoute {
    HttpRoute {
        metadata: meta(Some(NAMESPACE), name),
        spec: HttpRouteSpec {
            parent_refs: vec![ParentReference {
                name: gateway.to_string(),
                ..ParentReference::default()
            }],
            hostnames: hostnames.iter().map(|h| h.to_string()).collect(),
            rules,
        },
    }
}

/// The route with this creation time (the manifests folder keeps it; the API server
/// sets its own).
pub fn route_created_at(mut route: HttpRoute, rfc3339: &str) -> HttpRoute {
    route.metadata.creation_timestamp = Some(rfc3339.to_string());
    route
}

/// The route as JSON.
pub fn http_route_json(route: &HttpRoute) -> Value {
    typed(V1, "HTTPRoute", route)
}

/// A ReferenceGrant in `namespace` that lets HTTPRoutes of `from_namespace` refer to its
/// Services.
pub fn mk_service_grant(namespace: &str, name: &str, from_namespace: &str) -> Value {
    mk_reference_grant(namespace, name, ("HTTPRoute", from_namespace), "Service")
}

/// A ReferenceGrant in `namespace` that lets the `from` kind of its namespace refer to
/// the (core) `to_kind` objects of this one.
pub fn mk_reference_grant(namespace: &str, name: &str, from: (&str, &str), to_kind: &str) -> Value {
    typed(
        "gateway.networking.k8s.io/v1beta1",
        "ReferenceGrant",
        &ReferenceGrant {
            metadata: meta(Some(namespace), name),
            spec: ReferenceGrantSpec {
                from: vec![ReferenceGrantFrom {
                    group: "gateway.networking.k8s.io".into(),
                    kind: from.0.into(),
                    namespace: from.1.into(),
                }],
                to: vec![ReferenceGrantTo {
                    group: String::new(),
                    kind: to_kind.into(),
                    name: None,
                }],
            },
        },
    )
}

/// An HTTPS listener on port 443 for `hostname`, terminating TLS with the Secret `name`
/// (in `namespace`, or the Gateway's).
pub fn mk_https_listener(name: &str, hostname: &str, secret: (Option<&str>, &str)) -> Listener {
    mk_https_listener_for(name, Some(hostname), secret)
}

/// [`mk_https_listener`], for `hostname` or (`None`) any host.
pub fn mk_https_listener_for(
    name: &str,
    hostname: Option<&str>,
    secret: (Option<&str>, &str),
) -> Listener {
    let mut listener = mk_listener(name, "HTTPS", 443, hostname);
    listener.tls = Some(ListenerTls {
        mode: None,
        certificate_refs: vec![ObjectReference {
            name: secret.1.to_string(),
            namespace: secret.0.map(str::to_string),
            ..ObjectReference::default()
        }],
        options: None,
    });
    listener
}
