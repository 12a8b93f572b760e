//! The builder's side of the Gateway API: the rules [`crate::gateway::translate`] gives
//! become routes of the same maps the Ingresses fill (after them: an Ingress keeps a host
//! and path it claims), listener certificates join the crt-list, and the status comes
//! back to the caller.
//!
//! A rule's backend is built as an Ingress backend is (the Service's keys and the
//! ConfigMap's apply, a route of an HTTPRoute has no keys of its own; a split takes
//! those of its first Service). A rule whose backend does not resolve goes to
//! [`BackendName::unresolved`] with a feature set that answers 500, as the spec asks.
//! The rule's filters and weighted backends join its feature set
//! ([`crate::RouteFeatures::gateway`]).

use k8s_openapi::api::networking::v1::{IngressBackend, IngressServiceBackend, ServiceBackendPort};

use super::{Builder, SecretUse};
use crate::annotations::{Layer, Scope};
use crate::desired::{Backend, BackendName, ServicePortRef, TlsCertificate};
use crate::features::FeatureSetId;
use crate::gateway::features::{GatewayFeatures, Share};
use crate::gateway::{GatewayStatus, ListenerCertificate, RuleBackend, RuleRoute, translate};
use crate::problem::{ObjectProblem, ObjectRef, ProblemReason};
use crate::snapshot::ObjectKey;

/// The status HTTP rules without a usable backend answer.
const UNRESOLVED_STATUS: u16 = 500;

