//! Annotations and ConfigMap keys, end to end on real haproxy: what a client sees for
//! each feature, that a feature set on one path does not leak to the other paths of its
//! host nor to another Ingress on the same host, the precedence Service > Ingress >
//! ConfigMap, and that a route joining an existing feature set needs no reload.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tugboat_model::ObjectKey;
use tugboat_testkit::http::request;
use tugboat_testkit::manifests::yaml_string;
use tugboat_testkit::manifests::{endpoint_slice, service, service_with_endpoints, start_backends};
use tugboat_testkit::objects::{ANN_S3CRET, S3CRET_HASH};
use tugboat_testkit::tls::{certificate, exchange, tls_secret};
use tugboat_testkit::{EchoServer, HaproxyBinary, Pod, Reply, eventually, haproxy_tests};

haproxy_tests!(
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
);

/// An Ingress `name` with annotations `tugboat.dev/<key>: <value>`, routing `host` +
/// each `(path, service)` as a Prefix.
fn ingress(
    name: &str,
    annotations: &[(&str, &str)],
    host: &str,
    paths: &[(&str, &str)],
    tls: Option<&str>,
) -> String {
    let mut out = format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  \
         namespace: default\n"
    );
    if !annotations.is_empty() {
        out.push_str("  annotations:\n");
        for (key, value) in annotations {
            out.push_str(&format!("    tugboat.dev/{key}: {}\n", yaml_string(value)));
        }
    }
    out.push_str("spec:\n");
    if let Some(secret) = tls {
        out.push_str(&format!(
            "  tls:\n  - hosts: [\"{host}\"]\n    secretName: {secret}\n"
        ));
    }
    out.push_str(&format!(
        "  rules:\n  - host: \"{host}\"\n    http:\n      paths:\n"
    ));
    for (path, service) in paths {
        out.push_str(&format!(
            "      - path: \"{path}\"\n        pathType: Prefix\n        backend:\n          \
             service: {{name: {service}, port: {{number: 80}}}}\n"
        ));
    }
    out
}

/// A Service with annotations, one port 80 named http, and its endpoints.
fn annotated_service(name: &str, annotations: &[(&str, &str)], addrs: &[SocketAddr]) -> String {
    let mut text = service(name, "http", 80);
    if !annotations.is_empty() {
        let mut block = String::from("  annotations:\n");
        for (key, value) in annotations {
            block.push_str(&format!("    tugboat.dev/{key}: {}\n", yaml_string(value)));
        }
        text = text.replacen(
            "  namespace: default\n",
            &format!("  namespace: default\n{block}"),
            1,
        );
    }
    format!("{text}---\n{}", endpoint_slice(name, "http", addrs))
}

fn refs(files: &[(String, String)]) -> Vec<(&str, &str)> {
    files
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect()
}

async fn backends(name: &str, net: u8) -> (Vec<EchoServer>, (String, String)) {
    let servers = start_backends(name, net, 1).await;
    let file = (
        format!("{name}.yaml"),
        service_with_endpoints(name, &servers),
    );
    (servers, file)
}

async fn send(pod: &Pod, method: &str, host: &str, path: &str, headers: &[(&str, &str)]) -> Reply {
    request(pod.haproxy.http_addr(), method, host, path, headers)
        .await
        .expect("request through haproxy")
}

const HOST: &str = "shop.example.com";

