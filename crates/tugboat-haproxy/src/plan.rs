//! The planner: from what haproxy runs and what is desired, the files to write and either
//! the runtime changes that get haproxy there or a reload.
//!
//! Pure. The reload decision is made on the rendered config itself: with every `server`
//! line left out (addresses and states are runtime-able), the old and new configs must be
//! identical for a runtime update; anything else that differs (a backend, a frontend,
//! a global setting) reloads. Maps and server slots are diffed into runtime changes,
//! ordered make before break ([`crate::runtime::Phase`]).
//! Because the decision looks at the rendered text, a new kind of setting can never be
//! forgotten by the planner: it reloads until someone teaches it a runtime path.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use tugboat_model::incremental::replace_routes;
use tugboat_model::{
    BackendName, Desired, FeatureSetId, HostMatch, IngressRoutes, ObjectKey, Patch, PathMatch,
    Route, RouteFeatures,
};

use crate::layout::{Layout, SlotChange, evolve_slots, fresh_slots};
use crate::map_text::{self, MapOrder};
use crate::render::{
    FileText, RenderSettings, RenderedFiles, RoutesAtPath, backend_section, backends_file_count,
    backends_file_index, has_rule_timeouts, path_text, render, server_options, with_layout,
};
use crate::runtime::{
    CertText, MAX_CERTIFICATE, RuntimeChange, certificate_changes, is_slot_line, make_before_break,
    map_changes, map_entry_changes,
};

/// What haproxy is known to run: the state, its server slots and its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub desired: Desired,
    pub layout: Layout,
    pub files: RenderedFiles,
}

/// Why a plan reloads. When a change has several reasons, the first in this order names
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ReloadReason {
    /// Nothing is known of what haproxy runs (start-up, after an error).
    UnknownState,
    /// The `global` or `defaults` section changed (a setting of the ConfigMap).
    GlobalSettings,
    /// A frontend came or went, or its `bind` lines changed (a port of its own: a TCP
    /// service, a Gateway listener, TLS passthrough).
    Binds,
    /// A backend haproxy does not have (a Service port no route used before), where
    /// haproxy cannot add one at runtime: before 3.4, `add backend` refused, or
    /// `--dynamic-backends=false`.
    NewBackend,
    /// A backend haproxy does not have, whose section holds more than a backend added
    /// at runtime can (only servers and their options): a balancing algorithm, a
    /// timeout, a health-check request, a cookie, rules, a snippet, an ExternalName,
    /// a TLS file of its own.
    NewBackendSettings,
    /// A frontend's rules changed (a feature set, a regular-expression route, a redirect).
    FrontendRules,
    /// A backend's section changed beyond its servers (its annotations or keys).
    BackendSettings,
    /// Another section of the config changed (a userlist, a stick table's).
    OtherSections,
    /// A server added to a backend whose balancing refuses servers added at runtime.
    ServersNotDynamic,
    /// A TLS file haproxy cannot take at runtime: a crt-list with options, a client CA
    /// without new crt-list lines, a certificate too large for one command.
    TlsFiles,
    /// Another file haproxy reads only when it loads changed (an error page, a pattern
    /// file).
    Files,
}

impl ReloadReason {
    /// The reason's name: a closed set, for the metrics, the status and the log.
    pub fn as_str(self) -> &'static str {
        match self {
            ReloadReason::UnknownState => "unknown-state",
            ReloadReason::GlobalSettings => "global-settings",
            ReloadReason::Binds => "binds",
            ReloadReason::NewBackend => "new-backend",
            ReloadReason::NewBackendSettings => "new-backend-settings",
            ReloadReason::FrontendRules => "frontend-rules",
            ReloadReason::BackendSettings => "backend-settings",
            ReloadReason::OtherSections => "other-sections",
            ReloadReason::ServersNotDynamic => "servers-not-dynamic",
            ReloadReason::TlsFiles => "tls-files",
            ReloadReason::Files => "files",
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
    /// Planned by [`plan_patch`]: the state before it is not kept, so a runtime command
    /// haproxy does not take cannot fall back to a reload of these files.
    pub patched: bool,
    /// A reload the closed [`ReloadWindow`] holds back: the plan carries what can go at
    /// runtime until then (nothing, when it is empty), and the reload follows once the
    /// window opens.
    pub held: Option<ReloadReason>,
}

/// Whether a reload may happen now. Reloads are paced: after a change that needs one,
/// the window stays closed for a while, so that a burst of such changes costs one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadWindow {
    /// A plan that needs a reload reloads.
    Open,
    /// A reload for a change of structure waits; what can go at runtime goes now.
    Closed,
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

/// Plans the change from `applied` to `desired` as [`plan`] does, within the reload
/// `window`: while it is closed, a change of structure is held back (a restart or an
/// unknown state still reloads at once) and the plan is the part of `desired` that
/// haproxy can take at runtime ([`runtime_projection`]): new endpoints and routes of
/// the backends it has. When even that needs a reload, the plan is empty and held.
///
/// `desired` is rendered once: the projection is planned only when it needs a reload,
/// and the reload is planned only when the window lets it go.
pub fn plan_within(
    applied: Option<&Applied>,
    desired: Desired,
    settings: &RenderSettings,
    window: ReloadWindow,
) -> Plan {
    let Some(applied) = applied else {
        return plan(None, desired, settings);
    };
    let change = match runtime_plan(applied, desired, settings) {
        Ok(plan) => return plan,
        Err(change) => change,
    };
    if window == ReloadWindow::Open {
        return change.reload_plan(applied, settings);
    }
    let reason = change.reason;
    let projected = runtime_projection(&applied.desired, &change.desired);
    let mut now =
        runtime_plan(applied, projected, settings).unwrap_or_else(StructureChange::nothing);
    now.held = Some(reason);
    now
}

/// Plans the change from `applied` (`None`: unknown) to `desired`.
pub fn plan(applied: Option<&Applied>, desired: Desired, settings: &RenderSettings) -> Plan {
    let Some(applied) = applied else {
        return reload_plan(None, desired, None, settings, ReloadReason::UnknownState);
    };
    runtime_plan(applied, desired, settings)
        .unwrap_or_else(|change| change.reload_plan(applied, settings))
}

/// A change haproxy can take only by a reload: the desired state (with the backends kept
/// unused, see [`keep_unrouted_backends`]) and what it rendered with the evolved layout.
struct StructureChange {
    desired: Desired,
    layout: Layout,
    files: RenderedFiles,
    reason: ReloadReason,
}

impl StructureChange {
    /// The reload to this state, with a fresh layout (only the backends files are
    /// rendered again).
    fn reload_plan(self: Box<Self>, applied: &Applied, settings: &RenderSettings) -> Plan {
        reload_plan(
            Some(applied),
            self.desired,
            Some(self.files),
            settings,
            self.reason,
        )
    }

