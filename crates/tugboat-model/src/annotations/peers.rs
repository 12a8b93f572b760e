//! Other controllers' keys that Tugboat reads as its own: for each Tugboat key, the
//! names it has under ingress-nginx, HAProxy Technologies' controller and HAProxy Ingress
//! (jcmoraisjr), how their values are written as Tugboat's, and what still differs.
//!
//! An alias is listed only where the other controller's documentation gives the key the
//! same meaning; what differs (a default, a value form Tugboat refuses) is named in
//! [`PeerKey::difference`], shown in the reference and in `tugboat migrate`'s report.
//! Where another controller's default is part of what users rely on, the alias sets it
//! ([`PeerKey::implies`]) on the same object. [`NOT_SUPPORTED`] lists the other
//! controllers' keys Tugboat knows and does not read, with the reason. [`CHART_VALUES`]
//! maps the values of their Helm charts (DaemonSet, host network and ports, TCP
//! services, PROXY) onto Tugboat's chart for the migration guide, and
//! [`CONFIG_MAP_KEYS`] the keys of their own ConfigMaps that Tugboat's ConfigMap reads.

use super::parse::{Parsed, ValueError};
use super::prefixes::Ecosystem;

/// A value of another controller's key written as Tugboat's: `Ok(None)` when the value
/// asks for what Tugboat does anyway (nothing to set). The second argument is the
/// namespace of the object the key is on.
pub type Translate = fn(&str, &str) -> Parsed<Option<String>>;

/// One key of another controller read as a Tugboat key.
#[derive(Debug, Clone, Copy)]
pub struct PeerKey {
    pub ecosystem: Ecosystem,
    /// The key without its prefix.
    pub name: &'static str,
    /// How its values are written as Tugboat's (`None`: the same syntax).
    pub translate: Option<Translate>,
    /// What differs from the other controller's documented behaviour (`None`: nothing).
    pub difference: Option<&'static str>,
    /// Tugboat keys this one sets on the same object unless the object sets them: the
    /// other controller's defaults where they differ from Tugboat's, or a feature this
    /// key alone turns on there.
    pub implies: &'static [(&'static str, &'static str)],
}

const fn same(ecosystem: Ecosystem, name: &'static str) -> PeerKey {
    PeerKey {
        ecosystem,
        name,
        translate: None,
        difference: None,
        implies: &[],
    }
}

const fn differs(ecosystem: Ecosystem, name: &'static str, difference: &'static str) -> PeerKey {
    PeerKey {
        difference: Some(difference),
        ..same(ecosystem, name)
    }
}

use Ecosystem::{HaproxyIngress as HI, HaproxyTech as HT, IngressNginx as NGINX, Legacy as LEGACY};

// ---- Value translations ----

fn refuse<T>(expected: &'static str) -> Parsed<T> {
    Err(ValueError::NotPeerValue(expected))
}

/// ingress-nginx's timeouts: whole seconds without a unit.
fn unitless_seconds(value: &str, _: &str) -> Parsed<Option<String>> {
    let value = value.trim();
    if !value.is_empty() && value.len() <= 9 && value.bytes().all(|b| b.is_ascii_digit()) {
        Ok(Some(format!("{value}s")))
    } else {
        refuse("a number of seconds without a unit, e.g. 60")
    }
}

/// A duration with a unit (`500ms`, `30s`, `5m`, `1h`) as whole seconds.
fn duration_as_seconds(value: &str, _: &str) -> Parsed<Option<String>> {
    let digits = value.bytes().take_while(u8::is_ascii_digit).count();
    let number: u64 = value[..digits].parse().unwrap_or(u64::MAX);
    let seconds = match &value[digits..] {
        _ if digits == 0 || digits > 9 => None,
        "ms" => Some(number / 1000),
        "" | "s" => Some(number),
        "m" => Some(number * 60),
        "h" => Some(number * 3600),
        _ => None,
    };
    match seconds {
        Some(seconds) => Ok(Some(seconds.to_string())),
        None => refuse("a duration: a number and ms, s, m or h"),
    }
}

/// `NAME` or `NAMESPACE/NAME` with the object's own namespace: the Secret's name.
fn secret_in_own_namespace(value: &str, namespace: &str) -> Parsed<Option<String>> {
    match value.split_once('/') {
        None => Ok(Some(value.to_string())),
        Some((ns, name)) if ns == namespace => Ok(Some(name.to_string())),
        Some(_) => refuse("a Secret in the object's own namespace (NAME or NAMESPACE/NAME)"),
    }
}

fn nginx_auth_type(value: &str, _: &str) -> Parsed<Option<String>> {
    match value {
        "basic" => Ok(Some("basic-auth".into())),
        _ => refuse("basic (digest authentication is not supported)"),
    }
}

/// `auth-type: basic`, as ingress-nginx, HAProxy Ingress (deprecated there) and the
/// legacy prefix's users write it; `basic-auth` (Tugboat's and HAProxy Technologies'
/// spelling) is read too.
fn basic_auth_type(value: &str, _: &str) -> Parsed<Option<String>> {
    match value {
        "basic" | "basic-auth" => Ok(Some("basic-auth".into())),
        _ => refuse("basic or basic-auth (digest authentication is not supported)"),
    }
}

fn nginx_auth_secret_type(value: &str, _: &str) -> Parsed<Option<String>> {
    // Tugboat reads both forms: an `auth` key in htpasswd format, or a key per user.
    match value {
        "auth-file" | "auth-map" => Ok(None),
        _ => refuse("auth-file or auth-map"),
    }
}

/// ingress-nginx's `ssl-redirect`: `true` is the default (HTTPS hosts are redirected).
fn nginx_ssl_redirect(value: &str, _: &str) -> Parsed<Option<String>> {
    match value {
        "true" => Ok(None),
        "false" => Ok(Some("false".into())),
        _ => refuse("true or false"),
    }
}

/// ingress-nginx's `force-ssl-redirect`: `true` redirects even without TLS.
fn nginx_force_ssl_redirect(value: &str, _: &str) -> Parsed<Option<String>> {
    match value {
        "true" => Ok(Some("true".into())),
        "false" => Ok(None),
        _ => refuse("true or false"),
    }
}

fn nginx_protocol(value: &str) -> Option<&'static str> {
    ["HTTP", "HTTPS", "GRPC", "GRPCS"]
        .into_iter()
        .find(|p| p.eq_ignore_ascii_case(value.trim()))
}

/// ingress-nginx's `backend-protocol` as `server-ssl`.
fn nginx_backend_tls(value: &str, _: &str) -> Parsed<Option<String>> {
    match nginx_protocol(value) {
        Some("HTTPS" | "GRPCS") => Ok(Some("true".into())),
        Some(_) => Ok(Some("false".into())),
        None => refuse("HTTP, HTTPS, GRPC or GRPCS (AUTO_HTTP and FCGI are not supported)"),
    }
}

/// ingress-nginx's `backend-protocol` as `server-proto`.
fn nginx_backend_proto(value: &str, _: &str) -> Parsed<Option<String>> {
    match nginx_protocol(value) {
        Some("GRPC" | "GRPCS") => Ok(Some("h2".into())),
        Some(_) => Ok(Some("h1".into())),
        None => refuse("HTTP, HTTPS, GRPC or GRPCS (AUTO_HTTP and FCGI are not supported)"),
    }
}

/// ingress-nginx accepts methods in either case.
fn upper_case(value: &str, _: &str) -> Parsed<Option<String>> {
    Ok(Some(value.to_ascii_uppercase()))
}

/// ingress-nginx's `permanent-redirect` and `temporal-redirect`: an absolute URL.
fn absolute_url(value: &str, _: &str) -> Parsed<Option<String>> {
    if value.contains("://") {
        Ok(Some(value.to_string()))
    } else {
        refuse("an absolute http:// or https:// URL")
    }
}

