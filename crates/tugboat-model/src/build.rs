//! From a [`Snapshot`] to the [`Desired`] state, with Kubernetes' Ingress semantics.
//!
//! Ingresses are taken oldest first, so that when two claim the same host and path the
//! older one keeps it and the newer one gets a [`ProblemReason::RouteConflict`]. Each
//! backend (one Service port) is resolved once to its ready endpoints through the
//! Service's EndpointSlices. Anything wrong in an object becomes an [`ObjectProblem`] and
//! only the faulty part of that object is left out.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use crate::objects::EndpointSlice;
use crate::objects::Ingress;

use crate::annotations::{self, Layer, Resolver, Scope, UnsupportedAccess, read_keys};
use crate::desired::{
    Backend, BackendName, Desired, HostMatch, PathMatch, Route, TlsCertificate, UserHash,
};
use crate::features::{BackendOptions, FeatureSetId, PathRewrite, RouteFeatures};
use crate::problem::{ObjectProblem, ObjectRef, ProblemReason};
use crate::snapshot::{ObjectKey, Snapshot};
use crate::tls::{ParsedPair, Pem, parse_tls_secret};
use crate::validate;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

mod canary;
mod endpoints;
mod error_pages;
mod gateway_routes;
mod route_features;
mod tls;

use canary::CanaryIngress;
pub(crate) use endpoints::slice_endpoints;
use endpoints::{ResolutionError, index_slices};

/// The operator's settings the model needs (from the controller's flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `--default-backend-service`: where unmatched requests go when no Ingress sets a
    /// `spec.defaultBackend` (its first port).
    pub default_backend_service: Option<ObjectKey>,
    /// `--default-ssl-certificate`: the TLS Secret served for unmatched SNI.
    pub default_certificate: Option<ObjectKey>,
    /// `--configmap-errorfiles`: status code -> page.
    pub error_pages: Option<ObjectKey>,
    /// `--configmap`: the controller's ConfigMap, the default of every key
    /// (see [`annotations`]).
    pub config_map: Option<ObjectKey>,
    /// ExternalName Services let an Ingress author send traffic to any host: off unless
    /// the operator enables them.
    pub allow_external_name: bool,
    /// Redirect plain HTTP to HTTPS for hosts listed in a `spec.tls`.
    pub ssl_redirect: bool,
    /// Raw configuration snippets (`*-config-snippet` keys): off unless the operator
    /// enables them (`--allow-snippets`).
    pub allow_snippets: bool,
    /// What the routes do when an object sets a key that restricts access and that
    /// Tugboat does not support (`--unsupported-access-keys`): refuse (403) by default.
    pub unsupported_access: UnsupportedAccess,
    /// The Gateway API (`--enable-gateway-api`): `None` when off.
    pub gateway: Option<crate::gateway::GatewaySettings>,
    /// Now, in seconds since the epoch, to check certificate validity.
    pub now: i64,
}

impl Settings {
    /// Whether the operator's flags are the same (the time aside).
    pub fn same_flags(&self, other: &Settings) -> bool {
        *self
            == Settings {
                now: self.now,
                ..other.clone()
            }
    }

    /// Defaults: nothing optional set, ExternalName off, redirects on.
    pub fn new(now: i64) -> Self {
        Self {
            default_backend_service: None,
            default_certificate: None,
            error_pages: None,
            config_map: None,
            allow_external_name: false,
            ssl_redirect: true,
            allow_snippets: false,
            unsupported_access: UnsupportedAccess::Deny,
            gateway: None,
            now,
        }
    }
}

/// Status codes haproxy accepts an error page for.
pub const ERROR_PAGE_CODES: [u16; 17] = [
    200, 400, 401, 403, 404, 405, 407, 408, 410, 413, 425, 429, 500, 501, 502, 503, 504,
];
/// What [`build`] returns: the desired state and what was wrong on the way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildOutput {
    pub desired: Desired,
    pub problems: Vec<ObjectProblem>,
    /// The status of the Gateway API objects served.
    pub gateway: crate::gateway::GatewayStatus,
}

/// The userlist of routes whose `auth-secret` cannot be used: it has no users, so
/// every request gets 401 (an authentication that cannot work fails closed).
pub const NO_USERS: &str = "tugboat_no_users";

