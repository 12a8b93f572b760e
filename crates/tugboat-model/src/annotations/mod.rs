//! The keys users configure: their reference table, where each may be set, how values
//! are read and validated, and the precedence between scopes.
//!
//! A key can be set in the controller's ConfigMap (plain key), on an Ingress (its
//! routes) and, where it makes sense, on a Service (its backends and the routes to it),
//! as an annotation `tugboat.dev/<key>` (or the alias prefix `ingress.kubernetes.io/`).
//! Service beats Ingress beats ConfigMap beats the built-in default. A value that does
//! not parse is ignored for that object only (the next scope down applies) and becomes a
//! problem naming the key, the value and what was expected.
//!
//! Validation here is the door for these values: every parser accepts only the syntax
//! it documents and refuses everything else (newlines, quotes, `%`, `$`, `\`, ...), so a
//! value that passes can be written into haproxy's config as it is.
//!
//! [`KEYS`] is the single reference: `docs/annotations.md` is generated from it
//! ([`reference_markdown`]) and a test fails when the file is out of date.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::IpAddr;

use crate::features::{
    BackendOptions, Balance, Cors, CorsOrigins, GlobalOptions, HealthCheck, Hsts, HttpsRedirect,
    PathRewrite, ProxyProtocol, RateLimit, Redirect, RedirectTarget, RedirectWhen, RouteFeatures,
    ServerTls, Snippet,
};
use crate::problem::{ObjectProblem, ObjectRef, ProblemReason};
use crate::validate::{self, printable};

pub mod prefixes;

pub use prefixes::{Ecosystem, UnsupportedAccess};

/// The annotation prefix of Tugboat's keys.
pub const PREFIX: &str = "tugboat.dev/";
/// The prefix accepted as an alias (other controllers' users have it).
pub const ALIAS_PREFIX: &str = "ingress.kubernetes.io/";

/// Where a key can be set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    ConfigMap,
    Ingress,
    Service,
}

