//! Conformance with the Kubernetes Ingress documentation, end to end on real haproxy,
//! from the manifests folder and from the API: host rules, path rules, merging and
//! conflicts, default backends, Service ports and endpoints, TLS by SNI with the
//! default certificate, the HTTPS redirect, error pages. Each case checks the status
//! code and which service answered.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::discovery::v1::EndpointConditions;
use k8s_openapi::api::networking::v1::{IngressRule, IngressSpec, IngressTLS};
use serde_json::Value;
use tugboat_model::ObjectKey;
use tugboat_model::problem::ProblemReason;
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{
    PathTo, exact, mk_config_map, mk_endpoint_slice, mk_external_name_service,
    mk_ingress_with_rules, mk_rule, mk_service, mk_service_of, mk_tls_secret, prefix, to_json,
    with_creation_timestamp, with_default_backend, with_endpoint_conditions, with_tls,
};
use tugboat_testkit::tls::{certificate, exchange, fallback_certificate_der};
use tugboat_testkit::{EchoServer, HaproxyBinary, Scene, Source, eventually, scene_tests};

scene_tests!(
    host_rules,
    path_rules,
    ingresses_sharing_a_host_merge_and_the_oldest_wins,
    default_backends,
    default_backend_service_flag,
    service_ports_and_endpoints,
    external_name_only_when_allowed,
    ten_endpoints_all_receive_traffic,
    tls_by_sni_with_default_certificate_alpn_and_redirect,
    invalid_tls_secrets_fall_back_to_the_default_certificate,
    default_ssl_certificate_flag_and_redirect_off,
    error_pages_from_a_config_map,
    certificates_change_without_reload,
);

/// Services named `names`, one echo backend each, on loopback networks from `net`, and
/// their objects.
async fn services(names: &[&str], net: u8) -> (Vec<EchoServer>, Vec<Value>) {
    let mut servers = Vec::new();
    let mut objects = Vec::new();
    for (index, name) in names.iter().enumerate() {
        let started = start_backends(name, net + index as u8, 1).await;
        objects.extend(mk_service_of(name, &started));
        servers.extend(started);
    }
    (servers, objects)
}

/// A Service `name` (port 80 named http) without endpoints.
fn empty_service(name: &str) -> [Value; 2] {
    [
        to_json(&mk_service(name, "http", 80)),
        to_json(&mk_endpoint_slice(name, "http", &[])),
    ]
}

/// `path` (ImplementationSpecific) to `service` port 80.
fn implementation_specific<'a>(path: &'a str, service: &'a str) -> PathTo<'a> {
    PathTo {
        path_type: "ImplementationSpecific",
        ..prefix(path, service)
    }
}

/// A rule for `host` with `/` (Prefix) to `service` port 80.
fn root_rule(host: &str, service: &str) -> IngressRule {
    mk_rule(Some(host), &[prefix("/", service)])
}

async fn check(scene: &Scene, cases: &[(&str, &str, u16, Option<&str>)]) {
    for (host, path, status, service) in cases {
        let reply = scene
            .get(host, path)
            .await
            .expect("request through haproxy");
        assert_eq!(reply.status, *status, "{host}{path}: {reply:?}");
        assert_eq!(reply.service(), *service, "{host}{path}: {reply:?}");
    }
}

async fn host_rules(haproxy: HaproxyBinary, source: Source) {
    let (_servers, mut objects) = services(&["exact", "wild", "any"], 40).await;
    objects.push(to_json(&mk_ingress_with_rules(
        "hosts",
        vec![
            root_rule("exact.example.com", "exact"),
            root_rule("*.wild.example.com", "wild"),
            mk_rule(None, &[prefix("/", "any")]),
        ],
    )));
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene
        .wait_for_service("exact.example.com", "/", "exact")
        .await;
    check(
        &scene,
        &[
            ("exact.example.com", "/", 200, Some("exact")),
            // Case-insensitive, port ignored.
            ("EXACT.Example.Com", "/x", 200, Some("exact")),
            ("exact.example.com:8080", "/", 200, Some("exact")),
            // A wildcard matches exactly one label.
            ("a.wild.example.com", "/", 200, Some("wild")),
            ("A.Wild.Example.com:443", "/", 200, Some("wild")),
            ("a.b.wild.example.com", "/", 200, Some("any")),
            ("wild.example.com", "/", 200, Some("any")),
            // A rule without a host applies to every other host.
            ("unknown.example.org", "/", 200, Some("any")),
            ("", "/", 200, Some("any")),
        ],
    )
    .await;
}

