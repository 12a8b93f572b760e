//! ingress-nginx's `default-backend` and `custom-http-errors` as the model reads them:
//! the error backend of the routes, and each bad value as a problem naming the Ingress
//! and the key, with the rest of the Ingress and the other Ingresses served.

mod common;

use common::shop_ingress as ingress;
use common::{prefix_route_features as features, problem_fields};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use tugboat_model::desired::ServicePortRef;
use tugboat_model::features::ErrorBackend;
use tugboat_model::{BackendName, BuildOutput, ObjectKey, PathMatch};

/// The Service `default/error-pages`, whose first port (8080) is the one used.
fn error_pages_service() -> Service {
    common::with_service_port(
        common::mk_service("error-pages", "http", 8080),
        "admin",
        9000,
    )
}

fn build(ingresses: &[Ingress]) -> BuildOutput {
    let objects = ingresses.iter().cloned().map(common::Object::from).chain([
        common::web_service(&[]).into(),
        error_pages_service().into(),
    ]);
    common::build_at_fixed_time(&common::snapshot_of(objects))
}

fn error_pages_backend() -> BackendName {
    BackendName::for_service_port(
        &ObjectKey::new("default", "error-pages"),
        &ServicePortRef::Number(8080),
    )
    .expect("a valid name")
}

#[test]
fn default_backend_is_the_first_port_of_the_named_service() {
    let output = build(&[ingress(
        "shop",
        "/",
        &[("nginx.ingress.kubernetes.io/default-backend", "error-pages")],
    )]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    assert_eq!(
        features(&output, "/").and_then(|f| f.error_backend.clone()),
        Some(ErrorBackend {
            backend: Some(error_pages_backend()),
            when_unserved: true,
            codes: vec![],
            ingress: ObjectKey::new("default", "shop"),
            codes_field: None,
        })
    );
    assert!(output.desired.backends.contains_key(&error_pages_backend()));
}

#[test]
fn custom_http_errors_alone_go_to_the_controller_default_backend() {
    let output = build(&[ingress(
        "shop",
        "/",
        &[("nginx.ingress.kubernetes.io/custom-http-errors", "404, 500")],
    )]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    assert_eq!(
        features(&output, "/").and_then(|f| f.error_backend.clone()),
        Some(ErrorBackend {
            backend: None,
            when_unserved: false,
            codes: vec![404, 500],
            ingress: ObjectKey::new("default", "shop"),
            codes_field: Some(
                "metadata.annotations.nginx.ingress.kubernetes.io/custom-http-errors".into()
            ),
        })
    );
}

#[test]
fn a_503_among_the_codes_also_covers_a_backend_without_servers() {
    let output = build(&[ingress(
        "shop",
        "/",
        &[
            ("nginx.ingress.kubernetes.io/custom-http-errors", "503"),
            ("nginx.ingress.kubernetes.io/default-backend", "error-pages"),
        ],
    )]);
    let error_backend = features(&output, "/")
        .and_then(|f| f.error_backend.clone())
        .expect("an error backend");
    assert!(error_backend.when_unserved);
    assert_eq!(error_backend.backend, Some(error_pages_backend()));
    assert_eq!(error_backend.codes, vec![503]);
}

/// A bad value: a problem on the key of that Ingress; its routes still go to their
/// Service, and the other Ingress is untouched.
fn assert_refused(annotations: &[(&str, &str)], key: &str) -> BuildOutput {
    let output = build(&[
        ingress("shop", "/shop", annotations),
        ingress("site", "/", &[]),
    ]);
    assert_eq!(
        problem_fields(&output, "shop"),
        vec![format!("metadata.annotations.{key}")],
        "{:?}",
        output.problems
    );
    assert!(problem_fields(&output, "site").is_empty());
    assert!(features(&output, "/").is_none());
    let shop = output
        .desired
        .routes
        .iter()
        .find(|r| r.path == PathMatch::Prefix("/shop".into()))
        .expect("the route stays");
    assert_eq!(shop.backend.as_str(), "default_web_80");
    output
}

#[test]
fn error_codes_with_a_word_are_a_problem_naming_the_key() {
    let output = assert_refused(
        &[("nginx.ingress.kubernetes.io/custom-http-errors", "404,oops")],
        "nginx.ingress.kubernetes.io/custom-http-errors",
    );
    assert!(features(&output, "/shop").is_none());
}

#[test]
fn error_codes_outside_400_to_599_are_a_problem_naming_the_key() {
    let output = assert_refused(
        &[("nginx.ingress.kubernetes.io/custom-http-errors", "404,302")],
        "nginx.ingress.kubernetes.io/custom-http-errors",
    );
    let message = &output.problems[0].message;
    assert!(message.contains("'302' is not one"), "{message}");
}

#[test]
fn a_missing_default_backend_service_is_a_problem_naming_the_key() {
    let output = assert_refused(
        &[
            ("nginx.ingress.kubernetes.io/default-backend", "gone"),
            ("nginx.ingress.kubernetes.io/custom-http-errors", "404"),
        ],
        "nginx.ingress.kubernetes.io/default-backend",
    );
    assert!(output.problems[0].message.contains("default/gone"));
    // The codes still go to the controller's default backend.
    let error_backend = features(&output, "/shop")
        .and_then(|f| f.error_backend.clone())
        .expect("an error backend");
    assert_eq!(error_backend.backend, None);
    assert_eq!(error_backend.codes, vec![404]);
}

#[test]
fn a_default_backend_in_another_namespace_is_a_problem_naming_the_key() {
    let output = assert_refused(
        &[(
            "nginx.ingress.kubernetes.io/default-backend",
            "other/error-pages",
        )],
        "nginx.ingress.kubernetes.io/default-backend",
    );
    assert!(features(&output, "/shop").is_none());
}
