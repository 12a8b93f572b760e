//! A folder of YAML manifests as the source of objects (`--manifests DIR`).
//!
//! Every `*.yaml`, `*.yml` and `*.json` file under the folder is read, with any number of
//! documents per file and `kind: List` expanded. Ingress and IngressClass
//! (networking.k8s.io/v1), Service, Secret, ConfigMap (v1) and EndpointSlice
//! (discovery.k8s.io/v1) are kept, and with `--enable-gateway-api` GatewayClass,
//! Gateway, HTTPRoute (gateway.networking.k8s.io/v1), ReferenceGrant (v1beta1) and
//! Namespace (v1); other kinds are ignored. A document that does not
//! parse is reported with its file, document number, object and field, and skipped;
//! everything else still loads. The folder is then followed live: files added, edited
//! or removed publish a new snapshot at once. A file is read again when its writer
//! closes it or renames it into place, never while it is being written; the changes
//! that arrive while the folder is read go into the next read.
//!
//! The folder is served as the cluster is ([`served`]): the model picks the Ingresses
//! of this controller's classes with the same flags (`--controller-class`,
//! `--ingress-class`, `--watch-ingress-without-class`) and keeps only the Secrets and
//! ConfigMaps they refer to. A folder that holds no IngressClass at all is a folder
//! written by hand, not exported from a cluster: its Ingresses that name no class are
//! served (as with `--watch-ingress-without-class`); those that name a class are not,
//! since no IngressClass says that class is ours.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::networking::v1::IngressClass;
use notify::{RecursiveMode, Watcher};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tugboat_model::class::{ClassFilter, ClassInfo, requested_class};
use tugboat_model::objects::{EndpointSlice, Ingress, Service};
use tugboat_model::{ObjectKey, Objects, Settings, Snapshot};

/// Something wrong in one document of one file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ManifestProblem {
    pub file: PathBuf,
    /// 1-based number of the document in the file (0 for the file as a whole).
    pub document: usize,
    /// `Kind namespace/name`, when known.
    pub object: Option<String>,
    /// Path of the offending field, when known.
    pub field: Option<String>,
    pub message: String,
}

