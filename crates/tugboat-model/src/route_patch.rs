//! Ingress changes as patches of the last output.
//!
//! An Ingress is built alone before and after its change (`build_ingress_alone`). The
//! change is a patch of its routes, of the backends it starts or stops using and of the
//! problems when nothing else it adds to a build moves: the same certificates, TLS
//! hosts, route features, userlists, files and default backend; no TLS passthrough
//! before or after, nor a route of a passthrough host; the same problems on other
//! objects; backends with the options they have already; route keys no other Ingress
//! claims or claimed; and, for a backend whose options it set and leaves, the same
//! options from the next user. Anything else is a full build, which is always right.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use crate::objects::Ingress;

use crate::build::{
    BackendUse, IngressAlone, ParsedSecrets, Reads, build_ingress_alone, ingress_order,
};
use crate::desired::{BackendName, HostMatch, PathMatch, ServicePortRef};
use crate::features::BackendOptions;
use crate::patch::{IngressRoutes, Patch};
use crate::problem::{ObjectProblem, ProblemReason};
use crate::references::backend_services;
use crate::snapshot::{ObjectKey, Snapshot, diff_key, diff_values};
use crate::{BuildOutput, Settings};

/// At most this many Ingresses changed at once are worked out one by one; more make a
/// full build, which is then cheaper.
const MOST_INGRESSES_PATCHED: usize = 32;

/// Why an Ingress change needs a full build: the condition that failed, named where it
/// is checked (the caller only learns that one did).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NeedsBuild(pub &'static str);

/// What Ingress changes are checked against: the parts of the last output they touch.
#[derive(Debug, Default)]
pub(crate) struct RoutesSeen {
    /// The Ingress each route key belongs to.
    owner: HashMap<(HostMatch, PathMatch), ObjectKey>,
    /// The backends: their options and who uses them.
    backends: HashMap<BackendName, SeenBackend>,
    /// Every problem, sorted.
    problems: Vec<ObjectProblem>,
    /// The route keys more than one rule claimed.
    contested: HashSet<(HostMatch, PathMatch)>,
    /// The hosts whose TLS passes through: whether they may is decided by every route
    /// of the host.
    passthrough_hosts: HashSet<HostMatch>,
}

#[derive(Debug)]
struct SeenBackend {
    options: Arc<BackendOptions>,
    usage: BackendUse,
}

impl RoutesSeen {
    /// The parts of `output` Ingress changes touch, with what the build read of who
    /// uses each backend and which route keys are contested (taken out of `reads`).
    pub fn of(output: &BuildOutput, reads: &mut Reads) -> Self {
        let mut backend_use = std::mem::take(&mut reads.backend_use);
        Self {
            contested: std::mem::take(&mut reads.contested_routes),
            owner: output
                .desired
                .routes
                .iter()
                .map(|r| ((r.host.clone(), r.path.clone()), r.ingress.clone()))
                .collect(),
            backends: output
                .desired
                .backends
                .iter()
                .map(|(name, backend)| {
                    let usage = backend_use.remove(name).unwrap_or_default();
                    let options = backend.options.clone();
                    (name.clone(), SeenBackend { options, usage })
                })
                .collect(),
            problems: output.problems.clone(),
            passthrough_hosts: output
                .desired
                .passthrough
                .iter()
                .map(|route| route.host.clone())
                .collect(),
        }
    }
}

/// The snapshots before and after an update whose Ingresses changed (Services,
/// ConfigMaps, Secrets and the flags did not).
pub(crate) struct RouteChanges<'a> {
    pub before: &'a Snapshot,
    pub settings_before: &'a Settings,
    pub after: &'a Snapshot,
    pub settings: &'a Settings,
    /// The EndpointSlices of each Service.
    pub slices_of_service: &'a HashMap<ObjectKey, Vec<ObjectKey>>,
}

fn is_of(problem: &ObjectProblem, ingress: &ObjectKey) -> bool {
    problem.object.kind == "Ingress"
        && problem.object.namespace == ingress.namespace
        && problem.object.name == ingress.name
}

