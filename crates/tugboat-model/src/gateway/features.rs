//! What the Gateway API's filters and weighted backends do to a route's requests, as
//! validated data: part of a route's feature set ([`crate::RouteFeatures::gateway`]),
//! so that routes with the same filters share one set of haproxy rules and a route that
//! joins an existing set is a map update.
//!
//! Every string here has passed [`crate::validate`]: header names and values, hosts and
//! literal paths can be written into haproxy's config as they are.

use crate::route_parts::{BackendName, Canary, FeatureSetId};

/// Header changes of a `RequestHeaderModifier` or `ResponseHeaderModifier`, in the order
/// haproxy applies them: set, add, remove.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HeaderChanges {
    pub set: Vec<(String, String)>,
    pub add: Vec<(String, String)>,
    pub remove: Vec<String>,
}

impl HeaderChanges {
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.add.is_empty() && self.remove.is_empty()
    }
}

/// A new path: the whole path, or the matched prefix replaced.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathReplacement {
    /// `ReplaceFullPath`.
    Full(String),
    /// `ReplacePrefixMatch`: the first `matched` bytes of the path (the rule's prefix,
    /// without a trailing `/`; 0 for the prefix `/`) become `replacement` (without a
    /// trailing `/`; empty for `/`). What is left of the path follows; an empty result
    /// is `/`.
    Prefix { matched: usize, replacement: String },
}

/// `RequestRedirect`: each part left `None` is the request's own.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Redirect {
    /// `http` or `https`.
    pub scheme: Option<String>,
    pub hostname: Option<String>,
    /// Left out of the location when it is the scheme's well-known port.
    pub port: Option<u16>,
    /// The port the request was sent to, from its `Host` header (none there: none in the
    /// location either), instead of `port`: for a rule served by listeners of one bind
    /// with different ports, whose redirect keeps the listener's port (a client names
    /// the port it connects to in `Host` unless it is the scheme's own).
    pub request_port: bool,
    pub path: Option<PathReplacement>,
    /// 301, 302, 303, 307 or 308.
    pub code: u16,
}

/// One share of a weighted split: a backend (`None`: the share answers 500) and its
/// weight.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Share {
    pub backend: Option<BackendName>,
    pub weight: u32,
}

/// What the Gateway API asks of a route's requests beyond its host, path and backend.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GatewayFeatures {
    /// `RequestHeaderModifier` (`set` also covers the existing `request_headers`).
    pub request_headers: HeaderChanges,
    /// `ResponseHeaderModifier`.
    pub response_headers: HeaderChanges,
    pub redirect: Option<Redirect>,
    /// `URLRewrite.hostname`: the Host header the backend gets.
    pub rewrite_host: Option<String>,
    /// `URLRewrite.path`.
    pub rewrite_path: Option<PathReplacement>,
    /// Weighted backends (empty: the route's one backend). Weights are > 0.
    pub split: Vec<Share>,
    /// The rules of the route's host and path that match on the method, headers or
    /// query: tried before the route's own backend and features apply.
    pub dispatch: Option<Dispatch>,
    /// Served on one bind only (`true`: HTTPS): requests on the other get 404.
    pub only_tls: Option<bool>,
    /// The rule's `timeouts` as haproxy's server timeout of its requests, in
    /// milliseconds (0: none): the shorter of `request` and `backendRequest` that is not
    /// zero. `None`: the backend's own.
    pub server_timeout_ms: Option<u64>,
}

impl GatewayFeatures {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// What a request must have besides its host and path for a rule to take it: the method,
/// headers (lower-case name, exact value), query parameters (exact value), and the bind it
/// came on (the rule's listeners: `Some(true)` HTTPS only, `Some(false)` HTTP only).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Conditions {
    pub method: Option<String>,
    pub headers: Vec<(String, String)>,
    /// Header matches of type `RegularExpression`: (lower-case name, expression).
    pub headers_regex: Vec<(String, String)>,
    pub query: Vec<(String, String)>,
    /// A path match of type `RegularExpression` (its rule takes the host's `/` prefix).
    pub path_regex: Option<String>,
    /// The path a rule reached by a fall back covers, when it covers only some of the
    /// requests that fall back to it (see [`PathCondition`]).
    pub path: Option<PathCondition>,
    pub tls: Option<bool>,
}

/// What the path of a request must be for a rule a fall back reaches (another host's,
/// or an Ingress' regular expression) to take it, as haproxy's route lookup would have
/// found that rule: the path as the route maps see it (normalized, not decoded).
/// Literal paths have passed [`crate::validate::ingress_path`] and have no `'`;
/// expressions have passed [`crate::validate::regex`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathCondition {
    /// The path is this one (an `Exact` path; a prefix's own path).
    Exact(String),
    /// The path is this prefix or under it (whole path elements).
    Prefix(String),
    /// The path is under this prefix (whole path elements), not the prefix itself.
    Under(String),
    /// An Ingress' regular expression path, as its route is looked up: from the start of
    /// the path, case-insensitive.
    IngressRegex(String),
}

impl Conditions {
    pub fn is_empty(&self) -> bool {
        *self == Conditions::default()
    }

    /// Whether the only condition is the bind.
    pub fn only_bind(&self) -> bool {
        self.tls.is_some() && self.without_bind() == Conditions::default()
    }

    /// The same without the bind.
    pub fn without_bind(&self) -> Conditions {
        Conditions {
            tls: None,
            ..self.clone()
        }
    }

    /// The spec's order between rules of the same host and path, highest first: a
    /// method match, then the most header matches, then the most query matches. A
    /// regular expression on the path (implementation-specific) comes before them all:
    /// it is more specific than the `/` prefix its rule takes.
    pub fn precedence(&self) -> (bool, bool, usize, usize) {
        (
            self.path_regex.is_some(),
            self.method.is_some(),
            self.headers.len() + self.headers_regex.len(),
            self.query.len(),
        )
    }
}

/// One rule of a host and path that has conditions: where its requests go.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Candidate {
    pub conditions: Conditions,
    pub backend: BackendName,
    pub features: Option<FeatureSetId>,
    /// The canary of an Ingress route a fall back reaches (drawn as on that route).
    pub canary: Option<Canary>,
}

/// What a request of a host and path that meets no candidate's conditions gets.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Otherwise {
    /// No rule without conditions: 404.
    NotFound,
    /// The rule without conditions: the route's backend, with these features.
    Route(Option<FeatureSetId>),
}

/// The rules of one host and path when some have conditions, in precedence order: the
/// first whose conditions a request meets takes it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dispatch {
    pub candidates: Vec<Candidate>,
    pub otherwise: Otherwise,
}
