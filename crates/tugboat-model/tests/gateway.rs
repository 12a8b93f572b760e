//! Table tests of the Gateway API translation: GatewayClass, Gateway, HTTPRoute and
//! ReferenceGrant in, routes and status conditions out.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tugboat_model::gateway::{Condition, GatewaySettings, RequestedAddress, RouteParentState};
use tugboat_model::problem::ProblemReason;
use tugboat_model::{
    BackendName, BuildOutput, HostMatch, ObjectKey, PathMatch, Settings, Snapshot,
};
use tugboat_test_objects::{
    in_namespace, mk_ingress_with_rules, mk_rule, mk_service, mk_tls_secret, prefix, to_json,
    with_annotations, with_class,
};

const CONTROLLER: &str = "tugboat.dev/gateway";

fn object<K: DeserializeOwned>(value: Value) -> Arc<K> {
    Arc::new(serde_json::from_value(value).expect("valid object"))
}

/// A typed object as the model holds it, read from its JSON as the API source reads it.
fn typed<K: DeserializeOwned>(built: &impl serde::Serialize) -> Arc<K> {
    object(to_json(built))
}

fn settings() -> Settings {
    Settings {
        gateway: Some(GatewaySettings::new(CONTROLLER, 8080, 8443)),
        ..Settings::new(0)
    }
}

/// A snapshot with our class `tugboat`, another controller's class `other`, and the
/// Services `shop/web` and `shop/api` (port 80) and `blog/posts` (port 8080).
fn base() -> Snapshot {
    let mut snapshot = Snapshot::default();
    for (name, controller) in [("tugboat", CONTROLLER), ("other", "example.com/other")] {
        snapshot.gateway_classes.insert(
            ObjectKey::new("", name),
            object(json!({"metadata": {"name": name, "generation": 1},
                          "spec": {"controllerName": controller}})),
        );
    }
    for (namespace, name, port) in [
        ("shop", "web", 80),
        ("shop", "api", 80),
        ("blog", "posts", 8080),
    ] {
        snapshot.services.insert(
            ObjectKey::new(namespace, name),
            typed(&in_namespace(mk_service(name, "http", port), namespace)),
        );
    }
    snapshot
}

fn add_gateway(
    snapshot: &mut Snapshot,
    namespace: &str,
    name: &str,
    class: &str,
    listeners: Value,
) {
    snapshot.gateways.insert(
        ObjectKey::new(namespace, name),
        object(
            json!({"metadata": {"name": name, "namespace": namespace, "generation": 2},
                      "spec": {"gatewayClassName": class, "listeners": listeners}}),
        ),
    );
}

fn http_listener(name: &str, hostname: Option<&str>, allowed: Value) -> Value {
    let mut listener =
        json!({"name": name, "port": 80, "protocol": "HTTP", "allowedRoutes": allowed});
    if let Some(hostname) = hostname {
        listener["hostname"] = json!(hostname);
    }
    listener
}

/// [`base`] with the Gateway `shop/gw` of class `tugboat`: one HTTP listener `http` on
/// port 80, any host, routes of its own namespace.
fn with_http_gateway() -> Snapshot {
    let mut snapshot = base();
    add_gateway(
        &mut snapshot,
        "shop",
        "gw",
        "tugboat",
        json!([http_listener("http", None, json!(null))]),
    );
    snapshot
}

/// The spec of a route attached to the Gateway `gw` of its namespace, for `hostnames`
/// (a JSON list), with `rules` (a JSON list).
fn on_gw(hostnames: Value, rules: Value) -> Value {
    json!({"parentRefs": [{"name": "gw"}], "hostnames": hostnames, "rules": rules})
}

/// A route of namespace `shop` created on 2024-01-01.
fn add_shop_route(snapshot: &mut Snapshot, name: &str, spec: Value) {
    add_route(snapshot, "shop", name, "2024-01-01T00:00:00Z", spec);
}

fn add_route(snapshot: &mut Snapshot, namespace: &str, name: &str, created: &str, spec: Value) {
    snapshot.http_routes.insert(
        ObjectKey::new(namespace, name),
        object(
            json!({"metadata": {"name": name, "namespace": namespace, "generation": 5,
                                   "creationTimestamp": created},
                      "spec": spec}),
        ),
    );
}

fn to_web(paths: Value) -> Value {
    json!({"matches": paths, "backendRefs": [{"name": "web", "port": 80}]})
}

fn build(snapshot: &Snapshot) -> BuildOutput {
    tugboat_model::build(snapshot, &settings())
}

/// `(host, path, backend)` of every route.
fn routes(output: &BuildOutput) -> Vec<(String, String, String)> {
    output
        .desired
        .routes
        .iter()
        .map(|r| {
            (
                r.host.to_string(),
                r.path.to_string(),
                r.backend.to_string(),
            )
        })
        .collect()
}

fn route_parents(output: &BuildOutput, namespace: &str, name: &str) -> Vec<RouteParentState> {
    output.gateway.routes[&ObjectKey::new(namespace, name)]
        .parents
        .clone()
}

fn condition<'a>(conditions: &'a [Condition], type_: &str) -> &'a Condition {
    conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} condition in {conditions:?}"))
}

/// `(status, reason)` of the route's condition of `type_` at its first parent.
fn route_condition(
    output: &BuildOutput,
    namespace: &str,
    name: &str,
    type_: &str,
) -> (bool, String) {
    let parents = route_parents(output, namespace, name);
    let found = condition(&parents[0].conditions, type_);
    (found.status, found.reason.to_string())
}

fn listener_condition(
    output: &BuildOutput,
    gateway: (&str, &str),
    listener: usize,
    type_: &str,
) -> (bool, String) {
    let state = &output.gateway.gateways[&ObjectKey::new(gateway.0, gateway.1)];
    let found = condition(&state.listeners[listener].conditions, type_);
    (found.status, found.reason.to_string())
}

fn simple() -> Snapshot {
    let mut snapshot = with_http_gateway();
    add_shop_route(
        &mut snapshot,
        "web",
        on_gw(
            json!(["shop.example.com"]),
            json!([to_web(
                json!([{"path": {"type": "PathPrefix", "value": "/store/"}},
                                        {"path": {"type": "Exact", "value": "/cart"}}])
            )]),
        ),
    );
    snapshot
}

#[test]
fn a_simple_route_becomes_host_and_path_routes_with_accepted_status() {
    let output = build(&simple());
    assert_eq!(
        routes(&output),
        [
            (
                "shop.example.com".into(),
                "/cart (Exact)".into(),
                "shop_web_80".into()
            ),
            (
                "shop.example.com".into(),
                "/store (Prefix)".into(),
                "shop_web_80".into()
            ),
        ]
    );
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    let class = &output.gateway.classes["tugboat"];
    assert!(condition(&class.conditions, "Accepted").status);
    assert!(class.supported_features.contains(&"HTTPRoute"));
    assert!(
        !output.gateway.classes.contains_key("other"),
        "not our class"
    );
    let gateway = &output.gateway.gateways[&ObjectKey::new("shop", "gw")];
    assert_eq!(
        condition(&gateway.conditions, "Accepted").observed_generation,
        2
    );
    assert_eq!(gateway.listeners[0].attached_routes, 1);
    assert_eq!(
        listener_condition(&output, ("shop", "gw"), 0, "Programmed"),
        (true, "Programmed".into())
    );
    assert_eq!(
        route_condition(&output, "shop", "web", "Accepted"),
        (true, "Accepted".into())
    );
    assert_eq!(
        route_condition(&output, "shop", "web", "ResolvedRefs"),
        (true, "ResolvedRefs".into())
    );
    let parents = route_parents(&output, "shop", "web");
    assert_eq!(
        condition(&parents[0].conditions, "Accepted").observed_generation,
        5
    );
    // Routes of HTTPRoutes are told apart from the Ingresses'.
    assert_eq!(output.desired.http_route_slots.len(), 2);
}

#[test]
fn nothing_is_served_without_the_gateway_api_enabled() {
    let output = tugboat_model::build(&simple(), &Settings::new(0));
    assert!(output.desired.routes.is_empty());
    assert!(output.gateway.is_empty());
}

