//! End to end: changes that haproxy takes at runtime, with no reload (the master pid and
//! the reload counter in `show proc` prove it), and the cases that do need one. Every
//! scenario with a controller runs from the manifests folder and from the API.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::Value;
use tugboat_haproxy::{Applier, ProcInfo};
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::master_relay::MasterRelay;
use tugboat_testkit::objects::{
    mk_endpoint_slice, mk_ingress, mk_ingress_with_rules, mk_rule, mk_service_of, prefix, to_json,
    with_keys,
};
use tugboat_testkit::{
    EchoServer, Haproxy, HaproxyBinary, Scene, Source, eventually, haproxy_tests, scene_tests,
};

scene_tests!(
    endpoints_scale_without_reload,
    routes_change_without_reload,
    new_backends_reload_once_per_burst,
    unexpected_runtime_answer_falls_back_to_reload,
    restarted_haproxy_keeps_converging,
    restarted_haproxy_takes_the_next_change_at_once,
    thousands_of_routes_at_once_are_split_not_dropped,
    refused_config_is_retried_only_when_the_desired_state_changes,
    whole_endpoint_sets_flip_under_load_without_a_failed_request,
    restarted_controller_adopts_lingering_backends_without_reload,
    restarted_controller_adopts_lingering_feature_sets_without_reload,
);

// `restarted_controller_adopts_without_reload` computes the desired state itself, with
// the library, from the manifests folder, and drives an `Applier` by hand: no source
// takes part beyond the first apply. `prefix_map_matches_longest_key_in_any_order` runs
// haproxy alone.
haproxy_tests!(
    restarted_controller_adopts_without_reload,
    prefix_map_matches_longest_key_in_any_order,
);

/// The EndpointSlice of Service `service` (port named http) for `servers`.
fn endpoints(service: &str, servers: &[EchoServer]) -> EndpointSlice {
    let addrs: Vec<std::net::SocketAddr> = servers.iter().map(|s| s.addr).collect();
    mk_endpoint_slice(service, "http", &addrs)
}

/// Services of echo backends `(name, servers)` and `ingresses`, as JSON, for a scene.
fn objects(services: &[(&str, &[EchoServer])], ingresses: &[(&str, &str, &str)]) -> Vec<Value> {
    let mut objects: Vec<Value> = services
        .iter()
        .flat_map(|(name, servers)| mk_service_of(name, servers))
        .collect();
    objects.extend(
        ingresses
            .iter()
            .map(|(name, host, service)| to_json(&mk_ingress(name, host, service))),
    );
    objects
}

/// Endpoints seen answering `host` over `rounds` requests.
async fn endpoints_seen(pod: &Scene, host: &str, rounds: usize) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for _ in 0..rounds {
        if let Ok(reply) = pod.get(host, "/").await
            && let Some(endpoint) = reply.endpoint()
        {
            seen.insert(endpoint.to_string());
        }
    }
    seen
}

async fn wait_for_endpoints(pod: &Scene, host: &str, servers: &[EchoServer]) {
    let expected: BTreeSet<String> = servers.iter().map(|s| s.addr.to_string()).collect();
    let rounds = servers.len() * 4;
    eventually(
        &format!("{host} served by exactly {} endpoints", servers.len()),
        Duration::from_secs(10),
        || {
            let expected = expected.clone();
            async move { (endpoints_seen(pod, host, rounds).await == expected).then_some(()) }
        },
    )
    .await;
}

fn assert_no_reload(before: &ProcInfo, after: &ProcInfo) {
    assert_eq!(after.master_pid, before.master_pid, "same master");
    assert_eq!(
        after.reloads, before.reloads,
        "no reload: {before:?} -> {after:?}"
    );
}

