//! TCP services (`--tcp-services-configmap`, ingress-nginx's format), end to end on real
//! haproxy from both sources, with backends whose server speaks first: a port without
//! PROXY and one that decodes PROXY from the client and encodes it to the backend
//! (which then greets the address the client's header claims), both directions of
//! each conversation checked; endpoints that move are served with no reload; a port
//! added to the ConfigMap starts serving and a port removed stops; an entry that cannot
//! be served is a Warning Event on the ConfigMap naming its key. A Gateway `TCP` listener
//! on a port of `--gateway-listener-ports` serves its TCPRoute the same way.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tugboat_model::ObjectKey;
use tugboat_model::gateway::GatewaySettings;
use tugboat_test_objects::gateway as wire;
use tugboat_testkit::banner::{BannerServer, greeting, start_banners};
use tugboat_testkit::gateway_objects::{
    GATEWAY_CONTROLLER, mk_gateway, mk_gateway_class, mk_listener,
};
use tugboat_testkit::objects::{
    mk_config_map, mk_endpoint_slice, mk_service, to_json, with_creation_timestamp,
};
use tugboat_testkit::{HaproxyBinary, Scene, Source, eventually, free_port, scene_tests};

scene_tests!(
    tcp_services_serve_speak_first_backends_and_follow_changes,
    a_tcp_route_serves_a_gateway_tcp_listener
);

/// The TCP services ConfigMap's name, in `default`.
const CONFIG_MAP: &str = "tcp-services";
/// The Service port of both Services, named `banner`.
const SERVICE_PORT: i32 = 4000;
/// What the client's PROXY header claims to be its address.
const CLAIMED_CLIENT: &str = "127.0.0.9";
/// What a test waits for at most.
const PATIENCE: Duration = Duration::from_secs(15);

/// A user port whose bind port (+ 10000) is free.
fn user_port() -> u16 {
    loop {
        let bind = free_port();
        if bind > 10_000 {
            return bind - 10_000;
        }
    }
}

/// Where haproxy serves the TCP service of user port `port`.
fn bind_addr(port: u16) -> SocketAddr {
    let bind = tugboat_model::ports::bind_port(port.into()).expect("a bind port");
    SocketAddr::from((Ipv4Addr::LOCALHOST, bind))
}

/// Service `name` (port 4000 named `banner`) and its EndpointSlice of `servers`.
fn service_of(name: &str, servers: &[BannerServer]) -> [Value; 2] {
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    [
        to_json(&mk_service(name, "banner", SERVICE_PORT)),
        to_json(&mk_endpoint_slice(name, "banner", &addrs)),
    ]
}

/// The TCP services ConfigMap of `entries` (port, value).
fn config_map(entries: &[(u32, String)]) -> Value {
    let data: Vec<(String, &str)> = entries
        .iter()
        .map(|(port, value)| (port.to_string(), value.as_str()))
        .collect();
    let data: Vec<(&str, &str)> = data.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    to_json(&mk_config_map(CONFIG_MAP, &data))
}

/// One conversation on `port`: `proxy_header` first if any, then the server's
/// greeting, then a line sent and its echo. `None` when the connection does not get
/// that far.
async fn converse(port: u16, proxy_header: Option<&str>) -> Option<(String, String)> {
    let talk = async {
        let stream = TcpStream::connect(bind_addr(port)).await.ok()?;
        let (read, mut write) = stream.into_split();
        let mut lines = BufReader::new(read).lines();
        if let Some(header) = proxy_header {
            write.write_all(header.as_bytes()).await.ok()?;
        }
        let greeting = lines.next_line().await.ok()??;
        write.write_all(b"ping from the client\n").await.ok()?;
        let echo = lines.next_line().await.ok()??;
        Some((format!("{greeting}\n"), echo))
    };
    tokio::time::timeout(Duration::from_secs(5), talk)
        .await
        .ok()
        .flatten()
}

