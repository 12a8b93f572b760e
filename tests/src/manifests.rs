//! Echo backends for tests, and their Service and EndpointSlice as a manifests-folder
//! file (YAML of the typed objects of [`crate::objects`]).

use std::net::SocketAddr;

use crate::EchoServer;
use crate::objects::{Object, mk_endpoint_slice, mk_service, to_yaml};

/// Echo backends for one Service: `count` servers on consecutive loopback addresses
/// from 127.0.`net`.1, all on the same free port, as the pods of a Deployment are.
pub async fn start_backends(service: &str, net: u8, count: u8) -> Vec<EchoServer> {
    for _attempt in 0..20 {
        let port = crate::free_port();
        let mut servers = Vec::new();
        for host in 1..=count {
            let addr = SocketAddr::from(([127, 0, net, host], port));
            match EchoServer::start(service, addr).await {
                Ok(server) => servers.push(server),
                Err(_) => break,
            }
        }
        if servers.len() == usize::from(count) {
            return servers;
        }
    }
    panic!("cannot start {count} echo backends for {service} on 127.0.{net}.x");
}

/// Service `name` (port 80 named `http`) and its EndpointSlice of `servers`, in one
/// YAML file text.
pub fn service_with_endpoints(name: &str, servers: &[EchoServer]) -> String {
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    to_yaml(&[
        Object::from(mk_service(name, "http", 80)),
        mk_endpoint_slice(name, "http", &addrs).into(),
    ])
}
