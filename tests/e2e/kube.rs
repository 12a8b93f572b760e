//! End to end on the Kubernetes API: objects in the fake API server, controllers on the
//! real kube-rs client, real haproxy, real HTTP. Create, update and delete of each kind,
//! IngressClass filtering, namespace scoping, leader election with status and Events,
//! and resilience to dropped watches, API server restarts and `410 Gone`.

use std::net::SocketAddr;
use std::time::Duration;

use kube::ResourceExt;
use serde_json::{Value, json};
use tugboat::admin::AdminState;
use tugboat::controller::ControllerStatus;
use tugboat_model::ObjectKey;
use tugboat_model::class::ClassFilter;
use tugboat_testkit::cluster_pod::{TUGBOAT_CLASS, options};
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{
    ANN_S3CRET, S3CRET_HASH, in_namespace, mk_config_map, mk_endpoint_slice, mk_ingress,
    mk_ingress_class, mk_secret, mk_service, mk_service_of, mk_tls_secret, to_json, to_yaml,
    with_class, with_keys, with_tls,
};
use tugboat_testkit::{
    ClusterPod, EchoServer, FakeApiServer, HaproxyBinary, eventually, haproxy_tests,
};

haproxy_tests!(
    routes_objects_created_updated_and_deleted_in_the_api,
    serves_only_its_ingress_classes,
    watches_only_the_given_namespaces,
    only_the_leader_writes_status_and_events,
    survives_dropped_watches_and_api_server_restarts,
    relists_after_410_gone_without_reloading,
    admin_server_reports_health_readiness_and_metrics,
    tls_and_basic_auth_secrets_come_from_the_api,
    leadership_moves_when_the_leader_stops,
    waits_for_an_api_server_that_is_not_up_yet,
    access_lists_from_config_maps_are_watched,
    a_restarted_leader_rewrites_no_status_that_is_right,
    every_watch_is_back_soon_after_an_api_server_outage,
);

/// A fake API server with Tugboat's IngressClass, a Service `web` (one echo backend on
/// 127.0.`net`.1) and an Ingress `shop` routing shop.example.com to it.
async fn shop_cluster(net: u8) -> (Vec<EchoServer>, FakeApiServer) {
    let web = start_backends("web", net, 1).await;
    let server = FakeApiServer::start().await;
    server.apply_yaml(TUGBOAT_CLASS);
    apply_service(&server, "web", &web);
    server.apply(&mk_ingress("shop", "shop.example.com", "web"));
    (web, server)
}

/// Service `name` (port 80 named `http`) and its EndpointSlice of `servers`, in
/// namespace `default`.
fn apply_service(server: &FakeApiServer, name: &str, servers: &[EchoServer]) {
    for object in mk_service_of(name, servers) {
        server.apply(&object);
    }
}

