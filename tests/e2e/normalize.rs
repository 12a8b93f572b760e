//! Routing on the normalized path, end to end on real haproxy: a path that normalizes to
//! a protected prefix meets that prefix's rules (or is refused with 400), never the more
//! open route of its host; what the backend receives with `backend-path` `normalized`
//! and `original`; the query string untouched; and `request-redirect` to a host, a
//! host and port, or a URL. The authentication case runs on the folder and on the API
//! source, since its Secret is a referenced object.

use tugboat_model::ObjectKey;
use tugboat_testkit::cluster_pod::{TUGBOAT_CLASS, options};
use tugboat_testkit::http::request;
use tugboat_testkit::manifests::{service_with_endpoints, start_backends};
use tugboat_testkit::objects::{
    ANN_S3CRET, S3CRET_HASH, mk_ingress_with_rules, mk_rule, mk_secret, prefix, to_json, to_yaml,
    with_class, with_keys,
};
use tugboat_testkit::tls::exchange;
use tugboat_testkit::{
    ClusterPod, EchoServer, FakeApiServer, Haproxy, HaproxyBinary, Pod, Reply, haproxy_tests,
};

haproxy_tests!(
    paths_that_normalize_to_a_protected_prefix_meet_its_authentication,
    paths_that_normalize_to_a_protected_prefix_meet_its_authentication_from_the_api,
    the_backend_receives_the_normalized_or_the_original_path,
    request_redirect_to_a_host_a_host_and_port_or_a_url,
);

const HOST: &str = "n.local";

/// `ann:s3cret`.
const GOOD: (&str, &str) = ("Authorization", ANN_S3CRET);

/// An Ingress `name` in `default` with annotations `tugboat.dev/<key>: <value>`,
/// routing `host` + each `(path, service)` as a Prefix to port 80, as YAML.
fn ingress(
    name: &str,
    class: Option<&str>,
    annotations: &[(&str, &str)],
    paths: &[(&str, &str)],
) -> String {
    let paths: Vec<_> = paths
        .iter()
        .map(|(path, service)| prefix(path, service))
        .collect();
    let ingress = mk_ingress_with_rules(name, vec![mk_rule(Some(HOST), &paths)]);
    to_yaml(&[to_json(&with_keys(with_class(ingress, class), annotations))])
}

/// A Service `name` (port 80) with one echo backend on 127.0.`net`.1.
async fn backend(name: &str, net: u8) -> (Vec<EchoServer>, String) {
    let servers = start_backends(name, net, 1).await;
    let text = service_with_endpoints(name, &servers);
    (servers, text)
}

async fn send(haproxy: &Haproxy, path: &str, headers: &[(&str, &str)]) -> Reply {
    request(haproxy.http_addr(), "GET", HOST, path, headers)
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

/// Paths that normalize to `/admin` or below, and what each must get without
/// credentials: 401 from the `/admin` route's authentication, or 400 when the path
/// cannot be normalized safely. Never 200 from the open route.
const ATTACKS: &[(&str, u16)] = &[
    ("//admin", 401),
    ("//admin/x", 401),
    ("/./admin", 401),
    ("/x/../admin", 401),
    ("/%61dmin", 401),
    ("/%2e/admin", 401),
    ("/x/%2E%2e/admin/", 401),
    ("/admin/./x//y", 401),
    ("/%61dmin?next=/public", 401),
    // Path parameters belong to their segment (servers that drop them, as Java's do,
    // serve `/admin`).
    ("/admin;x", 401),
    ("/admin;jsessionid=1/x", 401),
    ("/adm%69n;x=%2e", 401),
    ("/x;a/../admin", 401),
    ("/admin%2fx", 400),
    ("/admin%2Fx", 400),
    ("/admin%5cx", 400),
    ("/admin\\x", 400),
    ("/admin%00", 400),
    ("/../admin", 400),
    ("/%2e%2e/admin", 400),
    ("/x/../../admin", 400),
    ("/adm%zzin", 400),
    ("/admin%", 400),
    ("/admin%6", 400),
    // A dot segment with parameters is `..` to such servers and a plain name to haproxy.
    ("/x/..;/admin", 400),
    ("/x/..;x=1/admin", 400),
    ("/.;/admin", 400),
    ("/x/%2e%2e;/admin", 400),
];

/// The attack list, then the legitimate paths, on a haproxy routing `/admin` (basic
/// auth) to `admin` and `/` (open) to `site`.
async fn check_normalized_routing(haproxy: &Haproxy) {
    for (path, expected) in ATTACKS {
        let reply = send(haproxy, path, &[]).await;
        assert_eq!(
            reply.status, *expected,
            "GET {path} on haproxy {}: {reply:?}",
            haproxy.binary.series
        );
        assert_ne!(reply.service(), Some("site"), "GET {path}: {reply:?}");
    }
    // With credentials, a path that normalizes to /admin reaches the admin Service
    // with the normalized path (the default), its query untouched.
    let reply = send(haproxy, "//admin/./x/../y?q=%61&r=//a/../b", &[GOOD]).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.service(), Some("admin"), "{reply:?}");
    assert_eq!(reply.path(), Some("/admin/y"), "{reply:?}");
    assert_eq!(reply.query(), Some("q=%61&r=//a/../b"), "{reply:?}");
    let reply = send(haproxy, "/admin/x", &[GOOD]).await;
    assert_eq!(
        (reply.status, reply.service(), reply.path()),
        (200, Some("admin"), Some("/admin/x")),
        "{reply:?}"
    );
    assert_eq!(send(haproxy, "/admin/x", &[]).await.status, 401);
    // Parameters are left for the backend: only the route lookup goes without them.
    let reply = send(haproxy, "/admin;jsessionid=1/x", &[GOOD]).await;
    assert_eq!(
        (reply.status, reply.service(), reply.path()),
        (200, Some("admin"), Some("/admin;jsessionid=1/x")),
        "{reply:?}"
    );
    // Legitimate paths of the open route stay routable, as they were sent.
    for (path, expected_path, expected_query) in [
        ("/administrator", "/administrator", ""),
        ("/a%20b", "/a%20b", ""),
        ("/caf%C3%A9", "/caf%C3%A9", ""),
        ("/a%25b", "/a%25b", ""),
        ("/admin/..", "/", ""),
        (
            "/search?q=100%&next=%2Fadmin&p=/../x",
            "/search",
            "q=100%&next=%2Fadmin&p=/../x",
        ),
        ("/x?", "/x", ""),
        ("/site;jsessionid=abc", "/site;jsessionid=abc", ""),
        ("/administrator;x", "/administrator;x", ""),
    ] {
        let reply = send(haproxy, path, &[]).await;
        assert_eq!(reply.status, 200, "GET {path}: {reply:?}");
        assert_eq!(reply.service(), Some("site"), "GET {path}: {reply:?}");
        assert_eq!(reply.path(), Some(expected_path), "GET {path}: {reply:?}");
        assert_eq!(reply.query(), Some(expected_query), "GET {path}: {reply:?}");
    }
}

