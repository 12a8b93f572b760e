//! The features users switch on with annotations and ConfigMap keys, as validated data.
//!
//! Three levels, matching where haproxy applies them:
//! - [`RouteFeatures`]: what happens to the requests of some routes (redirects, headers,
//!   CORS, access lists, authentication, rate and connection limits, body size, how a
//!   canary takes requests). Identical sets are shared: every
//!   distinct set gets one [`FeatureSetId`], the route maps carry that id next to the
//!   backend, and haproxy's rules test the id. Rules therefore grow with the distinct
//!   settings in use, not with the routes, and a route that joins an existing set is a
//!   map update, not a reload.
//! - [`BackendOptions`]: how haproxy talks to one Service port (balancing, timeouts,
//!   PROXY protocol, TLS and HTTP/2 to the servers, health checks, cookie persistence,
//!   the operator's raw snippet).
//! - [`GlobalOptions`]: the ConfigMap's process-wide settings (timeouts, logging).
//!
//! Every string in here has passed [`crate::annotations`]' validation: it can be written
//! into haproxy's config as it is.

use std::collections::BTreeMap;

use crate::problem::ObjectRef;
pub use crate::route_parts::{BackendName, FeatureSetId};
use crate::snapshot::ObjectKey;

impl FeatureSetId {
    /// The id of a feature set: its contents fed through their `Hash` implementation
    /// into a seedless XXH3, so that an id depends on the values of the set (not on the
    /// names of its fields, nor on how they print) and is the same in every process.
    pub fn of(features: &RouteFeatures) -> Self {
        use std::hash::{Hash, Hasher};
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        features.hash(&mut hasher);
        Self::from_hash(hasher.finish())
    }
}

/// When plain HTTP is redirected to HTTPS for a route that sets the `ssl-redirect` keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RedirectWhen {
    /// Always (`ssl-redirect: "true"`).
    Always,
    /// Only when the host is listed in a `spec.tls` (the default, with another code or
    /// port).
    TlsHostsOnly,
    /// Never (`ssl-redirect: "false"`).
    Never,
}

/// The HTTP to HTTPS redirect of a route that overrides the controller's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HttpsRedirect {
    pub when: RedirectWhen,
    pub code: u16,
    /// The HTTPS port in the location; `None` keeps the request's host as it is.
    pub port: Option<u16>,
}

/// `Strict-Transport-Security` on HTTPS answers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Hsts {
    pub max_age: u64,
    pub include_subdomains: bool,
    pub preload: bool,
}

impl Hsts {
    /// The header value.
    pub fn value(&self) -> String {
        let mut value = format!("max-age={}", self.max_age);
        if self.include_subdomains {
            value.push_str("; includeSubDomains");
        }
        if self.preload {
            value.push_str("; preload");
        }
        value
    }
}

/// Where `request-redirect` sends a route's requests.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RedirectTarget {
    /// `host` or `host:port`: the same scheme, path and query on another host (and port).
    Host(String),
    /// An absolute `http://` or `https://` URL: every request goes to that URL.
    Url(String),
}

/// `request-redirect`: every request of the route is redirected.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Redirect {
    pub target: RedirectTarget,
    pub code: u16,
}

/// `path-rewrite`: a regular expression on the path and its replacement (`\1` refers
/// to a group).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PathRewrite {
    pub pattern: String,
    pub replacement: String,
}

/// Which origins CORS allows.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CorsOrigins {
    /// `*`.
    Any,
    /// These origins only: the request's `Origin` is echoed when it is one of them.
    List(Vec<String>),
}

/// Cross-origin resource sharing: the answers' headers and the answer to preflights.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cors {
    pub origins: CorsOrigins,
    pub methods: String,
    pub headers: String,
    pub credentials: bool,
    pub max_age: u64,
}

/// `auth-type: basic-auth`: requests need a user of `userlist`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BasicAuth {
    /// The name of the userlist (`<namespace>_<secret>`), a key of [`Desired::userlists`].
    ///
    /// [`Desired::userlists`]: crate::Desired::userlists
    pub userlist: String,
    pub realm: String,
}