    /// A plan that does nothing now. Its `next` (this state, as rendered) is not
    /// carried out: [`crate::Applier::apply`] keeps what haproxy runs.
    fn nothing(self: Box<Self>) -> Plan {
        Plan {
            next: Applied {
                desired: self.desired,
                layout: self.layout,
                files: self.files,
            },
            changed: Vec::new(),
            removed: Vec::new(),
            runtime: Vec::new(),
            reload: None,
            patched: false,
            held: None,
        }
    }
}

/// Plans the change from `applied` to `desired` at runtime, or says that it is a change
/// of structure (boxed, so that a result is not the size of two states).
fn runtime_plan(
    applied: &Applied,
    desired: Desired,
    settings: &RenderSettings,
) -> Result<Plan, Box<StructureChange>> {
    let desired = keep_unrouted_backends(applied, desired);
    let (mut layout, mut slot_changes) = applied.layout.evolve(&desired);
    // Backends haproxy does not have, added at runtime when it can (the section check
    // below reloads those it cannot take): every slot is a new server.
    let mut new_backends = Vec::new();
    if settings.dynamic_backends {
        for (name, backend) in &desired.backends {
            if applied.layout.backends.contains_key(name) {
                continue;
            }
            let slots = fresh_slots(backend);
            let added = slots.iter().enumerate().map(|(slot, server)| SlotChange {
                slot,
                before: None,
                after: *server,
                added: true,
            });
            slot_changes.insert(name.clone(), added.collect());
            layout.backends.insert(name.clone(), slots);
            new_backends.push(name.clone());
        }
    }
    let files = render(&desired, &layout, settings);
    let structure_change = |desired, layout, files, reason| {
        Err(Box::new(StructureChange {
            desired,
            layout,
            files,
            reason,
        }))
    };
    if let Some(reason) = structure_change_reason(&applied.files, &files, settings) {
        return structure_change(desired, layout, files, reason);
    }
    // Files with no runtime path (error pages) reload when they change. A file that
    // goes away needs no reload: with the structure unchanged, nothing left in the
    // config names it (haproxy read it when it loaded, and keeps what it read).
    let maps = settings.maps();
    // The runtime changes of the crt-list name its lines by certificate. With the lines
    // of hosts that ask for client certificates (options, a certificate on several
    // lines), only lines added go at runtime (`add ssl crt-list`); any other change of
    // it reloads.
    let list = settings.crt_list();
    let with_options = |files: &RenderedFiles| {
        files
            .get(&list)
            .is_some_and(|text| text.lines().any(|line| line.contains(" [")))
    };
    let (old_list, new_list) = (
        applied.files.get(&list).unwrap_or(""),
        files.get(&list).unwrap_or(""),
    );
    let options_in_list = with_options(&applied.files) || with_options(&files);
    let added_lines = if options_in_list {
        lines_added_only(old_list, new_list)
    } else {
        None
    };
    let crt_list_at_runtime = !options_in_list || added_lines.is_some();
    // A client CA bundle or revocation list takes new contents at runtime; a new one
    // too when it comes with crt-list lines that go at runtime.
    let client_ca_at_runtime = |path: &PathBuf| {
        settings.is_client_ca_file(path)
            && (applied.files.get(path).is_some() || added_lines.is_some())
            && files
                .get(path)
                .is_some_and(|pem| pem.len() <= MAX_CERTIFICATE)
    };
    let runtime_file = |path: &PathBuf| {
        settings.is_config(path)
            || maps.contains(path)
            || (*path == list && crt_list_at_runtime)
            || settings.is_certificate(path)
            || client_ca_at_runtime(path)
    };
    let changed = changed_files(&applied.files, &files);
    let removed = removed_files(&applied.files, &files);
    // Hash-based balancing refuses servers added at runtime: those need a reload.
    let refuses_added_servers = || {
        slot_changes.iter().any(|(backend, changes)| {
            changes.iter().any(|c| c.added)
                && desired
                    .backends
                    .get(backend)
                    .is_some_and(|b| !b.options.allows_dynamic_servers())
        })
    };
    let tls_file = |path: &PathBuf| {
        *path == list || settings.is_certificate(path) || settings.is_client_ca_file(path)
    };
    let file_reason = changed.iter().filter(|p| !runtime_file(p)).map(|path| {
        if tls_file(path) {
            ReloadReason::TlsFiles
        } else {
            ReloadReason::Files
        }
    });
    let servers_reason = refuses_added_servers().then_some(ReloadReason::ServersNotDynamic);
    if let Some(reason) = servers_reason.into_iter().chain(file_reason).min() {
        return structure_change(desired, layout, files, reason);
    }
    let mut runtime: Vec<RuntimeChange> = Vec::new();
    for backend in new_backends {
        runtime.push(RuntimeChange::AddBackend {
            backend: backend.clone(),
        });
        runtime.push(RuntimeChange::PublishBackend { backend });
    }
    for (backend, changes) in slot_changes {
        let options = desired.backends.get(&backend).map(|b| b.options.as_ref());
        server_changes(&mut runtime, &backend, options, changes, settings);
    }
    fn certificates<'a>(
        files: &'a RenderedFiles,
        settings: &RenderSettings,
    ) -> BTreeMap<&'a Path, &'a str> {
        files
            .files
            .iter()
            .filter(|(path, _)| settings.is_certificate(path))
            .map(|(path, pem)| (path.as_path(), pem.as_str()))
            .collect()
    }
    let old_certs = certificates(&applied.files, settings);
    let new_certs = certificates(&files, settings);
    if new_certs.values().any(|pem| pem.len() > MAX_CERTIFICATE) {
        // Too large for one runtime command: haproxy loads it from the file.
        return structure_change(desired, layout, files, ReloadReason::TlsFiles);
    }
    for path in changed.iter().filter(|p| settings.is_client_ca_file(p)) {
        if let Some(pem) = files.get(path) {
            runtime.push(RuntimeChange::CaFileUpload {
                path: path.clone(),
                pem: CertText(pem.to_string()),
                revocation_list: settings.is_revocation_list(path),
                new: applied.files.get(path).is_none(),
            });
        }
    }
    match added_lines {
        // Certificates first (the lines name them), then the lines.
        Some(lines) => {
            runtime.extend(certificate_changes(
                &list, &old_certs, &new_certs, old_list, old_list,
            ));
            runtime.extend(lines.into_iter().map(|line| RuntimeChange::CrtListAdd {
                list: list.clone(),
                line,
            }));
        }
        None => runtime.extend(certificate_changes(
            &list, &old_certs, &new_certs, old_list, new_list,
        )),
    }
    for map in maps {
        let old = applied.files.get(&map).unwrap_or("");
        let new = files.get(&map).unwrap_or("");
        if old != new {
            runtime.extend(map_changes(&map, old, new));
        }
    }
    Ok(Plan {
        next: Applied {
            desired,
            layout,
            files,
        },
        changed,
        removed,
        runtime: make_before_break(runtime),
        reload: None,
        patched: false,
        held: None,
    })
}

/// The lines of crt-list `new` that `old` lacks, when `new` only adds lines to `old`
/// (each line of `old` is in `new` as many times); `None` otherwise.
fn lines_added_only(old: &str, new: &str) -> Option<Vec<String>> {
    let mut remaining: BTreeMap<&str, usize> = BTreeMap::new();
    for line in old.lines().filter(|l| !l.trim().is_empty()) {
        *remaining.entry(line).or_default() += 1;
    }
    let mut added = Vec::new();
    for line in new.lines().filter(|l| !l.trim().is_empty()) {
        match remaining.get_mut(line) {
            Some(count) if *count > 0 => *count -= 1,
            _ => added.push(line.to_string()),
        }
    }
    remaining.values().all(|count| *count == 0).then_some(added)
}

