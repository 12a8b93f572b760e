//! The admin server on `--controller-port`: `/healthz` (the process runs and haproxy's
//! master socket answers), `/readyz` (the first apply is done) and `/metrics`.

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tugboat_haproxy::MasterCli;
use tugboat_haproxy::blocking::blocking;

use crate::controller::ControllerStatus;
use crate::metrics::Metrics;

/// How long `/healthz` waits for haproxy's master socket.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);

/// What the admin endpoints look at.
#[derive(Clone)]
pub struct AdminState {
    pub metrics: Arc<Metrics>,
    pub status: watch::Receiver<ControllerStatus>,
    pub master_socket: PathBuf,
}

/// Serves the admin endpoints on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, state: AdminState) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                tracing::warn!("admin server: cannot accept a connection: {err}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let state = state.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(route(&state, &request).await) }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn route(state: &AdminState, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n".into());
    }
    match request.uri().path() {
        "/healthz" => {
            let cli = MasterCli::new(&state.master_socket);
            match tokio::time::timeout(HEALTH_TIMEOUT, cli.show_proc()).await {
                Ok(Ok(_)) => text(StatusCode::OK, "ok\n".into()),
                Ok(Err(err)) => text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("haproxy master socket: {err}\n"),
                ),
                Err(_) => text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "haproxy master socket: no answer\n".into(),
                ),
            }
        }
        "/readyz" => {
            if state.status.borrow().ready {
                text(StatusCode::OK, "ok\n".into())
            } else {
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "waiting for the first apply\n".into(),
                )
            }
        }
        "/metrics" => {
            // Encoding reads the process figures from `/proc`: off the runtime.
            let metrics = state.metrics.clone();
            let body = blocking(move || metrics.encode()).await;
            let mut response = text(StatusCode::OK, body);
            if let Ok(value) = "text/plain; version=0.0.4; charset=utf-8".parse() {
                response.headers_mut().insert("content-type", value);
            }
            response
        }
        _ => text(StatusCode::NOT_FOUND, "not found\n".into()),
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
}
