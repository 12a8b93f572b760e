//! Annotations and ConfigMap keys, end to end on real haproxy, from the manifests
//! folder and from the API: what a client sees for each feature, that a feature set on
//! one path does not leak to the other paths of its host nor to another Ingress on the
//! same host, the precedence Service > Ingress > ConfigMap, and that a route joining an
//! existing feature set needs no reload. The objects that keys name (TLS and basic-auth
//! Secrets, access-list ConfigMaps, the controller's ConfigMap) reach the controller
//! from either source.

use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::networking::v1::Ingress;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tugboat_model::ObjectKey;
use tugboat_testkit::http::request;
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{
    ANN_S3CRET, S3CRET_HASH, exact, in_namespace, mk_basic_auth_secret, mk_config_map,
    mk_endpoint_slice, mk_ingress_with_rules, mk_rule, mk_secret, mk_service, mk_service_of,
    mk_tls_secret, prefix, to_json, with_keys, with_tls,
};
use tugboat_testkit::tls::{certificate, exchange};
use tugboat_testkit::{EchoServer, HaproxyBinary, Reply, Scene, Source, eventually, scene_tests};

scene_tests!(
    tls_redirect_and_hsts,
    redirects_rewrites_and_headers,
    cors_headers_and_preflight,
    access_lists,
    basic_authentication,
    rate_limits,
    backend_proxy_protocol_and_balance,
    precedence_and_invalid_values,
    a_route_joining_an_existing_feature_set_needs_no_reload,
    syslog_log_format_and_strict_sni,
    acme_challenges_stay_on_plain_http,
);

/// An Ingress `name` with the keys `tugboat.dev/KEY: value`, routing `host` + each
/// `(path, service)` as a Prefix.
fn ingress(name: &str, keys: &[(&str, &str)], host: &str, paths: &[(&str, &str)]) -> Ingress {
    let paths: Vec<_> = paths
        .iter()
        .map(|(path, service)| prefix(path, service))
        .collect();
    with_keys(
        mk_ingress_with_rules(name, vec![mk_rule(Some(host), &paths)]),
        keys,
    )
}

/// A Service with keys, one port 80 named http, and its endpoints `addrs`.
fn annotated_service(name: &str, keys: &[(&str, &str)], addrs: &[SocketAddr]) -> [Value; 2] {
    [
        to_json(&with_keys(mk_service(name, "http", 80), keys)),
        to_json(&mk_endpoint_slice(name, "http", addrs)),
    ]
}

/// One echo backend for Service `name` on loopback network `net`, and its objects.
async fn backends(name: &str, net: u8) -> (Vec<EchoServer>, Vec<Value>) {
    let servers = start_backends(name, net, 1).await;
    let objects = mk_service_of(name, &servers).to_vec();
    (servers, objects)
}