/// `auth-tls-verify-client`: what a route asks of the client's certificate, as nginx's
/// `ssl_verify_client` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum VerifyClient {
    /// A certificate the CA verifies is required: none, or one that fails, gets 400.
    On,
    /// A certificate is asked for; one that fails verification gets 400, none passes.
    Optional,
    /// A certificate is asked for and passed on whether the CA verifies it or not.
    OptionalNoCa,
    /// No client certificate (the other `auth-tls-*` keys do nothing).
    Off,
}

/// Client-certificate authentication of a route (`auth-tls-secret` and the keys that go
/// with it). The CA is a property of the host (its crt-list entry, see
/// [`Desired::client_ca_hosts`]); the routes check what the handshake found.
///
/// [`Desired::client_ca_hosts`]: crate::Desired::client_ca_hosts
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientCertificates {
    /// The CA bundle the hosts of the routes verify with (a key of
    /// [`Desired::client_ca_files`]), and its revocation list.
    ///
    /// [`Desired::client_ca_files`]: crate::Desired::client_ca_files
    pub ca: ClientCa,
    pub verify: VerifyClient,
    /// Where a client whose certificate is missing or fails is redirected (302) rather
    /// than answered 400 (a URL validated by `parse_url`).
    pub error_page: Option<String>,
    /// The client's certificate goes to the backend in `ssl-client-cert`.
    pub pass_certificate: bool,
    /// A regular expression the subject DN (RFC 2253) must match, else 403.
    pub match_subject: Option<String>,
}

/// The files that verify client certificates on a host: a CA bundle and an optional
/// revocation list (keys of [`Desired::client_ca_files`]).
///
/// [`Desired::client_ca_files`]: crate::Desired::client_ca_files
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientCa {
    pub ca_file: String,
    pub crl_file: Option<String>,
}

/// `auth-url`: before a request goes to the backend, haproxy asks this URL (with the
/// request's headers, without its body). 2xx lets the request through with
/// `response_headers` copied from the answer onto it; 401 and 403 answer the client with
/// that status (401 redirects to `signin` when set); anything else, or no answer, is 500.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ExternalAuth {
    /// A URL checked by [`crate::validate::service_url_template`]: it may hold nginx
    /// variables, filled in per request by the authentication script.
    pub url: String,
    /// `GET`, `HEAD`, `POST`, `PUT` or `DELETE`.
    pub method: String,
    /// Headers of the authentication answer set on the request (validated names).
    pub response_headers: Vec<String>,
    /// Where a 401 sends the client, with `rd=` the URL it asked for (validated as
    /// `url`, variables included).
    pub signin: Option<String>,
}

/// ingress-nginx's `default-backend` and `custom-http-errors` of an Ingress: which
/// backend answers in place of the route's, and when.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ErrorBackend {
    /// The backend of `default-backend` (its Service's first port); `None`: the
    /// controller's default backend ([`crate::Desired::default_backend`], else the
    /// built-in 404).
    pub backend: Option<BackendName>,
    /// Whether a request whose backend has no usable server goes to `backend` instead
    /// (`default-backend` is set, or 503 is one of `codes`).
    pub when_unserved: bool,
    /// The backend's answers with these codes are replaced by `backend`'s answer
    /// (`custom-http-errors`); sorted, 400 to 599.
    pub codes: Vec<u16>,
    /// The Ingress (namespace and name, validated): `X-Namespace` and `X-Ingress-Name`.
    pub ingress: ObjectKey,
    /// The field that sets `codes` (`metadata.annotations.<prefix>custom-http-errors`),
    /// for a problem haproxy's side finds with it; `None` without codes.
    pub codes_field: Option<String>,
}

/// Requests per client address and period; over the limit, `status`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RateLimit {
    pub requests: u64,
    /// An haproxy duration (`1s`, `10m`).
    pub period: String,
    pub status: u16,
}

