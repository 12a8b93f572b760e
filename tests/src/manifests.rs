//! Kubernetes manifests for tests, as YAML text: Services, EndpointSlices pointing at
//! echo backends, and Ingresses.

use std::fmt::Write as _;
use std::net::SocketAddr;

use crate::EchoServer;

/// A Service with one port `port` named `port_name`, in namespace `default`.
pub fn service(name: &str, port_name: &str, port: u16) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: default\n\
         spec:\n  ports:\n  - name: {port_name}\n    port: {port}\n    protocol: TCP\n"
    )
}

/// An EndpointSlice of Service `service` whose endpoints are `addrs` (which must share
/// one port, as the endpoints of one Service port do), for the port named `port_name`.
pub fn endpoint_slice(service: &str, port_name: &str, addrs: &[SocketAddr]) -> String {
    let port = addrs.first().map_or(0, |a| a.port());
    let mut out = format!(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {service}-abc\n  \
         namespace: default\n  labels:\n    kubernetes.io/service-name: {service}\n\
         addressType: IPv4\nports:\n- name: {port_name}\n  port: {port}\n  protocol: TCP\nendpoints:\n"
    );
    for addr in addrs {
        let _ = writeln!(
            out,
            "- addresses: [\"{}\"]\n  conditions: {{ready: true}}",
            addr.ip()
        );
    }
    out
}

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

/// Service, EndpointSlice and backends in one YAML file text.
pub fn service_with_endpoints(name: &str, servers: &[EchoServer]) -> String {
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    format!(
        "{}---\n{}",
        service(name, "http", 80),
        endpoint_slice(name, "http", &addrs)
    )
}

/// A YAML double-quoted string holding `value` (quotes, backslashes and newlines escaped),
/// for annotation values that must reach the controller exactly as written.
pub fn yaml_string(value: &str) -> String {
    let mut out = String::from("\"");
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
