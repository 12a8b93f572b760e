//! The keys users configure, each one typed definition: its name and other names, where
//! it may be set, the syntax it accepts (its parser), its one default, an example and
//! its documentation. The reader ([`super::Resolver`]), the reference
//! (`docs/annotations.md`, [`super::reference_markdown`]) and the migration table all
//! take them from here.

use super::parse::*;
use super::peers::{self, PeerKey};
use super::prefixes::Ecosystem;
use super::snippet::parse_snippet;
use crate::features::{
    Balance, CorsOrigins, PathRewrite, ProxyProtocol, RedirectTarget, VerifyClient,
};

/// Where a key can be set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    ConfigMap,
    Ingress,
    Service,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::ConfigMap => "ConfigMap",
            Scope::Ingress => "Ingress",
            Scope::Service => "Service",
        }
    }
}

/// Whether a key's value names another object, which the sources must then fetch
/// (see [`crate::references`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refers {
    /// The value names no object.
    Nothing,
    /// The value is the name of a Secret in the namespace of the object it applies to.
    Secret,
    /// The value may be `configmap:NAME/KEY`: a key of a ConfigMap in the namespace of
    /// the object it applies to.
    ConfigMapKey,
}

/// An object a key's value names: kind and name (the namespace is the one of the object
/// the key applies to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    Secret(String),
    ConfigMap(String),
}

/// What applies when no scope sets a key: written once, here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyDefault {
    /// Tugboat applies this value, written in the key's own syntax (its parser reads it).
    Value(&'static str),
    /// Tugboat writes nothing and haproxy's own default applies: this one.
    Haproxy(&'static str),
    /// No value: what happens without the key.
    None(&'static str),
}

impl KeyDefault {
    /// The default as the reference shows it.
    pub fn describe(self) -> String {
        match self {
            KeyDefault::Value(value) => format!("`{value}`"),
            KeyDefault::Haproxy(value) => format!("`{value}` (haproxy's default)"),
            KeyDefault::None(text) => text.to_string(),
        }
    }
}

/// One key of the reference, whatever the type of its value.
#[derive(Debug, Clone, Copy)]
pub struct KeySpec {
    pub name: &'static str,
    /// Other names accepted for the same key under Tugboat's prefixes.
    pub aliases: &'static [&'static str],
    pub scopes: &'static [Scope],
    /// What values are accepted.
    pub values: &'static str,
    pub default: KeyDefault,
    /// A valid value.
    pub example: &'static str,
    pub help: &'static str,
    /// Whether the value names another object.
    pub refers: Refers,
    /// The names other controllers give this key, read as it (see [`super::peers`]).
    pub peers: &'static [PeerKey],
    /// The key's parser, without the value: whether a value is valid, and why not.
    pub check: fn(&str) -> Parsed<()>,
}

impl KeySpec {
    /// The object `value` names, read with the same parser the builder uses: `None`
    /// when the key names no object or the value is not valid (the builder then
    /// reports it).
    pub fn named(&self, value: &str) -> Option<Named> {
        match self.refers {
            Refers::Nothing => None,
            Refers::Secret => parse_secret_name(value).ok().map(Named::Secret),
            Refers::ConfigMapKey => match parse_access_list(value) {
                Ok(AccessList::ConfigMap(reference)) => Some(Named::ConfigMap(reference.name)),
                _ => None,
            },
        }
    }
}

/// A key and the parser that turns its value into a `T`.
#[derive(Debug, Clone, Copy)]
pub struct Key<T: 'static> {
    pub spec: KeySpec,
    pub parse: fn(&str) -> Parsed<T>,
}

impl<T> Key<T> {
    pub const fn new(
        spec: KeySpec,
        parse: fn(&str) -> Parsed<T>,
        check: fn(&str) -> Parsed<()>,
    ) -> Self {
        Self {
            spec: KeySpec { check, ..spec },
            parse,
        }
    }

    pub fn name(&self) -> &'static str {
        self.spec.name
    }

    /// The value Tugboat applies when no scope sets the key (`None` when the default
    /// is no value, or haproxy's own).
    pub fn default_value(&self) -> Option<T> {
        match self.spec.default {
            KeyDefault::Value(value) => (self.parse)(value).ok(),
            KeyDefault::Haproxy(_) | KeyDefault::None(_) => None,
        }
    }

    /// `found`, else the key's default value. Only for keys whose default is a
    /// [`KeyDefault::Value`]: every such value parses (`every_default_value_parses`
    /// checks each key), so this never panics.
    pub fn or_default(&self, found: Option<T>) -> T {
        match found {
            Some(value) => value,
            None => self
                .default_value()
                .expect("a key read with or_default has a default value that parses"),
        }
    }
}

/// A key from its parser and its spec; `check` is the parser with the value dropped.
macro_rules! key {
    ($parse:expr, $spec:expr) => {
        Key::new($spec, $parse, |value| ($parse)(value).map(drop))
    };
}

const ALL: &[Scope] = &[Scope::ConfigMap, Scope::Ingress, Scope::Service];
const ROUTE: &[Scope] = &[Scope::ConfigMap, Scope::Ingress];
const GLOBAL: &[Scope] = &[Scope::ConfigMap];

/// The fields every key shares unless it says otherwise (`check` is set by [`Key::new`]).
const BASE: KeySpec = KeySpec {
    name: "",
    aliases: &[],
    scopes: ALL,
    values: "",
    default: KeyDefault::None("none"),
    example: "",
    help: "",
    refers: Refers::Nothing,
    peers: &[],
    check: |_| Ok(()),
};

pub const SSL_REDIRECT: Key<bool> = key!(
    parse_bool,
    KeySpec {
        name: "ssl-redirect",
        scopes: ROUTE,
        values: "`true` or `false`",
        default: KeyDefault::None("`true` for hosts in a `spec.tls` (`--ssl-redirect`)"),
        example: "true",
        help: "Redirect plain HTTP to HTTPS. On an Ingress, `true` redirects its routes even without `spec.tls`, `false` never.",
        peers: peers::SSL_REDIRECT,
        ..BASE
    }
);

pub const SSL_REDIRECT_CODE: Key<u16> = key!(
    parse_redirect_code,
    KeySpec {
        name: "ssl-redirect-code",
        scopes: ROUTE,
        values: "301, 302, 303, 307 or 308",
        default: KeyDefault::Value("308"),
        example: "301",
        help: "Status code of the HTTPS redirect (without it, the ConfigMap's `http-redirect-code`).",
        peers: peers::SSL_REDIRECT_CODE,
        ..BASE
    }
);

pub const HTTP_REDIRECT_CODE: Key<u16> = key!(
    parse_http_redirect_code,
    KeySpec {
        name: "http-redirect-code",
        scopes: GLOBAL,
        values: "301, 302, 307 or 308",
        default: KeyDefault::Value("308"),
        example: "301",
        help: "Status code of the `from-to-www-redirect` redirects, and of the HTTPS redirect where `ssl-redirect-code` is not set, as ingress-nginx's ConfigMap key of that name.",
        peers: peers::HTTP_REDIRECT_CODE,
        ..BASE
    }
);

pub const SSL_REDIRECT_PORT: Key<u16> = key!(
    parse_port,
    KeySpec {
        name: "ssl-redirect-port",
        scopes: ROUTE,
        values: "a port, 1 to 65535",
        default: KeyDefault::None("none: the request's host is kept"),
        example: "443",
        help: "HTTPS port written in the redirect's location.",
        peers: peers::SSL_REDIRECT_PORT,
        ..BASE
    }
);

pub const NO_TLS_REDIRECT_LOCATIONS: Key<Vec<String>> = key!(
    parse_path_prefixes,
    KeySpec {
        name: "no-tls-redirect-locations",
        scopes: GLOBAL,
        values: "path prefixes separated by commas, each starting with `/` (no spaces, `;`, `$`, `%` or `'`, at most 32), or an empty value",
        default: KeyDefault::Value("/.well-known/acme-challenge"),
        example: "/.well-known/acme-challenge,/healthz",
        help: "A request on plain HTTP whose path starts with one of these prefixes is never redirected to HTTPS (`ssl-redirect`, `force-ssl-redirect`, the redirect of TLS hosts) and is routed as usual, so that ACME HTTP-01 challenges (cert-manager's solver) are answered on HTTP. Each is a plain string prefix of the request's normalized path, whichever route takes the request (`/custom` also matches `/customer`). ingress-nginx's ConfigMap key of that name and HAProxy Ingress' compare the path of the Ingress rule that takes the request instead: the same for cert-manager's solver Ingress (an `ImplementationSpecific` rule for the challenge's path), but a listed path that a broader rule takes (`/` once the solver is gone, or another token's path) is redirected by them, not by Tugboat. An empty value redirects every path. Gateway API redirects are not affected.",
        peers: peers::NO_TLS_REDIRECT_LOCATIONS,
        ..BASE
    }
);

pub const USE_FORWARDED_HEADERS: Key<bool> = key!(
    parse_bool,
    KeySpec {
        name: "use-forwarded-headers",
        scopes: GLOBAL,
        values: "`true` or `false`",
        default: KeyDefault::Value("false"),
        example: "true",
        help: "Take the client's address from `forwarded-for-header` (and the scheme from `X-Forwarded-Proto`, whose `https` then needs no HTTPS redirect) when the connection comes from a trusted forwarder (`proxy-real-ip-cidr`): walking the header from the right while the current address is trusted (at most 8 steps), the first untrusted address is the client. That address is the one access lists, rate limits, logs and the backend's `X-Forwarded-For` use. Without `proxy-real-ip-cidr` no forwarder is trusted (a problem says so): ingress-nginx trusts every address by default, so that any client could name its own address. A header from an untrusted peer changes nothing. See docs/client-address.md.",
        peers: peers::USE_FORWARDED_HEADERS,
        ..BASE
    }
);

