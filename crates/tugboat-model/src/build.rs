//! From a [`Snapshot`] to the [`Desired`] state, with Kubernetes' Ingress semantics.
//!
//! Ingresses are taken oldest first, so that when two claim the same host and path the
//! older one keeps it and the newer one gets a [`ProblemReason::RouteConflict`]. Each
//! backend (one Service port) is resolved once to its ready endpoints through the
//! Service's EndpointSlices. Anything wrong in an object becomes an [`ObjectProblem`] and
//! only the faulty part of that object is left out.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::objects::EndpointSlice;
use crate::objects::Ingress;

use crate::annotations::{self, Layer, Scope, read_keys};
use crate::desired::{
    Backend, BackendName, Desired, HostMatch, PassthroughRoute, PathMatch, Route, RouteOwnerKind,
    TlsCertificate, UserHash,
};
use crate::features::{FeatureSetId, PathRewrite, RouteFeatures};
use crate::problem::{ObjectProblem, ObjectRef, ProblemReason};
use crate::snapshot::{ObjectKey, Snapshot};
use crate::tls::Pem;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

mod canary;
mod endpoints;
mod error_pages;
mod gateway_routes;
mod passthrough;
mod route_features;
mod routes;
mod shared;
mod tcp_services;
mod tls;

use canary::Canaries;
pub(crate) use endpoints::slice_endpoints;
use endpoints::{Endpoints, index_slices};
use error_pages::error_pages;
use gateway_routes::add_gateway_api;
use passthrough::Passthrough;
use route_features::{Features, FeaturesOutput, regex_keys, server_aliases, www_redirect_field};
use routes::{Routes, ingress_host_match, new_route, parse_path, rule_host};
use tls::{Tls, TlsOutput};

pub use error_pages::ERROR_PAGE_CODES;
pub use route_features::NO_USERS;
use shared::Shared;
pub(crate) use shared::{BackendUse, Reads, SecretUse};
pub use shared::{ParsedSecrets, Settings};
pub use tcp_services::{Format as TcpServicesFormat, TcpServicesSettings};

/// What [`build`] returns: the desired state and what was wrong on the way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildOutput {
    pub desired: Desired,
    pub problems: Vec<ObjectProblem>,
    /// The status of the Gateway API objects served.
    pub gateway: crate::gateway::GatewayStatus,
}

/// Builds the desired proxy state from a snapshot. Pure and deterministic.
pub fn build(snapshot: &Snapshot, settings: &Settings) -> BuildOutput {
    build_with(snapshot, settings, &mut ParsedSecrets::default()).0
}

/// [`build`], with TLS Secrets parsed before taken from `parsed`; also says what it read.
pub(crate) fn build_with(
    snapshot: &Snapshot,
    settings: &Settings,
    parsed: &mut ParsedSecrets,
) -> (BuildOutput, Reads) {
    let mut problems = Vec::new();
    let config_map_layer = config_map_layer(snapshot, settings, &mut problems);
    let (global, config_map_redirect) =
        read_keys(vec![&config_map_layer], &mut problems, |resolver| {
            let global = annotations::global_options(resolver, settings.allow_snippets);
            let redirect = resolver
                .get_in(&annotations::keys::SSL_REDIRECT, &[Scope::ConfigMap])
                .unwrap_or(true);
            (global, redirect)
        });
    let mut builder = Builder::new(
        snapshot,
        settings,
        &config_map_layer,
        parsed,
        index_slices(snapshot),
        problems,
    );
    let mut ingresses: Vec<(&ObjectKey, &Ingress)> = snapshot
        .ingresses
        .iter()
        .map(|(key, ingress)| (key, ingress.as_ref()))
        .collect();
    ingresses.sort_by(|(ka, a), (kb, b)| ingress_order(ka, a).cmp(&ingress_order(kb, b)));
    for (key, ingress) in ingresses {
        builder.add_ingress(key, ingress);
    }
    let Builder {
        shared,
        endpoints,
        tls,
        features,
        routes,
        canaries,
        passthrough,
    } = &mut builder;
    canaries.join(shared, endpoints, tls, features, routes);
    let gateway = add_gateway_api(shared, endpoints, tls, features, routes, passthrough);
    let default_backend_service = endpoints.default_backend_service(shared);
    // An HTTPS listener without a hostname takes every host on the HTTPS bind: its
    // certificate is the default there, unless the operator chose one
    // (--default-ssl-certificate), which a Gateway does not override.
    let default_certificate = tls
        .default_certificate(shared)
        .or(gateway.default_certificate);
    let error_pages = error_pages(shared);
    let tcp_services = tcp_services::tcp_services(shared, endpoints, gateway.tcp_services);
    tls.keep_parsed(&shared.reads);
    let built = builder.finish();
    let (default_backend, default_backend_owner) = match built.default_backend {
        Some((backend, owner)) => (Some(backend), Some(owner)),
        None => (default_backend_service, None),
    };
    let output = BuildOutput {
        desired: Desired {
            backends: built.backends,
            routes: built.routes,
            default_backend,
            default_backend_owner,
            certificates: built.tls.certificates,
            tls_hosts: built.tls.tls_hosts.into_iter().collect(),
            default_certificate,
            ssl_redirect: settings.ssl_redirect && config_map_redirect,
            error_pages,
            feature_sets: built.features.feature_sets,
            userlists: built.features.userlists,
            global,
            backend_files: built.tls.backend_files,
            client_ca_hosts: built.features.client_ca_hosts,
            client_ca_files: built.features.client_ca_files,
            pattern_files: built.features.pattern_files,
            http_route_slots: gateway.http_route_slots,
            passthrough: built.passthrough,
            tcp_services,
            listener_binds: gateway.listener_binds,
        },
        problems: built.problems,
        gateway: gateway.status,
    };
    (output, built.reads)
}