async fn routes_objects_created_updated_and_deleted_in_the_api(haproxy: HaproxyBinary) {
    let (web, server) = shop_cluster(21).await;
    let api_backend = start_backends("api", 22, 1).await;
    let pod = ClusterPod::start(&haproxy, &server, options("pod-a")).await;
    pod.wait_for_service("shop.example.com", "/", "web").await;

    // Ingress update: another Service (created now).
    apply_service(&server, "api", &api_backend);
    server.apply(&mk_ingress("shop", "shop.example.com", "api"));
    pod.wait_for_service("shop.example.com", "/", "api").await;

    // EndpointSlice update: the api Service now points at the web backend's address.
    let addrs: Vec<_> = web.iter().map(|s| s.addr).collect();
    server.apply(&mk_endpoint_slice("api", "http", &addrs));
    pod.wait_for_service("shop.example.com", "/", "web").await;

    // EndpointSlice delete: no endpoints, 503.
    assert!(server.delete("EndpointSlice", "default", "api-abc"));
    pod.wait_for_status("shop.example.com", "/", 503).await;

    // Service delete: the route's backend is gone.
    assert!(server.delete("Service", "default", "api"));
    eventually(
        "a problem for the missing Service",
        Duration::from_secs(10),
        || async {
            pod.status
                .borrow()
                .problems
                .iter()
                .any(|p| p.message.contains("api"))
                .then_some(())
        },
    )
    .await;

    // Ingress delete: nothing routes, 404.
    assert!(server.delete("Ingress", "default", "shop"));
    pod.wait_for_status("shop.example.com", "/", 404).await;

    // IngressClass delete: a new Ingress of that class is not served.
    assert!(server.delete("IngressClass", "", "tugboat"));
    server.apply(&mk_ingress("late", "late.example.com", "web"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        pod.get("late.example.com", "/")
            .await
            .expect("request")
            .status,
        404
    );
    // ... and is once the class is back.
    server.apply_yaml(TUGBOAT_CLASS);
    pod.wait_for_service("late.example.com", "/", "web").await;
    assert!(pod.controller_running());
}

async fn serves_only_its_ingress_classes(haproxy: HaproxyBinary) {
    let web = start_backends("web", 23, 1).await;
    let server = FakeApiServer::start().await;
    server.apply_yaml(TUGBOAT_CLASS);
    server.apply(&mk_ingress_class("nginx", "k8s.io/ingress-nginx", false));
    apply_service(&server, "web", &web);
    server.apply(&mk_ingress("ours", "ours.example.com", "web"));
    server.apply(&with_class(
        mk_ingress("theirs", "theirs.example.com", "web"),
        Some("nginx"),
    ));
    // Another controller's Ingress pointing at a Service that does not exist: it must
    // not give a problem, an Event or a status.
    server.apply(&with_class(
        mk_ingress("theirs-broken", "broken.example.com", "nope"),
        Some("nginx"),
    ));
    server.apply(&with_class(
        mk_ingress("classless", "classless.example.com", "web"),
        None,
    ));
    let mut opts = options("pod-a");
    opts.publish.addresses = vec!["127.0.0.10".into()];
    let pod = ClusterPod::start(&haproxy, &server, opts).await;
    pod.wait_for_service("ours.example.com", "/", "web").await;
    assert_eq!(
        pod.get("theirs.example.com", "/")
            .await
            .expect("request")
            .status,
        404
    );
    // No default class and no --watch-ingress-without-class: not ours.
    assert_eq!(
        pod.get("classless.example.com", "/")
            .await
            .expect("request")
            .status,
        404
    );
    // Our status lands on our Ingress only.
    eventually("status on our Ingress", Duration::from_secs(10), || async {
        let ours = server.get("Ingress", "default", "ours")?;
        (ours["status"]["loadBalancer"]["ingress"] == json!([{"ip": "127.0.0.10"}])).then_some(())
    })
    .await;
    for name in ["theirs", "theirs-broken", "classless"] {
        let object = server.get("Ingress", "default", name).expect("Ingress");
        assert!(object["status"].is_null(), "{name} got a status: {object}");
    }
    assert!(
        pod.status.borrow().problems.is_empty(),
        "{:?}",
        pod.status.borrow().problems
    );
    assert!(
        server.list("Event").is_empty(),
        "{:?}",
        server.list("Event")
    );

    // Our class becomes the default: the classless Ingress is served.
    server.apply(&mk_ingress_class("tugboat", "tugboat.dev/ingress", true));
    pod.wait_for_service("classless.example.com", "/", "web")
        .await;

    // The legacy annotation names the class too.
    let mut legacy = with_class(mk_ingress("legacy", "legacy.example.com", "web"), None);
    legacy
        .annotations_mut()
        .insert("kubernetes.io/ingress.class".into(), "tugboat".into());
    server.apply(&legacy);
    pod.wait_for_service("legacy.example.com", "/", "web").await;

    // Our Ingress moves to another class: it stops routing and its status is cleared.
    server.apply(&with_class(
        mk_ingress("ours", "ours.example.com", "web"),
        Some("nginx"),
    ));
    pod.wait_for_status("ours.example.com", "/", 404).await;
    eventually("status cleared", Duration::from_secs(10), || async {
        let ours = server.get("Ingress", "default", "ours")?;
        ours["status"]["loadBalancer"]["ingress"]
            .is_null()
            .then_some(())
    })
    .await;
}

async fn watches_only_the_given_namespaces(haproxy: HaproxyBinary) {
    let web = start_backends("web", 24, 1).await;
    let server = FakeApiServer::start().await;
    server.apply_yaml(TUGBOAT_CLASS);
    let addrs: Vec<SocketAddr> = web.iter().map(|s| s.addr).collect();
    for ns in ["team-a", "team-b", "team-c"] {
        server.apply(&in_namespace(mk_service("web", "http", 80), ns));
        server.apply(&in_namespace(mk_endpoint_slice("web", "http", &addrs), ns));
        server.apply(&in_namespace(
            mk_ingress("shop", &format!("{ns}.example.com"), "web"),
            ns,
        ));
    }
    let mut opts = options("pod-a");
    // Two namespaces: one watch per namespace and kind, their stores merged.
    opts.source.namespaces = vec!["team-a".into(), "team-b".into()];
    opts.source.class = ClassFilter::default();
    let pod = ClusterPod::start(&haproxy, &server, opts).await;
    pod.wait_for_service("team-a.example.com", "/", "web").await;
    pod.wait_for_service("team-b.example.com", "/", "web").await;
    assert_eq!(
        pod.get("team-c.example.com", "/")
            .await
            .expect("request")
            .status,
        404
    );
    let served = eventually("the served Ingresses", Duration::from_secs(5), || async {
        let served = pod.status.borrow().served_ingresses.clone();
        (served.len() >= 2).then_some(served)
    })
    .await;
    assert_eq!(
        served.into_iter().collect::<Vec<_>>(),
        vec![
            ObjectKey::new("team-a", "shop"),
            ObjectKey::new("team-b", "shop")
        ]
    );
    // A change in an unwatched namespace is not seen.
    for ns in ["team-c", "team-b"] {
        server.apply(&in_namespace(
            mk_ingress("more", &format!("more-{ns}.example.com"), "web"),
            ns,
        ));
    }
    pod.wait_for_service("more-team-b.example.com", "/", "web")
        .await;
    assert_eq!(
        pod.get("more-team-c.example.com", "/")
            .await
            .expect("request")
            .status,
        404
    );
}

async fn only_the_leader_writes_status_and_events(haproxy: HaproxyBinary) {
    let (_web, server) = shop_cluster(25).await;
    server.apply(&mk_ingress("broken", "broken.example.com", "missing"));
    let mut options_a = options("pod-a");
    options_a.publish.addresses = vec!["127.0.0.11".into()];
    let mut options_b = options("pod-b");
    options_b.publish.addresses = vec!["127.0.0.12".into()];
    let a = ClusterPod::start(&haproxy, &server, options_a).await;
    let b = ClusterPod::start(&haproxy, &server, options_b).await;
    // Every replica configures its own haproxy.
    a.wait_for_service("shop.example.com", "/", "web").await;
    b.wait_for_service("shop.example.com", "/", "web").await;

    let leader = eventually("a Lease holder", Duration::from_secs(15), || async {
        let lease = server.get("Lease", "tugboat-system", "tugboat-leader")?;
        lease["spec"]["holderIdentity"].as_str().map(str::to_string)
    })
    .await;
    let (leader_pod, leader_ip, other_ip) = if leader == "pod-a" {
        (&a, "127.0.0.11", "127.0.0.12")
    } else {
        (&b, "127.0.0.12", "127.0.0.11")
    };
    eventually(
        "status from the leader",
        Duration::from_secs(10),
        || async {
            let shop = server.get("Ingress", "default", "shop")?;
            (shop["status"]["loadBalancer"]["ingress"] == json!([{"ip": leader_ip}])).then_some(())
        },
    )
    .await;
    let events_for_broken = || {
        server
            .list("Event")
            .into_iter()
            .filter(|e| {
                e["regarding"]["name"] == "broken" || e["involvedObject"]["name"] == "broken"
            })
            .collect::<Vec<Value>>()
    };
    eventually(
        "a Warning Event on the broken Ingress",
        Duration::from_secs(10),
        || async { (!events_for_broken().is_empty()).then_some(()) },
    )
    .await;
    // More updates (a new Ingress) do not post the same problem again.
    server.apply(&mk_ingress("more", "more.example.com", "web"));
    leader_pod
        .wait_for_service("more.example.com", "/", "web")
        .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let events = events_for_broken();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "Warning");
    assert_eq!(events[0]["reason"], "ServiceNotFound");
    // The other replica never wrote a status.
    let status_writes: Vec<_> = server
        .writes()
        .into_iter()
        .filter(|w| w.path.ends_with("/status") && w.path.contains("/ingresses/"))
        .collect();
    assert!(!status_writes.is_empty());
    for write in &status_writes {
        assert!(!write.body.to_string().contains(other_ip), "{write:?}");
    }
    // The broken Ingress is served too (its route answers 503), so it has a status.
    let broken = server.get("Ingress", "default", "broken").expect("Ingress");
    assert_eq!(
        broken["status"]["loadBalancer"]["ingress"],
        json!([{"ip": leader_ip}])
    );
    let leaders = [&a, &b]
        .iter()
        .filter(|pod| {
            pod.metrics
                .encode()
                .lines()
                .any(|line| line == "tugboat_leader 1")
        })
        .count();
    assert_eq!(leaders, 1);
}

