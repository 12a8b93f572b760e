//! The haproxy rules of the Gateway API's filters and weighted backends
//! ([`GatewayFeatures`]), guarded by the feature sets that have them, as the other route
//! features are (see [`crate::features`]); each writer here writes into the phase
//! [`crate::features::WRITERS`] gives it.
//!
//! - A weighted split draws `rand(total)` once per request into `txn.pick` and sets
//!   `txn.backend` by range (a share without a backend answers 500), before the frontend's
//!   `use_backend`.
//! - A redirect builds its location from the parts it sets and the request's others
//!   (scheme, host, path, query).
//! - `ReplacePrefixMatch` keeps what follows the matched prefix (`path,bytes(N)`).
//! - Header changes go in the order set, add, remove.
//! - A rule's `timeouts` set `txn.gw_timeout` (milliseconds) in the frontend; every
//!   backend section applies it with `http-request set-timeout server` (haproxy takes
//!   that action in backends only, on every series from 2.6).
//! - The rules of a host and path that match on the method, headers or query
//!   ([`Dispatch`]) come first of all: the first whose conditions hold sets the backend
//!   and the feature set of the request.
//!
//! Every value comes validated from the model (no quote, backslash, `$` or `%`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use tugboat_model::features::{FeatureSetId, RouteFeatures};
use tugboat_model::gateway::features::{
    Conditions, Dispatch, GatewayFeatures, HeaderChanges, Otherwise, PathCondition,
    PathReplacement, Redirect, Share,
};

use crate::rules::{FEATURE_SEPARATOR, group, sets_acl};

/// The server timeout of the request (milliseconds, 0: none), set by the feature sets of
/// rules with `timeouts`; every backend applies it ([`SERVER_TIMEOUT_RULE`]).
pub const SERVER_TIMEOUT_VAR: &str = "txn.gw_timeout";

/// The rule of every backend section that applies [`SERVER_TIMEOUT_VAR`]: a backend is
/// shared by routes with and without timeouts, so it takes the request's own.
pub const SERVER_TIMEOUT_RULE: &str =
    "    http-request set-timeout server var(txn.gw_timeout) if { var(txn.gw_timeout) -m found }\n";

fn gateway(features: &RouteFeatures) -> Option<&GatewayFeatures> {
    features.gateway.as_ref()
}

type Sets = BTreeMap<FeatureSetId, RouteFeatures>;

/// First of all: the routes of one bind only (the other bind's requests get 404), then
/// the rules of a host and path with conditions, which pick the set of the request
/// before any other set's rule looks at it.
pub fn dispatch(sets: &Sets, out: &mut String) {
    for (tls, ids) in group(sets, |f| gateway(f).and_then(|g| g.only_tls)) {
        let other = if tls { "!{ ssl_fc }" } else { "{ ssl_fc }" };
        let _ = writeln!(
            out,
            "    http-request return status 404 if {} {other}",
            sets_acl(&ids)
        );
    }
    for (id, features) in sets {
        if let Some(found) = gateway(features).and_then(|g| g.dispatch.as_ref()) {
            dispatch_rules(id, found, out);
        }
    }
}

/// Weighted backends.
pub fn splits(sets: &Sets, out: &mut String) {
    for (split, ids) in group(sets, |f| {
        gateway(f).map(|g| &g.split).filter(|s| !s.is_empty())
    }) {
        split_rules(split, &sets_acl(&ids), out);
    }
}

/// The server timeouts of rules, for the backends to apply.
pub fn server_timeouts(sets: &Sets, out: &mut String) {
    for (timeout, ids) in group(sets, |f| gateway(f).and_then(|g| g.server_timeout_ms)) {
        // haproxy's `set-timeout` does not take 0 for no timeout: its longest one is.
        let timeout = if timeout == 0 {
            tugboat_model::validate::MAX_TIMEOUT_MS
        } else {
            timeout
        };
        let _ = writeln!(
            out,
            "    http-request set-var({SERVER_TIMEOUT_VAR}) int({timeout}) if {}",
            sets_acl(&ids)
        );
    }
}

/// Redirects.
pub fn redirects(sets: &Sets, out: &mut String) {
    for (redirect, ids) in group(sets, |f| gateway(f).and_then(|g| g.redirect.as_ref())) {
        redirect_rules(redirect, &sets_acl(&ids), out);
    }
}

