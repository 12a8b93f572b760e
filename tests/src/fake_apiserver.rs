//! A fake Kubernetes API server for tests: plain HTTP on 127.0.0.1, the real wire
//! protocol, enough for kube-rs and `kubectl`.
//!
//! It serves discovery (`/api`, `/apis`, resource lists, `/version`), list with a
//! resourceVersion, watch streams (newline-delimited JSON events, BOOKMARKs when asked,
//! `410 Gone` for a resourceVersion older than the retained history), create, get,
//! replace (with resourceVersion conflicts), delete, and patches (JSON merge, strategic
//! merge treated as JSON merge, server-side apply with field-owner conflicts) on objects
//! and on the `status` subresource. Objects live in memory; the store survives
//! [`FakeApiServer::stop`] and [`FakeApiServer::restart`] on the same port, like etcd
//! behind a restarted API server. Tests can drop every watch, expire the watch history
//! and read the log of writes.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

/// One kind the server knows.
#[derive(Debug, Clone, Copy)]
struct ResourceType {
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    /// Has a `status` subresource.
    status: bool,
}

impl ResourceType {
    /// Where an object of this kind is stored: namespace (empty for cluster-scoped kinds)
    /// and name.
    fn key(&self, namespace: &str, name: &str) -> Key {
        let namespace = if self.namespaced { namespace } else { "" };
        (namespace.to_string(), name.to_string())
    }

    fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    fn id(&self) -> String {
        format!("{}/{}", self.group, self.plural)
    }
}

const RESOURCES: &[ResourceType] = &[
    ResourceType {
        group: "",
        version: "v1",
        plural: "namespaces",
        kind: "Namespace",
        namespaced: false,
        status: true,
    },
    ResourceType {
        group: "",
        version: "v1",
        plural: "services",
        kind: "Service",
        namespaced: true,
        status: true,
    },
    ResourceType {
        group: "",
        version: "v1",
        plural: "secrets",
        kind: "Secret",
        namespaced: true,
        status: false,
    },
    ResourceType {
        group: "",
        version: "v1",
        plural: "configmaps",
        kind: "ConfigMap",
        namespaced: true,
        status: false,
    },
    ResourceType {
        group: "",
        version: "v1",
        plural: "events",
        kind: "Event",
        namespaced: true,
        status: false,
    },
    ResourceType {
        group: "networking.k8s.io",
        version: "v1",
        plural: "ingresses",
        kind: "Ingress",
        namespaced: true,
        status: true,
    },
    ResourceType {
        group: "networking.k8s.io",
        version: "v1",
        plural: "ingressclasses",
        kind: "IngressClass",
        namespaced: false,
        status: false,
    },
    ResourceType {
        group: "discovery.k8s.io",
        version: "v1",
        plural: "endpointslices",
        kind: "EndpointSlice",
        namespaced: true,
        status: false,
    },
    ResourceType {
        group: "coordination.k8s.io",
        version: "v1",
        plural: "leases",
        kind: "Lease",
        namespaced: true,
        status: false,
    },
    ResourceType {
        group: "events.k8s.io",
        version: "v1",
        plural: "events",
        kind: "Event",
        namespaced: true,
        status: false,
    },
    // The Gateway API (standard channel), as its CRDs serve it.
    ResourceType {
        group: "gateway.networking.k8s.io",
        version: "v1",
        plural: "gatewayclasses",
        kind: "GatewayClass",
        namespaced: false,
        status: true,
    },
    ResourceType {
        group: "gateway.networking.k8s.io",
        version: "v1",
        plural: "gateways",
        kind: "Gateway",
        namespaced: true,
        status: true,
    },
    ResourceType {
        group: "gateway.networking.k8s.io",
        version: "v1",
        plural: "httproutes",
        kind: "HTTPRoute",
        namespaced: true,
        status: true,
    },
    ResourceType {
        group: "gateway.networking.k8s.io",
        version: "v1",
        plural: "tlsroutes",
        kind: "TLSRoute",
        namespaced: true,
        status: true,
    },
    ResourceType {
        group: "gateway.networking.k8s.io",
        version: "v1",
        plural: "tcproutes",
        kind: "TCPRoute",
        namespaced: true,
        status: true,
    },
    ResourceType {
        group: "gateway.networking.k8s.io",
        version: "v1beta1",
        plural: "referencegrants",
        kind: "ReferenceGrant",
        namespaced: true,
        status: false,
    },
];

/// Watch history kept for resuming watches; older resourceVersions get `410 Gone`.
const HISTORY_LIMIT: usize = 100_000;
/// How often a watch that asked for bookmarks gets one.
const BOOKMARK_EVERY: Duration = Duration::from_millis(500);

/// A write the server accepted, for assertions.
#[derive(Debug, Clone)]
pub struct WriteRecord {
    pub method: String,
    pub path: String,
    pub query: String,
    pub body: Value,
}

#[derive(Debug, Clone)]
struct WatchEvent {
    resource_version: u64,
    resource: String,
    kind: &'static str,
    object: Value,
}

type Key = (String, String);

