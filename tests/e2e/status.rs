//! End to end of `tugboat status`: a controller on the fake API server with a real
//! haproxy, a reload, a runtime change and a bad Ingress, then the built `tugboat status`
//! command against the controller's admin server, in text and in JSON.

use std::net::SocketAddr;
use std::process::Output;
use std::time::Duration;

use serde_json::Value;
use tugboat::cluster::WATCHED_KINDS;
use tugboat::status::ApplyResult;
use tugboat_haproxy::MasterCli;
use tugboat_testkit::cluster_pod::{TUGBOAT_CLASS, options};
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{mk_endpoint_slice, mk_ingress, mk_service_of};
use tugboat_testkit::{ClusterPod, FakeApiServer, HaproxyBinary, eventually, haproxy_tests};

haproxy_tests!(status_names_haproxy_the_applies_the_problems_the_leader_and_the_watches);

/// `tugboat status ARGS...`, the binary built from the current code.
async fn tugboat_status(args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_tugboat-pod-controller"))
        .arg("status")
        .args(args)
        .output()
        .await
        .expect("run tugboat status")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

async fn status_names_haproxy_the_applies_the_problems_the_leader_and_the_watches(
    haproxy: HaproxyBinary,
) {
    let web = start_backends("web", 58, 2).await;
    let api = start_backends("api", 59, 1).await;
    let server = FakeApiServer::start().await;
    server.apply_yaml(TUGBOAT_CLASS);
    for object in mk_service_of("web", &web[..1]) {
        server.apply(&object);
    }
    server.apply(&mk_ingress("shop", "shop.example.com", "web"));
    // A bad Ingress: its Service does not exist.
    server.apply(&mk_ingress("broken", "broken.example.com", "missing"));
    // New backends reload, as before haproxy 3.4 (or with `--dynamic-backends=false`):
    // the screen shows that reload.
    let pod = ClusterPod::start_with(&haproxy, &server, options("pod-a"), |config| {
        config.render.dynamic_backends = false
    })
    .await;
    pod.wait_for_service("shop.example.com", "/", "web").await;
    let (admin_addr, _admin) = tugboat_testkit::serve_admin(pod.admin_state()).await;
    let last_apply = |delivery: &'static str| {
        let status = pod.status.clone();
        async move {
            let status = status.borrow();
            let apply = status.activity.last_apply.as_ref()?;
            (apply.delivery == delivery && apply.result == ApplyResult::Applied).then_some(())
        }
    };

    // A reload: a new Ingress on a new Service (a new backend).
    for object in mk_service_of("api", &api) {
        server.apply(&object);
    }
    server.apply(&mk_ingress("api", "api.example.com", "api"));
    pod.wait_for_service("api.example.com", "/", "api").await;
    eventually("a reload", Duration::from_secs(10), || last_apply("reload")).await;

    // A runtime change: a second endpoint for web.
    let addrs: Vec<SocketAddr> = web.iter().map(|s| s.addr).collect();
    server.apply(&mk_endpoint_slice("web", "http", &addrs));
    eventually("a runtime apply", Duration::from_secs(10), || {
        last_apply("runtime")
    })
    .await;

    let proc = MasterCli::new(&pod.haproxy.master_socket)
        .show_proc()
        .await
        .expect("show proc");
    assert!(
        proc.version.starts_with(&haproxy.series),
        "{} is not of {}",
        proc.version,
        haproxy.series
    );
    let address = format!("http://{admin_addr}");

    // The text screen.
    let output = tugboat_status(&["--address", &address]).await;
    let text = stdout(&output);
    assert!(output.status.success(), "{output:?}");
    let line = |start: &str| {
        text.lines()
            .find(|line| line.starts_with(start))
            .unwrap_or_else(|| panic!("no line {start:?} in:\n{text}"))
            .to_string()
    };
    let first = line("Tugboat ");
    assert!(first.contains(": ready, up "), "{text}");
    assert!(first.ends_with(", leader"), "{text}");
    assert!(
        line("haproxy ").contains(&format!(
            "{}, master pid {}, worker pid {}",
            proc.version,
            proc.master_pid,
            proc.worker_pid.expect("a worker")
        )),
        "{text}"
    );
    assert!(
        line("haproxy ").contains(&format!("{} reloads (0 failed", proc.reloads)),
        "{text}"
    );
    assert!(
        line("Last apply ").contains(": runtime (patch), applied in "),
        "{text}"
    );
    assert!(
        line("Last reload ").ends_with(": new-backend, loaded"),
        "{text}"
    );
    assert!(line("Applies ").contains(" 0 refused, 0 failed"), "{text}");
    assert!(
        line("Source ").contains("Kubernetes API, synced "),
        "{text}"
    );
    assert_eq!(
        line("            watches synced: "),
        format!("            watches synced: {}", WATCHED_KINDS.join(", ")),
        "{text}"
    );
    assert!(!text.contains("NOT listed"), "{text}");
    assert!(text.contains("\n  Ingress default/broken\n"), "{text}");
    assert!(
        text.contains("    spec.rules[0].http.paths[0].backend.service"),
        "{text}"
    );
    assert!(!text.contains("default/shop"), "{text}");

    // The JSON.
    let output = tugboat_status(&["--address", &address, "--output", "json"]).await;
    assert!(output.status.success(), "{output:?}");
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["ready"], true, "{json}");
    assert_eq!(json["controller"]["leader"], true, "{json}");
    assert_eq!(json["haproxy"]["version"], proc.version.as_str(), "{json}");
    assert_eq!(json["last_apply"]["delivery"], "runtime", "{json}");
    assert_eq!(json["last_reload"]["result"], "applied", "{json}");
    assert!(json["applies"]["reload"].as_u64() >= Some(2), "{json}");
    assert!(json["applies"]["runtime"].as_u64() >= Some(1), "{json}");
    let problems = json["problems"].as_array().expect("problems");
    assert!(
        problems.iter().any(|p| p["kind"] == "Ingress"
            && p["name"] == "broken"
            && p["field"]
                .as_str()
                .is_some_and(|f| f.starts_with("spec.rules[0]"))),
        "{json}"
    );
    let watches = json["source"]["watches"].as_array().expect("watches");
    assert_eq!(watches.len(), WATCHED_KINDS.len(), "{json}");
    assert!(watches.iter().all(|w| w["synced_at"].is_string()), "{json}");

    // The same screen from the admin server itself.
    let reply = tugboat_testkit::get(admin_addr, "localhost", "/status?format=text")
        .await
        .expect("GET /status");
    assert_eq!(reply.status, 200);
    assert!(
        reply.body.contains("\n  Ingress default/broken\n"),
        "{}",
        reply.body
    );

    // The metrics count the applies by delivery and the reloads by reason: the start-up's
    // and the new backend's, the endpoint at runtime; the lag of both changes.
    let metrics = tugboat_testkit::get(admin_addr, "localhost", "/metrics")
        .await
        .expect("GET /metrics")
        .body;
    let value = |series: &str| -> f64 {
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {series} in:\n{metrics}"))
    };
    for (series, at_least) in [
        (
            r#"tugboat_applies_total{delivery="reload",result="applied"}"#,
            2.0,
        ),
        (
            r#"tugboat_applies_total{delivery="runtime",result="applied"}"#,
            1.0,
        ),
        (r#"tugboat_reloads_total{reason="unknown-state"}"#, 1.0),
        (r#"tugboat_reloads_total{reason="new-backend"}"#, 1.0),
        (
            r#"tugboat_apply_duration_seconds_count{delivery="reload"}"#,
            2.0,
        ),
        (
            r#"tugboat_apply_duration_seconds_count{delivery="runtime"}"#,
            1.0,
        ),
        (r#"tugboat_apply_lag_seconds_count{delivery="reload"}"#, 1.0),
        (
            r#"tugboat_apply_lag_seconds_count{delivery="runtime"}"#,
            1.0,
        ),
    ] {
        assert!(
            value(series) >= at_least,
            "{series} below {at_least}:\n{metrics}"
        );
    }
    assert_eq!(
        value(r#"tugboat_object_problems{kind="Ingress",reason="ServiceNotFound"}"#),
        1.0
    );
    assert!(
        !metrics.contains(r#"result="refused""#) && !metrics.contains(r#"result="failed""#),
        "{metrics}"
    );

    // No controller there: a clear error naming the address, and a failure.
    let nobody = format!("http://127.0.0.1:{}", tugboat_testkit::free_port());
    let output = tugboat_status(&["--address", &nobody]).await;
    assert!(!output.status.success(), "{output:?}");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains(&format!(
            "cannot get the status of the controller at {nobody}"
        )),
        "{said}"
    );
}
