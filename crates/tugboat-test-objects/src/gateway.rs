//! Gateway API objects: GatewayClasses, Gateways and their listeners, HTTPRoutes (rules,
//! matches, filters, backend references), TLSRoutes, ReferenceGrants, and Namespaces
//! with labels.
//!
//! The model declares its own lean types for these kinds, and this crate sits below the
//! model, so these are the objects' wire form: structs that serialize to the JSON the API
//! server serves (with `apiVersion` and `kind`) and read it back. A test turns one into
//! the model's type with `serde_json::from_value(to_json(&object))`. The metadata is
//! k8s-openapi's, so [`crate::in_namespace`], [`crate::with_generation`] and
//! [`crate::with_creation_timestamp`] apply to these kinds too.
//!
//! Builders are named `mk_*`; the parts of an object (a listener, a rule, a match, a
//! filter, a backend reference) take the rest of their fields by methods named after
//! them. Every namespaced object lives in namespace [`crate::NAMESPACE`] unless
//! [`crate::in_namespace`] moves it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::{ClusterResourceScope, Metadata, NamespaceResourceScope, Resource};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::meta;

/// The API group of the Gateway API kinds.
pub const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

/// Declares a Gateway API kind: its struct of `apiVersion`, `kind`, `metadata` and
/// `spec`, and the k8s-openapi traits that give the crate's metadata functions access.
macro_rules! gateway_kind {
    ($(#[$doc:meta])* $type:ident = $kind:literal, $spec:ty, $version:literal, $plural:literal, $scope:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub struct $type {
            pub api_version: String,
            pub kind: String,
            pub metadata: ObjectMeta,
            pub spec: $spec,
        }

        impl $type {
            fn new(metadata: ObjectMeta, spec: $spec) -> Self {
                Self {
                    api_version: Self::API_VERSION.to_string(),
                    kind: Self::KIND.to_string(),
                    metadata,
                    spec,
                }
            }
        }

        impl Resource for $type {
            const API_VERSION: &'static str = concat!("gateway.networking.k8s.io/", $version);
            const GROUP: &'static str = GATEWAY_GROUP;
            const KIND: &'static str = $kind;
            const VERSION: &'static str = $version;
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = $scope;
        }

        impl Metadata for $type {
            type Ty = ObjectMeta;

            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }

            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

gateway_kind!(
    /// A `GatewayClass`: which controller serves the Gateways of the class.
    GatewayClass = "GatewayClass",
    GatewayClassSpec,
    "v1",
    "gatewayclasses",
    ClusterResourceScope
);
gateway_kind!(
    /// A `Gateway`: listeners, and maybe the addresses it asks for.
    Gateway = "Gateway",
    GatewaySpec,
    "v1",
    "gateways",
    NamespaceResourceScope
);
gateway_kind!(
    /// An `HTTPRoute`: host and path rules from its parents (Gateways) to backends.
    HttpRoute = "HTTPRoute",
    HttpRouteSpec,
    "v1",
    "httproutes",
    NamespaceResourceScope
);
gateway_kind!(
    /// A `TLSRoute`: SNI names from its parents (Gateways) to backends.
    TlsRoute = "TLSRoute",
    TlsRouteSpec,
    "v1",
    "tlsroutes",
    NamespaceResourceScope
);
gateway_kind!(
    /// A `TCPRoute`: the connections of its parents' (Gateways') TCP listeners to a
    /// backend.
    TcpRoute = "TCPRoute",
    TcpRouteSpec,
    "v1",
    "tcproutes",
    NamespaceResourceScope
);
gateway_kind!(
    /// A `ReferenceGrant`: lets objects of other namespaces refer to this one's.
    ReferenceGrant = "ReferenceGrant",
    ReferenceGrantSpec,
    "v1beta1",
    "referencegrants",
    NamespaceResourceScope
);

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayClassSpec {
    pub controller_name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewaySpec {
    pub gateway_class_name: String,
    pub listeners: Vec<Listener>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<GatewayAddress>,
}

/// An address a Gateway asks for: of `type_` (`IPAddress` when `None`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GatewayAddress {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    pub value: String,
}

/// A Gateway's listener.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Listener {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    pub port: i32,
    pub protocol: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<ListenerTls>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_routes: Option<AllowedRoutes>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerTls {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub certificate_refs: Vec<ObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<BTreeMap<String, String>>,
}

/// A reference to an object by name, maybe of another namespace, group or kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ObjectReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AllowedRoutes {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<RouteNamespaces>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kinds: Option<Vec<RouteGroupKind>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RouteNamespaces {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RouteGroupKind {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub kind: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteSpec {
    pub parent_refs: Vec<ParentReference>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hostnames: Vec<String>,
    pub rules: Vec<RouteRule>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsRouteSpec {
    pub parent_refs: Vec<ParentReference>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hostnames: Vec<String>,
    pub rules: Vec<TlsRouteRule>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TcpRouteSpec {
    pub parent_refs: Vec<ParentReference>,
    pub rules: Vec<TlsRouteRule>,
}

/// A rule of a TLSRoute or TCPRoute: its backends ([`BackendRef`] without filters).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsRouteRule {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backend_refs: Vec<BackendRef>,
}

/// A route's parent: a Gateway, maybe of another namespace, maybe one of its listeners
/// (by name or port).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

/// A rule of an HTTPRoute. `retry` is JSON: the controller refuses any.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteRule {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<RouteMatch>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<RouteFilter>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backend_refs: Vec<BackendRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<RouteTimeouts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Value>,
}

/// A rule's `timeouts`, as written (`10s`, `1m500ms`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteTimeouts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_request: Option<String>,
}

