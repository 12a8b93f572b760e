//! End to end on the Kubernetes API: the Secrets that keys name reach the controller
//! wherever the key is set. `auth-secret` and `server-ca` on a Service, and
//! `auth-secret` in the controller's ConfigMap, name Secrets that only the model's
//! reference list (`tugboat_model::references`) tells the API source to fetch.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tugboat_model::ObjectKey;
use tugboat_testkit::cluster_pod::{TUGBOAT_CLASS, options};
use tugboat_testkit::http::request;
use tugboat_testkit::manifests::{endpoint_slice, service, start_backends, yaml_string};
use tugboat_testkit::objects::{ANN_S3CRET, S3CRET_HASH, mk_secret};
use tugboat_testkit::tls::Authority;
use tugboat_testkit::{ClusterPod, FakeApiServer, HaproxyBinary, Reply, eventually, haproxy_tests};

haproxy_tests!(
    auth_secret_named_on_a_service_comes_from_the_api,
    auth_secret_named_in_the_config_map_comes_from_the_api,
    server_ca_named_on_a_service_comes_from_the_api,
);

/// A Service `name` of namespace `default` with `tugboat.dev/` annotations, port 80
/// named http, and its EndpointSlice of `addrs`.
fn annotated_service(name: &str, annotations: &[(&str, &str)], addrs: &[SocketAddr]) -> String {
    let mut block = String::new();
    if !annotations.is_empty() {
        block.push_str("  annotations:\n");
        for (key, value) in annotations {
            block.push_str(&format!("    tugboat.dev/{key}: {}\n", yaml_string(value)));
        }
    }
    let text = service(name, "http", 80).replacen(
        "  namespace: default\n",
        &format!("  namespace: default\n{block}"),
        1,
    );
    format!("{text}---\n{}", endpoint_slice(name, "http", addrs))
}

/// An Ingress of class `tugboat` routing `host` `/` to `service` port 80.
fn ingress(name: &str, host: &str, service: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  \
         namespace: default\nspec:\n  ingressClassName: tugboat\n  rules:\n  - host: {host}\n    \
         http:\n      paths:\n      - path: /\n        pathType: Prefix\n        backend:\n          \
         service: {{name: {service}, port: {{number: 80}}}}\n"
    )
}

async fn get(pod: &ClusterPod, host: &str, headers: &[(&str, &str)]) -> Reply {
    request(pod.haproxy.http_addr(), "GET", host, "/", headers)
        .await
        .expect("request through haproxy")
}

/// 401 without credentials, then (once the Secret is in) 200 with the right password
/// and 401 with a wrong one.
async fn expect_basic_auth(pod: &ClusterPod, host: &str) {
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

async fn auth_secret_named_on_a_service_comes_from_the_api(haproxy: HaproxyBinary) {
    let web = start_backends("web", 161, 1).await;
    let addrs: Vec<SocketAddr> = web.iter().map(|s| s.addr).collect();
    let server = FakeApiServer::start().await;
    server.apply_yaml(TUGBOAT_CLASS);
    server.apply_yaml(&annotated_service(
        "web",
        &[("auth-type", "basic-auth"), ("auth-secret", "users")],
        &addrs,
    ));
    let htpasswd = format!("ann:{S3CRET_HASH}\n");
    server.apply(&mk_secret(
        "users",
        "Opaque",
        &[("auth", htpasswd.as_bytes())],
    ));
    server.apply_yaml(&ingress("private", "private.example.com", "web"));
    let pod = ClusterPod::start(&haproxy, &server, options("pod-a")).await;
    expect_basic_auth(&pod, "private.example.com").await;
    let problems = pod.status.borrow().problems.clone();
    assert!(problems.is_empty(), "{problems:?}");
}

async fn auth_secret_named_in_the_config_map_comes_from_the_api(haproxy: HaproxyBinary) {
    let web = start_backends("web", 162, 1).await;
    let addrs: Vec<SocketAddr> = web.iter().map(|s| s.addr).collect();
    let server = FakeApiServer::start().await;
    server.apply_yaml(TUGBOAT_CLASS);
    server.apply_yaml(&annotated_service("web", &[], &addrs));
    // The controller's ConfigMap, in its own namespace, turns basic auth on for every
    // route; the Secret is looked up in the namespace of each route.
    server.apply_yaml(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: tugboat, namespace: tugboat-system}\n\
         data: {auth-type: basic-auth, auth-secret: users}\n",
    );
    let htpasswd = format!("ann:{S3CRET_HASH}\n");
    server.apply(&mk_secret(
        "users",
        "Opaque",
        &[("auth", htpasswd.as_bytes())],
    ));
    server.apply_yaml(&ingress("private", "private.example.com", "web"));
    let mut options = options("pod-a");
    options.source.settings.config_map = Some(ObjectKey::new("tugboat-system", "tugboat"));
    let pod = ClusterPod::start(&haproxy, &server, options).await;
    expect_basic_auth(&pod, "private.example.com").await;
}

async fn server_ca_named_on_a_service_comes_from_the_api(haproxy: HaproxyBinary) {
    let servers_ca = Authority::new("tugboat-servers-ca");
    let other_ca = Authority::new("another-ca");
    let backend = tls_backend("secure", &servers_ca).await;
    let server = FakeApiServer::start().await;
    server.apply_yaml(TUGBOAT_CLASS);
    server.apply(&mk_secret(
        "servers-ca",
        "Opaque",
        &[("ca.crt", servers_ca.pem.as_bytes())],
    ));
    server.apply(&mk_secret(
        "other-ca",
        "Opaque",
        &[("ca.crt", other_ca.pem.as_bytes())],
    ));
    server.apply_yaml(&annotated_service(
        "secure",
        &[("server-ssl", "true"), ("server-ca", "servers-ca")],
        &[backend.addr],
    ));
    // The same server checked against a CA that did not sign it: the CA is really used.
    server.apply_yaml(&annotated_service(
        "wrong-ca",
        &[("server-ssl", "true"), ("server-ca", "other-ca")],
        &[backend.addr],
    ));
    server.apply_yaml(&ingress("secure", "secure.example.com", "secure"));
    server.apply_yaml(&ingress("wrong-ca", "wrong-ca.example.com", "wrong-ca"));
    let pod = ClusterPod::start(&haproxy, &server, options("pod-a")).await;
    pod.wait_until_ready().await;
    let reply = eventually(
        "the backend verified with the CA from the API",
        Duration::from_secs(15),
        || async {
            let reply = get(&pod, "secure.example.com", &[]).await;
            (reply.status == 200).then_some(reply)
        },
    )
    .await;
    assert!(reply.body.contains("service=secure tls=yes"), "{reply:?}");
    assert_eq!(get(&pod, "wrong-ca.example.com", &[]).await.status, 503);
    let problems = pod.status.borrow().problems.clone();
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
