//! The annotation prefixes Tugboat reads: its own, the legacy one it shares with other
//! controllers, and those of the controllers users move from (ingress-nginx, HAProxy
//! Technologies' and jcmoraisjr's HAProxy controllers).
//!
//! A key under any of these prefixes is never ignored silently: either Tugboat reads it
//! (see [`super::KEYS`]) or the object gets a problem naming it. Keys that restrict who
//! may reach a route ([`restricts_access`]) and that Tugboat cannot honour make the
//! routes refuse every request (fail closed) unless the operator says otherwise
//! ([`UnsupportedAccess`]). Another controller's snippet (never run) restricts access
//! when one of its directives does ([`unread_restriction`]).

use std::fmt;

/// The controller a prefix belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ecosystem {
    /// `tugboat.dev/`.
    Tugboat,
    /// `ingress.kubernetes.io/`: the legacy prefix (HAProxy Ingress' backward-compatible
    /// one; early releases of the others used it), read as Tugboat's own except for the
    /// keys those controllers gave another meaning (see [`super::keys::targets`]).
    Legacy,
    /// ingress-nginx: `nginx.ingress.kubernetes.io/`.
    IngressNginx,
    /// HAProxy Technologies' controller: `haproxy.org/` and `haproxy.com/`.
    HaproxyTech,
    /// jcmoraisjr's HAProxy Ingress: `haproxy-ingress.github.io/`.
    HaproxyIngress,
}

impl Ecosystem {
    /// The controller's name as users know it.
    pub fn controller(self) -> &'static str {
        match self {
            Ecosystem::Tugboat => "Tugboat",
            Ecosystem::Legacy => "the legacy ingress.kubernetes.io prefix",
            Ecosystem::IngressNginx => "ingress-nginx",
            Ecosystem::HaproxyTech => "HAProxy Technologies' ingress controller",
            Ecosystem::HaproxyIngress => "HAProxy Ingress (jcmoraisjr)",
        }
    }

    /// The prefix written in the reference for this ecosystem.
    pub fn prefix(self) -> &'static str {
        match self {
            Ecosystem::Tugboat => "tugboat.dev/",
            Ecosystem::Legacy => "ingress.kubernetes.io/",
            Ecosystem::IngressNginx => "nginx.ingress.kubernetes.io/",
            Ecosystem::HaproxyTech => "haproxy.org/",
            Ecosystem::HaproxyIngress => "haproxy-ingress.github.io/",
        }
    }
}

impl fmt::Display for Ecosystem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.controller())
    }
}

/// Every prefix read, and whose it is.
pub const PREFIXES: &[(&str, Ecosystem)] = &[
    ("tugboat.dev/", Ecosystem::Tugboat),
    ("ingress.kubernetes.io/", Ecosystem::Legacy),
    ("nginx.ingress.kubernetes.io/", Ecosystem::IngressNginx),
    ("haproxy.org/", Ecosystem::HaproxyTech),
    ("haproxy.com/", Ecosystem::HaproxyTech),
    ("haproxy-ingress.github.io/", Ecosystem::HaproxyIngress),
];

/// The ecosystem and the key of an annotation name under a known prefix.
pub fn split_annotation(name: &str) -> Option<(Ecosystem, &str)> {
    PREFIXES
        .iter()
        .find_map(|(prefix, ecosystem)| Some((*ecosystem, name.strip_prefix(prefix)?)))
}

/// What the routes of an object do when it sets a key that restricts access and that
/// Tugboat does not support (`--unsupported-access-keys`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum UnsupportedAccess {
    /// Every request of the routes is refused with 403 until the key is removed or
    /// supported (fail closed).
    #[default]
    Deny,
    /// The routes are served without the restriction (the problem is still reported).
    Ignore,
}

impl UnsupportedAccess {
    pub fn as_str(self) -> &'static str {
        match self {
            UnsupportedAccess::Deny => "deny",
            UnsupportedAccess::Ignore => "ignore",
        }
    }
}

/// Keys that relax a restriction rather than impose one (exemptions from rate limits,
/// turning a global authentication off), though their names look like access keys.
const RELAXING: &[&str] = &[
    "limit-whitelist",
    "limit-allowlist",
    "rate-limit-whitelist",
    "enable-global-auth",
    "allowlist-source-header",
    "auth-log-format",
    "client-crt-optional",
    "auth-tls-verify-optional",
];

/// Whether a key (without its prefix), in any ecosystem, restricts who may reach a
/// route: authentication of any kind, allow and deny lists, client certificates, rate
/// and connection limits, external authentication, web application firewalls. Judged
/// by name so that keys of releases not listed anywhere here are caught too; a key
/// that merely looks like one is refused rather than served open.
pub fn restricts_access(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    if RELAXING.contains(&key.as_str()) {
        return false;
    }
    const STARTS: &[&str] = &[
        "auth",
        "oauth",
        "limit-",
        "rate-limit",
        "client-ca",
        "client-crt",
        "waf",
        "route-acl",
        "satisfy",
    ];
    const CONTAINS: &[&str] = &[
        "whitelist",
        "allowlist",
        "allow-list",
        "blacklist",
        "denylist",
        "deny-list",
        "source-range",
        "modsecurity",
        "owasp",
        "-auth",
        "basic-auth",
        "jwt",
        "verify-client",
    ];
    STARTS.iter().any(|s| key.starts_with(s)) || CONTAINS.iter().any(|c| key.contains(c))
}

