//! TLS to a backend's servers as the model reads it: the name sent as SNI and checked
//! (`server-ssl-name`, by default the Service's `NAME.NAMESPACE.svc`), `server-verify`,
//! ingress-nginx's `proxy-ssl-*` keys, and each bad value as a problem naming the
//! object and the key.

mod common;

use tugboat_model::BuildOutput;
use tugboat_model::features::BackendOptions;

fn build_with(
    ingress_annotations: &[(&str, &str)],
    service_annotations: &[(&str, &str)],
) -> BuildOutput {
    let ingress = common::shop_ingress("shop", "/", ingress_annotations);
    let objects: [common::Object; 2] = [
        ingress.into(),
        common::web_service(service_annotations).into(),
    ];
    common::build_at_fixed_time(&common::snapshot_of(objects))
}

fn options(output: &BuildOutput) -> &BackendOptions {
    output
        .desired
        .backends
        .values()
        .next()
        .map(|b| b.options.as_ref())
        .expect("a backend")
}

#[test]
fn the_services_name_is_sent_and_checked_by_default() {
    let output = build_with(&[], &[("tugboat.dev/server-ssl", "true")]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    let tls = options(&output).tls.clone().expect("TLS");
    assert_eq!(tls.server_name, "web.default.svc");
    assert_eq!(tls.ca_file, None);
}

#[test]
fn server_ssl_name_sets_the_name() {
    let output = build_with(
        &[],
        &[
            ("tugboat.dev/server-ssl", "true"),
            ("tugboat.dev/server-ssl-name", "api.internal.example.com"),
        ],
    );
    let tls = options(&output).tls.clone().expect("TLS");
    assert_eq!(tls.server_name, "api.internal.example.com");
}

#[test]
fn a_bad_server_ssl_name_is_a_problem_naming_the_key() {
    let output = build_with(
        &[],
        &[
            ("tugboat.dev/server-ssl", "true"),
            ("tugboat.dev/server-ssl-name", "str(x) verify none"),
        ],
    );
    assert_eq!(output.problems.len(), 1, "{:?}", output.problems);
    let problem = &output.problems[0];
    assert_eq!(problem.object.kind, "Service");
    assert_eq!(
        problem.field,
        "metadata.annotations.tugboat.dev/server-ssl-name"
    );
    // The default name is used instead.
    let tls = options(&output).tls.clone().expect("TLS");
    assert_eq!(tls.server_name, "web.default.svc");
}

#[test]
fn server_verify_false_does_not_read_the_ca() {
    let output = build_with(
        &[],
        &[
            ("tugboat.dev/server-ssl", "true"),
            ("tugboat.dev/server-ca", "no-such-secret"),
            ("tugboat.dev/server-verify", "false"),
        ],
    );
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    let options = options(&output);
    assert!(!options.blocked);
    assert_eq!(options.tls.as_ref().and_then(|t| t.ca_file.clone()), None);
}

#[test]
fn server_verify_true_without_a_ca_blocks_the_backend() {
    let output = build_with(
        &[],
        &[
            ("tugboat.dev/server-ssl", "true"),
            ("tugboat.dev/server-verify", "true"),
        ],
    );
    assert!(options(&output).blocked);
    assert!(
        output
            .problems
            .iter()
            .any(|p| p.message.contains("server-verify")),
        "{:?}",
        output.problems
    );
}

#[test]
fn the_tls_keys_need_server_ssl() {
    let output = build_with(&[], &[("tugboat.dev/server-ssl-name", "api.example.com")]);
    assert_eq!(output.problems.len(), 1, "{:?}", output.problems);
    assert!(output.problems[0].message.contains("server-ssl"));
    assert!(options(&output).tls.is_none());
}

#[test]
fn ingress_nginx_proxy_ssl_keys_are_read() {
    // Verification off (ingress-nginx's default): the client certificate only.
    let output = build_with(
        &[
            ("nginx.ingress.kubernetes.io/backend-protocol", "HTTPS"),
            (
                "nginx.ingress.kubernetes.io/proxy-ssl-secret",
                "default/proxy",
            ),
            (
                "nginx.ingress.kubernetes.io/proxy-ssl-name",
                "backend.local",
            ),
            ("nginx.ingress.kubernetes.io/proxy-ssl-server-name", "on"),
        ],
        &[],
    );
    let tls = options(&output).tls.clone().expect("TLS");
    assert_eq!(tls.server_name, "backend.local");
    assert_eq!(tls.ca_file, None);
    // The Secret does not exist: the client certificate blocks the backend (503).
    assert!(options(&output).blocked);
    assert!(
        output
            .problems
            .iter()
            .all(|p| p.message.contains("server-crt")),
        "{:?}",
        output.problems
    );
}

#[test]
fn ingress_nginx_proxy_ssl_verify_on_reads_the_ca_of_the_secret() {
    let output = build_with(
        &[
            ("nginx.ingress.kubernetes.io/backend-protocol", "HTTPS"),
            (
                "nginx.ingress.kubernetes.io/proxy-ssl-secret",
                "default/proxy",
            ),
            ("nginx.ingress.kubernetes.io/proxy-ssl-verify", "on"),
        ],
        &[],
    );
    // The missing Secret is now also the CA's: a problem for each, and 503.
    assert!(
        output
            .problems
            .iter()
            .any(|p| p.message.contains("server-ca")),
        "{:?}",
        output.problems
    );
    assert!(options(&output).blocked);
}

#[test]
fn ingress_nginx_proxy_ssl_verify_takes_on_or_off() {
    let output = build_with(
        &[
            ("nginx.ingress.kubernetes.io/backend-protocol", "HTTPS"),
            ("nginx.ingress.kubernetes.io/proxy-ssl-verify", "maybe"),
        ],
        &[],
    );
    assert!(
        output.problems.iter().any(|p| p.field
            == "metadata.annotations.nginx.ingress.kubernetes.io/proxy-ssl-verify"),
        "{:?}",
        output.problems
    );
}

/// A `server-ca` or `server-crt` Secret that cannot be used is a problem of the object
/// and the annotation that name it (found by fuzzing: the Ingress and
/// `metadata.annotations.server-ca` were named, whoever set it).
#[test]
fn an_unusable_backend_secret_is_a_problem_of_the_annotation_that_names_it() {
    for key in ["server-ca", "server-crt"] {
        let name = format!("tugboat.dev/{key}");
        let output = build_with(
            &[],
            &[
                ("tugboat.dev/server-ssl", "true"),
                (name.as_str(), "no-such-secret"),
            ],
        );
        let field = format!("metadata.annotations.{name}");
        assert!(
            output
                .problems
                .iter()
                .any(|p| p.object.kind == "Service" && p.field == field),
            "{key}: {:?}",
            output.problems
        );
    }
}
