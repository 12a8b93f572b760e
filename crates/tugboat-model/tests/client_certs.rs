//! `auth-tls-*` as the model reads them: the features of the routes, the CA and CRL
//! files and the hosts that verify with them; a Secret that cannot be used, a Secret of
//! another namespace, a host another Ingress verifies with another CA and a rule
//! without a host fail closed (403) with a problem naming the object and the field.

mod common;

use common::{Object, ingress, mk_ca_secret, mk_rule, mk_secret, prefix, shop_ingress};
use tugboat_model::BuildOutput;
use tugboat_model::features::{ClientCa, VerifyClient};

const SECRET_FIELD: &str = "metadata.annotations.nginx.ingress.kubernetes.io/auth-tls-secret";

/// A CA certificate (PEM) and a revocation list it signed (PEM).
fn ca_and_crl() -> (String, String) {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let pem = params.self_signed(&key).expect("CA").pem();
    let issuer = rcgen::Issuer::new(params, key);
    let crl = rcgen::CertificateRevocationListParams {
        this_update: rcgen::date_time_ymd(2020, 1, 1),
        next_update: rcgen::date_time_ymd(2099, 1, 1),
        crl_number: rcgen::SerialNumber::from(1u64),
        issuing_distribution_point: None,
        revoked_certs: Vec::new(),
        key_identifier_method: rcgen::KeyIdMethod::Sha256,
    }
    .signed_by(&issuer)
    .expect("CRL")
    .pem()
    .expect("CRL PEM");
    (pem, crl)
}

fn build(objects: impl IntoIterator<Item = Object>) -> BuildOutput {
    let objects = objects.into_iter().chain([common::web_service(&[]).into()]);
    common::build_at_fixed_time(&common::snapshot_of(objects))
}

fn nginx_keys(keys: &[(&str, &str)]) -> Vec<(String, String)> {
    keys.iter()
        .map(|(k, v)| (format!("nginx.ingress.kubernetes.io/{k}"), v.to_string()))
        .collect()
}

fn shop(keys: &[(&str, &str)]) -> Object {
    let keys = nginx_keys(keys);
    let keys: Vec<(&str, &str)> = keys.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    shop_ingress("shop", "/", &keys).into()
}

#[test]
fn the_keys_make_the_features_and_the_host_verifies_with_the_ca() {
    let (ca, crl) = ca_and_crl();
    let secret = mk_secret(
        "client-ca",
        "Opaque",
        &[("ca.crt", ca.as_bytes()), ("ca.crl", crl.as_bytes())],
    );
    let output = build([
        shop(&[
            ("auth-tls-secret", "default/client-ca"),
            ("auth-tls-verify-client", "optional_no_ca"),
            ("auth-tls-verify-depth", "2"),
            ("auth-tls-error-page", "https://help.example.com/"),
            ("auth-tls-pass-certificate-to-upstream", "true"),
            ("auth-tls-match-cn", "CN=app"),
        ]),
        secret.into(),
    ]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    let features = common::prefix_route_features(&output, "/").expect("features");
    assert!(!features.deny_all);
    let client = features
        .client_certificates
        .as_ref()
        .expect("client certificates");
    let ca_files = ClientCa {
        ca_file: "default_client-ca.ca.pem".into(),
        crl_file: Some("default_client-ca.crl.pem".into()),
    };
    assert_eq!(client.ca, ca_files);
    assert_eq!(client.verify, VerifyClient::OptionalNoCa);
    assert_eq!(
        client.error_page.as_deref(),
        Some("https://help.example.com/")
    );
    assert!(client.pass_certificate);
    assert_eq!(client.match_subject.as_deref(), Some("CN=app"));
    assert_eq!(
        output.desired.client_ca_hosts.get("shop.example.com"),
        Some(&ca_files)
    );
    let files: Vec<&str> = output
        .desired
        .client_ca_files
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        files,
        ["default_client-ca.ca.pem", "default_client-ca.crl.pem"]
    );
    let crl_file = &output.desired.client_ca_files["default_client-ca.crl.pem"];
    assert!(crl_file.as_str().starts_with("-----BEGIN X509 CRL-----"));
}

