//! ingress-nginx's `from-to-www-redirect` as the model reads it: a route of `/` on the
//! rule host's `www.` counterpart that redirects (308) to the rule's host; conflicts,
//! wildcard hosts and bad values are problems naming the key, the rest is served.

mod common;

use common::{build_with_config_map, mk_rule, prefix};
use k8s_openapi::api::networking::v1::Ingress;
use tugboat_model::BuildOutput;
use tugboat_model::features::{Redirect, RedirectTarget, RedirectWhen};

const WWW_KEY: &str = "nginx.ingress.kubernetes.io/from-to-www-redirect";

fn ingress(name: &str, created: &str, hosts: &[&str], annotations: &[(&str, &str)]) -> Ingress {
    let rules = hosts
        .iter()
        .map(|host| mk_rule(Some(host), &[prefix("/shop", "web")]))
        .collect();
    common::ingress(name, created, annotations, rules)
}

fn build_of(ingresses: Vec<Ingress>) -> BuildOutput {
    common::build_with_web(ingresses)
}

/// The redirect of the route of `host` and `/` (Prefix), if there is one.
fn www_redirect(output: &BuildOutput, host: &str) -> Option<Redirect> {
    let route = output
        .desired
        .routes
        .iter()
        .find(|r| r.host.to_string() == host && r.path.to_string() == "/ (Prefix)")?;
    let features = output.desired.feature_sets.get(route.features.as_ref()?)?;
    // Straight to the rule's host: no HTTPS redirect on the counterpart first.
    assert_eq!(
        features.https_redirect.map(|r| r.when),
        Some(RedirectWhen::Never)
    );
    features.redirect.clone()
}

fn to(host: &str) -> Option<Redirect> {
    Some(Redirect {
        target: RedirectTarget::Host(host.into()),
        code: 308,
    })
}

const OLD: &str = "2024-01-01T00:00:00Z";
const NEW: &str = "2024-01-02T00:00:00Z";