/// One match of a rule: every condition set must hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteMatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathMatch>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<Vec<ValueMatch>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_params: Option<Vec<ValueMatch>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
}

/// A path match: of `type_` (`PathPrefix` when `None`), `value` (`/` when `None`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PathMatch {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// A header or query parameter match: of `type_` (`Exact` when `None`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ValueMatch {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    pub name: String,
    pub value: String,
}

/// A filter: its type, and the settings of that type. The kinds the controller refuses
/// (`RequestMirror`, `ExtensionRef`) are JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteFilter {
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_header_modifier: Option<HeaderModifier>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_header_modifier: Option<HeaderModifier>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_redirect: Option<Redirect>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_rewrite: Option<Rewrite>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_mirror: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension_ref: Option<Value>,
}

/// The headers a `RequestHeaderModifier` or `ResponseHeaderModifier` changes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HeaderModifier {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set: Vec<Header>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<Header>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub name: String,
    pub value: String,
}

/// A `RequestRedirect`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Redirect {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathModifier>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_code: Option<i32>,
}

/// A `URLRewrite`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Rewrite {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathModifier>,
}

/// The path of a redirect or a rewrite.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathModifier {
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace_full_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace_prefix_match: Option<String>,
}

/// A backend of a rule: a Service port (or an object of another kind), with a weight,
/// maybe its own filters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BackendRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filters: Option<Vec<RouteFilter>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReferenceGrantSpec {
    pub from: Vec<ReferenceGrantFrom>,
    pub to: Vec<ReferenceGrantTo>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReferenceGrantFrom {
    pub group: String,
    pub kind: String,
    pub namespace: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReferenceGrantTo {
    pub group: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// The GatewayClass `name` of `controller` (Tugboat's is `tugboat.dev/gateway`).
pub fn mk_gateway_class(name: &str, controller: &str) -> GatewayClass {
    GatewayClass::new(
        ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        GatewayClassSpec {
            controller_name: controller.to_string(),
        },
    )
}

/// The Gateway `name` of class `class` with `listeners`.
pub fn mk_gateway(name: &str, class: &str, listeners: Vec<Listener>) -> Gateway {
    Gateway::new(
        meta(name),
        GatewaySpec {
            gateway_class_name: class.to_string(),
            listeners,
            addresses: Vec::new(),
        },
    )
}

impl Gateway {
    /// The Gateway asking for one more address: `value` of `type_` (`IPAddress` when
    /// `None`).
    pub fn address(mut self, type_: Option<&str>, value: &str) -> Self {
        self.spec.addresses.push(GatewayAddress {
            type_: type_.map(str::to_string),
            value: value.to_string(),
        });
        self
    }
}

/// A listener of `protocol` on `port`, for `hostname` or (`None`) any host, taking routes
/// of its Gateway's namespace.
pub fn mk_listener(name: &str, protocol: &str, port: i32, hostname: Option<&str>) -> Listener {
    Listener {
        name: name.to_string(),
        hostname: hostname.map(str::to_string),
        port,
        protocol: protocol.to_string(),
        tls: None,
        allowed_routes: None,
    }
}

/// An HTTPS listener on port 443 for `hostname`, terminating TLS with the Secret
/// `secret.1` (in namespace `secret.0`, or the Gateway's).
pub fn mk_https_listener(name: &str, hostname: &str, secret: (Option<&str>, &str)) -> Listener {
    mk_https_listener_for(name, Some(hostname), secret)
}

/// [`mk_https_listener`], for `hostname` or (`None`) any host.
pub fn mk_https_listener_for(
    name: &str,
    hostname: Option<&str>,
    secret: (Option<&str>, &str),
) -> Listener {
    Listener {
        tls: Some(ListenerTls {
            certificate_refs: vec![ObjectReference {
                name: secret.1.to_string(),
                namespace: secret.0.map(str::to_string),
                ..ObjectReference::default()
            }],
            ..ListenerTls::default()
        }),
        ..mk_listener(name, "HTTPS", 443, hostname)
    }
}

/// A listener of protocol `TLS` in mode `Passthrough` on `port`, for `hostname` or
/// (`None`) any SNI name, taking routes of its Gateway's namespace.
pub fn mk_tls_passthrough_listener(name: &str, port: i32, hostname: Option<&str>) -> Listener {
    mk_listener(name, "TLS", port, hostname).tls_mode("Passthrough")
}

impl Listener {
    /// The listener taking routes from every namespace.
    pub fn routes_from_all_namespaces(self) -> Self {
        self.routes_from(RouteNamespaces {
            from: Some("All".to_string()),
            selector: None,
        })
    }

    /// The listener taking routes from the namespaces `selector` selects.
    pub fn routes_from_selected_namespaces(self, selector: LabelSelector) -> Self {
        self.routes_from(RouteNamespaces {
            from: Some("Selector".to_string()),
            selector: Some(selector),
        })
    }

    fn routes_from(mut self, namespaces: RouteNamespaces) -> Self {
        self.allowed_routes
            .get_or_insert_with(AllowedRoutes::default)
            .namespaces = Some(namespaces);
        self
    }

    /// The listener taking routes of these kinds only.
    pub fn route_kinds(mut self, kinds: &[&str]) -> Self {
        self.allowed_routes
            .get_or_insert_with(AllowedRoutes::default)
            .kinds = Some(
            kinds
                .iter()
                .map(|kind| RouteGroupKind {
                    group: None,
                    kind: kind.to_string(),
                })
                .collect(),
        );
        self
    }

    /// The listener with TLS mode `mode` (`Terminate` or `Passthrough`).
    pub fn tls_mode(mut self, mode: &str) -> Self {
        self.tls.get_or_insert_with(ListenerTls::default).mode = Some(mode.to_string());
        self
    }
}

/// A selector of the objects with all these labels.
pub fn mk_label_selector(labels: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(
            labels
                .iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect(),
        ),
        match_expressions: None,
    }
}

/// The HTTPRoute `name` attached to the Gateway `gateway` of its namespace, for
/// `hostnames` (every host its listeners take when empty), with `rules`.
pub fn mk_http_route(
    name: &str,
    gateway: &str,
    hostnames: &[&str],
    rules: Vec<RouteRule>,
) -> HttpRoute {
    mk_http_route_on(name, mk_parent_ref(gateway), hostnames, rules)
}

/// [`mk_http_route`], attached to `parent`.
pub fn mk_http_route_on(
    name: &str,
    parent: ParentReference,
    hostnames: &[&str],
    rules: Vec<RouteRule>,
) -> HttpRoute {
    HttpRoute::new(
        meta(name),
        HttpRouteSpec {
            parent_refs: vec![parent],
            hostnames: hostnames.iter().map(|host| host.to_string()).collect(),
            rules,
        },
    )
}

/// The TLSRoute `name` attached to the Gateway `gateway` of its namespace, for the SNI
/// names `hostnames`, with one rule of `backend_refs`.
pub fn mk_tls_route(
    name: &str,
    gateway: &str,
    hostnames: &[&str],
    backend_refs: Vec<BackendRef>,
) -> TlsRoute {
    mk_tls_route_on(name, mk_parent_ref(gateway), hostnames, backend_refs)
}

/// [`mk_tls_route`], attached to `parent`.
pub fn mk_tls_route_on(
    name: &str,
    parent: ParentReference,
    hostnames: &[&str],
    backend_refs: Vec<BackendRef>,
) -> TlsRoute {
    TlsRoute::new(
        meta(name),
        TlsRouteSpec {
            parent_refs: vec![parent],
            hostnames: hostnames.iter().map(|host| host.to_string()).collect(),
            rules: vec![TlsRouteRule { backend_refs }],
        },
    )
}

/// The TCPRoute `name` attached to the Gateway `gateway` of its namespace, with one
/// rule of `backend_refs`.
pub fn mk_tcp_route(name: &str, gateway: &str, backend_refs: Vec<BackendRef>) -> TcpRoute {
    TcpRoute::new(
        meta(name),
        TcpRouteSpec {
            parent_refs: vec![mk_parent_ref(gateway)],
            rules: vec![TlsRouteRule { backend_refs }],
        },
    )
}

impl TlsRoute {
    /// The route with one more rule of `backend_refs` (the API allows one: a test of a
    /// refusal wants two).
    pub fn rule(mut self, backend_refs: Vec<BackendRef>) -> Self {
        self.spec.rules.push(TlsRouteRule { backend_refs });
        self
    }
}

/// A parent reference to the Gateway `gateway` of the route's namespace, all its
/// listeners.
pub fn mk_parent_ref(gateway: &str) -> ParentReference {
    ParentReference {
        name: gateway.to_string(),
        ..ParentReference::default()
    }
}

impl ParentReference {
    /// The reference to the Gateway of namespace `namespace`.
    pub fn namespace(self, namespace: &str) -> Self {
        Self {
            namespace: Some(namespace.to_string()),
            ..self
        }
    }

    /// The reference to the Gateway's listener named `section`.
    pub fn section(self, section: &str) -> Self {
        Self {
            section_name: Some(section.to_string()),
            ..self
        }
    }

    /// The reference to the Gateway's listeners on `port`.
    pub fn port(self, port: i32) -> Self {
        Self {
            port: Some(port),
            ..self
        }
    }
}

/// A rule without matches (every request) or filters, to `backend_refs`.
pub fn mk_route_rule(backend_refs: Vec<BackendRef>) -> RouteRule {
    RouteRule {
        backend_refs,
        ..RouteRule::default()
    }
}

/// A rule of path `matches` (`(type, value)`) to Service `service` port `port`.
pub fn mk_rule_to(matches: &[(&str, &str)], service: &str, port: i32) -> RouteRule {
    mk_route_rule(vec![mk_backend_ref(service, port)]).matches(
        matches
            .iter()
            .map(|(type_, value)| mk_path_match(type_, value))
            .collect(),
    )
}

/// A rule of one `PathPrefix` match to weighted Services: `(service, port, weight)`.
pub fn mk_weighted_rule(prefix: &str, backends: &[(&str, i32, i32)]) -> RouteRule {
    mk_route_rule(
        backends
            .iter()
            .map(|(service, port, weight)| mk_backend_ref(service, *port).weight(*weight))
            .collect(),
    )
    .matches(vec![mk_path_match("PathPrefix", prefix)])
}

impl RouteRule {
    /// The rule with these matches instead of its own.
    pub fn matches(self, matches: Vec<RouteMatch>) -> Self {
        Self { matches, ..self }
    }

    /// The rule with one more filter, after its others.
    pub fn filter(mut self, filter: RouteFilter) -> Self {
        self.filters.push(filter);
        self
    }

    /// The rule without backends (a redirect needs none).
    pub fn without_backends(self) -> Self {
        Self {
            backend_refs: Vec::new(),
            ..self
        }
    }

    /// The rule with `timeouts`: `request` and `backend_request` as written, when set.
    pub fn timeouts(self, request: Option<&str>, backend_request: Option<&str>) -> Self {
        Self {
            timeouts: Some(RouteTimeouts {
                request: request.map(str::to_string),
                backend_request: backend_request.map(str::to_string),
            }),
            ..self
        }
    }

    /// The rule with `retry` (JSON, as the user writes it).
    pub fn retry(self, retry: Value) -> Self {
        Self {
            retry: Some(retry),
            ..self
        }
    }
}

/// A match of every request, to be narrowed by its methods.
pub fn mk_match() -> RouteMatch {
    RouteMatch::default()
}

/// A match of the path `value`, of `type_` (`Exact`, `PathPrefix`, `RegularExpression`).
pub fn mk_path_match(type_: &str, value: &str) -> RouteMatch {
    RouteMatch {
        path: Some(PathMatch {
            type_: Some(type_.to_string()),
            value: Some(value.to_string()),
        }),
        ..RouteMatch::default()
    }
}

impl RouteMatch {
    /// The match of the path `value`, its type left to the default (`PathPrefix`).
    pub fn path(self, value: &str) -> Self {
        Self {
            path: Some(PathMatch {
                type_: None,
                value: Some(value.to_string()),
            }),
            ..self
        }
    }

    /// The match, also of header `name` with `value` (exactly).
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers
            .get_or_insert_with(Vec::new)
            .push(value_match(None, name, value));
        self
    }

    /// The match, also of query parameter `name` matching `value` by `type_` (`Exact`
    /// when `None`, or `RegularExpression`).
    pub fn query_param(mut self, type_: Option<&str>, name: &str, value: &str) -> Self {
        self.query_params
            .get_or_insert_with(Vec::new)
            .push(value_match(type_, name, value));
        self
    }

    /// The match, also of the method `method`.
    pub fn method(self, method: &str) -> Self {
        Self {
            method: Some(method.to_string()),
            ..self
        }
    }
}