/// A PROXY v1 header from [`CLAIMED_CLIENT`] to `port`.
fn proxy_header(port: u16) -> String {
    format!("PROXY TCP4 {CLAIMED_CLIENT} 127.0.0.1 40000 {port}\r\n")
}

/// Waits until `port` greets as `service` (greeting `client`) and echoes.
async fn wait_for_banner(port: u16, header: Option<&str>, service: &str, client: Option<&str>) {
    let what = format!("port {port} served by {service}");
    let (greeted, echo) = eventually(&what, PATIENCE, || async {
        converse(port, header)
            .await
            .filter(|(greeted, _)| greeted.starts_with(&format!("220 {service} ")))
    })
    .await;
    if let Some(client) = client {
        assert_eq!(greeted, greeting(service, client), "port {port}");
    }
    assert_eq!(echo, "ping from the client", "port {port}: the echo");
}

/// Waits until `port` serves nothing: the connection is refused or closed at once.
async fn wait_until_closed(port: u16) {
    eventually(&format!("port {port} closed"), PATIENCE, || async {
        converse(port, None).await.is_none().then_some(())
    })
    .await;
}

async fn tcp_services_serve_speak_first_backends_and_follow_changes(
    binary: HaproxyBinary,
    source: Source,
) {
    let plain_a = start_banners("plain-a", 41, 1, false).await;
    let plain_b = start_banners("plain-b", 42, 1, false).await;
    let proxied = start_banners("proxied", 43, 1, true).await;
    let proxied_b = start_banners("proxied-b", 44, 1, true).await;
    let (plain_port, proxied_port, added_port) = (user_port(), user_port(), user_port());
    let plain_entry = (plain_port.into(), "default/plain:banner".to_string());
    let proxied_entry = (
        proxied_port.into(),
        format!("default/proxied:{SERVICE_PORT}:PROXY:PROXY"),
    );
    let mut objects = Vec::new();
    objects.extend(service_of("plain", &plain_a));
    objects.extend(service_of("proxied", &proxied));
    // A bad entry is left out with a problem; the others are served.
    let bad_entry = (60_000, "default/plain:banner".to_string());
    objects.push(config_map(&[
        plain_entry.clone(),
        proxied_entry.clone(),
        bad_entry,
    ]));
    let scene = Scene::start_with(&binary, source, &objects, |config| {
        config.model.tcp_services.nginx = Some(ObjectKey::new("default", CONFIG_MAP));
    })
    .await;
    scene.wait_until_ready().await;
    if let Some(event) = scene.wait_for_warning(CONFIG_MAP, "data.60000").await {
        let note = event["note"].as_str().unwrap_or_default();
        assert!(note.contains("between 1 and 55535"), "{event}");
    }

    // The server speaks first, then echoes: both directions through haproxy.
    wait_for_banner(plain_port, None, "plain-a", None).await;
    // PROXY decoded from the client and encoded to the backend: it sees the address
    // the client's header claims.
    let header = proxy_header(proxied_port);
    wait_for_banner(proxied_port, Some(&header), "proxied", Some(CLAIMED_CLIENT)).await;
    // A client without a PROXY header is not served on a port that decodes it.
    let mut stream = TcpStream::connect(bind_addr(proxied_port))
        .await
        .expect("the port is bound");
    stream
        .write_all(b"hello without a header\r\n")
        .await
        .expect("a write");
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
    assert!(
        matches!(read, Ok(Ok(0)) | Ok(Err(_))),
        "a client without a PROXY header got {read:?} {:?}",
        String::from_utf8_lossy(&answer)
    );

    // An endpoint that moves is a runtime change: no reload. The moved server of the
    // PROXY port still sends the header.
    let reloads = scene.reloads().await;
    scene.apply(&service_of("plain", &plain_b)[1]);
    scene.apply(&service_of("proxied", &proxied_b)[1]);
    wait_for_banner(plain_port, None, "plain-b", None).await;
    wait_for_banner(
        proxied_port,
        Some(&header),
        "proxied-b",
        Some(CLAIMED_CLIENT),
    )
    .await;
    assert_eq!(
        scene.reloads().await,
        reloads,
        "an endpoint change reloaded haproxy"
    );

    // A port added starts serving, a port removed stops; the other keeps serving.
    let added_entry = (added_port.into(), format!("default/plain:{SERVICE_PORT}"));
    scene.apply(&config_map(&[proxied_entry, added_entry]));
    wait_for_banner(added_port, None, "plain-b", None).await;
    wait_until_closed(plain_port).await;
    wait_for_banner(
        proxied_port,
        Some(&header),
        "proxied-b",
        Some(CLAIMED_CLIENT),
    )
    .await;
    drop((plain_a, proxied));
}

