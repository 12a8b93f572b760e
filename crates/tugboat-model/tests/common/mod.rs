//! Shared by the model's tests: Ingresses, Services and EndpointSlices written as JSON
//! (the Service the annotation keys' test Ingresses route to among them), a snapshot of
//! such objects, a build at a fixed time, and its one problem.

// Each test file uses the part it needs.
#![allow(dead_code)]

use std::sync::Arc;

use serde_json::{Value, json};
use tugboat_model::features::RouteFeatures;
use tugboat_model::{BuildOutput, ObjectKey, ObjectProblem, PathMatch, Settings, Snapshot, build};

/// The Service `default/name` with port 80, named `port_name`.
pub fn service(name: &str, port_name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"ports": [{"name": port_name, "port": 80}]},
    })
}

/// The Service `default/web` (port 80, named `http`) with `annotations`.
pub fn web_service(annotations: Value) -> Value {
    let mut web = service("web", "http");
    web["metadata"]["annotations"] = annotations;
    web
}

/// The EndpointSlice `default/{service}-1` of `service`: `endpoints` on `port`, named
/// `port_name`.
pub fn endpoint_slice(service: &str, port_name: &str, port: u16, endpoints: Value) -> Value {
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{service}-1"), "namespace": "default",
                     "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "ports": [{"name": port_name, "port": port}],
        "endpoints": endpoints,
    })
}

/// The Ingress `default/name` created at `created`, with `annotations` and `spec`.
pub fn ingress(name: &str, created: &str, annotations: Value, spec: Value) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": created,
                     "annotations": annotations},
        "spec": spec,
    })
}

/// A rule of an Ingress: `paths` for `host`, or for any host.
pub fn rule(host: Option<&str>, paths: Value) -> Value {
    let mut rule = json!({"http": {"paths": paths}});
    if let Some(host) = host {
        rule["host"] = json!(host);
    }
    rule
}

/// A path of an Ingress rule to `service` at `port` (`{"number": 80}`, `{"name": ..}`).
pub fn path(path: &str, path_type: &str, service: &str, port: Value) -> Value {
    json!({"path": path, "pathType": path_type,
           "backend": {"service": {"name": service, "port": port}}})
}

/// An Ingress `default/name` routing `shop.example.com` + `path` (Prefix) to `web`, with
/// `annotations`.
pub fn shop_ingress(name: &str, path: &str, annotations: Value) -> Value {
    let paths = json!([self::path(path, "Prefix", "web", json!({"number": 80}))]);
    ingress(
        name,
        "2024-01-01T00:00:00Z",
        annotations,
        json!({"rules": [rule(Some("shop.example.com"), paths)]}),
    )
}

/// A snapshot of `objects` (Ingresses, Services and EndpointSlices), each where its kind
/// goes.
pub fn snapshot_of(objects: impl IntoIterator<Item = Value>) -> Snapshot {
    let mut snapshot = Snapshot::default();
    for object in objects {
        let key = ObjectKey::new(
            object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default"),
            object["metadata"]["name"].as_str().expect("a name"),
        );
        match object["kind"].as_str() {
            Some("Ingress") => {
                let ingress = serde_json::from_value(object).expect("Ingress");
                snapshot.ingresses.insert(key, Arc::new(ingress));
            }
            Some("Service") => {
                let service = serde_json::from_value(object).expect("Service");
                snapshot.services.insert(key, Arc::new(service));
            }
            Some("EndpointSlice") => {
                let slice = serde_json::from_value(object).expect("EndpointSlice");
                snapshot.endpoint_slices.insert(key, Arc::new(slice));
            }
            other => panic!("no place in a test snapshot for kind {other:?}"),
        }
    }
    snapshot
}

/// The build of `snapshot` at a fixed time.
pub fn build_at_fixed_time(snapshot: &Snapshot) -> BuildOutput {
    build(snapshot, &Settings::new(1_700_000_000))
}

/// The build of `ingresses` and the Service `web` without annotations.
pub fn build_with_web(ingresses: impl IntoIterator<Item = Value>) -> BuildOutput {
    let objects = ingresses.into_iter().chain([web_service(json!({}))]);
    build_at_fixed_time(&snapshot_of(objects))
}

/// The one problem of a build; fails the test when there are none or more.
pub fn only_problem(output: &BuildOutput) -> &ObjectProblem {
    let [problem] = output.problems.as_slice() else {
        panic!("one problem expected: {:?}", output.problems);
    };
    problem
}

/// The feature set of the route of the Prefix path `path`, which must exist.
pub fn prefix_route_features<'o>(output: &'o BuildOutput, path: &str) -> Option<&'o RouteFeatures> {
    let route = output
        .desired
        .routes
        .iter()
        .find(|r| r.path == PathMatch::Prefix(path.into()))
        .unwrap_or_else(|| panic!("a route {path}: {:?}", output.desired.routes));
    route
        .features
        .as_ref()
        .and_then(|id| output.desired.feature_sets.get(id))
}

/// The fields of the problems of the objects called `name`.
pub fn problem_fields(output: &BuildOutput, name: &str) -> Vec<String> {
    output
        .problems
        .iter()
        .filter(|p| *p.object.name == *name)
        .map(|p| p.field.clone())
        .collect()
}