async fn paths_that_normalize_to_a_protected_prefix_meet_its_authentication(
    haproxy: HaproxyBinary,
) {
    let (_admin, admin) = backend("admin", 160).await;
    let (_site, site) = backend("site", 161).await;
    let users = format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: users\n  namespace: default\n\
         stringData:\n  ann: '{S3CRET_HASH}'\n"
    );
    let protected = ingress(
        "admin",
        None,
        &[("auth-type", "basic-auth"), ("auth-secret", "users")],
        &[("/admin", "admin")],
    );
    let open = ingress("site", None, &[], &[("/", "site")]);
    let pod = Pod::start(
        &haproxy,
        &[
            ("admin.yaml", &admin),
            ("site.yaml", &site),
            ("users.yaml", &users),
            ("protected.yaml", &protected),
            ("open.yaml", &open),
        ],
    )
    .await;
    pod.wait_for_status(HOST, "/admin", 401).await;
    pod.wait_for_service(HOST, "/public", "site").await;
    check_normalized_routing(&pod).await;
}

async fn paths_that_normalize_to_a_protected_prefix_meet_its_authentication_from_the_api(
    haproxy: HaproxyBinary,
) {
    let (_admin, admin) = backend("admin", 162).await;
    let (_site, site) = backend("site", 163).await;
    let server = FakeApiServer::start().await;
    server.apply_yaml(TUGBOAT_CLASS);
    server.apply_yaml(&admin);
    server.apply_yaml(&site);
    server.apply(&mk_secret(
        "users",
        "Opaque",
        &[("ann", S3CRET_HASH.as_bytes())],
    ));
    server.apply_yaml(&ingress(
        "admin",
        Some("tugboat"),
        &[("auth-type", "basic-auth"), ("auth-secret", "users")],
        &[("/admin", "admin")],
    ));
    server.apply_yaml(&ingress("site", Some("tugboat"), &[], &[("/", "site")]));
    let pod = ClusterPod::start(&haproxy, &server, options("pod-a")).await;
    pod.wait_for_status(HOST, "/admin", 401).await;
    pod.wait_for_service(HOST, "/public", "site").await;
    // The Secret came through the API: the right password opens /admin.
    let reply = send(&pod, "/admin", &[GOOD]).await;
    assert_eq!(reply.service(), Some("admin"), "{reply:?}");
    check_normalized_routing(&pod).await;
}