impl Scope {
    fn as_str(self) -> &'static str {
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

/// One key of the reference.
#[derive(Debug, Clone, Copy)]
pub struct KeySpec {
    pub name: &'static str,
    /// Other names accepted for the same key.
    pub aliases: &'static [&'static str],
    pub scopes: &'static [Scope],
    /// What values are accepted.
    pub values: &'static str,
    pub default: &'static str,
    /// A valid value.
    pub example: &'static str,
    pub help: &'static str,
    /// Whether the value names another object.
    pub refers: Refers,
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

const ALL: &[Scope] = &[Scope::ConfigMap, Scope::Ingress, Scope::Service];
const ROUTE: &[Scope] = &[Scope::ConfigMap, Scope::Ingress];
const GLOBAL: &[Scope] = &[Scope::ConfigMap];

const fn key(
    name: &'static str,
    scopes: &'static [Scope],
    values: &'static str,
    default: &'static str,
    example: &'static str,
    help: &'static str,
) -> KeySpec {
    KeySpec {
        name,
        aliases: &[],
        scopes,
        values,
        default,
        example,
        help,
        refers: Refers::Nothing,
    }
}

/// Every key, in the order of the reference.
pub const KEYS: &[KeySpec] = &[
    key(
        "ssl-redirect",
        ROUTE,
        "`true` or `false`",
        "`true` for hosts in a `spec.tls` (`--ssl-redirect`)",
        "true",
        "Redirect plain HTTP to HTTPS. On an Ingress, `true` redirects its routes even without `spec.tls`, `false` never.",
    ),
    key(
        "ssl-redirect-code",
        ROUTE,
        "301, 302, 303, 307 or 308",
        "308",
        "301",
        "Status code of the HTTPS redirect.",
    ),
    key(
        "ssl-redirect-port",
        ROUTE,
        "a port, 1 to 65535",
        "none: the request's host is kept",
        "443",
        "HTTPS port written in the redirect's location.",
    ),
    key(
        "client-strict-sni",
        GLOBAL,
        "`true` or `false`",
        "false",
        "true",
        "Refuse TLS handshakes whose SNI matches no certificate instead of serving the default certificate.",
    ),
    key(
        "hsts",
        ROUTE,
        "`true` or `false`",
        "false",
        "true",
        "Send `Strict-Transport-Security` on HTTPS answers.",
    ),
    key(
        "hsts-max-age",
        ROUTE,
        "seconds, 0 to 315360000",
        "15768000",
        "31536000",
        "`max-age` of the HSTS header.",
    ),
    key(
        "hsts-include-subdomains",
        ROUTE,
        "`true` or `false`",
        "false",
        "true",
        "Add `includeSubDomains` to the HSTS header.",
    ),
    key(
        "hsts-preload",
        ROUTE,
        "`true` or `false`",
        "false",
        "true",
        "Add `preload` to the HSTS header.",
    ),
    key(
        "request-redirect",
        ROUTE,
        "`HOST`, `HOST:PORT` (a lower-case host name or IPv4 address, a port from 1 to 65535), or an absolute `http://` or `https://` URL without `%`, quotes, `\\`, `#` or spaces",
        "none",
        "example.com:8443",
        "Redirect every request of the routes. `HOST` or `HOST:PORT`: to that host (and port) with the request's scheme, path and query kept (`request-redirect: example.com:8443` sends `http://shop/a?b` to `http://example.com:8443/a?b`). A URL: every request goes to that very URL.",
    ),
    key(
        "request-redirect-code",
        ROUTE,
        "301, 302, 303, 307 or 308",
        "302",
        "301",
        "Status code of `request-redirect`.",
    ),
    key(
        "path-rewrite",
        ALL,
        "`REGEX REPLACEMENT`: a regular expression on the path and its replacement (`\\1` for a group); no quotes, `%`, `#` or control characters",
        "none",
        "^/api/(.*) /\\1",
        "Rewrite the path before the request goes to the backend.",
    ),
    key(
        "backend-path",
        ALL,
        "`normalized` or `original`",
        "normalized",
        "original",
        "The path the backend receives. Tugboat always routes on the normalized path (slashes merged, `.` and `..` segments resolved, percent-encoded unreserved characters decoded; a malformed `%`, an encoded `/` or NUL, a `\\` (raw or encoded) or a `..` above the root is refused with 400), so authentication, access lists and rate limits apply to what the application will serve. `normalized`: the backend receives that path, as with ingress-nginx. `original`: it receives the path exactly as the client sent it (for applications that need the raw bytes, e.g. signed URLs). The query string is never changed. In the ConfigMap it also applies to requests that match no route. See docs/path-normalization.md.",
    ),
    key(
        "set-host",
        ALL,
        "a host name, with an optional `:port`",
        "none",
        "internal.example.com",
        "Replace the `Host` header sent to the backend.",
    ),
    key(
        "request-set-header",
        ALL,
        "one `Name value` per line; names are header tokens, values printable ASCII without `\"`, `\\`, `$` or `%`",
        "none",
        "X-Team shop",
        "Set request headers before the request goes to the backend.",
    ),
    key(
        "response-set-header",
        ALL,
        "one `Name value` per line, as `request-set-header`",
        "none",
        "X-Frame-Options DENY",
        "Set response headers before the answer goes to the client.",
    ),
    key(
        "cors-enable",
        ALL,
        "`true` or `false`",
        "false",
        "true",
        "Add CORS headers to answers and answer preflight requests (OPTIONS with `Origin` and `Access-Control-Request-Method`) with 204.",
    ),
    key(
        "cors-allow-origin",
        ALL,
        "`*`, or origins (`https://app.example.com`) separated by commas",
        "`*`",
        "https://app.example.com",
        "Allowed origins; with a list, the request's `Origin` is echoed when it is in the list.",
    ),
    key(
        "cors-allow-methods",
        ALL,
        "HTTP methods separated by commas",
        "GET, PUT, POST, DELETE, PATCH, OPTIONS",
        "GET, POST",
        "`Access-Control-Allow-Methods`.",
    ),
    key(
        "cors-allow-headers",
        ALL,
        "header names separated by commas",
        "DNT, Keep-Alive, User-Agent, X-Requested-With, If-Modified-Since, Cache-Control, Content-Type, Range, Authorization",
        "Content-Type, Authorization",
        "`Access-Control-Allow-Headers`.",
    ),
    key(
        "cors-allow-credentials",
        ALL,
        "`true` or `false`",
        "false",
        "true",
        "Send `Access-Control-Allow-Credentials: true`.",
    ),
    key(
        "cors-max-age",
        ALL,
        "seconds, 0 to 86400",
        "86400",
        "600",
        "`Access-Control-Max-Age` of preflight answers.",
    ),
    KeySpec {
        aliases: &["whitelist"],
        refers: Refers::ConfigMapKey,
        ..key(
            "allow-list",
            ALL,
            "IP addresses and CIDR networks separated by commas or spaces (at most 1000), or `configmap:NAME/KEY`: a key of a ConfigMap in the object's namespace holding one address or network per line (at most 100000; `#` comments allowed)",
            "none: every address",
            "10.0.0.0/8, 192.168.1.7",
            "Only these client addresses are served; others get 403. A `configmap:` list is written as a pattern file (`-f`); when the ConfigMap or key is missing or holds something else than addresses, every client gets 403 (fail closed).",
        )
    },
    KeySpec {
        aliases: &["blacklist"],
        refers: Refers::ConfigMapKey,
        ..key(
            "deny-list",
            ALL,
            "as `allow-list`: addresses and networks, or `configmap:NAME/KEY`",
            "none",
            "203.0.113.0/24",
            "These client addresses get 403. When a `configmap:` list cannot be used, every client gets 403 (fail closed).",
        )
    },
    key(
        "src-ip-header",
        ALL,
        "a header name",
        "none: the connection's source address",
        "X-Forwarded-For",
        "Take the client address for access lists and rate limits from the last value of this header (set it only behind a trusted load balancer).",
    ),
    key(
        "auth-type",
        ALL,
        "`basic-auth`",
        "none",
        "basic-auth",
        "Require HTTP basic authentication (with `auth-secret`).",
    ),
    KeySpec {
        refers: Refers::Secret,
        ..key(
            "auth-secret",
            ALL,
            "the name of a Secret in the object's namespace",
            "none",
            "shop-users",
            "The users: an `auth` key in htpasswd format, or one key per user whose value is the password hash. Hashes: `$1$` (MD5-crypt), `$2b$`/`$2y$` (bcrypt), `$5$` (SHA-256-crypt), `$6$` (SHA-512-crypt); `$apr1$` is refused (haproxy cannot verify it).",
        )
    },
    key(
        "auth-realm",
        ALL,
        "printable ASCII without `\"`, `\\`, `$` or `%`, at most 64 characters",
        "Restricted",
        "Shop staff",
        "The realm shown by browsers.",
    ),
    key(
        "rate-limit-requests",
        ALL,
        "requests, 1 to 1000000",
        "none: no limit",
        "100",
        "Requests allowed per client address and `rate-limit-period`; more get `rate-limit-status-code`.",
    ),
    key(
        "rate-limit-period",
        ALL,
        "a duration: a number and `ms`, `s`, `m` or `h`",
        "1s",
        "1m",
        "The period of `rate-limit-requests`.",
    ),
    key(
        "rate-limit-status-code",
        ALL,
        "400 to 599",
        "429",
        "503",
        "Status answered over the limit.",
    ),
    key(
        "load-balance",
        ALL,
        "`roundrobin`, `leastconn`, `source`, `uri`, `random` or `hdr(Name)`",
        "roundrobin",
        "leastconn",
        "How requests are spread over the endpoints. `source`, `uri` and `hdr` make every new endpoint a reload.",
    ),
    key(
        "timeout-server",
        ALL,
        "a duration: a number and `ms`, `s`, `m` or `h`",
        "50s",
        "2m",
        "How long to wait for the backend's answer.",
    ),
    key(
        "timeout-connect",
        ALL,
        "a duration",
        "5s",
        "2s",
        "How long to wait for a connection to the backend.",
    ),
    key(
        "timeout-client",
        GLOBAL,
        "a duration",
        "50s",
        "1m",
        "How long a client may stay silent.",
    ),
    key(
        "timeout-http-request",
        GLOBAL,
        "a duration",
        "10s",
        "5s",
        "How long a client may take to send a request's headers.",
    ),
    key(
        "timeout-http-keep-alive",
        GLOBAL,
        "a duration",
        "none (`timeout http-request` applies)",
        "30s",
        "How long an idle keep-alive connection stays open.",
    ),
    key(
        "timeout-queue",
        GLOBAL,
        "a duration",
        "none (`timeout connect` applies)",
        "10s",
        "How long a request may wait for a free server.",
    ),
    key(
        "timeout-tunnel",
        GLOBAL,
        "a duration",
        "1h",
        "2h",
        "How long an idle tunnel (WebSocket) stays open.",
    ),
    key(
        "send-proxy-protocol",
        ALL,
        "`v1` or `v2`",
        "none",
        "v2",
        "Send a PROXY protocol header to the backend's servers.",
    ),
    key(
        "server-ssl",
        ALL,
        "`true` or `false`",
        "false",
        "true",
        "Talk TLS to the backend's servers. Without `server-ca` their certificates are not verified (`verify none`).",
    ),
    KeySpec {
        refers: Refers::Secret,
        ..key(
            "server-ca",
            ALL,
            "the name of a Secret in the object's namespace with a `ca.crt` key (PEM certificates)",
            "none: server certificates are not verified",
            "backend-ca",
            "With `server-ssl`: verify the servers' certificates against these CAs (`verify required`); a server whose certificate does not verify gets no requests (503). When the Secret cannot be used, the backend answers 503 rather than talk to unverified servers.",
        )
    },
    KeySpec {
        refers: Refers::Secret,
        ..key(
            "server-crt",
            ALL,
            "the name of a TLS Secret (`tls.crt`, `tls.key`) in the object's namespace",
            "none",
            "haproxy-client",
            "With `server-ssl`: present this client certificate to the servers (mutual TLS). When the Secret cannot be used, the backend answers 503.",
        )
    },
    key(
        "server-proto",
        ALL,
        "`h2` or `h1`",
        "h1",
        "h2",
        "The HTTP version spoken to the servers: `h2` is HTTP/2 (`proto h2` in clear text, ALPN `h2` with `server-ssl`).",
    ),
    key(
        "check",
        ALL,
        "`true` or `false`",
        "false",
        "true",
        "Health-check the servers (a TCP connection, or `check-http`); servers that fail are taken out until they pass again. Servers added at runtime are checked too.",
    ),
    key(
        "check-http",
        ALL,
        "a path: `/` then letters, digits and `-._~/?=&`",
        "none: a TCP connection",
        "/healthz",
        "Health-check with `GET <path>` (`option httpchk`): 2xx and 3xx pass. Turns checks on.",
    ),
    key(
        "check-interval",
        ALL,
        "a duration",
        "2s",
        "5s",
        "Time between two checks of a server (with `check` or `check-http`).",
    ),
    key(
        "cookie-persistence",
        ALL,
        "a cookie name: letters, digits, `-` and `_`, at most 64",
        "none",
        "SERVERID",
        "Keep each client on one server with a cookie (`cookie <name> insert indirect nocache`); the value is the server's slot name (`s1`, `s2`, ...). A slot keeps its endpoint while the endpoint lives. When an endpoint goes away its clients are sent to another server and get a new cookie; a slot given to a new endpoint later sends the old cookie's clients there. A reload numbers the slots afresh, so clients may move once after a reload.",
    ),
    key(
        "global-config-snippet",
        GLOBAL,
        "haproxy `global` directives, one per line (at most 64 lines, 8 KB); see `backend-config-snippet` for what is refused",
        "none",
        "tune.bufsize 32768",
        "Raw lines for the `global` section. Only with the controller's `--allow-snippets`.",
    ),
    key(
        "backend-config-snippet",
        ALL,
        "haproxy backend directives, one per line (at most 64 lines, 8 KB)",
        "none",
        "http-response set-header X-Backend shop",
        "Raw lines for the backend section, after Tugboat's own. Only with the controller's `--allow-snippets`. Refused (with a problem naming the directive): section keywords (`frontend`, `backend`, `global`, ...), `server`/`default-server`/`server-template` (Tugboat owns the servers), lines starting with `.` (conditional blocks), what reads files (`-f`, `*-file` and `file` arguments, `errorfile*`, `crt*`, `ca-base`, `key-base`, `server-state-*`, `load-server-state-from-file`, `default-path`, map and ACL file functions such as `map_str(...)`, `set-map(...)`, `add-acl(...)`), loads code (`lua*`, `ssl-engine`, `ssl-provider*`, `51degrees-*`, `deviceatlas-*`, `wurfl-*`, `filter`, `spoe`), runs programs or changes the process (`external-check`, `insecure-*`, `setenv`, `presetenv`, `resetenv`, `unsetenv`, `stats socket`, `master-worker`, `user`, `group`, `uid`, `gid`, `chroot`, `daemon`, `pidfile`, `set-dumpable`, `expose-experimental-directives`), reads the environment (`$`, `env(`) and runtime expressions (`%[`). Control characters other than the line breaks are refused. When haproxy refuses the resulting configuration, the snippet is left out, the rest is applied and the object gets a problem.",
    ),
    key(
        "syslog-server",
        GLOBAL,
        "`stdout`, or `ADDRESS:PORT` of a syslog server (UDP)",
        "stdout",
        "127.0.0.1:514",
        "Where haproxy sends its logs.",
    ),
    key(
        "log-format",
        GLOBAL,
        "an haproxy log-format string: printable ASCII without `\"`, `\\` or `$`",
        "haproxy's HTTP log format",
        "%ci:%cp [%tr] %ft %b/%s %ST %B %HM %HU",
        "The format of the request log lines.",
    ),
];

/// The key called `name` (or with this alias).
pub fn find_key(name: &str) -> Option<&'static KeySpec> {
    KEYS.iter()
        .find(|k| k.name == name || k.aliases.contains(&name))
}