/// The order in which a build takes Ingresses: oldest first, then by namespace and
/// name. The older of two claims wins.
pub(crate) fn ingress_order<'a>(
    key: &'a ObjectKey,
    ingress: &'a Ingress,
) -> (Option<&'a Time>, &'a ObjectKey) {
    (ingress.metadata.creation_timestamp.as_ref(), key)
}

/// What one Ingress adds to a build, built alone: no other Ingress, nothing the flags
/// name. [`crate::incremental`] compares it before and after a change of that Ingress.
#[derive(Debug, Default)]
pub(crate) struct IngressAlone {
    /// Its routes, sorted by host and path.
    pub routes: Vec<Route>,
    pub backends: BTreeMap<BackendName, Backend>,
    pub default_backend: Option<BackendName>,
    pub certificates: BTreeMap<String, TlsCertificate>,
    pub tls_hosts: BTreeSet<HostMatch>,
    pub feature_sets: BTreeMap<FeatureSetId, RouteFeatures>,
    pub userlists: BTreeMap<String, Vec<UserHash>>,
    pub backend_files: BTreeMap<String, Pem>,
    pub pattern_files: BTreeMap<String, String>,
    /// Its TLS passthrough routes, sorted by host.
    pub passthrough: Vec<PassthroughRoute>,
    pub client_ca_hosts: BTreeMap<String, crate::features::ClientCa>,
    pub client_ca_files: BTreeMap<String, Pem>,
    /// Sorted, without duplicates.
    pub problems: Vec<ObjectProblem>,
    pub reads: Reads,
    /// Whether it is a canary: what it does depends on other Ingresses.
    pub canary: bool,
}

/// Builds one Ingress alone (see [`IngressAlone`]) with the EndpointSlices of the
/// Services it names in `slices_by_service`.
pub(crate) fn build_ingress_alone<'a>(
    snapshot: &'a Snapshot,
    settings: &'a Settings,
    parsed: &'a mut ParsedSecrets,
    slices_by_service: HashMap<ObjectKey, Vec<&'a EndpointSlice>>,
    key: &ObjectKey,
    ingress: &Ingress,
) -> IngressAlone {
    // The ConfigMap's own problems belong to the whole build, not to this Ingress.
    let config_map_layer = config_map_layer(snapshot, settings, &mut Vec::new());
    let mut builder = Builder::new(
        snapshot,
        settings,
        &config_map_layer,
        parsed,
        slices_by_service,
        Vec::new(),
    );
    builder.add_ingress(key, ingress);
    let canary = builder.canaries.seen();
    let built = builder.finish();
    IngressAlone {
        routes: built.routes,
        backends: built.backends,
        default_backend: built.default_backend.map(|(backend, _)| backend),
        certificates: built.tls.certificates,
        tls_hosts: built.tls.tls_hosts,
        feature_sets: built.features.feature_sets,
        userlists: built.features.userlists,
        backend_files: built.tls.backend_files,
        pattern_files: built.features.pattern_files,
        passthrough: built.passthrough,
        client_ca_hosts: built.features.client_ca_hosts,
        client_ca_files: built.features.client_ca_files,
        problems: built.problems,
        reads: built.reads,
        canary,
    }
}

