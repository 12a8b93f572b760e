//! New backends at runtime: on haproxy 3.4, new Services behind new Ingresses and an
//! HTTPRoute (one at a time and in a burst) are served with no reload, under a
//! keep-alive load that sees no failed request; removed ones stop being served with no
//! reload; a restarted controller adopts the result and a restarted haproxy serves the
//! same from the files. Earlier series pass the same scenario with the reloads they need.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tugboat_haproxy::supports_dynamic_backends;
use tugboat_model::gateway::GatewaySettings;
use tugboat_testkit::gateway_objects::{
    GATEWAY_CONTROLLER, http_route_json, mk_gateway, mk_gateway_class, mk_http_route, mk_listener,
    mk_rule_to,
};
use tugboat_testkit::http::read_answer;
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{mk_ingress, mk_service_of, to_json};
use tugboat_testkit::{EchoServer, HaproxyBinary, Scene, Source, eventually, scene_tests};

scene_tests!(
    new_services_are_served_and_removed_without_a_reload,
    an_add_backend_haproxy_refuses_falls_back_to_one_reload
);

/// The host the keep-alive load asks for, served from the start.
const STEADY_HOST: &str = "steady.example.com";
/// How soon a new Service must be served where haproxy adds backends at runtime: a few
/// runtime round trips (each well under 10 ms here), with room for a loaded machine.
const LIVE_WITHIN: Duration = Duration::from_millis(1500);
/// Keep-alive clients of the load, and their bounds.
const CLIENTS: usize = 2;
const MAX_LOAD_REQUESTS: usize = 50_000;
const MAX_LOAD_TIME: Duration = Duration::from_secs(90);

/// The requests of the load, and those that failed (with a few examples).
#[derive(Debug, Default)]
struct Load {
    sent: usize,
    failed: usize,
    examples: Vec<String>,
}

/// Sends `GET /` for [`STEADY_HOST`] on one keep-alive connection after the other
/// (a new one when haproxy closes it, as an old worker does after a reload) until
/// `stop`, within the load's bounds; counts the requests not answered 200 by `steady`.
async fn keep_alive_load(addr: SocketAddr, stop: Arc<AtomicBool>) -> Load {
    let started = Instant::now();
    let mut load = Load::default();
    let mut stream: Option<TcpStream> = None;
    while !stop.load(Ordering::Relaxed)
        && load.sent < MAX_LOAD_REQUESTS
        && started.elapsed() < MAX_LOAD_TIME
    {
        let mut connection = match stream.take() {
            Some(open) => open,
            None => match TcpStream::connect(addr).await {
                Ok(new) => new,
                Err(err) => {
                    load.sent += 1;
                    load.fail(format!("connect: {err}"));
                    continue;
                }
            },
        };
        load.sent += 1;
        let request = format!("GET / HTTP/1.1\r\nHost: {STEADY_HOST}\r\n\r\n");
        if let Err(err) = connection.write_all(request.as_bytes()).await {
            load.fail(format!("send: {err}"));
            continue;
        }
        match read_answer(&mut connection).await {
            Some(reply) if reply.status == 200 && reply.service() == Some("steady") => {
                if reply.header("connection") != Some("close") {
                    stream = Some(connection);
                }
            }
            Some(reply) => load.fail(format!("{} {}", reply.status, reply.body.trim())),
            None => load.fail("no answer on a keep-alive connection".into()),
        }
    }
    load
}

impl Load {
    fn fail(&mut self, what: String) {
        self.failed += 1;
        if self.examples.len() < 5 {
            self.examples.push(what);
        }
    }
}

/// The Service `name` and its Ingress for `NAME.example.com`, as JSON.
fn service_and_ingress(name: &str, servers: &[EchoServer]) -> Vec<Value> {
    let mut objects: Vec<Value> = mk_service_of(name, servers).to_vec();
    objects.push(to_json(&mk_ingress(name, &host(name), name)));
    objects
}

fn host(name: &str) -> String {
    format!("{name}.example.com")
}

/// The HTTPRoute `routed` of Gateway `gw` for `routed.example.com`, every path to
/// `service` port 80, as JSON.
fn route_to(service: &str) -> Value {
    http_route_named("routed", service)
}

/// The HTTPRoute `name` of Gateway `gw` for `NAME.example.com`, every path to `service`
/// port 80, as JSON.
fn http_route_named(name: &str, service: &str) -> Value {
    http_route_json(&mk_http_route(
        name,
        "gw",
        &[&host(name)],
        vec![mk_rule_to(&[("PathPrefix", "/")], service, 80)],
    ))
}