/// The reference of every key, as the Markdown of `docs/annotations.md`.
pub fn reference_markdown() -> String {
    let mut out = String::from(
        "<!-- Generated from crates/tugboat-model/src/annotations.rs (KEYS). Do not edit: \
         regenerate with `cargo run -p tugboat -- annotations-reference > docs/annotations.md`. -->\n\n\
         # Annotations and ConfigMap keys\n\n\
         Set a key in the controller's ConfigMap (`--configmap NAMESPACE/NAME`, plain key: a \
         default for everything), on an Ingress (its routes) or on a Service (its backends and \
         the routes to it) as the annotation `tugboat.dev/<key>`; `ingress.kubernetes.io/<key>` \
         is accepted as an alias. Service beats Ingress beats ConfigMap beats the default. A value \
         that does not parse is ignored for that object only, with a warning naming the key, the \
         value and what was expected.\n\n\
         No annotation under `tugboat.dev/`, `ingress.kubernetes.io/` or another controller's \
         prefix (`nginx.ingress.kubernetes.io/`, `haproxy.org/`, `haproxy.com/`, \
         `haproxy-ingress.github.io/`) is ignored silently: one that Tugboat does not read \
         is a warning naming the object and the key (and `tugboat render` exits 1). When \
         such a key restricts access (authentication of any kind, allow and deny lists, \
         client certificates, rate and connection limits, external authentication, web \
         application firewalls), the routes it applies to answer 403 to every request until \
         it is removed or supported, unless the controller runs with \
         `--unsupported-access-keys=ignore` (Helm: `controller.unsupportedAccessKeys`).\n\n\
         | key | scopes | values | default | example | what it does |\n\
         |---|---|---|---|---|---|\n",
    );
    for key in KEYS {
        let mut name = format!("`{}`", key.name);
        for alias in key.aliases {
            let _ = write!(name, " (alias `{alias}`)");
        }
        let scopes: Vec<&str> = key.scopes.iter().map(|s| s.as_str()).collect();
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | `{}` | {} |",
            scopes.join(", "),
            key.values.replace('|', "\\|"),
            key.default.replace('|', "\\|"),
            key.example.replace('|', "\\|"),
            key.help.replace('|', "\\|"),
        );
    }
    out
}

/// The keys one object sets: key name -> (field, value).
#[derive(Debug, Clone)]
pub struct Layer {
    pub object: ObjectRef,
    pub scope: Scope,
    values: BTreeMap<&'static str, (String, String)>,
    /// The annotations this object sets that restrict access and that Tugboat does not
    /// support (full names, sorted).
    pub unsupported_access: Vec<String>,
}

impl Layer {
    /// The keys of an Ingress' or Service's annotations. Every annotation under a known
    /// prefix ([`prefixes::PREFIXES`]) is read or becomes a problem naming it: unknown
    /// keys, keys of other controllers Tugboat does not support, keys that cannot be set
    /// on this kind of object. Unsupported keys that restrict access are remembered in
    /// [`Layer::unsupported_access`]: with `access` [`UnsupportedAccess::Deny`] the
    /// routes they apply to refuse every request.
    pub fn from_annotations(
        object: ObjectRef,
        scope: Scope,
        annotations: Option<&BTreeMap<String, String>>,
        access: UnsupportedAccess,
        problems: &mut Vec<ObjectProblem>,
    ) -> Self {
        let mut values = BTreeMap::new();
        let mut from_primary = BTreeMap::new();
        let mut unsupported_access = Vec::new();
        for (name, value) in annotations.into_iter().flatten() {
            let Some((ecosystem, rest)) = prefixes::split_annotation(name) else {
                continue;
            };
            let primary = ecosystem == Ecosystem::Tugboat;
            let field = format!("metadata.annotations.{name}");
            let spec = match ecosystem {
                Ecosystem::Tugboat | Ecosystem::Legacy => find_key(rest),
                _ => None,
            };
            let Some(spec) = spec else {
                let restricts = prefixes::restricts_access(rest);
                if restricts {
                    unsupported_access.push(name.clone());
                }
                problems.push(ObjectProblem {
                    object: object.clone(),
                    field,
                    reason: ProblemReason::InvalidField,
                    message: unsupported_message(ecosystem, rest, scope, restricts, access),
                });
                continue;
            };
            if !spec.scopes.contains(&scope) {
                problems.push(ObjectProblem {
                    object: object.clone(),
                    field,
                    reason: ProblemReason::InvalidField,
                    message: format!(
                        "key '{}' cannot be set on {}: it belongs in the controller's ConfigMap",
                        spec.name,
                        object_kind_plural(scope)
                    ),
                });
                continue;
            }
            // The primary prefix wins over the alias prefix.
            if from_primary.get(spec.name) == Some(&true) && !primary {
                continue;
            }
            from_primary.insert(spec.name, primary);
            values.insert(spec.name, (field, value.clone()));
        }
        Self {
            object,
            scope,
            values,
            unsupported_access,
        }
    }

    /// The keys of the controller's ConfigMap (`data`); unknown keys become problems.
    pub fn from_config_map(
        object: ObjectRef,
        data: Option<&BTreeMap<String, String>>,
        problems: &mut Vec<ObjectProblem>,
    ) -> Self {
        let mut values = BTreeMap::new();
        for (name, value) in data.into_iter().flatten() {
            let field = format!("data.{name}");
            match find_key(name) {
                Some(spec) => {
                    values.insert(spec.name, (field, value.clone()));
                }
                None => problems.push(ObjectProblem {
                    object: object.clone(),
                    field,
                    reason: ProblemReason::InvalidField,
                    message: format!(
                        "unknown key '{}': see docs/annotations.md for the keys Tugboat reads",
                        printable(name)
                    ),
                }),
            }
        }
        Self {
            object,
            scope: Scope::ConfigMap,
            values,
            unsupported_access: Vec::new(),
        }
    }

