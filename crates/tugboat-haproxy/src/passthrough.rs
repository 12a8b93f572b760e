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
//! A Gateway `TLS` listener on a port P of `--gateway-listener-ports` has a mode tcp
//! frontend of its own (`tls_passthrough_<P>`, bound at P + 10000) that chooses by SNI
//! the same way, in the same map: its keys end in `:<P>` (`a.example.com:9443`), which
//! the frontend's lookups append. Nothing terminates TLS there: TLS for a name of no
//! route, and anything that is not TLS, is closed.
//!
//! The map is a runtime map: a host added or removed for a passthrough backend haproxy
//! has is a map update (on any port); a new passthrough backend, the first route of a
//! port and the removal of the last are changes of the config (a reload).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use tugboat_model::{Desired, HostMatch, ports};

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
    desired.passthrough.iter().any(|route| route.port.is_none())
}

/// Whether some port passes TLS through: the map is needed.
pub fn map_needed(desired: &Desired) -> bool {
    !desired.passthrough.is_empty()
}

/// The listener ports with a passthrough frontend of their own.
fn own_ports(desired: &Desired) -> BTreeSet<u16> {
    desired
        .passthrough
        .iter()
        .filter_map(|route| route.port)
        .collect()
}

/// The name of the passthrough frontend of the listener port `port`.
pub fn own_frontend(port: u16) -> String {
    format!("{FRONTEND}_{port}")
}

/// What the map keys of `port` end in: nothing for the HTTPS port's, `:<port>` for a
/// listener port's.
fn key_suffix(port: Option<u16>) -> String {
    port.map(|port| format!(":{port}")).unwrap_or_default()
}

/// What the terminating frontend binds for HTTPS: the HTTPS port, or with passthrough the
/// internal hop, whose connections carry the client's address in a PROXY v2 header.
pub fn terminating_bind(desired: &Desired, settings: &RenderSettings) -> String {
    if needed(desired) {
        format!("{} accept-proxy", settings.tls_hop_address())
    } else {
        settings.bind(settings.https_port)
    }
}

/// The passthrough map: the host (`a.example.com`; `.example.com` for an Ingress'
/// one-label `*.example.com`; `example.com*` for a TLSRoute's any-depth `*.example.com`,
/// as the HTTP maps key Gateway API wildcards) and the backend its TLS goes to. An exact
/// host that has routes of its own, is not passed through and falls under a passthrough
/// wildcard is terminated, as HTTP routing prefers the exact host: its line names
/// [`TERMINATE_BACKEND`], and the exact lookup finds it before the wildcard's.
/// A listener port's keys end in `:<port>` ([`key_suffix`]).
pub fn map(desired: &Desired) -> String {
    let keyed = |port: Option<u16>| -> BTreeMap<String, &str> {
        let suffix = key_suffix(port);
        desired
            .passthrough
            .iter()
            .filter(|route| route.port == port)
            .filter_map(|route| {
                let key = match &route.host {
                    HostMatch::Exact(host) | HostMatch::Wildcard(host) => host.clone(),
                    HostMatch::Subdomains(suffix) => subdomains_key(suffix),
                    // The model gives passthrough routes a host SNI can name.
                    HostMatch::Any => return None,
                };
                Some((format!("{key}{suffix}"), route.backend.as_str()))
            })
            .collect()
    };
    let passed = keyed(None);
    let own_ports = own_ports(desired)
        .into_iter()
        .flat_map(|port| keyed(Some(port)));
    let terminated = desired.routes.iter().filter_map(|route| match &route.host {
        HostMatch::Exact(host)
            if !passed.contains_key(host.as_str()) && under_a_passed_wildcard(host, &passed) =>
        {
            Some((host.clone(), TERMINATE_BACKEND))
        }
        _ => None,
    });
    let lines: BTreeMap<String, &str> = passed
        .clone()
        .into_iter()
        .chain(terminated)
        .chain(own_ports)
        .collect();
    map_text::lines(
        MapOrder::Key,
        lines.iter().map(|(key, backend)| (key.as_str(), *backend)),
    )
}

/// The map key of a TLSRoute's any-depth wildcard of `suffix` (`.example.com`):
/// `example.com*`, apart from exact hosts and one-label wildcards.
fn subdomains_key(suffix: &str) -> String {
    format!("{}*", suffix.strip_prefix('.').unwrap_or(suffix))
}