#[test]
fn the_www_host_redirects_to_the_rule_host_and_back() {
    let output = build_of(vec![
        ingress("bare", OLD, &["shop.example.com"], &[(WWW_KEY, "true")]),
        ingress("www", OLD, &["www.blog.example.com"], &[(WWW_KEY, "true")]),
    ]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    assert_eq!(
        www_redirect(&output, "www.shop.example.com"),
        to("shop.example.com")
    );
    assert_eq!(
        www_redirect(&output, "blog.example.com"),
        to("www.blog.example.com")
    );
    // The rule hosts themselves are served as they are.
    assert_eq!(www_redirect(&output, "shop.example.com"), None);
    assert_eq!(output.desired.routes.len(), 4);
}

#[test]
fn without_the_key_or_with_false_there_is_no_redirect() {
    let output = build_of(vec![ingress(
        "bare",
        OLD,
        &["shop.example.com"],
        &[(WWW_KEY, "false")],
    )]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    assert_eq!(output.desired.routes.len(), 1);
}

#[test]
fn a_counterpart_that_is_a_rule_host_of_the_ingress_is_left_to_its_rule() {
    let output = build_of(vec![ingress(
        "both",
        OLD,
        &["shop.example.com", "www.shop.example.com"],
        &[(WWW_KEY, "true")],
    )]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    assert_eq!(output.desired.routes.len(), 2);
    assert_eq!(www_redirect(&output, "www.shop.example.com"), None);
}

#[test]
fn a_counterpart_that_is_a_server_alias_of_the_ingress_is_left_to_the_alias() {
    let output = build_of(vec![ingress(
        "aliased",
        OLD,
        &["shop.example.com"],
        &[
            (WWW_KEY, "true"),
            (
                "nginx.ingress.kubernetes.io/server-alias",
                "www.shop.example.com",
            ),
        ],
    )]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    let hosts: Vec<String> = output
        .desired
        .routes
        .iter()
        .map(|r| format!("{} {}", r.host, r.path))
        .collect();
    assert_eq!(
        hosts,
        [
            "shop.example.com /shop (Prefix)",
            "www.shop.example.com /shop (Prefix)"
        ]
    );
}

#[test]
fn a_counterpart_another_ingress_routes_is_a_problem_naming_the_key() {
    let other = common::ingress(
        "other",
        OLD,
        &[],
        vec![mk_rule(Some("www.shop.example.com"), &[prefix("/", "web")])],
    );
    let output = build_of(vec![
        other,
        ingress("bare", NEW, &["shop.example.com"], &[(WWW_KEY, "true")]),
    ]);
    assert_eq!(output.problems.len(), 1, "{:?}", output.problems);
    let problem = &output.problems[0];
    assert_eq!(&*problem.object.name, "bare");
    assert_eq!(problem.field, format!("metadata.annotations.{WWW_KEY}"));
    assert!(problem.message.contains("default/other"), "{problem:?}");
    assert_eq!(www_redirect(&output, "www.shop.example.com"), None);
    assert!(
        output
            .desired
            .routes
            .iter()
            .any(|r| r.host.to_string() == "shop.example.com"),
        "the Ingress' own route is served"
    );
}

#[test]
fn a_wildcard_host_is_a_problem_naming_the_key() {
    let output = build_of(vec![ingress(
        "wild",
        OLD,
        &["*.example.com", "shop.example.com"],
        &[(WWW_KEY, "true")],
    )]);
    assert_eq!(output.problems.len(), 1, "{:?}", output.problems);
    assert_eq!(
        output.problems[0].field,
        format!("metadata.annotations.{WWW_KEY}")
    );
    assert!(output.problems[0].message.contains("*.example.com"));
    assert_eq!(
        www_redirect(&output, "www.shop.example.com"),
        to("shop.example.com")
    );
}

#[test]
fn a_counterpart_longer_than_a_host_may_be_is_a_problem() {
    let label = "a".repeat(60);
    let host = format!("{label}.{label}.{label}.{label}.abcdef");
    assert_eq!(host.len(), 250);
    let output = build_of(vec![ingress("long", OLD, &[&host], &[(WWW_KEY, "true")])]);
    assert_eq!(output.problems.len(), 1, "{:?}", output.problems);
    assert_eq!(
        output.problems[0].field,
        format!("metadata.annotations.{WWW_KEY}")
    );
    assert_eq!(output.desired.routes.len(), 1);
}

#[test]
fn a_bad_value_is_a_problem_and_the_ingress_is_served_without_redirect() {
    let output = build_of(vec![ingress(
        "typo",
        OLD,
        &["shop.example.com"],
        &[(WWW_KEY, "yes")],
    )]);
    assert_eq!(output.problems.len(), 1, "{:?}", output.problems);
    assert_eq!(&*output.problems[0].object.name, "typo");
    assert_eq!(
        output.problems[0].field,
        format!("metadata.annotations.{WWW_KEY}")
    );
    assert_eq!(output.desired.routes.len(), 1);
}

#[test]
fn the_config_maps_http_redirect_code_is_the_redirects_code() {
    let output = build_with_config_map(
        vec![ingress(
            "shop",
            OLD,
            &["shop.example.com"],
            &[(WWW_KEY, "true")],
        )],
        &[("http-redirect-code", "301")],
    );
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    assert_eq!(
        www_redirect(&output, "www.shop.example.com"),
        Some(Redirect {
            target: RedirectTarget::Host("shop.example.com".into()),
            code: 301,
        })
    );
    // As ingress-nginx: the HTTPS redirect too, unless ssl-redirect-code says otherwise.
    assert_eq!(output.desired.global.ssl_redirect_code, 301);
    let output = build_with_config_map(
        vec![],
        &[("http-redirect-code", "301"), ("ssl-redirect-code", "302")],
    );
    assert_eq!(output.desired.global.ssl_redirect_code, 302);
}

#[test]
fn an_http_redirect_code_nginx_refuses_is_a_problem_naming_the_config_map_and_key() {
    let output = build_with_config_map(
        vec![ingress(
            "shop",
            OLD,
            &["shop.example.com"],
            &[(WWW_KEY, "true")],
        )],
        &[("http-redirect-code", "303")],
    );
    let [problem] = output.problems.as_slice() else {
        panic!("one problem: {:?}", output.problems);
    };
    assert_eq!(problem.object.kind, "ConfigMap");
    assert_eq!(&*problem.object.name, "tugboat");
    assert!(problem.field.contains("http-redirect-code"), "{problem}");
    assert!(
        problem.message.contains("301, 302, 307 or 308"),
        "{problem}"
    );
    // The default applies.
    assert_eq!(
        www_redirect(&output, "www.shop.example.com"),
        to("shop.example.com")
    );
    assert_eq!(output.desired.global.ssl_redirect_code, 308);
}
