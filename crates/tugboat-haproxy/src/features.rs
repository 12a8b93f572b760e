//! The haproxy rules of the route features: one rule per distinct setting, guarded by
//! the feature sets that have it.
//!
//! The route maps' values are `<backend>.<feature set id>` (or just the backend), so the
//! frontend knows, after the route lookup, which set applies (`txn.fs`); a route with a
//! canary adds `.<canary backend>.<share in millionths>` (see `canary`). Each rule here
//! tests that variable against the ids of the sets that share one value of one
//! feature: the config grows with distinct settings, and a route that moves to another
//! existing set changes only a map entry. Values come validated from the model and are
//! written as they are.
//!
//! [`WRITERS`] lists the writers in the order their rules are written: each says the
//! [`Phase`] it writes into, and the phases keep the order haproxy meets them.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use tugboat_model::Desired;
use tugboat_model::features::{
    CANARY_COOKIE_PREFIX, Cors, CorsOrigins, FeatureSetId, GlobalOptions, RedirectTarget,
    RedirectWhen, RouteFeatures,
};

use crate::rules::{FEATURE_SEPARATOR, FeatureRules, Phase, Writer, group, group_of, sets_acl};
use crate::settings::RenderSettings;
use crate::{
    body_limit, client_certs, error_backend, external_auth, gateway_features, request_stats,
};

/// The writers of the features' rules, in the order of their phases; writers of one
/// phase write in the order listed here.
pub const WRITERS: &[Writer] = &[
    (Phase::Dispatch, |d, _, out| {
        gateway_features::dispatch(&d.feature_sets, out)
    }),
    (Phase::Deny, deny_all),
    (Phase::BodySize, |d, _, out| {
        body_limit::request_rules(d, out)
    }),
    (Phase::Answer, answers),
    (Phase::ClientAddress, client_address),
    (Phase::Lists, address_lists),
    (Phase::Lists, pattern_files),
    (Phase::Canary, canary),
    (Phase::GatewayBackend, |d, _, out| {
        gateway_features::splits(&d.feature_sets, out)
    }),
    (Phase::GatewayBackend, |d, _, out| {
        gateway_features::server_timeouts(&d.feature_sets, out)
    }),
    (Phase::Metrics, |_, _, out| request_stats::track_rules(out)),
    (Phase::Redirects, redirects),
    (Phase::Redirects, app_root),
    (Phase::Redirects, https_redirects),
    (Phase::GatewayRedirect, |d, _, out| {
        gateway_features::redirects(&d.feature_sets, out)
    }),
    (Phase::HttpsException, default_https_redirect),
    (Phase::Limits, rate_limits),
    (Phase::Limits, client_limits),
    (Phase::Cors, cors_preflight),
    (Phase::Auth, client_certs::request_rules),
    (Phase::Auth, basic_auth),
    (Phase::Auth, |d, _, out| {
        external_auth::rules(&d.feature_sets, out)
    }),
    (Phase::Rewrite, path_rewrite),
    (Phase::Rewrite, set_host),
    (Phase::Rewrite, request_headers),
    (Phase::Rewrite, |d, _, out| {
        gateway_features::host_rewrites(&d.feature_sets, out)
    }),
    (Phase::Rewrite, |d, _, out| {
        gateway_features::path_rewrites(&d.feature_sets, out)
    }),
    (Phase::Rewrite, |d, _, out| {
        gateway_features::request_headers(&d.feature_sets, out)
    }),
    (Phase::Fallback, |d, _, out| {
        error_backend::request_rules(d, out)
    }),
    (Phase::Response, cors_response),
    (Phase::Response, hsts),
    (Phase::Response, response_headers),
    (Phase::Response, |d, _, out| {
        gateway_features::response_headers(&d.feature_sets, out)
    }),
    (Phase::Response, error_backend::response_rules),
    (Phase::Switching, |d, _, out| {
        body_limit::switching_rules(d, out)
    }),
    (Phase::Sections, rate_tables),
    (Phase::Sections, client_limit_tables),
    (Phase::Sections, userlists),
    (Phase::Sections, |_, _, out| {
        out.push_str(&request_stats::table_section())
    }),
    (Phase::Sections, |d, s, out| {
        out.push_str(&error_backend::section(d, s))
    }),
    (Phase::Sections, |d, s, out| {
        out.push_str(&body_limit::section(d, s))
    }),
];

