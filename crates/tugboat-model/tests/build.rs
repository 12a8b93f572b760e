//! Table tests of the model: objects in, routes, backends and problems out.

use std::sync::Arc;

use serde_json::{Value, json};
use tugboat_model::problem::ProblemReason;
use tugboat_model::{BuildOutput, HostMatch, ObjectKey, PathMatch, Settings, Snapshot, build};

fn ingress(
    name: &str,
    created: &str,
    spec: Value,
) -> (ObjectKey, Arc<k8s_openapi::api::networking::v1::Ingress>) {
    let object = json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": created},
        "spec": spec,
    });
    (
        ObjectKey::new("default", name),
        Arc::new(serde_json::from_value(object).expect("valid Ingress")),
    )
}

fn rule(host: Option<&str>, paths: Value) -> Value {
    let mut rule = json!({"http": {"paths": paths}});
    if let Some(host) = host {
        rule["host"] = json!(host);
    }
    rule
}

fn path(path: &str, path_type: &str, service: &str, port: Value) -> Value {
    json!({"path": path, "pathType": path_type,
           "backend": {"service": {"name": service, "port": port}}})
}

fn snapshot_with_services() -> Snapshot {
    let mut snapshot = Snapshot::default();
    for (name, port_name, target) in [("web", "http", 8080), ("api", "grpc", 9090)] {
        let service = json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"ports": [{"name": port_name, "port": 80}]},
        });
        snapshot.services.insert(
            ObjectKey::new("default", name),
            Arc::new(serde_json::from_value(service).expect("Service")),
        );
        let slice = json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": format!("{name}-1"), "namespace": "default",
                         "labels": {"kubernetes.io/service-name": name}},
            "addressType": "IPv4",
            "ports": [{"name": port_name, "port": target}],
            "endpoints": [
                {"addresses": ["10.0.0.2"], "conditions": {"ready": true}},
                {"addresses": ["10.0.0.1"]},
                {"addresses": ["10.0.0.3"], "conditions": {"ready": false}},
            ],
        });
        snapshot.endpoint_slices.insert(
            ObjectKey::new("default", format!("{name}-1")),
            Arc::new(serde_json::from_value(slice).expect("EndpointSlice")),
        );
    }
    snapshot
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

#[test]
fn resolves_ports_by_number_and_name_to_ready_endpoints() {
    let mut snapshot = snapshot_with_services();
    let (key, object) = ingress(
        "shop",
        "2024-01-01T00:00:00Z",
        json!({"rules": [rule(Some("Shop.Example.com"), json!([
            path("/", "Prefix", "web", json!({"number": 80})),
            path("/api/", "Prefix", "api", json!({"name": "grpc"})),
            path("/exact", "Exact", "api", json!({"number": 80})),
        ]))]}),
    );
    snapshot.ingresses.insert(key, object);
    let output = build(&snapshot, &Settings::new(1_700_000_000));
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
        .find(|b| b.service.name == "web")
        .expect("web");
    let endpoints: Vec<String> = web.endpoints.iter().map(ToString::to_string).collect();
    // Sorted; the endpoint whose ready condition is false is left out.
    assert_eq!(endpoints, vec!["10.0.0.1:8080", "10.0.0.2:8080"]);
}

#[test]
fn hosts_wildcards_and_hostless_rules() {
    let mut snapshot = snapshot_with_services();
    let (key, object) = ingress(
        "hosts",
        "2024-01-01T00:00:00Z",
        json!({"rules": [
            rule(Some("*.example.com"), json!([path("/", "Prefix", "web", json!({"number": 80}))])),
            rule(None, json!([path("/", "ImplementationSpecific", "web", json!({"number": 80}))])),
        ]}),
    );
    snapshot.ingresses.insert(key, object);
    let output = build(&snapshot, &Settings::new(1_700_000_000));
    let hosts: Vec<&HostMatch> = output.desired.routes.iter().map(|r| &r.host).collect();
    assert_eq!(
        hosts,
        vec![&HostMatch::Any, &HostMatch::Wildcard(".example.com".into())]
    );
    assert!(matches!(&output.desired.routes[0].path, PathMatch::Prefix(p) if p == "/"));
}

#[test]
fn the_oldest_ingress_wins_a_conflict_and_the_newer_one_is_told() {
    let mut snapshot = snapshot_with_services();
    let paths = |service: &str| json!([path("/", "Prefix", service, json!({"number": 80}))]);
    for (name, created, service) in [
        ("newer", "2024-06-01T00:00:00Z", "api"),
        ("older", "2024-01-01T00:00:00Z", "web"),
    ] {
        let (key, object) = ingress(
            name,
            created,
            json!({"rules": [rule(Some("a.example.com"), paths(service))]}),
        );
        snapshot.ingresses.insert(key, object);
    }
    let output = build(&snapshot, &Settings::new(1_700_000_000));
    assert_eq!(
        routes(&output),
        vec![(
            "a.example.com".into(),
            "/ (Prefix)".into(),
            "default_web_80".into()
        )]
    );
    let [problem] = output.problems.as_slice() else {
        panic!("one problem expected: {:?}", output.problems);
    };
    assert_eq!(problem.object.name, "newer");
    assert_eq!(problem.reason, ProblemReason::RouteConflict);
    assert!(
        problem.message.contains("default/older"),
        "{}",
        problem.message
    );
}

#[test]
fn bad_fields_are_reported_and_only_their_rule_is_skipped() {
    let mut snapshot = snapshot_with_services();
    let (key, object) = ingress(
        "mixed",
        "2024-01-01T00:00:00Z",
        json!({"rules": [
            rule(Some("bad host.example.com"), json!([path("/", "Prefix", "web", json!({"number": 80}))])),
            rule(Some("ok.example.com"), json!([
                path("/good", "Prefix", "web", json!({"number": 80})),
                path("no-slash", "Prefix", "web", json!({"number": 80})),
                path("/typo", "Prefixx", "web", json!({"number": 80})),
                path("/port", "Prefix", "web", json!({"number": 0})),
                path("/nosvc", "Prefix", "gone", json!({"number": 80})),
                path("/noport", "Prefix", "web", json!({"number": 81})),
            ])),
        ]}),
    );
    snapshot.ingresses.insert(key, object);
    let output = build(&snapshot, &Settings::new(1_700_000_000));
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
        .find(|b| b.service.name == "gone")
        .expect("backend");
    assert!(nosvc.endpoints.is_empty());
}

#[test]
fn default_backend_of_the_oldest_ingress() {
    let mut snapshot = snapshot_with_services();
    for (name, created, service) in [
        ("b", "2024-02-01T00:00:00Z", "api"),
        ("a", "2024-03-01T00:00:00Z", "web"),
    ] {
        let (key, object) = ingress(
            name,
            created,
            json!({"defaultBackend": {"service": {"name": service, "port": {"number": 80}}}}),
        );
        snapshot.ingresses.insert(key, object);
    }
    let output = build(&snapshot, &Settings::new(1_700_000_000));
    assert_eq!(
        output.desired.default_backend.as_ref().map(|b| b.as_str()),
        Some("default_api_80")
    );
}