#[test]
fn verification_is_on_by_default_and_off_asks_for_nothing() {
    let (ca, _) = ca_and_crl();
    let output = build([
        shop(&[("auth-tls-secret", "client-ca")]),
        mk_ca_secret("client-ca", &ca).into(),
    ]);
    let features = common::prefix_route_features(&output, "/").expect("features");
    let client = features
        .client_certificates
        .as_ref()
        .expect("client certificates");
    assert_eq!(client.verify, VerifyClient::On);
    assert!(!client.pass_certificate);

    let output = build([
        shop(&[
            ("auth-tls-secret", "client-ca"),
            ("auth-tls-verify-client", "off"),
        ]),
        mk_ca_secret("client-ca", &ca).into(),
    ]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    assert!(common::prefix_route_features(&output, "/").is_none());
    assert!(output.desired.client_ca_hosts.is_empty());
}

#[test]
fn a_ca_that_cannot_be_used_refuses_the_routes_and_names_the_secret_and_field() {
    let cases: [(Option<Object>, &str); 4] = [
        (None, "not found"),
        (
            Some(mk_secret("client-ca", "Opaque", &[("ca.crt", b"garbage")]).into()),
            "'ca.crt' holds no PEM certificate",
        ),
        (
            Some(mk_secret("client-ca", "Opaque", &[("tls.crt", b"x")]).into()),
            "no 'ca.crt' key",
        ),
        (
            Some(
                mk_secret(
                    "client-ca",
                    "Opaque",
                    &[("ca.crt", ca_and_crl().0.as_bytes()), ("ca.crl", b"junk")],
                )
                .into(),
            ),
            "'ca.crl' holds no PEM revocation list",
        ),
    ];
    for (secret, why) in cases {
        let output = build(
            [shop(&[("auth-tls-secret", "default/client-ca")])]
                .into_iter()
                .chain(secret),
        );
        let problem = common::only_problem(&output);
        assert_eq!(&*problem.object.name, "shop", "{problem}");
        assert_eq!(problem.field, SECRET_FIELD, "{problem}");
        assert!(problem.message.contains("default/client-ca"), "{problem}");
        assert!(problem.message.contains(why), "{problem}");
        assert!(problem.message.contains("403"), "{problem}");
        let features = common::prefix_route_features(&output, "/").expect("features");
        assert!(features.deny_all, "{why}");
        assert!(output.desired.client_ca_hosts.is_empty());
    }
}

#[test]
fn an_expired_ca_is_served_with_a_problem_saying_so() {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2020, 12, 31);
    let expired = params.self_signed(&key).expect("CA").pem();
    let output = build([
        shop(&[("auth-tls-secret", "default/client-ca")]),
        mk_ca_secret("client-ca", &expired).into(),
    ]);
    let problem = common::only_problem(&output);
    assert_eq!(problem.field, SECRET_FIELD, "{problem}");
    assert!(problem.message.contains("has expired"), "{problem}");
    let features = common::prefix_route_features(&output, "/").expect("features");
    assert!(!features.deny_all);
    assert!(features.client_certificates.is_some());
}

#[test]
fn a_secret_of_another_namespace_is_refused() {
    let (ca, _) = ca_and_crl();
    let output = build([
        shop(&[("auth-tls-secret", "other/client-ca")]),
        mk_ca_secret("client-ca", &ca).into(),
    ]);
    let problem = common::only_problem(&output);
    assert_eq!(problem.field, SECRET_FIELD, "{problem}");
    assert!(problem.message.contains("own namespace"), "{problem}");
    assert!(
        common::prefix_route_features(&output, "/")
            .expect("features")
            .deny_all
    );
}

#[test]
fn a_bad_value_fails_closed_naming_the_key() {
    let (ca, _) = ca_and_crl();
    for (key, value) in [
        ("auth-tls-verify-client", "sometimes"),
        ("auth-tls-match-cn", "CN=a b"),
        ("auth-tls-match-cn", "CN=(a"),
    ] {
        let output = build([
            shop(&[("auth-tls-secret", "client-ca"), (key, value)]),
            mk_ca_secret("client-ca", &ca).into(),
        ]);
        let problem = common::only_problem(&output);
        assert_eq!(
            problem.field,
            format!("metadata.annotations.nginx.ingress.kubernetes.io/{key}"),
            "{problem}"
        );
        let features = common::prefix_route_features(&output, "/").expect("features");
        assert!(features.deny_all, "{key}: {value}");
    }
}