/// ingress-nginx's `x-forwarded-prefix`: the value of that request header.
fn forwarded_prefix_header(value: &str, _: &str) -> Parsed<Option<String>> {
    // One header: a line break would add others.
    if value.trim().is_empty() || value.contains(['\n', '\r']) {
        return refuse("one line of text");
    }
    Ok(Some(format!("X-Forwarded-Prefix {value}")))
}

/// haproxy-ingress's `proxy-body-size`: a size, or `unlimited` (no limit, over a
/// ConfigMap's).
fn unlimited_as_zero(value: &str, _: &str) -> Parsed<Option<String>> {
    match value {
        "unlimited" => Ok(Some("0".into())),
        _ => Ok(Some(value.to_string())),
    }
}

/// HAProxy Technologies' `send-proxy-protocol`.
fn haproxytech_proxy_protocol(value: &str, _: &str) -> Parsed<Option<String>> {
    match value {
        "proxy" | "proxy-v1" => Ok(Some("v1".into())),
        "proxy-v2" => Ok(Some("v2".into())),
        _ => refuse(
            "proxy, proxy-v1 or proxy-v2 (proxy-v2-ssl and proxy-v2-ssl-cn are not supported)",
        ),
    }
}

// ---- The aliases of each Tugboat key ----

pub const SSL_REDIRECT: &[PeerKey] = &[
    PeerKey {
        translate: Some(nginx_ssl_redirect),
        difference: Some(
            "`true` (the default) redirects hosts listed in any Ingress' `spec.tls`; ingress-nginx looks at the Ingress' own TLS section",
        ),
        ..same(NGINX, "ssl-redirect")
    },
    PeerKey {
        translate: Some(nginx_force_ssl_redirect),
        ..same(NGINX, "force-ssl-redirect")
    },
    PeerKey {
        implies: &[("ssl-redirect-code", "302")],
        ..same(HT, "ssl-redirect")
    },
    PeerKey {
        implies: &[("ssl-redirect-code", "302")],
        difference: Some(
            "the key redirects with HAProxy Ingress' 302; a TLS host without the key is redirected with Tugboat's 308 (set `ssl-redirect-code: 302` in the ConfigMap for HAProxy Ingress' default everywhere)",
        ),
        ..same(HI, "ssl-redirect")
    },
];

pub const SSL_REDIRECT_CODE: &[PeerKey] = &[same(HT, "ssl-redirect-code")];
/// ingress-nginx's ConfigMap key: the same name in Tugboat's ConfigMap.
pub const HTTP_REDIRECT_CODE: &[PeerKey] = &[];
pub const SSL_REDIRECT_PORT: &[PeerKey] = &[same(HT, "ssl-redirect-port")];
/// ingress-nginx's ConfigMap key is the same name in Tugboat's ConfigMap; HAProxy
/// Ingress' is a global key of the same name (its ConfigMap only). Both compare the
/// path of the Ingress rule that takes the request, Tugboat the request's path.
pub const NO_TLS_REDIRECT_LOCATIONS: &[PeerKey] = &[differs(
    HI,
    "no-tls-redirect-locations",
    "the request's path is compared, whichever rule takes it (haproxy-ingress compares the path of the Ingress rule, so a listed path taken by a broader rule such as `/` is still redirected there)",
)];
/// ingress-nginx's ConfigMap keys of the client's address: the same names in Tugboat's
/// ConfigMap (the differing default of `proxy-real-ip-cidr` is in its help).
pub const USE_FORWARDED_HEADERS: &[PeerKey] = &[];
pub const FORWARDED_FOR_HEADER: &[PeerKey] = &[];
pub const PROXY_REAL_IP_CIDR: &[PeerKey] = &[];
pub const COMPUTE_FULL_FORWARDED_FOR: &[PeerKey] = &[];
/// HAProxy Ingress' global key of the same name accepts PROXY from every peer.
pub const USE_PROXY_PROTOCOL: &[PeerKey] = &[differs(
    HI,
    "use-proxy-protocol",
    "PROXY is expected only from the peers of `proxy-real-ip-cidr`, which must be set (HAProxy Ingress expects it from every peer); others are taken as they are",
)];
pub const CLIENT_STRICT_SNI: &[PeerKey] = &[same(HT, "client-strict-sni")];

const HSTS_DEFAULT: &str = "`hsts` is off unless set (HAProxy Ingress: on by default)";
pub const HSTS: &[PeerKey] = &[differs(HI, "hsts", HSTS_DEFAULT)];
pub const HSTS_MAX_AGE: &[PeerKey] = &[same(HI, "hsts-max-age")];
pub const HSTS_INCLUDE_SUBDOMAINS: &[PeerKey] = &[same(HI, "hsts-include-subdomains")];
pub const HSTS_PRELOAD: &[PeerKey] = &[same(HI, "hsts-preload")];

const NGINX_REDIRECT: &str = "a URL without nginx variables (`$request_uri` is refused)";
pub const REQUEST_REDIRECT: &[PeerKey] = &[
    PeerKey {
        translate: Some(absolute_url),
        difference: Some(NGINX_REDIRECT),
        implies: &[("request-redirect-code", "301")],
        ..same(NGINX, "permanent-redirect")
    },
    PeerKey {
        translate: Some(absolute_url),
        difference: Some(NGINX_REDIRECT),
        implies: &[("request-redirect-code", "302")],
        ..same(NGINX, "temporal-redirect")
    },
    same(HT, "request-redirect"),
];
const NGINX_REDIRECT_CODE: &str =
    "301, 302, 303, 307 or 308; another code is refused (ingress-nginx falls back to its default)";
pub const REQUEST_REDIRECT_CODE: &[PeerKey] = &[
    differs(NGINX, "permanent-redirect-code", NGINX_REDIRECT_CODE),
    differs(NGINX, "temporal-redirect-code", NGINX_REDIRECT_CODE),
    same(HT, "request-redirect-code"),
];

pub const APP_ROOT: &[PeerKey] = &[differs(
    NGINX,
    "app-root",
    "applies to a request for `/` that a route of the Ingress takes (ingress-nginx: any request for `/` on the host)",
)];

pub const SERVER_ALIAS: &[PeerKey] = &[
    differs(
        NGINX,
        "server-alias",
        "aliases are host and path routes like a rule's: one whose host and path an older Ingress routes is left out with a problem (and is then no TLS host), and an alias of an older Ingress keeps its host and path from a newer Ingress' rule (ingress-nginx drops an alias that is another server's name, whatever the paths and age); a value with an invalid host is refused whole",
    ),
    differs(
        HI,
        "server-alias",
        "the alias takes the paths of this Ingress' rules for the host (haproxy-ingress: every path of the host, whichever Ingress routes it); host names in lower case, `*.` only as the first label; several aliases may be written separated by commas",
    ),
];

pub const FROM_TO_WWW_REDIRECT: &[PeerKey] = &[differs(
    NGINX,
    "from-to-www-redirect",
    "the counterpart host is a route of `/`: paths of it another Ingress routes stay with that Ingress, and an older Ingress' redirect keeps `/` from a newer Ingress' rule (ingress-nginx drops the redirect when any Ingress has the counterpart host); the code is always 308 (ingress-nginx: its `http-redirect-code`, 308 by default)",
)];

pub const PATH_REWRITE: &[PeerKey] = &[differs(
    HT,
    "path-rewrite",
    "only `REGEX REPLACEMENT` on one line; a single path or several lines are refused",
)];

const NGINX_REGEX_ORDER: &str = "regex paths are tried after the host's Exact paths and before its Prefix paths; the other Ingresses of the host keep their path types (ingress-nginx makes every path of the host a regex)";
pub const USE_REGEX: &[PeerKey] = &[differs(NGINX, "use-regex", NGINX_REGEX_ORDER)];
pub const REWRITE_TARGET: &[PeerKey] = &[differs(
    NGINX,
    "rewrite-target",
    "a path with `$1` to `$9`; nginx variables and absolute URLs are refused; regex paths are tried after the host's Exact paths and before its Prefix paths",
)];

