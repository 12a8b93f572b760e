//! ingress-nginx's `server-alias` as the model reads it: the aliases route as the rule's
//! host, follow its TLS, and yield (with a problem naming the key) where another Ingress
//! already routes the same host and path; a bad value is a problem and the rest is served.

mod common;

use common::{Object, mk_rule, mk_tls_secret, prefix, with_tls};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::networking::v1::Ingress;
use tugboat_model::BuildOutput;

const ALIAS_KEY: &str = "nginx.ingress.kubernetes.io/server-alias";

fn ingress(
    name: &str,
    created: &str,
    host: &str,
    annotations: &[(&str, &str)],
    tls: bool,
) -> Ingress {
    let rules = vec![
        mk_rule(Some(host), &[prefix("/", "web")]),
        mk_rule(None, &[prefix("/any", "web")]),
    ];
    let ingress = common::ingress(name, created, annotations, rules);
    if tls {
        with_tls(ingress, &[(&[host], "shop-tls")])
    } else {
        ingress
    }
}

fn tls_secret() -> Secret {
    let params =
        rcgen::CertificateParams::new(vec!["shop.example.com".to_string()]).expect("params");
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = params.self_signed(&key).expect("certificate");
    mk_tls_secret("shop-tls", &cert.pem(), &key.serialize_pem())
}

fn build_of(ingresses: Vec<Ingress>) -> BuildOutput {
    let objects = ingresses.into_iter().map(Object::from);
    let snapshot =
        common::snapshot_of(objects.chain([common::web_service(&[]).into(), tls_secret().into()]));
    common::build_at_fixed_time(&snapshot)
}

/// The (host, path, Ingress name) of every route, sorted.
fn routes(output: &BuildOutput) -> Vec<(String, String, String)> {
    let mut routes: Vec<_> = output
        .desired
        .routes
        .iter()
        .map(|r| {
            (
                r.host.to_string(),
                r.path.to_string(),
                r.ingress.name.to_string(),
            )
        })
        .collect();
    routes.sort();
    routes
}

/// The paths of [`ingress`]'s rules, as routes show them.
const ROOT: &str = "/ (Prefix)";
const ANY: &str = "/any (Prefix)";

fn route(host: &str, path: &str, ingress: &str) -> (String, String, String) {
    (host.into(), path.into(), ingress.into())
}

#[test]
fn aliases_route_as_the_rule_host_and_not_the_catch_all_rule() {
    let output = build_of(vec![ingress(
        "shop",
        "2024-01-01T00:00:00Z",
        "shop.example.com",
        &[(ALIAS_KEY, "www.shop.example.com, *.shop.example.net")],
        false,
    )]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    assert_eq!(
        routes(&output),
        [
            route("*", ANY, "shop"),
            route("*.shop.example.net", ROOT, "shop"),
            route("shop.example.com", ROOT, "shop"),
            route("www.shop.example.com", ROOT, "shop"),
        ]
    );
    // The aliases take the rule's backend and features.
    let of = |host: &str| {
        output
            .desired
            .routes
            .iter()
            .find(|r| r.host.to_string() == host)
            .map(|r| (r.backend.clone(), r.features.clone()))
    };
    assert_eq!(of("www.shop.example.com"), of("shop.example.com"));
}

#[test]
fn an_alias_that_is_a_host_of_the_ingress_is_left_to_its_rule() {
    let output = build_of(vec![ingress(
        "shop",
        "2024-01-01T00:00:00Z",
        "shop.example.com",
        &[(ALIAS_KEY, "shop.example.com,www.shop.example.com")],
        false,
    )]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    assert_eq!(
        routes(&output)
            .iter()
            .filter(|(host, _, _)| host == "shop.example.com")
            .count(),
        1
    );
}

#[test]
fn an_alias_another_ingress_routes_is_a_problem_naming_the_key() {
    let output = build_of(vec![
        ingress(
            "other",
            "2024-01-01T00:00:00Z",
            "www.shop.example.com",
            &[],
            false,
        ),
        ingress(
            "shop",
            "2024-01-02T00:00:00Z",
            "shop.example.com",
            &[(ALIAS_KEY, "www.shop.example.com,shop.example.net")],
            true,
        ),
    ]);
    let problems: Vec<_> = output
        .problems
        .iter()
        // Both Ingresses also have the catch-all rule: the newer one's is a conflict.
        .filter(|p| &*p.object.name == "shop" && p.field != "spec.rules[1].http.paths[0]")
        .collect();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(
        problems[0].field,
        format!("metadata.annotations.{ALIAS_KEY}")
    );
    assert!(
        problems[0].message.contains("www.shop.example.com")
            && problems[0].message.contains("default/other"),
        "{}",
        problems[0].message
    );
    let routes = routes(&output);
    assert!(routes.contains(&route("www.shop.example.com", ROOT, "other")));
    assert!(routes.contains(&route("shop.example.net", ROOT, "shop")));
    assert!(routes.contains(&route("shop.example.com", ROOT, "shop")));
    // The other Ingress' host gets neither this Ingress' redirect nor its certificate.
    assert_eq!(
        tls_hosts_and_certificate(&output),
        (
            vec!["shop.example.com".to_string(), "shop.example.net".into()],
            vec!["shop.example.com".to_string(), "shop.example.net".into()]
        )
    );
}

/// The TLS hosts, sorted, and the hosts of the one certificate.
fn tls_hosts_and_certificate(output: &BuildOutput) -> (Vec<String>, Vec<String>) {
    let mut tls_hosts: Vec<String> = output
        .desired
        .tls_hosts
        .iter()
        .map(ToString::to_string)
        .collect();
    tls_hosts.sort();
    let certificate = output
        .desired
        .certificates
        .values()
        .next()
        .expect("the certificate");
    (tls_hosts, certificate.hosts.clone())
}

#[test]
fn aliases_of_a_tls_host_are_tls_hosts_with_its_certificate() {
    let output = build_of(vec![ingress(
        "shop",
        "2024-01-01T00:00:00Z",
        "shop.example.com",
        &[(ALIAS_KEY, "www.shop.example.com")],
        true,
    )]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    assert_eq!(
        tls_hosts_and_certificate(&output),
        (
            vec![
                "shop.example.com".to_string(),
                "www.shop.example.com".into()
            ],
            vec![
                "shop.example.com".to_string(),
                "www.shop.example.com".into()
            ]
        )
    );
}

#[test]
fn aliases_of_a_plain_host_are_not_tls_hosts() {
    let output = build_of(vec![ingress(
        "shop",
        "2024-01-01T00:00:00Z",
        "shop.example.com",
        &[(ALIAS_KEY, "www.shop.example.com")],
        false,
    )]);
    assert!(output.desired.tls_hosts.is_empty());
}

#[test]
fn a_bad_alias_is_a_problem_and_the_ingress_is_served_without_aliases() {
    let output = build_of(vec![ingress(
        "shop",
        "2024-01-01T00:00:00Z",
        "shop.example.com",
        &[(ALIAS_KEY, "www.shop.example.com,bad host%[env(A)]")],
        false,
    )]);
    assert_eq!(output.problems.len(), 1, "{:?}", output.problems);
    assert_eq!(&*output.problems[0].object.name, "shop");
    assert_eq!(
        output.problems[0].field,
        format!("metadata.annotations.{ALIAS_KEY}")
    );
    let hosts: Vec<String> = routes(&output).into_iter().map(|r| r.0).collect();
    assert_eq!(hosts, ["*", "shop.example.com"]);
}
