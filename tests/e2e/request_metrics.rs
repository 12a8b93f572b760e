//! Request metrics by Kubernetes names, end to end on real haproxy from both sources:
//! known traffic through two Ingresses that share one backend, an Ingress whose Service
//! has no endpoint, an HTTPRoute and a host no route matches; the controller's
//! `/metrics` counts it exactly per owner, host, path, Service and response class, with
//! the latency histogram; after a reload the counters have not gone back.
//!
//! haproxy 2.6 counts servers' responses only (its `http-after-response` has no
//! stick-counter action): the 503 of a backend without endpoints and haproxy's own 404
//! are requests there, not responses; its histogram has no `_sum`.

use std::net::SocketAddr;

use tugboat::admin::AdminState;
use tugboat::metrics::Metrics;
use tugboat_model::gateway::GatewaySettings;
use tugboat_testkit::gateway_objects::{
    GATEWAY_CONTROLLER, http_route_json, mk_gateway, mk_gateway_class, mk_http_route, mk_listener,
    mk_rule_to,
};
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{mk_ingress, mk_service_of, to_json};
use tugboat_testkit::{HaproxyBinary, Scene, Source, scene_tests};

scene_tests!(requests_are_counted_per_ingress_route_service_and_class);

/// The label set of a route's series.
fn labels(kind: &str, name: &str, host: &str, service: &str) -> String {
    format!(
        r#"kind="{kind}",namespace="default",name="{name}",host="{host}",path="/",service="{service}""#
    )
}

/// The value of the series `name{labels}` (0 when absent).
fn value(metrics: &str, name: &str, labels: &str) -> f64 {
    let start = format!("{name}{{{labels}}} ");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&start))
        .map_or(0.0, |value| value.parse().expect("a number"))
}

/// Every request-metric series and its value.
fn request_series(metrics: &str) -> Vec<(String, f64)> {
    metrics
        .lines()
        .filter(|line| line.starts_with("tugboat_http_"))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            Some((series.to_string(), value.parse().ok()?))
        })
        .collect()
}

async fn scrape(admin: SocketAddr) -> String {
    let reply = tugboat_testkit::get(admin, "localhost", "/metrics")
        .await
        .expect("GET /metrics");
    assert_eq!(reply.status, 200);
    reply.body
}

/// Sends `count` requests for `host` with `headers`, each answering `status`.
async fn send(scene: &Scene, host: &str, headers: &[(&str, &str)], count: usize, status: u16) {
    for _ in 0..count {
        let reply = tugboat_testkit::http::request(scene.http_addr(), "GET", host, "/", headers)
            .await
            .expect("an answer");
        assert_eq!(reply.status, status, "{host} {headers:?}: {}", reply.body);
    }
}

