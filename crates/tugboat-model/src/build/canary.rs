//! Canary Ingresses: their rules wait until every main route is known, then join the
//! route of the same host and path with their backend, weight, header and cookie.

use crate::annotations::{self, Layer};
use crate::problem::{ObjectProblem, ProblemReason};
use crate::snapshot::ObjectKey;
use k8s_openapi::api::networking::v1::IngressBackend;
use std::collections::BTreeSet;

use super::endpoints::Endpoints;
use super::route_features::{Features, regex_keys};
use super::routes::{Routes, Slot, parse_path, rule_host};
use super::shared::Shared;
use super::tls::Tls;

/// The canary part of a build: the canary Ingresses waiting for the main routes.
#[derive(Default)]
pub(super) struct Canaries {
    /// In build order: joined to their main routes once every Ingress is in
    /// ([`Canaries::join`]).
    waiting: Vec<CanaryIngress>,
    /// Whether an Ingress built was a canary.
    seen: bool,
}

impl Canaries {
    /// Whether an Ingress built was a canary.
    pub(super) fn seen(&self) -> bool {
        self.seen
    }

    /// A canary Ingress: its host and path rules wait for [`Canaries::join`]; it serves
    /// no route, default backend or certificate of its own.
    pub(super) fn add(
        &mut self,
        shared: &mut Shared,
        key: &ObjectKey,
        spec: &k8s_openapi::api::networking::v1::IngressSpec,
        layer: Layer,
        settings: annotations::CanarySettings,
    ) {
        self.seen = true;
        let object = layer.object.clone();
        if spec.default_backend.is_some() {
            shared.problem(
                &object,
                "spec.defaultBackend".into(),
                "a canary Ingress's default backend is not used".into(),
            );
        }
        if spec.tls.as_ref().is_some_and(|tls| !tls.is_empty()) {
            shared.problem(
                &object,
                "spec.tls".into(),
                "a canary Ingress's TLS is not used: the main Ingress's certificates serve its \
                 hosts"
                    .into(),
            );
        }
        if let Some(field) = super::passthrough::asked(shared, &layer) {
            shared.problem(
                &object,
                field,
                "a canary Ingress's ssl-passthrough is not used: the main Ingress decides \
                 whether its hosts' TLS passes through"
                    .into(),
            );
        }
        // Its paths meet the main Ingress's as they are written: regular expressions
        // with use-regex (its rewrite-target is the main route's to set).
        let (regex_paths, _) = regex_keys(shared, &layer);
        let mut paths = Vec::new();
        for (rule_index, rule) in spec.rules.iter().flatten().enumerate() {
            let field = format!("spec.rules[{rule_index}]");
            let Some(host) = rule_host(shared, &object, &field, rule.host.as_deref()) else {
                continue;
            };
            for (path_index, path) in rule.http.iter().flat_map(|h| &h.paths).enumerate() {
                let field = format!("{field}.http.paths[{path_index}]");
                match parse_path(path.path.as_deref(), &path.path_type, regex_paths) {
                    Ok(path_match) => {
                        paths.push((field, (host.clone(), path_match), path.backend.clone()))
                    }
                    Err((subfield, message)) => {
                        shared.problem(&object, format!("{field}.{subfield}"), message)
                    }
                }
            }
        }
        self.waiting.push(CanaryIngress {
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
    pub(super) fn join<'a>(
        &mut self,
        shared: &mut Shared<'a>,
        endpoints: &mut Endpoints<'a>,
        tls: &mut Tls,
        features: &mut Features,
        routes: &mut Routes,
    ) {
        for canary in std::mem::take(&mut self.waiting) {
            let object = &canary.layer.object;
            let mut used = BTreeSet::new();
            for (field, slot, reference) in &canary.paths {
                shared.reads.contested_routes.insert(slot.clone());
                let (host, path) = slot;
                let Some(main) = routes.get(slot) else {
                    let message = format!(
                        "no Ingress routes host {host} path {path}: this canary rule does \
                         nothing until one does"
                    );
                    shared.problem(object, field.clone(), message);
                    continue;
                };
                if let Some(other) = &main.canary {
                    let message = format!(
                        "host {host} path {path} already has the canary of Ingress {}: one \
                         canary per host and path",
                        other.ingress
                    );
                    shared.problems.push(ObjectProblem {
                        object: object.clone(),
                        field: field.clone(),
                        reason: ProblemReason::RouteConflict,
                        message,
                    });
                    continue;
                }
                let Some(backend) = endpoints.backend(
                    shared,
                    tls,
                    &canary.key,
                    reference,
                    &format!("{field}.backend"),
                    &canary.layer,
                ) else {
                    continue;
                };
                used.insert(backend.clone());
                let Some(main) = routes.get(slot) else {
                    continue;
                };
                if main.backend == backend {
                    let message = format!(
                        "the backend is the one host {host} path {path} already goes to: this \
                         canary rule does nothing"
                    );
                    shared.problem(object, format!("{field}.backend"), message);
                    continue;
                }
                let old_features = main.features.clone();
                let main_backend = main.backend.clone();
                let mut rules = canary.settings.rules.clone();
                rules.affinity = endpoints.canary_affinity(
                    &main_backend,
                    &backend,
                    canary.settings.affinity_sticky,
                );
                let id = features.with(old_features.as_ref(), |f| f.canary = Some(rules));
                if let Some(main) = routes.get_mut(slot) {
                    main.features = Some(id);
                    main.canary = Some(crate::desired::Canary {
                        backend,
                        per_million: canary.settings.per_million,
                        ingress: canary.key.clone(),
                    });
                }
                if let Some(old) = old_features
                    && !routes
                        .iter()
                        .any(|route| route.features.as_ref() == Some(&old))
                {
                    features.remove(&old);
                }
            }
            shared.reads.used_by(used, &canary.key);
        }
    }
}

/// A canary Ingress, kept until every main route is known.
struct CanaryIngress {
    key: ObjectKey,
    /// Its keys; the object they are on is the Ingress.
    layer: Layer,
    settings: annotations::CanarySettings,
    /// Its rules: (field, host and path, backend reference).
    paths: Vec<(String, Slot, IngressBackend)>,
}
