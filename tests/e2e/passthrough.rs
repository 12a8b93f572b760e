//! TLS passthrough (`ssl-passthrough`), end to end on real haproxy from both sources: a
//! passthrough host's client meets the backend's own certificate and the backend sees
//! the client's SNI and ALPN, while a terminating host on the same HTTPS port gets
//! haproxy's certificate, its route and the client's own address (through the internal
//! hop's PROXY v2: X-Forwarded-For and an allow list). A passthrough host added and
//! removed for the same backend, and an endpoint that moves, cost no reload; a reload
//! with passthrough on costs no request, on new connections and on idle keep-alive
//! connections of the terminating path.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tugboat_testkit::http::read_answer;
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{
    mk_endpoint_slice, mk_ingress_with_rules, mk_rule, mk_service, mk_service_of, mk_tls_secret,
    prefix, to_json, with_annotations, with_tls,
};
use tugboat_testkit::tls::{TlsEchoServer, TlsExchange, certificate, connect, exchange};
use tugboat_testkit::{HaproxyBinary, Scene, Source, eventually, free_port, scene_tests};

scene_tests!(
    passthrough_and_terminating_hosts_share_the_https_port,
    a_reload_with_passthrough_costs_no_request
);

/// The passthrough Ingress' host (ingress-nginx's spelling of the key).
const PASSTHROUGH_HOST: &str = "cd.example.com";
/// A wildcard host added to the passthrough Ingress later.
const WILDCARD_HOST: &str = "*.apps.example.com";
/// A host terminated by haproxy, with a `spec.tls` certificate and an allow list of the
/// test's client only.
const TERMINATED_HOST: &str = "shop.example.com";
/// ALPN protocols the client offers: the first is one haproxy does not speak, so only a
/// backend that got the client's own ClientHello can report it.
const ALPN: &[&[u8]] = &[b"x-tugboat-test", b"http/1.1"];

/// A TLS echo backend for the passthrough Service, on 127.0.`net`.`host`.
async fn tls_backend(net: u8, host: u8) -> TlsEchoServer {
    for _attempt in 0..20 {
        let addr = SocketAddr::from(([127, 0, net, host], free_port()));
        if let Ok(server) =
            TlsEchoServer::start("argocd", &[PASSTHROUGH_HOST, WILDCARD_HOST], addr).await
        {
            return server;
        }
    }
    panic!("cannot start a TLS backend on 127.0.{net}.{host}");
}

/// Service `argocd` (port 443 named `https`) and its EndpointSlice of `backends`.
fn argocd_service(backends: &[&TlsEchoServer]) -> [Value; 2] {
    let addrs: Vec<SocketAddr> = backends.iter().map(|b| b.addr).collect();
    [
        to_json(&mk_service("argocd", "https", 443)),
        to_json(&mk_endpoint_slice("argocd", "https", &addrs)),
    ]
}

/// The passthrough Ingress of `hosts`, each `/` to `argocd` port 443, with
/// `force-ssl-redirect` (Argo CD's documented setup).
fn argocd_ingress(hosts: &[&str]) -> Value {
    let rules = hosts
        .iter()
        .map(|host| mk_rule(Some(host), &[prefix("/", "argocd").port(443)]))
        .collect();
    to_json(&with_annotations(
        mk_ingress_with_rules("argocd", rules),
        &[
            ("nginx.ingress.kubernetes.io/ssl-passthrough", "true"),
            ("nginx.ingress.kubernetes.io/force-ssl-redirect", "true"),
        ],
    ))
}

/// An exact host of the terminated Ingress under the passthrough wildcard: HTTP routing
/// prefers it to the wildcard, so its TLS is terminated too.
const TERMINATED_UNDER_WILDCARD: &str = "term.apps.example.com";

/// The terminated hosts' Ingress, with a certificate for one and an allow list of
/// 127.0.0.1 (the test's client) only.
fn shop_ingress() -> Value {
    let rules = [TERMINATED_HOST, TERMINATED_UNDER_WILDCARD]
        .iter()
        .map(|host| mk_rule(Some(host), &[prefix("/", "web")]))
        .collect();
    let ingress = with_tls(
        mk_ingress_with_rules("shop", rules),
        &[(&[TERMINATED_HOST], "shop-tls")],
    );
    to_json(&with_annotations(
        ingress,
        &[(
            "nginx.ingress.kubernetes.io/whitelist-source-range",
            "127.0.0.1/32",
        )],
    ))
}

/// A TLS exchange with `sni` through the scene's HTTPS port.
async fn tls_get(scene: &Scene, sni: &str) -> std::io::Result<TlsExchange> {
    exchange(scene.https_addr(), sni, "/", ALPN).await
}

