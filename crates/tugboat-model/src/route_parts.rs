//! The small values that the desired state, the route features and the Gateway API's
//! features all name: backend names and the Service ports they are made of, feature set
//! ids, and a route's canary. A leaf: it names nothing of those modules, so they can
//! all use it.

use std::fmt;

use crate::snapshot::ObjectKey;
use crate::validate;

/// What starts the name of a TLS passthrough backend (see [`BackendName::passthrough`]).
pub const PASSTHROUGH_PREFIX: &str = "passthrough:";
/// What starts the name of a TCP service's backend (see [`BackendName::tcp`]).
pub const TCP_PREFIX: &str = "tcp:";
/// What starts the name of a TCP service's backend whose servers get a PROXY header
/// (see [`BackendName::tcp`]).
pub const TCP_PROXY_PREFIX: &str = "tcp-proxy:";

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

    /// The TLS passthrough backend of the same Service port (mode tcp): the name with
    /// [`PASSTHROUGH_PREFIX`], whose `:` no Kubernetes name holds, so it never meets an
    /// HTTP backend's name.
    pub fn passthrough(&self) -> Self {
        Self(format!("{PASSTHROUGH_PREFIX}{}", self.0))
    }

    /// The mode tcp backend of a TCP service to the same Service port: the name with
    /// [`TCP_PREFIX`] (or [`TCP_PROXY_PREFIX`] when its servers get a PROXY header, so
    /// that two TCP services to one Service port, one sending PROXY and one not, get
    /// two backends). A `:` is in no Kubernetes name: it never meets an HTTP or a
    /// passthrough backend's name.
    pub fn tcp(&self, send_proxy: bool) -> Self {
        let prefix = if send_proxy {
            TCP_PROXY_PREFIX
        } else {
            TCP_PREFIX
        };
        Self(format!("{prefix}{}", self.0))
    }

    /// Whether this is a TLS passthrough backend ([`BackendName::passthrough`]).
    pub fn is_passthrough(&self) -> bool {
        self.0.starts_with(PASSTHROUGH_PREFIX)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Reads back a name written by [`BackendName::for_service_port`] (or its
    /// [`BackendName::passthrough`] or [`BackendName::tcp`] form); `None` for any other text (e.g. the
    /// controller's own backends).
    pub fn parse(text: &str) -> Option<Self> {
        if let Some(http) = text.strip_prefix(PASSTHROUGH_PREFIX) {
            return Self::parse(http).map(|name| name.passthrough());
        }
        for (prefix, send_proxy) in [(TCP_PREFIX, false), (TCP_PROXY_PREFIX, true)] {
            if let Some(http) = text.strip_prefix(prefix) {
                return Self::parse(http).map(|name| name.tcp(send_proxy));
            }
        }
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

/// The canary of a route: another Ingress's backend that gets a share of its requests
/// (see `CanaryRules` in the features for the header and cookie rules).
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

/// The identifier of one distinct `RouteFeatures` (the features of a route): `f` and 16 hex digits of a stable
/// hash of its contents, so an unchanged set keeps its id whatever else changes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FeatureSetId(String);

impl FeatureSetId {
    /// The id of a set whose contents hash to `hash`.
    pub(crate) fn from_hash(hash: u64) -> Self {
        Self(format!("f{hash:016x}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FeatureSetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