async fn survives_dropped_watches_and_api_server_restarts(haproxy: HaproxyBinary) {
    let web = start_backends("web", 26, 1).await;
    let mut server = FakeApiServer::start().await;
    server.apply_yaml(TUGBOAT_CLASS);
    apply_service(&server, "web", &web);
    server.apply(&mk_ingress("one", "one.example.com", "web"));
    let pod = ClusterPod::start(&haproxy, &server, options("pod-a")).await;
    pod.wait_for_service("one.example.com", "/", "web").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let reloads = pod.reloads().await;

    // Dropped watches resume; nothing changed, nothing reloads.
    server.drop_watches();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(pod.reloads().await, reloads);
    // A change after the drop is seen (a new host on the same backend: maps only).
    server.apply(&mk_ingress("two", "two.example.com", "web"));
    pod.wait_for_service("two.example.com", "/", "web").await;

    // The API server goes away: haproxy keeps serving.
    server.stop();
    tokio::time::sleep(Duration::from_secs(1)).await;
    pod.wait_for_service("one.example.com", "/", "web").await;
    // A change made while it was away (as through another API server) is seen when it
    // is back.
    server.apply(&mk_ingress("three", "three.example.com", "web"));
    server.restart().await;
    pod.wait_for_service("three.example.com", "/", "web").await;
    assert!(pod.controller_running());
}