impl RouteChanges<'_> {
    /// Adds the route changes of every changed Ingress to `patch`, and brings `reads`
    /// and `seen` up to date; `Err` when one of them needs a full build.
    pub fn patch(
        &self,
        parsed: &mut ParsedSecrets,
        reads: &mut Reads,
        seen: &mut RoutesSeen,
        backends_of_service: &mut HashMap<ObjectKey, Vec<(BackendName, ServicePortRef)>>,
        patch: &mut Patch,
    ) -> Result<(), NeedsBuild> {
        let items: Vec<_> = self
            .before
            .ingresses
            .diff(&self.after.ingresses)
            .take(MOST_INGRESSES_PATCHED + 1)
            .collect();
        if items.len() > MOST_INGRESSES_PATCHED {
            return Err(NeedsBuild("many Ingresses changed"));
        }
        let mut problems_changed = false;
        for item in &items {
            let key = diff_key(item);
            let (old, new) = diff_values(item);
            if let (Some(old), Some(new)) = (old, new)
                && old.metadata.creation_timestamp != new.metadata.creation_timestamp
            {
                return Err(NeedsBuild("creation time changed"));
            }
            let before = old
                .map(|ingress| self.alone(self.before, self.settings_before, parsed, key, ingress))
                .unwrap_or_default();
            let after = new
                .map(|ingress| self.alone(self.after, self.settings, parsed, key, ingress))
                .unwrap_or_default();
            self.check(key, &before, &after, seen)?;
            // The change holds: take it in.
            self.move_backends(
                parsed,
                key,
                new,
                &before,
                &after,
                seen,
                backends_of_service,
                patch,
            )?;
            for route in &before.routes {
                seen.owner.remove(&(route.host.clone(), route.path.clone()));
            }
            for route in &after.routes {
                seen.owner
                    .insert((route.host.clone(), route.path.clone()), key.clone());
            }
            let own = |alone: &IngressAlone| -> Vec<ObjectProblem> {
                let problems = alone.problems.iter().filter(|p| is_of(p, key));
                problems.cloned().collect()
            };
            if own(&before) != own(&after) {
                seen.problems.retain(|problem| !is_of(problem, key));
                seen.problems.extend(own(&after));
                seen.problems.sort();
                seen.problems.dedup();
                problems_changed = true;
            }
            seen.contested
                .extend(after.reads.contested_routes.iter().cloned());
            reads.absorb(after.reads);
            let before = before
                .routes
                .iter()
                .map(|route| (route.host.clone(), route.path.clone()))
                .collect();
            let routes = IngressRoutes {
                before,
                after: after.routes,
            };
            patch.routes.insert(key.clone(), routes);
        }
        if problems_changed {
            patch.problems = Some(seen.problems.clone());
        }
        Ok(())
    }

    /// One Ingress built alone, with the EndpointSlices of the Services it names.
    fn alone<'s>(
        &self,
        snapshot: &'s Snapshot,
        settings: &'s Settings,
        parsed: &'s mut ParsedSecrets,
        key: &ObjectKey,
        ingress: &Ingress,
    ) -> IngressAlone {
        let services: BTreeSet<ObjectKey> = backend_services(ingress)
            .map(|name| ObjectKey::new(&key.namespace, name))
            .collect();
        let slices = services
            .into_iter()
            .map(|service| {
                let slices = self
                    .slices_of_service
                    .get(&service)
                    .into_iter()
                    .flatten()
                    .filter_map(|slice| snapshot.endpoint_slices.get(slice))
                    .map(Arc::as_ref)
                    .collect();
                (service, slices)
            })
            .collect();
        build_ingress_alone(snapshot, settings, parsed, slices, key, ingress)
    }

    /// Whether the change of Ingress `key` from `before` to `after` is a patch of its
    /// routes (see the module); takes in the backends whose options it now sets.
    fn check(
        &self,
        key: &ObjectKey,
        before: &IngressAlone,
        after: &IngressAlone,
        seen: &RoutesSeen,
    ) -> Result<(), NeedsBuild> {
        if before.canary || after.canary {
            return Err(NeedsBuild("a canary Ingress"));
        }
        // Who gets a passthrough host depends on the other Ingresses: built whole (a
        // host added for a backend that has passthrough is still only a map update).
        if !before.passthrough.is_empty() || !after.passthrough.is_empty() {
            return Err(NeedsBuild("TLS passthrough"));
        }
        if before.default_backend != after.default_backend {
            return Err(NeedsBuild("default backend"));
        }
        if before.certificates != after.certificates
            || before.tls_hosts != after.tls_hosts
            || before.client_ca_hosts != after.client_ca_hosts
            || before.client_ca_files != after.client_ca_files
        {
            return Err(NeedsBuild("TLS"));
        }
        if before.feature_sets != after.feature_sets
            || before.userlists != after.userlists
            || before.backend_files != after.backend_files
            || before.pattern_files != after.pattern_files
        {
            return Err(NeedsBuild("route features"));
        }
        let others = |alone: &IngressAlone| -> Vec<ObjectProblem> {
            alone
                .problems
                .iter()
                .filter(|p| !is_of(p, key))
                .cloned()
                .collect()
        };
        if others(before) != others(after) {
            return Err(NeedsBuild("problems of other objects"));
        }
        // Claims it lost or shares: who gets a key then depends on other Ingresses.
        if seen
            .problems
            .iter()
            .any(|p| is_of(p, key) && p.reason == ProblemReason::RouteConflict)
        {
            return Err(NeedsBuild("a conflict"));
        }
        for route in before.routes.iter().chain(&after.routes) {
            if seen.passthrough_hosts.contains(&route.host) {
                return Err(NeedsBuild("a route of a TLS passthrough host"));
            }
            let slot = (route.host.clone(), route.path.clone());
            if seen.contested.contains(&slot) {
                return Err(NeedsBuild("a contested route"));
            }
            if seen.owner.get(&slot).is_some_and(|owner| owner != key)
                && after.routes.contains(route)
            {
                return Err(NeedsBuild("a route of another Ingress"));
            }
        }
        for (name, backend) in &after.backends {
            if let Some(known) = seen.backends.get(name)
                && *known.options != *backend.options
            {
                return Err(NeedsBuild("other backend options"));
            }
        }
        Ok(())
    }

    /// Takes in the backends Ingress `key` starts and stops using: one nothing uses any
    /// more leaves the output, one new to it joins. `Err` when the options of a backend
    /// would change: when it leaves one whose options it set, and the next user (or the
    /// default) would set others.
    #[allow(clippy::too_many_arguments)]
    fn move_backends(
        &self,
        parsed: &mut ParsedSecrets,
        key: &ObjectKey,
        new: Option<&Ingress>,
        before: &IngressAlone,
        after: &IngressAlone,
        seen: &mut RoutesSeen,
        backends_of_service: &mut HashMap<ObjectKey, Vec<(BackendName, ServicePortRef)>>,
        patch: &mut Patch,
    ) -> Result<(), NeedsBuild> {
        for (name, backend) in &before.backends {
            if after.backends.contains_key(name) {
                continue;
            }
            let known = seen
                .backends
                .get_mut(name)
                .ok_or(NeedsBuild("an unknown backend"))?;
            let was_owner = known.usage.ingresses.first() == Some(key);
            known.usage.ingresses.retain(|user| user != key);
            if !was_owner {
                continue;
            }
            // The next user sets the options now, or the defaults apply.
            let next_options = match known.usage.ingresses.first() {
                Some(next) => {
                    let ingress = self
                        .after
                        .ingresses
                        .get(next)
                        .ok_or(NeedsBuild("a backend user is gone"))?;
                    let alone = self.alone(self.after, self.settings, parsed, next, ingress);
                    let options = alone.backends.get(name).map(|b| b.options.clone());
                    options.ok_or(NeedsBuild("a backend user does not use it"))?
                }
                None if known.usage.flag => Arc::default(),
                None => {
                    seen.backends.remove(name);
                    if let Some(list) = backends_of_service.get_mut(&backend.service) {
                        list.retain(|(known, _)| known != name);
                    }
                    patch.backends.insert(name.clone(), None);
                    continue;
                }
            };
            if *next_options != *known.options {
                return Err(NeedsBuild("the options of a backend it leaves"));
            }
        }
        let Some(new) = new else {
            return Ok(());
        };
        for (name, backend) in &after.backends {
            if before.backends.contains_key(name) {
                continue;
            }
            let Some(known) = seen.backends.get_mut(name) else {
                let usage = BackendUse {
                    ingresses: vec![key.clone()],
                    flag: false,
                };
                let options = backend.options.clone();
                seen.backends
                    .insert(name.clone(), SeenBackend { options, usage });
                backends_of_service
                    .entry(backend.service.clone())
                    .or_default()
                    .push((name.clone(), backend.port.clone()));
                patch.backends.insert(name.clone(), Some(backend.clone()));
                continue;
            };
            // Its place among the users, in build order.
            let mut at = 0;
            for user in &known.usage.ingresses {
                let ingress = self
                    .after
                    .ingresses
                    .get(user)
                    .ok_or(NeedsBuild("a backend user is gone"))?;
                if ingress_order(user, ingress) > ingress_order(key, new) {
                    break;
                }
                at += 1;
            }
            known.usage.ingresses.insert(at, key.clone());
        }
        Ok(())
    }
}