    /// An empty layer (an object without keys).
    pub fn empty(object: ObjectRef, scope: Scope) -> Self {
        Self {
            object,
            scope,
            values: BTreeMap::new(),
            unsupported_access: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// The problem of an annotation under a known prefix that Tugboat does not read.
fn unsupported_message(
    ecosystem: Ecosystem,
    key: &str,
    scope: Scope,
    restricts: bool,
    access: UnsupportedAccess,
) -> String {
    let key = printable(key);
    let what = match ecosystem {
        Ecosystem::Tugboat | Ecosystem::Legacy => {
            format!("unknown key '{key}': see docs/annotations.md for the keys Tugboat reads")
        }
        _ => format!(
            "{ecosystem} key '{key}' is not supported by Tugboat: see docs/annotations.md \
             for the keys Tugboat reads"
        ),
    };
    let routes = match scope {
        Scope::Service => "the routes to this Service",
        _ => "the routes of this Ingress",
    };
    match (restricts, access) {
        (false, _) => format!("{what}; it has no effect"),
        (true, UnsupportedAccess::Deny) => format!(
            "{what}; it restricts access, so {routes} answer 403 to every request until it \
             is removed or supported (the operator's --unsupported-access-keys=ignore serves \
             them without it)"
        ),
        (true, UnsupportedAccess::Ignore) => format!(
            "{what}; it restricts access, but the operator's --unsupported-access-keys=ignore \
             serves {routes} without that restriction"
        ),
    }
}

fn object_kind_plural(scope: Scope) -> &'static str {
    match scope {
        Scope::ConfigMap => "ConfigMaps",
        Scope::Ingress => "Ingresses",
        Scope::Service => "Services",
    }
}

/// Reads keys through the layers of one route or backend, highest precedence first.
pub struct Resolver<'a> {
    layers: Vec<&'a Layer>,
    pub problems: Vec<ObjectProblem>,
}

impl<'a> Resolver<'a> {
    /// `layers` from the highest precedence (Service) to the lowest (ConfigMap).
    pub fn new(layers: Vec<&'a Layer>) -> Self {
        Self {
            layers,
            problems: Vec::new(),
        }
    }

    /// The value of `key` from the highest layer where it is set and valid. A value that
    /// does not parse is a problem of its object, and the next layer down applies.
    pub fn get<T>(&mut self, key: &str, parse: impl Fn(&str) -> Result<T, String>) -> Option<T> {
        self.get_in(
            key,
            &[Scope::Service, Scope::Ingress, Scope::ConfigMap],
            parse,
        )
    }