async fn relists_after_410_gone_without_reloading(haproxy: HaproxyBinary) {
    let web = start_backends("web", 27, 1).await;
    let server = FakeApiServer::start().await;
    server.apply_yaml(TUGBOAT_CLASS);
    apply_service(&server, "web", &web);
    server.apply(&mk_ingress("one", "one.example.com", "web"));
    let pod = ClusterPod::start(&haproxy, &server, options("pod-a")).await;
    pod.wait_for_service("one.example.com", "/", "web").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let reloads = pod.reloads().await;
    let lists = server.list_count("Ingress");

    server.expire_watch_history();
    eventually(
        "a re-list after 410 Gone",
        Duration::from_secs(10),
        || async { (server.list_count("Ingress") > lists).then_some(()) },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        pod.reloads().await,
        reloads,
        "a re-list of the same objects reloaded haproxy"
    );
    // Watching goes on after the re-list.
    server.apply(&mk_ingress("two", "two.example.com", "web"));
    pod.wait_for_service("two.example.com", "/", "web").await;
}

/// `kubectl` pointed at the fake API server creates an Ingress that routes. Skipped when
/// there is no kubectl on the PATH, unless `TUGBOAT_REQUIRE_KUBECTL=1` (CI) makes that a
/// failure. The fake serves no OpenAPI documents, so client-side
/// validation is off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_an_ingress_that_routes() {
    let Some(haproxy) = HaproxyBinary::installed("3.0")
        .or_else(|| HaproxyBinary::installed("2.6"))
        .or_else(|| HaproxyBinary::find("3.0"))
    else {
        return;
    };
    let kubectl_present = std::process::Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_ok_and(|out| out.status.success());
    if !kubectl_present {
        assert!(
            std::env::var("TUGBOAT_REQUIRE_KUBECTL").as_deref() != Ok("1"),
            "kubectl is required (TUGBOAT_REQUIRE_KUBECTL=1) but not on the PATH: \
             scripts/get-helm.sh puts one beside helm"
        );
        eprintln!("kubectl not found: skipped");
        return;
    }
    let web = start_backends("web", 28, 1).await;
    let server = FakeApiServer::start().await;
    let dir = tempfile::tempdir().expect("temporary folder");
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig);
    let manifest = dir.path().join("objects.yaml");
    std::fs::write(
        &manifest,
        to_yaml(
            &[
                vec![to_json(&mk_ingress_class(
                    "tugboat",
                    "tugboat.dev/ingress",
                    false,
                ))],
                mk_service_of("web", &web).to_vec(),
                vec![to_json(&mk_ingress("shop", "kubectl.example.com", "web"))],
            ]
            .concat(),
        ),
    )
    .expect("write manifest");
    let pod = ClusterPod::start(&haproxy, &server, options("pod-a")).await;
    pod.wait_until_ready().await;
    let home = dir.path().to_path_buf();
    let kubectl = move |args: &[&str]| {
        let output = std::process::Command::new("kubectl")
            .args(args)
            .env("KUBECONFIG", &kubeconfig)
            .env("HOME", &home)
            .output()
            .expect("run kubectl");
        assert!(
            output.status.success(),
            "kubectl {args:?}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let manifest_arg = manifest.display().to_string();
    let created = tokio::task::spawn_blocking(move || {
        kubectl(&["create", "--validate=false", "-f", &manifest_arg])
    })
    .await
    .expect("kubectl task");
    assert!(
        created.contains("ingress.networking.k8s.io/shop created"),
        "{created}"
    );
    pod.wait_for_service("kubectl.example.com", "/", "web")
        .await;
}

async fn admin_server_reports_health_readiness_and_metrics(haproxy: HaproxyBinary) {
    let (_web, server) = shop_cluster(29).await;
    server.apply(&mk_ingress("broken", "broken.example.com", "missing"));
    // Not ready until the first apply: the API source waits for its stores.
    let (status_tx, status_rx) = tokio::sync::watch::channel(ControllerStatus::default());
    let pod = ClusterPod::start(&haproxy, &server, options("pod-a")).await;
    let (admin_addr, admin) = tugboat_testkit::serve_admin(AdminState {
        status: status_rx,
        ..pod.admin_state()
    })
    .await;
    let get = |path: &'static str| async move {
        tugboat_testkit::get(admin_addr, "localhost", path)
            .await
            .expect("admin request")
    };
    assert_eq!(get("/healthz").await.status, 200);
    assert_eq!(get("/readyz").await.status, 503);
    pod.wait_until_ready().await;
    status_tx.send_replace(pod.status.borrow().clone());
    assert_eq!(get("/readyz").await.status, 200);
    let metrics = eventually(
        "metrics after the first apply",
        Duration::from_secs(10),
        || async {
            let body = get("/metrics").await.body;
            body.contains("tugboat_objects_watched{kind=\"Ingress\"} 2")
                .then_some(body)
        },
    )
    .await;
    for expected in [
        "tugboat_applies_total{delivery=\"reload\",result=\"applied\"} 1",
        "tugboat_reloads_total{reason=\"unknown-state\"} 1",
        "tugboat_object_problems{kind=\"Ingress\",reason=\"ServiceNotFound\"} 1",
        "tugboat_apply_duration_seconds_count{delivery=\"reload\"} 1",
        "tugboat_leader 1",
        "process_resident_memory_bytes ",
        "process_cpu_seconds ",
    ] {
        assert!(
            metrics.lines().any(|line| line.starts_with(expected)),
            "{expected} not in:\n{metrics}"
        );
    }
    assert_eq!(get("/nope").await.status, 404);
    admin.abort();
}