async fn the_backend_receives_the_normalized_or_the_original_path(haproxy: HaproxyBinary) {
    let (_site, site) = backend("site", 164).await;
    let (_norm, norm) = backend("norm", 165).await;
    let (_raw, raw) = backend("raw", 166).await;
    // The ConfigMap keeps the original path; one Ingress asks for the normalized one.
    let config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tugboat\n  \
                      namespace: ops\ndata:\n  backend-path: original\n";
    let open = ingress("site", None, &[], &[("/", "site")]);
    let normalized = ingress(
        "norm",
        None,
        &[("backend-path", "normalized")],
        &[("/norm", "norm")],
    );
    let original = ingress(
        "raw",
        None,
        &[("backend-path", "original")],
        &[("/raw", "raw")],
    );
    let pod = Pod::start_with(
        &haproxy,
        &[
            ("site.yaml", &site),
            ("norm-svc.yaml", &norm),
            ("raw-svc.yaml", &raw),
            ("config.yaml", config_map),
            ("open.yaml", &open),
            ("normalized.yaml", &normalized),
            ("original.yaml", &original),
        ],
        |config| config.model.config_map = Some(ObjectKey::new("ops", "tugboat")),
    )
    .await;
    pod.wait_for_service(HOST, "/norm", "norm").await;
    pod.wait_for_service(HOST, "/raw", "raw").await;
    assert!(
        pod.status.borrow().problems.is_empty(),
        "{:?}",
        pod.status.borrow().problems
    );
    for (path, service, expected_path, expected_query) in [
        // backend-path: normalized on the Ingress.
        (
            "/x/../n%6Frm//a/./b?q=%61&r=//c/../d",
            "norm",
            "/norm/a/b",
            "q=%61&r=//c/../d",
        ),
        ("//norm", "norm", "/norm", ""),
        // backend-path: original on the Ingress: routed on /raw/..., sent as received.
        ("/raw/./a//b/../c?q=%61", "raw", "/raw/./a//b/../c", "q=%61"),
        ("/x/../%72aw/y", "raw", "/x/../%72aw/y", ""),
        // backend-path: original from the ConfigMap, for a route without the key.
        ("/site/./a//b?q=%2e%2e", "site", "/site/./a//b", "q=%2e%2e"),
        ("/n%6Frmal", "site", "/n%6Frmal", ""),
    ] {
        let reply = send(&pod, path, &[]).await;
        assert_eq!(reply.status, 200, "GET {path}: {reply:?}");
        assert_eq!(reply.service(), Some(service), "GET {path}: {reply:?}");
        assert_eq!(reply.path(), Some(expected_path), "GET {path}: {reply:?}");
        assert_eq!(reply.query(), Some(expected_query), "GET {path}: {reply:?}");
    }
    // What cannot be normalized is refused whatever the backend receives.
    for path in ["/raw%2fx", "/raw/../../x", "/raw%zz"] {
        assert_eq!(send(&pod, path, &[]).await.status, 400, "GET {path}");
    }
}

async fn request_redirect_to_a_host_a_host_and_port_or_a_url(haproxy: HaproxyBinary) {
    let (_web, web) = backend("web", 167).await;
    let to_host = ingress(
        "to-host",
        None,
        &[("request-redirect", "example.com")],
        &[("/h", "web")],
    );
    let to_port = ingress(
        "to-port",
        None,
        &[
            ("request-redirect", "example.com:8443"),
            ("request-redirect-code", "301"),
        ],
        &[("/hp", "web")],
    );
    let to_url = ingress(
        "to-url",
        None,
        &[("request-redirect", "https://www.example.com/new")],
        &[("/u", "web")],
    );
    let invalid = ingress(
        "invalid",
        None,
        &[("request-redirect", "example.com:99999")],
        &[("/bad", "web")],
    );
    let pod = Pod::start(
        &haproxy,
        &[
            ("web.yaml", &web),
            ("to-host.yaml", &to_host),
            ("to-port.yaml", &to_port),
            ("to-url.yaml", &to_url),
            ("invalid.yaml", &invalid),
        ],
    )
    .await;
    pod.wait_for_status(HOST, "/hp", 301).await;
    for (path, status, location) in [
        ("/h/x?a=%61&b=2", 302, "http://example.com/h/x?a=%61&b=2"),
        ("/h", 302, "http://example.com/h"),
        ("/hp/x?a=1", 301, "http://example.com:8443/hp/x?a=1"),
        ("/u/x?a=1", 302, "https://www.example.com/new"),
    ] {
        let reply = send(&pod, path, &[]).await;
        assert_eq!(reply.status, status, "GET {path}: {reply:?}");
        assert_eq!(reply.header("location"), Some(location), "GET {path}");
    }
    // Over HTTPS the scheme is kept too.
    let tls = exchange(pod.https_addr(), HOST, "/hp/y?z=1", &[b"http/1.1"])
        .await
        .expect("TLS exchange");
    let reply = tls.reply.expect("an HTTP/1.1 answer");
    assert_eq!(reply.status, 301, "{reply:?}");
    assert_eq!(
        reply.header("location"),
        Some("https://example.com:8443/hp/y?z=1")
    );
    // An invalid value is a problem of its Ingress, whose route is served unredirected.
    let reply = send(&pod, "/bad", &[]).await;
    assert_eq!(
        (reply.status, reply.service()),
        (200, Some("web")),
        "{reply:?}"
    );
    let problems = pod.status.borrow().problems.clone();
    let problem = problems
        .iter()
        .find(|p| &*p.object.name == "invalid")
        .expect("a problem for the invalid request-redirect");
    assert!(
        problem.field.contains("tugboat.dev/request-redirect"),
        "{problem}"
    );
    assert!(problem.message.contains("HOST:PORT"), "{problem}");
}
