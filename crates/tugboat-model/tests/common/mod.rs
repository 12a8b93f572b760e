//! Shared by the model's tests of annotation keys: the Service the test Ingresses route
//! to, a snapshot of objects written as JSON, and a build at a fixed time.

// Each test file uses the part it needs.
#![allow(dead_code)]

use std::sync::Arc;

use serde_json::{Value, json};
use tugboat_model::{BuildOutput, ObjectKey, Settings, Snapshot, build};

/// The Service `default/web` (port 80, named `http`) with `annotations`.
pub fn web_service(annotations: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default", "annotations": annotations},
        "spec": {"ports": [{"name": "http", "port": 80}]},
    })
}

/// An Ingress `default/name` routing `shop.example.com` + `path` (Prefix) to `web`, with
/// `annotations`.
pub fn shop_ingress(name: &str, path: &str, annotations: Value) -> Value {
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

/// A snapshot of `objects` (Ingresses and Services), each where its kind goes.
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
