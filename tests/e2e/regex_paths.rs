//! ingress-nginx's regular-expression paths (`use-regex`) and `rewrite-target` with
//! capture groups on real haproxy, as ingress-nginx's rewrite example documents: with
//! the path `/something(/|$)(.*)` and `rewrite-target: /$2`, `/something` and
//! `/something/` reach the backend as `/`, `/something/new` as `/new`, case does not
//! matter, the query is kept; an expression that does not parse is a problem naming
//! the Ingress and the path, and the Ingress' other paths are served.

use k8s_openapi::api::networking::v1::Ingress;
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{
    PathTo, exact, mk_ingress_with_rules, mk_rule, mk_service_of, prefix, to_json, with_annotations,
};
use tugboat_testkit::{HaproxyBinary, Scene, Source, scene_tests};

scene_tests!(regex_paths_rewrite_with_their_groups);

const HOST: &str = "regex.example.com";

fn regex_path<'a>(path: &'a str, service: &'a str) -> PathTo<'a> {
    PathTo {
        path_type: "ImplementationSpecific",
        ..prefix(path, service)
    }
}

fn ingress(name: &str, paths: &[PathTo<'_>], annotations: &[(&str, &str)]) -> Ingress {
    with_annotations(
        mk_ingress_with_rules(name, vec![mk_rule(Some(HOST), paths)]),
        annotations,
    )
}

async fn regex_paths_rewrite_with_their_groups(haproxy: HaproxyBinary, source: Source) {
    let rewritten = start_backends("rewritten", 160, 1).await;
    let plain = start_backends("plain", 161, 1).await;
    let exactly = start_backends("exactly", 162, 1).await;
    let site = start_backends("site", 163, 1).await;
    let mut objects = Vec::new();
    for (name, servers) in [
        ("rewritten", &rewritten),
        ("plain", &plain),
        ("exactly", &exactly),
        ("site", &site),
    ] {
        objects.extend(mk_service_of(name, servers));
    }
    objects.extend([
        // ingress-nginx's rewrite example.
        to_json(&ingress(
            "rewrite",
            &[regex_path("/something(/|$)(.*)", "rewritten")],
            &[
                ("nginx.ingress.kubernetes.io/use-regex", "true"),
                ("nginx.ingress.kubernetes.io/rewrite-target", "/$2"),
            ],
        )),
        // A regex path without a rewrite, an invalid one beside it, and an Exact path
        // that beats the expressions.
        to_json(&ingress(
            "matching",
            &[
                regex_path("/v[0-9]+/items", "plain"),
                regex_path("/broken(", "plain"),
                exact("/v1/items/special", "exactly"),
            ],
            &[("nginx.ingress.kubernetes.io/use-regex", "true")],
        )),
        to_json(&ingress("site", &[prefix("/", "site")], &[])),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene
        .wait_for_service(HOST, "/something/new", "rewritten")
        .await;

    for (asked, received, query) in [
        ("/something", "/", ""),
        ("/something/", "/", ""),
        ("/something/new", "/new", ""),
        ("/something/new/deeper?x=1&y=2", "/new/deeper", "x=1&y=2"),
        ("/SomeThing/Case", "/Case", ""),
    ] {
        let reply = scene.get(HOST, asked).await.expect("request");
        assert_eq!(reply.status, 200, "{asked}: {reply:?}");
        assert_eq!(reply.service(), Some("rewritten"), "{asked}: {reply:?}");
        assert_eq!(reply.path(), Some(received), "{asked}: {reply:?}");
        assert_eq!(reply.query(), Some(query), "{asked}: {reply:?}");
    }
    // `(/|$)`: not a path element boundary, so not this route.
    let reply = scene.get(HOST, "/somethingelse").await.expect("request");
    assert_eq!(reply.service(), Some("site"), "{reply:?}");

    // A regex path without rewrite-target: the path is kept.
    let reply = scene.get(HOST, "/v2/items/7").await.expect("request");
    assert_eq!(reply.service(), Some("plain"), "{reply:?}");
    assert_eq!(reply.path(), Some("/v2/items/7"), "{reply:?}");
    // Anchored at the start of the path.
    let reply = scene.get(HOST, "/x/v2/items").await.expect("request");
    assert_eq!(reply.service(), Some("site"), "{reply:?}");
    // Exact beats the expressions of its host.
    let reply = scene.get(HOST, "/v1/items/special").await.expect("request");
    assert_eq!(reply.service(), Some("exactly"), "{reply:?}");

    // The invalid expression: a problem naming the Ingress and the path; its other
    // paths are served (above).
    let problems = scene.status().problems;
    let field = "spec.rules[0].http.paths[1].path";
    let problem = problems
        .iter()
        .find(|p| &*p.object.name == "matching" && p.field == field)
        .unwrap_or_else(|| panic!("a problem naming the path: {problems:?}"));
    assert!(problem.message.contains("regular expression"), "{problem}");
    assert!(
        !problems.iter().any(|p| &*p.object.name == "rewrite"),
        "{problems:?}"
    );
    scene.wait_for_warning("matching", field).await;

    // A changed expression is followed (regex routes are config rules: a reload).
    scene.apply(&ingress(
        "matching",
        &[regex_path("/w[0-9]+/items", "plain")],
        &[("nginx.ingress.kubernetes.io/use-regex", "true")],
    ));
    scene.wait_for_service(HOST, "/w3/items", "plain").await;
    let reply = scene.get(HOST, "/v2/items/7").await.expect("request");
    assert_eq!(reply.service(), Some("site"), "{reply:?}");
    // And a changed rewrite.
    scene.apply(&ingress(
        "rewrite",
        &[regex_path("/something(/|$)(.*)", "rewritten")],
        &[("nginx.ingress.kubernetes.io/rewrite-target", "/base/$2")],
    ));
    tugboat_testkit::eventually(
        "the new rewrite",
        std::time::Duration::from_secs(10),
        || async {
            let reply = scene.get(HOST, "/something/new").await.ok()?;
            (reply.path() == Some("/base/new")).then_some(())
        },
    )
    .await;
}