fn value_match(type_: Option<&str>, name: &str, value: &str) -> ValueMatch {
    ValueMatch {
        type_: type_.map(str::to_string),
        name: name.to_string(),
        value: value.to_string(),
    }
}

/// A filter of `type_` with none of its settings.
pub fn mk_filter(type_: &str) -> RouteFilter {
    RouteFilter {
        type_: type_.to_string(),
        ..RouteFilter::default()
    }
}

/// A `RequestHeaderModifier` filter.
pub fn mk_request_header_filter(modifier: HeaderModifier) -> RouteFilter {
    RouteFilter {
        request_header_modifier: Some(modifier),
        ..mk_filter("RequestHeaderModifier")
    }
}

/// A `ResponseHeaderModifier` filter.
pub fn mk_response_header_filter(modifier: HeaderModifier) -> RouteFilter {
    RouteFilter {
        response_header_modifier: Some(modifier),
        ..mk_filter("ResponseHeaderModifier")
    }
}

/// A `RequestRedirect` filter.
pub fn mk_redirect_filter(redirect: Redirect) -> RouteFilter {
    RouteFilter {
        request_redirect: Some(redirect),
        ..mk_filter("RequestRedirect")
    }
}

/// A `URLRewrite` filter.
pub fn mk_rewrite_filter(rewrite: Rewrite) -> RouteFilter {
    RouteFilter {
        url_rewrite: Some(rewrite),
        ..mk_filter("URLRewrite")
    }
}