/// The keys of the `--configmap` ConfigMap (an empty layer when not set or missing).
fn config_map_layer(
    snapshot: &Snapshot,
    settings: &Settings,
    problems: &mut Vec<ObjectProblem>,
) -> Layer {
    let Some(key) = &settings.config_map else {
        return Layer::empty(
            ObjectRef {
                kind: "ConfigMap",
                namespace: "".into(),
                name: "".into(),
            },
            Scope::ConfigMap,
        );
    };
    let object = ObjectRef::of("ConfigMap", key);
    match snapshot.config_maps.get(key) {
        Some(config_map) => Layer::from_config_map(object, config_map.data.as_ref(), problems),
        None => {
            problems.push(ObjectProblem {
                object: object.clone(),
                field: "metadata.name".into(),
                reason: ProblemReason::InvalidField,
                message: "the --configmap ConfigMap does not exist: built-in defaults apply".into(),
            });
            Layer::empty(object, Scope::ConfigMap)
        }
    }
}

/// A build: its parts, each the owner of its own state, wired by the Ingresses' rules.
struct Builder<'a> {
    shared: Shared<'a>,
    endpoints: Endpoints<'a>,
    tls: Tls<'a>,
    features: Features,
    routes: Routes,
    canaries: Canaries,
    passthrough: Passthrough,
}

/// What the parts of a build give the desired state, and what the build found.
struct Built {
    backends: BTreeMap<BackendName, Backend>,
    routes: Vec<Route>,
    default_backend: Option<(BackendName, ObjectKey)>,
    tls: TlsOutput,
    features: FeaturesOutput,
    passthrough: Vec<PassthroughRoute>,
    problems: Vec<ObjectProblem>,
    reads: Reads,
}

impl<'a> Builder<'a> {
    fn new(
        snapshot: &'a Snapshot,
        settings: &'a Settings,
        config_map_layer: &'a Layer,
        parsed: &'a mut ParsedSecrets,
        slices_by_service: HashMap<ObjectKey, Vec<&'a EndpointSlice>>,
        problems: Vec<ObjectProblem>,
    ) -> Self {
        Builder {
            shared: Shared {
                snapshot,
                settings,
                config_map_layer,
                problems,
                reads: Reads::default(),
            },
            endpoints: Endpoints::new(slices_by_service),
            tls: Tls::new(parsed),
            features: Features::new(config_map_layer),
            routes: Routes::default(),
            canaries: Canaries::default(),
            passthrough: Passthrough::default(),
        }
    }

    /// The parts' output, the problems sorted and without duplicates.
    fn finish(mut self) -> Built {
        let (routes, default_backend) = self.routes.into_parts();
        let features = self.features.into_output();
        self.passthrough
            .refuse_bypassed(&mut self.shared, routes.iter(), |id| {
                features.feature_sets.get(id)
            });
        let mut problems = self.shared.problems;
        problems.sort();
        problems.dedup();
        let (passthrough, passthrough_backends) = self.passthrough.into_parts();
        let mut backends = self.endpoints.into_backends();
        backends.extend(passthrough_backends);
        Built {
            backends,
            passthrough,
            routes,
            default_backend,
            tls: self.tls.into_output(),
            features,
            problems,
            reads: self.shared.reads,
        }
    }

