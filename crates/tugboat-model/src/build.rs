//! From a [`Snapshot`] to the [`Desired`] state, with Kubernetes' Ingress semantics.
//!
//! Ingresses are taken oldest first, so that when two claim the same host and path the
//! older one keeps it and the newer one gets a [`ProblemReason::RouteConflict`]. Each
//! backend (one Service port) is resolved once to its ready endpoints through the
//! Service's EndpointSlices. Anything wrong in an object becomes an [`ObjectProblem`] and
//! only the faulty part of that object is left out.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Service, ServicePort};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressBackend};

use crate::desired::{
    Backend, BackendName, Desired, Endpoint, HostMatch, PathMatch, Route, ServicePortRef,
};
use crate::problem::{ObjectProblem, ObjectRef, ProblemReason};
use crate::snapshot::{ObjectKey, Snapshot};
use crate::validate;

/// The label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// What [`build`] returns: the desired state and what was wrong on the way.
#[derive(Debug, Clone, Default)]
pub struct BuildOutput {
    pub desired: Desired,
    pub problems: Vec<ObjectProblem>,
}

/// Builds the desired proxy state from a snapshot. Pure and deterministic.
pub fn build(snapshot: &Snapshot) -> BuildOutput {
    let mut builder = Builder {
        snapshot,
        slices_by_service: index_slices(snapshot),
        backends: BTreeMap::new(),
        resolution_errors: HashMap::new(),
        routes: BTreeMap::new(),
        default_backend: None,
        problems: Vec::new(),
    };
    let mut ingresses: Vec<(&ObjectKey, &Ingress)> = snapshot
        .ingresses
        .iter()
        .map(|(key, ingress)| (key, ingress.as_ref()))
        .collect();
    ingresses.sort_by(|(ka, a), (kb, b)| {
        let age = |i: &Ingress| i.metadata.creation_timestamp.as_ref().map(|t| t.0);
        age(a).cmp(&age(b)).then_with(|| ka.cmp(kb))
    });
    for (key, ingress) in ingresses {
        builder.add_ingress(key, ingress);
    }
    builder.problems.sort();
    builder.problems.dedup();
    BuildOutput {
        desired: Desired {
            backends: builder.backends,
            routes: builder.routes.into_values().collect(),
            default_backend_owner: builder.default_backend.as_ref().map(|(_, k)| k.clone()),
            default_backend: builder.default_backend.map(|(b, _)| b),
        },
        problems: builder.problems,
    }
}

fn index_slices(snapshot: &Snapshot) -> HashMap<ObjectKey, Vec<&EndpointSlice>> {
    let mut index: HashMap<ObjectKey, Vec<&EndpointSlice>> = HashMap::new();
    for (key, slice) in &snapshot.endpoint_slices {
        let service = slice
            .metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get(SERVICE_NAME_LABEL));
        if let Some(service) = service {
            index
                .entry(ObjectKey::new(&key.namespace, service))
                .or_default()
                .push(slice);
        }
    }
    index
}

/// Why a backend has no endpoints although an Ingress refers to it.
#[derive(Debug, Clone)]
struct ResolutionError {
    reason: ProblemReason,
    message: String,
}

struct Builder<'a> {
    snapshot: &'a Snapshot,
    slices_by_service: HashMap<ObjectKey, Vec<&'a EndpointSlice>>,
    backends: BTreeMap<BackendName, Backend>,
    resolution_errors: HashMap<BackendName, ResolutionError>,
    routes: BTreeMap<(HostMatch, PathMatch), Route>,
    default_backend: Option<(BackendName, ObjectKey)>,
    problems: Vec<ObjectProblem>,
}

