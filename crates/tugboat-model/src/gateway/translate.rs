//! From the Gateway API objects of a snapshot to host and path rules and status.
//!
//! The steps, in the order the spec reasons in: the GatewayClasses whose controller is
//! ours; their Gateways and each listener (port, protocol, hostname, TLS, allowed
//! routes, conflicts); then the HTTPRoutes, oldest first (then by namespace and name, the
//! spec's tie-break), attached per `parentRef` to the listeners that allow them and whose
//! hostname intersects theirs. Each attached route gives one rule per listener,
//! hostname, rule and match, in that order, with the match's conditions (method,
//! headers, query, the listener's bind): for each host and path, the builder keeps the
//! first rule of each distinct conditions, so an older route wins a conflict, and within
//! a route the first rule. A listener on a port of `--gateway-listener-ports` has a bind
//! of its own: its rules say the port ([`RuleRoute::listener_port`]) instead of a bind
//! condition, and one protocol is served per such port (the oldest Gateway's).
//!
//! TLSRoutes follow, oldest first, attached the same way to `TLS` listeners in
//! `Passthrough` mode (which the HTTPS bind serves, by SNI, or on a port of
//! `--gateway-listener-ports` a bind of its own): each gives one passthrough rule per
//! port and SNI name it gets, and the builder keeps the first rule of each.
//!
//! TCPRoutes last, oldest first, attached to `TCP` listeners on the ports of
//! `--gateway-listener-ports` (each bound at [`crate::ports::bind_port`]): each gives its
//! one backend to the ports of the listeners it attaches to, and the builder keeps the
//! first route of each port.

use std::collections::{BTreeMap, BTreeSet};

use crate::desired::{HostMatch, PathMatch};
use crate::gateway::GatewaySettings;
use crate::gateway::features::{Conditions, GatewayFeatures};
use crate::gateway::objects::{
    BackendRef, BackendTarget, GROUP, Gateway, HttpRoute, HttpRouteRule, LabelSelector, Listener,
    ParentReference, ReferenceGrant, TcpRoute, TlsRoute, TlsRouteRule,
};
use crate::gateway::rules::{FilterSpec, rule_filters, rule_paths};
use crate::gateway::status::{
    ClassState, Condition, GatewayState, GatewayStatus, ListenerState, RequestedAddress, RouteKind,
    RouteParentState, RouteState,
};
use crate::problem::{ObjectProblem, ObjectRef, ProblemReason};
use crate::snapshot::{ObjectKey, Objects, Snapshot};
use crate::validate;

/// The features listed in a GatewayClass' `status.supportedFeatures`: what this
/// controller implements as the spec describes it.
pub const SUPPORTED_FEATURES: [&str; 13] = [
    "Gateway",
    "HTTPRoute",
    "TLSRoute",
    "TCPRoute",
    "ReferenceGrant",
    "HTTPRouteResponseHeaderModification",
    "HTTPRouteHostRewrite",
    "HTTPRoutePathRewrite",
    "HTTPRouteSchemeRedirect",
    "HTTPRoutePathRedirect",
    "HTTPRoutePortRedirect",
    "HTTPRouteQueryParamMatching",
    "HTTPRouteMethodMatching",
];

/// Where a rule's requests go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleBackend {
    /// One port (by number) of a Service.
    Service { service: ObjectKey, port: u16 },
    /// No usable backend (missing, not permitted, of another kind, weight 0): the rule's
    /// requests get 500, as the spec asks.
    Unresolved,
    /// Several backends of non-zero weight: each request goes to one, in proportion to
    /// the weights. A share without a usable backend (`None`) answers 500.
    Split(Vec<(Option<(ObjectKey, u16)>, u32)>),
}

/// One host and path of one rule of an attached HTTPRoute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleRoute {
    pub route: ObjectKey,
    /// The rule, e.g. `spec.rules[0]`.
    pub field: String,
    pub host: HostMatch,
    pub path: PathMatch,
    /// The method, headers and query the request must have too.
    pub conditions: Conditions,
    pub backend: RuleBackend,
    /// The rule's filters (the split is the builder's to fill in).
    pub features: GatewayFeatures,
    /// The parents it comes from: their places in the route's status
    /// ([`RouteState::parents`]), sorted.
    pub parents: Vec<usize>,
    /// The port of its listeners when they have a bind of their own
    /// (`--gateway-listener-ports`); `None`: the HTTP and HTTPS binds.
    pub listener_port: Option<u16>,
}

/// One SNI name of an attached TLSRoute: TLS for it goes to the backend undecrypted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassthroughRule {
    pub route: ObjectKey,
    /// `metadata.creationTimestamp` of the route: the oldest claimer of a name wins it,
    /// whatever kind of object it is.
    pub created: Option<String>,
    /// [`HostMatch::Exact`], or [`HostMatch::Subdomains`] for `*.example.com` (any
    /// depth, as for HTTPRoutes; never [`HostMatch::Any`]: a TLSRoute has hostnames).
    pub host: HostMatch,
    /// The Service port; `None` when the backend does not resolve (or all weights are
    /// 0): connections for the name are closed.
    pub backend: Option<(ObjectKey, u16)>,
    /// The parents it comes from: their places in the route's status, sorted.
    pub parents: Vec<usize>,
    /// The port of its listeners when they have a bind of their own
    /// (`--gateway-listener-ports`); `None`: the HTTPS bind.
    pub port: Option<u16>,
}

impl PassthroughRule {
    /// Where its name is claimed: its port and host (a name is claimed per port).
    pub fn slot(&self) -> (Option<u16>, HostMatch) {
        (self.port, self.host.clone())
    }
}

/// A port of an attached TCPRoute: its connections go to the backend as they come.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpRule {
    pub route: ObjectKey,
    /// The port of the listeners (a port of `--gateway-listener-ports`).
    pub port: u16,
    /// The Service port; `None` when the backend does not resolve (or all weights are
    /// 0): connections to the port are closed.
    pub backend: Option<(ObjectKey, u16)>,
    /// The parents it comes from: their places in the route's status, sorted.
    pub parents: Vec<usize>,
}

/// A route accepted by some listeners of one of its parents: counted in their
/// `attachedRoutes` once the builder knows the route serves something there
/// ([`settle_attachments`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    pub kind: RouteKind,
    pub route: ObjectKey,
    /// The parent's place in the route's status ([`RouteState::parents`]).
    pub parent: usize,
    pub gateway: ObjectKey,
    /// The listeners (by index) that accepted the route.
    pub listeners: Vec<usize>,
}

/// A certificate an HTTPS listener serves: its Secret and the hosts it is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerCertificate {
    pub gateway: ObjectKey,
    pub listener: String,
    pub secret: ObjectKey,
    /// Validated, lower-case hosts (`*.example.com` allowed), sorted.
    pub hosts: Vec<String>,
}

/// What [`translate`] gives the builder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Translation {
    /// In precedence order: the first rule of a host and path wins.
    pub rules: Vec<RuleRoute>,
    /// Of TLSRoutes, in precedence order: the first rule of a name wins.
    pub passthrough: Vec<PassthroughRule>,
    /// Of TCPRoutes, in precedence order: the first rule of a port wins.
    pub tcp: Vec<TcpRule>,
    pub certificates: Vec<ListenerCertificate>,
    /// The certificate of the HTTPS listener without a hostname (of the oldest Gateway
    /// that has one): the HTTPS bind's default, served for every name no other
    /// certificate is for, as the listener takes every host on its port.
    pub default_certificate: Option<ListenerCertificate>,
    pub status: GatewayStatus,
    /// Where routes are accepted: the listeners' counts wait for the builder.
    pub attachments: Vec<Attachment>,
    /// What is wrong, for the log (the conditions carry the same).
    pub problems: Vec<ObjectProblem>,
    /// The listener ports with a bind of their own that some valid listener uses, and
    /// whether that bind terminates TLS (HTTPS listeners).
    pub own_binds: BTreeMap<u16, bool>,
}