#[derive(Default)]
struct Store {
    resource_version: u64,
    objects: HashMap<String, BTreeMap<Key, Value>>,
    /// Field owners of server-side applied objects: leaf path -> manager.
    owners: HashMap<(String, Key), BTreeMap<String, String>>,
    history: Vec<WatchEvent>,
    /// Watches from a resourceVersion below this get `410 Gone`.
    oldest_watchable: u64,
    writes: Vec<WriteRecord>,
    /// Requests a guarded listener refused (401 and 403), described.
    denied: Vec<String>,
    /// List requests served, by resource (`group/plural`).
    lists: HashMap<String, usize>,
    next_uid: u64,
}

struct Shared {
    store: Mutex<Store>,
    /// The latest resourceVersion, for waking watches.
    latest: watch::Sender<u64>,
    /// Bumped to end every open watch.
    watch_generation: watch::Sender<u64>,
}

impl Shared {
    fn store(&self) -> MutexGuard<'_, Store> {
        self.store
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The fake API server. Dropping it stops serving.
pub struct FakeApiServer {
    shared: Arc<Shared>,
    pub addr: SocketAddr,
    server: Option<tokio::task::JoinHandle<()>>,
    /// Listeners of [`FakeApiServer::serve_guarded`].
    guarded: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
        }
        for listener in self.guarded.drain(..) {
            listener.abort();
        }
    }
}

/// What a request asks for, in the terms of Kubernetes authorization (the attributes
/// an RBAC rule matches).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestAttributes {
    /// get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: String,
    /// "" for the core group.
    pub api_group: String,
    /// The plural, with `/subresource` when there is one (`ingresses/status`).
    pub resource: String,
    pub namespace: Option<String>,
    /// The object's name; for list and watch, the name a `metadata.name=` field selector
    /// pins, as the real API server sees it.
    pub name: Option<String>,
}

impl std::fmt::Display for RequestAttributes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.api_group.is_empty() {
            "core"
        } else {
            &self.api_group
        };
        write!(f, "{} {}/{}", self.verb, group, self.resource)?;
        if let Some(ns) = &self.namespace {
            write!(f, " in namespace {ns}")?;
        }
        if let Some(name) = &self.name {
            write!(f, " named {name}")?;
        }
        Ok(())
    }
}

/// Decides whether `user` may do what a request asks.
pub type Authorizer = Arc<dyn Fn(&str, &RequestAttributes) -> bool + Send + Sync>;

/// How a guarded listener checks its clients: bearer tokens (token -> user name, e.g.
/// `system:serviceaccount:NS:NAME`) and an authorizer. Discovery and `/version` are
/// open to every authenticated user, as the `system:discovery` role makes them.
#[derive(Clone)]
pub struct Guard {
    pub tokens: HashMap<String, String>,
    pub authorize: Authorizer,
}

/// A certificate authority and a serving certificate for 127.0.0.1 (and the names of
/// the `kubernetes` Service), for a guarded listener.
pub struct ApiTls {
    /// The CA certificate, PEM: what a pod's `ca.crt` holds.
    pub ca_pem: String,
    pub server: Arc<rustls::ServerConfig>,
}

impl ApiTls {
    pub fn generate() -> Self {
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "fake-kubernetes-ca");
        let ca_key = rcgen::KeyPair::generate().expect("CA key");
        let ca_cert = ca_params.self_signed(&ca_key).expect("CA certificate");
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let mut params = rcgen::CertificateParams::new(vec![
            "kubernetes".to_string(),
            "kubernetes.default".to_string(),
            "kubernetes.default.svc".to_string(),
            "localhost".to_string(),
        ])
        .expect("server certificate parameters");
        params.subject_alt_names.push(rcgen::SanType::IpAddress(
            std::net::Ipv4Addr::LOCALHOST.into(),
        ));
        let key = rcgen::KeyPair::generate().expect("server key");
        let cert = params.signed_by(&key, &issuer).expect("server certificate");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .expect("server TLS configuration");
        Self {
            ca_pem: ca_cert.pem(),
            server: Arc::new(server),
        }
    }
}

type ResponseBody = UnsyncBoxBody<Bytes, Infallible>;