impl Builder<'_> {
    fn add_ingress(&mut self, key: &ObjectKey, ingress: &Ingress) {
        let object = ObjectRef {
            kind: "Ingress",
            namespace: key.namespace.clone(),
            name: key.name.clone(),
        };
        let Some(spec) = &ingress.spec else {
            return;
        };
        if let Some(default) = &spec.default_backend {
            let backend = self.backend(&object, key, default, "spec.defaultBackend");
            if self.default_backend.is_none() && backend.is_some() {
                self.default_backend = backend.map(|b| (b, key.clone()));
            }
        }
        for (rule_index, rule) in spec.rules.iter().flatten().enumerate() {
            let field = format!("spec.rules[{rule_index}]");
            let host = match rule.host.as_deref() {
                None | Some("") => HostMatch::Any,
                Some(host) => match validate::ingress_host(host) {
                    Ok(host) => match host.strip_prefix('*') {
                        Some(suffix) => HostMatch::Wildcard(suffix.to_string()),
                        None => HostMatch::Exact(host),
                    },
                    Err(err) => {
                        self.problem(&object, format!("{field}.host"), err.0);
                        continue;
                    }
                },
            };
            let Some(http) = &rule.http else {
                continue;
            };
            for (path_index, path) in http.paths.iter().enumerate() {
                let field = format!("{field}.http.paths[{path_index}]");
                let path_match = match parse_path(path.path.as_deref(), &path.path_type) {
                    Ok(path_match) => path_match,
                    Err((subfield, message)) => {
                        self.problem(&object, format!("{field}.{subfield}"), message);
                        continue;
                    }
                };
                let Some(backend) =
                    self.backend(&object, key, &path.backend, &format!("{field}.backend"))
                else {
                    continue;
                };
                self.add_route(&object, &field, key, host.clone(), path_match, backend);
            }
        }
    }

    fn add_route(
        &mut self,
        object: &ObjectRef,
        field: &str,
        ingress: &ObjectKey,
        host: HostMatch,
        path: PathMatch,
        backend: BackendName,
    ) {
        let slot = (host.clone(), path.clone());
        if let Some(existing) = self.routes.get(&slot) {
            let owner = if existing.ingress == *ingress {
                "an earlier rule of this Ingress".to_string()
            } else {
                format!("the older Ingress {}", existing.ingress)
            };
            let message = format!("host {host} path {path} is already routed by {owner}");
            self.problems.push(ObjectProblem {
                object: object.clone(),
                field: field.to_string(),
                reason: ProblemReason::RouteConflict,
                message,
            });
            return;
        }
        self.routes.insert(
            slot,
            Route {
                host,
                path,
                backend,
                ingress: ingress.clone(),
            },
        );
    }

    /// The backend an IngressBackend refers to, created on first use. `None` when the
    /// reference itself is invalid (the route is then left out).
    fn backend(
        &mut self,
        object: &ObjectRef,
        ingress: &ObjectKey,
        backend: &IngressBackend,
        field: &str,
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
        let service_key = ObjectKey::new(&ingress.namespace, &service.name);
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
            let (endpoints, error) = match self.resolve_endpoints(&service_key, &port) {
                Ok(endpoints) => (endpoints, None),
                Err(error) => (Vec::new(), Some(error)),
            };
            self.backends.insert(
                name.clone(),
                Backend {
                    service: service_key,
                    port,
                    endpoints,
                },
            );
            if let Some(error) = error {
                self.resolution_errors.insert(name.clone(), error);
            }
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
    ) -> Result<Vec<Endpoint>, ResolutionError> {
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
        let port_name = service_port.name.as_deref().unwrap_or("");
        let mut endpoints = BTreeSet::new();
        for slice in self
            .slices_by_service
            .get(service_key)
            .into_iter()
            .flatten()
        {
            collect_ready_endpoints(slice, port_name, &mut endpoints);
        }
        Ok(endpoints.into_iter().collect())
    }

    fn problem(&mut self, object: &ObjectRef, field: String, message: String) {
        self.problems.push(ObjectProblem {
            object: object.clone(),
            field,
            reason: ProblemReason::InvalidField,
            message,
        });
    }
}

/// Path and pathType of an Ingress path, with Kubernetes' rules. The error names the
/// sub-field (`path` or `pathType`) and says what is wrong.
fn parse_path(path: Option<&str>, path_type: &str) -> Result<PathMatch, (&'static str, String)> {
    match path_type {
        "Exact" => {
            let path = path.ok_or(("path", "an Exact path needs a path".to_string()))?;
            validate::ingress_path(path).map_err(|e| ("path", e.0))?;
            Ok(PathMatch::Exact(path.to_string()))
        }
        // ImplementationSpecific is documented to behave as Prefix in Tugboat.
        "Prefix" | "ImplementationSpecific" => {
            let path = path.unwrap_or("/");
            validate::ingress_path(path).map_err(|e| ("path", e.0))?;
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

/// Adds the ready endpoints of one slice for the Service port called `port_name` (empty
/// for a Service's single unnamed port).
fn collect_ready_endpoints(slice: &EndpointSlice, port_name: &str, into: &mut BTreeSet<Endpoint>) {
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
        // Kubernetes: a missing `ready` condition means ready.
        let ready = endpoint
            .conditions
            .as_ref()
            .and_then(|c| c.ready)
            .unwrap_or(true);
        if !ready {
            continue;
        }
        for address in &endpoint.addresses {
            if let Ok(address) = address.parse::<IpAddr>() {
                into.insert(Endpoint {
                    address,
                    port: target_port,
                });
            }
        }
    }
}
