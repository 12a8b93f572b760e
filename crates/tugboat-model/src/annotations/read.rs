//! What the keys say, read through a [`Resolver`]: the features of routes, the options
//! of backends, the ConfigMap's process-wide settings. Every value comes from a typed
//! [`Key`](super::keys::Key) and every default from its definition.

use std::collections::BTreeMap;

use super::keys::*;
use super::layer::Resolver;
use super::parse::{AccessList, AffinityCanaryBehavior, BackendPath, ConfigMapKeyRef};
use crate::features::{
    BackendOptions, CanaryRules, ClientLimits, Cors, CorsOrigins, ExternalAuth, ForwardedHeaders,
    GlobalOptions, HealthCheck, Hsts, HttpsRedirect, PersistenceCookie, RateLimit, Redirect,
    RedirectWhen, RouteFeatures, ServerTls, Snippet, VerifyClient,
};
use crate::problem::{ObjectProblem, ObjectRef, ProblemReason};
use crate::validate;

/// What the route keys say, besides the features: what the builder must look up.
#[derive(Debug, Clone, Default)]
pub struct RouteLookups {
    /// When basic authentication is on: the name of its Secret (if valid).
    pub auth_secret: Option<Option<String>>,
    /// Access lists kept in ConfigMaps.
    pub allow_ref: Option<ConfigMapKeyRef>,
    pub deny_ref: Option<ConfigMapKeyRef>,
    /// Client certificates: what the keys say, the CA's Secret still to be looked up.
    pub client_certificates: Option<ClientCertificateKeys>,
}

/// The `auth-tls-*` keys of routes that ask for client certificates.
#[derive(Debug, Clone)]
pub struct ClientCertificateKeys {
    /// The name of the Secret with `ca.crt` (and `ca.crl`), in the routes' namespace.
    pub secret: String,
    pub verify: VerifyClient,
    pub error_page: Option<String>,
    pub pass_certificate: bool,
    pub match_subject: Option<String>,
}

/// The hosts the routes of one feature set are served for, as far as the keys care.
#[derive(Debug, Clone, Copy)]
pub struct ServedHosts<'a> {
    /// The Ingress or route whose rules these are.
    pub owner: &'a ObjectRef,
    /// Every host is exact: no rule without a host, no wildcard (`server-alias` hosts
    /// included), so a request's Host is one the owner named.
    pub exact: bool,
}