impl FakeApiServer {
    /// Starts on a free port of 127.0.0.1.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local address");
        let shared = Arc::new(Shared {
            store: Mutex::new(Store {
                resource_version: 1000,
                oldest_watchable: 0,
                ..Store::default()
            }),
            latest: watch::channel(1000).0,
            watch_generation: watch::channel(0).0,
        });
        let mut server = Self {
            shared,
            addr,
            server: None,
            guarded: Vec::new(),
        };
        server.server = Some(tokio::spawn(serve(listener, server.shared.clone())));
        server
    }

    /// Serves the same objects on `listener` too (bound anywhere, e.g. in a pod's network
    /// namespace), over HTTPS with `tls`, to clients `guard` lets in. Refusals are
    /// answered 401 or 403 and kept for [`denied`](Self::denied).
    pub fn serve_guarded(
        &mut self,
        listener: std::net::TcpListener,
        tls: &ApiTls,
        guard: Guard,
    ) -> std::io::Result<()> {
        listener.set_nonblocking(true)?;
        let listener = TcpListener::from_std(listener)?;
        let acceptor = tokio_rustls::TlsAcceptor::from(tls.server.clone());
        self.guarded.push(tokio::spawn(serve_tls(
            listener,
            self.shared.clone(),
            acceptor,
            Arc::new(guard),
        )));
        Ok(())
    }

    /// What guarded listeners refused so far: "401 ..." or "403 USER: VERB GROUP/RESOURCE ...".
    pub fn denied(&self) -> Vec<String> {
        self.shared.store().denied.clone()
    }

    /// Whether `object` is of a kind this server stores.
    pub fn knows(object: &Value) -> bool {
        resource_of(object).is_some()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kube client talking to this server.
    pub fn client(&self) -> kube::Client {
        let uri = self.url().parse().expect("valid URL");
        let mut config = kube::Config::new(uri);
        config.default_namespace = "default".into();
        kube::Client::try_from(config).expect("kube client")
    }

    /// Writes a kubeconfig pointing at this server.
    pub fn write_kubeconfig(&self, path: &Path) {
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\n\
             contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: default\n\
             current-context: fake\nusers:\n- name: fake\n  user: {{}}\n",
            self.url()
        );
        std::fs::write(path, text).expect("write kubeconfig");
    }

    /// Stops serving: the listener and every open connection close. The objects stay.
    pub fn stop(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
        }
        self.drop_watches();
    }

    /// Serves again on the same port (after [`stop`](Self::stop)).
    pub async fn restart(&mut self) {
        self.stop();
        let mut attempts = 0;
        let listener = loop {
            match TcpListener::bind(self.addr).await {
                Ok(listener) => break listener,
                Err(err) => {
                    attempts += 1;
                    assert!(attempts < 100, "cannot bind {} again: {err}", self.addr);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        self.server = Some(tokio::spawn(serve(listener, self.shared.clone())));
    }

    /// Ends every open watch stream (clients re-watch from their last resourceVersion).
    pub fn drop_watches(&self) {
        self.shared.watch_generation.send_modify(|g| *g += 1);
    }

    /// Forgets the watch history, as etcd compaction does, and drops every watch:
    /// clients that resume get `410 Gone` and must list again.
    pub fn expire_watch_history(&self) {
        {
            let mut store = self.shared.store();
            store.resource_version += 1;
            store.oldest_watchable = store.resource_version;
            store.history.clear();
        }
        self.drop_watches();
    }

    /// Creates or replaces every object of a YAML text (several documents allowed).
    pub fn apply_yaml(&self, text: &str) {
        for document in serde_yaml_ng::Deserializer::from_str(text) {
            let value = Value::deserialize(document).expect("valid YAML");
            if !value.is_null() {
                self.put(value);
            }
        }
    }

    /// Creates or replaces a typed object (see [`crate::objects`]).
    pub fn apply(&self, object: &impl serde::Serialize) -> Value {
        self.put(crate::objects::to_json(object))
    }

    /// How many list requests were served for a kind.
    pub fn list_count(&self, kind: &str) -> usize {
        let store = self.shared.store();
        RESOURCES
            .iter()
            .filter(|r| r.kind == kind)
            .map(|r| store.lists.get(&r.id()).copied().unwrap_or(0))
            .sum()
    }

    /// Creates or replaces an object.
    pub fn put(&self, object: Value) -> Value {
        let resource = resource_of(&object).expect("a kind the fake API server knows");
        let key = resource.key(
            object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default"),
            object["metadata"]["name"].as_str().expect("metadata.name"),
        );
        let stored = {
            let mut store = self.shared.store();
            store.upsert(resource, key, object)
        };
        self.notify();
        stored
    }

    /// Deletes an object; true if it existed.
    pub fn delete(&self, kind: &str, namespace: &str, name: &str) -> bool {
        let resource = resource_by_kind(kind).expect("a kind the fake API server knows");
        let key = resource.key(namespace, name);
        let deleted = self.shared.store().remove(resource, &key).is_some();
        self.notify();
        deleted
    }

    /// The stored object, if any.
    pub fn get(&self, kind: &str, namespace: &str, name: &str) -> Option<Value> {
        let resource = resource_by_kind(kind)?;
        let key = resource.key(namespace, name);
        self.shared
            .store()
            .objects
            .get(&resource.id())?
            .get(&key)
            .cloned()
    }

    /// Every stored object of a kind (both Event APIs for `Event`).
    pub fn list(&self, kind: &str) -> Vec<Value> {
        let store = self.shared.store();
        RESOURCES
            .iter()
            .filter(|r| r.kind == kind)
            .flat_map(|r| {
                store
                    .objects
                    .get(&r.id())
                    .into_iter()
                    .flat_map(|m| m.values().cloned())
            })
            .collect()
    }

    /// Writes (POST, PUT, PATCH, DELETE) received so far.
    pub fn writes(&self) -> Vec<WriteRecord> {
        self.shared.store().writes.clone()
    }

    fn notify(&self) {
        let latest = self.shared.store().resource_version;
        self.shared.latest.send_replace(latest);
    }
}

fn resource_of(object: &Value) -> Option<&'static ResourceType> {
    let api_version = object["apiVersion"].as_str()?;
    let kind = object["kind"].as_str()?;
    RESOURCES
        .iter()
        .find(|r| r.kind == kind && r.api_version() == api_version)
}

fn resource_by_kind(kind: &str) -> Option<&'static ResourceType> {
    RESOURCES.iter().find(|r| r.kind == kind)
}

impl Store {
    fn next_version(&mut self) -> u64 {
        self.resource_version += 1;
        self.resource_version
    }

