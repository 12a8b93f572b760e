//! TLS passthrough: the HTTPS port chooses by SNI between the backends that get TLS
//! undecrypted and haproxy's own TLS termination.
//!
//! Only when the desired state has a passthrough route, the HTTPS port is bound by a
//! mode tcp frontend (`tls_passthrough`) that waits for the ClientHello, looks its SNI up
//! in `passthrough.map` (exact host, then the `*.` wildcard of the host without its first
//! label) and sends the connection to the mode tcp backend the map names. Every other
//! connection goes to the terminating `frontend http` over an internal hop: an abstract
//! socket (a listener that haproxy hands to the next worker at a reload like any other,
//! and that needs no file a non-root haproxy could not create), with PROXY v2 on the hop
//! so that the terminating path sees the client's own address (X-Forwarded-For, allow
//! lists, logs). Without a passthrough route the config is as it was: no hop.
//!
//! The map is a runtime map: a host added or removed for a passthrough backend haproxy
//! has is a map update; a new passthrough backend, the first route and the removal of
//! the last are changes of the config (a reload).

use std::fmt::Write as _;

use tugboat_model::{Desired, HostMatch};

use crate::map_text::{self, MapOrder};
use crate::settings::RenderSettings;

/// The frontend that binds the HTTPS port when some TLS passes through.
pub const FRONTEND: &str = "tls_passthrough";
/// The backend of that frontend that hops to the terminating frontend. Not a
/// `<namespace>_<service>_<port>` name: it never meets a Service's backend.
pub const TERMINATE_BACKEND: &str = "tls_terminate";
/// How long the frontend waits for a ClientHello before it hands the connection to the
/// terminating frontend.
const INSPECT_DELAY: &str = "5s";

/// Whether the HTTPS port needs the TCP frontend.
pub fn needed(desired: &Desired) -> bool {
    !desired.passthrough.is_empty()
}

/// What the terminating frontend binds for HTTPS: the HTTPS port, or with passthrough the
/// internal hop, whose connections carry the client's address in a PROXY v2 header.
pub fn terminating_bind(desired: &Desired, settings: &RenderSettings) -> String {
    if needed(desired) {
        format!("{} accept-proxy", settings.tls_hop_address())
    } else {
        crate::render::address(settings.bind_address, settings.https_port)
    }
}

/// The passthrough map: the host (`a.example.com`, or `.example.com` for
/// `*.example.com`) and the backend its TLS goes to.
pub fn map(desired: &Desired) -> String {
    let lines = desired.passthrough.iter().filter_map(|route| {
        let key = match &route.host {
            HostMatch::Exact(host) | HostMatch::Wildcard(host) => host.as_str(),
            // The model gives passthrough routes a host SNI can name.
            HostMatch::Any | HostMatch::Subdomains(_) => return None,
        };
        Some((key, route.backend.as_str()))
    });
    map_text::lines(MapOrder::Key, lines)
}

/// The TCP frontend of the HTTPS port and the hop's backend (empty without passthrough).
pub fn sections(desired: &Desired, settings: &RenderSettings) -> String {
    if !needed(desired) {
        return String::new();
    }
    let https = crate::render::address(settings.bind_address, settings.https_port);
    let map = settings.passthrough_map();
    let map = map.display();
    let hop = settings.tls_hop_address();
    // `accept` ends the content rules: the lookups are in the switching rules, which
    // run once the ClientHello is in.
    let exact = format!("req.ssl_sni,lower,map_str({map})");
    let wildcard = format!("req.ssl_sni,lower,regsub(^[^.]*,),map_str({map})");
    let mut out = String::new();
    let _ = write!(
        out,
        "
# TLS passthrough: the HTTPS port reads the ClientHello's SNI; the hosts of the
# passthrough map get their TLS undecrypted, every other connection is terminated by
# `frontend http` over the internal hop, with the client's address in PROXY v2.
frontend {FRONTEND}
    mode tcp
    bind {https}
    option tcplog
    no option idle-close-on-response
    tcp-request inspect-delay {INSPECT_DELAY}
    tcp-request content accept if {{ req.ssl_hello_type 1 }}
    use_backend %[{exact}] if {{ {exact} -m found }}
    use_backend %[{wildcard}] if {{ {wildcard} -m found }}
    default_backend {TERMINATE_BACKEND}

backend {TERMINATE_BACKEND}
    mode tcp
    server hop {hop} send-proxy-v2
"
    );
    out
}
