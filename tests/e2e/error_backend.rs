//! ingress-nginx's `default-backend` and `custom-http-errors` on real haproxy, as
//! ingress-nginx documents them and its e2e tests check: a rule whose Service has no
//! endpoint is answered by the `default-backend` Service (which gets `X-Code: 503` and
//! the names of the Ingress and the Service), and takes traffic again when an endpoint
//! comes back, with no reload either way; an answer with one of the codes of
//! `custom-http-errors` is replaced by the error backend's answer, asked with the
//! headers ingress-nginx sends.

use std::net::{Ipv4Addr, SocketAddr};

use tugboat_testkit::http::request;
use tugboat_testkit::objects::{mk_annotated_ingress, mk_endpoint_slice, mk_service_of, to_json};
use tugboat_testkit::{EchoServer, HaproxyBinary, Reply, Scene, Source, eventually, scene_tests};

scene_tests!(
    default_backend_serves_while_the_service_has_no_endpoint,
    custom_http_errors_answer_with_the_error_backend,
);

const HOST: &str = "shop.example.com";

async fn echo(service: &str) -> EchoServer {
    EchoServer::start(service, SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .await
        .expect("an echo backend")
}

async fn send(scene: &Scene, path: &str, headers: &[(&str, &str)]) -> Reply {
    request(scene.http_addr(), "GET", HOST, path, headers)
        .await
        .expect("request through haproxy")
}

async fn default_backend_serves_while_the_service_has_no_endpoint(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = echo("web").await;
    let errors = echo("errors").await;
    let plain = echo("plain").await;
    let mut objects = Vec::new();
    objects.extend(mk_service_of("web", std::slice::from_ref(&web)));
    objects.extend(mk_service_of("errors", std::slice::from_ref(&errors)));
    objects.extend(mk_service_of("plain", std::slice::from_ref(&plain)));
    objects.push(to_json(&mk_annotated_ingress(
        "shop",
        HOST,
        "/",
        "web",
        &[("nginx.ingress.kubernetes.io/default-backend", "errors")],
    )));
    // As in ingress-nginx's own test: a rule to a Service that does not exist.
    objects.push(to_json(&mk_annotated_ingress(
        "invalid",
        HOST,
        "/invalid",
        "invalid",
        &[("nginx.ingress.kubernetes.io/default-backend", "errors")],
    )));
    // Without the key, a Service without endpoints answers 503 as before.
    objects.push(to_json(&mk_annotated_ingress(
        "plain",
        HOST,
        "/plain",
        "plain",
        &[],
    )));
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_service(HOST, "/", "web").await;
    scene.wait_for_service(HOST, "/plain", "plain").await;
    let reply = send(
        &scene,
        "/invalid/x",
        &[("X-Request-ID", "something-unique")],
    )
    .await;
    assert_eq!(reply.service(), Some("errors"), "{reply:?}");
    assert_eq!(reply.header("x-echo-req-code"), Some("503"), "{reply:?}");
    assert_eq!(reply.header("x-echo-req-ingress-name"), Some("invalid"));
    assert_eq!(reply.header("x-echo-req-service-name"), Some("invalid"));
    assert_eq!(
        reply.header("x-echo-req-request-id"),
        Some("something-unique")
    );
    let reloads = scene.reloads().await;

    // The rule's Service loses its last endpoint: the default backend answers.
    scene.apply(&mk_endpoint_slice("web", "http", &[]));
    scene.apply(&mk_endpoint_slice("plain", "http", &[]));
    scene.wait_for_service(HOST, "/", "errors").await;
    scene.wait_for_status(HOST, "/plain", 503).await;
    let reply = send(
        &scene,
        "/cart?item=1",
        &[
            ("X-Request-ID", "something-unique"),
            ("Accept", "text/html"),
        ],
    )
    .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.service(), Some("errors"), "{reply:?}");
    assert_eq!(reply.path(), Some("/cart"), "{reply:?}");
    assert_eq!(reply.header("x-echo-req-code"), Some("503"), "{reply:?}");
    assert_eq!(reply.header("x-echo-req-ingress-name"), Some("shop"));
    assert_eq!(reply.header("x-echo-req-service-name"), Some("web"));
    assert_eq!(reply.header("x-echo-req-service-port"), Some("80"));
    assert_eq!(reply.header("x-echo-req-namespace"), Some("default"));
    assert_eq!(reply.header("x-echo-req-format"), Some("text/html"));
    assert_eq!(
        reply.header("x-echo-req-request-id"),
        Some("something-unique")
    );
    // Without one from the client, the request gets an id of its own.
    let reply = send(&scene, "/", &[]).await;
    assert!(
        reply
            .header("x-echo-req-request-id")
            .is_some_and(|id| id.len() >= 32),
        "{reply:?}"
    );

    // The default backend's own endpoint moves: followed at runtime too.
    let moved = echo("errors").await;
    scene.apply(&mk_endpoint_slice("errors", "http", &[moved.addr]));
    let moved_endpoint = moved.addr.to_string();
    eventually(
        "the moved endpoint of the default backend answers",
        std::time::Duration::from_secs(15),
        || async {
            let reply = send(&scene, "/", &[]).await;
            (reply.endpoint() == Some(moved_endpoint.as_str())).then_some(())
        },
    )
    .await;

    // An endpoint comes back: the rule's Service takes the traffic again.
    scene.apply(&mk_endpoint_slice("web", "http", &[web.addr]));
    scene.wait_for_service(HOST, "/", "web").await;
    let reply = send(&scene, "/", &[]).await;
    assert_eq!(reply.header("x-echo-req-code"), None, "{reply:?}");
    assert_eq!(
        scene.reloads().await,
        reloads,
        "endpoint changes switch the backend with no reload"
    );
}

