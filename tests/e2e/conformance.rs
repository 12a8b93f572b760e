//! Conformance with the Kubernetes Ingress documentation, end to end on real haproxy:
//! host rules, path rules, merging and conflicts, default backends, Service ports and
//! endpoints, TLS by SNI with the default certificate, the HTTPS redirect, error pages.
//! Each case checks the status code and which service answered.

use std::collections::BTreeSet;
use std::time::Duration;

use tugboat_model::ObjectKey;
use tugboat_model::problem::ProblemReason;
use tugboat_testkit::manifests::{endpoint_slice, service, service_with_endpoints, start_backends};
use tugboat_testkit::tls::{certificate, exchange, tls_secret};
use tugboat_testkit::{EchoServer, HaproxyBinary, Pod, eventually, haproxy_tests};

haproxy_tests!(
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

/// An Ingress with the given rules (YAML list items, indented by two spaces).
fn ingress(name: &str, extra_metadata: &str, spec: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  \
         namespace: default\n{extra_metadata}spec:\n{spec}"
    )
}

fn rule(host: Option<&str>, paths: &[(&str, &str, &str)]) -> String {
    let mut out = match host {
        Some(host) => format!("  - host: \"{host}\"\n    http:\n      paths:\n"),
        None => "  - http:\n      paths:\n".to_string(),
    };
    for (path, path_type, service) in paths {
        out.push_str(&format!(
            "      - path: \"{path}\"\n        pathType: {path_type}\n        backend:\n          \
             service: {{name: {service}, port: {{number: 80}}}}\n"
        ));
    }
    out
}

fn rules(rules: &[String]) -> String {
    format!("  rules:\n{}", rules.concat())
}

/// Services named `names`, one echo backend each, on loopback network `net`.
async fn services(names: &[&str], net: u8) -> (Vec<EchoServer>, Vec<(String, String)>) {
    let mut servers = Vec::new();
    let mut files = Vec::new();
    for (index, name) in names.iter().enumerate() {
        let started = start_backends(name, net + index as u8, 1).await;
        files.push((
            format!("{name}.yaml"),
            service_with_endpoints(name, &started),
        ));
        servers.extend(started);
    }
    (servers, files)
}

async fn check(pod: &Pod, cases: &[(&str, &str, u16, Option<&str>)]) {
    for (host, path, status, service) in cases {
        let reply = pod.get(host, path).await.expect("request through haproxy");
        assert_eq!(reply.status, *status, "{host}{path}: {reply:?}");
        assert_eq!(reply.service(), *service, "{host}{path}: {reply:?}");
    }
}

fn file_refs(files: &[(String, String)]) -> Vec<(&str, &str)> {
    files
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect()
}

