//! ingress-nginx's `app-root` as the model reads it: the routes' feature, and a bad
//! value as a problem naming the Ingress and the key, the routes served without it.

mod common;

use tugboat_model::BuildOutput;

fn build_with(annotations: &[(&str, &str)]) -> BuildOutput {
    common::build_with_web([common::shop_ingress("shop", "/", annotations)])
}

fn app_root(output: &BuildOutput) -> Option<String> {
    let route = output.desired.routes.first().expect("the route");
    route
        .features
        .as_ref()
        .and_then(|id| output.desired.feature_sets.get(id))
        .and_then(|f| f.app_root.clone())
}

#[test]
fn ingress_nginx_app_root_is_read() {
    let output = build_with(&[("nginx.ingress.kubernetes.io/app-root", "/app1")]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    assert_eq!(app_root(&output), Some("/app1".into()));
}

#[test]
fn a_bad_app_root_is_a_problem_and_the_route_is_served_without_it() {
    let output = build_with(&[(
        "nginx.ingress.kubernetes.io/app-root",
        "https://x/%[env(A)]",
    )]);
    assert_eq!(output.problems.len(), 1, "{:?}", output.problems);
    let problem = &output.problems[0];
    assert_eq!(&*problem.object.name, "shop");
    assert_eq!(
        problem.field,
        "metadata.annotations.nginx.ingress.kubernetes.io/app-root"
    );
    assert_eq!(output.desired.routes.len(), 1);
    assert_eq!(app_root(&output), None);
}
