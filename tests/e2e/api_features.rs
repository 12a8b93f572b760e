//! The features that read a referenced object (TLS Secrets, basic-auth Secrets, access
//! lists in ConfigMaps, the error pages ConfigMap), end to end through the API source:
//! objects are created and then changed through the fake API server, and real HTTP(S)
//! requests through haproxy show the change is followed. (Backend TLS with `server-ca`
//! through the API is in `references.rs`.)

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tugboat_model::ObjectKey;
use tugboat_testkit::cluster_pod::{TUGBOAT_CLASS, options};
use tugboat_testkit::http::request;
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{
    ANN_S3CRET, S3CRET_HASH, mk_basic_auth_secret, mk_config_map, mk_endpoint_slice, mk_ingress,
    mk_ingress_with_rules, mk_rule, mk_service, mk_tls_secret, prefix, with_keys, with_tls,
};
use tugboat_testkit::tls::{certificate, exchange, fallback_certificate_der};
use tugboat_testkit::{ClusterPod, EchoServer, FakeApiServer, HaproxyBinary, Reply, eventually};

tugboat_testkit::haproxy_tests!(
    tls_secrets_from_the_api_are_served_and_rotated_without_reload,
    basic_auth_secret_from_the_api_follows_password_changes,
    access_list_from_a_config_map_in_the_api_follows_changes,
    error_pages_from_the_api_config_map_follow_changes,
);

/// `openssl passwd -6 -salt tugboatsalt n3wpass`.
const HASH_N3WPASS: &str = "$6$tugboatsalt$0g5XlFYwYnTgc1Qeiu4kZA1LgRHfz8X7921IV/XN87RTHb1Mwv/YTEq2KAHIjmVXPDNXSO/XFhsOd1Bt.Gm9X/";
/// `ann:n3wpass` in base64.
const ANN_N3WPASS: &str = "Basic YW5uOm4zd3Bhc3M=";

/// The fake API server with Tugboat's IngressClass, and a Service `name` (port 80
/// named http) whose endpoints are `servers`.
async fn cluster_with(services: &[(&str, &[EchoServer])]) -> FakeApiServer {
    let server = FakeApiServer::start().await;
    server.apply_yaml(TUGBOAT_CLASS);
    for (name, servers) in services {
        let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
        server.apply(&mk_service(name, "http", 80));
        server.apply(&mk_endpoint_slice(name, "http", &addrs));
    }
    server
}

async fn get(pod: &ClusterPod, host: &str, path: &str, headers: &[(&str, &str)]) -> Reply {
    request(pod.haproxy.http_addr(), "GET", host, path, headers)
        .await
        .expect("request through haproxy")
}

/// Warning Events the controller posted about the object `name`.
fn warnings_about(server: &FakeApiServer, name: &str) -> Vec<Value> {
    server
        .list("Event")
        .into_iter()
        .filter(|e| e["regarding"]["name"] == name || e["involvedObject"]["name"] == name)
        .filter(|e| e["type"] == "Warning")
        .collect()
}