/// Waits until `NAME.example.com` is answered by Service `name`; returns how long it
/// took from `since`.
async fn live(scene: &Scene, name: &str, since: Instant) -> Duration {
    let host = host(name);
    eventually(
        &format!("{host} served by {name}"),
        Duration::from_secs(15),
        || async {
            let reply = scene.get(&host, "/").await.ok()?;
            (reply.status == 200 && reply.service() == Some(name)).then_some(())
        },
    )
    .await;
    since.elapsed()
}

async fn new_services_are_served_and_removed_without_a_reload(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let dynamic = supports_dynamic_backends(&haproxy.series);
    let steady = start_backends("steady", 90, 1).await;
    let mut objects = service_and_ingress("steady", &steady);
    objects.push(mk_gateway_class("tugboat", GATEWAY_CONTROLLER));
    objects.push(mk_gateway(
        "gw",
        "tugboat",
        vec![mk_listener("http", "HTTP", 80, None)],
    ));
    let mut scene = Scene::start_with(&haproxy, source, &objects, |config| {
        config.model.gateway = Some(GatewaySettings::new(
            GATEWAY_CONTROLLER,
            config.render.http_port,
            config.render.https_port,
        ));
    })
    .await;
    live(&scene, "steady", Instant::now()).await;
    let before = scene.show_proc().await;
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| tokio::spawn(keep_alive_load(scene.http_addr(), stop.clone())))
        .collect();
    let mut servers = Vec::new();
    let mut timings = Vec::new();

    // One at a time, each served before the next comes.
    for (index, name) in ["one", "two", "three"].into_iter().enumerate() {
        let echo = start_backends(name, 91 + index as u8, 1).await;
        let sent = Instant::now();
        for object in service_and_ingress(name, &echo) {
            scene.apply(&object);
        }
        timings.push((name.to_string(), live(&scene, name, sent).await));
        servers.push(echo);
    }
    let after_one_by_one = scene.reloads().await;

    // A burst of ten.
    let burst: Vec<String> = (0..10).map(|i| format!("burst{i}")).collect();
    let mut burst_objects = Vec::new();
    for (index, name) in burst.iter().enumerate() {
        let echo = start_backends(name, 94 + index as u8, 1).await;
        burst_objects.extend(service_and_ingress(name, &echo));
        servers.push(echo);
    }
    let sent = Instant::now();
    for object in &burst_objects {
        scene.apply(object);
    }
    for name in &burst {
        let took = live(&scene, name, sent).await;
        timings.push((name.clone(), took));
    }
    let after_burst = scene.reloads().await;

    // The first HTTPRoute of the Gateway's HTTP-only listener, on a new Service; then
    // another new HTTPRoute on a new Service.
    let routed = start_backends("routed", 104, 1).await;
    let routed_service = mk_service_of("routed", &routed);
    let sent = Instant::now();
    for object in &routed_service {
        scene.apply(object);
    }
    scene.apply(&route_to("routed"));
    timings.push(("routed".into(), live(&scene, "routed", sent).await));
    // A new HTTPRoute to a new Service on the same listener.
    let fresh = start_backends("fresh", 105, 1).await;
    let fresh_objects: Vec<Value> = mk_service_of("fresh", &fresh)
        .into_iter()
        .chain([http_route_named("fresh", "fresh")])
        .collect();
    let sent = Instant::now();
    for object in &fresh_objects {
        scene.apply(object);
    }
    timings.push(("fresh".into(), live(&scene, "fresh", sent).await));
    let after_route = scene.reloads().await;

    // The burst's Services go away, and the HTTPRoute goes back to `steady`.
    for object in &burst_objects {
        scene.delete(object);
    }
    scene.apply(&route_to("steady"));
    for object in routed_service.iter().chain(&fresh_objects) {
        scene.delete(object);
    }
    scene.wait_for_status(&host("fresh"), "/", 404).await;
    for name in &burst {
        scene.wait_for_status(&host(name), "/", 404).await;
    }
    scene.wait_for_service(&host("routed"), "/", "steady").await;
    let after_removal = scene.reloads().await;

    stop.store(true, Ordering::Relaxed);
    let mut load = Load::default();
    for client in clients {
        let count = client.await.expect("load client");
        load.sent += count.sent;
        load.failed += count.failed;
        load.examples.extend(count.examples);
    }
    let after = scene.show_proc().await;
    eprintln!(
        "haproxy {} ({source:?}): reloads one-by-one {}, burst {}, route {}, removal {}; \
         live after {timings:?}; {} of {} keep-alive requests failed",
        haproxy.series,
        after_one_by_one - before.reloads,
        after_burst - after_one_by_one,
        after_route - after_burst,
        after_removal - after_route,
        load.failed,
        load.sent
    );
    assert_eq!(after.master_pid, before.master_pid, "same master");
    assert!(load.sent > 100, "enough requests to tell: {}", load.sent);
    assert_eq!(load.failed, 0, "failed requests: {:?}", load.examples);
    // Where haproxy adds backends at runtime nothing reloads; elsewhere each new
    // backend reloads (a burst once), and removals never do.
    let expected = if dynamic { [0, 0, 0, 0] } else { [3, 1, 2, 0] };
    assert_eq!(
        [
            after_one_by_one - before.reloads,
            after_burst - after_one_by_one,
            after_route - after_burst,
            after_removal - after_route,
        ],
        expected,
        "reloads: one by one, burst, HTTPRoute, removal"
    );
    if dynamic {
        for (name, took) in &timings {
            assert!(*took < LIVE_WITHIN, "{name} live after {took:?}");
        }
    }

    // A rolling update of the controller adopts what haproxy runs: no reload.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before_restart = scene.show_proc().await;
    scene.restart_controller_and_settle().await;
    let adopted = scene.show_proc().await;
    assert_eq!(
        (adopted.master_pid, adopted.reloads),
        (before_restart.master_pid, before_restart.reloads),
        "the restarted controller adopted without a reload"
    );
    for name in ["steady", "one", "two", "three"] {
        live(&scene, name, Instant::now()).await;
    }

    // haproxy restarted on the same folders serves the same from the files.
    scene.restart().await;
    assert_ne!(scene.show_proc().await.master_pid, before.master_pid);
    for name in ["steady", "one", "two", "three"] {
        live(&scene, name, Instant::now()).await;
    }
    for name in &burst {
        scene.wait_for_status(&host(name), "/", 404).await;
    }
    scene.wait_for_service(&host("routed"), "/", "steady").await;
}