pub const SET_HOST: &[PeerKey] = &[same(NGINX, "upstream-vhost"), same(HT, "set-host")];

pub const REQUEST_SET_HEADER: &[PeerKey] = &[
    PeerKey {
        translate: Some(forwarded_prefix_header),
        difference: Some("replaces Tugboat's `request-set-header` of the same object"),
        ..same(NGINX, "x-forwarded-prefix")
    },
    differs(
        HT,
        "request-set-header",
        "values are plain text: no quotes, `%[` expressions or `$`",
    ),
];
pub const RESPONSE_SET_HEADER: &[PeerKey] = &[differs(
    HT,
    "response-set-header",
    "values are plain text: no quotes, `%[` expressions or `$`",
)];

pub const CORS_ENABLE: &[PeerKey] = &[
    PeerKey {
        implies: &[("cors-allow-credentials", "true")],
        ..same(NGINX, "enable-cors")
    },
    differs(
        HT,
        "cors-enable",
        "methods and headers default to lists (HAProxy Technologies: `*`), and `*` is refused there",
    ),
    PeerKey {
        implies: &[("cors-allow-credentials", "true")],
        difference: Some("headers are added to every answer, also without an `Origin` header"),
        ..same(HI, "cors-enable")
    },
];
pub const CORS_ALLOW_ORIGIN: &[PeerKey] = &[
    differs(
        NGINX,
        "cors-allow-origin",
        "origins are `http://` or `https://` hosts: wildcard subdomains and other schemes are refused",
    ),
    differs(
        HT,
        "cors-allow-origin",
        "a list of origins; a regular expression is refused",
    ),
    same(HI, "cors-allow-origin"),
];
pub const CORS_ALLOW_METHODS: &[PeerKey] = &[
    PeerKey {
        translate: Some(upper_case),
        ..same(NGINX, "cors-allow-methods")
    },
    differs(HT, "cors-allow-methods", "`*` is refused: list the methods"),
    same(HI, "cors-allow-methods"),
];
pub const CORS_ALLOW_HEADERS: &[PeerKey] = &[
    same(NGINX, "cors-allow-headers"),
    differs(HT, "cors-allow-headers", "`*` is refused: list the headers"),
    same(HI, "cors-allow-headers"),
];
pub const CORS_ALLOW_CREDENTIALS: &[PeerKey] = &[
    differs(
        NGINX,
        "cors-allow-credentials",
        "with any origin (`*`, the default) no `Access-Control-Allow-Credentials` is sent: ingress-nginx sends it beside `*`, which browsers refuse for credentialed requests; list the origins to allow credentials",
    ),
    differs(
        HT,
        "cors-allow-credentials",
        "with any origin (`*`) no `Access-Control-Allow-Credentials` is sent (browsers refuse credentials with `*`); list the origins to allow credentials",
    ),
    differs(
        HI,
        "cors-allow-credentials",
        "with any origin (`*`, the default) no `Access-Control-Allow-Credentials` is sent, where HAProxy Ingress allows the request's own `Origin` with credentials (any site may then read credentialed answers); list the origins to allow credentials",
    ),
];
pub const CORS_MAX_AGE: &[PeerKey] = &[
    differs(
        NGINX,
        "cors-max-age",
        "at most 86400 seconds, the default (ingress-nginx: 1728000; browsers cap it lower)",
    ),
    PeerKey {
        translate: Some(duration_as_seconds),
        difference: Some("the default is 86400 seconds (HAProxy Technologies: 5s)"),
        ..same(HT, "cors-max-age")
    },
    same(HI, "cors-max-age"),
];

const INLINE_LISTS_ONLY: &str =
    "addresses and networks written in the value; a `patterns/` file is refused (fail closed)";
pub const ALLOW_LIST: &[PeerKey] = &[
    same(NGINX, "allowlist-source-range"),
    same(NGINX, "whitelist-source-range"),
    differs(HT, "allow-list", INLINE_LISTS_ONLY),
    differs(HT, "whitelist", INLINE_LISTS_ONLY),
    differs(
        HI,
        "allowlist-source-range",
        "`!` exceptions are refused (fail closed)",
    ),
    differs(
        HI,
        "whitelist-source-range",
        "`!` exceptions are refused (fail closed)",
    ),
];
pub const DENY_LIST: &[PeerKey] = &[
    same(NGINX, "denylist-source-range"),
    differs(HT, "deny-list", INLINE_LISTS_ONLY),
    differs(HT, "blacklist", INLINE_LISTS_ONLY),
    differs(
        HI,
        "denylist-source-range",
        "`!` exceptions are refused (fail closed)",
    ),
];
pub const SRC_IP_HEADER: &[PeerKey] = &[
    same(HT, "src-ip-header"),
    differs(HI, "allowlist-source-header", "also applies to rate limits"),
];

pub const AUTH_TYPE: &[PeerKey] = &[
    PeerKey {
        translate: Some(nginx_auth_type),
        ..same(NGINX, "auth-type")
    },
    PeerKey {
        implies: &[("auth-realm", "Protected Content")],
        ..same(HT, "auth-type")
    },
    // Deprecated in HAProxy Ingress (`auth-secret` alone turns it on), still common.
    PeerKey {
        translate: Some(basic_auth_type),
        ..same(HI, "auth-type")
    },
    PeerKey {
        translate: Some(basic_auth_type),
        difference: Some(LEGACY_AUTH),
        ..same(LEGACY, "auth-type")
    },
];
/// What the legacy prefix's authentication keys mean: what its users (HAProxy Ingress,
/// ingress-nginx before 0.9) wrote with it.
const LEGACY_AUTH: &str = "read as HAProxy Ingress and ingress-nginx before 0.9 read it: `auth-type: basic` (or `basic-auth`) turns basic authentication on, and so does `auth-secret` alone (HAProxy Ingress); `digest` is refused (403); the realm defaults to `Restricted`";
const NGINX_AUTH_SECRET: &str = "a Secret in the Ingress' namespace only (`NAMESPACE/NAME` of another namespace is refused: 403); hashes `$1$`, `$2b$`/`$2y$`, `$5$`, `$6$`; `$apr1$` and plain passwords are refused (every request gets 401); a Secret without an `auth` key is read as one key per user (`auth-secret-type: auth-map`), and one without users answers 401 where ingress-nginx answers 503";
pub const AUTH_SECRET: &[PeerKey] = &[
    PeerKey {
        translate: Some(secret_in_own_namespace),
        difference: Some(NGINX_AUTH_SECRET),
        ..same(NGINX, "auth-secret")
    },
    PeerKey {
        translate: Some(nginx_auth_secret_type),
        ..same(NGINX, "auth-secret-type")
    },
    PeerKey {
        translate: Some(secret_in_own_namespace),
        difference: Some("a Secret in the Ingress' namespace only"),
        ..same(HT, "auth-secret")
    },
    PeerKey {
        translate: Some(secret_in_own_namespace),
        difference: Some(
            "a Secret in the Ingress' namespace only; `user::password` (plain) lines are refused (every request gets 401)",
        ),
        implies: &[("auth-type", "basic-auth"), ("auth-realm", "localhost")],
        ..same(HI, "auth-secret")
    },
    PeerKey {
        translate: Some(secret_in_own_namespace),
        difference: Some(LEGACY_AUTH),
        implies: &[("auth-type", "basic-auth")],
        ..same(LEGACY, "auth-secret")
    },
];
pub const AUTH_REALM: &[PeerKey] = &[
    differs(
        NGINX,
        "auth-realm",
        "the default realm is `Restricted` (ingress-nginx: empty)",
    ),
    same(HT, "auth-realm"),
    same(HI, "auth-realm"),
];

