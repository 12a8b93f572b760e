//! ingress-nginx's canary Ingresses, end to end on real haproxy: a canary Ingress with
//! the host and path of a main Ingress sends a share of that route's requests to its own
//! backend, by header, then by cookie, then by weight (ingress-nginx's order); canary
//! requests get the main route's features; a canary rule without a main route does
//! nothing; a change of weight is applied without a reload.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::networking::v1::Ingress;
use tugboat_testkit::http::request;
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{
    mk_ingress_with_rules, mk_rule, mk_service_of, prefix, to_json, with_annotations,
};
use tugboat_testkit::{HaproxyBinary, Reply, Scene, Source, eventually, scene_tests};

scene_tests!(
    canary_weight_shares_the_requests,
    canary_header_and_cookie_come_before_the_weight,
    session_affinity_keeps_clients_where_they_were_sent,
);

const HOST: &str = "canary.example.com";
const NGINX: &str = "nginx.ingress.kubernetes.io/";

/// An Ingress `name` routing `HOST` + `path` (Prefix) to `service`, with these
/// ingress-nginx annotations (names without the prefix).
fn ingress(name: &str, path: &str, service: &str, annotations: &[(&str, &str)]) -> Ingress {
    let annotations: Vec<(String, &str)> = annotations
        .iter()
        .map(|(key, value)| (format!("{NGINX}{key}"), *value))
        .collect();
    let annotations: Vec<(&str, &str)> = annotations
        .iter()
        .map(|(key, value)| (key.as_str(), *value))
        .collect();
    with_annotations(
        mk_ingress_with_rules(name, vec![mk_rule(Some(HOST), &[prefix(path, service)])]),
        &annotations,
    )
}

async fn send(scene: &Scene, path: &str, headers: &[(&str, &str)]) -> Reply {
    request(scene.http_addr(), "GET", HOST, path, headers)
        .await
        .expect("request through haproxy")
}

/// Who answered `count` requests to `path`: the service, or the status.
async fn tally(scene: &Scene, path: &str, count: usize) -> BTreeMap<String, usize> {
    let mut tally = BTreeMap::new();
    for _ in 0..count {
        let reply = send(scene, path, &[]).await;
        let key = match reply.service() {
            Some(service) if reply.status == 200 => service.to_string(),
            _ => reply.status.to_string(),
        };
        *tally.entry(key).or_insert(0) += 1;
    }
    tally
}

/// Asserts that `key` took `share` of `count` requests, within 5 points.
fn assert_share(tally: &BTreeMap<String, usize>, key: &str, share: f64, count: usize) {
    let got = *tally.get(key).unwrap_or(&0) as f64 / count as f64;
    assert!(
        (got - share).abs() <= 0.05,
        "{key}: {got:.3} of the requests, expected {share} +/- 0.05 ({tally:?})"
    );
}

