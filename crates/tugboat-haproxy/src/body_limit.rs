//! Request body limits (`proxy-body-size`) however the body is framed.
//!
//! A body announced by its `Content-Length` is judged by the header at once: 413 when
//! larger than the route allows, and haproxy holds the client to what it announced. A
//! body of unknown length (`Transfer-Encoding: chunked`, HTTP/2 or HTTP/3 without
//! `Content-Length`) cannot be judged by a config rule: haproxy counts no body beyond
//! its buffer. So on the routes with a limit, and only there, such a request leaves its
//! limit in `txn.body_limit`, waits for its first body byte (a request without a body
//! goes on at once) and, when it has a body, goes through the backend [`BACKEND`]: a
//! Lua filter there (`core.register_filter`, haproxy 2.5 and later built with Lua, as
//! the official image is) counts the payload as it passes and ends the transaction at
//! the first byte past the limit, which that backend answers with 413; what stays
//! within the limit goes on, over an internal frontend bound to an abstract socket
//! (HTTP/2, so streams and trailers such as gRPC's pass as they are; with the PROXY
//! protocol, so the client's address stays the client's), to the route's backend,
//! named in a header the frontend sets. A body over the limit thus
//! never reaches the service whole; one within it passes unchanged.
//!
//! Every other request pays nothing: the filter sits on that backend alone, not on the
//! frontend every request crosses. The hop costs the requests that take it a second
//! pass through haproxy. haproxy logs each refusal (the filter's error, at alert level,
//! and the access log line with 413). On a haproxy built without Lua, those routes
//! refuse bodies of unknown length with 411 (Length Required) instead.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use tugboat_model::Desired;
use tugboat_model::features::{FeatureSetId, RouteFeatures};

use crate::rules::{group, sets_acl, timeouts};
use crate::settings::RenderSettings;

/// The Lua filter, loaded with `lua-load` when some route has a body limit.
pub const SCRIPT: &str = include_str!("lua/body_limit.lua");

/// The backend that requests with a body of unknown length on routes with a limit go
/// through.
pub const BACKEND: &str = "tugboat_body_limit";

/// The internal frontend behind [`BACKEND`] (haproxy 3.3 and later refuse a frontend
/// and a backend of the same name).
pub const FRONTEND: &str = "tugboat_body_limit_pass";

/// The header that names the route's backend to the internal frontend.
pub const BACKEND_HEADER: &str = "x-tugboat-body-limit-backend";

/// The 413 answer, as an error file (the answer haproxy gives when the filter stops a
/// transaction).
pub const TOO_LARGE_ANSWER: &str = "HTTP/1.1 413 Payload Too Large\r\n\
content-type: text/plain\r\n\
content-length: 36\r\n\
connection: close\r\n\
\r\n\
request body larger than this route\n";

/// Whether some feature set limits the size of request bodies.
pub fn needed(sets: &BTreeMap<FeatureSetId, RouteFeatures>) -> bool {
    sets.values().any(|f| f.max_body_size.is_some())
}

/// The `http-request` rules, first among the features' (as ingress-nginx judges the
/// body before anything else): 413 by `Content-Length`; otherwise the limit in
/// `txn.body_limit` and the wait for the first body byte; without Lua, 411 for a body.
pub fn request_rules(desired: &Desired, out: &mut String) {
    let groups = group(&desired.feature_sets, |f| f.max_body_size);
    if groups.is_empty() {
        return;
    }
    for (size, ids) in &groups {
        let acl = sets_acl(ids);
        let _ = writeln!(
            out,
            "    http-request deny deny_status 413 if {acl} {{ req.hdr_val(content-length) gt {size} }}\n    \
             http-request set-var(txn.body_limit) int({size}) if {acl} !{{ req.hdr(content-length) -m found }}"
        );
    }
    let _ = writeln!(
        out,
        "    http-request wait-for-body time {} at-least 1 if {{ var(txn.body_limit) -m found }}\n    \
         .if !feature(LUA)\n    \
         http-request return status 411 content-type text/plain string \"request body without a length: send Content-Length\" if {{ var(txn.body_limit) -m found }} {{ req.body_len gt 0 }}\n    \
         .endif",
        http_request_timeout(desired)
    );
}

/// The `use_backend` rule that sends the requests with a body of unknown length on
/// routes with a limit through [`BACKEND`], before the general one.
pub fn switching_rules(desired: &Desired, out: &mut String) {
    if !needed(&desired.feature_sets) {
        return;
    }
    let _ = writeln!(
        out,
        "    .if feature(LUA)\n    \
         http-request set-header {BACKEND_HEADER} %[var(txn.backend)] if {{ var(txn.body_limit) -m found }} {{ req.body_len gt 0 }}\n    \
         use_backend {BACKEND} if {{ var(txn.body_limit) -m found }} {{ req.body_len gt 0 }}\n    \
         .endif"
    );
}