/// The rules of the desired state's features, by phase.
pub fn feature_rules(desired: &Desired, settings: &RenderSettings) -> FeatureRules {
    FeatureRules::write(WRITERS, desired, settings)
}

/// The sets for which `has` holds.
fn sets_with(
    sets: &BTreeMap<FeatureSetId, RouteFeatures>,
    has: impl Fn(&RouteFeatures) -> bool,
) -> Vec<&FeatureSetId> {
    sets.iter()
        .filter(|(_, f)| has(f))
        .map(|(id, _)| id)
        .collect()
}

/// Routes whose objects restrict access in a way Tugboat cannot honour: nobody.
fn deny_all(desired: &Desired, _: &RenderSettings, request: &mut String) {
    let denied = sets_with(&desired.feature_sets, |f| f.deny_all);
    if !denied.is_empty() {
        let _ = writeln!(
            request,
            "    http-request deny deny_status 403 if {}",
            sets_acl(&denied)
        );
    }
}

/// Routes that answer by themselves (Gateway API rules without a usable backend).
fn answers(desired: &Desired, _: &RenderSettings, request: &mut String) {
    for (status, ids) in group(&desired.feature_sets, |f| f.answer_status) {
        let _ = writeln!(
            request,
            "    http-request return status {status} if {}",
            sets_acl(&ids)
        );
    }
}

/// The client address for access lists and rate limits.
fn client_address(desired: &Desired, _: &RenderSettings, request: &mut String) {
    let sets = &desired.feature_sets;
    let needs_address = sets.values().any(|f| {
        !f.allow_list.is_empty()
            || !f.deny_list.is_empty()
            || f.allow_file.is_some()
            || f.deny_file.is_some()
            || f.rate_limit.is_some()
            || f.client_limits.is_some()
    });
    if needs_address {
        request.push_str("    http-request set-var(txn.src) src\n");
        for (header, ids) in group(sets, |f| f.src_ip_header.as_deref()) {
            let _ = writeln!(
                request,
                "    http-request set-var(txn.src) req.hdr_ip({header},-1) if {}",
                sets_acl(&ids)
            );
        }
    }
}

/// Access lists written in the sets.
fn address_lists(desired: &Desired, _: &RenderSettings, request: &mut String) {
    let sets = &desired.feature_sets;
    for (list, ids) in group(sets, |f| (!f.deny_list.is_empty()).then_some(&f.deny_list)) {
        let _ = writeln!(
            request,
            "    http-request deny deny_status 403 if {} {{ var(txn.src) -m ip {} }}",
            sets_acl(&ids),
            list.join(" ")
        );
    }
    for (list, ids) in group(sets, |f| {
        (!f.allow_list.is_empty()).then_some(&f.allow_list)
    }) {
        let _ = writeln!(
            request,
            "    http-request deny deny_status 403 if {} !{{ var(txn.src) -m ip {} }}",
            sets_acl(&ids),
            list.join(" ")
        );
    }
}

/// Long access lists, from pattern files.
fn pattern_files(desired: &Desired, settings: &RenderSettings, request: &mut String) {
    let sets = &desired.feature_sets;
    for (file, ids) in group(sets, |f| f.deny_file.as_deref()) {
        let _ = writeln!(
            request,
            "    http-request deny deny_status 403 if {} {{ var(txn.src) -m ip -f {} }}",
            sets_acl(&ids),
            settings.pattern_file(file).display()
        );
    }
    for (file, ids) in group(sets, |f| f.allow_file.as_deref()) {
        let _ = writeln!(
            request,
            "    http-request deny deny_status 403 if {} !{{ var(txn.src) -m ip -f {} }}",
            sets_acl(&ids),
            settings.pattern_file(file).display()
        );
    }
}

