//! Annotations under Tugboat's prefix or another controller's that Tugboat does not
//! read: never ignored silently (a problem names the object and the key), and a key
//! that restricts access makes the routes it applies to refuse everybody unless the
//! operator says otherwise.

mod common;

use std::collections::BTreeMap;

use common::shop_ingress as ingress;
use k8s_openapi::api::networking::v1::Ingress;
use tugboat_model::annotations::UnsupportedAccess;
use tugboat_model::{BuildOutput, ObjectKey, Settings, Snapshot, build};

fn snapshot(ingresses: &[Ingress], service_annotations: &[(&str, &str)]) -> Snapshot {
    let service = common::web_service(service_annotations);
    let ingresses = ingresses.iter().cloned().map(common::Object::from);
    common::snapshot_of(ingresses.chain([service.into()]))
}

fn settings(access: UnsupportedAccess) -> Settings {
    Settings {
        unsupported_access: access,
        ..Settings::new(1_700_000_000)
    }
}

/// Whether the routes of Ingress `name` refuse everybody.
fn denied_by_path(output: &BuildOutput) -> BTreeMap<String, bool> {
    output
        .desired
        .routes
        .iter()
        .map(|route| {
            let denied = route
                .features
                .as_ref()
                .and_then(|id| output.desired.feature_sets.get(id))
                .is_some_and(|f| f.deny_all);
            (route.path.to_string(), denied)
        })
        .collect()
}

#[test]
fn an_unsupported_peer_access_key_refuses_the_routes_of_its_ingress_only() {
    let snapshot = snapshot(
        &[
            ingress(
                "office",
                "/office",
                &[(
                    "nginx.ingress.kubernetes.io/auth-tls-secret",
                    "other-namespace/client-ca",
                )],
            ),
            ingress("site", "/", &[]),
        ],
        &[],
    );
    let output = build(&snapshot, &settings(UnsupportedAccess::Deny));
    let denied = denied_by_path(&output);
    assert_eq!(denied.len(), 2, "{denied:?}");
    assert!(
        denied
            .iter()
            .any(|(path, d)| path.contains("/office") && *d)
    );
    assert!(
        denied
            .iter()
            .any(|(path, d)| !path.contains("/office") && !*d)
    );
    let problem = output
        .problems
        .iter()
        .find(|p| &*p.object.name == "office")
        .expect("a problem on the Ingress");
    assert_eq!(
        problem.field,
        "metadata.annotations.nginx.ingress.kubernetes.io/auth-tls-secret"
    );
    assert!(problem.message.contains("'auth-tls-secret'"), "{problem}");
    assert!(problem.message.contains("ingress-nginx"), "{problem}");
    assert!(problem.message.contains("403"), "{problem}");
    assert!(!output.problems.iter().any(|p| &*p.object.name == "site"));
}

#[test]
fn with_ignore_the_routes_are_served_and_the_problem_says_so() {
    let snapshot = snapshot(
        &[ingress(
            "office",
            "/office",
            &[(
                "haproxy-ingress.github.io/auth-url",
                "http://auth.example.com/",
            )],
        )],
        &[],
    );
    let output = build(&snapshot, &settings(UnsupportedAccess::Ignore));
    assert!(denied_by_path(&output).values().all(|d| !d));
    let problem = output
        .problems
        .iter()
        .find(|p| &*p.object.name == "office")
        .expect("a problem on the Ingress");
    assert!(
        problem
            .message
            .contains("--unsupported-access-keys=ignore serves"),
        "{problem}"
    );
}

#[test]
fn an_unsupported_key_that_does_not_restrict_access_is_a_problem_only() {
    let snapshot = snapshot(
        &[ingress(
            "proxy",
            "/",
            &[
                ("nginx.ingress.kubernetes.io/proxy-buffering", "on"),
                ("tugboat.dev/no-such-key", "x"),
                ("ingress.kubernetes.io/no-such-legacy-key", "x"),
                ("example.com/not-ours", "x"),
            ],
        )],
        &[],
    );
    let output = build(&snapshot, &settings(UnsupportedAccess::Deny));
    assert!(denied_by_path(&output).values().all(|d| !d));
    let fields: Vec<&str> = output.problems.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "metadata.annotations.ingress.kubernetes.io/no-such-legacy-key",
            "metadata.annotations.nginx.ingress.kubernetes.io/proxy-buffering",
            "metadata.annotations.tugboat.dev/no-such-key",
        ]
    );
    assert!(
        output
            .problems
            .iter()
            .all(|p| p.message.contains("no effect")),
        "{:?}",
        output.problems
    );
}

