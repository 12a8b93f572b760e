//! Which Secrets and ConfigMaps a snapshot refers to: the one answer every source uses.
//!
//! The API source fetches only these objects, the manifests folder and `tugboat render`
//! keep only these, so a reference the builder follows is never missing from one source
//! and present in another. The references are:
//! - `spec.tls[].secretName` of the served Ingresses;
//! - every key whose value names an object ([`KeySpec::refers`] in [`KEYS`]): set on a
//!   served Ingress (the object is in the Ingress' namespace), on a Service those
//!   Ingresses route to (the Service's namespace), or in the controller's ConfigMap (the
//!   key applies to every route, so the object is looked up in the namespace of each
//!   served Ingress, as the builder does);
//! - the flags: `--default-ssl-certificate` (a Secret), `--configmap`,
//!   `--configmap-errorfiles`, `--tcp-services-configmap` and `--configmap-tcp-services`
//!   (ConfigMaps).
//!
//! A value that does not parse names nothing here; the builder reports it.
//!
//! [`KEYS`]: crate::annotations::KEYS
//! [`KeySpec::refers`]: crate::annotations::KeySpec

use std::collections::{BTreeMap, BTreeSet};

use crate::objects::Ingress;
use k8s_openapi::api::networking::v1::IngressBackend;

use crate::annotations::{self, Layer, Named, Scope, UnsupportedAccess};
use crate::build::Settings;
use crate::problem::ObjectRef;
use crate::snapshot::{DiffItem, follow};
use crate::snapshot::{ObjectKey, Objects, Snapshot, same_objects};

/// The Secrets and ConfigMaps a snapshot refers to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct References {
    pub secrets: BTreeSet<ObjectKey>,
    pub config_maps: BTreeSet<ObjectKey>,
}

impl References {
    /// Keeps in `snapshot` only the Secrets and ConfigMaps referred to.
    pub fn narrow(&self, snapshot: &mut Snapshot) {
        snapshot.secrets = pick(&snapshot.secrets, &self.secrets);
        snapshot.config_maps = pick(&snapshot.config_maps, &self.config_maps);
    }

    fn add(&mut self, namespace: &str, named: Named) {
        match named {
            Named::Secret(name) => self.secrets.insert(ObjectKey::new(namespace, name)),
            Named::ConfigMap(name) => self.config_maps.insert(ObjectKey::new(namespace, name)),
        };
    }
}

/// [`references`] kept between snapshots: worked out again only when what it reads
/// changed (the Ingresses, the Services, the controller's ConfigMap, the flags), so
/// that an EndpointSlice or a Secret change costs a walk of pointers here, and a change
/// of a few Ingresses that name the same objects as before costs those Ingresses.
#[derive(Debug, Default)]
pub struct ReferencesMemo {
    last: Option<Remembered>,
}

#[derive(Debug)]
struct Remembered {
    ingresses: Objects<Ingress>,
    services: Objects<crate::objects::Service>,
    gateways: Objects<crate::gateway::objects::Gateway>,
    http_routes: Objects<crate::gateway::objects::HttpRoute>,
    tls_routes: Objects<crate::gateway::objects::TlsRoute>,
    tcp_routes: Objects<crate::gateway::objects::TcpRoute>,
    own: Option<std::sync::Arc<k8s_openapi::api::core::v1::ConfigMap>>,
    settings: Settings,
    references: References,
}

/// At most this many changed Ingresses are looked at one by one.
const MOST_INGRESSES_COMPARED: usize = 32;

