//! The planner: from what haproxy runs and what is desired, the files to write and either
//! the runtime changes that get haproxy there or a reload.
//!
//! Pure. The reload decision is made on the rendered config itself: with every `server`
//! line left out (addresses and states are runtime-able), the old and new configs must be
//! identical for a runtime update; anything else that differs (a backend, a frontend,
//! a global setting) reloads. Maps and server slots are diffed into runtime changes.
//! Because the decision looks at the rendered text, a new kind of setting can never be
//! forgotten by the planner: it reloads until someone teaches it a runtime path.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use tugboat_model::{BackendName, Desired, FeatureSetId, RouteFeatures};

use crate::layout::Layout;
use crate::render::{RenderSettings, RenderedFiles, render, server_options};
use crate::runtime::{
    MAX_CERTIFICATE, RuntimeChange, certificate_changes, is_slot_line, map_changes,
};

/// What haproxy is known to run: the state, its server slots and its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub desired: Desired,
    pub layout: Layout,
    pub files: RenderedFiles,
}

/// Why a plan reloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadReason {
    /// Nothing is known of what haproxy runs (start-up, after an error).
    UnknownState,
    /// The config changed beyond server addresses and states.
    Structure,
}

impl ReloadReason {
    pub fn as_str(self) -> &'static str {
        match self {
            ReloadReason::UnknownState => "unknown-state",
            ReloadReason::Structure => "structure",
        }
    }
}

/// What to do to get from the applied state to the desired one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The state after the plan, to remember once it is carried out.
    pub next: Applied,
    /// Files whose contents change.
    pub changed: Vec<PathBuf>,
    /// Files that are no longer needed.
    pub removed: Vec<PathBuf>,
    /// Changes to send at runtime (empty when reloading).
    pub runtime: Vec<RuntimeChange>,
    /// `Some` when haproxy must reload.
    pub reload: Option<ReloadReason>,
}

impl Plan {
    /// True when nothing is to be done.
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty()
            && self.removed.is_empty()
            && self.runtime.is_empty()
            && self.reload.is_none()
    }
}

/// Plans the change from `applied` (`None`: unknown) to `desired`.
pub fn plan(applied: Option<&Applied>, desired: Desired, settings: &RenderSettings) -> Plan {
    let Some(applied) = applied else {
        return reload_plan(None, desired, settings, ReloadReason::UnknownState);
    };
    let desired = keep_unrouted_backends(applied, desired);
    let (layout, slot_changes) = applied.layout.evolve(&desired);
    let files = render(&desired, &layout, settings);
    let config = settings.config_file();
    if !same_structure(files.get(&config), applied.files.get(&config)) {
        return reload_plan(Some(applied), desired, settings, ReloadReason::Structure);
    }
    // Files with no runtime path (error pages) reload when they change.
    let maps = settings.maps();
    let runtime_file = |path: &PathBuf| {
        *path == config
            || maps.contains(path)
            || *path == settings.crt_list()
            || settings.is_certificate(path)
    };
    let changed = changed_files(&applied.files, &files);
    let removed = removed_files(&applied.files, &files);
    if changed.iter().chain(&removed).any(|p| !runtime_file(p)) {
        return reload_plan(Some(applied), desired, settings, ReloadReason::Structure);
    }
    // Hash-based balancing refuses servers added at runtime: those need a reload.
    let refuses_added_servers = slot_changes.iter().any(|(backend, changes)| {
        changes.iter().any(|c| c.added)
            && desired
                .backends
                .get(backend)
                .is_some_and(|b| !b.options.allows_dynamic_servers())
    });
    if refuses_added_servers {
        return reload_plan(Some(applied), desired, settings, ReloadReason::Structure);
    }
    let mut runtime: Vec<RuntimeChange> = Vec::new();
    for (backend, changes) in slot_changes {
        let options = desired.backends.get(&backend).map(|b| &b.options);
        let server_options = options
            .map(|o| server_options(o, settings))
            .unwrap_or_default();
        let cookie = options.is_some_and(|o| o.cookie.is_some());
        let check = options.is_some_and(|o| o.health_check.is_some());
        for change in changes {
            runtime.push(RuntimeChange::Server {
                backend: backend.clone(),
                change,
                server_options: server_options.clone(),
                cookie,
                check,
            });
        }
    }
    let certificates = |files: &RenderedFiles| -> BTreeMap<PathBuf, String> {
        files
            .files
            .iter()
            .filter(|(path, _)| settings.is_certificate(path))
            .map(|(path, pem)| (path.clone(), pem.clone()))
            .collect()
    };
    let (old_certs, new_certs) = (certificates(&applied.files), certificates(&files));
    if new_certs.values().any(|pem| pem.len() > MAX_CERTIFICATE) {
        // Too large for one runtime command: haproxy loads it from the file.
        return reload_plan(Some(applied), desired, settings, ReloadReason::Structure);
    }
    let list = settings.crt_list();
    runtime.extend(certificate_changes(
        &list,
        &old_certs
            .iter()
            .map(|(p, c)| (p.as_path(), c.as_str()))
            .collect(),
        &new_certs
            .iter()
            .map(|(p, c)| (p.as_path(), c.as_str()))
            .collect(),
        applied.files.get(&list).unwrap_or(""),
        files.get(&list).unwrap_or(""),
    ));
    for map in maps {
        let old = applied.files.get(&map).unwrap_or("");
        let new = files.get(&map).unwrap_or("");
        if old != new {
            runtime.extend(map_changes(&map, old, new));
        }
    }
    Plan {
        next: Applied {
            desired,
            layout,
            files,
        },
        changed,
        removed,
        runtime,
        reload: None,
    }
}

