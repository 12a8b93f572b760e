//! ingress-nginx's `use-regex` and `rewrite-target` as the model reads them: which
//! paths become regular expressions, the rewrite each regex route gets, and each bad
//! value as a problem naming the Ingress and the field, the rest of the Ingress kept.

mod common;

use common::{PathTo, mk_path, mk_rule};
use k8s_openapi::api::networking::v1::Ingress;
use tugboat_model::features::{PathRewrite, RouteFeatures};
use tugboat_model::{BuildOutput, PathMatch};

fn ingress(paths: &[PathTo<'_>], annotations: &[(&str, &str)]) -> Ingress {
    let rules = vec![mk_rule(Some("shop.example.com"), paths)];
    common::ingress("shop", "2024-01-01T00:00:00Z", annotations, rules)
}

fn path<'a>(path: &'a str, path_type: &'a str) -> PathTo<'a> {
    mk_path(path, path_type, "web")
}

fn build_one(ingress: Ingress) -> BuildOutput {
    common::build_with_web([ingress])
}

fn paths(output: &BuildOutput) -> Vec<PathMatch> {
    output
        .desired
        .routes
        .iter()
        .map(|r| r.path.clone())
        .collect()
}

fn features<'o>(output: &'o BuildOutput, path: &PathMatch) -> Option<&'o RouteFeatures> {
    output
        .desired
        .routes
        .iter()
        .find(|r| r.path == *path)
        .and_then(|r| r.features.as_ref())
        .and_then(|id| output.desired.feature_sets.get(id))
}

#[test]
fn use_regex_makes_prefix_and_implementation_specific_paths_expressions() {
    let output = build_one(ingress(
        &[
            path("/v[0-9]+/items", "ImplementationSpecific"),
            path("/api/.*", "Prefix"),
            path("/exact", "Exact"),
        ],
        &[("nginx.ingress.kubernetes.io/use-regex", "true")],
    ));
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    let mut found = paths(&output);
    found.sort();
    assert_eq!(
        found,
        vec![
            PathMatch::Exact("/exact".into()),
            PathMatch::Regex("/api/.*".into()),
            PathMatch::Regex("/v[0-9]+/items".into()),
        ]
    );
    assert!(features(&output, &PathMatch::Regex("/api/.*".into())).is_none());
}

#[test]
fn without_use_regex_paths_keep_their_type() {
    let output = build_one(ingress(
        &[path("/v1", "ImplementationSpecific")],
        &[("nginx.ingress.kubernetes.io/use-regex", "false")],
    ));
    assert_eq!(paths(&output), vec![PathMatch::Prefix("/v1".into())]);
}

#[test]
fn rewrite_target_rewrites_each_regex_route_with_its_own_expression() {
    let output = build_one(ingress(
        &[
            path("/something(/|$)(.*)", "ImplementationSpecific"),
            path("/other/(.*)", "ImplementationSpecific"),
        ],
        &[("nginx.ingress.kubernetes.io/rewrite-target", "/$2")],
    ));
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    let rewrite = |p: &str| {
        features(&output, &PathMatch::Regex(p.into())).and_then(|f| f.path_rewrite.clone())
    };
    assert_eq!(
        rewrite("/something(/|$)(.*)"),
        Some(PathRewrite {
            pattern: "(?i)/something(/|$)(.*)".into(),
            replacement: "/\\2".into(),
        })
    );
    assert_eq!(
        rewrite("/other/(.*)").map(|r| r.pattern),
        Some("(?i)/other/(.*)".into())
    );
}

#[test]
fn an_invalid_expression_is_left_out_with_a_problem_naming_the_path() {
    let output = build_one(ingress(
        &[
            path("/broken(", "ImplementationSpecific"),
            path("/fine", "ImplementationSpecific"),
        ],
        &[("nginx.ingress.kubernetes.io/use-regex", "true")],
    ));
    assert_eq!(paths(&output), vec![PathMatch::Regex("/fine".into())]);
    assert_eq!(output.problems.len(), 1, "{:?}", output.problems);
    let problem = &output.problems[0];
    assert_eq!(&*problem.object.name, "shop");
    assert_eq!(problem.field, "spec.rules[0].http.paths[0].path");
    assert!(problem.message.contains("regular expression"), "{problem}");
}

#[test]
fn an_expression_that_would_break_the_config_is_refused() {
    for bad in ["/a b", "/a'", "/a#x", "/100%"] {
        let output = build_one(ingress(
            &[path(bad, "ImplementationSpecific")],
            &[("nginx.ingress.kubernetes.io/use-regex", "true")],
        ));
        assert!(output.desired.routes.is_empty(), "{bad}");
        assert_eq!(output.problems.len(), 1, "{bad}: {:?}", output.problems);
    }
}

#[test]
fn an_invalid_rewrite_target_is_a_problem_naming_the_key() {
    let output = build_one(ingress(
        &[path("/something(/|$)(.*)", "ImplementationSpecific")],
        &[
            ("nginx.ingress.kubernetes.io/use-regex", "true"),
            ("nginx.ingress.kubernetes.io/rewrite-target", "/$host/$2"),
        ],
    ));
    let problem = output
        .problems
        .iter()
        .find(|p| p.field == "metadata.annotations.nginx.ingress.kubernetes.io/rewrite-target")
        .unwrap_or_else(|| panic!("{:?}", output.problems));
    assert_eq!(&*problem.object.name, "shop");
    // The route is still served, as a regex route, without a rewrite.
    let route = PathMatch::Regex("/something(/|$)(.*)".into());
    assert_eq!(paths(&output), vec![route.clone()]);
    assert!(features(&output, &route).is_none_or(|f| f.path_rewrite.is_none()));
}