pub const FORWARDED_FOR_HEADER: Key<String> = key!(
    parse_header_name,
    KeySpec {
        name: "forwarded-for-header",
        scopes: GLOBAL,
        values: "an HTTP header name",
        default: KeyDefault::Value("X-Forwarded-For"),
        example: "X-Real-IP",
        help: "The header `use-forwarded-headers` reads the client's address from. The backend always gets `X-Forwarded-For`.",
        peers: peers::FORWARDED_FOR_HEADER,
        ..BASE
    }
);

pub const PROXY_REAL_IP_CIDR: Key<Vec<String>> = key!(
    parse_networks,
    KeySpec {
        name: "proxy-real-ip-cidr",
        scopes: GLOBAL,
        values: "addresses and CIDR networks separated by commas (at most 1000)",
        default: KeyDefault::None("none: no forwarder is trusted (ingress-nginx: 0.0.0.0/0)"),
        example: "10.0.0.0/8,192.168.0.0/16",
        help: "The trusted forwarders of `use-forwarded-headers`: only a connection from one of them has its `forwarded-for-header` read. Tugboat trusts none unless set, where ingress-nginx trusts every address (so that any client could set its own address in an allow-list); write `0.0.0.0/0,::/0` for ingress-nginx's behaviour.",
        peers: peers::PROXY_REAL_IP_CIDR,
        ..BASE
    }
);

pub const USE_PROXY_PROTOCOL: Key<bool> = key!(
    parse_bool,
    KeySpec {
        name: "use-proxy-protocol",
        scopes: GLOBAL,
        values: "`true` or `false`",
        default: KeyDefault::Value("false"),
        example: "true",
        help: "Connections to the HTTP and HTTPS ports from a trusted peer (`proxy-real-ip-cidr`) start with a PROXY protocol header (v1 or v2), whose source address is the client's for access lists, rate limits, logs and the backend's `X-Forwarded-For` (and for TLS passthrough's hop to haproxy's own TLS termination). Connections from other peers are taken as they are: a PROXY line from them is not read as one. Without `proxy-real-ip-cidr` no peer is trusted (a problem says so). See docs/client-address.md.",
        peers: peers::USE_PROXY_PROTOCOL,
        ..BASE
    }
);

pub const COMPUTE_FULL_FORWARDED_FOR: Key<bool> = key!(
    parse_bool,
    KeySpec {
        name: "compute-full-forwarded-for",
        scopes: GLOBAL,
        values: "`true` or `false`",
        default: KeyDefault::Value("false"),
        example: "true",
        help: "With `use-forwarded-headers`, a request from a trusted forwarder reaches the backend with its `X-Forwarded-For` kept and the forwarder's address appended, instead of `X-Forwarded-For` holding the client's address only. From an untrusted peer the header is always replaced.",
        peers: peers::COMPUTE_FULL_FORWARDED_FOR,
        ..BASE
    }
);

pub const CLIENT_STRICT_SNI: Key<bool> = key!(
    parse_bool,
    KeySpec {
        name: "client-strict-sni",
        scopes: GLOBAL,
        values: "`true` or `false`",
        default: KeyDefault::Value("false"),
        example: "true",
        help: "Refuse TLS handshakes whose SNI matches no certificate instead of serving the default certificate.",
        peers: peers::CLIENT_STRICT_SNI,
        ..BASE
    }
);

pub const HSTS: Key<bool> = key!(
    parse_bool,
    KeySpec {
        name: "hsts",
        scopes: ROUTE,
        values: "`true` or `false`",
        default: KeyDefault::Value("false"),
        example: "true",
        help: "Send `Strict-Transport-Security` on HTTPS answers.",
        peers: peers::HSTS,
        ..BASE
    }
);

pub const HSTS_MAX_AGE: Key<u64> = key!(
    |v| parse_number(v, 0, 315_360_000),
    KeySpec {
        name: "hsts-max-age",
        scopes: ROUTE,
        values: "seconds, 0 to 315360000",
        default: KeyDefault::Value("15768000"),
        example: "31536000",
        help: "`max-age` of the HSTS header.",
        peers: peers::HSTS_MAX_AGE,
        ..BASE
    }
);

pub const HSTS_INCLUDE_SUBDOMAINS: Key<bool> = key!(
    parse_bool,
    KeySpec {
        name: "hsts-include-subdomains",
        scopes: ROUTE,
        values: "`true` or `false`",
        default: KeyDefault::Value("false"),
        example: "true",
        help: "Add `includeSubDomains` to the HSTS header.",
        peers: peers::HSTS_INCLUDE_SUBDOMAINS,
        ..BASE
    }
);

pub const HSTS_PRELOAD: Key<bool> = key!(
    parse_bool,
    KeySpec {
        name: "hsts-preload",
        scopes: ROUTE,
        values: "`true` or `false`",
        default: KeyDefault::Value("false"),
        example: "true",
        help: "Add `preload` to the HSTS header.",
        peers: peers::HSTS_PRELOAD,
        ..BASE
    }
);

pub const REQUEST_REDIRECT: Key<RedirectTarget> = key!(
    parse_redirect_target,
    KeySpec {
        name: "request-redirect",
        scopes: ROUTE,
        values: "`HOST`, `HOST:PORT` (a lower-case host name or IPv4 address, a port from 1 to 65535), or an absolute `http://` or `https://` URL without `%`, quotes, `\\`, `#` or spaces",
        default: KeyDefault::None("none"),
        example: "example.com:8443",
        help: "Redirect every request of the routes. `HOST` or `HOST:PORT`: to that host (and port) with the request's scheme, path and query kept (`request-redirect: example.com:8443` sends `http://shop/a?b` to `http://example.com:8443/a?b`). A URL: every request goes to that very URL. The redirect answers after allow and deny lists and before the HTTPS redirect, rate limits and authentication, as ingress-nginx's does (on a TLS host asked over plain HTTP it goes straight to its target).",
        peers: peers::REQUEST_REDIRECT,
        ..BASE
    }
);

pub const REQUEST_REDIRECT_CODE: Key<u16> = key!(
    parse_redirect_code,
    KeySpec {
        name: "request-redirect-code",
        scopes: ROUTE,
        values: "301, 302, 303, 307 or 308",
        default: KeyDefault::Value("302"),
        example: "301",
        help: "Status code of `request-redirect`.",
        peers: peers::REQUEST_REDIRECT_CODE,
        ..BASE
    }
);

pub const APP_ROOT: Key<String> = key!(
    parse_app_root,
    KeySpec {
        name: "app-root",
        scopes: ALL,
        values: "a path starting with `/`: letters, digits and `- . _ ~ ! & ( ) * + , ; = : @ /`",
        default: KeyDefault::None("none"),
        example: "/app1",
        help: "A request for `/` is redirected (302) to this path on the same scheme and host (`http://shop.example.com/` to `http://shop.example.com/app1`), as ingress-nginx does; the query is dropped. The redirect answers after allow and deny lists and before the HTTPS redirect, rate limits and authentication, as ingress-nginx's does (on a TLS host asked over plain HTTP, `/` goes to this path over HTTP).",
        peers: peers::APP_ROOT,
        ..BASE
    }
);

pub const PATH_REWRITE: Key<PathRewrite> = key!(
    parse_path_rewrite,
    KeySpec {
        name: "path-rewrite",
        scopes: ALL,
        values: "`REGEX REPLACEMENT`: a regular expression on the path and its replacement (`\\1` for a group); no quotes, `%`, `#` or control characters",
        default: KeyDefault::None("none"),
        example: "^/api/(.*) /\\1",
        help: "Rewrite the path before the request goes to the backend.",
        peers: peers::PATH_REWRITE,
        ..BASE
    }
);

pub const SERVER_ALIAS: Key<Vec<String>> = key!(
    parse_host_aliases,
    KeySpec {
        name: "server-alias",
        scopes: INGRESS,
        values: "host names (or `*.` and a DNS name) separated by commas, at most 32",
        default: KeyDefault::None("none"),
        example: "www.shop.example.com,shop.example.net",
        help: "More host names for each host rule of the Ingress: a request for an alias takes the routes of the rule's host (its paths, backends and keys), as ingress-nginx's server aliases do. When the rule's host is in the Ingress' `spec.tls`, the aliases are TLS hosts too (redirected to HTTPS as the host is) and served the same certificate. Rules without a host get no aliases. An alias whose host and path another Ingress (or an earlier rule) already routes is left out with a problem, and is then no TLS host of this Ingress; the other routes are served.",
        peers: peers::SERVER_ALIAS,
        ..BASE
    }
);

pub const FROM_TO_WWW_REDIRECT: Key<bool> = key!(
    parse_bool,
    KeySpec {
        name: "from-to-www-redirect",
        scopes: INGRESS,
        values: "`true` or `false`",
        default: KeyDefault::Value("false"),
        example: "true",
        help: "For each host rule of the Ingress, a request for the host's `www.` counterpart (`www.shop.example.com` for `shop.example.com`, `shop.example.com` for `www.shop.example.com`) is redirected (`http-redirect-code` from the ConfigMap, 308 by default) to the rule's host with the same scheme, path and query, as ingress-nginx does. The counterpart is a route of `/` (Prefix): paths of it that another Ingress routes stay with that Ingress, and a `/` that another Ingress routes is a conflict (a problem naming the key; no redirect). A counterpart that is a host of the Ingress' own rules or one of its `server-alias` hosts is left to them; a wildcard host has none (a problem). Over HTTPS the counterpart is served the certificate of a `spec.tls` entry that lists it (else the default certificate), so list both hosts there, as ingress-nginx asks.",
        peers: peers::FROM_TO_WWW_REDIRECT,
        ..BASE
    }
);