impl fmt::Display for ManifestProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if self.document > 0 {
            write!(f, " (document {})", self.document)?;
        }
        if let Some(object) = &self.object {
            write!(f, ": {object}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// What a folder holds: the objects, and the problems met reading them.
#[derive(Debug, Clone, Default)]
pub struct FolderContents {
    /// Every object of the folder, served or not.
    pub snapshot: Snapshot,
    /// The IngressClasses, by name (the namespace of the key is empty).
    pub ingress_classes: Objects<IngressClass>,
    /// Ingresses written with an API version Kubernetes no longer serves
    /// (`extensions/v1beta1`, `networking.k8s.io/v1beta1`), read as
    /// `networking.k8s.io/v1` for `tugboat migrate`, with the version written. They are
    /// never served (the cluster would not take them either): each is also a problem.
    pub old_ingresses: std::collections::BTreeMap<ObjectKey, (String, Arc<Ingress>)>,
    pub problems: Vec<ManifestProblem>,
}

/// What a folder serves: the snapshot the controller builds from, and the Ingresses
/// left out because their class is not this controller's.
#[derive(Debug, Clone, Default)]
pub struct Served {
    pub snapshot: Snapshot,
    /// Ingress -> why it is not served.
    pub not_served: Vec<(ObjectKey, String)>,
}

/// The part of a folder this controller serves, decided by the model as for the
/// cluster: the Ingresses of its classes, and the Secrets and ConfigMaps they (and
/// their Services, the controller's ConfigMap and the flags) refer to. A folder with no
/// IngressClass serves the Ingresses that name no class (see the module's doc).
pub fn served(contents: &FolderContents, class: &ClassFilter, settings: &Settings) -> Served {
    let classes: Vec<ClassInfo> = contents
        .ingress_classes
        .values()
        .map(|c| ClassInfo::from_ingress_class(c))
        .collect();
    let mut filter = class.clone();
    if classes.is_empty() {
        filter.watch_without_class = true;
    }
    let all = &contents.snapshot;
    let mut snapshot = all.clone();
    snapshot.ingresses = filter.served_ingresses(&all.ingresses, &classes);
    let not_served = all
        .ingresses
        .iter()
        .filter(|(key, _)| !snapshot.ingresses.contains_key(*key))
        .map(|(key, ingress)| {
            let why = filter.why_not_served(requested_class(ingress), &classes);
            (key.clone(), why)
        })
        .collect();
    if settings.gateway.is_none() {
        snapshot.gateway_classes = Objects::default();
        snapshot.gateways = Objects::default();
        snapshot.http_routes = Objects::default();
        snapshot.reference_grants = Objects::default();
        snapshot.namespaces = Objects::default();
    }
    tugboat_model::references(&snapshot, settings).narrow(&mut snapshot);
    Served {
        snapshot,
        not_served,
    }
}

/// Reads every manifest under `dir`. Fails only when the folder itself cannot be read.
///
/// Blocking: `tugboat render` and `tugboat migrate` call it outside any async runtime;
/// [`watch_folder`] still calls it on the runtime.
#[allow(
    clippy::disallowed_methods,
    reason = "blocking by design; its callers choose where it runs (see above)"
)]
pub fn load_folder(dir: &Path) -> std::io::Result<FolderContents> {
    let mut files = Vec::new();
    collect_files(dir, &mut files)?;
    files.sort();
    let mut contents = FolderContents::default();
    for file in files {
        match std::fs::read_to_string(&file) {
            Ok(text) => parse_file(&file, &text, &mut contents),
            Err(err) => contents.problems.push(ManifestProblem {
                file,
                document: 0,
                object: None,
                field: None,
                message: format!("cannot read the file: {err}"),
            }),
        }
    }
    Ok(contents)
}

/// The manifest files under `dir`, for [`load_folder`]. Blocking.
#[allow(
    clippy::disallowed_methods,
    reason = "part of load_folder, which is blocking by design"
)]
fn collect_files(dir: &Path, into: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        if hidden {
            continue;
        }
        if entry.file_type()?.is_dir() {
            collect_files(&path, into)?;
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            into.push(path);
        }
    }
    Ok(())
}

/// Parses every document of one file into `contents`.
pub fn parse_file(file: &Path, text: &str, contents: &mut FolderContents) {
    for (index, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let number = index + 1;
        let problem =
            |object: Option<String>, field: Option<String>, message: String| ManifestProblem {
                file: file.to_path_buf(),
                document: number,
                object,
                field,
                message,
            };
        match Value::deserialize(document) {
            Ok(Value::Null) => {}
            Ok(value) => add_object(value, &problem, contents),
            Err(err) => {
                contents
                    .problems
                    .push(problem(None, None, format!("not valid YAML: {err}")));
                // After a syntax error the rest of the stream cannot be trusted.
                break;
            }
        }
    }
}

