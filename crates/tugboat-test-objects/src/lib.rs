//! Typed Kubernetes objects for tests, one vocabulary shared by the model's tests, the
//! controller's and the end-to-end suites: Ingresses, IngressClasses, Services,
//! EndpointSlices, Secrets and ConfigMaps built as k8s-openapi values, then serialized
//! with serde: as JSON ([`to_json`]) for the fake API server or a model snapshot, or as
//! YAML ([`to_yaml`]) for a manifests folder. No object is assembled by hand as text.
//! The Gateway API kinds, which k8s-openapi does not declare, are in [`gateway`], in
//! their wire form.
//!
//! Builders are named `mk_*`; `with_*` functions take an object and return it changed.
//! Every namespaced object lives in namespace [`NAMESPACE`] unless [`in_namespace`]
//! moves it.

mod data;
pub mod gateway;
mod ingress;
mod service;

use std::collections::BTreeMap;

use k8s_openapi::Metadata;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::Serialize;

pub use data::{mk_basic_auth_secret, mk_ca_secret, mk_config_map, mk_secret, mk_tls_secret};
pub use ingress::{
    PathTo, exact, mk_annotated_ingress, mk_backend, mk_backend_to, mk_ingress, mk_ingress_class,
    mk_ingress_with_rules, mk_path, mk_rule, prefix, with_class, with_default_backend, with_tls,
};
pub use service::{
    mk_endpoint, mk_endpoint_slice, mk_endpoint_slice_named, mk_external_name_service, mk_service,
    with_endpoint_conditions, with_service_port,
};

/// The namespace objects are made in.
pub const NAMESPACE: &str = "default";
/// The prefix of Tugboat's annotation keys.
pub const KEY_PREFIX: &str = "tugboat.dev/";

/// The metadata of object `name` in [`NAMESPACE`].
fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(NAMESPACE.to_string()),
        ..ObjectMeta::default()
    }
}

/// The object with the annotations `tugboat.dev/KEY: value` for each `(KEY, value)`.
pub fn with_keys<K: Metadata<Ty = ObjectMeta>>(object: K, keys: &[(&str, &str)]) -> K {
    let full: Vec<(String, &str)> = keys
        .iter()
        .map(|(key, value)| (format!("{KEY_PREFIX}{key}"), *value))
        .collect();
    annotate(
        object,
        full.iter().map(|(name, value)| (name.as_str(), *value)),
    )
}

/// The object with these annotations, written with their full names (another
/// controller's prefix, for instance).
pub fn with_annotations<K: Metadata<Ty = ObjectMeta>>(
    object: K,
    annotations: &[(&str, &str)],
) -> K {
    annotate(object, annotations.iter().copied())
}

fn annotate<'a, K: Metadata<Ty = ObjectMeta>>(
    mut object: K,
    annotations: impl Iterator<Item = (&'a str, &'a str)>,
) -> K {
    let all = object
        .metadata_mut()
        .annotations
        .get_or_insert_with(BTreeMap::new);
    for (name, value) in annotations {
        all.insert(name.to_string(), value.to_string());
    }
    object
}

/// The object in namespace `namespace`.
pub fn in_namespace<K: Metadata<Ty = ObjectMeta>>(mut object: K, namespace: &str) -> K {
    object.metadata_mut().namespace = Some(namespace.to_string());
    object
}

/// The object with `metadata.creationTimestamp` `rfc3339` (e.g. `2024-01-01T00:00:00Z`).
/// Only a manifests folder or a model snapshot keeps it: an API server sets its own
/// when it creates the object.
pub fn with_creation_timestamp<K: Metadata<Ty = ObjectMeta>>(mut object: K, rfc3339: &str) -> K {
    let timestamp = rfc3339.parse().expect("an RFC 3339 timestamp");
    object.metadata_mut().creation_timestamp = Some(Time(timestamp));
    object
}

/// The object with `metadata.generation` `generation`, as the API server counts the
/// changes of its spec (status conditions carry it as `observedGeneration`).
pub fn with_generation<K: Metadata<Ty = ObjectMeta>>(mut object: K, generation: i64) -> K {
    object.metadata_mut().generation = Some(generation);
    object
}

/// Any object a test makes, for lists of mixed kinds (a snapshot, a manifests file).
/// It serializes as the object it holds, with its `apiVersion` and `kind`.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
#[allow(
    clippy::large_enum_variant,
    reason = "a test holds a handful of objects: boxing one kind would only add noise"
)]
pub enum Object {
    Ingress(Ingress),
    IngressClass(IngressClass),
    Service(Service),
    EndpointSlice(EndpointSlice),
    Secret(Secret),
    ConfigMap(ConfigMap),
}

macro_rules! object_from {
    ($($kind:ident),*) => {
        $(impl From<$kind> for Object {
            fn from(object: $kind) -> Self {
                Object::$kind(object)
            }
        })*
    };
}

object_from!(
    Ingress,
    IngressClass,
    Service,
    EndpointSlice,
    Secret,
    ConfigMap
);

/// An object as JSON, with its `apiVersion` and `kind`.
pub fn to_json(object: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(object).expect("a Kubernetes object serializes")
}

/// Objects as one YAML text of several documents, for a manifests folder file.
pub fn to_yaml(objects: &[impl Serialize]) -> String {
    objects
        .iter()
        .map(|object| serde_yaml_ng::to_string(object).expect("a Kubernetes object serializes"))
        .collect::<Vec<_>>()
        .join("---\n")
}

#[cfg(test)]
mod tests;