/// A `RequestMirror` filter to Service `service` port `port`.
pub fn mk_mirror_filter(service: &str, port: i32) -> RouteFilter {
    RouteFilter {
        request_mirror: Some(serde_json::json!({"backendRef": {"name": service, "port": port}})),
        ..mk_filter("RequestMirror")
    }
}

/// An `ExtensionRef` filter to the object `name` of `group` and `kind`.
pub fn mk_extension_filter(group: &str, kind: &str, name: &str) -> RouteFilter {
    RouteFilter {
        extension_ref: Some(serde_json::json!({"group": group, "kind": kind, "name": name})),
        ..mk_filter("ExtensionRef")
    }
}

/// A header change of nothing yet, to be given its changes by its methods.
pub fn mk_header_modifier() -> HeaderModifier {
    HeaderModifier::default()
}

impl HeaderModifier {
    /// The modifier, also setting header `name` to `value`.
    pub fn set(mut self, name: &str, value: &str) -> Self {
        self.set.push(header(name, value));
        self
    }

    /// The modifier, also adding header `name` with `value`.
    pub fn add(mut self, name: &str, value: &str) -> Self {
        self.add.push(header(name, value));
        self
    }

    /// The modifier, also removing header `name`.
    pub fn remove(mut self, name: &str) -> Self {
        self.remove.push(name.to_string());
        self
    }
}