async fn tls_and_basic_auth_secrets_come_from_the_api(haproxy: HaproxyBinary) {
    let web = start_backends("web", 29, 1).await;
    let server = FakeApiServer::start().await;
    server.apply_yaml(TUGBOAT_CLASS);
    apply_service(&server, "web", &web);
    server.apply(&mk_secret(
        "users",
        "Opaque",
        &[("ann", S3CRET_HASH.as_bytes())],
    ));
    let (cert, key, der) = tugboat_testkit::tls::certificate(&["secure.example.com"], false);
    server.apply(&mk_tls_secret("site-tls", &cert, &key));
    server.apply(&with_keys(
        mk_ingress("private", "private.example.com", "web"),
        &[("auth-type", "basic-auth"), ("auth-secret", "users")],
    ));
    server.apply(&with_tls(
        mk_ingress("secure", "secure.example.com", "web"),
        &[(&["secure.example.com"], "site-tls")],
    ));
    let pod = ClusterPod::start(&haproxy, &server, options("pod-a")).await;
    pod.wait_for_status("private.example.com", "/", 401).await;
    let authorized = tugboat_testkit::http::request(
        pod.haproxy.http_addr(),
        "GET",
        "private.example.com",
        "/",
        &[("Authorization", ANN_S3CRET)],
    )
    .await
    .expect("GET");
    assert_eq!(authorized.status, 200, "{authorized:?}");
    let tls = tugboat_testkit::tls::exchange(
        pod.haproxy.https_addr(),
        "secure.example.com",
        "/",
        &[b"http/1.1"],
    )
    .await
    .expect("TLS");
    assert_eq!(
        tls.certificate, der,
        "the TLS Secret from the API is served"
    );
}

