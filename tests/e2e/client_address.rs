//! The client's address behind forwarders (`use-forwarded-headers`, `proxy-real-ip-cidr`,
//! `compute-full-forwarded-for`), end to end on real haproxy from both sources: behind
//! a trusted forwarder the allow-list, the rate limit and the backend's X-Forwarded-For see the
//! address the forwarder gave, behind an untrusted one (and with the keys off) a header
//! the client wrote changes nothing, and haproxy's access log names the client the
//! forwarder gave. Likewise with `use-proxy-protocol`: a PROXY header (v1 or v2) from a
//! trusted peer names the client on the HTTP and HTTPS ports (also through TLS
//! passthrough's internal hop), one from an untrusted peer is not read as one; HAProxy
//! Technologies' `proxy-protocol` key names the trusted peers as theirs does. A
//! trusted forwarder that terminates TLS itself (`X-Forwarded-Proto: https`) gets no
//! HTTPS redirect (no loop); the same header from an untrusted peer is redirected.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use tugboat_model::ObjectKey;
use tugboat_testkit::http::{parse, request};
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{
    in_namespace, mk_config_map, mk_ingress_with_rules, mk_rule, mk_service_of, prefix, to_json,
    with_annotations, with_keys,
};
use tugboat_testkit::tls::exchange_over;
use tugboat_testkit::{HaproxyBinary, Reply, Scene, Source, eventually, scene_tests};

scene_tests!(
    forwarded_headers_from_trusted_peers_only,
    proxy_protocol_from_trusted_peers_only,
    https_redirect_trusts_a_forwarders_https_only
);

const HOST: &str = "client.example.com";
/// The address the forwarder names as the client, in the route's allow-list.
const CLIENT: &str = "203.0.113.9";

/// What one request with these headers gets: its status and the X-Forwarded-For values
/// the backend received (one per header line).
async fn ask(scene: &Scene, path: &str, headers: &[(&str, &str)]) -> (u16, Vec<String>) {
    try_ask(scene, path, headers).await.expect("request")
}

async fn try_ask(
    scene: &Scene,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<(u16, Vec<String>)> {
    let reply: Reply = request(scene.http_addr(), "GET", HOST, path, headers).await?;
    Ok((reply.status, forwarded_for(&reply)))
}

/// The X-Forwarded-For values the echo backend received (one per header line).
fn forwarded_for(reply: &Reply) -> Vec<String> {
    reply
        .headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("x-echo-req-forwarded-for"))
        .map(|(_, value)| value.clone())
        .collect()
}

