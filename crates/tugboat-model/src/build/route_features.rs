//! What an Ingress' annotations (and its Service's) make of its routes: feature sets,
//! redirects, rewrites, regex paths, aliases, allow lists, basic auth, backend options.

use crate::annotations::{self, Layer, Resolver, Scope, UnsupportedAccess, read_keys};
use crate::desired::{BackendName, HostMatch, PathMatch, UserHash};
use crate::features::{
    BackendOptions, BasicAuth, ErrorBackend, FeatureSetId, HttpsRedirect, PathRewrite, Redirect,
    RedirectTarget, RedirectWhen, RouteFeatures,
};
use crate::problem::{ObjectProblem, ObjectRef, ProblemReason};
use crate::snapshot::ObjectKey;
use crate::validate;
use k8s_openapi::api::networking::v1::{IngressBackend, IngressServiceBackend, ServiceBackendPort};
use std::collections::BTreeSet;

use super::{Builder, NO_USERS, SecretUse};

impl Builder<'_> {
    /// ingress-nginx's `use-regex` and `rewrite-target` of an Ingress (or the ConfigMap):
    /// whether its paths are regular expressions, and the replacement of `rewrite-target`
    /// (which makes them regular expressions too).
    pub(super) fn regex_keys(&mut self, ingress_layer: &Layer) -> (bool, Option<String>) {
        let layers = vec![ingress_layer, self.config_map_layer];
        read_keys(layers, &mut self.problems, |resolver| {
            let rewrite = resolver.get(&annotations::keys::REWRITE_TARGET);
            let regex = resolver.get_or_default(&annotations::keys::USE_REGEX) || rewrite.is_some();
            (regex, rewrite)
        })
    }

    /// ingress-nginx's `server-alias` of an Ingress: the field that sets it and the
    /// host names, when it is set and valid.
    pub(super) fn server_aliases(
        &mut self,
        ingress_layer: &Layer,
    ) -> Option<(String, Vec<String>)> {
        let aliases = read_keys(vec![ingress_layer], &mut self.problems, |resolver| {
            resolver.get_in(&annotations::keys::SERVER_ALIAS, &[Scope::Ingress])
        });
        let field = ingress_layer.field_of(&annotations::keys::SERVER_ALIAS.spec)?;
        Some((field.to_string(), aliases?))
    }

    /// The field of ingress-nginx's `from-to-www-redirect` of an Ingress, when it is
    /// set to `true`.
    pub(super) fn www_redirect_field(&mut self, ingress_layer: &Layer) -> Option<String> {
        let on = read_keys(vec![ingress_layer], &mut self.problems, |resolver| {
            resolver.get_in(&annotations::keys::FROM_TO_WWW_REDIRECT, &[Scope::Ingress])
        });
        if on != Some(true) {
            return None;
        }
        let field = ingress_layer.field_of(&annotations::keys::FROM_TO_WWW_REDIRECT.spec)?;
        Some(field.to_string())
    }

    /// `from-to-www-redirect` of a rule's `host`: every request for its `www.`
    /// counterpart (or the host without `www.`) is redirected (`http-redirect-code`,
    /// 308 by default) to the same scheme,
    /// path and query on `host`, as ingress-nginx does. A counterpart that is a host of
    /// the Ingress' own rules or a `server-alias` is left alone; one another Ingress already routes is a
    /// conflict (a problem naming the key).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn add_www_redirect(
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
                code: self.www_redirect_code,
                port: None,
            }),
            redirect: Some(Redirect {
                target: RedirectTarget::Host(name.clone()),
                code: self.www_redirect_code,
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
    pub(super) fn with_path_rewrite(
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

    /// The feature set `base` with the error backend of its Ingress (a set of its own).
    pub(super) fn with_error_backend(
        &mut self,
        base: Option<FeatureSetId>,
        error_backend: &ErrorBackend,
    ) -> Option<FeatureSetId> {
        let mut features = base
            .and_then(|id| self.feature_sets.get(&id).cloned())
            .unwrap_or_default();
        features.error_backend = Some(error_backend.clone());
        let id = FeatureSetId::of(&features);
        self.feature_sets.insert(id.clone(), features);
        Some(id)
    }

    /// ingress-nginx's `default-backend` and `custom-http-errors` of an Ingress (read on
    /// the Ingress only); the backend of `default-backend` joins `used`. A
    /// `default-backend` naming a Service that does not exist (or has no port) is a
    /// problem naming the key: the rules keep their own backend (503 without a server),
    /// and `custom-http-errors` goes to the controller's default backend.
    pub(super) fn error_backend(
        &mut self,
        object: &ObjectRef,
        ingress: &ObjectKey,
        ingress_layer: &Layer,
        used: &mut BTreeSet<BackendName>,
    ) -> Option<ErrorBackend> {
        let scopes = [Scope::Ingress];
        let (service, codes) = read_keys(vec![ingress_layer], &mut self.problems, |resolver| {
            let service = resolver.get_in(&annotations::keys::DEFAULT_BACKEND, &scopes);
            let codes = resolver
                .get_in(&annotations::keys::CUSTOM_HTTP_ERRORS, &scopes)
                .unwrap_or_default();
            (service, codes)
        });
        let backend = service
            .and_then(|name| self.default_backend_annotation(object, ingress, ingress_layer, name));
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

    /// The backend of the Service `name` of `default-backend`: its first port, as
    /// ingress-nginx takes it.
    fn default_backend_annotation(
        &mut self,
        object: &ObjectRef,
        ingress: &ObjectKey,
        ingress_layer: &Layer,
        name: String,
    ) -> Option<BackendName> {
        let field = ingress_layer
            .field_of(&annotations::keys::DEFAULT_BACKEND.spec)
            .unwrap_or("metadata.annotations")
            .to_string();
        let service = ObjectKey::new(&ingress.namespace, &name);
        let first_port = self
            .snapshot
            .services
            .get(&service)
            .and_then(|s| s.spec.as_ref())
            .and_then(|spec| spec.ports.as_ref())
            .and_then(|ports| ports.first())
            .map(|port| port.port);
        let Some(port) = first_port else {
            self.problems.push(ObjectProblem {
                object: object.clone(),
                field,
                reason: ProblemReason::ServiceNotFound,
                message: format!(
                    "key 'default-backend': Service {service} does not exist or has no port; \
                     the rules keep their own backend"
                ),
            });
            return None;
        };
        let reference = IngressBackend {
            service: Some(IngressServiceBackend {
                name,
                port: Some(ServiceBackendPort {
                    number: Some(port),
                    name: None,
                }),
            }),
            resource: None,
        };
        self.backend(object, ingress, &reference, &field, ingress_layer)
    }

    /// The keys of a Service, read once.
    fn service_layer(&mut self, service: &ObjectKey) -> &Layer {
        if !self.service_layers.contains_key(service) {
            let object = ObjectRef::of("Service", service);
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
    /// Ingress', then the ConfigMap's. `None` when there are none. `exact_hosts`: every
    /// host these routes are served for is exact (see [`annotations::ServedHosts`]).
    pub(super) fn route_features(
        &mut self,
        service: &ObjectKey,
        ingress_layer: &Layer,
        exact_hosts: bool,
    ) -> Option<FeatureSetId> {
        let service_layer = self.service_layer(service).clone();
        let config_map_layer = self.config_map_layer;
        let mut resolver = Resolver::new(vec![&service_layer, ingress_layer, config_map_layer]);
        let hosts = annotations::ServedHosts {
            owner: &ingress_layer.object,
            exact: exact_hosts,
        };
        let (mut features, lookups) = annotations::route_features(&mut resolver, hosts);
        // Fail closed: a restriction Tugboat cannot honour, or whose value it cannot
        // read, refuses everybody.
        // A backend snippet that restricts access, not applied with raw snippets off,
        // is such a restriction too.
        let refused_snippet =
            !self.settings.allow_snippets && annotations::refused_snippet_restricts(&resolver);
        features.deny_all = resolver.refused_restriction
            || self.settings.unsupported_access == UnsupportedAccess::Deny
                && (!service_layer.unsupported_access.is_empty()
                    || !ingress_layer.unsupported_access.is_empty()
                    || refused_snippet);
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
            // What the client gets: 403 when the routes fail closed anyway (a refused
            // `auth-secret` does), else the 401 of a list without users.
            let refused = if features.deny_all { 403 } else { 401 };
            let userlist = match auth_secret {
                Some(secret) => {
                    self.userlist(&ingress_layer.object, &service.namespace, &secret, refused)
                }
                None => {
                    resolver.problems.push(ObjectProblem {
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
    /// [`NO_USERS`] list when the Secret cannot be used, and then a problem saying the
    /// routes answer `refused` (401, or 403 when they fail closed anyway).
    pub(super) fn userlist(
        &mut self,
        object: &ObjectRef,
        namespace: &str,
        secret: &str,
        refused: u16,
    ) -> String {
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
                        "auth-secret {key}: {message}; every request is refused ({refused}) \
                         until it can be used"
                    ),
                });
                self.userlists.entry(NO_USERS.into()).or_default();
                NO_USERS.to_string()
            }
        }
    }

    /// The options of a backend: Service keys, then the Ingress', then the ConfigMap's.
    /// The oldest Ingress using a backend sets them; another that disagrees is told.
    pub(super) fn backend_options(
        &mut self,
        name: &BackendName,
        service: &ObjectKey,
        ingress: &ObjectKey,
        ingress_layer: &Layer,
    ) -> Option<BackendOptions> {
        let service_layer = self.service_layer(service).clone();
        let config_map_layer = self.config_map_layer;
        let layers = vec![&service_layer, ingress_layer, config_map_layer];
        let allow_snippets = self.settings.allow_snippets;
        let (mut options, lookups) = read_keys(layers, &mut self.problems, |resolver| {
            annotations::backend_options(resolver, allow_snippets)
        });
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
}
