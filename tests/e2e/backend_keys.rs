//! The backend keys of issue 7, end to end on real haproxy, from the manifests folder
//! and from the API: TLS to the servers (a verified certificate, a wrong CA, a client
//! certificate, HTTP/2 with and without TLS), health checks (a server that stops
//! answering and servers added at runtime are taken out), cookie persistence, raw
//! snippets (off by default, checked, and a snippet haproxy refuses is left out while
//! the rest applies) and access lists kept in ConfigMaps. In API mode the problems are
//! also posted as Warning Events.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use der::Decode;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tugboat_model::problem::ProblemReason;
use tugboat_testkit::http::request;
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{
    mk_ca_secret, mk_config_map, mk_endpoint_slice, mk_ingress, mk_secret, mk_service,
    mk_tls_secret, to_json, with_annotations, with_keys,
};
use tugboat_testkit::tls::Authority;
use tugboat_testkit::{HaproxyBinary, Reply, Scene, Source, eventually, scene_tests};

scene_tests!(
    backend_tls_verification_client_certificates_and_h2,
    health_checks_take_failing_servers_out,
    health_checks_cover_servers_added_at_runtime,
    cookie_persistence_keeps_a_client_on_its_server,
    snippets_are_off_by_default_and_checked,
    a_snippet_haproxy_refuses_is_left_out_and_the_rest_applies,
    access_lists_from_configmaps,
);

/// `tugboat.dev/` keys: `(KEY, value)`.
type Keys<'a> = &'a [(&'a str, &'a str)];

/// Service `name` with the `tugboat.dev/` keys `keys`, port 80 named http, and its
/// EndpointSlice of `addrs`, as JSON.
fn service(name: &str, keys: Keys, addrs: &[SocketAddr]) -> [Value; 2] {
    [
        to_json(&with_keys(mk_service(name, "http", 80), keys)),
        to_json(&mk_endpoint_slice(name, "http", addrs)),
    ]
}

/// Ingress `name` routing `NAME.example.com` `/` to Service `name` port 80, as JSON.
fn route(name: &str) -> Value {
    to_json(&mk_ingress(name, &format!("{name}.example.com"), name))
}

/// Creates or replaces each of `objects`.
fn apply_all(pod: &Scene, objects: &[Value]) {
    for object in objects {
        pod.apply(object);
    }
}

/// In API mode, waits for the Warning Event with `reason` the leader posts on the
/// object `name` (a folder has nowhere to post one).
async fn expect_warning(pod: &Scene, name: &str, reason: ProblemReason) {
    let Some(api) = pod.api() else {
        return;
    };
    eventually(
        &format!("a {} Warning Event on {name}", reason.as_str()),
        Duration::from_secs(10),
        || async {
            api.list("Event")
                .into_iter()
                .any(|e| {
                    (e["regarding"]["name"] == name || e["involvedObject"]["name"] == name)
                        && e["type"] == "Warning"
                        && e["reason"] == reason.as_str()
                })
                .then_some(())
        },
    )
    .await;
}

/// `key=value` of a backend's body.
fn field<'a>(reply: &'a Reply, name: &str) -> Option<&'a str> {
    reply
        .body
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
}

async fn try_get(pod: &Scene, host: &str) -> Option<Reply> {
    request(pod.http_addr(), "GET", host, "/", &[]).await.ok()
}

async fn get(pod: &Scene, host: &str) -> Reply {
    request(pod.http_addr(), "GET", host, "/", &[])
        .await
        .expect("request through haproxy")
}

// ---- Certificates ----

/// A TLS server config with this certificate; client certificates signed by `clients`
/// are asked for, and required when `require`.
fn tls_config(
    cert_der: Vec<u8>,
    key_der: Vec<u8>,
    clients: &Authority,
    require: bool,
) -> ServerConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from(clients.der()))
        .expect("client CA");
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
    let verifier = if require {
        verifier.build()
    } else {
        verifier.allow_unauthenticated().build()
    }
    .expect("client verifier");
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocols")
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![CertificateDer::from(cert_der)],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key_der)),
        )
        .expect("server certificate");
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config
}

// ---- Backends ----

