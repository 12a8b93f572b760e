//! Users moving from ingress-nginx and the HAProxy controllers, end to end on real
//! haproxy: their keys that Tugboat reads behave as those controllers document; an
//! annotation Tugboat does not support is never ignored silently (a problem and, from
//! the API, a Warning Event name it), and one that restricts access makes its Ingress'
//! routes answer 403 while every other Ingress keeps serving.

use clap::Parser as _;
use k8s_openapi::api::networking::v1::Ingress;
use tugboat::cli::{Cli, Command};
use tugboat::migrate::MigrateArgs;
use tugboat_model::annotations::UnsupportedAccess;
use tugboat_model::migration::{Report, Status};
use tugboat_testkit::fake_apiserver::FakeApiServer;
use tugboat_testkit::http::{request, request_with_body};
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{
    ANN_S3CRET, S3CRET_HASH, mk_annotated_ingress, mk_basic_auth_secret, mk_ingress_with_rules,
    mk_rule, mk_secret, mk_service_of, mk_tls_secret, prefix, to_json, to_yaml, with_annotations,
    with_tls,
};
use tugboat_testkit::{HaproxyBinary, Reply, Scene, Source, scene_tests};

scene_tests!(
    unsupported_access_keys_fail_closed,
    unsupported_access_keys_served_when_the_operator_says_so,
    other_controllers_keys_behave_as_they_document,
    haproxy_ingress_limits_body_size_and_aliases,
    redirects_answer_before_the_https_redirect,
);

const HOST: &str = "move.example.com";

/// An Ingress `name` routing `HOST` + `path` (Prefix) to Service `web`, with these
/// annotations (full names).
fn ingress(name: &str, path: &str, annotations: &[(&str, &str)]) -> Ingress {
    mk_annotated_ingress(name, HOST, path, "web", annotations)
}

async fn send(scene: &Scene, method: &str, path: &str, headers: &[(&str, &str)]) -> Reply {
    request(scene.http_addr(), method, HOST, path, headers)
        .await
        .expect("request through haproxy")
}