/// Whether `host` falls under a wildcard of `passed` (map keys): a one-label one
/// (`.example.com`) or an any-depth one (`example.com*`) of any of its suffixes.
fn under_a_passed_wildcard(host: &str, passed: &BTreeMap<String, &str>) -> bool {
    let one_label = host.find('.').map(|dot| &host[dot..]);
    one_label.is_some_and(|suffix| passed.contains_key(suffix))
        || host
            .match_indices('.')
            .any(|(dot, _)| passed.contains_key(&subdomains_key(&host[dot..])))
}

/// The switching rules of a passthrough frontend whose map keys end in `suffix`
/// ([`key_suffix`]): the exact name, then the one-label wildcard (the name without its
/// first label), then the any-depth wildcards (TLSRoutes'): the name from its second
/// label on, then its third, and so on, the longest suffix first, down to
/// [`crate::settings::SUBDOMAIN_DEPTH`] labels below the suffix (as for HTTPRoutes'
/// hosts). The any-depth ones are always written, so that the first such wildcard is a
/// map update.
fn sni_lookups(map: &impl std::fmt::Display, suffix: &str) -> String {
    let keyed = |sni: &str| {
        if suffix.is_empty() {
            format!("{sni},map_str({map})")
        } else {
            format!("{sni},concat({suffix}),map_str({map})")
        }
    };
    let exact = keyed("req.ssl_sni,lower");
    let wildcard = keyed("req.ssl_sni,lower,regsub(^[^.]*,)");
    let subdomains = (2..crate::settings::SUBDOMAIN_DEPTH + 2).map(|from| {
        format!("req.ssl_sni,lower,field({from},.,0),concat(*{suffix}),map_str({map})")
    });
    let mut out = String::new();
    for lookup in [exact, wildcard].into_iter().chain(subdomains) {
        let _ = writeln!(
            out,
            "    use_backend %[{lookup}] if {{ {lookup} -m found }}"
        );
    }
    out
}

/// The TCP frontend of the HTTPS port and the hop's backend (empty without passthrough
/// there), then the frontends of the listener ports.
pub fn sections(desired: &Desired, settings: &RenderSettings) -> String {
    let mut out = https_sections(desired, settings);
    for port in own_ports(desired) {
        out.push_str(&own_port_section(port, desired, settings));
    }
    out
}

/// The passthrough frontend of the listener port `port`: the HTTPS port's lookups, in
/// keys of the port, and no hop (TLS for another name is closed).
fn own_port_section(port: u16, desired: &Desired, settings: &RenderSettings) -> String {
    // The model's ports come from the flag, which checked them.
    let Ok(bind_port) = ports::bind_port(port.into()) else {
        return String::new();
    };
    let bind = settings.bind(bind_port);
    let name = own_frontend(port);
    let map = settings.passthrough_map();
    let lookups = sni_lookups(&map.display(), &key_suffix(Some(port)));
    // Without a use_backend that matches, the frontend has no backend: closed.
    format!(
        "
# TLS passthrough on listener port {port}, bound at {bind_port}: the ClientHello's SNI
# chooses among the port's TLSRoutes; any other connection is closed.
{head}    tcp-request content reject
{lookups}",
        head = sni_frontend_head(&name, &bind, desired),
    )
}

/// The start of a frontend that reads the ClientHello on `bind` before it chooses: mode
/// tcp, the PROXY rules of the client's address, and `accept` once the ClientHello is
/// in (it ends the content rules: the lookups are switching rules, which run after).
fn sni_frontend_head(name: &str, bind: &str, desired: &Desired) -> String {
    // The outer PROXY header sets `src`, which the HTTPS port's hop carries on.
    let proxy_protocol = crate::client_address::connection_rules(&desired.global);
    format!(
        "frontend {name}
    mode tcp
    bind {bind}
{proxy_protocol}    option tcplog
    no option idle-close-on-response
    tcp-request inspect-delay {INSPECT_DELAY}
    tcp-request content accept if {{ req.ssl_hello_type 1 }}
"
    )
}