#[test]
fn gateways_of_another_controller_are_left_alone() {
    let mut snapshot = simple();
    add_gateway(
        &mut snapshot,
        "shop",
        "gw",
        "other",
        json!([http_listener("http", None, json!(null))]),
    );
    let output = build(&snapshot);
    assert!(output.desired.routes.is_empty());
    assert!(output.gateway.gateways.is_empty());
    assert!(
        output.gateway.routes.is_empty(),
        "no status on routes of other parents"
    );
}

#[test]
fn hostnames_are_the_intersection_of_the_listener_and_the_route() {
    let mut snapshot = base();
    add_gateway(
        &mut snapshot,
        "shop",
        "gw",
        "tugboat",
        json!([
            http_listener("wild", Some("*.example.com"), json!(null)),
            http_listener("exact", Some("exact.example.org"), json!(null))
        ]),
    );
    let route = |hostnames: Value| {
        json!({"parentRefs": [{"name": "gw"}], "hostnames": hostnames,
               "rules": [to_web(json!([]))]})
    };
    add_route(
        &mut snapshot,
        "shop",
        "some",
        "2024-01-01T00:00:00Z",
        route(json!(["a.example.com", "b.other.net", "*.example.org"])),
    );
    add_route(
        &mut snapshot,
        "shop",
        "none",
        "2024-01-02T00:00:00Z",
        route(json!(["nothing.net"])),
    );
    add_route(
        &mut snapshot,
        "shop",
        "all",
        "2024-01-03T00:00:00Z",
        route(json!([])),
    );
    let output = build(&snapshot);
    let hosts: Vec<String> = output
        .desired
        .routes
        .iter()
        .map(|r| r.host.to_string())
        .collect();
    // a.example.com (listener wild), the listener's hostname where the route's wildcard
    // covers it (exact), and the listeners' own hostnames for the route without any.
    assert_eq!(
        hosts,
        [
            "a.example.com",
            "exact.example.org",
            "*.example.com (any depth)"
        ]
    );
    assert_eq!(
        route_condition(&output, "shop", "some", "Accepted"),
        (true, "Accepted".into())
    );
    assert_eq!(
        route_condition(&output, "shop", "none", "Accepted"),
        (false, "NoMatchingListenerHostname".into())
    );
    let route_of = |host: &str| {
        output
            .desired
            .routes
            .iter()
            .find(|r| r.host.to_string() == host)
            .map(|r| r.ingress.name.clone())
    };
    assert_eq!(
        route_of("exact.example.org").as_deref(),
        Some("some"),
        "the older route wins"
    );
}

#[test]
fn section_name_and_port_pick_listeners() {
    let mut snapshot = base();
    add_gateway(
        &mut snapshot,
        "shop",
        "gw",
        "tugboat",
        json!([
            http_listener("a", Some("a.example.com"), json!(null)),
            http_listener("b", Some("b.example.com"), json!(null))
        ]),
    );
    add_route(
        &mut snapshot,
        "shop",
        "only-b",
        "2024-01-01T00:00:00Z",
        json!({"parentRefs": [{"name": "gw", "sectionName": "b"}], "rules": [to_web(json!([]))]}),
    );
    add_route(
        &mut snapshot,
        "shop",
        "missing",
        "2024-01-01T00:00:00Z",
        json!({"parentRefs": [{"name": "gw", "sectionName": "c"}], "rules": [to_web(json!([]))]}),
    );
    add_route(
        &mut snapshot,
        "shop",
        "port",
        "2024-01-01T00:00:00Z",
        json!({"parentRefs": [{"name": "gw", "port": 81}], "rules": [to_web(json!([]))]}),
    );
    let output = build(&snapshot);
    let hosts: Vec<String> = output
        .desired
        .routes
        .iter()
        .map(|r| r.host.to_string())
        .collect();
    assert_eq!(hosts, ["b.example.com"]);
    assert_eq!(
        route_condition(&output, "shop", "missing", "Accepted"),
        (false, "NoMatchingParent".into())
    );
    assert_eq!(
        route_condition(&output, "shop", "port", "Accepted"),
        (false, "NoMatchingParent".into())
    );
    let gateway = &output.gateway.gateways[&ObjectKey::new("shop", "gw")];
    assert_eq!(gateway.listeners[0].attached_routes, 0);
    assert_eq!(gateway.listeners[1].attached_routes, 1);
}

#[test]
fn allowed_routes_namespaces_same_all_and_selector() {
    let mut snapshot = base();
    snapshot.namespaces.insert(
        ObjectKey::new("", "blog"),
        object(json!({"metadata": {"name": "blog", "labels": {"team": "writers"}}})),
    );
    add_gateway(
        &mut snapshot,
        "shop",
        "gw",
        "tugboat",
        json!([
            http_listener("same", Some("same.example.com"), json!(null)),
            http_listener(
                "all",
                Some("all.example.com"),
                json!({"namespaces": {"from": "All"}})
            ),
            http_listener(
                "writers",
                Some("writers.example.com"),
                json!({"namespaces": {"from": "Selector",
                                                "selector": {"matchLabels": {"team": "writers"}}}})
            ),
            http_listener(
                "readers",
                Some("readers.example.com"),
                json!({"namespaces": {"from": "Selector",
                                                "selector": {"matchExpressions": [
                                                    {"key": "team", "operator": "In", "values": ["readers"]}]}}})
            ),
        ]),
    );
    add_route(
        &mut snapshot,
        "blog",
        "posts",
        "2024-01-01T00:00:00Z",
        json!({"parentRefs": [{"name": "gw", "namespace": "shop"}],
                     "rules": [{"backendRefs": [{"name": "posts", "port": 8080}]}]}),
    );
    add_route(
        &mut snapshot,
        "blog",
        "denied",
        "2024-01-01T00:00:00Z",
        json!({"parentRefs": [{"name": "gw", "namespace": "shop", "sectionName": "same"}],
                     "rules": [{"backendRefs": [{"name": "posts", "port": 8080}]}]}),
    );
    let output = build(&snapshot);
    let hosts: Vec<String> = output
        .desired
        .routes
        .iter()
        .map(|r| r.host.to_string())
        .collect();
    assert_eq!(hosts, ["all.example.com", "writers.example.com"]);
    assert_eq!(
        route_condition(&output, "blog", "denied", "Accepted"),
        (false, "NotAllowedByListeners".into())
    );
}

#[test]
fn a_listener_that_takes_no_http_routes_says_why() {
    let mut snapshot = base();
    add_gateway(
        &mut snapshot,
        "shop",
        "gw",
        "tugboat",
        json!([http_listener(
            "tcp-only",
            None,
            json!({"kinds": [{"kind": "TCPRoute"}]})
        )]),
    );
    add_shop_route(
        &mut snapshot,
        "web",
        on_gw(json!([]), json!([to_web(json!([]))])),
    );
    let output = build(&snapshot);
    assert!(output.desired.routes.is_empty());
    assert_eq!(
        listener_condition(&output, ("shop", "gw"), 0, "ResolvedRefs"),
        (false, "InvalidRouteKinds".into())
    );
    assert_eq!(
        route_condition(&output, "shop", "web", "Accepted"),
        (false, "NotAllowedByListeners".into())
    );
}

#[test]
fn listener_ports_protocols_and_conflicts() {
    let mut snapshot = base();
    add_gateway(
        &mut snapshot,
        "shop",
        "gw",
        "tugboat",
        json!([
            {"name": "http", "port": 80, "protocol": "HTTP"},
            {"name": "bind-port", "port": 8080, "protocol": "HTTP", "hostname": "b.example.com"},
            {"name": "odd-port", "port": 8081, "protocol": "HTTP"},
            {"name": "tcp", "port": 5432, "protocol": "TCP"},
            {"name": "again", "port": 8080, "protocol": "HTTP"},
        ]),
    );
    let output = build(&snapshot);
    let gateway = ("shop", "gw");
    assert_eq!(
        listener_condition(&output, gateway, 0, "Accepted"),
        (true, "Accepted".into())
    );
    assert_eq!(
        listener_condition(&output, gateway, 1, "Accepted"),
        (true, "Accepted".into())
    );
    assert_eq!(
        listener_condition(&output, gateway, 2, "Accepted"),
        (false, "PortUnavailable".into())
    );
    assert_eq!(
        listener_condition(&output, gateway, 3, "Accepted"),
        (false, "UnsupportedProtocol".into())
    );
    assert_eq!(
        listener_condition(&output, gateway, 4, "Conflicted"),
        (true, "HostnameConflict".into())
    );
    assert_eq!(
        listener_condition(&output, gateway, 0, "Conflicted"),
        (false, "NoConflicts".into())
    );
    assert_eq!(
        listener_condition(&output, gateway, 4, "Programmed"),
        (false, "Invalid".into())
    );
    let state = &output.gateway.gateways[&ObjectKey::new("shop", "gw")];
    assert!(
        condition(&state.conditions, "Programmed").status,
        "some listeners work"
    );
}