async fn path_rules(haproxy: HaproxyBinary, source: Source) {
    let names = [
        "root",
        "foo",
        "foobar",
        "bar",
        "exact",
        "both-exact",
        "both-prefix",
        "impl",
    ];
    let (_servers, mut objects) = services(&names, 50).await;
    objects.push(to_json(&mk_ingress_with_rules(
        "paths",
        vec![mk_rule(
            Some("paths.example.com"),
            &[
                prefix("/", "root"),
                prefix("/foo", "foo"),
                prefix("/foo/bar", "foobar"),
                prefix("/bar/", "bar"),
                exact("/exact", "exact"),
                exact("/both", "both-exact"),
                prefix("/both", "both-prefix"),
                implementation_specific("/impl", "impl"),
            ],
        )],
    )));
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene
        .wait_for_service("paths.example.com", "/foo", "foo")
        .await;
    let host = "paths.example.com";
    check(
        &scene,
        &[
            // Prefix matches whole path elements.
            (host, "/foo", 200, Some("foo")),
            (host, "/foo/", 200, Some("foo")),
            (host, "/foo/baz", 200, Some("foo")),
            (host, "/foobar", 200, Some("root")),
            (host, "/Foo", 200, Some("root")),
            // The longest prefix wins.
            (host, "/foo/bar", 200, Some("foobar")),
            (host, "/foo/bar/baz", 200, Some("foobar")),
            (host, "/foo/barbaz", 200, Some("foo")),
            // A trailing slash in a Prefix rule is ignored.
            (host, "/bar", 200, Some("bar")),
            (host, "/bar/x", 200, Some("bar")),
            (host, "/barx", 200, Some("root")),
            // Exact is literal and case-sensitive.
            (host, "/exact", 200, Some("exact")),
            (host, "/exact/", 200, Some("root")),
            (host, "/EXACT", 200, Some("root")),
            (host, "/exactly", 200, Some("root")),
            // Exact beats Prefix on the same path.
            (host, "/both", 200, Some("both-exact")),
            (host, "/both/x", 200, Some("both-prefix")),
            // ImplementationSpecific behaves as Prefix.
            (host, "/impl", 200, Some("impl")),
            (host, "/impl/x", 200, Some("impl")),
            (host, "/implx", 200, Some("root")),
            // The query string plays no part.
            (host, "/exact?x=1", 200, Some("exact")),
        ],
    )
    .await;
}