/// What every spelling of `auth-tls-secret` has in common.
const AUTH_TLS_SECRET_DIFFERENCE: &str = "a Secret in the Ingress' namespace only (`NAMESPACE/NAME` of another namespace is refused: 403); `ca.crt` must hold PEM certificates only and `ca.crl` PEM revocation lists only (else 403); a request for the host on a connection whose SNI is another name or none gets 421; plain HTTP to the routes is refused as a request without a certificate";
pub const AUTH_TLS_SECRET: &[PeerKey] = &[
    PeerKey {
        translate: Some(secret_in_own_namespace),
        difference: Some(AUTH_TLS_SECRET_DIFFERENCE),
        ..same(NGINX, "auth-tls-secret")
    },
    PeerKey {
        translate: Some(secret_in_own_namespace),
        difference: Some(AUTH_TLS_SECRET_DIFFERENCE),
        ..same(HI, "auth-tls-secret")
    },
    // HAProxy Ingress' backward-compatible prefix: `NAMESPACE/NAME` there too.
    PeerKey {
        translate: Some(secret_in_own_namespace),
        difference: Some(AUTH_TLS_SECRET_DIFFERENCE),
        ..same(LEGACY, "auth-tls-secret")
    },
];

/// HAProxy Ingress' `auth-tls-verify-optional`: `true` is `optional`.
fn verify_optional(value: &str, _: &str) -> Parsed<Option<String>> {
    match value {
        "true" => Ok(Some("optional".into())),
        "false" => Ok(Some("on".into())),
        _ => refuse("true or false"),
    }
}

/// HAProxy Ingress' `auth-tls-strict`: Tugboat refuses at the HTTP layer either way.
fn strict_either_way(value: &str, _: &str) -> Parsed<Option<String>> {
    match value {
        "true" | "false" => Ok(None),
        _ => refuse("true or false"),
    }
}

pub const AUTH_TLS_VERIFY_CLIENT: &[PeerKey] = &[
    differs(
        NGINX,
        "auth-tls-verify-client",
        "the handshake always completes; a refused certificate gets 400 (or the error page) at the HTTP layer as in ingress-nginx",
    ),
    PeerKey {
        translate: Some(verify_optional),
        difference: Some(
            "a request without a certificate passes with `ssl-client-verify: NONE`; one that fails verification gets 400 (or the error page), as ingress-nginx's `optional`",
        ),
        ..same(HI, "auth-tls-verify-optional")
    },
    PeerKey {
        translate: Some(strict_either_way),
        difference: Some(
            "read and ignored: the handshake always completes and a refused certificate gets 400 or the error page (HAProxy Ingress' 495/496 are not used)",
        ),
        ..same(HI, "auth-tls-strict")
    },
];
pub const AUTH_TLS_VERIFY_DEPTH: &[PeerKey] = &[differs(
    NGINX,
    "auth-tls-verify-depth",
    "checked but not enforced: haproxy has no per-host verification depth, so a longer chain that ends at a CA of `ca.crt` is accepted",
)];
pub const AUTH_TLS_ERROR_PAGE: &[PeerKey] = &[
    same(NGINX, "auth-tls-error-page"),
    same(HI, "auth-tls-error-page"),
];

/// HAProxy Ingress' `auth-tls-cert-header`.
fn cert_header(value: &str, _: &str) -> Parsed<Option<String>> {
    match value {
        "true" | "false" => Ok(Some(value.into())),
        _ => refuse("true or false"),
    }
}

pub const AUTH_TLS_PASS_CERTIFICATE: &[PeerKey] = &[
    same(NGINX, "auth-tls-pass-certificate-to-upstream"),
    PeerKey {
        translate: Some(cert_header),
        difference: Some(
            "the certificate goes in ingress-nginx's `ssl-client-cert` (URL-encoded PEM), not HAProxy Ingress' `X-SSL-Client-Cert` (base64 DER); `ssl-client-subject-dn` and `ssl-client-issuer-dn` replace `X-SSL-Client-DN` and `X-SSL-Client-CN`",
        ),
        ..same(HI, "auth-tls-cert-header")
    },
];
pub const AUTH_TLS_MATCH_CN: &[PeerKey] = &[differs(
    NGINX,
    "auth-tls-match-cn",
    "haproxy's regular expressions (PCRE on the official image); an expression with spaces, quotes, `%` or `#` is refused (403): write a space as `\\s` or `.`",
)];

pub const AUTH_URL: &[PeerKey] = &[differs(
    NGINX,
    "auth-url",
    "of nginx's variables only `$host`, `$scheme`, `$request_uri`, `$escaped_request_uri`, `$uri`, `$args`, `$query_string`, `$is_args`, `$remote_addr`, `$http_NAME` and `$arg_NAME` are filled in (another is refused); in the URL's host and port only `$host`, on rules whose hosts are all exact (ingress-nginx takes any variable there, letting a client choose the authentication service); a host name is resolved by haproxy's DNS resolvers, not `/etc/hosts`; an attempt that takes over 2.5 seconds is tried again, 4 times at most, then 500 (ingress-nginx waits 60 seconds); `X-Sent-From` is not sent",
)];
pub const AUTH_METHOD: &[PeerKey] = &[differs(
    NGINX,
    "auth-method",
    "GET, HEAD, POST, PUT or DELETE (haproxy's HTTP client sends no other)",
)];
pub const AUTH_RESPONSE_HEADERS: &[PeerKey] = &[same(NGINX, "auth-response-headers")];
pub const AUTH_SIGNIN: &[PeerKey] = &[differs(
    NGINX,
    "auth-signin",
    "of nginx's variables only `$host`, `$scheme`, `$request_uri`, `$escaped_request_uri`, `$uri`, `$args`, `$query_string`, `$is_args`, `$remote_addr`, `$http_NAME` and `$arg_NAME` are filled in (another is refused); in the URL's host and port only `$host`",
)];

pub const DEFAULT_BACKEND: &[PeerKey] = &[differs(
    NGINX,
    "default-backend",
    "also used while every endpoint is down by health check or draining (ingress-nginx: only while the Service has no endpoints); a Service that does not exist is a problem, and the rule's requests get 503",
)];
pub const CUSTOM_HTTP_ERRORS: &[PeerKey] = &[differs(
    NGINX,
    "custom-http-errors",
    "read on the Ingress only (not in the ConfigMap); without `default-backend`, an Ingress' `spec.defaultBackend` answers when there is one (ingress-nginx: always `--default-backend-service`); the error backend is asked `GET /` whatever the client's method, within 5 seconds a try (else the backend's own answer is passed on); needs haproxy built with Lua",
)];

pub const RATE_LIMIT_REQUESTS: &[PeerKey] = &[PeerKey {
    implies: &[("rate-limit-status-code", "403")],
    ..same(HT, "rate-limit-requests")
}];
pub const RATE_LIMIT_PERIOD: &[PeerKey] = &[same(HT, "rate-limit-period")];
pub const RATE_LIMIT_STATUS_CODE: &[PeerKey] =
    &[differs(HT, "rate-limit-status-code", "400 to 599")];

pub const LOAD_BALANCE: &[PeerKey] = &[differs(
    HT,
    "load-balance",
    "roundrobin, leastconn, source, uri, random or hdr(Name), without options",
)];