async fn endpoints_scale_without_reload(haproxy: HaproxyBinary, source: Source) {
    let all = start_backends("web", 21, 12).await;
    let pod = Scene::start(
        &haproxy,
        source,
        &objects(&[("web", &all[..1])], &[("web", "web.example.com", "web")]),
    )
    .await;
    wait_for_endpoints(&pod, "web.example.com", &all[..1]).await;
    let before = pod.show_proc().await;
    // Up to 3, beyond the free slots (12 > 8: add server), down to 2, then replaced.
    for servers in [&all[..3], &all[..12], &all[5..7], &all[9..11]] {
        pod.apply(&endpoints("web", servers));
        wait_for_endpoints(&pod, "web.example.com", servers).await;
    }
    assert_no_reload(&before, &pod.show_proc().await);
    // The files hold the same state: a reload keeps serving exactly these endpoints.
    pod.cli().reload().await.expect("reload");
    wait_for_endpoints(&pod, "web.example.com", &all[9..11]).await;
}

async fn routes_change_without_reload(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 22, 1).await;
    let api = start_backends("api", 23, 1).await;
    let pod = Scene::start(
        &haproxy,
        source,
        &objects(
            &[("web", &web), ("api", &api)],
            &[("a", "a.example.com", "web"), ("b", "b.example.com", "api")],
        ),
    )
    .await;
    pod.wait_for_service("a.example.com", "/", "web").await;
    pod.wait_for_service("b.example.com", "/", "api").await;
    let before = pod.show_proc().await;
    // Added, changed, removed: all for backends haproxy already has.
    pod.apply(&mk_ingress("c", "c.example.com", "api"));
    pod.wait_for_service("c.example.com", "/", "api").await;
    pod.apply(&mk_ingress("a", "a.example.com", "api"));
    pod.wait_for_service("a.example.com", "/", "api").await;
    pod.delete(&mk_ingress("b", "b.example.com", "api"));
    pod.wait_for_status("b.example.com", "/", 404).await;
    // A longer prefix added at runtime wins over the shorter one already there.
    let longer = mk_ingress_with_rules(
        "d",
        vec![mk_rule(Some("c.example.com"), &[prefix("/v2", "web")])],
    );
    pod.apply(&longer);
    pod.wait_for_service("c.example.com", "/v2/items", "web")
        .await;
    assert_eq!(
        pod.get("c.example.com", "/v2x")
            .await
            .expect("GET")
            .service(),
        Some("api")
    );
    assert_no_reload(&before, &pod.show_proc().await);
}

async fn new_backends_reload_once_per_burst(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 24, 1).await;
    let pod = Scene::start(
        &haproxy,
        source,
        &objects(&[("web", &web)], &[("a", "a.example.com", "web")]),
    )
    .await;
    pod.wait_for_service("a.example.com", "/", "web").await;
    let before = pod.show_proc().await;
    // Three new Services and their Ingresses, written one after the other.
    let mut backends = Vec::new();
    for (index, name) in ["one", "two", "three"].into_iter().enumerate() {
        let servers = start_backends(name, 25 + index as u8, 1).await;
        for object in mk_service_of(name, &servers) {
            pod.apply(&object);
        }
        pod.apply(&mk_ingress(name, &format!("{name}.example.com"), name));
        backends.push(servers);
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    for name in ["one", "two", "three"] {
        pod.wait_for_service(&format!("{name}.example.com"), "/", name)
            .await;
    }
    let after = pod.show_proc().await;
    assert_eq!(after.master_pid, before.master_pid);
    // haproxy 3.4 adds the backends at runtime (tests/e2e/dynamic_backends.rs).
    let reloads = if tugboat_haproxy::supports_dynamic_backends(&haproxy.series) {
        0
    } else {
        1
    };
    assert_eq!(
        after.reloads,
        before.reloads + reloads,
        "one reload for the burst, none on 3.4"
    );
}