/// When haproxy refuses one `add backend` (here: a backend of that name is already
/// there, made by hand on the master CLI), that new Service is served by a reload, and
/// the next new backend goes at runtime again: only a refusal of the command itself
/// (unknown, experimental, not permitted) turns runtime backends off until haproxy
/// restarts. Series without `add backend` reload for each new Service.
async fn an_add_backend_haproxy_refuses_falls_back_to_one_reload(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let dynamic = supports_dynamic_backends(&haproxy.series);
    let steady = start_backends("steady", 110, 1).await;
    let mut scene = Scene::start(&haproxy, source, &service_and_ingress("steady", &steady)).await;
    live(&scene, "steady", Instant::now()).await;
    if dynamic {
        // The backend `one` will need, made first by hand.
        let cli = scene.cli();
        let answer = cli
            .batch(&[
                "experimental-mode on".to_string(),
                "@1 add backend default_one_80 from tugboat mode http".to_string(),
            ])
            .await
            .expect("the master CLI");
        assert!(answer[1].contains("New backend registered"), "{answer:?}");
    }
    let (one, _one) = serve_new_service(&scene, "one", 111).await;
    let (two, _two) = serve_new_service(&scene, "two", 112).await;
    assert_eq!(
        (one, two),
        (1, u64::from(!dynamic)),
        "the refused add backend reloads, the next new backend does not"
    );
    // haproxy restarted serves both from the files, and takes the next at runtime.
    scene.restart().await;
    live(&scene, "one", Instant::now()).await;
    live(&scene, "two", Instant::now()).await;
    let (three, _three) = serve_new_service(&scene, "three", 113).await;
    assert_eq!(three, u64::from(!dynamic), "after a haproxy restart");
}

/// Serves a new Service `name` (echo backends on 127.0.`net`.x) behind its Ingress;
/// returns the reloads it took and its backends (to keep them running).
async fn serve_new_service(scene: &Scene, name: &str, net: u8) -> (u64, Vec<EchoServer>) {
    let before = scene.reloads().await;
    let echo = start_backends(name, net, 1).await;
    for object in service_and_ingress(name, &echo) {
        scene.apply(&object);
    }
    live(scene, name, Instant::now()).await;
    (scene.reloads().await - before, echo)
}
