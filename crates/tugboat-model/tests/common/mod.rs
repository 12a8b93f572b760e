//! Shared by the model's tests: the typed objects of `tugboat-test-objects` as these
//! tests use them (Ingresses without a class and with their age, the Service the
//! annotation keys' test Ingresses route to), a snapshot of such objects, a build at a
//! fixed time, and its one problem.

// Each test file uses the part it needs.
#![allow(dead_code)]

use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointSlice};
use k8s_openapi::api::networking::v1::{Ingress, IngressRule};
use tugboat_model::features::RouteFeatures;
use tugboat_model::{BuildOutput, ObjectKey, ObjectProblem, PathMatch, Settings, Snapshot, build};
pub use tugboat_test_objects::*;

/// The Service `default/name` with port 80, named `port_name`.
pub fn service(name: &str, port_name: &str) -> Service {
    mk_service(name, port_name, 80)
}

/// The Service `default/web` (port 80, named `http`) with `annotations`.
pub fn web_service(annotations: &[(&str, &str)]) -> Service {
    with_annotations(service("web", "http"), annotations)
}

/// The EndpointSlice `default/{service}-1` of `service`: `endpoints` on `port`, named
/// `port_name`.
pub fn endpoint_slice(
    service: &str,
    port_name: &str,
    port: i32,
    endpoints: Vec<Endpoint>,
) -> EndpointSlice {
    mk_endpoint_slice_named(
        &format!("{service}-1"),
        service,
        port_name,
        Some(port),
        endpoints,
    )
}

/// The Ingress `default/name` (without a class) created at `created`, with
/// `annotations` and `rules`.
pub fn ingress(
    name: &str,
    created: &str,
    annotations: &[(&str, &str)],
    rules: Vec<IngressRule>,
) -> Ingress {
    let ingress = with_class(mk_ingress_with_rules(name, rules), None);
    with_annotations(with_creation_timestamp(ingress, created), annotations)
}

/// An Ingress `default/name` routing `shop.example.com` + `path` (Prefix) to `web`, with
/// `annotations`.
pub fn shop_ingress(name: &str, path: &str, annotations: &[(&str, &str)]) -> Ingress {
    ingress(
        name,
        "2024-01-01T00:00:00Z",
        annotations,
        vec![mk_rule(Some("shop.example.com"), &[prefix(path, "web")])],
    )
}

/// The build of `ingresses` and the Service `web`, with the controller's ConfigMap
/// `ops/tugboat` holding `data`.
pub fn build_with_config_map(
    ingresses: impl IntoIterator<Item = Ingress>,
    data: &[(&str, &str)],
) -> BuildOutput {
    let config_map = in_namespace(mk_config_map("tugboat", data), "ops");
    let snapshot = snapshot_of(
        ingresses
            .into_iter()
            .map(Object::from)
            .chain([web_service(&[]).into(), config_map.into()]),
    );
    let settings = Settings {
        config_map: Some(ObjectKey::new("ops", "tugboat")),
        ..Settings::new(1_700_000_000)
    };
    build(&snapshot, &settings)
}

/// A snapshot of `objects`, each where its kind goes, read from their JSON as the API
/// source reads them.
pub fn snapshot_of(objects: impl IntoIterator<Item = impl Into<Object>>) -> Snapshot {
    let mut snapshot = Snapshot::default();
    for object in objects {
        let object = object.into();
        let json = to_json(&object);
        let key = ObjectKey::new(
            json["metadata"]["namespace"].as_str().unwrap_or("default"),
            json["metadata"]["name"].as_str().expect("a name"),
        );
        match object {
            Object::Ingress(_) => {
                let ingress = serde_json::from_value(json).expect("Ingress");
                snapshot.ingresses.insert(key, Arc::new(ingress));
            }
            Object::Service(_) => {
                let service = serde_json::from_value(json).expect("Service");
                snapshot.services.insert(key, Arc::new(service));
            }
            Object::EndpointSlice(_) => {
                let slice = serde_json::from_value(json).expect("EndpointSlice");
                snapshot.endpoint_slices.insert(key, Arc::new(slice));
            }
            Object::Secret(secret) => {
                snapshot.secrets.insert(key, Arc::new(secret));
            }
            Object::ConfigMap(config_map) => {
                snapshot.config_maps.insert(key, Arc::new(config_map));
            }
            Object::IngressClass(_) => panic!("no place in a snapshot for an IngressClass"),
        }
    }
    snapshot
}

/// The build of `snapshot` at a fixed time.
pub fn build_at_fixed_time(snapshot: &Snapshot) -> BuildOutput {
    build(snapshot, &Settings::new(1_700_000_000))
}

/// The build of `ingresses` and the Service `web` without annotations.
pub fn build_with_web(ingresses: impl IntoIterator<Item = Ingress>) -> BuildOutput {
    let objects = ingresses
        .into_iter()
        .map(Object::from)
        .chain([web_service(&[]).into()]);
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
