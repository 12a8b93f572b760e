//! The input of the model: every object the controller cares about, by namespace and name.
//!
//! Both sources (the manifest folder and the Kubernetes API) fill the same structure, so
//! the rest of the pipeline never knows where the objects came from. Objects are shared
//! (`Arc`) and the maps are persistent (`imbl`): a copy shares the tree's nodes and an
//! update copies only the path it changes, so a source can hand out its whole store as a
//! snapshot of a large cluster without copying it.

use std::fmt;
use std::sync::Arc;

use crate::gateway::objects::{
    Gateway, GatewayClass, HttpRoute, Namespace, ReferenceGrant, TcpRoute, TlsRoute,
};
use crate::objects::{EndpointSlice, Ingress, Service};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};

/// Namespace and name of a namespaced object. The strings are shared: a key is copied
/// into every index that names its object (the stores, the routes of an Ingress, the
/// backends of a Service, ...), and a copy costs two counts, not two strings.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

impl ObjectKey {
    pub fn new(namespace: impl KeyPart, name: impl KeyPart) -> Self {
        Self {
            namespace: namespace.into_shared(),
            name: name.into_shared(),
        }
    }
}

/// What a key's namespace or name is made from: a shared string is shared, not copied.
pub trait KeyPart {
    fn into_shared(self) -> Arc<str>;
}

impl KeyPart for Arc<str> {
    fn into_shared(self) -> Arc<str> {
        self
    }
}

impl KeyPart for &Arc<str> {
    fn into_shared(self) -> Arc<str> {
        self.clone()
    }
}

impl KeyPart for &str {
    fn into_shared(self) -> Arc<str> {
        self.into()
    }
}

impl KeyPart for String {
    fn into_shared(self) -> Arc<str> {
        self.into()
    }
}

impl KeyPart for &String {
    fn into_shared(self) -> Arc<str> {
        self.as_str().into()
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Objects of one kind by namespace and name: a persistent map, cheap to copy.
pub type Objects<K> = imbl::OrdMap<ObjectKey, Arc<K>>;

/// The key `objects` holds for `key`'s object, whose strings a copy shares, or `key`
/// itself when there is no such object: an index that names objects of a large cluster
/// then holds counts, not strings of its own.
pub fn stored_key<K>(objects: &Objects<K>, key: ObjectKey) -> ObjectKey {
    match objects.get_key_value(&key) {
        Some((stored, _)) => stored.clone(),
        None => key,
    }
}

/// A set of object keys: a persistent set, cheap to copy, and compared with another copy
/// (`old.diff(new)`) at the cost of what differs.
pub type ObjectKeys = imbl::OrdSet<ObjectKey>;

/// The keys in one of `old` and `new` but not the other, at the cost of what differs
/// (sets that share their unchanged parts).
pub fn changed_keys<'a>(
    old: &'a ObjectKeys,
    new: &'a ObjectKeys,
) -> impl Iterator<Item = &'a ObjectKey> {
    old.diff(new).map(|change| match change {
        imbl::ordset::DiffItem::Add(key) | imbl::ordset::DiffItem::Remove(key) => key,
    })
}

/// One difference between two [`Objects`] maps (`old.diff(new)`, which skips the parts
/// the maps share).
pub use imbl::ordmap::DiffItem;

/// Brings `kept`, the objects of `from` that `keep` keeps, to those of `to`: at the cost
/// of what differs between `from` and `to` (maps that share their unchanged parts).
pub fn follow<K: PartialEq>(
    from: &Objects<K>,
    to: &Objects<K>,
    kept: &mut Objects<K>,
    keep: impl Fn(&ObjectKey, &K) -> bool,
) {
    if from.ptr_eq(to) {
        return;
    }
    for item in from.diff(to) {
        match item {
            DiffItem::Add(key, object)
            | DiffItem::Update {
                new: (key, object), ..
            } => {
                if keep(key, object) {
                    kept.insert(key.clone(), object.clone());
                } else {
                    kept.remove(key);
                }
            }
            DiffItem::Remove(key, _) => {
                kept.remove(key);
            }
        }
    }
}

/// Whether two maps hold the same objects: at the cost of what differs between them
/// when they share their unchanged parts (a copy, or a copy changed since, as the
/// sources keep them). A walk of every object would cost a large cluster's size at each
/// change; `diff` skips the shared parts and compares the rest.
pub fn same_objects<K: PartialEq>(a: &Objects<K>, b: &Objects<K>) -> bool {
    a.ptr_eq(b) || a.len() == b.len() && a.diff(b).next().is_none()
}

/// All objects relevant to routing, as one consistent view.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub ingresses: Objects<Ingress>,
    pub services: Objects<Service>,
    pub endpoint_slices: Objects<EndpointSlice>,
    /// Secrets (TLS certificates, credentials). Never logged.
    pub secrets: Objects<Secret>,
    /// ConfigMaps the controller reads (its own settings, error pages).
    pub config_maps: Objects<ConfigMap>,
    /// Gateway API objects (empty unless the Gateway API is enabled). GatewayClasses and
    /// Namespaces are cluster-scoped: their keys have an empty namespace.
    pub gateway_classes: Objects<GatewayClass>,
    pub gateways: Objects<Gateway>,
    pub http_routes: Objects<HttpRoute>,
    pub tls_routes: Objects<TlsRoute>,
    pub tcp_routes: Objects<TcpRoute>,
    pub reference_grants: Objects<ReferenceGrant>,
    /// Namespaces (their labels), for `allowedRoutes.namespaces.selector`.
    pub namespaces: Objects<Namespace>,
    /// When the source saw the earliest change this snapshot is the first to carry
    /// (`None`: not known, as for the first snapshot). Not content: no comparison reads
    /// it. The controller measures from it how long a change took to reach haproxy.
    pub first_change: Option<std::time::Instant>,
}

impl Snapshot {
    /// Number of objects of every kind, for logs and metrics.
    pub fn len(&self) -> usize {
        self.ingresses.len()
            + self.services.len()
            + self.endpoint_slices.len()
            + self.secrets.len()
            + self.config_maps.len()
            + self.gateway_classes.len()
            + self.gateways.len()
            + self.http_routes.len()
            + self.tls_routes.len()
            + self.tcp_routes.len()
            + self.reference_grants.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One change between two snapshots' maps of objects of kind `K`.
pub(crate) type ObjectDiff<'a, K> = DiffItem<'a, 'a, ObjectKey, Arc<K>>;

/// The key of the object that changed.
pub(crate) fn diff_key<'a, K>(item: &ObjectDiff<'a, K>) -> &'a ObjectKey {
    match *item {
        DiffItem::Add(key, _) | DiffItem::Remove(key, _) => key,
        DiffItem::Update { new: (key, _), .. } => key,
    }
}

/// The object before and after the change.
pub(crate) fn diff_values<'a, K>(item: &ObjectDiff<'a, K>) -> (Option<&'a K>, Option<&'a K>) {
    match *item {
        DiffItem::Add(_, new) => (None, Some(Arc::as_ref(new))),
        DiffItem::Remove(_, old) => (Some(Arc::as_ref(old)), None),
        DiffItem::Update {
            old: (_, old),
            new: (_, new),
        } => (Some(Arc::as_ref(old)), Some(Arc::as_ref(new))),
    }
}