/// Waits until haproxy's access log has a line for `path` naming `client` as the
/// client (httplog's `%ci:%cp`); fails with the lines of `path` it has.
async fn wait_for_log_line(scene: &Scene, path: &str, client: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let log = scene.log();
        let lines: Vec<&str> = log.lines().filter(|line| line.contains(path)).collect();
        let from_client = |line: &&str| {
            line.split_whitespace()
                .any(|field| field.starts_with(&format!("{client}:")))
        };
        if lines.iter().any(from_client) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no access log line of {path} from {client}; its lines:\n{}",
            lines.join("\n")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until a request with `headers` gets `expected` (the ConfigMap's change is a
/// reload).
async fn wait_for(scene: &Scene, path: &str, headers: &[(&str, &str)], expected: (u16, &[&str])) {
    eventually(
        &format!("{path} with {headers:?} -> {expected:?}"),
        Duration::from_secs(20),
        || async {
            let (status, forwarded) = try_ask(scene, path, headers).await.ok()?;
            (status == expected.0 && forwarded == expected.1).then_some(())
        },
    )
    .await;
}

async fn forwarded_headers_from_trusted_peers_only(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 140, 1).await;
    let config_map = |data: &[(&str, &str)]| in_namespace(mk_config_map("tugboat", data), "ops");
    let mut objects = mk_service_of("web", &web).to_vec();
    // The test client is 127.0.0.1: a trusted forwarder, with a second one at 10.0.0.0/8.
    let trusted = [
        ("use-forwarded-headers", "true"),
        ("proxy-real-ip-cidr", "127.0.0.0/8, 10.0.0.0/8"),
    ];
    objects.extend([
        to_json(&config_map(&trusted)),
        to_json(&with_keys(
            mk_ingress_with_rules(
                "listed",
                vec![mk_rule(Some(HOST), &[prefix("/listed", "web")])],
            ),
            &[("allow-list", "203.0.113.0/24")],
        )),
        to_json(&with_keys(
            mk_ingress_with_rules(
                "rated",
                vec![mk_rule(Some(HOST), &[prefix("/rated", "web")])],
            ),
            &[("rate-limit-requests", "2"), ("rate-limit-period", "10s")],
        )),
        to_json(&mk_ingress_with_rules(
            "site",
            vec![mk_rule(Some(HOST), &[prefix("/", "web")])],
        )),
    ]);
    let scene = Scene::start_with(&haproxy, source, &objects, |config| {
        config.model.config_map = Some(ObjectKey::new("ops", "tugboat"));
    })
    .await;
    let through_two = [("X-Forwarded-For", "198.51.100.1, 203.0.113.9, 10.1.2.3")];
    let spoofed = [("X-Forwarded-For", "203.0.113.9, 198.51.100.1")];

    // Behind trusted forwarders: the rightmost untrusted address is the client, for the
    // allow-list and the backend, whatever the client wrote on its left.
    wait_for(&scene, "/listed", &through_two, (200, &[CLIENT])).await;
    assert_eq!(
        ask(&scene, "/", &through_two).await,
        (200, vec![CLIENT.into()])
    );
    assert_eq!(ask(&scene, "/listed", &spoofed).await, (403, vec![]));
    // The access log names the client the forwarders gave, not the forwarder.
    ask(&scene, "/logged-through-two", &through_two).await;
    wait_for_log_line(&scene, "/logged-through-two", CLIENT).await;
    assert_eq!(
        ask(&scene, "/", &spoofed).await,
        (200, vec!["198.51.100.1".into()])
    );
    // The rate limit counts per forwarded client, not per forwarder.
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(
            ask(&scene, "/rated", &[("X-Forwarded-For", CLIENT)])
                .await
                .0,
        );
    }
    statuses.push(
        ask(&scene, "/rated", &[("X-Forwarded-For", "203.0.113.10")])
            .await
            .0,
    );
    assert_eq!(statuses, [200, 200, 429, 200]);
    // Something that is not an address ends the walk: the forwarder is the client.
    assert_eq!(
        ask(&scene, "/", &[("X-Forwarded-For", "203.0.113.9, unknown")]).await,
        (200, vec!["127.0.0.1".into()])
    );
    // X-Forwarded-Proto from a trusted forwarder reaches the backend.
    let reply = request(
        scene.http_addr(),
        "GET",
        HOST,
        "/",
        &[("X-Forwarded-Proto", "https")],
    )
    .await
    .expect("request");
    assert_eq!(reply.header("x-echo-req-forwarded-proto"), Some("https"));

    // compute-full-forwarded-for: the header is kept and the forwarder appended.
    scene.apply(&config_map(&[
        trusted[0],
        trusted[1],
        ("compute-full-forwarded-for", "true"),
    ]));
    wait_for(
        &scene,
        "/listed",
        &[("X-Forwarded-For", CLIENT)],
        (200, &[CLIENT, "127.0.0.1"]),
    )
    .await;

    // An untrusted peer: its header changes nothing, the peer is the client.
    scene.apply(&config_map(&[
        trusted[0],
        ("proxy-real-ip-cidr", "10.0.0.0/8"),
        ("compute-full-forwarded-for", "true"),
    ]));
    wait_for(
        &scene,
        "/",
        &[("X-Forwarded-For", CLIENT)],
        (200, &["127.0.0.1"]),
    )
    .await;
    assert_eq!(
        ask(&scene, "/listed", &[("X-Forwarded-For", CLIENT)]).await,
        (403, vec![])
    );
    let reply = request(
        scene.http_addr(),
        "GET",
        HOST,
        "/",
        &[("X-Forwarded-Proto", "https")],
    )
    .await
    .expect("request");
    assert_eq!(reply.header("x-echo-req-forwarded-proto"), Some("http"));

    // The keys off: the same, and a client's X-Forwarded-For is replaced, not appended to.
    scene.apply(&config_map(&[]));
    wait_for(
        &scene,
        "/",
        &[("X-Forwarded-For", "192.0.2.1, 203.0.113.9")],
        (200, &["127.0.0.1"]),
    )
    .await;
    assert_eq!(
        ask(&scene, "/listed", &[("X-Forwarded-For", CLIENT)]).await,
        (403, vec![])
    );

    // Trusting without naming forwarders trusts nobody (not ingress-nginx's 0.0.0.0/0).
    scene.apply(&config_map(&[("use-forwarded-headers", "true")]));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        ask(&scene, "/listed", &[("X-Forwarded-For", CLIENT)]).await,
        (403, vec![])
    );
}

/// The PROXY v1 line of a connection from `CLIENT`.
const PROXY_LINE: &[u8] = b"PROXY TCP4 203.0.113.9 127.0.0.1 40000 80\r\n";

