//! From a [`Snapshot`] to the [`Desired`] state, with Kubernetes' Ingress semantics.
//!
//! Ingresses are taken oldest first, so that when two claim the same host and path the
//! older one keeps it and the newer one gets a [`ProblemReason::RouteConflict`]. Each
//! backend (one Service port) is resolved once to its ready endpoints through the
//! Service's EndpointSlices. Anything wrong in an object becomes an [`ObjectProblem`] and
//! only the faulty part of that object is left out.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use crate::objects::{EndpointSlice, Service, ServicePort, ServiceSpec};
use k8s_openapi::api::networking::v1::{Ingress, IngressBackend};

use crate::annotations::{self, Layer, Resolver, Scope, UnsupportedAccess};
use crate::desired::{
    Backend, BackendName, Desired, Endpoint, HostMatch, PathMatch, Route, ServicePortRef,
    TlsCertificate, UserHash,
};
use crate::features::{
    BackendOptions, BasicAuth, FeatureSetId, HttpsRedirect, PathRewrite, Redirect, RedirectTarget,
    RedirectWhen, RouteFeatures,
};
use crate::problem::{ObjectProblem, ObjectRef, ProblemReason};
use crate::snapshot::{ObjectKey, Snapshot};
use crate::tls::{ParsedPair, Pem, parse_tls_secret};
use crate::validate;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

mod gateway_routes;

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
/// An error page must fit in haproxy's buffer with room to spare.
const ERROR_PAGE_MAX: usize = 12 * 1024;

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
    let mut global_resolver = Resolver::new(vec![&config_map_layer]);
    let global = annotations::global_options(&mut global_resolver, settings.allow_snippets);
    let config_map_redirect = global_resolver
        .get_in(&annotations::keys::SSL_REDIRECT, &[Scope::ConfigMap])
        .unwrap_or(true);
    problems.append(&mut global_resolver.problems);
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
    let gateway = builder.add_gateway_api();
    let default_backend_service = builder.default_backend_service();
    let default_certificate = builder.default_certificate();
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
/// The status of `from-to-www-redirect`: ingress-nginx's default `http-redirect-code`.
const WWW_REDIRECT_CODE: u16 = 308;

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
                namespace: String::new(),
                name: String::new(),
            },
            Scope::ConfigMap,
        );
    };
    let object = ObjectRef {
        kind: "ConfigMap",
        namespace: key.namespace.clone(),
        name: key.name.clone(),
    };
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

fn host_match(host: &str) -> HostMatch {
    match host.strip_prefix('*') {
        Some(suffix) => HostMatch::Wildcard(suffix.to_string()),
        None => HostMatch::Exact(host.to_string()),
    }
}

fn index_slices(snapshot: &Snapshot) -> HashMap<ObjectKey, Vec<&EndpointSlice>> {
    let mut index: HashMap<ObjectKey, Vec<&EndpointSlice>> = HashMap::new();
    for (key, slice) in &snapshot.endpoint_slices {
        if let Some(service) = slice.service_name() {
            index
                .entry(ObjectKey::new(&key.namespace, service))
                .or_default()
                .push(slice);
        }
    }
    index
}

/// Why a backend has no endpoints although an Ingress refers to it.
#[derive(Debug, Clone)]
struct ResolutionError {
    reason: ProblemReason,
    message: String,
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
    /// Whether an Ingress built was a canary.
    saw_canary: bool,
    problems: Vec<ObjectProblem>,
}