fn unresolved(output: &BuildOutput, host: &str) -> bool {
    let Some(route) = output
        .desired
        .routes
        .iter()
        .find(|r| r.host == HostMatch::Exact(host.into()))
    else {
        return false;
    };
    let features = route
        .features
        .as_ref()
        .map(|id| &output.desired.feature_sets[id]);
    route.backend == BackendName::unresolved()
        && features.and_then(|f| f.answer_status) == Some(500)
}

#[test]
fn cross_namespace_backends_need_a_reference_grant() {
    let mut snapshot = base();
    add_gateway(
        &mut snapshot,
        "shop",
        "gw",
        "tugboat",
        json!([http_listener(
            "http",
            None,
            json!({"namespaces": {"from": "All"}})
        )]),
    );
    add_shop_route(
        &mut snapshot,
        "to-blog",
        on_gw(
            json!(["x.example.com"]),
            json!([{"backendRefs": [{"name": "posts", "namespace": "blog", "port": 8080}]}]),
        ),
    );
    let output = build(&snapshot);
    assert_eq!(
        route_condition(&output, "shop", "to-blog", "Accepted"),
        (true, "Accepted".into())
    );
    assert_eq!(
        route_condition(&output, "shop", "to-blog", "ResolvedRefs"),
        (false, "RefNotPermitted".into())
    );
    assert!(
        unresolved(&output, "x.example.com"),
        "answers 500: {:?}",
        output.desired.routes
    );

    let grant = |to_name: Option<&str>| {
        let mut to = json!({"group": "", "kind": "Service"});
        if let Some(name) = to_name {
            to["name"] = json!(name);
        }
        object(
            json!({"metadata": {"name": "shop-routes", "namespace": "blog"},
                      "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute",
                                         "namespace": "shop"}],
                               "to": [to]}}),
        )
    };
    snapshot
        .reference_grants
        .insert(ObjectKey::new("blog", "shop-routes"), grant(Some("other")));
    let output = build(&snapshot);
    assert_eq!(
        route_condition(&output, "shop", "to-blog", "ResolvedRefs").1,
        "RefNotPermitted"
    );
    snapshot
        .reference_grants
        .insert(ObjectKey::new("blog", "shop-routes"), grant(None));
    let output = build(&snapshot);
    assert_eq!(
        route_condition(&output, "shop", "to-blog", "ResolvedRefs"),
        (true, "ResolvedRefs".into())
    );
    assert_eq!(
        routes(&output),
        [(
            "x.example.com".into(),
            "/ (Prefix)".into(),
            "blog_posts_8080".into()
        )]
    );
}

#[test]
fn a_missing_service_or_port_or_another_kind_answers_500() {
    let mut snapshot = with_http_gateway();
    let cases = [
        (
            "gone",
            json!({"name": "gone", "port": 80}),
            "BackendNotFound",
        ),
        (
            "no-port",
            json!({"name": "web", "port": 81}),
            "BackendNotFound",
        ),
        (
            "bucket",
            json!({"group": "storage.example.com", "kind": "Bucket", "name": "b"}),
            "InvalidKind",
        ),
    ];
    for (name, backend, _) in &cases {
        add_shop_route(
            &mut snapshot,
            name,
            on_gw(
                json!([format!("{name}.example.com")]),
                json!([{"backendRefs": [backend]}]),
            ),
        );
    }
    add_shop_route(
        &mut snapshot,
        "fine",
        on_gw(json!(["fine.example.com"]), json!([to_web(json!([]))])),
    );
    let output = build(&snapshot);
    for (name, _, reason) in &cases {
        assert_eq!(
            route_condition(&output, "shop", name, "ResolvedRefs"),
            (false, reason.to_string()),
            "{name}"
        );
        assert!(
            route_condition(&output, "shop", name, "Accepted").0,
            "{name}"
        );
        assert!(
            unresolved(&output, &format!("{name}.example.com")),
            "{name} answers 500"
        );
    }
    assert!(!unresolved(&output, "fine.example.com"));
    assert!(
        output
            .desired
            .routes
            .iter()
            .any(|r| r.backend.as_str() == "shop_web_80")
    );
}

#[test]
fn unsupported_matches_and_filters_refuse_the_route_and_harm_no_other() {
    let mut snapshot = with_http_gateway();
    let cases = [
        (
            "filter",
            json!({"filters": [{"type": "ExtensionRef", "extensionRef": {"group": "x", "kind": "y", "name": "z"}}],
                          "backendRefs": [{"name": "web", "port": 80}]}),
        ),
        (
            "header",
            json!({"matches": [{"queryParams": [{"type": "RegularExpression", "name": "version", "value": "2.*"}]}],
                          "backendRefs": [{"name": "web", "port": 80}]}),
        ),
        (
            "regex",
            json!({"matches": [{"path": {"type": "RegularExpression", "value": "/v[0-9+"}}],
                         "backendRefs": [{"name": "web", "port": 80}]}),
        ),
        (
            "weight",
            json!({"backendRefs": [{"name": "web", "port": 80, "weight": 2000000}]}),
        ),
        (
            "negative-weight",
            json!({"backendRefs": [{"name": "api", "port": 80, "weight": 5},
                                   {"name": "web", "port": 80, "weight": -1}]}),
        ),
        (
            "timeouts",
            json!({"timeouts": {"request": "1s", "backendRequest": "1500ms"},
                   "backendRefs": [{"name": "web", "port": 80}]}),
        ),
        (
            "bad-header",
            json!({"filters": [{"type": "RequestHeaderModifier",
                                "requestHeaderModifier": {"set": [{"name": "x-a", "value": "${HOME}"}]}}],
                   "backendRefs": [{"name": "web", "port": 80}]}),
        ),
        (
            "bad-redirect",
            json!({"filters": [{"type": "RequestRedirect",
                                "requestRedirect": {"scheme": "ftp"}}]}),
        ),
        (
            "mirror",
            json!({"filters": [{"type": "RequestMirror",
                                "requestMirror": {"backendRef": {"name": "api", "port": 80}}}],
                   "backendRefs": [{"name": "web", "port": 80}]}),
        ),
        (
            "retry",
            json!({"retry": {"codes": [503], "attempts": 2},
                   "backendRefs": [{"name": "web", "port": 80}]}),
        ),
        (
            "backend-filter",
            json!({"backendRefs": [{"name": "web", "port": 80,
                                    "filters": [{"type": "RequestHeaderModifier",
                                                 "requestHeaderModifier": {"set": [{"name": "x-a", "value": "1"}]}}]}]}),
        ),
    ];
    for (name, rule) in &cases {
        add_shop_route(
            &mut snapshot,
            name,
            on_gw(
                json!([format!("{name}.example.com")]),
                json!([
                    to_web(json!([{"path": {"type": "Exact", "value": "/fine"}}])),
                    rule
                ]),
            ),
        );
    }
    add_shop_route(
        &mut snapshot,
        "fine",
        on_gw(json!(["fine.example.com"]), json!([to_web(json!([]))])),
    );
    let output = build(&snapshot);
    for (name, _) in &cases {
        assert_eq!(
            route_condition(&output, "shop", name, "Accepted"),
            (false, "UnsupportedValue".into()),
            "{name}"
        );
    }
    assert_eq!(
        routes(&output),
        [(
            "fine.example.com".into(),
            "/ (Prefix)".into(),
            "shop_web_80".into()
        )],
        "a refused route routes nothing, not even its supported rules"
    );
    let problem_routes: Vec<&str> = output
        .problems
        .iter()
        .map(|p| p.object.name.as_ref())
        .collect();
    assert!(!problem_routes.contains(&"fine"));
    // One of the split's weights 0: one backend, served.
    add_shop_route(
        &mut snapshot,
        "split",
        on_gw(
            json!(["split.example.com"]),
            json!([{"backendRefs": [{"name": "web", "port": 80, "weight": 0},
                                                {"name": "api", "port": 80, "weight": 10}]}]),
        ),
    );
    let output = build(&snapshot);
    assert_eq!(
        route_condition(&output, "shop", "split", "Accepted"),
        (true, "Accepted".into())
    );
    assert!(
        output
            .desired
            .routes
            .iter()
            .any(|r| r.host == HostMatch::Exact("split.example.com".into())
                && r.backend.as_str() == "shop_api_80")
    );
}

