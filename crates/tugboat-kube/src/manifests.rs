//! A folder of YAML manifests as the source of objects (`--manifests DIR`).
//!
//! Every `*.yaml`, `*.yml` and `*.json` file under the folder is read, with any number of
//! documents per file and `kind: List` expanded. Ingress and IngressClass
//! (networking.k8s.io/v1), Service, Secret, ConfigMap (v1) and EndpointSlice
//! (discovery.k8s.io/v1) are kept, and with `--enable-gateway-api` GatewayClass,
//! Gateway, HTTPRoute, TLSRoute, TCPRoute (gateway.networking.k8s.io/v1), ReferenceGrant
//! (v1beta1) and Namespace (v1); other kinds are ignored. A document that does not
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

use std::collections::{BTreeMap, BTreeSet};
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
    /// The number of the document each object came from, by kind and key, in the
    /// contents of one file: what a definition found again in a later file is reported
    /// with.
    documents: BTreeMap<(String, ObjectKey), usize>,
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
        snapshot.tls_routes = Objects::default();
        snapshot.tcp_routes = Objects::default();
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
/// [`watch_folder`] reads through a [`FolderCache`] on a blocking thread.
pub fn load_folder(dir: &Path) -> std::io::Result<FolderContents> {
    FolderCache::default().load(dir, &Reread::All)
}

/// Which files a read parses again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reread {
    /// Every file.
    All,
    /// These files (those a watch event named); the others are taken from the cache.
    Files(BTreeSet<PathBuf>),
}

/// The files of a followed folder, each parsed when it changes and kept as parsed
/// until it changes again, and the objects of them all: a change costs the files it
/// touched, not the folder. An object keeps its identity while its file is unchanged,
/// and the maps of objects share what did not change, so what follows compares them at
/// the cost of what differs.
#[derive(Debug, Default)]
pub struct FolderCache {
    files: BTreeMap<PathBuf, FolderContents>,
    /// The objects of `files`, as [`merge`] puts them together.
    merged: FolderContents,
    /// Whether an object is defined in two files: a change to either is merged again
    /// from every file, so that the first definition stays the one kept.
    defined_twice: bool,
}

impl FolderCache {
    /// Reads `dir`: every file for [`Reread::All`] (or a first read), else only the
    /// files named, which a watch event reported written, renamed or removed (a new file
    /// is named by the event of its writing); the others are taken as they were. Fails
    /// only when the folder itself cannot be read. Blocking.
    pub fn load(&mut self, dir: &Path, reread: &Reread) -> std::io::Result<FolderContents> {
        match reread {
            Reread::Files(changed) if !self.files.is_empty() => {
                let read: Vec<_> = changed
                    .iter()
                    .map(|path| (path, read_manifest_file(path)))
                    .collect();
                // In place, unless an object is (or becomes) defined in two files.
                let mut incremental = !self.defined_twice;
                for (path, _) in &read {
                    if let Some(old) = self.files.remove(*path) {
                        for_each_kind!(unmerge_objects, &mut self.merged, &old);
                    }
                }
                for (path, contents) in read {
                    if let Some(contents) = contents {
                        let mut defined_again = |_: &str, _: &ObjectKey| incremental = false;
                        for_each_kind!(
                            merge_objects,
                            &mut self.merged,
                            &contents,
                            &mut defined_again
                        );
                        self.files.insert(path.clone(), contents);
                    }
                }
                if incremental {
                    self.merged.problems = self
                        .files
                        .values()
                        .flat_map(|contents| contents.problems.iter().cloned())
                        .collect();
                    self.merged.old_ingresses = self
                        .files
                        .values()
                        .flat_map(|contents| contents.old_ingresses.iter())
                        .rev()
                        .map(|(key, old)| (key.clone(), old.clone()))
                        .collect();
                    return Ok(self.merged.clone());
                }
            }
            _ => {
                let mut paths = Vec::new();
                collect_files(dir, &mut paths)?;
                self.files = paths
                    .into_iter()
                    .filter_map(|path| Some((path.clone(), read_manifest_file(&path)?)))
                    .collect();
            }
        }
        (self.merged, self.defined_twice) = merge(self.files.iter());
        Ok(self.merged.clone())
    }
}

