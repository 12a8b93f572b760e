//! An echo backend: answers every request with the service name and endpoint it was
//! started with, and the host, path and query it received (as they came on the wire),
//! so a test can tell who answered and what reached the backend. A request header
//! `x-delay-ms: N` makes it wait N ms (at most 30 s) before answering, for requests
//! that are still in flight when something stops; `x-echo-status: N` (100 to 599)
//! makes it answer with that status, for a backend that fails. It reads the whole
//! request body before answering and tells its length and digest
//! (`x-echo-body-length`, `x-echo-body-digest`, see [`body_digest`]); the largest body
//! it received whole is kept ([`EchoServer::largest_body`]). Request headers `x-*` come
//! back as `x-echo-req-*`, and ingress-nginx's `ssl-client-*` as `x-echo-ssl-client-*`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// A running echo backend; stops when dropped.
pub struct EchoServer {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
    largest_body: Arc<AtomicUsize>,
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The body an echo backend answers with (`query` is empty without one).
pub fn echo_body(
    service: &str,
    endpoint: SocketAddr,
    host: &str,
    path: &str,
    query: &str,
) -> String {
    format!("service={service} endpoint={endpoint} host={host} path={path} query={query}\n")
}

/// The digest an echo backend gives of a body: FNV-1a, 64 bits, in hex.
pub fn body_digest(body: &[u8]) -> String {
    let hash = body.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

impl EchoServer {
    /// The size of the largest request body this backend received whole.
    pub fn largest_body(&self) -> usize {
        self.largest_body.load(Ordering::SeqCst)
    }

    /// Starts an echo backend for `service` on `addr` (port 0 picks a free port).
    pub async fn start(service: &str, addr: SocketAddr) -> std::io::Result<Self> {
        Self::serve(service, TcpListener::bind(addr).await?)
    }

    /// Starts an echo backend for `service` on a listener bound elsewhere (e.g. in a
    /// pod's network namespace).
    pub fn start_on(service: &str, listener: std::net::TcpListener) -> std::io::Result<Self> {
        listener.set_nonblocking(true)?;
        Self::serve(service, TcpListener::from_std(listener)?)
    }

    fn serve(service: &str, listener: TcpListener) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let service = service.to_string();
        let largest_body = Arc::new(AtomicUsize::new(0));
        let largest = largest_body.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let service = service.clone();
                let largest = largest.clone();
                tokio::spawn(async move {
                    let handler = service_fn(move |request: Request<Incoming>| {
                        let largest = largest.clone();
                        let host = request
                            .headers()
                            .get(hyper::header::HOST)
                            .and_then(|h| h.to_str().ok())
                            .unwrap_or("")
                            .to_string();
                        let uri = request.uri();
                        let query = uri.query().unwrap_or("");
                        let body = echo_body(&service, addr, &host, uri.path(), query);
                        // Request headers named x-* come back as x-echo-req-*.
                        let mut response = Response::builder()
                            .header("content-type", "text/plain")
                            .header("x-echo-service", service_header(&body));
                        for (name, value) in request.headers() {
                            if let Some(rest) = name.as_str().strip_prefix("x-") {
                                response = response.header(format!("x-echo-req-{rest}"), value);
                            }
                            // ingress-nginx's client-certificate headers, as
                            // x-echo-ssl-client-*.
                            if name.as_str().starts_with("ssl-client-") {
                                response = response.header(format!("x-echo-{name}"), value);
                            }
                        }
                        let status = request
                            .headers()
                            .get("x-echo-status")
                            .and_then(|v| v.to_str().ok())
                            .and_then(|v| v.parse::<u16>().ok())
                            .filter(|code| (100..600).contains(code))
                            .unwrap_or(200);
                        response = response.status(status);
                        let delay = request
                            .headers()
                            .get("x-delay-ms")
                            .and_then(|v| v.to_str().ok())
                            .and_then(|v| v.parse::<u64>().ok())
                            .map_or(Duration::ZERO, |ms| Duration::from_millis(ms.min(30_000)));
                        async move {
                            // A body that does not arrive whole gets no answer.
                            let Ok(received) = request.into_body().collect().await else {
                                return Err(std::io::Error::other("incomplete body"));
                            };
                            let received = received.to_bytes();
                            largest.fetch_max(received.len(), Ordering::SeqCst);
                            let response = response
                                .header("x-echo-body-length", received.len())
                                .header("x-echo-body-digest", body_digest(&received));
                            tokio::time::sleep(delay).await;
                            Ok::<_, std::io::Error>(
                                response
                                    .body(Full::new(Bytes::from(body)))
                                    .unwrap_or_default(),
                            )
                        }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), handler)
                        .await;
                });
            }
        });
        Ok(Self {
            addr,
            task,
            largest_body,
        })
    }
}

fn service_header(body: &str) -> String {
    body.split_whitespace()
        .next()
        .and_then(|kv| kv.strip_prefix("service="))
        .unwrap_or("")
        .to_string()
}