/// What the route keys say, except what lives in other objects (the Secret of
/// `auth-secret`, `configmap:` access lists), which the builder looks up.
pub fn route_features(
    resolver: &mut Resolver<'_>,
    hosts: ServedHosts<'_>,
) -> (RouteFeatures, RouteLookups) {
    let mut features = RouteFeatures::default();
    let above_config_map = [Scope::Service, Scope::Ingress];
    let when = resolver.get_in(&SSL_REDIRECT, &above_config_map);
    let code = resolver.get_in(&SSL_REDIRECT_CODE, &above_config_map);
    let port = resolver.get_in(&SSL_REDIRECT_PORT, &above_config_map);
    if when.is_some() || code.is_some() || port.is_some() {
        let config_map = [Scope::ConfigMap];
        let code = code
            .or_else(|| resolver.get_in(&SSL_REDIRECT_CODE, &config_map))
            .or_else(|| resolver.get_in(&HTTP_REDIRECT_CODE, &config_map));
        features.https_redirect = Some(HttpsRedirect {
            when: match when {
                Some(true) => RedirectWhen::Always,
                Some(false) => RedirectWhen::Never,
                None => RedirectWhen::TlsHostsOnly,
            },
            code: SSL_REDIRECT_CODE.or_default(code),
            port: port.or_else(|| resolver.get_in(&SSL_REDIRECT_PORT, &config_map)),
        });
    }
    if resolver.get_or_default(&HSTS) {
        features.hsts = Some(Hsts {
            max_age: resolver.get_or_default(&HSTS_MAX_AGE),
            include_subdomains: resolver.get_or_default(&HSTS_INCLUDE_SUBDOMAINS),
            preload: resolver.get_or_default(&HSTS_PRELOAD),
        });
    }
    if let Some(target) = resolver.get(&REQUEST_REDIRECT) {
        let code = resolver.get_or_default(&REQUEST_REDIRECT_CODE);
        features.redirect = Some(Redirect { target, code });
    }
    features.app_root = resolver.get(&APP_ROOT);
    features.max_body_size = resolver.get(&PROXY_BODY_SIZE).flatten();
    features.original_path = resolver.get_or_default(&BACKEND_PATH) == BackendPath::Original;
    features.path_rewrite = resolver.get(&PATH_REWRITE);
    features.set_host = resolver.get(&SET_HOST);
    features.request_headers = resolver.get(&REQUEST_SET_HEADER).unwrap_or_default();
    features.response_headers = resolver.get(&RESPONSE_SET_HEADER).unwrap_or_default();
    if resolver.get_or_default(&CORS_ENABLE) {
        let origins = resolver.get_or_default(&CORS_ALLOW_ORIGIN);
        // Browsers refuse credentials from an answer that allows any origin (`*`), and
        // allowing each request's own `Origin` instead would let every site read
        // credentialed answers: with `*`, credentials are not offered.
        let credentials = resolver.get_or_default(&CORS_ALLOW_CREDENTIALS)
            && !matches!(origins, CorsOrigins::Any);
        features.cors = Some(Cors {
            origins,
            methods: resolver.get_or_default(&CORS_ALLOW_METHODS),
            headers: resolver.get_or_default(&CORS_ALLOW_HEADERS),
            credentials,
            max_age: resolver.get_or_default(&CORS_MAX_AGE),
        });
    }
    let mut lookups = RouteLookups::default();
    match resolver.get(&ALLOW_LIST) {
        Some(AccessList::Inline(list)) => features.allow_list = list,
        Some(AccessList::ConfigMap(reference)) => lookups.allow_ref = Some(reference),
        None => {}
    }
    match resolver.get(&DENY_LIST) {
        Some(AccessList::Inline(list)) => features.deny_list = list,
        Some(AccessList::ConfigMap(reference)) => lookups.deny_ref = Some(reference),
        None => {}
    }
    if let Some(requests) = resolver.get(&RATE_LIMIT_REQUESTS) {
        features.rate_limit = Some(RateLimit {
            requests,
            period: resolver.get_or_default(&RATE_LIMIT_PERIOD),
            status: resolver.get_or_default(&RATE_LIMIT_STATUS_CODE),
        });
    }
    let requests_per_second = resolver.get(&LIMIT_RPS).map(|rate| {
        let multiplier = resolver.get_or_default(&LIMIT_BURST_MULTIPLIER);
        (rate, rate.saturating_mul(multiplier))
    });
    if requests_per_second.is_none() {
        resolver.refuse(
            &LIMIT_BURST_MULTIPLIER.spec,
            &[Scope::Service, Scope::Ingress],
            ProblemReason::InvalidField,
            "it needs limit-rps",
        );
    }
    let connections = resolver.get(&LIMIT_CONNECTIONS);
    if requests_per_second.is_some() || connections.is_some() {
        features.client_limits = Some(ClientLimits {
            requests_per_second,
            connections,
            exempt: resolver.get(&LIMIT_ALLOWLIST).unwrap_or_default(),
        });
    } else {
        resolver.refuse(
            &LIMIT_ALLOWLIST.spec,
            &[Scope::Service, Scope::Ingress],
            ProblemReason::InvalidField,
            "it needs limit-rps or limit-connections",
        );
    }
    let needs_client_address = !features.allow_list.is_empty()
        || !features.deny_list.is_empty()
        || lookups.allow_ref.is_some()
        || lookups.deny_ref.is_some()
        || features.rate_limit.is_some()
        || features.client_limits.is_some();
    if needs_client_address {
        features.src_ip_header = resolver.get(&SRC_IP_HEADER);
    }
    if resolver.get(&AUTH_TYPE).is_some() {
        lookups.auth_secret = Some(resolver.get(&AUTH_SECRET));
    }
    features.external_auth = external_auth(resolver, hosts);
    lookups.client_certificates = client_certificate_keys(resolver);
    (features, lookups)
}