/// The runtime changes of one backend's slots.
fn server_changes(
    runtime: &mut Vec<RuntimeChange>,
    backend: &BackendName,
    options: Option<&tugboat_model::BackendOptions>,
    changes: Vec<SlotChange>,
    settings: &RenderSettings,
) {
    let server_options = options
        .map(|o| server_options(o, settings))
        .unwrap_or_default();
    let cookie = options.and_then(|o| o.cookie.as_ref().map(|c| c.value_prefix()));
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

/// Why [`plan_patch`] planned nothing, with the state haproxy runs, untouched.
#[derive(Debug)]
pub struct Refused {
    pub applied: Applied,
    /// What in the patch needs the whole state planned.
    pub why: &'static str,
}

impl Refused {
    fn of(applied: Applied, why: &'static str) -> Self {
        Self { applied, why }
    }
}

/// Plans a [`Patch`] of the state haproxy runs, when the model says that only the
/// endpoints of some backends, the PEM of some certificates and the routes of some
/// Ingresses changed: the cost is what the patch touches (the config's sections of
/// those backends and the map lines of those routes are replaced, not the whole state
/// rendered again), and the plan is the one [`plan`] makes for the patched state.
/// `Err` gives `applied` back, untouched, with why, when the patch needs more than
/// runtime changes (a server added to a backend that refuses them, a certificate too
/// large for one command) or names what haproxy does not run: plan the whole state then.
pub fn plan_patch(
    mut applied: Applied,
    patch: &Patch,
    settings: &RenderSettings,
) -> Result<Plan, Box<Refused>> {
    let mut runtime: Vec<RuntimeChange> = Vec::new();
    // Everything is checked before anything changes, so that `Err` leaves `applied` whole.
    let mut backends = Vec::new();
    // The old and new sections of the backends whose servers change, by config file.
    let mut config_edits: BTreeMap<PathBuf, Vec<(String, String)>> = BTreeMap::new();
    let files_count = backends_file_count(applied.desired.backends.len());
    let rule_timeouts = has_rule_timeouts(&applied.desired);
    // A backend that joins the state again lingers in haproxy (see
    // `keep_unrouted_backends`): its section is there, as it would be rendered. One
    // haproxy does not run needs a reload.
    let mut endpoints: BTreeMap<&BackendName, (&Vec<_>, &Vec<_>)> = BTreeMap::new();
    for (name, joined) in &patch.backends {
        let Some(joined) = joined else { continue };
        match applied.desired.backends.get(name) {
            Some(lingering)
                if lingering.options == joined.options
                    && lingering.external == joined.external
                    && lingering.service == joined.service
                    && lingering.port == joined.port =>
            {
                endpoints.insert(name, (&joined.endpoints, &joined.draining));
            }
            _ => {
                return Err(Box::new(Refused::of(
                    applied,
                    "a backend joins with other options than those haproxy keeps for it",
                )));
            }
        }
    }
    endpoints.extend(
        patch
            .endpoints
            .iter()
            .map(|(name, (ready, draining))| (name, (ready, draining))),
    );
    for (name, (ready, draining)) in endpoints {
        let (Some(backend), Some(current)) = (
            applied.desired.backends.get(name),
            applied.layout.backends.get(name),
        ) else {
            return Err(Box::new(Refused::of(
                applied,
                "a backend haproxy does not run",
            )));
        };
        if backend.external.is_some() {
            return Err(Box::new(Refused::of(applied, "an ExternalName backend")));
        }
        if backend.endpoints == *ready && backend.draining == *draining {
            continue;
        }
        let mut next = backend.clone();
        next.endpoints.clone_from(ready);
        next.draining.clone_from(draining);
        let (slots, changes) = evolve_slots(current, &next);
        if changes.iter().any(|c| c.added) && !next.options.allows_dynamic_servers() {
            return Err(Box::new(Refused::of(
                applied,
                "a server added to a backend that refuses dynamic servers",
            )));
        }
        let old_section = backend_section(name, backend, current, rule_timeouts, settings);
        let new_section = backend_section(name, &next, &slots, rule_timeouts, settings);
        if old_section != new_section {
            let path = settings.backends_file(backends_file_index(name, files_count));
            config_edits
                .entry(path)
                .or_default()
                .push((old_section, new_section));
        }
        server_changes(&mut runtime, name, Some(&next.options), changes, settings);
        backends.push((name.clone(), next, slots));
    }
    let mut certificates = Vec::new();
    for (name, pem) in &patch.certificates {
        let path = settings.certificate(name);
        let (Some(_), Some(old)) = (
            applied.desired.certificates.get(name),
            applied.files.get(&path),
        ) else {
            return Err(Box::new(Refused::of(
                applied,
                "a certificate haproxy does not have",
            )));
        };
        if pem.as_str().len() > MAX_CERTIFICATE {
            return Err(Box::new(Refused::of(
                applied,
                "a certificate too large for one command",
            )));
        }
        if old != pem.as_str() {
            runtime.push(RuntimeChange::CertUpload {
                path: path.clone(),
                pem: CertText(pem.as_str().to_string()),
                new: false,
            });
            certificates.push((name.clone(), path, pem.clone()));
        }
    }
    let (exact_path, prefix_path) = (settings.exact_map(), settings.prefix_map());
    let has_maps = applied.files.files.contains_key(&exact_path)
        && applied.files.files.contains_key(&prefix_path);
    if !patch.routes.is_empty() && !has_maps {
        return Err(Box::new(Refused::of(applied, "no route maps to edit")));
    }
    // The passthrough map terminates the exact hosts with routes of their own under a
    // passthrough wildcard: rendered from every route, not edited a line at a time.
    if !patch.routes.is_empty() && crate::passthrough::needed(&applied.desired) {
        return Err(Box::new(Refused::of(
            applied,
            "routes beside TLS passthrough",
        )));
    }
    // Regex routes are rules of the config, not map lines: a change of them reloads.
    let regex_routes_change = patch.routes.values().any(|change| {
        change
            .before
            .iter()
            .map(|(_, path)| path)
            .chain(change.after.iter().map(|route| &route.path))
            .any(|path| matches!(path, PathMatch::Regex(_)))
    });
    if regex_routes_change {
        return Err(Box::new(Refused::of(applied, "a regular-expression route")));
    }
    // The fallback of `default-backend` has a rule per backend its routes use: a change
    // of such a route may change those rules, so it reloads.
    if !patch.routes.is_empty() && fallback_routes_change(&applied.desired, &patch.routes) {
        return Err(Box::new(Refused::of(
            applied,
            "a route that default-backend's fallback rules name",
        )));
    }
    // Where each old section is, found before anything changes; then replaced from the
    // last to the first, so that the positions before stay right.
    let mut places_by_file = Vec::with_capacity(config_edits.len());
    for (path, edits) in config_edits {
        let Some(config) = applied.files.get(&path) else {
            return Err(Box::new(Refused::of(
                applied,
                "a backends file that is not known",
            )));
        };
        let mut places = Vec::with_capacity(edits.len());
        for (old, new) in edits {
            let Some(at) = memchr::memmem::find(config.as_bytes(), old.as_bytes()) else {
                return Err(Box::new(Refused::of(
                    applied,
                    "a backend section not found as it was rendered",
                )));
            };
            places.push((at, old.len(), new));
        }
        places.sort_by_key(|(at, _, _)| std::cmp::Reverse(*at));
        places_by_file.push((path, places));
    }
    let mut changed = Vec::new();
    for (path, places) in places_by_file {
        if let Some(config) = applied.files.files.get_mut(&path) {
            for (at, len, new) in places {
                map_text::splice(config.to_mut(), at..at + len, &new);
            }
        }
        changed.push(path);
    }
    for (name, next, slots) in backends {
        applied.layout.backends.insert(name.clone(), slots);
        applied.desired.backends.insert(name, next);
    }
    if !patch.routes.is_empty() {
        changed.extend(patch_route_maps(
            &mut applied,
            &patch.routes,
            settings,
            &mut runtime,
        ));
    }
    for (name, path, pem) in certificates {
        if let Some(certificate) = applied.desired.certificates.get_mut(&name) {
            certificate.pem = pem.clone();
        }
        applied.files.files.insert(path.clone(), FileText::Pem(pem));
        changed.push(path);
    }
    Ok(Plan {
        next: applied,
        changed,
        removed: Vec::new(),
        runtime: make_before_break(runtime),
        reload: None,
        patched: true,
        held: None,
    })
}

/// Whether a route of the Ingresses in `by_ingress`, before or after, belongs to a
/// feature set that falls back to another backend when its own has no usable server.
fn fallback_routes_change(
    applied: &Desired,
    by_ingress: &BTreeMap<ObjectKey, IngressRoutes>,
) -> bool {
    if !crate::error_backend::has_fallback(&applied.feature_sets) {
        return false;
    }
    let falls_back = |features: &Option<FeatureSetId>| {
        features
            .as_ref()
            .and_then(|id| applied.feature_sets.get(id))
            .and_then(|f| f.error_backend.as_ref())
            .is_some_and(|e| e.when_unserved)
    };
    by_ingress
        .values()
        .any(|change| change.after.iter().any(|route| falls_back(&route.features)))
        || applied
            .routes
            .iter()
            .any(|route| by_ingress.contains_key(&route.ingress) && falls_back(&route.features))
}

/// Replaces the routes of the Ingresses in `by_ingress` in `applied` and edits the lines
/// of the route maps they touch; adds the runtime changes of those lines to `runtime`
/// (as [`map_changes`] gives them for the whole files) and gives the maps that changed.
fn patch_route_maps(
    applied: &mut Applied,
    by_ingress: &BTreeMap<ObjectKey, IngressRoutes>,
    settings: &RenderSettings,
    runtime: &mut Vec<RuntimeChange>,
) -> Vec<PathBuf> {
    let before = by_ingress
        .values()
        .flat_map(|change| &change.before)
        .map(|(host, path)| (host, path));
    let after = by_ingress
        .values()
        .flat_map(|change| &change.after)
        .map(|route| (&route.host, &route.path));
    let paths: BTreeSet<(HostMatch, String)> = before
        .chain(after)
        .map(|(host, path)| (host.clone(), path_text(path).to_string()))
        .collect();
    type Lines = (BTreeMap<String, String>, BTreeMap<String, String>);
    let lines = |routes: &[Route]| -> Lines {
        let (mut exact, mut prefix) = (BTreeMap::new(), BTreeMap::new());
        for (host, path) in &paths {
            let at = RoutesAtPath::find(routes, host, path);
            exact.extend(at.exact_line(None, host, path));
            prefix.extend(at.prefix_line(None, host, path));
        }
        (exact, prefix)
    };
    let (exact_before, prefix_before) = lines(&applied.desired.routes);
    replace_routes(&mut applied.desired.routes, by_ingress);
    let (exact_after, prefix_after) = lines(&applied.desired.routes);
    let mut changed = Vec::new();
    for (path, order, before, after) in [
        (
            settings.exact_map(),
            MapOrder::Key,
            exact_before,
            exact_after,
        ),
        (
            settings.prefix_map(),
            MapOrder::LongestFirst,
            prefix_before,
            prefix_after,
        ),
    ] {
        if before == after {
            continue;
        }
        if let Some(text) = applied.files.files.get_mut(&path) {
            for key in before.keys().chain(after.keys()) {
                let value = after.get(key);
                if before.get(key) != value {
                    map_text::set_line(text.to_mut(), order, key, value.map(String::as_str));
                }
            }
        }
        runtime.extend(map_entry_changes(&path, &before, &after));
        changed.push(path);
    }
    changed
}

/// Backends that no route uses any more stay (with their last servers) until the next
/// reload: removing them would cost a reload for nothing, since no request reaches them.
fn keep_unrouted_backends(applied: &Applied, mut desired: Desired) -> Desired {
    let routed: BTreeSet<&BackendName> = desired
        .every_route()
        .flat_map(|r| std::iter::once(&r.backend).chain(r.canary.as_ref().map(|c| &c.backend)))
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
        .every_route()
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

/// A reload to `desired` with a fresh slot layout. `rendered` is what `desired` already
/// rendered with another layout: only its backends files are rendered again.
fn reload_plan(
    applied: Option<&Applied>,
    desired: Desired,
    rendered: Option<RenderedFiles>,
    settings: &RenderSettings,
    reason: ReloadReason,
) -> Plan {
    let layout = Layout::fresh(&desired);
    let files = match rendered {
        Some(files) => with_layout(files, &desired, &layout, settings),
        None => render(&desired, &layout, settings),
    };
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
        patched: false,
        held: None,
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

/// Why the `new` files' config cannot replace the `old` one without a reload (`None`:
/// it can, being the same
/// once their slot `server` lines (what runtime commands change), comments and blank
/// lines are left out, and once the sections of backends that only `old` has are left
/// out too. Such a backend stays in haproxy until the next reload, unused: no route
/// leads to it (routes are map entries, updated at runtime), and a line outside its
/// section that named it would differ. This is how a restarted controller, which does
/// not know the backends its predecessor kept unused (see [`keep_unrouted_backends`]),
/// drops them from the files without a reload. The main config is compared line by
/// line; the backends' files section by section, whatever file each is in.
fn structure_change_reason(
    old: &RenderedFiles,
    new: &RenderedFiles,
    settings: &RenderSettings,
) -> Option<ReloadReason> {
    let config = settings.config_file();
    let main = match (old.get(&config), new.get(&config)) {
        (Some(old), Some(new)) => {
            let kept: BTreeSet<&str> = backend_names(new).collect();
            let used_sets: BTreeSet<&str> = new.lines().flat_map(feature_set_ids).collect();
            let old_lines: Vec<Cow<str>> = structure_lines(old, Some(&kept))
                .filter_map(|line| without_unused_feature_sets(line, &used_sets))
                .collect();
            let old_lines = || old_lines.iter().map(AsRef::as_ref);
            let new_lines = || structure_lines(new, None);
            (!old_lines().eq(new_lines())).then(|| main_sections_reason(old_lines(), new_lines()))
        }
        (None, None) => None,
        _ => Some(ReloadReason::GlobalSettings),
    };
    let old_sections: HashMap<&str, &str> = backends_sections(old, settings).collect();
    let backends =
        backends_sections(new, settings).filter_map(|(name, section)| {
            match old_sections.get(name) {
                None if !settings.dynamic_backends => Some(ReloadReason::NewBackend),
                None if !addable_at_runtime(section) => Some(ReloadReason::NewBackendSettings),
                None => None,
                Some(old) if !structure_lines(old, None).eq(structure_lines(section, None)) => {
                    Some(ReloadReason::BackendSettings)
                }
                Some(_) => None,
            }
        });
    main.into_iter().chain(backends).min()
}

/// How a config line names feature sets: `{ var(txn.fs) -m str ID... }`.
const FEATURE_SET_ACL: &str = "var(txn.fs) -m str ";

/// The feature sets a config line names ([`FEATURE_SET_ACL`]).
fn feature_set_ids(line: &str) -> impl Iterator<Item = &str> {
    line.match_indices(FEATURE_SET_ACL)
        .flat_map(move |(at, _)| {
            line[at + FEATURE_SET_ACL.len()..]
                .split_whitespace()
                .take_while(|word| !word.starts_with('}'))
        })
}

/// `line` without the feature sets it names that are not in `used`: those of routes
/// gone, whose rules a running haproxy keeps until the next reload (see
/// [`keep_unrouted_backends`]). They match no request, like a backend no route leads to,
/// so a restarted controller drops them without a reload. `None` when every set the line
/// names is unused (the whole rule goes); the line as it is when it names none, or when
/// one of its conditions would be left with no set (not a rule this controller writes).
fn without_unused_feature_sets<'a>(line: &'a str, used: &BTreeSet<&str>) -> Option<Cow<'a, str>> {
    let mut named = feature_set_ids(line).peekable();
    if named.peek().is_none() {
        return Some(Cow::Borrowed(line));
    }
    if named.all(|id| !used.contains(id)) {
        return None;
    }
    let mut kept = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find(FEATURE_SET_ACL) {
        let (before, after) = rest.split_at(at + FEATURE_SET_ACL.len());
        kept.push_str(before);
        let end = after.find(" }").unwrap_or(after.len());
        let ids: Vec<&str> = after[..end]
            .split_whitespace()
            .filter(|id| used.contains(id))
            .collect();
        if ids.is_empty() {
            return Some(Cow::Borrowed(line));
        }
        kept.push_str(&ids.join(" "));
        rest = &after[end..];
    }
    kept.push_str(rest);
    Some(Cow::Owned(kept))
}

/// Whether a new backend's `section` is what `add backend ... from` the named defaults
/// and `add server` (with the `default-server` options) make: a `backend` line, the
/// default balancing, servers and their options. Options naming a file (a CA, a client
/// certificate) need the file loaded first, which only a reload does.
fn addable_at_runtime(section: &str) -> bool {
    structure_lines(section, None).all(|line| {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["backend", _] | ["balance", "roundrobin"] => true,
            ["default-server", options @ ..] => !options
                .iter()
                .any(|word| matches!(*word, "ca-file" | "crt")),
            _ => false,
        }
    })
}