async fn ingresses_sharing_a_host_merge_and_the_oldest_wins(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let (_servers, mut objects) = services(&["one", "two", "three"], 60).await;
    let newer = with_creation_timestamp(
        mk_ingress_with_rules(
            "newer",
            vec![mk_rule(
                Some("shared.example.com"),
                &[prefix("/", "two"), prefix("/two", "two")],
            )],
        ),
        "2025-06-01T00:00:00Z",
    );
    let older = with_creation_timestamp(
        mk_ingress_with_rules(
            "older",
            vec![mk_rule(
                Some("shared.example.com"),
                &[prefix("/", "one"), prefix("/one", "three")],
            )],
        ),
        "2024-01-01T00:00:00Z",
    );
    objects.push(to_json(&older));
    // A folder keeps the timestamps written in the objects: both are there from the
    // start. The API server stamps an object when it creates it: the newer one is
    // created a second later (timestamps have whole seconds).
    if source == Source::Folder {
        objects.push(to_json(&newer));
    }
    let scene = Scene::start(&haproxy, source, &objects).await;
    if source == Source::Api {
        scene
            .wait_for_service("shared.example.com", "/one", "three")
            .await;
        tokio::time::sleep(Duration::from_millis(1100)).await;
        scene.apply(&newer);
    }
    scene
        .wait_for_service("shared.example.com", "/one", "three")
        .await;
    scene
        .wait_for_service("shared.example.com", "/two", "two")
        .await;
    check(
        &scene,
        &[
            // Rules of both Ingresses apply to the host...
            ("shared.example.com", "/one", 200, Some("three")),
            ("shared.example.com", "/two", 200, Some("two")),
            // ...and the older one keeps the path both claim.
            ("shared.example.com", "/", 200, Some("one")),
        ],
    )
    .await;
    let problems = scene.status().problems;
    let conflict = problems
        .iter()
        .find(|p| p.reason == ProblemReason::RouteConflict)
        .expect("a conflict problem");
    assert_eq!(&*conflict.object.name, "newer");
    assert!(conflict.message.contains("default/older"), "{conflict}");
    // From the API, the conflict is also a Warning Event on the newer Ingress.
    scene.wait_for_warning("newer", &conflict.field).await;
}

async fn default_backends(haproxy: HaproxyBinary, source: Source) {
    let (_servers, objects) = services(&["web", "fallback"], 70).await;
    let scene = Scene::start(&haproxy, source, &objects).await;
    // No Ingress at all: the built-in default backend answers 404, and /healthz.
    scene.wait_for_status("any.example.com", "/", 404).await;
    check(&scene, &[("any.example.com", "/healthz", 200, None)]).await;
    // An Ingress' spec.defaultBackend takes every request no rule matches.
    scene.apply(&with_default_backend(
        mk_ingress_with_rules(
            "with-default",
            vec![mk_rule(Some("web.example.com"), &[prefix("/app", "web")])],
        ),
        "fallback",
        80,
    ));
    scene
        .wait_for_service("web.example.com", "/app", "web")
        .await;
    check(
        &scene,
        &[
            ("web.example.com", "/app", 200, Some("web")),
            ("web.example.com", "/other", 200, Some("fallback")),
            ("other.example.com", "/", 200, Some("fallback")),
        ],
    )
    .await;
}

async fn default_backend_service_flag(haproxy: HaproxyBinary, source: Source) {
    let (_servers, objects) = services(&["catchall"], 72).await;
    let scene = Scene::start_with(&haproxy, source, &objects, |config| {
        config.model.default_backend_service = Some(ObjectKey::new("default", "catchall"));
    })
    .await;
    scene
        .wait_for_service("nothing.example.com", "/", "catchall")
        .await;
}