    /// As [`Resolver::get`], looking only at layers of the given scopes.
    pub fn get_in<T>(
        &mut self,
        key: &str,
        scopes: &[Scope],
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Option<T> {
        for layer in &self.layers {
            if !scopes.contains(&layer.scope) {
                continue;
            }
            let Some((field, value)) = layer.values.get(key) else {
                continue;
            };
            match parse(value) {
                Ok(parsed) => return Some(parsed),
                Err(expected) => self.problems.push(ObjectProblem {
                    object: layer.object.clone(),
                    field: field.clone(),
                    reason: ProblemReason::InvalidField,
                    message: format!(
                        "key '{key}': '{}' is not valid, expected {expected}; the key is ignored here",
                        printable(value)
                    ),
                }),
            }
        }
        None
    }

    /// As [`Resolver::get`], with the object the value comes from.
    pub fn get_sourced<T>(
        &mut self,
        key: &str,
        scopes: &[Scope],
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Option<(T, ObjectRef)> {
        let source = self
            .layers
            .iter()
            .find(|l| scopes.contains(&l.scope) && l.values.contains_key(key))
            .map(|l| l.object.clone())?;
        let before = self.problems.len();
        let value = self.get_in(key, scopes, parse)?;
        // A lower layer answered when the first one was refused.
        let source = if self.problems.len() > before {
            self.layers
                .iter()
                .filter(|l| scopes.contains(&l.scope) && l.values.contains_key(key))
                .nth(self.problems.len() - before)
                .map_or(source, |l| l.object.clone())
        } else {
            source
        };
        Some((value, source))
    }

    /// A problem on every object of these scopes that sets `key`: it cannot apply here.
    pub fn refuse(&mut self, key: &str, scopes: &[Scope], reason: ProblemReason, why: &str) {
        for layer in &self.layers {
            if !scopes.contains(&layer.scope) {
                continue;
            }
            if let Some((field, _)) = layer.values.get(key) {
                self.problems.push(ObjectProblem {
                    object: layer.object.clone(),
                    field: field.clone(),
                    reason,
                    message: format!("key '{key}' is ignored: {why}"),
                });
            }
        }
    }

    /// Whether some layer of these scopes sets `key` (valid or not).
    pub fn is_set_in(&self, key: &str, scopes: &[Scope]) -> bool {
        self.layers
            .iter()
            .any(|l| scopes.contains(&l.scope) && l.values.contains_key(key))
    }
}

/// A key of a ConfigMap in the object's namespace: `configmap:NAME/KEY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigMapKeyRef {
    pub name: String,
    pub key: String,
}

/// An access list as a key gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessList {
    Inline(Vec<String>),
    ConfigMap(ConfigMapKeyRef),
}

/// What the route keys say, besides the features: what the builder must look up.
#[derive(Debug, Clone, Default)]
pub struct RouteLookups {
    /// When basic authentication is on: the name of its Secret (if valid).
    pub auth_secret: Option<Option<String>>,
    /// Access lists kept in ConfigMaps.
    pub allow_ref: Option<ConfigMapKeyRef>,
    pub deny_ref: Option<ConfigMapKeyRef>,
}

/// What the route keys say, except what lives in other objects (the Secret of
/// `auth-secret`, `configmap:` access lists), which the builder looks up.
pub fn route_features(resolver: &mut Resolver<'_>) -> (RouteFeatures, RouteLookups) {
    let mut features = RouteFeatures::default();
    let above_config_map = [Scope::Service, Scope::Ingress];
    let when = resolver.get_in("ssl-redirect", &above_config_map, parse_bool);
    let code = resolver.get_in("ssl-redirect-code", &above_config_map, parse_redirect_code);
    let port = resolver.get_in("ssl-redirect-port", &above_config_map, parse_port);
    if when.is_some() || code.is_some() || port.is_some() {
        let config_map = [Scope::ConfigMap];
        features.https_redirect = Some(HttpsRedirect {
            when: match when {
                Some(true) => RedirectWhen::Always,
                Some(false) => RedirectWhen::Never,
                None => RedirectWhen::TlsHostsOnly,
            },
            code: code
                .or_else(|| resolver.get_in("ssl-redirect-code", &config_map, parse_redirect_code))
                .unwrap_or(308),
            port: port.or_else(|| resolver.get_in("ssl-redirect-port", &config_map, parse_port)),
        });
    }
    if resolver.get("hsts", parse_bool) == Some(true) {
        features.hsts = Some(Hsts {
            max_age: resolver
                .get("hsts-max-age", |v| parse_number(v, 0, 315_360_000))
                .unwrap_or(15_768_000),
            include_subdomains: resolver
                .get("hsts-include-subdomains", parse_bool)
                .unwrap_or(false),
            preload: resolver.get("hsts-preload", parse_bool).unwrap_or(false),
        });
    }
    if let Some(target) = resolver.get("request-redirect", parse_redirect_target) {
        let code = resolver
            .get("request-redirect-code", parse_redirect_code)
            .unwrap_or(302);
        features.redirect = Some(Redirect { target, code });
    }
    features.original_path =
        resolver.get("backend-path", parse_backend_path) == Some(BackendPath::Original);
    features.path_rewrite = resolver.get("path-rewrite", parse_path_rewrite);
    features.set_host = resolver.get("set-host", parse_host_port);
    features.request_headers = resolver
        .get("request-set-header", parse_header_lines)
        .unwrap_or_default();
    features.response_headers = resolver
        .get("response-set-header", parse_header_lines)
        .unwrap_or_default();
    if resolver.get("cors-enable", parse_bool) == Some(true) {
        features.cors = Some(Cors {
            origins: resolver
                .get("cors-allow-origin", parse_origins)
                .unwrap_or(CorsOrigins::Any),
            methods: resolver
                .get("cors-allow-methods", parse_methods)
                .unwrap_or_else(|| "GET, PUT, POST, DELETE, PATCH, OPTIONS".into()),
            headers: resolver
                .get("cors-allow-headers", parse_header_names)
                .unwrap_or_else(|| {
                    "DNT, Keep-Alive, User-Agent, X-Requested-With, If-Modified-Since, \
                     Cache-Control, Content-Type, Range, Authorization"
                        .into()
                }),
            credentials: resolver
                .get("cors-allow-credentials", parse_bool)
                .unwrap_or(false),
            max_age: resolver
                .get("cors-max-age", |v| parse_number(v, 0, 86_400))
                .unwrap_or(86_400),
        });
    }
    let mut lookups = RouteLookups::default();
    match resolver.get("allow-list", parse_access_list) {
        Some(AccessList::Inline(list)) => features.allow_list = list,
        Some(AccessList::ConfigMap(reference)) => lookups.allow_ref = Some(reference),
        None => {}
    }
    match resolver.get("deny-list", parse_access_list) {
        Some(AccessList::Inline(list)) => features.deny_list = list,
        Some(AccessList::ConfigMap(reference)) => lookups.deny_ref = Some(reference),
        None => {}
    }
    if let Some(requests) = resolver.get("rate-limit-requests", |v| parse_number(v, 1, 1_000_000)) {
        features.rate_limit = Some(RateLimit {
            requests,
            period: resolver
                .get("rate-limit-period", parse_duration)
                .unwrap_or_else(|| "1s".into()),
            status: resolver
                .get("rate-limit-status-code", |v| {
                    parse_number(v, 400, 599).map(|n| n as u16)
                })
                .unwrap_or(429),
        });
    }
    let needs_client_address = !features.allow_list.is_empty()
        || !features.deny_list.is_empty()
        || lookups.allow_ref.is_some()
        || lookups.deny_ref.is_some()
        || features.rate_limit.is_some();
    if needs_client_address {
        features.src_ip_header = resolver.get("src-ip-header", parse_header_name);
    }
    if resolver.get("auth-type", parse_auth_type).is_some() {
        lookups.auth_secret = Some(resolver.get("auth-secret", parse_secret_name));
    }
    (features, lookups)
}

fn parse_secret_name(value: &str) -> Result<String, String> {
    validate::dns_subdomain(value)
        .map(|()| value.to_string())
        .map_err(|_| "the name of a Secret (lower-case letters, digits, '-', '.')".into())
}

/// The realm of basic authentication.
pub fn auth_realm(resolver: &mut Resolver<'_>) -> String {
    resolver
        .get("auth-realm", parse_realm)
        .unwrap_or_else(|| "Restricted".into())
}

/// What the backend keys say, besides the options: the Secrets the builder must look up.
#[derive(Debug, Clone, Default)]
pub struct BackendLookups {
    /// `server-ca`: a Secret with `ca.crt`.
    pub server_ca: Option<String>,
    /// `server-crt`: a TLS Secret.
    pub server_crt: Option<String>,
}

/// What the backend keys say. Snippets only when `allow_snippets`.
pub fn backend_options(
    resolver: &mut Resolver<'_>,
    allow_snippets: bool,
) -> (BackendOptions, BackendLookups) {
    let all = [Scope::Service, Scope::Ingress, Scope::ConfigMap];
    let mut lookups = BackendLookups::default();
    let tls = resolver.get("server-ssl", parse_bool) == Some(true);
    if tls {
        lookups.server_ca = resolver.get("server-ca", parse_secret_name);
        lookups.server_crt = resolver.get("server-crt", parse_secret_name);
    } else {
        for key in ["server-ca", "server-crt"] {
            resolver.refuse(
                key,
                &all,
                ProblemReason::InvalidField,
                "it needs server-ssl: \"true\"",
            );
        }
    }
    let check_path = resolver.get("check-http", parse_check_path);
    let check = resolver.get("check", parse_bool) == Some(true) || check_path.is_some();
    let health_check = check.then(|| HealthCheck {
        http_path: check_path,
        interval: resolver.get("check-interval", parse_duration),
    });
    let snippet = if allow_snippets {
        resolver
            .get_sourced("backend-config-snippet", &all, parse_snippet)
            .map(|(lines, source)| Snippet { lines, source })
    } else {
        resolver.refuse(
            "backend-config-snippet",
            &all,
            ProblemReason::NotAllowed,
            "raw snippets are off; the operator can allow them with --allow-snippets",
        );
        None
    };
    let options = BackendOptions {
        tls: tls.then(ServerTls::default),
        h2: resolver.get("server-proto", |v| match v {
            "h2" => Ok(true),
            "h1" => Ok(false),
            _ => Err("h2 or h1".into()),
        }) == Some(true),
        health_check,
        cookie: resolver.get("cookie-persistence", parse_cookie_name),
        blocked: false,
        snippet,
        balance: resolver.get("load-balance", parse_balance),
        send_proxy: resolver.get("send-proxy-protocol", |v| match v {
            "v1" => Ok(ProxyProtocol::V1),
            "v2" => Ok(ProxyProtocol::V2),
            _ => Err("v1 or v2".into()),
        }),
        timeout_server: resolver.get("timeout-server", parse_duration),
        timeout_connect: resolver.get("timeout-connect", parse_duration),
    };
    (options, lookups)
}

/// What the ConfigMap-only keys say. Snippets only when `allow_snippets`.
pub fn global_options(resolver: &mut Resolver<'_>, allow_snippets: bool) -> GlobalOptions {
    let mut timeouts = BTreeMap::new();
    for name in [
        "client",
        "connect",
        "server",
        "http-request",
        "http-keep-alive",
        "queue",
        "tunnel",
    ] {
        let key = format!("timeout-{name}");
        if let Some(value) = resolver.get_in(&key, &[Scope::ConfigMap], parse_duration) {
            timeouts.insert(name.to_string(), value);
        }
    }
    let cm = [Scope::ConfigMap];
    let snippet = if allow_snippets {
        resolver
            .get_sourced("global-config-snippet", &cm, parse_snippet)
            .map(|(lines, source)| Snippet { lines, source })
    } else {
        resolver.refuse(
            "global-config-snippet",
            &cm,
            ProblemReason::NotAllowed,
            "raw snippets are off; the operator can allow them with --allow-snippets",
        );
        None
    };
    GlobalOptions {
        timeouts,
        syslog_server: resolver
            .get_in("syslog-server", &cm, parse_syslog_server)
            .flatten(),
        log_format: resolver.get_in("log-format", &cm, parse_log_format),
        strict_sni: resolver
            .get_in("client-strict-sni", &cm, parse_bool)
            .unwrap_or(false),
        ssl_redirect_code: resolver
            .get_in("ssl-redirect-code", &cm, parse_redirect_code)
            .unwrap_or(308),
        ssl_redirect_port: resolver.get_in("ssl-redirect-port", &cm, parse_port),
        snippet,
        original_path: resolver.get_in("backend-path", &cm, parse_backend_path)
            == Some(BackendPath::Original),
    }
}

// ---- Parsers: each accepts only its documented syntax. ----

pub fn parse_bool(value: &str) -> Result<bool, String> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("true or false".into()),
    }
}

fn parse_number(value: &str, min: u64, max: u64) -> Result<u64, String> {
    value
        .parse::<u64>()
        .ok()
        .filter(|n| (min..=max).contains(n) && value.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| format!("a whole number from {min} to {max}"))
}

fn parse_redirect_code(value: &str) -> Result<u16, String> {
    match value {
        "301" | "302" | "303" | "307" | "308" => value.parse().map_err(|_| String::new()),
        _ => Err("301, 302, 303, 307 or 308".into()),
    }
}

fn parse_port(value: &str) -> Result<u16, String> {
    parse_number(value, 1, 65_535)
        .map(|n| n as u16)
        .map_err(|_| "a port from 1 to 65535".into())
}

/// An haproxy duration: digits and a unit.
pub fn parse_duration(value: &str) -> Result<String, String> {
    let expected = || "a duration: a number and ms, s, m or h (e.g. 500ms, 30s, 5m)".to_string();
    let digits = value.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = value.split_at(digits);
    if digits == 0 || digits > 9 || !["ms", "s", "m", "h"].contains(&unit) {
        return Err(expected());
    }
    let _ = number;
    Ok(value.to_string())
}

fn is_token(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 64
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"*+-.^_`~".contains(&b))
        // Words that mean something in an haproxy rule are not header names here.
        && !["if", "unless", "or"].contains(&value.to_ascii_lowercase().as_str())
}