async fn tls_redirect_and_hsts(haproxy: HaproxyBinary) {
    let (_web, web) = backends("web", 120).await;
    let (cert, key, _) = certificate(&[HOST], false);
    let files = vec![
        web,
        ("tls.yaml".into(), tls_secret("shop-tls", &cert, &key)),
        (
            "secure.yaml".into(),
            ingress(
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
                None,
            ),
        ),
        (
            "port.yaml".into(),
            ingress(
                "port",
                &[("ssl-redirect", "true"), ("ssl-redirect-port", "9443")],
                HOST,
                &[("/port", "web")],
                None,
            ),
        ),
        (
            "plain.yaml".into(),
            ingress("plain", &[], HOST, &[("/plain", "web")], None),
        ),
        (
            "tls-off.yaml".into(),
            ingress(
                "tls-off",
                &[("ssl-redirect", "false")],
                "tls.example.com",
                &[("/", "web")],
                Some("shop-tls"),
            ),
        ),
    ];
    let pod = Pod::start(&haproxy, &refs(&files)).await;
    pod.wait_for_status(HOST, "/secure/x", 301).await;
    let reply = pod.get(HOST, "/secure/x").await.expect("request");
    assert_eq!(
        reply.header("location"),
        Some("https://shop.example.com/secure/x")
    );
    let reply = pod.get(HOST, "/port/y?q=1").await.expect("request");
    assert_eq!(reply.status, 308, "{reply:?}");
    assert_eq!(
        reply.header("location"),
        Some("https://shop.example.com:9443/port/y?q=1")
    );
    // Neighbours on the same host: no redirect.
    assert_eq!(pod.get(HOST, "/plain").await.expect("request").status, 200);
    // A TLS host whose Ingress turns the redirect off.
    let reply = pod.get("tls.example.com", "/").await.expect("request");
    assert_eq!(reply.status, 200, "{reply:?}");

    let https = pod.haproxy.https_addr();
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

async fn redirects_rewrites_and_headers(haproxy: HaproxyBinary) {
    let (_web, web) = backends("web", 121).await;
    let files = vec![
        web,
        (
            "moved.yaml".into(),
            ingress(
                "moved",
                &[
                    ("request-redirect", "https://new.example.com/landing"),
                    ("request-redirect-code", "301"),
                ],
                HOST,
                &[("/old", "web")],
                None,
            ),
        ),
        (
            "api.yaml".into(),
            ingress(
                "api",
                &[
                    ("path-rewrite", "^/api/(.*) /\\1"),
                    ("set-host", "internal.example.com"),
                    ("request-set-header", "X-Team shop\nX-Env test"),
                    ("response-set-header", "X-Frame-Options DENY"),
                ],
                HOST,
                &[("/api", "web")],
                None,
            ),
        ),
        (
            "site.yaml".into(),
            ingress("site", &[], HOST, &[("/", "web")], None),
        ),
    ];
    let pod = Pod::start(&haproxy, &refs(&files)).await;
    pod.wait_for_status(HOST, "/old", 301).await;
    let reply = pod.get(HOST, "/old/page").await.expect("request");
    assert_eq!(
        reply.header("location"),
        Some("https://new.example.com/landing")
    );
    let reply = pod.get(HOST, "/api/users").await.expect("request");
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
    let reply = pod.get(HOST, "/apix/users").await.expect("request");
    assert!(reply.body.contains("path=/apix/users"), "{reply:?}");
    assert!(reply.body.contains("host=shop.example.com"), "{reply:?}");
    assert_eq!(reply.header("x-echo-req-team"), None);
    assert_eq!(reply.header("x-frame-options"), None);
}

async fn cors_headers_and_preflight(haproxy: HaproxyBinary) {
    let (_web, web) = backends("web", 122).await;
    let files = vec![
        web,
        (
            "any.yaml".into(),
            ingress(
                "any",
                &[("cors-enable", "true"), ("cors-allow-methods", "GET, POST")],
                HOST,
                &[("/any", "web")],
                None,
            ),
        ),
        (
            "listed.yaml".into(),
            ingress(
                "listed",
                &[
                    ("cors-enable", "true"),
                    ("cors-allow-origin", "https://app.example.com"),
                    ("cors-allow-credentials", "true"),
                    ("cors-max-age", "600"),
                ],
                HOST,
                &[("/listed", "web")],
                None,
            ),
        ),
        (
            "site.yaml".into(),
            ingress("site", &[], HOST, &[("/", "web")], None),
        ),
    ];
    let pod = Pod::start(&haproxy, &refs(&files)).await;
    pod.wait_for_service(HOST, "/any", "web").await;
    let preflight = [
        ("Origin", "https://app.example.com"),
        ("Access-Control-Request-Method", "POST"),
    ];
    let reply = send(&pod, "OPTIONS", HOST, "/any", &preflight).await;
    assert_eq!(reply.status, 204, "{reply:?}");
    assert_eq!(reply.header("access-control-allow-origin"), Some("*"));
    assert_eq!(
        reply.header("access-control-allow-methods"),
        Some("GET, POST")
    );
    assert_eq!(reply.header("access-control-max-age"), Some("86400"));
    let reply = send(&pod, "GET", HOST, "/any", &preflight[..1]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("access-control-allow-origin"), Some("*"));

    let reply = send(&pod, "OPTIONS", HOST, "/listed", &preflight).await;
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
    let reply = send(&pod, "GET", HOST, "/listed", &other).await;
    assert_eq!(reply.header("access-control-allow-origin"), None);

    // The neighbour: no CORS, and OPTIONS goes to the backend.
    let reply = send(&pod, "OPTIONS", HOST, "/other", &preflight).await;
    assert_eq!(reply.service(), Some("web"), "{reply:?}");
    assert_eq!(reply.header("access-control-allow-origin"), None);
}

async fn access_lists(haproxy: HaproxyBinary) {
    let (_web, web) = backends("web", 123).await;
    let files = vec![
        web,
        (
            "denied.yaml".into(),
            ingress(
                "denied",
                &[("deny-list", "127.0.0.0/8")],
                HOST,
                &[("/denied", "web")],
                None,
            ),
        ),
        (
            "elsewhere.yaml".into(),
            ingress(
                "elsewhere",
                &[("allow-list", "10.0.0.0/8, 192.168.0.1")],
                HOST,
                &[("/elsewhere", "web")],
                None,
            ),
        ),
        (
            "local.yaml".into(),
            ingress(
                "local",
                &[("whitelist", "127.0.0.1")],
                HOST,
                &[("/local", "web")],
                None,
            ),
        ),
        (
            "header.yaml".into(),
            ingress(
                "header",
                &[
                    ("deny-list", "192.0.2.0/24"),
                    ("src-ip-header", "X-Real-IP"),
                ],
                HOST,
                &[("/header", "web")],
                None,
            ),
        ),
        (
            "site.yaml".into(),
            ingress("site", &[], HOST, &[("/", "web")], None),
        ),
    ];
    let pod = Pod::start(&haproxy, &refs(&files)).await;
    pod.wait_for_status(HOST, "/denied", 403).await;
    assert_eq!(pod.get(HOST, "/elsewhere").await.expect("req").status, 403);
    assert_eq!(pod.get(HOST, "/local").await.expect("req").status, 200);
    assert_eq!(pod.get(HOST, "/site").await.expect("req").status, 200);
    let reply = send(&pod, "GET", HOST, "/header", &[("X-Real-IP", "192.0.2.7")]).await;
    assert_eq!(reply.status, 403, "{reply:?}");
    let reply = send(
        &pod,
        "GET",
        HOST,
        "/header",
        &[("X-Real-IP", "198.51.100.1")],
    )
    .await;
    assert_eq!(reply.status, 200, "{reply:?}");
}

fn secret(name: &str, key: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: default\n\
         stringData:\n  {key}: '{value}'\n"
    )
}

