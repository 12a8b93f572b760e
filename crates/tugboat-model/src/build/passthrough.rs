//! TLS passthrough (`ssl-passthrough`): which hosts of an Ingress pass TLS to their
//! backend undecrypted, the mode tcp backends they go to, and who gets a host two
//! Ingresses claim (the older one).
//!
//! Passthrough routes are kept apart from the HTTP routes: the TLS of a host is chosen
//! by SNI before any HTTP is read, while plain HTTP to the same host is routed by the
//! Ingress' rules as usual. A Gateway API TLSRoute can add routes the same way, on the
//! HTTPS port or on a `TLS` listener's port of `--gateway-listener-ports`: a host is
//! claimed per port (the older claimer has it there).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::annotations::{Layer, find_key, keys, prefixes, read_keys};
use crate::desired::{Backend, BackendName, HostMatch, PassthroughRoute, Route};
use crate::features::{BackendOptions, FeatureSetId, RouteFeatures};
use crate::problem::{ObjectProblem, ObjectRef, ProblemReason};
use crate::snapshot::ObjectKey;

use super::shared::Shared;

/// Where a passthrough route's SNI name is claimed: its port (`None`: the HTTPS port,
/// see [`PassthroughRoute::port`]) and host.
pub(super) type SniSlot = (Option<u16>, HostMatch);

/// The passthrough part of a build: routes by port and host, and their mode tcp
/// backends.
#[derive(Debug, Default)]
pub(super) struct Passthrough {
    /// Each route with the field that asked for it (the rule's `host`).
    by_host: BTreeMap<SniSlot, (PassthroughRoute, String)>,
    backends: BTreeMap<BackendName, Backend>,
}

/// Whether the Ingress of `layer` asks for passthrough and may have it. A key that
/// restricts access, on the Ingress or in the controller's ConfigMap, cannot be
/// enforced on TLS haproxy does not decrypt: the passthrough is then refused (a problem
/// names the key), and the hosts' TLS is terminated with the key enforced.
pub(super) fn wanted(shared: &mut Shared, layer: &Layer) -> bool {
    let Some(field) = asked(shared, layer) else {
        return false;
    };
    let restricting = restricting_key(layer, "").or_else(|| {
        let config_map = shared.config_map_layer;
        restricting_key(config_map, " in the ConfigMap")
    });
    if let Some(key) = restricting {
        shared.problems.push(ObjectProblem {
            object: layer.object.clone(),
            field,
            reason: ProblemReason::InvalidField,
            message: format!(
                "ssl-passthrough refused: key '{key}' restricts access and cannot be enforced on TLS that haproxy does not decrypt; haproxy terminates the TLS of these hosts and enforces it"
            ),
        });
        return false;
    }
    true
}

/// The field of `layer` that asks for passthrough (`ssl-passthrough: "true"` in any
/// spelling), if it does.
pub(super) fn asked(shared: &mut Shared, layer: &Layer) -> Option<String> {
    let asked = read_keys(vec![layer], &mut shared.problems, |resolver| {
        resolver.get(&keys::SSL_PASSTHROUGH)
    });
    (asked == Some(true)).then(|| {
        layer
            .field_of(&keys::SSL_PASSTHROUGH.spec)
            .unwrap_or("metadata.annotations")
            .to_string()
    })
}

/// The first key of `layer` that restricts access, as the object spells it (the
/// annotation's full name, or the ConfigMap's key), followed by `place`.
fn restricting_key(layer: &Layer, place: &str) -> Option<String> {
    layer
        .values()
        .filter(|(key, _)| prefixes::restricts_access(key))
        .find_map(|(key, _)| layer.field_of(find_key(key)?))
        .map(|field| {
            let name = field
                .strip_prefix("metadata.annotations.")
                .or_else(|| field.strip_prefix("data."))
                .unwrap_or(field);
            name.to_string()
        })
        .or_else(|| layer.unsupported_access.first().cloned())
        .map(|key| format!("{key}{place}"))
}

/// Whether a route's features restrict who may reach it.
fn restricts_access(features: &RouteFeatures) -> bool {
    features.deny_all
        || !features.allow_list.is_empty()
        || !features.deny_list.is_empty()
        || features.allow_file.is_some()
        || features.deny_file.is_some()
        || features.basic_auth.is_some()
        || features.external_auth.is_some()
        || features.rate_limit.is_some()
        || features.client_limits.is_some()
        || features.client_certificates.is_some()
}

/// The first annotation of Service `service` that restricts access, if any.
fn service_restriction(shared: &Shared, service: &ObjectKey) -> Option<String> {
    let annotations = shared
        .snapshot
        .services
        .get(service)?
        .metadata
        .annotations
        .as_ref()?;
    annotations
        .keys()
        .find(|name| {
            prefixes::split_annotation(name).is_some_and(|(_, key)| prefixes::restricts_access(key))
        })
        .cloned()
}