pub const USE_REGEX: Key<bool> = key!(
    parse_bool,
    KeySpec {
        name: "use-regex",
        scopes: ROUTE,
        values: "`true` or `false`",
        default: KeyDefault::Value("false"),
        example: "true",
        help: "The `Prefix` and `ImplementationSpecific` paths of the Ingress are regular expressions (RE2 syntax; printable ASCII without spaces, quotes, `%` or `#`, at most 512), matched case-insensitively from the start of the path, as ingress-nginx does. They are tried after the host's `Exact` paths and before its `Prefix` paths, the longest expression first. A path that is not a valid expression is left out with a problem; the other paths of the Ingress are served. Regex routes are rules of haproxy's config, so changing them reloads haproxy.",
        peers: peers::USE_REGEX,
        ..BASE
    }
);

pub const REWRITE_TARGET: Key<String> = key!(
    parse_rewrite_target,
    KeySpec {
        name: "rewrite-target",
        scopes: ROUTE,
        values: "a path starting with `/` (letters, digits, `- . _ ~ / ! & ( ) * + , ; = : @ ?`), with `$1` to `$9` for the groups of the route's path",
        default: KeyDefault::None("none"),
        example: "/$2",
        help: "The paths of the Ingress become regular expressions (as with `use-regex`), and a request's path is replaced by this one when its route's expression matches it, `$N` being the expression's groups; the query string is kept. With the path `/something(/|$)(.*)`, `/something/new` reaches the backend as `/new`.",
        peers: peers::REWRITE_TARGET,
        ..BASE
    }
);

pub const BACKEND_PATH: Key<BackendPath> = key!(
    parse_backend_path,
    KeySpec {
        name: "backend-path",
        scopes: ALL,
        values: "`normalized` or `original`",
        default: KeyDefault::Value("normalized"),
        example: "original",
        help: "The path the backend receives. Tugboat always routes on the normalized path (slashes merged, `.` and `..` segments resolved, percent-encoded unreserved characters decoded; a malformed `%`, an encoded `/` or NUL, a `\\` (raw or encoded) or a `..` above the root is refused with 400), so authentication, access lists and rate limits apply to what the application will serve. `normalized`: the backend receives that path, as with ingress-nginx. `original`: it receives the path exactly as the client sent it (for applications that need the raw bytes, e.g. signed URLs). The query string is never changed. In the ConfigMap it also applies to requests that match no route. See docs/path-normalization.md.",
        ..BASE
    }
);

pub const SET_HOST: Key<String> = key!(
    parse_host_port,
    KeySpec {
        name: "set-host",
        scopes: ALL,
        values: "a host name, with an optional `:port`",
        default: KeyDefault::None("none"),
        example: "internal.example.com",
        help: "Replace the `Host` header sent to the backend.",
        peers: peers::SET_HOST,
        ..BASE
    }
);

pub const REQUEST_SET_HEADER: Key<Vec<(String, String)>> = key!(
    parse_header_lines,
    KeySpec {
        name: "request-set-header",
        scopes: ALL,
        values: "one `Name value` per line; names are header tokens, values printable ASCII without `\"`, `\\`, `$` or `%`",
        default: KeyDefault::None("none"),
        example: "X-Team shop",
        help: "Set request headers before the request goes to the backend.",
        peers: peers::REQUEST_SET_HEADER,
        ..BASE
    }
);

pub const RESPONSE_SET_HEADER: Key<Vec<(String, String)>> = key!(
    parse_header_lines,
    KeySpec {
        name: "response-set-header",
        scopes: ALL,
        values: "one `Name value` per line, as `request-set-header`",
        default: KeyDefault::None("none"),
        example: "X-Frame-Options DENY",
        help: "Set response headers before the answer goes to the client.",
        peers: peers::RESPONSE_SET_HEADER,
        ..BASE
    }
);

pub const CORS_ENABLE: Key<bool> = key!(
    parse_bool,
    KeySpec {
        name: "cors-enable",
        scopes: ALL,
        values: "`true` or `false`",
        default: KeyDefault::Value("false"),
        example: "true",
        help: "Add CORS headers to answers and answer preflight requests (OPTIONS with `Origin` and `Access-Control-Request-Method`) with 204.",
        peers: peers::CORS_ENABLE,
        ..BASE
    }
);

pub const CORS_ALLOW_ORIGIN: Key<CorsOrigins> = key!(
    parse_origins,
    KeySpec {
        name: "cors-allow-origin",
        scopes: ALL,
        values: "`*`, or origins (`https://app.example.com`) separated by commas",
        default: KeyDefault::Value("*"),
        example: "https://app.example.com",
        help: "Allowed origins; with a list, the request's `Origin` is echoed when it is in the list.",
        peers: peers::CORS_ALLOW_ORIGIN,
        ..BASE
    }
);

pub const CORS_ALLOW_METHODS: Key<String> = key!(
    parse_methods,
    KeySpec {
        name: "cors-allow-methods",
        scopes: ALL,
        values: "HTTP methods separated by commas",
        default: KeyDefault::Value("GET, PUT, POST, DELETE, PATCH, OPTIONS"),
        example: "GET, POST",
        help: "`Access-Control-Allow-Methods`.",
        peers: peers::CORS_ALLOW_METHODS,
        ..BASE
    }
);

pub const CORS_ALLOW_HEADERS: Key<String> = key!(
    parse_header_names,
    KeySpec {
        name: "cors-allow-headers",
        scopes: ALL,
        values: "header names separated by commas",
        default: KeyDefault::Value(
            "DNT, Keep-Alive, User-Agent, X-Requested-With, If-Modified-Since, Cache-Control, Content-Type, Range, Authorization",
        ),
        example: "Content-Type, Authorization",
        help: "`Access-Control-Allow-Headers`.",
        peers: peers::CORS_ALLOW_HEADERS,
        ..BASE
    }
);

pub const CORS_ALLOW_CREDENTIALS: Key<bool> = key!(
    parse_bool,
    KeySpec {
        name: "cors-allow-credentials",
        scopes: ALL,
        values: "`true` or `false`",
        default: KeyDefault::Value("false"),
        example: "true",
        help: "Send `Access-Control-Allow-Credentials: true`, with a list of origins in `cors-allow-origin` only: browsers refuse credentials from an answer that allows any origin (`*`), so none are offered then (allowing each request's own `Origin` instead would let every site read credentialed answers).",
        peers: peers::CORS_ALLOW_CREDENTIALS,
        ..BASE
    }
);

pub const CORS_MAX_AGE: Key<u64> = key!(
    |v| parse_number(v, 0, 86_400),
    KeySpec {
        name: "cors-max-age",
        scopes: ALL,
        values: "seconds, 0 to 86400",
        default: KeyDefault::Value("86400"),
        example: "600",
        help: "`Access-Control-Max-Age` of preflight answers.",
        peers: peers::CORS_MAX_AGE,
        ..BASE
    }
);

pub const ALLOW_LIST: Key<AccessList> = key!(
    parse_access_list,
    KeySpec {
        name: "allow-list",
        aliases: &["whitelist"],
        refers: Refers::ConfigMapKey,
        scopes: ALL,
        values: "IP addresses and CIDR networks separated by commas or spaces (at most 1000), or `configmap:NAME/KEY`: a key of a ConfigMap in the object's namespace holding one address or network per line (at most 100000; `#` comments allowed)",
        default: KeyDefault::None("none: every address"),
        example: "10.0.0.0/8, 192.168.1.7",
        help: "Only these client addresses are served; others get 403. A `configmap:` list is written as a pattern file (`-f`); when the ConfigMap or key is missing or holds something else than addresses, every client gets 403 (fail closed).",
        peers: peers::ALLOW_LIST,
        ..BASE
    }
);

pub const DENY_LIST: Key<AccessList> = key!(
    parse_access_list,
    KeySpec {
        name: "deny-list",
        aliases: &["blacklist"],
        refers: Refers::ConfigMapKey,
        scopes: ALL,
        values: "as `allow-list`: addresses and networks, or `configmap:NAME/KEY`",
        default: KeyDefault::None("none"),
        example: "203.0.113.0/24",
        help: "These client addresses get 403. When a `configmap:` list cannot be used, every client gets 403 (fail closed).",
        peers: peers::DENY_LIST,
        ..BASE
    }
);

pub const SRC_IP_HEADER: Key<String> = key!(
    parse_header_name,
    KeySpec {
        name: "src-ip-header",
        scopes: ALL,
        values: "a header name",
        default: KeyDefault::None("none: the connection's source address"),
        example: "X-Forwarded-For",
        help: "Take the client address for access lists and rate limits from the last value of this header (set it only behind a trusted load balancer).",
        peers: peers::SRC_IP_HEADER,
        ..BASE
    }
);

pub const AUTH_TYPE: Key<()> = key!(
    parse_auth_type,
    KeySpec {
        name: "auth-type",
        scopes: ALL,
        values: "`basic-auth`",
        default: KeyDefault::None("none"),
        example: "basic-auth",
        help: "Require HTTP basic authentication (with `auth-secret`).",
        peers: peers::AUTH_TYPE,
        ..BASE
    }
);

pub const AUTH_SECRET: Key<String> = key!(
    parse_secret_name,
    KeySpec {
        name: "auth-secret",
        refers: Refers::Secret,
        scopes: ALL,
        values: "the name of a Secret in the object's namespace",
        default: KeyDefault::None("none"),
        example: "shop-users",
        help: "The users: an `auth` key in htpasswd format, or one key per user whose value is the password hash. Hashes: `$1$` (MD5-crypt), `$2b$`/`$2y$` (bcrypt), `$5$` (SHA-256-crypt), `$6$` (SHA-512-crypt); `$apr1$` is refused (haproxy cannot verify it).",
        peers: peers::AUTH_SECRET,
        ..BASE
    }
);