/// How a request of a route that has a canary ([`crate::Route::canary`]) is sent to it:
/// by header, then by cookie, then by weight (the weight is the route's, in the route
/// map, so that a change of weight is a map update).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CanaryRules {
    /// `canary-by-header`: `always` sends the request to the canary, `never` keeps it
    /// on the main backend (without `header_value`).
    pub header: Option<String>,
    /// `canary-by-header-value`: the header value that sends it to the canary.
    pub header_value: Option<String>,
    /// `canary-by-header-pattern` (without `header_value`): a regular expression that
    /// a header value matching sends the request to the canary.
    pub header_pattern: Option<String>,
    /// `canary-by-cookie`: `always` sends the request to the canary, `never` keeps it.
    pub cookie: Option<String>,
    /// The main backend's session affinity cookie, when it has one: decided before the
    /// header, cookie and weight, as ingress-nginx does.
    pub affinity: Option<CanaryAffinity>,
}

/// Session affinity and a canary (`affinity-canary-behavior`): a request with the main
/// backend's affinity cookie stays on the main backend; with `sticky`, the canary's
/// servers set the same cookie with values that start with [`CANARY_COOKIE_PREFIX`], and
/// a request with such a value goes to the canary.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CanaryAffinity {
    /// The main backend's affinity cookie.
    pub cookie: String,
    /// `sticky` (the canary keeps its clients too) rather than `legacy`.
    pub sticky: bool,
}

/// The start of the affinity cookie's value set by a canary backend's servers, told
/// apart from the main backend's (whose values are the slot names).
pub const CANARY_COOKIE_PREFIX: &str = "canary-";

/// ingress-nginx's limits per client address (`limit-rps`, `limit-connections`): over
/// them, 503.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientLimits {
    /// Requests per second, and the burst above it.
    pub requests_per_second: Option<(u64, u64)>,
    /// Connections with a request in progress at once.
    pub connections: Option<u64>,
    /// Client addresses and networks the limits do not apply to.
    pub exempt: Vec<String>,
}

/// What happens to the requests of the routes that share this set.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RouteFeatures {
    /// Every request is refused with 403: an object of the routes sets a key that
    /// restricts access and that Tugboat cannot honour (fail closed).
    pub deny_all: bool,
    pub https_redirect: Option<HttpsRedirect>,
    pub hsts: Option<Hsts>,
    pub redirect: Option<Redirect>,
    /// `app-root`: a request for `/` is redirected (302) to this path (validated by
    /// [`crate::validate::literal_path`]).
    pub app_root: Option<String>,
    pub path_rewrite: Option<PathRewrite>,
    pub set_host: Option<String>,
    /// Request headers set before the request goes to the backend: (name, value).
    pub request_headers: Vec<(String, String)>,
    /// Response headers set before the answer goes to the client: (name, value).
    pub response_headers: Vec<(String, String)>,
    pub cors: Option<Cors>,
    /// Addresses and networks allowed (empty: all).
    pub allow_list: Vec<String>,
    /// Addresses and networks denied.
    pub deny_list: Vec<String>,
    /// Long allow list in a pattern file (a key of [`Desired::pattern_files`]).
    ///
    /// [`Desired::pattern_files`]: crate::Desired::pattern_files
    pub allow_file: Option<String>,
    /// Long deny list in a pattern file (a key of [`Desired::pattern_files`]).
    ///
    /// [`Desired::pattern_files`]: crate::Desired::pattern_files
    pub deny_file: Option<String>,
    /// The header the client address is taken from (else the connection's source).
    pub src_ip_header: Option<String>,
    pub basic_auth: Option<BasicAuth>,
    pub external_auth: Option<ExternalAuth>,
    /// `auth-tls-secret`: client certificates.
    pub client_certificates: Option<ClientCertificates>,
    pub rate_limit: Option<RateLimit>,
    pub client_limits: Option<ClientLimits>,
    /// `backend-path: original`: the backend receives the path as the client sent it
    /// rather than the normalized path the route was chosen on.
    pub original_path: bool,
    /// Every request is answered with this status and never reaches the backend (a
    /// Gateway API rule whose backend does not resolve: 500).
    pub answer_status: Option<u16>,
    /// The Gateway API's filters and weighted backends of an HTTPRoute rule.
    pub gateway: Option<crate::gateway::features::GatewayFeatures>,
    /// The largest request body (`Content-Length`), in bytes: larger ones get 413.
    pub max_body_size: Option<u64>,
    /// The routes have a canary: how a request is sent to it.
    pub canary: Option<CanaryRules>,
    /// `default-backend` and `custom-http-errors`.
    pub error_backend: Option<ErrorBackend>,
}