/// Why the main config's structure lines `old` and `new`, which differ, need a reload:
/// by the sections that differ (only their order, when none does).
fn main_sections_reason<'a>(
    old: impl Iterator<Item = &'a str>,
    new: impl Iterator<Item = &'a str>,
) -> ReloadReason {
    let (old, new) = (by_section(old), by_section(new));
    let binds = |lines: Option<&Vec<&'a str>>| -> Option<Vec<&'a str>> {
        lines.map(|lines| {
            lines
                .iter()
                .copied()
                .filter(|line| line.trim_start().starts_with("bind "))
                .collect()
        })
    };
    old.keys()
        .chain(new.keys())
        .filter(|header| old.get(*header) != new.get(*header))
        .map(|header| {
            let (before, after) = (old.get(header), new.get(header));
            match header.split_whitespace().next().unwrap_or("") {
                "global" | "defaults" => ReloadReason::GlobalSettings,
                "frontend" | "listen" if binds(before) != binds(after) => ReloadReason::Binds,
                "frontend" | "listen" => ReloadReason::FrontendRules,
                "backend" if before.is_none() => ReloadReason::NewBackend,
                "backend" => ReloadReason::BackendSettings,
                _ => ReloadReason::OtherSections,
            }
        })
        .min()
        .unwrap_or(ReloadReason::OtherSections)
}

/// A config's lines by section: each section's header (its unindented first line) and
/// its other lines.
fn by_section<'a>(lines: impl Iterator<Item = &'a str>) -> BTreeMap<&'a str, Vec<&'a str>> {
    let mut sections: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut header = "";
    for line in lines {
        if line.starts_with(char::is_whitespace) {
            sections.entry(header).or_default().push(line);
        } else {
            header = line.trim_end();
            sections.entry(header).or_default();
        }
    }
    sections
}

/// The `backend` sections of the backends' files, by name.
fn backends_sections<'a>(
    files: &'a RenderedFiles,
    settings: &'a RenderSettings,
) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
    files
        .files
        .iter()
        .filter(|(path, _)| settings.is_backends_file(path))
        .flat_map(|(_, text)| backend_sections(text))
}

/// The `backend` sections of a config, by name: each from its `backend` line to the
/// next section.
fn backend_sections(config: &str) -> Vec<(&str, &str)> {
    let mut starts: Vec<usize> = memchr::memmem::find_iter(config.as_bytes(), "\nbackend ")
        .map(|at| at + 1)
        .collect();
    if config.starts_with("backend ") {
        starts.insert(0, 0);
    }
    let ends = starts.iter().skip(1).copied().chain([config.len()]);
    starts
        .iter()
        .zip(ends)
        .map(|(&start, end)| {
            let section = &config[start..end];
            let header = section.lines().next().unwrap_or("");
            let name = header.strip_prefix("backend ").unwrap_or("").trim();
            (name, section)
        })
        .collect()
}

/// The names of a config's backend sections.
fn backend_names(config: &str) -> impl Iterator<Item = &str> {
    config
        .lines()
        .filter_map(|line| line.strip_prefix("backend "))
        .map(str::trim)
}