/// Which haproxy bind a listener is served by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Bind {
    Http,
    Https,
    /// A port of `--gateway-listener-ports`: a bind of its own (an HTTP or HTTPS
    /// listener's, or a TCP listener's TCP service).
    Own(u16),
}

/// Where a listener takes routes from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum From {
    Same,
    All,
    Selector(LabelSelector),
}

/// A listener as worked out, for attaching routes.
#[derive(Debug, Clone)]
struct ListenerInfo {
    name: String,
    port: i32,
    /// Lower-case, validated; `None`: every host.
    hostname: Option<String>,
    /// Accepted and not conflicted: routes may attach.
    usable: bool,
    /// Terminates TLS: on the HTTPS bind, or an HTTPS listener on a bind of its own.
    tls: bool,
    /// The port of its bind of its own (`--gateway-listener-ports`); `None`: the HTTP or
    /// HTTPS bind.
    own_port: Option<u16>,
    /// A `TLS` listener's port of `--gateway-listener-ports`: its passthrough frontend's
    /// (`None`: the HTTPS bind's, or not a `TLS` listener).
    passthrough_port: Option<u16>,
    /// The kind of route it takes: HTTPRoutes on HTTP and HTTPS listeners, TLSRoutes on
    /// TLS ones, TCPRoutes on TCP ones; `None` when its `allowedRoutes.kinds` names none
    /// of those.
    takes: Option<RouteKind>,
    from: From,
    /// The secret of its certificate, for HTTPS listeners whose reference resolved.
    certificate: Option<ObjectKey>,
}

/// The Gateway's status in the making, and its listeners for routes.
struct GatewayInfo {
    /// `metadata.creationTimestamp`, for the oldest Gateway's default certificate.
    created: Option<String>,
    accepted: bool,
    listeners: Vec<ListenerInfo>,
    state: GatewayState,
}

/// Translates the Gateway API objects of `snapshot`. `check_certificate` says whether a
/// TLS Secret can be served (the builder's check, which also notes that it was read).
pub fn translate(
    snapshot: &Snapshot,
    settings: &GatewaySettings,
    check_certificate: &mut dyn FnMut(&ObjectKey) -> Result<(), String>,
) -> Translation {
    let mut out = Translation::default();
    let classes = accepted_classes(snapshot, settings, &mut out.status);
    let mut gateways: BTreeMap<ObjectKey, GatewayInfo> = BTreeMap::new();
    // Oldest first: of two Gateways' listeners on one port of its own with different
    // protocols, the older one's keeps it.
    let mut port_protocols = PortProtocols::new();
    for (key, gateway) in oldest_first(&snapshot.gateways, |g| &g.metadata.creation_timestamp) {
        if !classes.contains(&gateway.spec.gateway_class_name) {
            continue;
        }
        let info = gateway_info(
            key,
            gateway,
            settings,
            &snapshot.reference_grants,
            &mut port_protocols,
            check_certificate,
            &mut out.problems,
        );
        for listener in info.listeners.iter().filter(|l| l.usable) {
            if let Some(port) = listener.own_port {
                out.own_binds.insert(port, listener.tls);
            }
        }
        gateways.insert(key.clone(), info);
    }

    // Hosts that routes attached to each HTTPS listener without a hostname give.
    let mut listener_hosts: BTreeMap<(ObjectKey, String), BTreeSet<String>> = BTreeMap::new();
    for (key, route) in oldest_first(&snapshot.http_routes, |r| &r.metadata.creation_timestamp) {
        attach_route(
            snapshot,
            key,
            route,
            &gateways,
            &mut listener_hosts,
            &mut out,
        );
    }
    for (key, route) in oldest_first(&snapshot.tls_routes, |r| &r.metadata.creation_timestamp) {
        attach_tls_route(snapshot, key, route, &gateways, &mut out);
    }
    for (key, route) in oldest_first(&snapshot.tcp_routes, |r| &r.metadata.creation_timestamp) {
        attach_tcp_route(snapshot, key, route, &gateways, &mut out);
    }

    // The oldest Gateway's first HTTPS listener without a hostname gives the default.
    let mut by_age: Vec<(&ObjectKey, &GatewayInfo)> = gateways.iter().collect();
    by_age.sort_by(|(ka, a), (kb, b)| a.created.cmp(&b.created).then_with(|| ka.cmp(kb)));
    out.default_certificate = by_age.iter().find_map(|(key, info)| {
        info.listeners
            .iter()
            .find(|l| {
                l.usable
                    && l.tls
                    && l.own_port.is_none()
                    && l.hostname.is_none()
                    && l.certificate.is_some()
            })
            .and_then(|listener| {
                Some(ListenerCertificate {
                    gateway: (*key).clone(),
                    listener: listener.name.clone(),
                    secret: listener.certificate.clone()?,
                    hosts: Vec::new(),
                })
            })
    });
    for (key, info) in gateways {
        for listener in &info.listeners {
            let Some(secret) = &listener.certificate else {
                continue;
            };
            let hosts: Vec<String> = match &listener.hostname {
                Some(host) => vec![host.clone()],
                None => listener_hosts
                    .get(&(key.clone(), listener.name.clone()))
                    .into_iter()
                    .flatten()
                    .filter(|host| !host.is_empty())
                    .cloned()
                    .collect(),
            };
            out.certificates.push(ListenerCertificate {
                gateway: key.clone(),
                listener: listener.name.clone(),
                secret: secret.clone(),
                hosts,
            });
        }
        out.status.gateways.insert(key, info.state);
    }
    out.problems.sort();
    out.problems.dedup();
    out
}

/// The routes of `objects`, oldest first (by `created`), then by namespace and name.
fn oldest_first<R>(
    objects: &Objects<R>,
    created: impl Fn(&R) -> &Option<String>,
) -> Vec<(&ObjectKey, &R)> {
    let mut routes: Vec<(&ObjectKey, &R)> = objects
        .iter()
        .map(|(key, route)| (key, route.as_ref()))
        .collect();
    routes.sort_by(|(ka, a), (kb, b)| created(a).cmp(created(b)).then_with(|| ka.cmp(kb)));
    routes
}

/// Settles the status that only the builder can tell: a route accepted by a parent
/// whose every host and path (or SNI name) there went to other routes (`serves_nothing`
/// says by whom) serves nothing through it, and its `Accepted` condition for that parent says
/// so: `False`, reason `UnsupportedValue` (the spec's reason for what a controller
/// cannot serve as asked; its other reasons name attachment faults that are not the
/// case). Then each listener counts the routes it accepted (`attachedRoutes`: as
/// Gateway API v1.5 counts, only routes whose `Accepted` condition is `True`).
pub fn settle_attachments(
    status: &mut GatewayStatus,
    attachments: &[Attachment],
    mut serves_nothing: impl FnMut(&Attachment) -> Option<String>,
) {
    for attachment in attachments {
        if let Some(message) = serves_nothing(attachment) {
            let parent = status
                .routes_of_mut(attachment.kind)
                .get_mut(&attachment.route)
                .and_then(|route| route.parents.get_mut(attachment.parent));
            for condition in parent.into_iter().flat_map(|p| &mut p.conditions) {
                if condition.type_ == "Accepted" {
                    *condition = Condition::new(
                        "Accepted",
                        false,
                        "UnsupportedValue",
                        message.clone(),
                        condition.observed_generation,
                    );
                }
            }
            continue;
        }
        if let Some(gateway) = status.gateways.get_mut(&attachment.gateway) {
            for &index in &attachment.listeners {
                if let Some(listener) = gateway.listeners.get_mut(index) {
                    listener.attached_routes += 1;
                }
            }
        }
    }
}

