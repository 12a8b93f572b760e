//! The migration report from tables of Ingresses as users of other controllers wrote
//! them.

use std::sync::Arc;

use serde_json::json;
use tugboat_test_objects::{
    in_namespace, mk_basic_auth_secret, mk_ingress, with_annotations, with_class,
};

use super::*;

/// Ingress `shop/name` of `class` routing `shop.example.com` to `web`.
fn ingress(
    name: &str,
    class: Option<&str>,
    annotations: &[(&str, &str)],
) -> (ObjectKey, Arc<Ingress>) {
    let ingress = with_class(mk_ingress(name, "shop.example.com", "web"), class);
    let ingress = in_namespace(with_annotations(ingress, annotations), "shop");
    (ObjectKey::new("shop", name), Arc::new(ingress.into()))
}

/// Basic-auth Secret `shop/name` of `users` (user, hash).
fn secret(name: &str, users: &[(&str, &str)]) -> (ObjectKey, Arc<Secret>) {
    let secret = in_namespace(mk_basic_auth_secret(name, users), "shop");
    (ObjectKey::new("shop", name), Arc::new(secret))
}

fn key<'a>(report: &'a Report, annotation: &str) -> &'a KeyReport {
    report.ingresses[0]
        .keys
        .iter()
        .find(|k| k.annotation == annotation)
        .unwrap_or_else(|| panic!("{annotation}: {report:?}"))
}

fn one(annotations: &[(&str, &str)]) -> Report {
    let ingresses = [ingress("web", Some("nginx"), annotations)]
        .into_iter()
        .collect();
    report(&ingresses, &Objects::default(), "tugboat")
}

#[test]
fn each_key_is_supported_with_or_without_a_difference_or_not() {
    let report = one(&[
        (
            "nginx.ingress.kubernetes.io/whitelist-source-range",
            "10.0.0.0/8",
        ),
        ("nginx.ingress.kubernetes.io/auth-realm", "Staff"),
        ("nginx.ingress.kubernetes.io/server-snippet", "return 200;"),
        ("nginx.ingress.kubernetes.io/no-such-thing", "x"),
        ("nginx.ingress.kubernetes.io/backend-protocol", "GRPCS"),
        ("cert-manager.io/cluster-issuer", "letsencrypt"),
    ]);
    let allow = key(
        &report,
        "nginx.ingress.kubernetes.io/whitelist-source-range",
    );
    assert_eq!(allow.status, Status::Supported);
    assert_eq!(allow.tugboat_keys, ["allow-list"]);
    assert!(allow.restricts_access);
    let realm = key(&report, "nginx.ingress.kubernetes.io/auth-realm");
    assert_eq!(realm.status, Status::SupportedWithDifference);
    assert!(
        realm
            .note
            .as_deref()
            .is_some_and(|n| n.contains("Restricted"))
    );
    let snippet = key(&report, "nginx.ingress.kubernetes.io/server-snippet");
    assert_eq!(snippet.status, Status::NotSupported);
    assert!(
        snippet
            .note
            .as_deref()
            .is_some_and(|n| n.contains("nginx syntax"))
    );
    let unknown = key(&report, "nginx.ingress.kubernetes.io/no-such-thing");
    assert_eq!(unknown.status, Status::NotSupported);
    let protocol = key(&report, "nginx.ingress.kubernetes.io/backend-protocol");
    assert_eq!(protocol.tugboat_keys, ["server-ssl", "server-proto"]);
    // Keys of controllers Tugboat does not know of are not in the report.
    assert_eq!(report.ingresses[0].keys.len(), 5);
    assert_eq!(report.count(Status::NotSupported), 2);
    assert!(!report.all_supported());
}

#[test]
fn a_value_tugboat_cannot_honour_makes_the_key_not_supported() {
    let report = one(&[("nginx.ingress.kubernetes.io/auth-type", "digest")]);
    let auth = key(&report, "nginx.ingress.kubernetes.io/auth-type");
    assert_eq!(auth.status, Status::NotSupported);
    assert!(
        auth.note.as_deref().is_some_and(|n| n.contains("'digest'")),
        "{auth:?}"
    );
    assert!(text(&report).contains("its routes will answer 403"));
}

#[test]
fn a_configmap_only_key_on_an_ingress_is_not_supported() {
    let report = one(&[("haproxy.org/timeout-client", "1m")]);
    assert_eq!(
        key(&report, "haproxy.org/timeout-client").status,
        Status::NotSupported
    );
}