/// `auth-tls-secret` and the keys that go with it; those keys alone are refused.
fn client_certificate_keys(resolver: &mut Resolver<'_>) -> Option<ClientCertificateKeys> {
    let scopes = [Scope::Ingress];
    let with_secret = [
        &AUTH_TLS_VERIFY_CLIENT.spec,
        &AUTH_TLS_VERIFY_DEPTH.spec,
        &AUTH_TLS_ERROR_PAGE.spec,
        &AUTH_TLS_PASS_CERTIFICATE.spec,
        &AUTH_TLS_MATCH_CN.spec,
    ];
    let Some(secret) = resolver.get(&AUTH_TLS_SECRET) else {
        if resolver.refused_restriction {
            return None;
        }
        // A verification asked for without a CA cannot be honoured: fail closed.
        let verifies = resolver
            .get(&AUTH_TLS_VERIFY_CLIENT)
            .is_some_and(|verify| verify != VerifyClient::Off)
            || resolver.get(&AUTH_TLS_MATCH_CN).is_some();
        let why = if verifies {
            resolver.refused_restriction = true;
            "it needs auth-tls-secret; the routes refuse every request (403) until they have one"
        } else {
            "it needs auth-tls-secret"
        };
        for key in with_secret {
            resolver.refuse(key, &scopes, ProblemReason::InvalidField, why);
        }
        return None;
    };
    let verify = resolver.get_or_default(&AUTH_TLS_VERIFY_CLIENT);
    // Read for its problems only: haproxy has no per-host verification depth.
    let _ = resolver.get(&AUTH_TLS_VERIFY_DEPTH);
    if verify == VerifyClient::Off {
        return None;
    }
    Some(ClientCertificateKeys {
        secret,
        verify,
        error_page: resolver.get(&AUTH_TLS_ERROR_PAGE),
        pass_certificate: resolver.get_or_default(&AUTH_TLS_PASS_CERTIFICATE),
        match_subject: resolver.get(&AUTH_TLS_MATCH_CN),
    })
}

/// `auth-url` and the keys that go with it; those keys alone are refused. `$host` in
/// the host of `auth-url` is refused (the routes fail closed) unless every host is
/// exact: on a route that takes any Host the client would choose the authentication
/// service. `auth-signin` keeps it: it sends the client back to the host it asked for.
fn external_auth(resolver: &mut Resolver<'_>, hosts: ServedHosts<'_>) -> Option<ExternalAuth> {
    let all = [Scope::Service, Scope::Ingress, Scope::ConfigMap];
    let Some((url, source)) = resolver.get_sourced(&AUTH_URL, &all) else {
        for key in [
            &AUTH_METHOD.spec,
            &AUTH_RESPONSE_HEADERS.spec,
            &AUTH_SIGNIN.spec,
        ] {
            resolver.refuse(key, &all, ProblemReason::InvalidField, "it needs auth-url");
        }
        return None;
    };
    let host_in_authority = validate::authority_variables(&url)
        .unwrap_or_default()
        .contains(&validate::AUTHORITY_VARIABLE);
    if host_in_authority && !hosts.exact {
        let owner = if *hosts.owner == source {
            format!("this {}", hosts.owner.kind)
        } else {
            hosts.owner.to_string()
        };
        let why = format!(
            "${} stands in the URL's host, and {owner} serves it on a rule without an \
             exact host (no host, or a wildcard), so the client would choose the \
             authentication service with its Host header; use it on rules with exact \
             hosts only",
            validate::AUTHORITY_VARIABLE
        );
        resolver.refuse_value(&AUTH_URL.spec, &source, &why);
        return None;
    }
    Some(ExternalAuth {
        url,
        method: resolver.get_or_default(&AUTH_METHOD),
        response_headers: resolver.get(&AUTH_RESPONSE_HEADERS).unwrap_or_default(),
        signin: resolver.get(&AUTH_SIGNIN),
    })
}

/// What the canary keys of an Ingress say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanarySettings {
    pub rules: CanaryRules,
    /// `canary-weight` out of `canary-weight-total`, in millionths.
    pub per_million: u32,
    /// `affinity-canary-behavior: sticky` (the default) rather than `legacy`.
    pub affinity_sticky: bool,
}

const CANARY_DETAIL_KEYS: [&KeySpec; 7] = [
    &AFFINITY_CANARY_BEHAVIOR.spec,
    &CANARY_WEIGHT.spec,
    &CANARY_WEIGHT_TOTAL.spec,
    &CANARY_BY_HEADER.spec,
    &CANARY_BY_HEADER_VALUE.spec,
    &CANARY_BY_HEADER_PATTERN.spec,
    &CANARY_BY_COOKIE.spec,
];