impl Passthrough {
    /// Passes the TLS of `host` on `port` (`None`: the HTTPS port) to the Service port
    /// of the HTTP backend `http` (`backend`, as built), for `owner`, asked by `field`.
    /// `false` (and a problem) when the host cannot have passthrough or another object
    /// has it already on that port.
    pub(super) fn add(
        &mut self,
        shared: &mut Shared,
        owner: &ObjectRef,
        field: &str,
        (port, host): (Option<u16>, &HostMatch),
        http: (&BackendName, &Backend),
    ) -> bool {
        // Subdomains: a TLSRoute's any-depth wildcard.
        if matches!(host, HostMatch::Any) {
            shared.problem(
                owner,
                format!("{field}.host"),
                "ssl-passthrough needs a host (the TLS SNI chooses the backend): this rule's TLS is terminated by haproxy".into(),
            );
            return false;
        }
        // A Service key that restricts access cannot be enforced on TLS haproxy does
        // not decrypt either.
        if let Some(key) = service_restriction(shared, &http.1.service) {
            let message = format!(
                "ssl-passthrough refused for host {host}: the Service {} sets '{key}', which restricts access and cannot be enforced on TLS that haproxy does not decrypt; haproxy terminates this host's TLS and enforces it",
                http.1.service
            );
            shared.problem(owner, format!("{field}.host"), message);
            return false;
        }
        let slot = (port, host.clone());
        if let Some((existing, _)) = self.by_host.get(&slot) {
            let holder = if existing.owner == *owner {
                "an earlier rule of this Ingress".to_string()
            } else {
                format!("the older {}", existing.owner)
            };
            let on_port = port
                .map(|port| format!(" on port {port}"))
                .unwrap_or_default();
            let message =
                format!("ssl-passthrough of host {host}{on_port} is already given to {holder}");
            shared.problems.push(ObjectProblem {
                object: owner.clone(),
                field: format!("{field}.host"),
                reason: ProblemReason::RouteConflict,
                message,
            });
            return false;
        }
        let name = http.0.passthrough();
        self.backends
            .entry(name.clone())
            .or_insert_with(|| Backend {
                options: Arc::new(BackendOptions {
                    tls_passthrough: true,
                    ..BackendOptions::default()
                }),
                ..http.1.clone()
            });
        let route = PassthroughRoute {
            host: host.clone(),
            backend: name,
            owner: owner.clone(),
            port,
        };
        self.by_host.insert(slot, (route, format!("{field}.host")));
        true
    }

    /// The object that has the passthrough of `slot`.
    pub(super) fn owner_of(&self, slot: &SniSlot) -> Option<&ObjectRef> {
        self.by_host.get(slot).map(|(route, _)| &route.owner)
    }

    /// Takes the passthrough of `slot` from its owner (for an older claimer), and its
    /// backend when no other host uses it.
    pub(super) fn release(&mut self, slot: &SniSlot) {
        if let Some((route, _)) = self.by_host.remove(slot)
            && !self
                .by_host
                .values()
                .any(|(other, _)| other.backend == route.backend)
        {
            self.backends.remove(&route.backend);
        }
    }

    /// Refuses the passthrough of each host of the HTTPS port whose HTTP routes (of any
    /// Ingress or HTTPRoute) restrict access: TLS passthrough would bypass them (a port
    /// of its own terminates no TLS, so no HTTP route is bypassed there). A problem on the
    /// passthrough's owner names the route's owner; haproxy terminates the host's TLS.
    /// Returns the refused routes. Once every route is in, so that a TLSRoute's status
    /// can say what it lost; a second call finds nothing more to refuse.
    pub(super) fn refuse_bypassed<'r, 'f>(
        &mut self,
        shared: &mut Shared,
        routes: impl Iterator<Item = &'r Route>,
        features_of: impl Fn(&FeatureSetId) -> Option<&'f RouteFeatures>,
    ) -> Vec<PassthroughRoute> {
        let restricted: BTreeMap<&HostMatch, &Route> = routes
            .filter(|route| self.by_host.contains_key(&(None, route.host.clone())))
            .filter(|route| {
                route
                    .features
                    .as_ref()
                    .and_then(&features_of)
                    .is_some_and(restricts_access)
            })
            .map(|route| (&route.host, route))
            .collect();
        let mut refused_routes = Vec::new();
        for (host, route) in restricted {
            let Some((refused, field)) = self.by_host.remove(&(None, host.clone())) else {
                continue;
            };
            refused_routes.push(refused.clone());
            shared.problems.push(ObjectProblem {
                object: refused.owner,
                field,
                reason: ProblemReason::InvalidField,
                message: format!(
                    "ssl-passthrough refused for host {host}: the route of path {} (Ingress {}) restricts access, which TLS passthrough would bypass; haproxy terminates this host's TLS",
                    route.path, route.ingress
                ),
            });
        }
        let used: std::collections::BTreeSet<&BackendName> = self
            .by_host
            .values()
            .map(|(route, _)| &route.backend)
            .collect();
        self.backends.retain(|name, _| used.contains(name));
        refused_routes
    }

    /// The routes, sorted by port (the HTTPS port's first) then host, and their backends.
    pub(super) fn into_parts(self) -> (Vec<PassthroughRoute>, BTreeMap<BackendName, Backend>) {
        let routes = self.by_host.into_values().map(|(route, _)| route);
        (routes.collect(), self.backends)
    }
}