impl ReferencesMemo {
    /// What [`references`] answers for `snapshot` and `settings`.
    pub fn get(&mut self, snapshot: &Snapshot, settings: &Settings) -> References {
        let own = settings
            .config_map
            .as_ref()
            .and_then(|key| snapshot.config_maps.get(key))
            .cloned();
        if let Some(last) = &mut self.last
            && last.settings.same_flags(settings)
            && same_objects(&last.services, &snapshot.services)
            && same_objects(&last.gateways, &snapshot.gateways)
            && same_objects(&last.http_routes, &snapshot.http_routes)
            && same_objects(&last.tls_routes, &snapshot.tls_routes)
            && same_objects(&last.tcp_routes, &snapshot.tcp_routes)
            && match (&last.own, &own) {
                (None, None) => true,
                (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b),
                _ => false,
            }
            && last.follow_ingresses(snapshot)
        {
            return last.references.clone();
        }
        let found = references(snapshot, settings);
        self.last = Some(Remembered {
            ingresses: snapshot.ingresses.clone(),
            services: snapshot.services.clone(),
            gateways: snapshot.gateways.clone(),
            http_routes: snapshot.http_routes.clone(),
            tls_routes: snapshot.tls_routes.clone(),
            tcp_routes: snapshot.tcp_routes.clone(),
            own,
            settings: settings.clone(),
            references: found.clone(),
        });
        found
    }
}

impl Remembered {
    /// Takes in the Ingresses of `snapshot` (the Services and the rest unchanged) when
    /// their changes leave the references as they are or only add to them: Ingresses
    /// that name the same objects as before, new ones in namespaces that have
    /// Ingresses already. `false`: work them out again.
    fn follow_ingresses(&mut self, snapshot: &Snapshot) -> bool {
        // No pre-check with `same_objects`: it is this diff's first step, and an empty
        // diff takes nothing in below.
        if self.ingresses.ptr_eq(&snapshot.ingresses) {
            return true;
        }
        let mut added = References::default();
        for (count, item) in self.ingresses.diff(&snapshot.ingresses).enumerate() {
            if count >= MOST_INGRESSES_COMPARED {
                return false;
            }
            match item {
                DiffItem::Update {
                    old: (key, old),
                    new: (_, new),
                } => {
                    let named =
                        |ingress: &Ingress| named_by_ingress(key, ingress, &snapshot.services);
                    if named(old) != named(new) {
                        return false;
                    }
                }
                DiffItem::Add(key, new) => {
                    let has_namespace = self
                        .ingresses
                        .range(ObjectKey::new(&key.namespace, "")..)
                        .next()
                        .is_some_and(|(other, _)| other.namespace == key.namespace);
                    if !has_namespace {
                        return false;
                    }
                    let named = named_by_ingress(key, new, &snapshot.services);
                    added.secrets.extend(named.secrets);
                    added.config_maps.extend(named.config_maps);
                }
                DiffItem::Remove(..) => return false,
            }
        }
        self.references.secrets.extend(added.secrets);
        self.references.config_maps.extend(added.config_maps);
        self.ingresses = snapshot.ingresses.clone();
        true
    }
}

/// What one Ingress names: its `spec.tls` Secrets, the objects its keys name, and the
/// objects named by the keys of the Services it routes to.
fn named_by_ingress(
    key: &ObjectKey,
    ingress: &Ingress,
    services: &Objects<crate::objects::Service>,
) -> References {
    let mut found = References::default();
    let spec = ingress.spec.as_ref();
    for tls in spec.into_iter().flat_map(|s| s.tls.iter().flatten()) {
        if let Some(name) = tls.secret_name.as_deref().filter(|n| !n.is_empty()) {
            found.secrets.insert(ObjectKey::new(&key.namespace, name));
        }
    }
    let annotations = ingress.metadata.annotations.as_ref();
    for named in named_by_annotations(annotations, &key.namespace, Scope::Ingress) {
        found.add(&key.namespace, named);
    }
    let services_named: BTreeSet<&str> = backend_services(ingress).collect();
    for name in services_named {
        let service_key = ObjectKey::new(&key.namespace, name);
        if let Some(service) = services.get(&service_key) {
            let annotations = service.metadata.annotations.as_ref();
            for named in named_by_annotations(annotations, &key.namespace, Scope::Service) {
                found.add(&key.namespace, named);
            }
        }
    }
    found
}