pub const TIMEOUT_SERVER: &[PeerKey] = &[
    PeerKey {
        translate: Some(unitless_seconds),
        difference: Some(
            "haproxy's `timeout server` covers reading and writing; the default is 50s (ingress-nginx: 60s)",
        ),
        ..same(NGINX, "proxy-read-timeout")
    },
    same(HT, "timeout-server"),
    same(HI, "timeout-server"),
];
pub const TIMEOUT_CONNECT: &[PeerKey] = &[
    PeerKey {
        translate: Some(unitless_seconds),
        ..same(NGINX, "proxy-connect-timeout")
    },
    same(HT, "timeout-connect"),
    same(HI, "timeout-connect"),
];
pub const TIMEOUT_CLIENT: &[PeerKey] = &[same(HT, "timeout-client"), same(HI, "timeout-client")];
const HI_BACKEND_TIMEOUT: &str = "only in the controller's ConfigMap (HAProxy Ingress: also per backend, on Ingresses and Services)";
pub const TIMEOUT_HTTP_REQUEST: &[PeerKey] = &[
    differs(
        HT,
        "timeout-http-request",
        "the default is 10s (HAProxy Technologies: 5s)",
    ),
    differs(HI, "timeout-http-request", HI_BACKEND_TIMEOUT),
];
pub const TIMEOUT_HTTP_KEEP_ALIVE: &[PeerKey] = &[
    same(HT, "timeout-http-keep-alive"),
    differs(HI, "timeout-keep-alive", HI_BACKEND_TIMEOUT),
];
pub const TIMEOUT_QUEUE: &[PeerKey] = &[
    same(HT, "timeout-queue"),
    differs(HI, "timeout-queue", HI_BACKEND_TIMEOUT),
];
pub const TIMEOUT_TUNNEL: &[PeerKey] = &[
    same(HT, "timeout-tunnel"),
    differs(HI, "timeout-tunnel", HI_BACKEND_TIMEOUT),
];

pub const SEND_PROXY_PROTOCOL: &[PeerKey] = &[PeerKey {
    translate: Some(haproxytech_proxy_protocol),
    ..same(HT, "send-proxy-protocol")
}];

pub const SERVER_SSL: &[PeerKey] = &[
    PeerKey {
        translate: Some(nginx_backend_tls),
        ..same(NGINX, "backend-protocol")
    },
    same(HT, "server-ssl"),
];
pub const SERVER_PROTO: &[PeerKey] = &[
    PeerKey {
        translate: Some(nginx_backend_proto),
        ..same(NGINX, "backend-protocol")
    },
    differs(
        HT,
        "server-proto",
        "with `server-ssl`, `h2` offers only HTTP/2 by ALPN (HAProxy Technologies: HTTP/2 and HTTP/1.1)",
    ),
];
const NGINX_PROXY_SSL_SECRET: &str = "a Secret in the Ingress' namespace with `tls.crt` and `tls.key` (without them the backend answers 503); `ca.crt` is read only with `proxy-ssl-verify: on`";
pub const SERVER_CA: &[PeerKey] = &[
    PeerKey {
        translate: Some(secret_in_own_namespace),
        difference: Some(
            "the CA is read from the Secret's `ca.crt` key (HAProxy Technologies: `tls.crt`): without it the backend answers 503",
        ),
        ..same(HT, "server-ca")
    },
    PeerKey {
        translate: Some(secret_in_own_namespace),
        difference: Some(NGINX_PROXY_SSL_SECRET),
        implies: &[("server-verify", "false")],
        ..same(NGINX, "proxy-ssl-secret")
    },
];
pub const SERVER_CRT: &[PeerKey] = &[
    PeerKey {
        translate: Some(secret_in_own_namespace),
        difference: Some("a Secret in the object's own namespace only"),
        ..same(HT, "server-crt")
    },
    PeerKey {
        translate: Some(secret_in_own_namespace),
        difference: Some(NGINX_PROXY_SSL_SECRET),
        ..same(NGINX, "proxy-ssl-secret")
    },
];

/// ingress-nginx's `on`/`off` keys.
fn on_off(value: &str, _: &str) -> Parsed<Option<String>> {
    match value {
        "on" => Ok(Some("true".into())),
        "off" => Ok(Some("false".into())),
        _ => refuse("on or off"),
    }
}

/// ingress-nginx's `proxy-ssl-server-name`: Tugboat always sends SNI.
fn nginx_proxy_ssl_server_name(value: &str, _: &str) -> Parsed<Option<String>> {
    match value {
        "on" | "off" => Ok(None),
        _ => refuse("on or off"),
    }
}

pub const SERVER_SSL_NAME: &[PeerKey] = &[
    differs(
        NGINX,
        "proxy-ssl-name",
        "also sent as SNI without `proxy-ssl-server-name: on`",
    ),
    // Read for the Service keys only to say what it does: nothing to set.
    PeerKey {
        translate: Some(nginx_proxy_ssl_server_name),
        difference: Some(
            "SNI is always sent (`server-ssl-name`, by default the Service's `NAME.NAMESPACE.svc`); `off` does not turn it off",
        ),
        ..same(NGINX, "proxy-ssl-server-name")
    },
];
pub const SERVER_VERIFY: &[PeerKey] = &[PeerKey {
    translate: Some(on_off),
    difference: Some(
        "`on` verifies against `ca.crt` of `proxy-ssl-secret` and checks the name `proxy-ssl-name` (by default the Service's `NAME.NAMESPACE.svc`, not the upstream's name)",
    ),
    ..same(NGINX, "proxy-ssl-verify")
}];

pub const CHECK: &[PeerKey] = &[differs(
    HT,
    "check",
    "health checks are off unless set (HAProxy Technologies: on by default)",
)];
pub const CHECK_HTTP: &[PeerKey] = &[differs(
    HT,
    "check-http",
    "a path only; a method or HTTP version before it is refused",
)];
pub const CHECK_INTERVAL: &[PeerKey] = &[same(HT, "check-interval")];

pub const COOKIE_PERSISTENCE: &[PeerKey] = &[differs(
    HT,
    "cookie-persistence",
    "the cookie's value is the server's slot name, not a dynamic cookie shared by replicas",
)];

pub const LIMIT_RPS: &[PeerKey] = &[
    differs(
        NGINX,
        "limit-rps",
        "counted over sliding windows of 1 s (rate + burst) and 10 s (10 × rate + burst) rather than nginx's leaky bucket: the same most in any second or 10 seconds, a little more in between, and refused requests count too (a client that keeps sending over the limit stays refused); always 503 (no `limit-req-status-code`)",
    ),
    PeerKey {
        // haproxy-ingress has no burst: the smallest one.
        implies: &[("limit-burst-multiplier", "1")],
        ..differs(
            HI,
            "limit-rps",
            "requests are counted, not connections: at most twice the rate in any second (rate + a burst of the rate) and 11 × the rate in any 10 seconds, and a request over the limit is answered 503 (haproxy-ingress counts new connections per second and closes a connection over the limit)",
        )
    },
];
pub const LIMIT_BURST_MULTIPLIER: &[PeerKey] = &[same(NGINX, "limit-burst-multiplier")];
pub const LIMIT_CONNECTIONS: &[PeerKey] = &[
    differs(
        NGINX,
        "limit-connections",
        "always 503 (no `limit-conn-status-code`)",
    ),
    differs(
        HI,
        "limit-connections",
        "connections with a request in progress are counted, and a request on one more is answered 503 (haproxy-ingress counts open connections and closes one more)",
    ),
];

pub const LIMIT_ALLOWLIST: &[PeerKey] = &[
    same(NGINX, "limit-allowlist"),
    same(NGINX, "limit-whitelist"),
    same(HI, "limit-whitelist"),
];

pub const AFFINITY: &[PeerKey] = &[differs(
    NGINX,
    "affinity",
    "the cookie's value is the server's slot name and a client stays on its server while it lives (ingress-nginx's `affinity-mode: persistent`; its default `balanced` moves some clients when servers are added); the cookie is not `Secure` on HTTPS",
)];
pub const SESSION_COOKIE_NAME: &[PeerKey] = &[same(NGINX, "session-cookie-name")];
pub const SESSION_COOKIE_PATH: &[PeerKey] = &[differs(
    NGINX,
    "session-cookie-path",
    "without it the cookie's path is `/` (ingress-nginx: the Ingress rule's path)",
)];
pub const SESSION_COOKIE_MAX_AGE: &[PeerKey] = &[same(NGINX, "session-cookie-max-age")];
pub const SESSION_COOKIE_EXPIRES: &[PeerKey] = &[differs(
    NGINX,
    "session-cookie-expires",
    "sent as `Max-Age` rather than an `Expires` date (the same lifetime)",
)];

