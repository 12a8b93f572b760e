//! CORS with any origin (`enable-cors: "true"` alone, as ingress-nginx and HAProxy
//! Ingress users write it, whose credentials default to on): browsers refuse
//! credentials from an answer that allows `*`, and allowing each request's own
//! `Origin` would let every site read credentialed answers, so `*` goes without
//! `Access-Control-Allow-Credentials`. Credentials are offered to listed origins only,
//! which get their own `Origin` back with `Vary: Origin`.

use tugboat_testkit::http::request;
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{mk_annotated_ingress, mk_service_of, to_json};
use tugboat_testkit::{HaproxyBinary, Reply, Scene, Source, scene_tests};

scene_tests!(credentials_are_offered_to_listed_origins_only);

const HOST: &str = "cors.example.com";
const ORIGIN: &str = "https://app.example.org";

async fn send(scene: &Scene, method: &str, path: &str, headers: &[(&str, &str)]) -> Reply {
    request(scene.http_addr(), method, HOST, path, headers)
        .await
        .expect("request through haproxy")
}

/// Whether `reply` has `Origin` among its `Vary` values.
fn varies_by_origin(reply: &Reply) -> bool {
    reply
        .headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("vary"))
        .flat_map(|(_, value)| value.split(','))
        .any(|value| value.trim().eq_ignore_ascii_case("origin"))
}

async fn credentials_are_offered_to_listed_origins_only(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 242, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    objects.extend([
        to_json(&mk_annotated_ingress(
            "nginx",
            HOST,
            "/nginx",
            "web",
            &[("nginx.ingress.kubernetes.io/enable-cors", "true")],
        )),
        to_json(&mk_annotated_ingress(
            "haproxy-ingress",
            HOST,
            "/hi",
            "web",
            &[("haproxy-ingress.github.io/cors-enable", "true")],
        )),
        to_json(&mk_annotated_ingress(
            "listed",
            HOST,
            "/listed",
            "web",
            &[
                ("nginx.ingress.kubernetes.io/enable-cors", "true"),
                ("nginx.ingress.kubernetes.io/cors-allow-origin", ORIGIN),
                ("nginx.ingress.kubernetes.io/cors-allow-credentials", "true"),
            ],
        )),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_service(HOST, "/nginx", "web").await;
    scene.wait_for_service(HOST, "/hi", "web").await;
    scene.wait_for_service(HOST, "/listed", "web").await;

    let preflight = [
        ("Origin", ORIGIN),
        ("Access-Control-Request-Method", "POST"),
    ];
    // Any origin: `*`, and no credentials (browsers would refuse them with `*`).
    for path in ["/nginx", "/hi"] {
        let reply = send(&scene, "OPTIONS", path, &preflight).await;
        assert_eq!(reply.status, 204, "{path}: {reply:?}");
        assert_eq!(reply.header("access-control-allow-origin"), Some("*"));
        assert_eq!(
            reply.header("access-control-allow-credentials"),
            None,
            "{path}: {reply:?}"
        );
        let reply = send(&scene, "GET", path, &preflight[..1]).await;
        assert_eq!(reply.service(), Some("web"), "{path}: {reply:?}");
        assert_eq!(reply.header("access-control-allow-origin"), Some("*"));
        assert_eq!(
            reply.header("access-control-allow-credentials"),
            None,
            "{path}: {reply:?}"
        );
    }
    // A listed origin gets itself back, with credentials, on the preflight and on the
    // backend's answer.
    let reply = send(&scene, "OPTIONS", "/listed", &preflight).await;
    assert_eq!(reply.status, 204, "{reply:?}");
    assert_eq!(reply.header("access-control-allow-origin"), Some(ORIGIN));
    assert_eq!(
        reply.header("access-control-allow-credentials"),
        Some("true")
    );
    assert!(varies_by_origin(&reply), "{reply:?}");
    let reply = send(&scene, "GET", "/listed", &preflight[..1]).await;
    assert_eq!(reply.service(), Some("web"), "{reply:?}");
    assert_eq!(reply.header("access-control-allow-origin"), Some(ORIGIN));
    assert_eq!(
        reply.header("access-control-allow-credentials"),
        Some("true")
    );
    assert!(varies_by_origin(&reply), "{reply:?}");
    // Another origin is not allowed.
    let reply = send(
        &scene,
        "GET",
        "/listed",
        &[("Origin", "https://evil.example")],
    )
    .await;
    assert_eq!(
        reply.header("access-control-allow-origin"),
        None,
        "{reply:?}"
    );
}