    fn record(&mut self, resource: &ResourceType, kind: &'static str, object: Value) {
        self.history.push(WatchEvent {
            resource_version: self.resource_version,
            resource: resource.id(),
            kind,
            object,
        });
        if self.history.len() > HISTORY_LIMIT {
            let cut = self.history.len() - HISTORY_LIMIT;
            self.history.drain(..cut);
            self.oldest_watchable = self.history.first().map_or(0, |e| e.resource_version);
        }
    }

    /// Stores `object` (create or replace) with fresh server fields.
    fn upsert(&mut self, resource: &ResourceType, key: Key, mut object: Value) -> Value {
        let existing = self
            .objects
            .get(&resource.id())
            .and_then(|m| m.get(&key))
            .cloned();
        let version = self.next_version();
        // As the API server does: the generation follows the spec, not the status.
        let spec_changed = existing
            .as_ref()
            .is_some_and(|old| old.get("spec") != object.get("spec"));
        object["apiVersion"] = json!(resource.api_version());
        object["kind"] = json!(resource.kind);
        // As the API server does for the Gateway API CRDs (status subresource): writing
        // the object leaves the status the controller wrote.
        if resource.status
            && resource.group == "gateway.networking.k8s.io"
            && object.get("status").is_none()
            && let Some(status) = existing.as_ref().and_then(|old| old.get("status"))
        {
            object["status"] = status.clone();
        }
        let meta = &mut object["metadata"];
        meta["name"] = json!(key.1);
        if resource.namespaced {
            meta["namespace"] = json!(key.0);
        }
        meta["resourceVersion"] = json!(version.to_string());
        match &existing {
            Some(old) => {
                meta["uid"] = old["metadata"]["uid"].clone();
                meta["creationTimestamp"] = old["metadata"]["creationTimestamp"].clone();
                let generation = old["metadata"]["generation"].as_u64().unwrap_or(1);
                meta["generation"] = json!(generation + u64::from(spec_changed));
            }
            None => {
                self.next_uid += 1;
                meta["uid"] = json!(format!("00000000-0000-4000-8000-{:012}", self.next_uid));
                meta["creationTimestamp"] = json!(now_rfc3339());
                meta["generation"] = json!(1);
            }
        }
        self.objects
            .entry(resource.id())
            .or_default()
            .insert(key, object.clone());
        let kind = if existing.is_some() {
            "MODIFIED"
        } else {
            "ADDED"
        };
        self.record(resource, kind, object.clone());
        object
    }

    fn remove(&mut self, resource: &ResourceType, key: &Key) -> Option<Value> {
        let mut object = self.objects.get_mut(&resource.id())?.remove(key)?;
        self.owners.remove(&(resource.id(), key.clone()));
        let version = self.next_version();
        object["metadata"]["resourceVersion"] = json!(version.to_string());
        self.record(resource, "DELETED", object.clone());
        Some(object)
    }
}

fn now_rfc3339() -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let shared = shared.clone();
        connections.spawn(async move {
            let service = service_fn(move |request| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(handle(shared, request).await) }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
        while connections.try_join_next().is_some() {}
    }
}

async fn serve_tls(
    listener: TcpListener,
    shared: Arc<Shared>,
    acceptor: tokio_rustls::TlsAcceptor,
    guard: Arc<Guard>,
) {
    let mut connections = JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let shared = shared.clone();
        let acceptor = acceptor.clone();
        let guard = guard.clone();
        connections.spawn(async move {
            let Ok(stream) = acceptor.accept(stream).await else {
                return;
            };
            let service = service_fn(move |request| {
                let shared = shared.clone();
                let guard = guard.clone();
                async move {
                    let response = match check(&shared, &guard, &request) {
                        Ok(()) => handle(shared, request).await,
                        Err(refusal) => *refusal,
                    };
                    Ok::<_, Infallible>(response)
                }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
        while connections.try_join_next().is_some() {}
    }
}

/// Authentication and authorization of one request on a guarded listener.
fn check(
    shared: &Shared,
    guard: &Guard,
    request: &Request<Incoming>,
) -> Result<(), Box<Response<ResponseBody>>> {
    let path = request.uri().path();
    let token = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let Some(user) = token.and_then(|t| guard.tokens.get(t)) else {
        shared.store().denied.push(format!(
            "401 {} {path}: no valid bearer token",
            request.method()
        ));
        return Err(Box::new(status_error(
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
            "Unauthorized",
        )));
    };
    let Some(target) = parse_path(path) else {
        // Discovery, /version and other non-resource paths: open to authenticated users.
        return Ok(());
    };
    let params = query_params(request.uri().query().unwrap_or(""));
    let attributes = attributes(request.method(), &target, &params);
    if (guard.authorize)(user, &attributes) {
        return Ok(());
    }
    shared
        .store()
        .denied
        .push(format!("403 {user}: {attributes}"));
    Err(Box::new(status_error(
        StatusCode::FORBIDDEN,
        "Forbidden",
        &format!("{user} cannot {attributes}"),
    )))
}

/// The authorization attributes of a resource request, as the API server derives them.
fn attributes(
    method: &Method,
    target: &Target,
    params: &HashMap<String, String>,
) -> RequestAttributes {
    let watch = params.get("watch").is_some_and(|w| w == "true" || w == "1");
    let verb = match (method, &target.name) {
        (&Method::GET, Some(_)) => "get",
        (&Method::GET, None) if watch => "watch",
        (&Method::GET, None) => "list",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, Some(_)) => "delete",
        (&Method::DELETE, None) => "deletecollection",
        _ => "unknown",
    };
    let name = target.name.clone().or_else(|| {
        // list/watch pinned to one name by `fieldSelector=metadata.name=NAME`.
        let selector = params.get("fieldSelector")?;
        let mut terms = selector.split(',');
        let only = terms.next()?;
        if terms.next().is_some() {
            return None;
        }
        only.strip_prefix("metadata.name==")
            .or_else(|| only.strip_prefix("metadata.name="))
            .map(str::to_string)
    });
    let resource = match &target.subresource {
        Some(sub) => format!("{}/{sub}", target.resource.plural),
        None => target.resource.plural.to_string(),
    };
    RequestAttributes {
        verb: verb.to_string(),
        api_group: target.resource.group.to_string(),
        resource,
        namespace: target.namespace.clone(),
        name,
    }
}

fn json_response(status: StatusCode, body: &Value) -> Response<ResponseBody> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed_unsync());
    *response.status_mut() = status;
    response.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

fn status_error(code: StatusCode, reason: &str, message: &str) -> Response<ResponseBody> {
    json_response(
        code,
        &json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": message, "reason": reason, "code": code.as_u16()
        }),
    )
}

