//! The desired proxy state: which backends exist, which servers they have, and which
//! host and path goes to which backend.
//!
//! This is a description of intent, not of haproxy syntax: the haproxy crate renders it
//! to files and plans the runtime commands that get a running haproxy there.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use crate::features::{BackendOptions, GlobalOptions, RouteFeatures};
use crate::problem::ObjectRef;
pub use crate::route_parts::{BackendName, Canary, FeatureSetId, ServicePortRef};
use crate::snapshot::ObjectKey;
use crate::tls::Pem;

/// One ready endpoint of a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    pub address: IpAddr,
    pub port: u16,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.address {
            IpAddr::V4(a) => write!(f, "{a}:{}", self.port),
            IpAddr::V6(a) => write!(f, "[{a}]:{}", self.port),
        }
    }
}

/// A backend: one port of one Service, and the endpoints that receive its traffic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backend {
    pub service: ObjectKey,
    pub port: ServicePortRef,
    /// Ready endpoints, sorted and without duplicates. Empty means haproxy answers 503.
    pub endpoints: Vec<Endpoint>,
    /// Terminating endpoints that still serve: they finish what they have but get no
    /// new requests. Sorted.
    pub draining: Vec<Endpoint>,
    /// For an ExternalName Service: the DNS name and port to send requests to.
    pub external: Option<(String, u16)>,
    /// How haproxy talks to the servers (annotations and ConfigMap keys). Shared: most
    /// backends have the default options, and a copy in each of ten thousand backends
    /// is megabytes.
    pub options: Arc<BackendOptions>,
}

/// A TLS certificate served for some hosts (by SNI).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsCertificate {
    /// `<namespace>_<secret>`: a safe file name.
    pub name: String,
    pub pem: Pem,
    /// The hosts it is served for (`*.example.com` allowed), sorted.
    pub hosts: Vec<String>,
}

/// Which hosts a route applies to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HostMatch {
    /// A rule without a host: every host.
    Any,
    /// One host, lower-case.
    Exact(String),
    /// `*.example.com`, stored as the suffix `.example.com`: exactly one more label.
    Wildcard(String),
    /// A Gateway API wildcard `*.example.com`, stored as the suffix `.example.com`: one
    /// or more labels (`a.example.com`, `a.b.example.com`), the longest suffix first.
    Subdomains(String),
}

impl fmt::Display for HostMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostMatch::Any => f.write_str("*"),
            HostMatch::Exact(h) => f.write_str(h),
            HostMatch::Wildcard(suffix) => write!(f, "*{suffix}"),
            HostMatch::Subdomains(suffix) => write!(f, "*{suffix} (any depth)"),
        }
    }
}

/// Which paths a route applies to, with Kubernetes' semantics.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathMatch {
    /// The path, literally and case-sensitively.
    Exact(String),
    /// Whole path elements under this prefix. Stored without a trailing slash, except the
    /// root prefix `/`.
    Prefix(String),
    /// A regular expression (ingress-nginx's `use-regex`), checked by
    /// [`crate::validate::regex`]: it matches the start of the path, case-insensitively.
    /// Regex routes are tried after the Exact paths of their host and before its Prefix
    /// paths, the longest expression first.
    Regex(String),
}

impl fmt::Display for PathMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathMatch::Exact(p) => write!(f, "{p} (Exact)"),
            PathMatch::Prefix(p) => write!(f, "{p} (Prefix)"),
            PathMatch::Regex(p) => write!(f, "{p} (regex)"),
        }
    }
}

/// One host and path rule, and the backend it goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub host: HostMatch,
    pub path: PathMatch,
    pub backend: BackendName,
    /// The Ingress the rule comes from (an HTTPRoute's key when `owner_kind` says so).
    pub ingress: ObjectKey,
    /// The kind of the object the rule comes from.
    pub owner_kind: RouteOwnerKind,
    /// The features of the route (a key of [`Desired::feature_sets`]); `None`: none.
    pub features: Option<FeatureSetId>,
    /// A canary Ingress's backend that gets a share of the requests.
    pub canary: Option<Canary>,
}

/// The kind of object a [`Route`] comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RouteOwnerKind {
    #[default]
    Ingress,
    HttpRoute,
}

impl RouteOwnerKind {
    /// The object's Kubernetes kind.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ingress => "Ingress",
            Self::HttpRoute => "HTTPRoute",
        }
    }
}

impl Route {
    /// The object the route comes from, as `KIND/NAMESPACE/NAME` (`Ingress/shop/web`):
    /// what the access logs name. Made of a kind and two Kubernetes names, so it holds
    /// no space, `|` nor control character.
    pub fn owner(&self) -> String {
        format!(
            "{}/{}/{}",
            self.owner_kind.as_str(),
            self.ingress.namespace,
            self.ingress.name
        )
    }
}

/// A TLS passthrough route: TLS connections whose SNI matches `host` go to `backend`
/// (a mode tcp backend, [`BackendName::passthrough`]) undecrypted. An Ingress with
/// `ssl-passthrough` makes one per rule host; a Gateway API TLSRoute can make the same.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PassthroughRoute {
    /// [`HostMatch::Exact`] or [`HostMatch::Wildcard`]: SNI is needed to choose.
    pub host: HostMatch,
    pub backend: BackendName,
    /// The object the route comes from.
    pub owner: ObjectRef,
    /// `None`: the HTTPS port chooses by SNI (Ingresses' `ssl-passthrough`, TLSRoutes on
    /// `TLS` listeners on port 443). `Some(port)`: a Gateway `TLS` listener's port of
    /// `--gateway-listener-ports`, bound at [`crate::ports::bind_port`] of it, where TLS
    /// for no route's host is closed (nothing terminates TLS there).
    pub port: Option<u16>,
}