async fn send(
    scene: &Scene,
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Reply {
    request(scene.http_addr(), method, host, path, headers)
        .await
        .expect("request through haproxy")
}

const HOST: &str = "shop.example.com";

async fn tls_redirect_and_hsts(haproxy: HaproxyBinary, source: Source) {
    let (_web, mut objects) = backends("web", 120).await;
    let (cert, key, _) = certificate(&[HOST], false);
    objects.extend([
        to_json(&mk_tls_secret("shop-tls", &cert, &key)),
        to_json(&ingress(
            "secure",
            &[
                ("ssl-redirect", "true"),
                ("ssl-redirect-code", "301"),
                ("hsts", "true"),
                ("hsts-max-age", "100"),
                ("hsts-include-subdomains", "true"),
            ],
            HOST,
            &[("/secure", "web")],
        )),
        to_json(&ingress(
            "port",
            &[("ssl-redirect", "true"), ("ssl-redirect-port", "9443")],
            HOST,
            &[("/port", "web")],
        )),
        to_json(&ingress("plain", &[], HOST, &[("/plain", "web")])),
        to_json(&with_tls(
            ingress(
                "tls-off",
                &[("ssl-redirect", "false")],
                "tls.example.com",
                &[("/", "web")],
            ),
            &[(&["tls.example.com"], "shop-tls")],
        )),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_status(HOST, "/secure/x", 301).await;
    let reply = scene.get(HOST, "/secure/x").await.expect("request");
    assert_eq!(
        reply.header("location"),
        Some("https://shop.example.com/secure/x")
    );
    let reply = scene.get(HOST, "/port/y?q=1").await.expect("request");
    assert_eq!(reply.status, 308, "{reply:?}");
    assert_eq!(
        reply.header("location"),
        Some("https://shop.example.com:9443/port/y?q=1")
    );
    // Neighbours on the same host: no redirect.
    assert_eq!(
        scene.get(HOST, "/plain").await.expect("request").status,
        200
    );
    // A TLS host whose Ingress turns the redirect off.
    let reply = scene.get("tls.example.com", "/").await.expect("request");
    assert_eq!(reply.status, 200, "{reply:?}");

    let https = scene.https_addr();
    let secure = exchange(https, HOST, "/secure/x", &[b"http/1.1"])
        .await
        .expect("TLS")
        .reply
        .expect("HTTP/1.1 reply");
    assert_eq!(secure.status, 200, "{secure:?}");
    assert_eq!(
        secure.header("strict-transport-security"),
        Some("max-age=100; includeSubDomains")
    );
    let plain = exchange(https, HOST, "/plain", &[b"http/1.1"])
        .await
        .expect("TLS")
        .reply
        .expect("HTTP/1.1 reply");
    assert_eq!(plain.status, 200);
    assert_eq!(plain.header("strict-transport-security"), None);
}

async fn redirects_rewrites_and_headers(haproxy: HaproxyBinary, source: Source) {
    let (_web, mut objects) = backends("web", 121).await;
    objects.extend([
        to_json(&ingress(
            "moved",
            &[
                ("request-redirect", "https://new.example.com/landing"),
                ("request-redirect-code", "301"),
            ],
            HOST,
            &[("/old", "web")],
        )),
        to_json(&ingress(
            "api",
            &[
                ("path-rewrite", "^/api/(.*) /\\1"),
                ("set-host", "internal.example.com"),
                ("request-set-header", "X-Team shop\nX-Env test"),
                ("response-set-header", "X-Frame-Options DENY"),
            ],
            HOST,
            &[("/api", "web")],
        )),
        to_json(&ingress("site", &[], HOST, &[("/", "web")])),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_status(HOST, "/old", 301).await;
    let reply = scene.get(HOST, "/old/page").await.expect("request");
    assert_eq!(
        reply.header("location"),
        Some("https://new.example.com/landing")
    );
    let reply = scene.get(HOST, "/api/users").await.expect("request");
    assert_eq!(reply.status, 200, "{reply:?}");
    assert!(reply.body.contains("path=/users"), "{reply:?}");
    assert!(
        reply.body.contains("host=internal.example.com"),
        "{reply:?}"
    );
    assert_eq!(reply.header("x-echo-req-team"), Some("shop"), "{reply:?}");
    assert_eq!(reply.header("x-echo-req-env"), Some("test"), "{reply:?}");
    assert_eq!(reply.header("x-frame-options"), Some("DENY"));
    // The neighbour on the same host is untouched.
    let reply = scene.get(HOST, "/apix/users").await.expect("request");
    assert!(reply.body.contains("path=/apix/users"), "{reply:?}");
    assert!(reply.body.contains("host=shop.example.com"), "{reply:?}");
    assert_eq!(reply.header("x-echo-req-team"), None);
    assert_eq!(reply.header("x-frame-options"), None);
}

async fn cors_headers_and_preflight(haproxy: HaproxyBinary, source: Source) {
    let (_web, mut objects) = backends("web", 122).await;
    objects.extend([
        to_json(&ingress(
            "any",
            &[("cors-enable", "true"), ("cors-allow-methods", "GET, POST")],
            HOST,
            &[("/any", "web")],
        )),
        to_json(&ingress(
            "listed",
            &[
                ("cors-enable", "true"),
                ("cors-allow-origin", "https://app.example.com"),
                ("cors-allow-credentials", "true"),
                ("cors-max-age", "600"),
            ],
            HOST,
            &[("/listed", "web")],
        )),
        to_json(&ingress("site", &[], HOST, &[("/", "web")])),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_service(HOST, "/any", "web").await;
    let preflight = [
        ("Origin", "https://app.example.com"),
        ("Access-Control-Request-Method", "POST"),
    ];
    let reply = send(&scene, "OPTIONS", HOST, "/any", &preflight).await;
    assert_eq!(reply.status, 204, "{reply:?}");
    assert_eq!(reply.header("access-control-allow-origin"), Some("*"));
    assert_eq!(
        reply.header("access-control-allow-methods"),
        Some("GET, POST")
    );
    assert_eq!(reply.header("access-control-max-age"), Some("86400"));
    let reply = send(&scene, "GET", HOST, "/any", &preflight[..1]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("access-control-allow-origin"), Some("*"));

    let reply = send(&scene, "OPTIONS", HOST, "/listed", &preflight).await;
    assert_eq!(reply.status, 204, "{reply:?}");
    assert_eq!(
        reply.header("access-control-allow-origin"),
        Some("https://app.example.com")
    );
    assert_eq!(
        reply.header("access-control-allow-credentials"),
        Some("true")
    );
    assert_eq!(reply.header("access-control-max-age"), Some("600"));
    // An origin not in the list gets no CORS headers.
    let other = [("Origin", "https://evil.example.org")];
    let reply = send(&scene, "GET", HOST, "/listed", &other).await;
    assert_eq!(reply.header("access-control-allow-origin"), None);

    // The neighbour: no CORS, and OPTIONS goes to the backend.
    let reply = send(&scene, "OPTIONS", HOST, "/other", &preflight).await;
    assert_eq!(reply.service(), Some("web"), "{reply:?}");
    assert_eq!(reply.header("access-control-allow-origin"), None);
}

async fn access_lists(haproxy: HaproxyBinary, source: Source) {
    let (_web, mut objects) = backends("web", 123).await;
    objects.extend([
        to_json(&ingress(
            "denied",
            &[("deny-list", "127.0.0.0/8")],
            HOST,
            &[("/denied", "web")],
        )),
        to_json(&ingress(
            "elsewhere",
            &[("allow-list", "10.0.0.0/8, 192.168.0.1")],
            HOST,
            &[("/elsewhere", "web")],
        )),
        to_json(&ingress(
            "local",
            &[("whitelist", "127.0.0.1")],
            HOST,
            &[("/local", "web")],
        )),
        to_json(&ingress(
            "header",
            &[
                ("deny-list", "192.0.2.0/24"),
                ("src-ip-header", "X-Real-IP"),
            ],
            HOST,
            &[("/header", "web")],
        )),
        // Lists in a ConfigMap, one network per line.
        to_json(&mk_config_map(
            "networks",
            &[
                ("loopback", "# this host\n127.0.0.0/8\n"),
                ("others", "10.0.0.0/8\n192.0.2.0/24\n"),
            ],
        )),
        to_json(&ingress(
            "listed-deny",
            &[("deny-list", "configmap:networks/loopback")],
            HOST,
            &[("/listed-deny", "web")],
        )),
        to_json(&ingress(
            "listed-allow",
            &[("allow-list", "configmap:networks/loopback")],
            HOST,
            &[("/listed-allow", "web")],
        )),
        to_json(&ingress(
            "listed-others",
            &[("deny-list", "configmap:networks/others")],
            HOST,
            &[("/listed-others", "web")],
        )),
        // A list in a ConfigMap that does not exist: every client is refused.
        to_json(&ingress(
            "listed-missing",
            &[("allow-list", "configmap:nowhere/list")],
            HOST,
            &[("/listed-missing", "web")],
        )),
        to_json(&ingress("site", &[], HOST, &[("/", "web")])),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_status(HOST, "/denied", 403).await;
    let status = |path: &'static str| {
        let scene = &scene;
        async move { scene.get(HOST, path).await.expect("req").status }
    };
    assert_eq!(status("/elsewhere").await, 403);
    assert_eq!(status("/local").await, 200);
    assert_eq!(status("/site").await, 200);
    let reply = send(
        &scene,
        "GET",
        HOST,
        "/header",
        &[("X-Real-IP", "192.0.2.7")],
    )
    .await;
    assert_eq!(reply.status, 403, "{reply:?}");
    let reply = send(
        &scene,
        "GET",
        HOST,
        "/header",
        &[("X-Real-IP", "198.51.100.1")],
    )
    .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(status("/listed-deny").await, 403);
    assert_eq!(status("/listed-allow").await, 200);
    assert_eq!(status("/listed-others").await, 200);
    assert_eq!(status("/listed-missing").await, 403);
    // From the API, the missing ConfigMap is a Warning Event on its Ingress; the
    // ConfigMap that exists was there from the first configuration on: no Event.
    let problems = scene.status().problems;
    let missing = problems
        .iter()
        .find(|p| &*p.object.name == "listed-missing")
        .expect("a problem for the missing ConfigMap");
    if let Some(server) = scene.api() {
        scene
            .wait_for_warning("listed-missing", &missing.field)
            .await;
        let events = server.list("Event");
        let about_listed: Vec<_> = events
            .iter()
            .filter(|e| {
                let name = e["regarding"]["name"]
                    .as_str()
                    .or(e["involvedObject"]["name"].as_str())
                    .unwrap_or_default();
                name.starts_with("listed-") && name != "listed-missing"
            })
            .collect();
        assert!(about_listed.is_empty(), "{about_listed:?}");
    }
}

async fn basic_authentication(haproxy: HaproxyBinary, source: Source) {
    let (_web, mut objects) = backends("web", 124).await;
    objects.extend([
        // One key per user, holding the hash.
        to_json(&mk_secret(
            "users",
            "Opaque",
            &[("ann", S3CRET_HASH.as_bytes())],
        )),
        // An htpasswd file under `auth`.
        to_json(&mk_basic_auth_secret(
            "apache",
            &[("bob", "$apr1$abc$V7uD6Y3Ey1b.T8QFySWI51")],
        )),
        to_json(&ingress(
            "private",
            &[
                ("auth-type", "basic-auth"),
                ("auth-secret", "users"),
                ("auth-realm", "Shop staff"),
            ],
            HOST,
            &[("/private", "web")],
        )),
        to_json(&ingress(
            "apache",
            &[("auth-type", "basic-auth"), ("auth-secret", "apache")],
            HOST,
            &[("/apache", "web")],
        )),
        to_json(&ingress("site", &[], HOST, &[("/", "web")])),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_status(HOST, "/private", 401).await;
    let reply = scene.get(HOST, "/private").await.expect("request");
    assert_eq!(
        reply.header("www-authenticate"),
        Some("Basic realm=\"Shop staff\"")
    );
    // ann:s3cret and ann:wrong.
    let good = [("Authorization", ANN_S3CRET)];
    let bad = [("Authorization", "Basic YW5uOndyb25n")];
    let reply = send(&scene, "GET", HOST, "/private", &good).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(
        send(&scene, "GET", HOST, "/private", &bad).await.status,
        401
    );
    assert_eq!(scene.get(HOST, "/public").await.expect("req").status, 200);
    // $apr1$ cannot be verified: refused with a problem, and the route fails closed.
    assert_eq!(scene.get(HOST, "/apache").await.expect("req").status, 401);
    let problems = scene.status().problems;
    let problem = problems
        .iter()
        .find(|p| &*p.object.name == "apache")
        .expect("a problem for the $apr1$ Secret");
    assert!(problem.message.contains("$apr1$"), "{problem}");
    assert!(
        !problem.message.contains("V7uD6Y3E"),
        "hash leaked: {problem}"
    );
    // From the API, the problem is also a Warning Event on the Ingress.
    if let Some(event) = scene.wait_for_warning("apache", &problem.field).await {
        let text = event.to_string();
        assert!(text.contains("$apr1$"), "{event}");
        assert!(!text.contains("V7uD6Y3E"), "hash leaked: {event}");
    }
}

async fn rate_limits(haproxy: HaproxyBinary, source: Source) {
    let (_web, mut objects) = backends("web", 125).await;
    objects.extend([
        to_json(&ingress(
            "limited",
            &[("rate-limit-requests", "3"), ("rate-limit-period", "10s")],
            HOST,
            &[("/limited", "web")],
        )),
        to_json(&ingress("site", &[], HOST, &[("/", "web")])),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_service(HOST, "/site", "web").await;
    // The first request that reaches the limited route starts the count.
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(scene.get(HOST, "/limited").await.expect("request").status);
    }
    assert_eq!(statuses, vec![200, 200, 200, 429, 429]);
    for _ in 0..5 {
        assert_eq!(scene.get(HOST, "/site").await.expect("request").status, 200);
    }
}

/// A backend that reads the PROXY protocol line and answers it as the body.
async fn proxy_protocol_backend() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.126:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let task = tokio::spawn(async move {
        for _ in 0..100 {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                let mut reader = BufReader::new(stream);
                let mut first = String::new();
                let _ = reader.read_line(&mut first).await;
                // Skip the request head.
                let mut line = String::new();
                for _ in 0..100 {
                    line.clear();
                    match reader.read_line(&mut line).await {
                        Ok(0) | Err(_) => break,
                        Ok(_) if line == "\r\n" => break,
                        Ok(_) => {}
                    }
                }
                let body = first.trim_end();
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = reader.get_mut().write_all(answer.as_bytes()).await;
            });
        }
    });
    (addr, task)
}

async fn backend_proxy_protocol_and_balance(haproxy: HaproxyBinary, source: Source) {
    let (addr, _task) = proxy_protocol_backend().await;
    // Nine backends on one port (an EndpointSlice has one port for all): one now, all
    // nine later.
    let echo = start_backends("hashed", 127, 9).await;
    let all: Vec<SocketAddr> = echo.iter().map(|s| s.addr).collect();
    let objects = [
        &annotated_service(
            "proxied",
            &[("send-proxy-protocol", "v1"), ("timeout-server", "5s")],
            &[addr],
        )[..],
        &annotated_service("hashed", &[("load-balance", "source")], &all[..1]),
        &[to_json(&ingress(
            "site",
            &[("timeout-connect", "2s")],
            HOST,
            &[("/proxied", "proxied"), ("/hashed", "hashed")],
        ))],
    ]
    .concat();
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_status(HOST, "/proxied", 200).await;
    let reply = scene.get(HOST, "/proxied").await.expect("request");
    assert!(reply.body.starts_with("PROXY TCP4 127.0.0.1 "), "{reply:?}");
    scene.wait_for_service(HOST, "/hashed", "hashed").await;
    let before = scene.show_proc().await;

    // More endpoints than the slots with `balance source`: a reload, not `add server`.
    scene.apply(&mk_endpoint_slice("hashed", "http", &all));
    eventually("9 servers of hashed", Duration::from_secs(10), || {
        let config_dir = scene.config_dir.clone();
        async move {
            let text = tugboat_testkit::haproxy::read_config(&config_dir)?;
            (text.matches("server s").count() >= 9 && text.contains("127.0.127.9")).then_some(())
        }
    })
    .await;
    // The file is written before haproxy is told to reload; the count follows.
    eventually(
        "new servers by a reload",
        Duration::from_secs(10),
        || async { (scene.reloads().await > before.reloads).then_some(()) },
    )
    .await;
    scene.wait_for_service(HOST, "/hashed", "hashed").await;
}

async fn precedence_and_invalid_values(haproxy: HaproxyBinary, source: Source) {
    let (_web, mut objects) = backends("web", 129).await;
    let svc = start_backends("svc", 130, 1).await;
    let svc_addrs: Vec<SocketAddr> = svc.iter().map(|s| s.addr).collect();
    let config_map = in_namespace(
        mk_config_map(
            "tugboat",
            &[
                ("response-set-header", "X-Scope configmap"),
                ("timeout-client", "30s"),
                ("timeout-http-keep-alive", "5s"),
                ("log-format", "%ci:%cp %ST %HU"),
                ("no-such-key", "x"),
            ],
        ),
        "ops",
    );
    objects.push(to_json(&config_map));
    objects.extend(annotated_service(
        "svc",
        &[("response-set-header", "X-Scope service")],
        &svc_addrs,
    ));
    objects.extend([
        to_json(&ingress(
            "annotated",
            &[("response-set-header", "X-Scope ingress")],
            HOST,
            &[("/ingress", "web"), ("/service", "svc")],
        )),
        to_json(&ingress(
            "invalid",
            &[("response-set-header", "X-Scope \"quoted\"\nuse_backend x")],
            HOST,
            &[("/invalid", "web")],
        )),
        to_json(&ingress("site", &[], HOST, &[("/", "web")])),
    ]);
    let scene = Scene::start_with(&haproxy, source, &objects, |config| {
        config.model.config_map = Some(ObjectKey::new("ops", "tugboat"));
    })
    .await;
    scene.wait_for_service(HOST, "/ingress", "web").await;
    let scope = |reply: Reply| reply.header("x-scope").map(str::to_string);
    let scene = &scene;
    let get = |path: &'static str| async move { scene.get(HOST, path).await.expect("request") };
    assert_eq!(scope(get("/ingress").await).as_deref(), Some("ingress"));
    assert_eq!(scope(get("/service").await).as_deref(), Some("service"));
    assert_eq!(scope(get("/other").await).as_deref(), Some("configmap"));
    // The invalid value is ignored on that Ingress only: the ConfigMap's applies.
    assert_eq!(scope(get("/invalid").await).as_deref(), Some("configmap"));
    let problems = scene.status().problems;
    let invalid = problems
        .iter()
        .find(|p| &*p.object.name == "invalid")
        .expect("a problem for the invalid value");
    assert!(
        invalid.field.contains("tugboat.dev/response-set-header"),
        "{invalid}"
    );
    assert!(invalid.message.contains("expected"), "{invalid}");
    assert!(
        problems
            .iter()
            .any(|p| p.object.kind == "ConfigMap" && p.field == "data.no-such-key"),
        "{problems:?}"
    );
    // From the API, both problems are also Warning Events on their objects.
    scene.wait_for_warning("invalid", &invalid.field).await;
    scene.wait_for_warning("tugboat", "data.no-such-key").await;
    let config = std::fs::read_to_string(scene.config_dir.join("haproxy.cfg")).expect("config");
    assert!(config.contains("    timeout client 30s\n"), "{config}");
    assert!(config.contains("use_backend %[var(txn.backend)]"));
    assert!(!config.contains("use_backend x"), "{config}");
}

async fn a_route_joining_an_existing_feature_set_needs_no_reload(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let (_web, mut objects) = backends("web", 131).await;
    let headers = [("response-set-header", "X-Feature on")];
    objects.extend([
        to_json(&ingress("first", &headers, HOST, &[("/first", "web")])),
        to_json(&ingress("site", &[], HOST, &[("/", "web")])),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_service(HOST, "/first", "web").await;
    let before = scene.show_proc().await;
    scene.apply(&ingress("second", &headers, HOST, &[("/second", "web")]));
    eventually(
        "the second route's feature",
        Duration::from_secs(10),
        || async {
            let reply = scene.get(HOST, "/second").await.ok()?;
            (reply.header("x-feature") == Some("on")).then_some(())
        },
    )
    .await;
    let after = scene.show_proc().await;
    assert_eq!(
        after.reloads, before.reloads,
        "the map changed, not the config"
    );
    assert_eq!(
        scene
            .get(HOST, "/third")
            .await
            .expect("req")
            .header("x-feature"),
        None
    );
}

async fn syslog_log_format_and_strict_sni(haproxy: HaproxyBinary, source: Source) {
    let (_web, mut objects) = backends("web", 132).await;
    let syslog = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("bind syslog");
    let syslog_addr = syslog.local_addr().expect("address").to_string();
    let (cert, key, der) = certificate(&[HOST], false);
    let config_map = in_namespace(
        mk_config_map(
            "tugboat",
            &[
                ("syslog-server", &syslog_addr),
                ("log-format", "tugboat-log %ST %HU"),
                ("client-strict-sni", "true"),
                ("ssl-redirect", "false"),
            ],
        ),
        "ops",
    );
    objects.extend([
        to_json(&config_map),
        to_json(&mk_tls_secret("shop-tls", &cert, &key)),
        to_json(&with_tls(
            ingress("site", &[], HOST, &[("/", "web")]),
            &[(&[HOST], "shop-tls")],
        )),
    ]);
    let scene = Scene::start_with(&haproxy, source, &objects, |config| {
        config.model.config_map = Some(ObjectKey::new("ops", "tugboat"));
    })
    .await;
    // ssl-redirect false in the ConfigMap: the TLS host is served over plain HTTP.
    scene.wait_for_service(HOST, "/logged", "web").await;
    let mut buffer = vec![0u8; 2048];
    let mut line = String::new();
    for _attempt in 0..20 {
        let _ = scene.get(HOST, "/logged").await;
        let received =
            tokio::time::timeout(Duration::from_millis(500), syslog.recv(&mut buffer)).await;
        if let Ok(Ok(size)) = received {
            line = String::from_utf8_lossy(&buffer[..size]).to_string();
            if line.contains("tugboat-log") {
                break;
            }
        }
    }
    assert!(line.contains("tugboat-log 200 /logged"), "{line}");

    // Strict SNI: a known name gets its certificate, an unknown one no handshake.
    let https = scene.https_addr();
    let known = exchange(https, HOST, "/", &[b"http/1.1"])
        .await
        .expect("TLS");
    assert_eq!(known.certificate, der);
    assert!(
        exchange(https, "unknown.example.com", "/", &[b"http/1.1"])
            .await
            .is_err(),
        "an unknown SNI must be refused"
    );
}

/// cert-manager's HTTP-01 challenge behind the HTTPS redirects: the paths of
/// `no-tls-redirect-locations` (ACME's by default) stay on plain HTTP and are routed as
/// usual, on a TLS host (the default redirect, with the solver's `Exact` Ingress) and
/// under `ssl-redirect: "true"` (a route's own redirect); every other path is still
/// redirected, and a value in the controller's ConfigMap changes which paths stay.
async fn acme_challenges_stay_on_plain_http(haproxy: HaproxyBinary, source: Source) {
    const TOKEN: &str = "/.well-known/acme-challenge/TOKEN";
    const FORCED: &str = "forced.example.com";
    let (_web, mut objects) = backends("web", 133).await;
    let (_solver, solver) = backends("solver", 134).await;
    let (cert, key, _) = certificate(&[HOST], false);
    let config_map = |data: &[(&str, &str)]| in_namespace(mk_config_map("tugboat", data), "ops");
    objects.extend(solver);
    objects.extend([
        to_json(&config_map(&[])),
        to_json(&mk_tls_secret("shop-tls", &cert, &key)),
        to_json(&with_tls(
            ingress("site", &[], HOST, &[("/", "web")]),
            &[(&[HOST], "shop-tls")],
        )),
        // The Ingress cert-manager's HTTP-01 solver creates.
        to_json(&mk_ingress_with_rules(
            "cm-acme-http-solver",
            vec![mk_rule(Some(HOST), &[exact(TOKEN, "solver")])],
        )),
        to_json(&ingress(
            "forced",
            &[("ssl-redirect", "true")],
            FORCED,
            &[("/", "web")],
        )),
    ]);
    let scene = Scene::start_with(&haproxy, source, &objects, |config| {
        config.model.config_map = Some(ObjectKey::new("ops", "tugboat"));
    })
    .await;

    // By default: ACME's path reaches its backend on plain HTTP, the rest is redirected.
    scene.wait_for_service(HOST, TOKEN, "solver").await;
    scene.wait_for_service(FORCED, TOKEN, "web").await;
    scene.assert_https_redirect(HOST, "/other").await;
    scene.assert_https_redirect(FORCED, "/other").await;
    scene.assert_https_redirect(HOST, "/custom/x").await;

    // Another list in the ConfigMap: its paths stay, ACME's no longer does.
    scene.apply(&config_map(&[("no-tls-redirect-locations", "/custom")]));
    scene.wait_for_service(HOST, "/custom/x", "web").await;
    scene.wait_for_service(FORCED, "/custom/x", "web").await;
    scene.assert_https_redirect(HOST, TOKEN).await;
    scene.assert_https_redirect(FORCED, TOKEN).await;
    scene.assert_https_redirect(HOST, "/other").await;
}