fn add_object(
    value: Value,
    problem: &dyn Fn(Option<String>, Option<String>, String) -> ManifestProblem,
    contents: &mut FolderContents,
) {
    let Value::Object(map) = &value else {
        contents.problems.push(problem(
            None,
            None,
            "expected a Kubernetes object (a mapping with apiVersion and kind)".into(),
        ));
        return;
    };
    let text = |key: &str| {
        map.get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    if kind == "List" {
        if let Some(Value::Array(items)) = map.get("items") {
            for item in items.clone() {
                add_object(item, problem, contents);
            }
        }
        return;
    }
    let expected = match kind.as_str() {
        "Ingress" | "IngressClass" => "networking.k8s.io/v1",
        "Service" | "Secret" | "ConfigMap" => "v1",
        "EndpointSlice" => "discovery.k8s.io/v1",
        "GatewayClass" | "Gateway" | "HTTPRoute" => "gateway.networking.k8s.io/v1",
        "ReferenceGrant" => "gateway.networking.k8s.io/v1beta1",
        "Namespace" => "v1",
        "" => {
            contents
                .problems
                .push(problem(None, Some("kind".into()), "missing kind".into()));
            return;
        }
        other => {
            tracing::debug!(
                kind = other,
                "ignoring a manifest of a kind Tugboat does not use"
            );
            return;
        }
    };
    let meta = map.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let namespace = meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .filter(|ns| !ns.is_empty())
        .unwrap_or("default")
        .to_string();
    let cluster_scoped = matches!(kind.as_str(), "IngressClass" | "GatewayClass" | "Namespace");
    let (namespace, object) = if cluster_scoped {
        (String::new(), Some(format!("{kind} {name}")))
    } else {
        let object = Some(format!("{kind} {namespace}/{name}"));
        (namespace, object)
    };
    if kind == "Ingress"
        && tugboat_model::migration::OLD_INGRESS_VERSIONS.contains(&api_version.as_str())
        && !name.is_empty()
    {
        old_ingress(value.clone(), &api_version, &namespace, &name, contents).unwrap_or_else(
            |(field, message)| {
                contents
                    .problems
                    .push(problem(object.clone(), Some(field), message));
            },
        );
    }
    if api_version != expected {
        contents.problems.push(problem(
            object,
            Some("apiVersion".into()),
            format!("apiVersion '{api_version}' is not supported for {kind}: use {expected}"),
        ));
        return;
    }
    if name.is_empty() {
        contents.problems.push(problem(
            object,
            Some("metadata.name".into()),
            "missing metadata.name".into(),
        ));
        return;
    }
    let key = ObjectKey::new(namespace, name);
    let snapshot = &mut contents.snapshot;
    let result = match kind.as_str() {
        "Ingress" => insert::<Ingress>(value, &key, &mut snapshot.ingresses, |o| {
            &mut o.metadata.namespace
        }),
        "Service" => insert::<Service>(value, &key, &mut snapshot.services, |o| {
            &mut o.metadata.namespace
        }),
        "Secret" => insert::<Secret>(value, &key, &mut snapshot.secrets, |o| {
            // As the API server does: stringData is merged into data.
            let data = o.data.get_or_insert_default();
            for (k, v) in o.string_data.take().unwrap_or_default() {
                data.insert(k, k8s_openapi::ByteString(v.into_bytes()));
            }
            &mut o.metadata.namespace
        }),
        "ConfigMap" => insert::<ConfigMap>(value, &key, &mut snapshot.config_maps, |o| {
            &mut o.metadata.namespace
        }),
        "IngressClass" => insert::<IngressClass>(value, &key, &mut contents.ingress_classes, |o| {
            &mut o.metadata.namespace
        }),
        "GatewayClass" => insert(value, &key, &mut snapshot.gateway_classes, |o| {
            &mut o.metadata.namespace
        }),
        "Gateway" => insert(value, &key, &mut snapshot.gateways, |o| {
            &mut o.metadata.namespace
        }),
        "HTTPRoute" => insert(value, &key, &mut snapshot.http_routes, |o| {
            &mut o.metadata.namespace
        }),
        "ReferenceGrant" => insert(value, &key, &mut snapshot.reference_grants, |o| {
            &mut o.metadata.namespace
        }),
        "Namespace" => insert(value, &key, &mut snapshot.namespaces, |o| {
            &mut o.metadata.namespace
        }),
        _ => insert::<EndpointSlice>(value, &key, &mut snapshot.endpoint_slices, |o| {
            &mut o.metadata.namespace
        }),
    };
    if let Err((field, message)) = result {
        // A parse error can quote the value; a Secret's values are never shown.
        let message = if kind == "Secret" {
            "this field does not have the expected type (the value is not shown: it is \
             Secret data)"
                .to_string()
        } else {
            message
        };
        contents.problems.push(problem(object, field, message));
    }
}

/// Parses one object and stores it under `key`; the error names the field at fault.
/// An Ingress of an old API version, read as `networking.k8s.io/v1` into
/// [`FolderContents::old_ingresses`].
fn old_ingress(
    value: Value,
    api_version: &str,
    namespace: &str,
    name: &str,
    contents: &mut FolderContents,
) -> Result<(), (String, String)> {
    let value = tugboat_model::migration::ingress_v1_from_v1beta1(value)?;
    let key = ObjectKey::new(namespace, name);
    let mut read = Objects::default();
    insert::<Ingress>(value, &key, &mut read, |o| &mut o.metadata.namespace)
        .map_err(|(field, message)| (field.unwrap_or_else(|| "spec".into()), message))?;
    if let Some(ingress) = read.remove(&key) {
        contents
            .old_ingresses
            .entry(key)
            .or_insert((api_version.to_string(), ingress));
    }
    Ok(())
}

fn insert<K: DeserializeOwned>(
    value: Value,
    key: &ObjectKey,
    store: &mut tugboat_model::Objects<K>,
    namespace: impl FnOnce(&mut K) -> &mut Option<String>,
) -> Result<(), (Option<String>, String)> {
    let mut object: K = serde_path_to_error::deserialize(value).map_err(|err| {
        let field = err.path().to_string();
        (
            (field != ".").then_some(field),
            err.into_inner().to_string(),
        )
    })?;
    // Cluster-scoped objects (IngressClass) have an empty namespace in their key.
    *namespace(&mut object) = (!key.namespace.is_empty()).then(|| key.namespace.to_string());
    if store.contains_key(key) {
        return Err((
            Some("metadata.name".into()),
            "defined twice in the folder: the first definition is kept".into(),
        ));
    }
    store.insert(key.clone(), Arc::new(object));
    Ok(())
}

/// Loads `dir`, publishes the snapshot it serves ([`served`]), and follows the folder
/// until `tx` has no receiver left. Problems, and Ingresses left out for their class,
/// are logged once each, when they first appear.
pub async fn watch_folder(
    dir: PathBuf,
    class: ClassFilter,
    settings: Settings,
    tx: watch::Sender<Arc<Snapshot>>,
) -> Result<(), notify::Error> {
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let event = match event {
            Ok(event) if !is_complete_write(&event.kind) => return,
            Ok(_) => Ok(Instant::now()),
            Err(err) => Err(err),
        };
        let _ = events_tx.send(event);
    })?;
    watcher.watch(&dir, RecursiveMode::Recursive)?;
    let mut known_problems = BTreeSet::new();
    let mut known_not_served = BTreeSet::new();
    let mut first_change = None;
    loop {
        match load_folder(&dir) {
            Ok(contents) => {
                let served = served(&contents, &class, &settings);
                let problems: BTreeSet<_> = contents.problems.into_iter().collect();
                for problem in problems.difference(&known_problems) {
                    tracing::warn!("skipped: {problem}");
                }
                known_problems = problems;
                let not_served: BTreeSet<_> = served.not_served.into_iter().collect();
                for (ingress, why) in not_served.difference(&known_not_served) {
                    tracing::info!("Ingress {ingress} is not served: {why}");
                }
                known_not_served = not_served;
                tracing::debug!(
                    objects = contents.snapshot.len(),
                    served = served.snapshot.len(),
                    "manifests loaded"
                );
                let snapshot = Snapshot {
                    first_change,
                    ..served.snapshot
                };
                if tx.send(Arc::new(snapshot)).is_err() {
                    return Ok(());
                }
            }
            Err(err) => tracing::error!(
                folder = %dir.display(),
                "cannot read the manifests folder, keeping the last objects: {err}"
            ),
        }
        // Read again at once after a change; the changes that arrive while the folder
        // is read and published are gathered into the next read.
        first_change = None;
        let mut next = events.recv().await;
        loop {
            match next {
                None => return Ok(()),
                Some(Err(err)) => tracing::warn!("watching {}: {err}", dir.display()),
                Some(Ok(at)) => {
                    first_change.get_or_insert(at);
                }
            }
            match events.try_recv() {
                Ok(event) => next = Some(event),
                Err(_) => break,
            }
        }
    }
}

