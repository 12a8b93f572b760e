//! The objects of one kind, as a watch lists and updates them.
//!
//! Unlike kube's reflector store, which clones every object it receives and keys it by
//! name, namespace, resource version and uid, this store keeps what the controller reads
//! of each object ([`Watched::keep`], which moves rather than copies) under its namespace
//! and name, in a persistent map: a snapshot is a copy of the map that shares its nodes,
//! and an update after a snapshot copies one path of the tree, not the whole store.

use std::collections::BTreeSet;
use std::sync::{Arc, PoisonError, RwLock};

use kube::Resource;
use kube::runtime::watcher;
use tokio::sync::watch;
use tugboat_model::snapshot::follow;
use tugboat_model::{ObjectKey, Objects};

use crate::watched::Watched;

/// A shared, read-only handle on one kind's objects in one scope.
pub struct ObjectStore<K> {
    objects: Arc<RwLock<Objects<K>>>,
    listed: watch::Receiver<bool>,
}

impl<K> Clone for ObjectStore<K> {
    fn clone(&self) -> Self {
        Self {
            objects: self.objects.clone(),
            listed: self.listed.clone(),
        }
    }
}

impl<K> ObjectStore<K> {
    /// The objects as of now: a copy that shares the store's nodes.
    pub fn objects(&self) -> Objects<K> {
        self.objects
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn len(&self) -> usize {
        self.objects
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Resolves once the first complete list is in, or when the writer is gone (the
    /// watch stopped for good) without one.
    pub async fn wait_until_listed(&self) {
        let mut listed = self.listed.clone();
        if listed.wait_for(|listed| *listed).await.is_err() {
            tracing::debug!("a watch stopped before its first list");
        }
    }
}

/// The objects of one kind from the stores of every watched namespace, as one map
/// (with one store, the store's own map, shared).
pub fn merged<K>(stores: &[ObjectStore<K>]) -> Objects<K> {
    Objects::unions(stores.iter().map(ObjectStore::objects))
}

/// [`merged`], kept between snapshots: with more than one store, the last union
/// follows what changed in each store, so that consecutive snapshots share their
/// unchanged parts and compare at the cost of what differs (a new union of the same
/// objects would share nothing).
pub struct Union<K> {
    from: Vec<Objects<K>>,
    merged: Objects<K>,
}

impl<K> Default for Union<K> {
    fn default() -> Self {
        Self {
            from: Vec::new(),
            merged: Objects::default(),
        }
    }
}

impl<K: PartialEq> Union<K> {
    /// The objects of `stores`, as one map.
    pub fn of(&mut self, stores: &[ObjectStore<K>]) -> Objects<K> {
        if let [only] = stores {
            return only.objects();
        }
        let maps: Vec<Objects<K>> = stores.iter().map(ObjectStore::objects).collect();
        if self.from.len() == maps.len() {
            // The stores hold the objects of different namespaces: no key is in two.
            for (from, to) in self.from.iter().zip(&maps) {
                follow(from, to, &mut self.merged, |_, _| true);
            }
        } else {
            self.merged = Objects::unions(maps.iter().cloned());
        }
        self.from = maps;
        self.merged.clone()
    }
}

/// Applies a watch's events to its store. During a (re-)list the objects gather in a
/// new map that replaces the store's at the end of the list, so readers never see a
/// half-listed store.
pub struct StoreWriter<K> {
    objects: Arc<RwLock<Objects<K>>>,
    listed: watch::Sender<bool>,
    listing: Option<Objects<K>>,
    /// One copy of each namespace's name, shared by the keys of its objects (a
    /// namespace's name stays after its last object goes: a few bytes each).
    namespaces: BTreeSet<Arc<str>>,
}

/// A new, empty store and the writer that fills it.
pub fn object_store<K>() -> (ObjectStore<K>, StoreWriter<K>) {
    let objects = Arc::new(RwLock::new(Objects::default()));
    let (listed_sender, listed) = watch::channel(false);
    (
        ObjectStore {
            objects: objects.clone(),
            listed,
        },
        StoreWriter {
            objects,
            listed: listed_sender,
            listing: None,
            namespaces: BTreeSet::new(),
        },
    )
}

impl<K: Watched> StoreWriter<K> {
    /// Applies one event. Returns whether the store's content changed in a way the
    /// controller may care about ([`Watched::differs_for_controller`]; a listed object
    /// only changes it when its list completes).
    pub fn apply(&mut self, event: watcher::Event<K::Wire>) -> bool {
        match event {
            watcher::Event::Init => {
                self.listing = Some(Objects::default());
                false
            }
            watcher::Event::InitApply(object) => {
                if let Some(key) = self.shared_key(&object)
                    && let Some(listing) = self.listing.as_mut()
                {
                    listing.insert(key, Arc::new(K::keep(object)));
                }
                false
            }
            watcher::Event::InitDone => {
                let listed = self.listing.take().unwrap_or_default();
                *self.write() = listed;
                self.listed.send_replace(true);
                true
            }
            watcher::Event::Apply(object) => match self.shared_key(&object) {
                Some(key) => {
                    let kept = Arc::new(K::keep(object));
                    let before = self.write().insert(key, kept.clone());
                    before.is_none_or(|before| K::differs_for_controller(&before, &kept))
                }
                None => false,
            },
            watcher::Event::Delete(object) => match key_of(&object) {
                Some(key) => self.write().remove(&key).is_some(),
                None => false,
            },
        }
    }

    /// The object's key, with the namespace's shared name.
    fn shared_key(&mut self, object: &K::Wire) -> Option<ObjectKey> {
        let key = key_of(object)?;
        let namespace = match self.namespaces.get(&key.namespace) {
            Some(shared) => shared.clone(),
            None => {
                self.namespaces.insert(key.namespace.clone());
                key.namespace
            }
        };
        Some(ObjectKey::new(namespace, key.name))
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Objects<K>> {
        self.objects.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// An object's namespace (empty for cluster-scoped kinds) and name; `None` without a name.
pub fn key_of<K: Resource>(object: &K) -> Option<ObjectKey> {
    let meta = object.meta();
    Some(ObjectKey::new(
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watched::ServiceWire;
    use tugboat_model::objects::{Ingress, Service};

    fn service(name: &str, port: i32) -> ServiceWire {
        service_in("shop", name, port)
    }

    fn service_in(namespace: &str, name: &str, port: i32) -> ServiceWire {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"ports": [{"port": port}]}
        }))
        .expect("valid Service")
    }

    fn ports(store: &ObjectStore<Service>) -> Vec<(String, i32)> {
        store
            .objects()
            .iter()
            .map(|(key, service)| {
                let spec = service.spec.as_ref().expect("spec");
                let ports = spec.ports.as_ref().expect("ports");
                (key.name.to_string(), ports[0].port)
            })
            .collect()
    }

    #[tokio::test]
    async fn a_list_replaces_the_store_only_when_complete() {
        let (store, mut writer) = object_store::<Service>();
        assert!(!writer.apply(watcher::Event::Init));
        assert!(!writer.apply(watcher::Event::InitApply(service("a", 80))));
        assert!(store.is_empty(), "half a list is never visible");
        assert!(writer.apply(watcher::Event::InitDone));
        store.wait_until_listed().await;
        assert_eq!(ports(&store), [("a".to_string(), 80)]);

        let before = store.objects();
        assert!(writer.apply(watcher::Event::Apply(service("b", 81))));
        assert!(writer.apply(watcher::Event::Apply(service("a", 8080))));
        assert_eq!(
            ports(&store),
            [("a".to_string(), 8080), ("b".to_string(), 81)]
        );
        assert_eq!(before.len(), 1, "a copy taken earlier does not change");

        // A re-list (after 410 Gone) drops what is gone.
        writer.apply(watcher::Event::Init);
        writer.apply(watcher::Event::InitApply(service("b", 81)));
        assert_eq!(store.len(), 2);
        writer.apply(watcher::Event::InitDone);
        assert_eq!(ports(&store), [("b".to_string(), 81)]);

        assert!(writer.apply(watcher::Event::Delete(service("b", 81))));
        assert!(!writer.apply(watcher::Event::Delete(service("b", 81))));
        assert!(store.is_empty());
    }

    #[test]
    fn a_union_of_stores_follows_their_changes_and_shares_what_did_not_change() {
        let (shop, mut shop_writer) = object_store::<Service>();
        let (blog, mut blog_writer) = object_store::<Service>();
        shop_writer.apply(watcher::Event::Apply(service("a", 80)));
        blog_writer.apply(watcher::Event::Apply(service_in("blog", "b", 81)));
        let stores = [shop, blog];
        let mut union = Union::default();
        let first = union.of(&stores);
        assert_eq!(first, merged(&stores));
        assert!(
            union.of(&stores).ptr_eq(&first),
            "nothing changed: the same map"
        );

        shop_writer.apply(watcher::Event::Apply(service("a", 8080)));
        blog_writer.apply(watcher::Event::Delete(service_in("blog", "b", 81)));
        shop_writer.apply(watcher::Event::Apply(service("c", 82)));
        let second = union.of(&stores);
        assert_eq!(second, merged(&stores));
        assert_eq!(second.len(), 2);
        assert!(!second.ptr_eq(&first));

        // One store: its own map.
        let one = std::slice::from_ref(&stores[0]);
        assert!(Union::default().of(one).ptr_eq(&stores[0].objects()));
    }

    #[tokio::test]
    async fn waiting_ends_when_the_writer_is_gone() {
        let (store, writer) = object_store::<Service>();
        drop(writer);
        store.wait_until_listed().await;
        assert!(store.is_empty());
    }

    #[test]
    fn an_ingress_status_update_is_stored_but_is_no_change() {
        let ingress = |host: &str, ip: Option<&str>| -> <Ingress as Watched>::Wire {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "web", "namespace": "shop"},
                "spec": {"rules": [{"host": host}]},
                "status": {"loadBalancer": {"ingress": ip.map(|ip| vec![serde_json::json!({"ip": ip})])}}
            }))
            .expect("valid Ingress")
        };
        let (store, mut writer) = object_store::<Ingress>();
        assert!(writer.apply(watcher::Event::Apply(ingress("a.example.com", None))));
        assert!(!writer.apply(watcher::Event::Apply(ingress(
            "a.example.com",
            Some("192.0.2.1")
        ))));
        let key = ObjectKey::new("shop", "web");
        let stored = store.objects().get(&key).cloned().expect("stored");
        assert_eq!(
            stored
                .status
                .as_ref()
                .and_then(|s| s.load_balancer.as_ref())
                .and_then(|lb| lb.ingress.as_ref())
                .map(Vec::len),
            Some(1),
            "the status reaches the store"
        );
        assert!(writer.apply(watcher::Event::Apply(ingress(
            "b.example.com",
            Some("192.0.2.1")
        ))));
    }
}