/// Canaries (ingress-nginx's order: session affinity, header, cookie, then weight). The route map's
/// value carries the canary's backend and its share in millionths after the feature set
/// (`<backend>.<set>.<canary backend>.<share>`), so that a change of weight is a map
/// update; the header and cookie names are the set's. `txn.to_canary` holds the first
/// decision taken.
fn canary(desired: &Desired, _: &RenderSettings, request: &mut String) {
    let sets = &desired.feature_sets;
    let all: Vec<&FeatureSetId> = sets
        .iter()
        .filter(|(_, f)| f.canary.is_some())
        .map(|(id, _)| id)
        .collect();
    if all.is_empty() {
        return;
    }
    let all = sets_acl(&all);
    let sep = FEATURE_SEPARATOR;
    let _ = writeln!(
        request,
        "    http-request set-var(txn.canary) var(txn.route),field(3,{sep}) if {all}\n    \
         http-request set-var(txn.canary_share) var(txn.route),field(4,{sep}) if {all}"
    );
    let undecided = "!{ var(txn.to_canary) -m found }";
    // Session affinity first, as ingress-nginx: the main backend's cookie keeps its
    // client; with `sticky`, a value of the canary's servers sends it to the canary.
    for (affinity, ids) in group(sets, |f| {
        f.canary.as_ref().and_then(|c| c.affinity.as_ref())
    }) {
        let acl = sets_acl(&ids);
        let cookie = &affinity.cookie;
        if affinity.sticky {
            let _ = writeln!(
                request,
                "    http-request set-var(txn.to_canary) bool(true) if {acl} {{ req.cook({cookie}) -m beg {CANARY_COOKIE_PREFIX} }}"
            );
        }
        let _ = writeln!(
            request,
            "    http-request set-var(txn.to_canary) bool(false) if {acl} {undecided} {{ req.cook({cookie}) -m found }}"
        );
    }
    for (header, ids) in group(sets, |f| f.canary.as_ref().and_then(|c| c.header.as_ref())) {
        for ((value, pattern), ids) in group_of(sets, &ids, |f| {
            f.canary
                .as_ref()
                .map(|c| (c.header_value.as_ref(), c.header_pattern.as_ref()))
        }) {
            let acl = sets_acl(&ids);
            match (value, pattern) {
                (Some(value), _) => {
                    let _ = writeln!(
                        request,
                        "    http-request set-var(txn.to_canary) bool(true) if {acl} {undecided} {{ req.fhdr({header}) -m str {value} }}"
                    );
                }
                (None, Some(pattern)) => {
                    let _ = writeln!(
                        request,
                        "    http-request set-var(txn.to_canary) bool(true) if {acl} {undecided} {{ req.fhdr({header}) -m reg '{pattern}' }}"
                    );
                }
                (None, None) => {
                    let _ = writeln!(
                        request,
                        "    http-request set-var(txn.to_canary) bool(true) if {acl} {undecided} {{ req.fhdr({header}) -m str always }}\n    \
                         http-request set-var(txn.to_canary) bool(false) if {acl} {undecided} {{ req.fhdr({header}) -m str never }}"
                    );
                }
            }
        }
    }
    for (cookie, ids) in group(sets, |f| f.canary.as_ref().and_then(|c| c.cookie.as_ref())) {
        let acl = sets_acl(&ids);
        let _ = writeln!(
            request,
            "    http-request set-var(txn.to_canary) bool(true) if {acl} {undecided} {{ req.cook({cookie}) -m str always }}\n    \
             http-request set-var(txn.to_canary) bool(false) if {acl} {undecided} {{ req.cook({cookie}) -m str never }}"
        );
    }
    // A draw below the share: `share - rand(1000000) > 0`.
    let _ = writeln!(
        request,
        "    http-request set-var(txn.to_canary) bool(true) if {all} {undecided} {{ rand(1000000),neg,add(txn.canary_share) -m int gt 0 }}\n    \
         http-request set-var(txn.backend) var(txn.canary) if {all} {{ var(txn.to_canary) -m bool }} {{ var(txn.canary) -m len gt 0 }}"
    );
}

/// Redirects to a URL or host (`permanent-redirect`, `temporal-redirect`,
/// `from-to-www-redirect`) before the HTTPS redirect, as ingress-nginx answers them
/// (its `return` comes before its HTTPS redirect).
fn redirects(desired: &Desired, _: &RenderSettings, request: &mut String) {
    for (redirect, ids) in group(&desired.feature_sets, |f| f.redirect.as_ref()) {
        let acl = sets_acl(&ids);
        let code = redirect.code;
        match &redirect.target {
            RedirectTarget::Url(url) => {
                let _ = writeln!(
                    request,
                    "    http-request redirect location {url} code {code} if {acl}"
                );
            }
            // `prefix` keeps the path and the query; the scheme is the request's.
            RedirectTarget::Host(host) => {
                let _ = writeln!(
                    request,
                    "    http-request redirect prefix https://{host} code {code} if {acl} {{ ssl_fc }}\n    \
                     http-request redirect prefix http://{host} code {code} if {acl} !{{ ssl_fc }}"
                );
            }
        }
    }
}