/// Backends that no route uses any more stay (with their last servers) until the next
/// reload: removing them would cost a reload for nothing, since no request reaches them.
fn keep_unrouted_backends(applied: &Applied, mut desired: Desired) -> Desired {
    let routed: BTreeSet<&BackendName> = desired
        .routes
        .iter()
        .map(|r| &r.backend)
        .chain(&desired.default_backend)
        .collect();
    let unrouted: Vec<(&BackendName, &tugboat_model::Backend)> = applied
        .desired
        .backends
        .iter()
        .filter(|(name, _)| !routed.contains(name) && !desired.backends.contains_key(*name))
        .collect();
    for (name, backend) in unrouted {
        desired.backends.insert(name.clone(), backend.clone());
        keep_backend_files(applied, &mut desired, backend);
    }
    // Feature sets too, with their userlists: their rules match no request.
    let used: BTreeSet<&FeatureSetId> = desired
        .routes
        .iter()
        .filter_map(|r| r.features.as_ref())
        .collect();
    let unused: Vec<(&FeatureSetId, &RouteFeatures)> = applied
        .desired
        .feature_sets
        .iter()
        .filter(|(id, _)| !used.contains(id) && !desired.feature_sets.contains_key(*id))
        .collect();
    for (id, features) in unused {
        desired.feature_sets.insert(id.clone(), features.clone());
        for file in features.allow_file.iter().chain(&features.deny_file) {
            if let Some(contents) = applied.desired.pattern_files.get(file) {
                desired
                    .pattern_files
                    .entry(file.clone())
                    .or_insert_with(|| contents.clone());
            }
        }
        if let Some(auth) = &features.basic_auth
            && !desired.userlists.contains_key(&auth.userlist)
            && let Some(users) = applied.desired.userlists.get(&auth.userlist)
        {
            desired
                .userlists
                .insert(auth.userlist.clone(), users.clone());
        }
    }
    desired
}

/// The TLS files a backend kept from the applied state refers to.
fn keep_backend_files(applied: &Applied, desired: &mut Desired, backend: &tugboat_model::Backend) {
    let Some(tls) = &backend.options.tls else {
        return;
    };
    for file in tls.ca_file.iter().chain(&tls.client_certificate) {
        if let Some(pem) = applied.desired.backend_files.get(file) {
            desired
                .backend_files
                .entry(file.clone())
                .or_insert_with(|| pem.clone());
        }
    }
}

fn reload_plan(
    applied: Option<&Applied>,
    desired: Desired,
    settings: &RenderSettings,
    reason: ReloadReason,
) -> Plan {
    let layout = Layout::fresh(&desired);
    let files = render(&desired, &layout, settings);
    let (changed, removed) = match applied {
        Some(applied) => (
            changed_files(&applied.files, &files),
            removed_files(&applied.files, &files),
        ),
        None => (files.files.keys().cloned().collect(), Vec::new()),
    };
    Plan {
        next: Applied {
            desired,
            layout,
            files,
        },
        changed,
        removed,
        runtime: Vec::new(),
        reload: Some(reason),
    }
}