impl RouteFeatures {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// The PROXY protocol header sent to a backend's servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProxyProtocol {
    V1,
    V2,
}

/// How haproxy spreads requests over a backend's servers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Balance {
    RoundRobin,
    LeastConn,
    Source,
    Uri,
    /// A request header's value (its name, validated).
    Header(String),
    Random,
}

impl Balance {
    /// The `balance` line's arguments.
    pub fn directive(&self) -> String {
        match self {
            Balance::RoundRobin => "roundrobin".into(),
            Balance::LeastConn => "leastconn".into(),
            Balance::Source => "source".into(),
            Balance::Uri => "uri".into(),
            Balance::Header(name) => format!("hdr({name})"),
            Balance::Random => "random".into(),
        }
    }

    /// Hash-based algorithms with haproxy's default (map-based) hashing do not accept
    /// servers added at runtime: a new server then needs a reload.
    pub fn allows_dynamic_servers(&self) -> bool {
        !matches!(self, Balance::Source | Balance::Uri | Balance::Header(_))
    }
}

/// TLS from haproxy to a backend's servers (`server-ssl`).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServerTls {
    /// The CA bundle that verifies the servers' certificates (a key of
    /// [`Desired::backend_files`]); `None`: not verified.
    ///
    /// [`Desired::backend_files`]: crate::Desired::backend_files
    pub ca_file: Option<String>,
    /// The client certificate and key presented to the servers (a key of
    /// [`Desired::backend_files`]).
    ///
    /// [`Desired::backend_files`]: crate::Desired::backend_files
    pub client_certificate: Option<String>,
    /// The name sent as SNI and, with a CA, checked in the servers' certificates
    /// (`verifyhost`): `server-ssl-name`, else the Service's `NAME.NAMESPACE.svc`
    /// (a lower-case DNS name, validated).
    pub server_name: String,
}

/// Health checks of a backend's servers.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HealthCheck {
    /// `GET <path>` must answer 2xx or 3xx; `None`: a TCP connection is enough.
    pub http_path: Option<String>,
    /// Time between checks (an haproxy duration); `None`: haproxy's 2s.
    pub interval: Option<String>,
}

/// Raw configuration lines from the operator (`*-config-snippet`), checked by
/// [`crate::annotations`]: no directive that reads files, loads code or runs
/// programs, no section keyword, one directive per line.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Snippet {
    /// The lines, without empty ones.
    pub lines: Vec<String>,
    /// The object it comes from, told when haproxy refuses it.
    pub source: ObjectRef,
}

/// The cookie that keeps a client on one server (`cookie-persistence`, `affinity`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PersistenceCookie {
    pub name: String,
    /// `HttpOnly` (ingress-nginx's affinity cookie has it).
    pub http_only: bool,
    /// The `Path` attribute (haproxy's own is `/`).
    pub path: Option<String>,
    /// The `Max-Age` attribute, in seconds.
    pub max_age: Option<u64>,
    /// The servers' values start with [`CANARY_COOKIE_PREFIX`]: the main backend's
    /// cookie on a canary backend (`affinity-canary-behavior: sticky`).
    pub canary: bool,
}

impl PersistenceCookie {
    /// A cookie with only a name, as `cookie-persistence` sets it.
    pub fn named(name: String) -> Self {
        Self {
            name,
            http_only: false,
            path: None,
            max_age: None,
            canary: false,
        }
    }

    /// The start of each server's value, before its slot name.
    pub fn value_prefix(&self) -> &'static str {
        if self.canary {
            CANARY_COOKIE_PREFIX
        } else {
            ""
        }
    }
}

