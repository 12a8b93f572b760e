//! Keep-alive clients across reloads: a request sent on a keep-alive connection that
//! sat idle while haproxy reloaded gets its answer (from the stopping worker, with
//! `Connection: close`) instead of a closed connection.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tugboat_testkit::http::read_answer;
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{mk_ingress, mk_service_of, to_json};
use tugboat_testkit::{HaproxyBinary, Scene, Source, scene_tests};

scene_tests!(idle_keep_alive_connections_are_answered_across_a_reload);

const HOST: &str = "keep.example.com";
const CONNECTIONS: usize = 50;

/// `GET /` on `stream`, keeping the connection open.
async fn send_get(stream: &mut TcpStream, host: &str) -> std::io::Result<()> {
    let request = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n");
    stream.write_all(request.as_bytes()).await
}

/// `CONNECTIONS` keep-alive connections, each with one request answered.
async fn open_connections(addr: SocketAddr) -> Vec<TcpStream> {
    let mut streams = Vec::with_capacity(CONNECTIONS);
    for _ in 0..CONNECTIONS {
        let mut stream = TcpStream::connect(addr).await.expect("connect to haproxy");
        send_get(&mut stream, HOST).await.expect("send");
        let reply = read_answer(&mut stream).await.expect("a first answer");
        assert_eq!(reply.service(), Some("web"), "{reply:?}");
        assert_ne!(reply.header("connection"), Some("close"), "{reply:?}");
        streams.push(stream);
    }
    streams
}

async fn idle_keep_alive_connections_are_answered_across_a_reload(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = start_backends("web", 240, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    objects.push(to_json(&mk_ingress("site", HOST, "web")));
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_service(HOST, "/", "web").await;
    let mut streams = open_connections(scene.http_addr()).await;

    // A new Service behind a new Ingress: a new backend, so a reload.
    let _other = scene
        .reload_with_a_new_service("other", "other.example.com", 241)
        .await;
    // Time for the old worker to act on its stop while the connections sit idle.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let mut answered = 0;
    let mut failed = Vec::new();
    for (index, stream) in streams.iter_mut().enumerate() {
        let reply = match send_get(stream, HOST).await {
            Ok(()) => read_answer(stream).await,
            Err(_) => None,
        };
        match reply {
            Some(reply) if reply.status == 200 && reply.service() == Some("web") => answered += 1,
            other => failed.push((index, other)),
        }
    }
    assert_eq!(
        answered, CONNECTIONS,
        "requests on idle keep-alive connections answered across a reload; failed: {failed:?}"
    );
}