async fn unexpected_runtime_answer_falls_back_to_reload(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 28, 1).await;
    let api = start_backends("api", 29, 1).await;
    let pod = Scene::start(
        &haproxy,
        source,
        &objects(
            &[("web", &web), ("api", &api)],
            &[("a", "a.example.com", "web"), ("b", "b.example.com", "api")],
        ),
    )
    .await;
    pod.wait_for_service("a.example.com", "/", "web").await;
    pod.wait_for_service("b.example.com", "/", "api").await;
    let before = pod.show_proc().await;
    // Someone removes the route behind the controller's back: its `set map` will fail.
    let map = pod.config_dir.join("maps/routes-prefix.map");
    let answer = pod
        .cli()
        .worker_command(&format!("del map {} a.example.com/", map.display()))
        .await
        .expect("del map");
    assert!(answer.trim().is_empty(), "{answer}");
    pod.wait_for_status("a.example.com", "/", 404).await;
    pod.apply(&mk_ingress("a", "a.example.com", "api"));
    pod.wait_for_service("a.example.com", "/", "api").await;
    let after = pod.show_proc().await;
    assert_eq!(
        after.reloads,
        before.reloads + 1,
        "the refused update became a reload"
    );
}

async fn restarted_haproxy_keeps_converging(haproxy: HaproxyBinary, source: Source) {
    let all = start_backends("web", 30, 3).await;
    let mut pod = Scene::start_with(
        &haproxy,
        source,
        &objects(&[("web", &all[..1])], &[("a", "a.example.com", "web")]),
        |config| config.haproxy_check_interval = Duration::from_millis(200),
    )
    .await;
    wait_for_endpoints(&pod, "a.example.com", &all[..1]).await;
    pod.apply(&endpoints("web", &all[..2]));
    wait_for_endpoints(&pod, "a.example.com", &all[..2]).await;
    // haproxy dies and comes back on the same folders: it serves the current files.
    let old_master = pod.show_proc().await.master_pid;
    pod.restart().await;
    assert_ne!(pod.show_proc().await.master_pid, old_master);
    wait_for_endpoints(&pod, "a.example.com", &all[..2]).await;
    // The controller notices the new master and applies its state once (a reload).
    eventually(
        "the controller re-applies to the new master",
        Duration::from_secs(10),
        || async { (pod.show_proc().await.reloads == 1).then_some(()) },
    )
    .await;
    // And the controller keeps updating it at runtime.
    let before = pod.show_proc().await;
    pod.apply(&endpoints("web", &all[1..3]));
    wait_for_endpoints(&pod, "a.example.com", &all[1..3]).await;
    assert_no_reload(&before, &pod.show_proc().await);
}

/// How soon after haproxy is back (a container restart) the changes pending and made
/// meanwhile must be served.
const AFTER_RESTART: Duration = Duration::from_secs(2);

/// haproxy restarts (killed, started again) while a change is pending, several times.
/// Right after a start the master answers `@1` with "no worker yet", and 3.4.0 leaves
/// about one such connection in fifty open with no more answer: the controller's
/// master socket goes through a relay that plays that, once after each start, on every
/// series. Whatever it does, the change pending and one made right after haproxy is
/// back are served within [`AFTER_RESTART`].
async fn restarted_haproxy_takes_the_next_change_at_once(haproxy: HaproxyBinary, source: Source) {
    let all = start_backends("web", 47, 4).await;
    let mut relay = MasterRelay::start();
    let relay_path = relay.path().to_path_buf();
    let mut pod = Scene::start_with(
        &haproxy,
        source,
        &objects(&[("web", &all[..1])], &[("a", "a.example.com", "web")]),
        |config| {
            config.master_socket = relay_path;
            // The pending change, not the periodic check, meets the new haproxy first.
            config.haproxy_check_interval = Duration::from_secs(3600);
        },
    )
    .await;
    relay.relay_to(&pod.master_socket);
    wait_for_endpoints(&pod, "a.example.com", &all[..1]).await;
    for round in 0..4 {
        // haproxy goes away; its socket refuses connections.
        relay.stop();
        pod.kill().await;
        // A change while it is away: the controller is waiting for the socket.
        let next = &all[round % 3 + 1..round % 3 + 2];
        pod.apply(&endpoints("web", next));
        tokio::time::sleep(Duration::from_millis(300)).await;
        // haproxy is back.
        pod.start_again().await;
        relay.hang_next_worker_connection();
        relay.serve();
        let back = Instant::now();
        // A change right after: a new host on the same backend (a map update).
        let host = format!("r{round}.example.com");
        pod.apply(&mk_ingress(&format!("r{round}"), &host, "web"));
        let expected: BTreeSet<String> = next.iter().map(|s| s.addr.to_string()).collect();
        eventually(
            &format!("round {round}: both changes served after the restart"),
            AFTER_RESTART,
            || async {
                let reply = pod.get(&host, "/").await.ok()?;
                let served = reply.status == 200
                    && endpoints_seen(&pod, "a.example.com", 4).await == expected;
                served.then_some(())
            },
        )
        .await;
        eprintln!(
            "round {round}: served {:?} after haproxy was back",
            back.elapsed()
        );
    }
    // A round whose changes went out by a reload (the restart seen first) sends no `@1`
    // for the relay to leave hanging; the fault must have been met at least once.
    assert!(
        relay.hung() >= 1,
        "no round left a connection hanging: the fault was never met"
    );
}