/// The `Host` header the backend gets.
pub fn host_rewrites(sets: &Sets, out: &mut String) {
    for (host, ids) in group(sets, |f| gateway(f).and_then(|g| g.rewrite_host.as_deref())) {
        let _ = writeln!(
            out,
            "    http-request set-header Host {host} if {}",
            sets_acl(&ids)
        );
    }
}

/// Path rewrites.
pub fn path_rewrites(sets: &Sets, out: &mut String) {
    for (path, ids) in group(sets, |f| gateway(f).and_then(|g| g.rewrite_path.as_ref())) {
        rewrite_rules(path, &sets_acl(&ids), out);
    }
}

/// Changes of the request's headers.
pub fn request_headers(sets: &Sets, out: &mut String) {
    for (changes, ids) in group(sets, |f| {
        gateway(f)
            .map(|g| &g.request_headers)
            .filter(|c| !c.is_empty())
    }) {
        header_rules("http-request", changes, &sets_acl(&ids), out);
    }
}

/// Changes of the answer's headers.
pub fn response_headers(sets: &Sets, out: &mut String) {
    for (changes, ids) in group(sets, |f| {
        gateway(f)
            .map(|g| &g.response_headers)
            .filter(|c| !c.is_empty())
    }) {
        header_rules("http-response", changes, &sets_acl(&ids), out);
    }
}

/// The condition of a candidate: method, headers (whole values) and query parameters.
fn conditions_acl(conditions: &Conditions) -> String {
    let mut acl = String::new();
    match conditions.tls {
        Some(true) => acl.push_str(" { ssl_fc }"),
        Some(false) => acl.push_str(" !{ ssl_fc }"),
        None => {}
    }
    if let Some(regex) = &conditions.path_regex {
        let _ = write!(acl, " {{ path -m reg '{regex}' }}");
    }
    // The path as the route maps see it; as the route lookup compares it.
    match &conditions.path {
        Some(PathCondition::Exact(path)) => {
            let _ = write!(acl, " {{ var(txn.path) -m str '{path}' }}");
        }
        Some(PathCondition::Prefix(path)) => {
            let _ = write!(acl, " {{ var(txn.path),concat(,,/) -m beg '{path}/' }}");
        }
        Some(PathCondition::Under(path)) => {
            let _ = write!(acl, " {{ var(txn.path) -m beg '{path}/' }}");
        }
        Some(PathCondition::IngressRegex(pattern)) => {
            let _ = write!(acl, " {{ var(txn.path) -m reg -i '^{pattern}' }}");
        }
        None => {}
    }
    if let Some(method) = &conditions.method {
        let _ = write!(acl, " {{ method {method} }}");
    }
    for (name, value) in &conditions.headers {
        let _ = write!(acl, " {{ req.fhdr({name}) -m str {value} }}");
    }
    for (name, regex) in &conditions.headers_regex {
        let _ = write!(acl, " {{ req.fhdr({name}) -m reg '{regex}' }}");
    }
    for (name, value) in &conditions.query {
        let _ = write!(acl, " {{ url_param({name}) -m str {value} }}");
    }
    acl
}

/// The candidates of a host and path in order: the first whose conditions hold sets the
/// backend and the feature set (which ends the dispatch: its rules test the dispatch's
/// own set); otherwise the route's own features, or 404.
fn dispatch_rules(id: &FeatureSetId, dispatch: &Dispatch, out: &mut String) {
    let own = sets_acl(&[id]);
    let set_features = |features: &Option<FeatureSetId>, condition: &str, out: &mut String| {
        let _ = match features {
            Some(features) => writeln!(
                out,
                "    http-request set-var(txn.fs) str({features}) if {own}{condition}"
            ),
            None => writeln!(
                out,
                "    http-request unset-var(txn.fs) if {own}{condition}"
            ),
        };
    };
    for candidate in &dispatch.candidates {
        let condition = conditions_acl(&candidate.conditions);
        let _ = writeln!(
            out,
            "    http-request set-var(txn.backend) str({}) if {own}{condition}",
            candidate.backend
        );
        if let (Some(canary), Some(features)) = (&candidate.canary, &candidate.features) {
            // The canary rules read the canary from the route's map value.
            let _ = writeln!(
                out,
                "    http-request set-var(txn.route) str({}{FEATURE_SEPARATOR}{features}{FEATURE_SEPARATOR}{}{FEATURE_SEPARATOR}{}) if {own}{condition}",
                candidate.backend, canary.backend, canary.per_million
            );
        }
        set_features(&candidate.features, &condition, out);
    }
    match &dispatch.otherwise {
        Otherwise::Route(features) => set_features(features, "", out),
        Otherwise::NotFound => {
            let _ = writeln!(out, "    http-request return status 404 if {own}");
        }
    }
}

