//! Backends: a Service port resolved to its ready and draining endpoints through the
//! Service's EndpointSlices, or to an ExternalName, with the options its keys give; and
//! the default backend of `--default-backend-service`.

use crate::annotations::{self, Layer, Scope, read_keys};
use crate::desired::{Backend, BackendName, Endpoint, ServicePortRef};
use crate::features::{BackendOptions, CanaryAffinity, PersistenceCookie};
use crate::objects::{EndpointSlice, Service, ServicePort, ServiceSpec};
use crate::problem::{ObjectProblem, ObjectRef, ProblemReason};
use crate::snapshot::{ObjectKey, Snapshot, stored_key};
use crate::validate;
use k8s_openapi::api::networking::v1::{IngressBackend, IngressServiceBackend, ServiceBackendPort};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::shared::Shared;
use super::tls::Tls;

/// The backends part of a build.
pub(super) struct Endpoints<'a> {
    /// The EndpointSlices of each Service.
    slices_by_service: HashMap<ObjectKey, Vec<&'a EndpointSlice>>,
    backends: BTreeMap<BackendName, Backend>,
    /// Why a backend has no endpoints, told to every object that uses it.
    resolution_errors: HashMap<BackendName, ResolutionError>,
    /// The default backend options, shared by every backend that has them.
    default_options: Arc<BackendOptions>,
    /// The keys of each Service, read once.
    service_layers: HashMap<ObjectKey, Layer>,
}

impl<'a> Endpoints<'a> {
    pub(super) fn new(slices_by_service: HashMap<ObjectKey, Vec<&'a EndpointSlice>>) -> Self {
        Endpoints {
            slices_by_service,
            backends: BTreeMap::new(),
            resolution_errors: HashMap::new(),
            default_options: Arc::default(),
            service_layers: HashMap::new(),
        }
    }

    /// The backends built.
    pub(super) fn into_backends(self) -> BTreeMap<BackendName, Backend> {
        self.backends
    }

    /// A backend built.
    pub(super) fn built(&self, name: &BackendName) -> Option<&Backend> {
        self.backends.get(name)
    }

    /// The Service of a backend built.
    pub(super) fn service_of(&self, name: &BackendName) -> Option<&ObjectKey> {
        self.backends.get(name).map(|backend| &backend.service)
    }

    /// The backend of `--default-backend-service` (its first port), if set and usable.
    pub(super) fn default_backend_service(
        &mut self,
        shared: &mut Shared<'a>,
    ) -> Option<BackendName> {
        let key = shared.settings.default_backend_service.clone()?;
        let object = ObjectRef::of("Service", &key);
        let first_port = shared
            .snapshot
            .services
            .get(&key)
            .and_then(|s| s.spec.as_ref())
            .and_then(|spec| spec.ports.as_ref())
            .and_then(|ports| ports.first())
            .and_then(|p| validate::port_number(p.port).ok());
        let Some(port) = first_port else {
            shared.problems.push(ObjectProblem {
                object,
                field: "spec.ports".into(),
                reason: ProblemReason::ServiceNotFound,
                message: "the --default-backend-service Service does not exist or has no \
                          port: unmatched requests get the built-in 404"
                    .into(),
            });
            return None;
        };
        let port = ServicePortRef::Number(port);
        let name = BackendName::for_service_port(&key, &port).ok()?;
        shared
            .reads
            .backend_use
            .entry(name.clone())
            .or_default()
            .flag = true;
        if !self.backends.contains_key(&name) {
            let resolved = self
                .resolve_endpoints(shared, &key, &port)
                .unwrap_or_default();
            let backend = resolved.into_backend(key, port, self.default_options.clone());
            self.backends.insert(name.clone(), backend);
        }
        Some(name)
    }