/// Why an annotation that Tugboat does not read restricts access: by its name
/// ([`restricts_access`]: `None` in the tuple's second place), or, for ingress-nginx's
/// snippets (also under the legacy prefix its early releases used), by a directive of
/// the nginx configuration it holds (named). `None`: it restricts nothing.
pub fn unread_restriction(ecosystem: Ecosystem, key: &str, value: &str) -> Option<Option<String>> {
    if restricts_access(key) {
        return Some(None);
    }
    let nginx = matches!(ecosystem, Ecosystem::IngressNginx | Ecosystem::Legacy);
    if nginx && super::nginx_snippet::is_snippet_key(key) {
        return super::nginx_snippet::restriction(value).map(Some);
    }
    if is_haproxy_snippet_key(ecosystem, key) {
        return super::snippet::restriction(value).map(Some);
    }
    None
}

/// The HAProxy controllers' raw haproxy lines: HAProxy Technologies'
/// `*-config-snippet`, HAProxy Ingress' `config-*`.
fn is_haproxy_snippet_key(ecosystem: Ecosystem, key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    match ecosystem {
        Ecosystem::HaproxyTech => key.contains("snippet"),
        Ecosystem::HaproxyIngress => key.starts_with("config-") || key.contains("snippet"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_are_split_by_their_prefix() {
        assert_eq!(
            split_annotation("tugboat.dev/hsts"),
            Some((Ecosystem::Tugboat, "hsts"))
        );
        assert_eq!(
            split_annotation("nginx.ingress.kubernetes.io/auth-url"),
            Some((Ecosystem::IngressNginx, "auth-url"))
        );
        assert_eq!(
            split_annotation("ingress.kubernetes.io/whitelist"),
            Some((Ecosystem::Legacy, "whitelist"))
        );
        assert_eq!(
            split_annotation("haproxy.com/allow-list"),
            Some((Ecosystem::HaproxyTech, "allow-list"))
        );
        assert_eq!(
            split_annotation("haproxy-ingress.github.io/waf"),
            Some((Ecosystem::HaproxyIngress, "waf"))
        );
        assert_eq!(split_annotation("kubernetes.io/ingress.class"), None);
        assert_eq!(split_annotation("example.com/auth-url"), None);
    }

    #[test]
    fn access_keys_of_every_peer_restrict_access() {
        for key in [
            // ingress-nginx
            "auth-url",
            "auth-type",
            "auth-tls-secret",
            "auth-tls-verify-client",
            "whitelist-source-range",
            "denylist-source-range",
            "limit-rps",
            "limit-connections",
            "enable-modsecurity",
            "enable-owasp-core-rules",
            // HAProxy Technologies
            "allow-list",
            "whitelist",
            "blacklist",
            "client-ca",
            "rate-limit-requests",
            "route-acl",
            // HAProxy Ingress
            "allowlist-source-range",
            "oauth",
            "waf",
            "waf-mode",
        ] {
            assert!(restricts_access(key), "{key}");
        }
    }

    #[test]
    fn other_keys_and_exemptions_do_not_restrict_access() {
        for key in [
            "rewrite-target",
            "ssl-redirect",
            "cors-allow-origin",
            "cors-allow-headers",
            "proxy-body-size",
            "limit-whitelist",
            "rate-limit-whitelist",
            "enable-global-auth",
            "configuration-snippet",
            "canary-weight",
        ] {
            assert!(!restricts_access(key), "{key}");
        }
    }

    #[test]
    fn an_nginx_snippet_restricts_access_by_its_directives() {
        let nginx = Ecosystem::IngressNginx;
        assert_eq!(
            unread_restriction(nginx, "configuration-snippet", "deny all;"),
            Some(Some("`deny`".into()))
        );
        assert_eq!(
            unread_restriction(Ecosystem::Legacy, "server-snippet", "satisfy any;"),
            Some(Some("`satisfy`".into()))
        );
        assert_eq!(
            unread_restriction(nginx, "configuration-snippet", "more_set_headers \"X: y\";"),
            None
        );
        // By name, whatever the value.
        assert_eq!(unread_restriction(nginx, "auth-snippet", "x"), Some(None));
        // The HAProxy controllers' snippets are haproxy lines.
        assert_eq!(
            unread_restriction(
                Ecosystem::HaproxyTech,
                "backend-config-snippet",
                "http-request deny"
            ),
            Some(Some("`http-request deny`".into()))
        );
        assert_eq!(
            unread_restriction(
                Ecosystem::HaproxyIngress,
                "config-backend",
                "http-response set-header X-A b"
            ),
            None
        );
    }
}