async fn service_ports_and_endpoints(haproxy: HaproxyBinary, source: Source) {
    // A Service whose port 80 is named "web" and targets the pods' port (a different
    // number) through the EndpointSlice port of the same name.
    let pods = start_backends("named", 74, 3).await;
    let addrs: Vec<_> = pods.iter().map(|s| s.addr).collect();
    // The second endpoint is terminating but still serving; the third is not ready.
    let slice = with_endpoint_conditions(
        mk_endpoint_slice("named", "web", &addrs),
        addrs[1].ip(),
        EndpointConditions {
            ready: Some(false),
            serving: Some(true),
            terminating: Some(true),
        },
    );
    let slice = with_endpoint_conditions(
        slice,
        addrs[2].ip(),
        EndpointConditions {
            ready: Some(false),
            ..EndpointConditions::default()
        },
    );
    let ingress = mk_ingress_with_rules(
        "ports",
        vec![mk_rule(
            Some("ports.example.com"),
            &[
                prefix("/by-name", "named").port_named("web"),
                prefix("/by-number", "named"),
                prefix("/empty", "empty"),
                prefix("/outside", "outside"),
            ],
        )],
    );
    let objects = [
        &[
            to_json(&mk_service("named", "web", 80)),
            to_json(&slice),
            to_json(&mk_external_name_service("outside", "localhost", 80)),
            to_json(&ingress),
        ][..],
        &empty_service("empty"),
    ]
    .concat();
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene
        .wait_for_service("ports.example.com", "/by-name", "named")
        .await;
    let mut seen = BTreeSet::new();
    for path in ["/by-name", "/by-number"].into_iter().cycle().take(20) {
        let reply = scene.get("ports.example.com", path).await.expect("GET");
        assert_eq!(reply.status, 200, "{path}: {reply:?}");
        seen.insert(reply.endpoint().expect("endpoint").to_string());
    }
    // Only the ready endpoint gets new requests.
    assert_eq!(seen, BTreeSet::from([addrs[0].to_string()]));
    check(
        &scene,
        &[
            // No ready endpoint: 503.
            ("ports.example.com", "/empty", 503, None),
            // ExternalName is off unless the operator allows it.
            ("ports.example.com", "/outside", 503, None),
        ],
    )
    .await;
    let problems = scene.status().problems;
    let not_allowed = problems
        .iter()
        .find(|p| {
            p.reason == ProblemReason::NotAllowed && p.message.contains("--allow-external-name")
        })
        .unwrap_or_else(|| panic!("a problem about --allow-external-name: {problems:?}"));
    // From the API, it is also a Warning Event.
    scene
        .wait_for_warning(&not_allowed.object.name, &not_allowed.field)
        .await;
}