#[test]
fn an_unknown_access_key_under_our_own_prefix_fails_closed_too() {
    let snapshot = snapshot(
        &[ingress(
            "shop",
            "/",
            &[("tugboat.dev/auth-ldap", "ldap://auth/")],
        )],
        &[],
    );
    let output = build(&snapshot, &settings(UnsupportedAccess::Deny));
    assert!(denied_by_path(&output).values().all(|d| *d));
    assert!(
        output.problems[0]
            .message
            .contains("unknown key 'auth-ldap'")
    );
}

#[test]
fn a_service_with_an_unsupported_access_key_refuses_the_routes_to_it() {
    let snapshot = snapshot(
        &[ingress("shop", "/", &[])],
        &[("haproxy.org/client-ca", "default/ca")],
    );
    let output = build(&snapshot, &settings(UnsupportedAccess::Deny));
    assert!(denied_by_path(&output).values().all(|d| *d));
    let problem = &output.problems[0];
    assert_eq!(problem.object.kind, "Service");
    assert!(
        problem.message.contains("the routes to this Service"),
        "{problem}"
    );
}

/// The features of the only route.
fn features(output: &BuildOutput) -> tugboat_model::RouteFeatures {
    let route = &output.desired.routes[0];
    route
        .features
        .as_ref()
        .and_then(|id| output.desired.feature_sets.get(id))
        .cloned()
        .unwrap_or_default()
}

fn one_ingress(annotations: &[(&str, &str)]) -> BuildOutput {
    build(
        &snapshot(&[ingress("shop", "/", annotations)], &[]),
        &settings(UnsupportedAccess::Deny),
    )
}

#[test]
fn a_peer_allow_list_with_a_value_tugboat_refuses_fails_closed() {
    let output = one_ingress(&[(
        "haproxy-ingress.github.io/allowlist-source-range",
        "10.0.0.0/8,!10.100.0.0/16",
    )]);
    let features = features(&output);
    assert!(features.deny_all, "{features:?}");
    assert!(features.allow_list.is_empty(), "{features:?}");
    let problem = &output.problems[0];
    assert!(
        problem
            .field
            .ends_with("haproxy-ingress.github.io/allowlist-source-range")
    );
    assert!(problem.message.contains("403"), "{problem}");
}

#[test]
fn an_invalid_value_of_our_own_access_key_fails_closed() {
    let output = one_ingress(&[("tugboat.dev/allow-list", "10.0.0.0/8, bogus")]);
    let refused = features(&output);
    assert!(refused.deny_all, "{refused:?}");
    let problem = &output.problems[0];
    assert!(
        problem.field.ends_with("tugboat.dev/allow-list"),
        "{problem}"
    );
    assert!(problem.message.contains("403"), "{problem}");
    // A key that does not restrict access is ignored, as before.
    let output = one_ingress(&[("tugboat.dev/timeout-server", "soon")]);
    assert!(!features(&output).deny_all);
    assert!(output.problems[0].message.contains("ignored"));
}

