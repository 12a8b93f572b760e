//! The client's address: the connection's peer, or with `use-forwarded-headers` the
//! rightmost address of the forwarders' header that is not a trusted forwarder.
//!
//! The rules open `frontend http`, before any rule that looks at the address: `set-src`
//! changes what `src` is for access lists, rate limits and logs, and the backend's
//! `X-Forwarded-For` is written from it here (replacing what the client sent, or with
//! `compute-full-forwarded-for` appending the trusted forwarder to it). A header from a
//! peer that is not trusted is never read. With `use-proxy-protocol`, the connections
//! of trusted peers start with a PROXY header that sets `src` before all of that. A
//! trusted forwarder's `X-Forwarded-Proto: https` counts as HTTPS for the redirects.

use std::fmt::Write as _;

use tugboat_model::features::{ForwardedHeaders, GlobalOptions};

/// How many addresses of the header are walked from the right at most: haproxy has no
/// loop, so the walk is unrolled.
pub const MOST_FORWARDERS: usize = 8;

/// The variable that holds whether the walk goes on: the current address is trusted.
const WALKING: &str = "txn.forwarded_walk";
/// The connection's own peer, kept before `set-src` changes `src`.
const PEER: &str = "txn.peer";
/// The scheme a trusted forwarder gave (`X-Forwarded-Proto`), when it is one.
const PROTO: &str = "txn.forwarded_proto";

/// The rule of a frontend that binds the HTTP or HTTPS port (`use-proxy-protocol`):
/// connections from the trusted peers start with a PROXY header, whose source is then
/// `src`. Evaluated when the connection is accepted, before TLS and before any PROXY
/// header of a bind's `accept-proxy` is read (the internal hop's peer is a socket
/// without an IP address: never matched).
pub fn connection_rules(global: &GlobalOptions) -> String {
    match &global.proxy_protocol_from {
        None => String::new(),
        Some(trusted) => format!(
            "    tcp-request connection expect-proxy layer4 if {{ src -m ip {} }}\n",
            trusted.join(" ")
        ),
    }
}

/// The frontend's first `http-request` rules.
pub fn request_rules(global: &GlobalOptions) -> String {
    let Some(forwarded) = &global.forwarded else {
        return "    # The client is the connection's peer; what the client sent as X-Forwarded-For is replaced.\n    http-request set-header X-Forwarded-For %[src]\n"
            .to_string();
    };
    let ForwardedHeaders {
        header,
        trusted,
        full,
    } = forwarded;
    let trusted = trusted.join(" ");
    let mut out = String::new();
    let _ = write!(
        out,
        "    # The client: walking {header} from the right while the address is a trusted forwarder.
    http-request set-var({PEER}) src
    http-request set-var({WALKING}) bool(1) if {{ src -m ip {trusted} }}
"
    );
    for occurrence in 1..=MOST_FORWARDERS {
        let _ = write!(
            out,
            "    http-request unset-var({WALKING}) if {{ var({WALKING}) -m bool }} !{{ req.hdr_ip({header},-{occurrence}) -m found }}
    http-request set-src req.hdr_ip({header},-{occurrence}) if {{ var({WALKING}) -m bool }}
    http-request unset-var({WALKING}) if {{ var({WALKING}) -m bool }} !{{ src -m ip {trusted} }}
"
        );
    }
    let from_trusted = format!("{{ var({PEER}) -m ip {trusted} }}");
    if *full {
        let _ = write!(
            out,
            "    http-request set-header X-Forwarded-For %[src] if !{from_trusted}
    http-request add-header X-Forwarded-For %[var({PEER})] if {from_trusted}
"
        );
    } else {
        out.push_str("    http-request set-header X-Forwarded-For %[src]\n");
    }
    let _ = writeln!(
        out,
        "    http-request set-var({PROTO}) req.hdr(X-Forwarded-Proto),lower if {from_trusted} {{ req.hdr(X-Forwarded-Proto),lower -m str http https }}"
    );
    out
}

/// The condition of a request that did not come over HTTPS, for the HTTPS redirects:
/// not TLS at haproxy and, behind trusted forwarders (`use-forwarded-headers`), not
/// `X-Forwarded-Proto: https` from one of them (a load balancer that terminates TLS
/// itself: redirecting its requests would loop). The header of an untrusted peer is
/// never read ([`request_rules`] keeps it only from trusted ones).
pub fn plain_http(global: &GlobalOptions) -> String {
    if global.forwarded.is_some() {
        format!("!{{ ssl_fc }} !{{ var({PROTO}) -m str https }}")
    } else {
        "!{ ssl_fc }".to_string()
    }
}

/// The frontend's `X-Forwarded-Proto` rules: the scheme of the connection, or the one a
/// trusted forwarder gave.
pub fn proto_rules(global: &GlobalOptions) -> String {
    let own = "    http-request set-header X-Forwarded-Proto https if { ssl_fc }\n    http-request set-header X-Forwarded-Proto http if !{ ssl_fc }\n";
    if global.forwarded.is_none() {
        return own.to_string();
    }
    let mut out = String::new();
    for line in own.lines() {
        let _ = writeln!(out, "{line} !{{ var({PROTO}) -m found }}");
    }
    let _ = writeln!(
        out,
        "    http-request set-header X-Forwarded-Proto %[var({PROTO})] if {{ var({PROTO}) -m found }}"
    );
    out
}