async fn tls_secrets_from_the_api_are_served_and_rotated_without_reload(haproxy: HaproxyBinary) {
    let site = start_backends("site", 171, 1).await;
    let server = cluster_with(&[("site", &site)]).await;
    let (cert1, key1, der1) = certificate(&["site.example.com"], false);
    server.apply(&mk_tls_secret("site-tls", &cert1, &key1));
    let ingress = with_tls(
        mk_ingress_with_rules(
            "site",
            vec![
                mk_rule(Some("site.example.com"), &[prefix("/", "site")]),
                mk_rule(Some("missing.example.com"), &[prefix("/", "site")]),
            ],
        ),
        &[
            (&["site.example.com"], "site-tls"),
            (&["missing.example.com"], "missing-tls"),
        ],
    );
    server.apply(&ingress);
    let pod = ClusterPod::start(&haproxy, &server, options("pod-a")).await;
    // A TLS host: plain HTTP is redirected.
    pod.wait_for_status("site.example.com", "/", 308).await;
    let https = pod.haproxy.https_addr();
    let served = |sni: &'static str| async move {
        exchange(https, sni, "/", &[b"http/1.1"])
            .await
            .expect("TLS exchange")
    };
    let first = served("site.example.com").await;
    assert_eq!(
        first.certificate, der1,
        "the Secret's certificate for its SNI"
    );
    assert_eq!(first.reply.expect("answer").service(), Some("site"));

    // The Secret that does not exist: the default certificate, the host still routes,
    // and the problem is reported (status and a Warning Event naming the field).
    let fallback = fallback_certificate_der(&pod.haproxy.lib_dir);
    let missing = served("missing.example.com").await;
    assert_eq!(missing.certificate, fallback, "the default certificate");
    assert_eq!(missing.reply.expect("answer").service(), Some("site"));
    let problems = pod.status.borrow().problems.clone();
    assert!(
        problems.iter().any(|p| p.field == "spec.tls[1].secretName"
            && p.reason == tugboat_model::problem::ProblemReason::SecretNotFound),
        "{problems:?}"
    );
    let warning = eventually(
        "a Warning Event about the missing Secret",
        Duration::from_secs(10),
        || async {
            warnings_about(&server, "site")
                .into_iter()
                .find(|e| e["reason"] == "SecretNotFound")
        },
    )
    .await;
    let note = warning["note"]
        .as_str()
        .or(warning["message"].as_str())
        .unwrap_or_default();
    assert!(note.contains("spec.tls[1].secretName"), "{warning}");
    assert!(!note.contains("PRIVATE KEY"), "{warning}");

    // Rotation through the API: the same Secret gets a new certificate, served without
    // a reload.
    let before = pod.haproxy.show_proc().await;
    let (cert2, key2, der2) = certificate(&["site.example.com"], false);
    server.apply(&mk_tls_secret("site-tls", &cert2, &key2));
    eventually(
        "the rotated certificate",
        Duration::from_secs(10),
        || async { (served("site.example.com").await.certificate == der2).then_some(()) },
    )
    .await;
    let after = pod.haproxy.show_proc().await;
    assert_eq!(after.master_pid, before.master_pid);
    assert_eq!(
        after.reloads, before.reloads,
        "the certificate changed without a reload"
    );
    let rotated = served("site.example.com").await;
    assert_eq!(rotated.reply.expect("answer").service(), Some("site"));

    // The missing Secret is created: its host gets it.
    let (cert3, key3, der3) = certificate(&["missing.example.com"], false);
    server.apply(&mk_tls_secret("missing-tls", &cert3, &key3));
    eventually(
        "the once missing Secret's certificate",
        Duration::from_secs(10),
        || async { (served("missing.example.com").await.certificate == der3).then_some(()) },
    )
    .await;
}

async fn basic_auth_secret_from_the_api_follows_password_changes(haproxy: HaproxyBinary) {
    let web = start_backends("web", 172, 1).await;
    let server = cluster_with(&[("web", &web)]).await;
    server.apply(&mk_basic_auth_secret("users", &[("ann", S3CRET_HASH)]));
    server.apply(&with_keys(
        mk_ingress("private", "private.example.com", "web"),
        &[("auth-type", "basic-auth"), ("auth-secret", "users")],
    ));
    let pod = ClusterPod::start(&haproxy, &server, options("pod-a")).await;
    pod.wait_for_status("private.example.com", "/", 401).await;
    let with_password = |authorization: &'static str| {
        let pod = &pod;
        async move {
            get(
                pod,
                "private.example.com",
                "/",
                &[("Authorization", authorization)],
            )
            .await
        }
    };
    // Until the password gets `status` (the answer).
    let until = |what: &'static str, authorization: &'static str, status: u16| {
        eventually(what, Duration::from_secs(10), move || async move {
            let reply = with_password(authorization).await;
            (reply.status == status).then_some(reply)
        })
    };
    let authorized = until("the right password accepted", ANN_S3CRET, 200).await;
    assert_eq!(authorized.service(), Some("web"), "{authorized:?}");
    let wrong = with_password(ANN_N3WPASS).await;
    assert_eq!(wrong.status, 401, "{wrong:?}");

    // The password changes through the API: the old one is refused, the new one works.
    server.apply(&mk_basic_auth_secret("users", &[("ann", HASH_N3WPASS)]));
    until("the old password refused", ANN_S3CRET, 401).await;
    // The change is a reload: while the old worker hands its listeners over, a new
    // connection may still meet it (and the old users) for a moment.
    let new = until("the new password accepted", ANN_N3WPASS, 200).await;
    assert_eq!(new.service(), Some("web"), "{new:?}");
    let old = with_password(ANN_S3CRET).await;
    assert_eq!(old.status, 401, "{old:?}");
    assert_eq!(get(&pod, "private.example.com", "/", &[]).await.status, 401);
    let problems = pod.status.borrow().problems.clone();
    assert!(problems.is_empty(), "{problems:?}");
}

