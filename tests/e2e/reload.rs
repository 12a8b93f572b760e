//! End to end on the haproxy side: the master CLI client and the applier against real
//! haproxy 2.6 and 3.0 (reload outcomes, refused configs, the socket's reload window).

use std::time::Duration;

use tugboat_haproxy::render::BACKENDS_PER_FILE;
use tugboat_haproxy::{Applier, ApplyError, MasterCli, ReloadOutcome};
use tugboat_model::desired::ServicePortRef;
use tugboat_model::{
    Backend, BackendName, Desired, Endpoint, HostMatch, ObjectKey, PathMatch, Route,
};
use tugboat_testkit::echo::EchoServer;
use tugboat_testkit::{Haproxy, HaproxyBinary, haproxy_tests};

haproxy_tests!(
    reload_reports_success_and_moves_the_counter,
    refused_config_keeps_serving_and_restores_files,
    commands_ride_out_the_reload_window,
    controller_waits_for_a_late_haproxy,
    backends_spread_over_files_load_and_shrink_without_strays,
);

/// A desired state with no routes: haproxy serves 404 on the given settings' port.
fn empty_state() -> Desired {
    Desired::default()
}

async fn reload_reports_success_and_moves_the_counter(binary: HaproxyBinary) {
    let haproxy = Haproxy::start(&binary).await;
    let before = haproxy.show_proc().await;
    let outcome = haproxy.cli().reload().await.expect("reload");
    assert!(
        matches!(outcome, ReloadOutcome::Loaded { .. }),
        "{outcome:?}"
    );
    let after = haproxy.show_proc().await;
    assert_eq!(after.master_pid, before.master_pid);
    assert_eq!(after.reloads, before.reloads + 1);
    assert_eq!(after.failed_reloads, 0);
    assert_ne!(after.worker_pid, before.worker_pid, "a new worker serves");
}

async fn refused_config_keeps_serving_and_restores_files(binary: HaproxyBinary) {
    let mut haproxy = Haproxy::start(&binary).await;
    let settings = haproxy.render_settings();
    let mut applier = Applier::new(haproxy.cli(), settings.clone());
    let plan = applier.plan(empty_state());
    applier.apply(plan).await.expect("the first config applies");
    let served = tugboat_testkit::get(haproxy.http_addr(), "x", "/")
        .await
        .expect("GET");
    assert_eq!(served.status, 404);
    let good = std::fs::read_to_string(settings.config_file()).expect("config");

    // The same state on a port something else holds: haproxy refuses the reload.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    let taken_port = taken.local_addr().expect("addr").port();
    let mut conflicting = settings.clone();
    conflicting.http_port = taken_port;
    let mut second = Applier::new(haproxy.cli(), conflicting);
    let plan = second.plan(empty_state());
    let err = second
        .apply(plan)
        .await
        .expect_err("haproxy refuses the reload");
    let ApplyError::Refused { message } = err else {
        panic!("expected a refused reload, got {err}");
    };
    if binary.series != "2.6" {
        // 3.0 returns its own message; 2.6 cannot say it on the master socket.
        assert!(message.contains("bind"), "{message}");
    }
    assert!(!message.is_empty());
    // The last files haproxy loaded are back, and the old worker still serves.
    let on_disk = std::fs::read_to_string(settings.config_file()).expect("cfg");
    assert_eq!(on_disk, good);
    let served = tugboat_testkit::get(haproxy.http_addr(), "x", "/")
        .await
        .expect("GET");
    assert_eq!(served.status, 404);
    assert!(haproxy.is_running());
    assert_eq!(haproxy.show_proc().await.failed_reloads, 1);

    // Once the port is free the same state loads and clears the failure.
    drop(taken);
    let plan = second.plan(empty_state());
    second
        .apply(plan)
        .await
        .expect("applies once the port is free");
    let moved = std::net::SocketAddr::from(([127, 0, 0, 1], taken_port));
    let served = tugboat_testkit::get(moved, "x", "/").await.expect("GET");
    assert_eq!(served.status, 404);
    assert_eq!(haproxy.show_proc().await.failed_reloads, 0);
}

async fn commands_ride_out_the_reload_window(binary: HaproxyBinary) {
    let haproxy = Haproxy::start(&binary).await;
    let cli = haproxy.cli();
    // Commands sent while reloads come one after another all get an answer.
    let reloader = {
        let cli = cli.clone();
        tokio::spawn(async move {
            for _ in 0..5 {
                cli.reload().await.expect("reload");
            }
        })
    };
    let mut answered = 0;
    while !reloader.is_finished() {
        let reply = cli
            .command("show proc")
            .await
            .expect("show proc during reloads");
        assert!(reply.contains("master"), "{reply}");
        answered += 1;
    }
    reloader.await.expect("reloads");
    assert!(answered > 0);
    assert_eq!(haproxy.show_proc().await.reloads, 5);
}