pub const AUTH_REALM: Key<String> = key!(
    parse_realm,
    KeySpec {
        name: "auth-realm",
        scopes: ALL,
        values: "printable ASCII without `\"`, `\\`, `$` or `%`, at most 64 characters",
        default: KeyDefault::Value("Restricted"),
        example: "Shop staff",
        help: "The realm shown by browsers.",
        peers: peers::AUTH_REALM,
        ..BASE
    }
);

pub const AUTH_TLS_SECRET: Key<String> = key!(
    parse_secret_name,
    KeySpec {
        name: "auth-tls-secret",
        refers: Refers::Secret,
        scopes: INGRESS,
        values: "the name of a Secret in the Ingress' namespace",
        default: KeyDefault::None("none: no client certificate is asked for"),
        example: "shop-client-ca",
        help: "Client-certificate authentication on the Ingress' hosts: the Secret's `ca.crt` (PEM certificates) verifies the clients' certificates, and its optional `ca.crl` (PEM revocation lists) revokes some. Per host on the one HTTPS port: a request for such a host on a TLS connection made for another name (SNI), or none, gets 421. A changed `ca.crt` or `ca.crl` goes to haproxy without a reload. A Secret that cannot be used makes the routes answer 403. See docs/client-certificates.md.",
        peers: peers::AUTH_TLS_SECRET,
        ..BASE
    }
);

pub const AUTH_TLS_VERIFY_CLIENT: Key<VerifyClient> = key!(
    parse_verify_client,
    KeySpec {
        name: "auth-tls-verify-client",
        scopes: INGRESS,
        values: "`on`, `optional`, `optional_no_ca` or `off`",
        default: KeyDefault::Value("on"),
        example: "optional",
        help: "With `auth-tls-secret`: `on` refuses (400) a request without a certificate or with one the CA does not verify; `optional` refuses one that fails and lets one without through; `optional_no_ca` lets every request through and tells the backend the outcome (`ssl-client-verify`); `off` asks for no certificate.",
        peers: peers::AUTH_TLS_VERIFY_CLIENT,
        ..BASE
    }
);

pub const AUTH_TLS_VERIFY_DEPTH: Key<u64> = key!(
    |v| parse_number(v, 0, 100),
    KeySpec {
        name: "auth-tls-verify-depth",
        scopes: INGRESS,
        values: "a whole number from 0 to 100",
        default: KeyDefault::Value("1"),
        example: "2",
        help: "With `auth-tls-secret`: read and checked only. haproxy has no per-host verification depth: chains of any length up to OpenSSL's limit (100) that end at a CA of `ca.crt` are verified.",
        peers: peers::AUTH_TLS_VERIFY_DEPTH,
        ..BASE
    }
);

pub const AUTH_TLS_ERROR_PAGE: Key<String> = key!(
    parse_url,
    KeySpec {
        name: "auth-tls-error-page",
        scopes: INGRESS,
        values: "an `http://` or `https://` URL",
        default: KeyDefault::None("none: such requests get 400"),
        example: "https://example.com/client-certificate-help",
        help: "With `auth-tls-secret`: a request refused for its certificate (missing with `on`, or failing verification) is redirected here (302) instead of answered 400.",
        peers: peers::AUTH_TLS_ERROR_PAGE,
        ..BASE
    }
);

pub const AUTH_TLS_PASS_CERTIFICATE: Key<bool> = key!(
    parse_bool,
    KeySpec {
        name: "auth-tls-pass-certificate-to-upstream",
        scopes: INGRESS,
        values: "`true` or `false`",
        default: KeyDefault::Value("false"),
        example: "true",
        help: "With `auth-tls-secret`: the client's certificate goes to the backend in `ssl-client-cert`, URL-encoded PEM as ingress-nginx sends it. `ssl-client-verify`, `ssl-client-subject-dn` and `ssl-client-issuer-dn` are always sent on these routes; a client's own `ssl-client-*` headers never reach any backend.",
        peers: peers::AUTH_TLS_PASS_CERTIFICATE,
        ..BASE
    }
);

pub const AUTH_TLS_MATCH_CN: Key<String> = key!(
    parse_subject_pattern,
    KeySpec {
        name: "auth-tls-match-cn",
        scopes: INGRESS,
        values: "a regular expression without spaces, quotes, `%` or `#`",
        default: KeyDefault::None("none"),
        example: "CN=(billing|shipping)\\.shop",
        help: "With `auth-tls-secret`: the subject DN of the client's certificate, in RFC 2253 form (`CN=app,O=Shop`), must match this expression, else 403 (also without a certificate).",
        peers: peers::AUTH_TLS_MATCH_CN,
        ..BASE
    }
);

pub const AUTH_URL: Key<String> = key!(
    parse_service_url,
    KeySpec {
        name: "auth-url",
        scopes: ALL,
        values: "an `http://` or `https://` URL: a lower-case host name or IP address, an optional port, a path and query of letters, digits, `%XX` and `- . _ ~ / : @ ! * + , ; = &`; nginx variables (`$name` or `${name}`) in the path and query, and `$host` alone in the host (on rules with exact hosts): `$host`, `$scheme`, `$request_uri`, `$escaped_request_uri`, `$uri`, `$args`, `$query_string`, `$is_args`, `$remote_addr`, `$http_NAME` (a request header, `_` for `-`), `$arg_NAME` (a query argument)",
        default: KeyDefault::None("none"),
        example: "http://oauth2-proxy.auth.svc.cluster.local:4180/oauth2/auth",
        help: "External authentication. Before a request goes to the backend, haproxy sends its headers (not its body) to this URL with `auth-method`, adding `X-Original-URL`, `X-Original-URI`, `X-Original-Method`, `X-Scheme`, `X-Forwarded-Host`, `X-Forwarded-Proto`, `X-Real-IP` and `X-Auth-Request-Redirect`. A 2xx answer lets the request through, with the `auth-response-headers` of the answer set on it; 401 and 403 answer the client with that status (401 redirects to `auth-signin` when set); any other answer, or none (haproxy's HTTP client waits 2.5 seconds and tries 4 times), answers 500. Variables are filled in per request as nginx does (`$host`: the Host header in lower case without its port; `$request_uri`: path and query as sent; `$escaped_request_uri`: the same percent-encoded; header and argument values percent-encoded where they could not stand in a URL); a request whose Host is not a host name or address where `$host` is used answers 500. In the URL's host and port only `$host` may stand, and only on rules whose hosts are all exact (the rule's host and its `server-alias` hosts; no rule without a host, no wildcard): there a request's Host is one the Ingress names, while on a rule that takes any Host the client would choose the authentication service (a service of its own that answers 2xx would let it in). Any other variable in the host or port, or `$host` there on such a rule, is refused with a problem, and the routes refuse every request (403); variables in the path and query are not limited. A host name in the URL (`https://$host/oauth2/auth` included) is resolved by haproxy's DNS resolvers (its `default` section, from `/etc/resolv.conf`; `/etc/hosts` is not read), so it must resolve in the cluster's DNS. Runs in haproxy's Lua (`core.httpclient`, haproxy 2.6 and later built with Lua, as the official image is); on a haproxy built without Lua the routes refuse every request (403). A value that is not valid refuses every request (403).",
        peers: peers::AUTH_URL,
        ..BASE
    }
);

pub const AUTH_METHOD: Key<String> = key!(
    parse_auth_method,
    KeySpec {
        name: "auth-method",
        scopes: ALL,
        values: "`GET`, `HEAD`, `POST`, `PUT` or `DELETE`",
        default: KeyDefault::Value("GET"),
        example: "POST",
        help: "The method of the `auth-url` request.",
        peers: peers::AUTH_METHOD,
        ..BASE
    }
);

pub const AUTH_RESPONSE_HEADERS: Key<Vec<String>> = key!(
    parse_header_name_list,
    KeySpec {
        name: "auth-response-headers",
        scopes: ALL,
        values: "header names (letters, digits, `-`, `_`, `.`) separated by commas, at most 32",
        default: KeyDefault::None("none"),
        example: "X-Auth-Request-User, X-Auth-Request-Email",
        help: "With `auth-url`: these headers of a 2xx authentication answer are set on the request; a header the answer lacks is removed from the request, so a client cannot send its own.",
        peers: peers::AUTH_RESPONSE_HEADERS,
        ..BASE
    }
);

pub const AUTH_SIGNIN: Key<String> = key!(
    parse_service_url,
    KeySpec {
        name: "auth-signin",
        scopes: ALL,
        values: "a URL, as `auth-url` (with the same variables; `$host` in the host on any rule)",
        default: KeyDefault::None("none: a 401 of `auth-url` answers 401"),
        example: "https://$host/oauth2/start?rd=$escaped_request_uri",
        help: "With `auth-url`: a 401 redirects the client (302) here, its variables filled in as for `auth-url`, with `rd=` the URL it asked for (`SCHEME://HOST` and the percent-encoded path and query) unless the URL already has an `rd` parameter. As in `auth-url`, no variable but `$host` may stand in the URL's host or port (a link with `$arg_NAME` there would send the client anywhere); `$host` is allowed on any rule, since it sends the client back to the host it asked for.",
        peers: peers::AUTH_SIGNIN,
        ..BASE
    }
);

pub const DEFAULT_BACKEND: Key<String> = key!(
    parse_service_name,
    KeySpec {
        name: "default-backend",
        scopes: INGRESS,
        values: "the name of a Service in the Ingress' namespace",
        default: KeyDefault::None("none: a backend without a usable server answers 503"),
        example: "error-pages",
        help: "When the Service of a rule has no usable server (no ready endpoint, or all down), its requests go to this Service (its first port) instead, with `X-Code: 503`, `X-Format` (the `Accept` header), `X-Namespace`, `X-Ingress-Name`, `X-Service-Name`, `X-Service-Port` and `X-Request-ID` (the client's, else a new one); as endpoints come and go this switches without a reload. With `custom-http-errors`, this Service also answers the errors.",
        peers: peers::DEFAULT_BACKEND,
        ..BASE
    }
);

