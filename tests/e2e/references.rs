//! The Secrets that keys name reach the controller wherever the key is set:
//! `auth-secret` and `server-ca` on a Service, and `auth-secret` in the controller's
//! ConfigMap, name Secrets that only the model's reference list
//! (`tugboat_model::references`) tells a source to take: the API source fetches them,
//! the folder source keeps them out of the snapshot otherwise. Every scenario runs from
//! both sources.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tugboat_model::ObjectKey;
use tugboat_testkit::http::request;
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{
    ANN_S3CRET, S3CRET_HASH, in_namespace, mk_basic_auth_secret, mk_ca_secret, mk_config_map,
    mk_endpoint_slice, mk_ingress, mk_service, mk_service_of, to_json, with_keys,
};
use tugboat_testkit::tls::Authority;
use tugboat_testkit::{HaproxyBinary, Reply, Scene, Source, eventually, scene_tests};

scene_tests!(
    auth_secret_named_on_a_service_reaches_the_controller,
    auth_secret_named_in_the_config_map_reaches_the_controller,
    server_ca_named_on_a_service_reaches_the_controller,
);

/// Service `name` with the `tugboat.dev/` keys `keys`, port 80 named http, and its
/// EndpointSlice of `addrs`, as JSON.
fn service(name: &str, keys: &[(&str, &str)], addrs: &[SocketAddr]) -> [Value; 2] {
    [
        to_json(&with_keys(mk_service(name, "http", 80), keys)),
        to_json(&mk_endpoint_slice(name, "http", addrs)),
    ]
}

async fn get(pod: &Scene, host: &str, headers: &[(&str, &str)]) -> Reply {
    request(pod.http_addr(), "GET", host, "/", headers)
        .await
        .expect("request through haproxy")
}

/// 401 without credentials, then (once the Secret is in) 200 with the right password
/// and 401 with a wrong one.
async fn expect_basic_auth(pod: &Scene, host: &str) {
    pod.wait_for_status(host, "/", 401).await;
    let authorized = eventually(
        "the right password accepted",
        Duration::from_secs(10),
        || async {
            let reply = get(pod, host, &[("Authorization", ANN_S3CRET)]).await;
            (reply.status == 200).then_some(reply)
        },
    )
    .await;
    assert!(authorized.body.contains("service=web"), "{authorized:?}");
    // `ann:wrong`
    let wrong = get(pod, host, &[("Authorization", "Basic YW5uOndyb25n")]).await;
    assert_eq!(wrong.status, 401, "{wrong:?}");
    assert_eq!(get(pod, host, &[]).await.status, 401);
}

async fn auth_secret_named_on_a_service_reaches_the_controller(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = start_backends("web", 161, 1).await;
    let addrs: Vec<SocketAddr> = web.iter().map(|s| s.addr).collect();
    let objects = [
        &service(
            "web",
            &[("auth-type", "basic-auth"), ("auth-secret", "users")],
            &addrs,
        )[..],
        &[
            to_json(&mk_basic_auth_secret("users", &[("ann", S3CRET_HASH)])),
            to_json(&mk_ingress("private", "private.example.com", "web")),
        ],
    ]
    .concat();
    let pod = Scene::start(&haproxy, source, &objects).await;
    expect_basic_auth(&pod, "private.example.com").await;
    let problems = pod.status().problems;
    assert!(problems.is_empty(), "{problems:?}");
}

async fn auth_secret_named_in_the_config_map_reaches_the_controller(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = start_backends("web", 162, 1).await;
    // The controller's ConfigMap, in its own namespace, turns basic auth on for every
    // route; the Secret is looked up in the namespace of each route.
    let settings = in_namespace(
        mk_config_map(
            "tugboat",
            &[("auth-type", "basic-auth"), ("auth-secret", "users")],
        ),
        "tugboat-system",
    );
    let objects = [
        &mk_service_of("web", &web)[..],
        &[
            to_json(&settings),
            to_json(&mk_basic_auth_secret("users", &[("ann", S3CRET_HASH)])),
            to_json(&mk_ingress("private", "private.example.com", "web")),
        ],
    ]
    .concat();
    let pod = Scene::start_with(&haproxy, source, &objects, |config| {
        config.model.config_map = Some(ObjectKey::new("tugboat-system", "tugboat"));
    })
    .await;
    expect_basic_auth(&pod, "private.example.com").await;
}

async fn server_ca_named_on_a_service_reaches_the_controller(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let servers_ca = Authority::new("tugboat-servers-ca");
    let other_ca = Authority::new("another-ca");
    let backend = tls_backend("secure", &servers_ca).await;
    let objects = [
        &service(
            "secure",
            // The backend's certificate is for the name `secure`.
            &[
                ("server-ssl", "true"),
                ("server-ca", "servers-ca"),
                ("server-ssl-name", "secure"),
            ],
            &[backend.addr],
        )[..],
        // The same server checked against a CA that did not sign it: the CA is really
        // used.
        &service(
            "wrong-ca",
            &[("server-ssl", "true"), ("server-ca", "other-ca")],
            &[backend.addr],
        ),
        &[
            to_json(&mk_ca_secret("servers-ca", &servers_ca.pem)),
            to_json(&mk_ca_secret("other-ca", &other_ca.pem)),
            to_json(&mk_ingress("secure", "secure.example.com", "secure")),
            to_json(&mk_ingress("wrong-ca", "wrong-ca.example.com", "wrong-ca")),
        ],
    ]
    .concat();
    let pod = Scene::start(&haproxy, source, &objects).await;
    pod.wait_until_ready().await;
    let reply = eventually(
        "the backend verified with the named CA",
        Duration::from_secs(15),
        || async {
            let reply = get(&pod, "secure.example.com", &[]).await;
            (reply.status == 200).then_some(reply)
        },
    )
    .await;
    assert!(reply.body.contains("service=secure tls=yes"), "{reply:?}");
    assert_eq!(get(&pod, "wrong-ca.example.com", &[]).await.status, 503);
    let problems = pod.status().problems;
    assert!(
        !problems.iter().any(|p| p.message.contains("servers-ca")),
        "{problems:?}"
    );
}

// ---- A TLS backend ----

/// A backend that speaks TLS with a certificate `ca` signed, and answers every
/// HTTP/1.1 request with `service=NAME tls=yes`.
struct TlsBackend {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for TlsBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn tls_backend(name: &str, ca: &Authority) -> TlsBackend {
    let (_, _, cert, key) = ca.sign(name);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocols")
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(cert)],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)),
        )
        .expect("server certificate");
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let body = format!("service={name} tls=yes\n");
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (acceptor, body) = (acceptor.clone(), body.clone());
            tokio::spawn(async move {
                let work = async {
                    let Ok(mut stream) = acceptor.accept(stream).await else {
                        return;
                    };
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\
                         connection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                };
                let _ = tokio::time::timeout(Duration::from_secs(10), work).await;
            });
        }
    });
    TlsBackend { addr, task }
}
