//! External authentication (`auth-url` and the keys that go with it) as the model
//! reads it: the features of the routes, and each bad value as a problem naming the
//! Ingress and the key, with the routes failing closed and the other Ingresses served.

mod common;

use common::shop_ingress as ingress;
use serde_json::{Value, json};
use tugboat_model::features::{ExternalAuth, RouteFeatures};
use tugboat_model::{BuildOutput, PathMatch};

fn build_ingresses(ingresses: &[Value]) -> BuildOutput {
    common::build_with_web(ingresses.iter().cloned())
}

/// The features of the route with this path.
fn features<'o>(output: &'o BuildOutput, path: &str) -> Option<&'o RouteFeatures> {
    let route = output
        .desired
        .routes
        .iter()
        .find(|r| r.path == PathMatch::Prefix(path.into()))
        .unwrap_or_else(|| panic!("a route {path}: {:?}", output.desired.routes));
    route
        .features
        .as_ref()
        .and_then(|id| output.desired.feature_sets.get(id))
}

fn problem_fields(output: &BuildOutput, name: &str) -> Vec<String> {
    output
        .problems
        .iter()
        .filter(|p| p.object.name == name)
        .map(|p| p.field.clone())
        .collect()
}

#[test]
fn ingress_nginx_keys_read_as_external_authentication() {
    let output = build_ingresses(&[ingress(
        "shop",
        "/",
        json!({
            "nginx.ingress.kubernetes.io/auth-url": "http://auth.example.com:4180/oauth2/auth",
            "nginx.ingress.kubernetes.io/auth-response-headers": "X-Auth-Request-User, X-Auth-Request-Email",
            "nginx.ingress.kubernetes.io/auth-signin": "https://login.example.com/oauth2/start",
            "nginx.ingress.kubernetes.io/auth-method": "POST",
        }),
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
        json!({"tugboat.dev/auth-url": "http://10.0.0.7/check"}),
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
fn assert_fails_closed(annotations: Value, key: &str) {
    let output = build_ingresses(&[
        ingress("guarded", "/guarded", annotations),
        ingress("site", "/", json!({})),
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
        json!({
            "nginx.ingress.kubernetes.io/auth-url": "https://$host/oauth2/auth",
            "nginx.ingress.kubernetes.io/auth-signin": "https://$host/oauth2/start?rd=$escaped_request_uri",
        }),
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
        json!({"nginx.ingress.kubernetes.io/auth-url": "https://$server_name/oauth2/auth"}),
        "nginx.ingress.kubernetes.io/auth-url",
    );
    let output = build_ingresses(&[ingress(
        "guarded",
        "/",
        json!({"nginx.ingress.kubernetes.io/auth-url": "https://$server_name/oauth2/auth"}),
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
        json!({"tugboat.dev/auth-url": "http://auth/check if TRUE"}),
        "tugboat.dev/auth-url",
    );
}

#[test]
fn an_auth_url_of_another_scheme_fails_closed() {
    assert_fails_closed(
        json!({"tugboat.dev/auth-url": "ftp://auth.example.com/check"}),
        "tugboat.dev/auth-url",
    );
}

#[test]
fn a_bad_signin_url_fails_closed() {
    assert_fails_closed(
        json!({
            "tugboat.dev/auth-url": "http://auth.example.com/check",
            "tugboat.dev/auth-signin": "https://login.example.com/start?rd=$request_id",
        }),
        "tugboat.dev/auth-signin",
    );
}

#[test]
fn a_bad_response_header_list_fails_closed() {
    assert_fails_closed(
        json!({
            "tugboat.dev/auth-url": "http://auth.example.com/check",
            "tugboat.dev/auth-response-headers": "X-User X-Email",
        }),
        "tugboat.dev/auth-response-headers",
    );
}

#[test]
fn a_method_the_client_cannot_send_fails_closed() {
    assert_fails_closed(
        json!({
            "nginx.ingress.kubernetes.io/auth-url": "http://auth.example.com/check",
            "nginx.ingress.kubernetes.io/auth-method": "PATCH",
        }),
        "nginx.ingress.kubernetes.io/auth-method",
    );
}

#[test]
fn the_companion_keys_alone_are_refused() {
    let output = build_ingresses(&[ingress(
        "shop",
        "/",
        json!({"tugboat.dev/auth-signin": "https://login.example.com/start"}),
    )]);
    assert_eq!(
        problem_fields(&output, "shop"),
        vec!["metadata.annotations.tugboat.dev/auth-signin".to_string()]
    );
    assert!(output.problems[0].message.contains("it needs auth-url"));
    assert!(features(&output, "/").is_none_or(|f| f.external_auth.is_none()));
}
