//! Users moving from ingress-nginx and the HAProxy controllers, end to end on real
//! haproxy: an annotation Tugboat does not support is never ignored silently (a
//! problem and, from the API, a Warning Event name it), and one that restricts access
//! makes its Ingress' routes answer 403 while every other Ingress keeps serving.

use k8s_openapi::api::networking::v1::Ingress;
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{
    mk_ingress_with_rules, mk_rule, mk_service_of, prefix, to_json, with_annotations,
};
use tugboat_testkit::{HaproxyBinary, Scene, Source, scene_tests};

scene_tests!(unsupported_access_keys_fail_closed);

const HOST: &str = "move.example.com";

/// An Ingress `name` routing `HOST` + `path` (Prefix) to Service `web`, with these
/// annotations (full names).
fn ingress(name: &str, path: &str, annotations: &[(&str, &str)]) -> Ingress {
    with_annotations(
        mk_ingress_with_rules(name, vec![mk_rule(Some(HOST), &[prefix(path, "web")])]),
        annotations,
    )
}

async fn unsupported_access_keys_fail_closed(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 150, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    objects.extend([
        // An allow list that would let the test client in: the 403 is the fail-closed
        // answer, not the list at work.
        to_json(&ingress(
            "listed",
            "/listed",
            &[(
                "nginx.ingress.kubernetes.io/whitelist-source-range",
                "127.0.0.0/8",
            )],
        )),
        to_json(&ingress(
            "office",
            "/office",
            &[("haproxy-ingress.github.io/oauth", "oauth2_proxy")],
        )),
        to_json(&ingress(
            "external",
            "/external",
            &[(
                "nginx.ingress.kubernetes.io/auth-url",
                "http://127.0.0.1:1/auth",
            )],
        )),
        to_json(&ingress(
            "buffers",
            "/buffers",
            &[("nginx.ingress.kubernetes.io/proxy-buffering", "on")],
        )),
        to_json(&ingress("site", "/", &[])),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_status(HOST, "/listed", 403).await;
    assert_eq!(
        scene.get(HOST, "/office").await.expect("request").status,
        403
    );
    assert_eq!(
        scene
            .get(HOST, "/external/x")
            .await
            .expect("request")
            .status,
        403
    );
    // The neighbours keep serving: another Ingress on the same host, and one whose
    // unsupported key restricts nothing.
    assert_eq!(scene.get(HOST, "/").await.expect("request").status, 200);
    assert_eq!(
        scene.get(HOST, "/buffers").await.expect("request").status,
        200
    );
    let problems = scene.status().problems;
    for (name, key) in [
        (
            "listed",
            "nginx.ingress.kubernetes.io/whitelist-source-range",
        ),
        ("office", "haproxy-ingress.github.io/oauth"),
        ("external", "nginx.ingress.kubernetes.io/auth-url"),
        ("buffers", "nginx.ingress.kubernetes.io/proxy-buffering"),
    ] {
        let field = format!("metadata.annotations.{key}");
        let problem = problems
            .iter()
            .find(|p| p.object.name == name && p.field == field)
            .unwrap_or_else(|| panic!("a problem naming {key}: {problems:?}"));
        assert!(problem.message.contains("not supported"), "{problem}");
        // From the API, the problem is a Warning Event on the Ingress naming the key.
        if let Some(event) = scene.wait_for_warning(name, &field).await {
            assert!(event.to_string().contains(key), "{event}");
        }
    }
    assert!(
        !problems.iter().any(|p| p.object.name == "site"),
        "{problems:?}"
    );
}