#[test]
fn a_verification_without_a_secret_fails_closed() {
    for keys in [
        [("auth-tls-verify-client", "optional")],
        [("auth-tls-match-cn", "CN=app")],
    ] {
        let output = build([shop(&keys)]);
        let problem = common::only_problem(&output);
        assert!(
            problem.message.contains("it needs auth-tls-secret"),
            "{problem}"
        );
        assert!(problem.message.contains("403"), "{problem}");
        assert!(
            common::prefix_route_features(&output, "/")
                .expect("features")
                .deny_all
        );
    }
}

#[test]
fn the_other_keys_without_a_secret_are_refused_and_the_routes_served() {
    for keys in [
        [("auth-tls-verify-client", "off")],
        [("auth-tls-pass-certificate-to-upstream", "true")],
    ] {
        let output = build([shop(&keys)]);
        let problem = common::only_problem(&output);
        assert!(
            problem.message.contains("it needs auth-tls-secret"),
            "{problem}"
        );
        assert!(common::prefix_route_features(&output, "/").is_none());
    }
}

#[test]
fn a_host_verified_with_another_ca_refuses_the_newer_ingress() {
    let (ca, _) = ca_and_crl();
    let (other, _) = ca_and_crl();
    let older = ingress(
        "older",
        "2024-01-01T00:00:00Z",
        &[("tugboat.dev/auth-tls-secret", "ca-one")],
        vec![mk_rule(Some("shop.example.com"), &[prefix("/a", "web")])],
    );
    let newer = ingress(
        "newer",
        "2024-02-01T00:00:00Z",
        &[("tugboat.dev/auth-tls-secret", "ca-two")],
        vec![mk_rule(Some("shop.example.com"), &[prefix("/b", "web")])],
    );
    let output = build([
        older.into(),
        newer.into(),
        mk_ca_secret("ca-one", &ca).into(),
        mk_ca_secret("ca-two", &other).into(),
    ]);
    let problem = common::only_problem(&output);
    assert_eq!(&*problem.object.name, "newer", "{problem}");
    assert!(problem.message.contains("default/older"), "{problem}");
    assert!(
        !common::prefix_route_features(&output, "/a")
            .expect("features")
            .deny_all
    );
    assert!(
        common::prefix_route_features(&output, "/b")
            .expect("features")
            .deny_all
    );
    assert_eq!(
        output.desired.client_ca_hosts["shop.example.com"].ca_file,
        "default_ca-one.ca.pem"
    );
}

#[test]
fn a_rule_without_a_host_refuses() {
    let (ca, _) = ca_and_crl();
    let any_host = ingress(
        "any",
        "2024-01-01T00:00:00Z",
        &[("tugboat.dev/auth-tls-secret", "client-ca")],
        vec![mk_rule(None, &[prefix("/", "web")])],
    );
    let output = build([any_host.into(), mk_ca_secret("client-ca", &ca).into()]);
    let problem = common::only_problem(&output);
    assert!(problem.message.contains("per host"), "{problem}");
    assert!(
        common::prefix_route_features(&output, "/")
            .expect("features")
            .deny_all
    );
    assert!(output.desired.client_ca_hosts.is_empty());
}

/// TLS passed through undecrypted could not be asked for a client certificate: a host
/// with client-certificate routes keeps its TLS terminated.
#[test]
fn client_certificates_on_a_host_refuse_its_passthrough() {
    let (ca, _) = ca_and_crl();
    let passthrough = ingress(
        "cd",
        "2024-01-01T00:00:00Z",
        &[("nginx.ingress.kubernetes.io/ssl-passthrough", "true")],
        vec![mk_rule(Some("cd.example.com"), &[prefix("/", "web")])],
    );
    let verified = ingress(
        "verified",
        "2024-02-01T00:00:00Z",
        &[("tugboat.dev/auth-tls-secret", "client-ca")],
        vec![mk_rule(Some("cd.example.com"), &[prefix("/admin", "web")])],
    );
    let output = build([
        passthrough.into(),
        verified.into(),
        mk_ca_secret("client-ca", &ca).into(),
    ]);
    let problem = common::only_problem(&output);
    assert_eq!(&*problem.object.name, "cd", "{problem}");
    assert!(
        problem.message.contains("Ingress default/verified"),
        "{problem}"
    );
    assert!(output.desired.passthrough.is_empty());
    assert!(
        output
            .desired
            .client_ca_hosts
            .contains_key("cd.example.com")
    );
}