/// A backend that says what it saw:
/// `service=NAME proto=h1|h2 tls=yes|no alpn_h2=BOOL client=SUBJECT sni=NAME`.
/// With `tls`, it speaks TLS; it answers HTTP/1.1 or HTTP/2 (prior knowledge or ALPN).
struct ProtoBackend {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for ProtoBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn proto_backend(name: &str, tls: Option<ServerConfig>) -> ProtoBackend {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let acceptor = tls.map(|c| TlsAcceptor::from(Arc::new(c)));
    let name = name.to_string();
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (acceptor, name) = (acceptor.clone(), name.clone());
            tokio::spawn(async move {
                let work = async {
                    match acceptor {
                        None => answer(stream, &name, "no", "none", false, "none").await,
                        Some(acceptor) => {
                            let Ok(stream) = acceptor.accept(stream).await else {
                                return;
                            };
                            let (_, session) = stream.get_ref();
                            let client = session
                                .peer_certificates()
                                .and_then(|c| c.first())
                                .and_then(|c| x509_cert::Certificate::from_der(c).ok())
                                .map_or("none".to_string(), |c| {
                                    c.tbs_certificate().subject().to_string()
                                });
                            let h2 = session.alpn_protocol() == Some(b"h2");
                            let sni = session.server_name().unwrap_or("none").to_string();
                            answer(stream, &name, "yes", &client, h2, &sni).await;
                        }
                    }
                };
                let _ = tokio::time::timeout(Duration::from_secs(10), work).await;
            });
        }
    });
    ProtoBackend { addr, task }
}

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Answers one request on `stream`: HTTP/2 when ALPN said so or the client sends the
/// HTTP/2 preface, else HTTP/1.1.
async fn answer<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    name: &str,
    tls: &str,
    client: &str,
    alpn_h2: bool,
    sni: &str,
) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    // Enough to tell the preface from a request line, or a whole request head.
    while head.len() < H2_PREFACE.len()
        || (!head.starts_with(H2_PREFACE) && !head.windows(4).any(|w| w == b"\r\n\r\n"))
    {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.len() > 64 * 1024 {
            return;
        }
    }
    let h2 = head.starts_with(H2_PREFACE);
    let proto = if h2 { "h2" } else { "h1" };
    let body = format!(
        "service={name} proto={proto} tls={tls} alpn_h2={alpn_h2} client={client} sni={sni}\n"
    );
    if h2 {
        let _ = h2_answer(&mut stream, head.split_off(H2_PREFACE.len()), &body).await;
    } else {
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(response.as_bytes()).await;
        let _ = stream.shutdown().await;
    }
}

fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut frame = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    frame.extend_from_slice(&stream.to_be_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// The smallest HTTP/2 server that answers one request: settings, the ack of the
/// client's settings, and on the first HEADERS frame a 200 with `body`.
async fn h2_answer<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    mut pending: Vec<u8>,
    body: &str,
) -> std::io::Result<()> {
    stream.write_all(&h2_frame(0x4, 0, 0, &[])).await?;
    let mut buf = [0u8; 4096];
    for _ in 0..64 {
        while pending.len() >= 9 {
            let len = (usize::from(pending[0]) << 16)
                | (usize::from(pending[1]) << 8)
                | usize::from(pending[2]);
            if pending.len() < 9 + len {
                break;
            }
            let (kind, flags) = (pending[3], pending[4]);
            let stream_id =
                u32::from_be_bytes([pending[5], pending[6], pending[7], pending[8]]) & 0x7fff_ffff;
            pending.drain(..9 + len);
            if kind == 0x4 && flags & 0x1 == 0 {
                stream.write_all(&h2_frame(0x4, 0x1, 0, &[])).await?;
            }
            if kind == 0x1 {
                // :status 200 is entry 8 of HPACK's static table.
                stream
                    .write_all(&h2_frame(0x1, 0x4, stream_id, &[0x88]))
                    .await?;
                stream
                    .write_all(&h2_frame(0x0, 0x1, stream_id, body.as_bytes()))
                    .await?;
                stream.flush().await?;
                // Let the client read it before the connection goes.
                let _ = tokio::time::timeout(Duration::from_secs(2), stream.read(&mut buf)).await;
                return Ok(());
            }
        }
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        pending.extend_from_slice(&buf[..n]);
    }
    Ok(())
}

