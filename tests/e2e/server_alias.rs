//! ingress-nginx's `server-alias` on real haproxy, as its documentation describes it: a
//! request for an alias is served as one for the rule's host (same paths, backends and
//! redirects); the aliases of a TLS host get its certificate and its HTTPS redirect; an
//! alias another Ingress already serves stays with that Ingress, with a problem naming
//! the key.

use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{
    mk_ingress_with_rules, mk_rule, mk_service_of, mk_tls_secret, prefix, to_json,
    with_annotations, with_creation_timestamp, with_tls,
};
use tugboat_testkit::tls::{certificate, exchange};
use tugboat_testkit::{HaproxyBinary, Scene, Source, scene_tests};

scene_tests!(aliases_are_served_as_the_rule_host);

const HOST: &str = "alias.example.com";
const ALIAS_KEY: &str = "nginx.ingress.kubernetes.io/server-alias";

async fn aliases_are_served_as_the_rule_host(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 175, 1).await;
    let other = start_backends("other", 176, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    objects.extend(mk_service_of("other", &other));
    let (cert, key, der) = certificate(&[HOST, "www.alias.example.com"], false);
    objects.push(to_json(&mk_tls_secret("alias-tls", &cert, &key)));
    // The older Ingress serves taken.example.com's paths itself.
    objects.push(to_json(&with_creation_timestamp(
        mk_ingress_with_rules(
            "owner",
            vec![mk_rule(
                Some("taken.example.com"),
                &[prefix("/app", "other"), prefix("/plain", "other")],
            )],
        ),
        "2024-01-01T00:00:00Z",
    )));
    objects.push(to_json(&with_creation_timestamp(
        with_tls(
            with_annotations(
                mk_ingress_with_rules(
                    "shop",
                    vec![
                        mk_rule(Some(HOST), &[prefix("/app", "web")]),
                        mk_rule(Some("plain.example.com"), &[prefix("/plain", "web")]),
                    ],
                ),
                &[(
                    ALIAS_KEY,
                    "www.alias.example.com,*.alias.example.net,taken.example.com",
                )],
            ),
            &[(&[HOST], "alias-tls")],
        ),
        "2024-01-02T00:00:00Z",
    )));
    let scene = Scene::start(&haproxy, source, &objects).await;
    // Plain HTTP to the TLS host and its aliases is redirected to HTTPS (ingress-nginx's
    // default for TLS hosts), path and query kept.
    scene
        .wait_for_status("www.alias.example.com", "/app", 308)
        .await;
    for host in [HOST, "www.alias.example.com", "shop.alias.example.net"] {
        let reply = scene.get(host, "/app/x?q=1").await.expect("request");
        assert_eq!(reply.status, 308, "{host}: {reply:?}");
        assert_eq!(
            reply.header("location"),
            Some(format!("https://{host}/app/x?q=1").as_str()),
            "{host}"
        );
    }
    let reply = scene
        .get("plain.example.com", "/plain/y")
        .await
        .expect("request");
    assert_eq!(reply.status, 200, "{reply:?}");
    // Over HTTPS an alias gets the host's certificate, and every host rule's paths
    // with their backend.
    let https = scene.https_addr();
    for path in ["/app/z", "/plain/y"] {
        let served = exchange(https, "www.alias.example.com", path, &[b"http/1.1"])
            .await
            .expect("TLS");
        assert_eq!(served.certificate, der, "{path}");
        let reply = served.reply.expect("HTTP/1.1 reply");
        assert_eq!(reply.status, 200, "{path}: {reply:?}");
        assert_eq!(reply.service(), Some("web"), "{path}: {reply:?}");
        assert_eq!(reply.path(), Some(path), "{reply:?}");
    }
    // Paths the rules do not have are not served for an alias.
    let elsewhere = exchange(https, "www.alias.example.com", "/elsewhere", &[b"http/1.1"])
        .await
        .expect("TLS")
        .reply
        .expect("HTTP/1.1 reply");
    assert_eq!(elsewhere.status, 404, "{elsewhere:?}");
    // The alias another Ingress already serves stays with it, over plain HTTP.
    let reply = scene
        .get("taken.example.com", "/app")
        .await
        .expect("request");
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.service(), Some("other"), "{reply:?}");
    let field = format!("metadata.annotations.{ALIAS_KEY}");
    assert!(
        scene
            .status()
            .problems
            .iter()
            .any(|p| &*p.object.name == "shop"
                && p.field == field
                && p.message.contains("taken.example.com")),
        "{:?}",
        scene.status().problems
    );
    if let Some(event) = scene.wait_for_warning("shop", &field).await {
        assert!(event.to_string().contains("taken.example.com"), "{event}");
    }
}