/// The canary keys of one Ingress (read on the Ingress only): `None` when it is not a
/// canary, and then its other canary keys are refused with a problem.
pub fn canary(resolver: &mut Resolver<'_>) -> Option<CanarySettings> {
    let ingress = [Scope::Ingress];
    if !resolver.get_in(&CANARY, &ingress).unwrap_or(false) {
        for key in CANARY_DETAIL_KEYS {
            resolver.refuse(
                key,
                &ingress,
                ProblemReason::InvalidField,
                "it needs canary: \"true\"",
            );
        }
        return None;
    }
    let header = resolver.get_in(&CANARY_BY_HEADER, &ingress);
    let (header_value, header_pattern) = if header.is_some() {
        let value = resolver.get_in(&CANARY_BY_HEADER_VALUE, &ingress);
        // As in ingress-nginx, a value makes the pattern unused.
        let pattern = if value.is_some() {
            resolver.refuse(
                &CANARY_BY_HEADER_PATTERN.spec,
                &ingress,
                ProblemReason::InvalidField,
                "canary-by-header-value takes precedence",
            );
            None
        } else {
            resolver.get_in(&CANARY_BY_HEADER_PATTERN, &ingress)
        };
        (value, pattern)
    } else {
        for key in [&CANARY_BY_HEADER_VALUE.spec, &CANARY_BY_HEADER_PATTERN.spec] {
            resolver.refuse(
                key,
                &ingress,
                ProblemReason::InvalidField,
                "it needs canary-by-header",
            );
        }
        (None, None)
    };
    let cookie = resolver.get_in(&CANARY_BY_COOKIE, &ingress);
    let weight = resolver.get_in(&CANARY_WEIGHT, &ingress);
    let total = resolver.get_in(&CANARY_WEIGHT_TOTAL, &ingress);
    Some(CanarySettings {
        rules: CanaryRules {
            header,
            header_value,
            header_pattern,
            cookie,
            affinity: None,
        },
        affinity_sticky: resolver
            .get_in(&AFFINITY_CANARY_BEHAVIOR, &ingress)
            .unwrap_or(AffinityCanaryBehavior::Sticky)
            == AffinityCanaryBehavior::Sticky,
        per_million: crate::desired::Canary::per_million(
            CANARY_WEIGHT.or_default(weight),
            CANARY_WEIGHT_TOTAL.or_default(total),
        ),
    })
}

/// The realm of basic authentication.
pub fn auth_realm(resolver: &mut Resolver<'_>) -> String {
    resolver.get_or_default(&AUTH_REALM)
}

/// What the backend keys say, besides the options: the Secrets the builder must look up.
#[derive(Debug, Clone, Default)]
pub struct BackendLookups {
    /// `server-ca`: a Secret with `ca.crt`.
    pub server_ca: Option<String>,
    /// `server-crt`: a TLS Secret.
    pub server_crt: Option<String>,
    /// `server-ssl-name` (else the builder uses the Service's name).
    pub server_name: Option<String>,
    /// `server-verify: true` without `server-ca`: the backend must not talk to
    /// unverified servers.
    pub verify_without_ca: bool,
}

const SNIPPETS_OFF: &str =
    "raw snippets are off; the operator can allow them with --allow-snippets";

/// Whether a `backend-config-snippet` the routes' layers set, not applied because raw
/// snippets are off, restricts access (a line that denies, authenticates, limits):
/// those routes then fail closed as for any restriction Tugboat cannot honour.
pub fn refused_snippet_restricts(resolver: &Resolver<'_>) -> bool {
    let all = [Scope::Service, Scope::Ingress, Scope::ConfigMap];
    resolver
        .raw_values(&BACKEND_CONFIG_SNIPPET.spec, &all)
        .into_iter()
        .any(|(_, _, value)| super::snippet::restriction(value).is_some())
}