async fn custom_http_errors_answer_with_the_error_backend(haproxy: HaproxyBinary, source: Source) {
    let web = echo("web").await;
    let errors = echo("errors").await;
    let mut objects = Vec::new();
    objects.extend(mk_service_of("web", std::slice::from_ref(&web)));
    objects.extend(mk_service_of("errors", std::slice::from_ref(&errors)));
    objects.push(to_json(&mk_annotated_ingress(
        "shop",
        HOST,
        "/",
        "web",
        &[
            ("nginx.ingress.kubernetes.io/custom-http-errors", "404, 503"),
            ("nginx.ingress.kubernetes.io/default-backend", "errors"),
        ],
    )));
    // Without `default-backend`: the controller's default backend (here the built-in
    // 404) answers the errors.
    objects.push(to_json(&mk_annotated_ingress(
        "builtin",
        HOST,
        "/builtin",
        "web",
        &[("tugboat.dev/custom-http-errors", "500")],
    )));
    // A code that is not one: a problem, and the rest of the Ingress keeps working.
    objects.push(to_json(&mk_annotated_ingress(
        "typo",
        HOST,
        "/typo",
        "web",
        &[(
            "nginx.ingress.kubernetes.io/custom-http-errors",
            "404,teapot",
        )],
    )));
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_service(HOST, "/", "web").await;

    // The backend answers 503: the client gets the error backend's answer, as it is.
    let reply = send(
        &scene,
        "/cart/add?item=7",
        &[
            ("x-echo-status", "503"),
            ("X-Request-ID", "req-42"),
            ("Accept", "application/json"),
        ],
    )
    .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.service(), Some("errors"), "{reply:?}");
    assert_eq!(reply.path(), Some("/"), "{reply:?}");
    assert!(reply.body.contains(&format!("host={HOST} ")), "{reply:?}");
    assert_eq!(reply.header("x-echo-req-code"), Some("503"), "{reply:?}");
    assert_eq!(reply.header("x-echo-req-format"), Some("application/json"));
    assert_eq!(
        reply.header("x-echo-req-original-uri"),
        Some("/cart/add?item=7")
    );
    assert_eq!(reply.header("x-echo-req-namespace"), Some("default"));
    assert_eq!(reply.header("x-echo-req-ingress-name"), Some("shop"));
    assert_eq!(reply.header("x-echo-req-service-name"), Some("web"));
    assert_eq!(reply.header("x-echo-req-service-port"), Some("80"));
    assert_eq!(reply.header("x-echo-req-request-id"), Some("req-42"));
    // The client's own header is not what picks the error backend.
    assert_eq!(reply.header("x-echo-req-tugboat-backend"), None);

    // 404 too; the backend and the error backend see the same generated request id.
    let reply = send(&scene, "/missing", &[("x-echo-status", "404")]).await;
    assert_eq!(reply.service(), Some("errors"), "{reply:?}");
    assert_eq!(reply.header("x-echo-req-code"), Some("404"), "{reply:?}");
    assert!(
        reply
            .header("x-echo-req-request-id")
            .is_some_and(|id| !id.is_empty()),
        "{reply:?}"
    );

    // A code not in the list, and a success, pass unchanged.
    let reply = send(&scene, "/", &[("x-echo-status", "500")]).await;
    assert_eq!(
        (reply.status, reply.service()),
        (500, Some("web")),
        "{reply:?}"
    );
    let reply = send(&scene, "/", &[]).await;
    assert_eq!(
        (reply.status, reply.service()),
        (200, Some("web")),
        "{reply:?}"
    );

    // Without `default-backend`, the controller's default backend answers.
    let reply = send(&scene, "/builtin", &[("x-echo-status", "500")]).await;
    assert_eq!(reply.status, 404, "{reply:?}");
    assert_eq!(reply.service(), None, "{reply:?}");
    assert!(reply.body.contains("no route"), "{reply:?}");

    // The Ingress with a bad code list is served as if it had none, with a problem.
    let reply = send(&scene, "/typo", &[("x-echo-status", "404")]).await;
    assert_eq!(
        (reply.status, reply.service()),
        (404, Some("web")),
        "{reply:?}"
    );
    if let Some(event) = scene
        .wait_for_warning(
            "typo",
            "metadata.annotations.nginx.ingress.kubernetes.io/custom-http-errors",
        )
        .await
    {
        let note = event["note"].as_str().unwrap_or_default();
        assert!(note.contains("'teapot' is not one"), "{event}");
    }

    // Removing the key ends the replacement.
    scene.apply(&mk_annotated_ingress(
        "shop",
        HOST,
        "/",
        "web",
        &[("nginx.ingress.kubernetes.io/default-backend", "errors")],
    ));
    eventually(
        "503 of the backend passed unchanged",
        std::time::Duration::from_secs(15),
        || async {
            let reply = send(&scene, "/", &[("x-echo-status", "503")]).await;
            (reply.service() == Some("web") && reply.status == 503).then_some(())
        },
    )
    .await;
}