/// The paths of the Ingress status writes the API server took so far.
fn ingress_status_writes(server: &FakeApiServer) -> Vec<String> {
    server
        .writes()
        .into_iter()
        .filter(|w| w.path.ends_with("/status") && w.path.contains("/ingresses/"))
        .map(|w| w.path)
        .collect()
}

async fn a_restarted_leader_rewrites_no_status_that_is_right(haproxy: HaproxyBinary) {
    let (_web, server) = shop_cluster(38).await;
    for name in ["cart", "pay"] {
        server.apply(&mk_ingress(name, &format!("{name}.example.com"), "web"));
    }
    let mut opts = options("pod-a");
    opts.publish.addresses = vec!["127.0.0.13".into()];
    let has_status = |name: &'static str| {
        let server = &server;
        move || async move {
            let object = server.get("Ingress", "default", name)?;
            (object["status"]["loadBalancer"]["ingress"] == json!([{"ip": "127.0.0.13"}]))
                .then_some(())
        }
    };
    let pod = ClusterPod::start(&haproxy, &server, opts.clone()).await;
    for name in ["shop", "cart", "pay"] {
        eventually(
            "status from the first leader",
            Duration::from_secs(10),
            has_status(name),
        )
        .await;
    }
    drop(pod);
    let before = ingress_status_writes(&server).len();
    assert_eq!(before, 3, "{:?}", ingress_status_writes(&server));
    // While no controller runs, an Ingress joins; the restarted leader writes its status
    // and only its.
    server.apply(&mk_ingress("later", "later.example.com", "web"));
    let pod = ClusterPod::start(&haproxy, &server, opts).await;
    eventually(
        "status from the restarted leader",
        Duration::from_secs(15),
        has_status("later"),
    )
    .await;
    // Two status intervals: the periodic check finds nothing else to write.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(
        ingress_status_writes(&server)[before..],
        ["/apis/networking.k8s.io/v1/namespaces/default/ingresses/later/status"]
    );
    // The metrics count the same one write, by kind and result.
    let metrics = pod.metrics.encode();
    let status_writes: Vec<&str> = metrics
        .lines()
        .filter(|line| line.starts_with("tugboat_status_writes_total{"))
        .collect();
    assert_eq!(
        status_writes,
        [r#"tugboat_status_writes_total{kind="Ingress",result="written"} 1"#],
        "{metrics}"
    );
    pod.wait_for_service("later.example.com", "/", "web").await;
}

async fn leadership_moves_when_the_leader_stops(haproxy: HaproxyBinary) {
    let (_web, server) = shop_cluster(30).await;
    let mut options_a = options("pod-a");
    options_a.publish.addresses = vec!["127.0.0.11".into()];
    let mut options_b = options("pod-b");
    options_b.publish.addresses = vec!["127.0.0.12".into()];
    let a = ClusterPod::start(&haproxy, &server, options_a).await;
    let b = ClusterPod::start(&haproxy, &server, options_b).await;
    a.wait_for_service("shop.example.com", "/", "web").await;
    b.wait_for_service("shop.example.com", "/", "web").await;
    let holder = || async {
        let lease = server.get("Lease", "tugboat-system", "tugboat-leader")?;
        lease["spec"]["holderIdentity"].as_str().map(str::to_string)
    };
    let status_ip = || async {
        let shop = server.get("Ingress", "default", "shop")?;
        shop["status"]["loadBalancer"]["ingress"][0]["ip"]
            .as_str()
            .map(str::to_string)
    };
    let leader = eventually("a Lease holder", Duration::from_secs(15), holder).await;
    let (stopped, survivor, survivor_ip) = if leader == "pod-a" {
        (a, b, "127.0.0.12")
    } else {
        (b, a, "127.0.0.11")
    };
    eventually(
        "status from the first leader",
        Duration::from_secs(10),
        || async { status_ip().await.filter(|ip| ip != survivor_ip) },
    )
    .await;
    // The leader stops (its Lease is no longer renewed): the other replica takes the
    // Lease once it expires and writes its own address.
    drop(stopped);
    let survivor_name = if survivor_ip == "127.0.0.12" {
        "pod-b"
    } else {
        "pod-a"
    };
    eventually(
        "the other replica holds the Lease",
        Duration::from_secs(20),
        || async { (holder().await.as_deref() == Some(survivor_name)).then_some(()) },
    )
    .await;
    eventually(
        "status from the new leader",
        Duration::from_secs(10),
        || async { (status_ip().await.as_deref() == Some(survivor_ip)).then_some(()) },
    )
    .await;
    survivor
        .wait_for_service("shop.example.com", "/", "web")
        .await;
}

