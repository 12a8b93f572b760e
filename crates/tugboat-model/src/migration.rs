//! The migration report (`tugboat migrate`): for Ingresses written for ingress-nginx or
//! the HAProxy controllers, what Tugboat does with each of their keys (supported,
//! supported with a difference, not supported), the IngressClass change to make, and
//! the basic-auth Secrets haproxy cannot use as they are. Pure: the caller reads the
//! objects from a folder or a cluster.

use std::collections::BTreeMap;

use crate::objects::Ingress;
use k8s_openapi::api::core::v1::Secret;
use serde::Serialize;

use crate::annotations::keys::{Scope, targets};
use crate::annotations::peers::not_supported_reason;
use crate::annotations::prefixes;
use crate::annotations::{Layer, UnsupportedAccess};
use crate::auth::users_from_secret;
use crate::problem::ObjectRef;
use crate::snapshot::{ObjectKey, Objects};
use crate::validate::printable;

/// The annotation that named an Ingress' class before `spec.ingressClassName`.
pub const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";

/// What Tugboat does with one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Supported,
    SupportedWithDifference,
    NotSupported,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Supported => "supported",
            Status::SupportedWithDifference => "supported with a difference",
            Status::NotSupported => "not supported",
        }
    }
}

/// One annotation of an Ingress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyReport {
    /// The annotation's full name.
    pub annotation: String,
    /// The controller whose prefix it has.
    pub controller: &'static str,
    pub status: Status,
    /// The Tugboat keys it is read as.
    pub tugboat_keys: Vec<&'static str>,
    /// The difference, or why it is not supported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Whether it restricts access: then, not supported, its routes answer 403.
    pub restricts_access: bool,
}

/// One Ingress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IngressReport {
    pub namespace: String,
    pub name: String,
    /// The class it asks for now (`spec.ingressClassName` or the old annotation).
    pub class: Option<String>,
    /// What to change so that Tugboat serves it; `None`: nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class_change: Option<String>,
    /// The manifest's API version is one Kubernetes no longer serves: how to rewrite
    /// it (the report reads it as rewritten).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version_change: Option<String>,
    pub keys: Vec<KeyReport>,
}

/// A basic-auth Secret that haproxy cannot use as it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecretReport {
    pub namespace: String,
    pub name: String,
    /// The Ingresses that use it (`namespace/name`).
    pub used_by: Vec<String>,
    /// What is wrong (never a hash).
    pub problem: String,
    /// How to make a hash haproxy verifies.
    pub command: &'static str,
}

/// The whole report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub ingresses: Vec<IngressReport>,
    pub secrets: Vec<SecretReport>,
}

/// How to make a password hash haproxy verifies, for the `auth` key of a Secret.
pub const HASH_COMMAND: &str = "htpasswd -nbB USER PASSWORD (bcrypt; or: openssl passwd -6 PASSWORD for SHA-512-crypt), one user:hash line per user in the Secret's auth key";

impl Report {
    /// Counts of keys by status.
    pub fn count(&self, status: Status) -> usize {
        self.ingresses
            .iter()
            .flat_map(|i| &i.keys)
            .filter(|k| k.status == status)
            .count()
    }

    /// Notes the Ingresses that were written with an old API version (`OLD_INGRESS_VERSIONS`,
    /// read with [`ingress_v1_from_v1beta1`]): key -> the version written.
    pub fn note_api_versions(&mut self, written: &BTreeMap<ObjectKey, String>) {
        for ingress in &mut self.ingresses {
            let key = ObjectKey::new(&ingress.namespace, &ingress.name);
            if let Some(version) = written.get(&key) {
                ingress.api_version_change = Some(format!(
                    "rewrite it as networking.k8s.io/v1 (now: {}; Kubernetes 1.22 and later \
                     serve no other): serviceName/servicePort become service.name and \
                     service.port.number or .name, spec.backend becomes spec.defaultBackend, \
                     and each path needs a pathType (ImplementationSpecific where it had none)",
                    printable(version)
                ));
            }
        }
    }

    /// Whether everything moves as it is (no key unsupported, no Secret to fix).
    pub fn all_supported(&self) -> bool {
        self.count(Status::NotSupported) == 0 && self.secrets.is_empty()
    }
}