async fn access_list_from_a_config_map_in_the_api_follows_changes(haproxy: HaproxyBinary) {
    let web = start_backends("web", 173, 1).await;
    let server = cluster_with(&[("web", &web)]).await;
    // The test client is 127.0.0.1.
    server.apply(&mk_config_map(
        "clients",
        &[("list", "# the tests\n127.0.0.0/8\n198.51.100.0/24\n")],
    ));
    server.apply(&with_keys(
        mk_ingress("guarded", "guarded.example.com", "web"),
        &[("allow-list", "configmap:clients/list")],
    ));
    let pod = ClusterPod::start(&haproxy, &server, options("pod-a")).await;
    pod.wait_for_service("guarded.example.com", "/", "web")
        .await;

    // The list changes through the API and no longer has the client: 403.
    server.apply(&mk_config_map("clients", &[("list", "198.51.100.0/24\n")]));
    pod.wait_for_status("guarded.example.com", "/", 403).await;
    // And back.
    server.apply(&mk_config_map("clients", &[("list", "127.0.0.1\n")]));
    pod.wait_for_service("guarded.example.com", "/", "web")
        .await;
    let problems = pod.status.borrow().problems.clone();
    assert!(problems.is_empty(), "{problems:?}");
}

async fn error_pages_from_the_api_config_map_follow_changes(haproxy: HaproxyBinary) {
    let web = start_backends("web", 174, 1).await;
    let server = cluster_with(&[("web", &web), ("empty", &[][..])]).await;
    server.apply(&mk_config_map(
        "pages",
        &[
            ("404", "<h1>Nothing here</h1>"),
            ("503", "<h1>Back soon</h1>"),
            ("999", "nope"),
        ],
    ));
    server.apply(&mk_ingress_with_rules(
        "pages",
        vec![mk_rule(
            Some("pages.example.com"),
            &[prefix("/", "web"), prefix("/down", "empty")],
        )],
    ));
    let mut options = options("pod-a");
    options.source.settings.error_pages = Some(ObjectKey::new("default", "pages"));
    let pod = ClusterPod::start(&haproxy, &server, options).await;
    pod.wait_for_service("pages.example.com", "/", "web").await;
    let missing = get(&pod, "nowhere.example.com", "/", &[]).await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.body, "<h1>Nothing here</h1>");
    let down = get(&pod, "pages.example.com", "/down", &[]).await;
    assert_eq!(down.status, 503);
    assert_eq!(down.body, "<h1>Back soon</h1>");
    let problems = pod.status.borrow().problems.clone();
    assert!(
        problems.iter().any(|p| p.field == "data.999"),
        "{problems:?}"
    );

    // The ConfigMap changes through the API: the new pages are served.
    server.apply(&mk_config_map(
        "pages",
        &[("404", "<h1>Gone fishing</h1>"), ("503", "<h1>Later</h1>")],
    ));
    eventually("the new 404 page", Duration::from_secs(10), || async {
        let reply = get(&pod, "nowhere.example.com", "/", &[]).await;
        (reply.status == 404 && reply.body == "<h1>Gone fishing</h1>").then_some(())
    })
    .await;
    let down = get(&pod, "pages.example.com", "/down", &[]).await;
    assert_eq!((down.status, down.body.as_str()), (503, "<h1>Later</h1>"));
}