/// The Secrets and ConfigMaps that `snapshot` (its Ingresses already selected by class)
/// and the flags in `settings` refer to. The controller's ConfigMap is read from
/// `snapshot.config_maps` when it is there.
pub fn references(snapshot: &Snapshot, settings: &Settings) -> References {
    let mut found = References::default();
    found.secrets.extend(settings.default_certificate.clone());
    found.config_maps.extend(settings.config_map.clone());
    found.config_maps.extend(settings.error_pages.clone());
    let tcp_services = settings.tcp_services.config_maps();
    found
        .config_maps
        .extend(tcp_services.map(|(key, _)| key.clone()));

    let mut route_namespaces = BTreeSet::new();
    for (key, ingress) in &snapshot.ingresses {
        route_namespaces.insert(&*key.namespace);
        let named = named_by_ingress(key, ingress, &snapshot.services);
        found.secrets.extend(named.secrets);
        found.config_maps.extend(named.config_maps);
    }
    if settings.gateway.is_some() {
        let (secrets, routed) = crate::gateway::referenced(snapshot);
        found.secrets.extend(secrets);
        route_namespaces.extend(snapshot.http_routes.keys().map(|k| &*k.namespace));
        route_namespaces.extend(snapshot.tls_routes.keys().map(|k| &*k.namespace));
        for key in &routed {
            if let Some(service) = snapshot.services.get(key) {
                let annotations = service.metadata.annotations.as_ref();
                for named in named_by_annotations(annotations, &key.namespace, Scope::Service) {
                    found.add(&key.namespace, named);
                }
            }
        }
    }
    let own = settings
        .config_map
        .as_ref()
        .and_then(|key| snapshot.config_maps.get(key));
    for (name, value) in own.iter().flat_map(|cm| cm.data.iter().flatten()) {
        let Some(named) = annotations::find_key(name).and_then(|spec| spec.named(value)) else {
            continue;
        };
        for namespace in &route_namespaces {
            found.add(namespace, named.clone());
        }
    }
    found
}

/// [`References::narrow`] kept between snapshots: when the references are the same,
/// the kept maps follow what changed in the snapshot's maps (which share their
/// unchanged parts with the last ones), instead of being made again.
#[derive(Debug, Default)]
pub struct NarrowMemo {
    secrets: Option<Picked<k8s_openapi::api::core::v1::Secret>>,
    config_maps: Option<Picked<k8s_openapi::api::core::v1::ConfigMap>>,
}

#[derive(Debug)]
struct Picked<K> {
    keys: BTreeSet<ObjectKey>,
    from: Objects<K>,
    picked: Objects<K>,
}

impl NarrowMemo {
    /// Keeps in `snapshot` only the Secrets and ConfigMaps `references` names.
    pub fn narrow(&mut self, references: &References, snapshot: &mut Snapshot) {
        snapshot.secrets = pick_again(&mut self.secrets, &snapshot.secrets, &references.secrets);
        snapshot.config_maps = pick_again(
            &mut self.config_maps,
            &snapshot.config_maps,
            &references.config_maps,
        );
    }
}

/// [`pick`], from the last answer when the keys are the same.
fn pick_again<K: PartialEq>(
    last: &mut Option<Picked<K>>,
    objects: &Objects<K>,
    keys: &BTreeSet<ObjectKey>,
) -> Objects<K> {
    if let Some(last) = last
        && last.keys == *keys
    {
        follow(&last.from, objects, &mut last.picked, |key, _| {
            keys.contains(key)
        });
        last.from = objects.clone();
        return last.picked.clone();
    }
    let picked = pick(objects, keys);
    *last = Some(Picked {
        keys: keys.clone(),
        from: objects.clone(),
        picked: picked.clone(),
    });
    picked
}

/// The objects of `keys` that `objects` holds.
fn pick<K>(objects: &Objects<K>, keys: &BTreeSet<ObjectKey>) -> Objects<K> {
    keys.iter()
        .filter_map(|key| Some((key.clone(), objects.get(key)?.clone())))
        .collect()
}