fn removed_files(old: &RenderedFiles, new: &RenderedFiles) -> Vec<PathBuf> {
    old.files
        .keys()
        .filter(|path| !new.files.contains_key(*path))
        .cloned()
        .collect()
}

fn changed_files(old: &RenderedFiles, new: &RenderedFiles) -> Vec<PathBuf> {
    new.files
        .iter()
        .filter(|(path, contents)| old.get(path) != Some(contents.as_str()))
        .map(|(path, _)| path.clone())
        .collect()
}

/// Whether two configs are the same once their slot `server` lines (what runtime
/// commands change) are left out. Compares line by line, without copying the configs.
fn same_structure(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a
            .lines()
            .filter(|line| !is_slot_line(line))
            .eq(b.lines().filter(|line| !is_slot_line(line))),
        (None, None) => true,
        _ => false,
    }
}

/// The part of `desired` that can be applied at runtime on top of `applied`: the
/// endpoints and routes of the backends haproxy already has. New backends (and the routes
/// to them) wait for the next reload, a route moving to a new backend keeps its old one
/// until then, and backends that are gone stay.
pub fn runtime_projection(applied: &Desired, desired: &Desired) -> Desired {
    let backends = applied
        .backends
        .iter()
        .map(|(name, backend)| {
            // New endpoints now, new options at the reload.
            let mut next = desired.backends.get(name).unwrap_or(backend).clone();
            next.options = backend.options.clone();
            (name.clone(), next)
        })
        .collect();
    let known: BTreeSet<&BackendName> = applied.backends.keys().collect();
    // A route that moves to a new backend keeps its old one until the reload.
    // So does a route that moves to a feature set haproxy does not have yet.
    let known_features = |route: &tugboat_model::Route| {
        route
            .features
            .as_ref()
            .is_none_or(|id| applied.feature_sets.get(id) == desired.feature_sets.get(id))
    };
    // By host and path; the first route of a pair wins, as haproxy's maps do.
    let applied_routes: BTreeMap<_, _> = applied
        .routes
        .iter()
        .rev()
        .map(|route| ((&route.host, &route.path), route))
        .collect();
    let routes = desired
        .routes
        .iter()
        .filter_map(|route| {
            if known.contains(&route.backend) && known_features(route) {
                return Some(route.clone());
            }
            applied_routes
                .get(&(&route.host, &route.path))
                .map(|old| (*old).clone())
        })
        .collect();
    Desired {
        backends,
        routes,
        default_backend: applied.default_backend.clone(),
        default_backend_owner: applied.default_backend_owner.clone(),
        error_pages: applied.error_pages.clone(),
        ssl_redirect: applied.ssl_redirect,
        feature_sets: applied.feature_sets.clone(),
        userlists: applied.userlists.clone(),
        global: applied.global.clone(),
        backend_files: applied.backend_files.clone(),
        pattern_files: applied.pattern_files.clone(),
        ..desired.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use tugboat_model::desired::ServicePortRef;
    use tugboat_model::{Backend, Endpoint, HostMatch, ObjectKey, PathMatch, Route};

    use super::*;

    fn settings() -> RenderSettings {
        RenderSettings::example()
    }

    fn backend(service: &str, endpoints: &[u8]) -> (BackendName, Backend) {
        let key = ObjectKey::new("ns", service);
        let port = ServicePortRef::Number(80);
        let name = BackendName::for_service_port(&key, &port).expect("name");
        let endpoints = endpoints
            .iter()
            .map(|last| Endpoint {
                address: Ipv4Addr::new(10, 0, 0, *last).into(),
                port: 8080,
            })
            .collect();
        (
            name,
            Backend {
                service: key,
                port,
                endpoints,
                draining: Vec::new(),
                external: None,
                options: Default::default(),
            },
        )
    }

    fn route(host: &str, backend: &BackendName) -> Route {
        Route {
            host: HostMatch::Exact(host.into()),
            path: PathMatch::Prefix("/".into()),
            backend: backend.clone(),
            ingress: ObjectKey::new("ns", "ing"),
            features: None,
        }
    }

    fn state(backends: &[(&str, &[u8])], hosts: &[(&str, &str)]) -> Desired {
        let backends: Vec<(BackendName, Backend)> =
            backends.iter().map(|(s, e)| backend(s, e)).collect();
        let routes = hosts
            .iter()
            .map(|(host, service)| {
                let (name, _) = backend(service, &[]);
                route(host, &name)
            })
            .collect();
        Desired {
            backends: backends.into_iter().collect(),
            routes,
            ..Desired::default()
        }
    }

    fn applied(desired: Desired) -> Applied {
        plan(None, desired, &settings()).next
    }

    #[test]
    fn first_plan_reloads_with_every_file() {
        let plan = plan(None, state(&[("web", &[1])], &[]), &settings());
        assert_eq!(plan.reload, Some(ReloadReason::UnknownState));
        assert_eq!(plan.changed.len(), 6);
    }

    #[test]
    fn endpoint_changes_are_runtime_only() {
        let before = applied(state(&[("web", &[1, 2])], &[("a.com", "web")]));
        let plan = plan(
            Some(&before),
            state(&[("web", &[2, 3])], &[("a.com", "web")]),
            &settings(),
        );
        assert_eq!(plan.reload, None);
        assert_eq!(plan.changed, vec![settings().config_file()]);
        // Slot of 1 parked, 3 into a free slot.
        assert_eq!(plan.runtime.len(), 2, "{:?}", plan.runtime);
        assert!(
            plan.runtime
                .iter()
                .all(|c| matches!(c, RuntimeChange::Server { .. }))
        );
    }

    #[test]
    fn route_changes_to_existing_backends_are_runtime_only() {
        let before = applied(state(&[("web", &[1]), ("api", &[2])], &[("a.com", "web")]));
        let after = state(
            &[("web", &[1]), ("api", &[2])],
            &[("a.com", "api"), ("b.com", "web")],
        );
        let plan = plan(Some(&before), after, &settings());
        assert_eq!(plan.reload, None);
        assert_eq!(plan.changed, vec![settings().prefix_map()]);
        assert!(
            plan.runtime.iter().all(|c| matches!(
                c,
                RuntimeChange::MapAdd { .. } | RuntimeChange::MapSet { .. }
            )),
            "{:?}",
            plan.runtime
        );
    }

    #[test]
    fn a_new_backend_reloads() {
        let before = applied(state(&[("web", &[1])], &[]));
        let plan = plan(
            Some(&before),
            state(&[("web", &[1]), ("api", &[2])], &[]),
            &settings(),
        );
        assert_eq!(plan.reload, Some(ReloadReason::Structure));
        assert!(plan.runtime.is_empty());
    }

    #[test]
    fn a_backend_no_route_uses_any_more_stays_until_the_next_reload() {
        let before = applied(state(
            &[("web", &[1]), ("api", &[2])],
            &[("a.com", "web"), ("b.com", "api")],
        ));
        let plan = plan(
            Some(&before),
            state(&[("web", &[1])], &[("a.com", "web")]),
            &settings(),
        );
        assert_eq!(plan.reload, None);
        assert_eq!(plan.next.desired.backends.len(), 2);
        let fresh = super::plan(
            None,
            state(&[("web", &[1])], &[("a.com", "web")]),
            &settings(),
        );
        assert_eq!(fresh.next.desired.backends.len(), 1);
    }

    #[test]
    fn an_unchanged_state_plans_nothing() {
        let desired = state(&[("web", &[1])], &[("a.com", "web")]);
        let before = applied(desired.clone());
        assert!(plan(Some(&before), desired, &settings()).is_empty());
    }

    #[test]
    fn projection_keeps_known_backends_and_their_routes_only() {
        let before = state(&[("web", &[1])], &[("a.com", "web")]);
        let after = state(
            &[("web", &[1, 2]), ("api", &[3])],
            &[("a.com", "web"), ("b.com", "api")],
        );
        let projected = runtime_projection(&before, &after);
        assert_eq!(projected.backends.len(), 1);
        assert_eq!(
            projected
                .backends
                .values()
                .next()
                .map(|b| b.endpoints.len()),
            Some(2)
        );
        assert_eq!(projected.routes.len(), 1);
        let applied = applied(before);
        assert_eq!(plan(Some(&applied), projected, &settings()).reload, None);
    }
}