fn header(name: &str, value: &str) -> Header {
    Header {
        name: name.to_string(),
        value: value.to_string(),
    }
}

/// A redirect keeping the request's scheme, host, port and path, answering 302, to be
/// changed by its methods.
pub fn mk_redirect() -> Redirect {
    Redirect::default()
}

impl Redirect {
    /// The redirect to scheme `scheme`.
    pub fn scheme(self, scheme: &str) -> Self {
        Self {
            scheme: Some(scheme.to_string()),
            ..self
        }
    }

    /// The redirect to host `hostname`.
    pub fn hostname(self, hostname: &str) -> Self {
        Self {
            hostname: Some(hostname.to_string()),
            ..self
        }
    }

    /// The redirect to port `port`.
    pub fn port(self, port: i32) -> Self {
        Self {
            port: Some(port),
            ..self
        }
    }

    /// The redirect answering `status_code`.
    pub fn status_code(self, status_code: i32) -> Self {
        Self {
            status_code: Some(status_code),
            ..self
        }
    }

    /// The redirect changing the path as `path` says.
    pub fn path(self, path: PathModifier) -> Self {
        Self {
            path: Some(path),
            ..self
        }
    }
}

/// A rewrite of nothing yet, to be given its changes by its methods.
pub fn mk_rewrite() -> Rewrite {
    Rewrite::default()
}

