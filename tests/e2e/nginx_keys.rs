//! ingress-nginx's keys beyond routing, end to end on real haproxy: `proxy-body-size`
//! answers 413 to a body larger than it allows (by its `Content-Length`), before
//! authentication, with nginx's units and `0` for no limit; `affinity: cookie` keeps a
//! client on its server with the `session-cookie-*` name and attributes; `limit-rps`
//! (with its burst) and `limit-connections` answer 503 per client address.

use std::time::Duration;

use k8s_openapi::api::networking::v1::Ingress;
use tugboat_testkit::http::{request, request_with_body};
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{
    S3CRET_HASH, mk_annotated_ingress, mk_secret, mk_service_of, to_json,
};
use tugboat_testkit::{HaproxyBinary, Reply, Scene, Source, scene_tests};

scene_tests!(
    body_size_limits_answer_413,
    affinity_cookie_keeps_a_client_on_its_server,
    request_and_connection_limits_answer_503,
);

const HOST: &str = "limits.example.com";

/// An Ingress `name` routing `HOST` + `path` (Prefix) to Service `web`, with these
/// annotations (full names).
fn ingress(name: &str, path: &str, annotations: &[(&str, &str)]) -> Ingress {
    mk_annotated_ingress(name, HOST, path, "web", annotations)
}

async fn post(scene: &Scene, path: &str, size: usize) -> Reply {
    let body = vec![b'x'; size];
    request_with_body(scene.http_addr(), "POST", HOST, path, &[], Some(&body))
        .await
        .expect("request through haproxy")
}