/// A parsed resource path.
struct Target {
    resource: &'static ResourceType,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

/// The resource a path names, or None when the server does not know it.
fn parse_path(path: &str) -> Option<Target> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, plural, more @ ..] => (Some(ns.to_string()), {
            let mut v = vec![*plural];
            v.extend_from_slice(more);
            v
        }),
        other => (None, other.to_vec()),
    };
    let plural = rest.first()?;
    let resource = RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == *plural)?;
    Some(Target {
        resource,
        namespace: namespace.filter(|_| resource.namespaced),
        name: rest.get(1).map(|s| s.to_string()),
        subresource: rest.get(2).map(|s| s.to_string()),
    })
}

fn query_params(query: &str) -> HashMap<String, String> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(byte) => {
                        out.push(byte);
                        i += 3;
                    }
                    Err(_) => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `key=value` / `key!=value` terms, comma-separated; field paths are dotted.
fn matches_selector(object: &Value, selector: Option<&String>, labels: bool) -> bool {
    let Some(selector) = selector.filter(|s| !s.is_empty()) else {
        return true;
    };
    selector.split(',').all(|term| {
        let (path, expected, negate) = if let Some((k, v)) = term.split_once("!=") {
            (k, v, true)
        } else if let Some((k, v)) = term.split_once("==") {
            (k, v, false)
        } else if let Some((k, v)) = term.split_once('=') {
            (k, v, false)
        } else {
            // `key` alone (labels): the label exists.
            return object["metadata"]["labels"].get(term).is_some();
        };
        let actual = if labels {
            object["metadata"]["labels"][path]
                .as_str()
                .map(str::to_string)
        } else {
            let mut value = object;
            for part in path.split('.') {
                value = &value[part];
            }
            value.as_str().map(str::to_string)
        };
        (actual.as_deref() == Some(expected)) != negate
    })
}

async fn handle(shared: Arc<Shared>, request: Request<Incoming>) -> Response<ResponseBody> {
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let query = request.uri().query().unwrap_or("").to_string();
    let content_type = request
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = match request.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => Bytes::new(),
    };
    if let Some(response) = discovery(&path) {
        return response;
    }
    let Some(target) = parse_path(&path) else {
        return status_error(
            StatusCode::NOT_FOUND,
            "NotFound",
            &format!("no route {path}"),
        );
    };
    let params = query_params(&query);
    if method != Method::GET {
        let body_value: Value = if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&body)
                .or_else(|_| serde_yaml_ng::from_slice(&body))
                .unwrap_or(Value::Null)
        };
        shared.store().writes.push(WriteRecord {
            method: method.to_string(),
            path: path.clone(),
            query: query.clone(),
            body: body_value.clone(),
        });
        let response = write(
            &shared,
            &method,
            &target,
            &params,
            &content_type,
            body_value,
        );
        let latest = shared.store().resource_version;
        shared.latest.send_replace(latest);
        return response;
    }
    match &target.name {
        Some(name) => {
            let key = (target.namespace.clone().unwrap_or_default(), name.clone());
            let store = shared.store();
            match store
                .objects
                .get(&target.resource.id())
                .and_then(|m| m.get(&key))
            {
                Some(object) => json_response(StatusCode::OK, object),
                None => status_error(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    &format!("{} \"{}\" not found", target.resource.plural, name),
                ),
            }
        }
        None if params.get("watch").is_some_and(|w| w == "true" || w == "1") => {
            start_watch(shared, &target, &params)
        }
        None => list(&shared, &target, &params),
    }
}