async fn restarted_controller_adopts_without_reload(haproxy: HaproxyBinary) {
    let web = start_backends("web", 31, 2).await;
    let pod = Scene::start(
        &haproxy,
        Source::Folder,
        &objects(&[("web", &web)], &[("a", "a.example.com", "web")]),
    )
    .await;
    wait_for_endpoints(&pod, "a.example.com", &web).await;
    let folder = pod.manifests_dir().expect("a folder scene");
    let contents = tugboat_kube::load_folder(&folder).expect("manifests");
    let settings = tugboat_model::Settings::new(tugboat::tls::now());
    let class = tugboat_model::class::ClassFilter::default();
    let served = tugboat_kube::manifests::served(&contents, &class, &settings);
    let desired = tugboat_model::build(&served.snapshot, &settings).desired;
    // A new applier, as after a controller restart, finds haproxy running these files.
    let mut applier = Applier::new(pod.cli(), pod.render_settings());
    let marker = tugboat_haproxy::apply::marker_path(&pod.config_dir);
    eventually(
        "the controller's apply marker",
        Duration::from_secs(10),
        || {
            let exists = marker.exists();
            async move { exists.then_some(()) }
        },
    )
    .await;
    let before = pod.show_proc().await;
    assert!(applier.adopt(&desired).await, "adopts the running haproxy");
    assert!(applier.plan(desired.clone()).is_empty(), "nothing to do");
    assert_no_reload(&before, &pod.show_proc().await);
    // After a reload it did not see, adopting is refused (the state is not known).
    pod.cli().reload().await.expect("reload");
    let mut applier = Applier::new(pod.cli(), pod.render_settings());
    assert!(!applier.adopt(&desired).await);
}

async fn prefix_map_matches_longest_key_in_any_order(binary: HaproxyBinary) {
    // haproxy indexes case-sensitive `map_beg` patterns in a prefix tree: the longest
    // key wins whatever the file order or the order of runtime additions. Route
    // updates rely on it.
    let haproxy = Haproxy::start(&binary).await;
    let map = haproxy.config_dir.join("prefix.map");
    std::fs::write(&map, "/a/ short\n/a/b/c/ long\n").expect("map");
    let config = format!(
        "global\n    log stdout format raw local0\ndefaults\n    mode http\n    timeout connect 1s\n\
         \x20   timeout client 5s\n    timeout server 5s\nfrontend f\n    bind 127.0.0.1:{}\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"%[path,map_beg({},none)]\"\n",
        haproxy.http_port,
        map.display()
    );
    std::fs::write(haproxy.config_dir.join("haproxy.cfg"), config).expect("config");
    haproxy.cli().reload().await.expect("reload");
    let get = |path: &'static str| {
        let addr = haproxy.http_addr();
        async move {
            tugboat_testkit::get(addr, "x", path)
                .await
                .expect("GET")
                .body
        }
    };
    assert_eq!(get("/a/b/c/d").await, "long");
    for (key, value) in [("/x/", "short"), ("/x/y/z/", "long"), ("/x/y/", "mid")] {
        let answer = haproxy
            .cli()
            .worker_command(&format!("add map {} {key} {value}", map.display()))
            .await
            .expect("add map");
        assert!(answer.trim().is_empty(), "{answer}");
    }
    assert_eq!(get("/x/y/z/w").await, "long");
    assert_eq!(get("/x/y/q").await, "mid");
    assert_eq!(get("/x/q").await, "short");
}