fn parse_header_name(value: &str) -> Result<String, String> {
    if is_token(value) {
        Ok(value.to_string())
    } else {
        Err("a header name (letters, digits and - _ . * + ^ ` ~; not if, unless or or)".into())
    }
}

/// Text that can go between double quotes in haproxy's config: printable ASCII
/// without the characters haproxy interprets there (`"`, `\`, `$`) nor `%` (log-format).
fn is_quotable(value: &str, max: usize) -> bool {
    value.len() <= max
        && value
            .bytes()
            .all(|b| (b' '..=b'~').contains(&b) && !b"\"\\$%".contains(&b))
}

fn parse_header_lines(value: &str) -> Result<Vec<(String, String)>, String> {
    let expected = || {
        "one 'Name value' per line: a header name, a space and printable ASCII without \
         \", \\, $ or %"
            .to_string()
    };
    let mut headers = Vec::new();
    for line in value.split('\n').filter(|l| !l.trim().is_empty()) {
        let (name, header_value) = line.trim().split_once(' ').ok_or_else(expected)?;
        let header_value = header_value.trim();
        if parse_header_name(name).is_err()
            || header_value.is_empty()
            || !is_quotable(header_value, 1024)
        {
            return Err(expected());
        }
        headers.push((name.to_string(), header_value.to_string()));
    }
    if headers.is_empty() || headers.len() > 32 {
        return Err(expected());
    }
    Ok(headers)
}

fn is_url_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~:/?[]@!&()*+,;=".contains(&b)
}

fn parse_url(value: &str) -> Result<String, String> {
    let expected = || {
        "an absolute http:// or https:// URL of letters, digits and - . _ ~ : / ? [ ] @ ! & ( ) * + , ; ="
            .to_string()
    };
    let rest = value
        .strip_prefix("https://")
        .or_else(|| value.strip_prefix("http://"))
        .ok_or_else(expected)?;
    let host = rest.split(['/', '?']).next().unwrap_or("");
    if host.is_empty() || value.len() > 2048 || !value.bytes().all(is_url_char) {
        return Err(expected());
    }
    Ok(value.to_string())
}

/// The values of `backend-path`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendPath {
    Normalized,
    Original,
}

fn parse_backend_path(value: &str) -> Result<BackendPath, String> {
    match value {
        "normalized" => Ok(BackendPath::Normalized),
        "original" => Ok(BackendPath::Original),
        _ => Err("normalized or original".into()),
    }
}

/// `request-redirect`: an absolute URL (it has a scheme), else `host` or `host:port`.
fn parse_redirect_target(value: &str) -> Result<RedirectTarget, String> {
    let expected = "HOST, HOST:PORT (a lower-case host name or IPv4 address, a port from 1 \
                    to 65535), or an absolute http:// or https:// URL";
    if value.contains("://") {
        return parse_url(value)
            .map(RedirectTarget::Url)
            .map_err(|e| format!("{expected}; as a URL: {e}"));
    }
    parse_host_port(value)
        .map(RedirectTarget::Host)
        .map_err(|_| expected.to_string())
}

fn parse_host_port(value: &str) -> Result<String, String> {
    let (host, port) = match value.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (value, None),
    };
    let expected = || "a lower-case host name with an optional :port".to_string();
    validate::dns_subdomain(host).map_err(|_| expected())?;
    match port {
        None => Ok(host.to_string()),
        // Written back as a number: `:08443` becomes `:8443`.
        Some(port) => {
            let port = parse_port(port).map_err(|_| expected())?;
            Ok(format!("{host}:{port}"))
        }
    }
}

fn parse_path_rewrite(value: &str) -> Result<PathRewrite, String> {
    let expected = |why: &str| {
        format!(
            "'REGEX REPLACEMENT' (a regular expression on the path and its replacement, \
             printable ASCII without quotes, % or #){why}"
        )
    };
    let mut words = value.split(' ').filter(|w| !w.is_empty());
    let (Some(pattern), Some(replacement), None) = (words.next(), words.next(), words.next())
    else {
        return Err(expected(""));
    };
    let allowed = |w: &str| {
        w.len() <= 512
            && w.bytes()
                .all(|b| (b'!'..=b'~').contains(&b) && !b"\"'%#$".contains(&b))
    };
    if !allowed(pattern) || !allowed(replacement) {
        return Err(expected(""));
    }
    if let Err(err) = regex_syntax::Parser::new().parse(pattern) {
        let first = err.to_string().lines().last().unwrap_or("").to_string();
        return Err(expected(&format!(
            "; the expression does not parse: {first}"
        )));
    }
    // In the replacement, `\` only introduces a group number.
    let bytes = replacement.as_bytes();
    let groups_ok = bytes
        .iter()
        .enumerate()
        .all(|(i, b)| *b != b'\\' || bytes.get(i + 1).is_some_and(u8::is_ascii_digit));
    if !groups_ok || !replacement.starts_with('/') && !replacement.starts_with('\\') {
        return Err(expected(
            "; the replacement starts with / and uses \\ only as \\1 to \\9",
        ));
    }
    Ok(PathRewrite {
        pattern: pattern.to_string(),
        replacement: replacement.to_string(),
    })
}

fn parse_origins(value: &str) -> Result<CorsOrigins, String> {
    if value.trim() == "*" {
        return Ok(CorsOrigins::Any);
    }
    let expected = || "* or origins such as https://app.example.com separated by commas".into();
    let mut origins = Vec::new();
    for origin in value.split(',').map(str::trim) {
        let rest = origin
            .strip_prefix("https://")
            .or_else(|| origin.strip_prefix("http://"))
            .ok_or_else(expected)?;
        parse_host_port(rest).map_err(|_| expected())?;
        origins.push(origin.to_string());
    }
    if origins.is_empty() || origins.len() > 64 {
        return Err(expected());
    }
    Ok(CorsOrigins::List(origins))
}

fn parse_methods(value: &str) -> Result<String, String> {
    let methods: Vec<&str> = value.split(',').map(str::trim).collect();
    let ok = methods.len() <= 16
        && methods
            .iter()
            .all(|m| !m.is_empty() && m.len() <= 16 && m.bytes().all(|b| b.is_ascii_uppercase()));
    if ok {
        Ok(methods.join(", "))
    } else {
        Err("upper-case HTTP methods separated by commas".into())
    }
}

fn parse_header_names(value: &str) -> Result<String, String> {
    let names: Vec<&str> = value.split(',').map(str::trim).collect();
    let ok = names.len() <= 64 && names.iter().all(|n| parse_header_name(n).is_ok());
    if ok {
        Ok(names.join(", "))
    } else {
        Err("header names separated by commas".into())
    }
}

fn parse_network(item: &str) -> Result<String, String> {
    let (address, prefix) = match item.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (item, None),
    };
    let address: IpAddr = address.parse().map_err(|_| {
        format!(
            "IP addresses or CIDR networks; '{}' is neither",
            printable(item)
        )
    })?;
    let max = if address.is_ipv4() { 32 } else { 128 };
    Ok(match prefix {
        None => address.to_string(),
        Some(prefix) => {
            let bits = parse_number(prefix, 0, max)
                .map_err(|_| format!("a prefix length from 0 to {max} in '{}'", printable(item)))?;
            format!("{address}/{bits}")
        }
    })
}

fn parse_networks(value: &str) -> Result<Vec<String>, String> {
    let mut networks = Vec::new();
    for item in value.split([',', ' ', '\n']).filter(|i| !i.is_empty()) {
        networks.push(parse_network(item)?);
    }
    if networks.is_empty() || networks.len() > 1000 {
        return Err("1 to 1000 IP addresses or CIDR networks".into());
    }
    networks.sort();
    networks.dedup();
    Ok(networks)
}