#[test]
fn the_oldest_route_wins_a_host_and_path_and_an_ingress_keeps_its_own() {
    let mut snapshot = with_http_gateway();
    let spec = |service: &str| {
        json!({"parentRefs": [{"name": "gw"}], "hostnames": ["shop.example.com"],
               "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/a"}}],
                          "backendRefs": [{"name": service, "port": 80}]}]})
    };
    add_route(
        &mut snapshot,
        "shop",
        "b-newer",
        "2024-02-01T00:00:00Z",
        spec("api"),
    );
    add_route(
        &mut snapshot,
        "shop",
        "z-older",
        "2024-01-01T00:00:00Z",
        spec("web"),
    );
    let output = build(&snapshot);
    assert_eq!(
        routes(&output),
        [(
            "shop.example.com".into(),
            "/a (Prefix)".into(),
            "shop_web_80".into()
        )]
    );
    // Same age: by namespace and name.
    add_route(
        &mut snapshot,
        "shop",
        "a-same-age",
        "2024-01-01T00:00:00Z",
        spec("api"),
    );
    let output = build(&snapshot);
    assert_eq!(routes(&output)[0].2, "shop_api_80");
    let path = output.desired.routes[0].path.clone();
    assert_eq!(path, PathMatch::Prefix("/a".into()));
    let conflict = output
        .problems
        .iter()
        .find(|p| &*p.object.name == "z-older")
        .expect("the losing route is told");
    assert_eq!(conflict.reason, ProblemReason::RouteConflict);
    assert!(
        conflict.message.contains("HTTPRoute shop/a-same-age"),
        "{conflict}"
    );

    // An Ingress of the same host and path keeps it; the HTTPRoute is told.
    snapshot.ingresses.insert(
        ObjectKey::new("shop", "legacy"),
        Arc::new(
            in_namespace(
                with_class(
                    mk_ingress_with_rules(
                        "legacy",
                        vec![mk_rule(Some("shop.example.com"), &[prefix("/a", "web")])],
                    ),
                    None,
                ),
                "shop",
            )
            .into(),
        ),
    );
    let output = build(&snapshot);
    assert_eq!(routes(&output)[0].2, "shop_web_80");
    assert_eq!(&*output.desired.routes[0].ingress.name, "legacy");
    assert!(output.desired.http_route_slots.is_empty());
    assert!(
        output
            .problems
            .iter()
            .any(|p| p.object.kind == "HTTPRoute" && p.message.contains("Ingress shop/legacy")),
        "{:?}",
        output.problems
    );
}

#[test]
fn a_route_on_the_http_and_the_https_listener_is_one_route() {
    let mut snapshot = base();
    add_gateway(
        &mut snapshot,
        "shop",
        "gw",
        "tugboat",
        json!([
            {"name": "http", "port": 80, "protocol": "HTTP"},
            {"name": "https", "port": 443, "protocol": "HTTPS", "hostname": "shop.example.com",
             "tls": {"certificateRefs": [{"name": "absent"}]}},
        ]),
    );
    add_shop_route(
        &mut snapshot,
        "web",
        on_gw(json!(["shop.example.com"]), json!([to_web(json!([]))])),
    );
    let output = build(&snapshot);
    assert_eq!(
        routes(&output),
        [(
            "shop.example.com".into(),
            "/ (Prefix)".into(),
            "shop_web_80".into()
        )]
    );
    assert!(
        output.problems.iter().all(|p| p.object.kind != "HTTPRoute"),
        "{:?}",
        output.problems
    );
    let gateway = &output.gateway.gateways[&ObjectKey::new("shop", "gw")];
    assert_eq!(gateway.listeners[0].attached_routes, 1);
    assert_eq!(gateway.listeners[1].attached_routes, 1);
}

#[test]
fn https_listeners_need_a_certificate_they_may_read() {
    let mut snapshot = base();
    add_gateway(
        &mut snapshot,
        "shop",
        "gw",
        "tugboat",
        json!([
            {"name": "missing", "port": 443, "protocol": "HTTPS", "hostname": "a.example.com",
             "tls": {"certificateRefs": [{"name": "absent"}]}},
            {"name": "elsewhere", "port": 443, "protocol": "HTTPS", "hostname": "b.example.com",
             "tls": {"certificateRefs": [{"name": "tls", "namespace": "certs"}]}},
            {"name": "passthrough", "port": 443, "protocol": "HTTPS", "hostname": "c.example.com",
             "tls": {"mode": "Passthrough"}},
        ]),
    );
    let output = build(&snapshot);
    let gateway = ("shop", "gw");
    assert_eq!(
        listener_condition(&output, gateway, 0, "ResolvedRefs"),
        (false, "InvalidCertificateRef".into())
    );
    assert_eq!(
        listener_condition(&output, gateway, 1, "ResolvedRefs"),
        (false, "RefNotPermitted".into())
    );
    assert_eq!(
        listener_condition(&output, gateway, 2, "Accepted"),
        (false, "UnsupportedValue".into())
    );
    assert!(!listener_condition(&output, gateway, 0, "Programmed").0);
}

#[test]
fn gateway_changes_rebuild_the_incremental_model() {
    let mut model = tugboat_model::Model::default();
    let mut snapshot = simple();
    let first = model.update(&snapshot, &settings());
    assert!(matches!(
        first,
        tugboat_model::Update::Full(_, tugboat_model::Rebuilt::First)
    ));
    add_route(
        &mut snapshot,
        "shop",
        "more",
        "2024-03-01T00:00:00Z",
        json!({"parentRefs": [{"name": "gw"}], "hostnames": ["more.example.com"],
                     "rules": [to_web(json!([]))]}),
    );
    match model.update(&snapshot, &settings()) {
        tugboat_model::Update::Full(output, reason) => {
            assert_eq!(reason, tugboat_model::Rebuilt::GatewayApi);
            assert!(
                output
                    .desired
                    .routes
                    .iter()
                    .any(|r| r.host == HostMatch::Exact("more.example.com".into()))
            );
        }
        other => panic!("expected a full build, got {other:?}"),
    }
}

fn features_of<'a>(output: &'a BuildOutput, host: &str) -> &'a tugboat_model::RouteFeatures {
    let route = output
        .desired
        .routes
        .iter()
        .find(|r| r.host == HostMatch::Exact(host.into()))
        .unwrap_or_else(|| panic!("a route of {host}"));
    route_features(output, route)
}

fn route_features<'a>(
    output: &'a BuildOutput,
    route: &tugboat_model::Route,
) -> &'a tugboat_model::RouteFeatures {
    &output.desired.feature_sets[route.features.as_ref().expect("features")]
}

/// The rules that share the host and path of the route with these features, in order.
fn dispatch_of(
    features: &tugboat_model::RouteFeatures,
) -> tugboat_model::gateway::features::Dispatch {
    features
        .gateway
        .as_ref()
        .and_then(|g| g.dispatch.clone())
        .expect("a dispatch")
}