fn split_rules(split: &[Share], acl: &str, out: &mut String) {
    let total: u64 = split.iter().map(|share| u64::from(share.weight)).sum();
    if total == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "    http-request set-var(txn.pick) rand({total}) if {acl}"
    );
    let mut low = 0u64;
    for share in split {
        let high = low + u64::from(share.weight);
        let range = format!("{{ var(txn.pick) -m int {low}:{} }}", high - 1);
        match &share.backend {
            Some(backend) => {
                let _ = writeln!(
                    out,
                    "    http-request set-var(txn.backend) str({backend}) if {acl} {range}"
                );
            }
            None => {
                let _ = writeln!(out, "    http-request return status 500 if {acl} {range}");
            }
        }
        low = high;
    }
}

/// The scheme's well-known port.
fn default_port(scheme: &str) -> u16 {
    if scheme == "https" { 443 } else { 80 }
}

/// `set-var(txn.gw_rest)`: what follows the first `matched` bytes of the path.
fn rest_rule(matched: usize, acl: &str) -> String {
    format!("    http-request set-var(txn.gw_rest) path,bytes({matched}) if {acl}\n")
}

fn redirect_rules(redirect: &Redirect, acl: &str, out: &mut String) {
    let scheme = redirect
        .scheme
        .clone()
        .unwrap_or_else(|| "%[ssl_fc,iif(https,http)]".to_string());
    let host = redirect
        .hostname
        .clone()
        .unwrap_or_else(|| "%[var(txn.host)]".to_string());
    let port = match (redirect.port, redirect.scheme.as_deref()) {
        (Some(port), Some(scheme)) if port == default_port(scheme) => String::new(),
        (Some(port), _) => format!(":{port}"),
        (None, _) => String::new(),
    };
    let path = match &redirect.path {
        None => "%[path]".to_string(),
        Some(PathReplacement::Full(path)) => path.clone(),
        Some(PathReplacement::Prefix {
            matched,
            replacement,
        }) => {
            out.push_str(&rest_rule(*matched, acl));
            format!("{replacement}%[var(txn.gw_rest)]")
        }
    };
    let code = redirect.code;
    let mut locations = Vec::new();
    if redirect.request_port {
        // The port the client named in `Host` (digits only), when it named one other
        // than the scheme's own.
        for (bind, well_known) in [("!{ ssl_fc }", 80), ("{ ssl_fc }", 443)] {
            let _ = writeln!(
                out,
                "    http-request set-var(txn.gw_port) req.hdr(host),field(2,:) if {acl} {bind} {{ req.hdr(host),field(2,:) -m reg '^[0-9]+$' }} !{{ req.hdr(host),field(2,:) -m str {well_known} }}"
            );
        }
        locations.push((
            format!("{scheme}://{host}:%[var(txn.gw_port)]{path}"),
            " { var(txn.gw_port) -m found }",
        ));
    }
    locations.push((format!("{scheme}://{host}{port}{path}"), ""));
    for (location, condition) in locations {
        let _ = writeln!(
            out,
            "    http-request redirect location \"{location}?%[var(txn.query)]\" code {code} if {acl}{condition} {{ var(txn.query) -m found }}\n    \
             http-request redirect location \"{location}\" code {code} if {acl}{condition}"
        );
    }
}

fn rewrite_rules(path: &PathReplacement, acl: &str, out: &mut String) {
    match path {
        PathReplacement::Full(path) => {
            let _ = writeln!(out, "    http-request set-path \"{path}\" if {acl}");
        }
        PathReplacement::Prefix {
            matched,
            replacement,
        } => {
            out.push_str(&rest_rule(*matched, acl));
            // The rest of the path starts with `/` or is empty; an empty result is `/`.
            let alone = if replacement.is_empty() {
                "/"
            } else {
                replacement
            };
            let _ = writeln!(
                out,
                "    http-request set-path \"{replacement}%[var(txn.gw_rest)]\" if {acl} {{ var(txn.gw_rest) -m beg / }}\n    \
                 http-request set-path \"{alone}\" if {acl} !{{ var(txn.gw_rest) -m beg / }}"
            );
        }
    }
}