/// `configmap:NAME/KEY`, or inline addresses and networks.
fn parse_access_list(value: &str) -> Result<AccessList, String> {
    let Some(reference) = value.trim().strip_prefix("configmap:") else {
        return parse_networks(value).map(AccessList::Inline);
    };
    let expected = || {
        "configmap:NAME/KEY: a ConfigMap name and one of its keys (letters, digits, '-', '_', '.')"
            .to_string()
    };
    let (name, key) = reference.split_once('/').ok_or_else(expected)?;
    let key_ok = !key.is_empty()
        && key.len() <= 253
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && key != "."
        && key != "..";
    if validate::dns_subdomain(name).is_err() || !key_ok {
        return Err(expected());
    }
    Ok(AccessList::ConfigMap(ConfigMapKeyRef {
        name: name.to_string(),
        key: key.to_string(),
    }))
}

/// The entries of an access list kept in a ConfigMap: one address or network per line,
/// `#` starts a comment. Normalised, sorted, without duplicates.
pub fn parse_pattern_list(text: &str) -> Result<Vec<String>, String> {
    let mut networks = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let entry = parse_network(line).map_err(|e| format!("line {}: {e}", number + 1))?;
        networks.push(entry);
    }
    if networks.is_empty() || networks.len() > 100_000 {
        return Err("1 to 100000 IP addresses or CIDR networks, one per line".into());
    }
    networks.sort();
    networks.dedup();
    Ok(networks)
}

fn parse_check_path(value: &str) -> Result<String, String> {
    let ok = value.starts_with('/')
        && value.len() <= 256
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~/?=&".contains(&b));
    if ok {
        Ok(value.to_string())
    } else {
        Err("a path: / then letters, digits and - . _ ~ / ? = &".into())
    }
}

fn parse_cookie_name(value: &str) -> Result<String, String> {
    let ok = !value.is_empty()
        && value.len() <= 64
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(value.to_string())
    } else {
        Err("a cookie name: letters, digits, '-' and '_', at most 64".into())
    }
}

/// Section keywords: a snippet line starting with one would open a new section.
const SECTION_KEYWORDS: &[&str] = &[
    "global",
    "defaults",
    "frontend",
    "backend",
    "listen",
    "userlist",
    "peers",
    "resolvers",
    "program",
    "ring",
    "cache",
    "mailers",
    "http-errors",
    "crt-store",
    "traces",
    "log-forward",
    "fcgi-app",
    "acme",
];

/// Directives a snippet may not start with, and why.
const REFUSED_DIRECTIVES: &[(&str, &str)] = &[
    ("server", "Tugboat owns the servers"),
    ("default-server", "Tugboat owns the servers"),
    ("server-template", "Tugboat owns the servers"),
    ("external-check", "runs programs"),
    ("setenv", "changes the environment"),
    ("presetenv", "changes the environment"),
    ("resetenv", "changes the environment"),
    ("unsetenv", "changes the environment"),
    ("ssl-engine", "loads code"),
    ("master-worker", "changes the process"),
    ("user", "changes the process"),
    ("group", "changes the process"),
    ("uid", "changes the process"),
    ("gid", "changes the process"),
    ("chroot", "changes the process"),
    ("daemon", "changes the process"),
    ("pidfile", "writes a file"),
    ("set-dumpable", "changes the process"),
    (
        "expose-experimental-directives",
        "enables experimental directives",
    ),
    ("filter", "loads filters (SPOE reads files)"),
    ("ca-base", "reads files"),
    ("crt-base", "reads files"),
    ("key-base", "reads files"),
    ("server-state-base", "reads files"),
    ("default-path", "reads files"),
];

/// Prefixes of directives a snippet may not start with.
const REFUSED_PREFIXES: &[(&str, &str)] = &[
    ("lua", "loads code"),
    ("tune.lua", "loads code"),
    ("ssl-provider", "loads code"),
    ("51degrees", "loads code and reads files"),
    ("deviceatlas", "loads code and reads files"),
    ("wurfl", "loads code and reads files"),
    ("insecure-", "lets haproxy run programs"),
    ("errorfile", "reads files"),
    ("crt", "reads files"),
    ("server-state", "reads files"),
];

/// Why one token of a snippet is refused (`None`: fine).
fn refused_token(token: &str) -> Option<&'static str> {
    let lower = token.to_ascii_lowercase();
    let t = lower.as_str();
    if t.contains("%[") {
        return Some("is a runtime expression");
    }
    if t.contains('$') || t.contains("env(") {
        return Some("reads the environment");
    }
    if t == "-f" || t == "file" || t.ends_with("-file") || t.contains("file(") {
        return Some("reads a file");
    }
    if t.starts_with("errorfile") || t == "crt" || t.starts_with("crt-") {
        return Some("reads files");
    }
    if t.contains("map(") || t.contains("map_") || t.contains("-acl(") || t.contains("-map(") {
        return Some("uses a map or ACL file");
    }
    if t.starts_with("lua") || t.contains("lua.") || t.contains("lua-") || t.contains("spoe") {
        return Some("loads code");
    }
    None
}

/// A raw snippet: directives one per line, none that reads files, loads code, runs
/// programs, changes the process or opens a section. Empty lines and comments are
/// dropped; the error names the line and the directive.
pub fn parse_snippet(value: &str) -> Result<Vec<String>, String> {
    if value.len() > 8192 {
        return Err("at most 8 KB of directives".into());
    }
    if value
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Err("directives separated by line breaks, without other control characters".into());
    }
    let mut lines = Vec::new();
    for (number, line) in value.split('\n').enumerate() {
        let line = line.replace('\t', " ");
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let refuse = |what: &str, why: &str| {
            Err(format!(
                "directives Tugboat allows in snippets; line {} uses '{}', which {why}",
                number + 1,
                printable(what)
            ))
        };
        if !line.is_ascii() {
            return refuse(line, "is not ASCII");
        }
        let words: Vec<&str> = line.split(' ').filter(|w| !w.is_empty()).collect();
        let first = words.first().copied().unwrap_or("").to_ascii_lowercase();
        if first.starts_with('.') {
            return refuse(&first, "is a conditional block");
        }
        if SECTION_KEYWORDS.contains(&first.as_str()) {
            return refuse(&first, "opens a section");
        }
        if let Some((_, why)) = REFUSED_DIRECTIVES.iter().find(|(d, _)| *d == first) {
            return refuse(&first, why);
        }
        if let Some((_, why)) = REFUSED_PREFIXES.iter().find(|(p, _)| first.starts_with(p)) {
            return refuse(&first, why);
        }
        if first == "stats"
            && words
                .get(1)
                .is_some_and(|w| w.eq_ignore_ascii_case("socket"))
        {
            return refuse("stats socket", "opens an admin socket");
        }
        for word in &words {
            if let Some(why) = refused_token(word) {
                return refuse(word, why);
            }
        }
        lines.push(words.join(" "));
    }
    if lines.is_empty() || lines.len() > 64 {
        return Err("1 to 64 directives".into());
    }
    Ok(lines)
}

fn parse_auth_type(value: &str) -> Result<(), String> {
    if value == "basic-auth" {
        Ok(())
    } else {
        Err("basic-auth".into())
    }
}

fn parse_realm(value: &str) -> Result<String, String> {
    if !value.is_empty() && is_quotable(value, 64) {
        Ok(value.to_string())
    } else {
        Err("at most 64 printable ASCII characters without \", \\, $ or %".into())
    }
}

fn parse_balance(value: &str) -> Result<Balance, String> {
    let balance = match value {
        "roundrobin" => Balance::RoundRobin,
        "leastconn" => Balance::LeastConn,
        "source" => Balance::Source,
        "uri" => Balance::Uri,
        "random" => Balance::Random,
        _ => match value
            .strip_prefix("hdr(")
            .and_then(|r| r.strip_suffix(')'))
            .and_then(|name| parse_header_name(name).ok())
        {
            Some(name) => Balance::Header(name),
            None => {
                return Err("roundrobin, leastconn, source, uri, random or hdr(Name)".into());
            }
        },
    };
    Ok(balance)
}

fn parse_syslog_server(value: &str) -> Result<Option<String>, String> {
    if value == "stdout" {
        return Ok(None);
    }
    value
        .parse::<std::net::SocketAddr>()
        .map(|a| Some(a.to_string()))
        .map_err(|_| "stdout or ADDRESS:PORT (an IP address and a port)".into())
}