async fn backend_tls_verification_client_certificates_and_h2(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let servers_ca = Authority::new("servers-ca");
    let other_ca = Authority::new("other-ca");
    let clients_ca = Authority::new("clients-ca");
    let (_, _, server_der, server_key) = servers_ca.sign("backend.local");
    // A certificate for the name Tugboat sends by default: the Service's own.
    let (_, _, named_der, named_key) = servers_ca.sign("named.default.svc");
    let named = proto_backend(
        "named",
        Some(tls_config(named_der, named_key, &clients_ca, false)),
    )
    .await;
    let (client_pem, client_key_pem, _, _) = clients_ca.sign("tugboat-client");
    let mtls = proto_backend(
        "mtls",
        Some(tls_config(
            server_der.clone(),
            server_key.clone(),
            &clients_ca,
            true,
        )),
    )
    .await;
    let optional = proto_backend(
        "optional",
        Some(tls_config(server_der, server_key, &clients_ca, false)),
    )
    .await;
    let cleartext = proto_backend("cleartext", None).await;
    let mut objects = vec![
        to_json(&mk_ca_secret("servers-ca", &servers_ca.pem)),
        to_json(&mk_ca_secret("other-ca", &other_ca.pem)),
        to_json(&mk_tls_secret("client", &client_pem, &client_key_pem)),
    ];
    let services: [(&str, Keys, SocketAddr); 12] = [
        (
            "mtls",
            &[
                ("server-ssl", "true"),
                ("server-ca", "servers-ca"),
                ("server-ssl-name", "backend.local"),
                ("server-crt", "client"),
            ],
            mtls.addr,
        ),
        // The same server without a client certificate: its handshake fails.
        (
            "mtls-anonymous",
            &[
                ("server-ssl", "true"),
                ("server-ca", "servers-ca"),
                ("server-ssl-name", "backend.local"),
            ],
            mtls.addr,
        ),
        (
            "wrong-ca",
            &[
                ("server-ssl", "true"),
                ("server-ca", "other-ca"),
                ("server-ssl-name", "backend.local"),
            ],
            optional.addr,
        ),
        // The right CA, but the certificate is for another name than the Service's.
        (
            "wrong-name",
            &[("server-ssl", "true"), ("server-ca", "servers-ca")],
            optional.addr,
        ),
        // The Service's own name, sent and verified by default.
        (
            "named",
            &[("server-ssl", "true"), ("server-ca", "servers-ca")],
            named.addr,
        ),
        // Verification turned off: the CA is not even read.
        (
            "not-verified",
            &[
                ("server-ssl", "true"),
                ("server-ca", "no-such-secret"),
                ("server-verify", "false"),
            ],
            optional.addr,
        ),
        // Verification asked for without a CA: 503, never unverified traffic.
        (
            "verify-without-ca",
            &[("server-ssl", "true"), ("server-verify", "true")],
            optional.addr,
        ),
        ("unverified", &[("server-ssl", "true")], optional.addr),
        (
            "missing-ca",
            &[("server-ssl", "true"), ("server-ca", "no-such-secret")],
            optional.addr,
        ),
        (
            "h2-tls",
            &[
                ("server-ssl", "true"),
                ("server-ca", "servers-ca"),
                ("server-ssl-name", "backend.local"),
                ("server-proto", "h2"),
            ],
            optional.addr,
        ),
        ("h2c", &[("server-proto", "h2")], cleartext.addr),
        ("h1", &[], cleartext.addr),
    ];
    for (name, keys, addr) in services {
        objects.extend(service(name, keys, &[addr]));
        objects.push(route(name));
    }
    // ingress-nginx's keys on the Ingress: a Secret with the client certificate and
    // the CA, verification on, and the name to send and check.
    objects.push(to_json(&mk_secret(
        "nginx-proxy",
        "kubernetes.io/tls",
        &[
            ("tls.crt", client_pem.as_bytes()),
            ("tls.key", client_key_pem.as_bytes()),
            ("ca.crt", servers_ca.pem.as_bytes()),
        ],
    )));
    for (name, verify, server_name, addr) in [
        ("nginx-verified", "on", "backend.local", mtls.addr),
        ("nginx-unverified", "off", "backend.local", optional.addr),
        ("nginx-wrong-name", "on", "other.local", optional.addr),
    ] {
        objects.extend(service(name, &[], &[addr]));
        objects.push(to_json(&with_annotations(
            mk_ingress(name, &format!("{name}.example.com"), name),
            &[
                ("nginx.ingress.kubernetes.io/backend-protocol", "HTTPS"),
                (
                    "nginx.ingress.kubernetes.io/proxy-ssl-secret",
                    "default/nginx-proxy",
                ),
                ("nginx.ingress.kubernetes.io/proxy-ssl-verify", verify),
                ("nginx.ingress.kubernetes.io/proxy-ssl-name", server_name),
                ("nginx.ingress.kubernetes.io/proxy-ssl-server-name", "on"),
            ],
        )));
    }
    let pod = Scene::start(&haproxy, source, &objects).await;
    pod.wait_for_status("h1.example.com", "/", 200).await;
    for name in ["nginx-verified", "nginx-unverified"] {
        let reply = get(&pod, &format!("{name}.example.com")).await;
        assert_eq!(reply.status, 200, "{name}: {reply:?}");
        assert_eq!(
            field(&reply, "client"),
            Some("CN=tugboat-client"),
            "{reply:?}"
        );
        assert_eq!(field(&reply, "sni"), Some("backend.local"), "{reply:?}");
    }
    // Verification on, and the certificate is not for the name asked: refused.
    assert_eq!(get(&pod, "nginx-wrong-name.example.com").await.status, 503);
    assert!(
        !pod.status()
            .problems
            .iter()
            .any(|p| p.object.name.starts_with("nginx-")),
        "{:?}",
        pod.status().problems
    );

    // Verified with the right CA, client certificate presented.
    let reply = get(&pod, "mtls.example.com").await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(field(&reply, "tls"), Some("yes"), "{reply:?}");
    assert_eq!(
        field(&reply, "client"),
        Some("CN=tugboat-client"),
        "{reply:?}"
    );
    assert_eq!(field(&reply, "proto"), Some("h1"), "{reply:?}");
    // The backend requires a client certificate: without one, no answer (TLS 1.3 fails
    // the handshake after haproxy sent its request: 502).
    let status = get(&pod, "mtls-anonymous.example.com").await.status;
    assert!(matches!(status, 502 | 503), "{status}");
    // A CA that did not sign the backend's certificate: refused.
    assert_eq!(get(&pod, "wrong-ca.example.com").await.status, 503);
    assert_eq!(field(&reply, "sni"), Some("backend.local"), "{reply:?}");
    // The right CA, the wrong name: refused.
    assert_eq!(get(&pod, "wrong-name.example.com").await.status, 503);
    // By default the Service's own name is sent and verified.
    let reply = get(&pod, "named.example.com").await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(field(&reply, "sni"), Some("named.default.svc"), "{reply:?}");
    // Without server-ca: TLS, not verified, the Service's name as SNI.
    let reply = get(&pod, "unverified.example.com").await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(field(&reply, "tls"), Some("yes"));
    assert_eq!(field(&reply, "client"), Some("none"));
    assert_eq!(field(&reply, "sni"), Some("unverified.default.svc"));
    // server-verify: false: served without reading the CA; true without a CA: 503.
    let reply = get(&pod, "not-verified.example.com").await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(get(&pod, "verify-without-ca.example.com").await.status, 503);
    // A CA Secret that does not exist: 503 and a problem, never unverified traffic.
    assert_eq!(get(&pod, "missing-ca.example.com").await.status, 503);
    let problems = pod.status().problems;
    assert!(
        problems
            .iter()
            .any(|p| p.reason == ProblemReason::SecretNotFound
                && p.message.contains("no-such-secret")),
        "{problems:?}"
    );
    expect_warning(&pod, "missing-ca", ProblemReason::SecretNotFound).await;
    // HTTP/2 over TLS (ALPN) and in clear text (prior knowledge).
    let reply = get(&pod, "h2-tls.example.com").await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(field(&reply, "proto"), Some("h2"), "{reply:?}");
    assert_eq!(field(&reply, "alpn_h2"), Some("true"), "{reply:?}");
    let reply = get(&pod, "h2c.example.com").await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(field(&reply, "proto"), Some("h2"), "{reply:?}");
    assert_eq!(field(&reply, "tls"), Some("no"), "{reply:?}");
    assert_eq!(
        field(&get(&pod, "h1.example.com").await, "proto"),
        Some("h1")
    );

    // The key files are private.
    let client_file = pod.lib_dir.join("backend-tls/client_default_client.pem");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&client_file)
            .expect("client certificate file")
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
}