#[test]
fn filters_become_route_features() {
    use tugboat_model::gateway::features::{PathReplacement, Redirect};
    let mut snapshot = with_http_gateway();
    let route = |name: &str, rule: Value| {
        json!({"parentRefs": [{"name": "gw"}], "hostnames": [format!("{name}.example.com")],
               "rules": [rule]})
    };
    add_route(
        &mut snapshot,
        "shop",
        "headers",
        "2024-01-01T00:00:00Z",
        route(
            "headers",
            json!({
        "filters": [
            {"type": "RequestHeaderModifier", "requestHeaderModifier": {
                "set": [{"name": "X-Set", "value": "one"}], "add": [{"name": "X-Add", "value": "two"}],
                "remove": ["X-Gone"]}},
            {"type": "ResponseHeaderModifier", "responseHeaderModifier": {
                "add": [{"name": "X-Served-By", "value": "tugboat"}]}}],
        "backendRefs": [{"name": "web", "port": 80}]}),
        ),
    );
    add_route(
        &mut snapshot,
        "shop",
        "moved",
        "2024-01-01T00:00:00Z",
        route(
            "moved",
            json!({
        "matches": [{"path": {"type": "PathPrefix", "value": "/old/"}}],
        "filters": [{"type": "RequestRedirect", "requestRedirect": {
            "scheme": "https", "hostname": "new.example.com", "statusCode": 301,
            "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new/"}}}]}),
        ),
    );
    add_route(
        &mut snapshot,
        "shop",
        "rewrite",
        "2024-01-01T00:00:00Z",
        route(
            "rewrite",
            json!({
        "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
        "filters": [{"type": "URLRewrite", "urlRewrite": {
            "hostname": "internal.example.com",
            "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/app"}}}],
        "backendRefs": [{"name": "web", "port": 80}]}),
        ),
    );
    add_route(
        &mut snapshot,
        "shop",
        "split",
        "2024-01-01T00:00:00Z",
        route(
            "split",
            json!({
        "backendRefs": [{"name": "web", "port": 80, "weight": 90},
                        {"name": "api", "port": 80, "weight": 9},
                        {"name": "gone", "port": 80, "weight": 1}]}),
        ),
    );
    let output = build(&snapshot);
    for name in ["headers", "moved", "rewrite", "split"] {
        assert_eq!(
            route_condition(&output, "shop", name, "Accepted"),
            (true, "Accepted".into()),
            "{name}"
        );
    }
    let headers = features_of(&output, "headers.example.com")
        .gateway
        .as_ref()
        .expect("gateway");
    assert_eq!(
        headers.request_headers.set,
        [("x-set".to_string(), "one".to_string())]
    );
    assert_eq!(
        headers.request_headers.add,
        [("x-add".to_string(), "two".to_string())]
    );
    assert_eq!(headers.request_headers.remove, ["x-gone"]);
    assert_eq!(
        headers.response_headers.add,
        [("x-served-by".to_string(), "tugboat".to_string())]
    );

    let moved = features_of(&output, "moved.example.com");
    assert_eq!(moved.answer_status, None, "a redirect needs no backend");
    assert_eq!(
        moved.gateway.as_ref().and_then(|g| g.redirect.clone()),
        Some(Redirect {
            scheme: Some("https".into()),
            hostname: Some("new.example.com".into()),
            port: None,
            request_port: false,
            path: Some(PathReplacement::Prefix {
                matched: 4,
                replacement: "/new".into()
            }),
            code: 301,
        })
    );
    assert_eq!(
        route_condition(&output, "shop", "moved", "ResolvedRefs"),
        (true, "ResolvedRefs".into())
    );

    let rewrite = features_of(&output, "rewrite.example.com")
        .gateway
        .as_ref()
        .expect("gateway");
    assert_eq!(
        rewrite.rewrite_host.as_deref(),
        Some("internal.example.com")
    );
    assert_eq!(
        rewrite.rewrite_path,
        Some(PathReplacement::Prefix {
            matched: 0,
            replacement: "/app".into()
        })
    );

    let split = features_of(&output, "split.example.com")
        .gateway
        .as_ref()
        .expect("gateway");
    let shares: Vec<(Option<String>, u32)> = split
        .split
        .iter()
        .map(|s| (s.backend.as_ref().map(ToString::to_string), s.weight))
        .collect();
    assert_eq!(
        shares,
        [
            (Some("shop_web_80".into()), 90),
            (Some("shop_api_80".into()), 9),
            (None, 1)
        ]
    );
    assert_eq!(
        route_condition(&output, "shop", "split", "ResolvedRefs"),
        (false, "BackendNotFound".into()),
        "one share does not resolve"
    );
    assert!(
        output
            .desired
            .backends
            .contains_key(&BackendName::parse("shop_api_80").expect("name"))
    );
}

#[test]
fn rules_with_conditions_share_their_host_and_path_in_the_spec_order() {
    use tugboat_model::gateway::features::Otherwise;
    let mut snapshot = with_http_gateway();
    add_route(
        &mut snapshot,
        "shop",
        "older",
        "2024-01-01T00:00:00Z",
        json!({
        "parentRefs": [{"name": "gw"}], "hostnames": ["shop.example.com"],
        "rules": [
            {"backendRefs": [{"name": "web", "port": 80}]},
            {"matches": [{"queryParams": [{"name": "env", "value": "canary"}]}],
             "backendRefs": [{"name": "api", "port": 80}]},
        ]}),
    );
    add_route(
        &mut snapshot,
        "shop",
        "newer",
        "2024-02-01T00:00:00Z",
        json!({
        "parentRefs": [{"name": "gw"}], "hostnames": ["shop.example.com"],
        "rules": [
            {"matches": [{"headers": [{"name": "Version", "value": "2"}]}],
             "backendRefs": [{"name": "api", "port": 80}]},
            {"matches": [{"method": "POST"}], "backendRefs": [{"name": "web", "port": 80}]},
            {"backendRefs": [{"name": "api", "port": 80}]},
        ]}),
    );
    let output = build(&snapshot);
    assert_eq!(
        output.desired.routes.len(),
        1,
        "one map entry for the host and path"
    );
    let route = &output.desired.routes[0];
    assert_eq!(
        route.backend.as_str(),
        "shop_web_80",
        "the older unconditional rule"
    );
    let dispatch = dispatch_of(route_features(&output, route));
    let order: Vec<(bool, usize, usize, String)> = dispatch
        .candidates
        .iter()
        .map(|c| {
            let (_, method, headers, query) = c.conditions.precedence();
            (method, headers, query, c.backend.to_string())
        })
        .collect();
    assert_eq!(
        order,
        [
            (true, 0, 0, "shop_web_80".into()),
            (false, 1, 0, "shop_api_80".into()),
            (false, 0, 1, "shop_api_80".into()),
        ],
        "method, then headers, then query"
    );
    assert_eq!(
        dispatch.candidates[1].conditions.headers,
        [("version".to_string(), "2".to_string())]
    );
    assert!(matches!(dispatch.otherwise, Otherwise::Route(_)));
    let conflict = output
        .problems
        .iter()
        .find(|p| &*p.object.name == "newer")
        .expect("the newer unconditional rule is told");
    assert!(
        conflict.message.contains("HTTPRoute shop/older"),
        "{conflict}"
    );
}

#[test]
fn routes_of_one_bind_answer_only_there() {
    let mut snapshot = base();
    add_gateway(
        &mut snapshot,
        "shop",
        "gw",
        "tugboat",
        json!([
            {"name": "http", "port": 80, "protocol": "HTTP", "hostname": "shop.example.com"},
            {"name": "https", "port": 443, "protocol": "HTTPS", "hostname": "shop.example.com",
             "tls": {"certificateRefs": [{"name": "absent"}]}},
        ]),
    );
    let on = |section: &str, backend: &str| {
        json!({"parentRefs": [{"name": "gw", "sectionName": section}],
               "rules": [{"backendRefs": [{"name": backend, "port": 80}]}]})
    };
    add_route(
        &mut snapshot,
        "shop",
        "plain",
        "2024-01-01T00:00:00Z",
        on("http", "web"),
    );
    let output = build(&snapshot);
    let features = features_of(&output, "shop.example.com");
    assert_eq!(
        features.gateway.as_ref().and_then(|g| g.only_tls),
        Some(false)
    );

    add_route(
        &mut snapshot,
        "shop",
        "secure",
        "2024-02-01T00:00:00Z",
        on("https", "api"),
    );
    let output = build(&snapshot);
    assert!(
        output.problems.iter().all(|p| p.object.kind != "HTTPRoute"),
        "{:?}",
        output.problems
    );
    let dispatch = features_of(&output, "shop.example.com")
        .gateway
        .as_ref()
        .and_then(|g| g.dispatch.clone())
        .expect("the two binds' rules share the host and path");
    let by_bind: Vec<(Option<bool>, String)> = dispatch
        .candidates
        .iter()
        .map(|c| (c.conditions.tls, c.backend.to_string()))
        .collect();
    assert_eq!(
        by_bind,
        [
            (Some(false), "shop_web_80".into()),
            (Some(true), "shop_api_80".into())
        ]
    );
}

