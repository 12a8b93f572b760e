//! The model kept between updates, so that a change costs what it touches.
//!
//! [`Model::update`] compares the new snapshot with the one it last saw (persistent maps:
//! the parts they share are skipped, so the comparison costs what changed) and answers
//! with the smallest thing that brings the last output up to date:
//! - a [`Patch`] when only EndpointSlices changed (the endpoints of the backends of their
//!   Services), Secrets used only as `spec.tls` certificates whose check still passes
//!   (the certificate's PEM), or Ingresses whose change moves only their own routes
//!   (and the backends they start or stop using: see `route_patch.rs`);
//! - a full [`build`](crate::build) otherwise ([`Rebuilt`] says why), with the TLS
//!   Secrets that did not change taken as parsed before.
//!
//! A patch applied to the previous output gives exactly what a full build gives: the
//! property test below checks it over random sequences of changes.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::build::{ParsedSecrets, Reads, SecretUse, build_with, slice_endpoints};
use crate::desired::{BackendName, ServicePortRef};
pub use crate::patch::{IngressRoutes, Patch, replace_routes};
use crate::route_patch::{NeedsBuild, RouteChanges, RoutesSeen};
use crate::snapshot::{ObjectKey, Snapshot, diff_key, diff_values, same_objects, stored_key};
use crate::{BuildOutput, Settings};

/// Why an update was built from scratch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rebuilt {
    /// Nothing was built before (or the caller asked for a full build).
    First,
    /// The operator's settings changed.
    Settings,
    /// A certificate's validity period began or ended.
    Validity,
    /// Ingresses changed in a way a patch cannot carry; why.
    Ingresses(&'static str),
    Services,
    ConfigMaps,
    /// A Secret used for more than a `spec.tls` certificate, or one whose check
    /// changed its outcome.
    Secrets,
    /// A Gateway API object (or a Namespace's labels, which listeners select on).
    GatewayApi,
}

impl Rebuilt {
    pub fn as_str(self) -> &'static str {
        match self {
            Rebuilt::First => "first",
            Rebuilt::Settings => "settings",
            Rebuilt::Validity => "certificate-validity",
            Rebuilt::Ingresses(_) => "ingresses",
            Rebuilt::Services => "services",
            Rebuilt::ConfigMaps => "configmaps",
            Rebuilt::Secrets => "secrets",
            Rebuilt::GatewayApi => "gateway-api",
        }
    }

    /// What the reason does not say by itself: why the changed Ingresses could not be
    /// patched.
    pub fn detail(self) -> Option<&'static str> {
        match self {
            Rebuilt::Ingresses(why) => Some(why),
            _ => None,
        }
    }
}

/// The outcome of [`Model::update`].
#[derive(Debug)]
pub enum Update {
    /// Apply this to the previous output.
    Patch(Patch),
    /// A new output, built from scratch for this reason.
    Full(Box<BuildOutput>, Rebuilt),
}

/// What the last update saw, and where a change lands.
struct Seen {
    snapshot: Snapshot,
    settings: Settings,
    reads: Reads,
    /// EndpointSlices by the Service they belong to (most Services have one: a `Vec`,
    /// a tenth of the memory of a set).
    slices_of_service: HashMap<ObjectKey, Vec<ObjectKey>>,
    /// The backends of each Service: their name and Service port.
    backends_of_service: HashMap<ObjectKey, Vec<(BackendName, ServicePortRef)>>,
    /// What Ingress changes are checked against (see [`crate::route_patch`]).
    routes: RoutesSeen,
}

/// The model kept between updates (see the module).
#[derive(Default)]
pub struct Model {
    seen: Option<Seen>,
    parsed: ParsedSecrets,
}

/// The key of the Service a slice belongs to (the services' own key when there is one).
fn service_of(
    snapshot: &Snapshot,
    key: &ObjectKey,
    slice: &crate::objects::EndpointSlice,
) -> Option<ObjectKey> {
    slice
        .service_name()
        .map(|service| stored_key(&snapshot.services, ObjectKey::new(&key.namespace, service)))
}

impl Model {
    /// Brings the model to `snapshot` and `settings`: a patch of the last output when
    /// the change allows one, else a full build.
    pub fn update(&mut self, snapshot: &Snapshot, settings: &Settings) -> Update {
        match self.patch(snapshot, settings) {
            Ok(patch) => Update::Patch(patch),
            Err(reason) => Update::Full(Box::new(self.rebuild(snapshot, settings)), reason),
        }
    }

    /// A full build, whatever changed (the caller lost the previous output).
    pub fn rebuild(&mut self, snapshot: &Snapshot, settings: &Settings) -> BuildOutput {
        let (output, mut reads) = build_with(snapshot, settings, &mut self.parsed);
        let routes = RoutesSeen::of(&output, &mut reads);
        let mut slices_of_service: HashMap<ObjectKey, Vec<ObjectKey>> = HashMap::new();
        for (key, slice) in &snapshot.endpoint_slices {
            if let Some(service) = service_of(snapshot, key, slice) {
                slices_of_service
                    .entry(service)
                    .or_default()
                    .push(key.clone());
            }
        }
        let mut backends_of_service: HashMap<ObjectKey, Vec<(BackendName, ServicePortRef)>> =
            HashMap::new();
        for (name, backend) in &output.desired.backends {
            backends_of_service
                .entry(backend.service.clone())
                .or_default()
                .push((name.clone(), backend.port.clone()));
        }
        // Most Services have one slice and one backend: a list's first push makes room
        // for four.
        slices_of_service.values_mut().for_each(Vec::shrink_to_fit);
        backends_of_service
            .values_mut()
            .for_each(Vec::shrink_to_fit);
        self.seen = Some(Seen {
            snapshot: snapshot.clone(),
            settings: settings.clone(),
            reads,
            slices_of_service,
            backends_of_service,
            routes,
        });
        output
    }