/// What the backend keys say. Snippets only when `allow_snippets`.
pub fn backend_options(
    resolver: &mut Resolver<'_>,
    allow_snippets: bool,
) -> (BackendOptions, BackendLookups) {
    let all = [Scope::Service, Scope::Ingress, Scope::ConfigMap];
    let mut lookups = BackendLookups::default();
    let tls = resolver.get_or_default(&SERVER_SSL);
    if tls {
        let ca = resolver.get(&SERVER_CA);
        match resolver.get(&SERVER_VERIFY) {
            Some(false) => {}
            Some(true) if ca.is_none() => lookups.verify_without_ca = true,
            _ => lookups.server_ca = ca,
        }
        lookups.server_crt = resolver.get(&SERVER_CRT);
        lookups.server_name = resolver.get(&SERVER_SSL_NAME);
    } else {
        for key in [
            &SERVER_CA.spec,
            &SERVER_CRT.spec,
            &SERVER_SSL_NAME.spec,
            &SERVER_VERIFY.spec,
        ] {
            resolver.refuse(
                key,
                &all,
                ProblemReason::InvalidField,
                "it needs server-ssl: \"true\"",
            );
        }
    }
    let check_path = resolver.get(&CHECK_HTTP);
    let check = resolver.get_or_default(&CHECK) || check_path.is_some();
    let health_check = check.then(|| HealthCheck {
        http_path: check_path,
        interval: resolver.get(&CHECK_INTERVAL),
    });
    let snippet = if allow_snippets {
        resolver
            .get_sourced(&BACKEND_CONFIG_SNIPPET, &all)
            .map(|(lines, source)| Snippet { lines, source })
    } else {
        let refused: Vec<(ObjectRef, String, Option<String>)> = resolver
            .raw_values(&BACKEND_CONFIG_SNIPPET.spec, &all)
            .into_iter()
            .map(|(object, field, value)| {
                let restricts = super::snippet::restriction(value);
                (object.clone(), field.to_string(), restricts)
            })
            .collect();
        for (object, field, restricts) in refused {
            let key = BACKEND_CONFIG_SNIPPET.spec.name;
            let message = match restricts {
                None => format!("key '{key}' is ignored: {SNIPPETS_OFF}"),
                Some(line) => format!(
                    "key '{key}' is not applied: {SNIPPETS_OFF}; its {line} restricts \
                     access, so its routes answer 403 to every request (unless the operator \
                     runs with --unsupported-access-keys=ignore)"
                ),
            };
            resolver.problems.push(ObjectProblem {
                object,
                field,
                reason: ProblemReason::NotAllowed,
                message,
            });
        }
        None
    };
    let options = BackendOptions {
        tls: tls.then(ServerTls::default),
        h2: resolver.get_or_default(&SERVER_PROTO),
        health_check,
        cookie: persistence_cookie(resolver),
        blocked: false,
        snippet,
        balance: resolver.get(&LOAD_BALANCE),
        send_proxy: resolver.get(&SEND_PROXY_PROTOCOL),
        timeout_server: resolver.get(&TIMEOUT_SERVER),
        timeout_connect: resolver.get(&TIMEOUT_CONNECT),
        tls_passthrough: false,
        tcp_service: false,
    };
    (options, lookups)
}

const SESSION_COOKIE_KEYS: [&KeySpec; 4] = [
    &SESSION_COOKIE_NAME.spec,
    &SESSION_COOKIE_PATH.spec,
    &SESSION_COOKIE_MAX_AGE.spec,
    &SESSION_COOKIE_EXPIRES.spec,
];

/// The persistence cookie: `cookie-persistence` (a name only), else `affinity: cookie`
/// with the `session-cookie-*` attributes. The attributes without `affinity` are
/// refused with a problem.
fn persistence_cookie(resolver: &mut Resolver<'_>) -> Option<PersistenceCookie> {
    let all = [Scope::Service, Scope::Ingress, Scope::ConfigMap];
    if let Some(name) = resolver.get(&COOKIE_PERSISTENCE) {
        for key in std::iter::once(&AFFINITY.spec).chain(SESSION_COOKIE_KEYS) {
            resolver.refuse(
                key,
                &all,
                ProblemReason::InvalidField,
                "cookie-persistence takes precedence",
            );
        }
        return Some(PersistenceCookie::named(name));
    }
    if resolver.get(&AFFINITY).is_none() {
        for key in SESSION_COOKIE_KEYS {
            resolver.refuse(
                key,
                &all,
                ProblemReason::InvalidField,
                "it needs affinity: cookie",
            );
        }
        return None;
    }
    let max_age = resolver.get(&SESSION_COOKIE_MAX_AGE);
    let expires = resolver.get(&SESSION_COOKIE_EXPIRES);
    Some(PersistenceCookie {
        name: resolver.get_or_default(&SESSION_COOKIE_NAME),
        http_only: true,
        path: resolver.get(&SESSION_COOKIE_PATH),
        max_age: max_age.or(expires),
        canary: false,
    })
}

