//! The output of an incremental update when only endpoints, certificates and the routes
//! of some Ingresses changed: what changed, and how to apply it to the state it was
//! computed against (see [`crate::incremental`], which makes it).

use std::collections::BTreeMap;

use crate::BuildOutput;
use crate::desired::{Backend, BackendName, Desired, Endpoint, HostMatch, PathMatch, Route};
use crate::problem::ObjectProblem;
use crate::snapshot::ObjectKey;
use crate::tls::Pem;

/// What changed in the output, when it is only endpoints, certificates and the routes
/// of some Ingresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Patch {
    /// The ready and draining endpoints of backends whose EndpointSlices changed (maybe
    /// the same as before).
    pub endpoints: BTreeMap<BackendName, (Vec<Endpoint>, Vec<Endpoint>)>,
    /// The new PEM of certificates, by certificate name.
    pub certificates: BTreeMap<String, Pem>,
    /// The routes of Ingresses that changed, by Ingress.
    pub routes: BTreeMap<ObjectKey, IngressRoutes>,
    /// Backends that join the output (`Some`) or leave it (`None`) as Ingresses start
    /// or stop using them.
    pub backends: BTreeMap<BackendName, Option<Backend>>,
    /// Every problem of the output, when they changed.
    pub problems: Option<Vec<ObjectProblem>>,
}

impl Patch {
    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
            && self.certificates.is_empty()
            && self.routes.is_empty()
            && self.backends.is_empty()
            && self.problems.is_none()
    }

    /// Applies the patch to the state it was computed against.
    pub fn apply_to(&self, desired: &mut Desired) {
        for (name, backend) in &self.backends {
            match backend {
                Some(backend) => desired.backends.insert(name.clone(), backend.clone()),
                None => desired.backends.remove(name),
            };
        }
        for (name, (ready, draining)) in &self.endpoints {
            if let Some(backend) = desired.backends.get_mut(name) {
                backend.endpoints.clone_from(ready);
                backend.draining.clone_from(draining);
            }
        }
        for (name, pem) in &self.certificates {
            if let Some(certificate) = desired.certificates.get_mut(name) {
                certificate.pem = pem.clone();
            }
        }
        replace_routes(&mut desired.routes, &self.routes);
    }

    /// Applies the patch to the output it was computed against (problems too).
    pub fn apply_to_output(&self, output: &mut BuildOutput) {
        self.apply_to(&mut output.desired);
        if let Some(problems) = &self.problems {
            output.problems.clone_from(problems);
        }
    }
}

/// The routes of one Ingress before and after a change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngressRoutes {
    /// Where its routes were: (host, path).
    pub before: Vec<(HostMatch, PathMatch)>,
    /// Its routes now (none: it has none), sorted by host and path.
    pub after: Vec<Route>,
}

/// Replaces the routes of the Ingresses in `by_ingress` in `routes` (sorted by host
/// and path, one route per key), keeping the order: a binary search per route. A key
/// an Ingress keeps is overwritten where it is: removed and inserted again, the routes
/// after it would move twice (and an insert moves them backward, which musl's
/// `memmove` does a byte at a time).
pub fn replace_routes(routes: &mut Vec<Route>, by_ingress: &BTreeMap<ObjectKey, IngressRoutes>) {
    let find = |routes: &[Route], host: &HostMatch, path: &PathMatch| {
        routes.binary_search_by(|r| (&r.host, &r.path).cmp(&(host, path)))
    };
    for (ingress, change) in by_ingress {
        for (host, path) in &change.before {
            let kept = change
                .after
                .iter()
                .any(|route| route.host == *host && route.path == *path);
            if !kept
                && let Ok(at) = find(routes, host, path)
                && routes[at].ingress == *ingress
            {
                routes.remove(at);
            }
        }
    }
    for route in by_ingress.values().flat_map(|change| &change.after) {
        match find(routes, &route.host, &route.path) {
            Ok(at) => routes[at] = route.clone(),
            Err(at) => routes.insert(at, route.clone()),
        }
    }
}