async fn thousands_of_routes_at_once_are_split_not_dropped(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 32, 1).await;
    let pod = Scene::start(
        &haproxy,
        source,
        &objects(&[("web", &web)], &[("a", "a.example.com", "web")]),
    )
    .await;
    pod.wait_for_service("a.example.com", "/", "web").await;
    let before = pod.show_proc().await;
    // 1500 hosts in one Ingress: ~60 KB of map entries, far above haproxy's 16 KB buffer.
    let rules = (0..1500)
        .map(|i| {
            let host = format!("host-{i}.bulk.example.com");
            mk_rule(Some(&host), &[prefix("/", "web")])
        })
        .collect();
    pod.apply(&mk_ingress_with_rules("many", rules));
    pod.wait_for_service("host-1499.bulk.example.com", "/", "web")
        .await;
    for i in [0, 1, 499, 500, 750, 1000, 1498] {
        let reply = pod
            .get(&format!("host-{i}.bulk.example.com"), "/")
            .await
            .expect("GET");
        assert_eq!(reply.service(), Some("web"), "host-{i}: {reply:?}");
    }
    assert_no_reload(&before, &pod.show_proc().await);
}

async fn refused_config_is_retried_only_when_the_desired_state_changes(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = start_backends("web", 33, 1).await;
    // Something else holds the port the controller asks haproxy to bind.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    let taken_port = taken.local_addr().expect("address").port();
    let pod = Scene::start_with(
        &haproxy,
        source,
        &objects(&[("web", &web)], &[("a", "a.example.com", "web")]),
        |config| config.render.stats_port = taken_port,
    )
    .await;
    let refused = eventually(
        "haproxy refuses the config",
        Duration::from_secs(20),
        || async {
            let proc = pod.show_proc().await;
            (proc.failed_reloads == 1).then_some(proc)
        },
    )
    .await;
    // haproxy keeps running what it had; the files it loaded come back in place.
    let config_file = pod.config_dir.join("haproxy.cfg");
    eventually(
        "the previous files back",
        Duration::from_secs(10),
        || async {
            let config = std::fs::read_to_string(&config_file).ok()?;
            (config == tugboat_testkit::haproxy::INIT_CONFIG).then_some(())
        },
    )
    .await;
    // No retry while nothing changes.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(pod.show_proc().await.reloads, refused.reloads);
    assert!(!pod.status().ready);
    // A change of the desired state is tried again, and loads once the port is free.
    drop(taken);
    pod.apply(&mk_ingress("b", "b.example.com", "web"));
    pod.wait_for_service("b.example.com", "/", "web").await;
    pod.wait_for_service("a.example.com", "/", "web").await;
    assert_eq!(pod.show_proc().await.failed_reloads, 0);
}

/// Requests sent by a client loop, and those that failed (with the first few answers).
#[derive(Debug, Default)]
struct LoadCount {
    sent: usize,
    failed: usize,
    examples: Vec<String>,
}

impl LoadCount {
    fn fail(&mut self, what: String) {
        self.failed += 1;
        if self.examples.len() < 5 {
            self.examples.push(what);
        }
    }
}

