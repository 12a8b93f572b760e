//! `no-tls-redirect-locations` as the model reads it from the controller's ConfigMap:
//! ACME's path by default, the listed prefixes, none for an empty value, and a bad value
//! is a problem naming the ConfigMap and the key while the default applies and the
//! routes are served.

mod common;

use common::shop_ingress;
use tugboat_model::BuildOutput;

const ACME: &str = "/.well-known/acme-challenge";

/// The build of an Ingress routing `shop.example.com/` with the controller's ConfigMap
/// `ops/tugboat` holding `data`.
fn build_with_config_map(data: &[(&str, &str)]) -> BuildOutput {
    common::build_with_config_map([shop_ingress("shop", "/", &[])], data)
}

fn locations(output: &BuildOutput) -> Vec<&str> {
    output
        .desired
        .global
        .no_tls_redirect_locations
        .iter()
        .map(String::as_str)
        .collect()
}

#[test]
fn acme_challenges_stay_on_http_by_default() {
    let output = common::build_with_web([shop_ingress("shop", "/", &[])]);
    assert_eq!(locations(&output), [ACME]);
    let output = build_with_config_map(&[]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    assert_eq!(locations(&output), [ACME]);
}

#[test]
fn the_config_map_lists_the_prefixes() {
    let output = build_with_config_map(&[("no-tls-redirect-locations", "/custom")]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    assert_eq!(locations(&output), ["/custom"]);
    let output = build_with_config_map(&[("no-tls-redirect-locations", "/b, /a,/b")]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    assert_eq!(locations(&output), ["/a", "/b"]);
}

#[test]
fn an_empty_value_redirects_every_path() {
    let output = build_with_config_map(&[("no-tls-redirect-locations", "")]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    assert!(locations(&output).is_empty());
}

#[test]
fn a_bad_value_is_a_problem_naming_the_config_map_and_key_and_the_default_applies() {
    for bad in [
        "custom",
        "/a b",
        "/a\nuse_backend x",
        "/ok,/%[env(X)]",
        "/a'b",
        "/a;b",
    ] {
        let output = build_with_config_map(&[("no-tls-redirect-locations", bad)]);
        let problem = common::only_problem(&output);
        assert_eq!(problem.object.kind, "ConfigMap", "{problem}");
        assert_eq!(&*problem.object.name, "tugboat", "{problem}");
        assert_eq!(problem.field, "data.no-tls-redirect-locations", "{problem}");
        assert!(problem.message.contains("path prefixes"), "{problem}");
        assert_eq!(locations(&output), [ACME], "{bad:?}");
        // Nothing else is harmed: the Ingress is served.
        assert_eq!(output.desired.routes.len(), 1, "{bad:?}");
    }
}