/// How a build used a Secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SecretUse {
    /// Only as the certificate of `spec.tls` hosts.
    Certificate,
    /// Anything else (the default certificate, backend TLS, basic auth), maybe as well.
    Other,
}

/// What a build read besides the objects it walks, so that [`crate::incremental`]
/// knows what a later change touches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Reads {
    /// Every Secret the build looked for (present or not), and how it used it.
    pub secrets: HashMap<ObjectKey, SecretUse>,
    /// The first time after `now` at which a certificate check changes its outcome.
    pub next_validity_change: Option<i64>,
    /// The (host, path) keys that more than one rule claimed: who gets one depends on
    /// every claimant.
    pub contested_routes: HashSet<(HostMatch, PathMatch)>,
    /// Who uses each backend.
    pub backend_use: HashMap<BackendName, BackendUse>,
}

/// Who uses a backend.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct BackendUse {
    /// The Ingresses that use it, in build order: the first sets its options.
    pub ingresses: Vec<ObjectKey>,
    /// `--default-backend-service` names it.
    pub flag: bool,
}

impl Reads {
    fn secret(&mut self, key: &ObjectKey, usage: SecretUse) {
        let entry = self.secrets.entry(key.clone()).or_insert(usage);
        if usage == SecretUse::Other {
            *entry = SecretUse::Other;
        }
    }

    /// Takes in what another build read (of one Ingress built alone).
    pub(crate) fn absorb(&mut self, other: Reads) {
        for (key, usage) in other.secrets {
            self.secret(&key, usage);
        }
        self.validity_change(other.next_validity_change);
    }

    fn validity_change(&mut self, at: Option<i64>) {
        if let Some(at) = at {
            self.next_validity_change = Some(self.next_validity_change.map_or(at, |t| t.min(at)));
        }
    }
}

/// TLS Secrets as parsed, kept between builds: a Secret is parsed again only when its
/// object changes (the snapshot then holds a new one).
#[derive(Debug, Clone, Default)]
pub struct ParsedSecrets {
    by_key: HashMap<ObjectKey, (Arc<Secret>, Result<ParsedPair, String>)>,
}

impl ParsedSecrets {
    /// The parsed pair of `secret`, from the cache when it holds this very object.
    pub(crate) fn parse(
        &mut self,
        key: &ObjectKey,
        secret: &Arc<Secret>,
    ) -> Result<ParsedPair, String> {
        if let Some((cached, parsed)) = self.by_key.get(key)
            && Arc::ptr_eq(cached, secret)
        {
            return parsed.clone();
        }
        let parsed = parse_tls_secret(secret);
        self.by_key
            .insert(key.clone(), (secret.clone(), parsed.clone()));
        parsed
    }