pub const CUSTOM_HTTP_ERRORS: Key<Vec<u16>> = key!(
    parse_error_codes,
    KeySpec {
        name: "custom-http-errors",
        scopes: INGRESS,
        values: "status codes from 400 to 599 separated by commas",
        default: KeyDefault::None("none: the backend's answers reach the client"),
        example: "404,503",
        help: "When the backend answers one of these codes, the client gets instead the answer of `default-backend` (else of the backend requests without a route get: an Ingress' `spec.defaultBackend`, else `--default-backend-service`, else the built-in 404), asked `GET /` with the client's Host and `X-Code` (the backend's code), `X-Format` (the `Accept` header), `X-Original-URI`, `X-Namespace`, `X-Ingress-Name`, `X-Service-Name`, `X-Service-Port` and `X-Request-ID` (the client's, else a new one); its status, headers and body are passed on as they are. With 503 in the list, a request whose backend has no usable server goes to that backend directly, as with `default-backend`. Runs in haproxy's Lua (`core.httpclient`, haproxy 2.6 and later built with Lua, as the official image is); on a haproxy built without Lua, the Ingress gets a problem naming the key (and haproxy warns at every load), and the backend's answers pass unchanged.",
        peers: peers::CUSTOM_HTTP_ERRORS,
        ..BASE
    }
);

pub const RATE_LIMIT_REQUESTS: Key<u64> = key!(
    |v| parse_number(v, 1, 1_000_000),
    KeySpec {
        name: "rate-limit-requests",
        scopes: ALL,
        values: "requests, 1 to 1000000",
        default: KeyDefault::None("none: no limit"),
        example: "100",
        help: "Requests allowed per client address and `rate-limit-period`; more get `rate-limit-status-code`.",
        peers: peers::RATE_LIMIT_REQUESTS,
        ..BASE
    }
);

pub const RATE_LIMIT_PERIOD: Key<String> = key!(
    parse_duration,
    KeySpec {
        name: "rate-limit-period",
        scopes: ALL,
        values: "a duration: a number and `ms`, `s`, `m` or `h`",
        default: KeyDefault::Value("1s"),
        example: "1m",
        help: "The period of `rate-limit-requests`.",
        peers: peers::RATE_LIMIT_PERIOD,
        ..BASE
    }
);

pub const RATE_LIMIT_STATUS_CODE: Key<u16> = key!(
    |v| parse_number(v, 400, 599).map(|n| n as u16),
    KeySpec {
        name: "rate-limit-status-code",
        scopes: ALL,
        values: "400 to 599",
        default: KeyDefault::Value("429"),
        example: "503",
        help: "Status answered over the limit.",
        peers: peers::RATE_LIMIT_STATUS_CODE,
        ..BASE
    }
);

pub const LIMIT_RPS: Key<u64> = key!(
    |v| parse_number(v, 1, 1_000_000),
    KeySpec {
        name: "limit-rps",
        scopes: ALL,
        values: "requests per second, 1 to 1000000",
        default: KeyDefault::None("none: no limit"),
        example: "10",
        help: "Requests per second allowed per client address, with a burst of `limit-rps` × `limit-burst-multiplier`; more get 503. Counted over sliding windows: at most rate + burst requests in any second and 10 × rate + burst in any 10 seconds.",
        peers: peers::LIMIT_RPS,
        ..BASE
    }
);

pub const LIMIT_BURST_MULTIPLIER: Key<u64> = key!(
    |v| parse_number(v, 1, 1000),
    KeySpec {
        name: "limit-burst-multiplier",
        scopes: ALL,
        values: "a whole number, 1 to 1000",
        default: KeyDefault::Value("5"),
        example: "2",
        help: "The burst `limit-rps` allows, as a multiple of the rate.",
        peers: peers::LIMIT_BURST_MULTIPLIER,
        ..BASE
    }
);

pub const LIMIT_CONNECTIONS: Key<u64> = key!(
    |v| parse_number(v, 1, 1_000_000),
    KeySpec {
        name: "limit-connections",
        scopes: ALL,
        values: "connections, 1 to 1000000",
        default: KeyDefault::None("none: no limit"),
        example: "20",
        help: "Connections with a request in progress at once per client address; a request on one more gets 503.",
        peers: peers::LIMIT_CONNECTIONS,
        ..BASE
    }
);

pub const LIMIT_ALLOWLIST: Key<Vec<String>> = key!(
    parse_networks,
    KeySpec {
        name: "limit-allowlist",
        scopes: ALL,
        values: "IP addresses and CIDR networks separated by commas or spaces (at most 1000)",
        default: KeyDefault::None("none: every address is limited"),
        example: "10.0.0.0/8, 192.168.1.7",
        help: "Client addresses `limit-rps` and `limit-connections` do not apply to.",
        peers: peers::LIMIT_ALLOWLIST,
        ..BASE
    }
);

pub const PROXY_BODY_SIZE: Key<Option<u64>> = key!(
    parse_body_size,
    KeySpec {
        name: "proxy-body-size",
        scopes: ALL,
        values: "a size: digits and an optional unit `k`, `m` or `g` (powers of 1024), at most 1 TiB; `0` is no limit",
        default: KeyDefault::None("no limit"),
        example: "8m",
        help: "The largest request body the routes accept, however it is sent: a request whose `Content-Length` is larger is answered 413 before it reaches the backend (or authentication); a body of unknown length (`Transfer-Encoding: chunked`, HTTP/2 without `Content-Length`) is counted as it passes, by a Lua filter on its way through haproxy a second time, and the first byte past the limit ends it with 413, so the backend never receives it whole. A haproxy built without Lua refuses bodies of unknown length on these routes with 411.",
        peers: peers::PROXY_BODY_SIZE,
        ..BASE
    }
);

pub const LOAD_BALANCE: Key<Balance> = key!(
    parse_balance,
    KeySpec {
        name: "load-balance",
        scopes: ALL,
        values: "`roundrobin`, `leastconn`, `source`, `uri`, `random` or `hdr(Name)`",
        default: KeyDefault::Haproxy("roundrobin"),
        example: "leastconn",
        help: "How requests are spread over the endpoints. `source`, `uri` and `hdr` make every new endpoint a reload.",
        peers: peers::LOAD_BALANCE,
        ..BASE
    }
);

pub const TIMEOUT_SERVER: Key<String> = key!(
    parse_duration,
    KeySpec {
        name: "timeout-server",
        scopes: ALL,
        values: "a duration: a number and `ms`, `s`, `m` or `h`",
        default: KeyDefault::Value("50s"),
        example: "2m",
        help: "How long to wait for the backend's answer.",
        peers: peers::TIMEOUT_SERVER,
        ..BASE
    }
);

pub const TIMEOUT_CONNECT: Key<String> = key!(
    parse_duration,
    KeySpec {
        name: "timeout-connect",
        scopes: ALL,
        values: "a duration",
        default: KeyDefault::Value("5s"),
        example: "2s",
        help: "How long to wait for a connection to the backend.",
        peers: peers::TIMEOUT_CONNECT,
        ..BASE
    }
);

pub const TIMEOUT_CLIENT: Key<String> = key!(
    parse_duration,
    KeySpec {
        name: "timeout-client",
        scopes: GLOBAL,
        values: "a duration",
        default: KeyDefault::Value("50s"),
        example: "1m",
        help: "How long a client may stay silent.",
        peers: peers::TIMEOUT_CLIENT,
        ..BASE
    }
);

pub const TIMEOUT_HTTP_REQUEST: Key<String> = key!(
    parse_duration,
    KeySpec {
        name: "timeout-http-request",
        scopes: GLOBAL,
        values: "a duration",
        default: KeyDefault::Value("10s"),
        example: "5s",
        help: "How long a client may take to send a request's headers.",
        peers: peers::TIMEOUT_HTTP_REQUEST,
        ..BASE
    }
);

pub const TIMEOUT_HTTP_KEEP_ALIVE: Key<String> = key!(
    parse_duration,
    KeySpec {
        name: "timeout-http-keep-alive",
        scopes: GLOBAL,
        values: "a duration",
        default: KeyDefault::None("none (`timeout http-request` applies)"),
        example: "30s",
        help: "How long an idle keep-alive connection stays open.",
        peers: peers::TIMEOUT_HTTP_KEEP_ALIVE,
        ..BASE
    }
);

pub const TIMEOUT_QUEUE: Key<String> = key!(
    parse_duration,
    KeySpec {
        name: "timeout-queue",
        scopes: GLOBAL,
        values: "a duration",
        default: KeyDefault::None("none (`timeout connect` applies)"),
        example: "10s",
        help: "How long a request may wait for a free server.",
        peers: peers::TIMEOUT_QUEUE,
        ..BASE
    }
);

pub const TIMEOUT_TUNNEL: Key<String> = key!(
    parse_duration,
    KeySpec {
        name: "timeout-tunnel",
        scopes: GLOBAL,
        values: "a duration",
        default: KeyDefault::Value("1h"),
        example: "2h",
        help: "How long an idle tunnel (WebSocket) stays open.",
        peers: peers::TIMEOUT_TUNNEL,
        ..BASE
    }
);