pub const PROXY_BODY_SIZE: &[PeerKey] = &[
    differs(
        NGINX,
        "proxy-body-size",
        "without the key there is no limit (ingress-nginx's default is 1m); without Lua in haproxy, a body of unknown length (chunked, HTTP/2 without `Content-Length`) is refused with 411",
    ),
    PeerKey {
        translate: Some(unlimited_as_zero),
        ..differs(
            HI,
            "proxy-body-size",
            "a body of unknown length (chunked, HTTP/2 without `Content-Length`) is counted as it streams, not buffered; without Lua in haproxy it is refused with 411",
        )
    },
];

pub const SSL_PASSTHROUGH: &[PeerKey] = &[
    differs(
        NGINX,
        "ssl-passthrough",
        "needs no controller flag (ingress-nginx reads it only with `--enable-ssl-passthrough`); a rule without a `/` path passes TLS to its first path's Service port (ingress-nginx passes only `/`)",
    ),
    differs(
        HT,
        "ssl-passthrough",
        "read on Ingresses only (HAProxy Technologies' also reads it on Services and the ConfigMap); plain HTTP to the hosts is served by the Ingress' rules",
    ),
    differs(
        HI,
        "ssl-passthrough",
        "`ssl-passthrough-http-port` is not read: plain HTTP to the hosts is served by the Ingress' rules",
    ),
];
pub const CANARY: &[PeerKey] = &[differs(
    NGINX,
    "canary",
    "a canary Ingress's `spec.defaultBackend` is not used (ingress-nginx makes it a canary of the default backend)",
)];
pub const CANARY_WEIGHT: &[PeerKey] = &[same(NGINX, "canary-weight")];
pub const CANARY_WEIGHT_TOTAL: &[PeerKey] = &[same(NGINX, "canary-weight-total")];
pub const CANARY_BY_HEADER: &[PeerKey] = &[differs(
    NGINX,
    "canary-by-header",
    "a `_` in the name matches only a `_` (ingress-nginx also matches it to a `-` in the request's header name)",
)];
pub const CANARY_BY_HEADER_VALUE: &[PeerKey] = &[differs(
    NGINX,
    "canary-by-header-value",
    "a value with spaces, quotes, `\\`, `$`, `%`, `#`, `{` or `}` is refused",
)];
pub const CANARY_BY_HEADER_PATTERN: &[PeerKey] = &[differs(
    NGINX,
    "canary-by-header-pattern",
    "haproxy's regular expressions (PCRE on the official image) rather than nginx's PCRE; an expression with spaces, quotes, `%` or `#` is refused",
)];
pub const CANARY_BY_COOKIE: &[PeerKey] = &[same(NGINX, "canary-by-cookie")];
pub const AFFINITY_CANARY_BEHAVIOR: &[PeerKey] = &[same(NGINX, "affinity-canary-behavior")];

pub const SYSLOG_SERVER: &[PeerKey] = &[];
pub const LOG_FORMAT: &[PeerKey] = &[same(HT, "log-format")];
pub const LOG_FORMAT_JSON: &[PeerKey] = &[differs(
    NGINX,
    "log-format-escape-json",
    "ingress-nginx only escapes the variables of the `log-format-upstream` a user writes as JSON; Tugboat writes the whole JSON line itself, with its own fields",
)];

/// ingress-nginx's snippets: what happens to them.
const NGINX_SNIPPET: &str = "nginx syntax: never run; remove it. A snippet whose directives restrict access (`allow`, `deny`, `satisfy`, `internal`, `auth_*`, `limit_*`, `return` of a 4xx or 5xx status, `if` blocks holding one, Lua, njs or Perl handlers, `include`, `ssl_verify_client`, `modsecurity*`) fails closed: its routes answer 403 (unless `--unsupported-access-keys=ignore`); so does one that cannot be read (an unclosed quote or block). One that only sets headers, rewrites or redirects is a warning and its routes are served";

/// Other controllers' command-line flags and Tugboat's answer to each: the flag Tugboat
/// takes, or what to do instead. The migration guide lists them in its "Controller
/// flags" table.
pub const PEER_FLAGS: &[(Ecosystem, &str, &str)] = &[
    (
        NGINX,
        "--tcp-services-configmap",
        "`--tcp-services-configmap`, same format (`namespace/service:port[:PROXY][:PROXY]`, \
         PROXY decoded from clients and sent to the Service as ingress-nginx does); haproxy binds \
         port P at P + 10000, which the Service maps P to (docs/tcp-services.md)",
    ),
    (
        HT,
        "--configmap-tcp-services",
        "`--configmap-tcp-services`, same format (`namespace/service:port`); the `ssl` option \
         and the `log-format-tcp` key are refused; haproxy binds port P at P + 10000, which the \
         Service maps P to (docs/tcp-services.md)",
    ),
    (
        NGINX,
        "--profiling",
        "`--profiling` (chart value `controller.profiling`): a CPU profile in pprof's format or \
         as an SVG flame graph, and heap figures (not a heap profile), under `/debug/pprof/` on \
         the admin port (docs/operations.md, \"Profiles\")",
    ),
    (
        HT,
        "--pprof",
        "`--pprof`, the same flag as `--profiling`: a CPU profile and heap figures under \
         `/debug/pprof/` on the admin port, `--controller-port` (docs/operations.md, \"Profiles\")",
    ),
];

/// Other controllers' keys Tugboat knows and does not read, with the reason or what to
/// use instead. Keys of theirs in neither this list nor an alias are not supported
/// either; this list only gives the reason.
pub const NOT_SUPPORTED: &[(Ecosystem, &str, &str)] = &[
    (
        NGINX,
        "proxy-send-timeout",
        "haproxy's `timeout server` covers writes too: set `proxy-read-timeout`",
    ),
    (
        NGINX,
        "limit-rpm",
        "use `rate-limit-requests` with `rate-limit-period: 1m`",
    ),
    (
        NGINX,
        "affinity-mode",
        "a client stays on its server while it lives (`persistent`)",
    ),
    (NGINX, "configuration-snippet", NGINX_SNIPPET),
    (NGINX, "server-snippet", NGINX_SNIPPET),
    (NGINX, "auth-snippet", NGINX_SNIPPET),
    (NGINX, "stream-snippet", NGINX_SNIPPET),
    (
        HT,
        "scale-server-slots",
        "Tugboat sizes server slots itself",
    ),
    (HT, "standalone-backend", "no equivalent"),
    (HT, "route-acl", "the routes answer 403"),
    (HT, "rate-limit-size", "the routes answer 403"),
    (HT, "pod-maxconn", "no equivalent"),
    (
        HT,
        "client-ca",
        "a ConfigMap key for every host there: set `auth-tls-secret` on the Ingresses (on an Ingress the routes answer 403)",
    ),
    (
        HT,
        "client-crt-optional",
        "goes with `client-ca`: set `auth-tls-verify-client: optional` on the Ingresses",
    ),
    (
        HI,
        "auth-url",
        "external authentication is not supported yet: the routes answer 403",
    ),
    (HI, "oauth", "the routes answer 403"),
    (HI, "waf", "the routes answer 403"),
    (HI, "rewrite-target", "not yet: use `path-rewrite`"),
    (
        HI,
        "server-alias-regex",
        "regular expressions on the host are not supported: list the host names in `server-alias`",
    ),
    (
        HI,
        "backend-protocol",
        "not yet: use `server-ssl` and `server-proto`",
    ),
];

/// Why key `name` of `ecosystem` is not supported, when [`NOT_SUPPORTED`] knows.
pub fn not_supported_reason(ecosystem: Ecosystem, name: &str) -> Option<&'static str> {
    NOT_SUPPORTED
        .iter()
        .find(|(e, n, _)| *e == ecosystem && *n == name)
        .map(|(_, _, reason)| *reason)
}

// ---- Their controllers' ConfigMap keys ----

