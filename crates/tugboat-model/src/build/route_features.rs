//! What an Ingress' annotations (and its Service's) make of its routes: feature sets,
//! redirects, rewrites, regex paths, aliases, allow lists, basic auth, error backends.

use crate::annotations::{self, Layer, Scope, UnsupportedAccess, read_keys};
use crate::desired::{BackendName, HostMatch, UserHash};
use crate::features::{
    BasicAuth, ClientCa, ClientCertificates, ErrorBackend, FeatureSetId, HttpsRedirect, Redirect,
    RedirectTarget, RedirectWhen, RouteFeatures,
};
use crate::problem::{ObjectProblem, ObjectRef, ProblemReason};
use crate::snapshot::ObjectKey;
use crate::tls::Pem;
use crate::validate;
use std::collections::{BTreeMap, BTreeSet};

use super::endpoints::Endpoints;
use super::shared::{SecretUse, Shared};
use super::tls::Tls;

/// The userlist of routes whose `auth-secret` cannot be used: it has no users, so
/// every request gets 401 (an authentication that cannot work fails closed).
pub const NO_USERS: &str = "tugboat_no_users";

/// The features part of a build: the feature sets of the routes and the files and
/// lists they name.
pub(super) struct Features {
    sets: BTreeMap<FeatureSetId, RouteFeatures>,
    /// The userlists of basic auth, by name.
    userlists: BTreeMap<String, Vec<UserHash>>,
    /// Pattern files of access lists, by file name.
    pattern_files: BTreeMap<String, String>,
    /// The code of `from-to-www-redirect`: the ConfigMap's `http-redirect-code`.
    www_redirect_code: u16,
    /// Client-certificate CA bundles and revocation lists, by file name.
    client_ca_files: BTreeMap<String, Pem>,
    /// The hosts that ask for client certificates, with their CA and the Ingress that
    /// set it first.
    client_ca_hosts: BTreeMap<String, (ClientCa, ObjectRef)>,
}

/// What the features part of a build gives the desired state.
pub(super) struct FeaturesOutput {
    pub feature_sets: BTreeMap<FeatureSetId, RouteFeatures>,
    pub userlists: BTreeMap<String, Vec<UserHash>>,
    pub pattern_files: BTreeMap<String, String>,
    pub client_ca_files: BTreeMap<String, Pem>,
    pub client_ca_hosts: BTreeMap<String, ClientCa>,
}

impl Features {
    /// No feature set yet; the keys of `config_map_layer` (the ConfigMap's) set the
    /// defaults (their problems are the global build's, told there).
    pub(super) fn new(config_map_layer: &Layer) -> Self {
        let code = read_keys(vec![config_map_layer], &mut Vec::new(), |resolver| {
            resolver.get_in(&annotations::keys::HTTP_REDIRECT_CODE, &[Scope::ConfigMap])
        });
        Features {
            sets: BTreeMap::new(),
            userlists: BTreeMap::new(),
            pattern_files: BTreeMap::new(),
            www_redirect_code: annotations::keys::HTTP_REDIRECT_CODE.or_default(code),
            client_ca_files: BTreeMap::new(),
            client_ca_hosts: BTreeMap::new(),
        }
    }

    pub(super) fn into_output(self) -> FeaturesOutput {
        FeaturesOutput {
            feature_sets: self.sets,
            userlists: self.userlists,
            pattern_files: self.pattern_files,
            client_ca_files: self.client_ca_files,
            client_ca_hosts: self
                .client_ca_hosts
                .into_iter()
                .map(|(host, (ca, _))| (host, ca))
                .collect(),
        }
    }

    pub(super) fn get(&self, id: &FeatureSetId) -> Option<&RouteFeatures> {
        self.sets.get(id)
    }

    /// Every feature set.
    pub(super) fn iter(&self) -> impl Iterator<Item = &RouteFeatures> {
        self.sets.values()
    }

    /// Adds a feature set; its id.
    pub(super) fn insert(&mut self, features: RouteFeatures) -> FeatureSetId {
        let id = FeatureSetId::of(&features);
        self.sets.insert(id.clone(), features);
        id
    }