async fn unsupported_access_keys_fail_closed(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 150, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    objects.extend([
        // An allow list that lets the test client in, with an exception Tugboat cannot
        // express: the 403 is the fail-closed answer, not the list at work.
        to_json(&ingress(
            "listed",
            "/listed",
            &[(
                "haproxy-ingress.github.io/allowlist-source-range",
                "127.0.0.0/8,!127.0.0.99",
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
            &[("haproxy.org/client-ca", "client-ca")],
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
    for (name, key, says) in [
        (
            "listed",
            "haproxy-ingress.github.io/allowlist-source-range",
            "403",
        ),
        ("office", "haproxy-ingress.github.io/oauth", "403"),
        ("external", "haproxy.org/client-ca", "403"),
        (
            "buffers",
            "nginx.ingress.kubernetes.io/proxy-buffering",
            "no effect",
        ),
    ] {
        let field = format!("metadata.annotations.{key}");
        let problem = problems
            .iter()
            .find(|p| &*p.object.name == name && p.field == field)
            .unwrap_or_else(|| panic!("a problem naming {key}: {problems:?}"));
        assert!(problem.message.contains("not supported"), "{problem}");
        assert!(problem.message.contains(says), "{problem}");
        // From the API, the problem is a Warning Event on the Ingress naming the key.
        if let Some(event) = scene.wait_for_warning(name, &field).await {
            assert!(event.to_string().contains(key), "{event}");
        }
    }
    assert!(
        !problems.iter().any(|p| &*p.object.name == "site"),
        "{problems:?}"
    );
}

async fn unsupported_access_keys_served_when_the_operator_says_so(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = start_backends("web", 152, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    objects.push(to_json(&ingress(
        "external",
        "/external",
        &[("haproxy.org/client-ca", "client-ca")],
    )));
    let scene = Scene::start_with(&haproxy, source, &objects, |config| {
        config.model.unsupported_access = UnsupportedAccess::Ignore;
    })
    .await;
    scene.wait_for_status(HOST, "/external", 200).await;
    // Still a problem, saying the restriction is not applied.
    let field = "metadata.annotations.haproxy.org/client-ca";
    let problems = scene.status().problems;
    let problem = problems
        .iter()
        .find(|p| p.field == field)
        .unwrap_or_else(|| panic!("a problem naming the key: {problems:?}"));
    assert!(
        problem
            .message
            .contains("--unsupported-access-keys=ignore serves"),
        "{problem}"
    );
    scene.wait_for_warning("external", field).await;
}

async fn other_controllers_keys_behave_as_they_document(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 151, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    objects.extend([
        to_json(&mk_secret(
            "users",
            "Opaque",
            &[("ann", S3CRET_HASH.as_bytes())],
        )),
        // ingress-nginx: allow and deny lists (the client is 127.0.0.1).
        to_json(&ingress(
            "nginx-elsewhere",
            "/nginx-elsewhere",
            &[(
                "nginx.ingress.kubernetes.io/whitelist-source-range",
                "10.0.0.0/8,192.168.0.1",
            )],
        )),
        to_json(&ingress(
            "nginx-local",
            "/nginx-local",
            &[(
                "nginx.ingress.kubernetes.io/allowlist-source-range",
                "127.0.0.1/32",
            )],
        )),
        // HAProxy Ingress: a deny list.
        to_json(&ingress(
            "hi-denied",
            "/hi-denied",
            &[(
                "haproxy-ingress.github.io/denylist-source-range",
                "127.0.0.0/8",
            )],
        )),
        // ingress-nginx: CORS with its default of credentials allowed.
        to_json(&ingress(
            "nginx-cors",
            "/nginx-cors",
            &[
                ("nginx.ingress.kubernetes.io/enable-cors", "true"),
                (
                    "nginx.ingress.kubernetes.io/cors-allow-methods",
                    "get, post",
                ),
            ],
        )),
        // ingress-nginx: HTTPS redirect without TLS on the Ingress (308).
        to_json(&ingress(
            "nginx-force",
            "/nginx-force",
            &[("nginx.ingress.kubernetes.io/force-ssl-redirect", "true")],
        )),
        // ingress-nginx: redirects to a URL, permanent (301) and temporal (302).
        to_json(&ingress(
            "nginx-moved",
            "/nginx-moved",
            &[(
                "nginx.ingress.kubernetes.io/permanent-redirect",
                "https://new.example.com/landing",
            )],
        )),
        to_json(&ingress(
            "nginx-away",
            "/nginx-away",
            &[(
                "nginx.ingress.kubernetes.io/temporal-redirect",
                "https://away.example.com/",
            )],
        )),
        // ingress-nginx: the prefix header the backend receives, and the Host.
        to_json(&ingress(
            "nginx-prefix",
            "/nginx-prefix",
            &[
                ("nginx.ingress.kubernetes.io/x-forwarded-prefix", "/shop"),
                (
                    "nginx.ingress.kubernetes.io/upstream-vhost",
                    "internal.example.com",
                ),
            ],
        )),
        // HAProxy Technologies: basic authentication with its default realm.
        to_json(&ingress(
            "ht-auth",
            "/ht-auth",
            &[
                ("haproxy.org/auth-type", "basic-auth"),
                ("haproxy.org/auth-secret", "default/users"),
            ],
        )),
        to_json(&ingress("site", "/", &[])),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_status(HOST, "/nginx-elsewhere", 403).await;
    assert_eq!(send(&scene, "GET", "/nginx-local", &[]).await.status, 200);
    assert_eq!(send(&scene, "GET", "/hi-denied", &[]).await.status, 403);

    let preflight = [
        ("Origin", "https://app.example.com"),
        ("Access-Control-Request-Method", "POST"),
    ];
    let reply = send(&scene, "OPTIONS", "/nginx-cors", &preflight).await;
    assert_eq!(reply.status, 204, "{reply:?}");
    assert_eq!(reply.header("access-control-allow-origin"), Some("*"));
    assert_eq!(
        reply.header("access-control-allow-methods"),
        Some("GET, POST")
    );
    // Browsers refuse credentials with any origin: none are offered.
    assert_eq!(reply.header("access-control-allow-credentials"), None);

    let reply = send(&scene, "GET", "/nginx-force/a?b=1", &[]).await;
    assert_eq!(reply.status, 308, "{reply:?}");
    assert_eq!(
        reply.header("location"),
        Some("https://move.example.com/nginx-force/a?b=1")
    );

    let reply = send(&scene, "GET", "/nginx-moved/page", &[]).await;
    assert_eq!(reply.status, 301, "{reply:?}");
    assert_eq!(
        reply.header("location"),
        Some("https://new.example.com/landing")
    );
    let reply = send(&scene, "GET", "/nginx-away", &[]).await;
    assert_eq!(reply.status, 302, "{reply:?}");
    assert_eq!(reply.header("location"), Some("https://away.example.com/"));
    let reply = send(&scene, "GET", "/nginx-prefix/x", &[]).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(
        reply.header("x-echo-req-forwarded-prefix"),
        Some("/shop"),
        "{reply:?}"
    );
    assert!(
        reply.body.contains("host=internal.example.com"),
        "{reply:?}"
    );

    let reply = send(&scene, "GET", "/ht-auth", &[]).await;
    assert_eq!(reply.status, 401, "{reply:?}");
    assert_eq!(
        reply.header("www-authenticate"),
        Some("Basic realm=\"Protected Content\"")
    );
    let good = [("Authorization", ANN_S3CRET)];
    assert_eq!(send(&scene, "GET", "/ht-auth", &good).await.status, 200);

    assert_eq!(send(&scene, "GET", "/other", &[]).await.status, 200);
    let problems = scene.status().problems;
    assert!(problems.is_empty(), "{problems:?}");
}

/// HAProxy Ingress (jcmoraisjr) keys read as Tugboat's: `proxy-body-size` with its units
/// and `unlimited`, `limit-rps` (requests, with no burst beyond the rate) and
/// `limit-whitelist`, `server-alias`; `server-alias-regex` is not supported and named.
async fn haproxy_ingress_limits_body_size_and_aliases(haproxy: HaproxyBinary, source: Source) {
    const HI: &str = "haproxy-ingress.github.io/";
    let web = start_backends("web", 224, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    let hi = |name: &str, path: &str, annotations: &[(&str, &str)]| {
        let annotations: Vec<(String, &str)> = annotations
            .iter()
            .map(|(key, value)| (format!("{HI}{key}"), *value))
            .collect();
        let annotations: Vec<(&str, &str)> =
            annotations.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        to_json(&ingress(name, path, &annotations))
    };
    objects.extend([
        hi("small", "/small", &[("proxy-body-size", "1k")]),
        hi(
            "unlimited",
            "/unlimited",
            &[("proxy-body-size", "unlimited")],
        ),
        hi("rate", "/rate", &[("limit-rps", "2")]),
        hi(
            "exempt",
            "/exempt",
            &[("limit-rps", "1"), ("limit-whitelist", "127.0.0.0/8")],
        ),
        hi(
            "aliased",
            "/aliased",
            &[
                ("server-alias", "alias.example.com"),
                ("server-alias-regex", "^alias[0-9]+\\.example\\.com$"),
            ],
        ),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_status(HOST, "/aliased", 200).await;
    let post = |path: &'static str, size: usize| {
        let addr = scene.http_addr();
        async move {
            let body = vec![b'x'; size];
            request_with_body(addr, "POST", HOST, path, &[], Some(&body))
                .await
                .expect("request through haproxy")
        }
    };
    assert_eq!(post("/small", 1024).await.status, 200);
    assert_eq!(post("/small", 1025).await.status, 413);
    assert_eq!(post("/unlimited", 100_000).await.status, 200);

    // Two per second and no burst beyond the rate: at most 4 of ten at once.
    let mut statuses = Vec::new();
    for _ in 0..10 {
        statuses.push(send(&scene, "GET", "/rate", &[]).await.status);
    }
    let passed = statuses.iter().filter(|s| **s == 200).count();
    assert!((4..=5).contains(&passed), "{statuses:?}");
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 503),
        "{statuses:?}"
    );
    for _ in 0..10 {
        assert_eq!(send(&scene, "GET", "/exempt", &[]).await.status, 200);
    }

    let reply = request(
        scene.http_addr(),
        "GET",
        "alias.example.com",
        "/aliased/x",
        &[],
    )
    .await
    .expect("request through haproxy");
    assert_eq!(reply.status, 200, "{reply:?}");
    let problems = scene.status().problems;
    let [problem] = problems.as_slice() else {
        panic!("one problem: {problems:?}");
    };
    assert_eq!(&*problem.object.name, "aliased");
    assert!(problem.field.ends_with("server-alias-regex"), "{problem}");
}

/// ingress-nginx answers `permanent-redirect`, `temporal-redirect` and `app-root` (its
/// `return`) before its HTTPS redirect and before authentication: on a TLS host asked
/// over plain HTTP, the redirect goes to its URL straight away (`app-root`: on the
/// request's scheme); the host's other routes go to HTTPS.
async fn redirects_answer_before_the_https_redirect(haproxy: HaproxyBinary, source: Source) {
    const SECURE: &str = "secure.example.com";
    let web = start_backends("web", 226, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    let (cert, key, _) = tugboat_testkit::tls::certificate(&[SECURE], false);
    objects.push(to_json(&mk_tls_secret("secure-tls", &cert, &key)));
    objects.push(to_json(&mk_secret(
        "users",
        "Opaque",
        &[("ann", S3CRET_HASH.as_bytes())],
    )));
    let secure = |name: &str, path: &str, annotations: &[(&str, &str)]| {
        to_json(&with_tls(
            mk_annotated_ingress(name, SECURE, path, "web", annotations),
            &[(&[SECURE], "secure-tls")],
        ))
    };
    objects.extend([
        secure(
            "moved",
            "/moved",
            &[
                (
                    "nginx.ingress.kubernetes.io/permanent-redirect",
                    "https://new.example.com/landing",
                ),
                ("nginx.ingress.kubernetes.io/auth-type", "basic"),
                ("nginx.ingress.kubernetes.io/auth-secret", "users"),
            ],
        ),
        secure(
            "away",
            "/away",
            &[
                (
                    "nginx.ingress.kubernetes.io/temporal-redirect",
                    "https://away.example.com/",
                ),
                ("nginx.ingress.kubernetes.io/force-ssl-redirect", "true"),
            ],
        ),
        secure(
            "site",
            "/",
            &[("nginx.ingress.kubernetes.io/app-root", "/app1")],
        ),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_status(SECURE, "/moved", 301).await;
    let get = |path: &'static str| {
        let addr = scene.http_addr();
        async move {
            request(addr, "GET", SECURE, path, &[])
                .await
                .expect("request through haproxy")
        }
    };
    let reply = get("/moved/page").await;
    assert_eq!(reply.status, 301, "{reply:?}");
    assert_eq!(
        reply.header("location"),
        Some("https://new.example.com/landing")
    );
    let reply = get("/away").await;
    assert_eq!(reply.status, 302, "{reply:?}");
    assert_eq!(reply.header("location"), Some("https://away.example.com/"));
    let reply = get("/").await;
    assert_eq!(reply.status, 302, "{reply:?}");
    assert_eq!(
        reply.header("location"),
        Some("http://secure.example.com/app1")
    );
    let reply = get("/other").await;
    assert_eq!(reply.status, 308, "{reply:?}");
    assert_eq!(
        reply.header("location"),
        Some("https://secure.example.com/other")
    );
    assert!(
        scene.status().problems.is_empty(),
        "{:?}",
        scene.status().problems
    );
}

/// Ingresses as an ingress-nginx user has them, and the basic-auth Secret one names.
fn nginx_objects() -> Vec<serde_json::Value> {
    let mut shop = with_annotations(
        mk_ingress_with_rules("shop", vec![mk_rule(Some(HOST), &[prefix("/", "web")])]),
        &[
            (
                "nginx.ingress.kubernetes.io/whitelist-source-range",
                "10.0.0.0/8",
            ),
            ("nginx.ingress.kubernetes.io/proxy-read-timeout", "120"),
            ("nginx.ingress.kubernetes.io/auth-type", "basic"),
            ("nginx.ingress.kubernetes.io/auth-secret", "users"),
            ("nginx.ingress.kubernetes.io/rewrite-target", "/$1"),
            (
                "nginx.ingress.kubernetes.io/configuration-snippet",
                "more_set_headers \"X-Team: shop\";",
            ),
        ],
    );
    if let Some(spec) = shop.spec.as_mut() {
        spec.ingress_class_name = Some("nginx".into());
    }
    vec![
        to_json(&shop),
        to_json(&mk_basic_auth_secret(
            "users",
            &[("bob", "$apr1$abc$V7uD6Y3Ey1b.T8QFySWI51")],
        )),
        to_json(&with_annotations(
            mk_ingress_with_rules("blog", vec![mk_rule(Some(HOST), &[prefix("/blog", "web")])]),
            &[("nginx.ingress.kubernetes.io/ssl-redirect", "false")],
        )),
    ]
}

/// What `tugboat migrate` reports for [`nginx_objects`], from either source.
fn check_nginx_report(report: &Report) {
    let shop = report
        .ingresses
        .iter()
        .find(|i| i.name == "shop")
        .expect("the shop Ingress");
    let status = |annotation: &str| {
        shop.keys
            .iter()
            .find(|k| k.annotation == annotation)
            .map(|k| k.status)
            .unwrap_or_else(|| panic!("{annotation}: {shop:?}"))
    };
    assert_eq!(
        status("nginx.ingress.kubernetes.io/whitelist-source-range"),
        Status::Supported
    );
    assert_eq!(
        status("nginx.ingress.kubernetes.io/proxy-read-timeout"),
        Status::SupportedWithDifference
    );
    assert_eq!(
        status("nginx.ingress.kubernetes.io/rewrite-target"),
        Status::SupportedWithDifference
    );
    assert_eq!(
        status("nginx.ingress.kubernetes.io/configuration-snippet"),
        Status::NotSupported
    );
    assert!(
        shop.class_change
            .as_deref()
            .is_some_and(|c| c == "set spec.ingressClassName: tugboat (now: nginx)"),
        "{shop:?}"
    );
    assert_eq!(report.secrets.len(), 1, "{report:?}");
    assert!(report.secrets[0].problem.contains("$apr1$"));
    assert!(!report.secrets[0].problem.contains("V7uD6Y3E"));
    assert!(!report.all_supported());
}

fn migrate_args(extra: &[&str]) -> MigrateArgs {
    let cli = Cli::try_parse_from(["tugboat", "migrate"].iter().chain(extra)).expect("arguments");
    let Command::Migrate(args) = cli.command else {
        panic!("expected migrate");
    };
    args
}

#[test]
fn migrate_reports_a_folder_of_ingress_nginx_ingresses() {
    let dir = tempfile::tempdir().expect("temporary folder");
    std::fs::write(dir.path().join("shop.yaml"), to_yaml(&nginx_objects())).expect("write");
    let folder = dir.path().to_str().expect("UTF-8 path");
    let report = tugboat::migrate::report(&migrate_args(&["--manifests", folder])).expect("report");
    check_nginx_report(&report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_reports_the_ingresses_of_a_cluster() {
    let server = FakeApiServer::start().await;
    for object in nginx_objects() {
        server.put(object);
    }
    let dir = tempfile::tempdir().expect("temporary folder");
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig);
    let path = kubeconfig.to_str().expect("UTF-8 path").to_string();
    let args = migrate_args(&["--kubeconfig", &path, "--output", "json"]);
    let report = tokio::task::spawn_blocking(move || tugboat::migrate::report(&args))
        .await
        .expect("join")
        .expect("report");
    check_nginx_report(&report);
    assert_eq!(report.ingresses.len(), 2);
}