/// app-root: the request for `/`, to the same scheme and host (as ingress-nginx's
/// `$scheme://$http_host`), also before the HTTPS redirect (ingress-nginx's server
/// `return` for `/`); the path was validated (no `%` or `$`).
fn app_root(desired: &Desired, _: &RenderSettings, request: &mut String) {
    for (root, ids) in group(&desired.feature_sets, |f| f.app_root.as_deref()) {
        let _ = writeln!(
            request,
            "    http-request redirect location %[ssl_fc,iif(https,http)]://%[req.hdr(host)]{root} code 302 if {} {{ path / }}",
            sets_acl(&ids)
        );
    }
}

/// The condition that keeps the paths of `no-tls-redirect-locations` (ACME HTTP-01
/// challenges by default) out of every HTTPS redirect: the normalized path
/// (`txn.path`) against the listed prefixes, validated by the model (absolute paths
/// without spaces, quotes, `;`, `$` or `%`) and written as they are. Empty when the
/// list is.
fn https_exemption(global: &GlobalOptions) -> String {
    if global.no_tls_redirect_locations.is_empty() {
        return String::new();
    }
    format!(
        " !{{ var(txn.path) -m beg {} }}",
        global.no_tls_redirect_locations.join(" ")
    )
}

/// HTTPS redirects of the sets that decide them.
fn https_redirects(desired: &Desired, _: &RenderSettings, request: &mut String) {
    let exemption = https_exemption(&desired.global);
    let plain = crate::client_address::plain_http(&desired.global);
    for (redirect, ids) in group(&desired.feature_sets, |f| f.https_redirect) {
        let condition = match redirect.when {
            RedirectWhen::Never => continue,
            RedirectWhen::Always => String::new(),
            RedirectWhen::TlsHostsOnly => " { var(txn.tls_host) -m found }".to_string(),
        };
        let target = match redirect.port {
            None => "scheme https".to_string(),
            Some(port) => {
                format!("location https://%[var(txn.host)]:{port}%[capture.req.uri]")
            }
        };
        let _ = writeln!(
            request,
            "    http-request redirect {target} code {} if {plain} {}{condition}{exemption}",
            redirect.code,
            sets_acl(&ids)
        );
    }
}

/// The default HTTPS redirect of TLS hosts, but for the sets that decide it themselves.
fn default_https_redirect(desired: &Desired, _: &RenderSettings, request: &mut String) {
    if !desired.ssl_redirect {
        return;
    }
    let global = &desired.global;
    let target = match global.ssl_redirect_port {
        None => "scheme https".to_string(),
        Some(port) => format!("location https://%[var(txn.host)]:{port}%[capture.req.uri]"),
    };
    let deciding = sets_with(&desired.feature_sets, |f| f.https_redirect.is_some());
    let exception = if deciding.is_empty() {
        String::new()
    } else {
        format!(" !{}", sets_acl(&deciding))
    };
    let _ = writeln!(
        request,
        "    http-request redirect {target} code {} if {} {{ var(txn.tls_host) -m found }}{exception}{}",
        global.ssl_redirect_code,
        crate::client_address::plain_http(global),
        https_exemption(global)
    );
}

/// The stick table of a set with ingress-nginx's limits.
pub fn limit_table(id: &FeatureSetId) -> String {
    format!("tugboat_limit_{id}")
}

/// The stick table of a rate-limited set.
pub fn rate_table(id: &FeatureSetId) -> String {
    format!("tugboat_rate_{id}")
}

/// Rate limits, before authentication so that guessing passwords is limited too.
fn rate_limits(desired: &Desired, _: &RenderSettings, late: &mut String) {
    for (id, features) in &desired.feature_sets {
        if let Some(limit) = &features.rate_limit {
            let acl = sets_acl(&[id]);
            let _ = writeln!(
                late,
                "    http-request track-sc0 var(txn.src) table {} if {acl}\n    \
                 http-request deny deny_status {} if {acl} {{ sc_http_req_rate(0) gt {} }}",
                rate_table(id),
                limit.status,
                limit.requests
            );
        }
    }
}