async fn host_rules(haproxy: HaproxyBinary) {
    let (_servers, mut files) = services(&["exact", "wild", "any"], 40).await;
    let spec = rules(&[
        rule(Some("exact.example.com"), &[("/", "Prefix", "exact")]),
        rule(Some("*.wild.example.com"), &[("/", "Prefix", "wild")]),
        rule(None, &[("/", "Prefix", "any")]),
    ]);
    files.push(("ingress.yaml".into(), ingress("hosts", "", &spec)));
    let pod = Pod::start(&haproxy, &file_refs(&files)).await;
    pod.wait_for_service("exact.example.com", "/", "exact")
        .await;
    check(
        &pod,
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

async fn path_rules(haproxy: HaproxyBinary) {
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
    let (_servers, mut files) = services(&names, 50).await;
    let spec = rules(&[rule(
        Some("paths.example.com"),
        &[
            ("/", "Prefix", "root"),
            ("/foo", "Prefix", "foo"),
            ("/foo/bar", "Prefix", "foobar"),
            ("/bar/", "Prefix", "bar"),
            ("/exact", "Exact", "exact"),
            ("/both", "Exact", "both-exact"),
            ("/both", "Prefix", "both-prefix"),
            ("/impl", "ImplementationSpecific", "impl"),
        ],
    )]);
    files.push(("ingress.yaml".into(), ingress("paths", "", &spec)));
    let pod = Pod::start(&haproxy, &file_refs(&files)).await;
    pod.wait_for_service("paths.example.com", "/foo", "foo")
        .await;
    let host = "paths.example.com";
    check(
        &pod,
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

async fn ingresses_sharing_a_host_merge_and_the_oldest_wins(haproxy: HaproxyBinary) {
    let (_servers, mut files) = services(&["one", "two", "three"], 60).await;
    let created = |t: &str| format!("  creationTimestamp: \"{t}\"\n");
    files.push((
        "newer.yaml".into(),
        ingress(
            "newer",
            &created("2025-06-01T00:00:00Z"),
            &rules(&[rule(
                Some("shared.example.com"),
                &[("/", "Prefix", "two"), ("/two", "Prefix", "two")],
            )]),
        ),
    ));
    files.push((
        "older.yaml".into(),
        ingress(
            "older",
            &created("2024-01-01T00:00:00Z"),
            &rules(&[rule(
                Some("shared.example.com"),
                &[("/", "Prefix", "one"), ("/one", "Prefix", "three")],
            )]),
        ),
    ));
    let pod = Pod::start(&haproxy, &file_refs(&files)).await;
    pod.wait_for_service("shared.example.com", "/one", "three")
        .await;
    check(
        &pod,
        &[
            // Rules of both Ingresses apply to the host...
            ("shared.example.com", "/one", 200, Some("three")),
            ("shared.example.com", "/two", 200, Some("two")),
            // ...and the older one keeps the path both claim.
            ("shared.example.com", "/", 200, Some("one")),
        ],
    )
    .await;
    let problems = pod.status.borrow().problems.clone();
    let conflict = problems
        .iter()
        .find(|p| p.reason == ProblemReason::RouteConflict)
        .expect("a conflict problem");
    assert_eq!(conflict.object.name, "newer");
    assert!(conflict.message.contains("default/older"), "{conflict}");
}

async fn default_backends(haproxy: HaproxyBinary) {
    let (_servers, mut files) = services(&["web", "fallback"], 70).await;
    let pod = Pod::start(&haproxy, &file_refs(&files)).await;
    // No Ingress at all: the built-in default backend answers 404, and /healthz.
    pod.wait_for_status("any.example.com", "/", 404).await;
    check(&pod, &[("any.example.com", "/healthz", 200, None)]).await;
    // An Ingress' spec.defaultBackend takes every request no rule matches.
    let spec = format!(
        "  defaultBackend:\n    service: {{name: fallback, port: {{number: 80}}}}\n{}",
        rules(&[rule(Some("web.example.com"), &[("/app", "Prefix", "web")])])
    );
    files.push(("ingress.yaml".into(), ingress("with-default", "", &spec)));
    pod.write_manifest("ingress.yaml", &files[2].1);
    pod.wait_for_service("web.example.com", "/app", "web").await;
    check(
        &pod,
        &[
            ("web.example.com", "/app", 200, Some("web")),
            ("web.example.com", "/other", 200, Some("fallback")),
            ("other.example.com", "/", 200, Some("fallback")),
        ],
    )
    .await;
}

async fn default_backend_service_flag(haproxy: HaproxyBinary) {
    let (_servers, files) = services(&["catchall"], 72).await;
    let pod = Pod::start_with(&haproxy, &file_refs(&files), |config| {
        config.model.default_backend_service = Some(ObjectKey::new("default", "catchall"));
    })
    .await;
    pod.wait_for_service("nothing.example.com", "/", "catchall")
        .await;
}

async fn service_ports_and_endpoints(haproxy: HaproxyBinary) {
    // A Service whose port 80 is named "web" and targets the pods' port (a different
    // number) through the EndpointSlice port of the same name.
    let pods = start_backends("named", 74, 3).await;
    let addrs: Vec<_> = pods.iter().map(|s| s.addr).collect();
    let mut slice = endpoint_slice("named", "web", &addrs);
    // The third endpoint is not ready; the second is terminating but still serving.
    slice = slice.replacen(
        &format!("- addresses: [\"{}\"]\n  conditions: {{ready: true}}", addrs[1].ip()),
        &format!(
            "- addresses: [\"{}\"]\n  conditions: {{ready: false, serving: true, terminating: true}}",
            addrs[1].ip()
        ),
        1,
    );
    slice = slice.replacen(
        &format!(
            "- addresses: [\"{}\"]\n  conditions: {{ready: true}}",
            addrs[2].ip()
        ),
        &format!(
            "- addresses: [\"{}\"]\n  conditions: {{ready: false}}",
            addrs[2].ip()
        ),
        1,
    );
    let named = format!("{}---\n{slice}", service("named", "web", 80));
    let empty = format!(
        "{}---\n{}",
        service("empty", "http", 80),
        endpoint_slice("empty", "http", &[])
    );
    let external = "apiVersion: v1\nkind: Service\nmetadata: {name: outside, namespace: default}\n\
        spec: {type: ExternalName, externalName: localhost, ports: [{port: 80}]}\n";
    let spec = "  rules:\n  - host: ports.example.com\n    http:\n      paths:\n\
         \x20     - {path: /by-name, pathType: Prefix, backend: {service: {name: named, port: {name: web}}}}\n\
         \x20     - {path: /by-number, pathType: Prefix, backend: {service: {name: named, port: {number: 80}}}}\n\
         \x20     - {path: /empty, pathType: Prefix, backend: {service: {name: empty, port: {number: 80}}}}\n\
         \x20     - {path: /outside, pathType: Prefix, backend: {service: {name: outside, port: {number: 80}}}}\n";
    let ingress_text = ingress("ports", "", spec);
    let pod = Pod::start(
        &haproxy,
        &[
            ("named.yaml", &named),
            ("empty.yaml", &empty),
            ("outside.yaml", external),
            ("ingress.yaml", &ingress_text),
        ],
    )
    .await;
    pod.wait_for_service("ports.example.com", "/by-name", "named")
        .await;
    let mut seen = BTreeSet::new();
    for path in ["/by-name", "/by-number"].into_iter().cycle().take(20) {
        let reply = pod.get("ports.example.com", path).await.expect("GET");
        assert_eq!(reply.status, 200, "{path}: {reply:?}");
        seen.insert(reply.endpoint().expect("endpoint").to_string());
    }
    // Only the ready endpoint gets new requests.
    assert_eq!(seen, BTreeSet::from([addrs[0].to_string()]));
    check(
        &pod,
        &[
            // No ready endpoint: 503.
            ("ports.example.com", "/empty", 503, None),
            // ExternalName is off unless the operator allows it.
            ("ports.example.com", "/outside", 503, None),
        ],
    )
    .await;
    let problems = pod.status.borrow().problems.clone();
    assert!(
        problems
            .iter()
            .any(|p| p.reason == ProblemReason::NotAllowed
                && p.message.contains("--allow-external-name")),
        "{problems:?}"
    );
}

async fn external_name_only_when_allowed(haproxy: HaproxyBinary) {
    let outside = EchoServer::start("outside", "127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("echo");
    let external = format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: outside, namespace: default}}\n\
         spec: {{type: ExternalName, externalName: localhost, ports: [{{port: {}}}]}}\n",
        outside.addr.port()
    );
    let spec = format!(
        "  rules:\n  - host: ext.example.com\n    http:\n      paths:\n\
         \x20     - {{path: /, pathType: Prefix, backend: {{service: {{name: outside, port: {{number: {}}}}}}}}}\n",
        outside.addr.port()
    );
    let ingress_text = ingress("ext", "", &spec);
    let pod = Pod::start_with(
        &haproxy,
        &[("outside.yaml", &external), ("ingress.yaml", &ingress_text)],
        |config| config.model.allow_external_name = true,
    )
    .await;
    pod.wait_for_service("ext.example.com", "/", "outside")
        .await;
}

async fn ten_endpoints_all_receive_traffic(haproxy: HaproxyBinary) {
    let pods = start_backends("ten", 76, 10).await;
    let spec = rules(&[rule(Some("ten.example.com"), &[("/", "Prefix", "ten")])]);
    let ingress_text = ingress("ten", "", &spec);
    let pod = Pod::start(
        &haproxy,
        &[
            ("ten.yaml", &service_with_endpoints("ten", &pods)),
            ("ingress.yaml", &ingress_text),
        ],
    )
    .await;
    pod.wait_for_service("ten.example.com", "/", "ten").await;
    let mut seen = BTreeSet::new();
    for _ in 0..40 {
        let reply = pod.get("ten.example.com", "/").await.expect("GET");
        assert_eq!(reply.status, 200);
        seen.insert(reply.endpoint().expect("endpoint").to_string());
    }
    let all: BTreeSet<String> = pods.iter().map(|s| s.addr.to_string()).collect();
    assert_eq!(seen, all);
}

/// The DER of the controller's own certificate, as stored in the lib folder.
fn fallback_der(pod: &Pod) -> Vec<u8> {
    let text = std::fs::read_to_string(pod.haproxy.lib_dir.join(".tugboat-fallback.pem"))
        .expect("fallback certificate");
    let start = text
        .find("-----BEGIN CERTIFICATE-----")
        .expect("certificate");
    let end = text
        .find("-----END CERTIFICATE-----")
        .expect("certificate end")
        + "-----END CERTIFICATE-----".len();
    der::pem::decode_vec(&text.as_bytes()[start..end])
        .expect("PEM")
        .1
}

fn tls_section(entries: &[(&[&str], &str)]) -> String {
    let mut out = String::from("  tls:\n");
    for (hosts, secret) in entries {
        out.push_str(&format!(
            "  - hosts: [{}]\n    secretName: {secret}\n",
            hosts
                .iter()
                .map(|h| format!("\"{h}\""))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    out
}

async fn tls_by_sni_with_default_certificate_alpn_and_redirect(haproxy: HaproxyBinary) {
    let (_servers, mut files) = services(&["secure", "wild", "plain"], 80).await;
    let (a_cert, a_key, a_der) = certificate(&["secure.example.com"], false);
    let (w_cert, w_key, w_der) = certificate(&["*.wild.example.com"], false);
    files.push(("a-tls.yaml".into(), tls_secret("a-tls", &a_cert, &a_key)));
    files.push(("w-tls.yaml".into(), tls_secret("w-tls", &w_cert, &w_key)));
    let spec = format!(
        "{}{}",
        tls_section(&[
            (&["secure.example.com"], "a-tls"),
            (&["*.wild.example.com"], "w-tls")
        ]),
        rules(&[
            rule(Some("secure.example.com"), &[("/", "Prefix", "secure")]),
            rule(Some("*.wild.example.com"), &[("/", "Prefix", "wild")]),
            rule(Some("plain.example.com"), &[("/", "Prefix", "plain")]),
        ])
    );
    files.push(("ingress.yaml".into(), ingress("tls", "", &spec)));
    let pod = Pod::start(&haproxy, &file_refs(&files)).await;
    pod.wait_for_service("plain.example.com", "/", "plain")
        .await;
    let https = pod.haproxy.https_addr();
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
    let fallback = fallback_der(&pod);
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
    let redirect = pod
        .get("secure.example.com", "/path?q=1")
        .await
        .expect("GET");
    assert_eq!(redirect.status, 308, "{redirect:?}");
    assert_eq!(
        redirect.header("location"),
        Some("https://secure.example.com/path?q=1")
    );
    let wild_redirect = pod.get("b.wild.example.com", "/").await.expect("GET");
    assert_eq!(wild_redirect.status, 308);
    check(&pod, &[("plain.example.com", "/", 200, Some("plain"))]).await;
}

async fn invalid_tls_secrets_fall_back_to_the_default_certificate(haproxy: HaproxyBinary) {
    let (_servers, mut files) = services(&["good", "expired", "mismatch", "missing"], 84).await;
    let (good_cert, good_key, good_der) = certificate(&["good.example.com"], false);
    let (old_cert, old_key, _) = certificate(&["expired.example.com"], true);
    let (mis_cert, _, _) = certificate(&["mismatch.example.com"], false);
    let (_, other_key, _) = certificate(&["other.example.com"], false);
    files.push((
        "good-tls.yaml".into(),
        tls_secret("good-tls", &good_cert, &good_key),
    ));
    files.push((
        "expired-tls.yaml".into(),
        tls_secret("expired-tls", &old_cert, &old_key),
    ));
    files.push((
        "mismatch-tls.yaml".into(),
        tls_secret("mismatch-tls", &mis_cert, &other_key),
    ));
    let spec = format!(
        "{}{}",
        tls_section(&[
            (&["good.example.com"], "good-tls"),
            (&["expired.example.com"], "expired-tls"),
            (&["mismatch.example.com"], "mismatch-tls"),
            (&["missing.example.com"], "missing-tls"),
        ]),
        rules(&[
            rule(Some("good.example.com"), &[("/", "Prefix", "good")]),
            rule(Some("expired.example.com"), &[("/", "Prefix", "expired")]),
            rule(Some("mismatch.example.com"), &[("/", "Prefix", "mismatch")]),
            rule(Some("missing.example.com"), &[("/", "Prefix", "missing")]),
        ])
    );
    files.push(("ingress.yaml".into(), ingress("tls", "", &spec)));
    let pod = Pod::start(&haproxy, &file_refs(&files)).await;
    pod.wait_for_status("good.example.com", "/", 308).await;
    let https = pod.haproxy.https_addr();
    let h1: &[&[u8]] = &[b"http/1.1"];
    let fallback = fallback_der(&pod);
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
    let problems = pod.status.borrow().problems.clone();
    let reasons: BTreeSet<(String, ProblemReason)> = problems
        .iter()
        .map(|p| (p.field.clone(), p.reason))
        .collect();
    for expected in [
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
    ] {
        assert!(reasons.contains(&expected), "{expected:?} in {problems:?}");
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
}

async fn default_ssl_certificate_flag_and_redirect_off(haproxy: HaproxyBinary) {
    let (_servers, mut files) = services(&["site"], 90).await;
    let (default_cert, default_key, default_der) = certificate(&["default.example.com"], false);
    files.push((
        "default-tls.yaml".into(),
        tls_secret("default-tls", &default_cert, &default_key),
    ));
    let spec = format!(
        "{}{}",
        tls_section(&[(&["site.example.com"], "")]),
        rules(&[rule(Some("site.example.com"), &[("/", "Prefix", "site")])])
    );
    files.push(("ingress.yaml".into(), ingress("site", "", &spec)));
    let pod = Pod::start_with(&haproxy, &file_refs(&files), |config| {
        config.model.default_certificate = Some(ObjectKey::new("default", "default-tls"));
        config.model.ssl_redirect = false;
    })
    .await;
    // No redirect: plain HTTP is served.
    pod.wait_for_service("site.example.com", "/", "site").await;
    let tls = exchange(
        pod.haproxy.https_addr(),
        "site.example.com",
        "/",
        &[b"http/1.1"],
    )
    .await
    .expect("TLS");
    assert_eq!(tls.certificate, default_der);
    assert_eq!(tls.reply.expect("answer").service(), Some("site"));
}

async fn error_pages_from_a_config_map(haproxy: HaproxyBinary) {
    let (_servers, mut files) = services(&["web"], 92).await;
    let pages = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: pages, namespace: default}\n\
        data:\n  \"404\": \"<h1>Nothing here</h1>\"\n  \"503\": \"<h1>Back soon</h1>\"\n  \"999\": nope\n";
    files.push(("pages.yaml".into(), pages.to_string()));
    let empty = format!(
        "{}---\n{}",
        service("empty", "http", 80),
        endpoint_slice("empty", "http", &[])
    );
    files.push(("empty.yaml".into(), empty));
    let spec = rules(&[rule(
        Some("pages.example.com"),
        &[("/", "Prefix", "web"), ("/down", "Prefix", "empty")],
    )]);
    files.push(("ingress.yaml".into(), ingress("pages", "", &spec)));
    let pod = Pod::start_with(&haproxy, &file_refs(&files), |config| {
        config.model.error_pages = Some(ObjectKey::new("default", "pages"));
    })
    .await;
    pod.wait_for_service("pages.example.com", "/", "web").await;
    let missing = pod.get("nowhere.example.com", "/").await.expect("GET");
    assert_eq!(missing.status, 404);
    assert_eq!(missing.body, "<h1>Nothing here</h1>");
    let down = pod.get("pages.example.com", "/down").await.expect("GET");
    assert_eq!(down.status, 503);
    assert_eq!(down.body, "<h1>Back soon</h1>");
    let problems = pod.status.borrow().problems.clone();
    assert!(
        problems.iter().any(|p| p.field == "data.999"),
        "{problems:?}"
    );
}

async fn certificates_change_without_reload(haproxy: HaproxyBinary) {
    let (_servers, mut files) = services(&["site", "extra"], 94).await;
    let (cert1, key1, der1) = certificate(&["site.example.com"], false);
    files.push((
        "site-tls.yaml".into(),
        tls_secret("site-tls", &cert1, &key1),
    ));
    let spec = |with_extra: bool| {
        let mut tls = vec![(&["site.example.com"][..], "site-tls")];
        if with_extra {
            tls.push((&["extra.example.com"][..], "extra-tls"));
        }
        format!(
            "{}{}",
            tls_section(&tls),
            rules(&[
                rule(Some("site.example.com"), &[("/", "Prefix", "site")]),
                rule(Some("extra.example.com"), &[("/", "Prefix", "extra")]),
            ])
        )
    };
    files.push(("ingress.yaml".into(), ingress("site", "", &spec(false))));
    let pod = Pod::start(&haproxy, &file_refs(&files)).await;
    pod.wait_for_status("site.example.com", "/", 308).await;
    let https = pod.haproxy.https_addr();
    let served = |sni: &'static str| async move {
        exchange(https, sni, "/", &[b"http/1.1"])
            .await
            .expect("TLS")
            .certificate
    };
    assert_eq!(served("site.example.com").await, der1);
    let before = pod.haproxy.show_proc().await;

    // Rotation: the same Secret gets a new certificate.
    let (cert2, key2, der2) = certificate(&["site.example.com"], false);
    pod.write_manifest("site-tls.yaml", &tls_secret("site-tls", &cert2, &key2));
    eventually(
        "the rotated certificate",
        Duration::from_secs(10),
        || async { (served("site.example.com").await == der2).then_some(()) },
    )
    .await;

    // A new TLS host with its own Secret.
    let (cert3, key3, der3) = certificate(&["extra.example.com"], false);
    pod.write_manifest("extra-tls.yaml", &tls_secret("extra-tls", &cert3, &key3));
    pod.write_manifest("ingress.yaml", &ingress("site", "", &spec(true)));
    eventually(
        "the new host's certificate",
        Duration::from_secs(10),
        || async { (served("extra.example.com").await == der3).then_some(()) },
    )
    .await;
    pod.wait_for_status("extra.example.com", "/", 308).await;

    // The TLS host goes away: back to the default certificate, no redirect.
    pod.write_manifest("ingress.yaml", &ingress("site", "", &spec(false)));
    let fallback = fallback_der(&pod);
    eventually(
        "the default certificate again",
        Duration::from_secs(10),
        || async { (served("extra.example.com").await == fallback).then_some(()) },
    )
    .await;
    pod.wait_for_service("extra.example.com", "/", "extra")
        .await;

    let after = pod.haproxy.show_proc().await;
    assert_eq!(after.master_pid, before.master_pid);
    assert_eq!(
        after.reloads, before.reloads,
        "certificates changed without a reload"
    );
}
