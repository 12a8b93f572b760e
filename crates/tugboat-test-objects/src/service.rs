//! Services (ClusterIP and ExternalName) and their EndpointSlices.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};

use crate::meta;

/// A Service with one TCP port `port` named `port_name`.
pub fn mk_service(name: &str, port_name: &str, port: i32) -> Service {
    Service {
        metadata: meta(name),
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                name: Some(port_name.to_string()),
                port,
                protocol: Some("TCP".to_string()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// The Service with one more TCP port `port` named `port_name`, after its others.
pub fn with_service_port(mut service: Service, port_name: &str, port: i32) -> Service {
    let spec = service.spec.get_or_insert_with(ServiceSpec::default);
    spec.ports.get_or_insert_with(Vec::new).push(ServicePort {
        name: Some(port_name.to_string()),
        port,
        protocol: Some("TCP".to_string()),
        ..ServicePort::default()
    });
    service
}

/// A Service of type ExternalName: `external_name` (a DNS name), one unnamed TCP port
/// `port`.
pub fn mk_external_name_service(name: &str, external_name: &str, port: i32) -> Service {
    Service {
        metadata: meta(name),
        spec: Some(ServiceSpec {
            type_: Some("ExternalName".to_string()),
            external_name: Some(external_name.to_string()),
            ports: Some(vec![ServicePort {
                port,
                protocol: Some("TCP".to_string()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// An endpoint at address `address` whose ready condition is `ready` (no conditions at
/// all when `None`).
pub fn mk_endpoint(address: &str, ready: Option<bool>) -> Endpoint {
    Endpoint {
        addresses: vec![address.to_string()],
        conditions: ready.map(|ready| EndpointConditions {
            ready: Some(ready),
            ..EndpointConditions::default()
        }),
        ..Endpoint::default()
    }
}

/// The EndpointSlice `name` of Service `service`: `endpoints`, on `port` (the target
/// port; none when `None`) of the Service port named `port_name`.
pub fn mk_endpoint_slice_named(
    name: &str,
    service: &str,
    port_name: &str,
    port: Option<i32>,
    endpoints: Vec<Endpoint>,
) -> EndpointSlice {
    let mut metadata = meta(name);
    metadata.labels = Some(BTreeMap::from([(
        "kubernetes.io/service-name".to_string(),
        service.to_string(),
    )]));
    EndpointSlice {
        metadata,
        address_type: "IPv4".to_string(),
        ports: Some(vec![EndpointPort {
            name: Some(port_name.to_string()),
            port,
            protocol: Some("TCP".to_string()),
            ..EndpointPort::default()
        }]),
        endpoints,
    }
}

/// The EndpointSlice `SERVICE-abc` of Service `service` whose ready endpoints are
/// `addrs` (which share one port, as the endpoints of one Service port do), for the
/// port named `port_name`.
pub fn mk_endpoint_slice(service: &str, port_name: &str, addrs: &[SocketAddr]) -> EndpointSlice {
    mk_endpoint_slice_named(
        &format!("{service}-abc"),
        service,
        port_name,
        addrs.first().map(|a| i32::from(a.port())),
        addrs
            .iter()
            .map(|addr| mk_endpoint(&addr.ip().to_string(), Some(true)))
            .collect(),
    )
}

/// The EndpointSlice with the endpoint of address `ip` in state `conditions` (e.g. not
/// ready, or terminating but still serving).
pub fn with_endpoint_conditions(
    mut slice: EndpointSlice,
    ip: IpAddr,
    conditions: EndpointConditions,
) -> EndpointSlice {
    let address = ip.to_string();
    let endpoint = slice
        .endpoints
        .iter_mut()
        .find(|endpoint| endpoint.addresses.contains(&address))
        .expect("an endpoint with that address");
    endpoint.conditions = Some(conditions);
    slice
}