async fn requests_are_counted_per_ingress_route_service_and_class(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = start_backends("web", 160, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    objects.extend(mk_service_of("empty", &[]));
    objects.extend([
        to_json(&mk_ingress("alpha", "alpha.example.com", "web")),
        to_json(&mk_ingress("beta", "beta.example.com", "web")),
        to_json(&mk_ingress("gamma", "gamma.example.com", "empty")),
        mk_gateway_class("tugboat", GATEWAY_CONTROLLER),
        mk_gateway("gw", "tugboat", vec![mk_listener("http", "HTTP", 80, None)]),
        http_route_json(&mk_http_route(
            "routed",
            "gw",
            &["routed.example.com"],
            vec![mk_rule_to(&[("PathPrefix", "/")], "web", 80)],
        )),
    ]);
    let metrics = std::sync::Arc::new(Metrics::new());
    let shared = metrics.clone();
    let scene = Scene::start_with(&haproxy, source, &objects, move |config| {
        config.metrics = Some(shared);
        config.model.gateway = Some(GatewaySettings::new(
            GATEWAY_CONTROLLER,
            config.render.http_port,
            config.render.https_port,
        ));
    })
    .await;
    scene.wait_until_ready().await;
    for host in [
        "alpha.example.com",
        "beta.example.com",
        "routed.example.com",
    ] {
        scene.wait_for_service(host, "/", "web").await;
    }
    scene.wait_for_status("gamma.example.com", "/", 503).await;
    let (_status_tx, status) = tokio::sync::watch::channel(Default::default());
    let (admin_addr, _admin) = tugboat_testkit::serve_admin(AdminState {
        metrics,
        status,
        master_socket: scene.master_socket.clone(),
        profiling: Default::default(),
    })
    .await;

    let before = scrape(admin_addr).await;
    send(&scene, "alpha.example.com", &[], 3, 200).await;
    send(
        &scene,
        "alpha.example.com",
        &[("x-echo-status", "404")],
        2,
        404,
    )
    .await;
    send(
        &scene,
        "alpha.example.com",
        &[("x-delay-ms", "300")],
        1,
        200,
    )
    .await;
    send(&scene, "beta.example.com", &[], 2, 200).await;
    send(
        &scene,
        "beta.example.com",
        &[("x-echo-status", "500")],
        1,
        500,
    )
    .await;
    send(&scene, "gamma.example.com", &[], 2, 503).await;
    send(&scene, "routed.example.com", &[], 2, 200).await;
    send(&scene, "nowhere.example.com", &[], 1, 404).await;
    let after = scrape(admin_addr).await;

    let all_responses = !haproxy.series.starts_with("2.");
    let alpha = labels("Ingress", "alpha", "alpha.example.com", "default/web:80");
    let beta = labels("Ingress", "beta", "beta.example.com", "default/web:80");
    let gamma = labels("Ingress", "gamma", "gamma.example.com", "default/empty:80");
    let routed = labels(
        "HTTPRoute",
        "routed",
        "routed.example.com",
        "default/web:80",
    );
    let unrouted = r#"kind="",namespace="",name="",host="",path="",service="""#.to_string();
    let delta =
        |name: &str, labels: &str| value(&after, name, labels) - value(&before, name, labels);
    let class = |labels: &str, class: &str| {
        delta(
            "tugboat_http_responses_total",
            &format!(r#"{labels},code_class="{class}""#),
        )
    };
    let requests = |labels: &str| delta("tugboat_http_requests_total", labels);
    let table = scene
        .cli()
        .worker_command("show table tugboat_request_stats")
        .await
        .unwrap_or_default();
    let report = format!("before:\n{before}\nafter:\n{after}\nthe table:\n{table}");

    assert_eq!(requests(&alpha), 6.0, "{report}");
    assert_eq!(class(&alpha, "2xx"), 4.0, "{report}");
    assert_eq!(class(&alpha, "4xx"), 2.0, "{report}");
    assert_eq!(requests(&beta), 3.0, "{report}");
    assert_eq!(class(&beta, "2xx"), 2.0, "{report}");
    assert_eq!(class(&beta, "5xx"), 1.0, "{report}");
    assert_eq!(requests(&gamma), 2.0, "{report}");
    assert_eq!(
        class(&gamma, "5xx"),
        if all_responses { 2.0 } else { 0.0 },
        "{report}"
    );
    assert_eq!(requests(&routed), 2.0, "{report}");
    assert_eq!(class(&routed, "2xx"), 2.0, "{report}");
    assert_eq!(requests(&unrouted), 1.0, "{report}");
    assert_eq!(
        class(&unrouted, "4xx"),
        if all_responses { 1.0 } else { 0.0 },
        "{report}"
    );
    assert!(
        delta("tugboat_http_request_bytes_total", &alpha) > 0.0,
        "{report}"
    );
    assert!(
        delta("tugboat_http_response_bytes_total", &alpha) > 0.0,
        "{report}"
    );

    // The histogram: the slow answer (300 ms) is above 0.25 s and within 0.5 s.
    let histogram = "tugboat_http_response_duration_seconds";
    let bucket = |le: &str| {
        delta(
            &format!("{histogram}_bucket"),
            &format!(r#"{alpha},le="{le}""#),
        )
    };
    assert_eq!(bucket("0.25"), 5.0, "{report}");
    assert_eq!(bucket("0.5"), 6.0, "{report}");
    assert_eq!(bucket("+Inf"), 6.0, "{report}");
    assert_eq!(
        delta(&format!("{histogram}_count"), &alpha),
        6.0,
        "{report}"
    );
    let sum = delta(&format!("{histogram}_sum"), &alpha);
    if all_responses {
        assert!((0.3..5.0).contains(&sum), "{sum}: {report}");
    } else {
        assert!(!after.contains(&format!("{histogram}_sum")), "{report}");
    }

    // A reload (a new Service): a new worker with an empty table; nothing goes back.
    let _other = scene
        .reload_with_a_new_service("other", "other.example.com", 161)
        .await;
    let reloaded = scrape(admin_addr).await;
    for (series, earlier) in request_series(&after) {
        let later = request_series(&reloaded)
            .into_iter()
            .find(|(name, _)| *name == series)
            .map_or(0.0, |(_, value)| value);
        assert!(later >= earlier, "{series} went from {earlier} to {later}");
    }
    assert_eq!(
        value(&reloaded, "tugboat_http_requests_total", &alpha),
        value(&after, "tugboat_http_requests_total", &alpha),
        "no request for alpha since: carried as it was"
    );
    send(&scene, "alpha.example.com", &[], 1, 200).await;
    let later = scrape(admin_addr).await;
    assert_eq!(
        value(&later, "tugboat_http_requests_total", &alpha),
        value(&after, "tugboat_http_requests_total", &alpha) + 1.0,
        "the new worker's count adds to the old one's"
    );
}