async fn basic_authentication(haproxy: HaproxyBinary) {
    let (_web, web) = backends("web", 124).await;
    let files = vec![
        web,
        ("users.yaml".into(), secret("users", "ann", S3CRET_HASH)),
        (
            "htpasswd.yaml".into(),
            secret("apache", "auth", "bob:$apr1$abc$V7uD6Y3Ey1b.T8QFySWI51"),
        ),
        (
            "private.yaml".into(),
            ingress(
                "private",
                &[
                    ("auth-type", "basic-auth"),
                    ("auth-secret", "users"),
                    ("auth-realm", "Shop staff"),
                ],
                HOST,
                &[("/private", "web")],
                None,
            ),
        ),
        (
            "apache.yaml".into(),
            ingress(
                "apache",
                &[("auth-type", "basic-auth"), ("auth-secret", "apache")],
                HOST,
                &[("/apache", "web")],
                None,
            ),
        ),
        (
            "site.yaml".into(),
            ingress("site", &[], HOST, &[("/", "web")], None),
        ),
    ];
    let pod = Pod::start(&haproxy, &refs(&files)).await;
    pod.wait_for_status(HOST, "/private", 401).await;
    let reply = pod.get(HOST, "/private").await.expect("request");
    assert_eq!(
        reply.header("www-authenticate"),
        Some("Basic realm=\"Shop staff\"")
    );
    // ann:s3cret and ann:wrong.
    let good = [("Authorization", ANN_S3CRET)];
    let bad = [("Authorization", "Basic YW5uOndyb25n")];
    let reply = send(&pod, "GET", HOST, "/private", &good).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(send(&pod, "GET", HOST, "/private", &bad).await.status, 401);
    assert_eq!(pod.get(HOST, "/public").await.expect("req").status, 200);
    // $apr1$ cannot be verified: refused with a problem, and the route fails closed.
    assert_eq!(pod.get(HOST, "/apache").await.expect("req").status, 401);
    let problems = pod.status.borrow().problems.clone();
    let problem = problems
        .iter()
        .find(|p| p.object.name == "apache")
        .expect("a problem for the $apr1$ Secret");
    assert!(problem.message.contains("$apr1$"), "{problem}");
    assert!(
        !problem.message.contains("V7uD6Y3E"),
        "hash leaked: {problem}"
    );
}

