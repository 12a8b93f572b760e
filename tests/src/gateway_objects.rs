//! Gateway API objects for the end-to-end suites: the shared vocabulary of
//! `tugboat_test_objects::gateway` (the objects' wire form), turned into the model's own
//! types (`tugboat_model::gateway::objects`) where a scenario changes a listener, a rule
//! or a route by hand, and into JSON (with `apiVersion` and `kind`) for the fake API
//! server or the manifests folder. Objects live in namespace `default` unless a builder
//! says otherwise.

use k8s_openapi::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tugboat_model::gateway::objects::{HttpBackendRef, HttpRoute, HttpRouteRule, Listener};
use tugboat_test_objects::gateway as wire;
use tugboat_test_objects::to_json;

/// The controller name the tests' controller serves (the default).
pub const GATEWAY_CONTROLLER: &str = tugboat_model::gateway::DEFAULT_CONTROLLER_NAME;

/// `object` read as type `T`: a wire object as the model's type, or back.
fn retyped<T: DeserializeOwned>(object: &impl Serialize) -> T {
    serde_json::from_value(to_json(object)).expect("the same object in the other type")
}

/// A GatewayClass of `controller`.
pub fn mk_gateway_class(name: &str, controller: &str) -> Value {
    to_json(&wire::mk_gateway_class(name, controller))
}

/// A listener of `protocol` on `port`, maybe for `hostname` only.
pub fn mk_listener(name: &str, protocol: &str, port: i32, hostname: Option<&str>) -> Listener {
    retyped(&wire::mk_listener(name, protocol, port, hostname))
}

/// The listener, taking routes from every namespace.
pub fn from_all_namespaces(listener: Listener) -> Listener {
    retyped(&retyped::<wire::Listener>(&listener).routes_from_all_namespaces())
}

/// A Gateway of class `class` with `listeners`.
pub fn mk_gateway(name: &str, class: &str, listeners: Vec<Listener>) -> Value {
    to_json(&wire::mk_gateway(
        name,
        class,
        listeners.iter().map(retyped).collect(),
    ))
}

/// A rule: `matches` (path type and value) to one Service port.
pub fn mk_rule_to(matches: &[(&str, &str)], service: &str, port: i32) -> HttpRouteRule {
    retyped(&wire::mk_rule_to(matches, service, port))
}

/// A backend reference to Service `service` port `port`, in `namespace` or the route's.
pub fn mk_backend_ref(namespace: Option<&str>, service: &str, port: i32) -> HttpBackendRef {
    let backend = wire::mk_backend_ref(service, port);
    retyped(&match namespace {
        Some(namespace) => backend.namespace(namespace),
        None => backend,
    })
}

/// The rule with one more filter, after its others.
pub fn with_filter(mut rule: HttpRouteRule, filter: wire::RouteFilter) -> HttpRouteRule {
    rule.filters.push(retyped(&filter));
    rule
}

/// The rule with these matches instead of its own.
pub fn with_matches(mut rule: HttpRouteRule, matches: Vec<wire::RouteMatch>) -> HttpRouteRule {
    rule.matches = matches.iter().map(retyped).collect();
    rule
}

/// A rule of one `PathPrefix` match to weighted Services: `(service, port, weight)`.
pub fn mk_weighted_rule(prefix: &str, backends: &[(&str, i32, i32)]) -> HttpRouteRule {
    retyped(&wire::mk_weighted_rule(prefix, backends))
}

/// An HTTPRoute of namespace `default` attached to the Gateway `gateway`, for
/// `hostnames`, with `rules`.
pub fn mk_http_route(
    name: &str,
    gateway: &str,
    hostnames: &[&str],
    rules: Vec<HttpRouteRule>,
) -> HttpRoute {
    let mut route: HttpRoute = retyped(&wire::mk_http_route(name, gateway, hostnames, Vec::new()));
    route.spec.rules = rules;
    route
}

/// The route with this creation time (the manifests folder keeps it; the API server
/// sets its own).
pub fn route_created_at(mut route: HttpRoute, rfc3339: &str) -> HttpRoute {
    route.metadata.creation_timestamp = Some(rfc3339.to_string());
    route
}

/// The route as JSON, with the `apiVersion` and `kind` of an HTTPRoute.
pub fn http_route_json(route: &HttpRoute) -> Value {
    let mut value = to_json(route);
    value["apiVersion"] = Value::from(wire::HttpRoute::API_VERSION);
    value["kind"] = Value::from(wire::HttpRoute::KIND);
    value
}

/// A ReferenceGrant in `namespace` that lets HTTPRoutes of `from_namespace` refer to its
/// Services.
pub fn mk_service_grant(namespace: &str, name: &str, from_namespace: &str) -> Value {
    to_json(&wire::mk_service_grant(namespace, name, from_namespace))
}

/// A ReferenceGrant in `namespace` that lets the `from` kind of its namespace refer to
/// the (core) `to_kind` objects of this one.
pub fn mk_reference_grant(namespace: &str, name: &str, from: (&str, &str), to_kind: &str) -> Value {
    to_json(&wire::mk_reference_grant(namespace, name, from, to_kind))
}

/// An HTTPS listener on port 443 for `hostname`, terminating TLS with the Secret `name`
/// (in `namespace`, or the Gateway's).
pub fn mk_https_listener(name: &str, hostname: &str, secret: (Option<&str>, &str)) -> Listener {
    retyped(&wire::mk_https_listener(name, hostname, secret))
}

/// [`mk_https_listener`], for `hostname` or (`None`) any host.
pub fn mk_https_listener_for(
    name: &str,
    hostname: Option<&str>,
    secret: (Option<&str>, &str),
) -> Listener {
    retyped(&wire::mk_https_listener_for(name, hostname, secret))
}

/// A TLS listener in Passthrough mode on `port`, for `hostname` or (`None`) any name.
pub fn mk_tls_passthrough_listener(name: &str, port: i32, hostname: Option<&str>) -> Listener {
    retyped(&wire::mk_tls_passthrough_listener(name, port, hostname))
}

/// A TLSRoute of Gateway `gateway` for the SNI names `hostnames`, to Service `service`
/// port `port`, as JSON.
pub fn tls_route_json(
    name: &str,
    gateway: &str,
    hostnames: &[&str],
    service: &str,
    port: i32,
) -> Value {
    to_json(&wire::mk_tls_route(
        name,
        gateway,
        hostnames,
        vec![wire::mk_backend_ref(service, port)],
    ))
}
