//! TCP services: ports whose connections go as they come to one Service port, from the
//! operator's ConfigMaps in the two peers' formats.
//!
//! - `--tcp-services-configmap` (ingress-nginx): key = the port clients connect to,
//!   value `namespace/service:port[:PROXY][:PROXY]`, the Service port by number or name;
//!   the first `PROXY` = clients on that port speak the PROXY protocol first, the second
//!   = haproxy speaks it (v1, as ingress-nginx) to the Service's endpoints.
//! - `--configmap-tcp-services` (haproxytech's kubernetes-ingress): key = the port,
//!   value `namespace/service:port[:ssl]`. Its `ssl` (TLS offload with the default
//!   certificate) and its `log-format-tcp` key are refused: a problem names them.
//!
//! Each port is bound at [`crate::ports::bind_port`]. An entry that cannot be served
//! (not a port, a port taken by haproxy, the controller or a Gateway listener, a bad or
//! missing Service) is left out with a problem naming the ConfigMap and its key; every
//! other entry is served. A Service without endpoints keeps its port bound: haproxy
//! closes the connections until endpoints arrive (at runtime, no reload).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::desired::{BackendName, ServicePortRef, TcpService};
use crate::features::{BackendOptions, ProxyProtocol};
use crate::ports;
use crate::problem::{ObjectProblem, ObjectRef, ProblemReason};
use crate::snapshot::ObjectKey;
use crate::validate;

use super::endpoints::Endpoints;
use super::shared::Shared;

/// Where TCP services come from, and the ports they may not take.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TcpServicesSettings {
    /// `--tcp-services-configmap`: ingress-nginx's format.
    pub nginx: Option<ObjectKey>,
    /// `--configmap-tcp-services`: haproxytech's format.
    pub haproxytech: Option<ObjectKey>,
    /// The ports haproxy or the controller binds already, with what binds them: a TCP
    /// service whose bind port is one of them is refused (haproxy could not reload).
    pub taken_ports: BTreeMap<u16, String>,
}

impl TcpServicesSettings {
    /// The ConfigMaps the flags name, each with its format, ingress-nginx's first.
    pub fn config_maps(&self) -> impl Iterator<Item = (&ObjectKey, Format)> {
        let nginx = self.nginx.iter().map(|key| (key, Format::Nginx));
        nginx.chain(
            self.haproxytech
                .iter()
                .map(|key| (key, Format::Haproxytech)),
        )
    }
}

/// The format of a TCP services ConfigMap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// ingress-nginx's `--tcp-services-configmap`.
    Nginx,
    /// haproxytech's `--configmap-tcp-services`.
    Haproxytech,
}

impl Format {
    /// The peer's flag that names a ConfigMap of this format.
    pub fn flag(self) -> &'static str {
        match self {
            Format::Nginx => "--tcp-services-configmap",
            Format::Haproxytech => "--configmap-tcp-services",
        }
    }
}

/// haproxytech's key for the log format of its TCP services.
const HAPROXYTECH_LOG_FORMAT_KEY: &str = "log-format-tcp";

/// One entry of a TCP services ConfigMap, read.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    service: ObjectKey,
    port: ServicePortRef,
    accept_proxy: bool,
    send_proxy: bool,
}

/// The value `value` of a ConfigMap of `format`, or why it cannot be served.
fn parse_value(format: Format, value: &str) -> Result<Entry, String> {
    let shown = validate::printable(value);
    let fields: Vec<&str> = value.trim().split(':').collect();
    let expected = match format {
        Format::Nginx => "namespace/service:port[:PROXY][:PROXY]",
        Format::Haproxytech => "namespace/service:port[:ssl]",
    };
    let most = match format {
        Format::Nginx => 4,
        Format::Haproxytech => 3,
    };
    if fields.len() < 2 || fields.len() > most {
        return Err(format!("'{shown}': expected {expected}"));
    }
    let (namespace, name) = fields[0]
        .split_once('/')
        .ok_or_else(|| format!("'{shown}': expected {expected}"))?;
    validate::dns_label(namespace).map_err(|err| format!("'{shown}': namespace: {}", err.0))?;
    validate::dns_label(name).map_err(|err| format!("'{shown}': service: {}", err.0))?;
    let port = parse_port(fields[1]).map_err(|why| format!("'{shown}': port: {why}"))?;
    let option = |index: usize| fields.get(index).copied().unwrap_or("");
    let (accept_proxy, send_proxy) = match format {
        Format::Nginx => (
            proxy_field(option(2), "3rd")?,
            proxy_field(option(3), "4th")?,
        ),
        Format::Haproxytech => match option(2) {
            "" => (false, false),
            "ssl" => {
                return Err(format!(
                    "'{shown}': 'ssl' (haproxy terminating TLS on the port) is not supported: \
                     pass TLS through to the Service, or route it with an Ingress"
                ));
            }
            other => {
                return Err(format!(
                    "'{shown}': unknown option '{}': expected 'ssl' or nothing",
                    validate::printable(other)
                ));
            }
        },
    };
    Ok(Entry {
        service: ObjectKey::new(namespace, name),
        port,
        accept_proxy,
        send_proxy,
    })
}

