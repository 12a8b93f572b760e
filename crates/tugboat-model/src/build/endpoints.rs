//! Backends: a Service port resolved to its ready and draining endpoints through the
//! Service's EndpointSlices, or to an ExternalName, and the default backend.

use crate::annotations::Layer;
use crate::desired::{Backend, BackendName, Endpoint, ServicePortRef};
use crate::features::BackendOptions;
use crate::objects::{EndpointSlice, Service, ServicePort, ServiceSpec};
use crate::problem::{ObjectProblem, ObjectRef, ProblemReason};
use crate::snapshot::{ObjectKey, Snapshot, stored_key};
use crate::validate;
use k8s_openapi::api::networking::v1::IngressBackend;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::Builder;

impl Builder<'_> {
    /// The backend of `--default-backend-service` (its first port), if set and usable.
    pub(super) fn default_backend_service(&mut self) -> Option<BackendName> {
        let key = self.settings.default_backend_service.clone()?;
        let object = ObjectRef::of("Service", &key);
        let first_port = self
            .snapshot
            .services
            .get(&key)
            .and_then(|s| s.spec.as_ref())
            .and_then(|spec| spec.ports.as_ref())
            .and_then(|ports| ports.first())
            .and_then(|p| validate::port_number(p.port).ok());
        let Some(port) = first_port else {
            self.problems.push(ObjectProblem {
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
        self.reads.backend_use.entry(name.clone()).or_default().flag = true;
        if !self.backends.contains_key(&name) {
            let resolved = self.resolve_endpoints(&key, &port).unwrap_or_default();
            let backend = resolved.into_backend(key, port, self.default_options.clone());
            self.backends.insert(name.clone(), backend);
        }
        Some(name)
    }

    /// The backend an IngressBackend refers to, created on first use. `None` when the
    /// reference itself is invalid (the route is then left out).
    pub(super) fn backend(
        &mut self,
        object: &ObjectRef,
        ingress: &ObjectKey,
        backend: &IngressBackend,
        field: &str,
        ingress_layer: &Layer,
    ) -> Option<BackendName> {
        let Some(service) = &backend.service else {
            let message = if backend.resource.is_some() {
                "resource backends are not supported: use a Service backend"
            } else {
                "a backend needs service.name and service.port"
            };
            self.problem(object, field.to_string(), message.to_string());
            return None;
        };
        let service_key = stored_key(
            &self.snapshot.services,
            ObjectKey::new(&ingress.namespace, &service.name),
        );
        if let Err(err) = validate::dns_label(&service.name) {
            self.problem(object, format!("{field}.service.name"), err.0);
            return None;
        }
        let port = match parse_port_ref(service.port.as_ref()) {
            Ok(port) => port,
            Err((subfield, message)) => {
                self.problem(object, format!("{field}.service.port{subfield}"), message);
                return None;
            }
        };
        let name = match BackendName::for_service_port(&service_key, &port) {
            Ok(name) => name,
            Err(err) => {
                self.problem(object, format!("{field}.service"), err.0);
                return None;
            }
        };
        if !self.backends.contains_key(&name) {
            let (resolved, error) = match self.resolve_endpoints(&service_key, &port) {
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
        if let Some(options) = self.backend_options(&name, &service_key, ingress, ingress_layer)
            && let Some(backend) = self.backends.get_mut(&name)
        {
            backend.options = if options == *self.default_options {
                self.default_options.clone()
            } else {
                Arc::new(options)
            };
        }
        if let Some(error) = self.resolution_errors.get(&name).cloned() {
            self.problems.push(ObjectProblem {
                object: object.clone(),
                field: format!("{field}.service"),
                reason: error.reason,
                message: error.message,
            });
        }
        Some(name)
    }

    fn resolve_endpoints(
        &self,
        service_key: &ObjectKey,
        port: &ServicePortRef,
    ) -> Result<Resolved, ResolutionError> {
        let service = self
            .snapshot
            .services
            .get(service_key)
            .ok_or_else(|| ResolutionError {
                reason: ProblemReason::ServiceNotFound,
                message: format!(
                    "Service {service_key} not found: requests for this backend get 503"
                ),
            })?;
        let service_port = find_service_port(service, port).ok_or_else(|| ResolutionError {
            reason: ProblemReason::ServicePortNotFound,
            message: format!(
                "Service {service_key} has no port {port}: requests for this backend get 503"
            ),
        })?;
        let spec = service.spec.as_ref();
        if spec.and_then(|s| s.type_.as_deref()) == Some("ExternalName") {
            return self.external_name(service_key, spec, service_port.port);
        }
        let port_name = service_port.name.as_deref().unwrap_or("");
        let slices = self
            .slices_by_service
            .get(service_key)
            .into_iter()
            .flatten();
        Ok(endpoints_of(slices.copied(), port_name))
    }

    fn external_name(
        &self,
        service_key: &ObjectKey,
        spec: Option<&ServiceSpec>,
        port: i32,
    ) -> Result<Resolved, ResolutionError> {
        if !self.settings.allow_external_name {
            return Err(ResolutionError {
                reason: ProblemReason::NotAllowed,
                message: format!(
                    "Service {service_key} is an ExternalName Service, which the operator has \
                     not allowed (--allow-external-name): requests for this backend get 503"
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
/// [`build`] resolves them; `None` when they do not come from EndpointSlices (no such
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

/// Why a backend has no endpoints although an Ingress refers to it.
#[derive(Debug, Clone)]
pub(super) struct ResolutionError {
    reason: ProblemReason,
    message: String,
}
