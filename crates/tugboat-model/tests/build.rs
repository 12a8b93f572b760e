//! Table tests of the model: objects in, routes, backends and problems out.

mod common;

use k8s_openapi::api::networking::v1::{Ingress, IngressRule};
use tugboat_model::problem::ProblemReason;
use tugboat_model::{BuildOutput, HostMatch, ObjectKey, PathMatch, Snapshot};

use common::{
    Object, build_at_fixed_time, endpoint_slice, exact, ingress, mk_endpoint, mk_path, mk_rule,
    only_problem, prefix, service, snapshot_of, with_default_backend,
};

/// When the Ingress of most tests was made.
const FIRST: &str = "2024-01-01T00:00:00Z";

/// The Services `web` (port 80 named `http`, endpoints on 8080) and `api` (port 80 named
/// `grpc`, endpoints on 9090), each with one ready endpoint, one without a ready
/// condition and one not ready; and `ingresses`.
fn snapshot_with_services(ingresses: impl IntoIterator<Item = Ingress>) -> Snapshot {
    let endpoints = vec![
        mk_endpoint("10.0.0.2", Some(true)),
        mk_endpoint("10.0.0.1", None),
        mk_endpoint("10.0.0.3", Some(false)),
    ];
    let services = [("web", "http", 8080), ("api", "grpc", 9090)]
        .into_iter()
        .flat_map(|(name, port_name, target)| {
            [
                Object::from(service(name, port_name)),
                endpoint_slice(name, port_name, target, endpoints.clone()).into(),
            ]
        });
    snapshot_of(services.chain(ingresses.into_iter().map(Object::from)))
}

/// The Ingress `name` created at `created` with `rules`, without annotations.
fn plain_ingress(name: &str, created: &str, rules: Vec<IngressRule>) -> Ingress {
    ingress(name, created, &[], rules)
}

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

/// The features of the first route.
fn route_features(output: &BuildOutput) -> tugboat_model::RouteFeatures {
    let id = output.desired.routes[0].features.as_ref().expect("a set");
    output.desired.feature_sets[id].clone()
}

#[test]
fn resolves_ports_by_number_and_name_to_ready_endpoints() {
    let snapshot = snapshot_with_services([plain_ingress(
        "shop",
        FIRST,
        vec![mk_rule(
            Some("Shop.Example.com"),
            &[
                prefix("/", "web"),
                prefix("/api/", "api").port_named("grpc"),
                exact("/exact", "api"),
            ],
        )],
    )]);
    let output = build_at_fixed_time(&snapshot);
    assert_eq!(output.problems, vec![]);
    assert_eq!(
        routes(&output),
        vec![
            (
                "shop.example.com".into(),
                "/exact (Exact)".into(),
                "default_api_80".into()
            ),
            (
                "shop.example.com".into(),
                "/ (Prefix)".into(),
                "default_web_80".into()
            ),
            (
                "shop.example.com".into(),
                "/api (Prefix)".into(),
                "default_api_grpc".into()
            ),
        ]
    );
    let web = &output
        .desired
        .backends
        .values()
        .find(|b| &*b.service.name == "web")
        .expect("web");
    let endpoints: Vec<String> = web.endpoints.iter().map(ToString::to_string).collect();
    // Sorted; the endpoint whose ready condition is false is left out.
    assert_eq!(endpoints, vec!["10.0.0.1:8080", "10.0.0.2:8080"]);
}

#[test]
fn hosts_wildcards_and_hostless_rules() {
    let snapshot = snapshot_with_services([plain_ingress(
        "hosts",
        FIRST,
        vec![
            mk_rule(Some("*.example.com"), &[prefix("/", "web")]),
            mk_rule(None, &[mk_path("/", "ImplementationSpecific", "web")]),
        ],
    )]);
    let output = build_at_fixed_time(&snapshot);
    let hosts: Vec<&HostMatch> = output.desired.routes.iter().map(|r| &r.host).collect();
    assert_eq!(
        hosts,
        vec![&HostMatch::Any, &HostMatch::Wildcard(".example.com".into())]
    );
    assert!(matches!(&output.desired.routes[0].path, PathMatch::Prefix(p) if p == "/"));
}