/// `sni` reaches `backend` itself: its certificate, and the client's SNI and ALPN.
async fn assert_passed_through(scene: &Scene, sni: &str, backend: &TlsEchoServer) {
    let seen = tls_get(scene, sni).await.expect("TLS through passthrough");
    assert_eq!(
        seen.certificate, backend.certificate,
        "{sni}: not the backend's certificate"
    );
    let reply = seen.reply.expect("an HTTP/1.1 answer");
    assert_eq!(reply.status, 200, "{sni}: {reply:?}");
    for field in [
        format!("endpoint={}", backend.addr),
        format!("sni={sni}"),
        "alpn=x-tugboat-test,http/1.1".to_string(),
        "tls=backend".to_string(),
    ] {
        assert!(
            reply.body.contains(&field),
            "{sni}: no {field} in {reply:?}"
        );
    }
}

/// `sni` is terminated by haproxy: not `backend`'s certificate (haproxy's default, as
/// no certificate names it).
async fn assert_not_passed_through(scene: &Scene, sni: &str, backend: &TlsEchoServer) {
    let seen = tls_get(scene, sni)
        .await
        .expect("TLS terminated by haproxy");
    assert_ne!(
        seen.certificate, backend.certificate,
        "{sni} was passed through"
    );
}

/// Waits until `sni` reaches the backend at `endpoint`.
async fn wait_for_passthrough(scene: &Scene, sni: &str, endpoint: SocketAddr) {
    let wanted = format!("endpoint={endpoint}");
    eventually(
        &format!("{sni} passed through to {endpoint}"),
        Duration::from_secs(20),
        || async {
            let seen = tls_get(scene, sni).await.ok()?;
            seen.reply
                .filter(|reply| reply.body.contains(&wanted))
                .map(|_| ())
        },
    )
    .await;
}