/// The lines of a config that need a reload to change: not slot `server` lines,
/// comments nor blank lines, and (with `kept`) only the backend sections it names.
fn structure_lines<'a>(
    config: &'a str,
    kept: Option<&'a BTreeSet<&'a str>>,
) -> impl Iterator<Item = &'a str> + 'a {
    let mut in_dropped_backend = false;
    config.lines().filter(move |line| {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            return false;
        }
        // A section starts at an unindented line.
        if trimmed.len() == line.len() {
            in_dropped_backend = match (line.strip_prefix("backend "), kept) {
                (Some(name), Some(kept)) => !kept.contains(name.trim()),
                _ => false,
            };
        }
        !in_dropped_backend && !is_slot_line(line)
    })
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
    let project = |applied_routes: &[Route], desired_routes: &[Route]| {
        project_routes(applied_routes, desired_routes, &known, known_features)
    };
    let routes = project(&applied.routes, &desired.routes);
    // The binds of their own haproxy has (a new one, or one gone, waits for the reload),
    // their routes alike.
    let listener_binds = applied
        .listener_binds
        .iter()
        .map(|bind| {
            let next = desired.listener_binds.iter().find(|b| b.port == bind.port);
            tugboat_model::ListenerBind {
                routes: next.map_or_else(
                    || bind.routes.clone(),
                    |next| project(&bind.routes, &next.routes),
                ),
                ..bind.clone()
            }
        })
        .collect();
    // Passthrough routes alike: a host whose backend is new keeps its old route, if any.
    let applied_passthrough: BTreeMap<_, _> = applied
        .passthrough
        .iter()
        .map(|route| ((route.port, &route.host), route))
        .collect();
    let passthrough = desired
        .passthrough
        .iter()
        .filter_map(|route| {
            if known.contains(&route.backend) {
                return Some(route.clone());
            }
            applied_passthrough
                .get(&(route.port, &route.host))
                .map(|old| (*old).clone())
        })
        .collect();
    Desired {
        backends,
        routes,
        listener_binds,
        passthrough,
        // A new port's frontend (maybe to a new backend) waits for the reload.
        tcp_services: applied.tcp_services.clone(),
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

/// The routes of `desired` haproxy can take at runtime ([`runtime_projection`]): those
/// whose backends (and canary) it has (`known`) and whose feature set is unchanged
/// (`known_features`); another keeps the route of its host and path in `applied`, if
/// any.
fn project_routes(
    applied: &[Route],
    desired: &[Route],
    known: &BTreeSet<&BackendName>,
    known_features: impl Fn(&Route) -> bool,
) -> Vec<Route> {
    // By host and path; the first route of a pair wins, as haproxy's maps do.
    let applied_routes: BTreeMap<_, _> = applied
        .iter()
        .rev()
        .map(|route| ((&route.host, &route.path), route))
        .collect();
    desired
        .iter()
        .filter_map(|route| {
            let known_canary = route
                .canary
                .as_ref()
                .is_none_or(|canary| known.contains(&canary.backend));
            if known.contains(&route.backend) && known_canary && known_features(route) {
                return Some(route.clone());
            }
            applied_routes
                .get(&(&route.host, &route.path))
                .map(|old| (*old).clone())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use crate::runtime::Phase;
    use crate::settings::BACKENDS_PER_FILE;
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
            owner_kind: tugboat_model::RouteOwnerKind::Ingress,
            features: None,
            canary: None,
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
        assert_eq!(plan.changed.len(), 7);
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
        assert_eq!(plan.changed, vec![settings().backends_file(0)]);
        // Slot of 1 parked, 3 into a free slot.
        assert_eq!(plan.runtime.len(), 2, "{:?}", plan.runtime);
        assert!(
            plan.runtime
                .iter()
                .all(|c| matches!(c, RuntimeChange::Server { .. }))
        );
    }

    #[test]
    fn an_endpoint_patch_rewrites_the_one_backends_file_of_its_backend() {
        // Enough backends for several files.
        let names: Vec<String> = (0..3 * BACKENDS_PER_FILE)
            .map(|i| format!("svc{i}"))
            .collect();
        let backends: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &[1u8][..])).collect();
        let before = applied(state(&backends, &[("a.com", "svc0")]));
        let files_count = backends_file_count(backends.len());
        assert_eq!(files_count, 3);
        // Every backend is in the file its index names, once.
        for name in before.desired.backends.keys() {
            let header = format!("\nbackend {name}\n");
            for index in 0..files_count {
                let text = before
                    .files
                    .get(&settings().backends_file(index))
                    .unwrap_or("");
                let expected = usize::from(index == backends_file_index(name, files_count));
                assert_eq!(
                    text.matches(&header).count(),
                    expected,
                    "{name} in file {index}"
                );
            }
        }
        let mut after = before.desired.clone();
        let target = backend("svc7", &[2]).0;
        if let Some(b) = after.backends.get_mut(&target) {
            b.endpoints = backend("svc7", &[2]).1.endpoints;
        }
        let patch = Patch {
            endpoints: BTreeMap::from([(
                target.clone(),
                (after.backends[&target].endpoints.clone(), Vec::new()),
            )]),
            ..Patch::default()
        };
        let whole = plan(Some(&before), after, &settings());
        let patched = plan_patch(before, &patch, &settings()).expect("a runtime patch");
        let file = settings().backends_file(backends_file_index(&target, files_count));
        assert_eq!(patched.changed, vec![file.clone()]);
        assert_eq!(whole.changed, vec![file]);
        assert_eq!(patched.next.files, whole.next.files);
        assert_eq!(patched.runtime, whole.runtime);
        assert_eq!(whole.reload, None);
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

    /// `state` with client certificates verified on `a.com` by a CA file holding `ca`.
    fn with_client_ca(mut desired: Desired, ca: &str) -> Desired {
        let files = tugboat_model::features::ClientCa {
            ca_file: "ns_client-ca.ca.pem".into(),
            crl_file: None,
        };
        desired.client_ca_hosts.insert("a.com".into(), files);
        desired.client_ca_files.insert(
            "ns_client-ca.ca.pem".into(),
            tugboat_model::tls::Pem::from_checked(ca.into()),
        );
        desired
    }

    #[test]
    fn a_changed_client_ca_goes_at_runtime_and_a_crt_list_with_options_reloads() {
        let base = || state(&[("web", &[1])], &[("a.com", "web")]);
        let before = applied(with_client_ca(base(), "CA ONE\n"));
        let replaced = plan(
            Some(&before),
            with_client_ca(base(), "CA TWO\n"),
            &settings(),
        );
        assert_eq!(replaced.reload, None);
        let path = settings().client_ca_file("ns_client-ca.ca.pem");
        assert_eq!(replaced.changed, vec![path.clone()]);
        assert_eq!(
            replaced.runtime,
            vec![RuntimeChange::CaFileUpload {
                path,
                pem: CertText("CA TWO\n".into()),
                revocation_list: false,
                new: false,
            }]
        );
        // The host leaves: its crt-list line with options goes by a reload, and the HTTPS
        // bind, which names the client CAs while a host asks for certificates, changes.
        let left = plan(Some(&before), base(), &settings());
        assert_eq!(left.reload, Some(ReloadReason::Binds));
    }

    #[test]
    fn a_host_that_joins_client_certificates_goes_at_runtime() {
        let hosts = [("a.com", "web"), ("b.com", "web")];
        let before = applied(with_client_ca(state(&[("web", &[1])], &hosts), "CA\n"));
        let mut after = with_client_ca(state(&[("web", &[1])], &hosts), "CA\n");
        let verified = after.client_ca_hosts["a.com"].clone();
        after.client_ca_hosts.insert("b.com".into(), verified);
        let joined = plan(Some(&before), after.clone(), &settings());
        assert_eq!(joined.reload, None, "{:?}", joined.changed);
        let [RuntimeChange::CrtListAdd { line, .. }] = joined.runtime.as_slice() else {
            panic!("one crt-list line: {:?}", joined.runtime);
        };
        assert!(line.ends_with(" b.com"), "{line}");
        assert!(line.contains("[ca-file "), "{line}");
        // With a CA of its own: the CA file is made first.
        let own_ca = tugboat_model::features::ClientCa {
            ca_file: "ns_other-ca.ca.pem".into(),
            crl_file: None,
        };
        after.client_ca_hosts.insert("b.com".into(), own_ca);
        after.client_ca_files.insert(
            "ns_other-ca.ca.pem".into(),
            tugboat_model::tls::Pem::from_checked("OTHER CA\n".into()),
        );
        let joined = plan(Some(&before), after, &settings());
        assert_eq!(joined.reload, None, "{:?}", joined.changed);
        assert!(
            matches!(
                joined.runtime.as_slice(),
                [
                    RuntimeChange::CaFileUpload { new: true, .. },
                    RuntimeChange::CrtListAdd { .. }
                ]
            ),
            "{:?}",
            joined.runtime
        );
    }

    #[test]
    fn only_added_crt_list_lines_count_as_additions() {
        assert_eq!(
            lines_added_only("a\nb\n", "b\nc\na\n"),
            Some(vec!["c".to_string()])
        );
        assert_eq!(lines_added_only("a\nb\n", "a\nc\n"), None);
        assert_eq!(lines_added_only("a\na\n", "a\n"), None);
        assert_eq!(lines_added_only("a\n", "a\n"), Some(vec![]));
    }

    #[test]
    fn a_new_backend_reloads() {
        let before = applied(state(&[("web", &[1])], &[]));
        let plan = plan(
            Some(&before),
            state(&[("web", &[1]), ("api", &[2])], &[]),
            &settings(),
        );
        assert_eq!(plan.reload, Some(ReloadReason::NewBackend));
        assert!(plan.runtime.is_empty());
    }

    fn dynamic_settings() -> RenderSettings {
        RenderSettings {
            dynamic_backends: true,
            ..settings()
        }
    }

    /// The state of `a_new_backend_goes_at_runtime`, with `api`'s options set by `with`.
    fn with_new_api(with: impl Fn(&mut tugboat_model::BackendOptions)) -> Desired {
        let mut desired = state(
            &[("web", &[1]), ("api", &[2, 3])],
            &[("a.com", "web"), ("b.com", "api")],
        );
        let (api, _) = backend("api", &[]);
        if let Some(backend) = desired.backends.get_mut(&api) {
            with(std::sync::Arc::make_mut(&mut backend.options));
        }
        desired
    }

    /// What haproxy runs after a first apply of `a.com` to `web`.
    fn running_web(settings: &RenderSettings) -> Applied {
        plan(None, state(&[("web", &[1])], &[("a.com", "web")]), settings).next
    }

    #[test]
    fn a_new_backend_goes_at_runtime_where_haproxy_adds_backends() {
        let settings = dynamic_settings();
        let before = running_web(&settings);
        // HTTPS to the servers, h2 and a TCP health check: server options only.
        let desired = with_new_api(|options| {
            options.h2 = true;
            options.tls = Some(tugboat_model::features::ServerTls {
                ca_file: None,
                client_certificate: None,
                server_name: "api.ns.svc".into(),
            });
            options.health_check = Some(Default::default());
        });
        let plan = plan(Some(&before), desired, &settings);
        assert_eq!(plan.reload, None);
        let (api, _) = backend("api", &[]);
        let phases: Vec<Phase> = plan.runtime.iter().map(RuntimeChange::phase).collect();
        assert!(phases.is_sorted(), "{phases:?}");
        assert_eq!(
            plan.runtime.first(),
            Some(&RuntimeChange::AddBackend {
                backend: api.clone()
            })
        );
        let steps: Vec<String> = plan
            .runtime
            .iter()
            .flat_map(RuntimeChange::steps)
            .map(|step| step.command)
            .collect();
        let position = |prefix: &str| {
            steps
                .iter()
                .position(|command| command.starts_with(prefix))
                .unwrap_or_else(|| panic!("no {prefix} in {steps:#?}"))
        };
        assert!(steps.contains(&format!(
            "@1 add server {api}/s1 10.0.0.2:8080 ssl sni str(api.ns.svc) verify none alpn h2 check"
        )));
        // Every slot the file has, the free ones in maintenance, before the backend takes
        // requests, and the route only after.
        let slots = plan.next.layout.backends[&api].len();
        let added = steps
            .iter()
            .filter(|c| c.starts_with("@1 add server"))
            .count();
        assert_eq!(added, slots);
        assert!(position("@1 add backend") < position("@1 add server"));
        assert!(position("@1 add server") < position("@1 publish backend"));
        assert!(position("@1 publish backend") < position("@1 add map"));
        // The backends file has the section a reload would load.
        let section = backends_sections(&plan.next.files, &settings)
            .find(|(name, _)| *name == api.as_str())
            .map(|(_, section)| section.to_string());
        assert!(section.is_some_and(|s| s.contains(&format!("server s{slots} "))));
    }

    #[test]
    fn a_new_backend_with_settings_of_its_own_reloads_for_that_reason() {
        let settings = dynamic_settings();
        let before = running_web(&settings);
        type SetOptions = fn(&mut tugboat_model::BackendOptions);
        let cases: [(&str, SetOptions); 3] = [
            ("a timeout", |o| o.timeout_server = Some("5s".into())),
            ("a balancing algorithm", |o| {
                o.balance = Some(tugboat_model::features::Balance::Source)
            }),
            ("a CA file", |o| {
                o.tls = Some(tugboat_model::features::ServerTls {
                    ca_file: Some("api-ca.pem".into()),
                    client_certificate: None,
                    server_name: "api.ns.svc".into(),
                })
            }),
        ];
        for (what, with) in cases {
            let plan = plan(Some(&before), with_new_api(with), &settings);
            assert!(plan.reload.is_some(), "{what}");
            assert!(plan.runtime.is_empty(), "{what}");
        }
        let timeout = plan(
            Some(&before),
            with_new_api(|o| o.timeout_server = Some("5s".into())),
            &settings,
        );
        assert_eq!(timeout.reload, Some(ReloadReason::NewBackendSettings));
    }

    #[test]
    fn a_server_added_to_a_hashed_backend_reloads_for_that_reason() {
        let hashed = |endpoints: &[u8]| {
            let mut desired = state(&[("web", endpoints)], &[("a.com", "web")]);
            for backend in desired.backends.values_mut() {
                std::sync::Arc::make_mut(&mut backend.options).balance =
                    Some(tugboat_model::features::Balance::Source);
            }
            desired
        };
        // Past the slots a fresh layout keeps spare, a server is added.
        let more: Vec<u8> = (1..=20).collect();
        let before = applied(hashed(&[1]));
        let plan = plan(Some(&before), hashed(&more), &settings());
        assert_eq!(plan.reload, Some(ReloadReason::ServersNotDynamic));
    }

    #[test]
    fn a_reload_gives_the_files_of_a_whole_render_with_a_fresh_layout() {
        // web's last endpoint keeps its slot in the evolved layout, and takes the first
        // one in a fresh layout: the backends files of the two differ.
        let before = applied(state(&[("web", &[1, 2, 3])], &[]));
        let after = state(&[("web", &[3]), ("api", &[2])], &[]);
        let (evolved, _) = before.layout.evolve(&after);
        let fresh = Layout::fresh(&after);
        assert_ne!(
            render(&after, &evolved, &settings()),
            render(&after, &fresh, &settings())
        );
        let plan = plan(Some(&before), after, &settings());
        assert_eq!(plan.reload, Some(ReloadReason::NewBackend));
        assert_eq!(plan.next.layout, fresh);
        assert_eq!(
            plan.next.files,
            render(&plan.next.desired, &fresh, &settings())
        );
    }

    #[test]
    fn a_closed_window_holds_the_reload_and_sends_what_runtime_can() {
        let before = applied(state(&[("web", &[1])], &[("a.com", "web")]));
        // A new backend (a reload) and a new endpoint of `web` (runtime).
        let after = state(
            &[("web", &[1, 2]), ("api", &[3])],
            &[("a.com", "web"), ("b.com", "api")],
        );
        let held = plan_within(
            Some(&before),
            after.clone(),
            &settings(),
            ReloadWindow::Closed,
        );
        assert_eq!(held.held, Some(ReloadReason::NewBackend));
        assert_eq!(held.reload, None);
        assert!(!held.runtime.is_empty());
        assert!(
            held.runtime
                .iter()
                .all(|c| matches!(c, RuntimeChange::Server { .. })),
            "{:?}",
            held.runtime
        );
        assert!(
            !held
                .next
                .desired
                .backends
                .contains_key(&backend("api", &[]).0)
        );
        // Open, the same change reloads.
        let open = plan_within(
            Some(&before),
            after.clone(),
            &settings(),
            ReloadWindow::Open,
        );
        assert_eq!(
            (open.reload, open.held),
            (Some(ReloadReason::NewBackend), None)
        );
        // Nothing runtime can take: an empty plan that holds the reload.
        let only_new = state(&[("web", &[1]), ("api", &[3])], &[("a.com", "web")]);
        let nothing = plan_within(Some(&before), only_new, &settings(), ReloadWindow::Closed);
        assert!(nothing.is_empty(), "{nothing:?}");
        assert_eq!(nothing.held, Some(ReloadReason::NewBackend));
        // An unknown state reloads whatever the window.
        let unknown = plan_within(None, after, &settings(), ReloadWindow::Closed);
        assert_eq!(
            (unknown.reload, unknown.held),
            (Some(ReloadReason::UnknownState), None)
        );
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
    fn a_restarted_controller_drops_lingering_backends_without_a_reload() {
        let mut both = state(
            &[("web", &[1]), ("api", &[2])],
            &[("a.com", "web"), ("b.com", "api")],
        );
        // The unused backend verifies its servers with a CA file of its own.
        for (name, backend) in both.backends.iter_mut() {
            if name.as_str() == "ns_api_80" {
                std::sync::Arc::make_mut(&mut backend.options).tls =
                    Some(tugboat_model::features::ServerTls {
                        ca_file: Some("api-ca.pem".into()),
                        client_certificate: None,
                        server_name: "api.ns.svc".into(),
                    });
            }
        }
        both.backend_files.insert(
            "api-ca.pem".into(),
            tugboat_model::tls::Pem::from_checked("-----BEGIN CERTIFICATE-----\n".into()),
        );
        let only_web = state(&[("web", &[1])], &[("a.com", "web")]);
        let running = plan(Some(&applied(both)), only_web.clone(), &settings()).next;
        let config = settings().backends_file(0);
        assert!(
            running
                .files
                .get(&config)
                .is_some_and(|c| c.contains("backend ns_api_80")),
            "the unused backend lingers"
        );
        // A new controller knows the inputs, not what its predecessor kept.
        let adopted = Applied {
            desired: only_web.clone(),
            layout: running.layout.clone(),
            files: running.files.clone(),
        };
        let plan = plan(Some(&adopted), only_web, &settings());
        assert_eq!(plan.reload, None);
        assert!(plan.runtime.is_empty(), "{:?}", plan.runtime);
        assert_eq!(plan.changed, vec![config.clone()]);
        assert_eq!(plan.removed, vec![settings().backend_file("api-ca.pem")]);
        assert!(
            plan.next
                .files
                .get(&config)
                .is_some_and(|c| !c.contains("backend ns_api_80"))
        );
    }

    #[test]
    fn a_rule_keeps_only_the_feature_sets_in_use() {
        let used: BTreeSet<&str> = ["b2", "c3"].into();
        let line = "    http-request deny if { var(txn.fs) -m str a1 b2 c3 } { path /x }";
        assert_eq!(
            without_unused_feature_sets(line, &used).as_deref(),
            Some("    http-request deny if { var(txn.fs) -m str b2 c3 } { path /x }")
        );
        let gone = "    http-request deny if { var(txn.fs) -m str a1 d4 }";
        assert_eq!(without_unused_feature_sets(gone, &used), None);
        let other = "    http-request set-header X-A 1";
        assert_eq!(
            without_unused_feature_sets(other, &used).as_deref(),
            Some(other)
        );
        // Two conditions, one of which would be left without a set: kept as it is.
        let two = "    http-request deny if { var(txn.fs) -m str a1 } || { var(txn.fs) -m str b2 }";
        assert_eq!(
            without_unused_feature_sets(two, &used).as_deref(),
            Some(two)
        );
    }

    /// Files with `main` as the main config and `backends` as the backends' files.
    fn config_files(main: &str, backends: &[&str]) -> RenderedFiles {
        let mut files = RenderedFiles::default();
        files.files.insert(settings().config_file(), main.into());
        for (index, text) in backends.iter().enumerate() {
            files
                .files
                .insert(settings().backends_file(index), (*text).into());
        }
        files
    }

    #[test]
    fn structure_ignores_slots_comments_and_backends_only_the_old_config_has() {
        let main = "frontend f\n    use_backend %[var(txn.b)]\n";
        let a = "# Service ns/a port 80\nbackend a\n    balance roundrobin\n    server s1 10.0.0.1:80\n";
        let a_moved = a.replace("10.0.0.1", "10.0.0.9");
        let b = "# Service ns/b port 80\nbackend b\n    balance roundrobin\n    server s1 10.0.0.2:80\n";
        let old = config_files(main, &[&format!("{a}\n{b}")]);
        let without_b = config_files(main, &[&a_moved]);
        let reason = |old: &RenderedFiles, new: &RenderedFiles| {
            structure_change_reason(old, new, &settings())
        };
        let same = |old: &RenderedFiles, new: &RenderedFiles| reason(old, new).is_none();
        assert!(same(&old, &without_b));
        // A backend only the new config has needs a reload.
        assert_eq!(reason(&without_b, &old), Some(ReloadReason::NewBackend));
        // So does any other line, in a backend both have or elsewhere.
        let other_balance = config_files(main, &[&a.replace("roundrobin", "leastconn")]);
        assert_eq!(
            reason(&old, &other_balance),
            Some(ReloadReason::BackendSettings)
        );
        let other_frontend = config_files(&main.replace("frontend f", "frontend g"), &[a]);
        assert_eq!(reason(&old, &other_frontend), Some(ReloadReason::Binds));
        let other_rule = config_files(&main.replace("txn.b", "txn.c"), &[a]);
        assert_eq!(reason(&old, &other_rule), Some(ReloadReason::FrontendRules));
        // The rules of a feature set no route uses (kept by the controller before a
        // restart) are left out, like a backend only the old config has; a rule of a
        // feature set the new config uses is not.
        let limit = |id: &str, size: u32| {
            format!(
                "    http-request deny deny_status 413 if {{ var(txn.fs) -m str {id} }} \
                 {{ req.hdr_val(content-length) gt {size} }}\n"
            )
        };
        let with_sets = |sets: &[(&str, u32)]| {
            let rules: String = sets.iter().map(|(id, size)| limit(id, *size)).collect();
            config_files(&format!("{main}{rules}"), &[a])
        };
        let kept = with_sets(&[("f1", 1024), ("f2", 2048)]);
        assert!(same(&kept, &with_sets(&[("f1", 1024)])));
        assert_eq!(
            reason(&kept, &with_sets(&[("f1", 4096)])),
            Some(ReloadReason::FrontendRules)
        );
        assert_eq!(
            reason(&with_sets(&[("f1", 1024)]), &kept),
            Some(ReloadReason::FrontendRules)
        );
        let other_bind = config_files(&format!("{main}    bind :80\n"), &[a]);
        assert_eq!(reason(&old, &other_bind), Some(ReloadReason::Binds));
        let global = config_files(&format!("global\n    maxconn 10\n{main}"), &[a]);
        let other_global = config_files(&format!("global\n    maxconn 20\n{main}"), &[a]);
        assert_eq!(
            reason(&global, &other_global),
            Some(ReloadReason::GlobalSettings)
        );
        // The first reason in order names a change that has several.
        let both = config_files(
            &format!("global\n    maxconn 20\n{main}"),
            &[&a.replace("roundrobin", "leastconn")],
        );
        assert_eq!(reason(&global, &both), Some(ReloadReason::GlobalSettings));
        let other_comment =
            config_files(main, &[&a.replace("# Service ns/a", "# Service of ns/a")]);
        assert!(same(&without_b, &other_comment));
        // Backends that move to another file (their number changed) are the same.
        let spread = config_files(main, &[b, &a_moved]);
        assert!(same(&old, &spread));
        // A section of the main config only the old one has (a stick table's backend).
        let with_table = config_files(
            &format!("{main}\nbackend rates\n    stick-table type ip size 1k\n"),
            &[a],
        );
        assert!(same(&with_table, &without_b));
        assert_eq!(
            reason(&without_b, &with_table),
            Some(ReloadReason::NewBackend)
        );
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

    /// haproxy as far as a batch of runtime commands changes it: which servers take new
    /// requests, and the map entries.
    #[derive(Debug, Default)]
    struct Simulated {
        /// (backend, server) -> (address, ready, weight).
        servers: BTreeMap<(String, String), (String, bool, u32)>,
        maps: BTreeMap<String, BTreeMap<String, String>>,
    }

    impl Simulated {
        fn of(applied: &Applied, settings: &RenderSettings) -> Self {
            let mut simulated = Simulated::default();
            for (backend, slots) in &applied.layout.backends {
                for (slot, server) in slots.iter().enumerate() {
                    let state = match server {
                        Some(s) => (s.endpoint.to_string(), true, u32::from(!s.draining)),
                        None => ("parked".to_string(), false, 1),
                    };
                    simulated.servers.insert(
                        (backend.to_string(), crate::layout::server_name(slot)),
                        state,
                    );
                }
            }
            for map in settings.maps() {
                let text = applied.files.get(&map).unwrap_or("");
                let entries = crate::runtime::parse_map(text)
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                simulated.maps.insert(map.display().to_string(), entries);
            }
            simulated
        }

        fn run(&mut self, command: &str) {
            let mut lines = command.lines();
            let first = lines.next().unwrap_or("");
            let words: Vec<&str> = first.split(' ').collect();
            let server = |name: &str| -> (String, String) {
                let (backend, server) = name.split_once('/').expect("backend/server");
                (backend.to_string(), server.to_string())
            };
            match words.as_slice() {
                ["@1", "add", "server", name, addr, rest @ ..] => {
                    let weight = if rest.windows(2).any(|w| w == ["weight", "0"]) {
                        0
                    } else {
                        1
                    };
                    let previous = self
                        .servers
                        .insert(server(name), (addr.to_string(), false, weight));
                    assert!(previous.is_none(), "{name} added twice");
                }
                ["@1", "enable", "server", name] => self.get(server(name)).1 = true,
                ["@1", "enable", "health", _] => {}
                ["@1", "set", "server", name, "state", "ready"] => {
                    self.get(server(name)).1 = true;
                }
                ["@1", "set", "server", name, "state", "maint"] => {
                    self.get(server(name)).1 = false;
                }
                ["@1", "set", "server", name, "addr", address, "port", port] => {
                    self.get(server(name)).0 = format!("{address}:{port}");
                }
                ["@1", "set", "weight", name, weight] => {
                    self.get(server(name)).2 = weight.parse().expect("weight");
                }
                ["@1", "add", "map", map, "<<"] => {
                    let entries = self.maps.entry(map.to_string()).or_default();
                    for line in lines.filter(|l| !l.is_empty()) {
                        let (key, value) = line.split_once(' ').expect("key value");
                        entries.entry(key.to_string()).or_insert(value.to_string());
                    }
                }
                ["@1", "set", "map", map, key, value] => {
                    let entry = self.maps.entry(map.to_string()).or_default();
                    let old = entry.insert(key.to_string(), value.to_string());
                    assert!(old.is_some(), "set map of a missing key {key}");
                }
                ["@1", "del", "map", map, key] => {
                    self.maps.entry(map.to_string()).or_default().remove(*key);
                }
                _ => panic!("unexpected command: {first}"),
            }
        }

        fn get(&mut self, server: (String, String)) -> &mut (String, bool, u32) {
            self.servers
                .get_mut(&server)
                .unwrap_or_else(|| panic!("no server {server:?}"))
        }

        /// The endpoints that take new requests, per backend.
        fn serving(&self) -> BTreeMap<String, BTreeSet<String>> {
            let mut serving: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for ((backend, _), (address, ready, weight)) in &self.servers {
                let entry = serving.entry(backend.clone()).or_default();
                if *ready && *weight > 0 {
                    entry.insert(address.clone());
                }
            }
            serving
        }

        /// The map value a request for `host` and `path` finds: exact key, then the
        /// longest prefix key, as the routing rules look them up.
        fn route(&self, settings: &RenderSettings, host: &str, path: &str) -> Option<String> {
            let wanted = format!("{host}{path}");
            let exact = &self.maps[&settings.exact_map().display().to_string()];
            if let Some(value) = exact.get(&wanted) {
                return Some(value.clone());
            }
            let prefix = &self.maps[&settings.prefix_map().display().to_string()];
            prefix
                .iter()
                .filter(|(key, _)| wanted.starts_with(key.as_str()))
                .max_by_key(|(key, _)| key.len())
                .map(|(_, value)| value.clone())
        }
    }

    const PROBES: [(&str, &str); 8] = [
        ("a.com", "/"),
        ("a.com", "/p"),
        ("a.com", "/p/x"),
        ("a.com", "/px"),
        ("b.com", "/"),
        ("b.com", "/p"),
        ("b.com", "/p/x"),
        ("b.com", "/q"),
    ];

    /// One generated state: endpoints of `web` and `api` (ready, then draining), and
    /// routes (host index, path, exact?, to `api`?).
    type Generated = (Vec<u8>, Vec<u8>, Vec<u8>, Vec<(usize, bool, bool, bool)>);

    fn generated_state((web, api, draining, routes): &Generated) -> Desired {
        let mut desired = state(&[("web", web), ("api", api)], &[]);
        if let Some((_, backend)) = desired
            .backends
            .iter_mut()
            .find(|(_, b)| &*b.service.name == "web")
        {
            backend.draining = draining
                .iter()
                .filter(|d| !web.contains(d))
                .map(|last| Endpoint {
                    address: Ipv4Addr::new(10, 0, 0, *last).into(),
                    port: 8080,
                })
                .collect();
        }
        desired.routes = routes
            .iter()
            .map(|(host, deep, exact, to_api)| {
                let (name, _) = backend(if *to_api { "api" } else { "web" }, &[]);
                let host = ["a.com", "b.com"][*host];
                let mut route = route(host, &name);
                let path = if *deep { "/p" } else { "/" }.to_string();
                route.path = if *exact {
                    PathMatch::Exact(path)
                } else {
                    PathMatch::Prefix(path)
                };
                route
            })
            .collect();
        desired
    }

    fn generated() -> impl proptest::strategy::Strategy<Value = Generated> {
        use proptest::collection::vec;
        (
            vec(1u8..=14, 1..=10),
            vec(100u8..=104, 1..=3),
            vec(1u8..=14, 0..=3),
            vec(
                (
                    0usize..2,
                    proptest::bool::ANY,
                    proptest::bool::ANY,
                    proptest::bool::ANY,
                ),
                0..=4,
            ),
        )
    }

    /// The state with its routes as the model makes them: sorted by host and path, one
    /// per key (the first of a key wins).
    fn sorted_routes(mut desired: Desired) -> Desired {
        desired
            .routes
            .sort_by(|a, b| (&a.host, &a.path).cmp(&(&b.host, &b.path)));
        desired
            .routes
            .dedup_by(|a, b| (&a.host, &a.path) == (&b.host, &b.path));
        desired
    }

    /// The state with certificate `site` holding `pem` for `a.com`.
    fn with_certificate(mut desired: Desired, pem: &str) -> Desired {
        desired.certificates.insert(
            "ns_site".into(),
            tugboat_model::TlsCertificate {
                name: "ns_site".into(),
                pem: tugboat_model::tls::Pem::from_checked(pem.into()),
                hosts: vec!["a.com".into()],
            },
        );
        desired
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

        /// A patch planned on its own gives the plan of the whole patched state: the same
        /// files, slots and state, the same runtime changes, no reload; or it declines.
        #[test]
        fn a_patch_plans_what_the_whole_state_plans(
            states in proptest::collection::vec(generated(), 2..=4),
            certs in proptest::collection::vec(0usize..3, 4),
            route_changes in proptest::collection::vec(proptest::bool::ANY, 4),
        ) {
            let settings = settings();
            let pem = |i: usize| format!("PEM {i}\n");
            let mut current = applied(with_certificate(
                sorted_routes(generated_state(&states[0])),
                &pem(certs[0]),
            ));
            for (i, next) in states[1..].iter().enumerate() {
                // Endpoints and certificates change, and the routes of the Ingress or not.
                let mut whole =
                    with_certificate(sorted_routes(generated_state(next)), &pem(certs[i + 1]));
                let routes = if route_changes[i] {
                    let change = IngressRoutes {
                        before: current
                            .desired
                            .routes
                            .iter()
                            .map(|r| (r.host.clone(), r.path.clone()))
                            .collect(),
                        after: whole.routes.clone(),
                    };
                    BTreeMap::from([(ObjectKey::new("ns", "ing"), change)])
                } else {
                    whole.routes = current.desired.routes.clone();
                    BTreeMap::new()
                };
                let patch = Patch {
                    routes,
                    endpoints: whole
                        .backends
                        .iter()
                        .map(|(name, b)| (name.clone(), (b.endpoints.clone(), b.draining.clone())))
                        .collect(),
                    certificates: whole
                        .certificates
                        .iter()
                        .map(|(name, c)| (name.clone(), c.pem.clone()))
                        .collect(),
                    ..Patch::default()
                };
                let expected = plan(Some(&current), whole, &settings);
                let paths = crate::render::rendered_paths(&expected.next.desired, &settings);
                let rendered: std::collections::BTreeSet<PathBuf> = expected
                    .next
                    .files
                    .files
                    .keys()
                    .filter(|path| !settings.is_backends_file(path))
                    .cloned()
                    .collect();
                proptest::prop_assert_eq!(paths, rendered);
                match plan_patch(current.clone(), &patch, &settings) {
                    Ok(patched) => {
                        proptest::prop_assert_eq!(&patched.next, &expected.next);
                        proptest::prop_assert_eq!(&patched.runtime, &expected.runtime);
                        proptest::prop_assert_eq!(patched.reload, None);
                        let sorted = |mut paths: Vec<PathBuf>| { paths.sort(); paths };
                        proptest::prop_assert_eq!(sorted(patched.changed), sorted(expected.changed));
                    }
                    Err(back) => {
                        proptest::prop_assert_eq!(&back.applied, &current);
                        proptest::prop_assert!(expected.reload.is_some(), "declined a runtime plan");
                    }
                }
                current = expected.next;
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

        /// Whatever the endpoints and routes before and after, a runtime batch never
        /// leaves a backend that serves before and after without a server taking new
        /// requests, nor a request that finds a route before and after without one.
        #[test]
        fn runtime_batches_make_before_they_break(states in proptest::collection::vec(generated(), 2..=5)) {
            let settings = settings();
            let mut current = applied(generated_state(&states[0]));
            for next in &states[1..] {
                let plan = plan(Some(&current), generated_state(next), &settings);
                proptest::prop_assert_eq!(plan.reload, None);
                let mut haproxy = Simulated::of(&current, &settings);
                let before_serving = haproxy.serving();
                let after_serving = Simulated::of(&plan.next, &settings).serving();
                let both: Vec<String> = before_serving
                    .keys()
                    .filter(|b| !before_serving[*b].is_empty() && !after_serving[*b].is_empty())
                    .cloned()
                    .collect();
                let routed = |haproxy: &Simulated| -> Vec<bool> {
                    PROBES
                        .iter()
                        .map(|(host, path)| haproxy.route(&settings, host, path).is_some())
                        .collect()
                };
                let routed_before = routed(&haproxy);
                let routed_after = routed(&Simulated::of(&plan.next, &settings));
                for step in plan.runtime.iter().flat_map(|c| c.steps()) {
                    haproxy.run(&step.command);
                    let serving = haproxy.serving();
                    for backend in &both {
                        proptest::prop_assert!(
                            !serving[backend].is_empty(),
                            "{} has no server after '{}'", backend, step.command
                        );
                    }
                    let routed = routed(&haproxy);
                    for (i, probe) in PROBES.iter().enumerate() {
                        proptest::prop_assert!(
                            routed[i] || !(routed_before[i] && routed_after[i]),
                            "{:?} has no route after '{}'", probe, step.command
                        );
                    }
                }
                // And the batch gets haproxy exactly where the files say.
                proptest::prop_assert_eq!(haproxy.serving(), after_serving);
                proptest::prop_assert_eq!(routed(&haproxy), routed_after);
                current = plan.next;
            }
        }
    }

    /// A generated state, with (when `extra` has endpoints) a backend haproxy may not
    /// have yet, and a route to it; `hashed`: `web` balances by source address, so a
    /// server added to it needs a reload.
    fn with_extra_backend(
        generated: &Generated,
        extra: &Option<(Vec<u8>, bool)>,
        hashed: bool,
    ) -> Desired {
        let mut desired = sorted_routes(generated_state(generated));
        if let Some((endpoints, routed)) = extra {
            let (name, backend) = backend("extra", endpoints);
            if *routed {
                desired.routes.push(route("c.com", &name));
            }
            desired.backends.insert(name, backend);
        }
        if hashed && let Some(web) = desired.backends.get_mut(&backend("web", &[]).0) {
            std::sync::Arc::make_mut(&mut web.options).balance =
                Some(tugboat_model::features::Balance::Source);
        }
        desired
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

        /// With the window closed, a change of structure plans what planning the runtime
        /// projection of the whole planned state plans, held (an empty plan when that
        /// needs a reload too); with it open, what [`plan`] plans.
        #[test]
        fn a_closed_window_plans_the_runtime_projection_of_the_whole_state(
            before in generated(),
            after in generated(),
            same_endpoints_and_routes in proptest::bool::ANY,
            hashed in proptest::bool::ANY,
            extra in proptest::collection::vec(
                proptest::option::of((proptest::collection::vec(1u8..=14, 1..=3), proptest::bool::ANY)),
                2,
            ),
        ) {
            let settings = settings();
            let current = applied(with_extra_backend(&before, &extra[0], hashed));
            let after = if same_endpoints_and_routes { &before } else { &after };
            let desired = with_extra_backend(after, &extra[1], hashed);
            let whole = plan(Some(&current), desired.clone(), &settings);
            let open = plan_within(Some(&current), desired.clone(), &settings, ReloadWindow::Open);
            proptest::prop_assert_eq!(&open, &whole);
            let closed = plan_within(Some(&current), desired, &settings, ReloadWindow::Closed);
            if whole.reload.is_none() {
                proptest::prop_assert_eq!(&closed, &whole);
                return Ok(());
            }
            let projected = runtime_projection(&current.desired, &whole.next.desired);
            let expected = plan(Some(&current), projected, &settings);
            proptest::prop_assert_eq!(closed.held, whole.reload);
            if expected.reload.is_some() {
                proptest::prop_assert!(closed.is_empty(), "{:?}", closed);
            } else {
                proptest::prop_assert_eq!(Plan { held: None, ..closed }, expected);
            }
        }
    }
}