/// The stick tables of the rate limits.
fn rate_tables(desired: &Desired, _: &RenderSettings, sections: &mut String) {
    for (id, features) in &desired.feature_sets {
        if let Some(limit) = &features.rate_limit {
            let _ = write!(
                sections,
                "\n# Request rates per client address of feature set {id}.\nbackend {}\n    \
                 stick-table type ipv6 size 100k expire {period} store http_req_rate({period})\n",
                rate_table(id),
                period = limit.period
            );
        }
    }
}

/// ingress-nginx's limits: a table per set, with the requests of the last second,
/// whose entries count the requests in progress (`sc_trackers`: nginx's `limit_conn`
/// counts connections with a request in progress) and, for a rate, a counter of the
/// requests of the last 10 seconds.
fn client_limits(desired: &Desired, _: &RenderSettings, late: &mut String) {
    for (id, features) in &desired.feature_sets {
        let Some(limits) = &features.client_limits else {
            continue;
        };
        let mut acl = sets_acl(&[id]);
        if !limits.exempt.is_empty() {
            let _ = write!(
                acl,
                " !{{ var(txn.src) -m ip {} }}",
                limits.exempt.join(" ")
            );
        }
        let table = limit_table(id);
        let _ = writeln!(
            late,
            "    http-request track-sc1 var(txn.src) table {table} if {acl}"
        );
        if let Some(connections) = limits.connections {
            let _ = writeln!(
                late,
                "    http-request deny deny_status 503 if {acl} {{ sc_trackers(1) gt {connections} }}"
            );
        }
        if let Some((rate, burst)) = limits.requests_per_second {
            let _ = writeln!(
                late,
                "    http-request sc-inc-gpc0(1) if {acl}\n    \
                 http-request deny deny_status 503 if {acl} {{ sc_http_req_rate(1) gt {} }}\n    \
                 http-request deny deny_status 503 if {acl} {{ sc_gpc0_rate(1) gt {} }}",
                rate.saturating_add(burst),
                rate.saturating_mul(10).saturating_add(burst),
            );
        }
    }
}

/// The stick tables of ingress-nginx's limits.
fn client_limit_tables(desired: &Desired, _: &RenderSettings, sections: &mut String) {
    for (id, features) in &desired.feature_sets {
        let Some(limits) = &features.client_limits else {
            continue;
        };
        let table = limit_table(id);
        // The requests of the last 10 seconds are a counter of the same entry (stick
        // counter 2 counts the requests per route, see `request_stats`).
        let (ten_seconds, store) = if limits.requests_per_second.is_some() {
            (" and in 10 seconds", ",gpc0_rate(10s)")
        } else {
            ("", "")
        };
        let _ = write!(
            sections,
            "\n# Requests in a second{ten_seconds} and in progress per client address of feature set {id}.\nbackend {table}\n    \
             stick-table type ipv6 size 100k expire 10s store http_req_rate(1s){store}\n",
        );
    }
}

/// The origin a CORS answer names, and the condition on the request's origin.
fn cors_origin(cors: &Cors) -> (String, String) {
    match &cors.origins {
        CorsOrigins::Any => ("*".to_string(), String::new()),
        CorsOrigins::List(list) => (
            "%[var(txn.origin)]".to_string(),
            format!(" {{ var(txn.origin) -m str {} }}", list.join(" ")),
        ),
    }
}

/// CORS: preflight answers (before authentication: browsers send no credentials).
fn cors_preflight(desired: &Desired, _: &RenderSettings, late: &mut String) {
    for (cors, ids) in group(&desired.feature_sets, |f| f.cors.as_ref()) {
        let acl = sets_acl(&ids);
        let _ = writeln!(
            late,
            "    http-request set-var(txn.origin) req.hdr(origin) if {acl}"
        );
        let (origin, origin_condition) = cors_origin(cors);
        let credentials = if cors.credentials {
            " hdr Access-Control-Allow-Credentials true"
        } else {
            ""
        };
        let _ = writeln!(
            late,
            "    http-request return status 204 hdr Access-Control-Allow-Origin \"{origin}\" \
             hdr Access-Control-Allow-Methods \"{}\" hdr Access-Control-Allow-Headers \"{}\" \
             hdr Access-Control-Max-Age {}{credentials} hdr Vary Origin if {acl} METH_OPTIONS \
             {{ req.hdr(access-control-request-method) -m found }}{origin_condition}",
            cors.methods, cors.headers, cors.max_age
        );
    }
}