    /// The backend an IngressBackend (`field` of the object of `layer`, whose keys
    /// apply) refers to, created on first use; `owner` is the Ingress (or route) that
    /// names it. `None` when the reference itself is invalid (the route is then left
    /// out).
    pub(super) fn backend(
        &mut self,
        shared: &mut Shared<'a>,
        tls: &mut Tls,
        owner: &ObjectKey,
        reference: &IngressBackend,
        field: &str,
        layer: &Layer,
    ) -> Option<BackendName> {
        let object = &layer.object;
        let Some(service) = &reference.service else {
            let message = if reference.resource.is_some() {
                "resource backends are not supported: use a Service backend"
            } else {
                "a backend needs service.name and service.port"
            };
            shared.problem(object, field.to_string(), message.to_string());
            return None;
        };
        let service_key = stored_key(
            &shared.snapshot.services,
            ObjectKey::new(&owner.namespace, &service.name),
        );
        if let Err(err) = validate::dns_label(&service.name) {
            shared.problem(object, format!("{field}.service.name"), err.0);
            return None;
        }
        let port = match parse_port_ref(service.port.as_ref()) {
            Ok(port) => port,
            Err((subfield, message)) => {
                shared.problem(object, format!("{field}.service.port{subfield}"), message);
                return None;
            }
        };
        let name = match BackendName::for_service_port(&service_key, &port) {
            Ok(name) => name,
            Err(err) => {
                shared.problem(object, format!("{field}.service"), err.0);
                return None;
            }
        };
        if !self.backends.contains_key(&name) {
            let (resolved, error) = match self.resolve_endpoints(shared, &service_key, &port) {
                Ok(resolved) => (resolved, None),
                Err(error) => (Resolved::default(), Some(error)),
            };
            self.backends.insert(
                name.clone(),
                resolved.into_backend(service_key.clone(), port, self.default_options.clone()),
            );
            if let Some(error) = error {
                self.resolution_errors.insert(name.clone(), error);
            }
        }
        if let Some(options) = self.backend_options(shared, tls, &name, &service_key, owner, layer)
            && let Some(backend) = self.backends.get_mut(&name)
        {
            backend.options = if options == *self.default_options {
                self.default_options.clone()
            } else {
                Arc::new(options)
            };
        }
        if let Some(error) = self.resolution_errors.get(&name).cloned() {
            shared.problems.push(ObjectProblem {
                object: object.clone(),
                field: format!("{field}.service"),
                reason: error.reason,
                message: error.message,
            });
        }
        Some(name)
    }

    /// The backend of the Service `name` of the `default-backend` key of the Ingress
    /// `ingress` (whose keys `layer` holds): its first port, as ingress-nginx takes it.
    pub(super) fn default_backend_key(
        &mut self,
        shared: &mut Shared<'a>,
        tls: &mut Tls,
        ingress: &ObjectKey,
        layer: &Layer,
        name: String,
    ) -> Option<BackendName> {
        let field = layer
            .field_of(&annotations::keys::DEFAULT_BACKEND.spec)
            .unwrap_or("metadata.annotations")
            .to_string();
        let service = ObjectKey::new(&ingress.namespace, &name);
        let first_port = shared
            .snapshot
            .services
            .get(&service)
            .and_then(|s| s.spec.as_ref())
            .and_then(|spec| spec.ports.as_ref())
            .and_then(|ports| ports.first())
            .map(|port| port.port);
        let Some(port) = first_port else {
            shared.problems.push(ObjectProblem {
                object: layer.object.clone(),
                field,
                reason: ProblemReason::ServiceNotFound,
                message: format!(
                    "key 'default-backend': Service {service} does not exist or has no port; \
                     the rules keep their own backend"
                ),
            });
            return None;
        };
        let reference = IngressBackend {
            service: Some(IngressServiceBackend {
                name,
                port: Some(ServiceBackendPort {
                    number: Some(port),
                    name: None,
                }),
            }),
            resource: None,
        };
        self.backend(shared, tls, ingress, &reference, &field, layer)
    }