#[test]
fn ingress_nginx_allow_and_deny_lists_are_read_as_tugboat_s() {
    let output = one_ingress(&[
        (
            "nginx.ingress.kubernetes.io/whitelist-source-range",
            "10.0.0.0/24, 192.168.1.7",
        ),
        (
            "nginx.ingress.kubernetes.io/denylist-source-range",
            "10.0.0.9",
        ),
    ]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    let features = features(&output);
    assert!(!features.deny_all);
    assert_eq!(features.allow_list, ["10.0.0.0/24", "192.168.1.7"]);
    assert_eq!(features.deny_list, ["10.0.0.9"]);
}

#[test]
fn tugboat_s_own_key_beats_another_controller_s() {
    let output = one_ingress(&[
        (
            "nginx.ingress.kubernetes.io/whitelist-source-range",
            "10.0.0.0/8",
        ),
        ("haproxy.org/allow-list", "172.16.0.0/12"),
        ("tugboat.dev/allow-list", "192.168.0.0/16"),
    ]);
    assert_eq!(features(&output).allow_list, ["192.168.0.0/16"]);
}

#[test]
fn ingress_nginx_backend_protocol_and_timeouts_are_read_as_tugboat_s() {
    let output = one_ingress(&[
        ("nginx.ingress.kubernetes.io/backend-protocol", "grpcs"),
        ("nginx.ingress.kubernetes.io/proxy-read-timeout", "120"),
        ("nginx.ingress.kubernetes.io/proxy-connect-timeout", "3"),
    ]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    let backend = output.desired.backends.values().next().expect("a backend");
    assert!(backend.options.tls.is_some(), "{:?}", backend.options);
    assert!(backend.options.h2);
    assert_eq!(backend.options.timeout_server.as_deref(), Some("120s"));
    assert_eq!(backend.options.timeout_connect.as_deref(), Some("3s"));
}

#[test]
fn a_peer_value_tugboat_cannot_honour_is_a_problem_naming_key_and_value() {
    let output = one_ingress(&[("nginx.ingress.kubernetes.io/backend-protocol", "FCGI")]);
    let problem = &output.problems[0];
    assert!(
        problem
            .field
            .ends_with("nginx.ingress.kubernetes.io/backend-protocol")
    );
    assert!(problem.message.contains("'FCGI'"), "{problem}");
    assert!(!features(&output).deny_all);
    let backend = output.desired.backends.values().next().expect("a backend");
    assert!(backend.options.tls.is_none());
}

#[test]
fn ingress_nginx_cors_keeps_its_credentials_default_for_listed_origins_unless_set() {
    let on = features(&one_ingress(&[
        ("nginx.ingress.kubernetes.io/enable-cors", "true"),
        (
            "nginx.ingress.kubernetes.io/cors-allow-origin",
            "https://app.example.com",
        ),
        (
            "nginx.ingress.kubernetes.io/cors-allow-methods",
            "get, post",
        ),
    ]));
    let cors = on.cors.expect("CORS");
    assert!(cors.credentials);
    assert_eq!(cors.methods, "GET, POST");
    // Any origin (the default): browsers refuse credentials beside `*`, none offered.
    let any = features(&one_ingress(&[(
        "nginx.ingress.kubernetes.io/enable-cors",
        "true",
    )]));
    assert!(!any.cors.expect("CORS").credentials);
    let off = features(&one_ingress(&[
        ("nginx.ingress.kubernetes.io/enable-cors", "true"),
        (
            "nginx.ingress.kubernetes.io/cors-allow-credentials",
            "false",
        ),
    ]));
    assert!(!off.cors.expect("CORS").credentials);
}

#[test]
fn basic_auth_as_each_controller_writes_it() {
    for annotations in [
        &[
            ("nginx.ingress.kubernetes.io/auth-type", "basic"),
            ("nginx.ingress.kubernetes.io/auth-secret", "default/users"),
        ][..],
        &[
            ("haproxy.org/auth-type", "basic-auth"),
            ("haproxy.org/auth-secret", "users"),
        ],
        &[("haproxy-ingress.github.io/auth-secret", "users")],
    ] {
        let output = one_ingress(annotations);
        let auth = features(&output).basic_auth.expect("basic auth");
        assert!(auth.userlist.contains("users") || auth.userlist == "tugboat_no_users");
        // The Secret is missing here: the problem names it.
        assert!(
            output
                .problems
                .iter()
                .any(|p| p.message.contains("default/users")),
            "{annotations:?}: {:?}",
            output.problems
        );
    }
}

#[test]
fn digest_auth_and_secrets_of_other_namespaces_fail_closed() {
    for annotations in [
        &[
            ("nginx.ingress.kubernetes.io/auth-type", "digest"),
            ("nginx.ingress.kubernetes.io/auth-secret", "users"),
        ][..],
        &[
            ("nginx.ingress.kubernetes.io/auth-type", "basic"),
            ("nginx.ingress.kubernetes.io/auth-secret", "other/users"),
        ],
    ] {
        let output = one_ingress(annotations);
        assert!(features(&output).deny_all, "{annotations:?}");
    }
}

/// The legacy prefix is read with the meaning its users gave it: HAProxy Ingress' (a
/// lone `auth-secret` turns basic authentication on) and ingress-nginx's before 0.9
/// (`auth-type: basic`); HAProxy Ingress' own deprecated `auth-type: basic` too.
#[test]
fn the_legacy_prefix_and_haproxy_ingress_auth_type_turn_basic_auth_on() {
    for annotations in [
        &[("ingress.kubernetes.io/auth-secret", "users")][..],
        &[
            ("ingress.kubernetes.io/auth-secret", "default/users"),
            ("ingress.kubernetes.io/auth-realm", "Staff"),
        ],
        &[
            ("ingress.kubernetes.io/auth-type", "basic"),
            ("ingress.kubernetes.io/auth-secret", "users"),
        ],
        &[
            ("ingress.kubernetes.io/auth-type", "basic-auth"),
            ("ingress.kubernetes.io/auth-secret", "users"),
        ],
        &[
            ("haproxy-ingress.github.io/auth-type", "basic"),
            ("haproxy-ingress.github.io/auth-secret", "users"),
        ],
    ] {
        let output = one_ingress(annotations);
        let features = features(&output);
        assert!(!features.deny_all, "{annotations:?}");
        let auth = features.basic_auth.expect("basic auth");
        assert_eq!(auth.userlist, "tugboat_no_users", "{annotations:?}");
        // Only the missing Secret is a problem.
        assert!(
            output
                .problems
                .iter()
                .all(|p| p.message.contains("default/users") && p.message.contains("(401)")),
            "{annotations:?}: {:?}",
            output.problems
        );
    }
    let realm = features(&one_ingress(&[
        ("ingress.kubernetes.io/auth-secret", "users"),
        ("ingress.kubernetes.io/auth-realm", "Staff"),
    ]));
    assert_eq!(realm.basic_auth.expect("basic auth").realm, "Staff");
}

#[test]
fn a_legacy_auth_type_tugboat_cannot_honour_fails_closed_and_names_the_key() {
    let output = one_ingress(&[("ingress.kubernetes.io/auth-type", "digest")]);
    assert!(features(&output).deny_all);
    let problem = &output.problems[0];
    assert_eq!(
        problem.field,
        "metadata.annotations.ingress.kubernetes.io/auth-type"
    );
    assert!(
        problem
            .message
            .starts_with("key 'ingress.kubernetes.io/auth-type': 'digest' is not supported"),
        "{problem}"
    );
    assert!(problem.message.contains("403"), "{problem}");
}

/// A refused `auth-secret` fails closed: every problem says 403, none 401.
#[test]
fn a_refused_auth_secret_is_reported_with_the_answer_clients_get() {
    for annotations in [
        &[
            ("nginx.ingress.kubernetes.io/auth-type", "basic"),
            ("nginx.ingress.kubernetes.io/auth-secret", "other/users"),
        ][..],
        &[
            ("tugboat.dev/auth-type", "basic-auth"),
            ("tugboat.dev/auth-secret", "other/users"),
        ],
    ] {
        let output = one_ingress(annotations);
        assert!(features(&output).deny_all, "{annotations:?}");
        assert!(!output.problems.is_empty(), "{annotations:?}");
        for problem in &output.problems {
            assert!(problem.message.contains("403"), "{problem}");
            assert!(!problem.message.contains("401"), "{problem}");
        }
    }
}

/// HAProxy Ingress redirects to HTTPS with 302 (its `ssl-redirect-code` default).
#[test]
fn haproxy_ingress_ssl_redirect_keeps_its_302() {
    let redirect = features(&one_ingress(&[(
        "haproxy-ingress.github.io/ssl-redirect",
        "true",
    )]))
    .https_redirect
    .expect("a redirect");
    assert_eq!(redirect.code, 302);
    let own = features(&one_ingress(&[
        ("haproxy-ingress.github.io/ssl-redirect", "true"),
        ("tugboat.dev/ssl-redirect-code", "308"),
    ]))
    .https_redirect
    .expect("a redirect");
    assert_eq!(own.code, 308);
}

/// ingress-nginx's snippets are never run: one whose directives restrict access fails
/// closed (the operator's setting obeyed), one that adds headers is a warning only.
#[test]
fn a_refused_nginx_snippet_that_restricts_access_fails_closed() {
    let key = "nginx.ingress.kubernetes.io/configuration-snippet";
    let denies = &[(key, "more_set_headers \"X: y\";\n  deny all; # office only")];
    let output = one_ingress(denies);
    assert!(features(&output).deny_all);
    let problem = &output.problems[0];
    assert!(problem.field.ends_with(key), "{problem}");
    assert!(problem.message.contains("`deny`"), "{problem}");
    assert!(problem.message.contains("403"), "{problem}");
    let ignored = build(
        &snapshot(&[ingress("shop", "/", denies)], &[]),
        &settings(UnsupportedAccess::Ignore),
    );
    assert!(!features(&ignored).deny_all);
    let headers = one_ingress(&[(key, "more_set_headers \"X-Deny: deny all;\";")]);
    assert!(!features(&headers).deny_all);
    assert!(headers.problems[0].message.contains("no effect"));
}

/// Tugboat's own backend snippet, not applied while raw snippets are off (the
/// default): one that restricts access fails closed, one that sets headers does not.
#[test]
fn a_backend_snippet_not_applied_that_restricts_access_fails_closed() {
    let key = "tugboat.dev/backend-config-snippet";
    let output = one_ingress(&[(key, "http-request deny if { src 10.0.0.0/8 }")]);
    assert!(features(&output).deny_all);
    let problem = &output.problems[0];
    assert!(problem.field.ends_with(key), "{problem}");
    assert!(
        problem
            .message
            .contains("`http-request deny if { src 10.0.0.0/8 }` restricts access"),
        "{problem}"
    );
    let headers = one_ingress(&[(key, "http-response set-header X-A b")]);
    assert!(!features(&headers).deny_all);
    assert!(headers.problems[0].message.contains("is ignored"));
    // With snippets on, the snippet is applied: nothing to refuse.
    let on = build(
        &snapshot(
            &[ingress(
                "shop",
                "/",
                &[(key, "http-request deny if { src 10.0.0.0/8 }")],
            )],
            &[],
        ),
        &Settings {
            allow_snippets: true,
            ..settings(UnsupportedAccess::Deny)
        },
    );
    assert!(!features(&on).deny_all);
    assert!(on.problems.is_empty(), "{:?}", on.problems);
}

#[test]
fn references_follow_other_controllers_keys() {
    let snapshot = snapshot(
        &[ingress(
            "shop",
            "/",
            &[
                ("nginx.ingress.kubernetes.io/auth-type", "basic"),
                ("nginx.ingress.kubernetes.io/auth-secret", "default/users"),
            ],
        )],
        &[],
    );
    let found = tugboat_model::references(&snapshot, &settings(UnsupportedAccess::Deny));
    assert!(
        found.secrets.contains(&ObjectKey::new("default", "users")),
        "{found:?}"
    );
}

/// A Secret or ConfigMap that a key names and that cannot be used is a problem of the
/// annotation as written, under whichever prefix (found by fuzzing: the field was
/// `metadata.annotations.auth-secret`, a name no object has).
#[test]
fn an_unusable_object_a_key_names_is_a_problem_of_the_annotation_as_written() {
    for (annotations, field) in [
        (
            &[("ingress.kubernetes.io/auth-secret", "users")][..],
            "metadata.annotations.ingress.kubernetes.io/auth-secret",
        ),
        (
            &[
                ("nginx.ingress.kubernetes.io/auth-type", "basic"),
                ("nginx.ingress.kubernetes.io/auth-secret", "default/users"),
            ],
            "metadata.annotations.nginx.ingress.kubernetes.io/auth-secret",
        ),
        (
            &[("tugboat.dev/allow-list", "configmap:lists/allow")],
            "metadata.annotations.tugboat.dev/allow-list",
        ),
        (
            &[("tugboat.dev/deny-list", "configmap:lists/deny")],
            "metadata.annotations.tugboat.dev/deny-list",
        ),
    ] {
        let output = one_ingress(annotations);
        assert!(
            output
                .problems
                .iter()
                .any(|p| p.object.kind == "Ingress" && p.field == field),
            "{annotations:?}: {:?}",
            output.problems
        );
    }
}
