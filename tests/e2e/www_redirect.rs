//! ingress-nginx's `from-to-www-redirect` on real haproxy, as its documentation and e2e
//! tests show: a request for the `www.` counterpart of a rule's host (or the host
//! without `www.`) is redirected (308) to the rule's host with the same scheme, path and
//! query; over HTTPS the counterpart is served the certificate of the `spec.tls` entry
//! that lists it; a counterpart another Ingress already serves stays with it, with a
//! problem naming the key.

use tugboat_model::ObjectKey;
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{
    in_namespace, mk_config_map, mk_ingress_with_rules, mk_rule, mk_service_of, mk_tls_secret,
    prefix, to_json, with_annotations, with_creation_timestamp, with_tls,
};
use tugboat_testkit::tls::{certificate, exchange};
use tugboat_testkit::{HaproxyBinary, Scene, Source, scene_tests};

scene_tests!(
    the_www_counterpart_redirects_to_the_rule_host,
    the_config_maps_http_redirect_code_is_the_redirects_code,
);

const WWW_KEY: &str = "nginx.ingress.kubernetes.io/from-to-www-redirect";
const SITE: &str = "site.example.com";
const WWW_SITE: &str = "www.site.example.com";

async fn the_www_counterpart_redirects_to_the_rule_host(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 177, 1).await;
    let other = start_backends("other", 178, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    objects.extend(mk_service_of("other", &other));
    let (cert, key, der) = certificate(&[SITE, WWW_SITE], false);
    objects.push(to_json(&mk_tls_secret("site-tls", &cert, &key)));
    let redirecting = |name: &str, host: &str, created: &str| {
        with_creation_timestamp(
            with_annotations(
                mk_ingress_with_rules(name, vec![mk_rule(Some(host), &[prefix("/", "web")])]),
                &[(WWW_KEY, "true")],
            ),
            created,
        )
    };
    objects.extend([
        to_json(&with_tls(
            redirecting("site", SITE, "2024-01-02T00:00:00Z"),
            &[(&[SITE, WWW_SITE], "site-tls")],
        )),
        to_json(&redirecting(
            "blog",
            "www.blog.example.com",
            "2024-01-02T00:00:00Z",
        )),
        // An older Ingress serves the counterpart of taken.example.com itself.
        to_json(&with_creation_timestamp(
            mk_ingress_with_rules(
                "owner",
                vec![mk_rule(
                    Some("www.taken.example.com"),
                    &[prefix("/", "other")],
                )],
            ),
            "2024-01-01T00:00:00Z",
        )),
        to_json(&redirecting(
            "taken",
            "taken.example.com",
            "2024-01-02T00:00:00Z",
        )),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_status("blog.example.com", "/", 308).await;
    // Plain HTTP: to the rule's host on plain HTTP, path and query kept (the rule's
    // host then redirects to HTTPS itself).
    for (host, asked, location) in [
        (WWW_SITE, "/a/b?x=1", "http://site.example.com/a/b?x=1"),
        (WWW_SITE, "/", "http://site.example.com/"),
        (
            "blog.example.com",
            "/post/",
            "http://www.blog.example.com/post/",
        ),
    ] {
        let reply = scene.get(host, asked).await.expect("request");
        assert_eq!(reply.status, 308, "{host}{asked}: {reply:?}");
        assert_eq!(
            reply.header("location"),
            Some(location),
            "{host}{asked}: {reply:?}"
        );
    }
    // The rule's host is served.
    let reply = scene
        .get("www.blog.example.com", "/post/")
        .await
        .expect("request");
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.service(), Some("web"), "{reply:?}");
    // HTTPS: the counterpart gets the certificate that lists it and goes to HTTPS.
    let https = scene.https_addr();
    let served = exchange(https, WWW_SITE, "/c?y=2", &[b"http/1.1"])
        .await
        .expect("TLS");
    assert_eq!(served.certificate, der);
    let reply = served.reply.expect("HTTP/1.1 reply");
    assert_eq!(reply.status, 308, "{reply:?}");
    assert_eq!(
        reply.header("location"),
        Some("https://site.example.com/c?y=2"),
        "{reply:?}"
    );
    let reply = exchange(https, SITE, "/c", &[b"http/1.1"])
        .await
        .expect("TLS")
        .reply
        .expect("HTTP/1.1 reply");
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.service(), Some("web"), "{reply:?}");
    // The counterpart another Ingress serves stays with it.
    let reply = scene
        .get("www.taken.example.com", "/")
        .await
        .expect("request");
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.service(), Some("other"), "{reply:?}");
    let field = format!("metadata.annotations.{WWW_KEY}");
    let problems = scene.status().problems;
    assert!(
        problems.iter().any(|p| &*p.object.name == "taken"
            && p.field == field
            && p.message.contains("www.taken.example.com")),
        "{problems:?}"
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    if let Some(event) = scene.wait_for_warning("taken", &field).await {
        assert!(
            event.to_string().contains("www.taken.example.com"),
            "{event}"
        );
    }
}

/// ingress-nginx's ConfigMap key `http-redirect-code` in the controller's ConfigMap: the
/// code of the www redirect and of the HTTPS redirect (here 301); a value ingress-nginx
/// refuses is a problem naming the ConfigMap and the key, and the default (308) holds.
async fn the_config_maps_http_redirect_code_is_the_redirects_code(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = start_backends("web", 225, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    let (cert, key, _) = certificate(&[SITE], false);
    objects.push(to_json(&mk_tls_secret("site-tls", &cert, &key)));
    let config_map = |code: &str| {
        to_json(&in_namespace(
            mk_config_map("tugboat", &[("http-redirect-code", code)]),
            "ops",
        ))
    };
    objects.extend([
        config_map("301"),
        to_json(&with_tls(
            with_annotations(
                mk_ingress_with_rules("site", vec![mk_rule(Some(SITE), &[prefix("/", "web")])]),
                &[(WWW_KEY, "true")],
            ),
            &[(&[SITE], "site-tls")],
        )),
    ]);
    let scene = Scene::start_with(&haproxy, source, &objects, |config| {
        config.model.config_map = Some(ObjectKey::new("ops", "tugboat"));
    })
    .await;
    scene.wait_for_status(WWW_SITE, "/", 301).await;
    let reply = scene.get(WWW_SITE, "/a?b=1").await.expect("request");
    assert_eq!(
        reply.header("location"),
        Some("http://site.example.com/a?b=1"),
        "{reply:?}"
    );
    // The HTTPS redirect of the TLS host.
    let reply = scene.get(SITE, "/a").await.expect("request");
    assert_eq!(reply.status, 301, "{reply:?}");
    assert_eq!(reply.header("location"), Some("https://site.example.com/a"));
    assert!(
        scene.status().problems.is_empty(),
        "{:?}",
        scene.status().problems
    );

    // A code ingress-nginx refuses: a problem on the ConfigMap, and 308 again.
    scene.apply(&config_map("303"));
    scene.wait_for_status(WWW_SITE, "/", 308).await;
    assert_eq!(scene.get(SITE, "/a").await.expect("request").status, 308);
    let problems = scene.status().problems;
    assert!(
        problems.iter().any(|p| p.object.kind == "ConfigMap"
            && &*p.object.name == "tugboat"
            && p.field == "data.http-redirect-code"
            && p.message.contains("301, 302, 307 or 308")),
        "{problems:?}"
    );
}