    /// The keys of a Service, read once.
    pub(super) fn service_layer<'s>(
        &'s mut self,
        shared: &mut Shared<'a>,
        service: &ObjectKey,
    ) -> &'s Layer {
        if !self.service_layers.contains_key(service) {
            let object = ObjectRef::of("Service", service);
            let annotations = shared
                .snapshot
                .services
                .get(service)
                .and_then(|s| s.metadata.annotations.as_ref());
            let layer = Layer::from_annotations(
                object,
                Scope::Service,
                annotations,
                shared.settings.unsupported_access,
                &mut shared.problems,
            );
            self.service_layers.insert(service.clone(), layer);
        }
        match self.service_layers.get(service) {
            Some(layer) => layer,
            None => shared.config_map_layer,
        }
    }

    /// The options of a backend: Service keys, then the Ingress', then the ConfigMap's.
    /// The oldest Ingress using a backend sets them; another that disagrees is told.
    fn backend_options(
        &mut self,
        shared: &mut Shared<'a>,
        tls: &mut Tls,
        name: &BackendName,
        service: &ObjectKey,
        ingress: &ObjectKey,
        ingress_layer: &Layer,
    ) -> Option<BackendOptions> {
        let service_layer = self.service_layer(shared, service).clone();
        let layers = vec![&service_layer, ingress_layer, shared.config_map_layer];
        let allow_snippets = shared.settings.allow_snippets;
        let (mut options, lookups) = read_keys(layers, &mut shared.problems, |resolver| {
            annotations::backend_options(resolver, allow_snippets)
        });
        let object = ingress_layer.object.clone();
        if let Some(backend_tls) = options.tls.as_mut() {
            backend_tls.server_name = lookups
                .server_name
                .clone()
                .unwrap_or_else(|| format!("{}.{}.svc", service.name, service.namespace));
            if lookups.verify_without_ca {
                shared.problems.push(ObjectProblem {
                    object: object.clone(),
                    field: "metadata.annotations".into(),
                    reason: ProblemReason::InvalidField,
                    message: "server-verify is true but no server-ca is set: the backend \
                              answers 503 rather than talk to unverified servers"
                        .into(),
                });
                options.blocked = true;
            }
            // The object and field that set a key, for a problem about its value.
            let layers = [&service_layer, ingress_layer, shared.config_map_layer];
            let set_by = |key: &annotations::KeySpec| {
                annotations::set_by(&layers, key)
                    .unwrap_or_else(|| (object.clone(), "metadata.annotations".into()))
            };
            let ca_source = set_by(&annotations::keys::SERVER_CA.spec);
            let crt_source = set_by(&annotations::keys::SERVER_CRT.spec);
            if let Some(secret) = &lookups.server_ca {
                backend_tls.ca_file =
                    tls.backend_file(shared, &ca_source, &service.namespace, secret, true);
                options.blocked |= backend_tls.ca_file.is_none();
            }
            if let Some(secret) = &lookups.server_crt {
                backend_tls.client_certificate =
                    tls.backend_file(shared, &crt_source, &service.namespace, secret, false);
                options.blocked |= backend_tls.client_certificate.is_none();
            }
        }
        let owner = shared
            .reads
            .backend_use
            .get(name)
            .and_then(|usage| usage.ingresses.first());
        match owner {
            None => Some(options),
            Some(owner) => {
                let current = self.backends.get(name).map(|b| b.options.as_ref());
                if current != Some(&options) && owner != ingress {
                    let message = format!(
                        "the backend keys of Service {service} are already set differently \
                         by the older Ingress {owner}; set them on the Service to share them"
                    );
                    shared.problems.push(ObjectProblem {
                        object: ingress_layer.object.clone(),
                        field: "metadata.annotations".into(),
                        reason: ProblemReason::RouteConflict,
                        message,
                    });
                }
                None
            }
        }
    }

    /// Session affinity of a main backend and its canary (`affinity-canary-behavior`,
    /// as ingress-nginx): with `sticky`, the canary's backend takes the main backend's
    /// cookie, its values marked as the canary's, so that each backend keeps its
    /// clients; with `legacy`, only the main backend keeps its clients.
    pub(super) fn canary_affinity(
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

    /// The backend of rules without a usable one: no servers; its feature set answers
    /// first.
    pub(super) fn unresolved_backend(&mut self) -> BackendName {
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

    /// The mode tcp backend `name` of Service `service_key` port `port`, with `options`,
    /// created on first use: a TCP service's. `Err`: the Service port does not resolve
    /// (no backend is made).
    pub(super) fn tcp_backend(
        &mut self,
        shared: &Shared,
        name: &BackendName,
        service_key: &ObjectKey,
        port: &ServicePortRef,
        options: &Arc<BackendOptions>,
    ) -> Result<(), ResolutionError> {
        if self.backends.contains_key(name) {
            return Ok(());
        }
        let service_key = stored_key(&shared.snapshot.services, service_key.clone());
        let resolved = self.resolve_endpoints(shared, &service_key, port)?;
        let backend = resolved.into_backend(service_key, port.clone(), options.clone());
        self.backends.insert(name.clone(), backend);
        Ok(())
    }

    /// Leaves out the backend of rules without a usable one.
    pub(super) fn remove_unresolved_backend(&mut self) {
        self.backends.remove(&BackendName::unresolved());
    }

    fn resolve_endpoints(
        &self,
        shared: &Shared,
        service_key: &ObjectKey,
        port: &ServicePortRef,
    ) -> Result<Resolved, ResolutionError> {
        let service = shared
            .snapshot
            .services
            .get(service_key)
            .ok_or_else(|| ResolutionError {
                reason: ProblemReason::ServiceNotFound,
                message: format!("Service {service_key} not found{HTTP_CONSEQUENCE}"),
            })?;
        let service_port = find_service_port(service, port).ok_or_else(|| ResolutionError {
            reason: ProblemReason::ServicePortNotFound,
            message: format!("Service {service_key} has no port {port}{HTTP_CONSEQUENCE}"),
        })?;
        let spec = service.spec.as_ref();
        if spec.and_then(|s| s.type_.as_deref()) == Some("ExternalName") {
            return external_name(shared, service_key, spec, service_port.port);
        }
        let port_name = service_port.name.as_deref().unwrap_or("");
        let slices = self
            .slices_by_service
            .get(service_key)
            .into_iter()
            .flatten();
        Ok(endpoints_of(slices.copied(), port_name))
    }
}

/// The target of an ExternalName Service, when the operator allows them.
fn external_name(
    shared: &Shared,
    service_key: &ObjectKey,
    spec: Option<&ServiceSpec>,
    port: i32,
) -> Result<Resolved, ResolutionError> {
    if !shared.settings.allow_external_name {
        return Err(ResolutionError {
            reason: ProblemReason::NotAllowed,
            message: format!(
                "Service {service_key} is an ExternalName Service, which the operator has \
                 not allowed (--allow-external-name){HTTP_CONSEQUENCE}"
            ),
        });
    }
    let host = spec.and_then(|s| s.external_name.as_deref()).unwrap_or("");
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    validate::dns_subdomain(&host).map_err(|err| ResolutionError {
        reason: ProblemReason::InvalidField,
        message: format!("Service {service_key} spec.externalName: {err}"),
    })?;
    let port = validate::port_number(port).map_err(|err| ResolutionError {
        reason: ProblemReason::InvalidField,
        message: format!("Service {service_key}: {err}"),
    })?;
    Ok(Resolved {
        external: Some((host, port)),
        ..Resolved::default()
    })
}

fn parse_port_ref(
    port: Option<&k8s_openapi::api::networking::v1::ServiceBackendPort>,
) -> Result<ServicePortRef, (&'static str, String)> {
    let port = port.ok_or((
        "",
        "a Service backend needs a port (number or name)".to_string(),
    ))?;
    match (port.number, port.name.as_deref()) {
        (Some(number), None) => validate::port_number(number)
            .map(ServicePortRef::Number)
            .map_err(|e| (".number", e.0)),
        (None, Some(name)) => validate::port_name(name)
            .map(|()| ServicePortRef::Name(name.to_string()))
            .map_err(|e| (".name", e.0)),
        (Some(_), Some(_)) => Err(("", "set either port.number or port.name, not both".into())),
        (None, None) => Err((
            "",
            "a Service backend needs port.number or port.name".into(),
        )),
    }
}

fn find_service_port<'s>(service: &'s Service, port: &ServicePortRef) -> Option<&'s ServicePort> {
    let ports = service.spec.as_ref()?.ports.as_ref()?;
    ports.iter().find(|p| match port {
        ServicePortRef::Number(n) => p.port == i32::from(*n),
        ServicePortRef::Name(name) => p.name.as_deref() == Some(name.as_str()),
    })
}