/// The PROXY v2 header of the same connection: the signature, version 2 `PROXY`, TCP
/// over IPv4, 12 bytes of addresses (203.0.113.9, 127.0.0.1) and ports (40000, 80).
const PROXY_V2_HEADER: &[u8] = &[
    0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a, 0x21, 0x11, 0x00, 0x0c,
    203, 0, 113, 9, 127, 0, 0, 1, 0x9c, 0x40, 0x00, 0x50,
];

/// A plain HTTP request that starts with `PROXY_LINE`: the status and the backend's
/// X-Forwarded-For (`None`: the connection failed or the answer did not parse).
async fn ask_with_proxy_line(scene: &Scene, path: &str) -> Option<(u16, Vec<String>)> {
    ask_with_proxy_header(scene, path, PROXY_LINE).await
}

/// A plain HTTP request that starts with the PROXY header `header`.
async fn ask_with_proxy_header(
    scene: &Scene,
    path: &str,
    header: &[u8],
) -> Option<(u16, Vec<String>)> {
    let exchange = async {
        let mut stream = TcpStream::connect(scene.http_addr()).await?;
        stream.write_all(header).await?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        parse(&raw)
    };
    let reply = tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .ok()?
        .ok()?;
    Some((reply.status, forwarded_for(&reply)))
}

/// An HTTPS request that starts with `PROXY_LINE` before the TLS handshake.
async fn ask_tls_with_proxy_line(scene: &Scene, path: &str) -> Option<(u16, Vec<String>)> {
    ask_tls_with_proxy_header(scene, path, PROXY_LINE).await
}

/// An HTTPS request that starts with the PROXY header `header` before the handshake.
async fn ask_tls_with_proxy_header(
    scene: &Scene,
    path: &str,
    header: &[u8],
) -> Option<(u16, Vec<String>)> {
    let mut tcp = TcpStream::connect(scene.https_addr()).await.ok()?;
    tcp.write_all(header).await.ok()?;
    let exchange = exchange_over(tcp, HOST, path, &[b"http/1.1"]).await.ok()?;
    let reply = exchange.reply?;
    Some((reply.status, forwarded_for(&reply)))
}

async fn proxy_protocol_from_trusted_peers_only(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 141, 1).await;
    let config_map = |data: &[(&str, &str)]| in_namespace(mk_config_map("tugboat", data), "ops");
    let mut objects = mk_service_of("web", &web).to_vec();
    let trusted = [
        ("use-proxy-protocol", "true"),
        ("proxy-real-ip-cidr", "127.0.0.0/8"),
    ];
    objects.extend([
        to_json(&config_map(&trusted)),
        to_json(&with_keys(
            mk_ingress_with_rules(
                "listed",
                vec![mk_rule(Some(HOST), &[prefix("/listed", "web")])],
            ),
            &[("allow-list", "203.0.113.0/24")],
        )),
        to_json(&mk_ingress_with_rules(
            "site",
            vec![mk_rule(Some(HOST), &[prefix("/", "web")])],
        )),
    ]);
    let scene = Scene::start_with(&haproxy, source, &objects, |config| {
        config.model.config_map = Some(ObjectKey::new("ops", "tugboat"));
    })
    .await;
    let expected = Some((200, vec![CLIENT.to_string()]));

    // From a trusted peer: the PROXY line's source is the client, on both ports.
    eventually(
        "PROXY on the HTTP port",
        Duration::from_secs(20),
        || async { (ask_with_proxy_line(&scene, "/listed").await == expected).then_some(()) },
    )
    .await;
    // A client's X-Forwarded-For is replaced by the PROXY line's source.
    assert_eq!(
        ask_tls_with_proxy_line(&scene, "/listed").await,
        expected,
        "HTTPS"
    );
    // PROXY v2, the binary header load balancers send, on both ports; the access log
    // names the client it gives.
    assert_eq!(
        ask_with_proxy_header(&scene, "/listed/v2", PROXY_V2_HEADER).await,
        expected,
        "HTTP, PROXY v2"
    );
    assert_eq!(
        ask_tls_with_proxy_header(&scene, "/listed/v2-tls", PROXY_V2_HEADER).await,
        expected,
        "HTTPS, PROXY v2"
    );
    wait_for_log_line(&scene, "/listed/v2", CLIENT).await;

    // With TLS passthrough the HTTPS port is a TCP frontend: its hop to the terminating
    // frontend carries the PROXY line's source on.
    scene.apply(&with_keys(
        mk_ingress_with_rules(
            "passed",
            vec![mk_rule(Some("pass.example.com"), &[prefix("/", "web")])],
        ),
        &[("ssl-passthrough", "true")],
    ));
    // Passthrough is on once the passed host's TLS is no longer haproxy's (the echo
    // backend does not speak TLS).
    eventually("passthrough on", Duration::from_secs(20), || async {
        let mut tcp = TcpStream::connect(scene.https_addr()).await.ok()?;
        tcp.write_all(PROXY_LINE).await.ok()?;
        exchange_over(tcp, "pass.example.com", "/", &[b"http/1.1"])
            .await
            .is_err()
            .then_some(())
    })
    .await;
    eventually("PROXY through the hop", Duration::from_secs(20), || async {
        (ask_tls_with_proxy_line(&scene, "/listed").await == expected).then_some(())
    })
    .await;

    // From an untrusted peer a PROXY line is not one: it is a bad request, and the
    // peer is the client.
    scene.apply(&config_map(&[
        trusted[0],
        ("proxy-real-ip-cidr", "10.0.0.0/8"),
    ]));
    eventually(
        "PROXY from an untrusted peer",
        Duration::from_secs(20),
        || async {
            let refused = !matches!(ask_with_proxy_line(&scene, "/").await, Some((200, _)));
            let plain = try_ask(&scene, "/", &[]).await.ok()?;
            (refused && plain == (200, vec!["127.0.0.1".to_string()])).then_some(())
        },
    )
    .await;
    assert_eq!(ask(&scene, "/listed", &[]).await, (403, vec![]));
    assert!(!matches!(
        ask_tls_with_proxy_line(&scene, "/").await,
        Some((200, _))
    ));
    assert!(!matches!(
        ask_with_proxy_header(&scene, "/", PROXY_V2_HEADER).await,
        Some((200, _))
    ));

    // HAProxy Technologies' ConfigMap key: the peers it lists send PROXY.
    scene.apply(&config_map(&[("proxy-protocol", "127.0.0.0/8")]));
    eventually(
        "PROXY from the peers of haproxytech's proxy-protocol",
        Duration::from_secs(20),
        || async {
            (ask_with_proxy_header(&scene, "/listed", PROXY_V2_HEADER).await == expected)
                .then_some(())
        },
    )
    .await;
    assert_eq!(ask_with_proxy_line(&scene, "/listed").await, expected);
}