/// A Service port by number or by name.
fn parse_port(text: &str) -> Result<ServicePortRef, String> {
    match text.parse::<i32>() {
        Ok(number) => validate::port_number(number)
            .map(ServicePortRef::Number)
            .map_err(|err| err.0),
        Err(_) => validate::port_name(text)
            .map(|()| ServicePortRef::Name(text.to_string()))
            .map_err(|err| err.0),
    }
}

/// ingress-nginx's `PROXY` option in its `position` field: set or empty.
fn proxy_field(text: &str, position: &str) -> Result<bool, String> {
    match text {
        "" => Ok(false),
        "PROXY" => Ok(true),
        other => Err(format!(
            "the {position} field is '{}': expected PROXY or nothing",
            validate::printable(other)
        )),
    }
}

/// The TCP services of Gateway `TCP` listeners (`of_gateways`, by port) and of the
/// ConfigMaps `shared.settings` names, their backends made in `endpoints`; sorted by
/// port, one per port (a Gateway listener's port is never an entry's: the entries may
/// not take `--gateway-listener-ports`; the first ConfigMap's entry wins).
pub(super) fn tcp_services(
    shared: &mut Shared,
    endpoints: &mut Endpoints,
    of_gateways: BTreeMap<u16, TcpService>,
) -> Vec<TcpService> {
    let settings = shared.settings.tcp_services.clone();
    let listener_ports: BTreeSet<u16> = shared
        .settings
        .gateway
        .as_ref()
        .map(|gateway| gateway.listener_ports.clone())
        .unwrap_or_default();
    let mut services = of_gateways;
    for (key, format) in settings.config_maps() {
        let object = ObjectRef::of("ConfigMap", key);
        let Some(config_map) = shared.snapshot.config_maps.get(key) else {
            shared.problems.push(ObjectProblem {
                object,
                field: "metadata.name".into(),
                reason: ProblemReason::InvalidField,
                message: format!(
                    "the {} ConfigMap does not exist: it serves no TCP service",
                    format.flag()
                ),
            });
            continue;
        };
        for (port_text, value) in config_map.data.iter().flatten() {
            let field = format!("data.{}", validate::printable(port_text));
            let taken = |port: u16| -> Option<String> {
                if let Some(other) = services.get(&port) {
                    return Some(format!("it is already a TCP service of {}", other.owner));
                }
                if listener_ports.contains(&port) {
                    return Some("it is one of --gateway-listener-ports".into());
                }
                let bind = ports::bind_port(port.into()).ok()?;
                settings
                    .taken_ports
                    .get(&bind)
                    .map(|what| format!("haproxy would bind it at {bind}, which is {what}"))
            };
            let entry = entry(format, port_text, value, taken);
            let (port, entry) = match entry {
                Ok(read) => read,
                Err(message) => {
                    shared.problem(&object, field, message);
                    continue;
                }
            };
            let options = Arc::new(BackendOptions {
                tcp_service: true,
                send_proxy: entry.send_proxy.then_some(ProxyProtocol::V1),
                ..BackendOptions::default()
            });
            let backend = BackendName::for_service_port(&entry.service, &entry.port)
                .map(|name| name.tcp(entry.send_proxy))
                .map_err(|err| (ProblemReason::InvalidField, err.0))
                .and_then(|name| {
                    endpoints
                        .tcp_backend(shared, &name, &entry.service, &entry.port, &options)
                        .map(|()| name)
                        .map_err(|err| (err.reason, err.cause().to_string()))
                });
            let backend = match backend {
                Ok(backend) => backend,
                Err((reason, cause)) => {
                    shared.problems.push(ObjectProblem {
                        object: object.clone(),
                        field,
                        reason,
                        message: format!("{cause}: port {port} is not served"),
                    });
                    continue;
                }
            };
            services.insert(
                port,
                TcpService {
                    port,
                    backend: Some(backend),
                    accept_proxy: entry.accept_proxy,
                    send_proxy: entry.send_proxy,
                    owner: object.clone(),
                },
            );
        }
    }
    services.into_values().collect()
}