async fn body_size_limits_answer_413(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 214, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    objects.extend([
        to_json(&mk_secret(
            "users",
            "Opaque",
            &[("ann", S3CRET_HASH.as_bytes())],
        )),
        to_json(&ingress(
            "small",
            "/small",
            &[("nginx.ingress.kubernetes.io/proxy-body-size", "1k")],
        )),
        // The limit comes before authentication, as in nginx.
        to_json(&ingress(
            "private",
            "/private",
            &[
                ("nginx.ingress.kubernetes.io/proxy-body-size", "1k"),
                ("tugboat.dev/auth-type", "basic-auth"),
                ("tugboat.dev/auth-secret", "users"),
            ],
        )),
        to_json(&ingress(
            "unlimited",
            "/unlimited",
            &[("nginx.ingress.kubernetes.io/proxy-body-size", "0")],
        )),
        // A bad value is a problem; the rest of the Ingress keeps working.
        to_json(&ingress(
            "typo",
            "/typo",
            &[
                ("nginx.ingress.kubernetes.io/proxy-body-size", "1kb"),
                (
                    "nginx.ingress.kubernetes.io/upstream-vhost",
                    "internal.example.com",
                ),
            ],
        )),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_status(HOST, "/small", 200).await;

    assert_eq!(post(&scene, "/small", 1024).await.status, 200);
    let reply = post(&scene, "/small", 1025).await;
    assert_eq!(reply.status, 413, "{reply:?}");
    assert_eq!(post(&scene, "/private", 2048).await.status, 413);
    assert_eq!(post(&scene, "/private", 10).await.status, 401);
    assert_eq!(post(&scene, "/unlimited", 200_000).await.status, 200);

    let reply = post(&scene, "/typo", 4096).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert!(
        reply.body.contains("host=internal.example.com"),
        "{reply:?}"
    );
    let problems = scene.status().problems;
    let [problem] = problems.as_slice() else {
        panic!("one problem: {problems:?}");
    };
    assert_eq!(&*problem.object.name, "typo");
    assert_eq!(
        problem.field,
        "metadata.annotations.nginx.ingress.kubernetes.io/proxy-body-size"
    );
}

async fn affinity_cookie_keeps_a_client_on_its_server(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 215, 3).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    objects.extend([to_json(&ingress(
        "sticky",
        "/shop",
        &[
            ("nginx.ingress.kubernetes.io/affinity", "cookie"),
            ("nginx.ingress.kubernetes.io/session-cookie-name", "route"),
            ("nginx.ingress.kubernetes.io/session-cookie-path", "/shop"),
            ("nginx.ingress.kubernetes.io/session-cookie-max-age", "3600"),
        ],
    ))]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_status(HOST, "/shop", 200).await;
    let scene = &scene;
    let get = |cookie: Option<String>| async move {
        let headers: Vec<(&str, &str)> = cookie.iter().map(|c| ("Cookie", c.as_str())).collect();
        request(scene.http_addr(), "GET", HOST, "/shop/cart", &headers)
            .await
            .expect("request through haproxy")
    };
    let first = get(None).await;
    let set_cookie = first.header("set-cookie").expect("an affinity cookie");
    let attributes: Vec<String> = set_cookie
        .split(';')
        .map(|a| a.trim().to_ascii_lowercase())
        .collect();
    assert!(attributes[0].starts_with("route="), "{set_cookie}");
    for attribute in ["httponly", "path=/shop", "max-age=3600"] {
        assert!(
            attributes.iter().any(|a| a == attribute),
            "{attribute} in {set_cookie}"
        );
    }
    // The last Path is the one a browser keeps.
    let last_path = attributes.iter().rev().find(|a| a.starts_with("path="));
    assert_eq!(
        last_path.map(String::as_str),
        Some("path=/shop"),
        "{set_cookie}"
    );
    let cookie = set_cookie.split(';').next().map(str::to_string);
    let endpoint = first.endpoint().expect("an endpoint").to_string();
    for _ in 0..10 {
        let reply = get(cookie.clone()).await;
        assert_eq!(reply.endpoint(), Some(endpoint.as_str()), "{reply:?}");
    }
    // Without the cookie, requests spread over the servers.
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..6 {
        seen.insert(get(None).await.endpoint().map(str::to_string));
    }
    assert_eq!(seen.len(), 3, "{seen:?}");
}

async fn request_and_connection_limits_answer_503(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 216, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    objects.extend([
        // 2 per second with a burst of 2 × 1: at most 4 in a second.
        to_json(&ingress(
            "rate",
            "/rate",
            &[
                ("nginx.ingress.kubernetes.io/limit-rps", "2"),
                ("nginx.ingress.kubernetes.io/limit-burst-multiplier", "1"),
            ],
        )),
        // The test client is exempt here.
        to_json(&ingress(
            "exempt",
            "/exempt",
            &[
                ("nginx.ingress.kubernetes.io/limit-rps", "1"),
                ("nginx.ingress.kubernetes.io/limit-burst-multiplier", "1"),
                ("nginx.ingress.kubernetes.io/limit-whitelist", "127.0.0.0/8"),
            ],
        )),
        to_json(&ingress(
            "conn",
            "/conn",
            &[("nginx.ingress.kubernetes.io/limit-connections", "1")],
        )),
        // A bad limit fails closed (it restricts access): 403, with a problem.
        to_json(&ingress(
            "typo",
            "/typo",
            &[("nginx.ingress.kubernetes.io/limit-rps", "ten")],
        )),
        to_json(&ingress("free", "/free", &[])),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_status(HOST, "/free", 200).await;
    scene.wait_for_status(HOST, "/typo", 403).await;
    let problems = scene.status().problems;
    let [problem] = problems.as_slice() else {
        panic!("one problem: {problems:?}");
    };
    assert_eq!(&*problem.object.name, "typo");
    assert!(problem.field.ends_with("limit-rps"), "{problem}");

    // Ten requests at once: the rate and its burst pass, the rest get 503.
    let mut statuses = Vec::new();
    for _ in 0..10 {
        let reply = request(scene.http_addr(), "GET", HOST, "/rate", &[])
            .await
            .expect("request through haproxy");
        statuses.push(reply.status);
    }
    // Rate + burst = 4; haproxy's one-second window, when it turns during the ten,
    // weighs the previous one in and may let one more through.
    let passed = statuses.iter().filter(|s| **s == 200).count();
    assert!((4..=5).contains(&passed), "{statuses:?}");
    assert_eq!(&statuses[..4], &[200; 4], "{statuses:?}");
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 503),
        "{statuses:?}"
    );
    for _ in 0..10 {
        let reply = request(scene.http_addr(), "GET", HOST, "/exempt", &[])
            .await
            .expect("request through haproxy");
        assert_eq!(reply.status, 200, "{reply:?}");
    }
    // Other routes serve; this one again once haproxy's one-second window (which
    // weighs the previous second in) has passed twice.
    assert_eq!(scene.get(HOST, "/free").await.expect("request").status, 200);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(scene.get(HOST, "/rate").await.expect("request").status, 200);

    // One request in progress (the backend takes its time): a second one gets 503.
    // Which of two requests that meet is counted first is a race: tried a few times.
    let mut refused = false;
    for _ in 0..5 {
        let addr = scene.http_addr();
        let slow = tokio::spawn(async move {
            request(addr, "GET", HOST, "/conn", &[("X-Delay-Ms", "1500")]).await
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        let second = request(scene.http_addr(), "GET", HOST, "/conn", &[])
            .await
            .expect("request through haproxy");
        let slow = slow.await.expect("task").expect("request through haproxy");
        if second.status == 503 && slow.status == 200 {
            refused = true;
            break;
        }
    }
    assert!(
        refused,
        "a second request while one is in progress was never refused"
    );
    tugboat_testkit::eventually(
        "the connection counted out",
        Duration::from_secs(5),
        || async {
            let reply = request(scene.http_addr(), "GET", HOST, "/conn", &[])
                .await
                .ok()?;
            (reply.status == 200).then_some(())
        },
    )
    .await;
}