/// A TCPRoute `name` of Gateway `gw` to Service `service` port 4000, created at `created`.
fn tcp_route(name: &str, service: &str, created: &str) -> Value {
    let route = wire::mk_tcp_route(
        name,
        "gw",
        vec![wire::mk_backend_ref(service, SERVICE_PORT)],
    );
    to_json(&with_creation_timestamp(route, created))
}

/// The reason of the condition `type_` of the first parent of the TCPRoute `name`, once
/// the controller wrote one (API only).
async fn tcp_route_reason(scene: &Scene, name: &str, type_: &str) -> Option<String> {
    let server = scene.api()?;
    let what = format!("TCPRoute {name} has {type_}");
    let reason = eventually(&what, PATIENCE, || async {
        let route = server.get("TCPRoute", "default", name)?;
        let conditions = route["status"]["parents"][0]["conditions"]
            .as_array()?
            .clone();
        conditions
            .iter()
            .find(|c| c["type"] == type_)
            .and_then(|c| c["reason"].as_str().map(str::to_string))
    })
    .await;
    Some(reason)
}

async fn a_tcp_route_serves_a_gateway_tcp_listener(binary: HaproxyBinary, source: Source) {
    let db_a = start_banners("db-a", 45, 1, false).await;
    let db_b = start_banners("db-b", 46, 1, false).await;
    let (port, unlisted) = (user_port(), user_port());
    let listeners = vec![
        mk_listener("db", "TCP", port.into(), None),
        mk_listener("unlisted", "TCP", unlisted.into(), None),
    ];
    let mut objects = vec![
        mk_gateway_class("tugboat", GATEWAY_CONTROLLER),
        mk_gateway("gw", "tugboat", listeners),
        tcp_route("db", "db", "2024-01-01T00:00:00Z"),
        tcp_route("late", "db", "2024-02-01T00:00:00Z"),
    ];
    objects.extend(service_of("db", &db_a));
    let scene = Scene::start_with(&binary, source, &objects, |config| {
        config.model.gateway = Some(
            GatewaySettings::new(
                GATEWAY_CONTROLLER,
                config.render.http_port,
                config.render.https_port,
            )
            .with_listener_ports([port].into()),
        );
    })
    .await;
    scene.wait_until_ready().await;

    wait_for_banner(port, None, "db-a", None).await;
    // A port not listed is not bound.
    assert!(converse(unlisted, None).await.is_none());
    if let Some(reason) = tcp_route_reason(&scene, "db", "Accepted").await {
        assert_eq!(reason, "Accepted");
        // The younger route of the same listener serves nothing there.
        let late = tcp_route_reason(&scene, "late", "Accepted").await;
        assert_eq!(late.as_deref(), Some("UnsupportedValue"));
        let server = scene.api().expect("the API");
        let gateway = server.get("Gateway", "default", "gw").expect("the Gateway");
        let unlisted_accepted = &gateway["status"]["listeners"][1]["conditions"][0];
        assert_eq!(unlisted_accepted["reason"], "PortUnavailable", "{gateway}");
    }

    // An endpoint that moves is a runtime change: no reload.
    let reloads = scene.reloads().await;
    scene.apply(&service_of("db", &db_b)[1]);
    wait_for_banner(port, None, "db-b", None).await;
    assert_eq!(
        scene.reloads().await,
        reloads,
        "an endpoint change reloaded haproxy"
    );
    drop(db_a);
}
