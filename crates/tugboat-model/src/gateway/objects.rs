//! Lean versions of the Gateway API kinds Tugboat reads: `GatewayClass`, `Gateway`,
//! `HTTPRoute` and `TLSRoute` of `gateway.networking.k8s.io/v1`, `ReferenceGrant` of
//! `v1beta1`, and the labels of `Namespace`s (for `allowedRoutes.namespaces.selector`).
//!
//! The `gateway-api` crate's types need an older kube than the workspace's; these declare
//! only the fields the model reads, as [`crate::objects`] does for Services. Fields the
//! controller does not support yet are still declared when their presence must be seen
//! (a header match, an unknown filter): a route that uses them is refused with a
//! condition rather than routed as if they were not there. No status is read: the
//! controller writes it, and a status write must not look like a change.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The API group of the Gateway API kinds.
pub const GROUP: &str = "gateway.networking.k8s.io";

/// The metadata the Gateway API model reads: it needs the generation (conditions carry
/// it as `observedGeneration`) and the creation time (the oldest route wins a conflict).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayMeta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// For Events about the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// RFC 3339, as the API server writes it (`2024-01-02T03:04:05Z`): compared as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
}

/// `GatewayClass`: which controller serves the Gateways of this class.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct GatewayClass {
    #[serde(default)]
    pub metadata: GatewayMeta,
    #[serde(default)]
    pub spec: GatewayClassSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayClassSpec {
    #[serde(default)]
    pub controller_name: String,
    /// Not supported: a class with parameters is not accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters_ref: Option<serde_json::Value>,
}

/// `Gateway`: listeners on the controller's ports.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct Gateway {
    #[serde(default)]
    pub metadata: GatewayMeta,
    #[serde(default)]
    pub spec: GatewaySpec,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewaySpec {
    #[serde(default)]
    pub gateway_class_name: String,
    #[serde(default)]
    pub listeners: Vec<Listener>,
    /// Requested addresses: `IPAddress` and `Hostname` ones must be among the published
    /// addresses (the controller's Service's); other types are not supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<Vec<serde_json::Value>>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Listener {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default)]
    pub port: i32,
    #[serde(default)]
    pub protocol: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<ListenerTls>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_routes: Option<AllowedRoutes>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerTls {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(default)]
    pub certificate_refs: Vec<ObjectReference>,
    /// Not supported: listed so that a listener that sets them is told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<BTreeMap<String, String>>,
}

/// A reference to an object by group, kind, name and (maybe) namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AllowedRoutes {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<RouteNamespaces>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kinds: Option<Vec<RouteGroupKind>>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteNamespaces {
    /// `Same` (the default), `All` or `Selector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteGroupKind {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default)]
    pub kind: String,
}

/// A Kubernetes label selector.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_expressions: Option<Vec<LabelSelectorRequirement>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct LabelSelectorRequirement {
    pub key: String,
    pub operator: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
}

/// `HTTPRoute`: host and path rules to Services.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct HttpRoute {
    #[serde(default)]
    pub metadata: GatewayMeta,
    #[serde(default)]
    pub spec: HttpRouteSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteSpec {
    #[serde(default)]
    pub parent_refs: Vec<ParentReference>,
    #[serde(default)]
    pub hostnames: Vec<String>,
    #[serde(default)]
    pub rules: Vec<HttpRouteRule>,
}

/// A route's parent: a Gateway, maybe one of its listeners (`sectionName`, `port`).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub matches: Vec<HttpRouteMatch>,
    #[serde(default)]
    pub filters: Vec<HttpRouteFilter>,
    #[serde(default)]
    pub backend_refs: Vec<HttpBackendRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<HttpRouteTimeouts>,
    /// Not supported (experimental channel): a rule that sets it is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_persistence: Option<serde_json::Value>,
    /// Not supported (experimental channel): a rule that sets it is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<serde_json::Value>,
}

/// A rule's `timeouts`: Gateway API durations, as written (validated by the rule).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteTimeouts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_request: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteMatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<HttpPathMatch>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<Vec<HttpValueMatch>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_params: Option<Vec<HttpValueMatch>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
}

/// A header or query parameter match: `Exact` (the default) or `RegularExpression`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct HttpValueMatch {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub value: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct HttpPathMatch {
    /// `Exact`, `PathPrefix` (the default) or `RegularExpression`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Default `/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// A filter: its type, and the rest as it is (read by type).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteFilter {
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_header_modifier: Option<HeaderModifier>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_header_modifier: Option<HeaderModifier>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_redirect: Option<RequestRedirect>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_rewrite: Option<UrlRewrite>,
}

/// `URLRewrite`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct UrlRewrite {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<HttpPathModifier>,
}

/// The path of a redirect or rewrite.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpPathModifier {
    /// `ReplaceFullPath` or `ReplacePrefixMatch`.
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace_full_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace_prefix_match: Option<String>,
}

/// `RequestHeaderModifier` / `ResponseHeaderModifier`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct HeaderModifier {
    #[serde(default)]
    pub set: Vec<HttpHeader>,
    #[serde(default)]
    pub add: Vec<HttpHeader>,
    #[serde(default)]
    pub remove: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct HttpHeader {
    pub name: String,
    pub value: String,
}

/// `RequestRedirect`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestRedirect {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<HttpPathModifier>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_code: Option<i32>,
}