pub const SEND_PROXY_PROTOCOL: Key<ProxyProtocol> = key!(
    parse_proxy_protocol,
    KeySpec {
        name: "send-proxy-protocol",
        scopes: ALL,
        values: "`v1` or `v2`",
        default: KeyDefault::None("none"),
        example: "v2",
        help: "Send a PROXY protocol header to the backend's servers.",
        peers: peers::SEND_PROXY_PROTOCOL,
        ..BASE
    }
);

pub const SERVER_SSL: Key<bool> = key!(
    parse_bool,
    KeySpec {
        name: "server-ssl",
        scopes: ALL,
        values: "`true` or `false`",
        default: KeyDefault::Value("false"),
        example: "true",
        help: "Talk TLS to the backend's servers, sending `server-ssl-name` as SNI. Without `server-ca` their certificates are not verified (`verify none`).",
        peers: peers::SERVER_SSL,
        ..BASE
    }
);

pub const SERVER_CA: Key<String> = key!(
    parse_secret_name,
    KeySpec {
        name: "server-ca",
        refers: Refers::Secret,
        scopes: ALL,
        values: "the name of a Secret in the object's namespace with a `ca.crt` key (PEM certificates)",
        default: KeyDefault::None("none: server certificates are not verified"),
        example: "backend-ca",
        help: "With `server-ssl`: verify the servers' certificates against these CAs (`verify required`) and that they are for `server-ssl-name` (`verifyhost`); a server whose certificate does not verify gets no requests (503). When the Secret cannot be used, the backend answers 503 rather than talk to unverified servers.",
        peers: peers::SERVER_CA,
        ..BASE
    }
);

pub const SERVER_SSL_NAME: Key<String> = key!(
    parse_server_name,
    KeySpec {
        name: "server-ssl-name",
        scopes: ALL,
        values: "a lower-case DNS name",
        default: KeyDefault::None("the Service's name in the cluster, `NAME.NAMESPACE.svc`"),
        example: "api.internal.example.com",
        help: "With `server-ssl`: the name sent as SNI to the servers and, with `server-ca`, the name their certificates must carry.",
        peers: peers::SERVER_SSL_NAME,
        ..BASE
    }
);

pub const SERVER_VERIFY: Key<bool> = key!(
    parse_bool,
    KeySpec {
        name: "server-verify",
        scopes: ALL,
        values: "`true` or `false`",
        default: KeyDefault::None("`true` when `server-ca` is set"),
        example: "false",
        help: "With `server-ssl`: `false` does not verify the servers' certificates even with `server-ca` (the CA is not read); `true` without `server-ca` makes the backend answer 503 rather than talk to unverified servers.",
        peers: peers::SERVER_VERIFY,
        ..BASE
    }
);

pub const SERVER_CRT: Key<String> = key!(
    parse_secret_name,
    KeySpec {
        name: "server-crt",
        refers: Refers::Secret,
        scopes: ALL,
        values: "the name of a TLS Secret (`tls.crt`, `tls.key`) in the object's namespace",
        default: KeyDefault::None("none"),
        example: "haproxy-client",
        help: "With `server-ssl`: present this client certificate to the servers (mutual TLS). When the Secret cannot be used, the backend answers 503.",
        peers: peers::SERVER_CRT,
        ..BASE
    }
);

pub const SERVER_PROTO: Key<bool> = key!(
    parse_server_proto,
    KeySpec {
        name: "server-proto",
        scopes: ALL,
        values: "`h2` or `h1`",
        default: KeyDefault::Value("h1"),
        example: "h2",
        help: "The HTTP version spoken to the servers: `h2` is HTTP/2 (`proto h2` in clear text, ALPN `h2` with `server-ssl`).",
        peers: peers::SERVER_PROTO,
        ..BASE
    }
);

pub const CHECK: Key<bool> = key!(
    parse_bool,
    KeySpec {
        name: "check",
        scopes: ALL,
        values: "`true` or `false`",
        default: KeyDefault::Value("false"),
        example: "true",
        help: "Health-check the servers (a TCP connection, or `check-http`); servers that fail are taken out until they pass again. Servers added at runtime are checked too.",
        peers: peers::CHECK,
        ..BASE
    }
);

pub const CHECK_HTTP: Key<String> = key!(
    parse_check_path,
    KeySpec {
        name: "check-http",
        scopes: ALL,
        values: "a path: `/` then letters, digits and `-._~/?=&`",
        default: KeyDefault::None("none: a TCP connection"),
        example: "/healthz",
        help: "Health-check with `GET <path>` (`option httpchk`): 2xx and 3xx pass. Turns checks on.",
        peers: peers::CHECK_HTTP,
        ..BASE
    }
);

pub const CHECK_INTERVAL: Key<String> = key!(
    parse_positive_duration,
    KeySpec {
        name: "check-interval",
        scopes: ALL,
        values: "a duration above zero",
        default: KeyDefault::Haproxy("2s"),
        example: "5s",
        help: "Time between two checks of a server (with `check` or `check-http`).",
        peers: peers::CHECK_INTERVAL,
        ..BASE
    }
);

pub const COOKIE_PERSISTENCE: Key<String> = key!(
    parse_cookie_name,
    KeySpec {
        name: "cookie-persistence",
        scopes: ALL,
        values: "a cookie name: letters, digits, `-` and `_`, at most 64",
        default: KeyDefault::None("none"),
        example: "SERVERID",
        help: "Keep each client on one server with a cookie (`cookie <name> insert indirect nocache`); the value is the server's slot name (`s1`, `s2`, ...). A slot keeps its endpoint while the endpoint lives. When an endpoint goes away its clients are sent to another server and get a new cookie; a slot given to a new endpoint later sends the old cookie's clients there. A reload numbers the slots afresh, so clients may move once after a reload.",
        peers: peers::COOKIE_PERSISTENCE,
        ..BASE
    }
);

pub const AFFINITY: Key<()> = key!(
    parse_affinity,
    KeySpec {
        name: "affinity",
        scopes: ALL,
        values: "`cookie`",
        default: KeyDefault::None("none"),
        example: "cookie",
        help: "Keep each client on one server with an `HttpOnly` cookie named by `session-cookie-name`, as `cookie-persistence` does (which takes precedence when both are set). `session-cookie-path`, `session-cookie-max-age` and `session-cookie-expires` set its attributes.",
        peers: peers::AFFINITY,
        ..BASE
    }
);

pub const SESSION_COOKIE_NAME: Key<String> = key!(
    parse_cookie_name,
    KeySpec {
        name: "session-cookie-name",
        scopes: ALL,
        values: "a cookie name: letters, digits, `-` and `_`, at most 64",
        default: KeyDefault::Value("INGRESSCOOKIE"),
        example: "route",
        help: "The name of the `affinity: cookie` cookie.",
        peers: peers::SESSION_COOKIE_NAME,
        ..BASE
    }
);

pub const SESSION_COOKIE_PATH: Key<String> = key!(
    parse_cookie_path,
    KeySpec {
        name: "session-cookie-path",
        scopes: ALL,
        values: "a path: `/` then letters, digits and `-` `.` `_` `~` `/`, at most 256",
        default: KeyDefault::None("`/`"),
        example: "/shop",
        help: "The `Path` of the `affinity: cookie` cookie.",
        peers: peers::SESSION_COOKIE_PATH,
        ..BASE
    }
);

pub const SESSION_COOKIE_MAX_AGE: Key<u64> = key!(
    |v| parse_number(v, 1, 315_360_000),
    KeySpec {
        name: "session-cookie-max-age",
        scopes: ALL,
        values: "seconds, 1 to 315360000",
        default: KeyDefault::None("none: the cookie lasts the browser session"),
        example: "3600",
        help: "The `Max-Age` of the `affinity: cookie` cookie.",
        peers: peers::SESSION_COOKIE_MAX_AGE,
        ..BASE
    }
);

pub const SESSION_COOKIE_EXPIRES: Key<u64> = key!(
    |v| parse_number(v, 1, 315_360_000),
    KeySpec {
        name: "session-cookie-expires",
        scopes: ALL,
        values: "seconds, 1 to 315360000",
        default: KeyDefault::None("none: the cookie lasts the browser session"),
        example: "172800",
        help: "How long the `affinity: cookie` cookie lasts, sent as its `Max-Age` (the same lifetime as an `Expires` date that many seconds ahead) when `session-cookie-max-age` is not set.",
        peers: peers::SESSION_COOKIE_EXPIRES,
        ..BASE
    }
);

/// Canary keys are read on an Ingress only: they make it a canary of another Ingress.
const INGRESS: &[Scope] = &[Scope::Ingress];

pub const SSL_PASSTHROUGH: Key<bool> = key!(
    parse_bool,
    KeySpec {
        name: "ssl-passthrough",
        scopes: INGRESS,
        values: "`true` or `false`",
        default: KeyDefault::Value("false"),
        example: "true",
        help: "Pass TLS through to the backend undecrypted: a TLS connection on the HTTPS port whose SNI is one of the Ingress' rule hosts (exact or `*.` wildcard, as the HTTP routes match them) goes to the Service port of that rule's `/` path (else its first path) as it is, so the backend presents its own certificate and sees the client's SNI and ALPN. Other hosts keep terminating TLS in haproxy on the same port. Plain HTTP to the hosts is served as the Ingress' rules say, with its keys (`ssl-redirect` and `force-ssl-redirect` redirect as usual). No other key applies to the passed-through TLS; a rule without a host has no passthrough. An Ingress that sets a key restricting access (allow lists, authentication, limits), or whose ConfigMap or Service sets one, or a host any of whose routes (of any Ingress) restricts access, gets no passthrough for the hosts concerned (a problem names the key or the route): their TLS is terminated by haproxy and the restriction is enforced. As in HTTP routing an exact host beats a wildcard: an exact host with routes of its own under a passthrough wildcard is terminated. The first passthrough host (and the removal of the last) reloads haproxy; another host for a Service port that already has passthrough is a map update, and endpoints change at runtime.",
        peers: peers::SSL_PASSTHROUGH,
        ..BASE
    }
);