/// Whether a watch event says a file's content is complete: its writer closed it, it
/// was renamed or removed, or a folder appeared. A file being created or written is read
/// when its writer closes it, so that a half-written file is never read.
fn is_complete_write(kind: &notify::EventKind) -> bool {
    use notify::EventKind;
    use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind};
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        EventKind::Create(CreateKind::File) => false,
        EventKind::Modify(ModifyKind::Data(_) | ModifyKind::Metadata(_)) => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> FolderContents {
        let mut contents = FolderContents::default();
        parse_file(Path::new("x.yaml"), text, &mut contents);
        contents
    }

    #[test]
    fn reads_several_documents_and_skips_other_kinds() {
        let contents = parse(
            "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\n\
             spec: {ports: [{port: 80}]}\n---\n\
             apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n---\n\
             apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: web}\n\
             spec: {rules: [{host: a.example.com}]}\n",
        );
        assert!(contents.problems.is_empty(), "{:?}", contents.problems);
        assert!(
            contents
                .snapshot
                .services
                .contains_key(&ObjectKey::new("shop", "web"))
        );
        assert!(
            contents
                .snapshot
                .ingresses
                .contains_key(&ObjectKey::new("default", "web"))
        );
    }

    #[test]
    fn a_bad_field_names_file_document_object_and_field() {
        let contents = parse(
            "apiVersion: v1\nkind: Service\nmetadata: {name: ok}\n---\n\
             apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: bad}\n\
             spec: {rules: [{host: a.example.com, http: {paths: [{path: /, pathType: Prefix, \
             backend: {service: {name: web, port: {number: eighty}}}}]}}]}\n",
        );
        assert_eq!(contents.snapshot.services.len(), 1);
        assert!(contents.snapshot.ingresses.is_empty());
        let [problem] = contents.problems.as_slice() else {
            panic!("expected one problem: {:?}", contents.problems);
        };
        assert_eq!(problem.document, 2);
        assert_eq!(problem.object.as_deref(), Some("Ingress default/bad"));
        assert_eq!(
            problem.field.as_deref(),
            Some("spec.rules[0].http.paths[0].backend.service.port.number")
        );
    }

    #[test]
    fn broken_yaml_is_reported_and_earlier_documents_kept() {
        let contents =
            parse("apiVersion: v1\nkind: Service\nmetadata: {name: ok}\n---\nkind: [oops\n");
        assert_eq!(contents.snapshot.services.len(), 1);
        assert_eq!(contents.problems.len(), 1);
        assert!(contents.problems[0].message.contains("not valid YAML"));
    }

    #[test]
    fn secrets_merge_string_data_and_config_maps_load() {
        let contents = parse(
            "apiVersion: v1\nkind: Secret\nmetadata: {name: tls}\ntype: kubernetes.io/tls\n\
             data: {tls.crt: Y2VydA==}\nstringData: {tls.key: key}\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata: {name: pages}\ndata: {\"404\": gone}\n",
        );
        assert!(contents.problems.is_empty(), "{:?}", contents.problems);
        let secret = &contents.snapshot.secrets[&ObjectKey::new("default", "tls")];
        let data = secret.data.as_ref().expect("data");
        assert_eq!(data["tls.crt"].0, b"cert");
        assert_eq!(data["tls.key"].0, b"key");
        assert!(
            contents
                .snapshot
                .config_maps
                .contains_key(&ObjectKey::new("default", "pages"))
        );
    }

    #[test]
    fn secret_values_never_appear_in_problems() {
        let contents = parse(
            "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {password: \"hunter2!!\"}\n",
        );
        let [problem] = contents.problems.as_slice() else {
            panic!("one problem expected: {:?}", contents.problems);
        };
        assert_eq!(problem.field.as_deref(), Some("data.password"));
        assert!(!problem.to_string().contains("hunter2"), "{problem}");
    }

    #[test]
    fn wrong_api_version_and_missing_name_are_reported() {
        let contents = parse(
            "apiVersion: extensions/v1beta1\nkind: Ingress\nmetadata: {name: old}\n---\n\
             apiVersion: v1\nkind: Service\nmetadata: {namespace: x}\n",
        );
        let fields: Vec<_> = contents.problems.iter().map(|p| p.field.clone()).collect();
        assert_eq!(
            fields,
            vec![
                Some("apiVersion".to_string()),
                Some("metadata.name".to_string())
            ]
        );
    }

    const OUR_DEFAULT_CLASS: &str = "apiVersion: networking.k8s.io/v1\nkind: IngressClass\n\
        metadata:\n  name: tugboat\n  annotations: \
        {ingressclass.kubernetes.io/is-default-class: \"true\"}\n\
        spec: {controller: tugboat.dev/ingress}\n";

    fn ingress_of_class(name: &str, class: Option<&str>) -> String {
        let class = class.map_or(String::new(), |c| format!("  ingressClassName: {c}\n"));
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: {name}}}\n\
             spec:\n{class}  rules: [{{host: {name}.example.com}}]\n---\n"
        )
    }

    fn served_names(contents: &FolderContents, filter: &ClassFilter) -> Vec<String> {
        served(contents, filter, &Settings::new(0))
            .snapshot
            .ingresses
            .keys()
            .map(|k| k.name.to_string())
            .collect()
    }

    #[test]
    fn a_folder_with_ingress_classes_is_served_as_the_cluster() {
        let text = format!(
            "{OUR_DEFAULT_CLASS}---\n{}{}{}",
            ingress_of_class("ours", Some("tugboat")),
            ingress_of_class("theirs", Some("some-invalid-class-name")),
            ingress_of_class("unclassed", None),
        );
        let contents = parse(&text);
        assert!(contents.problems.is_empty(), "{:?}", contents.problems);
        assert_eq!(contents.ingress_classes.len(), 1);
        let filter = ClassFilter::default();
        assert_eq!(served_names(&contents, &filter), ["ours", "unclassed"]);
        let not_served = served(&contents, &filter, &Settings::new(0)).not_served;
        assert_eq!(not_served.len(), 1);
        assert_eq!(&*not_served[0].0.name, "theirs");
        assert!(
            not_served[0].1.contains("some-invalid-class-name"),
            "{not_served:?}"
        );
        // The same flags as the cluster: another controller class serves nothing here.
        let other = ClassFilter {
            controller: "example.com/other".into(),
            ..ClassFilter::default()
        };
        assert!(served_names(&contents, &other).is_empty());
    }

    #[test]
    fn a_folder_without_ingress_classes_serves_the_ingresses_that_name_no_class() {
        let text = format!(
            "{}{}",
            ingress_of_class("named", Some("tugboat")),
            ingress_of_class("unclassed", None),
        );
        let contents = parse(&text);
        assert_eq!(
            served_names(&contents, &ClassFilter::default()),
            ["unclassed"]
        );
    }

    #[test]
    fn only_referenced_secrets_and_config_maps_are_served() {
        let contents = parse(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: a\n  \
             annotations: {tugboat.dev/auth-type: basic-auth, tugboat.dev/auth-secret: users}\n\
             spec: {rules: [{host: a.example.com}]}\n---\n\
             apiVersion: v1\nkind: Secret\nmetadata: {name: users}\nstringData: {auth: x}\n---\n\
             apiVersion: v1\nkind: Secret\nmetadata: {name: unused}\nstringData: {auth: x}\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata: {name: unused}\ndata: {a: b}\n",
        );
        assert!(contents.problems.is_empty(), "{:?}", contents.problems);
        let snapshot = served(&contents, &ClassFilter::default(), &Settings::new(0)).snapshot;
        let secrets: Vec<_> = snapshot
            .secrets
            .keys()
            .map(|k| k.name.to_string())
            .collect();
        assert_eq!(secrets, ["users"]);
        assert!(snapshot.config_maps.is_empty());
    }
}