/// The endpoints of one Service port.
#[derive(Debug, Default)]
struct Resolved {
    ready: BTreeSet<Endpoint>,
    draining: BTreeSet<Endpoint>,
    external: Option<(String, u16)>,
}

impl Resolved {
    fn into_backend(
        self,
        service: ObjectKey,
        port: ServicePortRef,
        options: Arc<BackendOptions>,
    ) -> Backend {
        Backend {
            service,
            port,
            endpoints: self.ready.into_iter().collect(),
            draining: self.draining.into_iter().collect(),
            external: self.external,
            options,
        }
    }
}

/// The endpoints of the Service port called `port_name` in the Service's `slices`.
fn endpoints_of<'s>(slices: impl Iterator<Item = &'s EndpointSlice>, port_name: &str) -> Resolved {
    let mut resolved = Resolved::default();
    for slice in slices {
        collect_endpoints(slice, port_name, &mut resolved);
    }
    resolved.draining.retain(|e| !resolved.ready.contains(e));
    resolved
}

/// The ready and draining endpoints of `backend` from the Service's `slices`, as
/// [`super::build`] resolves them; `None` when they do not come from EndpointSlices (no such
/// Service or port, or an ExternalName Service).
pub(crate) fn slice_endpoints<'s>(
    snapshot: &Snapshot,
    slices: impl Iterator<Item = &'s EndpointSlice>,
    service: &ObjectKey,
    port: &ServicePortRef,
) -> Option<(Vec<Endpoint>, Vec<Endpoint>)> {
    let service = snapshot.services.get(service)?;
    let service_port = find_service_port(service, port)?;
    let spec = service.spec.as_ref();
    if spec.and_then(|s| s.type_.as_deref()) == Some("ExternalName") {
        return None;
    }
    let resolved = endpoints_of(slices, service_port.name.as_deref().unwrap_or(""));
    Some((
        resolved.ready.into_iter().collect(),
        resolved.draining.into_iter().collect(),
    ))
}

