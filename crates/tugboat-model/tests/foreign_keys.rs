//! Annotations under Tugboat's prefix or another controller's that Tugboat does not
//! read: never ignored silently (a problem names the object and the key), and a key
//! that restricts access makes the routes it applies to refuse everybody unless the
//! operator says otherwise.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use tugboat_model::annotations::UnsupportedAccess;
use tugboat_model::{BuildOutput, ObjectKey, Settings, Snapshot, build};

fn ingress(name: &str, path: &str, annotations: Value) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": name, "namespace": "default",
                     "creationTimestamp": "2024-01-01T00:00:00Z",
                     "annotations": annotations},
        "spec": {"rules": [{"host": "shop.example.com", "http": {"paths": [
            {"path": path, "pathType": "Prefix",
             "backend": {"service": {"name": "web", "port": {"number": 80}}}}
        ]}}]},
    })
}

fn snapshot(ingresses: &[Value], service_annotations: Value) -> Snapshot {
    let mut snapshot = Snapshot::default();
    let service = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default", "annotations": service_annotations},
        "spec": {"ports": [{"name": "http", "port": 80}]},
    });
    snapshot.services.insert(
        ObjectKey::new("default", "web"),
        Arc::new(serde_json::from_value(service).expect("Service")),
    );
    for object in ingresses {
        let name = object["metadata"]["name"].as_str().expect("name");
        snapshot.ingresses.insert(
            ObjectKey::new("default", name),
            Arc::new(serde_json::from_value(object.clone()).expect("Ingress")),
        );
    }
    snapshot
}

fn settings(access: UnsupportedAccess) -> Settings {
    Settings {
        unsupported_access: access,
        ..Settings::new(1_700_000_000)
    }
}

/// Whether the routes of Ingress `name` refuse everybody.
fn denied_by_path(output: &BuildOutput) -> BTreeMap<String, bool> {
    output
        .desired
        .routes
        .iter()
        .map(|route| {
            let denied = route
                .features
                .as_ref()
                .and_then(|id| output.desired.feature_sets.get(id))
                .is_some_and(|f| f.deny_all);
            (route.path.to_string(), denied)
        })
        .collect()
}

#[test]
fn an_unsupported_peer_allow_list_refuses_the_routes_of_its_ingress_only() {
    let snapshot = snapshot(
        &[
            ingress(
                "office",
                "/office",
                json!({"nginx.ingress.kubernetes.io/whitelist-source-range": "10.0.0.0/8"}),
            ),
            ingress("site", "/", json!({})),
        ],
        json!({}),
    );
    let output = build(&snapshot, &settings(UnsupportedAccess::Deny));
    let denied = denied_by_path(&output);
    assert_eq!(denied.len(), 2, "{denied:?}");
    assert!(
        denied
            .iter()
            .any(|(path, d)| path.contains("/office") && *d)
    );
    assert!(
        denied
            .iter()
            .any(|(path, d)| !path.contains("/office") && !*d)
    );
    let problem = output
        .problems
        .iter()
        .find(|p| p.object.name == "office")
        .expect("a problem on the Ingress");
    assert_eq!(
        problem.field,
        "metadata.annotations.nginx.ingress.kubernetes.io/whitelist-source-range"
    );
    assert!(
        problem.message.contains("'whitelist-source-range'"),
        "{problem}"
    );
    assert!(problem.message.contains("ingress-nginx"), "{problem}");
    assert!(problem.message.contains("403"), "{problem}");
    assert!(!output.problems.iter().any(|p| p.object.name == "site"));
}

#[test]
fn with_ignore_the_routes_are_served_and_the_problem_says_so() {
    let snapshot = snapshot(
        &[ingress(
            "office",
            "/office",
            json!({"haproxy-ingress.github.io/auth-url": "http://auth.example.com/"}),
        )],
        json!({}),
    );
    let output = build(&snapshot, &settings(UnsupportedAccess::Ignore));
    assert!(denied_by_path(&output).values().all(|d| !d));
    let problem = output
        .problems
        .iter()
        .find(|p| p.object.name == "office")
        .expect("a problem on the Ingress");
    assert!(
        problem
            .message
            .contains("--unsupported-access-keys=ignore serves"),
        "{problem}"
    );
}

#[test]
fn an_unsupported_key_that_does_not_restrict_access_is_a_problem_only() {
    let snapshot = snapshot(
        &[ingress(
            "proxy",
            "/",
            json!({
                "nginx.ingress.kubernetes.io/proxy-buffering": "on",
                "tugboat.dev/no-such-key": "x",
                "ingress.kubernetes.io/no-such-legacy-key": "x",
                "example.com/not-ours": "x",
            }),
        )],
        json!({}),
    );
    let output = build(&snapshot, &settings(UnsupportedAccess::Deny));
    assert!(denied_by_path(&output).values().all(|d| !d));
    let fields: Vec<&str> = output.problems.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "metadata.annotations.ingress.kubernetes.io/no-such-legacy-key",
            "metadata.annotations.nginx.ingress.kubernetes.io/proxy-buffering",
            "metadata.annotations.tugboat.dev/no-such-key",
        ]
    );
    assert!(
        output
            .problems
            .iter()
            .all(|p| p.message.contains("no effect")),
        "{:?}",
        output.problems
    );
}

#[test]
fn an_unknown_access_key_under_our_own_prefix_fails_closed_too() {
    let snapshot = snapshot(
        &[ingress(
            "shop",
            "/",
            json!({"tugboat.dev/auth-url": "http://auth/"}),
        )],
        json!({}),
    );
    let output = build(&snapshot, &settings(UnsupportedAccess::Deny));
    assert!(denied_by_path(&output).values().all(|d| *d));
    assert!(
        output.problems[0]
            .message
            .contains("unknown key 'auth-url'")
    );
}

#[test]
fn a_service_with_an_unsupported_access_key_refuses_the_routes_to_it() {
    let snapshot = snapshot(
        &[ingress("shop", "/", json!({}))],
        json!({"haproxy.org/client-ca": "default/ca"}),
    );
    let output = build(&snapshot, &settings(UnsupportedAccess::Deny));
    assert!(denied_by_path(&output).values().all(|d| *d));
    let problem = &output.problems[0];
    assert_eq!(problem.object.kind, "Service");
    assert!(
        problem.message.contains("the routes to this Service"),
        "{problem}"
    );
}