/// The report of `ingresses`, for Tugboat's IngressClass `class`; `secrets` are those
/// at hand (the basic-auth Secrets the Ingresses name are checked when present).
pub fn report(ingresses: &Objects<Ingress>, secrets: &Objects<Secret>, class: &str) -> Report {
    let mut report = Report::default();
    let mut auth_secrets: BTreeMap<ObjectKey, Vec<String>> = BTreeMap::new();
    for (key, ingress) in ingresses {
        let annotations = ingress.metadata.annotations.as_ref();
        let keys = annotations
            .into_iter()
            .flatten()
            .filter_map(|(name, value)| key_report(name, value, &key.namespace))
            .collect();
        let requested = ingress
            .spec
            .as_ref()
            .and_then(|s| s.ingress_class_name.clone())
            .or_else(|| annotations.and_then(|a| a.get(CLASS_ANNOTATION)).cloned());
        report.ingresses.push(IngressReport {
            namespace: key.namespace.to_string(),
            name: key.name.to_string(),
            class_change: class_change(ingress, requested.as_deref(), class),
            api_version_change: None,
            class: requested,
            keys,
        });
        if let Some(secret) = auth_secret(key, annotations) {
            auth_secrets
                .entry(ObjectKey::new(&key.namespace, &secret))
                .or_default()
                .push(format!("{}/{}", key.namespace, key.name));
        }
    }
    for (secret_key, used_by) in auth_secrets {
        let Some(secret) = secrets.get(&secret_key) else {
            continue;
        };
        if let Err(problem) = users_from_secret(secret) {
            report.secrets.push(SecretReport {
                namespace: secret_key.namespace.to_string(),
                name: secret_key.name.to_string(),
                used_by,
                problem,
                command: HASH_COMMAND,
            });
        }
    }
    report
}

/// The basic-auth Secrets the Ingresses name (to fetch before [`report`]).
pub fn auth_secrets(ingresses: &Objects<Ingress>) -> Vec<ObjectKey> {
    let mut found: Vec<ObjectKey> = ingresses
        .iter()
        .filter_map(|(key, ingress)| {
            let name = auth_secret(key, ingress.metadata.annotations.as_ref())?;
            Some(ObjectKey::new(&key.namespace, name))
        })
        .collect();
    found.sort();
    found.dedup();
    found
}

/// The basic-auth Secret an Ingress names, whatever the prefix: the same reading as
/// the builder's.
fn auth_secret(key: &ObjectKey, annotations: Option<&BTreeMap<String, String>>) -> Option<String> {
    let object = ObjectRef::of("Ingress", key);
    let mut problems = Vec::new();
    let layer = Layer::from_annotations(
        object,
        Scope::Ingress,
        annotations,
        UnsupportedAccess::Deny,
        &mut problems,
    );
    let mut values: BTreeMap<&str, &str> = layer.values().collect();
    values.remove("auth-type")?;
    values.get("auth-secret").map(|s| s.to_string())
}

/// The API versions Ingresses had before `networking.k8s.io/v1`, which Kubernetes 1.22
/// stopped serving; manifests in repositories still have them.
pub const OLD_INGRESS_VERSIONS: &[&str] = &["extensions/v1beta1", "networking.k8s.io/v1beta1"];

/// An Ingress written as `extensions/v1beta1` or `networking.k8s.io/v1beta1`, rewritten
/// as `networking.k8s.io/v1` the way the API server converted it: `serviceName` and
/// `servicePort` become `service.name` and `service.port.number` (a number) or
/// `service.port.name` (a string), `spec.backend` becomes `spec.defaultBackend`, and a
/// path without `pathType` gets `ImplementationSpecific` (v1beta1's default). Every
/// other field is kept. The error names the field (as written) and what is wrong.
pub fn ingress_v1_from_v1beta1(
    mut object: serde_json::Value,
) -> Result<serde_json::Value, (String, String)> {
    use serde_json::{Value, json};
    fn backend(value: &mut Value, field: &str) -> Result<(), (String, String)> {
        let Value::Object(map) = value else {
            return Err((field.to_string(), "expected a mapping".into()));
        };
        let name = map.remove("serviceName");
        let port = map.remove("servicePort");
        if map.contains_key("resource") {
            if name.is_some() || port.is_some() {
                return Err((
                    field.to_string(),
                    "a backend is either serviceName/servicePort or resource, not both".into(),
                ));
            }
            return Ok(());
        }
        let name = match name {
            Some(Value::String(name)) => name,
            _ => {
                return Err((
                    format!("{field}.serviceName"),
                    "expected the name of a Service".into(),
                ));
            }
        };
        let port = match port {
            Some(Value::Number(number)) => json!({ "number": number }),
            Some(Value::String(port)) => json!({ "name": port }),
            _ => {
                return Err((
                    format!("{field}.servicePort"),
                    "expected a port number or name".into(),
                ));
            }
        };
        map.insert("service".into(), json!({ "name": name, "port": port }));
        Ok(())
    }
    if let Value::Object(map) = &mut object {
        map.insert("apiVersion".into(), "networking.k8s.io/v1".into());
    }
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(object);
    };
    if let Some(mut default) = spec.remove("backend") {
        backend(&mut default, "spec.backend")?;
        spec.insert("defaultBackend".into(), default);
    }
    let rules = spec.get_mut("rules").and_then(Value::as_array_mut);
    for (r, rule) in rules.into_iter().flatten().enumerate() {
        let paths = rule
            .get_mut("http")
            .and_then(|http| http.get_mut("paths"))
            .and_then(Value::as_array_mut);
        for (p, path) in paths.into_iter().flatten().enumerate() {
            let field = format!("spec.rules[{r}].http.paths[{p}]");
            let Value::Object(path) = path else {
                return Err((field, "expected a mapping".into()));
            };
            path.entry("pathType")
                .or_insert_with(|| "ImplementationSpecific".into());
            match path.get_mut("backend") {
                Some(value) => backend(value, &format!("{field}.backend"))?,
                None => return Err((format!("{field}.backend"), "missing".into())),
            }
        }
    }
    Ok(object)
}