fn list(
    shared: &Shared,
    target: &Target,
    params: &HashMap<String, String>,
) -> Response<ResponseBody> {
    let mut store = shared.store();
    *store.lists.entry(target.resource.id()).or_default() += 1;
    let items: Vec<&Value> = store
        .objects
        .get(&target.resource.id())
        .into_iter()
        .flat_map(|m| m.iter())
        .filter(|((ns, _), _)| target.namespace.as_ref().is_none_or(|want| want == ns))
        .map(|(_, object)| object)
        .filter(|o| matches_selector(o, params.get("fieldSelector"), false))
        .filter(|o| matches_selector(o, params.get("labelSelector"), true))
        .collect();
    // Pages of `limit` items, as the real API server serves them to the watcher; the
    // continue token is the offset of the next page.
    let offset: usize = params
        .get("continue")
        .and_then(|token| token.parse().ok())
        .unwrap_or(0);
    let limit = params
        .get("limit")
        .and_then(|limit| limit.parse().ok())
        .filter(|limit: &usize| *limit > 0)
        .unwrap_or(usize::MAX);
    let total = items.len();
    let page: Vec<&Value> = items.into_iter().skip(offset).take(limit).collect();
    let next = offset.saturating_add(page.len());
    let mut metadata = json!({"resourceVersion": store.resource_version.to_string()});
    if next < total {
        metadata["continue"] = json!(next.to_string());
        metadata["remainingItemCount"] = json!(total - next);
    }
    json_response(
        StatusCode::OK,
        &json!({
            "kind": format!("{}List", target.resource.kind),
            "apiVersion": target.resource.api_version(),
            "metadata": metadata,
            "items": page,
        }),
    )
}

fn start_watch(
    shared: Arc<Shared>,
    target: &Target,
    params: &HashMap<String, String>,
) -> Response<ResponseBody> {
    let from: u64 = params
        .get("resourceVersion")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let bookmarks = params
        .get("allowWatchBookmarks")
        .is_some_and(|v| v == "true");
    let timeout = params
        .get("timeoutSeconds")
        .and_then(|v| v.parse().ok())
        .map_or(Duration::from_secs(300), Duration::from_secs);
    let field_selector = params.get("fieldSelector").cloned();
    let label_selector = params.get("labelSelector").cloned();
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let resource = target.resource;
    let namespace = target.namespace.clone();
    let wanted = move |event: &WatchEvent| {
        event.resource == resource.id()
            && namespace
                .as_ref()
                .is_none_or(|ns| event.object["metadata"]["namespace"].as_str() == Some(ns))
            && matches_selector(&event.object, field_selector.as_ref(), false)
            && matches_selector(&event.object, label_selector.as_ref(), true)
    };
    // What to send first: `410 Gone`, every current object (watch from 0), or nothing.
    let mut initial: Vec<Value> = Vec::new();
    let mut cursor;
    {
        let store = shared.store();
        if from != 0 && from < store.oldest_watchable {
            let gone = json!({"type": "ERROR", "object": {
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": format!("too old resource version: {from} ({})", store.oldest_watchable),
                "reason": "Expired", "code": 410
            }});
            return json_response(StatusCode::OK, &gone);
        }
        cursor = if from == 0 {
            store.resource_version
        } else {
            from
        };
        if from == 0 {
            for ((ns, _), object) in store
                .objects
                .get(&resource.id())
                .into_iter()
                .flat_map(|m| m.iter())
            {
                let event = WatchEvent {
                    resource_version: 0,
                    resource: resource.id(),
                    kind: "ADDED",
                    object: object.clone(),
                };
                let _ = ns;
                if wanted(&event) {
                    initial.push(json!({"type": "ADDED", "object": object}));
                }
            }
        }
    }
    let mut latest = shared.latest.subscribe();
    let mut generation = shared.watch_generation.subscribe();
    generation.mark_unchanged();
    tokio::spawn(async move {
        for event in initial {
            if tx.send(Bytes::from(format!("{event}\n"))).await.is_err() {
                return;
            }
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let mut bookmark = tokio::time::interval(BOOKMARK_EVERY);
        loop {
            let pending: Vec<WatchEvent> = {
                let store = shared.store();
                let start = store
                    .history
                    .partition_point(|e| e.resource_version <= cursor);
                let events: Vec<WatchEvent> = store.history[start..]
                    .iter()
                    .filter(|e| wanted(e))
                    .cloned()
                    .collect();
                cursor = cursor.max(store.history.last().map_or(cursor, |e| e.resource_version));
                events
            };
            for event in pending {
                let line = json!({"type": event.kind, "object": event.object});
                if tx.send(Bytes::from(format!("{line}\n"))).await.is_err() {
                    return;
                }
            }
            tokio::select! {
                changed = latest.changed() => if changed.is_err() { return },
                _ = generation.changed() => return,
                () = tokio::time::sleep_until(deadline) => return,
                _ = bookmark.tick(), if bookmarks => {
                    let line = json!({"type": "BOOKMARK", "object": {
                        "kind": resource.kind, "apiVersion": resource.api_version(),
                        "metadata": {"resourceVersion": cursor.to_string()}
                    }});
                    if tx.send(Bytes::from(format!("{line}\n"))).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|bytes| (Ok::<_, Infallible>(Frame::data(bytes)), rx))
    });
    let mut response = Response::new(BodyExt::boxed_unsync(StreamBody::new(stream.boxed())));
    response.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

/// RFC 7386 JSON merge patch.
fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(fields) => {
            if !target.is_object() {
                *target = json!({});
            }
            for (key, value) in fields {
                if value.is_null() {
                    if let Some(map) = target.as_object_mut() {
                        map.remove(key);
                    }
                } else {
                    merge_patch(&mut target[key], value);
                }
            }
        }
        other => *target = other.clone(),
    }
}

/// Leaf paths of a patch, with their values.
fn leaves(value: &Value, prefix: String, out: &mut Vec<(String, Value)>) {
    match value {
        Value::Object(fields) if !fields.is_empty() => {
            for (key, value) in fields {
                leaves(value, format!("{prefix}.{key}"), out);
            }
        }
        other => out.push((prefix, other.clone())),
    }
}

fn value_at<'a>(object: &'a Value, path: &str) -> &'a Value {
    path.split('.')
        .filter(|p| !p.is_empty())
        .fold(object, |v, part| &v[part])
}