/// A backend of a rule: a Service port, with a weight.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpBackendRef {
    /// The Service port and weight, as a TLSRoute's backendRef has them.
    #[serde(flatten)]
    pub backend: BackendRef,
    /// Not supported yet: a backend that sets them is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filters: Option<Vec<serde_json::Value>>,
}

/// `TLSRoute`: TLS connections, chosen by the SNI of their ClientHello, to Services
/// (undecrypted, on a `Passthrough` listener).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct TlsRoute {
    #[serde(default)]
    pub metadata: GatewayMeta,
    #[serde(default)]
    pub spec: TlsRouteSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsRouteSpec {
    #[serde(default)]
    pub parent_refs: Vec<ParentReference>,
    /// SNI names (the API requires at least one).
    #[serde(default)]
    pub hostnames: Vec<String>,
    /// The API allows exactly one rule.
    #[serde(default)]
    pub rules: Vec<TlsRouteRule>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsRouteRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub backend_refs: Vec<BackendRef>,
}

/// `TCPRoute`: the TCP connections of a `TCP` listener, to a Service port.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct TcpRoute {
    #[serde(default)]
    pub metadata: GatewayMeta,
    #[serde(default)]
    pub spec: TcpRouteSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TcpRouteSpec {
    #[serde(default)]
    pub parent_refs: Vec<ParentReference>,
    /// The API allows one rule (and one backendRef of non-zero weight is served).
    #[serde(default)]
    pub rules: Vec<TlsRouteRule>,
}

/// A backend of a route rule: a Service port, with a weight (an HTTPRoute's adds
/// filters, [`HttpBackendRef`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    /// Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

/// What a backendRef of any route kind points at, borrowed, with the API's defaults
/// filled in (group `""`, kind `Service`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendTarget<'a> {
    pub group: &'a str,
    pub kind: &'a str,
    pub name: &'a str,
    pub namespace: Option<&'a str>,
    pub port: Option<i32>,
}

impl BackendTarget<'_> {
    /// Whether it names a core Service.
    pub fn is_service(&self) -> bool {
        self.group.is_empty() && self.kind == "Service"
    }
}

impl BackendRef {
    pub fn target(&self) -> BackendTarget<'_> {
        BackendTarget {
            group: self.group.as_deref().unwrap_or(""),
            kind: self.kind.as_deref().unwrap_or("Service"),
            name: &self.name,
            namespace: self.namespace.as_deref(),
            port: self.port,
        }
    }
}

/// `ReferenceGrant` (`v1beta1`): lets objects of some kinds in other namespaces refer to
/// objects of this one.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct ReferenceGrant {
    #[serde(default)]
    pub metadata: GatewayMeta,
    #[serde(default)]
    pub spec: ReferenceGrantSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct ReferenceGrantSpec {
    #[serde(default)]
    pub from: Vec<ReferenceGrantFrom>,
    #[serde(default)]
    pub to: Vec<ReferenceGrantTo>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct ReferenceGrantFrom {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub namespace: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct ReferenceGrantTo {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A `Namespace`: its labels, for `allowedRoutes.namespaces.selector`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct Namespace {
    #[serde(default)]
    pub metadata: GatewayMeta,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tls_route_keeps_what_the_model_reads() {
        let route: TlsRoute = serde_json::from_value(serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "TLSRoute",
            "metadata": {"name": "argo", "namespace": "cd", "generation": 2},
            "spec": {
                "parentRefs": [{"name": "gw", "sectionName": "tls", "port": 443}],
                "hostnames": ["argo.example.com"],
                "rules": [{"backendRefs": [{"name": "argocd-server", "port": 443, "weight": 3}]}]
            },
            "status": {"parents": []}
        }))
        .expect("TLSRoute");
        assert_eq!(route.spec.parent_refs[0].port, Some(443));
        assert_eq!(route.spec.hostnames, ["argo.example.com"]);
        let backend = &route.spec.rules[0].backend_refs[0];
        assert_eq!(
            (backend.name.as_str(), backend.port, backend.weight),
            ("argocd-server", Some(443), Some(3))
        );
    }

    #[test]
    fn an_http_route_keeps_what_the_model_reads() {
        let route: HttpRoute = serde_json::from_value(serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "web", "namespace": "shop", "generation": 3,
                         "creationTimestamp": "2024-01-02T03:04:05Z"},
            "spec": {
                "parentRefs": [{"name": "gw", "sectionName": "http"}],
                "hostnames": ["shop.example.com"],
                "rules": [{
                    "matches": [{"path": {"type": "Exact", "value": "/cart"},
                                 "headers": [{"name": "x", "value": "y"}]}],
                    "filters": [{"type": "RequestHeaderModifier",
                                 "requestHeaderModifier": {"set": [{"name": "a", "value": "b"}]}}],
                    "backendRefs": [{"name": "web", "port": 80, "weight": 2}]
                }]
            },
            "status": {"parents": []}
        }))
        .expect("HTTPRoute");
        assert_eq!(route.metadata.generation, Some(3));
        assert_eq!(
            route.spec.parent_refs[0].section_name.as_deref(),
            Some("http")
        );
        let rule = &route.spec.rules[0];
        assert_eq!(
            rule.matches[0]
                .path
                .as_ref()
                .and_then(|p| p.type_.as_deref()),
            Some("Exact")
        );
        assert!(
            rule.matches[0].headers.is_some(),
            "an unsupported match is seen"
        );
        assert_eq!(rule.filters[0].type_, "RequestHeaderModifier");
        assert_eq!(rule.backend_refs[0].backend.weight, Some(2));
    }
}
