//! TCP services: one mode tcp frontend per port of the TCP services ConfigMaps (and of
//! Gateway `TCP` listeners), bound at [`tugboat_model::ports::bind_port`] of the port,
//! whose connections go as they come to one mode tcp backend.
//!
//! The backend is a Service port's, with server slots like every other backend: an
//! endpoint change is a runtime change of its slots. A port added or removed, or a
//! change of its PROXY options, changes a frontend: a reload.
//!
//! Long-lived connections (databases, SSH, message brokers) are the rule on such ports:
//! the frontend's client timeout and the backend's server timeout are an hour
//! ([`IDLE_TIMEOUT`]), as peers give their TCP proxies, instead of the HTTP defaults.

use std::fmt::Write as _;

use tugboat_model::{Desired, ports};

use crate::settings::RenderSettings;

/// How long a TCP service's connection may stay idle, either way.
pub const IDLE_TIMEOUT: &str = "1h";

/// The name of the frontend of the TCP service on `port`.
pub fn frontend_name(port: u16) -> String {
    format!("tcp_{port}")
}

/// The frontends of the TCP services (empty without any).
pub fn sections(desired: &Desired, settings: &RenderSettings) -> String {
    let mut out = String::new();
    for service in &desired.tcp_services {
        // The model only keeps ports that have a bind port.
        let Ok(bind_port) = ports::bind_port(service.port.into()) else {
            continue;
        };
        let accept_proxy = if service.accept_proxy {
            " accept-proxy"
        } else {
            ""
        };
        let _ = write!(
            out,
            "
# TCP service: port {port} of {owner}, bound at {bind_port}.
frontend {name}
    mode tcp
    bind {bind}{accept_proxy}
    option tcplog
    no option idle-close-on-response
    timeout client {IDLE_TIMEOUT}
",
            port = service.port,
            owner = service.owner,
            name = frontend_name(service.port),
            bind = settings.bind(bind_port),
        );
        match &service.backend {
            Some(backend) => {
                let _ = writeln!(out, "    default_backend {backend}");
            }
            // Its backend does not resolve: the port stays bound, connections close.
            None => out.push_str("    tcp-request connection reject\n"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tugboat_model::desired::ServicePortRef;
    use tugboat_model::{
        Backend, BackendName, BackendOptions, Endpoint, ObjectKey, ObjectRef, TcpService,
    };

    use super::*;
    use crate::plan::plan;

    fn settings() -> RenderSettings {
        RenderSettings::example()
    }

    /// The TCP backend of Service `db/postgres` port 5432, with `endpoints`.
    fn postgres(send_proxy: bool, endpoints: &[u8]) -> (BackendName, Backend) {
        let service = ObjectKey::new("db", "postgres");
        let port = ServicePortRef::Number(5432);
        let name = BackendName::for_service_port(&service, &port).expect("a name");
        let backend = Backend {
            service,
            port,
            endpoints: endpoints
                .iter()
                .map(|last| Endpoint {
                    address: [10, 0, 0, *last].into(),
                    port: 5432,
                })
                .collect(),
            draining: Vec::new(),
            external: None,
            options: Arc::new(BackendOptions {
                tcp_service: true,
                send_proxy: send_proxy.then_some(tugboat_model::features::ProxyProtocol::V1),
                ..BackendOptions::default()
            }),
        };
        (name.tcp(send_proxy), backend)
    }

    /// A state with TCP services on `ports`, all to `postgres`.
    fn state(ports: &[u16], proxy: bool, endpoints: &[u8]) -> Desired {
        let (name, backend) = postgres(proxy, endpoints);
        let owner = ObjectRef::of("ConfigMap", &ObjectKey::new("ops", "tcp"));
        Desired {
            tcp_services: ports
                .iter()
                .map(|port| TcpService {
                    port: *port,
                    backend: Some(name.clone()),
                    accept_proxy: proxy,
                    send_proxy: proxy,
                    owner: owner.clone(),
                })
                .collect(),
            backends: [(name, backend)].into(),
            ..Desired::default()
        }
    }

    #[test]
    fn a_tcp_service_is_a_frontend_at_the_bind_port_and_a_mode_tcp_backend() {
        let files = crate::render(
            &state(&[5432], true, &[7]),
            &Default::default(),
            &settings(),
        );
        let config = files.get(&settings().config_file()).expect("config");
        let frontend = "frontend tcp_5432\n    mode tcp\n    bind 0.0.0.0:15432 accept-proxy\n    option tcplog\n    no option idle-close-on-response\n    timeout client 1h\n    default_backend tcp-proxy:db_postgres_5432\n";
        assert!(config.contains(frontend), "{config}");
        let backends = files.get(&settings().backends_file(0)).expect("backends");
        let backend = "backend tcp-proxy:db_postgres_5432\n    mode tcp\n    balance roundrobin\n    timeout server 1h\n    timeout tunnel 1h\n    default-server send-proxy\n    server s1 10.0.0.7:5432\n";
        assert!(backends.contains(backend), "{backends}");

        let plain = crate::render(&state(&[22], false, &[7]), &Default::default(), &settings());
        let config = plain.get(&settings().config_file()).expect("config");
        assert!(config.contains("    bind 0.0.0.0:10022\n"), "{config}");
        let backends = plain.get(&settings().backends_file(0)).expect("backends");
        assert!(!backends.contains("send-proxy"), "{backends}");
    }

    #[test]
    fn a_service_whose_backend_does_not_resolve_rejects_connections() {
        let mut desired = state(&[5432], false, &[]);
        desired.tcp_services[0].backend = None;
        let files = crate::render(&desired, &Default::default(), &settings());
        let config = files.get(&settings().config_file()).expect("config");
        assert!(
            config.contains("    timeout client 1h\n    tcp-request connection reject\n"),
            "{config}"
        );
    }

    #[test]
    fn endpoints_change_at_runtime_and_ports_reload() {
        let first = plan(None, state(&[5432], true, &[7]), &settings());
        assert!(first.reload.is_some());
        let moved = plan(Some(&first.next), state(&[5432], true, &[8]), &settings());
        assert_eq!(moved.reload, None);
        assert!(!moved.runtime.is_empty());
        let added = plan(
            Some(&moved.next),
            state(&[5432, 6432], true, &[8]),
            &settings(),
        );
        assert!(added.reload.is_some());
        let removed = plan(Some(&added.next), state(&[6432], true, &[8]), &settings());
        assert!(removed.reload.is_some());
    }
}
