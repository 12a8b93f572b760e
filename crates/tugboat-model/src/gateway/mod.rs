//! Gateway API (`gateway.networking.k8s.io/v1`): which Gateways this controller serves,
//! which HTTPRoutes and TLSRoutes attach to their listeners, the host and path rules and
//! the TLS passthrough names they give, and the status conditions of each object.
//!
//! The translation is pure: it reads the snapshot and answers with rules in the model's
//! own terms (host, path, a Service port) that the builder adds to the same route maps
//! the Ingresses use, so route changes reach haproxy at runtime as Ingress routes do,
//! and with the status the leader writes. How listeners map onto haproxy's ports:
//! haproxy has one HTTP and one HTTPS bind; a listener of protocol `HTTP` on port 80 or
//! on the HTTP bind's port is served by the HTTP bind, a listener of protocol `HTTPS` on
//! port 443 or on the HTTPS bind's port by the HTTPS bind, and so is a listener of
//! protocol `TLS` in `Passthrough` mode on those ports (its TLSRoutes' SNI names join the
//! Ingresses' `ssl-passthrough` hosts). An `HTTP` or `HTTPS` listener on a port of
//! `--gateway-listener-ports` (not 80 or 443) has a bind of its own instead, whose routes
//! are a table of their own ([`crate::ListenerBind`]), and a `TCP` listener on such a port
//! is a TCP service for its one TCPRoute ([`crate::TcpService`]), and a `TLS` listener
//! in `Passthrough` mode on such a port a passthrough frontend of its own, choosing by
//! SNI among its TLSRoutes ([`crate::PassthroughRoute::port`]); any other port,
//! protocol or TLS mode is refused with a listener condition. Both binds share one set of
//! route maps; a rule carries the bind of its listeners as a condition, so a route
//! attached to listeners of one bind answers only there (docs/gateway-api.md).
//!
//! Whatever is not supported is refused where it is, never ignored: a route rule that
//! uses an unsupported match or filter makes the route `Accepted=False` with reason
//! `UnsupportedValue`, and none of its rules is routed (a routing that skipped a header
//! match would send more traffic than the user asked for).

pub mod features;
pub mod objects;
mod rules;
pub mod status;
mod translate;

pub use status::{
    ClassState, Condition, GatewayState, GatewayStatus, ListenerState, PublishedAddresses,
    RequestedAddress, RouteKind, RouteParentState, RouteState,
};
pub use translate::{
    Attachment, ListenerCertificate, PassthroughRule, RuleBackend, RuleRoute, TcpRule, Translation,
    settle_attachments, translate,
};

/// The operator's Gateway API settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewaySettings {
    /// `--gateway-controller-name`: GatewayClasses whose `spec.controllerName` is this are
    /// ours.
    pub controller_name: String,
    /// The port of haproxy's HTTP bind (`--http-port`): listeners on it or on 80 use it.
    pub http_port: u16,
    /// The port of haproxy's HTTPS bind (`--https-port`): listeners on it or on 443 use it.
    pub https_port: u16,
    /// `--gateway-listener-ports`: the ports, besides 80 and 443, on which a listener
    /// gets a bind of its own, at [`crate::ports::bind_port`]. Empty: none.
    pub listener_ports: std::collections::BTreeSet<u16>,
}

/// The default `--gateway-controller-name`.
pub const DEFAULT_CONTROLLER_NAME: &str = "tugboat.dev/gateway";

impl GatewaySettings {
    pub fn new(controller_name: impl Into<String>, http_port: u16, https_port: u16) -> Self {
        Self {
            controller_name: controller_name.into(),
            http_port,
            https_port,
            listener_ports: Default::default(),
        }
    }

    /// These settings with `ports` as the listener ports that get binds of their own.
    pub fn with_listener_ports(mut self, ports: std::collections::BTreeSet<u16>) -> Self {
        self.listener_ports = ports;
        self
    }
}

/// Whether the Gateway API objects (and the Namespaces) of two snapshots are the same.
pub fn unchanged_objects(old: &crate::Snapshot, new: &crate::Snapshot) -> bool {
    use crate::snapshot::same_objects as same;
    same(&old.gateway_classes, &new.gateway_classes)
        && same(&old.gateways, &new.gateways)
        && same(&old.http_routes, &new.http_routes)
        && same(&old.tls_routes, &new.tls_routes)
        && same(&old.tcp_routes, &new.tcp_routes)
        && same(&old.reference_grants, &new.reference_grants)
        && same(&old.namespaces, &new.namespaces)
}

/// What the Gateway API objects of a snapshot refer to, for [`crate::references`]: the
/// Secrets of listener certificates and the Services of route backends (whose keys may
/// name more objects). Whether a reference is allowed is the builder's to say.
pub fn referenced(snapshot: &crate::Snapshot) -> (Vec<crate::ObjectKey>, Vec<crate::ObjectKey>) {
    let mut secrets = Vec::new();
    for (key, gateway) in &snapshot.gateways {
        for listener in &gateway.spec.listeners {
            for reference in listener.tls.iter().flat_map(|t| &t.certificate_refs) {
                if reference.kind.as_deref().unwrap_or("Secret") == "Secret"
                    && reference.group.as_deref().unwrap_or("").is_empty()
                {
                    let namespace = reference.namespace.as_deref().unwrap_or(&key.namespace);
                    secrets.push(crate::ObjectKey::new(namespace, &reference.name));
                }
            }
        }
    }
    let http_targets = snapshot.http_routes.iter().flat_map(|(key, route)| {
        route
            .spec
            .rules
            .iter()
            .flat_map(|rule| &rule.backend_refs)
            .map(move |backend| (key, backend.backend.target()))
    });
    let tls_targets = snapshot.tls_routes.iter().flat_map(|(key, route)| {
        route
            .spec
            .rules
            .iter()
            .flat_map(|rule| &rule.backend_refs)
            .map(move |backend| (key, backend.target()))
    });
    let tcp_targets = snapshot.tcp_routes.iter().flat_map(|(key, route)| {
        route
            .spec
            .rules
            .iter()
            .flat_map(|rule| &rule.backend_refs)
            .map(move |backend| (key, backend.target()))
    });
    let services = http_targets
        .chain(tls_targets)
        .chain(tcp_targets)
        .filter(|(_, target)| target.is_service())
        .map(|(key, target)| {
            crate::ObjectKey::new(target.namespace.unwrap_or(&key.namespace), target.name)
        })
        .collect();
    (secrets, services)
}
