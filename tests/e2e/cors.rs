//! CORS with any origin and credentials (`enable-cors: "true"` alone, as ingress-nginx
//! and HAProxy Ingress users write it): browsers refuse a credentialed answer that
//! allows `*`, so the answers allow the request's own `Origin`, with `Vary: Origin`,
//! for the preflight and for the backend's answer; a request without `Origin` gets no
//! `Access-Control-Allow-Origin`. Without credentials, `*` stays.

use tugboat_testkit::http::request;
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{mk_annotated_ingress, mk_service_of, to_json};
use tugboat_testkit::{HaproxyBinary, Reply, Scene, Source, scene_tests};

scene_tests!(any_origin_with_credentials_allows_the_requests_origin);

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

async fn any_origin_with_credentials_allows_the_requests_origin(
    haproxy: HaproxyBinary,
    source: Source,
) {
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
            "anonymous",
            HOST,
            "/anonymous",
            "web",
            &[
                ("nginx.ingress.kubernetes.io/enable-cors", "true"),
                (
                    "nginx.ingress.kubernetes.io/cors-allow-credentials",
                    "false",
                ),
            ],
        )),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_service(HOST, "/nginx", "web").await;
    scene.wait_for_service(HOST, "/anonymous", "web").await;

    let preflight = [
        ("Origin", ORIGIN),
        ("Access-Control-Request-Method", "POST"),
    ];
    for path in ["/nginx", "/hi"] {
        let reply = send(&scene, "OPTIONS", path, &preflight).await;
        assert_eq!(reply.status, 204, "{path}: {reply:?}");
        assert_eq!(
            reply.header("access-control-allow-origin"),
            Some(ORIGIN),
            "{path}: {reply:?}"
        );
        assert_eq!(
            reply.header("access-control-allow-credentials"),
            Some("true"),
            "{path}: {reply:?}"
        );
        assert!(varies_by_origin(&reply), "{path}: {reply:?}");

        let reply = send(&scene, "GET", path, &preflight[..1]).await;
        assert_eq!(reply.service(), Some("web"), "{path}: {reply:?}");
        assert_eq!(
            reply.header("access-control-allow-origin"),
            Some(ORIGIN),
            "{path}: {reply:?}"
        );
        assert_eq!(
            reply.header("access-control-allow-credentials"),
            Some("true"),
            "{path}: {reply:?}"
        );
        assert!(varies_by_origin(&reply), "{path}: {reply:?}");

        // No `Origin`: not a cross-origin request, no origin allowed (as HAProxy Ingress).
        let reply = send(&scene, "GET", path, &[]).await;
        assert_eq!(reply.service(), Some("web"), "{path}: {reply:?}");
        assert_eq!(
            reply.header("access-control-allow-origin"),
            None,
            "{path}: {reply:?}"
        );
        // A preflight without `Origin` is not one: the backend answers it.
        let reply = send(&scene, "OPTIONS", path, &preflight[1..]).await;
        assert_eq!(reply.service(), Some("web"), "{path}: {reply:?}");
        assert_eq!(
            reply.header("access-control-allow-origin"),
            None,
            "{path}: {reply:?}"
        );
    }

    // Without credentials, any origin is `*`.
    let reply = send(&scene, "OPTIONS", "/anonymous", &preflight).await;
    assert_eq!(reply.status, 204, "{reply:?}");
    assert_eq!(reply.header("access-control-allow-origin"), Some("*"));
    assert_eq!(reply.header("access-control-allow-credentials"), None);
    let reply = send(&scene, "GET", "/anonymous", &preflight[..1]).await;
    assert_eq!(reply.header("access-control-allow-origin"), Some("*"));
}