/// The backend with the filter and the internal frontend behind it.
pub fn section(desired: &Desired, settings: &RenderSettings) -> String {
    if !needed(&desired.feature_sets) {
        return String::new();
    }
    let address = settings.body_limit_address();
    format!(
        "
# Bodies of unknown length on routes with a body size limit: counted by the Lua
# filter, then passed on to the backend named in {BACKEND_HEADER}.
.if feature(LUA)
backend {BACKEND}
    filter lua.tugboat_body_limit
    errorfile 400 {answer}
    http-after-response set-status 413 if {{ var(txn.body_too_large) -m found }}
    # The route's backend keeps its own timeouts.
    timeout server 24h
    timeout tunnel 24h
    server internal {address} send-proxy-v2 proto h2

frontend {FRONTEND}
    bind {address} accept-proxy proto h2
    # The request is logged once, by the http frontend.
    http-request set-log-level silent
    http-request set-var(txn.backend) req.hdr({BACKEND_HEADER})
    http-request del-header {BACKEND_HEADER}
    use_backend %[var(txn.backend)] if {{ var(txn.backend) -m found }}
.endif
",
        answer = settings.body_limit_answer().display(),
    )
}

/// The frontend's `timeout http-request`: how long a request may wait for its first
/// body byte.
fn http_request_timeout(desired: &Desired) -> String {
    timeouts(desired)
        .remove("http-request")
        .unwrap_or_else(|| "10s".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desired_with_limits(limits: &[u64]) -> Desired {
        let mut desired = Desired::default();
        for limit in limits {
            let features = RouteFeatures {
                max_body_size: Some(*limit),
                ..RouteFeatures::default()
            };
            desired
                .feature_sets
                .insert(FeatureSetId::of(&features), features);
        }
        desired
    }

    #[test]
    fn nothing_without_a_limit() {
        let desired = desired_with_limits(&[]);
        let mut out = String::new();
        request_rules(&desired, &mut out);
        switching_rules(&desired, &mut out);
        assert_eq!(out, "");
        assert_eq!(section(&desired, &RenderSettings::example()), "");
    }

    #[test]
    fn each_limit_judges_its_content_length_and_keeps_its_limit_for_other_bodies() {
        let desired = desired_with_limits(&[1024, 1 << 20]);
        let mut out = String::new();
        request_rules(&desired, &mut out);
        for (id, features) in &desired.feature_sets {
            let size = features.max_body_size.expect("a limit");
            let acl = format!("{{ var(txn.fs) -m str {id} }}");
            assert!(
                out.contains(&format!(
                    "http-request deny deny_status 413 if {acl} {{ req.hdr_val(content-length) gt {size} }}"
                )),
                "{out}"
            );
            assert!(
                out.contains(&format!(
                    "http-request set-var(txn.body_limit) int({size}) if {acl} !{{ req.hdr(content-length) -m found }}"
                )),
                "{out}"
            );
        }
        assert!(
            out.contains("wait-for-body time 10s at-least 1 if { var(txn.body_limit) -m found }"),
            "{out}"
        );
        assert!(
            out.contains(".if !feature(LUA)\n    http-request return status 411 "),
            "{out}"
        );
        assert!(
            out.contains(" if { var(txn.body_limit) -m found } { req.body_len gt 0 }\n    .endif"),
            "{out}"
        );
    }

    #[test]
    fn bodies_of_unknown_length_go_through_the_filter_backend_with_lua_only() {
        let desired = desired_with_limits(&[1024]);
        let mut out = String::new();
        switching_rules(&desired, &mut out);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 4, "{out}");
        assert_eq!(lines[0], "    .if feature(LUA)");
        assert!(lines[2].starts_with(&format!("    use_backend {BACKEND} if ")));
        assert_eq!(lines[3], "    .endif");
        let section = section(&desired, &RenderSettings::example());
        assert!(
            section.contains("filter lua.tugboat_body_limit"),
            "{section}"
        );
        assert!(section.contains("send-proxy-v2"), "{section}");
        assert!(section.contains("accept-proxy"), "{section}");
        assert!(
            section.starts_with("\n# Bodies of unknown length")
                && section.contains(".if feature(LUA)\nbackend"),
            "{section}"
        );
    }

    #[test]
    fn the_answer_is_a_well_formed_413() {
        let (head, body) = TOO_LARGE_ANSWER
            .split_once("\r\n\r\n")
            .expect("head and body");
        assert!(head.starts_with("HTTP/1.1 413 "));
        assert!(head.contains(&format!("content-length: {}", body.len())));
    }
}