/// What to change so that Tugboat's class `class` serves the Ingress.
fn class_change(ingress: &Ingress, requested: Option<&str>, class: &str) -> Option<String> {
    let in_spec = ingress
        .spec
        .as_ref()
        .and_then(|s| s.ingress_class_name.as_deref());
    match (in_spec, requested) {
        (Some(name), _) if name == class => None,
        (Some(name), _) => Some(format!(
            "set spec.ingressClassName: {class} (now: {})",
            printable(name)
        )),
        (None, Some(name)) => Some(format!(
            "set spec.ingressClassName: {class} and remove the {CLASS_ANNOTATION} annotation (now: {})",
            printable(name)
        )),
        (None, None) => Some(format!(
            "set spec.ingressClassName: {class}, or make the IngressClass {class} the cluster's default"
        )),
    }
}

/// The report of one annotation; `None` when its prefix is no controller's Tugboat
/// knows.
fn key_report(annotation: &str, value: &str, namespace: &str) -> Option<KeyReport> {
    let (ecosystem, name) = prefixes::split_annotation(annotation)?;
    // The reading of the builder ([`Layer::from_annotations`]).
    let targets = targets(ecosystem, name);
    let unread = if targets.is_empty() {
        prefixes::unread_restriction(ecosystem, name, value)
    } else {
        None
    };
    let restricts = unread.is_some() || prefixes::restricts_access(name);
    let mut report = KeyReport {
        annotation: annotation.to_string(),
        controller: ecosystem.controller(),
        status: Status::Supported,
        tugboat_keys: Vec::new(),
        note: None,
        restricts_access: restricts,
    };
    if targets.is_empty() {
        report.status = Status::NotSupported;
        let reason = not_supported_reason(ecosystem, name).unwrap_or("Tugboat has no such key");
        report.note = Some(match unread.flatten() {
            Some(directive) => format!("{reason}; its {} restricts access", printable(&directive)),
            None => reason.to_string(),
        });
        return Some(report);
    }
    let mut differences = Vec::new();
    for (spec, peer) in targets {
        report.tugboat_keys.push(spec.name);
        if !spec.scopes.contains(&Scope::Ingress) {
            report.status = Status::NotSupported;
            report.note = Some(format!(
                "{} is set in the controller's ConfigMap, not on an Ingress",
                spec.name
            ));
            return Some(report);
        }
        let translated = match peer.and_then(|p| p.translate) {
            None => Ok(Some(value.to_string())),
            Some(translate) => translate(value, namespace),
        };
        let checked = translated.and_then(|v| match v {
            Some(v) => (spec.check)(&v),
            None => Ok(()),
        });
        if let Err(expected) = checked {
            report.status = Status::NotSupported;
            report.note = Some(format!(
                "the value '{}' is not supported: expected {expected}",
                printable(value)
            ));
            return Some(report);
        }
        differences.extend(peer.and_then(|p| p.difference));
    }
    if !differences.is_empty() {
        report.status = Status::SupportedWithDifference;
        report.note = Some(differences.join("; "));
    }
    Some(report)
}

/// The report as text, one line per key.
pub fn text(report: &Report) -> String {
    let mut out = String::new();
    for ingress in &report.ingresses {
        out.push_str(&format!("Ingress {}/{}\n", ingress.namespace, ingress.name));
        if let Some(change) = &ingress.api_version_change {
            out.push_str(&format!("  apiVersion: {change}\n"));
        }
        if let Some(change) = &ingress.class_change {
            out.push_str(&format!("  class: {change}\n"));
        }
        for key in &ingress.keys {
            let mut line = format!("  {}: {}", key.status.as_str(), key.annotation);
            let ours: Vec<&str> = key
                .tugboat_keys
                .iter()
                .copied()
                .filter(|k| !key.annotation.ends_with(&format!("/{k}")))
                .collect();
            if !ours.is_empty() {
                line.push_str(&format!(" (as {})", ours.join(", ")));
            }
            if let Some(note) = &key.note {
                line.push_str(&format!(": {note}"));
            }
            if key.status == Status::NotSupported && key.restricts_access {
                line.push_str(" [restricts access: its routes will answer 403]");
            }
            out.push_str(&line);
            out.push('\n');
        }
    }
    for secret in &report.secrets {
        out.push_str(&format!(
            "Secret {}/{} (used by {}): {}; make a supported hash with: {}\n",
            secret.namespace,
            secret.name,
            secret.used_by.join(", "),
            secret.problem,
            secret.command
        ));
    }
    out.push_str(&format!(
        "{} Ingress(es): {} key(s) supported, {} supported with a difference, {} not supported; {} Secret(s) to fix\n",
        report.ingresses.len(),
        report.count(Status::Supported),
        report.count(Status::SupportedWithDifference),
        report.count(Status::NotSupported),
        report.secrets.len()
    ));
    out
}

#[cfg(test)]
mod tests;