// ---- Health checks ----

/// An HTTP backend that answers 200 (`service=NAME endpoint=ADDR`) while healthy and
/// 500 once made sick, health checks included.
struct SwitchBackend {
    addr: SocketAddr,
    healthy: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl Drop for SwitchBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn switch_backend(name: &str, addr: SocketAddr, healthy: bool) -> SwitchBackend {
    let listener = TcpListener::bind(addr).await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let flag = Arc::new(AtomicBool::new(healthy));
    let (state, name) = (flag.clone(), name.to_string());
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                continue;
            };
            let (state, name) = (state.clone(), name.clone());
            tokio::spawn(async move {
                let work = async {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 2048];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let (status, body) = if state.load(Ordering::SeqCst) {
                        ("200 OK", format!("service={name} endpoint={addr}\n"))
                    } else {
                        (
                            "500 Internal Server Error",
                            format!("sick endpoint={addr}\n"),
                        )
                    };
                    let response = format!(
                        "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                };
                let _ = tokio::time::timeout(Duration::from_secs(5), work).await;
            });
        }
    });
    SwitchBackend {
        addr,
        healthy: flag,
        task,
    }
}

/// Server name -> (address, operational state: 0 down, 2 up) of a backend.
async fn server_states(pod: &Scene, backend: &str) -> BTreeMap<String, (String, u8)> {
    let answer = pod
        .cli()
        .command(&format!("@1 show servers state {backend}"))
        .await
        .expect("show servers state");
    answer
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let state = f.get(5)?.parse().ok()?;
            Some((f.get(3)?.to_string(), (f.get(4)?.to_string(), state)))
        })
        .collect()
}

