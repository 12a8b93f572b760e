//! External authentication (`auth-url`): haproxy has no authentication subrequest of
//! its own, so a small Lua action asks the authentication service with haproxy's
//! built-in HTTP client (`core.httpclient`, haproxy 2.6 and later built with Lua, as
//! the official image is) and the frontend's rules answer from what it found.
//!
//! Lua was chosen over the alternatives: a SPOE agent would be one more process to run
//! beside haproxy, and a `http-request` to a backend cannot carry a request's headers
//! out and bring the answer's back. The script is a fixed file the controller writes;
//! the values of each Ingress are the action's arguments, validated by the model
//! ([`tugboat_model::validate::service_url_template`], header names), so user text never
//! reaches the script and cannot break the rule it is written in. The nginx variables
//! a URL may hold (`$host`, `${escaped_request_uri}`) are written as they are (outside
//! double quotes haproxy reads `$` and braces as plain bytes) and filled in by the
//! script per request.
//!
//! The action only sets `txn.tugboat_auth`; the rules refuse every request of the sets
//! whose value is not `allow` (500), so a Lua error, a timeout or an unexpected answer
//! never lets a request through.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use tugboat_model::features::{FeatureSetId, RouteFeatures};

use crate::rules::{group, groups_acl, sets_acl};

/// The Lua script, loaded with `lua-load` when some route uses external authentication.
pub const SCRIPT: &str = include_str!("lua/external_auth.lua");

/// Whether some feature set uses external authentication (and haproxy needs the script).
pub fn needed(sets: &BTreeMap<FeatureSetId, RouteFeatures>) -> bool {
    sets.values().any(|f| f.external_auth.is_some())
}

/// The `http-request` rules of external authentication: one Lua call per distinct
/// setting (on a haproxy built without Lua: 403 for every request of the sets), then
/// the answers shared by every set that uses it.
pub fn rules(sets: &BTreeMap<FeatureSetId, RouteFeatures>, out: &mut String) {
    let groups = group(sets, |f| f.external_auth.as_ref());
    if groups.is_empty() {
        return;
    }
    let acl = groups_acl(&groups);
    // A haproxy built without Lua skips the calls and refuses the routes (403).
    out.push_str("    .if feature(LUA)\n");
    for (auth, ids) in &groups {
        let headers = if auth.response_headers.is_empty() {
            "-".to_string()
        } else {
            auth.response_headers.join(",")
        };
        let signin = auth.signin.as_deref().unwrap_or("-");
        let _ = writeln!(
            out,
            "    http-request lua.tugboat_auth {} {} {headers} {signin} if {}",
            auth.method,
            auth.url,
            sets_acl(ids)
        );
    }
    let _ = writeln!(
        out,
        "    .else\n    http-request deny deny_status 403 if {acl}\n    .endif"
    );
    let _ = writeln!(
        out,
        "    http-request redirect location %[var(txn.tugboat_auth_location)] code 302 if {acl} {{ var(txn.tugboat_auth) -m str signin }}\n    \
         http-request return status 401 hdr WWW-Authenticate \"%[var(txn.tugboat_auth_challenge)]\" if {acl} {{ var(txn.tugboat_auth) -m str 401 }} {{ var(txn.tugboat_auth_challenge) -m found }}\n    \
         http-request deny deny_status 401 if {acl} {{ var(txn.tugboat_auth) -m str 401 }}\n    \
         http-request deny deny_status 403 if {acl} {{ var(txn.tugboat_auth) -m str 403 }}\n    \
         http-request deny deny_status 500 if {acl} !{{ var(txn.tugboat_auth) -m str allow }}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use tugboat_model::features::ExternalAuth;

    fn sets(auths: &[ExternalAuth]) -> BTreeMap<FeatureSetId, RouteFeatures> {
        auths
            .iter()
            .map(|auth| {
                let features = RouteFeatures {
                    external_auth: Some(auth.clone()),
                    ..RouteFeatures::default()
                };
                (FeatureSetId::of(&features), features)
            })
            .collect()
    }

    fn auth(url: &str) -> ExternalAuth {
        ExternalAuth {
            url: url.into(),
            method: "GET".into(),
            response_headers: vec![],
            signin: None,
        }
    }

    #[test]
    fn no_rules_and_no_script_without_external_authentication() {
        let mut out = String::new();
        rules(&BTreeMap::new(), &mut out);
        assert_eq!(out, "");
        assert!(!needed(&BTreeMap::new()));
    }

    #[test]
    fn the_action_gets_the_validated_values_as_words() {
        let sets = sets(&[ExternalAuth {
            response_headers: vec!["X-User".into(), "X-Email".into()],
            signin: Some("https://login.example.com/start".into()),
            ..auth("http://auth.example.com:9000/check")
        }]);
        let id = sets.keys().next().expect("one set");
        let mut out = String::new();
        rules(&sets, &mut out);
        assert!(needed(&sets));
        assert!(
            out.contains(&format!(
                "http-request lua.tugboat_auth GET http://auth.example.com:9000/check X-User,X-Email https://login.example.com/start if {{ var(txn.fs) -m str {id} }}"
            )),
            "{out}"
        );
    }

    #[test]
    fn nginx_variables_reach_the_action_as_written() {
        let sets = sets(&[ExternalAuth {
            signin: Some("https://${host}/start?rd=$escaped_request_uri".into()),
            ..auth("https://$host/oauth2/auth")
        }]);
        let mut out = String::new();
        rules(&sets, &mut out);
        assert!(
            out.contains(
                "lua.tugboat_auth GET https://$host/oauth2/auth - https://${host}/start?rd=$escaped_request_uri if "
            ),
            "{out}"
        );
    }

    #[test]
    fn whatever_is_not_allowed_is_refused_after_the_answers() {
        let sets = sets(&[auth("http://a.example.com/"), auth("http://b.example.com/")]);
        let mut out = String::new();
        rules(&sets, &mut out);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 11, "{out}");
        assert_eq!(lines[0], "    .if feature(LUA)");
        assert!(lines[1].contains("lua.tugboat_auth GET http://a.example.com/ - -"));
        assert!(lines[2].contains("lua.tugboat_auth GET http://b.example.com/ - -"));
        assert_eq!(lines[3], "    .else");
        assert!(lines[4].starts_with("    http-request deny deny_status 403 if "));
        assert_eq!(lines[5], "    .endif");
        assert!(lines[6].contains("redirect location %[var(txn.tugboat_auth_location)] code 302"));
        assert!(lines[7].contains("return status 401 hdr WWW-Authenticate"));
        assert!(lines[8].contains("deny deny_status 401"));
        assert!(lines[9].contains("deny deny_status 403"));
        assert!(lines[10].contains("deny deny_status 500"));
        assert!(lines[10].contains("!{ var(txn.tugboat_auth) -m str allow }"));
        for id in sets.keys() {
            assert!(lines[4].contains(id.as_str()), "{out}");
            assert!(lines[10].contains(id.as_str()), "{out}");
        }
    }
}
