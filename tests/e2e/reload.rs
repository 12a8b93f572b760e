//! End to end on the haproxy side: the master CLI client and the applier against real
//! haproxy 2.6 and 3.0 (reload outcomes, refused configs, the socket's reload window).

use std::collections::BTreeMap;
use std::time::Duration;

use tugboat_haproxy::{Applier, ApplyError, MasterCli, ReloadOutcome, RenderedFiles};
use tugboat_testkit::{Haproxy, HaproxyBinary, haproxy_tests};

haproxy_tests!(
    reload_reports_success_and_moves_the_counter,
    refused_config_keeps_serving_and_restores_files,
    commands_ride_out_the_reload_window,
    controller_waits_for_a_late_haproxy,
);

fn files(haproxy: &Haproxy, config: &str) -> RenderedFiles {
    RenderedFiles {
        files: BTreeMap::from([(haproxy.config_dir.join("haproxy.cfg"), config.to_string())]),
    }
}

fn serving_config(port: u16, body: &str) -> String {
    format!(
        "global\n    log stdout format raw local0\ndefaults\n    mode http\n    timeout connect 5s\n\
         \x20   timeout client 5s\n    timeout server 5s\nfrontend f\n    bind 127.0.0.1:{port}\n\
         \x20   http-request return status 200 content-type text/plain string \"{body}\"\n"
    )
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
    let port = haproxy.http_port;
    let mut applier = Applier::new(haproxy.cli());
    let good = files(&haproxy, &serving_config(port, "good"));
    let plan = applier.plan(good.clone());
    applier.apply(plan).await.expect("good config applies");
    let reply = tugboat_testkit::get(haproxy.http_addr(), "x", "/")
        .await
        .expect("GET");
    assert_eq!(reply.body, "good");

    let bad = files(
        &haproxy,
        &serving_config(port, "bad").replace("frontend f\n", "frontend f\n    bogus_keyword on\n"),
    );
    let plan = applier.plan(bad);
    let err = applier
        .apply(plan)
        .await
        .expect_err("haproxy refuses the bad config");
    let ApplyError::Refused { message } = err else {
        panic!("expected a refused reload, got {err}");
    };
    if binary.series != "2.6" {
        // 3.0 returns its own message; 2.6 has no way to say it on the master socket.
        assert!(message.contains("bogus_keyword"), "{message}");
    }
    assert!(!message.is_empty());
    // The last good files are back, and the old worker still serves.
    let on_disk = std::fs::read_to_string(haproxy.config_dir.join("haproxy.cfg")).expect("cfg");
    assert_eq!(
        Some(on_disk.as_str()),
        good.files.values().next().map(String::as_str)
    );
    let reply = tugboat_testkit::get(haproxy.http_addr(), "x", "/")
        .await
        .expect("GET");
    assert_eq!(reply.body, "good");
    assert!(haproxy.is_running());
    assert_eq!(haproxy.show_proc().await.failed_reloads, 1);

    // The next good config loads and clears the failure.
    let plan = applier.plan(files(&haproxy, &serving_config(port, "better")));
    applier
        .apply(plan)
        .await
        .expect("good config applies again");
    let reply = tugboat_testkit::get(haproxy.http_addr(), "x", "/")
        .await
        .expect("GET");
    assert_eq!(reply.body, "better");
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
