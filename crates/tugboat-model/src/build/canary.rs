//! Canary Ingresses: their rules wait until every main route is known, then join the
//! route of the same host and path with their backend, weight, header and cookie.

use crate::annotations::{self, Layer};
use crate::desired::BackendName;
use crate::desired::{HostMatch, PathMatch};
use crate::features::{CanaryAffinity, FeatureSetId, PersistenceCookie};
use crate::problem::{ObjectProblem, ObjectRef, ProblemReason};
use crate::snapshot::ObjectKey;
use k8s_openapi::api::networking::v1::IngressBackend;
use std::collections::BTreeSet;
use std::sync::Arc;

use super::{Builder, parse_path};

impl Builder<'_> {
    /// A canary Ingress: its host and path rules wait for [`Builder::join_canaries`];
    /// it serves no route, default backend or certificate of its own.
    pub(super) fn add_canary(
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
    pub(super) fn join_canaries(&mut self) {
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
                let main_backend = main.backend.clone();
                let mut features = old_features
                    .as_ref()
                    .and_then(|id| self.feature_sets.get(id))
                    .cloned()
                    .unwrap_or_default();
                let mut rules = canary.settings.rules.clone();
                rules.affinity =
                    self.canary_affinity(&main_backend, &backend, canary.settings.affinity_sticky);
                features.canary = Some(rules);
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
}

impl Builder<'_> {
    /// Session affinity of a main backend and its canary (`affinity-canary-behavior`,
    /// as ingress-nginx): with `sticky`, the canary's backend takes the main backend's
    /// cookie, its values marked as the canary's, so that each backend keeps its
    /// clients; with `legacy`, only the main backend keeps its clients.
    fn canary_affinity(
        &mut self,
        main: &BackendName,
        canary: &BackendName,
        sticky: bool,
    ) -> Option<CanaryAffinity> {
        let cookie = self.backends.get(main)?.options.cookie.clone()?;
        if sticky && let Some(backend) = self.backends.get_mut(canary) {
            let mut options = (*backend.options).clone();
            options.cookie = Some(PersistenceCookie {
                canary: true,
                ..cookie.clone()
            });
            backend.options = Arc::new(options);
        }
        Some(CanaryAffinity {
            cookie: cookie.name,
            sticky,
        })
    }
}

/// A canary Ingress, kept until every main route is known.
pub(super) struct CanaryIngress {
    object: ObjectRef,
    key: ObjectKey,
    layer: Layer,
    settings: annotations::CanarySettings,
    /// Its rules: (field, host and path, backend reference).
    paths: Vec<(String, (HostMatch, PathMatch), IngressBackend)>,
}