async fn controller_waits_for_a_late_haproxy(binary: HaproxyBinary) {
    // The controller starts first, on a socket that does not exist yet.
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("master.sock");
    let cli = MasterCli::new(&socket);
    let waiter = tokio::spawn(async move { cli.wait_until_ready().await });
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(!waiter.is_finished());
    // haproxy appears; the waiter notices it.
    let haproxy = Haproxy::start(&binary).await;
    std::os::unix::fs::symlink(&haproxy.master_socket, &socket).expect("symlink socket");
    let info = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("waiter notices haproxy")
        .expect("waiter task");
    assert_eq!(info.master_pid, haproxy.show_proc().await.master_pid);
}

/// `count` backends (`svc0`, `svc1`, ...), each with the one endpoint `endpoint`, and a
/// route `svcN.example.com/` to each.
fn many_backends(count: usize, endpoint: std::net::SocketAddr) -> Desired {
    let mut desired = Desired::default();
    for index in 0..count {
        let service = ObjectKey::new("default", format!("svc{index}"));
        let port = ServicePortRef::Number(80);
        let name = BackendName::for_service_port(&service, &port).expect("valid name");
        desired.routes.push(Route {
            host: HostMatch::Exact(format!("svc{index}.example.com")),
            path: PathMatch::Prefix("/".into()),
            backend: name.clone(),
            ingress: ObjectKey::new("default", "many"),
            owner_kind: tugboat_model::RouteOwnerKind::Ingress,
            features: None,
            canary: None,
        });
        desired.backends.insert(
            name,
            Backend {
                service,
                port,
                endpoints: vec![Endpoint {
                    address: endpoint.ip(),
                    port: endpoint.port(),
                }],
                draining: Vec::new(),
                external: None,
                options: Default::default(),
            },
        );
    }
    desired
        .routes
        .sort_by(|a, b| (&a.host, &a.path).cmp(&(&b.host, &b.path)));
    desired
}

/// The `*.cfg` files of the config folder, by name.
fn config_file_names(haproxy: &Haproxy) -> Vec<String> {
    tugboat_haproxy::files::config_files_in(&haproxy.config_dir)
        .expect("config folder")
        .iter()
        .filter_map(|path| Some(path.file_name()?.to_str()?.to_string()))
        .collect()
}

/// Backends spread over several config files load; a controller that starts again with
/// fewer backends (fewer files) removes the files it does not write before it reloads,
/// so that haproxy never loads a backend twice.
async fn backends_spread_over_files_load_and_shrink_without_strays(binary: HaproxyBinary) {
    let haproxy = Haproxy::start(&binary).await;
    let echo = EchoServer::start("echo", "127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("echo backend");
    let settings = haproxy.render_settings();
    let many = 2 * BACKENDS_PER_FILE + 1;
    let mut applier = Applier::new(haproxy.cli(), settings.clone());
    let plan = applier.plan(many_backends(many, echo.addr));
    applier
        .apply(plan)
        .await
        .expect("the spread config applies");
    assert_eq!(
        config_file_names(&haproxy),
        [
            "haproxy.cfg",
            "haproxy_backends_000.cfg",
            "haproxy_backends_001.cfg",
            "haproxy_backends_002.cfg"
        ]
    );
    let last = format!("svc{}.example.com", many - 1);
    for host in ["svc0.example.com", last.as_str()] {
        let reply = tugboat_testkit::get(haproxy.http_addr(), host, "/")
            .await
            .expect("GET");
        assert_eq!(reply.status, 200, "{host}: {reply:?}");
    }

    // A new controller (nothing known) with a few backends: one file, and a reload that
    // haproxy takes.
    let mut restarted = Applier::new(haproxy.cli(), settings);
    let plan = restarted.plan(many_backends(3, echo.addr));
    restarted
        .apply(plan)
        .await
        .expect("the smaller config applies");
    assert_eq!(
        config_file_names(&haproxy),
        ["haproxy.cfg", "haproxy_backends_000.cfg"]
    );
    assert_eq!(haproxy.show_proc().await.failed_reloads, 0);
    let reply = tugboat_testkit::get(haproxy.http_addr(), "svc2.example.com", "/")
        .await
        .expect("GET");
    assert_eq!(reply.status, 200, "{reply:?}");
    let reply = tugboat_testkit::get(haproxy.http_addr(), &last, "/")
        .await
        .expect("GET");
    assert_eq!(reply.status, 404, "{reply:?}");
}