#[test]
fn the_class_change_to_make() {
    let ingresses = [
        ingress("nginx", Some("nginx"), &[]),
        ingress("ours", Some("tugboat"), &[]),
        ingress("old", None, &[(CLASS_ANNOTATION, "haproxy")]),
        ingress("none", None, &[]),
    ]
    .into_iter()
    .collect();
    let report = report(&ingresses, &Objects::default(), "tugboat");
    let change = |name: &str| {
        report
            .ingresses
            .iter()
            .find(|i| i.name == name)
            .and_then(|i| i.class_change.clone())
    };
    assert_eq!(
        change("nginx").as_deref(),
        Some("set spec.ingressClassName: tugboat (now: nginx)")
    );
    assert_eq!(change("ours"), None);
    assert!(change("old").is_some_and(|c| c.contains("remove the kubernetes.io/ingress.class")));
    assert!(change("none").is_some_and(|c| c.contains("default")));
    assert!(report.all_supported());
}

#[test]
fn apr1_secrets_are_named_with_the_command_that_makes_a_supported_hash() {
    let ingresses = [ingress(
        "web",
        Some("nginx"),
        &[
            ("nginx.ingress.kubernetes.io/auth-type", "basic"),
            ("nginx.ingress.kubernetes.io/auth-secret", "users"),
        ],
    )]
    .into_iter()
    .collect();
    let secrets = [secret(
        "users",
        &[("bob", "$apr1$abc$V7uD6Y3Ey1b.T8QFySWI51")],
    )]
    .into_iter()
    .collect();
    let report = report(&ingresses, &secrets, "tugboat");
    assert_eq!(report.secrets.len(), 1, "{report:?}");
    let secret = &report.secrets[0];
    assert_eq!(secret.used_by, ["shop/web"]);
    assert!(secret.problem.contains("$apr1$"), "{secret:?}");
    assert!(
        !secret.problem.contains("V7uD6Y3E"),
        "hash leaked: {secret:?}"
    );
    assert!(secret.command.contains("htpasswd -nbB"));
    assert!(!report.all_supported());
    let json = serde_json::to_value(&report).expect("JSON");
    assert_eq!(json["secrets"][0]["name"], "users");
    let keys = &json["ingresses"][0]["keys"];
    assert_eq!(
        keys[0]["annotation"],
        "nginx.ingress.kubernetes.io/auth-secret"
    );
    assert_eq!(keys[0]["status"], "supported-with-difference");
    assert_eq!(keys[1]["status"], "supported");
}

#[test]
fn a_v1beta1_ingress_is_read_as_the_api_server_converted_it() {
    let old = json!({
        "apiVersion": "extensions/v1beta1", "kind": "Ingress",
        "metadata": {"name": "shop", "namespace": "shop"},
        "spec": {
            "backend": {"serviceName": "fallback", "servicePort": 8080},
            "tls": [{"hosts": ["shop.example.com"], "secretName": "shop-tls"}],
            "rules": [{"host": "shop.example.com", "http": {"paths": [
                {"path": "/", "backend": {"serviceName": "web", "servicePort": "http"}},
                {"path": "/api", "pathType": "Exact",
                 "backend": {"serviceName": "api", "servicePort": 80}},
                {"path": "/static", "backend": {"resource": {
                    "apiGroup": "k8s.example.com", "kind": "Bucket", "name": "static"}}},
            ]}}],
        },
    });
    let v1 = ingress_v1_from_v1beta1(old).expect("converted");
    assert_eq!(
        v1,
        json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "shop", "namespace": "shop"},
            "spec": {
                "defaultBackend": {"service": {"name": "fallback", "port": {"number": 8080}}},
                "tls": [{"hosts": ["shop.example.com"], "secretName": "shop-tls"}],
                "rules": [{"host": "shop.example.com", "http": {"paths": [
                    {"path": "/", "pathType": "ImplementationSpecific",
                     "backend": {"service": {"name": "web", "port": {"name": "http"}}}},
                    {"path": "/api", "pathType": "Exact",
                     "backend": {"service": {"name": "api", "port": {"number": 80}}}},
                    {"path": "/static", "pathType": "ImplementationSpecific",
                     "backend": {"resource": {
                        "apiGroup": "k8s.example.com", "kind": "Bucket", "name": "static"}}},
                ]}}],
            },
        })
    );
    let _: Ingress = serde_json::from_value(v1).expect("a v1 Ingress");
}

#[test]
fn a_v1beta1_backend_without_a_service_name_is_named() {
    let old = json!({
        "apiVersion": "networking.k8s.io/v1beta1", "kind": "Ingress",
        "metadata": {"name": "shop"},
        "spec": {"rules": [{"http": {"paths": [
            {"path": "/", "backend": {"servicePort": 80}}]}}]},
    });
    assert_eq!(
        ingress_v1_from_v1beta1(old),
        Err((
            "spec.rules[0].http.paths[0].backend.serviceName".into(),
            "expected the name of a Service".into()
        ))
    );
}