async fn external_name_only_when_allowed(haproxy: HaproxyBinary, source: Source) {
    let outside = EchoServer::start("outside", "127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("echo");
    let port = i32::from(outside.addr.port());
    let objects = [
        to_json(&mk_external_name_service("outside", "localhost", port)),
        to_json(&mk_ingress_with_rules(
            "ext",
            vec![mk_rule(
                Some("ext.example.com"),
                &[prefix("/", "outside").port(port)],
            )],
        )),
    ];
    let scene = Scene::start_with(&haproxy, source, &objects, |config| {
        config.model.allow_external_name = true
    })
    .await;
    scene
        .wait_for_service("ext.example.com", "/", "outside")
        .await;
}

async fn ten_endpoints_all_receive_traffic(haproxy: HaproxyBinary, source: Source) {
    let pods = start_backends("ten", 76, 10).await;
    let objects = [
        &mk_service_of("ten", &pods)[..],
        &[to_json(&mk_ingress_with_rules(
            "ten",
            vec![root_rule("ten.example.com", "ten")],
        ))],
    ]
    .concat();
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_service("ten.example.com", "/", "ten").await;
    let mut seen = BTreeSet::new();
    for _ in 0..40 {
        let reply = scene.get("ten.example.com", "/").await.expect("GET");
        assert_eq!(reply.status, 200);
        seen.insert(reply.endpoint().expect("endpoint").to_string());
    }
    let all: BTreeSet<String> = pods.iter().map(|s| s.addr.to_string()).collect();
    assert_eq!(seen, all);
}

async fn tls_by_sni_with_default_certificate_alpn_and_redirect(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let (_servers, mut objects) = services(&["secure", "wild", "plain"], 80).await;
    let (a_cert, a_key, a_der) = certificate(&["secure.example.com"], false);
    let (w_cert, w_key, w_der) = certificate(&["*.wild.example.com"], false);
    let ingress = with_tls(
        mk_ingress_with_rules(
            "tls",
            vec![
                root_rule("secure.example.com", "secure"),
                root_rule("*.wild.example.com", "wild"),
                root_rule("plain.example.com", "plain"),
            ],
        ),
        &[
            (&["secure.example.com"], "a-tls"),
            (&["*.wild.example.com"], "w-tls"),
        ],
    );
    objects.extend([
        to_json(&mk_tls_secret("a-tls", &a_cert, &a_key)),
        to_json(&mk_tls_secret("w-tls", &w_cert, &w_key)),
        to_json(&ingress),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene
        .wait_for_service("plain.example.com", "/", "plain")
        .await;
    let https = scene.https_addr();
    let h1: &[&[u8]] = &[b"http/1.1"];
    // The certificate follows SNI.
    let secure = exchange(https, "secure.example.com", "/x", h1)
        .await
        .expect("TLS");
    assert_eq!(secure.certificate, a_der);
    let reply = secure.reply.expect("HTTP/1.1 answer");
    assert_eq!(
        (reply.status, reply.service()),
        (200, Some("secure")),
        "{reply:?}"
    );
    let wild = exchange(https, "a.wild.example.com", "/", h1)
        .await
        .expect("TLS");
    assert_eq!(wild.certificate, w_der);
    assert_eq!(wild.reply.expect("answer").service(), Some("wild"));
    // Unknown SNI (and a host with no TLS section) get the default certificate.
    let fallback = fallback_certificate_der(&scene.lib_dir);
    let other = exchange(https, "plain.example.com", "/", h1)
        .await
        .expect("TLS");
    assert_eq!(other.certificate, fallback);
    assert_eq!(other.reply.expect("answer").service(), Some("plain"));
    let unknown = exchange(https, "nobody.example.org", "/", h1)
        .await
        .expect("TLS");
    assert_eq!(unknown.certificate, fallback);
    // HTTP/2 and HTTP/1.1 are offered by ALPN.
    let h2 = exchange(https, "secure.example.com", "/", &[b"h2", b"http/1.1"])
        .await
        .expect("TLS");
    assert_eq!(h2.alpn.as_deref(), Some(&b"h2"[..]));
    let h1_only = exchange(https, "secure.example.com", "/", h1)
        .await
        .expect("TLS");
    assert_eq!(h1_only.alpn.as_deref(), Some(&b"http/1.1"[..]));
    // Plain HTTP to a TLS host: 308 to HTTPS; to other hosts: served.
    let redirect = scene
        .get("secure.example.com", "/path?q=1")
        .await
        .expect("GET");
    assert_eq!(redirect.status, 308, "{redirect:?}");
    assert_eq!(
        redirect.header("location"),
        Some("https://secure.example.com/path?q=1")
    );
    let wild_redirect = scene.get("b.wild.example.com", "/").await.expect("GET");
    assert_eq!(wild_redirect.status, 308);
    check(&scene, &[("plain.example.com", "/", 200, Some("plain"))]).await;
}

async fn invalid_tls_secrets_fall_back_to_the_default_certificate(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let (_servers, mut objects) = services(&["good", "expired", "mismatch", "missing"], 84).await;
    let (good_cert, good_key, good_der) = certificate(&["good.example.com"], false);
    let (old_cert, old_key, _) = certificate(&["expired.example.com"], true);
    let (mis_cert, _, _) = certificate(&["mismatch.example.com"], false);
    let (_, other_key, _) = certificate(&["other.example.com"], false);
    let ingress = with_tls(
        mk_ingress_with_rules(
            "tls",
            vec![
                root_rule("good.example.com", "good"),
                root_rule("expired.example.com", "expired"),
                root_rule("mismatch.example.com", "mismatch"),
                root_rule("missing.example.com", "missing"),
            ],
        ),
        &[
            (&["good.example.com"], "good-tls"),
            (&["expired.example.com"], "expired-tls"),
            (&["mismatch.example.com"], "mismatch-tls"),
            (&["missing.example.com"], "missing-tls"),
        ],
    );
    objects.extend([
        to_json(&mk_tls_secret("good-tls", &good_cert, &good_key)),
        to_json(&mk_tls_secret("expired-tls", &old_cert, &old_key)),
        to_json(&mk_tls_secret("mismatch-tls", &mis_cert, &other_key)),
        to_json(&ingress),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_status("good.example.com", "/", 308).await;
    let https = scene.https_addr();
    let h1: &[&[u8]] = &[b"http/1.1"];
    let fallback = fallback_certificate_der(&scene.lib_dir);
    let good = exchange(https, "good.example.com", "/", h1)
        .await
        .expect("TLS");
    assert_eq!(good.certificate, good_der);
    for (host, service) in [
        ("expired.example.com", "expired"),
        ("mismatch.example.com", "mismatch"),
        ("missing.example.com", "missing"),
    ] {
        let tls = exchange(https, host, "/", h1).await.expect("TLS");
        assert_eq!(
            tls.certificate, fallback,
            "{host} gets the default certificate"
        );
        assert_eq!(
            tls.reply.expect("answer").service(),
            Some(service),
            "{host} still routes"
        );
    }
    let problems = scene.status().problems;
    let reasons: BTreeSet<(String, ProblemReason)> = problems
        .iter()
        .map(|p| (p.field.clone(), p.reason))
        .collect();
    let expected_problems = [
        (
            "spec.tls[1].secretName".to_string(),
            ProblemReason::InvalidCertificate,
        ),
        (
            "spec.tls[2].secretName".to_string(),
            ProblemReason::InvalidCertificate,
        ),
        (
            "spec.tls[3].secretName".to_string(),
            ProblemReason::SecretNotFound,
        ),
    ];
    for expected in &expected_problems {
        assert!(reasons.contains(expected), "{expected:?} in {problems:?}");
    }
    assert!(problems.iter().any(|p| p.message.contains("expired")));
    assert!(
        problems
            .iter()
            .any(|p| p.message.contains("does not belong"))
    );
    assert!(
        problems.iter().all(|p| !p.message.contains("PRIVATE KEY")),
        "no secret material in problems"
    );
    // From the API, each is also a Warning Event on the Ingress, with its reason and
    // no secret material.
    for (field, reason) in &expected_problems {
        if let Some(event) = scene.wait_for_warning("tls", field).await {
            assert_eq!(event["reason"], reason.as_str(), "{event}");
            assert!(!event.to_string().contains("PRIVATE KEY"), "{event}");
        }
    }
}

async fn default_ssl_certificate_flag_and_redirect_off(haproxy: HaproxyBinary, source: Source) {
    let (_servers, mut objects) = services(&["site"], 90).await;
    let (default_cert, default_key, default_der) = certificate(&["default.example.com"], false);
    // A TLS section without a Secret: the host is served with the default certificate.
    let mut ingress = mk_ingress_with_rules("site", vec![root_rule("site.example.com", "site")]);
    ingress.spec.get_or_insert_with(IngressSpec::default).tls = Some(vec![IngressTLS {
        hosts: Some(vec!["site.example.com".to_string()]),
        secret_name: None,
    }]);
    objects.extend([
        to_json(&mk_tls_secret("default-tls", &default_cert, &default_key)),
        to_json(&ingress),
    ]);
    let scene = Scene::start_with(&haproxy, source, &objects, |config| {
        config.model.default_certificate = Some(ObjectKey::new("default", "default-tls"));
        config.model.ssl_redirect = false;
    })
    .await;
    // No redirect: plain HTTP is served.
    scene
        .wait_for_service("site.example.com", "/", "site")
        .await;
    let tls = exchange(scene.https_addr(), "site.example.com", "/", &[b"http/1.1"])
        .await
        .expect("TLS");
    assert_eq!(tls.certificate, default_der);
    assert_eq!(tls.reply.expect("answer").service(), Some("site"));
}

async fn error_pages_from_a_config_map(haproxy: HaproxyBinary, source: Source) {
    let (_servers, mut objects) = services(&["web"], 92).await;
    objects.push(to_json(&mk_config_map(
        "pages",
        &[
            ("404", "<h1>Nothing here</h1>"),
            ("503", "<h1>Back soon</h1>"),
            ("999", "nope"),
        ],
    )));
    objects.extend(empty_service("empty"));
    objects.push(to_json(&mk_ingress_with_rules(
        "pages",
        vec![mk_rule(
            Some("pages.example.com"),
            &[prefix("/", "web"), prefix("/down", "empty")],
        )],
    )));
    let scene = Scene::start_with(&haproxy, source, &objects, |config| {
        config.model.error_pages = Some(ObjectKey::new("default", "pages"));
    })
    .await;
    scene
        .wait_for_service("pages.example.com", "/", "web")
        .await;
    let missing = scene.get("nowhere.example.com", "/").await.expect("GET");
    assert_eq!(missing.status, 404);
    assert_eq!(missing.body, "<h1>Nothing here</h1>");
    let down = scene.get("pages.example.com", "/down").await.expect("GET");
    assert_eq!(down.status, 503);
    assert_eq!(down.body, "<h1>Back soon</h1>");
    let problems = scene.status().problems;
    assert!(
        problems.iter().any(|p| p.field == "data.999"),
        "{problems:?}"
    );
    // From the API, the bad key is also a Warning Event on the ConfigMap.
    scene.wait_for_warning("pages", "data.999").await;
}

async fn certificates_change_without_reload(haproxy: HaproxyBinary, source: Source) {
    let (_servers, mut objects) = services(&["site", "extra"], 94).await;
    let (cert1, key1, der1) = certificate(&["site.example.com"], false);
    let ingress = |with_extra: bool| {
        let mut tls = vec![(&["site.example.com"][..], "site-tls")];
        if with_extra {
            tls.push((&["extra.example.com"][..], "extra-tls"));
        }
        with_tls(
            mk_ingress_with_rules(
                "site",
                vec![
                    root_rule("site.example.com", "site"),
                    root_rule("extra.example.com", "extra"),
                ],
            ),
            &tls,
        )
    };
    objects.extend([
        to_json(&mk_tls_secret("site-tls", &cert1, &key1)),
        to_json(&ingress(false)),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_status("site.example.com", "/", 308).await;
    let https = scene.https_addr();
    let served = |sni: &'static str| async move {
        exchange(https, sni, "/", &[b"http/1.1"])
            .await
            .expect("TLS")
            .certificate
    };
    assert_eq!(served("site.example.com").await, der1);
    let before = scene.show_proc().await;

    // Rotation: the same Secret gets a new certificate.
    let (cert2, key2, der2) = certificate(&["site.example.com"], false);
    scene.apply(&mk_tls_secret("site-tls", &cert2, &key2));
    eventually(
        "the rotated certificate",
        Duration::from_secs(10),
        || async { (served("site.example.com").await == der2).then_some(()) },
    )
    .await;

    // A new TLS host with its own Secret.
    let (cert3, key3, der3) = certificate(&["extra.example.com"], false);
    scene.apply(&mk_tls_secret("extra-tls", &cert3, &key3));
    scene.apply(&ingress(true));
    eventually(
        "the new host's certificate",
        Duration::from_secs(10),
        || async { (served("extra.example.com").await == der3).then_some(()) },
    )
    .await;
    scene.wait_for_status("extra.example.com", "/", 308).await;

    // The TLS host goes away: back to the default certificate, no redirect.
    scene.apply(&ingress(false));
    let fallback = fallback_certificate_der(&scene.lib_dir);
    eventually(
        "the default certificate again",
        Duration::from_secs(10),
        || async { (served("extra.example.com").await == fallback).then_some(()) },
    )
    .await;
    scene
        .wait_for_service("extra.example.com", "/", "extra")
        .await;

    let after = scene.show_proc().await;
    assert_eq!(after.master_pid, before.master_pid);
    assert_eq!(
        after.reloads, before.reloads,
        "certificates changed without a reload"
    );
}