/// The contents of one manifest file (a file that cannot be read is a problem), or
/// `None` when it is gone. Blocking.
#[allow(
    clippy::disallowed_methods,
    reason = "blocking by design; its callers choose where it runs"
)]
fn read_manifest_file(path: &Path) -> Option<FolderContents> {
    let mut contents = FolderContents::default();
    match std::fs::read_to_string(path) {
        Ok(text) => parse_file(path, &text, &mut contents),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return None,
        Err(err) => contents.problems.push(ManifestProblem {
            file: path.to_path_buf(),
            document: 0,
            object: None,
            field: None,
            message: format!("cannot read the file: {err}"),
        }),
    }
    Some(contents)
}

/// The contents of several files, in the order given (their paths'): an object
/// defined again in a later file keeps its first definition, and the later one is a
/// problem. Also says whether that happened.
fn merge<'a>(
    files: impl Iterator<Item = (&'a PathBuf, &'a FolderContents)>,
) -> (FolderContents, bool) {
    let mut merged = FolderContents::default();
    let mut defined_twice = false;
    for (file, contents) in files {
        merged.problems.extend(contents.problems.iter().cloned());
        let mut problems = Vec::new();
        let mut defined_again = |kind: &str, key: &ObjectKey| {
            if let Some(document) = contents.documents.get(&(kind.to_string(), key.clone())) {
                let object = if key.namespace.is_empty() {
                    format!("{kind} {}", key.name)
                } else {
                    format!("{kind} {key}")
                };
                problems.push(ManifestProblem {
                    file: file.clone(),
                    document: *document,
                    object: Some(object),
                    field: Some("metadata.name".into()),
                    message: DEFINED_TWICE.into(),
                });
            }
        };
        for_each_kind!(merge_objects, &mut merged, contents, &mut defined_again);
        for (key, old) in &contents.old_ingresses {
            merged
                .old_ingresses
                .entry(key.clone())
                .or_insert_with(|| old.clone());
        }
        defined_twice |= !problems.is_empty();
        merged.problems.append(&mut problems);
    }
    (merged, defined_twice)
}

/// Calls `$apply(kind, into, from, extra...)` with the objects of every kind a folder
/// holds, `into` from the first [`FolderContents`] and `from` from the second.
macro_rules! for_each_kind {
    ($apply:ident, $into:expr, $from:expr $(, $extra:expr)*) => {{
        let (into, from): (&mut FolderContents, &FolderContents) = ($into, $from);
        let (objects, more) = (&mut into.snapshot, &from.snapshot);
        $apply("Ingress", &mut objects.ingresses, &more.ingresses $(, $extra)*);
        $apply("Service", &mut objects.services, &more.services $(, $extra)*);
        $apply("EndpointSlice", &mut objects.endpoint_slices, &more.endpoint_slices $(, $extra)*);
        $apply("Secret", &mut objects.secrets, &more.secrets $(, $extra)*);
        $apply("ConfigMap", &mut objects.config_maps, &more.config_maps $(, $extra)*);
        $apply("GatewayClass", &mut objects.gateway_classes, &more.gateway_classes $(, $extra)*);
        $apply("Gateway", &mut objects.gateways, &more.gateways $(, $extra)*);
        $apply("HTTPRoute", &mut objects.http_routes, &more.http_routes $(, $extra)*);
        $apply("TLSRoute", &mut objects.tls_routes, &more.tls_routes $(, $extra)*);
        $apply("TCPRoute", &mut objects.tcp_routes, &more.tcp_routes $(, $extra)*);
        $apply("ReferenceGrant", &mut objects.reference_grants, &more.reference_grants $(, $extra)*);
        $apply("Namespace", &mut objects.namespaces, &more.namespaces $(, $extra)*);
        $apply("IngressClass", &mut into.ingress_classes, &from.ingress_classes $(, $extra)*);
    }};
}
use for_each_kind;