/// The names of the GatewayClasses of ours that are accepted; their status goes to
/// `status`.
fn accepted_classes(
    snapshot: &Snapshot,
    settings: &GatewaySettings,
    status: &mut GatewayStatus,
) -> BTreeSet<String> {
    let mut accepted = BTreeSet::new();
    for (key, class) in &snapshot.gateway_classes {
        if class.spec.controller_name != settings.controller_name {
            continue;
        }
        let generation = class.metadata.generation.unwrap_or(0);
        let condition = if class.spec.parameters_ref.is_some() {
            Condition::new(
                "Accepted",
                false,
                "InvalidParameters",
                "spec.parametersRef is not supported: this controller takes no parameters",
                generation,
            )
        } else {
            accepted.insert(key.name.to_string());
            Condition::new("Accepted", true, "Accepted", "", generation)
        };
        let mut features = SUPPORTED_FEATURES.to_vec();
        features.sort_unstable();
        status.classes.insert(
            key.name.to_string(),
            ClassState {
                conditions: vec![condition],
                supported_features: features,
            },
        );
    }
    accepted
}

/// The protocol of each port with a bind of its own, and the listener that set it
/// (`listener NAME of Gateway NS/NAME`), for the listeners that come later.
type PortProtocols = BTreeMap<u16, (String, String)>;

fn gateway_ref(key: &ObjectKey) -> ObjectRef {
    ObjectRef::of("Gateway", key)
}