/// Waits until the server at `ip` of `backend` has operational state `state`.
async fn wait_server_state(pod: &Scene, backend: &str, ip: &str, state: u8) {
    eventually(
        &format!("{backend} server at {ip} in state {state}"),
        Duration::from_secs(15),
        || async move {
            server_states(pod, backend)
                .await
                .values()
                .any(|(addr, s)| addr == ip && *s == state)
                .then_some(())
        },
    )
    .await;
}

const CHECKS: &[(&str, &str)] = &[("check-http", "/healthz"), ("check-interval", "200ms")];

async fn health_checks_take_failing_servers_out(haproxy: HaproxyBinary, source: Source) {
    let port = tugboat_testkit::free_port();
    let one = switch_backend("web", ([127, 0, 140, 1], port).into(), true).await;
    let two = switch_backend("web", ([127, 0, 140, 2], port).into(), true).await;
    let objects = [
        &service("web", CHECKS, &[one.addr, two.addr])[..],
        &[route("web")],
    ]
    .concat();
    let pod = Scene::start(&haproxy, source, &objects).await;
    pod.wait_for_status("web.example.com", "/", 200).await;
    wait_server_state(&pod, "default_web_80", "127.0.140.2", 2).await;
    // Both serve.
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..10 {
        let reply = get(&pod, "web.example.com").await;
        assert_eq!(reply.status, 200, "{reply:?}");
        seen.insert(field(&reply, "endpoint").map(str::to_string));
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
    // One stops answering well: its checks fail and it is taken out.
    two.healthy.store(false, Ordering::SeqCst);
    wait_server_state(&pod, "default_web_80", "127.0.140.2", 0).await;
    for _ in 0..20 {
        let reply = get(&pod, "web.example.com").await;
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(
            field(&reply, "endpoint"),
            Some(one.addr.to_string().as_str())
        );
    }
    // Healthy again: back in.
    two.healthy.store(true, Ordering::SeqCst);
    wait_server_state(&pod, "default_web_80", "127.0.140.2", 2).await;
    assert_parked_in_maintenance(&pod, "default_web_80").await;
    // An endpoint gone at runtime: its slot is parked in maintenance too.
    pod.apply(&mk_endpoint_slice("web", "http", &[one.addr]));
    eventually("the slot parked", Duration::from_secs(10), || async {
        (!server_states(&pod, "default_web_80")
            .await
            .values()
            .any(|(addr, _)| addr == "127.0.140.2"))
        .then_some(())
    })
    .await;
    assert_parked_in_maintenance(&pod, "default_web_80").await;
}

async fn health_checks_cover_servers_added_at_runtime(haproxy: HaproxyBinary, source: Source) {
    let port = tugboat_testkit::free_port();
    let good = switch_backend("web", ([127, 0, 141, 1], port).into(), true).await;
    let objects = [&service("web", CHECKS, &[good.addr])[..], &[route("web")]].concat();
    let pod = Scene::start(&haproxy, source, &objects).await;
    pod.wait_for_status("web.example.com", "/", 200).await;
    let reloads = pod.show_proc().await.reloads;
    // A sick endpoint into a free slot, and enough more to need `add server` (a fresh
    // backend of one endpoint has 8 slots): all sick.
    let mut sick = Vec::new();
    for host in 2..=10u8 {
        sick.push(switch_backend("web", ([127, 0, 141, host], port).into(), false).await);
    }
    let mut addrs = vec![good.addr];
    addrs.extend(sick.iter().map(|s| s.addr));
    pod.apply(&mk_endpoint_slice("web", "http", &addrs));
    let backend = "default_web_80";
    eventually("the new servers", Duration::from_secs(10), || async {
        (server_states(&pod, backend).await.len() >= 10).then_some(())
    })
    .await;
    assert_eq!(
        pod.show_proc().await.reloads,
        reloads,
        "the endpoints were added at runtime"
    );
    // Every sick one is checked, in a reused slot or an added server.
    for host in 2..=10u8 {
        wait_server_state(&pod, backend, &format!("127.0.141.{host}"), 0).await;
    }
    for _ in 0..20 {
        let reply = get(&pod, "web.example.com").await;
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(
            field(&reply, "endpoint"),
            Some(good.addr.to_string().as_str())
        );
    }
}

/// Free slots (parked on 127.0.0.1) are in maintenance (admin state), not merely down,
/// health checks or not.
async fn assert_parked_in_maintenance(pod: &Scene, backend: &str) {
    let answer = pod
        .cli()
        .command(&format!("@1 show servers state {backend}"))
        .await
        .expect("show servers state");
    let parked: Vec<&str> = answer
        .lines()
        .filter(|l| l.split_whitespace().nth(4) == Some("127.0.0.1"))
        .collect();
    assert!(!parked.is_empty(), "{answer}");
    assert!(
        parked
            .iter()
            .all(|l| l.split_whitespace().nth(6).is_some_and(|a| a != "0")),
        "{answer}"
    );
}

// ---- Cookie persistence ----

async fn cookie_persistence_keeps_a_client_on_its_server(haproxy: HaproxyBinary, source: Source) {
    let servers = start_backends("web", 142, 3).await;
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    let keys = [("cookie-persistence", "TUGBOAT")];
    let objects = [&service("web", &keys, &addrs)[..], &[route("web")]].concat();
    let pod = Scene::start(&haproxy, source, &objects).await;
    pod.wait_for_status("web.example.com", "/", 200).await;
    let first = get(&pod, "web.example.com").await;
    let cookie = first
        .header("set-cookie")
        .and_then(|c| c.split(';').next())
        .expect("a persistence cookie")
        .to_string();
    assert!(cookie.starts_with("TUGBOAT=s"), "{cookie}");
    let endpoint = first.endpoint().expect("endpoint").to_string();
    for _ in 0..10 {
        let reply = request(
            pod.http_addr(),
            "GET",
            "web.example.com",
            "/",
            &[("Cookie", &cookie)],
        )
        .await
        .expect("request");
        assert_eq!(reply.endpoint(), Some(endpoint.as_str()), "{reply:?}");
    }
    // Without the cookie, requests spread.
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..6 {
        seen.insert(
            get(&pod, "web.example.com")
                .await
                .endpoint()
                .map(str::to_string),
        );
    }
    assert_eq!(seen.len(), 3, "{seen:?}");
    // The client's endpoint goes away: the next request goes elsewhere, with a new cookie.
    let rest: Vec<SocketAddr> = addrs
        .iter()
        .copied()
        .filter(|a| a.to_string() != endpoint)
        .collect();
    pod.apply(&mk_endpoint_slice("web", "http", &rest));
    eventually(
        "the gone endpoint's clients moved",
        Duration::from_secs(10),
        || {
            let cookie = cookie.clone();
            let endpoint = endpoint.clone();
            let pod = &pod;
            async move {
                let reply = request(
                    pod.http_addr(),
                    "GET",
                    "web.example.com",
                    "/",
                    &[("Cookie", &cookie)],
                )
                .await
                .ok()?;
                let moved = reply.status == 200 && reply.endpoint() != Some(endpoint.as_str());
                let new_cookie = reply
                    .header("set-cookie")
                    .is_some_and(|c| !c.starts_with(&cookie));
                (moved && new_cookie).then_some(())
            }
        },
    )
    .await;
}

// ---- Snippets ----

async fn snippets_are_off_by_default_and_checked(haproxy: HaproxyBinary, source: Source) {
    let servers = start_backends("web", 143, 1).await;
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    let web = service(
        "web",
        &[(
            "backend-config-snippet",
            "http-response set-header X-Snippet yes",
        )],
        &addrs,
    );
    let objects = [&web[..], &[route("web")]].concat();
    // Off: not applied, and the Service is told.
    let pod = Scene::start(&haproxy, source, &objects).await;
    pod.wait_for_status("web.example.com", "/", 200).await;
    assert_eq!(get(&pod, "web.example.com").await.header("x-snippet"), None);
    let problems = pod.status().problems;
    assert!(
        problems
            .iter()
            .any(|p| p.reason == ProblemReason::NotAllowed
                && &*p.object.name == "web"
                && p.message.contains("--allow-snippets")),
        "{problems:?}"
    );
    expect_warning(&pod, "web", ProblemReason::NotAllowed).await;
    drop(pod);

    // On: applied; a snippet that loads code is refused, naming the directive.
    let lua = service(
        "lua",
        &[(
            "backend-config-snippet",
            "http-response set-header X-A b\nlua-load /tmp/x.lua",
        )],
        &addrs,
    );
    let objects = [&objects[..], &lua, &[route("lua")]].concat();
    let pod = Scene::start_with(&haproxy, source, &objects, |c| {
        c.model.allow_snippets = true
    })
    .await;
    eventually("the snippet's header", Duration::from_secs(10), || async {
        let reply = try_get(&pod, "web.example.com").await?;
        (reply.header("x-snippet") == Some("yes")).then_some(())
    })
    .await;
    let reply = get(&pod, "lua.example.com").await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.header("x-a"),
        None,
        "a refused snippet is left out whole"
    );
    let problems = pod.status().problems;
    let refused = problems
        .iter()
        .find(|p| &*p.object.name == "lua" && p.message.contains("'lua-load'"))
        .unwrap_or_else(|| panic!("the refused snippet reported: {problems:?}"));
    expect_warning(&pod, "lua", refused.reason).await;
}