/// How haproxy talks to one backend.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BackendOptions {
    pub balance: Option<Balance>,
    pub send_proxy: Option<ProxyProtocol>,
    pub timeout_server: Option<String>,
    pub timeout_connect: Option<String>,
    /// TLS to the servers.
    pub tls: Option<ServerTls>,
    /// HTTP/2 to the servers (`proto h2`, or `alpn h2` with TLS).
    pub h2: bool,
    pub health_check: Option<HealthCheck>,
    /// The persistence cookie; each server's value is its slot name.
    pub cookie: Option<PersistenceCookie>,
    /// A Secret the backend needs cannot be used: it answers 503 rather than talk to
    /// its servers without it.
    pub blocked: bool,
    pub snippet: Option<Snippet>,
    /// TLS passthrough (mode tcp): the client's TLS goes to the servers undecrypted, and
    /// none of the HTTP options above apply.
    pub tls_passthrough: bool,
    /// A TCP service's backend (mode tcp): connections go to the servers as they come,
    /// with a PROXY header first when `send_proxy` is set; no other option applies.
    pub tcp_service: bool,
}

impl BackendOptions {
    pub fn allows_dynamic_servers(&self) -> bool {
        self.balance
            .as_ref()
            .is_none_or(Balance::allows_dynamic_servers)
    }
}

/// Process-wide settings from the controller's ConfigMap.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GlobalOptions {
    /// `defaults` timeouts by haproxy name (`client`, `connect`, `server`,
    /// `http-request`, `http-keep-alive`, `queue`, `tunnel`) -> duration.
    pub timeouts: BTreeMap<String, String>,
    /// Where haproxy logs: `None` is stdout.
    pub syslog_server: Option<String>,
    pub log_format: Option<String>,
    /// Request logs as one JSON object per line (`log-format-json`).
    pub log_format_json: bool,
    /// Refuse TLS handshakes whose SNI has no certificate.
    pub strict_sni: bool,
    /// The default HTTP to HTTPS redirect code and port.
    pub ssl_redirect_code: u16,
    pub ssl_redirect_port: Option<u16>,
    /// Path prefixes (validated, see `parse_path_prefixes`) whose requests on plain
    /// HTTP are never redirected to HTTPS by the `ssl-redirect` keys
    /// (`no-tls-redirect-locations`).
    pub no_tls_redirect_locations: Vec<String>,
    /// The operator's raw lines for the `global` section.
    pub snippet: Option<Snippet>,
    /// `backend-path: original` in the ConfigMap: requests that match no route reach
    /// the default backend with the path as the client sent it.
    pub original_path: bool,
    /// `use-forwarded-headers` with trusted forwarders: where the client's address
    /// comes from. `None`: the connection's peer is the client.
    pub forwarded: Option<ForwardedHeaders>,
    /// `use-proxy-protocol`: the trusted peers (canonical addresses and networks) whose
    /// connections to the HTTP and HTTPS ports start with a PROXY header.
    pub proxy_protocol_from: Option<Vec<String>>,
}

/// The client's address from the header of trusted forwarders (`use-forwarded-headers`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardedHeaders {
    /// The header the address is read from (an HTTP token, `forwarded-for-header`).
    pub header: String,
    /// The trusted forwarders: canonical addresses and networks (`proxy-real-ip-cidr`).
    pub trusted: Vec<String>,
    /// Keep the header and append the forwarder (`compute-full-forwarded-for`).
    pub full: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_feature_set_id_depends_on_the_values_only() {
        let plain = RouteFeatures::default();
        let limited = RouteFeatures {
            max_body_size: Some(1024),
            ..Default::default()
        };
        assert_eq!(FeatureSetId::of(&plain), FeatureSetId::of(&plain.clone()));
        assert_ne!(FeatureSetId::of(&plain), FeatureSetId::of(&limited));
        let id = FeatureSetId::of(&limited);
        assert!(
            id.as_str().len() == 17
                && id.as_str().starts_with('f')
                && id.as_str()[1..].bytes().all(|b| b.is_ascii_hexdigit()),
            "{id}"
        );
    }
}