#[test]
fn the_oldest_ingress_wins_a_conflict_and_the_newer_one_is_told() {
    let snapshot = snapshot_of_annotated(&[
        ("newer", "2024-06-01T00:00:00Z", "api", &[]),
        ("older", FIRST, "web", &[]),
    ]);
    let output = build_at_fixed_time(&snapshot);
    assert_eq!(
        routes(&output),
        vec![(
            "a.example.com".into(),
            "/ (Prefix)".into(),
            "default_web_80".into()
        )]
    );
    let problem = only_problem(&output);
    assert_eq!(&*problem.object.name, "newer");
    assert_eq!(problem.reason, ProblemReason::RouteConflict);
    assert!(
        problem.message.contains("default/older"),
        "{}",
        problem.message
    );
}

#[test]
fn bad_fields_are_reported_and_only_their_rule_is_skipped() {
    let snapshot = snapshot_with_services([plain_ingress(
        "mixed",
        FIRST,
        vec![
            mk_rule(Some("bad host.example.com"), &[prefix("/", "web")]),
            mk_rule(
                Some("ok.example.com"),
                &[
                    prefix("/good", "web"),
                    prefix("no-slash", "web"),
                    mk_path("/typo", "Prefixx", "web"),
                    prefix("/port", "web").port(0),
                    prefix("/nosvc", "gone"),
                    prefix("/noport", "web").port(81),
                ],
            ),
        ],
    )]);
    let output = build_at_fixed_time(&snapshot);
    let paths: Vec<String> = output
        .desired
        .routes
        .iter()
        .map(|r| r.path.to_string())
        .collect();
    // Rules whose Service or port is missing still route (to 503); invalid ones do not.
    assert_eq!(
        paths,
        vec!["/good (Prefix)", "/noport (Prefix)", "/nosvc (Prefix)"]
    );
    let fields: Vec<(&str, ProblemReason)> = output
        .problems
        .iter()
        .map(|p| (p.field.as_str(), p.reason))
        .collect();
    assert_eq!(
        fields,
        vec![
            ("spec.rules[0].host", ProblemReason::InvalidField),
            (
                "spec.rules[1].http.paths[1].path",
                ProblemReason::InvalidField
            ),
            (
                "spec.rules[1].http.paths[2].pathType",
                ProblemReason::InvalidField
            ),
            (
                "spec.rules[1].http.paths[3].backend.service.port.number",
                ProblemReason::InvalidField
            ),
            (
                "spec.rules[1].http.paths[4].backend.service",
                ProblemReason::ServiceNotFound
            ),
            (
                "spec.rules[1].http.paths[5].backend.service",
                ProblemReason::ServicePortNotFound
            ),
        ]
    );
    let nosvc = output
        .desired
        .backends
        .values()
        .find(|b| &*b.service.name == "gone")
        .expect("backend");
    assert!(nosvc.endpoints.is_empty());
}

#[test]
fn default_backend_of_the_oldest_ingress() {
    let default_backend = |name: &str, created: &str, service: &str| {
        with_default_backend(plain_ingress(name, created, vec![]), service, 80)
    };
    let snapshot = snapshot_with_services([
        default_backend("b", "2024-02-01T00:00:00Z", "api"),
        default_backend("a", "2024-03-01T00:00:00Z", "web"),
    ]);
    let output = build_at_fixed_time(&snapshot);
    assert_eq!(
        output.desired.default_backend.as_ref().map(|b| b.as_str()),
        Some("default_api_80")
    );
}

/// Ingress `name` routing `a.example.com` `/` (Prefix) to `service` port 80, with these
/// (`nginx.ingress.kubernetes.io/`) annotations.
fn annotated(name: &str, created: &str, service: &str, annotations: &[(&str, &str)]) -> Ingress {
    let names: Vec<String> = annotations
        .iter()
        .map(|(key, _)| format!("nginx.ingress.kubernetes.io/{key}"))
        .collect();
    let annotations: Vec<(&str, &str)> = names
        .iter()
        .zip(annotations)
        .map(|(name, (_, value))| (name.as_str(), *value))
        .collect();
    ingress(
        name,
        created,
        &annotations,
        vec![mk_rule(Some("a.example.com"), &[prefix("/", service)])],
    )
}