    /// Forgets the Secrets a build no longer reads.
    fn keep_only(&mut self, reads: &Reads) {
        self.by_key.retain(|key, _| reads.secrets.contains_key(key));
    }
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
    builder.join_canaries();
    let (gateway, listener_default_certificate) = builder.add_gateway_api();
    let default_backend_service = builder.default_backend_service();
    // An HTTPS listener without a hostname takes every host on the HTTPS bind: its
    // certificate is the default there, unless the operator chose one
    // (--default-ssl-certificate), which a Gateway does not override.
    let default_certificate = builder
        .default_certificate()
        .or(listener_default_certificate);
    let error_pages = builder.error_pages();
    builder.problems.sort();
    builder.problems.dedup();
    let (default_backend, default_backend_owner) = match builder.default_backend {
        Some((backend, owner)) => (Some(backend), Some(owner)),
        None => (default_backend_service, None),
    };
    builder.parsed.keep_only(&builder.reads);
    let output = BuildOutput {
        desired: Desired {
            backends: builder.backends,
            routes: builder.routes.into_values().collect(),
            default_backend,
            default_backend_owner,
            certificates: builder.certificates,
            tls_hosts: builder.tls_hosts.into_iter().collect(),
            default_certificate,
            ssl_redirect: settings.ssl_redirect && config_map_redirect,
            error_pages,
            feature_sets: builder.feature_sets,
            userlists: builder.userlists,
            global,
            backend_files: builder.backend_files,
            pattern_files: builder.pattern_files,
            http_route_slots: builder.http_route_slots,
        },
        problems: builder.problems,
        gateway,
    };
    (output, builder.reads)
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
    builder.problems.sort();
    builder.problems.dedup();
    IngressAlone {
        routes: builder.routes.into_values().collect(),
        backends: builder.backends,
        default_backend: builder.default_backend.map(|(backend, _)| backend),
        certificates: builder.certificates,
        tls_hosts: builder.tls_hosts,
        feature_sets: builder.feature_sets,
        userlists: builder.userlists,
        backend_files: builder.backend_files,
        pattern_files: builder.pattern_files,
        problems: builder.problems,
        reads: builder.reads,
        canary: builder.saw_canary,
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

/// The match of an Ingress host (validated): `*.example.com` is a one-label wildcard
/// (`bar.example.com`, not `baz.bar.example.com`), as the Ingress spec says.
pub(super) fn ingress_host_match(host: &str) -> HostMatch {
    match host.strip_prefix('*') {
        Some(suffix) => HostMatch::Wildcard(suffix.to_string()),
        None => HostMatch::Exact(host.to_string()),
    }
}

struct Builder<'a> {
    config_map_layer: &'a Layer,
    /// The keys of each Service, read once.
    service_layers: HashMap<ObjectKey, Layer>,
    feature_sets: BTreeMap<FeatureSetId, RouteFeatures>,
    userlists: BTreeMap<String, Vec<UserHash>>,
    /// The default backend options, shared by every backend that has them.
    default_options: Arc<BackendOptions>,
    /// Files of the backends' TLS, by file name.
    backend_files: BTreeMap<String, Pem>,
    /// Pattern files of access lists, by file name.
    pattern_files: BTreeMap<String, String>,
    snapshot: &'a Snapshot,
    settings: &'a Settings,
    slices_by_service: HashMap<ObjectKey, Vec<&'a EndpointSlice>>,
    backends: BTreeMap<BackendName, Backend>,
    resolution_errors: HashMap<BackendName, ResolutionError>,
    routes: BTreeMap<(HostMatch, PathMatch), Route>,
    default_backend: Option<(BackendName, ObjectKey)>,
    certificates: BTreeMap<String, TlsCertificate>,
    /// Secrets already checked, by key: the PEM or why it cannot be served.
    checked_secrets: HashMap<ObjectKey, Result<Pem, (ProblemReason, String)>>,
    parsed: &'a mut ParsedSecrets,
    reads: Reads,
    certificate_of_host: BTreeMap<String, String>,
    tls_hosts: BTreeSet<HostMatch>,
    /// The routes that come from HTTPRoutes.
    http_route_slots: BTreeSet<(HostMatch, PathMatch)>,
    /// The canary Ingresses, in build order: joined to their main routes once every
    /// Ingress is in ([`Builder::join_canaries`]).
    canaries: Vec<CanaryIngress>,
    /// The code of `from-to-www-redirect`: the ConfigMap's `http-redirect-code` (its
    /// problems are the global build's).
    www_redirect_code: u16,
    /// Whether an Ingress built was a canary.
    saw_canary: bool,
    problems: Vec<ObjectProblem>,
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
        let www_redirect_code = annotations::keys::HTTP_REDIRECT_CODE.or_default(
            Resolver::new(vec![config_map_layer])
                .get_in(&annotations::keys::HTTP_REDIRECT_CODE, &[Scope::ConfigMap]),
        );
        Builder {
            www_redirect_code,
            config_map_layer,
            service_layers: HashMap::new(),
            feature_sets: BTreeMap::new(),
            userlists: BTreeMap::new(),
            backend_files: BTreeMap::new(),
            pattern_files: BTreeMap::new(),
            default_options: Arc::default(),
            snapshot,
            settings,
            slices_by_service,
            backends: BTreeMap::new(),
            resolution_errors: HashMap::new(),
            routes: BTreeMap::new(),
            default_backend: None,
            certificates: BTreeMap::new(),
            checked_secrets: HashMap::new(),
            parsed,
            reads: Reads::default(),
            certificate_of_host: BTreeMap::new(),
            tls_hosts: BTreeSet::new(),
            http_route_slots: BTreeSet::new(),
            canaries: Vec::new(),
            saw_canary: false,
            problems,
        }
    }

