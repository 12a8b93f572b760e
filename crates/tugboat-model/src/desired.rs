//! The desired proxy state: which backends exist, which servers they have, and which
//! host and path goes to which backend.
//!
//! This is a description of intent, not of haproxy syntax: the haproxy crate renders it
//! to files and plans the runtime commands that get a running haproxy there.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use crate::features::{BackendOptions, FeatureSetId, GlobalOptions, RouteFeatures};
use crate::snapshot::ObjectKey;
use crate::tls::Pem;
use crate::validate;

/// Name of a backend: `<namespace>_<service>_<port>`. Built only from validated parts
/// (DNS labels and a port number or name), so it is always a safe haproxy identifier.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BackendName(String);

impl BackendName {
    /// The name of the backend for one port of one Service. Fails when a part is not a
    /// valid Kubernetes name, so that no other text can become a backend name.
    pub fn for_service_port(
        service: &ObjectKey,
        port: &ServicePortRef,
    ) -> Result<Self, validate::InvalidValue> {
        validate::dns_label(&service.namespace)?;
        validate::dns_label(&service.name)?;
        Ok(Self(format!(
            "{}_{}_{}",
            service.namespace, service.name, port
        )))
    }

    /// The backend of Gateway API rules whose backend does not resolve: it has no
    /// servers, and the rules' feature set answers 500 before it is reached. Not a
    /// `<namespace>_<service>_<port>` name, so it never meets a Service's.
    pub fn unresolved() -> Self {
        Self("tugboat_unresolved".to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Reads back a name written by [`BackendName::for_service_port`]; `None` for any
    /// other text (e.g. the controller's own backends).
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.splitn(3, '_');
        let (namespace, service, port) = (parts.next()?, parts.next()?, parts.next()?);
        let port = match port.parse::<i32>() {
            Ok(number) => ServicePortRef::Number(validate::port_number(number).ok()?),
            Err(_) => {
                validate::port_name(port).ok()?;
                ServicePortRef::Name(port.to_string())
            }
        };
        Self::for_service_port(&ObjectKey::new(namespace, service), &port).ok()
    }
}

impl fmt::Display for BackendName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A Service port as an Ingress names it: by number or by name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ServicePortRef {
    Number(u16),
    Name(String),
}

impl fmt::Display for ServicePortRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServicePortRef::Number(n) => write!(f, "{n}"),
            ServicePortRef::Name(name) => f.write_str(name),
        }
    }
}

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

/// The canary of a route: another Ingress's backend that gets a share of its requests
/// (see [`crate::features::CanaryRules`] for the header and cookie rules).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Canary {
    pub backend: BackendName,
    /// The share of the requests that header and cookie leave undecided, in millionths
    /// (0 to 1000000).
    pub per_million: u32,
    /// The canary Ingress.
    pub ingress: ObjectKey,
}

impl Canary {
    /// Millionths of `weight` out of `total` (ingress-nginx's: a total below 100 counts
    /// as 100, a weight above the total is all).
    pub fn per_million(weight: u64, total: u64) -> u32 {
        let total = total.max(100);
        let share = weight.min(total) * 1_000_000 / total;
        u32::try_from(share).unwrap_or(1_000_000)
    }
}

/// One host and path rule, and the backend it goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub host: HostMatch,
    pub path: PathMatch,
    pub backend: BackendName,
    /// The Ingress the rule comes from.
    pub ingress: ObjectKey,
    /// The features of the route (a key of [`Desired::feature_sets`]); `None`: none.
    pub features: Option<FeatureSetId>,
    /// A canary Ingress's backend that gets a share of the requests.
    pub canary: Option<Canary>,
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
    /// Pattern files of long access lists, by file name (`<namespace>_<configmap>_<key>.lst`):
    /// one address or network per line.
    pub pattern_files: BTreeMap<String, String>,
    /// The host and path of the routes that come from Gateway API HTTPRoutes (the
    /// others come from Ingresses).
    pub http_route_slots: std::collections::BTreeSet<(HostMatch, PathMatch)>,
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
