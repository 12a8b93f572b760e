//! External authentication (`auth-url` and the keys that go with it) as the model
//! reads it: the features of the routes, and each bad value as a problem naming the
//! Ingress and the key, with the routes failing closed and the other Ingresses served.

mod common;

use common::shop_ingress as ingress;
use common::{prefix_route_features as features, problem_fields};
use k8s_openapi::api::networking::v1::{Ingress, IngressRule};
use tugboat_model::BuildOutput;
use tugboat_model::features::{ExternalAuth, RouteFeatures};

fn build_ingresses(ingresses: &[Ingress]) -> BuildOutput {
    common::build_with_web(ingresses.iter().cloned())
}

#[test]
fn ingress_nginx_keys_read_as_external_authentication() {
    let output = build_ingresses(&[ingress(
        "shop",
        "/",
        &[
            (
                "nginx.ingress.kubernetes.io/auth-url",
                "http://auth.example.com:4180/oauth2/auth",
            ),
            (
                "nginx.ingress.kubernetes.io/auth-response-headers",
                "X-Auth-Request-User, X-Auth-Request-Email",
            ),
            (
                "nginx.ingress.kubernetes.io/auth-signin",
                "https://login.example.com/oauth2/start",
            ),
            ("nginx.ingress.kubernetes.io/auth-method", "POST"),
        ],
    )]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    let features = features(&output, "/").expect("features");
    assert!(!features.deny_all);
    assert_eq!(
        features.external_auth,
        Some(ExternalAuth {
            url: "http://auth.example.com:4180/oauth2/auth".into(),
            method: "POST".into(),
            response_headers: vec!["X-Auth-Request-User".into(), "X-Auth-Request-Email".into()],
            signin: Some("https://login.example.com/oauth2/start".into()),
        })
    );
}

#[test]
fn the_method_defaults_to_get() {
    let output = build_ingresses(&[ingress(
        "shop",
        "/",
        &[("tugboat.dev/auth-url", "http://10.0.0.7/check")],
    )]);
    let auth = features(&output, "/")
        .and_then(|f| f.external_auth.clone())
        .expect("external auth");
    assert_eq!(auth.method, "GET");
    assert!(auth.response_headers.is_empty());
    assert_eq!(auth.signin, None);
}

/// Each refused value: a problem naming the Ingress and the key, its routes refuse
/// everybody, and the other Ingress is served as it was.
fn assert_fails_closed(annotations: &[(&str, &str)], key: &str) {
    let output = build_ingresses(&[
        ingress("guarded", "/guarded", annotations),
        ingress("site", "/", &[]),
    ]);
    assert_eq!(
        problem_fields(&output, "guarded"),
        vec![format!("metadata.annotations.{key}")],
        "{:?}",
        output.problems
    );
    assert!(features(&output, "/guarded").is_some_and(|f| f.deny_all));
    assert!(features(&output, "/").is_none());
    assert!(problem_fields(&output, "site").is_empty());
}

#[test]
fn the_oauth2_proxy_form_with_nginx_variables_is_read_as_written() {
    let output = build_ingresses(&[ingress(
        "shop",
        "/",
        &[
            (
                "nginx.ingress.kubernetes.io/auth-url",
                "https://$host/oauth2/auth",
            ),
            (
                "nginx.ingress.kubernetes.io/auth-signin",
                "https://$host/oauth2/start?rd=$escaped_request_uri",
            ),
        ],
    )]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    let auth = features(&output, "/")
        .and_then(|f| f.external_auth.clone())
        .expect("external auth");
    assert_eq!(auth.url, "https://$host/oauth2/auth");
    assert_eq!(
        auth.signin.as_deref(),
        Some("https://$host/oauth2/start?rd=$escaped_request_uri")
    );
}

#[test]
fn an_auth_url_with_an_unknown_nginx_variable_fails_closed() {
    assert_fails_closed(
        &[(
            "nginx.ingress.kubernetes.io/auth-url",
            "https://$server_name/oauth2/auth",
        )],
        "nginx.ingress.kubernetes.io/auth-url",
    );
    let output = build_ingresses(&[ingress(
        "guarded",
        "/",
        &[(
            "nginx.ingress.kubernetes.io/auth-url",
            "https://$server_name/oauth2/auth",
        )],
    )]);
    let message = &output.problems[0].message;
    assert!(
        message.contains("auth-url") && message.contains("$server_name"),
        "{message}"
    );
}

#[test]
fn an_auth_url_that_would_break_the_rule_fails_closed() {
    assert_fails_closed(
        &[("tugboat.dev/auth-url", "http://auth/check if TRUE")],
        "tugboat.dev/auth-url",
    );
}

#[test]
fn an_auth_url_of_another_scheme_fails_closed() {
    assert_fails_closed(
        &[("tugboat.dev/auth-url", "ftp://auth.example.com/check")],
        "tugboat.dev/auth-url",
    );
}

#[test]
fn a_bad_signin_url_fails_closed() {
    assert_fails_closed(
        &[
            ("tugboat.dev/auth-url", "http://auth.example.com/check"),
            (
                "tugboat.dev/auth-signin",
                "https://login.example.com/start?rd=$request_id",
            ),
        ],
        "tugboat.dev/auth-signin",
    );
}

#[test]
fn a_bad_response_header_list_fails_closed() {
    assert_fails_closed(
        &[
            ("tugboat.dev/auth-url", "http://auth.example.com/check"),
            ("tugboat.dev/auth-response-headers", "X-User X-Email"),
        ],
        "tugboat.dev/auth-response-headers",
    );
}

#[test]
fn a_method_the_client_cannot_send_fails_closed() {
    assert_fails_closed(
        &[
            (
                "nginx.ingress.kubernetes.io/auth-url",
                "http://auth.example.com/check",
            ),
            ("nginx.ingress.kubernetes.io/auth-method", "PATCH"),
        ],
        "nginx.ingress.kubernetes.io/auth-method",
    );
}

#[test]
fn the_companion_keys_alone_are_refused() {
    let output = build_ingresses(&[ingress(
        "shop",
        "/",
        &[("tugboat.dev/auth-signin", "https://login.example.com/start")],
    )]);
    assert_eq!(
        problem_fields(&output, "shop"),
        vec!["metadata.annotations.tugboat.dev/auth-signin".to_string()]
    );
    assert!(output.problems[0].message.contains("it needs auth-url"));
    assert!(features(&output, "/").is_none_or(|f| f.external_auth.is_none()));
}

/// An Ingress with one rule (`host`: none when `None`) to `web` on `/`.
fn ingress_on_host(name: &str, host: Option<&str>, annotations: &[(&str, &str)]) -> Ingress {
    common::ingress(
        name,
        "2024-01-01T00:00:00Z",
        annotations,
        vec![common::mk_rule(host, &[common::prefix("/", "web")])],
    )
}

/// The features of the route of this host (`None`: the rule without a host) on `/`.
fn features_on<'o>(output: &'o BuildOutput, host: Option<&str>) -> &'o RouteFeatures {
    let route = output
        .desired
        .routes
        .iter()
        .find(|r| match host {
            Some(host) => r.host.to_string() == host,
            None => r.host == tugboat_model::HostMatch::Any,
        })
        .unwrap_or_else(|| panic!("a route for {host:?}: {:?}", output.desired.routes));
    route
        .features
        .as_ref()
        .and_then(|id| output.desired.feature_sets.get(id))
        .expect("features")
}