fn write(
    shared: &Shared,
    method: &Method,
    target: &Target,
    params: &HashMap<String, String>,
    content_type: &str,
    body: Value,
) -> Response<ResponseBody> {
    let resource = target.resource;
    let namespace = target.namespace.clone().unwrap_or_default();
    let mut store = shared.store();
    let existing = |store: &Store, name: &str| {
        store
            .objects
            .get(&resource.id())
            .and_then(|m| m.get(&(namespace.clone(), name.to_string())))
            .cloned()
    };
    match (method, &target.name) {
        (&Method::POST, None) => {
            let mut object = body;
            let name = match object["metadata"]["name"].as_str() {
                Some(name) => name.to_string(),
                None => match object["metadata"]["generateName"].as_str() {
                    Some(prefix) => {
                        store.next_uid += 1;
                        format!("{prefix}{:05x}", store.next_uid)
                    }
                    None => {
                        return status_error(
                            StatusCode::UNPROCESSABLE_ENTITY,
                            "Invalid",
                            "metadata.name: Required value",
                        );
                    }
                },
            };
            if existing(&store, &name).is_some() {
                return status_error(
                    StatusCode::CONFLICT,
                    "AlreadyExists",
                    &format!("{} \"{name}\" already exists", resource.plural),
                );
            }
            object["metadata"]["name"] = json!(name);
            if let Some(map) = object["metadata"].as_object_mut() {
                map.remove("resourceVersion");
            }
            let stored = store.upsert(resource, (namespace.clone(), name), object);
            json_response(StatusCode::CREATED, &stored)
        }
        (&Method::PUT, Some(name)) => {
            let Some(current) = existing(&store, name) else {
                return status_error(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    &format!("{} \"{name}\" not found", resource.plural),
                );
            };
            let mut object = body;
            if let Some(version) = object["metadata"]["resourceVersion"].as_str()
                && Some(version) != current["metadata"]["resourceVersion"].as_str()
            {
                return status_error(
                    StatusCode::CONFLICT,
                    "Conflict",
                    "the object has been modified; please apply your changes to the latest version and try again",
                );
            }
            if target.subresource.as_deref() == Some("status") {
                let mut updated = current.clone();
                updated["status"] = object["status"].take();
                object = updated;
            }
            let stored = store.upsert(resource, (namespace.clone(), name.clone()), object);
            json_response(StatusCode::OK, &stored)
        }
        (&Method::PATCH, Some(name)) => {
            let apply = content_type.starts_with("application/apply-patch");
            let current = existing(&store, name);
            let mut patch = body;
            if target.subresource.as_deref() == Some("status") {
                patch = json!({"status": patch["status"].clone()});
            }
            let manager = params.get("fieldManager").cloned().unwrap_or_default();
            let force = params.get("force").is_some_and(|f| f == "true");
            let owners_key = (resource.id(), (namespace.clone(), name.clone()));
            let mut patch_leaves = Vec::new();
            leaves(&patch, String::new(), &mut patch_leaves);
            patch_leaves.retain(|(path, _)| {
                !path.starts_with(".metadata") && path != ".apiVersion" && path != ".kind"
            });
            if apply
                && !force
                && let Some(current) = &current
            {
                let owners = store.owners.get(&owners_key);
                for (path, value) in &patch_leaves {
                    let owner = owners.and_then(|o| o.get(path));
                    let now = value_at(current, path);
                    if let Some(owner) = owner
                        && *owner != manager
                        && !now.is_null()
                        && now != value
                    {
                        return status_error(
                            StatusCode::CONFLICT,
                            "Conflict",
                            &format!(
                                "Apply failed with 1 conflict: conflict with \"{owner}\": {path}"
                            ),
                        );
                    }
                }
            }
            let mut object = match current {
                Some(current) => current,
                None if apply => json!({"metadata": {"name": name, "namespace": namespace}}),
                None => {
                    return status_error(
                        StatusCode::NOT_FOUND,
                        "NotFound",
                        &format!("{} \"{name}\" not found", resource.plural),
                    );
                }
            };
            if let Some(version) = patch["metadata"]["resourceVersion"].as_str()
                && Some(version) != object["metadata"]["resourceVersion"].as_str()
            {
                return status_error(
                    StatusCode::CONFLICT,
                    "Conflict",
                    "the object has been modified",
                );
            }
            // `get_mut`, not `patch["metadata"]`: indexing would insert a null
            // `metadata`, and the merge patch would then delete the object's.
            if let Some(map) = patch.get_mut("metadata").and_then(Value::as_object_mut) {
                map.remove("resourceVersion");
            }
            merge_patch(&mut object, &patch);
            if !manager.is_empty() {
                let owners = store.owners.entry(owners_key).or_default();
                for (path, value) in patch_leaves {
                    if value.is_null() {
                        owners.remove(&path);
                    } else {
                        owners.insert(path, manager.clone());
                    }
                }
            }
            let stored = store.upsert(resource, (namespace.clone(), name.clone()), object);
            json_response(StatusCode::OK, &stored)
        }
        (&Method::DELETE, Some(name)) => {
            match store.remove(resource, &(namespace.clone(), name.clone())) {
                Some(object) => json_response(StatusCode::OK, &object),
                None => status_error(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    &format!("{} \"{name}\" not found", resource.plural),
                ),
            }
        }
        _ => status_error(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "not supported by the fake API server",
        ),
    }
}