/// The objects named by the keys among `annotations` that can be set at `scope`, under
/// any prefix Tugboat reads: the same reading as the builder's ([`Layer`]).
fn named_by_annotations(
    annotations: Option<&BTreeMap<String, String>>,
    namespace: &str,
    scope: Scope,
) -> Vec<Named> {
    let object = ObjectRef {
        kind: "",
        namespace: namespace.into(),
        name: "".into(),
    };
    // Problems are the builder's to report.
    let mut problems = Vec::new();
    let layer = Layer::from_annotations(
        object,
        scope,
        annotations,
        UnsupportedAccess::Deny,
        &mut problems,
    );
    layer
        .values()
        .filter_map(|(key, value)| annotations::find_key(key)?.named(value))
        .collect()
}

/// The names of the Services an Ingress routes to (rules and `defaultBackend`).
pub(crate) fn backend_services(ingress: &Ingress) -> impl Iterator<Item = &str> {
    let spec = ingress.spec.as_ref();
    let default = spec.and_then(|s| s.default_backend.as_ref());
    let rules = spec
        .into_iter()
        .flat_map(|s| s.rules.iter().flatten())
        .flat_map(|rule| rule.http.iter().flat_map(|http| &http.paths))
        .map(|path| &path.backend);
    default
        .into_iter()
        .chain(rules)
        .filter_map(|backend: &IngressBackend| backend.service.as_ref())
        .map(|service| service.name.as_str())
        .chain(default_backend_annotation(ingress))
}