const HOST_IN_AUTHORITY: &str = "https://$host/oauth2/auth";

#[test]
fn host_in_the_auth_url_host_is_kept_on_an_exact_host() {
    let output = build_ingresses(&[ingress_on_host(
        "shop",
        Some("shop.example.com"),
        &[
            ("nginx.ingress.kubernetes.io/auth-url", HOST_IN_AUTHORITY),
            (
                "nginx.ingress.kubernetes.io/server-alias",
                "store.example.com",
            ),
        ],
    )]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    for host in ["shop.example.com", "store.example.com"] {
        let features = features_on(&output, Some(host));
        assert!(!features.deny_all, "{host}");
        assert_eq!(
            features.external_auth.as_ref().map(|a| a.url.as_str()),
            Some(HOST_IN_AUTHORITY),
            "{host}"
        );
    }
}

/// The problem of a refused `$host` in the host of `auth-url`: on the Ingress, naming
/// the key and why; the route refuses everybody.
fn assert_host_refused(output: &BuildOutput, name: &str, key: &str, route_host: Option<&str>) {
    let problems: Vec<_> = output
        .problems
        .iter()
        .filter(|p| &*p.object.name == name)
        .collect();
    assert_eq!(problems.len(), 1, "{:?}", output.problems);
    assert_eq!(problems[0].field, format!("metadata.annotations.{key}"));
    let message = &problems[0].message;
    assert!(
        message.contains("auth-url")
            && message.contains("$host")
            && message.contains("the client would choose the authentication service")
            && message.contains("403"),
        "{message}"
    );
    let features = features_on(output, route_host);
    assert!(features.deny_all);
    assert_eq!(features.external_auth, None);
}

#[test]
fn host_in_the_auth_url_host_is_refused_on_a_rule_without_a_host() {
    let output = build_ingresses(&[
        ingress_on_host(
            "open",
            None,
            &[("nginx.ingress.kubernetes.io/auth-url", HOST_IN_AUTHORITY)],
        ),
        ingress_on_host("site", Some("site.example.com"), &[]),
    ]);
    assert_host_refused(
        &output,
        "open",
        "nginx.ingress.kubernetes.io/auth-url",
        None,
    );
    assert!(problem_fields(&output, "site").is_empty());
    assert!(
        output
            .desired
            .routes
            .iter()
            .find(|r| r.host.to_string() == "site.example.com")
            .is_some_and(|r| r.features.is_none())
    );
}

#[test]
fn braced_host_in_the_auth_url_host_is_refused_on_a_wildcard_host() {
    let output = build_ingresses(&[ingress_on_host(
        "wild",
        Some("*.example.com"),
        &[("tugboat.dev/auth-url", "http://auth.${host}:4180/check")],
    )]);
    assert_host_refused(
        &output,
        "wild",
        "tugboat.dev/auth-url",
        Some("*.example.com"),
    );
}

#[test]
fn host_in_the_auth_url_host_is_refused_when_an_alias_is_a_wildcard() {
    let output = build_ingresses(&[ingress_on_host(
        "aliased",
        Some("shop.example.com"),
        &[
            ("nginx.ingress.kubernetes.io/auth-url", HOST_IN_AUTHORITY),
            (
                "nginx.ingress.kubernetes.io/server-alias",
                "*.shop.example.com",
            ),
        ],
    )]);
    assert_host_refused(
        &output,
        "aliased",
        "nginx.ingress.kubernetes.io/auth-url",
        Some("shop.example.com"),
    );
}

#[test]
fn host_in_the_auth_url_path_and_query_is_kept_on_a_rule_without_a_host() {
    let url = "http://127.0.0.1:9000/check/$host?host=$host&tenant=$http_x_tenant";
    let output = build_ingresses(&[ingress_on_host(
        "open",
        None,
        &[("nginx.ingress.kubernetes.io/auth-url", url)],
    )]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    let features = features_on(&output, None);
    assert!(!features.deny_all);
    assert_eq!(
        features.external_auth.as_ref().map(|a| a.url.as_str()),
        Some(url)
    );
}

#[test]
fn another_variable_in_the_auth_url_host_is_refused_even_on_an_exact_host() {
    assert_fails_closed(
        &[(
            "nginx.ingress.kubernetes.io/auth-url",
            "https://$http_x_auth_host/check",
        )],
        "nginx.ingress.kubernetes.io/auth-url",
    );
    let output = build_ingresses(&[ingress(
        "guarded",
        "/",
        &[(
            "nginx.ingress.kubernetes.io/auth-url",
            "https://$http_x_auth_host/check",
        )],
    )]);
    let message = &output.problems[0].message;
    assert!(
        message.contains("$http_x_auth_host") && message.contains("the client would choose"),
        "{message}"
    );
}

#[test]
fn host_in_the_signin_host_is_kept_on_a_rule_without_a_host() {
    let output = build_ingresses(&[ingress_on_host(
        "open",
        None,
        &[
            ("tugboat.dev/auth-url", "http://127.0.0.1:9000/check"),
            (
                "tugboat.dev/auth-signin",
                "https://$host/oauth2/start?rd=$escaped_request_uri",
            ),
        ],
    )]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    assert!(!features_on(&output, None).deny_all);
}

#[test]
fn another_variable_in_the_signin_host_is_refused() {
    assert_fails_closed(
        &[
            ("tugboat.dev/auth-url", "http://auth.example.com/check"),
            ("tugboat.dev/auth-signin", "https://$arg_next/oauth2/start"),
        ],
        "tugboat.dev/auth-signin",
    );
}

#[test]
fn an_ingress_with_an_exact_host_and_a_catch_all_rule_refuses_only_the_catch_all() {
    let mut both = ingress_on_host(
        "both",
        Some("shop.example.com"),
        &[("nginx.ingress.kubernetes.io/auth-url", HOST_IN_AUTHORITY)],
    );
    let rules = both
        .spec
        .as_mut()
        .and_then(|spec| spec.rules.as_mut())
        .expect("rules");
    let catch_all = IngressRule {
        host: None,
        ..rules[0].clone()
    };
    rules.push(catch_all);
    let output = build_ingresses(&[both]);
    assert_host_refused(
        &output,
        "both",
        "nginx.ingress.kubernetes.io/auth-url",
        None,
    );
    let exact = features_on(&output, Some("shop.example.com"));
    assert!(!exact.deny_all);
    assert_eq!(
        exact.external_auth.as_ref().map(|a| a.url.as_str()),
        Some(HOST_IN_AUTHORITY)
    );
}
