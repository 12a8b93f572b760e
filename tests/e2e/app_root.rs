//! ingress-nginx's `app-root` on real haproxy, as its documentation and e2e tests
//! show: a request for `/` is redirected (302) to the app root on the same scheme and
//! host; other paths are served as they are.

use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{
    mk_ingress_with_rules, mk_rule, mk_service_of, prefix, to_json, with_annotations,
};
use tugboat_testkit::{HaproxyBinary, Scene, Source, scene_tests};

scene_tests!(a_request_for_the_root_goes_to_the_app_root);

const HOST: &str = "approot.example.com";

async fn a_request_for_the_root_goes_to_the_app_root(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 170, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    objects.push(to_json(&with_annotations(
        mk_ingress_with_rules("approot", vec![mk_rule(Some(HOST), &[prefix("/", "web")])]),
        &[("nginx.ingress.kubernetes.io/app-root", "/foo")],
    )));
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_status(HOST, "/", 302).await;
    for asked in ["/", "/?x=1"] {
        let reply = scene.get(HOST, asked).await.expect("request");
        assert_eq!(reply.status, 302, "{asked}: {reply:?}");
        assert_eq!(
            reply.header("location"),
            Some(format!("http://{HOST}/foo").as_str()),
            "{asked}: {reply:?}"
        );
    }
    // The app root itself and every other path reach the backend.
    for asked in ["/foo", "/bar/"] {
        let reply = scene.get(HOST, asked).await.expect("request");
        assert_eq!(reply.status, 200, "{asked}: {reply:?}");
        assert_eq!(reply.path(), Some(asked), "{reply:?}");
    }
    assert!(
        scene.status().problems.is_empty(),
        "{:?}",
        scene.status().problems
    );
}