/// A key of another controller's own ConfigMap that Tugboat's ConfigMap reads as one of
/// its keys, with the keys it turns on besides.
#[derive(Debug, Clone, Copy)]
pub struct PeerConfigMapKey {
    pub ecosystem: Ecosystem,
    /// Their ConfigMap key.
    pub name: &'static str,
    /// The Tugboat key that takes its value.
    pub key: &'static str,
    /// Tugboat keys it sets besides, unless the ConfigMap sets them.
    pub implies: &'static [(&'static str, &'static str)],
    /// What differs from their meaning.
    pub difference: &'static str,
}

/// HAProxy Technologies' `proxy-protocol` lists the peers whose connections start with a
/// PROXY header (`tcp-request connection expect-proxy layer4 if { src ... }`), which is
/// Tugboat's `use-proxy-protocol` with those peers as `proxy-real-ip-cidr`.
pub const CONFIG_MAP_KEYS: &[PeerConfigMapKey] = &[PeerConfigMapKey {
    ecosystem: HT,
    name: "proxy-protocol",
    key: "proxy-real-ip-cidr",
    implies: &[("use-proxy-protocol", "true")],
    difference: "its addresses are also the trusted forwarders of `use-forwarded-headers` when that is on; `proxy-real-ip-cidr` in the same ConfigMap wins",
}];

/// The key of another controller's ConfigMap called `name`, if Tugboat reads it.
pub fn config_map_key(name: &str) -> Option<&'static PeerConfigMapKey> {
    CONFIG_MAP_KEYS.iter().find(|k| k.name == name)
}

// ---- Their Helm charts' values ----

/// A value of another controller's Helm chart and the value of Tugboat's chart
/// (deploy/helm/tugboat) that does its job, for the migration guide.
#[derive(Debug, Clone, Copy)]
pub struct PeerChartValue {
    pub ecosystem: Ecosystem,
    /// Their value's path (`controller.hostNetwork`).
    pub theirs: &'static str,
    /// Tugboat's chart value (`-`: none).
    pub ours: &'static str,
    /// What differs or what to set besides.
    pub note: &'static str,
}

const fn chart_value(
    ecosystem: Ecosystem,
    theirs: &'static str,
    ours: &'static str,
    note: &'static str,
) -> PeerChartValue {
    PeerChartValue {
        ecosystem,
        theirs,
        ours,
        note,
    }
}

const HOST_NETWORK_PORTS: &str = "DaemonSet only; haproxy binds the node's `haproxy.httpPort`/`httpsPort` (8080/8443 unless you set 80/443 with `haproxy.lowPorts: node` and the node's `net.ipv4.ip_unprivileged_port_start`)";
const DNS_WITH_HOST_NETWORK: &str =
    "set by the chart: `ClusterFirstWithHostNet` with `controller.hostNetwork`";
const PROXY_NEEDS_PEERS: &str = "PROXY is expected only from the peers of `config.proxy-real-ip-cidr`, which must be set (the load balancer's addresses); others are taken as they are";
const LOW_CONTAINER_PORTS: &str =
    "ports below 1024 need a `haproxy.lowPorts` mode (chart README, \"Ports 80 and 443\")";
const TCP_PORT_BINDS: &str = "the same `\"PORT\": \"NAMESPACE/SERVICE:PORT[:PROXY][:PROXY]\"` format; the chart writes the ConfigMap, passes `--tcp-services-configmap` and exposes each PORT on the Service (haproxy binds PORT + 10000)";

