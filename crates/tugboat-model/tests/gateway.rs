//! Table tests of the Gateway API translation: GatewayClass, Gateway, HTTPRoute,
//! TLSRoute and ReferenceGrant in, routes (and passthrough routes) and status conditions
//! out.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use serde::de::DeserializeOwned;
use serde_json::json;
use tugboat_model::gateway::{Condition, GatewaySettings, RequestedAddress, RouteParentState};
use tugboat_model::problem::ProblemReason;
use tugboat_model::{
    BackendName, BuildOutput, HostMatch, ObjectKey, PathMatch, Settings, Snapshot,
};
use tugboat_test_objects::gateway::{
    Gateway, HttpRoute, Listener, RouteMatch, RouteRule, mk_backend_ref, mk_backend_ref_to_kind,
    mk_extension_filter, mk_gateway, mk_gateway_class, mk_header_modifier, mk_http_route,
    mk_http_route_on, mk_https_listener, mk_https_listener_for, mk_label_selector, mk_listener,
    mk_match, mk_mirror_filter, mk_namespace, mk_parent_ref, mk_path_match, mk_redirect,
    mk_redirect_filter, mk_reference_grant, mk_request_header_filter, mk_response_header_filter,
    mk_rewrite, mk_rewrite_filter, mk_route_rule, mk_rule_to, mk_tcp_route,
    mk_tls_passthrough_listener, mk_tls_route, mk_tls_route_on, replace_prefix_match,
};
use tugboat_test_objects::{
    in_namespace, mk_ingress_with_rules, mk_rule, mk_service, mk_tls_secret, prefix, to_json,
    with_annotations, with_class, with_creation_timestamp, with_generation,
};

const CONTROLLER: &str = "tugboat.dev/gateway";

/// A typed object as the model holds it, read from its JSON as the API source reads it.
fn typed<K: DeserializeOwned>(built: &impl serde::Serialize) -> Arc<K> {
    Arc::new(serde_json::from_value(to_json(built)).expect("valid object"))
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
            typed(&with_generation(mk_gateway_class(name, controller), 1)),
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

/// The Gateway `namespace/name` of class `class` with `listeners`, of generation 2.
fn add_gateway(
    snapshot: &mut Snapshot,
    namespace: &str,
    name: &str,
    class: &str,
    listeners: Vec<Listener>,
) {
    insert_gateway(snapshot, namespace, mk_gateway(name, class, listeners));
}

/// The Gateway, in `namespace`, of generation 2.
fn insert_gateway(snapshot: &mut Snapshot, namespace: &str, gateway: Gateway) {
    let name = gateway.metadata.name.clone().expect("a named Gateway");
    snapshot.gateways.insert(
        ObjectKey::new(namespace, &name),
        typed(&in_namespace(with_generation(gateway, 2), namespace)),
    );
}

/// An HTTP listener on port 80, for `hostname` or (`None`) any host.
fn http_listener(name: &str, hostname: Option<&str>) -> Listener {
    mk_listener(name, "HTTP", 80, hostname)
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
        vec![http_listener("http", None)],
    );
    snapshot
}

/// The route `shop/name` created on 2024-01-01, attached to the Gateway `gw` of its
/// namespace, for `hostnames`, with `rules`.
fn add_shop_route(snapshot: &mut Snapshot, name: &str, hostnames: &[&str], rules: Vec<RouteRule>) {
    add_route(
        snapshot,
        "shop",
        "2024-01-01T00:00:00Z",
        mk_http_route(name, "gw", hostnames, rules),
    );
}

/// The route, in `namespace`, created at `created`, of generation 5.
fn add_route(snapshot: &mut Snapshot, namespace: &str, created: &str, route: HttpRoute) {
    let name = route.metadata.name.clone().expect("a named route");
    snapshot.http_routes.insert(
        ObjectKey::new(namespace, &name),
        typed(&in_namespace(
            with_generation(with_creation_timestamp(route, created), 5),
            namespace,
        )),
    );
}

/// A rule of these path matches (`(type, value)`) to `shop/web` port 80.
fn to_web(paths: &[(&str, &str)]) -> RouteRule {
    mk_rule_to(paths, "web", 80)
}

fn build(snapshot: &Snapshot) -> BuildOutput {
    tugboat_model::build(snapshot, &settings())
}

/// A route as `(host, path, backend)`.
type RouteText = (String, String, String);

/// `(host, path, backend)` of every route of the HTTP and HTTPS binds.
fn routes(output: &BuildOutput) -> Vec<RouteText> {
    route_texts(&output.desired.routes)
}