pub const CANARY: Key<bool> = key!(
    parse_bool,
    KeySpec {
        name: "canary",
        scopes: INGRESS,
        values: "`true` or `false`",
        default: KeyDefault::Value("false"),
        example: "true",
        help: "Make this Ingress a canary: it serves no route of its own, and each of its host and path rules sends a share of the requests of the same host and path of another (main) Ingress to its own backend: by header (`canary-by-header`), then by cookie (`canary-by-cookie`), then by weight (`canary-weight`), in that order. Requests that go to the canary get the main route's features (redirects, headers, access lists, authentication); the canary Ingress's own route keys are ignored, its backend keys (balancing, persistence) apply to its backend, except that with session affinity on the main backend the canary's backend takes the main backend's cookie (see `affinity-canary-behavior`). A canary rule whose host and path no main Ingress serves does nothing (the host and path answer as without it); one canary per host and path (a second is a conflict); a canary of the main route's own backend does nothing.",
        peers: peers::CANARY,
        ..BASE
    }
);

pub const CANARY_WEIGHT: Key<u64> = key!(
    |v| parse_number(v, 0, 1_000_000),
    KeySpec {
        name: "canary-weight",
        scopes: INGRESS,
        values: "a whole number, 0 to 1000000",
        default: KeyDefault::Value("0"),
        example: "10",
        help: "The share of the requests (that no header or cookie rule decided) sent to the canary: `canary-weight` out of `canary-weight-total`. A change of weight is a runtime update (the route map's entry), not a reload.",
        peers: peers::CANARY_WEIGHT,
        ..BASE
    }
);

pub const CANARY_WEIGHT_TOTAL: Key<u64> = key!(
    |v| parse_number(v, 1, 1_000_000),
    KeySpec {
        name: "canary-weight-total",
        scopes: INGRESS,
        values: "a whole number, 1 to 1000000; below 100 counts as 100",
        default: KeyDefault::Value("100"),
        example: "1000",
        help: "What `canary-weight` is out of. As in ingress-nginx, a total below 100 counts as 100, and a weight at or above the total sends every request to the canary.",
        peers: peers::CANARY_WEIGHT_TOTAL,
        ..BASE
    }
);

pub const CANARY_BY_HEADER: Key<String> = key!(
    parse_header_name,
    KeySpec {
        name: "canary-by-header",
        scopes: INGRESS,
        values: "a header name",
        default: KeyDefault::None("none"),
        example: "X-Canary",
        help: "A request with this header set to `always` goes to the canary, set to `never` never does; any other value leaves the decision to the cookie and the weight. With `canary-by-header-value`, only that value sends it to the canary (`always` and `never` are then plain values).",
        peers: peers::CANARY_BY_HEADER,
        ..BASE
    }
);

pub const CANARY_BY_HEADER_VALUE: Key<String> = key!(
    parse_match_value,
    KeySpec {
        name: "canary-by-header-value",
        scopes: INGRESS,
        values: "printable ASCII without spaces, quotes, `\\`, `$`, `%`, `#`, `{` or `}`, at most 1024",
        default: KeyDefault::None("none"),
        example: "beta",
        help: "With `canary-by-header`: the header value (compared whole, case-sensitively) that sends a request to the canary; other values leave the decision to the cookie and the weight. Without `canary-by-header` it does nothing.",
        peers: peers::CANARY_BY_HEADER_VALUE,
        ..BASE
    }
);

pub const CANARY_BY_HEADER_PATTERN: Key<String> = key!(
    parse_header_pattern,
    KeySpec {
        name: "canary-by-header-pattern",
        scopes: INGRESS,
        values: "a regular expression of printable ASCII without spaces, quotes, `%` or `#`, at most 512",
        default: KeyDefault::None("none"),
        example: "^(beta|canary)$",
        help: "With `canary-by-header` and without `canary-by-header-value`: a header value this expression finds a match in (anywhere, unless anchored) sends the request to the canary; other values leave the decision to the cookie and the weight.",
        peers: peers::CANARY_BY_HEADER_PATTERN,
        ..BASE
    }
);

pub const AFFINITY_CANARY_BEHAVIOR: Key<AffinityCanaryBehavior> = key!(
    parse_affinity_canary_behavior,
    KeySpec {
        name: "affinity-canary-behavior",
        scopes: INGRESS,
        values: "`sticky` or `legacy`",
        default: KeyDefault::Value("sticky"),
        example: "legacy",
        help: "On a canary whose main route's backend has session affinity (`affinity: cookie` or `cookie-persistence`): a request with the main backend's affinity cookie stays on the main backend, before the header, cookie and weight decide. `sticky`: the canary's backend sets the same cookie (its attributes are the main backend's, its values start with `canary-`) and a request with such a value goes to the canary, so a client stays where it was first sent. `legacy`: the canary's backend keeps its own persistence, and a request the canary got is decided again next time.",
        peers: peers::AFFINITY_CANARY_BEHAVIOR,
        ..BASE
    }
);

pub const CANARY_BY_COOKIE: Key<String> = key!(
    parse_cookie_name,
    KeySpec {
        name: "canary-by-cookie",
        scopes: INGRESS,
        values: "a cookie name: letters, digits, `-` and `_`, at most 64",
        default: KeyDefault::None("none"),
        example: "canary",
        help: "A request whose cookie of this name is `always` goes to the canary, `never` never does (unless the header decided first); any other value leaves the decision to the weight.",
        peers: peers::CANARY_BY_COOKIE,
        ..BASE
    }
);

pub const GLOBAL_CONFIG_SNIPPET: Key<Vec<String>> = key!(
    parse_snippet,
    KeySpec {
        name: "global-config-snippet",
        scopes: GLOBAL,
        values: "haproxy `global` directives, one per line (at most 64 lines, 8 KB); see `backend-config-snippet` for what is refused",
        default: KeyDefault::None("none"),
        example: "tune.bufsize 32768",
        help: "Raw lines for the `global` section. Only with the controller's `--allow-snippets`.",
        ..BASE
    }
);

pub const BACKEND_CONFIG_SNIPPET: Key<Vec<String>> = key!(
    parse_snippet,
    KeySpec {
        name: "backend-config-snippet",
        scopes: ALL,
        values: "haproxy backend directives, one per line (at most 64 lines, 8 KB)",
        default: KeyDefault::None("none"),
        example: "http-response set-header X-Backend shop",
        help: "Raw lines for the backend section, after Tugboat's own. Only with the controller's `--allow-snippets`. Refused (with a problem naming the directive): section keywords (`frontend`, `backend`, `global`, ...), `server`/`default-server`/`server-template` (Tugboat owns the servers), lines starting with `.` (conditional blocks), what reads files (`-f`, `*-file` and `file` arguments, `errorfile*`, `crt*`, `ca-base`, `key-base`, `server-state-*`, `load-server-state-from-file`, `default-path`, map and ACL file functions such as `map_str(...)`, `set-map(...)`, `add-acl(...)`), loads code (`lua*`, `ssl-engine`, `ssl-provider*`, `51degrees-*`, `deviceatlas-*`, `wurfl-*`, `filter`, `spoe`), runs programs or changes the process (`external-check`, `insecure-*`, `setenv`, `presetenv`, `resetenv`, `unsetenv`, `stats socket`, `master-worker`, `user`, `group`, `uid`, `gid`, `chroot`, `daemon`, `pidfile`, `set-dumpable`, `expose-experimental-directives`), reads the environment (`$`, `env(`) and runtime expressions (`%[`). Control characters other than the line breaks are refused. When haproxy refuses the resulting configuration, the snippet is left out, the rest is applied and the object gets a problem. While raw snippets are off, a snippet is not applied and gets a warning; one whose lines restrict access (`http-request`/`tcp-request` denials, `auth`, `tarpit`, `reject`, a `return` of 400 or more, trackers, `maxconn`; in doubt, a directive not known to be harmless) makes its routes answer 403 to every request, as any restriction Tugboat cannot honour (unless `--unsupported-access-keys=ignore`).",
        ..BASE
    }
);

pub const SYSLOG_SERVER: Key<Option<String>> = key!(
    parse_syslog_server,
    KeySpec {
        name: "syslog-server",
        scopes: GLOBAL,
        values: "`stdout`, or `ADDRESS:PORT` of a syslog server (UDP)",
        default: KeyDefault::Value("stdout"),
        example: "127.0.0.1:514",
        help: "Where haproxy sends its logs.",
        peers: peers::SYSLOG_SERVER,
        ..BASE
    }
);

pub const LOG_FORMAT: Key<String> = key!(
    parse_log_format,
    KeySpec {
        name: "log-format",
        scopes: GLOBAL,
        values: "an haproxy log-format string: printable ASCII without `\"`, `\\` or `$`",
        default: KeyDefault::None("haproxy's HTTP log format"),
        example: "%ci:%cp [%tr] %ft %b/%s %ST %B %HM %HU",
        help: "The format of the request log lines.",
        peers: peers::LOG_FORMAT,
        ..BASE
    }
);
pub const LOG_FORMAT_JSON: Key<bool> = key!(
    parse_bool,
    KeySpec {
        name: "log-format-json",
        scopes: GLOBAL,
        values: "`true` or `false`",
        default: KeyDefault::Value("false"),
        example: "true",
        help: "Log each HTTP request as one JSON object per line, valid JSON on every haproxy series: client, method, host, path, user agent, request id, status, bytes, timings, backend, server, the Ingress or HTTPRoute whose route served it (`owner`, `Ingress/NAMESPACE/NAME`) and its Service (`service`, `NAMESPACE/NAME:PORT`); haproxy writes `-` where it has no value (a request that matches no route has no owner nor service). Every text field goes through haproxy's `json(utf8s)` converter, so control characters, quotes and backslashes are escaped, invalid UTF-8 bytes and characters beyond the Basic Multilingual Plane (an emoji) dropped. A `log-format` set beside it wins.",
        peers: peers::LOG_FORMAT_JSON,
        ..BASE
    }
);

