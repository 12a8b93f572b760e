//! The routes of a build: each host and path goes to its first claimant (Ingresses oldest
//! first, then HTTPRoutes), and unmatched requests to the `spec.defaultBackend` of the
//! oldest Ingress that has a usable one. Also the host and path of an Ingress rule, read
//! with Kubernetes' rules.

use std::collections::BTreeMap;

use crate::desired::{BackendName, HostMatch, PathMatch, Route, RouteOwnerKind};
use crate::features::FeatureSetId;
use crate::problem::{ObjectProblem, ObjectRef, ProblemReason};
use crate::snapshot::ObjectKey;
use crate::validate;

use super::shared::Shared;

/// A route's host and path: the first to claim one gets it.
pub(super) type Slot = (HostMatch, PathMatch);

/// The routes part of a build.
#[derive(Debug, Default)]
pub(super) struct Routes {
    by_slot: BTreeMap<Slot, Route>,
    /// The default backend and the Ingress it comes from.
    default_backend: Option<(BackendName, ObjectKey)>,
}

/// A route of `ingress` (or HTTPRoute) without a canary.
pub(super) fn new_route(
    ingress: &ObjectKey,
    owner_kind: RouteOwnerKind,
    (host, path): Slot,
    backend: BackendName,
    features: Option<FeatureSetId>,
) -> Route {
    Route {
        host,
        path,
        backend,
        ingress: ingress.clone(),
        owner_kind,
        features,
        canary: None,
    }
}

impl Routes {
    /// Adds `route`, which `field` of `object` asks for; `false` (and a problem) when its
    /// host and path are taken.
    pub(super) fn add(
        &mut self,
        shared: &mut Shared,
        object: &ObjectRef,
        field: &str,
        route: Route,
    ) -> bool {
        let slot = (route.host.clone(), route.path.clone());
        if let Some(existing) = self.by_slot.get(&slot) {
            shared.reads.contested_routes.insert(slot);
            let owner = if existing.ingress == route.ingress {
                "an earlier rule of this Ingress".to_string()
            } else {
                format!("the older Ingress {}", existing.ingress)
            };
            let message = format!(
                "host {} path {} is already routed by {owner}",
                route.host, route.path
            );
            shared.problems.push(ObjectProblem {
                object: object.clone(),
                field: field.to_string(),
                reason: ProblemReason::RouteConflict,
                message,
            });
            return false;
        }
        self.by_slot.insert(slot, route);
        true
    }

    pub(super) fn get(&self, slot: &Slot) -> Option<&Route> {
        self.by_slot.get(slot)
    }

    pub(super) fn get_mut(&mut self, slot: &Slot) -> Option<&mut Route> {
        self.by_slot.get_mut(slot)
    }

    /// Every route, sorted by host and path.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Route> {
        self.by_slot.values()
    }

    /// The host and path of each route of one host (a range of the routes, which are
    /// sorted by host first: `Exact("")` is the least path).
    pub(super) fn of_host(&self, host: &HostMatch) -> Vec<&Slot> {
        self.by_slot
            .range((host.clone(), PathMatch::Exact(String::new()))..)
            .map(|(slot, _)| slot)
            .take_while(|(other, _)| other == host)
            .collect()
    }

    /// `backend` of the Ingress `owner` is the default backend unless an older Ingress
    /// gave one.
    pub(super) fn offer_default_backend(&mut self, backend: BackendName, owner: &ObjectKey) {
        self.default_backend
            .get_or_insert_with(|| (backend, owner.clone()));
    }

    /// The routes, sorted by host and path, and the default backend with its Ingress.
    pub(super) fn into_parts(self) -> (Vec<Route>, Option<(BackendName, ObjectKey)>) {
        (self.by_slot.into_values().collect(), self.default_backend)
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

/// The host of an Ingress rule (`field` of `object`); `None`, with a problem, when it is
/// not a valid host.
pub(super) fn rule_host(
    shared: &mut Shared,
    object: &ObjectRef,
    field: &str,
    host: Option<&str>,
) -> Option<HostMatch> {
    match host {
        None | Some("") => Some(HostMatch::Any),
        Some(host) => match validate::ingress_host(host) {
            Ok(host) => Some(ingress_host_match(&host)),
            Err(err) => {
                shared.problem(object, format!("{field}.host"), err.0);
                None
            }
        },
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