/// A port whose TCP connections go to one backend as they come: an entry of the TCP
/// services ConfigMap (`--tcp-services-configmap`), or a Gateway's `TCP` listener with
/// its TCPRoute.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TcpService {
    /// The port clients connect to (the ConfigMap's key, the listener's port); haproxy
    /// binds [`crate::ports::bind_port`] of it.
    pub port: u16,
    /// A mode tcp backend; `None`: connections are closed (its backend does not resolve).
    pub backend: Option<BackendName>,
    /// Clients on this port speak the PROXY protocol first (v1 or v2).
    pub accept_proxy: bool,
    /// haproxy speaks the PROXY protocol to the backend's servers.
    pub send_proxy: bool,
    /// The object the service comes from.
    pub owner: ObjectRef,
}

/// A Gateway listener port with a bind of its own (`--gateway-listener-ports`): haproxy
/// binds [`crate::ports::bind_port`] of it in the HTTP frontend, and its routes answer
/// there only (the HTTP and HTTPS binds never see them, nor it theirs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerBind {
    /// The listeners' port.
    pub port: u16,
    /// HTTPS listeners: the bind terminates TLS as the HTTPS bind does.
    pub tls: bool,
    /// Its routes, at most one per (host, path), sorted by host then path.
    pub routes: Vec<Route>,
}

/// Everything haproxy should do, as data.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Desired {
    pub backends: BTreeMap<BackendName, Backend>,
    /// At most one route per (host, path), sorted by host then path.
    pub routes: Vec<Route>,
    /// Where requests that match no route go; `None` means a plain 404.
    pub default_backend: Option<BackendName>,
    /// The Ingress whose `spec.defaultBackend` is used.
    pub default_backend_owner: Option<ObjectKey>,
    /// Certificates from the Ingresses' `spec.tls`, by name.
    pub certificates: BTreeMap<String, TlsCertificate>,
    /// Hosts listed in a `spec.tls`: plain HTTP to them is redirected to HTTPS.
    pub tls_hosts: Vec<HostMatch>,
    /// The certificate for unmatched SNI, when `--default-ssl-certificate` names a valid
    /// Secret (otherwise the controller's own).
    pub default_certificate: Option<Pem>,
    /// Whether HTTP requests to TLS hosts are redirected to HTTPS.
    pub ssl_redirect: bool,
    /// Error pages by status code: the full HTTP response haproxy sends.
    pub error_pages: BTreeMap<u16, String>,
    /// Every distinct set of route features in use, by id.
    pub feature_sets: BTreeMap<FeatureSetId, RouteFeatures>,
    /// Users for basic authentication, by userlist name.
    pub userlists: BTreeMap<String, Vec<UserHash>>,
    /// The ConfigMap's process-wide settings.
    pub global: GlobalOptions,
    /// Files the backends' TLS needs (CA bundles, client certificates and their keys),
    /// by file name (`ca_<namespace>_<secret>.pem`, `client_<namespace>_<secret>.pem`).
    pub backend_files: BTreeMap<String, Pem>,
    /// Hosts that ask for client certificates (`auth-tls-secret`), as their crt-list
    /// entries name them (`app.example.com`, `*.example.com`), with the files that
    /// verify them.
    pub client_ca_hosts: BTreeMap<String, crate::features::ClientCa>,
    /// The CA bundles and revocation lists of [`Desired::client_ca_hosts`], by file name
    /// (`<namespace>_<secret>.ca.pem`, `<namespace>_<secret>.crl.pem`).
    pub client_ca_files: BTreeMap<String, Pem>,
    /// Pattern files of long access lists, by file name (`<namespace>_<configmap>_<key>.lst`):
    /// one address or network per line.
    pub pattern_files: BTreeMap<String, String>,
    /// The host and path of the routes that come from Gateway API HTTPRoutes (the
    /// others come from Ingresses).
    pub http_route_slots: std::collections::BTreeSet<(HostMatch, PathMatch)>,
    /// TLS passthrough routes, at most one per port and host, sorted by port (the HTTPS
    /// port's first) then host. Without one of the HTTPS port, haproxy terminates every
    /// TLS connection there (and the HTTPS port has no TCP frontend).
    pub passthrough: Vec<PassthroughRoute>,
    /// TCP services, at most one per port, sorted by port.
    pub tcp_services: Vec<TcpService>,
    /// Gateway listener ports with binds of their own, sorted by port. Empty: the HTTP
    /// and HTTPS binds only.
    pub listener_binds: Vec<ListenerBind>,
}

impl Desired {
    /// Every route: the HTTP and HTTPS binds', then those of each listener port with a
    /// bind of its own.
    pub fn every_route(&self) -> impl Iterator<Item = &Route> {
        self.routes
            .iter()
            .chain(self.listener_binds.iter().flat_map(|bind| &bind.routes))
    }
}

/// A user and its password hash; the hash never shows in debug output.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct UserHash {
    pub user: String,
    pub hash: String,
}

impl fmt::Debug for UserHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:<hash>", self.user)
    }
}