fn header_rules(action: &str, changes: &HeaderChanges, acl: &str, out: &mut String) {
    for (name, value) in &changes.set {
        let _ = writeln!(out, "    {action} set-header {name} \"{value}\" if {acl}");
    }
    for (name, value) in &changes.add {
        let _ = writeln!(out, "    {action} add-header {name} \"{value}\" if {acl}");
    }
    for name in &changes.remove {
        let _ = writeln!(out, "    {action} del-header {name} if {acl}");
    }
}

#[cfg(test)]
mod tests {
    use tugboat_model::BackendName;
    use tugboat_model::gateway::features::Candidate;

    use super::*;

    fn backend(name: &str) -> BackendName {
        BackendName::parse(name).expect("a backend name")
    }

    /// The rules of one set, by where the frontend has them.
    #[derive(Default)]
    struct Written {
        request: String,
    }

    fn rules_of(gateway: GatewayFeatures) -> (FeatureSetId, Written) {
        let features = RouteFeatures {
            gateway: Some(gateway),
            ..RouteFeatures::default()
        };
        let id = FeatureSetId::of(&features);
        let sets = BTreeMap::from([(id.clone(), features)]);
        let mut rules = Written::default();
        dispatch(&sets, &mut rules.request);
        splits(&sets, &mut rules.request);
        server_timeouts(&sets, &mut rules.request);
        redirects(&sets, &mut rules.request);
        (id, rules)
    }

    #[test]
    fn a_split_draws_once_and_picks_by_range() {
        let (id, rules) = rules_of(GatewayFeatures {
            split: vec![
                Share {
                    backend: Some(backend("shop_web_80")),
                    weight: 3,
                },
                Share {
                    backend: None,
                    weight: 1,
                },
            ],
            ..GatewayFeatures::default()
        });
        let acl = format!("{{ var(txn.fs) -m str {id} }}");
        assert_eq!(
            rules.request,
            format!(
                "    http-request set-var(txn.pick) rand(4) if {acl}\n    \
                 http-request set-var(txn.backend) str(shop_web_80) if {acl} {{ var(txn.pick) -m int 0:2 }}\n    \
                 http-request return status 500 if {acl} {{ var(txn.pick) -m int 3:3 }}\n"
            )
        );
    }

    #[test]
    fn a_redirect_keeps_what_it_does_not_set() {
        let (_, rules) = rules_of(GatewayFeatures {
            redirect: Some(Redirect {
                scheme: Some("https".into()),
                hostname: None,
                port: Some(443),
                request_port: false,
                path: Some(PathReplacement::Prefix {
                    matched: 4,
                    replacement: "/new".into(),
                }),
                code: 301,
            }),
            ..GatewayFeatures::default()
        });
        assert!(rules.request.contains("set-var(txn.gw_rest) path,bytes(4)"));
        assert!(rules.request.contains(
            "redirect location \"https://%[var(txn.host)]/new%[var(txn.gw_rest)]?%[var(txn.query)]\" code 301"
        ));
        assert!(
            !rules.request.contains(":443"),
            "the scheme's own port is left out"
        );
    }

    #[test]
    fn a_timeout_is_set_by_its_sets_and_applied_by_backends() {
        let (id, rules) = rules_of(GatewayFeatures {
            server_timeout_ms: Some(1500),
            ..GatewayFeatures::default()
        });
        assert_eq!(
            rules.request,
            format!(
                "    http-request set-var(txn.gw_timeout) int(1500) if {{ var(txn.fs) -m str {id} }}\n"
            )
        );
        assert!(SERVER_TIMEOUT_RULE.contains(&format!("var({SERVER_TIMEOUT_VAR})")));
        let (_, none) = rules_of(GatewayFeatures {
            server_timeout_ms: Some(0),
            ..GatewayFeatures::default()
        });
        assert!(
            none.request.contains("int(2147483647)"),
            "no timeout: haproxy's longest"
        );
    }

    #[test]
    fn a_dispatch_comes_first_and_ends_at_the_first_match() {
        let web = FeatureSetId::of(&RouteFeatures {
            original_path: true,
            ..RouteFeatures::default()
        });
        let (id, rules) = rules_of(GatewayFeatures {
            only_tls: Some(true),
            dispatch: Some(Dispatch {
                candidates: vec![Candidate {
                    conditions: Conditions {
                        method: Some("POST".into()),
                        headers: vec![("version".into(), "2".into())],
                        ..Conditions::default()
                    },
                    backend: backend("shop_api_80"),
                    features: None,
                    canary: None,
                }],
                otherwise: Otherwise::Route(Some(web.clone())),
            }),
            ..GatewayFeatures::default()
        });
        let acl = format!("{{ var(txn.fs) -m str {id} }}");
        let condition = "{ method POST } { req.fhdr(version) -m str 2 }";
        assert_eq!(
            rules.request,
            format!(
                "    http-request return status 404 if {acl} !{{ ssl_fc }}\n    \
                 http-request set-var(txn.backend) str(shop_api_80) if {acl} {condition}\n    \
                 http-request unset-var(txn.fs) if {acl} {condition}\n    \
                 http-request set-var(txn.fs) str({web}) if {acl}\n"
            )
        );
    }

