//! The status the controller owes each Gateway API object it serves, as data: the
//! conditions of GatewayClasses, Gateways (and each listener), HTTPRoutes and TLSRoutes
//! (per parent). The leader turns it into status patches (`tugboat_kube::gateway_status`);
//! the time of a transition is the writer's business, not the model's.

use std::collections::BTreeMap;

use crate::gateway::objects::ParentReference;
use crate::snapshot::ObjectKey;

/// One condition: type, status, reason and message, for one generation.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Condition {
    pub type_: &'static str,
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
    pub observed_generation: i64,
}

impl Condition {
    pub fn new(
        type_: &'static str,
        status: bool,
        reason: &'static str,
        message: impl Into<String>,
        observed_generation: i64,
    ) -> Self {
        Self {
            type_,
            status,
            reason,
            message: message.into(),
            observed_generation,
        }
    }
}

/// A GatewayClass of ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassState {
    pub conditions: Vec<Condition>,
    /// The features this controller supports, sorted (`status.supportedFeatures`).
    pub supported_features: Vec<&'static str>,
}

/// A listener of a Gateway of ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerState {
    pub name: String,
    /// `(group, kind)` of the routes it accepts.
    pub supported_kinds: Vec<(String, String)>,
    pub attached_routes: i32,
    pub conditions: Vec<Condition>,
}

/// A Gateway of ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayState {
    pub conditions: Vec<Condition>,
    pub listeners: Vec<ListenerState>,
    /// `spec.addresses` of the types served (`IPAddress`, `Hostname`): whether they are
    /// assigned depends on the published addresses, which the status writer knows
    /// ([`RequestedAddress::programmed`]).
    pub requested_addresses: Vec<RequestedAddress>,
}

/// One address a Gateway asks for in `spec.addresses`, of a type served.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RequestedAddress {
    /// `IPAddress` (the default type): the value as written.
    Ip(String),
    /// `Hostname`.
    Hostname(String),
}

/// The published addresses of the controller (`--publish-service`, `--publish-address`),
/// for [`RequestedAddress::programmed`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PublishedAddresses {
    pub ips: Vec<std::net::IpAddr>,
    /// Lower-case.
    pub hostnames: Vec<String>,
}

impl RequestedAddress {
    fn is_published(&self, published: &PublishedAddresses) -> bool {
        match self {
            RequestedAddress::Ip(value) => value
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| published.ips.contains(&ip)),
            RequestedAddress::Hostname(value) => published
                .hostnames
                .iter()
                .any(|host| host.eq_ignore_ascii_case(value.trim_end_matches('.'))),
        }
    }

    fn describe(&self) -> String {
        match self {
            RequestedAddress::Ip(value) => {
                format!("IPAddress {}", crate::validate::printable(value))
            }
            RequestedAddress::Hostname(value) => {
                format!("Hostname {}", crate::validate::printable(value))
            }
        }
    }

    /// The `Programmed` condition of a Gateway that requests `requested` (generation
    /// `generation`) when the controller publishes `published`: `None` when every
    /// requested address is published (the Gateway's own condition stands). Tugboat
    /// assigns no address: the Gateway's addresses are the ones the controller publishes
    /// (its Service's). None published yet: `AddressNotAssigned`; one that is not among
    /// them (or is no IP address, for `IPAddress`): `AddressNotUsable`, naming it and the
    /// addresses that can be asked for.
    pub fn programmed(
        requested: &[RequestedAddress],
        published: &PublishedAddresses,
        generation: i64,
    ) -> Option<Condition> {
        if requested.is_empty() {
            return None;
        }
        if published.ips.is_empty() && published.hostnames.is_empty() {
            return Some(Condition::new(
                "Programmed",
                false,
                "AddressNotAssigned",
                "the controller publishes no address yet (--publish-service: its Service \
                 has none yet; or neither --publish-service nor --publish-address is set): \
                 spec.addresses can only name a published address",
                generation,
            ));
        }
        let unusable: Vec<String> = requested
            .iter()
            .filter(|address| !address.is_published(published))
            .map(RequestedAddress::describe)
            .collect();
        if unusable.is_empty() {
            return None;
        }
        let available: Vec<String> = published
            .ips
            .iter()
            .map(|ip| format!("IPAddress {ip}"))
            .chain(published.hostnames.iter().map(|h| format!("Hostname {h}")))
            .collect();
        Some(Condition::new(
            "Programmed",
            false,
            "AddressNotUsable",
            format!(
                "{} cannot be used: the Gateway's addresses are the ones the controller \
                 publishes ({}); remove it from spec.addresses or ask for one of those",
                unusable.join(", "),
                available.join(", ")
            ),
            generation,
        ))
    }
}

/// One parent of a route: the reference as the route wrote it, and its conditions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteParentState {
    pub parent_ref: ParentReference,
    pub conditions: Vec<Condition>,
}

/// A route with at least one parent of ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteState {
    pub parents: Vec<RouteParentState>,
}

/// The kinds of route this controller serves. An HTTPRoute and a TLSRoute may have the
/// same namespace and name: their status is kept apart by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RouteKind {
    Http,
    Tls,
    Tcp,
}

impl RouteKind {
    /// The kind's name in the API (`HTTPRoute`, `TLSRoute`, `TCPRoute`).
    pub fn name(self) -> &'static str {
        match self {
            RouteKind::Http => "HTTPRoute",
            RouteKind::Tls => "TLSRoute",
            RouteKind::Tcp => "TCPRoute",
        }
    }
}

/// The status of every Gateway API object this controller serves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GatewayStatus {
    /// By name (cluster-scoped).
    pub classes: BTreeMap<String, ClassState>,
    pub gateways: BTreeMap<ObjectKey, GatewayState>,
    /// HTTPRoutes.
    pub routes: BTreeMap<ObjectKey, RouteState>,
    pub tls_routes: BTreeMap<ObjectKey, RouteState>,
    pub tcp_routes: BTreeMap<ObjectKey, RouteState>,
}

impl GatewayStatus {
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
            && self.gateways.is_empty()
            && self.routes.is_empty()
            && self.tls_routes.is_empty()
            && self.tcp_routes.is_empty()
    }

    /// The routes of `kind`.
    pub fn routes_of(&self, kind: RouteKind) -> &BTreeMap<ObjectKey, RouteState> {
        match kind {
            RouteKind::Http => &self.routes,
            RouteKind::Tls => &self.tls_routes,
            RouteKind::Tcp => &self.tcp_routes,
        }
    }

    pub fn routes_of_mut(&mut self, kind: RouteKind) -> &mut BTreeMap<ObjectKey, RouteState> {
        match kind {
            RouteKind::Http => &mut self.routes,
            RouteKind::Tls => &mut self.tls_routes,
            RouteKind::Tcp => &mut self.tcp_routes,
        }
    }
}