    /// The feature set `base` (none: an empty one) as `change` makes it, a set of its
    /// own.
    pub(super) fn with(
        &mut self,
        base: Option<&FeatureSetId>,
        change: impl FnOnce(&mut RouteFeatures),
    ) -> FeatureSetId {
        let mut features = base
            .and_then(|id| self.sets.get(id).cloned())
            .unwrap_or_default();
        change(&mut features);
        self.insert(features)
    }

    /// Leaves out a feature set no route uses any more.
    pub(super) fn remove(&mut self, id: &FeatureSetId) {
        self.sets.remove(id);
    }

    /// `from-to-www-redirect` of a rule's `host` (`field` of `object`): every request
    /// for its `www.` counterpart (or the host without `www.`) is redirected
    /// (`http-redirect-code`, 308 by default) to the same scheme, path and query on
    /// `host`, as ingress-nginx does. The counterpart to route and its feature set;
    /// `None` for a counterpart that is a host of the Ingress' own rules or a
    /// `server-alias` (`own_hosts`), or already `done`.
    pub(super) fn www_redirect(
        &mut self,
        shared: &mut Shared,
        object: &ObjectRef,
        field: &str,
        host: &HostMatch,
        own_hosts: &BTreeSet<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<(HostMatch, FeatureSetId)> {
        let name = match host {
            HostMatch::Exact(name) => name,
            // A rule without a host takes every host already.
            HostMatch::Any => return None,
            HostMatch::Wildcard(_) | HostMatch::Subdomains(_) => {
                shared.problem(
                    object,
                    field.to_string(),
                    format!("the wildcard host {host} has no www counterpart: no redirect for it"),
                );
                return None;
            }
        };
        let counterpart = match name.strip_prefix("www.") {
            Some(bare) => bare.to_string(),
            None => format!("www.{name}"),
        };
        let counterpart = match validate::ingress_host(&counterpart) {
            Ok(counterpart) => counterpart,
            Err(err) => {
                shared.problem(
                    object,
                    field.to_string(),
                    format!("no redirect for {name}: {}", err.0),
                );
                return None;
            }
        };
        if own_hosts.contains(&counterpart) || !done.insert(counterpart.clone()) {
            return None;
        }
        let features = RouteFeatures {
            // As ingress-nginx's redirecting server: straight to the rule's host on the
            // request's scheme, without going to HTTPS on the counterpart first.
            https_redirect: Some(HttpsRedirect {
                when: RedirectWhen::Never,
                code: self.www_redirect_code,
                port: None,
            }),
            redirect: Some(Redirect {
                target: RedirectTarget::Host(name.clone()),
                code: self.www_redirect_code,
            }),
            ..RouteFeatures::default()
        };
        Some((HostMatch::Exact(counterpart), self.insert(features)))
    }

    /// The features of the routes of one Ingress (or route) to the Service `service`:
    /// the Service's keys (as `endpoints` read them), then the Ingress', then the
    /// ConfigMap's. `None` when there are none. `exact_hosts`: every host these routes
    /// are served for is exact (see [`annotations::ServedHosts`]).
    pub(super) fn route_features<'a>(
        &mut self,
        shared: &mut Shared<'a>,
        endpoints: &mut Endpoints<'a>,
        service: &ObjectKey,
        ingress_layer: &Layer,
        exact_hosts: bool,
    ) -> Option<FeatureSetId> {
        let service_layer = endpoints.service_layer(shared, service);
        let settings = shared.settings;
        let layers = vec![service_layer, ingress_layer, shared.config_map_layer];
        let hosts = annotations::ServedHosts {
            owner: &ingress_layer.object,
            exact: exact_hosts,
        };
        let (mut features, lookups, realm) = read_keys(layers, &mut shared.problems, |resolver| {
            let (mut features, lookups) = annotations::route_features(resolver, hosts);
            // Fail closed: a restriction Tugboat cannot honour, or whose value it cannot
            // read, refuses everybody.
            // A backend snippet that restricts access, not applied with raw snippets off,
            // is such a restriction too.
            let refused_snippet =
                !settings.allow_snippets && annotations::refused_snippet_restricts(resolver);
            features.deny_all = resolver.refused_restriction
                || settings.unsupported_access == UnsupportedAccess::Deny
                    && (!service_layer.unsupported_access.is_empty()
                        || !ingress_layer.unsupported_access.is_empty()
                        || refused_snippet);
            let realm = lookups
                .auth_secret
                .is_some()
                .then(|| annotations::auth_realm(resolver));
            (features, lookups, realm)
        });
        let config_map_layer = shared.config_map_layer;
        // The object and field that set a key, for a problem about its value.
        let set_by = |key: &annotations::KeySpec| {
            annotations::set_by(&[service_layer, ingress_layer, config_map_layer], key)
                .unwrap_or_else(|| (ingress_layer.object.clone(), "metadata.annotations".into()))
        };
        if let Some(reference) = &lookups.allow_ref {
            match self.pattern_file(
                shared,
                &set_by(&annotations::keys::ALLOW_LIST.spec),
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
                shared,
                &set_by(&annotations::keys::DENY_LIST.spec),
                &service.namespace,
                reference,
                "deny-list",
            ) {
                Some(file) => features.deny_file = Some(file),
                // Fail closed: a deny list that cannot be read denies everybody.
                None => features.deny_list = vec!["0.0.0.0/0".into(), "::/0".into()],
            }
        }
        if let (Some(auth_secret), Some(realm)) = (lookups.auth_secret, realm) {
            // What the client gets: 403 when the routes fail closed anyway (a refused
            // `auth-secret` does), else the 401 of a list without users.
            let refused = if features.deny_all { 403 } else { 401 };
            let userlist = match auth_secret {
                Some(secret) => self.userlist(
                    shared,
                    &set_by(&annotations::keys::AUTH_SECRET.spec),
                    &service.namespace,
                    &secret,
                    refused,
                ),
                None => {
                    shared.problems.push(ObjectProblem {
                        object: ingress_layer.object.clone(),
                        field: "metadata.annotations".into(),
                        reason: ProblemReason::InvalidField,
                        message: format!(
                            "auth-type basic-auth needs a valid auth-secret: every request \
                             is refused ({refused}) until it has one"
                        ),
                    });
                    self.userlists.entry(NO_USERS.into()).or_default();
                    NO_USERS.to_string()
                }
            };
            features.basic_auth = Some(BasicAuth { userlist, realm });
        }
        if let Some(keys) = lookups.client_certificates {
            match self.client_ca(shared, ingress_layer, &service.namespace, &keys.secret) {
                Some(ca) => {
                    features.client_certificates = Some(ClientCertificates {
                        ca,
                        verify: keys.verify,
                        error_page: keys.error_page,
                        pass_certificate: keys.pass_certificate,
                        match_subject: keys.match_subject,
                    });
                }
                // Fail closed: client certificates that cannot be checked let nobody in.
                None => features.deny_all = true,
            }
        }
        if features.is_empty() {
            return None;
        }
        Some(self.insert(features))
    }