/// A canary Ingress, kept until every main route is known.
struct CanaryIngress {
    object: ObjectRef,
    key: ObjectKey,
    layer: Layer,
    settings: annotations::CanarySettings,
    /// Its rules: (field, host and path, backend reference).
    paths: Vec<(String, (HostMatch, PathMatch), IngressBackend)>,
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
        let object = ObjectRef {
            kind: "Ingress",
            namespace: key.namespace.clone(),
            name: key.name.clone(),
        };
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
        let mut canary_resolver = Resolver::new(vec![&ingress_layer]);
        let canary = annotations::canary(&mut canary_resolver);
        self.problems.append(&mut canary_resolver.problems);
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
        let mut features_by_service: HashMap<ObjectKey, Option<FeatureSetId>> = HashMap::new();
        let mut used = BTreeSet::new();
        if let Some(default) = &spec.default_backend {
            let backend = self.backend(&object, key, default, "spec.defaultBackend", ingress_layer);
            used.extend(backend.clone());
            if self.default_backend.is_none() && backend.is_some() {
                self.default_backend = backend.map(|b| (b, key.clone()));
            }
        }
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
                let mut features = match features_by_service.get(&service) {
                    Some(features) => features.clone(),
                    None => {
                        let features = self.route_features(&service, ingress_layer);
                        features_by_service.insert(service, features.clone());
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
                        host_match(alias),
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

    /// One `spec.tls` entry: its hosts are served with its Secret's certificate when the
    /// Secret is valid, with the default certificate otherwise.
    fn add_tls(
        &mut self,
        object: &ObjectRef,
        ingress: &ObjectKey,
        index: usize,
        tls: &k8s_openapi::api::networking::v1::IngressTLS,
        aliased_hosts: &BTreeSet<HostMatch>,
        aliases: &[String],
    ) {
        let field = format!("spec.tls[{index}]");
        let mut hosts = Vec::new();
        for (host_index, host) in tls.hosts.iter().flatten().enumerate() {
            match validate::ingress_host(host) {
                Ok(host) => hosts.push(host),
                Err(err) => self.problem(object, format!("{field}.hosts[{host_index}]"), err.0),
            }
        }
        // As ingress-nginx's server aliases: the aliases of a TLS host are served with
        // its certificate and redirected as it is.
        if hosts.iter().any(|h| aliased_hosts.contains(&host_match(h))) {
            for alias in aliases {
                if !hosts.contains(alias) {
                    hosts.push(alias.clone());
                }
            }
        }
        for host in &hosts {
            self.tls_hosts.insert(host_match(host));
        }
        let Some(secret_name) = tls.secret_name.as_deref().filter(|s| !s.is_empty()) else {
            if !hosts.is_empty() {
                self.problem(
                    object,
                    format!("{field}.secretName"),
                    "no secretName: these hosts get the default certificate".into(),
                );
            }
            return;
        };
        if let Err(err) = validate::dns_subdomain(secret_name) {
            self.problem(object, format!("{field}.secretName"), err.0);
            return;
        }
        let secret_key = ObjectKey::new(&ingress.namespace, secret_name);
        let pem = match self.checked_secret(&secret_key, SecretUse::Certificate) {
            Ok(pem) => pem,
            Err((reason, message)) => {
                let fallback = if hosts.is_empty() {
                    String::new()
                } else {
                    format!("; {} get the default certificate", hosts.join(", "))
                };
                self.problems.push(ObjectProblem {
                    object: object.clone(),
                    field: format!("{field}.secretName"),
                    reason,
                    message: format!("Secret {secret_key}: {message}{fallback}"),
                });
                return;
            }
        };
        let name = format!("{}_{}", secret_key.namespace, secret_key.name);
        let mut claimed = Vec::new();
        for host in hosts {
            match self.certificate_of_host.get(&host) {
                Some(owner) if *owner != name => {
                    let message = format!(
                        "host {host} already has the certificate {owner} from an older Ingress"
                    );
                    self.problems.push(ObjectProblem {
                        object: object.clone(),
                        field: format!("{field}.hosts"),
                        reason: ProblemReason::RouteConflict,
                        message,
                    });
                }
                _ => {
                    self.certificate_of_host.insert(host.clone(), name.clone());
                    claimed.push(host);
                }
            }
        }
        self.serve_certificate(name, pem, claimed);
    }

    /// Serves certificate `name` for the hosts it claimed (more, when it has some).
    fn serve_certificate(&mut self, name: String, pem: Pem, claimed: Vec<String>) {
        let certificate = self
            .certificates
            .entry(name.clone())
            .or_insert_with(|| TlsCertificate {
                name,
                pem,
                hosts: Vec::new(),
            });
        certificate.hosts.extend(claimed);
        certificate.hosts.sort();
        certificate.hosts.dedup();
    }

    fn checked_secret(
        &mut self,
        key: &ObjectKey,
        usage: SecretUse,
    ) -> Result<Pem, (ProblemReason, String)> {
        self.reads.secret(key, usage);
        if let Some(result) = self.checked_secrets.get(key) {
            return result.clone();
        }
        let now = self.settings.now;
        let result = match self.snapshot.secrets.get(key) {
            None => Err((ProblemReason::SecretNotFound, "not found".to_string())),
            Some(secret) => {
                let parsed = self.parsed.parse(key, secret);
                if let Ok(parsed) = &parsed {
                    self.reads.validity_change(parsed.next_change(now));
                }
                parsed
                    .and_then(|parsed| parsed.at(now))
                    .map(|checked| checked.pem)
                    .map_err(|message| (ProblemReason::InvalidCertificate, message))
            }
        };
        self.checked_secrets.insert(key.clone(), result.clone());
        result
    }

    /// The backend of `--default-backend-service` (its first port), if set and usable.
    fn default_backend_service(&mut self) -> Option<BackendName> {
        let key = self.settings.default_backend_service.clone()?;
        let object = ObjectRef {
            kind: "Service",
            namespace: key.namespace.clone(),
            name: key.name.clone(),
        };
        let first_port = self
            .snapshot
            .services
            .get(&key)
            .and_then(|s| s.spec.as_ref())
            .and_then(|spec| spec.ports.as_ref())
            .and_then(|ports| ports.first())
            .and_then(|p| validate::port_number(p.port).ok());
        let Some(port) = first_port else {
            self.problems.push(ObjectProblem {
                object,
                field: "spec.ports".into(),
                reason: ProblemReason::ServiceNotFound,
                message: "the --default-backend-service Service does not exist or has no \
                          port: unmatched requests get the built-in 404"
                    .into(),
            });
            return None;
        };
        let port = ServicePortRef::Number(port);
        let name = BackendName::for_service_port(&key, &port).ok()?;
        self.reads.backend_use.entry(name.clone()).or_default().flag = true;
        if !self.backends.contains_key(&name) {
            let resolved = self.resolve_endpoints(&key, &port).unwrap_or_default();
            let backend = resolved.into_backend(key, port, self.default_options.clone());
            self.backends.insert(name.clone(), backend);
        }
        Some(name)
    }

    /// The certificate of `--default-ssl-certificate`, if set and valid.
    fn default_certificate(&mut self) -> Option<Pem> {
        let key = self.settings.default_certificate.clone()?;
        match self.checked_secret(&key, SecretUse::Other) {
            Ok(pem) => Some(pem),
            Err((reason, message)) => {
                self.problems.push(ObjectProblem {
                    object: ObjectRef {
                        kind: "Secret",
                        namespace: key.namespace.clone(),
                        name: key.name.clone(),
                    },
                    field: "data".into(),
                    reason,
                    message: format!(
                        "--default-ssl-certificate: {message}; the controller's own \
                         certificate is served instead"
                    ),
                });
                None
            }
        }
    }

    /// The error pages of `--configmap-errorfiles`: keys are status codes.
    fn error_pages(&mut self) -> BTreeMap<u16, String> {
        let mut pages = BTreeMap::new();
        let Some(key) = self.settings.error_pages.clone() else {
            return pages;
        };
        let object = ObjectRef {
            kind: "ConfigMap",
            namespace: key.namespace.clone(),
            name: key.name.clone(),
        };
        let Some(config_map) = self.snapshot.config_maps.get(&key) else {
            self.problems.push(ObjectProblem {
                object,
                field: "metadata.name".into(),
                reason: ProblemReason::InvalidField,
                message: "the --configmap-errorfiles ConfigMap does not exist".into(),
            });
            return pages;
        };
        for (code_text, page) in config_map.data.iter().flatten() {
            let field = format!("data.{code_text}");
            let code = code_text
                .parse::<u16>()
                .ok()
                .filter(|c| ERROR_PAGE_CODES.contains(c));
            let Some(code) = code else {
                let message = format!(
                    "'{}' is not a status code haproxy has error pages for: expected one of {}",
                    validate::printable(code_text),
                    ERROR_PAGE_CODES.map(|c| c.to_string()).join(", ")
                );
                self.problem(&object, field, message);
                continue;
            };
            let response = error_response(code, page);
            if response.len() > ERROR_PAGE_MAX {
                let message = format!(
                    "the page is {} bytes: at most {ERROR_PAGE_MAX} fit in haproxy's buffer",
                    response.len()
                );
                self.problem(&object, field, message);
                continue;
            }
            pages.insert(code, response);
        }
        pages
    }

    /// ingress-nginx's `use-regex` and `rewrite-target` of an Ingress (or the ConfigMap):
    /// whether its paths are regular expressions, and the replacement of `rewrite-target`
    /// (which makes them regular expressions too).
    fn regex_keys(&mut self, ingress_layer: &Layer) -> (bool, Option<String>) {
        let mut resolver = Resolver::new(vec![ingress_layer, self.config_map_layer]);
        let rewrite = resolver.get(&annotations::keys::REWRITE_TARGET);
        let regex = resolver.get_or_default(&annotations::keys::USE_REGEX) || rewrite.is_some();
        self.problems.append(&mut resolver.problems);
        (regex, rewrite)
    }

    /// ingress-nginx's `server-alias` of an Ingress: the field that sets it and the
    /// host names, when it is set and valid.
    fn server_aliases(&mut self, ingress_layer: &Layer) -> Option<(String, Vec<String>)> {
        let mut resolver = Resolver::new(vec![ingress_layer]);
        let aliases = resolver.get_in(&annotations::keys::SERVER_ALIAS, &[Scope::Ingress]);
        self.problems.append(&mut resolver.problems);
        let field = ingress_layer.field_of(&annotations::keys::SERVER_ALIAS.spec)?;
        Some((field.to_string(), aliases?))
    }

    /// The field of ingress-nginx's `from-to-www-redirect` of an Ingress, when it is
    /// set to `true`.
    fn www_redirect_field(&mut self, ingress_layer: &Layer) -> Option<String> {
        let mut resolver = Resolver::new(vec![ingress_layer]);
        let on = resolver.get_in(&annotations::keys::FROM_TO_WWW_REDIRECT, &[Scope::Ingress]);
        self.problems.append(&mut resolver.problems);
        if on != Some(true) {
            return None;
        }
        let field = ingress_layer.field_of(&annotations::keys::FROM_TO_WWW_REDIRECT.spec)?;
        Some(field.to_string())
    }

    /// `from-to-www-redirect` of a rule's `host`: every request for its `www.`
    /// counterpart (or the host without `www.`) is redirected (308) to the same scheme,
    /// path and query on `host`, as ingress-nginx does. A counterpart that is a host of
    /// the Ingress' own rules or a `server-alias` is left alone; one another Ingress already routes is a
    /// conflict (a problem naming the key).
    #[allow(clippy::too_many_arguments)]
    fn add_www_redirect(
        &mut self,
        object: &ObjectRef,
        ingress: &ObjectKey,
        field: &str,
        host: &HostMatch,
        backend: BackendName,
        own_hosts: &BTreeSet<String>,
        done: &mut BTreeSet<String>,
    ) {
        let name = match host {
            HostMatch::Exact(name) => name,
            // A rule without a host takes every host already.
            HostMatch::Any => return,
            HostMatch::Wildcard(_) | HostMatch::Subdomains(_) => {
                self.problem(
                    object,
                    field.to_string(),
                    format!("the wildcard host {host} has no www counterpart: no redirect for it"),
                );
                return;
            }
        };
        let counterpart = match name.strip_prefix("www.") {
            Some(bare) => bare.to_string(),
            None => format!("www.{name}"),
        };
        let counterpart = match validate::ingress_host(&counterpart) {
            Ok(counterpart) => counterpart,
            Err(err) => {
                self.problem(
                    object,
                    field.to_string(),
                    format!("no redirect for {name}: {}", err.0),
                );
                return;
            }
        };
        if own_hosts.contains(&counterpart) || !done.insert(counterpart.clone()) {
            return;
        }
        let features = RouteFeatures {
            // As ingress-nginx's redirecting server: straight to the rule's host on the
            // request's scheme, without going to HTTPS on the counterpart first.
            https_redirect: Some(HttpsRedirect {
                when: RedirectWhen::Never,
                code: WWW_REDIRECT_CODE,
                port: None,
            }),
            redirect: Some(Redirect {
                target: RedirectTarget::Host(name.clone()),
                code: WWW_REDIRECT_CODE,
            }),
            ..RouteFeatures::default()
        };
        let id = FeatureSetId::of(&features);
        self.feature_sets.insert(id.clone(), features);
        self.add_route(
            object,
            field,
            ingress,
            HostMatch::Exact(counterpart),
            PathMatch::Prefix("/".into()),
            backend,
            Some(id),
        );
    }

    /// The feature set `base` with the path rewrite of a regex route (a set of its own).
    fn with_path_rewrite(
        &mut self,
        base: Option<FeatureSetId>,
        rewrite: PathRewrite,
    ) -> Option<FeatureSetId> {
        let mut features = base
            .and_then(|id| self.feature_sets.get(&id).cloned())
            .unwrap_or_default();
        features.path_rewrite = Some(rewrite);
        let id = FeatureSetId::of(&features);
        self.feature_sets.insert(id.clone(), features);
        Some(id)
    }

    /// The keys of a Service, read once.
    fn service_layer(&mut self, service: &ObjectKey) -> &Layer {
        if !self.service_layers.contains_key(service) {
            let object = ObjectRef {
                kind: "Service",
                namespace: service.namespace.clone(),
                name: service.name.clone(),
            };
            let annotations = self
                .snapshot
                .services
                .get(service)
                .and_then(|s| s.metadata.annotations.as_ref());
            let layer = Layer::from_annotations(
                object,
                Scope::Service,
                annotations,
                self.settings.unsupported_access,
                &mut self.problems,
            );
            self.service_layers.insert(service.clone(), layer);
        }
        match self.service_layers.get(service) {
            Some(layer) => layer,
            None => self.config_map_layer,
        }
    }

    /// The features of the routes of one Ingress to one Service: Service keys, then the
    /// Ingress', then the ConfigMap's. `None` when there are none.
    fn route_features(
        &mut self,
        service: &ObjectKey,
        ingress_layer: &Layer,
    ) -> Option<FeatureSetId> {
        let service_layer = self.service_layer(service).clone();
        let config_map_layer = self.config_map_layer;
        let mut resolver = Resolver::new(vec![&service_layer, ingress_layer, config_map_layer]);
        let (mut features, lookups) = annotations::route_features(&mut resolver);
        // Fail closed: a restriction Tugboat cannot honour, or whose value it cannot
        // read, refuses everybody.
        features.deny_all = resolver.refused_restriction
            || self.settings.unsupported_access == UnsupportedAccess::Deny
                && (!service_layer.unsupported_access.is_empty()
                    || !ingress_layer.unsupported_access.is_empty());
        if let Some(reference) = &lookups.allow_ref {
            match self.pattern_file(
                &ingress_layer.object,
                &service.namespace,
                reference,
                "allow-list",
            ) {
                Some(file) => features.allow_file = Some(file),
                // Fail closed: an allow list that cannot be read allows nobody.
                None => features.allow_file = Some(self.empty_pattern_file()),
            }
        }
        if let Some(reference) = &lookups.deny_ref {
            match self.pattern_file(
                &ingress_layer.object,
                &service.namespace,
                reference,
                "deny-list",
            ) {
                Some(file) => features.deny_file = Some(file),
                // Fail closed: a deny list that cannot be read denies everybody.
                None => features.deny_list = vec!["0.0.0.0/0".into(), "::/0".into()],
            }
        }
        if let Some(auth_secret) = lookups.auth_secret {
            let realm = annotations::auth_realm(&mut resolver);
            let userlist = match auth_secret {
                Some(secret) => self.userlist(&ingress_layer.object, &service.namespace, &secret),
                None => {
                    resolver.problems.push(ObjectProblem {
                        object: ingress_layer.object.clone(),
                        field: "metadata.annotations".into(),
                        reason: ProblemReason::InvalidField,
                        message: "auth-type basic-auth needs a valid auth-secret: every request \
                                  is refused (401) until it has one"
                            .into(),
                    });
                    self.userlists.entry(NO_USERS.into()).or_default();
                    NO_USERS.to_string()
                }
            };
            features.basic_auth = Some(BasicAuth { userlist, realm });
        }
        self.problems.append(&mut resolver.problems);
        if features.is_empty() {
            return None;
        }
        let id = FeatureSetId::of(&features);
        self.feature_sets.insert(id.clone(), features);
        Some(id)
    }

    /// The pattern file of an access list kept in a ConfigMap key; `None` (and a
    /// problem) when it cannot be used.
    fn pattern_file(
        &mut self,
        object: &ObjectRef,
        namespace: &str,
        reference: &annotations::ConfigMapKeyRef,
        key_name: &str,
    ) -> Option<String> {
        let file = format!("{namespace}_{}_{}.lst", reference.name, reference.key);
        if self.pattern_files.contains_key(&file) {
            return Some(file);
        }
        let config_map = ObjectKey::new(namespace, &reference.name);
        let text = self
            .snapshot
            .config_maps
            .get(&config_map)
            .ok_or_else(|| {
                (
                    ProblemReason::InvalidField,
                    "the ConfigMap does not exist".to_string(),
                )
            })
            .and_then(|cm| {
                cm.data
                    .as_ref()
                    .and_then(|d| d.get(&reference.key))
                    .ok_or_else(|| {
                        (
                            ProblemReason::InvalidField,
                            format!("the ConfigMap has no key '{}'", reference.key),
                        )
                    })
            })
            .and_then(|text| {
                annotations::parse_pattern_list(text)
                    .map_err(|e| (ProblemReason::InvalidField, e.to_string()))
            });
        match text {
            Ok(entries) => {
                let mut contents = entries.join("\n");
                contents.push('\n');
                self.pattern_files.insert(file.clone(), contents);
                Some(file)
            }
            Err((reason, message)) => {
                self.problems.push(ObjectProblem {
                    object: object.clone(),
                    field: format!("metadata.annotations.{key_name}"),
                    reason,
                    message: format!(
                        "{key_name} ConfigMap {config_map} key '{}': {message}; every client \
                         gets 403 until it can be used",
                        reference.key
                    ),
                });
                None
            }
        }
    }

    /// An empty pattern file: an allow list that allows nobody.
    fn empty_pattern_file(&mut self) -> String {
        let file = "tugboat_nobody.lst".to_string();
        self.pattern_files.entry(file.clone()).or_default();
        file
    }

    /// A Secret file a backend's TLS needs (`ca.crt` for `server-ca`, a TLS pair for
    /// `server-crt`); `None` (and a problem) when it cannot be used.
    fn backend_file(
        &mut self,
        object: &ObjectRef,
        namespace: &str,
        secret: &str,
        ca: bool,
    ) -> Option<String> {
        let (prefix, key_name) = if ca {
            ("ca", "server-ca")
        } else {
            ("client", "server-crt")
        };
        let file = format!("{prefix}_{namespace}_{secret}.pem");
        if self.backend_files.contains_key(&file) {
            return Some(file);
        }
        let key = ObjectKey::new(namespace, secret);
        self.reads.secret(&key, SecretUse::Other);
        let checked = match self.snapshot.secrets.get(&key) {
            None => Err((ProblemReason::SecretNotFound, "not found".to_string())),
            Some(found) if ca => crate::tls::check_ca_secret(found)
                .map_err(|m| (ProblemReason::InvalidCertificate, m)),
            Some(_) => self.checked_secret(&key, SecretUse::Other),
        };
        match checked {
            Ok(pem) => {
                self.backend_files.insert(file.clone(), pem);
                Some(file)
            }
            Err((reason, message)) => {
                self.problems.push(ObjectProblem {
                    object: object.clone(),
                    field: format!("metadata.annotations.{key_name}"),
                    reason,
                    message: format!(
                        "{key_name} Secret {key}: {message}; the backend answers 503 until it \
                         can be used"
                    ),
                });
                None
            }
        }
    }

    /// The userlist of a basic-auth Secret, named `<namespace>_<secret>`; the empty
    /// [`NO_USERS`] list when the Secret cannot be used.
    fn userlist(&mut self, object: &ObjectRef, namespace: &str, secret: &str) -> String {
        let key = ObjectKey::new(namespace, secret);
        let name = format!("{namespace}_{secret}");
        if self.userlists.contains_key(&name) {
            return name;
        }
        self.reads.secret(&key, SecretUse::Other);
        let users = match self.snapshot.secrets.get(&key) {
            None => Err((ProblemReason::SecretNotFound, "not found".to_string())),
            Some(found) => crate::auth::users_from_secret(found)
                .map_err(|message| (ProblemReason::InvalidField, message)),
        };
        match users {
            Ok(users) => {
                let users = users
                    .into_iter()
                    .map(|(user, hash)| UserHash { user, hash })
                    .collect();
                self.userlists.insert(name.clone(), users);
                name
            }
            Err((reason, message)) => {
                self.problems.push(ObjectProblem {
                    object: object.clone(),
                    field: "metadata.annotations.auth-secret".into(),
                    reason,
                    message: format!(
                        "auth-secret {key}: {message}; every request is refused (401) until \
                         it can be used"
                    ),
                });
                self.userlists.entry(NO_USERS.into()).or_default();
                NO_USERS.to_string()
            }
        }
    }

    /// The options of a backend: Service keys, then the Ingress', then the ConfigMap's.
    /// The oldest Ingress using a backend sets them; another that disagrees is told.
    fn backend_options(
        &mut self,
        name: &BackendName,
        service: &ObjectKey,
        ingress: &ObjectKey,
        ingress_layer: &Layer,
    ) -> Option<BackendOptions> {
        let service_layer = self.service_layer(service).clone();
        let config_map_layer = self.config_map_layer;
        let mut resolver = Resolver::new(vec![&service_layer, ingress_layer, config_map_layer]);
        let (mut options, lookups) =
            annotations::backend_options(&mut resolver, self.settings.allow_snippets);
        self.problems.append(&mut resolver.problems);
        let object = ingress_layer.object.clone();
        if let Some(tls) = options.tls.as_mut() {
            tls.server_name = lookups
                .server_name
                .clone()
                .unwrap_or_else(|| format!("{}.{}.svc", service.name, service.namespace));
            if lookups.verify_without_ca {
                self.problems.push(ObjectProblem {
                    object: object.clone(),
                    field: "metadata.annotations".into(),
                    reason: ProblemReason::InvalidField,
                    message: "server-verify is true but no server-ca is set: the backend \
                              answers 503 rather than talk to unverified servers"
                        .into(),
                });
                options.blocked = true;
            }
            if let Some(secret) = &lookups.server_ca {
                tls.ca_file = self.backend_file(&object, &service.namespace, secret, true);
                options.blocked |= tls.ca_file.is_none();
            }
            if let Some(secret) = &lookups.server_crt {
                tls.client_certificate =
                    self.backend_file(&object, &service.namespace, secret, false);
                options.blocked |= tls.client_certificate.is_none();
            }
        }
        let owner = self
            .reads
            .backend_use
            .get(name)
            .and_then(|usage| usage.ingresses.first());
        match owner {
            None => Some(options),
            Some(owner) => {
                let current = self.backends.get(name).map(|b| b.options.as_ref());
                if current != Some(&options) && owner != ingress {
                    self.problems.push(ObjectProblem {
                        object: ingress_layer.object.clone(),
                        field: "metadata.annotations".into(),
                        reason: ProblemReason::RouteConflict,
                        message: format!(
                            "the backend keys of Service {service} are already set differently \
                             by the older Ingress {owner}; set them on the Service to share them"
                        ),
                    });
                }
                None
            }
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
                Ok(host) => Some(host_match(&host)),
                Err(err) => {
                    self.problem(object, format!("{field}.host"), err.0);
                    None
                }
            },
        }
    }

    /// A canary Ingress: its host and path rules wait for [`Builder::join_canaries`];
    /// it serves no route, default backend or certificate of its own.
    fn add_canary(
        &mut self,
        object: ObjectRef,
        key: &ObjectKey,
        spec: &k8s_openapi::api::networking::v1::IngressSpec,
        layer: Layer,
        settings: annotations::CanarySettings,
    ) {
        if spec.default_backend.is_some() {
            self.problem(
                &object,
                "spec.defaultBackend".into(),
                "a canary Ingress's default backend is not used".into(),
            );
        }
        if spec.tls.as_ref().is_some_and(|tls| !tls.is_empty()) {
            self.problem(
                &object,
                "spec.tls".into(),
                "a canary Ingress's TLS is not used: the main Ingress's certificates serve its \
                 hosts"
                    .into(),
            );
        }
        // Its paths meet the main Ingress's as they are written: regular expressions
        // with use-regex (its rewrite-target is the main route's to set).
        let (regex_paths, _) = self.regex_keys(&layer);
        let mut paths = Vec::new();
        for (rule_index, rule) in spec.rules.iter().flatten().enumerate() {
            let field = format!("spec.rules[{rule_index}]");
            let Some(host) = self.rule_host(&object, &field, rule.host.as_deref()) else {
                continue;
            };
            for (path_index, path) in rule.http.iter().flat_map(|h| &h.paths).enumerate() {
                let field = format!("{field}.http.paths[{path_index}]");
                match parse_path(path.path.as_deref(), &path.path_type, regex_paths) {
                    Ok(path_match) => {
                        paths.push((field, (host.clone(), path_match), path.backend.clone()))
                    }
                    Err((subfield, message)) => {
                        self.problem(&object, format!("{field}.{subfield}"), message)
                    }
                }
            }
        }
        self.canaries.push(CanaryIngress {
            object,
            key: key.clone(),
            layer,
            settings,
            paths,
        });
    }

    /// Joins each canary rule to the route of the same host and path, as ingress-nginx
    /// does: the route gets the canary's backend and weight, and its feature set the
    /// canary's header and cookie rules. A rule no route has does nothing; a second
    /// canary of a route is a conflict. Every host and path a canary names is contested
    /// (who gets it depends on more than one Ingress).
    fn join_canaries(&mut self) {
        for canary in std::mem::take(&mut self.canaries) {
            let mut used = BTreeSet::new();
            for (field, slot, reference) in &canary.paths {
                self.reads.contested_routes.insert(slot.clone());
                let (host, path) = slot;
                let Some(main) = self.routes.get(slot) else {
                    let message = format!(
                        "no Ingress routes host {host} path {path}: this canary rule does \
                         nothing until one does"
                    );
                    self.problem(&canary.object, field.clone(), message);
                    continue;
                };
                if let Some(other) = &main.canary {
                    let message = format!(
                        "host {host} path {path} already has the canary of Ingress {}: one \
                         canary per host and path",
                        other.ingress
                    );
                    self.problems.push(ObjectProblem {
                        object: canary.object.clone(),
                        field: field.clone(),
                        reason: ProblemReason::RouteConflict,
                        message,
                    });
                    continue;
                }
                let Some(backend) = self.backend(
                    &canary.object,
                    &canary.key,
                    reference,
                    &format!("{field}.backend"),
                    &canary.layer,
                ) else {
                    continue;
                };
                used.insert(backend.clone());
                let Some(main) = self.routes.get(slot) else {
                    continue;
                };
                if main.backend == backend {
                    let message = format!(
                        "the backend is the one host {host} path {path} already goes to: this \
                         canary rule does nothing"
                    );
                    self.problem(&canary.object, format!("{field}.backend"), message);
                    continue;
                }
                let old_features = main.features.clone();
                let mut features = old_features
                    .as_ref()
                    .and_then(|id| self.feature_sets.get(id))
                    .cloned()
                    .unwrap_or_default();
                features.canary = Some(canary.settings.rules.clone());
                let id = FeatureSetId::of(&features);
                self.feature_sets.insert(id.clone(), features);
                if let Some(main) = self.routes.get_mut(slot) {
                    main.features = Some(id);
                    main.canary = Some(crate::desired::Canary {
                        backend,
                        per_million: canary.settings.per_million,
                        ingress: canary.key.clone(),
                    });
                }
                if let Some(old) = old_features
                    && !self
                        .routes
                        .values()
                        .any(|route| route.features.as_ref() == Some(&old))
                {
                    self.feature_sets.remove(&old);
                }
            }
            for name in used {
                let usage = self.reads.backend_use.entry(name).or_default();
                usage.ingresses.push(canary.key.clone());
            }
        }
    }

    /// The backend an IngressBackend refers to, created on first use. `None` when the
    /// reference itself is invalid (the route is then left out).
    fn backend(
        &mut self,
        object: &ObjectRef,
        ingress: &ObjectKey,
        backend: &IngressBackend,
        field: &str,
        ingress_layer: &Layer,
    ) -> Option<BackendName> {
        let Some(service) = &backend.service else {
            let message = if backend.resource.is_some() {
                "resource backends are not supported: use a Service backend"
            } else {
                "a backend needs service.name and service.port"
            };
            self.problem(object, field.to_string(), message.to_string());
            return None;
        };
        let service_key = ObjectKey::new(&ingress.namespace, &service.name);
        if let Err(err) = validate::dns_label(&service.name) {
            self.problem(object, format!("{field}.service.name"), err.0);
            return None;
        }
        let port = match parse_port_ref(service.port.as_ref()) {
            Ok(port) => port,
            Err((subfield, message)) => {
                self.problem(object, format!("{field}.service.port{subfield}"), message);
                return None;
            }
        };
        let name = match BackendName::for_service_port(&service_key, &port) {
            Ok(name) => name,
            Err(err) => {
                self.problem(object, format!("{field}.service"), err.0);
                return None;
            }
        };
        if !self.backends.contains_key(&name) {
            let (resolved, error) = match self.resolve_endpoints(&service_key, &port) {
                Ok(resolved) => (resolved, None),
                Err(error) => (Resolved::default(), Some(error)),
            };
            self.backends.insert(
                name.clone(),
                resolved.into_backend(service_key.clone(), port, self.default_options.clone()),
            );
            if let Some(error) = error {
                self.resolution_errors.insert(name.clone(), error);
            }
        }
        if let Some(options) = self.backend_options(&name, &service_key, ingress, ingress_layer)
            && let Some(backend) = self.backends.get_mut(&name)
        {
            backend.options = if options == *self.default_options {
                self.default_options.clone()
            } else {
                Arc::new(options)
            };
        }
        if let Some(error) = self.resolution_errors.get(&name).cloned() {
            self.problems.push(ObjectProblem {
                object: object.clone(),
                field: format!("{field}.service"),
                reason: error.reason,
                message: error.message,
            });
        }
        Some(name)
    }

    fn resolve_endpoints(
        &self,
        service_key: &ObjectKey,
        port: &ServicePortRef,
    ) -> Result<Resolved, ResolutionError> {
        let service = self
            .snapshot
            .services
            .get(service_key)
            .ok_or_else(|| ResolutionError {
                reason: ProblemReason::ServiceNotFound,
                message: format!(
                    "Service {service_key} not found: requests for this backend get 503"
                ),
            })?;
        let service_port = find_service_port(service, port).ok_or_else(|| ResolutionError {
            reason: ProblemReason::ServicePortNotFound,
            message: format!(
                "Service {service_key} has no port {port}: requests for this backend get 503"
            ),
        })?;
        let spec = service.spec.as_ref();
        if spec.and_then(|s| s.type_.as_deref()) == Some("ExternalName") {
            return self.external_name(service_key, spec, service_port.port);
        }
        let port_name = service_port.name.as_deref().unwrap_or("");
        let slices = self
            .slices_by_service
            .get(service_key)
            .into_iter()
            .flatten();
        Ok(endpoints_of(slices.copied(), port_name))
    }

    fn external_name(
        &self,
        service_key: &ObjectKey,
        spec: Option<&ServiceSpec>,
        port: i32,
    ) -> Result<Resolved, ResolutionError> {
        if !self.settings.allow_external_name {
            return Err(ResolutionError {
                reason: ProblemReason::NotAllowed,
                message: format!(
                    "Service {service_key} is an ExternalName Service, which the operator has \
                     not allowed (--allow-external-name): requests for this backend get 503"
                ),
            });
        }
        let host = spec.and_then(|s| s.external_name.as_deref()).unwrap_or("");
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        validate::dns_subdomain(&host).map_err(|err| ResolutionError {
            reason: ProblemReason::InvalidField,
            message: format!("Service {service_key} spec.externalName: {err}"),
        })?;
        let port = validate::port_number(port).map_err(|err| ResolutionError {
            reason: ProblemReason::InvalidField,
            message: format!("Service {service_key}: {err}"),
        })?;
        Ok(Resolved {
            external: Some((host, port)),
            ..Resolved::default()
        })
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
fn parse_path(
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
            validate::ingress_path(path).map_err(|e| ("path", e.0))?;
            Ok(PathMatch::Exact(path.to_string()))
        }
        // ImplementationSpecific is documented to behave as Prefix in Tugboat.
        "Prefix" | "ImplementationSpecific" => {
            let path = path.unwrap_or("/");
            validate::ingress_path(path).map_err(|e| ("path", e.0))?;
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

fn parse_port_ref(
    port: Option<&k8s_openapi::api::networking::v1::ServiceBackendPort>,
) -> Result<ServicePortRef, (&'static str, String)> {
    let port = port.ok_or((
        "",
        "a Service backend needs a port (number or name)".to_string(),
    ))?;
    match (port.number, port.name.as_deref()) {
        (Some(number), None) => validate::port_number(number)
            .map(ServicePortRef::Number)
            .map_err(|e| (".number", e.0)),
        (None, Some(name)) => validate::port_name(name)
            .map(|()| ServicePortRef::Name(name.to_string()))
            .map_err(|e| (".name", e.0)),
        (Some(_), Some(_)) => Err(("", "set either port.number or port.name, not both".into())),
        (None, None) => Err((
            "",
            "a Service backend needs port.number or port.name".into(),
        )),
    }
}

fn find_service_port<'s>(service: &'s Service, port: &ServicePortRef) -> Option<&'s ServicePort> {
    let ports = service.spec.as_ref()?.ports.as_ref()?;
    ports.iter().find(|p| match port {
        ServicePortRef::Number(n) => p.port == i32::from(*n),
        ServicePortRef::Name(name) => p.name.as_deref() == Some(name.as_str()),
    })
}

/// The endpoints of one Service port.
#[derive(Debug, Default)]
struct Resolved {
    ready: BTreeSet<Endpoint>,
    draining: BTreeSet<Endpoint>,
    external: Option<(String, u16)>,
}

impl Resolved {
    fn into_backend(
        self,
        service: ObjectKey,
        port: ServicePortRef,
        options: Arc<BackendOptions>,
    ) -> Backend {
        Backend {
            service,
            port,
            endpoints: self.ready.into_iter().collect(),
            draining: self.draining.into_iter().collect(),
            external: self.external,
            options,
        }
    }
}

/// The full HTTP response haproxy sends for an error page: the value as it is when it is
/// already a response, else an HTML page.
fn error_response(code: u16, page: &str) -> String {
    if page.starts_with("HTTP/1.") {
        return page.replace("\r\n", "\n").replace('\n', "\r\n");
    }
    format!(
        "HTTP/1.1 {code} {}\r\ncontent-type: text/html; charset=utf-8\r\ncache-control: no-cache\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{page}",
        reason_phrase(code),
        page.len()
    )
}

fn reason_phrase(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        407 => "Proxy Authentication Required",
        408 => "Request Timeout",
        410 => "Gone",
        413 => "Payload Too Large",
        425 => "Too Early",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Error",
    }
}

/// The endpoints of the Service port called `port_name` in the Service's `slices`.
fn endpoints_of<'s>(slices: impl Iterator<Item = &'s EndpointSlice>, port_name: &str) -> Resolved {
    let mut resolved = Resolved::default();
    for slice in slices {
        collect_endpoints(slice, port_name, &mut resolved);
    }
    resolved.draining.retain(|e| !resolved.ready.contains(e));
    resolved
}