/// Sends requests for `host` one after the other (a new connection each) until `stop`,
/// at most `limit` of them or for at most `time`; counts those not answered 200.
async fn client_loop(
    addr: std::net::SocketAddr,
    host: &'static str,
    stop: Arc<AtomicBool>,
    limit: usize,
    time: Duration,
) -> LoadCount {
    let started = Instant::now();
    let mut count = LoadCount::default();
    while !stop.load(Ordering::Relaxed) && count.sent < limit && started.elapsed() < time {
        count.sent += 1;
        let failure = match tugboat_testkit::get(addr, host, "/").await {
            Ok(reply) if reply.status == 200 => None,
            Ok(reply) => Some(format!("{} {}", reply.status, reply.body.trim())),
            Err(err) => Some(err.to_string()),
        };
        if let Some(failure) = failure {
            count.fail(failure);
        }
    }
    count
}

async fn whole_endpoint_sets_flip_under_load_without_a_failed_request(
    haproxy: HaproxyBinary,
    source: Source,
) {
    // Blue/green: Service `web` points at two endpoints, then at two others, back and
    // forth; all four stay alive. Every flip is applied at runtime, and at no moment may
    // the backend have no server to send a request to.
    let blue = start_backends("blue", 34, 2).await;
    let green = start_backends("green", 35, 2).await;
    let host = "flip.example.com";
    let pod = Scene::start(
        &haproxy,
        source,
        &objects(&[("web", &blue)], &[("flip", host, "web")]),
    )
    .await;
    pod.wait_for_service(host, "/", "blue").await;
    let before = pod.show_proc().await;

    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..2)
        .map(|_| {
            tokio::spawn(client_loop(
                pod.http_addr(),
                host,
                stop.clone(),
                40_000,
                Duration::from_secs(40),
            ))
        })
        .collect();
    const FLIPS: usize = 150;
    let started = Instant::now();
    let mut flips = 0;
    let mut checks = LoadCount::default();
    for flip in 0..FLIPS {
        let (servers, service) = if flip % 2 == 0 {
            (&green, "green")
        } else {
            (&blue, "blue")
        };
        pod.apply(&endpoints("web", servers));
        // The flip is live once the new set answers (bounded; every answer counts).
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            checks.sent += 1;
            match pod.get(host, "/").await {
                Ok(reply) if reply.status == 200 && reply.service() == Some(service) => break,
                Ok(reply) if reply.status == 200 => {}
                Ok(reply) => checks.fail(format!("{} {}", reply.status, reply.body.trim())),
                Err(err) => checks.fail(err.to_string()),
            }
            assert!(
                Instant::now() < deadline,
                "flip {flip} to {service} not live in 5 s"
            );
        }
        flips += 1;
        if started.elapsed() > Duration::from_secs(30) {
            break;
        }
    }
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let mut total = checks;
    for client in clients {
        let count = client.await.expect("client loop");
        total.sent += count.sent;
        total.failed += count.failed;
        total.examples.extend(count.examples);
        total.examples.truncate(5);
    }
    let after = pod.show_proc().await;
    eprintln!(
        "haproxy {} ({source:?}): {flips} endpoint-set flips in {elapsed:?}; {} of {} requests failed; \
         reloads {} -> {}",
        haproxy.series, total.failed, total.sent, before.reloads, after.reloads
    );
    assert_eq!(flips, FLIPS, "every flip applied within the time limit");
    assert!(total.sent > 1000, "enough requests to tell: {}", total.sent);
    assert_eq!(
        total.failed, 0,
        "{} of {} requests failed during the flips, e.g. {:?}",
        total.failed, total.sent, total.examples
    );
    assert_no_reload(&before, &after);
}