/// A Gateway's listeners and conditions.
fn gateway_info(
    key: &ObjectKey,
    gateway: &Gateway,
    settings: &GatewaySettings,
    grants: &Objects<ReferenceGrant>,
    port_protocols: &mut PortProtocols,
    check_certificate: &mut dyn FnMut(&ObjectKey) -> Result<(), String>,
    problems: &mut Vec<ObjectProblem>,
) -> GatewayInfo {
    let generation = gateway.metadata.generation.unwrap_or(0);
    // Addresses of the types served wait for the status writer, which knows the
    // published ones; another type is not accepted.
    let mut requested_addresses = Vec::new();
    let mut unsupported_types = Vec::new();
    for address in gateway.spec.addresses.iter().flatten() {
        let type_ = address
            .get("type")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("IPAddress");
        let value = address
            .get("value")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string();
        match type_ {
            "IPAddress" => requested_addresses.push(RequestedAddress::Ip(value)),
            "Hostname" => requested_addresses.push(RequestedAddress::Hostname(value)),
            other => unsupported_types.push(crate::validate::printable(other)),
        }
    }
    let mut listeners = Vec::new();
    let mut states = Vec::new();
    // The first listener of each bind and hostname; later ones conflict.
    let mut claimed: BTreeSet<(Bind, Option<String>)> = BTreeSet::new();
    let mixed_tls_ports = mixed_tls_ports(gateway);
    for (index, listener) in gateway.spec.listeners.iter().enumerate() {
        let (info, state) = listener_info(
            key,
            index,
            listener,
            generation,
            settings,
            grants,
            &mut claimed,
            port_protocols,
            mixed_tls_ports.contains(&listener.port),
            check_certificate,
            problems,
        );
        listeners.push(info);
        states.push(state);
    }
    // An invalid listener (not accepted, or conflicted) takes no route of any kind.
    for (info, state) in listeners.iter().zip(&mut states) {
        if !info.usable {
            state.supported_kinds.clear();
        }
    }
    let invalid: Vec<&str> = listeners
        .iter()
        .filter(|l| !l.usable)
        .map(|l| l.name.as_str())
        .collect();
    let valid = listeners.len() - invalid.len();
    let mut conditions = Vec::new();
    let accepted = unsupported_types.is_empty() && valid > 0;
    if !unsupported_types.is_empty() {
        let message = format!(
            "spec.addresses: the address type {} is not supported: IPAddress and Hostname \
             are, naming an address the controller publishes (--publish-service, \
             --publish-address)",
            unsupported_types.join(", ")
        );
        problems.push(ObjectProblem {
            object: gateway_ref(key),
            field: "spec.addresses".into(),
            reason: ProblemReason::InvalidField,
            message: message.clone(),
        });
        conditions.push(Condition::new(
            "Accepted",
            false,
            "UnsupportedAddress",
            message,
            generation,
        ));
    } else if valid == 0 {
        conditions.push(Condition::new(
            "Accepted",
            false,
            "ListenersNotValid",
            "no listener of this Gateway is valid: see the listeners' conditions",
            generation,
        ));
    } else if !invalid.is_empty() {
        conditions.push(Condition::new(
            "Accepted",
            true,
            "ListenersNotValid",
            format!(
                "listeners not valid (see their conditions): {}; the others are served",
                invalid
                    .iter()
                    .map(|name| validate::printable(name))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            generation,
        ));
    } else {
        conditions.push(Condition::new("Accepted", true, "Accepted", "", generation));
    }
    let programmed = accepted && listeners.iter().any(|l| l.usable);
    conditions.push(if programmed {
        Condition::new("Programmed", true, "Programmed", "", generation)
    } else {
        Condition::new(
            "Programmed",
            false,
            "Invalid",
            "no listener of this Gateway can be served",
            generation,
        )
    });
    if !accepted {
        for listener in &mut listeners {
            listener.usable = false;
        }
    }
    GatewayInfo {
        created: gateway.metadata.creation_timestamp.clone(),
        accepted,
        listeners,
        state: GatewayState {
            conditions,
            listeners: states,
            requested_addresses,
        },
    }
}

/// Whether a ReferenceGrant in `to_namespace` lets a `from_kind` of `from_namespace`
/// refer to the `to_kind` (core group) called `to_name`.
fn granted(
    grants: &Objects<ReferenceGrant>,
    from_kind: &str,
    from_namespace: &str,
    to_namespace: &str,
    to_kind: &str,
    to_name: &str,
) -> bool {
    grants
        .iter()
        .filter(|(key, _)| *key.namespace == *to_namespace)
        .any(|(_, grant)| {
            grant.spec.from.iter().any(|from| {
                from.group == GROUP && from.kind == from_kind && from.namespace == from_namespace
            }) && grant.spec.to.iter().any(|to| {
                to.group.is_empty()
                    && to.kind == to_kind
                    && to.name.as_deref().is_none_or(|name| name == to_name)
            })
        })
}

/// The TLS mode of a listener (`Terminate` when not set, as the API defaults it).
fn tls_mode(listener: &Listener) -> &str {
    listener
        .tls
        .as_ref()
        .and_then(|t| t.mode.as_deref())
        .unwrap_or("Terminate")
}

/// The ports on which a Gateway has `TLS` listeners of both modes, `Terminate` and
/// `Passthrough`: not supported (the spec's `TLSRouteModeMixed`), every `TLS` listener
/// there is refused with `ProtocolConflict`.
fn mixed_tls_ports(gateway: &Gateway) -> BTreeSet<i32> {
    let mut modes: BTreeMap<i32, BTreeSet<&str>> = BTreeMap::new();
    for listener in &gateway.spec.listeners {
        let mode = tls_mode(listener);
        if listener.protocol == "TLS" && matches!(mode, "Terminate" | "Passthrough") {
            modes.entry(listener.port).or_default().insert(mode);
        }
    }
    modes
        .into_iter()
        .filter(|(_, modes)| modes.len() > 1)
        .map(|(port, _)| port)
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn listener_info(
    gateway: &ObjectKey,
    index: usize,
    listener: &Listener,
    generation: i64,
    settings: &GatewaySettings,
    grants: &Objects<ReferenceGrant>,
    claimed: &mut BTreeSet<(Bind, Option<String>)>,
    port_protocols: &mut PortProtocols,
    mixed_tls_port: bool,
    check_certificate: &mut dyn FnMut(&ObjectKey) -> Result<(), String>,
    problems: &mut Vec<ObjectProblem>,
) -> (ListenerInfo, ListenerState) {
    let field = format!("spec.listeners[{index}]");
    let mut problem = |field: String, message: &str| {
        problems.push(ObjectProblem {
            object: gateway_ref(gateway),
            field,
            reason: ProblemReason::InvalidField,
            message: message.to_string(),
        });
    };
    // Accepted: port and protocol, hostname, TLS mode.
    let mut accepted: Result<(), (&'static str, String)> = Ok(());
    let https_port = |port: i32| port == 443 || port == i32::from(settings.https_port);
    // A listed port other than 80 and 443 is a bind of its own, even the HTTP or HTTPS
    // bind's own port.
    let listed = u16::try_from(listener.port)
        .ok()
        .filter(|port| *port != 80 && *port != 443 && settings.listener_ports.contains(port));
    let bind = match listener.protocol.as_str() {
        "HTTP" | "HTTPS" if listed.is_some() => listed.map(Bind::Own),
        "HTTP" if listener.port == 80 || listener.port == i32::from(settings.http_port) => {
            Some(Bind::Http)
        }
        "HTTPS" if https_port(listener.port) => Some(Bind::Https),
        "TLS" if mixed_tls_port => {
            accepted = Err((
                "ProtocolConflict",
                format!(
                    "TLS listeners of both modes, Terminate and Passthrough, are on port {}: \
                     mixing them is not supported (Passthrough is; an HTTPS listener \
                     terminates TLS on the same port)",
                    listener.port
                ),
            ));
            None
        }
        "TLS" if tls_mode(listener) != "Passthrough" => {
            accepted = Err((
                "UnsupportedValue",
                format!(
                    "tls.mode '{}' is not supported on TLS listeners: Passthrough is (an \
                     HTTPS listener terminates TLS, for HTTPRoutes)",
                    validate::printable(tls_mode(listener))
                ),
            ));
            None
        }
        // Passthrough: a bind of its own chooses by SNI, or the HTTPS bind does.
        "TLS" if listed.is_some() => listed.map(Bind::Own),
        "TLS" if https_port(listener.port) => Some(Bind::Https),
        "TCP" if listed.is_some() => listed.map(Bind::Own),
        "TCP" => {
            accepted = Err((
                "PortUnavailable",
                format!(
                    "port {} is not served: TCP listeners use the ports (not 80 or 443) the \
                     operator lists in --gateway-listener-ports",
                    listener.port
                ),
            ));
            None
        }
        "HTTP" | "HTTPS" | "TLS" => {
            let (served, bind_port, bind_name) = if listener.protocol == "HTTP" {
                (80, settings.http_port, "HTTP")
            } else {
                (443, settings.https_port, "HTTPS")
            };
            let own = ", or a port listed in --gateway-listener-ports (a bind of its own, at \
                       the port + 10000)";
            accepted = Err((
                "PortUnavailable",
                format!(
                    "port {} is not served: {} listeners use port {served} or {bind_port} \
                     (haproxy's {bind_name} bind){own}",
                    listener.port, listener.protocol
                ),
            ));
            None
        }
        other => {
            accepted = Err((
                "UnsupportedProtocol",
                format!(
                    "protocol '{}' is not supported: HTTP, HTTPS, TLS (Passthrough) and TCP \
                     are",
                    validate::printable(other)
                ),
            ));
            None
        }
    };
    // A TCP listener has no hostname to match (the API ignores it there).
    let hostname = match listener
        .hostname
        .as_deref()
        .filter(|h| !h.is_empty() && listener.protocol != "TCP")
    {
        None => None,
        Some(host) => match validate::ingress_host(host) {
            Ok(host) => Some(host),
            Err(err) => {
                if accepted.is_ok() {
                    accepted = Err(("UnsupportedValue", format!("hostname: {err}")));
                }
                None
            }
        },
    };
    // ResolvedRefs: route kinds and certificates.
    let mut resolved: Result<(), (&'static str, String)> = Ok(());
    let mut supported_kinds = Vec::new();
    let kinds = listener
        .allowed_routes
        .as_ref()
        .and_then(|a| a.kinds.as_ref());
    // TLS listeners take TLSRoutes, TCP ones TCPRoutes; HTTP and HTTPS ones (and any
    // other) HTTPRoutes.
    let native = match listener.protocol.as_str() {
        "TLS" => RouteKind::Tls,
        "TCP" => RouteKind::Tcp,
        _ => RouteKind::Http,
    };
    let native_kind = (GROUP.to_string(), native.name().to_string());
    let takes = match kinds {
        None => {
            supported_kinds.push(native_kind);
            Some(native)
        }
        Some(kinds) => {
            for kind in kinds {
                let group = kind.group.as_deref().unwrap_or(GROUP);
                if group == GROUP && kind.kind == native.name() {
                    supported_kinds.push(native_kind.clone());
                } else if resolved.is_ok() {
                    resolved = Err((
                        "InvalidRouteKinds",
                        format!(
                            "route kind {}/{} is not supported on {} listeners: {} is",
                            validate::printable(group),
                            validate::printable(&kind.kind),
                            validate::printable(&listener.protocol),
                            native.name()
                        ),
                    ));
                }
            }
            supported_kinds.dedup();
            (!supported_kinds.is_empty()).then_some(native)
        }
    };
    let from = match listener
        .allowed_routes
        .as_ref()
        .and_then(|a| a.namespaces.as_ref())
    {
        None => From::Same,
        Some(namespaces) => match namespaces.from.as_deref().unwrap_or("Same") {
            "All" => From::All,
            "Selector" => From::Selector(namespaces.selector.clone().unwrap_or_default()),
            _ => From::Same,
        },
    };
    let mut certificate = None;
    if matches!(bind, Some(Bind::Https | Bind::Own(_))) && listener.protocol == "HTTPS" {
        let tls = listener.tls.as_ref();
        let mode = tls.and_then(|t| t.mode.as_deref()).unwrap_or("Terminate");
        if mode != "Terminate" && accepted.is_ok() {
            accepted = Err((
                "UnsupportedValue",
                format!(
                    "tls.mode '{}' is not supported on HTTPS listeners: Terminate is",
                    validate::printable(mode)
                ),
            ));
        }
        let refs = tls
            .map(|t| t.certificate_refs.as_slice())
            .unwrap_or_default();
        if refs.is_empty() && resolved.is_ok() {
            resolved = Err((
                "InvalidCertificateRef",
                "an HTTPS listener needs tls.certificateRefs".to_string(),
            ));
        }
        if let Some(first) = refs.first() {
            let namespace = first.namespace.as_deref().unwrap_or(&gateway.namespace);
            let group = first.group.as_deref().unwrap_or("");
            let kind = first.kind.as_deref().unwrap_or("Secret");
            let outcome = if !group.is_empty() || kind != "Secret" {
                Err((
                    "InvalidCertificateRef",
                    format!(
                        "certificateRefs[0]: kind {}/{} is not supported: core Secrets are",
                        validate::printable(group),
                        validate::printable(kind)
                    ),
                ))
            } else if validate::dns_subdomain(&first.name).is_err()
                || validate::dns_label(namespace).is_err()
            {
                Err((
                    "InvalidCertificateRef",
                    "certificateRefs[0]: not a valid Secret name".to_string(),
                ))
            } else if *namespace != *gateway.namespace
                && !granted(
                    grants,
                    "Gateway",
                    &gateway.namespace,
                    namespace,
                    "Secret",
                    &first.name,
                )
            {
                Err((
                    "RefNotPermitted",
                    format!(
                        "certificateRefs[0]: Secret {namespace}/{} is in another namespace \
                         and no ReferenceGrant there allows it",
                        first.name
                    ),
                ))
            } else {
                let secret = ObjectKey::new(namespace, &first.name);
                match check_certificate(&secret) {
                    Ok(()) => {
                        certificate = Some(secret);
                        Ok(())
                    }
                    Err(message) => Err((
                        "InvalidCertificateRef",
                        format!("certificateRefs[0]: Secret {secret}: {message}"),
                    )),
                }
            };
            if let Err(err) = outcome
                && resolved.is_ok()
            {
                resolved = Err(err);
            }
        }
    }
    // Conflicted: a second listener of this Gateway on the same bind and hostname (an
    // SNI name is either terminated or passed through), or TLS listeners of both modes.
    let mut conflict: Option<(&'static str, String)> = None;
    let bind_port = match bind {
        Some(Bind::Own(port)) => Some(port),
        _ => None,
    };
    // A TCP listener's port is a TCP service, a TLS one's a passthrough frontend: not an
    // HTTP or HTTPS bind of its own.
    let own_port = bind_port.filter(|_| matches!(listener.protocol.as_str(), "HTTP" | "HTTPS"));
    let port_protocol = bind_port
        .filter(|_| accepted.is_ok())
        .and_then(|port| port_protocols.get(&port))
        .filter(|(protocol, _)| *protocol != listener.protocol);
    if mixed_tls_port {
        conflict = Some((
            "ProtocolConflict",
            "TLS listeners of both modes, Terminate and Passthrough, share its port".into(),
        ));
    } else if let Some((protocol, owner)) = port_protocol {
        conflict = Some((
            "ProtocolConflict",
            format!(
                "port {} is already served for {protocol} by {owner}: one port has one \
                 protocol",
                listener.port
            ),
        ));
    } else if accepted.is_ok()
        && let Some(bind) = bind
        && !claimed.insert((bind, hostname.clone()))
    {
        conflict = Some((
            "HostnameConflict",
            "another listener of this Gateway has the same port and hostname".into(),
        ));
    }
    if conflict.is_none()
        && accepted.is_ok()
        && let Some(port) = bind_port
    {
        port_protocols.entry(port).or_insert_with(|| {
            (
                listener.protocol.clone(),
                format!(
                    "listener {} of Gateway {gateway}",
                    validate::printable(&listener.name)
                ),
            )
        });
    }
    let conflicted = conflict.is_some();

    let mut conditions = Vec::new();
    match &accepted {
        Ok(()) => conditions.push(Condition::new("Accepted", true, "Accepted", "", generation)),
        Err((reason, message)) => {
            problem(format!("{field}.port"), message);
            conditions.push(Condition::new(
                "Accepted",
                false,
                reason,
                message.clone(),
                generation,
            ));
        }
    }
    match &resolved {
        Ok(()) => conditions.push(Condition::new(
            "ResolvedRefs",
            true,
            "ResolvedRefs",
            "",
            generation,
        )),
        Err((reason, message)) => {
            problem(format!("{field}.tls"), message);
            conditions.push(Condition::new(
                "ResolvedRefs",
                false,
                reason,
                message.clone(),
                generation,
            ));
        }
    }
    conditions.push(if let Some((reason, message)) = conflict {
        let part = if reason == "HostnameConflict" {
            "hostname"
        } else {
            "protocol"
        };
        problem(format!("{field}.{part}"), &message);
        Condition::new("Conflicted", true, reason, message, generation)
    } else {
        Condition::new("Conflicted", false, "NoConflicts", "", generation)
    });
    let usable = accepted.is_ok() && !conflicted;
    conditions.push(if usable && resolved.is_ok() {
        Condition::new("Programmed", true, "Programmed", "", generation)
    } else {
        Condition::new(
            "Programmed",
            false,
            "Invalid",
            "the listener is not served as it is: see its other conditions",
            generation,
        )
    });
    let info = ListenerInfo {
        name: listener.name.clone(),
        port: listener.port,
        hostname,
        usable,
        tls: bind == Some(Bind::Https) || (own_port.is_some() && listener.protocol == "HTTPS"),
        own_port,
        passthrough_port: bind_port.filter(|_| listener.protocol == "TLS"),
        takes,
        from,
        certificate,
    };
    let state = ListenerState {
        name: listener.name.clone(),
        supported_kinds,
        attached_routes: 0,
        conditions,
    };
    (info, state)
}

/// Whether the labels of `namespace` match `selector` (`matchLabels` and
/// `matchExpressions` with `In`, `NotIn`, `Exists`, `DoesNotExist`).
fn selects(snapshot: &Snapshot, selector: &LabelSelector, namespace: &str) -> bool {
    let empty = BTreeMap::new();
    let labels = snapshot
        .namespaces
        .get(&ObjectKey::new("", namespace))
        .and_then(|ns| ns.metadata.labels.as_ref())
        .unwrap_or(&empty);
    let labels_match = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(key, value)| labels.get(key) == Some(value));
    let expressions_match = selector.match_expressions.iter().flatten().all(|req| {
        let values = req.values.as_deref().unwrap_or_default();
        let value = labels.get(&req.key);
        match req.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    labels_match && expressions_match
}

fn namespace_allowed(
    snapshot: &Snapshot,
    listener: &ListenerInfo,
    gateway_namespace: &str,
    route_namespace: &str,
) -> bool {
    match &listener.from {
        From::Same => gateway_namespace == route_namespace,
        From::All => true,
        From::Selector(selector) => selects(snapshot, selector, route_namespace),
    }
}

/// Whether `host` (a name or a wildcard) is covered by the wildcard `wildcard`
/// (`*.example.com` covers `a.example.com`, `a.b.example.com`, `*.a.example.com`).
fn covered_by(host: &str, wildcard: &str) -> bool {
    let Some(suffix) = wildcard.strip_prefix('*') else {
        return false;
    };
    host.len() > suffix.len() && host.ends_with(suffix)
}

/// The hostnames a route gets on a listener: the intersection of theirs, the more
/// specific of two that match. `""` stands for any host. Empty: none in common.
pub(crate) fn intersect(listener: Option<&str>, route: &[String]) -> Vec<String> {
    let mut hosts = Vec::new();
    match listener {
        None if route.is_empty() => hosts.push(String::new()),
        None => hosts.extend(route.iter().cloned()),
        Some(listener) if route.is_empty() => hosts.push(listener.to_string()),
        Some(listener) => {
            for host in route {
                if host == listener || covered_by(host, listener) {
                    hosts.push(host.clone());
                } else if covered_by(listener, host) {
                    hosts.push(listener.to_string());
                }
            }
        }
    }
    hosts.dedup();
    hosts
}

/// The match of a Gateway API hostname (validated): none is any host, and
/// `*.example.com` is any depth of subdomains, as the Gateway API says.
fn gateway_host_match(host: &str) -> HostMatch {
    if host.is_empty() {
        HostMatch::Any
    } else if let Some(suffix) = host.strip_prefix('*') {
        HostMatch::Subdomains(suffix.to_string())
    } else {
        HostMatch::Exact(host.to_string())
    }
}

/// One rule as the model reads it: its field, its paths (with their conditions), its
/// backend and its filters.
type RuleParts = (
    String,
    Vec<(PathMatch, Conditions)>,
    RuleBackend,
    FilterSpec,
);

/// What any route gives its parents' status, before any parent: its hostnames, what
/// it uses that is not supported, and its first reference that does not resolve.
#[derive(Default)]
struct RouteFacts {
    /// A field this controller does not support, and why: the route is not accepted.
    unsupported: Option<(String, String)>,
    /// The route's hostnames, validated and lower-cased.
    hostnames: Vec<String>,
    /// The first backend that does not resolve: reason and message.
    unresolved: Option<(&'static str, String)>,
}

impl RouteFacts {
    /// The facts of a route of `hostnames`, validated (the first bad one is not
    /// supported).
    fn of_hostnames(hostnames: &[String]) -> Self {
        let mut facts = RouteFacts::default();
        for (index, host) in hostnames.iter().enumerate() {
            match validate::ingress_host(host) {
                Ok(host) => facts.hostnames.push(host),
                Err(err) => {
                    facts
                        .unsupported
                        .get_or_insert((format!("spec.hostnames[{index}]"), err.0));
                }
            }
        }
        facts
    }
}

/// An HTTPRoute's rules as the model reads them, before any parent.
struct RouteRules {
    facts: RouteFacts,
    /// Per rule: its field, its paths (with their conditions), its backend and its
    /// filters.
    rules: Vec<RuleParts>,
}

fn route_rules(snapshot: &Snapshot, key: &ObjectKey, route: &HttpRoute) -> RouteRules {
    let mut out = RouteRules {
        facts: RouteFacts::of_hostnames(&route.spec.hostnames),
        rules: Vec::new(),
    };
    for (index, rule) in route.spec.rules.iter().enumerate() {
        let field = format!("spec.rules[{index}]");
        match rule_paths(rule, &field).and_then(|paths| Ok((paths, rule_filters(rule, &field)?))) {
            Ok((paths, filters)) => {
                let backend = if filters.redirects() && rule.backend_refs.is_empty() {
                    // A redirect answers by itself.
                    RuleBackend::Unresolved
                } else {
                    rule_backend(snapshot, key, rule, &field, &mut out.facts)
                };
                out.rules.push((field, paths, backend, filters));
            }
            Err(unsupported) => {
                out.facts.unsupported.get_or_insert(unsupported);
            }
        }
    }
    out
}

/// Checks that the weight of every backendRef of the rule at `field` is in the API's
/// range; sets `facts.unsupported` for the first that is not.
fn weights_in_range<'b>(
    field: &str,
    backends: impl IntoIterator<Item = &'b BackendRef>,
    facts: &mut RouteFacts,
) -> bool {
    for (index, backend) in backends.into_iter().enumerate() {
        let weight = backend.weight.unwrap_or(1);
        if !(0..=1_000_000).contains(&weight) {
            facts.unsupported.get_or_insert((
                format!("{field}.backendRefs[{index}].weight"),
                format!("weight {weight} is out of range: 0 to 1000000"),
            ));
            return false;
        }
    }
    true
}

/// The backend of a rule. Sets `facts.unsupported` for what is not supported and
/// `facts.unresolved` for a reference that does not resolve.
fn rule_backend(
    snapshot: &Snapshot,
    route: &ObjectKey,
    rule: &HttpRouteRule,
    field: &str,
    facts: &mut RouteFacts,
) -> RuleBackend {
    let backends: Vec<&BackendRef> = rule.backend_refs.iter().map(|b| &b.backend).collect();
    if !weights_in_range(field, backends.iter().copied(), facts) {
        return RuleBackend::Unresolved;
    }
    if let Some(index) = rule
        .backend_refs
        .iter()
        .position(|backend| backend.filters.as_ref().is_some_and(|f| !f.is_empty()))
    {
        facts.unsupported.get_or_insert((
            format!("{field}.backendRefs[{index}].filters"),
            "filters on a backendRef are not supported yet (docs/gateway-api.md)".into(),
        ));
        return RuleBackend::Unresolved;
    }
    let weighted: Vec<(usize, &BackendRef)> = backends
        .into_iter()
        .enumerate()
        .filter(|(_, backend)| backend.weight.unwrap_or(1) != 0)
        .collect();
    let mut shares = Vec::new();
    for (index, backend) in &weighted {
        let share_field = format!("{field}.backendRefs[{index}]");
        let resolved = match resolve_backend(snapshot, RouteKind::Http, route, backend.target()) {
            Ok(found) => Some(found),
            Err((reason, message)) => {
                facts
                    .unresolved
                    .get_or_insert((reason, format!("{share_field}: {message}")));
                None
            }
        };
        // Checked above: 1 to 1000000.
        let weight = u32::try_from(backend.weight.unwrap_or(1)).unwrap_or(1);
        shares.push((resolved, weight));
    }
    match shares.as_slice() {
        [] => RuleBackend::Unresolved,
        [(Some((service, port)), _)] => RuleBackend::Service {
            service: service.clone(),
            port: *port,
        },
        _ if shares.iter().all(|(backend, _)| backend.is_none()) => RuleBackend::Unresolved,
        _ => RuleBackend::Split(shares),
    }
}

/// What happens to the traffic of a route of `kind` whose backend does not resolve.
fn unresolved_consequence(kind: RouteKind) -> &'static str {
    match kind {
        RouteKind::Http => "its requests get 500",
        RouteKind::Tls | RouteKind::Tcp => "its connections are closed",
    }
}

fn resolve_backend(
    snapshot: &Snapshot,
    kind: RouteKind,
    route: &ObjectKey,
    backend: BackendTarget<'_>,
) -> Result<(ObjectKey, u16), (&'static str, String)> {
    if !backend.is_service() {
        return Err((
            "InvalidKind",
            format!(
                "kind {}/{} is not supported: core Services are",
                validate::printable(backend.group),
                validate::printable(backend.kind)
            ),
        ));
    }
    let namespace = backend.namespace.unwrap_or(&route.namespace);
    if validate::dns_label(namespace).is_err() || validate::dns_label(backend.name).is_err() {
        return Err((
            "BackendNotFound",
            format!(
                "'{}' is not a valid Service name",
                validate::printable(backend.name)
            ),
        ));
    }
    if *namespace != *route.namespace
        && !granted(
            &snapshot.reference_grants,
            kind.name(),
            &route.namespace,
            namespace,
            "Service",
            backend.name,
        )
    {
        return Err((
            "RefNotPermitted",
            format!(
                "Service {namespace}/{} is in another namespace and no ReferenceGrant there \
                 allows it",
                backend.name
            ),
        ));
    }
    let service = ObjectKey::new(namespace, backend.name);
    let Some(port) = backend.port else {
        return Err((
            "BackendNotFound",
            "a Service backendRef needs a port".to_string(),
        ));
    };
    let port = validate::port_number(port).map_err(|err| ("BackendNotFound", err.0))?;
    let consequence = unresolved_consequence(kind);
    let found = snapshot.services.get(&service).ok_or_else(|| {
        (
            "BackendNotFound",
            format!("Service {service} not found: {consequence}"),
        )
    })?;
    let has_port = found
        .spec
        .as_ref()
        .and_then(|spec| spec.ports.as_ref())
        .is_some_and(|ports| ports.iter().any(|p| p.port == i32::from(port)));
    if !has_port {
        return Err((
            "BackendNotFound",
            format!("Service {service} has no port {port}: {consequence}"),
        ));
    }
    Ok((service, port))
}

/// The key of the Gateway of ours that `parent` (of a route in `namespace`) names.
fn our_gateway(
    parent: &ParentReference,
    namespace: &str,
    gateways: &BTreeMap<ObjectKey, GatewayInfo>,
) -> Option<ObjectKey> {
    let group = parent.group.as_deref().unwrap_or(GROUP);
    let kind = parent.kind.as_deref().unwrap_or("Gateway");
    if group != GROUP || kind != "Gateway" {
        return None;
    }
    let key = ObjectKey::new(
        parent.namespace.as_deref().unwrap_or(namespace),
        &parent.name,
    );
    gateways.contains_key(&key).then_some(key)
}

/// A route as [`attach_parents`] reads it.
struct RouteToAttach<'r> {
    kind: RouteKind,
    key: &'r ObjectKey,
    parent_refs: &'r [ParentReference],
    generation: i64,
    facts: &'r RouteFacts,
}

/// A parent that accepted a route: its place in the route's status, and the listeners
/// the route attached to there.
struct AcceptedParent {
    place: usize,
    gateway: ObjectKey,
    listeners: Vec<AttachedListener>,
}

/// Attaches a route to its parents of ours: its status and problems, and the parents
/// that accepted it (the caller adds what it routes there).
fn attach_parents(
    snapshot: &Snapshot,
    route: &RouteToAttach<'_>,
    gateways: &BTreeMap<ObjectKey, GatewayInfo>,
    out: &mut Translation,
) -> Vec<AcceptedParent> {
    let (key, generation, facts) = (route.key, route.generation, route.facts);
    let object = ObjectRef::of(route.kind.name(), key);
    let mut accepted_parents = Vec::new();
    let mut parents = Vec::new();
    for parent in route.parent_refs {
        let Some(gateway_key) = our_gateway(parent, &key.namespace, gateways) else {
            continue;
        };
        let Some(gateway) = gateways.get(&gateway_key) else {
            continue;
        };
        let (accepted, attached) =
            attach_to_gateway(snapshot, route, parent, &gateway_key, gateway);
        let mut conditions = vec![accepted.clone()];
        conditions.push(match &facts.unresolved {
            None => Condition::new("ResolvedRefs", true, "ResolvedRefs", "", generation),
            Some((reason, message)) => {
                Condition::new("ResolvedRefs", false, reason, message.clone(), generation)
            }
        });
        if accepted.status {
            let place = parents.len();
            out.attachments.push(Attachment {
                kind: route.kind,
                route: key.clone(),
                parent: place,
                gateway: gateway_key.clone(),
                listeners: attached.iter().map(|listener| listener.index).collect(),
            });
            accepted_parents.push(AcceptedParent {
                place,
                gateway: gateway_key,
                listeners: attached,
            });
        } else {
            out.problems.push(ObjectProblem {
                object: object.clone(),
                field: "spec.parentRefs".into(),
                reason: ProblemReason::InvalidField,
                message: format!("parent Gateway {gateway_key}: {}", accepted.message),
            });
        }
        parents.push(RouteParentState {
            parent_ref: parent.clone(),
            conditions,
        });
    }
    if let Some((reason, message)) = &facts.unresolved {
        out.problems.push(ObjectProblem {
            object,
            field: "spec.rules".into(),
            reason: if *reason == "BackendNotFound" {
                ProblemReason::ServiceNotFound
            } else {
                ProblemReason::NotAllowed
            },
            message: message.clone(),
        });
    }
    if !parents.is_empty() {
        out.status
            .routes_of_mut(route.kind)
            .insert(key.clone(), RouteState { parents });
    }
    accepted_parents
}

/// Attaches one HTTPRoute to its parents of ours: its status, the listeners' counts and
/// its rules.
fn attach_route(
    snapshot: &Snapshot,
    key: &ObjectKey,
    route: &HttpRoute,
    gateways: &BTreeMap<ObjectKey, GatewayInfo>,
    listener_hosts: &mut BTreeMap<(ObjectKey, String), BTreeSet<String>>,
    out: &mut Translation,
) {
    let parent_refs = &route.spec.parent_refs;
    if !parent_refs
        .iter()
        .any(|parent| our_gateway(parent, &key.namespace, gateways).is_some())
    {
        return;
    }
    let rules = route_rules(snapshot, key, route);
    let to_attach = RouteToAttach {
        kind: RouteKind::Http,
        key,
        parent_refs,
        generation: route.metadata.generation.unwrap_or(0),
        facts: &rules.facts,
    };
    for accepted in attach_parents(snapshot, &to_attach, gateways, out) {
        for listener in accepted.listeners {
            let (tls, port, own_port) = (listener.tls, listener.port, listener.own_port);
            for host in &listener.hosts {
                for (field, paths, backend, filters) in &rules.rules {
                    for (path, conditions) in paths {
                        out.rules.push(RuleRoute {
                            route: key.clone(),
                            field: field.clone(),
                            host: gateway_host_match(host),
                            path: path.clone(),
                            // A bind of its own needs no condition: its routes are
                            // its own.
                            conditions: Conditions {
                                tls: own_port.is_none().then_some(tls),
                                ..conditions.clone()
                            },
                            backend: backend.clone(),
                            features: features_on_listener(filters, path, tls, port),
                            parents: vec![accepted.place],
                            listener_port: own_port,
                        });
                    }
                }
            }
            listener_hosts
                .entry((accepted.gateway.clone(), listener.name))
                .or_default()
                .extend(listener.hosts);
        }
    }
}

/// A TLSRoute as the model reads it, before any parent: its facts and the Service port
/// its connections go to (`None`: not resolved, or no backend of non-zero weight).
fn tls_route_parts(
    snapshot: &Snapshot,
    key: &ObjectKey,
    route: &TlsRoute,
) -> (RouteFacts, Option<(ObjectKey, u16)>) {
    let mut facts = RouteFacts::of_hostnames(&route.spec.hostnames);
    if route.spec.hostnames.is_empty() {
        facts.unsupported.get_or_insert((
            "spec.hostnames".into(),
            "a TLSRoute needs at least one hostname: the SNI name its connections are \
             chosen by"
                .into(),
        ));
    }
    let backend = single_backend(snapshot, RouteKind::Tls, key, &route.spec.rules, &mut facts);
    (facts, backend)
}

/// The Service port of the one rule of a TLSRoute or TCPRoute (`kind`), whose
/// connections go to one backend: `None` (and why in `facts`) when the rules are not
/// one, several backends have a weight, or the backend does not resolve.
fn single_backend(
    snapshot: &Snapshot,
    kind: RouteKind,
    key: &ObjectKey,
    rules: &[TlsRouteRule],
    facts: &mut RouteFacts,
) -> Option<(ObjectKey, u16)> {
    let [rule] = rules else {
        facts.unsupported.get_or_insert((
            "spec.rules".into(),
            format!(
                "a {} has exactly one rule, this one has {}",
                kind.name(),
                rules.len()
            ),
        ));
        return None;
    };
    let field = "spec.rules[0]";
    if !weights_in_range(field, rule.backend_refs.iter(), facts) {
        return None;
    }
    let weighted: Vec<(usize, BackendTarget<'_>)> = rule
        .backend_refs
        .iter()
        .enumerate()
        .filter(|(_, backend)| backend.weight.unwrap_or(1) != 0)
        .map(|(index, backend)| (index, backend.target()))
        .collect();
    let [(index, target)] = weighted.as_slice() else {
        if weighted.len() > 1 {
            let each = match kind {
                RouteKind::Tcp => "each port",
                _ => "each SNI name",
            };
            facts.unsupported.get_or_insert((
                format!("{field}.backendRefs"),
                format!(
                    "several backendRefs of non-zero weight are not supported on a {}: \
                     haproxy passes {each} to one backend (give the others weight 0, \
                     or split with a Service whose endpoints are both)",
                    kind.name()
                ),
            ));
        }
        return None;
    };
    match resolve_backend(snapshot, kind, key, *target) {
        Ok(found) => Some(found),
        Err((reason, message)) => {
            facts
                .unresolved
                .get_or_insert((reason, format!("{field}.backendRefs[{index}]: {message}")));
            None
        }
    }
}

/// Attaches one TCPRoute to its parents of ours: its status, the listeners' counts and
/// one rule per port of the listeners that accept it (a port several parents give is
/// one rule of all of them).
fn attach_tcp_route(
    snapshot: &Snapshot,
    key: &ObjectKey,
    route: &TcpRoute,
    gateways: &BTreeMap<ObjectKey, GatewayInfo>,
    out: &mut Translation,
) {
    let parent_refs = &route.spec.parent_refs;
    if !parent_refs
        .iter()
        .any(|parent| our_gateway(parent, &key.namespace, gateways).is_some())
    {
        return;
    }
    let mut facts = RouteFacts::of_hostnames(&[]);
    let backend = single_backend(snapshot, RouteKind::Tcp, key, &route.spec.rules, &mut facts);
    let to_attach = RouteToAttach {
        kind: RouteKind::Tcp,
        key,
        parent_refs,
        generation: route.metadata.generation.unwrap_or(0),
        facts: &facts,
    };
    let mut rules: Vec<TcpRule> = Vec::new();
    for accepted in attach_parents(snapshot, &to_attach, gateways, out) {
        for listener in &accepted.listeners {
            // A TCP listener is accepted only on a port that has a bind port.
            let Ok(port) = u16::try_from(listener.port) else {
                continue;
            };
            match rules.iter_mut().find(|rule| rule.port == port) {
                Some(rule) => {
                    if !rule.parents.contains(&accepted.place) {
                        rule.parents.push(accepted.place);
                    }
                }
                None => rules.push(TcpRule {
                    route: key.clone(),
                    port,
                    backend: backend.clone(),
                    parents: vec![accepted.place],
                }),
            }
        }
    }
    out.tcp.extend(rules);
}

/// Attaches one TLSRoute to its parents of ours: its status, the listeners' counts and
/// its passthrough rules, one per SNI name (a name several parents give is one rule of
/// all of them).
fn attach_tls_route(
    snapshot: &Snapshot,
    key: &ObjectKey,
    route: &TlsRoute,
    gateways: &BTreeMap<ObjectKey, GatewayInfo>,
    out: &mut Translation,
) {
    let parent_refs = &route.spec.parent_refs;
    if !parent_refs
        .iter()
        .any(|parent| our_gateway(parent, &key.namespace, gateways).is_some())
    {
        return;
    }
    let (facts, backend) = tls_route_parts(snapshot, key, route);
    let to_attach = RouteToAttach {
        kind: RouteKind::Tls,
        key,
        parent_refs,
        generation: route.metadata.generation.unwrap_or(0),
        facts: &facts,
    };
    let mut rules: Vec<PassthroughRule> = Vec::new();
    for accepted in attach_parents(snapshot, &to_attach, gateways, out) {
        let names = accepted.listeners.iter().flat_map(|listener| {
            let port = listener.passthrough_port;
            listener.hosts.iter().map(move |host| (port, host))
        });
        for (port, host) in names {
            let host = gateway_host_match(host);
            match rules
                .iter_mut()
                .find(|rule| rule.host == host && rule.port == port)
            {
                Some(rule) => {
                    if !rule.parents.contains(&accepted.place) {
                        rule.parents.push(accepted.place);
                    }
                }
                None => rules.push(PassthroughRule {
                    route: key.clone(),
                    created: route.metadata.creation_timestamp.clone(),
                    host,
                    backend: backend.clone(),
                    parents: vec![accepted.place],
                    port,
                }),
            }
        }
    }
    out.passthrough.extend(rules);
}

/// A listener a route attaches to: its index and name, whether the HTTPS bind serves
/// it, its port, and the route's hostnames there.
struct AttachedListener {
    index: usize,
    name: String,
    tls: bool,
    port: i32,
    own_port: Option<u16>,
    passthrough_port: Option<u16>,
    hosts: Vec<String>,
}

/// The features of a rule's path on a listener: a redirect that sets neither scheme nor
/// port keeps the listener's port, left out of the location when it is the well-known
/// port of the listener's scheme (80 for HTTP, 443 for HTTPS), as the spec says.
fn features_on_listener(
    filters: &FilterSpec,
    path: &PathMatch,
    tls: bool,
    port: i32,
) -> GatewayFeatures {
    let mut features = filters.for_path(path);
    if let Some(redirect) = &mut features.redirect
        && redirect.scheme.is_none()
        && redirect.port.is_none()
    {
        let well_known = if tls { 443 } else { 80 };
        if port != well_known {
            redirect.port = u16::try_from(port).ok();
        }
    }
    features
}

/// Attaches a route to the listeners of one Gateway its `parent` selects: the Accepted
/// condition, and the listeners that accept it with the hosts it got on each (empty
/// when not accepted). Only listeners that take the route's kind accept it.
fn attach_to_gateway(
    snapshot: &Snapshot,
    route: &RouteToAttach<'_>,
    parent: &ParentReference,
    gateway_key: &ObjectKey,
    gateway: &GatewayInfo,
) -> (Condition, Vec<AttachedListener>) {
    let refuse = |reason: &'static str, message: String| {
        (
            Condition::new("Accepted", false, reason, message, route.generation),
            Vec::new(),
        )
    };
    if !gateway.accepted {
        return refuse(
            "NoMatchingParent",
            "the Gateway is not accepted: see its conditions".into(),
        );
    }
    let selected: Vec<usize> = gateway
        .listeners
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            parent
                .section_name
                .as_deref()
                .is_none_or(|name| name == l.name)
                && parent.port.is_none_or(|port| port == l.port)
        })
        .map(|(index, _)| index)
        .collect();
    if selected.is_empty() {
        return refuse(
            "NoMatchingParent",
            "no listener of the Gateway has this sectionName and port".into(),
        );
    }
    let allowed: Vec<usize> = selected
        .iter()
        .copied()
        .filter(|&index| {
            let listener = &gateway.listeners[index];
            listener.usable
                && listener.takes == Some(route.kind)
                && namespace_allowed(
                    snapshot,
                    listener,
                    &gateway_key.namespace,
                    &route.key.namespace,
                )
        })
        .collect();
    let invalid: Vec<String> = selected
        .iter()
        .map(|&index| &gateway.listeners[index])
        .filter(|listener| !listener.usable)
        .map(|listener| validate::printable(&listener.name))
        .collect();
    if invalid.len() == selected.len() {
        return refuse(
            "NotAllowedByListeners",
            format!(
                "the listeners selected are not valid, so they serve nothing (see the \
                 Gateway's listener conditions): {}",
                invalid.join(", ")
            ),
        );
    }
    if allowed.is_empty() {
        let needs = match route.kind {
            RouteKind::Http => "an HTTP or HTTPS listener",
            RouteKind::Tls => "a TLS listener in Passthrough mode",
            RouteKind::Tcp => "a TCP listener on a port of --gateway-listener-ports",
        };
        return refuse(
            "NotAllowedByListeners",
            format!(
                "no listener selected allows {}s from this namespace (a {} needs {needs})",
                route.kind.name(),
                route.kind.name()
            ),
        );
    }
    let attached: Vec<AttachedListener> = allowed
        .iter()
        .map(|&index| {
            let listener = &gateway.listeners[index];
            AttachedListener {
                index,
                name: listener.name.clone(),
                tls: listener.tls,
                port: listener.port,
                own_port: listener.own_port,
                passthrough_port: listener.passthrough_port,
                hosts: intersect(listener.hostname.as_deref(), &route.facts.hostnames),
            }
        })
        .filter(|listener| !listener.hosts.is_empty())
        .collect();
    if attached.is_empty() {
        return refuse(
            "NoMatchingListenerHostname",
            "no hostname of the route matches a hostname of the listeners".into(),
        );
    }
    if let Some((field, message)) = &route.facts.unsupported {
        return refuse("UnsupportedValue", format!("{field}: {message}"));
    }
    (
        Condition::new("Accepted", true, "Accepted", "", route.generation),
        attached,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostname_intersection() {
        let hosts = |route: &[&str]| route.iter().map(|h| h.to_string()).collect::<Vec<_>>();
        assert_eq!(intersect(None, &[]), [""]);
        assert_eq!(intersect(Some("a.example.com"), &[]), ["a.example.com"]);
        assert_eq!(
            intersect(
                Some("*.example.com"),
                &hosts(&["a.example.com", "x.org", "*.b.example.com"])
            ),
            ["a.example.com", "*.b.example.com"]
        );
        assert_eq!(
            intersect(Some("a.example.com"), &hosts(&["*.example.com"])),
            ["a.example.com"]
        );
        assert!(intersect(Some("example.com"), &hosts(&["*.example.com"])).is_empty());
        assert!(intersect(Some("a.example.com"), &hosts(&["b.example.com"])).is_empty());
    }
}