    fn patch(&mut self, snapshot: &Snapshot, settings: &Settings) -> Result<Patch, Rebuilt> {
        let seen = self.seen.as_mut().ok_or(Rebuilt::First)?;
        let now = settings.now;
        if !seen.settings.same_flags(settings) {
            return Err(Rebuilt::Settings);
        }
        if seen.reads.next_validity_change.is_some_and(|at| now >= at) {
            return Err(Rebuilt::Validity);
        }
        let ingresses_changed = !same_objects(&seen.snapshot.ingresses, &snapshot.ingresses);
        if !same_objects(&seen.snapshot.services, &snapshot.services) {
            return Err(Rebuilt::Services);
        }
        if !same_objects(&seen.snapshot.config_maps, &snapshot.config_maps) {
            return Err(Rebuilt::ConfigMaps);
        }
        if !crate::gateway::unchanged_objects(&seen.snapshot, snapshot) {
            return Err(Rebuilt::GatewayApi);
        }
        let mut patch = Patch::default();
        if ingresses_changed {
            // Built whole: Ingress and Secret changes together (not worked out one
            // against the other), and Ingresses beside HTTPRoutes (they share route
            // keys).
            if !same_objects(&seen.snapshot.secrets, &snapshot.secrets) {
                return Err(Rebuilt::Ingresses("Secrets changed with them"));
            }
            if !snapshot.http_routes.is_empty() {
                return Err(Rebuilt::Ingresses("HTTPRoutes share their route keys"));
            }
            if !snapshot.tls_routes.is_empty() {
                return Err(Rebuilt::Ingresses(
                    "TLSRoutes share their passthrough hosts",
                ));
            }
            let Seen {
                snapshot: before,
                settings: settings_before,
                reads,
                slices_of_service,
                backends_of_service,
                routes,
            } = seen;
            let changes = RouteChanges {
                before,
                settings_before,
                after: snapshot,
                settings,
                slices_of_service,
            };
            changes
                .patch(
                    &mut self.parsed,
                    reads,
                    routes,
                    backends_of_service,
                    &mut patch,
                )
                .map_err(|NeedsBuild(why)| Rebuilt::Ingresses(why))?;
        }
        // Secrets first: they are the only part that can still call for a full build.
        if !same_objects(&seen.snapshot.secrets, &snapshot.secrets) {
            for item in seen.snapshot.secrets.diff(&snapshot.secrets) {
                let key = diff_key(&item);
                match seen.reads.secrets.get(key) {
                    None => {}
                    Some(SecretUse::Other) => return Err(Rebuilt::Secrets),
                    Some(SecretUse::Certificate) => {
                        let secret = snapshot.secrets.get(key).ok_or(Rebuilt::Secrets)?;
                        let old = seen
                            .snapshot
                            .secrets
                            .get(key)
                            .and_then(|old| self.parsed.parse(key, old).ok())
                            .and_then(|old| old.at(now).ok())
                            .ok_or(Rebuilt::Secrets)?;
                        let parsed = self
                            .parsed
                            .parse(key, secret)
                            .map_err(|_| Rebuilt::Secrets)?;
                        let checked = parsed.at(now).map_err(|_| Rebuilt::Secrets)?;
                        if let Some(at) = parsed.next_change(now) {
                            let next = &mut seen.reads.next_validity_change;
                            *next = Some(next.map_or(at, |t| t.min(at)));
                        }
                        if checked.pem != old.pem {
                            patch
                                .certificates
                                .insert(format!("{}_{}", key.namespace, key.name), checked.pem);
                        }
                    }
                }
            }
        }
        let mut services = BTreeSet::new();
        for item in seen
            .snapshot
            .endpoint_slices
            .diff(&snapshot.endpoint_slices)
        {
            let key = diff_key(&item);
            let (old, new) = diff_values(&item);
            if let Some(service) = old.and_then(|slice| service_of(snapshot, key, slice)) {
                if let Some(slices) = seen.slices_of_service.get_mut(&service) {
                    slices.retain(|slice| slice != key);
                }
                services.insert(service);
            }
            if let Some(service) = new.and_then(|slice| service_of(snapshot, key, slice)) {
                let slices = seen.slices_of_service.entry(service.clone()).or_default();
                if !slices.contains(key) {
                    slices.push(key.clone());
                }
                services.insert(service);
            }
        }
        for service in &services {
            let Some(backends) = seen.backends_of_service.get(service) else {
                continue;
            };
            let slice_keys = seen.slices_of_service.get(service);
            for (name, port) in backends {
                let slices = slice_keys
                    .into_iter()
                    .flatten()
                    .filter_map(|key| snapshot.endpoint_slices.get(key))
                    .map(Arc::as_ref);
                if let Some(endpoints) = slice_endpoints(snapshot, slices, service, port) {
                    patch.endpoints.insert(name.clone(), endpoints);
                }
            }
        }
        seen.snapshot = snapshot.clone();
        seen.settings = settings.clone();
        Ok(patch)
    }
}