    fn add_ingress(&mut self, key: &ObjectKey, ingress: &Ingress) {
        let object = ObjectRef::of("Ingress", key);
        let Some(spec) = &ingress.spec else {
            return;
        };
        let ingress_layer = Layer::from_annotations(
            object.clone(),
            Scope::Ingress,
            ingress.metadata.annotations.as_ref(),
            self.settings.unsupported_access,
            &mut self.problems,
        );
        let canary = read_keys(
            vec![&ingress_layer],
            &mut self.problems,
            annotations::canary,
        );
        if let Some(settings) = canary {
            self.saw_canary = true;
            self.add_canary(object, key, spec, ingress_layer, settings);
            return;
        }
        let ingress_layer = &ingress_layer;
        let (regex_paths, rewrite_target) = self.regex_keys(ingress_layer);
        let rule_hosts: BTreeSet<String> = spec
            .rules
            .iter()
            .flatten()
            .filter_map(|rule| rule.host.as_deref())
            .map(str::to_ascii_lowercase)
            .collect();
        let mut aliases = self.server_aliases(ingress_layer);
        if let Some((_, aliases)) = &mut aliases {
            // A host the Ingress has a rule for keeps that rule's routes.
            aliases.retain(|alias| !rule_hosts.contains(alias));
        }
        let www_redirect_field = self.www_redirect_field(ingress_layer);
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
            let backend = self.backend(&object, key, default, "spec.defaultBackend", ingress_layer);
            used.extend(backend.clone());
            if self.default_backend.is_none() && backend.is_some() {
                self.default_backend = backend.map(|b| (b, key.clone()));
            }
        }
        let error_backend = self.error_backend(&object, key, ingress_layer, &mut used);
        for (rule_index, rule) in spec.rules.iter().flatten().enumerate() {
            let field = format!("spec.rules[{rule_index}]");
            let Some(host) = self.rule_host(&object, &field, rule.host.as_deref()) else {
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
            for (path_index, path) in http.paths.iter().enumerate() {
                let field = format!("{field}.http.paths[{path_index}]");
                let path_match =
                    match parse_path(path.path.as_deref(), &path.path_type, regex_paths) {
                        Ok(path_match) => path_match,
                        Err((subfield, message)) => {
                            self.problem(&object, format!("{field}.{subfield}"), message);
                            continue;
                        }
                    };
                let Some(backend) = self.backend(
                    &object,
                    key,
                    &path.backend,
                    &format!("{field}.backend"),
                    ingress_layer,
                ) else {
                    continue;
                };
                used.insert(backend.clone());
                rule_backend.get_or_insert_with(|| backend.clone());
                let service = self
                    .backends
                    .get(&backend)
                    .map(|b| b.service.clone())
                    .unwrap_or_else(|| key.clone());
                let cache_key = (service, exact_hosts);
                let mut features = match features_by_service.get(&cache_key) {
                    Some(features) => features.clone(),
                    None => {
                        let features =
                            self.route_features(&cache_key.0, ingress_layer, exact_hosts);
                        features_by_service.insert(cache_key, features.clone());
                        features
                    }
                };
                if let (PathMatch::Regex(pattern), Some(replacement)) =
                    (&path_match, &rewrite_target)
                {
                    features = self.with_path_rewrite(
                        features,
                        PathRewrite {
                            // As ingress-nginx's `rewrite`: the path's expression,
                            // case-insensitive, replaces the whole path when it matches.
                            pattern: format!("(?i){pattern}"),
                            replacement: replacement.clone(),
                        },
                    );
                }
                if let Some(error_backend) = &error_backend {
                    features = self.with_error_backend(features, error_backend);
                }
                self.add_route(
                    &object,
                    &field,
                    key,
                    host.clone(),
                    path_match.clone(),
                    backend.clone(),
                    features.clone(),
                );
                for alias in host_aliases {
                    let alias_field = aliases.as_ref().map_or(&field, |(f, _)| f);
                    let added = self.add_route(
                        &object,
                        alias_field,
                        key,
                        ingress_host_match(alias),
                        path_match.clone(),
                        backend.clone(),
                        features.clone(),
                    );
                    if !added {
                        conflicting_aliases.insert(alias.clone());
                    }
                }
            }
            if let (Some(www_field), Some(backend)) = (&www_redirect_field, rule_backend) {
                self.add_www_redirect(
                    &object,
                    key,
                    www_field,
                    &host,
                    backend,
                    &own_hosts,
                    &mut www_redirected,
                );
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
            self.add_tls(&object, key, tls_index, tls, &aliased_hosts, &tls_aliases);
        }
        for name in used {
            let usage = self.reads.backend_use.entry(name).or_default();
            usage.ingresses.push(key.clone());
        }
    }

    /// Adds the route; `false` (and a problem) when its host and path are taken.
    #[allow(clippy::too_many_arguments)]
    fn add_route(
        &mut self,
        object: &ObjectRef,
        field: &str,
        ingress: &ObjectKey,
        host: HostMatch,
        path: PathMatch,
        backend: BackendName,
        features: Option<FeatureSetId>,
    ) -> bool {
        let slot = (host.clone(), path.clone());
        if let Some(existing) = self.routes.get(&slot) {
            self.reads.contested_routes.insert(slot);
            let owner = if existing.ingress == *ingress {
                "an earlier rule of this Ingress".to_string()
            } else {
                format!("the older Ingress {}", existing.ingress)
            };
            let message = format!("host {host} path {path} is already routed by {owner}");
            self.problems.push(ObjectProblem {
                object: object.clone(),
                field: field.to_string(),
                reason: ProblemReason::RouteConflict,
                message,
            });
            return false;
        }
        self.routes.insert(
            slot,
            Route {
                host,
                path,
                backend,
                ingress: ingress.clone(),
                features,
                canary: None,
            },
        );
        true
    }

    /// The host of an Ingress rule (`field`); `None`, with a problem, when it is not a
    /// valid host.
    fn rule_host(
        &mut self,
        object: &ObjectRef,
        field: &str,
        host: Option<&str>,
    ) -> Option<HostMatch> {
        match host {
            None | Some("") => Some(HostMatch::Any),
            Some(host) => match validate::ingress_host(host) {
                Ok(host) => Some(ingress_host_match(&host)),
                Err(err) => {
                    self.problem(object, format!("{field}.host"), err.0);
                    None
                }
            },
        }
    }

    fn problem(&mut self, object: &ObjectRef, field: String, message: String) {
        self.problems.push(ObjectProblem {
            object: object.clone(),
            field,
            reason: ProblemReason::InvalidField,
            message,
        });
    }
}

/// Path and pathType of an Ingress path, with Kubernetes' rules; with `regex` (the
/// Ingress' `use-regex` or `rewrite-target`), `Prefix` and `ImplementationSpecific` paths
/// are regular expressions, as ingress-nginx reads them. The error names the sub-field
/// (`path` or `pathType`) and says what is wrong.
pub(super) fn parse_path(
    path: Option<&str>,
    path_type: &str,
    regex: bool,
) -> Result<PathMatch, (&'static str, String)> {
    match path_type {
        "Prefix" | "ImplementationSpecific" if regex => {
            let path = path.unwrap_or("/");
            validate::regex(path).map_err(|e| {
                (
                    "path",
                    format!(
                        "{} (use-regex or rewrite-target make it a regular expression)",
                        e.0
                    ),
                )
            })?;
            Ok(PathMatch::Regex(path.to_string()))
        }
        "Exact" => {
            let path = path.ok_or(("path", "an Exact path needs a path".to_string()))?;
            validate::route_path(path).map_err(|e| ("path", e.0))?;
            Ok(PathMatch::Exact(path.to_string()))
        }
        // ImplementationSpecific is documented to behave as Prefix in Tugboat.
        "Prefix" | "ImplementationSpecific" => {
            let path = path.unwrap_or("/");
            validate::route_path(path).map_err(|e| ("path", e.0))?;
            let trimmed = path.trim_end_matches('/');
            Ok(PathMatch::Prefix(if trimmed.is_empty() {
                "/".to_string()
            } else {
                trimmed.to_string()
            }))
        }
        other => Err((
            "pathType",
            format!(
                "'{}' is not a valid pathType: expected Exact, Prefix or ImplementationSpecific",
                validate::printable(other)
            ),
        )),
    }
}