/// Every key, in the order of the reference.
pub const KEYS: &[KeySpec] = &[
    SSL_REDIRECT.spec,
    SSL_REDIRECT_CODE.spec,
    HTTP_REDIRECT_CODE.spec,
    SSL_REDIRECT_PORT.spec,
    NO_TLS_REDIRECT_LOCATIONS.spec,
    CLIENT_STRICT_SNI.spec,
    HSTS.spec,
    HSTS_MAX_AGE.spec,
    HSTS_INCLUDE_SUBDOMAINS.spec,
    HSTS_PRELOAD.spec,
    REQUEST_REDIRECT.spec,
    REQUEST_REDIRECT_CODE.spec,
    APP_ROOT.spec,
    SERVER_ALIAS.spec,
    FROM_TO_WWW_REDIRECT.spec,
    PATH_REWRITE.spec,
    USE_REGEX.spec,
    REWRITE_TARGET.spec,
    BACKEND_PATH.spec,
    SET_HOST.spec,
    REQUEST_SET_HEADER.spec,
    RESPONSE_SET_HEADER.spec,
    CORS_ENABLE.spec,
    CORS_ALLOW_ORIGIN.spec,
    CORS_ALLOW_METHODS.spec,
    CORS_ALLOW_HEADERS.spec,
    CORS_ALLOW_CREDENTIALS.spec,
    CORS_MAX_AGE.spec,
    ALLOW_LIST.spec,
    DENY_LIST.spec,
    SRC_IP_HEADER.spec,
    AUTH_TYPE.spec,
    AUTH_SECRET.spec,
    AUTH_REALM.spec,
    AUTH_TLS_SECRET.spec,
    AUTH_TLS_VERIFY_CLIENT.spec,
    AUTH_TLS_VERIFY_DEPTH.spec,
    AUTH_TLS_ERROR_PAGE.spec,
    AUTH_TLS_PASS_CERTIFICATE.spec,
    AUTH_TLS_MATCH_CN.spec,
    AUTH_URL.spec,
    AUTH_METHOD.spec,
    AUTH_RESPONSE_HEADERS.spec,
    AUTH_SIGNIN.spec,
    DEFAULT_BACKEND.spec,
    CUSTOM_HTTP_ERRORS.spec,
    RATE_LIMIT_REQUESTS.spec,
    RATE_LIMIT_PERIOD.spec,
    RATE_LIMIT_STATUS_CODE.spec,
    LIMIT_RPS.spec,
    LIMIT_BURST_MULTIPLIER.spec,
    LIMIT_CONNECTIONS.spec,
    LIMIT_ALLOWLIST.spec,
    PROXY_BODY_SIZE.spec,
    LOAD_BALANCE.spec,
    TIMEOUT_SERVER.spec,
    TIMEOUT_CONNECT.spec,
    TIMEOUT_CLIENT.spec,
    TIMEOUT_HTTP_REQUEST.spec,
    TIMEOUT_HTTP_KEEP_ALIVE.spec,
    TIMEOUT_QUEUE.spec,
    TIMEOUT_TUNNEL.spec,
    SEND_PROXY_PROTOCOL.spec,
    SERVER_SSL.spec,
    SERVER_CA.spec,
    SERVER_SSL_NAME.spec,
    SERVER_VERIFY.spec,
    SERVER_CRT.spec,
    SERVER_PROTO.spec,
    CHECK.spec,
    CHECK_HTTP.spec,
    CHECK_INTERVAL.spec,
    COOKIE_PERSISTENCE.spec,
    AFFINITY.spec,
    SESSION_COOKIE_NAME.spec,
    SESSION_COOKIE_PATH.spec,
    SESSION_COOKIE_MAX_AGE.spec,
    SESSION_COOKIE_EXPIRES.spec,
    SSL_PASSTHROUGH.spec,
    CANARY.spec,
    CANARY_WEIGHT.spec,
    CANARY_WEIGHT_TOTAL.spec,
    CANARY_BY_HEADER.spec,
    CANARY_BY_HEADER_VALUE.spec,
    CANARY_BY_HEADER_PATTERN.spec,
    CANARY_BY_COOKIE.spec,
    AFFINITY_CANARY_BEHAVIOR.spec,
    GLOBAL_CONFIG_SNIPPET.spec,
    BACKEND_CONFIG_SNIPPET.spec,
    SYSLOG_SERVER.spec,
    LOG_FORMAT.spec,
    LOG_FORMAT_JSON.spec,
    USE_FORWARDED_HEADERS.spec,
    FORWARDED_FOR_HEADER.spec,
    PROXY_REAL_IP_CIDR.spec,
    COMPUTE_FULL_FORWARDED_FOR.spec,
    USE_PROXY_PROTOCOL.spec,
];

/// The key called `name` (or with this alias).
pub fn find_key(name: &str) -> Option<&'static KeySpec> {
    KEYS.iter()
        .find(|k| k.name == name || k.aliases.contains(&name))
}

/// The Tugboat keys another controller's key is read as, with how: usually one, two
/// for ingress-nginx's `backend-protocol` (`server-ssl` and `server-proto`).
pub fn find_peer(ecosystem: Ecosystem, name: &str) -> Vec<(&'static KeySpec, &'static PeerKey)> {
    KEYS.iter()
        .flat_map(|spec| spec.peers.iter().map(move |peer| (spec, peer)))
        .filter(|(_, peer)| peer.ecosystem == ecosystem && peer.name == name)
        .collect()
}

/// The Tugboat keys an annotation `ecosystem` + `name` is read as, each with the peer
/// reading that translates its value (`None`: written as Tugboat's). Under Tugboat's
/// prefix a key is Tugboat's; under the legacy prefix (`ingress.kubernetes.io/`) a key
/// that the controllers which used that prefix gave another meaning is read with theirs
/// (its entries in [`peers`], e.g. a lone `auth-secret` turns basic authentication on),
/// any other as Tugboat's. The one reading of an annotation's name: the builder, the
/// references and `tugboat migrate` all take it from here.
pub fn targets(
    ecosystem: Ecosystem,
    name: &str,
) -> Vec<(&'static KeySpec, Option<&'static PeerKey>)> {
    let peers = || {
        find_peer(ecosystem, name)
            .into_iter()
            .map(|(spec, peer)| (spec, Some(peer)))
            .collect::<Vec<_>>()
    };
    let own = || {
        find_key(name)
            .map(|spec| (spec, None))
            .into_iter()
            .collect()
    };
    match ecosystem {
        Ecosystem::Tugboat => own(),
        Ecosystem::Legacy => {
            let legacy = peers();
            if legacy.is_empty() { own() } else { legacy }
        }
        _ => peers(),
    }
}

/// The timeouts of haproxy's `defaults` section when the ConfigMap sets none: the keys'
/// default values, by haproxy name.
pub fn default_timeouts() -> std::collections::BTreeMap<&'static str, String> {
    TIMEOUTS
        .iter()
        .filter_map(|(name, key)| Some((*name, key.default_value()?)))
        .collect()
}

/// The timeout keys of the ConfigMap, by haproxy name.
pub const TIMEOUTS: &[(&str, Key<String>)] = &[
    ("client", TIMEOUT_CLIENT),
    ("connect", TIMEOUT_CONNECT),
    ("server", TIMEOUT_SERVER),
    ("http-request", TIMEOUT_HTTP_REQUEST),
    ("http-keep-alive", TIMEOUT_HTTP_KEEP_ALIVE),
    ("queue", TIMEOUT_QUEUE),
    ("tunnel", TIMEOUT_TUNNEL),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_names_and_aliases_are_unique() {
        let mut names: Vec<&str> = KEYS
            .iter()
            .flat_map(|k| std::iter::once(k.name).chain(k.aliases.iter().copied()))
            .collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "duplicate key names");
    }

    #[test]
    fn every_example_parses() {
        for key in KEYS {
            assert_eq!((key.check)(key.example), Ok(()), "{}", key.name);
        }
    }

    /// What makes [`Key::or_default`] safe: every default given as a value parses with
    /// its key's parser.
    #[test]
    fn every_default_value_parses() {
        for key in KEYS {
            if let KeyDefault::Value(value) = key.default {
                assert_eq!((key.check)(value), Ok(()), "{}", key.name);
            }
        }
    }

    #[test]
    fn the_check_of_a_key_is_its_parser() {
        assert_eq!(
            (HSTS_MAX_AGE.spec.check)("315360001"),
            Err(ValueError::OutOfRange {
                min: 0,
                max: 315_360_000
            })
        );
        assert_eq!(HSTS_MAX_AGE.default_value(), Some(15_768_000));
        assert_eq!(RATE_LIMIT_STATUS_CODE.default_value(), Some(429));
        assert_eq!(LOAD_BALANCE.default_value(), None);
    }

    #[test]
    fn the_default_timeouts_are_the_keys_defaults() {
        let timeouts = default_timeouts();
        assert_eq!(timeouts.get("connect").map(String::as_str), Some("5s"));
        assert_eq!(timeouts.get("client").map(String::as_str), Some("50s"));
        assert_eq!(timeouts.get("server").map(String::as_str), Some("50s"));
        assert_eq!(
            timeouts.get("http-request").map(String::as_str),
            Some("10s")
        );
        assert_eq!(timeouts.get("tunnel").map(String::as_str), Some("1h"));
        assert_eq!(timeouts.len(), 5, "{timeouts:?}");
    }
}