    /// The CA files of the `auth-tls-secret` Secret `secret`; `None` (and a problem of
    /// the Ingress naming the Secret and its field) when they cannot be used.
    fn client_ca(
        &mut self,
        shared: &mut Shared,
        ingress_layer: &Layer,
        namespace: &str,
        secret: &str,
    ) -> Option<ClientCa> {
        let ca_file = format!("{namespace}_{secret}.ca.pem");
        let crl_file = format!("{namespace}_{secret}.crl.pem");
        if self.client_ca_files.contains_key(&ca_file) {
            let crl_file = self
                .client_ca_files
                .contains_key(&crl_file)
                .then_some(crl_file);
            return Some(ClientCa { ca_file, crl_file });
        }
        let key = ObjectKey::new(namespace, secret);
        shared.reads.secret(&key, SecretUse::Other);
        let checked = match shared.snapshot.secrets.get(&key) {
            None => Err((ProblemReason::SecretNotFound, "not found".to_string())),
            Some(found) => crate::tls::check_client_ca_secret(found)
                .map_err(|message| (ProblemReason::InvalidCertificate, message)),
        };
        match checked {
            Ok(files) => {
                let now = shared.settings.now;
                if now >= files.expires {
                    // Served all the same: haproxy refuses the clients, as nginx does.
                    shared.problems.push(ObjectProblem {
                        object: ingress_layer.object.clone(),
                        field: secret_field(ingress_layer),
                        reason: ProblemReason::InvalidCertificate,
                        message: format!(
                            "auth-tls-secret Secret {key}: every certificate in 'ca.crt' has \
                             expired: no client certificate verifies until it is renewed"
                        ),
                    });
                } else {
                    shared.reads.validity_change(Some(files.expires));
                }
                self.client_ca_files.insert(ca_file.clone(), files.ca);
                let crl_file = files.crl.map(|crl| {
                    self.client_ca_files.insert(crl_file.clone(), crl);
                    crl_file
                });
                Some(ClientCa { ca_file, crl_file })
            }
            Err((reason, message)) => {
                shared.problems.push(ObjectProblem {
                    object: ingress_layer.object.clone(),
                    field: secret_field(ingress_layer),
                    reason,
                    message: format!(
                        "auth-tls-secret Secret {key}: {message}; every request is refused \
                         (403) until it can be used"
                    ),
                });
                None
            }
        }
    }