async fn a_snippet_haproxy_refuses_is_left_out_and_the_rest_applies(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let servers = start_backends("web", 144, 1).await;
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    let web = service(
        "web",
        &[(
            "backend-config-snippet",
            "http-response set-header X-Snippet good",
        )],
        &addrs,
    );
    let objects = [&web[..], &[route("web")]].concat();
    let pod = Scene::start_with(&haproxy, source, &objects, |c| {
        c.model.allow_snippets = true
    })
    .await;
    eventually("the good snippet", Duration::from_secs(10), || async {
        (try_get(&pod, "web.example.com").await?.header("x-snippet") == Some("good")).then_some(())
    })
    .await;
    let good_config = tugboat_testkit::haproxy::read_config(&pod.config_dir).expect("config");

    // A snippet haproxy does not understand, and a new route in the same update.
    let bad = service(
        "bad",
        &[("backend-config-snippet", "no-such-directive 1")],
        &addrs,
    );
    apply_all(&pod, &bad);
    pod.apply(&route("bad"));
    // The refusal is reported on the Service (with haproxy's words where its master
    // socket gives them: 2.7 on)...
    let cause = if haproxy.series == "2.6" {
        "see the haproxy container's log"
    } else {
        "no-such-directive"
    };
    eventually(
        "the refusal as a problem",
        Duration::from_secs(15),
        || async {
            pod.status()
                .problems
                .iter()
                .any(|p| {
                    &*p.object.name == "bad"
                        && p.message.contains("haproxy refused")
                        && p.message.contains(cause)
                })
                .then_some(())
        },
    )
    .await;
    // ...and the rest is applied: the new route works, without the snippet.
    pod.wait_for_status("bad.example.com", "/", 200).await;
    assert_eq!(
        get(&pod, "web.example.com").await.header("x-snippet"),
        Some("good")
    );
    let now = tugboat_testkit::haproxy::read_config(&pod.config_dir).expect("config");
    assert!(!now.contains("no-such-directive"), "{now}");
    assert_ne!(now, good_config);
    // haproxy counts failed reloads since its last good one: where the new backend
    // without the snippet went in at runtime (3.4), the refused reload is the last.
    let refused_reloads_left =
        u64::from(tugboat_haproxy::supports_dynamic_backends(&haproxy.series));
    assert_eq!(pod.show_proc().await.failed_reloads, refused_reloads_left);

    // Fixed: applied, and the problem is gone.
    apply_all(
        &pod,
        &service(
            "bad",
            &[(
                "backend-config-snippet",
                "http-response set-header X-Snippet fixed",
            )],
            &addrs,
        ),
    );
    eventually("the fixed snippet", Duration::from_secs(10), || async {
        (try_get(&pod, "bad.example.com").await?.header("x-snippet") == Some("fixed")).then_some(())
    })
    .await;
    let problems = pod.status().problems;
    assert!(
        !problems.iter().any(|p| &*p.object.name == "bad"),
        "{problems:?}"
    );
}