impl Builder<'_> {
    /// Adds the routes and certificates of the Gateway API objects; their status.
    pub(super) fn add_gateway_api(&mut self) -> GatewayStatus {
        let Some(settings) = self.settings.gateway.clone() else {
            return GatewayStatus::default();
        };
        let snapshot = self.snapshot;
        let translation = translate(snapshot, &settings, &mut |secret: &ObjectKey| {
            self.checked_secret(secret, SecretUse::Certificate)
                .map(|_| ())
                .map_err(|(_, message)| message)
        });
        self.problems.extend(translation.problems);
        for certificate in &translation.certificates {
            self.add_listener_certificate(certificate);
        }
        for rule in translation.rules {
            self.add_gateway_rule(rule);
        }
        translation.status
    }

    fn add_gateway_rule(&mut self, rule: RuleRoute) {
        let object = ObjectRef {
            kind: "HTTPRoute",
            namespace: rule.route.namespace.clone(),
            name: rule.route.name.clone(),
        };
        let slot = (rule.host.clone(), rule.path.clone());
        if let Some(existing) = self.routes.get(&slot) {
            // The same route on another listener (the HTTP and the HTTPS one) is the
            // same rule; anything else is a conflict the older object wins.
            let from_route = self.http_route_slots.contains(&slot);
            if from_route && existing.ingress == rule.route {
                return;
            }
            let owner = if from_route {
                format!("the older HTTPRoute {}", existing.ingress)
            } else {
                format!("the Ingress {} (Ingresses come first)", existing.ingress)
            };
            self.problems.push(ObjectProblem {
                object,
                field: rule.field,
                reason: ProblemReason::RouteConflict,
                message: format!(
                    "host {} path {} is already routed by {owner}",
                    rule.host, rule.path
                ),
            });
            return;
        }
        let layer = Layer::empty(object.clone(), Scope::Ingress);
        let mut gateway = rule.features.clone();
        let (backend, base) = match &rule.backend {
            RuleBackend::Service { service, port } => {
                let Some(backend) = self.gateway_backend(&object, &rule, service, *port, &layer)
                else {
                    return;
                };
                (backend, self.route_features(service, &layer))
            }
            RuleBackend::Unresolved => (self.unresolved_backend(), None),
            RuleBackend::Split(shares) => {
                let mut first = None;
                for (target, weight) in shares {
                    let backend = match target {
                        Some((service, port)) => {
                            let backend =
                                self.gateway_backend(&object, &rule, service, *port, &layer);
                            if first.is_none()
                                && let Some(backend) = &backend
                            {
                                first = Some((backend.clone(), service.clone()));
                            }
                            backend
                        }
                        None => None,
                    };
                    gateway.split.push(Share {
                        backend,
                        weight: *weight,
                    });
                }
                match first {
                    Some((backend, service)) => (backend, self.route_features(&service, &layer)),
                    None => (self.unresolved_backend(), None),
                }
            }
        };
        // Without a backend, the rule answers 500, unless it redirects.
        let unresolved = backend == BackendName::unresolved() && gateway.redirect.is_none();
        let features = self.gateway_features(base, gateway, unresolved);
        self.add_route(
            &object,
            &rule.field,
            &rule.route,
            rule.host,
            rule.path,
            backend,
            features,
        );
        self.http_route_slots.insert(slot);
    }

    /// The backend of one Service port of a rule, built as an Ingress backend is (the
    /// Service's namespace: a ReferenceGrant allowed it when it is not the route's).
    fn gateway_backend(
        &mut self,
        object: &ObjectRef,
        rule: &RuleRoute,
        service: &ObjectKey,
        port: u16,
        layer: &Layer,
    ) -> Option<BackendName> {
        let reference = IngressBackend {
            service: Some(IngressServiceBackend {
                name: service.name.clone(),
                port: Some(ServiceBackendPort {
                    number: Some(i32::from(port)),
                    name: None,
                }),
            }),
            resource: None,
        };
        let owner = ObjectKey::new(&service.namespace, &rule.route.name);
        self.backend(object, &owner, &reference, &rule.field, layer)
    }

    /// The feature set of a rule: the Service's and the ConfigMap's (`base`), the
    /// rule's filters and split, and the 500 of a rule without a backend.
    fn gateway_features(
        &mut self,
        base: Option<FeatureSetId>,
        gateway: GatewayFeatures,
        unresolved: bool,
    ) -> Option<FeatureSetId> {
        if gateway.is_empty() && !unresolved {
            return base;
        }
        let mut features = base
            .and_then(|id| self.feature_sets.get(&id).cloned())
            .unwrap_or_default();
        if !gateway.is_empty() {
            features.gateway = Some(gateway);
        }
        if unresolved {
            features.answer_status = Some(UNRESOLVED_STATUS);
        }
        let id = FeatureSetId::of(&features);
        self.feature_sets.insert(id.clone(), features);
        Some(id)
    }

    /// The backend of rules without a usable one: no servers; its feature set answers
    /// first.
    fn unresolved_backend(&mut self) -> BackendName {
        let name = BackendName::unresolved();
        if !self.backends.contains_key(&name) {
            self.backends.insert(
                name.clone(),
                Backend {
                    service: ObjectKey::new("", ""),
                    port: ServicePortRef::Number(1),
                    endpoints: Vec::new(),
                    draining: Vec::new(),
                    external: None,
                    options: self.default_options.clone(),
                },
            );
        }
        name
    }

    /// The certificate of an HTTPS listener, served for its hosts (a host another
    /// certificate already has keeps that one).
    fn add_listener_certificate(&mut self, certificate: &ListenerCertificate) {
        let Ok(pem) = self.checked_secret(&certificate.secret, SecretUse::Certificate) else {
            return;
        };
        let name = format!(
            "{}_{}",
            certificate.secret.namespace, certificate.secret.name
        );
        let mut claimed = Vec::new();
        for host in &certificate.hosts {
            match self.certificate_of_host.get(host) {
                Some(owner) if *owner != name => self.problems.push(ObjectProblem {
                    object: ObjectRef {
                        kind: "Gateway",
                        namespace: certificate.gateway.namespace.clone(),
                        name: certificate.gateway.name.clone(),
                    },
                    field: format!("spec.listeners[{}].tls", certificate.listener),
                    reason: ProblemReason::RouteConflict,
                    message: format!("host {host} already has the certificate {owner}"),
                }),
                _ => {
                    self.certificate_of_host.insert(host.clone(), name.clone());
                    claimed.push(host.clone());
                }
            }
        }
        let entry = self
            .certificates
            .entry(name.clone())
            .or_insert_with(|| TlsCertificate {
                name,
                pem,
                hosts: Vec::new(),
            });
        entry.hosts.extend(claimed);
        entry.hosts.sort();
        entry.hosts.dedup();
    }
}