    /// Asks for client certificates verified by `ca` on `host`, a rule host of `object`
    /// (`field`). `false` (and a problem) when it cannot: a rule without a host, or a
    /// host another Ingress verifies with another CA; its routes must then refuse.
    pub(super) fn client_ca_host(
        &mut self,
        shared: &mut Shared,
        object: &ObjectRef,
        field: &str,
        host: &HostMatch,
        ca: &ClientCa,
    ) -> bool {
        let name = match host {
            HostMatch::Exact(name) => name.clone(),
            HostMatch::Wildcard(suffix) => format!("*{suffix}"),
            HostMatch::Any | HostMatch::Subdomains(_) => {
                shared.problem(
                    object,
                    field.to_string(),
                    "client certificates (auth-tls-secret) are asked for per host: a rule \
                     without a host refuses every request (403)"
                        .into(),
                );
                return false;
            }
        };
        match self.client_ca_hosts.get(&name) {
            Some((other, owner)) if other != ca => {
                shared.problems.push(ObjectProblem {
                    object: object.clone(),
                    field: field.to_string(),
                    reason: ProblemReason::RouteConflict,
                    message: format!(
                        "host {name} already verifies client certificates with the CA of \
                         {owner}: these routes refuse every request (403)"
                    ),
                });
                false
            }
            Some(_) => true,
            None => {
                self.client_ca_hosts
                    .insert(name, (ca.clone(), object.clone()));
                true
            }
        }
    }