async fn waits_for_an_api_server_that_is_not_up_yet(haproxy: HaproxyBinary) {
    let (_web, mut server) = shop_cluster(31).await;
    // The API server is down when the controller starts.
    server.stop();
    let pod = ClusterPod::start(&haproxy, &server, options("pod-a")).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        pod.controller_running(),
        "the controller waits instead of exiting"
    );
    server.restart().await;
    pod.wait_for_service("shop.example.com", "/", "web").await;
}

async fn access_lists_from_config_maps_are_watched(haproxy: HaproxyBinary) {
    let web = start_backends("web", 32, 1).await;
    let server = FakeApiServer::start().await;
    server.apply_yaml(TUGBOAT_CLASS);
    apply_service(&server, "web", &web);
    let list = |networks: &str| mk_config_map("blocked", &[("networks", networks)]);
    server.apply(&list("127.0.0.0/8"));
    server.apply(&with_keys(
        mk_ingress("guarded", "guarded.example.com", "web"),
        &[("deny-list", "configmap:blocked/networks")],
    ));
    let pod = ClusterPod::start(&haproxy, &server, options("pod-a")).await;
    // The ConfigMap the Ingress names is watched: loopback clients are denied...
    pod.wait_for_status("guarded.example.com", "/", 403).await;
    // ...and a change of the list is followed.
    server.apply(&list("192.0.2.0/24"));
    pod.wait_for_service("guarded.example.com", "/", "web")
        .await;
}

/// How long the API server stays away: long enough for a doubling backoff to have
/// fallen far behind (kube-rs' default was then asleep for up to 25 s more).
const OUTAGE: Duration = Duration::from_secs(12);
/// How soon after the API server's return every change made meanwhile must be served.
const BACK_WITHIN: Duration = Duration::from_secs(3);

async fn every_watch_is_back_soon_after_an_api_server_outage(haproxy: HaproxyBinary) {
    let web = start_backends("web", 40, 2).await;
    let extra = start_backends("extra", 41, 1).await;
    let mut server = FakeApiServer::start().await;
    server.apply_yaml(TUGBOAT_CLASS);
    apply_service(&server, "web", &web[..1]);
    server.apply(&mk_ingress("one", "one.example.com", "web"));
    let pod = ClusterPod::start(&haproxy, &server, options("pod-a")).await;
    pod.wait_for_service("one.example.com", "/", "web").await;

    // The API server goes away (connections refused) for a while: every watch fails
    // and backs off.
    server.stop();
    tokio::time::sleep(OUTAGE).await;
    // Changes made meanwhile (as through another API server), one per kind a route
    // needs: an Ingress, the Service it names, that Service's EndpointSlice, and a new
    // endpoint of an existing Service.
    apply_service(&server, "extra", &extra);
    server.apply(&mk_ingress("late", "late.example.com", "extra"));
    apply_service(&server, "web", &web[1..]);
    server.restart().await;
    let back = std::time::Instant::now();

    // Served within a couple of seconds of the API server's return.
    eventually(
        "the changes made during the outage are served",
        BACK_WITHIN,
        || async {
            let late = pod.get("late.example.com", "/").await.ok()?;
            let one = pod.get("one.example.com", "/").await.ok()?;
            let served = late.status == 200
                && late.service() == Some("extra")
                && one.status == 200
                && one.endpoint() == Some(web[1].addr.to_string().as_str());
            served.then_some(())
        },
    )
    .await;
    eprintln!("served {:?} after the API server's return", back.elapsed());
    // And a change made after the return too, at once.
    server.apply(&mk_ingress("later", "later.example.com", "web"));
    let changed = std::time::Instant::now();
    pod.wait_for_service("later.example.com", "/", "web").await;
    assert!(
        changed.elapsed() < BACK_WITHIN,
        "a change after the return took {:?}",
        changed.elapsed()
    );
}