/// The Helm values of the peers' charts for running on the nodes (DaemonSet,
/// hostNetwork, hostPort), TCP services and the client's address, with Tugboat's.
pub const CHART_VALUES: &[PeerChartValue] = &[
    chart_value(
        NGINX,
        "controller.kind",
        "controller.kind",
        "`Deployment` or `DaemonSet` (`Both` is not offered)",
    ),
    chart_value(NGINX, "controller.replicaCount", "replicaCount", ""),
    chart_value(
        NGINX,
        "controller.hostNetwork",
        "controller.hostNetwork",
        HOST_NETWORK_PORTS,
    ),
    chart_value(NGINX, "controller.dnsPolicy", "-", DNS_WITH_HOST_NETWORK),
    chart_value(
        NGINX,
        "controller.hostPort.enabled",
        "controller.hostPort.enabled",
        "DaemonSet only",
    ),
    chart_value(
        NGINX,
        "controller.hostPort.ports.http",
        "controller.hostPort.ports.http",
        "",
    ),
    chart_value(
        NGINX,
        "controller.hostPort.ports.https",
        "controller.hostPort.ports.https",
        "",
    ),
    chart_value(
        NGINX,
        "controller.containerPort.http",
        "haproxy.httpPort",
        LOW_CONTAINER_PORTS,
    ),
    chart_value(
        NGINX,
        "controller.containerPort.https",
        "haproxy.httpsPort",
        LOW_CONTAINER_PORTS,
    ),
    chart_value(
        NGINX,
        "controller.service.externalTrafficPolicy",
        "service.externalTrafficPolicy",
        "",
    ),
    chart_value(
        NGINX,
        "controller.service.annotations",
        "service.annotations",
        "e.g. the load balancer's PROXY protocol annotation",
    ),
    chart_value(
        NGINX,
        "controller.config.use-proxy-protocol",
        "config.use-proxy-protocol",
        PROXY_NEEDS_PEERS,
    ),
    chart_value(
        NGINX,
        "controller.config.use-forwarded-headers",
        "config.use-forwarded-headers",
        "trusted only from `config.proxy-real-ip-cidr` (docs/client-address.md)",
    ),
    chart_value(NGINX, "tcp", "tcpServices", TCP_PORT_BINDS),
    chart_value(NGINX, "udp", "-", "not supported: haproxy serves no UDP"),
    chart_value(
        HT,
        "controller.kind",
        "controller.kind",
        "`Deployment` or `DaemonSet`",
    ),
    chart_value(HT, "controller.replicaCount", "replicaCount", ""),
    chart_value(
        HT,
        "controller.daemonset.useHostNetwork",
        "controller.hostNetwork",
        HOST_NETWORK_PORTS,
    ),
    chart_value(HT, "controller.dnsPolicy", "-", DNS_WITH_HOST_NETWORK),
    chart_value(
        HT,
        "controller.daemonset.useHostPort",
        "controller.hostPort.enabled",
        "DaemonSet only",
    ),
    chart_value(
        HT,
        "controller.daemonset.hostPorts.http",
        "controller.hostPort.ports.http",
        "",
    ),
    chart_value(
        HT,
        "controller.daemonset.hostPorts.https",
        "controller.hostPort.ports.https",
        "",
    ),
    chart_value(
        HT,
        "controller.daemonset.hostPorts.stat",
        "-",
        "the stats port is not put on the node; scrape it through the pod (`serviceMonitor.enabled`)",
    ),
    chart_value(
        HT,
        "controller.containerPort.http",
        "haproxy.httpPort",
        LOW_CONTAINER_PORTS,
    ),
    chart_value(
        HT,
        "controller.containerPort.https",
        "haproxy.httpsPort",
        LOW_CONTAINER_PORTS,
    ),
    chart_value(
        HT,
        "controller.service.externalTrafficPolicy",
        "service.externalTrafficPolicy",
        "",
    ),
    chart_value(
        HT,
        "controller.service.tcpPorts",
        "tcpServices",
        "list each port once, with its target, in ingress-nginx's format; the Service port follows",
    ),
    chart_value(
        HT,
        "controller.config.proxy-protocol",
        "config.use-proxy-protocol",
        "`\"true\"`, with the CIDR list as `config.proxy-real-ip-cidr`: PROXY is expected from those peers only, as theirs",
    ),
    chart_value(
        HI,
        "controller.kind",
        "controller.kind",
        "`Deployment` or `DaemonSet`",
    ),
    chart_value(HI, "controller.replicaCount", "replicaCount", ""),
    chart_value(
        HI,
        "controller.hostNetwork",
        "controller.hostNetwork",
        HOST_NETWORK_PORTS,
    ),
    chart_value(HI, "controller.dnsPolicy", "-", DNS_WITH_HOST_NETWORK),
    chart_value(
        HI,
        "controller.daemonset.useHostPort",
        "controller.hostPort.enabled",
        "DaemonSet only",
    ),
    chart_value(
        HI,
        "controller.daemonset.hostPorts.http",
        "controller.hostPort.ports.http",
        "",
    ),
    chart_value(
        HI,
        "controller.daemonset.hostPorts.https",
        "controller.hostPort.ports.https",
        "",
    ),
    chart_value(
        HI,
        "controller.daemonset.hostPorts.tcp",
        "-",
        "every port of `tcpServices` gets its hostPort with `controller.hostPort.enabled`",
    ),
    chart_value(
        HI,
        "controller.service.externalTrafficPolicy",
        "service.externalTrafficPolicy",
        "",
    ),
    chart_value(HI, "controller.tcp", "tcpServices", TCP_PORT_BINDS),
    chart_value(
        HI,
        "controller.config.use-proxy-protocol",
        "config.use-proxy-protocol",
        PROXY_NEEDS_PEERS,
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotations::keys::{KEYS, find_key};

    fn refused(result: Parsed<Option<String>>) -> ValueError {
        result.expect_err("refused")
    }

    #[test]
    fn every_implied_value_is_a_valid_value_of_a_key() {
        for key in KEYS {
            for peer in key.peers {
                assert!(peer.ecosystem != Ecosystem::Tugboat, "{}", peer.name);
                for (name, value) in peer.implies {
                    let spec = find_key(name).unwrap_or_else(|| panic!("{name} is a key"));
                    assert_eq!((spec.check)(value), Ok(()), "{name}: {value}");
                }
            }
        }
    }

    #[test]
    fn not_supported_keys_are_not_aliases() {
        for (ecosystem, name, _) in NOT_SUPPORTED {
            assert!(
                !KEYS
                    .iter()
                    .flat_map(|k| k.peers)
                    .any(|p| p.ecosystem == *ecosystem && p.name == *name),
                "{ecosystem} {name}"
            );
        }
    }

    #[test]
    fn unlimited_body_size_is_no_limit() {
        assert_eq!(unlimited_as_zero("unlimited", "ns"), Ok(Some("0".into())));
        assert_eq!(unlimited_as_zero("10m", "ns"), Ok(Some("10m".into())));
    }

    #[test]
    fn unitless_seconds_get_a_unit() {
        assert_eq!(unitless_seconds("120", "ns"), Ok(Some("120s".into())));
    }

    #[test]
    fn unitless_seconds_refuse_a_unit_or_a_sign() {
        for value in ["120s", "-1", "", "1.5"] {
            assert!(
                matches!(
                    refused(unitless_seconds(value, "ns")),
                    ValueError::NotPeerValue(_)
                ),
                "{value}"
            );
        }
    }

    #[test]
    fn durations_become_whole_seconds() {
        assert_eq!(duration_as_seconds("1m", "ns"), Ok(Some("60".into())));
        assert_eq!(duration_as_seconds("1500ms", "ns"), Ok(Some("1".into())));
        assert_eq!(duration_as_seconds("2h", "ns"), Ok(Some("7200".into())));
        assert_eq!(duration_as_seconds("30", "ns"), Ok(Some("30".into())));
    }

    #[test]
    fn durations_refuse_other_units() {
        for value in ["1d", "m", "1 m"] {
            assert!(
                matches!(
                    refused(duration_as_seconds(value, "ns")),
                    ValueError::NotPeerValue(_)
                ),
                "{value}"
            );
        }
    }

    #[test]
    fn a_secret_path_in_the_own_namespace_is_its_name() {
        assert_eq!(
            secret_in_own_namespace("shop/users", "shop"),
            Ok(Some("users".into()))
        );
        assert_eq!(
            secret_in_own_namespace("users", "shop"),
            Ok(Some("users".into()))
        );
    }

    #[test]
    fn a_secret_of_another_namespace_is_refused() {
        assert!(matches!(
            refused(secret_in_own_namespace("other/users", "shop")),
            ValueError::NotPeerValue(_)
        ));
    }

    #[test]
    fn ingress_nginx_auth_type_basic_only() {
        assert_eq!(nginx_auth_type("basic", ""), Ok(Some("basic-auth".into())));
        assert!(matches!(
            refused(nginx_auth_type("digest", "")),
            ValueError::NotPeerValue(_)
        ));
    }

    #[test]
    fn ingress_nginx_auth_secret_types_are_both_read() {
        assert_eq!(nginx_auth_secret_type("auth-map", ""), Ok(None));
        assert_eq!(nginx_auth_secret_type("auth-file", ""), Ok(None));
        assert!(matches!(
            refused(nginx_auth_secret_type("ldap", "")),
            ValueError::NotPeerValue(_)
        ));
    }

    #[test]
    fn ingress_nginx_redirect_keys() {
        assert_eq!(nginx_ssl_redirect("true", ""), Ok(None));
        assert_eq!(nginx_ssl_redirect("false", ""), Ok(Some("false".into())));
        assert_eq!(
            nginx_force_ssl_redirect("true", ""),
            Ok(Some("true".into()))
        );
        assert_eq!(nginx_force_ssl_redirect("false", ""), Ok(None));
        assert!(matches!(
            refused(nginx_ssl_redirect("yes", "")),
            ValueError::NotPeerValue(_)
        ));
        assert!(matches!(
            refused(nginx_force_ssl_redirect("1", "")),
            ValueError::NotPeerValue(_)
        ));
    }

    #[test]
    fn ingress_nginx_backend_protocols() {
        let both = |v: &str| (nginx_backend_tls(v, ""), nginx_backend_proto(v, ""));
        let some = |s: &str| Ok(Some(s.to_string()));
        assert_eq!(both("HTTP"), (some("false"), some("h1")));
        assert_eq!(both("https"), (some("true"), some("h1")));
        assert_eq!(both("GRPC"), (some("false"), some("h2")));
        assert_eq!(both("GRPCS"), (some("true"), some("h2")));
    }

    #[test]
    fn ingress_nginx_backend_protocols_tugboat_does_not_speak_are_refused() {
        for value in ["FCGI", "AUTO_HTTP"] {
            assert!(matches!(
                refused(nginx_backend_tls(value, "")),
                ValueError::NotPeerValue(_)
            ));
            assert!(matches!(
                refused(nginx_backend_proto(value, "")),
                ValueError::NotPeerValue(_)
            ));
        }
    }

    #[test]
    fn ingress_nginx_redirects_take_absolute_urls_only() {
        assert_eq!(
            absolute_url("https://example.com/new", ""),
            Ok(Some("https://example.com/new".into()))
        );
        assert!(matches!(
            refused(absolute_url("example.com", "")),
            ValueError::NotPeerValue(_)
        ));
    }

    #[test]
    fn ingress_nginx_forwarded_prefix_is_a_request_header() {
        assert_eq!(
            forwarded_prefix_header("/api", ""),
            Ok(Some("X-Forwarded-Prefix /api".into()))
        );
    }

    #[test]
    fn ingress_nginx_forwarded_prefix_is_one_line() {
        assert!(matches!(
            refused(forwarded_prefix_header("/api\nX-Admin yes", "")),
            ValueError::NotPeerValue(_)
        ));
        assert!(matches!(
            refused(forwarded_prefix_header(" ", "")),
            ValueError::NotPeerValue(_)
        ));
    }

    #[test]
    fn haproxytech_proxy_protocol_versions() {
        assert_eq!(
            haproxytech_proxy_protocol("proxy", ""),
            Ok(Some("v1".into()))
        );
        assert_eq!(
            haproxytech_proxy_protocol("proxy-v2", ""),
            Ok(Some("v2".into()))
        );
        assert!(matches!(
            refused(haproxytech_proxy_protocol("proxy-v2-ssl", "")),
            ValueError::NotPeerValue(_)
        ));
    }
}