    /// The pattern file of an access list kept in a ConfigMap key; `None` (and a
    /// problem) when it cannot be used.
    fn pattern_file(
        &mut self,
        shared: &mut Shared,
        (object, field): &(ObjectRef, String),
        namespace: &str,
        reference: &annotations::ConfigMapKeyRef,
        key_name: &str,
    ) -> Option<String> {
        let file = format!("{namespace}_{}_{}.lst", reference.name, reference.key);
        if self.pattern_files.contains_key(&file) {
            return Some(file);
        }
        let config_map = ObjectKey::new(namespace, &reference.name);
        let text = shared
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
                shared.problems.push(ObjectProblem {
                    object: object.clone(),
                    field: field.clone(),
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

    /// The userlist of a basic-auth Secret, named `<namespace>_<secret>`; the empty
    /// [`NO_USERS`] list when the Secret cannot be used, and then a problem saying the
    /// routes answer `refused` (401, or 403 when they fail closed anyway).
    fn userlist(
        &mut self,
        shared: &mut Shared,
        (object, field): &(ObjectRef, String),
        namespace: &str,
        secret: &str,
        refused: u16,
    ) -> String {
        let key = ObjectKey::new(namespace, secret);
        let name = format!("{namespace}_{secret}");
        if self.userlists.contains_key(&name) {
            return name;
        }
        shared.reads.secret(&key, SecretUse::Other);
        let users = match shared.snapshot.secrets.get(&key) {
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
                shared.problems.push(ObjectProblem {
                    object: object.clone(),
                    field: field.clone(),
                    reason,
                    message: format!(
                        "auth-secret {key}: {message}; every request is refused ({refused}) \
                         until it can be used"
                    ),
                });
                self.userlists.entry(NO_USERS.into()).or_default();
                NO_USERS.to_string()
            }
        }
    }
}

/// The field of an Ingress' `auth-tls-secret`, whichever spelling sets it.
fn secret_field(ingress_layer: &Layer) -> String {
    ingress_layer
        .field_of(&annotations::keys::AUTH_TLS_SECRET.spec)
        .unwrap_or("metadata.annotations")
        .to_string()
}

/// ingress-nginx's `use-regex` and `rewrite-target` of an Ingress (or the ConfigMap):
/// whether its paths are regular expressions, and the replacement of `rewrite-target`
/// (which makes them regular expressions too).
pub(super) fn regex_keys(shared: &mut Shared, ingress_layer: &Layer) -> (bool, Option<String>) {
    let layers = vec![ingress_layer, shared.config_map_layer];
    read_keys(layers, &mut shared.problems, |resolver| {
        let rewrite = resolver.get(&annotations::keys::REWRITE_TARGET);
        let regex = resolver.get_or_default(&annotations::keys::USE_REGEX) || rewrite.is_some();
        (regex, rewrite)
    })
}

/// ingress-nginx's `server-alias` of an Ingress: the field that sets it and the host
/// names, when it is set and valid.
pub(super) fn server_aliases(
    shared: &mut Shared,
    ingress_layer: &Layer,
) -> Option<(String, Vec<String>)> {
    let aliases = read_keys(vec![ingress_layer], &mut shared.problems, |resolver| {
        resolver.get_in(&annotations::keys::SERVER_ALIAS, &[Scope::Ingress])
    });
    let field = ingress_layer.field_of(&annotations::keys::SERVER_ALIAS.spec)?;
    Some((field.to_string(), aliases?))
}

/// The field of ingress-nginx's `from-to-www-redirect` of an Ingress, when it is set to
/// `true`.
pub(super) fn www_redirect_field(shared: &mut Shared, ingress_layer: &Layer) -> Option<String> {
    let on = read_keys(vec![ingress_layer], &mut shared.problems, |resolver| {
        resolver.get_in(&annotations::keys::FROM_TO_WWW_REDIRECT, &[Scope::Ingress])
    });
    if on != Some(true) {
        return None;
    }
    let field = ingress_layer.field_of(&annotations::keys::FROM_TO_WWW_REDIRECT.spec)?;
    Some(field.to_string())
}

/// ingress-nginx's `default-backend` and `custom-http-errors` of the Ingress `ingress`
/// (read on the Ingress only); the backend of `default-backend` joins `used`. A
/// `default-backend` naming a Service that does not exist (or has no port) is a problem
/// naming the key: the rules keep their own backend (503 without a server), and
/// `custom-http-errors` goes to the controller's default backend.
pub(super) fn error_backend<'a>(
    shared: &mut Shared<'a>,
    endpoints: &mut Endpoints<'a>,
    tls: &mut Tls,
    ingress: &ObjectKey,
    ingress_layer: &Layer,
    used: &mut BTreeSet<BackendName>,
) -> Option<ErrorBackend> {
    let scopes = [Scope::Ingress];
    let (service, codes) = read_keys(vec![ingress_layer], &mut shared.problems, |resolver| {
        let service = resolver.get_in(&annotations::keys::DEFAULT_BACKEND, &scopes);
        let codes = resolver
            .get_in(&annotations::keys::CUSTOM_HTTP_ERRORS, &scopes)
            .unwrap_or_default();
        (service, codes)
    });
    let backend = service
        .and_then(|name| endpoints.default_backend_key(shared, tls, ingress, ingress_layer, name));
    if backend.is_none() && codes.is_empty() {
        return None;
    }
    used.extend(backend.clone());
    let codes_field = (!codes.is_empty())
        .then(|| ingress_layer.field_of(&annotations::keys::CUSTOM_HTTP_ERRORS.spec))
        .flatten()
        .map(str::to_string);
    Some(ErrorBackend {
        when_unserved: backend.is_some() || codes.contains(&503),
        backend,
        codes,
        ingress: ingress.clone(),
        codes_field,
    })
}