/// Adds the objects of `from` that `into` does not hold; `defined_again` hears of the
/// others.
fn merge_objects<K>(
    kind: &str,
    into: &mut Objects<K>,
    from: &Objects<K>,
    defined_again: &mut impl FnMut(&str, &ObjectKey),
) {
    if from.is_empty() {
        return;
    }
    for (key, object) in from {
        if into.contains_key(key) {
            defined_again(kind, key);
        } else {
            into.insert(key.clone(), object.clone());
        }
    }
}

/// Takes the objects of `from` out of `into` (which holds them: no object of the folder
/// is defined twice).
fn unmerge_objects<K>(_kind: &str, into: &mut Objects<K>, from: &Objects<K>) {
    for key in from.keys() {
        into.remove(key);
    }
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
        } else if is_manifest_name(&path) {
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
            Ok(value) => add_object(value, number, &problem, contents),
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
    document: usize,
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
                add_object(item, document, problem, contents);
            }
        }
        return;
    }
    let expected = match kind.as_str() {
        "Ingress" | "IngressClass" => "networking.k8s.io/v1",
        "Service" | "Secret" | "ConfigMap" => "v1",
        "EndpointSlice" => "discovery.k8s.io/v1",
        "GatewayClass" | "Gateway" | "HTTPRoute" | "TLSRoute" | "TCPRoute" => {
            "gateway.networking.k8s.io/v1"
        }
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
        "TLSRoute" => insert(value, &key, &mut snapshot.tls_routes, |o| {
            &mut o.metadata.namespace
        }),
        "TCPRoute" => insert(value, &key, &mut snapshot.tcp_routes, |o| {
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
    if result.is_ok() {
        contents
            .documents
            .entry((kind.clone(), key))
            .or_insert(document);
    }
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

/// What an object defined twice is told.
const DEFINED_TWICE: &str = "defined twice in the folder: the first definition is kept";

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
        return Err((Some("metadata.name".into()), DEFINED_TWICE.into()));
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
            Ok(event) => Ok((Instant::now(), event)),
            Err(err) => Err(err),
        };
        let _ = events_tx.send(event);
    })?;
    watcher.watch(&dir, RecursiveMode::Recursive)?;
    let mut known_problems = BTreeSet::new();
    let mut known_not_served = BTreeSet::new();
    let mut first_change = None;
    let mut reread = Reread::All;
    let mut cache = FolderCache::default();
    let reading = Arc::new((dir.clone(), class, settings));
    loop {
        // Reading and parsing the files is blocking work: off the runtime's workers.
        let read = reading.clone();
        let (returned, loaded) = tokio::task::spawn_blocking(move || {
            let (dir, class, settings) = &*read;
            let started = Instant::now();
            let loaded = cache.load(dir, &reread).map(|contents| {
                let read = started.elapsed();
                let served = served(&contents, class, settings);
                tracing::debug!(
                    read_ms = read.as_secs_f64() * 1e3,
                    served_ms = (started.elapsed() - read).as_secs_f64() * 1e3,
                    "manifests read"
                );
                (contents, served)
            });
            (cache, loaded)
        })
        .await
        .unwrap_or_else(|join| (FolderCache::default(), Err(std::io::Error::other(join))));
        cache = returned;
        match loaded {
            Ok((contents, served)) => {
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
        reread = Reread::Files(BTreeSet::new());
        let mut next = events.recv().await;
        loop {
            match next {
                None => return Ok(()),
                Some(Err(err)) => {
                    tracing::warn!("watching {}: {err}", dir.display());
                    reread = Reread::All;
                }
                Some(Ok((at, event))) => {
                    first_change.get_or_insert(at);
                    reread.add(&event);
                }
            }
            match events.try_recv() {
                Ok(event) => next = Some(event),
                Err(_) => break,
            }
        }
    }
}

impl Reread {
    /// Adds the files `event` names. An event that names no manifest file (a folder, a
    /// hidden entry such as the `..data` link a mounted ConfigMap swaps, a lost event)
    /// may change any file behind it: every file is read again.
    fn add(&mut self, event: &notify::Event) {
        let Reread::Files(files) = self else {
            return;
        };
        let manifests = !event.need_rescan()
            && !event.paths.is_empty()
            && event.paths.iter().all(|path| is_manifest_name(path));
        if manifests {
            files.extend(event.paths.iter().cloned());
        } else {
            *self = Reread::All;
        }
    }
}

/// Whether `path` names a file [`collect_files`] reads: not hidden, with a manifest's
/// extension.
fn is_manifest_name(path: &Path) -> bool {
    let hidden = path
        .file_name()
        .is_none_or(|name| name.to_string_lossy().starts_with('.'));
    !hidden
        && matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        )
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
#[allow(
    clippy::disallowed_methods,
    reason = "test code: blocking file work is fine here"
)]
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
    fn tls_routes_are_read_and_a_wrong_version_is_reported() {
        let contents = parse(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: TLSRoute\n\
             metadata: {name: argo, namespace: cd}\n\
             spec: {parentRefs: [{name: gw}], hostnames: [argo.example.com],\n\
             rules: [{backendRefs: [{name: argocd, port: 443}]}]}\n---\n\
             apiVersion: gateway.networking.k8s.io/v1alpha2\nkind: TLSRoute\n\
             metadata: {name: old, namespace: cd}\nspec: {}\n",
        );
        let route = &contents.snapshot.tls_routes[&ObjectKey::new("cd", "argo")];
        assert_eq!(route.spec.hostnames, ["argo.example.com"]);
        assert_eq!(route.spec.rules[0].backend_refs[0].port, Some(443));
        assert!(
            !contents
                .snapshot
                .tls_routes
                .contains_key(&ObjectKey::new("cd", "old"))
        );
        assert_eq!(contents.problems.len(), 1, "{:?}", contents.problems);
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

    fn service(name: &str, port: u16) -> String {
        format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: shop}}\n\
             spec: {{ports: [{{port: {port}}}]}}\n"
        )
    }

    fn port_of(contents: &FolderContents, name: &str) -> Option<i32> {
        let service = contents
            .snapshot
            .services
            .get(&ObjectKey::new("shop", name))?;
        Some(service.spec.as_ref()?.ports.as_ref()?.first()?.port)
    }

    #[test]
    fn a_cached_folder_reads_again_only_the_files_named_and_keeps_the_others_objects() {
        let dir = tempfile::tempdir().expect("folder");
        let (a, b) = (dir.path().join("a.yaml"), dir.path().join("b.yaml"));
        std::fs::write(&a, service("a", 80)).expect("write");
        std::fs::write(&b, service("b", 80)).expect("write");
        let mut cache = FolderCache::default();
        let first = cache.load(dir.path(), &Reread::All).expect("load");
        // Same length, within the file system's timestamp granularity: only the event
        // that names the file can tell that it changed.
        std::fs::write(&a, service("a", 81)).expect("write");
        std::fs::write(&b, service("b", 81)).expect("write");
        let named = Reread::Files(BTreeSet::from([a.clone()]));
        let second = cache.load(dir.path(), &named).expect("load");
        assert_eq!(port_of(&second, "a"), Some(81));
        assert_eq!(
            port_of(&second, "b"),
            Some(80),
            "b was not named: kept as parsed"
        );
        let key_b = ObjectKey::new("shop", "b");
        assert!(Arc::ptr_eq(
            &first.snapshot.services[&key_b],
            &second.snapshot.services[&key_b]
        ));
        assert_eq!(
            second.snapshot.services,
            load_folder(dir.path())
                .expect("load")
                .snapshot
                .services
                .without(&ObjectKey::new("shop", "b"))
                .update(key_b.clone(), first.snapshot.services[&key_b].clone()),
            "the rest as a full read has it"
        );
        let third = cache.load(dir.path(), &Reread::All).expect("load");
        assert_eq!(port_of(&third, "b"), Some(81));
        std::fs::remove_file(&b).expect("remove");
        let named = Reread::Files(BTreeSet::from([b]));
        let fourth = cache.load(dir.path(), &named).expect("load");
        assert_eq!(port_of(&fourth, "b"), None, "a removed file's objects go");
    }

    #[test]
    fn an_object_defined_again_in_a_later_file_keeps_the_first_and_names_the_second() {
        let dir = tempfile::tempdir().expect("folder");
        std::fs::write(dir.path().join("a.yaml"), service("web", 80)).expect("write");
        std::fs::write(
            dir.path().join("b.yaml"),
            format!("{}---\n{}", service("other", 90), service("web", 81)),
        )
        .expect("write");
        let contents = load_folder(dir.path()).expect("load");
        assert_eq!(port_of(&contents, "web"), Some(80));
        assert_eq!(port_of(&contents, "other"), Some(90));
        assert_eq!(
            contents.problems,
            [ManifestProblem {
                file: dir.path().join("b.yaml"),
                document: 2,
                object: Some("Service shop/web".into()),
                field: Some("metadata.name".into()),
                message: DEFINED_TWICE.into(),
            }]
        );
    }

    #[test]
    fn a_change_of_a_file_whose_object_another_file_defines_again_keeps_the_first() {
        let dir = tempfile::tempdir().expect("folder");
        let (a, b) = (dir.path().join("a.yaml"), dir.path().join("b.yaml"));
        std::fs::write(&a, service("web", 80)).expect("write");
        std::fs::write(&b, service("web", 81)).expect("write");
        let mut cache = FolderCache::default();
        let first = cache.load(dir.path(), &Reread::All).expect("load");
        assert_eq!(port_of(&first, "web"), Some(80));
        assert_eq!(first.problems.len(), 1, "{:?}", first.problems);
        // The first definition goes: the second is the one left.
        std::fs::write(&a, service("other", 90)).expect("write");
        let named = Reread::Files(BTreeSet::from([a.clone()]));
        let second = cache.load(dir.path(), &named).expect("load");
        assert_eq!(port_of(&second, "web"), Some(81));
        assert_eq!(port_of(&second, "other"), Some(90));
        assert!(second.problems.is_empty(), "{:?}", second.problems);
        // Defined twice again, by a changed file.
        std::fs::write(&a, service("web", 82)).expect("write");
        let third = cache.load(dir.path(), &named).expect("load");
        assert_eq!(port_of(&third, "web"), Some(82), "a.yaml comes first");
        assert_eq!(third.problems.len(), 1, "{:?}", third.problems);
        assert_eq!(third.problems[0].file, b);
        let full = load_folder(dir.path()).expect("load");
        assert_eq!(third.snapshot.services, full.snapshot.services);
        assert_eq!(third.problems, full.problems);
    }

    #[test]
    fn events_that_name_no_manifest_file_read_every_file_again() {
        let event = |kind, paths: &[&str]| {
            let mut event = notify::Event::new(kind);
            for path in paths {
                event = event.add_path(PathBuf::from(path));
            }
            event
        };
        let written = notify::EventKind::Access(notify::event::AccessKind::Close(
            notify::event::AccessMode::Write,
        ));
        let renamed = notify::EventKind::Modify(notify::event::ModifyKind::Name(
            notify::event::RenameMode::Both,
        ));
        let mut reread = Reread::Files(BTreeSet::new());
        reread.add(&event(written, &["/m/a.yaml"]));
        reread.add(&event(renamed, &["/m/b.yml", "/m/c.json"]));
        assert_eq!(
            reread,
            Reread::Files(
                ["/m/a.yaml", "/m/b.yml", "/m/c.json"]
                    .map(PathBuf::from)
                    .into()
            )
        );
        // A mounted ConfigMap swaps its hidden `..data` link.
        reread.add(&event(renamed, &["/m/..data_tmp", "/m/..data"]));
        assert_eq!(reread, Reread::All);
        let mut reread = Reread::Files(BTreeSet::new());
        reread.add(&event(renamed, &["/m/sub"]));
        assert_eq!(reread, Reread::All, "a folder renamed");
    }
}