async fn rate_limits(haproxy: HaproxyBinary) {
    let (_web, web) = backends("web", 125).await;
    let files = vec![
        web,
        (
            "limited.yaml".into(),
            ingress(
                "limited",
                &[("rate-limit-requests", "3"), ("rate-limit-period", "10s")],
                HOST,
                &[("/limited", "web")],
                None,
            ),
        ),
        (
            "site.yaml".into(),
            ingress("site", &[], HOST, &[("/", "web")], None),
        ),
    ];
    let pod = Pod::start(&haproxy, &refs(&files)).await;
    pod.wait_for_service(HOST, "/site", "web").await;
    // The first request that reaches the limited route starts the count.
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(pod.get(HOST, "/limited").await.expect("request").status);
    }
    assert_eq!(statuses, vec![200, 200, 200, 429, 429]);
    for _ in 0..5 {
        assert_eq!(pod.get(HOST, "/site").await.expect("request").status, 200);
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

async fn backend_proxy_protocol_and_balance(haproxy: HaproxyBinary) {
    let (addr, _task) = proxy_protocol_backend().await;
    // Nine backends on one port (an EndpointSlice has one port for all): one now, all
    // nine later.
    let echo = start_backends("hashed", 127, 9).await;
    let all: Vec<SocketAddr> = echo.iter().map(|s| s.addr).collect();
    let addrs = &all[..1];
    let files = vec![
        (
            "proxied.yaml".into(),
            annotated_service(
                "proxied",
                &[("send-proxy-protocol", "v1"), ("timeout-server", "5s")],
                &[addr],
            ),
        ),
        (
            "hashed.yaml".into(),
            annotated_service("hashed", &[("load-balance", "source")], addrs),
        ),
        (
            "ingress.yaml".into(),
            ingress(
                "site",
                &[("timeout-connect", "2s")],
                HOST,
                &[("/proxied", "proxied"), ("/hashed", "hashed")],
                None,
            ),
        ),
    ];
    let pod = Pod::start(&haproxy, &refs(&files)).await;
    pod.wait_for_status(HOST, "/proxied", 200).await;
    let reply = pod.get(HOST, "/proxied").await.expect("request");
    assert!(reply.body.starts_with("PROXY TCP4 127.0.0.1 "), "{reply:?}");
    pod.wait_for_service(HOST, "/hashed", "hashed").await;
    let before = pod.haproxy.show_proc().await;

    // More endpoints than the slots with `balance source`: a reload, not `add server`.
    pod.write_manifest(
        "hashed.yaml",
        &annotated_service("hashed", &[("load-balance", "source")], &all),
    );
    let config = pod.haproxy.config_dir.join("haproxy.cfg");
    eventually("9 servers of hashed", Duration::from_secs(10), || {
        let config = config.clone();
        async move {
            let text = std::fs::read_to_string(config).ok()?;
            (text.matches("server s").count() >= 9 && text.contains("127.0.127.9")).then_some(())
        }
    })
    .await;
    // The file is written before haproxy is told to reload; the count follows.
    let haproxy = &pod.haproxy;
    eventually(
        "new servers by a reload",
        Duration::from_secs(10),
        || async { (haproxy.show_proc().await.reloads > before.reloads).then_some(()) },
    )
    .await;
    pod.wait_for_service(HOST, "/hashed", "hashed").await;
}

async fn precedence_and_invalid_values(haproxy: HaproxyBinary) {
    let (_web, web) = backends("web", 129).await;
    let svc = start_backends("svc", 130, 1).await;
    let svc_addrs: Vec<SocketAddr> = svc.iter().map(|s| s.addr).collect();
    let config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tugboat\n  \
                      namespace: ops\ndata:\n  response-set-header: X-Scope configmap\n  \
                      timeout-client: 30s\n  timeout-http-keep-alive: 5s\n  \
                      log-format: \"%ci:%cp %ST %HU\"\n  no-such-key: x\n";
    let files = vec![
        web,
        ("config.yaml".into(), config_map.to_string()),
        (
            "svc.yaml".into(),
            annotated_service(
                "svc",
                &[("response-set-header", "X-Scope service")],
                &svc_addrs,
            ),
        ),
        (
            "annotated.yaml".into(),
            ingress(
                "annotated",
                &[("response-set-header", "X-Scope ingress")],
                HOST,
                &[("/ingress", "web"), ("/service", "svc")],
                None,
            ),
        ),
        (
            "invalid.yaml".into(),
            ingress(
                "invalid",
                &[("response-set-header", "X-Scope \"quoted\"\nuse_backend x")],
                HOST,
                &[("/invalid", "web")],
                None,
            ),
        ),
        (
            "site.yaml".into(),
            ingress("site", &[], HOST, &[("/", "web")], None),
        ),
    ];
    let pod = Pod::start_with(&haproxy, &refs(&files), |config| {
        config.model.config_map = Some(ObjectKey::new("ops", "tugboat"));
    })
    .await;
    pod.wait_for_service(HOST, "/ingress", "web").await;
    let scope = |reply: Reply| reply.header("x-scope").map(str::to_string);
    let pod = &pod;
    let get = |path: &'static str| async move { pod.get(HOST, path).await.expect("request") };
    assert_eq!(scope(get("/ingress").await).as_deref(), Some("ingress"));
    assert_eq!(scope(get("/service").await).as_deref(), Some("service"));
    assert_eq!(scope(get("/other").await).as_deref(), Some("configmap"));
    // The invalid value is ignored on that Ingress only: the ConfigMap's applies.
    assert_eq!(scope(get("/invalid").await).as_deref(), Some("configmap"));
    let problems = pod.status.borrow().problems.clone();
    let invalid = problems
        .iter()
        .find(|p| p.object.name == "invalid")
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
    let config =
        std::fs::read_to_string(pod.haproxy.config_dir.join("haproxy.cfg")).expect("config");
    assert!(config.contains("    timeout client 30s\n"), "{config}");
    assert!(config.contains("use_backend %[var(txn.backend)]"));
    assert!(!config.contains("use_backend x"), "{config}");
}

async fn a_route_joining_an_existing_feature_set_needs_no_reload(haproxy: HaproxyBinary) {
    let (_web, web) = backends("web", 131).await;
    let headers = [("response-set-header", "X-Feature on")];
    let files = vec![
        web,
        (
            "first.yaml".into(),
            ingress("first", &headers, HOST, &[("/first", "web")], None),
        ),
        (
            "site.yaml".into(),
            ingress("site", &[], HOST, &[("/", "web")], None),
        ),
    ];
    let pod = Pod::start(&haproxy, &refs(&files)).await;
    pod.wait_for_service(HOST, "/first", "web").await;
    let before = pod.haproxy.show_proc().await;
    pod.write_manifest(
        "second.yaml",
        &ingress("second", &headers, HOST, &[("/second", "web")], None),
    );
    eventually(
        "the second route's feature",
        Duration::from_secs(10),
        || async {
            let reply = pod.get(HOST, "/second").await.ok()?;
            (reply.header("x-feature") == Some("on")).then_some(())
        },
    )
    .await;
    let after = pod.haproxy.show_proc().await;
    assert_eq!(
        after.reloads, before.reloads,
        "the map changed, not the config"
    );
    assert_eq!(
        pod.get(HOST, "/third")
            .await
            .expect("req")
            .header("x-feature"),
        None
    );
}

async fn syslog_log_format_and_strict_sni(haproxy: HaproxyBinary) {
    let (_web, web) = backends("web", 132).await;
    let syslog = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("bind syslog");
    let syslog_addr = syslog.local_addr().expect("address");
    let (cert, key, der) = certificate(&[HOST], false);
    let config_map = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tugboat\n  namespace: ops\n\
         data:\n  syslog-server: \"{syslog_addr}\"\n  log-format: \"tugboat-log %ST %HU\"\n  \
         client-strict-sni: \"true\"\n  ssl-redirect: \"false\"\n"
    );
    let files = vec![
        web,
        ("config.yaml".into(), config_map),
        ("tls.yaml".into(), tls_secret("shop-tls", &cert, &key)),
        (
            "site.yaml".into(),
            ingress("site", &[], HOST, &[("/", "web")], Some("shop-tls")),
        ),
    ];
    let pod = Pod::start_with(&haproxy, &refs(&files), |config| {
        config.model.config_map = Some(ObjectKey::new("ops", "tugboat"));
    })
    .await;
    // ssl-redirect false in the ConfigMap: the TLS host is served over plain HTTP.
    pod.wait_for_service(HOST, "/logged", "web").await;
    let mut buffer = vec![0u8; 2048];
    let mut line = String::new();
    for _attempt in 0..20 {
        let _ = pod.get(HOST, "/logged").await;
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
    let https = pod.haproxy.https_addr();
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