/// Adds the endpoints of one slice for the Service port called `port_name` (empty for a
/// Service's single unnamed port): ready ones, and terminating ones that still serve.
fn collect_endpoints(slice: &EndpointSlice, port_name: &str, into: &mut Resolved) {
    if slice.address_type != "IPv4" && slice.address_type != "IPv6" {
        return;
    }
    let Some(target_port) = slice
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref().unwrap_or("") == port_name)
        .and_then(|p| p.port)
        .and_then(|p| validate::port_number(p).ok())
    else {
        return;
    };
    for endpoint in &slice.endpoints {
        let conditions = endpoint.conditions.as_ref();
        // Kubernetes: a missing `ready` condition means ready.
        let ready = conditions.and_then(|c| c.ready).unwrap_or(true);
        let draining = !ready
            && conditions.and_then(|c| c.serving) == Some(true)
            && conditions.and_then(|c| c.terminating) == Some(true);
        let set = if ready {
            &mut into.ready
        } else if draining {
            &mut into.draining
        } else {
            continue;
        };
        for &address in &endpoint.addresses {
            set.insert(Endpoint {
                address,
                port: target_port,
            });
        }
    }
}

pub(super) fn index_slices(snapshot: &Snapshot) -> HashMap<ObjectKey, Vec<&EndpointSlice>> {
    let mut index: HashMap<ObjectKey, Vec<&EndpointSlice>> = HashMap::new();
    for (key, slice) in &snapshot.endpoint_slices {
        if let Some(service) = slice.service_name() {
            index
                .entry(stored_key(
                    &snapshot.services,
                    ObjectKey::new(&key.namespace, service),
                ))
                .or_default()
                .push(slice);
        }
    }
    index
}

/// What an HTTP backend whose Service port does not resolve does, as its problems say.
const HTTP_CONSEQUENCE: &str = ": requests for this backend get 503";

/// Why a backend has no endpoints although an Ingress refers to it.
#[derive(Debug, Clone)]
pub(super) struct ResolutionError {
    pub(super) reason: ProblemReason,
    message: String,
}

impl ResolutionError {
    /// What is wrong, without what it does to HTTP requests.
    pub(super) fn cause(&self) -> &str {
        self.message
            .strip_suffix(HTTP_CONSEQUENCE)
            .unwrap_or(&self.message)
    }
}