async fn passthrough_and_terminating_hosts_share_the_https_port(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let first = tls_backend(250, 1).await;
    let web = start_backends("web", 251, 1).await;
    let (cert, key, shop_der) = certificate(&[TERMINATED_HOST], false);
    let mut objects = mk_service_of("web", &web).to_vec();
    objects.extend(argocd_service(&[&first]));
    objects.extend([
        to_json(&mk_tls_secret("shop-tls", &cert, &key)),
        shop_ingress(),
        argocd_ingress(&[PASSTHROUGH_HOST]),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    wait_for_passthrough(&scene, PASSTHROUGH_HOST, first.addr).await;
    assert_passed_through(&scene, PASSTHROUGH_HOST, &first).await;
    let problems = scene.status().problems;
    assert!(problems.is_empty(), "{problems:?}");

    // The terminated host on the same port: haproxy's certificate for it, its route,
    // and the client's own address through the hop (the allow list lets it in, and
    // the backend is told it).
    let seen = tls_get(&scene, TERMINATED_HOST).await.expect("TLS");
    assert_eq!(seen.certificate, shop_der);
    assert_eq!(seen.alpn.as_deref(), Some(&b"http/1.1"[..]));
    let reply = seen.reply.expect("an HTTP/1.1 answer");
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.service(), Some("web"), "{reply:?}");
    assert_eq!(
        reply.header("x-echo-req-forwarded-for"),
        Some("127.0.0.1"),
        "{reply:?}"
    );
    assert_eq!(reply.header("x-echo-req-forwarded-proto"), Some("https"));

    // Plain HTTP to the passthrough host follows its Ingress' keys: redirected.
    scene.assert_https_redirect(PASSTHROUGH_HOST, "/x").await;

    // A wildcard host for the same backend: a map update, no reload. One label
    // matches, two do not.
    let reloads = scene.reloads().await;
    scene.apply(&argocd_ingress(&[PASSTHROUGH_HOST, WILDCARD_HOST]));
    wait_for_passthrough(&scene, "x.apps.example.com", first.addr).await;
    assert_passed_through(&scene, "x.apps.example.com", &first).await;
    assert_not_passed_through(&scene, "a.b.apps.example.com", &first).await;
    let terminated = tls_get(&scene, TERMINATED_UNDER_WILDCARD)
        .await
        .expect("TLS terminated by haproxy");
    assert_ne!(terminated.certificate, first.certificate);
    let reply = terminated.reply.expect("an HTTP/1.1 answer");
    assert_eq!(reply.service(), Some("web"), "{reply:?}");
    assert_eq!(
        scene.reloads().await,
        reloads,
        "a passthrough host reloaded"
    );

    // The backend's endpoint moves: a runtime change of its server slots.
    let second = tls_backend(250, 2).await;
    for object in argocd_service(&[&second]) {
        scene.apply(&object);
    }
    wait_for_passthrough(&scene, PASSTHROUGH_HOST, second.addr).await;
    assert_passed_through(&scene, "y.apps.example.com", &second).await;
    assert_eq!(
        scene.reloads().await,
        reloads,
        "an endpoint change reloaded"
    );

    // The wildcard host removed again: a map update too.
    scene.apply(&argocd_ingress(&[PASSTHROUGH_HOST]));
    eventually(
        "the wildcard host terminated again",
        Duration::from_secs(20),
        || async {
            let seen = tls_get(&scene, "x.apps.example.com").await.ok()?;
            (seen.certificate != second.certificate).then_some(())
        },
    )
    .await;
    assert_passed_through(&scene, PASSTHROUGH_HOST, &second).await;
    assert_eq!(
        scene.reloads().await,
        reloads,
        "removing a passthrough host reloaded"
    );
}

/// Requests that keep going while haproxy reloads with passthrough on: each of
/// `TASKS` tasks sends new TLS connections, to the terminated and the passthrough host
/// in turn, until `stop`; the failures, with what failed.
const TASKS: usize = 4;
/// Idle keep-alive TLS connections on the terminating path across the reload.
const KEEP_ALIVE: usize = 20;

async fn a_reload_with_passthrough_costs_no_request(haproxy: HaproxyBinary, source: Source) {
    let backend = tls_backend(252, 1).await;
    let web = start_backends("web", 253, 1).await;
    let (cert, key, _) = certificate(&[TERMINATED_HOST], false);
    let mut objects = mk_service_of("web", &web).to_vec();
    objects.extend(argocd_service(&[&backend]));
    objects.extend([
        to_json(&mk_tls_secret("shop-tls", &cert, &key)),
        shop_ingress(),
        argocd_ingress(&[PASSTHROUGH_HOST]),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    wait_for_passthrough(&scene, PASSTHROUGH_HOST, backend.addr).await;
    let https = scene.https_addr();

    // Keep-alive TLS connections through the hop, each with one answer, then idle.
    let mut idle = Vec::with_capacity(KEEP_ALIVE);
    for _ in 0..KEEP_ALIVE {
        let mut tls = connect(https, TERMINATED_HOST, &[b"http/1.1"])
            .await
            .expect("TLS");
        send_get(&mut tls).await.expect("send");
        let reply = read_answer(&mut tls).await.expect("a first answer");
        assert_eq!(reply.service(), Some("web"), "{reply:?}");
        idle.push(tls);
    }

    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let stopped = stopped.clone();
        let backend_addr = backend.addr;
        tasks.push(tokio::spawn(async move {
            let mut failures = Vec::new();
            let mut sent = 0usize;
            while !*stopped.borrow() {
                let sni = if (task + sent).is_multiple_of(2) {
                    TERMINATED_HOST
                } else {
                    PASSTHROUGH_HOST
                };
                let ok = match exchange(https, sni, "/", ALPN).await {
                    Ok(TlsExchange {
                        reply: Some(reply), ..
                    }) => {
                        reply.status == 200
                            && (sni == TERMINATED_HOST
                                || reply.body.contains(&format!("endpoint={backend_addr}")))
                    }
                    _ => false,
                };
                if !ok {
                    failures.push(sni);
                }
                sent += 1;
            }
            (sent, failures)
        }));
    }

    // A new Service behind a new Ingress: a new backend, so a reload.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _other = scene
        .reload_with_a_new_service("other", "other.example.com", 254)
        .await;
    // Time for the old worker to act on its stop while the connections sit idle.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let _ = stop.send(true);
    let mut sent = 0;
    let mut failures = Vec::new();
    for task in tasks {
        let (count, failed) = task.await.expect("load task");
        sent += count;
        failures.extend(failed);
    }
    assert!(sent >= TASKS, "the load sent {sent} requests");
    assert!(
        failures.is_empty(),
        "{} of {sent} failed: {failures:?}",
        failures.len()
    );

    let mut answered = 0;
    for tls in &mut idle {
        if send_get(tls).await.is_ok()
            && read_answer(tls)
                .await
                .is_some_and(|reply| reply.status == 200 && reply.service() == Some("web"))
        {
            answered += 1;
        }
    }
    assert_eq!(
        answered, KEEP_ALIVE,
        "requests on idle keep-alive TLS connections answered across a reload"
    );
}

/// `GET /` for the terminated host on `stream`, keeping the connection open.
async fn send_get<S: tokio::io::AsyncWrite + Unpin>(stream: &mut S) -> std::io::Result<()> {
    let request = format!("GET / HTTP/1.1\r\nHost: {TERMINATED_HOST}\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    stream.flush().await
}