impl Rewrite {
    /// The rewrite of the host to `hostname`.
    pub fn hostname(self, hostname: &str) -> Self {
        Self {
            hostname: Some(hostname.to_string()),
            ..self
        }
    }

    /// The rewrite of the path as `path` says.
    pub fn path(self, path: PathModifier) -> Self {
        Self {
            path: Some(path),
            ..self
        }
    }
}

/// A path change replacing the prefix the rule matched by `replacement`.
pub fn replace_prefix_match(replacement: &str) -> PathModifier {
    PathModifier {
        type_: "ReplacePrefixMatch".to_string(),
        replace_prefix_match: Some(replacement.to_string()),
        ..PathModifier::default()
    }
}

/// A path change replacing the whole path by `path`.
pub fn replace_full_path(path: &str) -> PathModifier {
    PathModifier {
        type_: "ReplaceFullPath".to_string(),
        replace_full_path: Some(path.to_string()),
        ..PathModifier::default()
    }
}

/// A backend reference to Service `service` port `port` of the route's namespace.
pub fn mk_backend_ref(service: &str, port: i32) -> BackendRef {
    BackendRef {
        name: service.to_string(),
        port: Some(port),
        ..BackendRef::default()
    }
}

/// A backend reference to the object `name` of `group` and `kind` (not a Service).
pub fn mk_backend_ref_to_kind(group: &str, kind: &str, name: &str) -> BackendRef {
    BackendRef {
        group: Some(group.to_string()),
        kind: Some(kind.to_string()),
        name: name.to_string(),
        ..BackendRef::default()
    }
}

impl BackendRef {
    /// The reference to the Service of namespace `namespace`.
    pub fn namespace(self, namespace: &str) -> Self {
        Self {
            namespace: Some(namespace.to_string()),
            ..self
        }
    }

    /// The reference with weight `weight` (any number: a test may want a wrong one).
    pub fn weight(self, weight: i32) -> Self {
        Self {
            weight: Some(weight),
            ..self
        }
    }

    /// The reference with its own filters.
    pub fn filters(self, filters: Vec<RouteFilter>) -> Self {
        Self {
            filters: Some(filters),
            ..self
        }
    }
}

/// The ReferenceGrant `name` in `namespace` that lets the objects of kind `from.0` (of
/// the Gateway API group) in namespace `from.1` refer to the (core) `to_kind` objects of
/// this one.
pub fn mk_reference_grant(
    namespace: &str,
    name: &str,
    from: (&str, &str),
    to_kind: &str,
) -> ReferenceGrant {
    let mut grant = ReferenceGrant::new(
        meta(name),
        ReferenceGrantSpec {
            from: vec![ReferenceGrantFrom {
                group: GATEWAY_GROUP.to_string(),
                kind: from.0.to_string(),
                namespace: from.1.to_string(),
            }],
            to: vec![ReferenceGrantTo {
                group: String::new(),
                kind: to_kind.to_string(),
                name: None,
            }],
        },
    );
    grant.metadata.namespace = Some(namespace.to_string());
    grant
}

/// The ReferenceGrant `name` in `namespace` that lets the HTTPRoutes of namespace
/// `from_namespace` refer to its Services.
pub fn mk_service_grant(namespace: &str, name: &str, from_namespace: &str) -> ReferenceGrant {
    mk_reference_grant(namespace, name, ("HTTPRoute", from_namespace), "Service")
}

impl ReferenceGrant {
    /// The grant of the objects named `name` only (of each kind it grants).
    pub fn only_to(mut self, name: &str) -> Self {
        for to in &mut self.spec.to {
            to.name = Some(name.to_string());
        }
        self
    }
}

/// The Namespace `name` with these labels.
pub fn mk_namespace(name: &str, labels: &[(&str, &str)]) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(
                labels
                    .iter()
                    .map(|(key, value)| (key.to_string(), value.to_string()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    }
}