/// What the ConfigMap-only keys say. Snippets only when `allow_snippets`.
pub fn global_options(resolver: &mut Resolver<'_>, allow_snippets: bool) -> GlobalOptions {
    let cm = [Scope::ConfigMap];
    let mut timeouts = BTreeMap::new();
    for (name, key) in TIMEOUTS {
        if let Some(value) = resolver.get_in(key, &cm) {
            timeouts.insert(name.to_string(), value);
        }
    }
    let snippet = if allow_snippets {
        resolver
            .get_sourced(&GLOBAL_CONFIG_SNIPPET, &cm)
            .map(|(lines, source)| Snippet { lines, source })
    } else {
        resolver.refuse(
            &GLOBAL_CONFIG_SNIPPET.spec,
            &cm,
            ProblemReason::NotAllowed,
            SNIPPETS_OFF,
        );
        None
    };
    // Read in the order of the fields, so problems come in that order.
    let syslog_server = resolver.get_in(&SYSLOG_SERVER, &cm);
    let log_format = resolver.get_in(&LOG_FORMAT, &cm);
    let log_format_json = resolver.get_in(&LOG_FORMAT_JSON, &cm);
    let strict_sni = resolver.get_in(&CLIENT_STRICT_SNI, &cm);
    let ssl_redirect_code = resolver.get_in(&SSL_REDIRECT_CODE, &cm);
    let http_redirect_code = resolver.get_in(&HTTP_REDIRECT_CODE, &cm);
    let ssl_redirect_port = resolver.get_in(&SSL_REDIRECT_PORT, &cm);
    let no_tls_redirect_locations = resolver.get_in(&NO_TLS_REDIRECT_LOCATIONS, &cm);
    let backend_path = resolver.get_in(&BACKEND_PATH, &cm);
    let (forwarded, proxy_protocol_from) = client_address(resolver);
    GlobalOptions {
        timeouts,
        syslog_server: SYSLOG_SERVER.or_default(syslog_server),
        log_format,
        log_format_json: LOG_FORMAT_JSON.or_default(log_format_json),
        strict_sni: CLIENT_STRICT_SNI.or_default(strict_sni),
        ssl_redirect_code: SSL_REDIRECT_CODE.or_default(ssl_redirect_code.or(http_redirect_code)),
        ssl_redirect_port,
        no_tls_redirect_locations: NO_TLS_REDIRECT_LOCATIONS.or_default(no_tls_redirect_locations),
        snippet,
        original_path: BACKEND_PATH.or_default(backend_path) == BackendPath::Original,
        forwarded,
        proxy_protocol_from,
    }
}

/// `use-forwarded-headers`, `use-proxy-protocol` and the keys that go with them. Without
/// trusted peers (`proxy-real-ip-cidr`) nothing is trusted, and the keys say so: an
/// allow-list then sees the peer (fails closed) rather than an address any client could
/// write.
fn client_address(resolver: &mut Resolver<'_>) -> (Option<ForwardedHeaders>, Option<Vec<String>>) {
    let cm = [Scope::ConfigMap];
    let forwarded = resolver.get_in(&USE_FORWARDED_HEADERS, &cm);
    let header = resolver.get_in(&FORWARDED_FOR_HEADER, &cm);
    let trusted = resolver.get_in(&PROXY_REAL_IP_CIDR, &cm);
    let full = resolver.get_in(&COMPUTE_FULL_FORWARDED_FOR, &cm);
    let proxy_protocol = resolver.get_in(&USE_PROXY_PROTOCOL, &cm);
    let mut trusted_for = |key: &Key<bool>, enabled: Option<bool>| {
        if !key.or_default(enabled) {
            return None;
        }
        if trusted.is_none() {
            resolver.refuse(
                &key.spec,
                &cm,
                ProblemReason::InvalidField,
                "no peer is trusted: set proxy-real-ip-cidr to the addresses of the load balancers in front",
            );
        }
        trusted.clone()
    };
    let forwarded =
        trusted_for(&USE_FORWARDED_HEADERS, forwarded).map(|trusted| ForwardedHeaders {
            header: FORWARDED_FOR_HEADER.or_default(header),
            trusted,
            full: COMPUTE_FULL_FORWARDED_FOR.or_default(full),
        });
    let proxy_protocol_from = trusted_for(&USE_PROXY_PROTOCOL, proxy_protocol);
    (forwarded, proxy_protocol_from)
}