/// A plain HTTP request with `headers`: its status and `Location`.
async fn redirect_of(scene: &Scene, path: &str, headers: &[(&str, &str)]) -> (u16, Option<String>) {
    let reply = request(scene.http_addr(), "GET", HOST, path, headers)
        .await
        .expect("request");
    (reply.status, reply.header("location").map(str::to_string))
}

async fn https_redirect_trusts_a_forwarders_https_only(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 142, 1).await;
    let config_map = |data: &[(&str, &str)]| in_namespace(mk_config_map("tugboat", data), "ops");
    let mut objects = mk_service_of("web", &web).to_vec();
    // The test client is 127.0.0.1: a load balancer that terminates TLS itself.
    let trusted = [
        ("use-forwarded-headers", "true"),
        ("proxy-real-ip-cidr", "127.0.0.0/8"),
    ];
    objects.extend([
        to_json(&config_map(&trusted)),
        to_json(&with_annotations(
            mk_ingress_with_rules("forced", vec![mk_rule(Some(HOST), &[prefix("/", "web")])]),
            &[("nginx.ingress.kubernetes.io/force-ssl-redirect", "true")],
        )),
    ]);
    let scene = Scene::start_with(&haproxy, source, &objects, |config| {
        config.model.config_map = Some(ObjectKey::new("ops", "tugboat"));
    })
    .await;
    let https = [("X-Forwarded-Proto", "https")];
    let redirected = (308, Some(format!("https://{HOST}/page")));

    // The forwarder's HTTPS request is served, not redirected to itself again.
    wait_for(&scene, "/page", &https, (200, &["127.0.0.1"])).await;
    // Its plain HTTP, said or not, is redirected.
    assert_eq!(redirect_of(&scene, "/page", &[]).await, redirected);
    assert_eq!(
        redirect_of(&scene, "/page", &[("X-Forwarded-Proto", "http")]).await,
        redirected
    );

    // From a peer that is not a trusted forwarder, the header is not read: redirected.
    scene.apply(&config_map(&[
        trusted[0],
        ("proxy-real-ip-cidr", "10.0.0.0/8"),
    ]));
    eventually(
        "an untrusted peer's X-Forwarded-Proto redirected",
        Duration::from_secs(20),
        || async { (redirect_of(&scene, "/page", &https).await == redirected).then_some(()) },
    )
    .await;
    // Without the keys, likewise.
    scene.apply(&config_map(&[]));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(redirect_of(&scene, "/page", &https).await, redirected);
}