// ---- Access lists in ConfigMaps ----

async fn access_lists_from_configmaps(haproxy: HaproxyBinary, source: Source) {
    let servers = start_backends("web", 145, 1).await;
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    // 300 networks and addresses; the test client is 127.0.0.1.
    let mut others = String::from("# documentation networks\n");
    for i in 0..300u32 {
        others.push_str(&format!("198.{}.{}.0/24\n", 18 + i / 256, i % 256));
    }
    let with_loopback = format!("{others}127.0.0.0/8 # the tests\n");
    let mut objects = service("web", &[], &addrs).to_vec();
    for (name, list) in [
        ("others", others.as_str()),
        ("loopback", with_loopback.as_str()),
        ("broken", "10.0.0.1\nnot-an-address\n"),
    ] {
        objects.push(to_json(&mk_config_map(name, &[("list", list)])));
    }
    for (name, key, list) in [
        ("allowed", "allow-list", "loopback"),
        ("not-allowed", "allow-list", "others"),
        ("denied", "deny-list", "loopback"),
        ("not-denied", "deny-list", "others"),
        ("broken", "deny-list", "broken"),
    ] {
        let value = format!("configmap:{list}/list");
        let ingress = mk_ingress(name, &format!("{name}.example.com"), "web");
        objects.push(to_json(&with_keys(ingress, &[(key, &value)])));
    }
    let pod = Scene::start(&haproxy, source, &objects).await;
    pod.wait_for_status("allowed.example.com", "/", 200).await;
    assert_eq!(get(&pod, "not-allowed.example.com").await.status, 403);
    assert_eq!(get(&pod, "denied.example.com").await.status, 403);
    assert_eq!(get(&pod, "not-denied.example.com").await.status, 200);
    // A list that does not parse fails closed, with a problem naming the line.
    assert_eq!(get(&pod, "broken.example.com").await.status, 403);
    let problems = pod.status().problems;
    let broken = problems
        .iter()
        .find(|p| &*p.object.name == "broken" && p.message.contains("line 2"))
        .unwrap_or_else(|| panic!("the broken list reported: {problems:?}"));
    expect_warning(&pod, "broken", broken.reason).await;
    // Written as a pattern file with every entry.
    let file = pod.config_dir.join("patterns/default_others_list.lst");
    let text = std::fs::read_to_string(&file).expect("pattern file");
    assert_eq!(text.lines().count(), 300);
    // The list changes: the file follows (the client is now allowed).
    pod.apply(&mk_config_map("others", &[("list", &with_loopback)]));
    pod.wait_for_status("not-allowed.example.com", "/", 200)
        .await;
}