/// The ready and draining endpoints of `backend` from the Service's `slices`, as
/// [`build`] resolves them; `None` when they do not come from EndpointSlices (no such
/// Service or port, or an ExternalName Service).
pub(crate) fn slice_endpoints<'s>(
    snapshot: &Snapshot,
    slices: impl Iterator<Item = &'s EndpointSlice>,
    service: &ObjectKey,
    port: &ServicePortRef,
) -> Option<(Vec<Endpoint>, Vec<Endpoint>)> {
    let service = snapshot.services.get(service)?;
    let service_port = find_service_port(service, port)?;
    let spec = service.spec.as_ref();
    if spec.and_then(|s| s.type_.as_deref()) == Some("ExternalName") {
        return None;
    }
    let resolved = endpoints_of(slices, service_port.name.as_deref().unwrap_or(""));
    Some((
        resolved.ready.into_iter().collect(),
        resolved.draining.into_iter().collect(),
    ))
}

/// Adds the endpoints of one slice for the Service port called `port_name` (empty for a
/// Service's single unnamed port): ready ones, and terminating ones that still serve.
fn collect_endpoints(slice: &EndpointSlice, port_name: &str, into: &mut Resolved) {
    if slice.address_type != "IPv4" && slice.address_type != "IPv6" {
        return;
    }
    let Some(target_port) = slice
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref().unwrap_or("") == port_name)
        .and_then(|p| p.port)
        .and_then(|p| validate::port_number(p).ok())
    else {
        return;
    };
    for endpoint in &slice.endpoints {
        let conditions = endpoint.conditions.as_ref();
        // Kubernetes: a missing `ready` condition means ready.
        let ready = conditions.and_then(|c| c.ready).unwrap_or(true);
        let draining = !ready
            && conditions.and_then(|c| c.serving) == Some(true)
            && conditions.and_then(|c| c.terminating) == Some(true);
        let set = if ready {
            &mut into.ready
        } else if draining {
            &mut into.draining
        } else {
            continue;
        };
        for address in &endpoint.addresses {
            if let Ok(address) = address.parse::<IpAddr>() {
                set.insert(Endpoint {
                    address,
                    port: target_port,
                });
            }
        }
    }
}