/// CORS: the headers of the answers.
fn cors_response(desired: &Desired, _: &RenderSettings, response: &mut String) {
    for (cors, ids) in group(&desired.feature_sets, |f| f.cors.as_ref()) {
        let acl = sets_acl(&ids);
        let (origin, origin_condition) = cors_origin(cors);
        let _ = writeln!(
            response,
            "    http-response set-header Access-Control-Allow-Origin \"{origin}\" if {acl}{origin_condition}"
        );
        let _ = writeln!(
            response,
            "    http-response set-header Access-Control-Allow-Methods \"{}\" if {acl}",
            cors.methods
        );
        let _ = writeln!(
            response,
            "    http-response set-header Access-Control-Allow-Headers \"{}\" if {acl}",
            cors.headers
        );
        if cors.credentials {
            let _ = writeln!(
                response,
                "    http-response set-header Access-Control-Allow-Credentials true if {acl}"
            );
        }
        if matches!(cors.origins, CorsOrigins::List(_)) {
            let _ = writeln!(
                response,
                "    http-response add-header Vary Origin if {acl}"
            );
        }
    }
}

/// Basic authentication.
fn basic_auth(desired: &Desired, _: &RenderSettings, late: &mut String) {
    for (auth, ids) in group(&desired.feature_sets, |f| f.basic_auth.as_ref()) {
        let _ = writeln!(
            late,
            "    http-request auth realm \"{}\" if {} !{{ http_auth({}) }}",
            auth.realm,
            sets_acl(&ids),
            auth.userlist
        );
    }
}

/// The userlists of basic authentication.
fn userlists(desired: &Desired, _: &RenderSettings, sections: &mut String) {
    for (name, users) in &desired.userlists {
        let _ = writeln!(sections, "\nuserlist {name}");
        for user in users {
            let _ = writeln!(sections, "    user {} password {}", user.user, user.hash);
        }
    }
}

/// Path rewrites (`rewrite-target`).
fn path_rewrite(desired: &Desired, _: &RenderSettings, late: &mut String) {
    for (rewrite, ids) in group(&desired.feature_sets, |f| f.path_rewrite.as_ref()) {
        let _ = writeln!(
            late,
            "    http-request replace-path '{}' '{}' if {}",
            rewrite.pattern,
            rewrite.replacement,
            sets_acl(&ids)
        );
    }
}

/// The `Host` header the backend gets.
fn set_host(desired: &Desired, _: &RenderSettings, late: &mut String) {
    for (host, ids) in group(&desired.feature_sets, |f| f.set_host.as_deref()) {
        let _ = writeln!(
            late,
            "    http-request set-header Host {host} if {}",
            sets_acl(&ids)
        );
    }
}

/// Headers set on the request.
fn request_headers(desired: &Desired, _: &RenderSettings, late: &mut String) {
    for (headers, ids) in group(&desired.feature_sets, |f| {
        (!f.request_headers.is_empty()).then_some(&f.request_headers)
    }) {
        for (name, value) in headers {
            let _ = writeln!(
                late,
                "    http-request set-header {name} \"{value}\" if {}",
                sets_acl(&ids)
            );
        }
    }
}

/// Strict-Transport-Security, on answers over TLS.
fn hsts(desired: &Desired, _: &RenderSettings, response: &mut String) {
    for (hsts, ids) in group(&desired.feature_sets, |f| f.hsts.as_ref()) {
        let _ = writeln!(
            response,
            "    http-response set-header Strict-Transport-Security \"{}\" if {{ ssl_fc }} {}",
            hsts.value(),
            sets_acl(&ids)
        );
    }
}

/// Headers set on the answer.
fn response_headers(desired: &Desired, _: &RenderSettings, response: &mut String) {
    for (headers, ids) in group(&desired.feature_sets, |f| {
        (!f.response_headers.is_empty()).then_some(&f.response_headers)
    }) {
        for (name, value) in headers {
            let _ = writeln!(
                response,
                "    http-response set-header {name} \"{value}\" if {}",
                sets_acl(&ids)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reading [`WRITERS`] top to bottom is reading the rules in the order they are
    /// written.
    #[test]
    fn the_writers_are_listed_in_the_order_of_their_phases() {
        let phases: Vec<Phase> = WRITERS.iter().map(|(phase, _)| *phase).collect();
        let mut sorted = phases.clone();
        sorted.sort();
        assert_eq!(phases, sorted);
    }
}