fn parse_log_format(value: &str) -> Result<String, String> {
    let ok = !value.is_empty()
        && value.len() <= 1024
        && value
            .bytes()
            .all(|b| (b' '..=b'~').contains(&b) && !b"\"\\$".contains(&b));
    if ok {
        Ok(value.to_string())
    } else {
        Err("an haproxy log-format of printable ASCII without \", \\ or $".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_parses_and_keys_are_unique() {
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
    fn parsers_refuse_what_could_reach_the_config() {
        assert!(parse_url("https://a.example.com/x\nuse_backend y").is_err());
        assert!(parse_url("https://a.example.com/%[env(X)]").is_err());
        assert!(parse_header_lines("X-A \"b\"").is_err());
        assert!(parse_header_lines("X-A ${HOME}").is_err());
        assert_eq!(
            parse_header_lines("X-A one two\nX-B three"),
            Ok(vec![
                ("X-A".into(), "one two".into()),
                ("X-B".into(), "three".into())
            ])
        );
        assert!(parse_path_rewrite("^/api/(.*) /\\1").is_ok());
        assert!(parse_path_rewrite("^/api/(.* /\\1").is_err());
        assert!(parse_path_rewrite("^/a /b if TRUE").is_err());
        assert!(parse_path_rewrite("^/a /%[env(X)]").is_err());
        assert_eq!(
            parse_networks("10.0.0.0/8, 127.0.0.1"),
            Ok(vec!["10.0.0.0/8".into(), "127.0.0.1".into()])
        );
        assert!(parse_networks("10.0.0.0/33").is_err());
        assert!(parse_duration("10s").is_ok());
        assert!(parse_duration("10 s").is_err());
        assert!(parse_realm("a\"b").is_err());
    }

    #[test]
    fn request_redirect_takes_a_host() {
        assert_eq!(
            parse_redirect_target("example.com"),
            Ok(RedirectTarget::Host("example.com".into()))
        );
        assert_eq!(
            parse_redirect_target("10.0.0.7"),
            Ok(RedirectTarget::Host("10.0.0.7".into()))
        );
    }

    #[test]
    fn request_redirect_takes_a_host_and_port() {
        assert_eq!(
            parse_redirect_target("example.com:8443"),
            Ok(RedirectTarget::Host("example.com:8443".into()))
        );
        assert_eq!(
            parse_redirect_target("example.com:08443"),
            Ok(RedirectTarget::Host("example.com:8443".into()))
        );
    }

    #[test]
    fn request_redirect_takes_an_absolute_url() {
        assert_eq!(
            parse_redirect_target("https://www.example.com/new?from=old"),
            Ok(RedirectTarget::Url(
                "https://www.example.com/new?from=old".into()
            ))
        );
        assert_eq!(
            parse_redirect_target("http://example.com:8080"),
            Ok(RedirectTarget::Url("http://example.com:8080".into()))
        );
    }

    /// The error of `parse_redirect_target(value)`, which must name the three forms.
    fn redirect_error(value: &str) -> String {
        let err = parse_redirect_target(value).expect_err(value);
        assert!(err.starts_with("HOST, HOST:PORT"), "{value}: {err}");
        err
    }

    #[test]
    fn request_redirect_refuses_an_empty_value() {
        redirect_error("");
    }

    #[test]
    fn request_redirect_refuses_an_upper_case_host() {
        redirect_error("Example.com");
    }

    #[test]
    fn request_redirect_refuses_a_wildcard_host() {
        redirect_error("*.example.com");
    }

    #[test]
    fn request_redirect_refuses_an_ipv6_address() {
        redirect_error("[::1]:8443");
    }

    #[test]
    fn request_redirect_refuses_an_empty_port() {
        redirect_error("example.com:");
    }

    #[test]
    fn request_redirect_refuses_port_zero() {
        redirect_error("example.com:0");
    }

    #[test]
    fn request_redirect_refuses_a_port_above_65535() {
        redirect_error("example.com:65536");
    }

    #[test]
    fn request_redirect_refuses_a_port_that_is_not_a_number() {
        redirect_error("example.com:https");
        redirect_error("example.com:+443");
    }

    #[test]
    fn request_redirect_refuses_a_host_with_a_path() {
        redirect_error("example.com/new");
        redirect_error("example.com:8443/new");
    }

    #[test]
    fn request_redirect_refuses_a_scheme_without_slashes() {
        redirect_error("https:example.com");
    }

    #[test]
    fn request_redirect_refuses_a_url_of_another_scheme() {
        let err = redirect_error("ftp://example.com/");
        assert!(err.contains("as a URL"), "{err}");
    }

    #[test]
    fn request_redirect_refuses_a_url_without_a_host() {
        redirect_error("https:///path");
    }

    #[test]
    fn request_redirect_refuses_what_could_reach_the_config() {
        redirect_error("example.com code 301 if TRUE");
        redirect_error("example.com\nuse_backend x");
        redirect_error("https://example.com/%[env(X)]");
        redirect_error("https://example.com/a b");
        redirect_error("https://example.com/\"x");
    }

    #[test]
    fn backend_path_is_normalized_or_original() {
        assert_eq!(
            parse_backend_path("normalized"),
            Ok(BackendPath::Normalized)
        );
        assert_eq!(parse_backend_path("original"), Ok(BackendPath::Original));
        assert!(parse_backend_path("raw").is_err());
        assert!(parse_backend_path("Original").is_err());
    }

    #[test]
    fn snippets_refuse_what_reads_files_loads_code_or_runs_programs() {
        let allowed = "http-response set-header X-Profile shop\n\n# a comment\ntimeout check 5s";
        assert_eq!(
            parse_snippet(allowed),
            Ok(vec![
                "http-response set-header X-Profile shop".to_string(),
                "timeout check 5s".to_string()
            ])
        );
        for (snippet, named) in [
            ("lua-load /x.lua", "lua-load"),
            ("http-request lua.act", "lua.act"),
            ("http-request use-service lua.svc", "lua.svc"),
            ("external-check command /bin/sh", "external-check"),
            ("errorfile 503 /etc/shadow", "errorfile"),
            ("acl a src -f /etc/passwd", "-f"),
            ("http-request return status 200 file /etc/passwd", "file"),
            (
                "http-request set-var(txn.a) req.hdr(host),map_str(/etc/x)",
                "req.hdr(host),map_str",
            ),
            ("http-request set-header X %[env(SECRET)]", "%["),
            ("acl a env(SECRET) -m str x", "env("),
            ("http-request set-header X \"$HOME\"", "\\\"$HOME"),
            ("setenv A B", "setenv"),
            ("stats socket /tmp/s level admin", "stats socket"),
            ("server s1 10.0.0.1:80", "server"),
            ("frontend evil", "frontend"),
            (".if defined(HOME)", ".if"),
            ("ssl-engine rdrand", "ssl-engine"),
            ("chroot /", "chroot"),
            ("filter spoe engine x config /x.conf", "filter"),
            (
                "load-server-state-from-file global",
                "load-server-state-from-file",
            ),
            ("server-state-file /x", "server-state-file"),
            ("51degrees-data-file /x", "51degrees-data-file"),
            ("ca-base /etc", "ca-base"),
        ] {
            let err = parse_snippet(snippet).expect_err(snippet);
            assert!(err.contains(&format!("'{named}")), "{snippet}: {err}");
        }
        assert!(parse_snippet("timeout check 5s\rtimeout server 1s").is_err());
        assert!(parse_snippet("").is_err());
    }

    #[test]
    fn access_lists_inline_or_from_a_configmap_key() {
        assert_eq!(
            parse_access_list("configmap:office-ips/list.txt"),
            Ok(AccessList::ConfigMap(ConfigMapKeyRef {
                name: "office-ips".into(),
                key: "list.txt".into()
            }))
        );
        assert!(parse_access_list("configmap:office-ips").is_err());
        assert!(parse_access_list("configmap:../x/y").is_err());
        assert!(parse_access_list("configmap:a/../b").is_err());
        assert_eq!(
            parse_pattern_list("10.0.0.0/8 # office\n\n127.0.0.1\n"),
            Ok(vec!["10.0.0.0/8".into(), "127.0.0.1".into()])
        );
        assert!(parse_pattern_list("10.0.0.1\nnope\n").is_err_and(|e| e.contains("line 2")));
    }
}