/// The Service an Ingress' `default-backend` key names (under any prefix), as written.
fn default_backend_annotation(ingress: &Ingress) -> impl Iterator<Item = &str> {
    let wanted = annotations::keys::DEFAULT_BACKEND.name();
    ingress
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(move |(key, _)| {
            annotations::prefixes::split_annotation(key).is_some_and(|(ecosystem, name)| {
                annotations::keys::targets(ecosystem, name)
                    .iter()
                    .any(|(spec, _)| spec.name == wanted)
            })
        })
        .map(|(_, value)| value.as_str())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::api::networking::v1::IngressTLS;
    use tugboat_test_objects::{
        in_namespace, mk_config_map, mk_ingress, mk_ingress_with_rules, mk_service,
        with_annotations, with_class, with_default_backend,
    };

    use super::*;
    use crate::annotations::{ALIAS_PREFIX, KEYS, PREFIX, Refers};
    use crate::objects::Service;

    /// Ingress `namespace/name` (without a class) routing `a.example.com` to `web`.
    fn ingress(namespace: &str, name: &str, annotations: &[(&str, &str)]) -> Ingress {
        let ingress = with_class(mk_ingress(name, "a.example.com", "web"), None);
        in_namespace(with_annotations(ingress, annotations), namespace).into()
    }

    /// Service `namespace/name`, read as the sources read it.
    fn service(namespace: &str, name: &str, annotations: &[(&str, &str)]) -> Service {
        let service = with_annotations(mk_service(name, "http", 80), annotations);
        let json = serde_json::to_value(in_namespace(service, namespace)).expect("JSON");
        serde_json::from_value(json).expect("valid Service")
    }

    fn config_map(namespace: &str, name: &str, data: &[(&str, &str)]) -> ConfigMap {
        in_namespace(mk_config_map(name, data), namespace)
    }

    fn with_ingress(ingress: Ingress) -> Snapshot {
        let mut snapshot = Snapshot::default();
        let key = ObjectKey::new(
            ingress.metadata.namespace.clone().unwrap_or_default(),
            ingress.metadata.name.clone().unwrap_or_default(),
        );
        snapshot.ingresses.insert(key, Arc::new(ingress));
        snapshot
    }

    fn keys(set: &BTreeSet<ObjectKey>) -> Vec<String> {
        set.iter().map(ToString::to_string).collect()
    }

    fn settings() -> Settings {
        Settings::new(0)
    }

    /// Every key that names an object, on each scope it can be set at, is found, in
    /// the right namespace; under both prefixes on annotations.
    #[test]
    fn every_referencing_key_on_every_scope() {
        // (key, value, kind of the object named)
        let cases = [
            ("auth-secret", "users", "Secret"),
            ("server-ca", "backend-ca", "Secret"),
            ("server-crt", "client-pair", "Secret"),
            ("allow-list", "configmap:office/ips", "ConfigMap"),
            ("whitelist", "configmap:office/ips", "ConfigMap"),
            ("deny-list", "configmap:blocked/ips", "ConfigMap"),
            ("blacklist", "configmap:blocked/ips", "ConfigMap"),
        ];
        for (key, value, kind) in cases {
            let name = value
                .strip_prefix("configmap:")
                .and_then(|v| v.split_once('/'))
                .map_or(value, |(name, _)| name);
            let expect = |namespace: &str, found: &References| {
                let (wanted, other) = if kind == "Secret" {
                    (&found.secrets, &found.config_maps)
                } else {
                    (&found.config_maps, &found.secrets)
                };
                assert!(
                    wanted.contains(&ObjectKey::new(namespace, name)),
                    "{key}: {found:?}"
                );
                assert!(other.iter().all(|k| *k.name != *name), "{key}: {found:?}");
            };
            for prefix in [PREFIX, ALIAS_PREFIX] {
                // On an Ingress: the Ingress' namespace.
                let annotation = format!("{prefix}{key}");
                let annotated = ingress("shop", "a", &[(&annotation, value)]);
                expect("shop", &references(&with_ingress(annotated), &settings()));

                // On a Service an Ingress routes to: the Service's namespace.
                let mut snapshot = with_ingress(ingress("shop", "a", &[]));
                snapshot.services.insert(
                    ObjectKey::new("shop", "web"),
                    Arc::new(service("shop", "web", &[(&annotation, value)])),
                );
                expect("shop", &references(&snapshot, &settings()));
            }
            // In the controller's ConfigMap: the namespace of every served Ingress.
            let mut snapshot = with_ingress(ingress("shop", "a", &[]));
            snapshot.ingresses.insert(
                ObjectKey::new("blog", "b"),
                Arc::new(ingress("blog", "b", &[])),
            );
            let own = ObjectKey::new("ops", "tugboat");
            snapshot.config_maps.insert(
                own.clone(),
                Arc::new(config_map("ops", "tugboat", &[(key, value)])),
            );
            let settings = Settings {
                config_map: Some(own),
                ..settings()
            };
            let found = references(&snapshot, &settings);
            expect("shop", &found);
            expect("blog", &found);
        }
    }

    #[test]
    fn tls_secrets_of_ingresses() {
        let mut tls = ingress("shop", "a", &[]);
        tls.spec.as_mut().expect("spec").tls = Some(vec![
            IngressTLS {
                hosts: Some(vec!["a.example.com".into()]),
                secret_name: Some("site".into()),
            },
            IngressTLS {
                hosts: Some(vec!["b.example.com".into()]),
                secret_name: None,
            },
        ]);
        let found = references(&with_ingress(tls), &settings());
        assert_eq!(keys(&found.secrets), ["shop/site"]);
        assert!(found.config_maps.is_empty());
    }

    /// The memo answers what [`references`] answers as Ingresses, Services, the
    /// controller's ConfigMap and the flags change, and keeps its answer while only
    /// other objects change.
    #[test]
    fn the_memo_follows_what_references_read() {
        let mut memo = ReferencesMemo::default();
        let mut snapshot = with_ingress(ingress(
            "shop",
            "a",
            &[("tugboat.dev/auth-secret", "users")],
        ));
        let mut settings = settings();
        let mut check = |snapshot: &Snapshot, settings: &Settings| {
            assert_eq!(memo.get(snapshot, settings), references(snapshot, settings));
        };
        check(&snapshot, &settings);
        snapshot.ingresses.insert(
            ObjectKey::new("shop", "a"),
            Arc::new(ingress(
                "shop",
                "a",
                &[("tugboat.dev/auth-secret", "others")],
            )),
        );
        check(&snapshot, &settings);
        snapshot.services.insert(
            ObjectKey::new("shop", "web"),
            Arc::new(service("shop", "web", &[("tugboat.dev/server-ca", "ca")])),
        );
        check(&snapshot, &settings);
        settings.config_map = Some(ObjectKey::new("ops", "tugboat"));
        check(&snapshot, &settings);
        snapshot.config_maps.insert(
            ObjectKey::new("ops", "tugboat"),
            Arc::new(config_map(
                "ops",
                "tugboat",
                &[("allow-list", "configmap:nets")],
            )),
        );
        check(&snapshot, &settings);
        settings.now = 42;
        check(&snapshot, &settings);
    }

    #[test]
    fn flags_name_their_objects_even_without_ingresses() {
        let settings = Settings {
            default_certificate: Some(ObjectKey::new("ops", "wildcard")),
            error_pages: Some(ObjectKey::new("ops", "pages")),
            config_map: Some(ObjectKey::new("ops", "tugboat")),
            ..settings()
        };
        let found = references(&Snapshot::default(), &settings);
        assert_eq!(keys(&found.secrets), ["ops/wildcard"]);
        assert_eq!(keys(&found.config_maps), ["ops/pages", "ops/tugboat"]);
    }

    #[test]
    fn what_names_nothing_is_not_a_reference() {
        let annotated = ingress(
            "shop",
            "a",
            // Inline access list, a key that names no object, an invalid name, another
            // controller's prefix.
            &[
                ("tugboat.dev/allow-list", "10.0.0.0/8"),
                ("tugboat.dev/set-host", "configmap:not-a-list/x"),
                ("tugboat.dev/auth-secret", "Not A Name"),
                ("nginx.ingress.kubernetes.io/auth-secret", "theirs"),
            ],
        );
        let mut snapshot = with_ingress(annotated);
        // A Service no served Ingress routes to.
        snapshot.services.insert(
            ObjectKey::new("shop", "unused"),
            Arc::new(service(
                "shop",
                "unused",
                &[("tugboat.dev/auth-secret", "x")],
            )),
        );
        // A ConfigMap key that can name a Secret, but no --configmap is set.
        snapshot.config_maps.insert(
            ObjectKey::new("ops", "tugboat"),
            Arc::new(config_map("ops", "tugboat", &[("auth-secret", "users")])),
        );
        assert_eq!(references(&snapshot, &settings()), References::default());
    }

    #[test]
    fn services_of_the_default_backend_are_read() {
        let mut snapshot = Snapshot::default();
        let only_default = with_default_backend(mk_ingress_with_rules("d", vec![]), "fallback", 80);
        let only_default: Ingress = in_namespace(with_class(only_default, None), "shop").into();
        snapshot
            .ingresses
            .insert(ObjectKey::new("shop", "d"), Arc::new(only_default));
        snapshot.services.insert(
            ObjectKey::new("shop", "fallback"),
            Arc::new(service(
                "shop",
                "fallback",
                &[("tugboat.dev/server-ca", "ca")],
            )),
        );
        assert_eq!(
            keys(&references(&snapshot, &settings()).secrets),
            ["shop/ca"]
        );
    }

    /// A key whose documented values name an object must say so in the table, or the
    /// sources would not fetch the object.
    #[test]
    fn keys_that_name_objects_are_marked() {
        for key in KEYS {
            let names_secret = key.values.contains("Secret");
            let names_config_map = key.values.contains("configmap:");
            let expected = match (names_secret, names_config_map) {
                (true, false) => Refers::Secret,
                (false, true) => Refers::ConfigMapKey,
                (false, false) => Refers::Nothing,
                (true, true) => panic!("{}: names both a Secret and a ConfigMap", key.name),
            };
            assert_eq!(key.refers, expected, "{}", key.name);
        }
    }

    #[test]
    fn the_memo_follows_ingress_changes_as_a_full_walk_does() {
        let mut settings = Settings::new(0);
        settings.config_map = Some(ObjectKey::new("tugboat", "config"));
        let mut snapshot = with_ingress(ingress("a", "one", &[]));
        snapshot.config_maps.insert(
            ObjectKey::new("tugboat", "config"),
            Arc::new(config_map(
                "tugboat",
                "config",
                &[("allow-list", "configmap:shared/ranges")],
            )),
        );
        snapshot.services.insert(
            ObjectKey::new("a", "web"),
            Arc::new(service("a", "web", &[("tugboat.dev/server-ca", "web-ca")])),
        );
        let mut memo = ReferencesMemo::default();
        let mut steps: Vec<(ObjectKey, Option<Ingress>)> = Vec::new();
        let key = |ns: &str, name: &str| ObjectKey::new(ns, name);
        // Same names, other content; a new Ingress in a known namespace; one in a new
        // namespace; another auth Secret; a removal.
        let mut changed = ingress("a", "one", &[]);
        if let Some(rules) = changed.spec.as_mut().and_then(|s| s.rules.as_mut()) {
            rules[0].host = Some("b.example.com".into());
        }
        steps.push((key("a", "one"), Some(changed)));
        steps.push((
            key("a", "two"),
            Some(ingress("a", "two", &[("tugboat.dev/auth-secret", "users")])),
        ));
        steps.push((key("b", "three"), Some(ingress("b", "three", &[]))));
        steps.push((
            key("a", "two"),
            Some(ingress(
                "a",
                "two",
                &[("tugboat.dev/auth-secret", "others")],
            )),
        ));
        steps.push((key("b", "three"), None));
        assert_eq!(
            memo.get(&snapshot, &settings),
            references(&snapshot, &settings)
        );
        for (at, ingress) in steps {
            match ingress {
                Some(ingress) => snapshot.ingresses.insert(at, Arc::new(ingress)),
                None => snapshot.ingresses.remove(&at),
            };
            assert_eq!(
                memo.get(&snapshot, &settings),
                references(&snapshot, &settings)
            );
        }
        let found = memo.get(&snapshot, &settings);
        assert!(found.secrets.contains(&key("a", "others")), "{found:?}");
        assert!(found.secrets.contains(&key("a", "web-ca")), "{found:?}");
        assert!(found.config_maps.contains(&key("a", "shared")), "{found:?}");
        assert!(
            !found.config_maps.contains(&key("b", "ranges")),
            "{found:?}"
        );
    }

    #[test]
    fn the_narrow_memo_keeps_what_narrow_keeps() {
        use k8s_openapi::api::core::v1::Secret;
        let secret = |name: &str, value: &str| {
            let mut secret = Secret::default();
            secret.metadata.name = Some(name.into());
            secret.string_data = Some([("v".to_string(), value.to_string())].into());
            (ObjectKey::new("ns", name), Arc::new(secret))
        };
        let mut snapshot = Snapshot::default();
        for (name, value) in [("a", "1"), ("b", "1"), ("c", "1")] {
            let (key, object) = secret(name, value);
            snapshot.secrets.insert(key, object);
        }
        let mut references = References::default();
        references.secrets.insert(ObjectKey::new("ns", "a"));
        references.secrets.insert(ObjectKey::new("ns", "d"));
        let mut memo = NarrowMemo::default();
        let check = |memo: &mut NarrowMemo, snapshot: &Snapshot, references: &References| {
            let mut expected = snapshot.clone();
            references.narrow(&mut expected);
            let mut got = snapshot.clone();
            memo.narrow(references, &mut got);
            assert_eq!(got.secrets, expected.secrets);
        };
        check(&mut memo, &snapshot, &references);
        let steps = [
            ("a", Some("2")),
            ("b", Some("2")),
            ("d", Some("1")),
            ("a", None),
        ];
        for (name, value) in steps {
            match value {
                Some(value) => {
                    let (key, object) = secret(name, value);
                    snapshot.secrets.insert(key, object);
                }
                None => {
                    snapshot.secrets.remove(&ObjectKey::new("ns", name));
                }
            }
            check(&mut memo, &snapshot, &references);
        }
        references.secrets.insert(ObjectKey::new("ns", "b"));
        check(&mut memo, &snapshot, &references);
    }
}