async fn restarted_controller_adopts_lingering_backends_without_reload(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = start_backends("web", 36, 2).await;
    let api = start_backends("api", 37, 1).await;
    let mut pod = Scene::start(
        &haproxy,
        source,
        &objects(
            &[("web", &web[..1]), ("api", &api)],
            &[("a", "a.example.com", "web"), ("b", "b.example.com", "api")],
        ),
    )
    .await;
    pod.wait_for_service("a.example.com", "/", "web").await;
    pod.wait_for_service("b.example.com", "/", "api").await;
    let before = pod.show_proc().await;
    // No route uses `api` any more: its route goes at runtime, its backend lingers.
    pod.delete(&mk_ingress("b", "b.example.com", "api"));
    pod.wait_for_status("b.example.com", "/", 404).await;
    eventually(
        "the unused backend lingers in the files",
        Duration::from_secs(5),
        || async {
            let config = tugboat_testkit::haproxy::read_config(&pod.config_dir)?;
            config
                .contains("# Service default/api port 80")
                .then_some(())
        },
    )
    .await;
    assert_no_reload(&before, &pod.show_proc().await);
    // Let the controller finish its update (files, then the marker).
    tokio::time::sleep(Duration::from_millis(300)).await;

    // A rolling update of the controller: same inputs, haproxy keeps running.
    pod.restart_controller_and_settle().await;
    assert_no_reload(&before, &pod.show_proc().await);
    pod.wait_for_service("a.example.com", "/", "web").await;
    assert_eq!(
        pod.get("b.example.com", "/").await.expect("GET").status,
        404
    );

    // Later changes still apply: endpoints at runtime, and the route back to `api`.
    pod.apply(&endpoints("web", &web));
    wait_for_endpoints(&pod, "a.example.com", &web).await;
    assert_no_reload(&before, &pod.show_proc().await);
    pod.apply(&mk_ingress("b", "b.example.com", "api"));
    pod.wait_for_service("b.example.com", "/", "api").await;
    pod.wait_for_service("a.example.com", "/", "web").await;
}

/// The status of a POST of 1.5 MiB to `host` through the scene's haproxy. haproxy
/// answers 413 before it has read the body and closes, so the client may meet the
/// reset while it still sends: such a try is made again (at most three).
async fn status_of_large_body(pod: &Scene, host: &str) -> Option<u16> {
    let body = vec![b'x'; 1536 * 1024];
    for _ in 0..3 {
        let answer = tugboat_testkit::http::request_with_body(
            pod.http_addr(),
            "POST",
            host,
            "/",
            &[],
            Some(&body),
        )
        .await;
        if let Ok(reply) = answer {
            return Some(reply.status);
        }
    }
    None
}

/// A feature set no route uses any more (the rules of an annotation's former value)
/// lingers in the running haproxy until its next reload; a restarted controller, which
/// knows only the objects, adopts haproxy without reloading for it.
async fn restarted_controller_adopts_lingering_feature_sets_without_reload(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = start_backends("web", 38, 1).await;
    let limited = |size: &str| {
        with_keys(
            mk_ingress("a", "a.example.com", "web"),
            &[("proxy-body-size", size)],
        )
    };
    let mut objects: Vec<Value> = mk_service_of("web", &web).into();
    objects.push(to_json(&limited("1m")));
    let mut pod = Scene::start(&haproxy, source, &objects).await;
    pod.wait_for_service("a.example.com", "/", "web").await;
    let limit_is = |wanted: u16| {
        let pod = &pod;
        async move {
            eventually(
                &format!("a 1.5 MiB body gets {wanted}"),
                Duration::from_secs(10),
                || async {
                    (status_of_large_body(pod, "a.example.com").await == Some(wanted)).then_some(())
                },
            )
            .await
        }
    };
    limit_is(413).await;
    // 2m: a new feature set (a reload); then 1m again, whose rules haproxy still has: the
    // route changes at runtime and the 2m rules linger.
    pod.apply(&limited("2m"));
    limit_is(200).await;
    pod.apply(&limited("1m"));
    limit_is(413).await;
    eventually(
        "the unused rules linger in the files",
        Duration::from_secs(5),
        || async {
            let config = tugboat_testkit::haproxy::read_config(&pod.config_dir)?;
            config.contains("gt 2097152").then_some(())
        },
    )
    .await;
    // Let the controller finish its update (files, then the marker).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = pod.show_proc().await;

    pod.restart_controller_and_settle().await;
    assert_no_reload(&before, &pod.show_proc().await);
    assert_eq!(status_of_large_body(&pod, "a.example.com").await, Some(413));
    pod.wait_for_service("a.example.com", "/", "web").await;
}