/// Discovery documents, or None when `path` is not a discovery path.
fn discovery(path: &str) -> Option<Response<ResponseBody>> {
    let path = path.trim_end_matches('/');
    let ok = |value: Value| Some(json_response(StatusCode::OK, &value));
    let groups: Vec<&str> = {
        let mut groups: Vec<&str> = RESOURCES
            .iter()
            .map(|r| r.group)
            .filter(|g| !g.is_empty())
            .collect();
        groups.dedup();
        groups.sort_unstable();
        groups.dedup();
        groups
    };
    let group_doc = |group: &str| {
        json!({
            "name": group,
            "versions": [{"groupVersion": format!("{group}/v1"), "version": "v1"}],
            "preferredVersion": {"groupVersion": format!("{group}/v1"), "version": "v1"}
        })
    };
    let resource_list = |group: &str, version: &str| {
        let resources: Vec<Value> = RESOURCES
            .iter()
            .filter(|r| r.group == group && r.version == version)
            .flat_map(|r| {
                let verbs = json!(["create", "delete", "get", "list", "patch", "update", "watch"]);
                let mut docs = vec![json!({
                    "name": r.plural, "singularName": r.kind.to_lowercase(), "namespaced": r.namespaced,
                    "kind": r.kind, "verbs": verbs
                })];
                if r.status {
                    docs.push(json!({
                        "name": format!("{}/status", r.plural), "singularName": "", "namespaced": r.namespaced,
                        "kind": r.kind, "verbs": ["get", "patch", "update"]
                    }));
                }
                docs
            })
            .collect();
        let group_version = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources})
    };
    match path {
        "/version" => ok(json!({
            "major": "1", "minor": "33", "gitVersion": "v1.33.0-fake", "gitCommit": "", "gitTreeState": "clean",
            "buildDate": "2025-01-01T00:00:00Z", "goVersion": "go1.24", "compiler": "gc", "platform": "linux/amd64"
        })),
        "/api" => ok(json!({
            "kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}]
        })),
        "/apis" => ok(json!({
            "kind": "APIGroupList", "apiVersion": "v1",
            "groups": groups.iter().map(|g| group_doc(g)).collect::<Vec<_>>()
        })),
        "/api/v1" => ok(resource_list("", "v1")),
        _ => {
            let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
            match parts.as_slice() {
                ["apis", group] if groups.contains(group) => {
                    let mut doc = group_doc(group);
                    doc["kind"] = json!("APIGroup");
                    doc["apiVersion"] = json!("v1");
                    ok(doc)
                }
                ["apis", group, version] if groups.contains(group) => {
                    ok(resource_list(group, version))
                }
                ["openapi", ..] => Some(status_error(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    "no OpenAPI documents",
                )),
                _ => None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_patch_follows_rfc_7386() {
        let mut target = json!({"a": "b", "c": {"d": "e", "f": "g"}});
        merge_patch(&mut target, &json!({"a": "z", "c": {"f": null}}));
        assert_eq!(target, json!({"a": "z", "c": {"d": "e"}}));
    }

    #[tokio::test]
    async fn a_status_patch_keeps_the_objects_metadata() {
        use k8s_openapi::api::networking::v1::Ingress;
        use kube::api::{Api, Patch, PatchParams};
        let server = FakeApiServer::start().await;
        server.put(json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "web", "namespace": "default",
                         "annotations": {"example.com/key": "value"}, "labels": {"app": "web"}},
            "spec": {"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}}
        }));
        let api: Api<Ingress> = Api::namespaced(server.client(), "default");
        let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": "127.0.0.16"}]}}});
        api.patch_status("web", &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("the status patch");
        let stored = server
            .get("Ingress", "default", "web")
            .expect("the Ingress");
        assert_eq!(
            stored["metadata"]["annotations"]["example.com/key"],
            "value"
        );
        assert_eq!(stored["metadata"]["labels"]["app"], "web");
        assert_eq!(
            stored["status"]["loadBalancer"]["ingress"][0]["ip"],
            "127.0.0.16"
        );
    }

    #[test]
    fn selectors_match_fields_and_labels() {
        let object = json!({"type": "kubernetes.io/tls", "metadata": {"name": "x", "labels": {"app": "web"}}});
        assert!(matches_selector(
            &object,
            Some(&"type=kubernetes.io/tls".into()),
            false
        ));
        assert!(!matches_selector(
            &object,
            Some(&"metadata.name=y".into()),
            false
        ));
        assert!(matches_selector(
            &object,
            Some(&"metadata.name!=y".into()),
            false
        ));
        assert!(matches_selector(&object, Some(&"app=web".into()), true));
        assert!(!matches_selector(&object, Some(&"app=api".into()), true));
    }

    #[test]
    fn decodes_query_values() {
        assert_eq!(
            percent_decode("type%3Dkubernetes.io%2Ftls"),
            "type=kubernetes.io/tls"
        );
        assert_eq!(percent_decode("a+b%"), "a b%");
    }
}