    fn add_ingress(&mut self, key: &ObjectKey, ingress: &Ingress) {
        let object = ObjectRef::of("Ingress", key);
        let Some(spec) = &ingress.spec else {
            return;
        };
        let shared = &mut self.shared;
        let ingress_layer = Layer::from_annotations(
            object.clone(),
            Scope::Ingress,
            ingress.metadata.annotations.as_ref(),
            shared.settings.unsupported_access,
            &mut shared.problems,
        );
        let canary = read_keys(
            vec![&ingress_layer],
            &mut shared.problems,
            annotations::canary,
        );
        if let Some(settings) = canary {
            self.canaries
                .add(shared, key, spec, ingress_layer, settings);
            return;
        }
        let ingress_layer = &ingress_layer;
        let passthrough = passthrough::wanted(shared, ingress_layer);
        let (regex_paths, rewrite_target) = regex_keys(shared, ingress_layer);
        let rule_hosts: BTreeSet<String> = spec
            .rules
            .iter()
            .flatten()
            .filter_map(|rule| rule.host.as_deref())
            .map(str::to_ascii_lowercase)
            .collect();
        let mut aliases = server_aliases(shared, ingress_layer);
        if let Some((_, aliases)) = &mut aliases {
            // A host the Ingress has a rule for keeps that rule's routes.
            aliases.retain(|alias| !rule_hosts.contains(alias));
        }
        let www_redirect_field = www_redirect_field(shared, ingress_layer);
        // The hosts the Ingress serves itself: a www counterpart among them is theirs.
        let own_hosts: BTreeSet<String> = match &aliases {
            Some((_, aliases)) => rule_hosts.iter().chain(aliases).cloned().collect(),
            None => rule_hosts.clone(),
        };
        let mut www_redirected = BTreeSet::new();
        let mut aliased_hosts = BTreeSet::new();
        let mut conflicting_aliases = BTreeSet::new();
        // By Service and by whether every host of the rule is exact (`auth-url` cares).
        let mut features_by_service: HashMap<(ObjectKey, bool), Option<FeatureSetId>> =
            HashMap::new();
        let mut used = BTreeSet::new();
        if let Some(default) = &spec.default_backend {
            let backend = self.endpoints.backend(
                &mut self.shared,
                &mut self.tls,
                key,
                default,
                "spec.defaultBackend",
                ingress_layer,
            );
            if let Some(backend) = backend {
                used.insert(backend.clone());
                self.routes.offer_default_backend(backend, key);
            }
        }
        let error_backend = route_features::error_backend(
            &mut self.shared,
            &mut self.endpoints,
            &mut self.tls,
            key,
            ingress_layer,
            &mut used,
        );
        for (rule_index, rule) in spec.rules.iter().flatten().enumerate() {
            let field = format!("spec.rules[{rule_index}]");
            let Some(host) = rule_host(&mut self.shared, &object, &field, rule.host.as_deref())
            else {
                continue;
            };
            let Some(http) = &rule.http else {
                continue;
            };
            // ingress-nginx gives a server aliases; the catch-all rule has no name.
            let host_aliases = match (&host, &aliases) {
                (HostMatch::Any, _) | (_, None) => &[][..],
                (_, Some((_, aliases))) => {
                    aliased_hosts.insert(host.clone());
                    aliases.as_slice()
                }
            };
            // The rule's host and its aliases, each a request's Host must be exactly.
            let exact_hosts = matches!(host, HostMatch::Exact(_))
                && host_aliases
                    .iter()
                    .all(|alias| matches!(ingress_host_match(alias), HostMatch::Exact(_)));
            let mut rule_backend = None;
            let mut root_backend = None;
            for (path_index, path) in http.paths.iter().enumerate() {
                let field = format!("{field}.http.paths[{path_index}]");
                let path_match =
                    match parse_path(path.path.as_deref(), &path.path_type, regex_paths) {
                        Ok(path_match) => path_match,
                        Err((subfield, message)) => {
                            let field = format!("{field}.{subfield}");
                            self.shared.problem(&object, field, message);
                            continue;
                        }
                    };
                let Some(backend) = self.endpoints.backend(
                    &mut self.shared,
                    &mut self.tls,
                    key,
                    &path.backend,
                    &format!("{field}.backend"),
                    ingress_layer,
                ) else {
                    continue;
                };
                used.insert(backend.clone());
                rule_backend.get_or_insert_with(|| backend.clone());
                if path.path.as_deref() == Some("/") {
                    root_backend.get_or_insert_with(|| backend.clone());
                }
                let service = self
                    .endpoints
                    .service_of(&backend)
                    .cloned()
                    .unwrap_or_else(|| key.clone());
                let cache_key = (service, exact_hosts);
                let mut features = match features_by_service.get(&cache_key) {
                    Some(features) => features.clone(),
                    None => {
                        let features = self.features.route_features(
                            &mut self.shared,
                            &mut self.endpoints,
                            &cache_key.0,
                            ingress_layer,
                            exact_hosts,
                        );
                        features_by_service.insert(cache_key, features.clone());
                        features
                    }
                };
                if let (PathMatch::Regex(pattern), Some(replacement)) =
                    (&path_match, &rewrite_target)
                {
                    let rewrite = PathRewrite {
                        // As ingress-nginx's `rewrite`: the path's expression,
                        // case-insensitive, replaces the whole path when it matches.
                        pattern: format!("(?i){pattern}"),
                        replacement: replacement.clone(),
                    };
                    features = Some(self.features.with(features.as_ref(), |features| {
                        features.path_rewrite = Some(rewrite);
                    }));
                }
                if let Some(error_backend) = &error_backend {
                    features = Some(self.features.with(features.as_ref(), |features| {
                        features.error_backend = Some(error_backend.clone());
                    }));
                }
                let client_ca = features
                    .as_ref()
                    .and_then(|id| self.features.get(id))
                    .and_then(|f| f.client_certificates.as_ref())
                    .map(|c| c.ca.clone());
                if let Some(ca) = client_ca {
                    let hosts = std::iter::once(host.clone())
                        .chain(host_aliases.iter().map(|alias| ingress_host_match(alias)));
                    let mut refused = false;
                    for served in hosts {
                        refused |= !self.features.client_ca_host(
                            &mut self.shared,
                            &object,
                            &field,
                            &served,
                            &ca,
                        );
                    }
                    if refused {
                        features = Some(self.features.with(features.as_ref(), |features| {
                            features.deny_all = true;
                        }));
                    }
                }
                let route_for = |host: HostMatch| {
                    let slot = (host, path_match.clone());
                    new_route(
                        key,
                        RouteOwnerKind::Ingress,
                        slot,
                        backend.clone(),
                        features.clone(),
                    )
                };
                let route = route_for(host.clone());
                self.routes.add(&mut self.shared, &object, &field, route);
                for alias in host_aliases {
                    let alias_field = aliases.as_ref().map_or(&field, |(f, _)| f);
                    let route = route_for(ingress_host_match(alias));
                    if !self
                        .routes
                        .add(&mut self.shared, &object, alias_field, route)
                    {
                        conflicting_aliases.insert(alias.clone());
                    }
                }
            }
            // TLS passthrough goes to the rule's `/` path, else its first path.
            if passthrough
                && let Some(http_backend) = root_backend.as_ref().or(rule_backend.as_ref())
                && let Some(backend) = self.endpoints.built(http_backend)
                && self.passthrough.add(
                    &mut self.shared,
                    &object,
                    &field,
                    (None, &host),
                    (http_backend, backend),
                )
            {
                used.insert(http_backend.passthrough());
            }
            if let (Some(www_field), Some(backend)) = (&www_redirect_field, rule_backend)
                && let Some((counterpart, features)) = self.features.www_redirect(
                    &mut self.shared,
                    &object,
                    www_field,
                    &host,
                    &own_hosts,
                    &mut www_redirected,
                )
            {
                let slot = (counterpart, PathMatch::Prefix("/".into()));
                let route = new_route(key, RouteOwnerKind::Ingress, slot, backend, Some(features));
                self.routes.add(&mut self.shared, &object, www_field, route);
            }
        }
        // An alias whose host another route already has is not made a TLS host: the
        // other Ingress keeps its redirect and certificate.
        let tls_aliases: Vec<String> = match &aliases {
            Some((_, aliases)) if !aliased_hosts.is_empty() => aliases
                .iter()
                .filter(|alias| !conflicting_aliases.contains(*alias))
                .cloned()
                .collect(),
            _ => Vec::new(),
        };
        for (tls_index, tls) in spec.tls.iter().flatten().enumerate() {
            self.tls.add_tls(
                &mut self.shared,
                key,
                tls_index,
                tls,
                &aliased_hosts,
                &tls_aliases,
            );
        }
        self.shared.reads.used_by(used, key);
    }
}