#[test]
fn rules_with_conditions_fall_back_to_a_shorter_prefix_of_the_host() {
    let mut snapshot = base();
    add_gateway(
        &mut snapshot,
        "shop",
        "gw",
        "tugboat",
        json!([
            {"name": "http", "port": 80, "protocol": "HTTP", "hostname": "shop.example.com"},
            {"name": "https", "port": 443, "protocol": "HTTPS", "hostname": "shop.example.com",
             "tls": {"certificateRefs": [{"name": "absent"}]}},
        ]),
    );
    add_shop_route(
        &mut snapshot,
        "conditional",
        on_gw(
            json!([]),
            json!([
                {"matches": [{"path": {"value": "/foo"},
                              "headers": [{"name": "x-v", "value": "2"}]}],
                 "backendRefs": [{"name": "api", "port": 80}]},
                {"matches": [{"path": {"value": "/foo/bar"}, "method": "POST"}],
                 "backendRefs": [{"name": "api", "port": 80}]},
            ]),
        ),
    );
    add_route(
        &mut snapshot,
        "shop",
        "secure-root",
        "2024-02-01T00:00:00Z",
        json!({"parentRefs": [{"name": "gw", "sectionName": "https"}],
               "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}),
    );
    let output = build(&snapshot);
    let dispatch_at = |path: &str| {
        let route = output
            .desired
            .routes
            .iter()
            .find(|r| r.path == PathMatch::Prefix(path.into()))
            .expect("the route");
        let dispatch = dispatch_of(route_features(&output, route));
        (route.backend.to_string(), dispatch)
    };
    let summary = |dispatch: &tugboat_model::gateway::features::Dispatch| {
        dispatch
            .candidates
            .iter()
            .map(|c| {
                (
                    c.conditions.method.clone(),
                    c.conditions.headers.len(),
                    c.conditions.tls,
                    c.backend.to_string(),
                )
            })
            .collect::<Vec<_>>()
    };
    // /foo/bar: its POST rule, then /foo's header rule, then `/` (HTTPS only), then 404.
    let (_, dispatch) = dispatch_at("/foo/bar");
    assert_eq!(
        summary(&dispatch),
        [
            (Some("POST".to_string()), 0, None, "shop_api_80".to_string()),
            (None, 1, None, "shop_api_80".to_string()),
            (None, 0, Some(true), "shop_web_80".to_string()),
        ]
    );
    assert_eq!(
        dispatch.otherwise,
        tugboat_model::gateway::features::Otherwise::NotFound
    );
    // `/` served on both binds: the fallback is the otherwise of /foo.
    snapshot
        .http_routes
        .remove(&ObjectKey::new("shop", "secure-root"));
    add_route(
        &mut snapshot,
        "shop",
        "plain-root",
        "2024-03-01T00:00:00Z",
        json!({"parentRefs": [{"name": "gw"}],
               "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}),
    );
    let output = build(&snapshot);
    let route = output
        .desired
        .routes
        .iter()
        .find(|r| r.path == PathMatch::Prefix("/foo".into()))
        .expect("the route");
    assert_eq!(
        route.backend.as_str(),
        "shop_web_80",
        "the fallback's backend"
    );
    let dispatch = dispatch_of(route_features(&output, route));
    assert_eq!(dispatch.candidates.len(), 1);
    assert!(
        matches!(
            dispatch.otherwise,
            tugboat_model::gateway::features::Otherwise::Route(_)
        ),
        "{dispatch:?}"
    );
    let in_use: std::collections::BTreeSet<_> = output
        .desired
        .routes
        .iter()
        .filter_map(|r| r.features.clone())
        .collect();
    assert!(
        output
            .desired
            .feature_sets
            .iter()
            .filter(|(_, f)| f.gateway.as_ref().is_some_and(|g| g.dispatch.is_some()))
            .all(|(id, _)| in_use.contains(id)),
        "no dispatch is left without its route"
    );
    assert!(
        !output
            .desired
            .backends
            .contains_key(&BackendName::unresolved()),
        "no route needs the backend of rules without one"
    );
}

#[test]
fn a_redirect_without_scheme_or_port_keeps_the_listeners_port() {
    let mut snapshot = base();
    add_gateway(
        &mut snapshot,
        "shop",
        "gw",
        "tugboat",
        json!([
            {"name": "standard", "port": 80, "protocol": "HTTP", "hostname": "std.example.com"},
            {"name": "bind", "port": 8080, "protocol": "HTTP", "hostname": "*.example.com"},
        ]),
    );
    let redirect = |name: &str, host: &str, redirect: Value| {
        (
            name.to_string(),
            json!({"parentRefs": [{"name": "gw"}], "hostnames": [host],
                   "rules": [{"filters": [{"type": "RequestRedirect",
                                           "requestRedirect": redirect}]}]}),
        )
    };
    for (name, spec) in [
        redirect(
            "kept",
            "kept.example.com",
            json!({"hostname": "new.example.com"}),
        ),
        redirect(
            "standard",
            "std.example.com",
            json!({"hostname": "new.example.com"}),
        ),
        redirect("scheme", "scheme.example.com", json!({"scheme": "http"})),
        redirect("port", "port.example.com", json!({"port": 9000})),
    ] {
        add_route(&mut snapshot, "shop", &name, "2024-01-01T00:00:00Z", spec);
    }
    let output = build(&snapshot);
    let port_of = |host: &str| {
        features_of(&output, host)
            .gateway
            .as_ref()
            .and_then(|g| g.redirect.as_ref())
            .expect("a redirect")
            .port
    };
    assert_eq!(
        port_of("kept.example.com"),
        Some(8080),
        "the listener's port"
    );
    assert_eq!(
        port_of("std.example.com"),
        None,
        "80 on HTTP: left out of the location"
    );
    assert_eq!(port_of("scheme.example.com"), None, "the scheme's own port");
    assert_eq!(port_of("port.example.com"), Some(9000), "the filter's port");
}

#[test]
fn requested_addresses_of_served_types_wait_for_the_published_ones_and_others_are_refused() {
    let mut snapshot = base();
    for (name, addresses) in [
        (
            "asking",
            json!([{"value": "192.0.2.1"}, {"type": "Hostname", "value": "lb.example.com"}]),
        ),
        (
            "odd",
            json!([{"type": "IPAddress", "value": "192.0.2.1"},
                   {"type": "example.com/pool", "value": "blue"}]),
        ),
    ] {
        snapshot.gateways.insert(
            ObjectKey::new("shop", name),
            object(
                json!({"metadata": {"name": name, "namespace": "shop", "generation": 2},
                          "spec": {"gatewayClassName": "tugboat",
                                   "listeners": [http_listener("http", None, json!(null))],
                                   "addresses": addresses}}),
            ),
        );
    }
    let output = build(&snapshot);
    let asking = &output.gateway.gateways[&ObjectKey::new("shop", "asking")];
    assert!(condition(&asking.conditions, "Accepted").status);
    assert_eq!(
        asking.requested_addresses,
        [
            RequestedAddress::Ip("192.0.2.1".into()),
            RequestedAddress::Hostname("lb.example.com".into()),
        ],
        "checked against the published addresses by the status writer"
    );
    let odd = &output.gateway.gateways[&ObjectKey::new("shop", "odd")];
    let accepted = condition(&odd.conditions, "Accepted");
    assert_eq!(
        (accepted.status, accepted.reason),
        (false, "UnsupportedAddress")
    );
    assert!(
        accepted.message.contains("example.com/pool"),
        "{}",
        accepted.message
    );
    assert!(
        output
            .problems
            .iter()
            .any(|p| &*p.object.name == "odd" && p.field == "spec.addresses"),
        "a problem names the field"
    );
    assert!(!output.problems.iter().any(|p| &*p.object.name == "asking"));
}

#[test]
fn a_fall_back_to_a_less_specific_host_tries_its_rules_on_the_path() {
    use tugboat_model::gateway::features::{Otherwise, PathCondition};
    let mut snapshot = with_http_gateway();
    add_shop_route(
        &mut snapshot,
        "member",
        on_gw(
            json!(["a.deep.example.com"]),
            json!([{"matches": [{"path": {"value": "/foo"},
                                 "headers": [{"name": "x-v", "value": "2"}]}],
                    "backendRefs": [{"name": "api", "port": 80}]}]),
        ),
    );
    add_shop_route(
        &mut snapshot,
        "wild",
        on_gw(
            json!(["*.deep.example.com"]),
            json!([
                to_web(json!([{"path": {"type": "PathPrefix", "value": "/"}}])),
                to_web(
                    json!([{"path": {"type": "PathPrefix", "value": "/foo/bar"}},
                              {"path": {"type": "Exact", "value": "/foo/x"}},
                              {"path": {"type": "PathPrefix", "value": "/other"}}])
                ),
                to_web(json!([{"path": {"type": "Exact", "value": "/foo/y's"}}])),
            ]),
        ),
    );
    let output = build(&snapshot);
    let route = output
        .desired
        .routes
        .iter()
        .find(|r| r.host == HostMatch::Exact("a.deep.example.com".into()))
        .expect("the member's route");
    let dispatch = dispatch_of(route_features(&output, route));
    let paths: Vec<Option<PathCondition>> = dispatch
        .candidates
        .iter()
        .map(|c| c.conditions.path.clone())
        .collect();
    assert_eq!(
        paths,
        [None, Some(PathCondition::Exact("/foo/x".into()))],
        "its own header rule, then the wildcard host's exact path; the walk stops before \
         the path with a quote, whose requests get 404 rather than another rule's answer"
    );
    assert_eq!(dispatch.otherwise, Otherwise::NotFound);

    // Without the quoted path: the longer prefix on the path, then the wildcard's `/`
    // for the rest (`/other` covers none of the requests).
    let mut snapshot = snapshot.clone();
    add_shop_route(
        &mut snapshot,
        "wild",
        on_gw(
            json!(["*.deep.example.com"]),
            json!([
                to_web(json!([{"path": {"type": "PathPrefix", "value": "/"}}])),
                to_web(
                    json!([{"path": {"type": "PathPrefix", "value": "/foo/bar"}},
                              {"path": {"type": "Exact", "value": "/foo/x"}},
                              {"path": {"type": "PathPrefix", "value": "/other"}}])
                ),
            ]),
        ),
    );
    let output = build(&snapshot);
    let route = output
        .desired
        .routes
        .iter()
        .find(|r| r.host == HostMatch::Exact("a.deep.example.com".into()))
        .expect("the member's route");
    let dispatch = dispatch_of(route_features(&output, route));
    let steps: Vec<(Option<PathCondition>, Option<bool>)> = dispatch
        .candidates
        .iter()
        .map(|c| (c.conditions.path.clone(), c.conditions.tls))
        .collect();
    // Every route is served on the HTTP bind only (the Gateway's one listener): each
    // is tried there, the wildcard's `/` last; on HTTPS, 404.
    assert_eq!(
        steps,
        [
            (None, Some(false)),
            (Some(PathCondition::Exact("/foo/x".into())), Some(false)),
            (Some(PathCondition::Prefix("/foo/bar".into())), Some(false)),
            (None, Some(false)),
        ]
    );
    assert_eq!(dispatch.otherwise, Otherwise::NotFound);
}

/// `auth-url` on a Service with `$host` in its host: kept on a route whose hostname is
/// exact, refused (403, a problem on the Service naming the route) on a wildcard one,
/// where the client would choose the authentication service.
#[test]
fn host_in_the_auth_url_host_of_a_service_needs_an_exact_hostname() {
    let mut snapshot = with_http_gateway();
    snapshot.services.insert(
        ObjectKey::new("shop", "web"),
        typed(&in_namespace(
            with_annotations(
                mk_service("web", "http", 80),
                &[(
                    "nginx.ingress.kubernetes.io/auth-url",
                    "https://$host/oauth2/auth",
                )],
            ),
            "shop",
        )),
    );
    let everything = json!([{"path": {"type": "PathPrefix", "value": "/"}}]);
    add_shop_route(
        &mut snapshot,
        "exact",
        on_gw(
            json!(["shop.example.com"]),
            json!([to_web(everything.clone())]),
        ),
    );
    add_shop_route(
        &mut snapshot,
        "wild",
        on_gw(json!(["*.example.org"]), json!([to_web(everything)])),
    );
    let output = build(&snapshot);
    let features_of = |host: &str| {
        let route = output
            .desired
            .routes
            .iter()
            .find(|r| r.host.to_string().starts_with(host))
            .unwrap_or_else(|| panic!("{host}: {:?}", routes(&output)));
        route
            .features
            .as_ref()
            .and_then(|id| output.desired.feature_sets.get(id))
            .cloned()
            .expect("features")
    };
    let exact = features_of("shop.example.com");
    assert!(!exact.deny_all);
    assert!(exact.external_auth.is_some());
    let wild = features_of("*.example.org");
    assert!(wild.deny_all);
    assert_eq!(wild.external_auth, None);
    let problems: Vec<_> = output
        .problems
        .iter()
        .filter(|p| p.field.ends_with("auth-url"))
        .collect();
    assert_eq!(problems.len(), 1, "{:?}", output.problems);
    assert_eq!(problems[0].object.kind, "Service");
    assert!(
        problems[0].message.contains("HTTPRoute shop/wild")
            && problems[0]
                .message
                .contains("the client would choose the authentication service"),
        "{}",
        problems[0].message
    );
}

/// `attachedRoutes` of each listener of the Gateway `gateway`.
fn attached_routes(output: &BuildOutput, gateway: (&str, &str)) -> Vec<i32> {
    output.gateway.gateways[&ObjectKey::new(gateway.0, gateway.1)]
        .listeners
        .iter()
        .map(|listener| listener.attached_routes)
        .collect()
}

#[test]
fn attached_routes_count_only_the_routes_each_listener_accepts() {
    let mut snapshot = base();
    add_gateway(
        &mut snapshot,
        "shop",
        "gw",
        "tugboat",
        json!([
            http_listener("exact", Some("a.example.com"), json!(null)),
            {"name": "wild", "port": 8080, "protocol": "HTTP", "hostname": "*.example.com"},
            http_listener("org", Some("x.org"), json!(null)),
        ]),
    );
    let to_web_everywhere = || json!([{"backendRefs": [{"name": "web", "port": 80}]}]);
    // Accepted by the two listeners whose hostnames it meets.
    add_shop_route(
        &mut snapshot,
        "a",
        on_gw(json!(["a.example.com"]), to_web_everywhere()),
    );
    // Accepted by every listener, though its backend is missing (ResolvedRefs=False).
    add_shop_route(
        &mut snapshot,
        "missing-backend",
        on_gw(
            json!([]),
            json!([{"backendRefs": [{"name": "nowhere", "port": 80}]}]),
        ),
    );
    // Not accepted: no hostname in common, an unsupported filter.
    add_shop_route(
        &mut snapshot,
        "no-host",
        on_gw(json!(["b.example.net"]), to_web_everywhere()),
    );
    add_shop_route(
        &mut snapshot,
        "mirror",
        on_gw(
            json!(["a.example.com"]),
            json!([{"filters": [{"type": "RequestMirror",
                                 "requestMirror": {"backendRef": {"name": "api", "port": 80}}}],
                    "backendRefs": [{"name": "web", "port": 80}]}]),
        ),
    );
    let output = build(&snapshot);
    assert_eq!(
        route_condition(&output, "shop", "missing-backend", "ResolvedRefs"),
        (false, "BackendNotFound".into())
    );
    assert_eq!(
        route_condition(&output, "shop", "no-host", "Accepted"),
        (false, "NoMatchingListenerHostname".into())
    );
    assert_eq!(
        route_condition(&output, "shop", "mirror", "Accepted"),
        (false, "UnsupportedValue".into())
    );
    assert_eq!(attached_routes(&output, ("shop", "gw")), [2, 2, 1]);
}

/// [`base`] with two Gateways whose HTTP listeners (ports 80 and 8080, any host) share
/// haproxy's HTTP bind, and the route `first` (older) on `gw80` and `second` on
/// `gw8080`, both for `shop.example.com` with these rules.
fn two_gateways_on_one_bind(first: Value, second: Value) -> Snapshot {
    let mut snapshot = base();
    add_gateway(
        &mut snapshot,
        "shop",
        "gw80",
        "tugboat",
        json!([{"name": "http", "port": 80, "protocol": "HTTP"}]),
    );
    add_gateway(
        &mut snapshot,
        "shop",
        "gw8080",
        "tugboat",
        json!([{"name": "http", "port": 8080, "protocol": "HTTP"}]),
    );
    let on = |gateway: &str, rules: Value| {
        json!({"parentRefs": [{"name": gateway}], "hostnames": ["shop.example.com"],
               "rules": rules})
    };
    add_route(
        &mut snapshot,
        "shop",
        "first",
        "2024-01-01T00:00:00Z",
        on("gw80", first),
    );
    add_route(
        &mut snapshot,
        "shop",
        "second",
        "2024-02-01T00:00:00Z",
        on("gw8080", second),
    );
    snapshot
}

#[test]
fn a_route_that_loses_every_host_and_path_is_not_accepted_there() {
    let prefix = |path: &str, service: &str| {
        json!({"matches": [{"path": {"type": "PathPrefix", "value": path}}],
               "backendRefs": [{"name": service, "port": 80}]})
    };
    // Every path of `second` is `first`'s: it serves nothing.
    let output = build(&two_gateways_on_one_bind(
        json!([prefix("/", "web")]),
        json!([prefix("/", "api")]),
    ));
    assert_eq!(
        routes(&output),
        [(
            "shop.example.com".into(),
            "/ (Prefix)".into(),
            "shop_web_80".into()
        )]
    );
    assert_eq!(
        route_condition(&output, "shop", "first", "Accepted"),
        (true, "Accepted".into())
    );
    let parents = route_parents(&output, "shop", "second");
    let accepted = condition(&parents[0].conditions, "Accepted");
    assert_eq!(
        (accepted.status, accepted.reason),
        (false, "UnsupportedValue")
    );
    assert!(
        accepted.message.contains("HTTPRoute shop/first"),
        "{}",
        accepted.message
    );
    assert_eq!(accepted.observed_generation, 5);
    assert_eq!(attached_routes(&output, ("shop", "gw80")), [1]);
    assert_eq!(attached_routes(&output, ("shop", "gw8080")), [0]);
    assert!(
        output
            .problems
            .iter()
            .any(|p| p.reason == ProblemReason::RouteConflict),
        "{:?}",
        output.problems
    );

    // A route that keeps one of its paths is accepted.
    let output = build(&two_gateways_on_one_bind(
        json!([prefix("/", "web")]),
        json!([prefix("/", "api"), prefix("/api", "api")]),
    ));
    assert_eq!(
        route_condition(&output, "shop", "second", "Accepted"),
        (true, "Accepted".into())
    );
    assert_eq!(attached_routes(&output, ("shop", "gw8080")), [1]);
}

#[test]
fn a_gateway_without_a_valid_listener_is_not_accepted() {
    let mut snapshot = base();
    add_gateway(
        &mut snapshot,
        "shop",
        "none-valid",
        "tugboat",
        json!([{"name": "invalid", "port": 1111, "protocol": "INVALID"}]),
    );
    add_gateway(
        &mut snapshot,
        "shop",
        "some-valid",
        "tugboat",
        json!([
            {"name": "http", "port": 80, "protocol": "HTTP"},
            {"name": "invalid", "port": 1111, "protocol": "INVALID"},
            {"name": "odd-port", "port": 8081, "protocol": "HTTP"},
        ]),
    );
    let output = build(&snapshot);
    let gateway = |name: &str| &output.gateway.gateways[&ObjectKey::new("shop", name)];
    let accepted = |name: &str| {
        let found = condition(&gateway(name).conditions, "Accepted");
        (found.status, found.reason)
    };
    assert_eq!(accepted("none-valid"), (false, "ListenersNotValid"));
    assert!(!condition(&gateway("none-valid").conditions, "Programmed").status);
    assert_eq!(
        listener_condition(&output, ("shop", "none-valid"), 0, "Accepted"),
        (false, "UnsupportedProtocol".into())
    );
    assert!(
        gateway("none-valid").listeners[0]
            .supported_kinds
            .is_empty()
    );

    // Some valid: accepted, the reason names the others, which take no kinds.
    assert_eq!(accepted("some-valid"), (true, "ListenersNotValid"));
    let message = &condition(&gateway("some-valid").conditions, "Accepted").message;
    assert!(
        message.contains("invalid") && message.contains("odd-port"),
        "{message}"
    );
    let kinds: Vec<usize> = gateway("some-valid")
        .listeners
        .iter()
        .map(|l| l.supported_kinds.len())
        .collect();
    assert_eq!(kinds, [1, 0, 0]);

    // All valid: accepted for the reason Accepted.
    let output = build(&simple());
    let found = condition(
        &output.gateway.gateways[&ObjectKey::new("shop", "gw")].conditions,
        "Accepted",
    );
    assert_eq!((found.status, found.reason), (true, "Accepted"));
}

#[test]
fn supported_features_list_the_port_redirect() {
    let output = build(&simple());
    let features = &output.gateway.classes["tugboat"].supported_features;
    assert!(features.contains(&"HTTPRoutePortRedirect"), "{features:?}");
    assert!(features.is_sorted(), "{features:?}");
}

/// A `kubernetes.io/tls` Secret `shop/<name>` of a new certificate for `host` (valid
/// from 1975: see [`build_now`]); its certificate PEM.
fn add_tls_secret(snapshot: &mut Snapshot, name: &str, host: &str) -> String {
    let params = rcgen::CertificateParams::new(vec![host.to_string()]).expect("params");
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = params.self_signed(&key).expect("certificate");
    let secret = in_namespace(
        mk_tls_secret(name, &cert.pem(), &key.serialize_pem()),
        "shop",
    );
    snapshot
        .secrets
        .insert(ObjectKey::new("shop", name), Arc::new(secret));
    cert.pem()
}

/// [`build`] at a time the certificates of [`add_tls_secret`] are valid.
fn build_now(snapshot: &Snapshot) -> BuildOutput {
    let settings = Settings {
        now: 1_800_000_000,
        ..settings()
    };
    tugboat_model::build(snapshot, &settings)
}

#[test]
fn the_certificate_of_an_https_listener_without_a_hostname_is_the_default() {
    let mut snapshot = base();
    let named = add_tls_secret(&mut snapshot, "named-tls", "a.example.com");
    let any = add_tls_secret(&mut snapshot, "any-tls", "any.example.com");
    let https = |name: &str, hostname: Option<&str>, secret: &str| {
        let mut listener = json!({"name": name, "port": 443, "protocol": "HTTPS",
                                  "tls": {"certificateRefs": [{"name": secret}]}});
        if let Some(hostname) = hostname {
            listener["hostname"] = json!(hostname);
        }
        listener
    };
    // A listener with a hostname: its certificate is for that host only.
    add_gateway(
        &mut snapshot,
        "shop",
        "gw",
        "tugboat",
        json!([https("named", Some("a.example.com"), "named-tls")]),
    );
    let output = build_now(&snapshot);
    assert!(output.desired.default_certificate.is_none());
    assert!(output.problems.is_empty(), "{:?}", output.problems);

    // Without a hostname: the listener takes every host, its certificate is the default.
    add_gateway(
        &mut snapshot,
        "shop",
        "gw",
        "tugboat",
        json!([
            https("named", Some("a.example.com"), "named-tls"),
            https("any", None, "any-tls"),
        ]),
    );
    let output = build_now(&snapshot);
    let default = output
        .desired
        .default_certificate
        .as_ref()
        .expect("a default certificate");
    assert!(default.as_str().contains(any.trim()), "the listener's own");
    assert!(!default.as_str().contains(named.trim()));

    // The operator's --default-ssl-certificate is not overridden by a Gateway.
    let operators = add_tls_secret(&mut snapshot, "operator-tls", "operator.example.com");
    let settings = Settings {
        now: 1_800_000_000,
        default_certificate: Some(ObjectKey::new("shop", "operator-tls")),
        ..settings()
    };
    let output = tugboat_model::build(&snapshot, &settings);
    let default = output
        .desired
        .default_certificate
        .as_ref()
        .expect("a default certificate");
    assert!(
        default.as_str().contains(operators.trim()),
        "the operator's"
    );
}