/// The port and entry of key `port_text` and `value` of a ConfigMap of `format`, or why
/// it cannot be served; `taken` says why a port is not free, if it is not.
fn entry(
    format: Format,
    port_text: &str,
    value: &str,
    taken: impl Fn(u16) -> Option<String>,
) -> Result<(u16, Entry), String> {
    if format == Format::Haproxytech && port_text == HAPROXYTECH_LOG_FORMAT_KEY {
        return Err(format!(
            "'{HAPROXYTECH_LOG_FORMAT_KEY}' is not supported: TCP services log in haproxy's \
             tcplog format"
        ));
    }
    let shown = validate::printable(port_text);
    let number: i64 = port_text.trim().parse().map_err(|_| {
        format!("the key '{shown}' is not a port: keys are the ports clients connect to")
    })?;
    ports::bind_port(number).map_err(|why| format!("port {number} {why}"))?;
    // `bind_port` accepted it: it is a u16.
    let port = u16::try_from(number).unwrap_or_default();
    if let Some(why) = taken(port) {
        return Err(format!("port {port} is not free: {why}"));
    }
    Ok((port, parse_value(format, value)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(format: Format, value: &str) -> String {
        parse_value(format, value).expect_err("refused")
    }

    #[test]
    fn nginx_values_name_a_service_port_and_the_proxy_options() {
        let entry = parse_value(Format::Nginx, "db/postgres:5432").expect("an entry");
        assert_eq!(entry.service, ObjectKey::new("db", "postgres"));
        assert_eq!(entry.port, ServicePortRef::Number(5432));
        assert!(!entry.accept_proxy && !entry.send_proxy);
        let entry = parse_value(Format::Nginx, "db/postgres:pg:PROXY").expect("an entry");
        assert_eq!(entry.port, ServicePortRef::Name("pg".into()));
        assert!(entry.accept_proxy && !entry.send_proxy);
        let entry = parse_value(Format::Nginx, "db/postgres:pg::PROXY").expect("an entry");
        assert!(!entry.accept_proxy && entry.send_proxy);
        let entry = parse_value(Format::Nginx, "db/postgres:pg:PROXY:PROXY").expect("an entry");
        assert!(entry.accept_proxy && entry.send_proxy);
    }

    #[test]
    fn bad_nginx_values_are_refused() {
        assert!(refusal(Format::Nginx, "postgres:5432").contains("expected namespace/service"));
        assert!(refusal(Format::Nginx, "db/postgres").contains("expected namespace/service"));
        assert!(refusal(Format::Nginx, "db/Postgres:5432").contains("service"));
        assert!(refusal(Format::Nginx, "db/postgres:0").contains("port"));
        assert!(refusal(Format::Nginx, "db/postgres:5432:proxy").contains("3rd field"));
        assert!(refusal(Format::Nginx, "db/postgres:5432::v2").contains("4th field"));
        assert!(refusal(Format::Nginx, "db/pg:1:PROXY:PROXY:x").contains("expected"));
    }

    #[test]
    fn haproxytech_values_refuse_ssl_offload() {
        let entry = parse_value(Format::Haproxytech, "tcp/redis:6379").expect("an entry");
        assert_eq!(entry.port, ServicePortRef::Number(6379));
        assert!(refusal(Format::Haproxytech, "tcp/ldap:389:ssl").contains("'ssl'"));
        assert!(refusal(Format::Haproxytech, "tcp/ldap:389:tls").contains("unknown option"));
        assert!(refusal(Format::Haproxytech, "tcp/ldap:389:ssl:PROXY").contains("expected"));
    }

    #[test]
    fn keys_are_free_ports_with_a_bind_port() {
        let free = |_| None;
        assert_eq!(
            entry(Format::Nginx, "22", "git/ssh:22", free).map(|(port, _)| port),
            Ok(22)
        );
        let refused =
            |key: &str| entry(Format::Nginx, key, "git/ssh:22", free).expect_err("refused");
        assert!(refused("ssh").contains("is not a port"));
        assert!(refused("0").contains("between 1 and"));
        assert!(refused("60000").contains("between 1 and"));
        let taken = entry(Format::Nginx, "22", "git/ssh:22", |_| {
            Some("haproxy's".into())
        });
        assert!(taken.expect_err("refused").contains("not free: haproxy's"));
        let log = entry(Format::Haproxytech, "log-format-tcp", "%ci", free);
        assert!(log.expect_err("refused").contains("tcplog"));
    }
}