fn route_texts(routes: &[tugboat_model::Route]) -> Vec<RouteText> {
    routes
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
        &["shop.example.com"],
        vec![to_web(&[("PathPrefix", "/store/"), ("Exact", "/cart")])],
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
        vec![http_listener("http", None)],
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
        vec![
            http_listener("wild", Some("*.example.com")),
            http_listener("exact", Some("exact.example.org")),
        ],
    );
    let route =
        |name: &str, hostnames: &[&str]| mk_http_route(name, "gw", hostnames, vec![to_web(&[])]);
    add_route(
        &mut snapshot,
        "shop",
        "2024-01-01T00:00:00Z",
        route("some", &["a.example.com", "b.other.net", "*.example.org"]),
    );
    add_route(
        &mut snapshot,
        "shop",
        "2024-01-02T00:00:00Z",
        route("none", &["nothing.net"]),
    );
    add_route(
        &mut snapshot,
        "shop",
        "2024-01-03T00:00:00Z",
        route("all", &[]),
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
        vec![
            http_listener("a", Some("a.example.com")),
            http_listener("b", Some("b.example.com")),
        ],
    );
    for (name, parent) in [
        ("only-b", mk_parent_ref("gw").section("b")),
        ("missing", mk_parent_ref("gw").section("c")),
        ("port", mk_parent_ref("gw").port(81)),
    ] {
        add_route(
            &mut snapshot,
            "shop",
            "2024-01-01T00:00:00Z",
            mk_http_route_on(name, parent, &[], vec![to_web(&[])]),
        );
    }
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
        typed(&mk_namespace("blog", &[("team", "writers")])),
    );
    let readers = LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "team".into(),
            operator: "In".into(),
            values: Some(vec!["readers".into()]),
        }]),
        ..LabelSelector::default()
    };
    add_gateway(
        &mut snapshot,
        "shop",
        "gw",
        "tugboat",
        vec![
            http_listener("same", Some("same.example.com")),
            http_listener("all", Some("all.example.com")).routes_from_all_namespaces(),
            http_listener("writers", Some("writers.example.com"))
                .routes_from_selected_namespaces(mk_label_selector(&[("team", "writers")])),
            http_listener("readers", Some("readers.example.com"))
                .routes_from_selected_namespaces(readers),
        ],
    );
    for (name, parent) in [
        ("posts", mk_parent_ref("gw").namespace("shop")),
        (
            "denied",
            mk_parent_ref("gw").namespace("shop").section("same"),
        ),
    ] {
        add_route(
            &mut snapshot,
            "blog",
            "2024-01-01T00:00:00Z",
            mk_http_route_on(
                name,
                parent,
                &[],
                vec![mk_route_rule(vec![mk_backend_ref("posts", 8080)])],
            ),
        );
    }
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
        vec![http_listener("tcp-only", None).route_kinds(&["TCPRoute"])],
    );
    add_shop_route(&mut snapshot, "web", &[], vec![to_web(&[])]);
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
        vec![
            mk_listener("http", "HTTP", 80, None),
            mk_listener("bind-port", "HTTP", 8080, Some("b.example.com")),
            mk_listener("odd-port", "HTTP", 8081, None),
            mk_listener("udp", "UDP", 5432, None),
            mk_listener("again", "HTTP", 8080, None),
        ],
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
        vec![http_listener("http", None).routes_from_all_namespaces()],
    );
    add_shop_route(
        &mut snapshot,
        "to-blog",
        &["x.example.com"],
        vec![mk_route_rule(vec![
            mk_backend_ref("posts", 8080).namespace("blog"),
        ])],
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

    let grant = || mk_reference_grant("blog", "shop-routes", ("HTTPRoute", "shop"), "Service");
    snapshot.reference_grants.insert(
        ObjectKey::new("blog", "shop-routes"),
        typed(&grant().only_to("other")),
    );
    let output = build(&snapshot);
    assert_eq!(
        route_condition(&output, "shop", "to-blog", "ResolvedRefs").1,
        "RefNotPermitted"
    );
    snapshot
        .reference_grants
        .insert(ObjectKey::new("blog", "shop-routes"), typed(&grant()));
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
        ("gone", mk_backend_ref("gone", 80), "BackendNotFound"),
        ("no-port", mk_backend_ref("web", 81), "BackendNotFound"),
        (
            "bucket",
            mk_backend_ref_to_kind("storage.example.com", "Bucket", "b"),
            "InvalidKind",
        ),
    ];
    for (name, backend, _) in &cases {
        add_shop_route(
            &mut snapshot,
            name,
            &[&format!("{name}.example.com")],
            vec![mk_route_rule(vec![backend.clone()])],
        );
    }
    add_shop_route(
        &mut snapshot,
        "fine",
        &["fine.example.com"],
        vec![to_web(&[])],
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
    let set_header = |value: &str| mk_request_header_filter(mk_header_modifier().set("x-a", value));
    let cases = [
        (
            "filter",
            to_web(&[]).filter(mk_extension_filter("x", "y", "z")),
        ),
        (
            "header",
            to_web(&[]).matches(vec![mk_match().query_param(
                Some("RegularExpression"),
                "version",
                "2.*",
            )]),
        ),
        ("regex", to_web(&[("RegularExpression", "/v[0-9+")])),
        (
            "weight",
            mk_route_rule(vec![mk_backend_ref("web", 80).weight(2000000)]),
        ),
        (
            "negative-weight",
            mk_route_rule(vec![
                mk_backend_ref("api", 80).weight(5),
                mk_backend_ref("web", 80).weight(-1),
            ]),
        ),
        ("timeouts", to_web(&[]).timeouts(Some("1s"), Some("1500ms"))),
        ("bad-header", to_web(&[]).filter(set_header("${HOME}"))),
        (
            "bad-redirect",
            mk_route_rule(vec![]).filter(mk_redirect_filter(mk_redirect().scheme("ftp"))),
        ),
        ("mirror", to_web(&[]).filter(mk_mirror_filter("api", 80))),
        (
            "retry",
            to_web(&[]).retry(json!({"codes": [503], "attempts": 2})),
        ),
        (
            "backend-filter",
            mk_route_rule(vec![
                mk_backend_ref("web", 80).filters(vec![set_header("1")]),
            ]),
        ),
    ];
    for (name, rule) in &cases {
        add_shop_route(
            &mut snapshot,
            name,
            &[&format!("{name}.example.com")],
            vec![to_web(&[("Exact", "/fine")]), rule.clone()],
        );
    }
    add_shop_route(
        &mut snapshot,
        "fine",
        &["fine.example.com"],
        vec![to_web(&[])],
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
        &["split.example.com"],
        vec![mk_route_rule(vec![
            mk_backend_ref("web", 80).weight(0),
            mk_backend_ref("api", 80).weight(10),
        ])],
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
    let route = |name: &str, service: &str| {
        mk_http_route(
            name,
            "gw",
            &["shop.example.com"],
            vec![mk_rule_to(&[("PathPrefix", "/a")], service, 80)],
        )
    };
    add_route(
        &mut snapshot,
        "shop",
        "2024-02-01T00:00:00Z",
        route("b-newer", "api"),
    );
    add_route(
        &mut snapshot,
        "shop",
        "2024-01-01T00:00:00Z",
        route("z-older", "web"),
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
        "2024-01-01T00:00:00Z",
        route("a-same-age", "api"),
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
        vec![
            http_listener("http", None),
            mk_https_listener_for("https", Some("shop.example.com"), (None, "absent")),
        ],
    );
    add_shop_route(
        &mut snapshot,
        "web",
        &["shop.example.com"],
        vec![to_web(&[])],
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
        vec![
            mk_https_listener_for("missing", Some("a.example.com"), (None, "absent")),
            mk_https_listener_for("elsewhere", Some("b.example.com"), (Some("certs"), "tls")),
            mk_listener("passthrough", "HTTPS", 443, Some("c.example.com")).tls_mode("Passthrough"),
        ],
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
        "2024-03-01T00:00:00Z",
        mk_http_route("more", "gw", &["more.example.com"], vec![to_web(&[])]),
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
    let route = |name: &str, rule: RouteRule| {
        mk_http_route(name, "gw", &[&format!("{name}.example.com")], vec![rule])
    };
    let headers_rule = to_web(&[])
        .filter(mk_request_header_filter(
            mk_header_modifier()
                .set("X-Set", "one")
                .add("X-Add", "two")
                .remove("X-Gone"),
        ))
        .filter(mk_response_header_filter(
            mk_header_modifier().add("X-Served-By", "tugboat"),
        ));
    let moved_rule = mk_route_rule(vec![])
        .matches(vec![mk_path_match("PathPrefix", "/old/")])
        .filter(mk_redirect_filter(
            mk_redirect()
                .scheme("https")
                .hostname("new.example.com")
                .status_code(301)
                .path(replace_prefix_match("/new/")),
        ));
    let rewrite_rule = to_web(&[("PathPrefix", "/")]).filter(mk_rewrite_filter(
        mk_rewrite()
            .hostname("internal.example.com")
            .path(replace_prefix_match("/app")),
    ));
    let split_rule = mk_route_rule(vec![
        mk_backend_ref("web", 80).weight(90),
        mk_backend_ref("api", 80).weight(9),
        mk_backend_ref("gone", 80).weight(1),
    ]);
    for (name, rule) in [
        ("headers", headers_rule),
        ("moved", moved_rule),
        ("rewrite", rewrite_rule),
        ("split", split_rule),
    ] {
        add_route(
            &mut snapshot,
            "shop",
            "2024-01-01T00:00:00Z",
            route(name, rule),
        );
    }
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
    let to = |service: &str, matches: Vec<RouteMatch>| {
        mk_route_rule(vec![mk_backend_ref(service, 80)]).matches(matches)
    };
    add_route(
        &mut snapshot,
        "shop",
        "2024-01-01T00:00:00Z",
        mk_http_route(
            "older",
            "gw",
            &["shop.example.com"],
            vec![
                to("web", vec![]),
                to("api", vec![mk_match().query_param(None, "env", "canary")]),
            ],
        ),
    );
    add_route(
        &mut snapshot,
        "shop",
        "2024-02-01T00:00:00Z",
        mk_http_route(
            "newer",
            "gw",
            &["shop.example.com"],
            vec![
                to("api", vec![mk_match().header("Version", "2")]),
                to("web", vec![mk_match().method("POST")]),
                to("api", vec![]),
            ],
        ),
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

/// An HTTP listener `http` (port 80) and an HTTPS one `https` (port 443, certificate of
/// the absent Secret `absent`), both for `shop.example.com`.
fn shop_http_and_https_listeners() -> Vec<Listener> {
    vec![
        http_listener("http", Some("shop.example.com")),
        mk_https_listener_for("https", Some("shop.example.com"), (None, "absent")),
    ]
}

#[test]
fn routes_of_one_bind_answer_only_there() {
    let mut snapshot = base();
    add_gateway(
        &mut snapshot,
        "shop",
        "gw",
        "tugboat",
        shop_http_and_https_listeners(),
    );
    let on = |name: &str, section: &str, backend: &str| {
        mk_http_route_on(
            name,
            mk_parent_ref("gw").section(section),
            &[],
            vec![mk_route_rule(vec![mk_backend_ref(backend, 80)])],
        )
    };
    add_route(
        &mut snapshot,
        "shop",
        "2024-01-01T00:00:00Z",
        on("plain", "http", "web"),
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
        "2024-02-01T00:00:00Z",
        on("secure", "https", "api"),
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
        shop_http_and_https_listeners(),
    );
    let to_api =
        |matched: RouteMatch| mk_route_rule(vec![mk_backend_ref("api", 80)]).matches(vec![matched]);
    add_shop_route(
        &mut snapshot,
        "conditional",
        &[],
        vec![
            to_api(mk_match().path("/foo").header("x-v", "2")),
            to_api(mk_match().path("/foo/bar").method("POST")),
        ],
    );
    add_route(
        &mut snapshot,
        "shop",
        "2024-02-01T00:00:00Z",
        mk_http_route_on(
            "secure-root",
            mk_parent_ref("gw").section("https"),
            &[],
            vec![mk_route_rule(vec![mk_backend_ref("web", 80)])],
        ),
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
        "2024-03-01T00:00:00Z",
        mk_http_route(
            "plain-root",
            "gw",
            &[],
            vec![mk_route_rule(vec![mk_backend_ref("web", 80)])],
        ),
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
        vec![
            http_listener("standard", Some("std.example.com")),
            mk_listener("bind", "HTTP", 8080, Some("*.example.com")),
        ],
    );
    let to_new_host = || mk_redirect().hostname("new.example.com");
    for (name, host, redirect) in [
        ("kept", "kept.example.com", to_new_host()),
        ("standard", "std.example.com", to_new_host()),
        ("scheme", "scheme.example.com", mk_redirect().scheme("http")),
        ("port", "port.example.com", mk_redirect().port(9000)),
    ] {
        add_shop_route(
            &mut snapshot,
            name,
            &[host],
            vec![mk_route_rule(vec![]).filter(mk_redirect_filter(redirect))],
        );
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
    let gateway = |name: &str| mk_gateway(name, "tugboat", vec![http_listener("http", None)]);
    insert_gateway(
        &mut snapshot,
        "shop",
        gateway("asking")
            .address(None, "192.0.2.1")
            .address(Some("Hostname"), "lb.example.com"),
    );
    insert_gateway(
        &mut snapshot,
        "shop",
        gateway("odd")
            .address(Some("IPAddress"), "192.0.2.1")
            .address(Some("example.com/pool"), "blue"),
    );
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
        &["a.deep.example.com"],
        vec![
            mk_route_rule(vec![mk_backend_ref("api", 80)])
                .matches(vec![mk_match().path("/foo").header("x-v", "2")]),
        ],
    );
    let wild_rules = vec![
        to_web(&[("PathPrefix", "/")]),
        to_web(&[
            ("PathPrefix", "/foo/bar"),
            ("Exact", "/foo/x"),
            ("PathPrefix", "/other"),
        ]),
    ];
    add_shop_route(
        &mut snapshot,
        "wild",
        &["*.deep.example.com"],
        [wild_rules.clone(), vec![to_web(&[("Exact", "/foo/y's")])]].concat(),
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
    add_shop_route(&mut snapshot, "wild", &["*.deep.example.com"], wild_rules);
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
    let everything = [("PathPrefix", "/")];
    add_shop_route(
        &mut snapshot,
        "exact",
        &["shop.example.com"],
        vec![to_web(&everything)],
    );
    add_shop_route(
        &mut snapshot,
        "wild",
        &["*.example.org"],
        vec![to_web(&everything)],
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
        vec![
            http_listener("exact", Some("a.example.com")),
            mk_listener("wild", "HTTP", 8080, Some("*.example.com")),
            http_listener("org", Some("x.org")),
        ],
    );
    // Accepted by the two listeners whose hostnames it meets.
    add_shop_route(&mut snapshot, "a", &["a.example.com"], vec![to_web(&[])]);
    // Accepted by every listener, though its backend is missing (ResolvedRefs=False).
    add_shop_route(
        &mut snapshot,
        "missing-backend",
        &[],
        vec![mk_route_rule(vec![mk_backend_ref("nowhere", 80)])],
    );
    // Not accepted: no hostname in common, an unsupported filter.
    add_shop_route(
        &mut snapshot,
        "no-host",
        &["b.example.net"],
        vec![to_web(&[])],
    );
    add_shop_route(
        &mut snapshot,
        "mirror",
        &["a.example.com"],
        vec![to_web(&[]).filter(mk_mirror_filter("api", 80))],
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
fn two_gateways_on_one_bind(first: Vec<RouteRule>, second: Vec<RouteRule>) -> Snapshot {
    let mut snapshot = base();
    for (name, port) in [("gw80", 80), ("gw8080", 8080)] {
        add_gateway(
            &mut snapshot,
            "shop",
            name,
            "tugboat",
            vec![mk_listener("http", "HTTP", port, None)],
        );
    }
    add_route(
        &mut snapshot,
        "shop",
        "2024-01-01T00:00:00Z",
        mk_http_route("first", "gw80", &["shop.example.com"], first),
    );
    add_route(
        &mut snapshot,
        "shop",
        "2024-02-01T00:00:00Z",
        mk_http_route("second", "gw8080", &["shop.example.com"], second),
    );
    snapshot
}

#[test]
fn a_route_that_loses_every_host_and_path_is_not_accepted_there() {
    let prefix = |path: &str, service: &str| mk_rule_to(&[("PathPrefix", path)], service, 80);
    // Every path of `second` is `first`'s: it serves nothing.
    let output = build(&two_gateways_on_one_bind(
        vec![prefix("/", "web")],
        vec![prefix("/", "api")],
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
        vec![prefix("/", "web")],
        vec![prefix("/", "api"), prefix("/api", "api")],
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
        vec![mk_listener("invalid", "INVALID", 1111, None)],
    );
    add_gateway(
        &mut snapshot,
        "shop",
        "some-valid",
        "tugboat",
        vec![
            http_listener("http", None),
            mk_listener("invalid", "INVALID", 1111, None),
            mk_listener("odd-port", "HTTP", 8081, None),
        ],
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
        mk_https_listener_for(name, hostname, (None, secret))
    };
    // A listener with a hostname: its certificate is for that host only.
    add_gateway(
        &mut snapshot,
        "shop",
        "gw",
        "tugboat",
        vec![https("named", Some("a.example.com"), "named-tls")],
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
        vec![
            https("named", Some("a.example.com"), "named-tls"),
            https("any", None, "any-tls"),
        ],
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

/// The TLSRoute, in `namespace`, created at `created`, of generation 4.
fn add_tls_route(
    snapshot: &mut Snapshot,
    namespace: &str,
    created: &str,
    route: tugboat_test_objects::gateway::TlsRoute,
) {
    let name = route.metadata.name.clone().expect("a named route");
    snapshot.tls_routes.insert(
        ObjectKey::new(namespace, &name),
        typed(&in_namespace(
            with_generation(with_creation_timestamp(route, created), 4),
            namespace,
        )),
    );
}

/// `(status, reason)` of the TLSRoute's condition of `type_` at its first parent.
fn tls_route_condition(
    output: &BuildOutput,
    namespace: &str,
    name: &str,
    type_: &str,
) -> (bool, String) {
    let state = &output.gateway.tls_routes[&ObjectKey::new(namespace, name)];
    let found = condition(&state.parents[0].conditions, type_);
    (found.status, found.reason.to_string())
}

/// `(host, backend, owner)` of every passthrough route.
fn passthrough(output: &BuildOutput) -> Vec<(String, String, String)> {
    output
        .desired
        .passthrough
        .iter()
        .map(|r| {
            (
                r.host.to_string(),
                r.backend.to_string(),
                r.owner.to_string(),
            )
        })
        .collect()
}

/// [`base`] with the Gateway `shop/gw`: an HTTPS listener `https` for
/// `shop.example.com` (Secret `shop/shop-tls`) and a TLS Passthrough listener `tls` on
/// port 443 for any name.
fn with_passthrough_gateway() -> Snapshot {
    let mut snapshot = base();
    add_tls_secret(&mut snapshot, "shop-tls", "shop.example.com");
    add_gateway(
        &mut snapshot,
        "shop",
        "gw",
        "tugboat",
        vec![
            mk_https_listener_for("https", Some("shop.example.com"), (None, "shop-tls")),
            mk_tls_passthrough_listener("tls", 443, None),
        ],
    );
    snapshot
}

#[test]
fn a_tls_route_on_a_passthrough_listener_passes_its_names_through() {
    let mut snapshot = with_passthrough_gateway();
    add_shop_route(
        &mut snapshot,
        "web",
        &["shop.example.com"],
        vec![to_web(&[])],
    );
    add_tls_route(
        &mut snapshot,
        "shop",
        "2024-01-01T00:00:00Z",
        mk_tls_route(
            "argo",
            "gw",
            &["argo.example.com", "*.apps.example.com"],
            vec![mk_backend_ref("api", 80)],
        ),
    );
    let output = build_now(&snapshot);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    assert_eq!(
        passthrough(&output),
        [
            (
                "argo.example.com".into(),
                "passthrough:shop_api_80".into(),
                "TLSRoute shop/argo".into()
            ),
            (
                "*.apps.example.com (any depth)".into(),
                "passthrough:shop_api_80".into(),
                "TLSRoute shop/argo".into()
            ),
        ]
    );
    assert!(
        output
            .desired
            .backends
            .keys()
            .any(|name| name.as_str() == "passthrough:shop_api_80"),
        "the passthrough backend is built"
    );
    // The HTTPS listener's host is still terminated and routed.
    assert_eq!(routes(&output)[0].0, "shop.example.com");
    assert_eq!(
        tls_route_condition(&output, "shop", "argo", "Accepted"),
        (true, "Accepted".into())
    );
    assert_eq!(
        tls_route_condition(&output, "shop", "argo", "ResolvedRefs"),
        (true, "ResolvedRefs".into())
    );
    let gateway = &output.gateway.gateways[&ObjectKey::new("shop", "gw")];
    assert_eq!(
        gateway.listeners[1].supported_kinds,
        [(
            "gateway.networking.k8s.io".to_string(),
            "TLSRoute".to_string()
        )]
    );
    assert_eq!(
        (
            gateway.listeners[0].attached_routes,
            gateway.listeners[1].attached_routes
        ),
        (1, 1),
        "each listener counts its own kind"
    );
    let features = &output.gateway.classes["tugboat"].supported_features;
    assert!(features.contains(&"TLSRoute"), "{features:?}");
}

#[test]
fn tls_listeners_are_served_in_passthrough_mode_on_the_https_port_only() {
    let tls = |name: &str, port: i32| mk_listener(name, "TLS", port, None);
    /// A listener, its Accepted and ResolvedRefs conditions, and its supported kinds.
    type Case = (
        &'static str,
        Listener,
        (bool, &'static str),
        (bool, &'static str),
        &'static [&'static str],
    );
    let cases: Vec<Case> = vec![
        (
            "on-443",
            tls("l", 443).tls_mode("Passthrough"),
            (true, "Accepted"),
            (true, "ResolvedRefs"),
            &["TLSRoute"],
        ),
        (
            "on-https-bind",
            tls("l", 8443).tls_mode("Passthrough"),
            (true, "Accepted"),
            (true, "ResolvedRefs"),
            &["TLSRoute"],
        ),
        (
            "terminate",
            tls("l", 443).tls_mode("Terminate"),
            (false, "UnsupportedValue"),
            (true, "ResolvedRefs"),
            &[],
        ),
        (
            "mode-unset",
            tls("l", 443),
            (false, "UnsupportedValue"),
            (true, "ResolvedRefs"),
            &[],
        ),
        (
            "other-port",
            tls("l", 9443).tls_mode("Passthrough"),
            (false, "PortUnavailable"),
            (true, "ResolvedRefs"),
            &[],
        ),
        (
            "tcp-and-tls-kinds",
            tls("l", 443)
                .tls_mode("Passthrough")
                .route_kinds(&["TCPRoute", "TLSRoute"]),
            (true, "Accepted"),
            (false, "InvalidRouteKinds"),
            &["TLSRoute"],
        ),
        (
            "http-kind-only",
            tls("l", 443)
                .tls_mode("Passthrough")
                .route_kinds(&["HTTPRoute"]),
            (true, "Accepted"),
            (false, "InvalidRouteKinds"),
            &[],
        ),
        (
            "https-with-tls-kind",
            mk_https_listener_for("l", None, (None, "shop-tls")).route_kinds(&["TLSRoute"]),
            (true, "Accepted"),
            (false, "InvalidRouteKinds"),
            &[],
        ),
    ];
    let mut snapshot = base();
    add_tls_secret(&mut snapshot, "shop-tls", "shop.example.com");
    for (name, listener, ..) in &cases {
        add_gateway(
            &mut snapshot,
            "shop",
            name,
            "tugboat",
            vec![listener.clone()],
        );
    }
    let output = build_now(&snapshot);
    for (name, _, accepted, resolved, kinds) in cases {
        let found = |type_| listener_condition(&output, ("shop", name), 0, type_);
        assert_eq!(found("Accepted"), (accepted.0, accepted.1.into()), "{name}");
        assert_eq!(
            found("ResolvedRefs"),
            (resolved.0, resolved.1.into()),
            "{name}"
        );
        let state = &output.gateway.gateways[&ObjectKey::new("shop", name)];
        let supported: Vec<&str> = state.listeners[0]
            .supported_kinds
            .iter()
            .map(|(_, kind)| kind.as_str())
            .collect();
        assert_eq!(supported, kinds, "{name}");
    }
}

#[test]
fn tls_listeners_of_both_modes_on_one_port_and_a_name_both_terminated_and_passed_conflict() {
    let mut snapshot = base();
    add_tls_secret(&mut snapshot, "shop-tls", "shop.example.com");
    add_gateway(
        &mut snapshot,
        "shop",
        "mixed",
        "tugboat",
        vec![
            mk_listener("terminate", "TLS", 443, Some("t.example.com")).tls_mode("Terminate"),
            mk_tls_passthrough_listener("passthrough", 443, Some("p.example.com")),
            mk_https_listener("https", "h.example.com", (None, "shop-tls")),
        ],
    );
    add_gateway(
        &mut snapshot,
        "shop",
        "same-name",
        "tugboat",
        vec![
            mk_https_listener("https", "shop.example.com", (None, "shop-tls")),
            mk_tls_passthrough_listener("tls", 443, Some("shop.example.com")),
        ],
    );
    let output = build_now(&snapshot);
    for listener in [0, 1] {
        assert_eq!(
            listener_condition(&output, ("shop", "mixed"), listener, "Accepted"),
            (false, "ProtocolConflict".into()),
            "listener {listener}"
        );
        assert_eq!(
            listener_condition(&output, ("shop", "mixed"), listener, "Conflicted"),
            (true, "ProtocolConflict".into()),
            "listener {listener}"
        );
    }
    assert_eq!(
        listener_condition(&output, ("shop", "mixed"), 2, "Accepted"),
        (true, "Accepted".into()),
        "an HTTPS listener on the same port is not a TLS listener of another mode"
    );
    assert_eq!(
        listener_condition(&output, ("shop", "same-name"), 1, "Conflicted"),
        (true, "HostnameConflict".into()),
        "a name is either terminated or passed through"
    );
}

#[test]
fn tls_routes_attach_only_where_the_spec_lets_them() {
    let mut snapshot = base();
    add_tls_secret(&mut snapshot, "shop-tls", "shop.example.com");
    for (name, listener) in [
        ("http-only", http_listener("http", None)),
        (
            "https-only",
            mk_https_listener_for("https", None, (None, "shop-tls")),
        ),
        (
            "tls",
            mk_tls_passthrough_listener("tls", 443, Some("*.example.com")),
        ),
    ] {
        add_gateway(&mut snapshot, "shop", name, "tugboat", vec![listener]);
    }
    let to_api = || vec![mk_backend_ref("api", 80)];
    let on = |gateway: &str| mk_parent_ref(gateway);
    let cases: Vec<(&str, &str, tugboat_test_objects::gateway::TlsRoute, &str)> = vec![
        (
            "ok",
            "shop",
            mk_tls_route("ok", "tls", &["ok.example.com"], to_api()),
            "Accepted",
        ),
        (
            "on-http",
            "shop",
            mk_tls_route("on-http", "http-only", &["a.example.com"], to_api()),
            "NotAllowedByListeners",
        ),
        (
            "on-https",
            "shop",
            mk_tls_route("on-https", "https-only", &["a.example.com"], to_api()),
            "NotAllowedByListeners",
        ),
        (
            "no-such-section",
            "shop",
            mk_tls_route_on(
                "no-such-section",
                on("tls").section("nope"),
                &["a.example.com"],
                to_api(),
            ),
            "NoMatchingParent",
        ),
        (
            "other-port",
            "shop",
            mk_tls_route_on(
                "other-port",
                on("tls").port(8443),
                &["a.example.com"],
                to_api(),
            ),
            "NoMatchingParent",
        ),
        (
            "hostname-mismatch",
            "shop",
            mk_tls_route("hostname-mismatch", "tls", &["a.example.org"], to_api()),
            "NoMatchingListenerHostname",
        ),
        (
            "other-namespace",
            "blog",
            mk_tls_route_on(
                "other-namespace",
                on("tls").namespace("shop"),
                &["b.example.com"],
                vec![mk_backend_ref("posts", 8080)],
            ),
            "NotAllowedByListeners",
        ),
        (
            "no-hostnames",
            "shop",
            mk_tls_route("no-hostnames", "tls", &[], to_api()),
            "UnsupportedValue",
        ),
        (
            "two-rules",
            "shop",
            mk_tls_route("two-rules", "tls", &["c.example.com"], to_api()).rule(to_api()),
            "UnsupportedValue",
        ),
        (
            "two-weighted",
            "shop",
            mk_tls_route(
                "two-weighted",
                "tls",
                &["d.example.com"],
                vec![
                    mk_backend_ref("api", 80).weight(1),
                    mk_backend_ref("web", 80).weight(1),
                ],
            ),
            "UnsupportedValue",
        ),
        (
            "one-weighted",
            "shop",
            mk_tls_route(
                "one-weighted",
                "tls",
                &["e.example.com"],
                vec![
                    mk_backend_ref("api", 80).weight(0),
                    mk_backend_ref("web", 80).weight(3),
                ],
            ),
            "Accepted",
        ),
        (
            "weight-out-of-range",
            "shop",
            mk_tls_route(
                "weight-out-of-range",
                "tls",
                &["f.example.com"],
                vec![mk_backend_ref("api", 80).weight(-1)],
            ),
            "UnsupportedValue",
        ),
    ];
    for (_, namespace, route, _) in &cases {
        add_tls_route(
            &mut snapshot,
            namespace,
            "2024-01-01T00:00:00Z",
            route.clone(),
        );
    }
    add_shop_route(&mut snapshot, "http-on-tls", &[], vec![to_web(&[])]);
    let http_on_tls = mk_http_route("http-on-tls", "tls", &[], vec![to_web(&[])]);
    add_route(&mut snapshot, "shop", "2024-01-01T00:00:00Z", http_on_tls);
    let output = build_now(&snapshot);
    for (name, namespace, _, reason) in &cases {
        let accepted = tls_route_condition(&output, namespace, name, "Accepted");
        assert_eq!(
            accepted,
            (*reason == "Accepted", reason.to_string()),
            "{name}"
        );
    }
    assert_eq!(
        route_condition(&output, "shop", "http-on-tls", "Accepted"),
        (false, "NotAllowedByListeners".into()),
        "an HTTPRoute does not attach to a TLS listener"
    );
    let attached = |gateway: &str| {
        output.gateway.gateways[&ObjectKey::new("shop", gateway)].listeners[0].attached_routes
    };
    assert_eq!(
        (
            attached("http-only"),
            attached("https-only"),
            attached("tls")
        ),
        (0, 0, 2),
        "only the accepted TLSRoutes count, on the TLS listener"
    );
    assert_eq!(
        passthrough(&output)
            .iter()
            .map(|(host, backend, _)| (host.as_str(), backend.as_str()))
            .collect::<Vec<_>>(),
        [
            ("e.example.com", "passthrough:shop_web_80"),
            ("ok.example.com", "passthrough:shop_api_80")
        ]
    );
}

#[test]
fn tls_route_backend_refs_resolve_as_http_route_ones() {
    let cases: Vec<(
        &str,
        tugboat_test_objects::gateway::BackendRef,
        (bool, &str),
    )> = vec![
        ("service", mk_backend_ref("api", 80), (true, "ResolvedRefs")),
        (
            "missing",
            mk_backend_ref("nothing", 443),
            (false, "BackendNotFound"),
        ),
        (
            "missing-port",
            mk_backend_ref("api", 443),
            (false, "BackendNotFound"),
        ),
        (
            "other-kind",
            mk_backend_ref_to_kind("example.com", "Bucket", "b"),
            (false, "InvalidKind"),
        ),
        (
            "not-granted",
            mk_backend_ref("posts", 8080).namespace("blog"),
            (false, "RefNotPermitted"),
        ),
    ];
    let mut snapshot = with_passthrough_gateway();
    for (name, backend, _) in &cases {
        let host = format!("{name}.example.com");
        let route = mk_tls_route(name, "gw", &[host.as_str()], vec![backend.clone()]);
        add_tls_route(&mut snapshot, "shop", "2024-01-01T00:00:00Z", route);
    }
    // A grant to HTTPRoutes is not one to TLSRoutes.
    snapshot.reference_grants.insert(
        ObjectKey::new("blog", "http-only"),
        typed(&mk_reference_grant(
            "blog",
            "http-only",
            ("HTTPRoute", "shop"),
            "Service",
        )),
    );
    let output = build_now(&snapshot);
    for (name, _, resolved) in &cases {
        assert_eq!(
            tls_route_condition(&output, "shop", name, "ResolvedRefs"),
            (resolved.0, resolved.1.into()),
            "{name}"
        );
        assert_eq!(
            tls_route_condition(&output, "shop", name, "Accepted"),
            (true, "Accepted".into()),
            "{name}: an unresolved backend does not refuse the route"
        );
    }
    let routes = passthrough(&output);
    let backends: Vec<(&str, &str)> = routes
        .iter()
        .map(|(host, backend, _)| (host.as_str(), backend.as_str()))
        .collect();
    assert_eq!(
        backends,
        [
            ("missing-port.example.com", "passthrough:tugboat_unresolved"),
            ("missing.example.com", "passthrough:tugboat_unresolved"),
            ("not-granted.example.com", "passthrough:tugboat_unresolved"),
            ("other-kind.example.com", "passthrough:tugboat_unresolved"),
            ("service.example.com", "passthrough:shop_api_80"),
        ],
        "a name whose backend does not resolve goes to a backend without servers"
    );
    assert!(
        !output
            .desired
            .backends
            .contains_key(&tugboat_model::BackendName::unresolved()),
        "no HTTP route needs the HTTP one"
    );
    let problem = output
        .problems
        .iter()
        .find(|p| p.object.to_string() == "TLSRoute shop/missing")
        .expect("a problem on the route");
    assert_eq!(problem.reason, ProblemReason::ServiceNotFound);
    assert!(
        problem.message.contains("connections are closed"),
        "{}",
        problem.message
    );

    // Granted to TLSRoutes: resolved.
    snapshot.reference_grants.insert(
        ObjectKey::new("blog", "tls"),
        typed(&mk_reference_grant(
            "blog",
            "tls",
            ("TLSRoute", "shop"),
            "Service",
        )),
    );
    let output = build_now(&snapshot);
    assert_eq!(
        tls_route_condition(&output, "shop", "not-granted", "ResolvedRefs"),
        (true, "ResolvedRefs".into())
    );
    assert!(
        passthrough(&output).contains(&(
            "not-granted.example.com".into(),
            "passthrough:blog_posts_8080".into(),
            "TLSRoute shop/not-granted".into()
        )),
        "{:?}",
        passthrough(&output)
    );
}

#[test]
fn the_oldest_claimer_of_an_sni_name_has_it_whatever_its_kind() {
    /// An Ingress `shop/name` with ssl-passthrough for `host`, created at `created`.
    fn add_passthrough_ingress(snapshot: &mut Snapshot, name: &str, host: &str, created: &str) {
        let ingress = with_creation_timestamp(
            with_annotations(
                with_class(
                    mk_ingress_with_rules(name, vec![mk_rule(Some(host), &[prefix("/", "web")])]),
                    None,
                ),
                &[("nginx.ingress.kubernetes.io/ssl-passthrough", "true")],
            ),
            created,
        );
        snapshot.ingresses.insert(
            ObjectKey::new("shop", name),
            Arc::new(in_namespace(ingress, "shop").into()),
        );
    }
    let cases = [
        // (name, Ingress created, winner)
        ("ingress-older", "2023-01-01T00:00:00Z", "Ingress shop/site"),
        ("route-older", "2025-01-01T00:00:00Z", "TLSRoute shop/first"),
    ];
    for (name, ingress_created, winner) in cases {
        let mut snapshot = with_passthrough_gateway();
        add_passthrough_ingress(&mut snapshot, "site", "a.example.com", ingress_created);
        for (route, created) in [
            ("first", "2024-01-01T00:00:00Z"),
            ("second", "2024-02-01T00:00:00Z"),
        ] {
            let tls_route = mk_tls_route(
                route,
                "gw",
                &["a.example.com"],
                vec![mk_backend_ref("api", 80)],
            );
            add_tls_route(&mut snapshot, "shop", created, tls_route);
        }
        let output = build_now(&snapshot);
        let owners: Vec<String> = passthrough(&output)
            .into_iter()
            .map(|(_, _, owner)| owner)
            .collect();
        assert_eq!(owners, [winner], "{name}");
        let conflicts: Vec<String> = output
            .problems
            .iter()
            .filter(|p| p.reason == ProblemReason::RouteConflict)
            .map(|p| p.object.to_string())
            .collect();
        let losers: Vec<&str> = [
            "Ingress shop/site",
            "TLSRoute shop/first",
            "TLSRoute shop/second",
        ]
        .into_iter()
        .filter(|owner| *owner != winner)
        .collect();
        assert_eq!(conflicts, losers, "{name}: {:?}", output.problems);
        assert_eq!(
            tls_route_condition(&output, "shop", "second", "Accepted"),
            (false, "UnsupportedValue".into()),
            "{name}: a route whose every name went elsewhere serves nothing"
        );
        let first = tls_route_condition(&output, "shop", "first", "Accepted");
        assert_eq!(first.0, winner == "TLSRoute shop/first", "{name}");
        let attached =
            output.gateway.gateways[&ObjectKey::new("shop", "gw")].listeners[1].attached_routes;
        assert_eq!(attached, i32::from(first.0), "{name}");
    }
}

#[test]
fn an_http_route_and_a_tls_route_of_one_name_keep_their_own_status() {
    let mut snapshot = with_passthrough_gateway();
    add_shop_route(
        &mut snapshot,
        "app",
        &["shop.example.com"],
        vec![to_web(&[])],
    );
    add_tls_route(
        &mut snapshot,
        "shop",
        "2024-01-01T00:00:00Z",
        mk_tls_route(
            "app",
            "gw",
            &["nowhere.example.org"],
            vec![mk_backend_ref("api", 80)],
        ),
    );
    let output = build_now(&snapshot);
    assert_eq!(
        route_condition(&output, "shop", "app", "Accepted"),
        (true, "Accepted".into())
    );
    // The TLS listener takes any name; the HTTPS one is for shop.example.com only, and
    // takes no TLSRoute: accepted by the TLS listener.
    assert_eq!(
        tls_route_condition(&output, "shop", "app", "Accepted"),
        (true, "Accepted".into())
    );
    assert_eq!(
        output.gateway.tls_routes[&ObjectKey::new("shop", "app")].parents[0].conditions[0]
            .observed_generation,
        4,
        "the TLSRoute's own generation"
    );
    assert_eq!(
        output.gateway.routes[&ObjectKey::new("shop", "app")].parents[0].conditions[0]
            .observed_generation,
        5
    );
}

#[test]
fn a_tls_route_to_a_service_whose_keys_restrict_access_passes_nothing_through() {
    let mut snapshot = with_passthrough_gateway();
    snapshot.services.insert(
        ObjectKey::new("shop", "api"),
        typed(&in_namespace(
            with_annotations(
                mk_service("api", "http", 80),
                &[("haproxy.org/allow-list", "10.0.0.0/8")],
            ),
            "shop",
        )),
    );
    add_tls_route(
        &mut snapshot,
        "shop",
        "2024-01-01T00:00:00Z",
        mk_tls_route(
            "argo",
            "gw",
            &["argo.example.com"],
            vec![mk_backend_ref("api", 80)],
        ),
    );
    let output = build_now(&snapshot);
    assert!(
        passthrough(&output).is_empty(),
        "{:?}",
        passthrough(&output)
    );
    let problem = output
        .problems
        .iter()
        .find(|p| p.object.to_string() == "TLSRoute shop/argo")
        .expect("a problem on the route");
    assert!(
        problem.message.contains("'haproxy.org/allow-list'"),
        "{problem}"
    );
    assert_eq!(
        tls_route_condition(&output, "shop", "argo", "Accepted"),
        (false, "UnsupportedValue".into()),
        "a route that passes nothing through is not accepted there"
    );
    let gateway = &output.gateway.gateways[&ObjectKey::new("shop", "gw")];
    assert_eq!(gateway.listeners[1].attached_routes, 0);
}

#[test]
fn a_tls_route_whose_name_has_a_restricting_http_route_is_not_accepted_there() {
    let mut snapshot = with_passthrough_gateway();
    add_tls_route(
        &mut snapshot,
        "shop",
        "2024-01-01T00:00:00Z",
        mk_tls_route(
            "argo",
            "gw",
            &["argo.example.com"],
            vec![mk_backend_ref("api", 80)],
        ),
    );
    // Without the Ingress the name passes through.
    let output = build_now(&snapshot);
    assert_eq!(passthrough(&output).len(), 1, "{:?}", output.problems);
    assert_eq!(
        tls_route_condition(&output, "shop", "argo", "Accepted"),
        (true, "Accepted".into())
    );

    // An Ingress route of the name with an allow list: passing the TLS through would
    // bypass it, so the name is terminated and the route says it serves nothing.
    let ingress = with_annotations(
        with_class(
            mk_ingress_with_rules(
                "admin",
                vec![mk_rule(
                    Some("argo.example.com"),
                    &[prefix("/admin", "web")],
                )],
            ),
            None,
        ),
        &[(
            "nginx.ingress.kubernetes.io/whitelist-source-range",
            "10.0.0.0/8",
        )],
    );
    snapshot.ingresses.insert(
        ObjectKey::new("shop", "admin"),
        Arc::new(in_namespace(ingress, "shop").into()),
    );
    let output = build_now(&snapshot);
    assert!(
        passthrough(&output).is_empty(),
        "{:?}",
        passthrough(&output)
    );
    assert!(
        output
            .problems
            .iter()
            .any(|p| p.object.to_string() == "TLSRoute shop/argo"
                && p.message.contains("restricts access")),
        "{:?}",
        output.problems
    );
    assert_eq!(
        tls_route_condition(&output, "shop", "argo", "Accepted"),
        (false, "UnsupportedValue".into())
    );
    let gateway = &output.gateway.gateways[&ObjectKey::new("shop", "gw")];
    assert_eq!(gateway.listeners[1].attached_routes, 0);
}

/// [`settings`] with `ports` listed in `--gateway-listener-ports`.
fn with_listener_ports(ports: &[u16]) -> Settings {
    let mut settings = settings();
    if let Some(gateway) = settings.gateway.take() {
        settings.gateway = Some(gateway.with_listener_ports(ports.iter().copied().collect()));
    }
    settings
}

/// `(port, tls, [(host, path, backend)])` of every bind of its own.
fn listener_binds(output: &BuildOutput) -> Vec<(u16, bool, Vec<RouteText>)> {
    output
        .desired
        .listener_binds
        .iter()
        .map(|bind| (bind.port, bind.tls, route_texts(&bind.routes)))
        .collect()
}

#[test]
fn listeners_on_listed_ports_get_binds_of_their_own_with_routes_of_their_own() {
    // The upstream conformance case httproute-listener-port-matching.
    let mut snapshot = base();
    add_gateway(
        &mut snapshot,
        "shop",
        "gw",
        "tugboat",
        vec![
            mk_listener("listener-1", "HTTP", 80, Some("foo.com")),
            mk_listener("listener-2", "HTTP", 8080, Some("foo.com")),
            mk_listener("listener-3", "HTTP", 8080, Some("bar.com")),
            mk_listener("listener-4", "HTTP", 8090, Some("foo.com")),
            mk_listener("listener-5", "HTTP", 8090, Some("bar.com")),
        ],
    );
    let on_port = |name: &str, port: i32, section: Option<&str>, service: &str| {
        let mut route = mk_http_route(name, "gw", &[], vec![mk_rule_to(&[], service, 80)]);
        route.spec.parent_refs[0].port = Some(port);
        route.spec.parent_refs[0].section_name = section.map(String::from);
        route
    };
    add_route(
        &mut snapshot,
        "shop",
        "2024-01-01T00:00:00Z",
        on_port("v1", 80, None, "web"),
    );
    add_route(
        &mut snapshot,
        "shop",
        "2024-01-02T00:00:00Z",
        on_port("v2", 8080, None, "api"),
    );
    add_route(
        &mut snapshot,
        "shop",
        "2024-01-03T00:00:00Z",
        on_port("v3", 8090, Some("listener-4"), "web"),
    );
    // 8080 is the HTTP bind's port: listed, it is a bind of its own all the same. 9000
    // is listed but unused: no bind.
    let output = tugboat_model::build(&snapshot, &with_listener_ports(&[8080, 8090, 9000]));
    let web = "shop_web_80".to_string();
    let api = "shop_api_80".to_string();
    assert_eq!(
        routes(&output),
        [("foo.com".into(), "/ (Prefix)".into(), web.clone())]
    );
    assert_eq!(
        listener_binds(&output),
        [
            (
                8080,
                false,
                vec![
                    ("bar.com".into(), "/ (Prefix)".into(), api.clone()),
                    ("foo.com".into(), "/ (Prefix)".into(), api),
                ]
            ),
            (
                8090,
                false,
                vec![("foo.com".into(), "/ (Prefix)".into(), web)]
            ),
        ]
    );
    for route in ["v1", "v2", "v3"] {
        assert_eq!(
            route_condition(&output, "shop", route, "Accepted"),
            (true, "Accepted".into()),
            "{route}"
        );
    }
    for listener in 0..5 {
        assert_eq!(
            listener_condition(&output, ("shop", "gw"), listener, "Programmed"),
            (true, "Programmed".into())
        );
    }
    // Unlisted, 8090 is not served, and its route says so.
    let output = tugboat_model::build(&snapshot, &with_listener_ports(&[8080]));
    assert_eq!(
        listener_condition(&output, ("shop", "gw"), 3, "Accepted"),
        (false, "PortUnavailable".into())
    );
    let parents = route_parents(&output, "shop", "v3");
    let accepted = condition(&parents[0].conditions, "Accepted");
    assert!(!accepted.status);
    assert!(accepted.message.contains("not valid"), "{accepted:?}");
    let problem = output
        .problems
        .iter()
        .find(|p| &*p.object.name == "gw" && p.field == "spec.listeners[3].port")
        .expect("a problem of the listener");
    assert!(
        problem.message.contains("--gateway-listener-ports"),
        "{problem:?}"
    );
}

#[test]
fn gateways_share_a_listed_port_of_one_protocol_and_a_later_other_protocol_conflicts() {
    let mut snapshot = base();
    add_tls_secret(&mut snapshot, "cert", "b.example.com");
    let on_port = |listener: Listener, port: i32| Listener { port, ..listener };
    insert_gateway(
        &mut snapshot,
        "shop",
        with_creation_timestamp(
            mk_gateway(
                "first",
                "tugboat",
                vec![mk_listener("http", "HTTP", 9000, Some("a.example.com"))],
            ),
            "2024-01-01T00:00:00Z",
        ),
    );
    insert_gateway(
        &mut snapshot,
        "shop",
        with_creation_timestamp(
            mk_gateway(
                "second",
                "tugboat",
                vec![
                    mk_listener("http", "HTTP", 9000, Some("b.example.com")),
                    on_port(
                        mk_https_listener("https", "c.example.com", (None, "cert")),
                        9000,
                    ),
                    on_port(
                        mk_https_listener("own-https", "b.example.com", (None, "cert")),
                        9443,
                    ),
                    mk_tls_passthrough_listener("tls", 9001, None),
                    mk_tls_passthrough_listener("tls-on-http", 9000, None),
                ],
            ),
            "2024-02-01T00:00:00Z",
        ),
    );
    add_route(
        &mut snapshot,
        "shop",
        "2024-01-01T00:00:00Z",
        mk_http_route("a", "first", &[], vec![to_web(&[("PathPrefix", "/")])]),
    );
    add_route(
        &mut snapshot,
        "shop",
        "2024-01-02T00:00:00Z",
        mk_http_route("b", "second", &[], vec![to_web(&[("PathPrefix", "/b")])]),
    );
    let settings = Settings {
        now: 1_800_000_000,
        ..with_listener_ports(&[9000, 9001, 9443])
    };
    let output = tugboat_model::build(&snapshot, &settings);
    let second = ("shop", "second");
    assert_eq!(
        listener_condition(&output, second, 0, "Conflicted"),
        (false, "NoConflicts".into())
    );
    assert_eq!(
        listener_condition(&output, second, 1, "Conflicted"),
        (true, "ProtocolConflict".into())
    );
    assert_eq!(
        listener_condition(&output, second, 2, "Programmed"),
        (true, "Programmed".into())
    );
    // A TLS listener on a listed port is a passthrough bind of its own, of the TLS
    // protocol: not on the HTTP listeners' port.
    assert_eq!(
        listener_condition(&output, second, 3, "Programmed"),
        (true, "Programmed".into())
    );
    assert_eq!(
        listener_condition(&output, second, 4, "Conflicted"),
        (true, "ProtocolConflict".into())
    );
    let binds = listener_binds(&output);
    let ports: Vec<(u16, bool)> = binds.iter().map(|(port, tls, _)| (*port, *tls)).collect();
    assert_eq!(ports, [(9000, false), (9443, true)]);
    let hosts: Vec<&str> = binds[0]
        .2
        .iter()
        .map(|(host, _, _)| host.as_str())
        .collect();
    assert_eq!(hosts, ["a.example.com", "b.example.com"]);
    assert!(routes(&output).is_empty(), "nothing on the main binds");
}

#[test]
fn tls_routes_on_a_listed_port_pass_names_through_there_claimed_per_port() {
    let mut snapshot = with_passthrough_gateway();
    add_gateway(
        &mut snapshot,
        "shop",
        "own",
        "tugboat",
        vec![mk_tls_passthrough_listener("tls", 9443, None)],
    );
    let routes = [
        ("argo", "gw", "2024-01-01T00:00:00Z", "argo.example.com"),
        (
            "argo-own",
            "own",
            "2024-01-02T00:00:00Z",
            "argo.example.com",
        ),
        ("db", "own", "2024-01-03T00:00:00Z", "db.example.com"),
        ("db-late", "own", "2024-01-04T00:00:00Z", "db.example.com"),
    ];
    for (name, gateway, created, host) in routes {
        let route = mk_tls_route(name, gateway, &[host], vec![mk_backend_ref("api", 80)]);
        add_tls_route(&mut snapshot, "shop", created, route);
    }
    let settings = Settings {
        now: 1_800_000_000,
        ..with_listener_ports(&[9443])
    };
    let output = tugboat_model::build(&snapshot, &settings);
    let found: Vec<(Option<u16>, String, String)> = output
        .desired
        .passthrough
        .iter()
        .map(|r| (r.port, r.host.to_string(), r.owner.to_string()))
        .collect();
    // A name is claimed per port: the HTTPS port's and 9443's are two; the older
    // claimer of a name on 9443 has it there.
    assert_eq!(
        found,
        [
            (None, "argo.example.com".into(), "TLSRoute shop/argo".into()),
            (
                Some(9443),
                "argo.example.com".into(),
                "TLSRoute shop/argo-own".into()
            ),
            (
                Some(9443),
                "db.example.com".into(),
                "TLSRoute shop/db".into()
            ),
        ]
    );
    assert!(
        output.problems.iter().any(|p| &*p.object.name == "db-late"
            && p.message
                .contains("already passed through for the older TLSRoute shop/db")),
        "{:?}",
        output.problems
    );
    // Neither an HTTP bind of its own nor the listener ports' routes.
    assert!(listener_binds(&output).is_empty());
    assert_eq!(
        listener_condition(&output, ("shop", "own"), 0, "Programmed"),
        (true, "Programmed".into())
    );
    assert_eq!(
        output.gateway.gateways[&ObjectKey::new("shop", "own")].listeners[0].attached_routes,
        2
    );
}

/// The TCPRoute `shop/name`, created at `created`, of generation 4, attached to the
/// Gateway `gw`, to `backend_refs`.
fn add_tcp_route(
    snapshot: &mut Snapshot,
    name: &str,
    created: &str,
    backend_refs: Vec<tugboat_test_objects::gateway::BackendRef>,
) {
    let route = mk_tcp_route(name, "gw", backend_refs);
    snapshot.tcp_routes.insert(
        ObjectKey::new("shop", name),
        typed(&in_namespace(
            with_generation(with_creation_timestamp(route, created), 4),
            "shop",
        )),
    );
}

/// `(status, reason)` of the TCPRoute's condition of `type_` at its first parent.
fn tcp_route_condition(output: &BuildOutput, name: &str, type_: &str) -> (bool, String) {
    let state = &output.gateway.tcp_routes[&ObjectKey::new("shop", name)];
    let found = condition(&state.parents[0].conditions, type_);
    (found.status, found.reason.to_string())
}

/// A TCP listener on a port of `--gateway-listener-ports` is a TCP service of its one
/// TCPRoute (the oldest; a younger one serves nothing there), one on another port is
/// refused, and a route with several weighted backends or a missing Service says so.
#[test]
fn tcp_routes_become_tcp_services_on_the_listed_ports() {
    let mut snapshot = base();
    add_gateway(
        &mut snapshot,
        "shop",
        "gw",
        "tugboat",
        vec![
            mk_listener("db", "TCP", 5432, None),
            mk_listener("unlisted", "TCP", 6000, None),
            mk_listener("again", "TCP", 5432, None),
            mk_listener("cache", "TCP", 6379, None),
        ],
    );
    // A younger Gateway's HTTP listener on the TCP listener's port conflicts.
    add_gateway(
        &mut snapshot,
        "shop",
        "web2",
        "tugboat",
        vec![mk_listener("http", "HTTP", 5432, None)],
    );
    add_tcp_route(
        &mut snapshot,
        "first",
        "2024-01-01T00:00:00Z",
        vec![mk_backend_ref("api", 80)],
    );
    add_tcp_route(
        &mut snapshot,
        "second",
        "2024-02-01T00:00:00Z",
        vec![mk_backend_ref("web", 80)],
    );
    let mut weighted = vec![mk_backend_ref("api", 80), mk_backend_ref("web", 80)];
    weighted[1].weight = Some(5);
    add_tcp_route(&mut snapshot, "weighted", "2024-03-01T00:00:00Z", weighted);
    let mut settings = settings();
    if let Some(gateway) = &mut settings.gateway {
        gateway.listener_ports = [5432, 6379].into();
    }
    let output = tugboat_model::build(&snapshot, &settings);

    let services: Vec<(u16, Option<String>, String)> = output
        .desired
        .tcp_services
        .iter()
        .map(|s| {
            (
                s.port,
                s.backend.as_ref().map(|b| b.to_string()),
                s.owner.to_string(),
            )
        })
        .collect();
    // The oldest route, attached to every listener of the Gateway, has both ports.
    let first = |port: u16| {
        let backend = Some("tcp:shop_api_80".to_string());
        (port, backend, "TCPRoute shop/first".to_string())
    };
    assert_eq!(services, vec![first(5432), first(6379)]);
    let backend = &output.desired.backends[&BackendName::parse("tcp:shop_api_80").expect("a name")];
    assert!(backend.options.tcp_service);
    let gateway = ("shop", "gw");
    assert_eq!(
        listener_condition(&output, gateway, 0, "Programmed"),
        (true, "Programmed".into())
    );
    assert_eq!(
        listener_condition(&output, gateway, 1, "Accepted"),
        (false, "PortUnavailable".into())
    );
    assert_eq!(
        listener_condition(&output, gateway, 2, "Conflicted"),
        (true, "HostnameConflict".into())
    );
    let state = &output.gateway.gateways[&ObjectKey::new("shop", "gw")];
    assert_eq!(state.listeners[0].attached_routes, 1);
    assert_eq!(
        listener_condition(&output, ("shop", "web2"), 0, "Conflicted"),
        (true, "ProtocolConflict".into())
    );
    // A TCP listener's port is a TCP service, not an HTTP bind of its own.
    assert!(output.desired.listener_binds.is_empty());
    assert_eq!(
        tcp_route_condition(&output, "first", "Accepted"),
        (true, "Accepted".into())
    );
    assert_eq!(
        tcp_route_condition(&output, "second", "Accepted"),
        (false, "UnsupportedValue".into())
    );
    assert_eq!(
        tcp_route_condition(&output, "weighted", "Accepted"),
        (false, "UnsupportedValue".into())
    );
    assert!(output.problems.iter().any(|p| {
        p.object.kind == "TCPRoute"
            && p.object.name.as_ref() == "second"
            && p.message
                .contains("already given to the older TCPRoute shop/first")
    }));
}

/// A TCPRoute whose Service does not exist keeps its port bound with its connections
/// closed, and says why in ResolvedRefs; an HTTPRoute does not attach to a TCP listener.
#[test]
fn a_tcp_route_to_a_missing_service_closes_its_connections() {
    let mut snapshot = base();
    add_gateway(
        &mut snapshot,
        "shop",
        "gw",
        "tugboat",
        vec![mk_listener("db", "TCP", 5432, None)],
    );
    add_tcp_route(
        &mut snapshot,
        "gone",
        "2024-01-01T00:00:00Z",
        vec![mk_backend_ref("gone", 80)],
    );
    add_shop_route(
        &mut snapshot,
        "web",
        &["shop.example.com"],
        vec![to_web(&[("PathPrefix", "/")])],
    );
    let mut settings = settings();
    if let Some(gateway) = &mut settings.gateway {
        gateway.listener_ports = [5432].into();
    }
    let output = tugboat_model::build(&snapshot, &settings);
    let ports: Vec<(u16, bool)> = output
        .desired
        .tcp_services
        .iter()
        .map(|s| (s.port, s.backend.is_some()))
        .collect();
    assert_eq!(ports, vec![(5432, false)]);
    assert_eq!(
        tcp_route_condition(&output, "gone", "ResolvedRefs"),
        (false, "BackendNotFound".into())
    );
    assert_eq!(
        route_condition(&output, "shop", "web", "Accepted"),
        (false, "NotAllowedByListeners".into())
    );
}