async fn canary_weight_shares_the_requests(haproxy: HaproxyBinary, source: Source) {
    const REQUESTS: usize = 1000;
    let web = start_backends("web", 210, 1).await;
    let beta = start_backends("beta", 211, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    objects.extend(mk_service_of("beta", &beta));
    let canary = |weight: &str, total: &str| {
        ingress(
            "shop-canary",
            "/",
            "beta",
            &[
                ("canary", "true"),
                ("canary-weight", weight),
                ("canary-weight-total", total),
            ],
        )
    };
    objects.push(to_json(&ingress("shop", "/", "web", &[])));
    objects.push(to_json(&canary("25", "100")));
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_service(HOST, "/", "beta").await;
    let counts = tally(&scene, "/", REQUESTS).await;
    assert_share(&counts, "web", 0.75, REQUESTS);
    assert_share(&counts, "beta", 0.25, REQUESTS);
    // The canary shares the main route's host and path without a conflict.
    let problems = scene.status().problems;
    assert!(problems.is_empty(), "{problems:?}");

    // A new weight (out of another total) is a runtime update: no reload.
    let reloads = scene.reloads().await;
    scene.apply(&canary("300", "500"));
    // Until the old share is gone (60 of 100 to beta is not 25 by chance).
    eventually("the new weight", Duration::from_secs(20), || async {
        let counts = tally(&scene, "/", 100).await;
        (counts.get("beta").copied().unwrap_or(0) >= 45).then_some(())
    })
    .await;
    let counts = tally(&scene, "/", REQUESTS).await;
    assert_share(&counts, "web", 0.4, REQUESTS);
    assert_share(&counts, "beta", 0.6, REQUESTS);
    assert_eq!(scene.reloads().await, reloads, "a weight change reloaded");

    // Weight 0 sends nothing to the canary; the whole total sends everything.
    scene.apply(&canary("0", "100"));
    eventually("weight 0", Duration::from_secs(20), || async {
        let counts = tally(&scene, "/", 50).await;
        (counts.get("web") == Some(&50)).then_some(())
    })
    .await;
    scene.apply(&canary("100", "100"));
    eventually("weight 100", Duration::from_secs(20), || async {
        let counts = tally(&scene, "/", 50).await;
        (counts.get("beta") == Some(&50)).then_some(())
    })
    .await;

    // Without the canary, the main route has every request again.
    scene.delete(&canary("100", "100"));
    eventually("no canary", Duration::from_secs(20), || async {
        let counts = tally(&scene, "/", 50).await;
        (counts.get("web") == Some(&50)).then_some(())
    })
    .await;
}

async fn canary_header_and_cookie_come_before_the_weight(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 212, 1).await;
    let beta = start_backends("beta", 213, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    objects.extend(mk_service_of("beta", &beta));
    objects.extend([
        // The main routes: their features apply to the canary's requests too.
        to_json(&ingress(
            "shop",
            "/",
            "web",
            &[("upstream-vhost", "internal.example.com")],
        )),
        to_json(&ingress("versions", "/v", "web", &[])),
        to_json(&ingress("patterns", "/p", "web", &[])),
        // Header and cookie with a weight that takes every other request.
        to_json(&ingress(
            "shop-canary",
            "/",
            "beta",
            &[
                ("canary", "true"),
                ("canary-by-header", "X-Canary"),
                ("canary-by-cookie", "canary_choice"),
                ("canary-weight", "100"),
            ],
        )),
        // A header value of its own; no weight.
        to_json(&ingress(
            "versions-canary",
            "/v",
            "beta",
            &[
                ("canary", "true"),
                ("canary-by-header", "X-Version"),
                ("canary-by-header-value", "beta"),
                ("canary-by-cookie", "canary_choice"),
            ],
        )),
        // A regular expression on the header's value.
        to_json(&ingress(
            "patterns-canary",
            "/p",
            "beta",
            &[
                ("canary", "true"),
                ("canary-by-header", "X-Version"),
                ("canary-by-header-pattern", "^(beta|rc[0-9]+)$"),
            ],
        )),
        // No main route: the rule does nothing and is a problem.
        to_json(&ingress(
            "orphan-canary",
            "/orphan",
            "beta",
            &[("canary", "true"), ("canary-weight", "100")],
        )),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_service(HOST, "/", "beta").await;

    let service = |reply: &Reply| reply.service().unwrap_or("none").to_string();
    // Precedence on `/`: header, then cookie, then weight (100: the canary).
    for (headers, expected) in [
        (vec![], "beta"),
        (vec![("X-Canary", "never")], "web"),
        (vec![("X-Canary", "always")], "beta"),
        (vec![("Cookie", "canary_choice=never")], "web"),
        (vec![("Cookie", "canary_choice=always")], "beta"),
        // The header decides before the cookie.
        (
            vec![("X-Canary", "never"), ("Cookie", "canary_choice=always")],
            "web",
        ),
        (
            vec![("X-Canary", "always"), ("Cookie", "canary_choice=never")],
            "beta",
        ),
        // Another header value leaves it to the cookie, then to the weight.
        (
            vec![("X-Canary", "maybe"), ("Cookie", "canary_choice=never")],
            "web",
        ),
        (vec![("X-Canary", "maybe")], "beta"),
        (vec![("Cookie", "canary_choice=other")], "beta"),
    ] {
        let reply = send(&scene, "/page", &headers).await;
        assert_eq!(reply.status, 200, "{headers:?}: {reply:?}");
        assert_eq!(service(&reply), expected, "{headers:?}: {reply:?}");
        // The main route's features hold for both backends.
        assert!(
            reply.body.contains("host=internal.example.com"),
            "{headers:?}: {reply:?}"
        );
    }

    // With a header value, only that value goes to the canary; `always` and `never`
    // are plain values that leave it to the cookie (and there is no weight).
    for (headers, expected) in [
        (vec![], "web"),
        (vec![("X-Version", "beta")], "beta"),
        (vec![("X-Version", "always")], "web"),
        (vec![("X-Version", "Beta")], "web"),
        (
            vec![("X-Version", "never"), ("Cookie", "canary_choice=always")],
            "beta",
        ),
        (
            vec![("X-Version", "beta"), ("Cookie", "canary_choice=never")],
            "beta",
        ),
    ] {
        let reply = send(&scene, "/v/1", &headers).await;
        assert_eq!(reply.status, 200, "{headers:?}: {reply:?}");
        assert_eq!(service(&reply), expected, "{headers:?}: {reply:?}");
    }

    for (headers, expected) in [
        (vec![], "web"),
        (vec![("X-Version", "beta")], "beta"),
        (vec![("X-Version", "rc12")], "beta"),
        (vec![("X-Version", "rc")], "web"),
        (vec![("X-Version", "always")], "web"),
    ] {
        let reply = send(&scene, "/p", &headers).await;
        assert_eq!(reply.status, 200, "{headers:?}: {reply:?}");
        assert_eq!(service(&reply), expected, "{headers:?}: {reply:?}");
    }

    // `/orphan` is still the `/` route's (with its canary, which the header turns off),
    // not a route to the orphan canary's backend.
    let reply = send(&scene, "/orphan", &[("X-Canary", "never")]).await;
    assert_eq!(service(&reply), "web", "{reply:?}");
    let problems = scene.status().problems;
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(&*problems[0].object.name, "orphan-canary", "{problems:?}");
    assert!(problems[0].message.contains("does nothing"), "{problems:?}");
}

/// `affinity-canary-behavior` (ingress-nginx): when the main backend has cookie
/// affinity, a client with its cookie stays on the main backend whatever the canary's
/// weight and header say; `sticky` (the default) also keeps the canary's clients on the
/// canary (its servers set the same cookie, marked), `legacy` does not (the canary sets
/// no cookie, so each request is decided again).
async fn session_affinity_keeps_clients_where_they_were_sent(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = start_backends("web", 221, 1).await;
    let beta = start_backends("beta", 222, 1).await;
    let gamma = start_backends("gamma", 223, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    objects.extend(mk_service_of("beta", &beta));
    // A backend of its own: a canary's backend serves each route it is a canary of
    // with the same cookie settings.
    objects.extend(mk_service_of("gamma", &gamma));
    let affinity = [("affinity", "cookie"), ("session-cookie-name", "route")];
    objects.extend([
        to_json(&ingress("sticky", "/sticky", "web", &affinity)),
        to_json(&ingress("legacy", "/legacy", "web", &affinity)),
        to_json(&ingress(
            "sticky-canary",
            "/sticky",
            "beta",
            &[
                ("canary", "true"),
                ("canary-weight", "100"),
                ("canary-by-header", "X-Canary"),
            ],
        )),
        to_json(&ingress(
            "legacy-canary",
            "/legacy",
            "gamma",
            &[
                ("canary", "true"),
                ("canary-weight", "100"),
                ("affinity-canary-behavior", "legacy"),
            ],
        )),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_service(HOST, "/sticky", "beta").await;
    assert!(
        scene.status().problems.is_empty(),
        "{:?}",
        scene.status().problems
    );
    let service = |reply: &Reply| reply.service().unwrap_or("none").to_string();

    // sticky: the canary's first answer sets the cookie, marked as the canary's.
    let reply = send(&scene, "/sticky/a", &[]).await;
    assert_eq!(service(&reply), "beta", "{reply:?}");
    let set_cookie = reply.header("set-cookie").unwrap_or_default().to_string();
    assert!(set_cookie.starts_with("route=canary-"), "{reply:?}");
    let canary_cookie = set_cookie.split(';').next().unwrap_or_default().to_string();
    for (headers, expected) in [
        // The canary's client stays on the canary, before the header decides.
        (vec![("Cookie", canary_cookie.as_str())], "beta"),
        (
            vec![("Cookie", canary_cookie.as_str()), ("X-Canary", "never")],
            "beta",
        ),
        // The main backend's client stays there, whatever the weight and the header.
        (vec![("Cookie", "route=s1")], "web"),
        (vec![("Cookie", "route=s1"), ("X-Canary", "always")], "web"),
        // Without the cookie: the header, then the weight.
        (vec![("X-Canary", "never")], "web"),
        (vec![], "beta"),
    ] {
        for _ in 0..5 {
            let reply = send(&scene, "/sticky/a", &headers).await;
            assert_eq!(reply.status, 200, "{headers:?}: {reply:?}");
            assert_eq!(service(&reply), expected, "{headers:?}: {reply:?}");
        }
    }
    // The main backend's answer sets its own (unmarked) cookie.
    let reply = send(&scene, "/sticky/a", &[("X-Canary", "never")]).await;
    assert_eq!(
        reply.header("set-cookie").and_then(|c| c.split(';').next()),
        Some("route=s1"),
        "{reply:?}"
    );

    // legacy: the canary sets no cookie; the main backend's client stays there.
    let reply = send(&scene, "/legacy/a", &[]).await;
    assert_eq!(service(&reply), "gamma", "{reply:?}");
    assert_eq!(reply.header("set-cookie"), None, "{reply:?}");
    for _ in 0..5 {
        let reply = send(&scene, "/legacy/a", &[("Cookie", "route=s1")]).await;
        assert_eq!(service(&reply), "web", "{reply:?}");
    }
}