    #[test]
    fn a_fall_back_tests_the_path_as_the_route_lookup_does_and_carries_the_canary() {
        let canary_set = FeatureSetId::of(&RouteFeatures {
            original_path: true,
            ..RouteFeatures::default()
        });
        let on_path = |path: PathCondition| Candidate {
            conditions: Conditions {
                path: Some(path),
                ..Conditions::default()
            },
            backend: backend("shop_api_80"),
            features: None,
            canary: None,
        };
        let (id, rules) = rules_of(GatewayFeatures {
            dispatch: Some(Dispatch {
                candidates: vec![
                    on_path(PathCondition::Exact("/a/x".into())),
                    on_path(PathCondition::Prefix("/a/b".into())),
                    on_path(PathCondition::Under("/a/c".into())),
                    Candidate {
                        features: Some(canary_set.clone()),
                        canary: Some(tugboat_model::desired::Canary {
                            backend: backend("shop_beta_80"),
                            per_million: 250_000,
                            ingress: tugboat_model::ObjectKey::new("shop", "beta"),
                        }),
                        ..on_path(PathCondition::IngressRegex("/a/[0-9]+".into()))
                    },
                ],
                otherwise: Otherwise::NotFound,
            }),
            ..GatewayFeatures::default()
        });
        let acl = format!("{{ var(txn.fs) -m str {id} }}");
        for condition in [
            "{ var(txn.path) -m str '/a/x' }",
            "{ var(txn.path),concat(,,/) -m beg '/a/b/' }",
            "{ var(txn.path) -m beg '/a/c/' }",
        ] {
            assert!(
                rules.request.contains(&format!(
                    "http-request set-var(txn.backend) str(shop_api_80) if {acl} {condition}\n"
                )),
                "{condition}: {}",
                rules.request
            );
        }
        let regex = "{ var(txn.path) -m reg -i '^/a/[0-9]+' }";
        assert!(rules.request.contains(&format!(
            "http-request set-var(txn.route) str(shop_api_80.{canary_set}.shop_beta_80.250000) if {acl} {regex}\n"
        )));
        let route = rules
            .request
            .find("set-var(txn.route)")
            .expect("the canary");
        let features = rules
            .request
            .find(&format!("set-var(txn.fs) str({canary_set})"))
            .expect("the canary route's features");
        assert!(
            route < features,
            "the map value is set while the dispatch's set still holds"
        );
    }

    #[test]
    fn a_redirect_of_listeners_with_different_ports_keeps_the_port_the_client_named() {
        let (id, rules) = rules_of(GatewayFeatures {
            redirect: Some(Redirect {
                scheme: None,
                hostname: Some("new.example.com".into()),
                port: None,
                request_port: true,
                path: None,
                code: 302,
            }),
            ..GatewayFeatures::default()
        });
        let acl = format!("{{ var(txn.fs) -m str {id} }}");
        let port = "req.hdr(host),field(2,:)";
        assert!(rules.request.contains(&format!(
            "http-request set-var(txn.gw_port) {port} if {acl} !{{ ssl_fc }} {{ {port} -m reg '^[0-9]+$' }} !{{ {port} -m str 80 }}\n"
        )));
        assert!(rules.request.contains(&format!("!{{ {port} -m str 443 }}")));
        let with_port = rules
            .request
            .find(&format!(
                "redirect location \"%[ssl_fc,iif(https,http)]://new.example.com:%[var(txn.gw_port)]%[path]\" code 302 if {acl} {{ var(txn.gw_port) -m found }}\n"
            ))
            .expect("the location with the request's port");
        let without = rules
            .request
            .find(&format!(
                "redirect location \"%[ssl_fc,iif(https,http)]://new.example.com%[path]\" code 302 if {acl}\n"
            ))
            .expect("the location without a port");
        assert!(with_port < without);
    }
}