/// The TCP frontend of the HTTPS port and the hop's backend (empty without passthrough
/// there).
fn https_sections(desired: &Desired, settings: &RenderSettings) -> String {
    if !needed(desired) {
        return String::new();
    }
    let https = settings.bind(settings.https_port);
    let map = settings.passthrough_map();
    let map = map.display();
    let hop = settings.tls_hop_address();
    let lookups = sni_lookups(&map, "");
    let head = sni_frontend_head(FRONTEND, &https, desired);
    let mut out = String::new();
    let _ = write!(
        out,
        "
# TLS passthrough: the HTTPS port reads the ClientHello's SNI; the hosts of the
# passthrough map get their TLS undecrypted, every other connection is terminated by
# `frontend http` over the internal hop, with the client's address in PROXY v2.
{head}{lookups}    default_backend {TERMINATE_BACKEND}

backend {TERMINATE_BACKEND}
    mode tcp
    server hop {hop} send-proxy-v2
"
    );
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tugboat_model::desired::ServicePortRef;
    use tugboat_model::{
        Backend, BackendName, BackendOptions, Endpoint, ObjectKey, ObjectRef, PassthroughRoute,
    };

    use super::*;
    use crate::plan::{Applied, plan};
    use crate::runtime::RuntimeChange;

    fn settings() -> RenderSettings {
        RenderSettings::example()
    }

    /// The passthrough backend of Service `argocd` port 443, with one endpoint.
    fn argocd() -> (BackendName, Backend) {
        let service = ObjectKey::new("cd", "argocd");
        let port = ServicePortRef::Number(443);
        let name = BackendName::for_service_port(&service, &port).expect("a name");
        let backend = Backend {
            service,
            port,
            endpoints: vec![Endpoint {
                address: [10, 0, 0, 7].into(),
                port: 8443,
            }],
            draining: Vec::new(),
            external: None,
            options: Arc::new(BackendOptions {
                tls_passthrough: true,
                ..BackendOptions::default()
            }),
        };
        (name.passthrough(), backend)
    }

    /// A state whose `hosts` pass their TLS through to `argocd`.
    fn state(hosts: &[HostMatch]) -> Desired {
        let (name, backend) = argocd();
        let owner = ObjectRef::of("Ingress", &ObjectKey::new("cd", "argocd"));
        Desired {
            passthrough: hosts
                .iter()
                .map(|host| PassthroughRoute {
                    host: host.clone(),
                    backend: name.clone(),
                    owner: owner.clone(),
                    port: None,
                })
                .collect(),
            backends: [(name, backend)].into(),
            ..Desired::default()
        }
    }

    fn exact(host: &str) -> HostMatch {
        HostMatch::Exact(host.into())
    }

    #[test]
    fn without_passthrough_the_https_port_is_the_terminating_frontends() {
        let files = crate::render(&Desired::default(), &Default::default(), &settings());
        let config = files.get(&settings().config_file()).expect("config");
        assert!(
            config.contains("\n    bind 0.0.0.0:8443 ssl crt "),
            "{config}"
        );
        assert!(!config.contains(FRONTEND));
        assert!(!config.contains(TERMINATE_BACKEND));
        assert!(!config.contains("abns@tugboat-tls-hop"));
        assert!(files.get(&settings().passthrough_map()).is_none());
    }

    #[test]
    fn with_passthrough_a_tcp_frontend_binds_https_and_hops_with_proxy_v2() {
        let desired = state(&[
            exact("cd.example.com"),
            HostMatch::Wildcard(".apps.example.com".into()),
            HostMatch::Subdomains(".deep.example.com".into()),
        ]);
        let files = crate::render(&desired, &Default::default(), &settings());
        let config = files.get(&settings().config_file()).expect("config");
        let hop = settings().tls_hop_address();
        for line in [
            format!("    bind {hop} accept-proxy ssl crt "),
            format!("frontend {FRONTEND}\n    mode tcp\n    bind 0.0.0.0:8443\n"),
            "    tcp-request inspect-delay 5s\n".to_string(),
            "    tcp-request content accept if { req.ssl_hello_type 1 }\n".to_string(),
            "    use_backend %[req.ssl_sni,lower,map_str(/etc/haproxy/maps/passthrough.map)] if { req.ssl_sni,lower,map_str(/etc/haproxy/maps/passthrough.map) -m found }\n".to_string(),
            "    use_backend %[req.ssl_sni,lower,regsub(^[^.]*,),map_str(/etc/haproxy/maps/passthrough.map)] if { req.ssl_sni,lower,regsub(^[^.]*,),map_str(/etc/haproxy/maps/passthrough.map) -m found }\n".to_string(),
            "    use_backend %[req.ssl_sni,lower,field(2,.,0),concat(*),map_str(/etc/haproxy/maps/passthrough.map)] if { req.ssl_sni,lower,field(2,.,0),concat(*),map_str(/etc/haproxy/maps/passthrough.map) -m found }\n".to_string(),
            "    use_backend %[req.ssl_sni,lower,field(9,.,0),concat(*),map_str(/etc/haproxy/maps/passthrough.map)] if { req.ssl_sni,lower,field(9,.,0),concat(*),map_str(/etc/haproxy/maps/passthrough.map) -m found }\n    default_backend".to_string(),
            format!("    default_backend {TERMINATE_BACKEND}\n"),
            format!("backend {TERMINATE_BACKEND}\n    mode tcp\n    server hop {hop} send-proxy-v2\n"),
        ] {
            assert!(config.contains(&line), "no {line:?} in\n{config}");
        }
        // The HTTPS port is bound once: by the TCP frontend.
        assert_eq!(config.matches(":8443").count(), 1, "{config}");
        assert_eq!(
            files.get(&settings().passthrough_map()),
            Some(
                ".apps.example.com passthrough:cd_argocd_443\ncd.example.com passthrough:cd_argocd_443\ndeep.example.com* passthrough:cd_argocd_443\n"
            )
        );
        let backends = files.get(&settings().backends_file(0)).expect("backends");
        assert!(
            backends.contains("backend passthrough:cd_argocd_443\n    mode tcp\n    balance roundrobin\n    server s1 10.0.0.7:8443\n"),
            "{backends}"
        );
    }

    /// `state`, with `hosts` on the listener port `port` too.
    fn with_port(mut desired: Desired, port: u16, hosts: &[HostMatch]) -> Desired {
        let more = state(hosts)
            .passthrough
            .into_iter()
            .map(|route| PassthroughRoute {
                port: Some(port),
                ..route
            });
        desired.passthrough.extend(more);
        desired
    }

    #[test]
    fn a_listener_port_gets_a_frontend_of_its_own_with_keys_of_its_own() {
        let https_only = state(&[exact("cd.example.com")]);
        let desired = with_port(
            https_only.clone(),
            9443,
            &[
                exact("cd.example.com"),
                HostMatch::Wildcard(".apps.example.com".into()),
                HostMatch::Subdomains(".deep.example.com".into()),
            ],
        );
        let files = crate::render(&desired, &Default::default(), &settings());
        let config = files.get(&settings().config_file()).expect("config");
        let map = "/etc/haproxy/maps/passthrough.map";
        let lookup = |sni: &str| format!("    use_backend %[{sni}] if {{ {sni} -m found }}\n");
        let frontend = config
            .split("\nfrontend tls_passthrough_9443\n")
            .nth(1)
            .expect("the port's frontend");
        let frontend = frontend.split("\n\n").next().unwrap_or_default();
        for line in [
            "    mode tcp\n    bind 0.0.0.0:19443\n".to_string(),
            "    tcp-request content accept if { req.ssl_hello_type 1 }\n    tcp-request content reject\n".to_string(),
            lookup(&format!("req.ssl_sni,lower,concat(:9443),map_str({map})")),
            lookup(&format!("req.ssl_sni,lower,regsub(^[^.]*,),concat(:9443),map_str({map})")),
            lookup(&format!("req.ssl_sni,lower,field(2,.,0),concat(*:9443),map_str({map})")),
        ] {
            assert!(frontend.contains(&line), "no {line:?} in\n{frontend}");
        }
        assert!(!frontend.contains("default_backend"), "{frontend}");
        // The HTTPS port's frontend is as it was without the port.
        let https_config = crate::render(&https_only, &Default::default(), &settings());
        let https_config = https_config.get(&settings().config_file()).expect("config");
        let https_frontend = |config: &str| {
            let section = config.split("\nfrontend tls_passthrough\n").nth(1);
            section
                .and_then(|s| s.split("\n\n").next())
                .map(str::to_string)
        };
        assert_eq!(https_frontend(config), https_frontend(https_config));
        assert_eq!(
            files.get(&settings().passthrough_map()),
            Some(
                ".apps.example.com:9443 passthrough:cd_argocd_443\n\
                 cd.example.com passthrough:cd_argocd_443\n\
                 cd.example.com:9443 passthrough:cd_argocd_443\n\
                 deep.example.com*:9443 passthrough:cd_argocd_443\n"
            )
        );
        // Only a listener port: the HTTPS port is the terminating frontend's, no hop.
        let port_only = with_port(state(&[]), 9443, &[exact("cd.example.com")]);
        let files = crate::render(&port_only, &Default::default(), &settings());
        let config = files.get(&settings().config_file()).expect("config");
        assert!(
            config.contains("\n    bind 0.0.0.0:8443 ssl crt "),
            "{config}"
        );
        assert!(!config.contains("\nfrontend tls_passthrough\n"), "{config}");
        assert!(
            config.contains("\nfrontend tls_passthrough_9443\n"),
            "{config}"
        );
        assert!(!config.contains(TERMINATE_BACKEND));
        assert_eq!(
            files.get(&settings().passthrough_map()),
            Some("cd.example.com:9443 passthrough:cd_argocd_443\n")
        );
    }

    #[test]
    fn a_new_listener_port_reloads_and_its_hosts_are_map_updates() {
        let applied = plan(None, state(&[exact("cd.example.com")]), &settings()).next;
        let first = with_port(
            state(&[exact("cd.example.com")]),
            9443,
            &[exact("a.example.com")],
        );
        let new_port = plan(Some(&applied), first, &settings());
        assert_eq!(
            new_port.reload,
            Some(crate::ReloadReason::Binds),
            "a new frontend"
        );
        let more = with_port(
            state(&[exact("cd.example.com")]),
            9443,
            &[exact("a.example.com"), exact("b.example.com")],
        );
        let added = plan(Some(&new_port.next), more, &settings());
        assert_eq!(added.reload, None);
        assert_eq!(added.changed, vec![settings().passthrough_map()]);
        assert!(
            matches!(added.runtime.as_slice(), [RuntimeChange::MapAdd { .. }]),
            "{:?}",
            added.runtime
        );
    }

    /// HTTP routing prefers an exact host to a wildcard: an exact host with routes of its
    /// own under a passthrough wildcard is terminated, one passed through itself is not.
    #[test]
    fn exact_hosts_with_routes_under_a_passthrough_wildcard_are_terminated() {
        let mut desired = state(&[
            HostMatch::Wildcard(".apps.example.com".into()),
            exact("cd.apps.example.com"),
        ]);
        let (name, backend) = argocd();
        let route = |host: &str| tugboat_model::Route {
            host: exact(host),
            path: tugboat_model::PathMatch::Prefix("/".into()),
            backend: name.clone(),
            ingress: ObjectKey::new("cd", "shop"),
            owner_kind: tugboat_model::RouteOwnerKind::Ingress,
            features: None,
            canary: None,
        };
        desired.routes = vec![
            route("cd.apps.example.com"),
            route("shop.apps.example.com"),
            route("a.b.apps.example.com"),
            route("other.example.com"),
        ];
        desired.backends.insert(name.clone(), backend);
        assert_eq!(
            map(&desired),
            ".apps.example.com passthrough:cd_argocd_443\n\
             cd.apps.example.com passthrough:cd_argocd_443\n\
             shop.apps.example.com tls_terminate\n"
        );
    }

    /// A route patch beside passthrough is planned whole: the passthrough map depends on
    /// every route.
    #[test]
    fn a_route_patch_beside_passthrough_is_planned_whole() {
        let applied = plan(None, state(&[exact("cd.example.com")]), &settings()).next;
        let route = tugboat_model::Route {
            host: exact("shop.example.com"),
            path: tugboat_model::PathMatch::Prefix("/".into()),
            backend: argocd().0,
            ingress: ObjectKey::new("cd", "shop"),
            owner_kind: tugboat_model::RouteOwnerKind::Ingress,
            features: None,
            canary: None,
        };
        let patch = tugboat_model::Patch {
            routes: [(
                ObjectKey::new("cd", "shop"),
                tugboat_model::IngressRoutes {
                    before: Vec::new(),
                    after: vec![route],
                },
            )]
            .into(),
            ..tugboat_model::Patch::default()
        };
        let refused = crate::plan_patch(applied, &patch, &settings()).expect_err("planned whole");
        assert_eq!(refused.why, "routes beside TLS passthrough");
    }

    #[test]
    fn a_host_added_or_removed_for_a_known_backend_is_a_map_update() {
        let before = plan(None, state(&[exact("cd.example.com")]), &settings());
        assert!(before.reload.is_some());
        let applied: Applied = before.next;
        let more = state(&[exact("cd.example.com"), exact("argo.example.com")]);
        let added = plan(Some(&applied), more, &settings());
        assert_eq!(added.reload, None);
        assert_eq!(added.changed, vec![settings().passthrough_map()]);
        assert!(
            matches!(added.runtime.as_slice(), [RuntimeChange::MapAdd { .. }]),
            "{:?}",
            added.runtime
        );
        let removed = plan(
            Some(&added.next),
            state(&[exact("cd.example.com")]),
            &settings(),
        );
        assert_eq!(removed.reload, None);
        assert_eq!(removed.changed, vec![settings().passthrough_map()]);
    }

    #[test]
    fn the_first_passthrough_host_and_the_removal_of_the_last_reload() {
        let applied = plan(None, Desired::default(), &settings()).next;
        let first = plan(
            Some(&applied),
            state(&[exact("cd.example.com")]),
            &settings(),
        );
        assert!(first.reload.is_some());
        let none = Desired {
            backends: state(&[]).backends,
            ..Desired::default()
        };
        let last = plan(Some(&first.next), none, &settings());
        assert!(last.reload.is_some());
    }
}