/// An Ingress of [`annotated`]: name, creation time, Service, annotations.
type Annotated<'a> = (&'a str, &'a str, &'a str, &'a [(&'a str, &'a str)]);

/// The Services of [`snapshot_with_services`] and the Ingresses of [`annotated`].
fn snapshot_of_annotated(objects: &[Annotated<'_>]) -> Snapshot {
    snapshot_with_services(objects.iter().map(|(name, created, service, annotations)| {
        annotated(name, created, service, annotations)
    }))
}

/// The build of the Ingress `main` (made [`FIRST`], to `web`, without annotations) and
/// the Ingress `beta` of the same host and path, made later, to `api`, with these
/// annotations.
fn build_canary_of_main(annotations: &[(&str, &str)]) -> BuildOutput {
    build_at_fixed_time(&snapshot_of_annotated(&[
        ("main", FIRST, "web", &[]),
        ("beta", "2024-02-01T00:00:00Z", "api", annotations),
    ]))
}

/// The build of the Ingress `main` (made [`FIRST`], to `web`) with these annotations.
fn build_main_with(annotations: &[(&str, &str)]) -> BuildOutput {
    build_at_fixed_time(&snapshot_of_annotated(&[(
        "main",
        FIRST,
        "web",
        annotations,
    )]))
}

const CANARY_30: &[(&str, &str)] = &[
    ("canary", "true"),
    ("canary-weight", "30"),
    ("canary-by-header", "X-Canary"),
    ("canary-by-header-value", "yes"),
    ("canary-by-cookie", "beta"),
];

#[test]
fn a_canary_joins_the_route_of_its_main_ingress_whichever_is_older() {
    for (main_created, canary_created) in [
        (FIRST, "2024-06-01T00:00:00Z"),
        ("2024-06-01T00:00:00Z", FIRST),
    ] {
        let snapshot = snapshot_of_annotated(&[
            (
                "main",
                main_created,
                "web",
                &[("upstream-vhost", "in.example.com")],
            ),
            ("beta", canary_created, "api", CANARY_30),
        ]);
        let output = build_at_fixed_time(&snapshot);
        assert!(output.problems.is_empty(), "{:?}", output.problems);
        let [route] = output.desired.routes.as_slice() else {
            panic!("one route: {:?}", output.desired.routes);
        };
        assert_eq!(route.ingress, ObjectKey::new("default", "main"));
        assert_eq!(route.backend.as_str(), "default_web_80");
        let canary = route.canary.as_ref().expect("a canary");
        assert_eq!(canary.backend.as_str(), "default_api_80");
        assert_eq!(canary.per_million, 300_000);
        assert_eq!(canary.ingress, ObjectKey::new("default", "beta"));
        // The main route's features, with the canary's rules.
        let id = route.features.as_ref().expect("a feature set");
        let features = &output.desired.feature_sets[id];
        assert_eq!(features.set_host.as_deref(), Some("in.example.com"));
        let rules = features.canary.as_ref().expect("canary rules");
        assert_eq!(rules.header.as_deref(), Some("X-Canary"));
        assert_eq!(rules.header_value.as_deref(), Some("yes"));
        assert_eq!(rules.cookie.as_deref(), Some("beta"));
        // The main route's set without the canary is gone; the canary's backend is in.
        assert_eq!(output.desired.feature_sets.len(), 1);
        assert!(
            output
                .desired
                .backends
                .keys()
                .any(|b| b.as_str() == "default_api_80")
        );
    }
}

#[test]
fn a_canary_of_a_backend_with_affinity_is_sticky_unless_told_legacy() {
    use tugboat_model::features::CanaryAffinity;
    let main: &[(&str, &str)] = &[("affinity", "cookie"), ("session-cookie-name", "route")];
    let legacy: Vec<(&str, &str)> = CANARY_30
        .iter()
        .copied()
        .chain([("affinity-canary-behavior", "legacy")])
        .collect();
    for (canary, sticky) in [(CANARY_30, true), (legacy.as_slice(), false)] {
        let snapshot = snapshot_of_annotated(&[
            ("main", "2024-01-01T00:00:00Z", "web", main),
            ("beta", "2024-02-01T00:00:00Z", "api", canary),
        ]);
        let output = build_at_fixed_time(&snapshot);
        assert!(output.problems.is_empty(), "{:?}", output.problems);
        let route = &output.desired.routes[0];
        let id = route.features.as_ref().expect("a feature set");
        let rules = output.desired.feature_sets[id]
            .canary
            .as_ref()
            .expect("rules");
        assert_eq!(
            rules.affinity,
            Some(CanaryAffinity {
                cookie: "route".into(),
                sticky
            })
        );
        let backend = |name: &str| {
            output
                .desired
                .backends
                .iter()
                .find(|(b, _)| b.as_str() == name)
                .map(|(_, b)| b.options.cookie.clone())
                .expect("backend")
        };
        let main_cookie = backend("default_web_80").expect("the main backend's cookie");
        assert!(!main_cookie.canary);
        match backend("default_api_80") {
            // The canary's backend takes the main backend's cookie, its values marked.
            Some(cookie) => {
                assert!(sticky);
                assert!(cookie.canary);
                assert_eq!(cookie.name, "route");
                assert!(cookie.http_only);
            }
            None => assert!(!sticky),
        }
    }
}

#[test]
fn a_canary_without_affinity_on_its_main_backend_has_no_affinity_rule() {
    let snapshot = snapshot_of_annotated(&[
        ("main", "2024-01-01T00:00:00Z", "web", &[]),
        ("beta", "2024-02-01T00:00:00Z", "api", CANARY_30),
    ]);
    let output = build_at_fixed_time(&snapshot);
    let id = output.desired.routes[0].features.as_ref().expect("a set");
    let rules = output.desired.feature_sets[id]
        .canary
        .as_ref()
        .expect("rules");
    assert_eq!(rules.affinity, None);
}

#[test]
fn a_canary_without_a_main_route_does_nothing_and_is_told() {
    let snapshot = snapshot_of_annotated(&[("beta", FIRST, "api", CANARY_30)]);
    let output = build_at_fixed_time(&snapshot);
    assert!(output.desired.routes.is_empty());
    assert!(output.desired.backends.is_empty());
    let problem = only_problem(&output);
    assert_eq!(&*problem.object.name, "beta");
    assert_eq!(problem.field, "spec.rules[0].http.paths[0]");
    assert!(problem.message.contains("does nothing"), "{problem}");
}

#[test]
fn a_second_canary_of_a_route_is_a_conflict() {
    let snapshot = snapshot_of_annotated(&[
        ("main", FIRST, "web", &[]),
        ("first", "2024-02-01T00:00:00Z", "api", CANARY_30),
        (
            "second",
            "2024-03-01T00:00:00Z",
            "api",
            &[("canary", "true")],
        ),
    ]);
    let output = build_at_fixed_time(&snapshot);
    let canary = output.desired.routes[0].canary.as_ref().expect("a canary");
    assert_eq!(&*canary.ingress.name, "first");
    let problem = only_problem(&output);
    assert_eq!(&*problem.object.name, "second");
    assert_eq!(problem.reason, ProblemReason::RouteConflict);
    assert!(problem.message.contains("default/first"), "{problem}");
}

#[test]
fn a_canary_of_the_main_routes_own_backend_does_nothing() {
    let snapshot = snapshot_of_annotated(&[
        ("main", FIRST, "web", &[]),
        ("same", "2024-02-01T00:00:00Z", "web", CANARY_30),
    ]);
    let output = build_at_fixed_time(&snapshot);
    assert!(output.desired.routes[0].canary.is_none());
    assert!(output.desired.feature_sets.is_empty());
    let problem = only_problem(&output);
    assert_eq!(problem.field, "spec.rules[0].http.paths[0].backend");
}

/// A bad canary value is a problem naming the Ingress and the key; the other canary
/// keys still apply.
fn bad_canary_value(key: &str, value: &str) -> (BuildOutput, tugboat_model::ObjectProblem) {
    let mut annotations = vec![("canary", "true"), ("canary-weight", "30")];
    annotations.retain(|(k, _)| *k != key);
    annotations.push((key, value));
    let output = build_canary_of_main(&annotations);
    let problem = only_problem(&output);
    assert_eq!(&*problem.object.name, "beta");
    assert_eq!(
        problem.field,
        format!("metadata.annotations.nginx.ingress.kubernetes.io/{key}")
    );
    assert_eq!(problem.reason, ProblemReason::InvalidField);
    let problem = problem.clone();
    (output, problem)
}

#[test]
fn a_canary_weight_that_is_not_a_number_is_refused() {
    let (output, problem) = bad_canary_value("canary-weight", "ten");
    assert!(problem.message.contains("0 to 1000000"), "{problem}");
    // Weight 0, the default: still a canary (by header or cookie), never by weight.
    let canary = output.desired.routes[0].canary.as_ref().expect("a canary");
    assert_eq!(canary.per_million, 0);
}

#[test]
fn a_canary_weight_above_the_range_is_refused() {
    bad_canary_value("canary-weight", "1000001");
}

#[test]
fn a_canary_weight_total_of_zero_is_refused() {
    let (output, problem) = bad_canary_value("canary-weight-total", "0");
    assert!(problem.message.contains("1 to 1000000"), "{problem}");
    // The default total, 100, applies.
    let canary = output.desired.routes[0].canary.as_ref().expect("a canary");
    assert_eq!(canary.per_million, 300_000);
}

#[test]
fn a_canary_header_name_with_a_space_is_refused() {
    let (output, _) = bad_canary_value("canary-by-header", "X Canary");
    let rules = route_features(&output).canary.expect("rules");
    assert_eq!(rules.header, None);
}

#[test]
fn a_canary_header_value_with_a_quote_is_refused() {
    let output = build_canary_of_main(&[
        ("canary", "true"),
        ("canary-by-header", "X-Canary"),
        ("canary-by-header-value", "a\"b"),
    ]);
    let problem = only_problem(&output);
    assert!(
        problem.field.ends_with("canary-by-header-value"),
        "{problem}"
    );
    let rules = route_features(&output).canary.expect("rules");
    assert_eq!(rules.header.as_deref(), Some("X-Canary"));
    assert_eq!(rules.header_value, None);
}

#[test]
fn a_canary_cookie_name_with_a_semicolon_is_refused() {
    bad_canary_value("canary-by-cookie", "a;b");
}

#[test]
fn a_canary_flag_that_is_not_a_bool_leaves_an_ordinary_ingress() {
    let output = build_canary_of_main(&[("canary", "yes")]);
    // Not a canary: an ordinary Ingress whose route conflicts with the older one.
    assert!(output.desired.routes[0].canary.is_none());
    let fields: Vec<&str> = output.problems.iter().map(|p| p.field.as_str()).collect();
    assert!(
        fields.contains(&"metadata.annotations.nginx.ingress.kubernetes.io/canary"),
        "{fields:?}"
    );
}

#[test]
fn canary_keys_without_canary_true_are_told_and_ignored() {
    let output = build_main_with(&[("canary-weight", "30"), ("canary-by-header-value", "x")]);
    assert_eq!(output.desired.routes.len(), 1);
    assert_eq!(output.problems.len(), 2, "{:?}", output.problems);
    assert!(
        output
            .problems
            .iter()
            .all(|p| p.message.contains("needs canary: \"true\"")),
        "{:?}",
        output.problems
    );
}

#[test]
fn a_canary_header_value_without_a_header_is_told() {
    let output = build_canary_of_main(&[("canary", "true"), ("canary-by-header-value", "x")]);
    let problem = only_problem(&output);
    assert!(
        problem.message.contains("needs canary-by-header"),
        "{problem}"
    );
}

#[test]
fn canary_shares_follow_ingress_nginx_weights() {
    use tugboat_model::Canary;
    assert_eq!(Canary::per_million(30, 100), 300_000);
    assert_eq!(Canary::per_million(1, 1000), 1_000);
    // A total below 100 counts as 100; a weight above the total is everything.
    assert_eq!(Canary::per_million(5, 10), 50_000);
    assert_eq!(Canary::per_million(150, 100), 1_000_000);
    assert_eq!(Canary::per_million(0, 100), 0);
}

#[test]
fn a_body_size_limit_joins_the_route_features() {
    let output = build_main_with(&[("proxy-body-size", "8m")]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    assert_eq!(route_features(&output).max_body_size, Some(8 * 1024 * 1024));
}

#[test]
fn a_bad_body_size_is_told_and_the_rest_of_the_ingress_works() {
    let output = build_main_with(&[
        ("proxy-body-size", "8mb"),
        ("upstream-vhost", "in.example.com"),
    ]);
    let problem = only_problem(&output);
    assert_eq!(&*problem.object.name, "main");
    assert_eq!(
        problem.field,
        "metadata.annotations.nginx.ingress.kubernetes.io/proxy-body-size"
    );
    assert!(problem.message.contains("'8mb' is not valid"), "{problem}");
    let features = route_features(&output);
    assert_eq!(features.max_body_size, None);
    assert_eq!(features.set_host.as_deref(), Some("in.example.com"));
}

fn web_cookie(output: &BuildOutput) -> Option<tugboat_model::features::PersistenceCookie> {
    output
        .desired
        .backends
        .iter()
        .find(|(name, _)| name.as_str() == "default_web_80")
        .and_then(|(_, backend)| backend.options.cookie.clone())
}

#[test]
fn affinity_cookie_sets_the_persistence_cookie_and_its_attributes() {
    let output = build_main_with(&[
        ("affinity", "cookie"),
        ("session-cookie-path", "/shop"),
        ("session-cookie-expires", "600"),
    ]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    let cookie = web_cookie(&output).expect("a cookie");
    assert_eq!(cookie.name, "INGRESSCOOKIE");
    assert!(cookie.http_only);
    assert_eq!(cookie.path.as_deref(), Some("/shop"));
    assert_eq!(cookie.max_age, Some(600));
}

#[test]
fn session_cookie_max_age_beats_expires() {
    let output = build_main_with(&[
        ("affinity", "cookie"),
        ("session-cookie-name", "route"),
        ("session-cookie-max-age", "60"),
        ("session-cookie-expires", "600"),
    ]);
    let cookie = web_cookie(&output).expect("a cookie");
    assert_eq!(cookie.name, "route");
    assert_eq!(cookie.max_age, Some(60));
}

#[test]
fn session_cookie_keys_without_affinity_are_told_and_ignored() {
    let output = build_main_with(&[("session-cookie-name", "route")]);
    assert_eq!(web_cookie(&output), None);
    let problem = only_problem(&output);
    assert!(
        problem.message.contains("needs affinity: cookie"),
        "{problem}"
    );
}

#[test]
fn an_affinity_other_than_cookie_is_refused() {
    let output = build_main_with(&[("affinity", "ip")]);
    assert_eq!(web_cookie(&output), None);
    let problem = only_problem(&output);
    assert_eq!(
        problem.field,
        "metadata.annotations.nginx.ingress.kubernetes.io/affinity"
    );
    assert_eq!(output.desired.routes.len(), 1);
}

#[test]
fn a_bad_session_cookie_path_is_told_and_the_cookie_kept() {
    let output = build_main_with(&[
        ("affinity", "cookie"),
        ("session-cookie-path", "/a;Domain=x"),
    ]);
    let cookie = web_cookie(&output).expect("a cookie");
    assert_eq!(cookie.path, None);
    let problem = only_problem(&output);
    assert!(problem.field.ends_with("session-cookie-path"), "{problem}");
}

#[test]
fn a_bad_session_cookie_max_age_is_refused() {
    let output = build_main_with(&[("affinity", "cookie"), ("session-cookie-max-age", "0")]);
    assert_eq!(web_cookie(&output).and_then(|c| c.max_age), None);
    assert_eq!(output.problems.len(), 1, "{:?}", output.problems);
}

#[test]
fn nginx_limits_join_the_route_features_with_the_burst() {
    let output = build_main_with(&[("limit-rps", "10"), ("limit-connections", "3")]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    let limits = route_features(&output).client_limits.expect("limits");
    // ingress-nginx's default burst multiplier is 5.
    assert_eq!(limits.requests_per_second, Some((10, 50)));
    assert_eq!(limits.connections, Some(3));
}

#[test]
fn a_limit_rps_that_is_not_a_number_fails_closed() {
    let output = build_main_with(&[("limit-rps", "ten")]);
    let problem = only_problem(&output);
    assert!(problem.field.ends_with("limit-rps"), "{problem}");
    assert!(problem.message.contains("403"), "{problem}");
    assert!(route_features(&output).deny_all);
}

#[test]
fn a_limit_connections_of_zero_fails_closed() {
    let output = build_main_with(&[("limit-connections", "0")]);
    let problem = only_problem(&output);
    assert!(problem.field.ends_with("limit-connections"), "{problem}");
    assert!(route_features(&output).deny_all);
}

#[test]
fn a_burst_multiplier_of_zero_is_refused_and_the_default_applies() {
    let output = build_main_with(&[("limit-rps", "2"), ("limit-burst-multiplier", "0")]);
    let problem = only_problem(&output);
    assert!(
        problem.field.ends_with("limit-burst-multiplier"),
        "{problem}"
    );
    let limits = route_features(&output).client_limits.expect("limits");
    assert_eq!(limits.requests_per_second, Some((2, 10)));
}

#[test]
fn a_burst_multiplier_without_limit_rps_is_told() {
    let output = build_main_with(&[("limit-burst-multiplier", "2")]);
    let problem = only_problem(&output);
    assert!(problem.message.contains("needs limit-rps"), "{problem}");
    assert!(output.desired.routes[0].features.is_none());
}

#[test]
fn a_limit_allowlist_exempts_addresses_from_the_limits() {
    let output = build_main_with(&[
        ("limit-rps", "5"),
        ("limit-whitelist", "10.0.0.0/8,192.0.2.7"),
    ]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    let limits = route_features(&output).client_limits.expect("limits");
    assert_eq!(limits.exempt, vec!["10.0.0.0/8", "192.0.2.7"]);
}

#[test]
fn a_bad_limit_allowlist_is_told_and_the_limits_apply_to_everyone() {
    let output = build_main_with(&[("limit-rps", "5"), ("limit-allowlist", "10.0.0.0/33")]);
    let problem = only_problem(&output);
    assert!(problem.field.ends_with("limit-allowlist"), "{problem}");
    let features = route_features(&output);
    assert!(!features.deny_all);
    assert!(features.client_limits.expect("limits").exempt.is_empty());
}

#[test]
fn a_limit_allowlist_without_limits_is_told() {
    let output = build_main_with(&[("limit-allowlist", "10.0.0.0/8")]);
    let problem = only_problem(&output);
    assert!(problem.message.contains("needs limit-rps"), "{problem}");
}

#[test]
fn a_canary_header_value_makes_the_pattern_unused() {
    let output = build_canary_of_main(&[
        ("canary", "true"),
        ("canary-by-header", "X-Canary"),
        ("canary-by-header-value", "yes"),
        ("canary-by-header-pattern", "^y"),
    ]);
    let problem = only_problem(&output);
    assert!(problem.message.contains("takes precedence"), "{problem}");
    let rules = route_features(&output).canary.expect("rules");
    assert_eq!(rules.header_value.as_deref(), Some("yes"));
    assert_eq!(rules.header_pattern, None);
}

#[test]
fn a_canary_header_pattern_that_does_not_parse_is_refused() {
    let output = build_canary_of_main(&[
        ("canary", "true"),
        ("canary-by-header", "X-Canary"),
        ("canary-by-header-pattern", "(beta"),
    ]);
    let problem = only_problem(&output);
    assert!(
        problem.field.ends_with("canary-by-header-pattern"),
        "{problem}"
    );
    let rules = route_features(&output).canary.expect("rules");
    assert_eq!(rules.header.as_deref(), Some("X-Canary"));
    assert_eq!(rules.header_pattern, None);
}
