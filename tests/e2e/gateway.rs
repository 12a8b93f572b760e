//! Gateway API end to end: GatewayClass, Gateway, HTTPRoute and ReferenceGrant through
//! the API source (the fake API server, status written back to it) and the manifests
//! folder, on real haproxy with real HTTP. Each scenario checks the routing and the
//! conditions the spec names; the status conditions are read from the API server in
//! API mode and from the controller's report with a folder.

use std::time::Duration;

use serde_json::Value;
use tugboat_model::ObjectKey;
use tugboat_model::gateway::GatewaySettings;
use tugboat_model::gateway::objects::{
    HttpRoute, HttpRouteRule, HttpRouteTimeouts, ParentReference,
};
use tugboat_testkit::gateway_objects::{
    GATEWAY_CONTROLLER, from_all_namespaces, http_route_json, mk_backend_ref, mk_gateway,
    mk_gateway_class, mk_http_route, mk_https_listener, mk_https_listener_for, mk_listener,
    mk_reference_grant, mk_rule_to, mk_service_grant, mk_weighted_rule, route_created_at,
    with_filter, with_filter_json, with_matches_json,
};
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{
    in_namespace, mk_endpoint_slice, mk_service, mk_service_of, mk_tls_secret, to_json,
};
use tugboat_testkit::tls::{certificate, exchange, fallback_certificate_der};
use tugboat_testkit::{EchoServer, HaproxyBinary, Scene, Source, eventually, scene_tests};

scene_tests!(
    gateway_routes_hosts_and_paths_to_services_and_reports_status,
    route_changes_go_at_runtime,
    listener_hostnames_intersect_and_the_oldest_route_wins,
    cross_namespace_backends_need_a_reference_grant,
    bad_routes_get_their_condition_and_harm_no_other,
    https_listeners_serve_their_certificates_across_namespaces_by_grant,
    filters_change_headers_redirect_and_rewrite,
    weighted_backends_share_the_requests_by_weight,
    method_header_and_query_matches_pick_the_rule_by_precedence,
    the_http_listener_redirects_while_the_https_listener_serves,
    ingresses_and_http_routes_side_by_side,
    listener_conditions_say_what_is_not_served,
    rule_timeouts_answer_504_past_their_time_on_a_shared_backend,
    a_request_that_fails_a_rules_conditions_falls_to_the_next_matching_rule,
    a_redirect_without_a_port_keeps_the_listeners_port,
    a_fall_through_goes_on_to_less_specific_hosts_ingress_regexes_and_canaries,
    the_examples_route_and_report_their_conditions,
    the_first_and_the_last_wildcard_route_are_map_updates,
    an_https_listener_without_a_hostname_serves_its_certificate_for_any_name,
    a_route_that_loses_every_path_says_it_is_not_accepted_and_is_not_counted,
);

tugboat_testkit::haproxy_tests!(
    gateway_status_has_the_published_addresses_and_follows_generations,
    only_the_leader_writes_gateway_status_and_a_new_leader_takes_over,
    the_api_server_gets_listeners_not_valid_empty_kinds_and_the_port_redirect_feature,
);

/// The Gateway API on, listeners on haproxy's ports.
async fn start(haproxy: &HaproxyBinary, source: Source, objects: &[Value]) -> Scene {
    let scene = Scene::start_with(haproxy, source, objects, |config| {
        config.model.gateway = Some(GatewaySettings::new(
            GATEWAY_CONTROLLER,
            config.render.http_port,
            config.render.https_port,
        ));
    })
    .await;
    scene.wait_until_ready().await;
    scene
}

/// The class, and the Gateway `gw` with an HTTP listener on port 80 (any host).
fn class_and_gateway() -> Vec<Value> {
    vec![
        mk_gateway_class("tugboat", GATEWAY_CONTROLLER),
        mk_gateway("gw", "tugboat", vec![mk_listener("http", "HTTP", 80, None)]),
    ]
}

fn services(list: &[(&str, &[EchoServer])]) -> Vec<Value> {
    list.iter()
        .flat_map(|(name, servers)| mk_service_of(name, servers))
        .collect()
}

/// A rule to `service` port 80 with these matches (JSON).
fn matching(service: &str, matches: Value) -> HttpRouteRule {
    with_matches_json(mk_rule_to(&[], service, 80), matches)
}

/// `(status, the service that answered)` of a request through haproxy.
async fn answer(
    scene: &Scene,
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, Option<String>) {
    let reply = tugboat_testkit::http::request(scene.http_addr(), method, host, path, headers)
        .await
        .expect("answer");
    (reply.status, reply.service().map(str::to_string))
}

/// `(status, reason)` of condition `type_` of the route's first parent, once there is
/// one (from the API server, or the controller's report with a folder).
async fn route_condition(scene: &Scene, name: &str, type_: &str) -> (String, String) {
    eventually(
        &format!("HTTPRoute {name} condition {type_}"),
        Duration::from_secs(15),
        || async {
            match scene.api() {
                Some(api) => {
                    let route = api.get("HTTPRoute", "default", name)?;
                    let conditions = route["status"]["parents"][0]["conditions"].as_array()?;
                    let found = conditions.iter().find(|c| c["type"] == type_)?;
                    assert_eq!(
                        route["status"]["parents"][0]["controllerName"],
                        GATEWAY_CONTROLLER
                    );
                    Some((
                        found["status"].as_str()?.to_string(),
                        found["reason"].as_str()?.to_string(),
                    ))
                }
                None => {
                    let status = scene.status();
                    let route = status
                        .gateway
                        .routes
                        .get(&ObjectKey::new("default", name))?;
                    let found = route.parents[0]
                        .conditions
                        .iter()
                        .find(|c| c.type_ == type_)?;
                    let text = if found.status { "True" } else { "False" };
                    Some((text.to_string(), found.reason.to_string()))
                }
            }
        },
    )
    .await
}

/// Waits until the route's condition `type_` is `(status, reason)`.
async fn wait_for_route_condition(scene: &Scene, name: &str, type_: &str, expected: (&str, &str)) {
    eventually(
        &format!("HTTPRoute {name} {type_}={expected:?}"),
        Duration::from_secs(15),
        || async {
            let (status, reason) = route_condition(scene, name, type_).await;
            (status == expected.0 && reason == expected.1).then_some(())
        },
    )
    .await;
}

async fn gateway_routes_hosts_and_paths_to_services_and_reports_status(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = start_backends("web", 181, 1).await;
    let api = start_backends("api", 182, 1).await;
    let route = mk_http_route(
        "shop",
        "gw",
        &["shop.example.com"],
        vec![
            mk_rule_to(&[("PathPrefix", "/")], "web", 80),
            mk_rule_to(&[("PathPrefix", "/api/")], "api", 80),
            mk_rule_to(&[("Exact", "/api/special")], "web", 80),
        ],
    );
    let mut objects = class_and_gateway();
    objects.extend(services(&[("web", &web), ("api", &api)]));
    objects.push(http_route_json(&route));
    let scene = start(&haproxy, source, &objects).await;

    scene.wait_for_service("shop.example.com", "/", "web").await;
    let answered = |path: &'static str| {
        let scene = &scene;
        async move {
            let reply = scene.get("shop.example.com", path).await.expect("answer");
            (reply.status, reply.service().map(str::to_string))
        }
    };
    assert_eq!(answered("/api").await, (200, Some("api".into())));
    assert_eq!(answered("/api/v1/items").await, (200, Some("api".into())));
    assert_eq!(
        answered("/apiary").await,
        (200, Some("web".into())),
        "whole path elements"
    );
    assert_eq!(
        answered("/api/special").await,
        (200, Some("web".into())),
        "Exact first"
    );
    assert_eq!(
        answered("/api/special/more").await,
        (200, Some("api".into()))
    );
    let other = scene.get("other.example.com", "/").await.expect("answer");
    assert_eq!(other.status, 404, "a host no route has");

    assert_eq!(
        route_condition(&scene, "shop", "Accepted").await,
        ("True".into(), "Accepted".into())
    );
    assert_eq!(
        route_condition(&scene, "shop", "ResolvedRefs").await,
        ("True".into(), "ResolvedRefs".into())
    );
    if let Some(api) = scene.api() {
        let gateway = eventually("the Gateway's status", Duration::from_secs(15), || async {
            let gateway = api.get("Gateway", "default", "gw")?;
            (gateway["status"]["listeners"][0]["attachedRoutes"] == 1).then_some(gateway)
        })
        .await;
        let listener = &gateway["status"]["listeners"][0];
        let condition = |type_: &str| {
            listener["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == type_))
                .map(|c| (c["status"].clone(), c["reason"].clone()))
        };
        assert_eq!(
            condition("Programmed"),
            Some(("True".into(), "Programmed".into()))
        );
        assert_eq!(
            condition("Conflicted"),
            Some(("False".into(), "NoConflicts".into()))
        );
        assert_eq!(listener["supportedKinds"][0]["kind"], "HTTPRoute");
        let class = api.get("GatewayClass", "", "tugboat").expect("the class");
        assert_eq!(class["status"]["conditions"][0]["type"], "Accepted");
        assert_eq!(class["status"]["conditions"][0]["status"], "True");
        assert!(
            class["status"]["conditions"][0]["lastTransitionTime"].is_string(),
            "{class}"
        );
        // Written once: a steady state costs no more writes.
        let writes = |api: &tugboat_testkit::FakeApiServer| {
            api.writes()
                .iter()
                .filter(|w| w.path.ends_with("/status") && w.path.contains("gateway.networking"))
                .count()
        };
        let before = writes(api);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(writes(api), before, "no status write without a change");
    }
}

async fn route_changes_go_at_runtime(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 183, 1).await;
    let api = start_backends("api", 184, 1).await;
    let route = |service: &str| {
        mk_http_route(
            "shop",
            "gw",
            &["shop.example.com"],
            vec![mk_rule_to(&[("PathPrefix", "/")], service, 80)],
        )
    };
    let mut objects = class_and_gateway();
    objects.extend(services(&[("web", &web), ("api", &api)]));
    // A route to each Service, so that both backends exist from the start.
    objects.push(http_route_json(&mk_http_route(
        "other",
        "gw",
        &["other.example.com"],
        vec![mk_rule_to(&[("PathPrefix", "/")], "api", 80)],
    )));
    objects.push(http_route_json(&route("web")));
    let scene = start(&haproxy, source, &objects).await;
    scene.wait_for_service("shop.example.com", "/", "web").await;
    let reloads = scene.reloads().await;
    scene.apply(&http_route_json(&route("api")));
    scene.wait_for_service("shop.example.com", "/", "api").await;
    // A new path of the route to an existing backend.
    let mut more = route("api");
    more.spec
        .rules
        .push(mk_rule_to(&[("PathPrefix", "/web")], "web", 80));
    scene.apply(&http_route_json(&more));
    scene
        .wait_for_service("shop.example.com", "/web/x", "web")
        .await;
    assert_eq!(
        scene.reloads().await,
        reloads,
        "route changes need no reload"
    );
    // Deleted: the host is gone.
    scene.delete(&http_route_json(&more));
    scene.wait_for_status("shop.example.com", "/", 404).await;
}

async fn listener_hostnames_intersect_and_the_oldest_route_wins(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = start_backends("web", 185, 1).await;
    let api = start_backends("api", 186, 1).await;
    let mut objects = vec![
        mk_gateway_class("tugboat", GATEWAY_CONTROLLER),
        mk_gateway(
            "gw",
            "tugboat",
            vec![mk_listener("http", "HTTP", 80, Some("*.example.com"))],
        ),
    ];
    objects.extend(services(&[("web", &web), ("api", &api)]));
    let older: HttpRoute = route_created_at(
        mk_http_route(
            "z-older",
            "gw",
            &["a.example.com", "b.example.org"],
            vec![mk_rule_to(&[("PathPrefix", "/")], "web", 80)],
        ),
        "2030-01-01T00:00:00Z",
    );
    objects.push(http_route_json(&older));
    objects.push(http_route_json(&mk_http_route(
        "elsewhere",
        "gw",
        &["c.example.org"],
        vec![mk_rule_to(&[("PathPrefix", "/")], "web", 80)],
    )));
    let scene = start(&haproxy, source, &objects).await;
    scene.wait_for_service("a.example.com", "/", "web").await;
    // Not in the listener's hostname: not routed.
    assert_eq!(
        scene
            .get("b.example.org", "/")
            .await
            .expect("answer")
            .status,
        404
    );
    assert_eq!(
        route_condition(&scene, "elsewhere", "Accepted").await,
        ("False".into(), "NoMatchingListenerHostname".into())
    );

    // A newer route (created a second later; named first) for the same host and path
    // loses it; its other host is served.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let newer = route_created_at(
        mk_http_route(
            "a-newer",
            "gw",
            &["a.example.com", "n.example.com"],
            vec![mk_rule_to(&[("PathPrefix", "/")], "api", 80)],
        ),
        "2031-01-01T00:00:00Z",
    );
    scene.apply(&http_route_json(&newer));
    scene.wait_for_service("n.example.com", "/", "api").await;
    assert_eq!(
        scene
            .get("a.example.com", "/")
            .await
            .expect("answer")
            .service(),
        Some("web"),
        "the older route keeps its host and path"
    );
    // The more specific host wins over the listener's wildcard: a route without
    // hostnames takes the listener's.
    let catch_all = mk_http_route(
        "catch-all",
        "gw",
        &[],
        vec![mk_rule_to(&[("PathPrefix", "/")], "api", 80)],
    );
    scene.apply(&http_route_json(&catch_all));
    scene.wait_for_service("x.example.com", "/", "api").await;
    // A Gateway API wildcard covers any depth of labels, the longest suffix first.
    scene.wait_for_service("x.y.example.com", "/", "api").await;
    let deeper = route_created_at(
        mk_http_route(
            "deeper",
            "gw",
            &["*.y.example.com"],
            vec![mk_rule_to(&[("PathPrefix", "/")], "web", 80)],
        ),
        "2032-01-01T00:00:00Z",
    );
    scene.apply(&http_route_json(&deeper));
    scene
        .wait_for_service("a.b.y.example.com", "/", "web")
        .await;
    assert_eq!(
        scene
            .get("z.example.com", "/")
            .await
            .expect("answer")
            .service(),
        Some("api")
    );
    assert_eq!(
        scene.get("example.com", "/").await.expect("answer").status,
        404
    );
    assert_eq!(
        scene
            .get("a.example.com", "/")
            .await
            .expect("answer")
            .service(),
        Some("web")
    );
    assert_eq!(
        scene.get("x.other.org", "/").await.expect("answer").status,
        404
    );
}

async fn cross_namespace_backends_need_a_reference_grant(haproxy: HaproxyBinary, source: Source) {
    let posts = start_backends("posts", 187, 1).await;
    let addrs: Vec<std::net::SocketAddr> = posts.iter().map(|s| s.addr).collect();
    let mut objects = vec![
        mk_gateway_class("tugboat", GATEWAY_CONTROLLER),
        mk_gateway(
            "gw",
            "tugboat",
            vec![from_all_namespaces(mk_listener("http", "HTTP", 80, None))],
        ),
        to_json(&in_namespace(mk_service("posts", "http", 80), "blog")),
        to_json(&in_namespace(
            mk_endpoint_slice("posts", "http", &addrs),
            "blog",
        )),
    ];
    let mut rule = mk_rule_to(&[("PathPrefix", "/")], "posts", 80);
    rule.backend_refs = vec![mk_backend_ref(Some("blog"), "posts", 80)];
    objects.push(http_route_json(&mk_http_route(
        "to-blog",
        "gw",
        &["blog.example.com"],
        vec![rule],
    )));
    let scene = start(&haproxy, source, &objects).await;
    scene.wait_for_status("blog.example.com", "/", 500).await;
    assert_eq!(
        route_condition(&scene, "to-blog", "ResolvedRefs").await,
        ("False".into(), "RefNotPermitted".into())
    );
    let grant = mk_service_grant("blog", "routes-from-default", "default");
    scene.apply(&grant);
    scene
        .wait_for_service("blog.example.com", "/", "posts")
        .await;
    wait_for_route_condition(&scene, "to-blog", "ResolvedRefs", ("True", "ResolvedRefs")).await;
    scene.delete(&grant);
    scene.wait_for_status("blog.example.com", "/", 500).await;
}

async fn bad_routes_get_their_condition_and_harm_no_other(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 188, 1).await;
    let mut objects = class_and_gateway();
    objects.extend(services(&[("web", &web)]));
    objects.push(http_route_json(&mk_http_route(
        "good",
        "gw",
        &["good.example.com"],
        vec![mk_rule_to(&[("PathPrefix", "/")], "web", 80)],
    )));
    objects.push(http_route_json(&mk_http_route(
        "to-nothing",
        "gw",
        &["nothing.example.com"],
        vec![mk_rule_to(&[("PathPrefix", "/")], "later", 80)],
    )));
    objects.push(http_route_json(&mk_http_route(
        "odd-filter",
        "gw",
        &["filter.example.com"],
        vec![
            mk_rule_to(&[("PathPrefix", "/")], "web", 80),
            with_filter(mk_rule_to(&[("Exact", "/x")], "web", 80), "ExtensionRef"),
        ],
    )));
    objects.push(http_route_json(&mk_http_route(
        "regex",
        "gw",
        &["regex.example.com"],
        vec![mk_rule_to(&[("RegularExpression", "/v[0-9+")], "web", 80)],
    )));
    for (name, weight) in [("heavy", 1_000_001), ("negative", -1)] {
        objects.push(http_route_json(&mk_http_route(
            name,
            "gw",
            &[&format!("{name}.example.com")],
            vec![
                mk_rule_to(&[("PathPrefix", "/")], "web", 80),
                mk_weighted_rule("/split", &[("web", 80, 1), ("web", 80, weight)]),
            ],
        )));
    }
    let scene = start(&haproxy, source, &objects).await;
    scene.wait_for_service("good.example.com", "/", "web").await;
    // A weight out of 0..1000000: not accepted, nothing of the route is routed, the
    // field named.
    for name in ["heavy", "negative"] {
        assert_eq!(
            route_condition(&scene, name, "Accepted").await,
            ("False".into(), "UnsupportedValue".into()),
            "{name}"
        );
        assert_eq!(
            scene
                .get(&format!("{name}.example.com"), "/")
                .await
                .expect("answer")
                .status,
            404,
            "{name}"
        );
        if let Some(event) = scene.wait_for_warning(name, "spec.parentRefs").await {
            assert!(
                event["note"]
                    .as_str()
                    .is_some_and(|n| n.contains("spec.rules[1].backendRefs[1].weight")),
                "{event}"
            );
        }
    }
    // A missing Service: 500, BackendNotFound; the route is accepted.
    scene.wait_for_status("nothing.example.com", "/", 500).await;
    assert_eq!(
        route_condition(&scene, "to-nothing", "ResolvedRefs").await,
        ("False".into(), "BackendNotFound".into())
    );
    assert_eq!(
        route_condition(&scene, "to-nothing", "Accepted").await,
        ("True".into(), "Accepted".into())
    );
    // Unsupported: not accepted, nothing of the route is routed.
    for (name, host) in [
        ("odd-filter", "filter.example.com"),
        ("regex", "regex.example.com"),
    ] {
        assert_eq!(
            route_condition(&scene, name, "Accepted").await,
            ("False".into(), "UnsupportedValue".into()),
            "{name}"
        );
        assert_eq!(
            scene.get(host, "/").await.expect("answer").status,
            404,
            "{name}"
        );
    }
    // In API mode, a Warning Event on the route says why.
    if let Some(event) = scene
        .wait_for_warning("odd-filter", "spec.parentRefs")
        .await
    {
        let regarding = &event["regarding"];
        assert_eq!(regarding["kind"], "HTTPRoute", "{event}");
        assert_eq!(
            regarding["apiVersion"], "gateway.networking.k8s.io/v1",
            "{event}"
        );
        assert!(
            regarding["uid"].as_str().is_some_and(|uid| !uid.is_empty()),
            "{event}"
        );
        assert!(
            event["note"]
                .as_str()
                .is_some_and(|n| n.contains("ExtensionRef")),
            "{event}"
        );
    }
    // The missing Service appears: the route serves it.
    let later = start_backends("later", 189, 1).await;
    for object in mk_service_of("later", &later) {
        scene.apply(&object);
    }
    scene
        .wait_for_service("nothing.example.com", "/", "later")
        .await;
    wait_for_route_condition(
        &scene,
        "to-nothing",
        "ResolvedRefs",
        ("True", "ResolvedRefs"),
    )
    .await;
    assert_eq!(
        scene
            .get("good.example.com", "/")
            .await
            .expect("answer")
            .service(),
        Some("web")
    );
}

/// `(status, reason)` of condition `type_` of listener `index` of Gateway `gw`.
async fn listener_condition(scene: &Scene, index: usize, type_: &str) -> (String, String) {
    listener_condition_of(scene, "gw", index, type_).await
}

/// [`listener_condition`] of the Gateway `gateway` of namespace `default`.
async fn listener_condition_of(
    scene: &Scene,
    gateway: &str,
    index: usize,
    type_: &str,
) -> (String, String) {
    eventually(
        &format!("listener {index} condition {type_}"),
        Duration::from_secs(15),
        || async {
            match scene.api() {
                Some(api) => {
                    let gateway = api.get("Gateway", "default", gateway)?;
                    let conditions =
                        gateway["status"]["listeners"][index]["conditions"].as_array()?;
                    let found = conditions.iter().find(|c| c["type"] == type_)?;
                    Some((
                        found["status"].as_str()?.to_string(),
                        found["reason"].as_str()?.to_string(),
                    ))
                }
                None => {
                    let status = scene.status();
                    let gateway = status
                        .gateway
                        .gateways
                        .get(&ObjectKey::new("default", gateway))?;
                    let found = gateway.listeners[index]
                        .conditions
                        .iter()
                        .find(|c| c.type_ == type_)?;
                    let text = if found.status { "True" } else { "False" };
                    Some((text.to_string(), found.reason.to_string()))
                }
            }
        },
    )
    .await
}

async fn https_listeners_serve_their_certificates_across_namespaces_by_grant(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = start_backends("web", 190, 1).await;
    let (own_cert, own_key, own_der) = certificate(&["secure.example.com"], false);
    let (shared_cert, shared_key, shared_der) = certificate(&["shared.example.com"], false);
    let mut objects = vec![
        mk_gateway_class("tugboat", GATEWAY_CONTROLLER),
        mk_gateway(
            "gw",
            "tugboat",
            vec![
                mk_https_listener("own", "secure.example.com", (None, "site-tls")),
                mk_https_listener(
                    "shared",
                    "shared.example.com",
                    (Some("certs"), "shared-tls"),
                ),
            ],
        ),
        to_json(&mk_tls_secret("site-tls", &own_cert, &own_key)),
        to_json(&in_namespace(
            mk_tls_secret("shared-tls", &shared_cert, &shared_key),
            "certs",
        )),
    ];
    objects.extend(services(&[("web", &web)]));
    objects.push(http_route_json(&mk_http_route(
        "secure",
        "gw",
        &[],
        vec![mk_rule_to(&[("PathPrefix", "/")], "web", 80)],
    )));
    let scene = start(&haproxy, source, &objects).await;
    let https = scene.https_addr();
    let served = |sni: &'static str| async move {
        exchange(https, sni, "/", &[b"http/1.1"])
            .await
            .expect("TLS exchange")
    };
    let own = eventually(
        "the listener's certificate",
        Duration::from_secs(15),
        || async {
            let found = served("secure.example.com").await;
            (found.certificate == own_der).then_some(found)
        },
    )
    .await;
    assert_eq!(own.reply.expect("answer").service(), Some("web"));
    assert_eq!(
        listener_condition(&scene, 0, "ResolvedRefs").await,
        ("True".into(), "ResolvedRefs".into())
    );

    // The Secret of another namespace: not without a ReferenceGrant there.
    assert_eq!(
        listener_condition(&scene, 1, "ResolvedRefs").await,
        ("False".into(), "RefNotPermitted".into())
    );
    let fallback = fallback_certificate_der(&scene.lib_dir);
    assert_eq!(served("shared.example.com").await.certificate, fallback);
    let grant = mk_reference_grant(
        "certs",
        "gateways-from-default",
        ("Gateway", "default"),
        "Secret",
    );
    scene.apply(&grant);
    eventually(
        "the granted certificate",
        Duration::from_secs(15),
        || async { (served("shared.example.com").await.certificate == shared_der).then_some(()) },
    )
    .await;
    eventually(
        "the listener's ResolvedRefs condition True",
        Duration::from_secs(15),
        || async {
            (listener_condition(&scene, 1, "ResolvedRefs").await.0 == "True").then_some(())
        },
    )
    .await;
}

/// Every value of a header of the answer.
fn header_values<'a>(reply: &'a tugboat_testkit::Reply, name: &str) -> Vec<&'a str> {
    reply
        .headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
        .collect()
}

async fn filters_change_headers_redirect_and_rewrite(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 191, 1).await;
    let mut objects = class_and_gateway();
    objects.extend(services(&[("web", &web)]));
    let headers_rule = with_filter_json(
        with_filter_json(
            mk_rule_to(&[("PathPrefix", "/")], "web", 80),
            serde_json::json!({"type": "RequestHeaderModifier", "requestHeaderModifier": {
                "set": [{"name": "X-Set", "value": "one"}],
                "add": [{"name": "X-Add", "value": "two"}],
                "remove": ["X-Gone"]}}),
        ),
        serde_json::json!({"type": "ResponseHeaderModifier", "responseHeaderModifier": {
            "set": [{"name": "X-Served-By", "value": "tugboat"}],
            "remove": ["X-Echo-Service"]}}),
    );
    let mut moved_rule = with_filter_json(
        mk_rule_to(&[("PathPrefix", "/old/")], "web", 80),
        serde_json::json!({"type": "RequestRedirect", "requestRedirect": {
            "scheme": "https", "hostname": "new.example.com", "statusCode": 301,
            "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new/"}}}),
    );
    moved_rule.backend_refs.clear();
    let mut full_rule = with_filter_json(
        mk_rule_to(&[("Exact", "/down")], "web", 80),
        serde_json::json!({"type": "RequestRedirect", "requestRedirect": {
            "port": 8443,
            "path": {"type": "ReplaceFullPath", "replaceFullPath": "/maintenance"}}}),
    );
    full_rule.backend_refs.clear();
    let rewrite_rule = with_filter_json(
        mk_rule_to(&[("PathPrefix", "/api")], "web", 80),
        serde_json::json!({"type": "URLRewrite", "urlRewrite": {
            "hostname": "internal.example.com",
            "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/v2"}}}),
    );
    for (name, rules) in [
        ("headers", vec![headers_rule]),
        ("moved", vec![moved_rule, full_rule]),
        ("rewrite", vec![rewrite_rule]),
    ] {
        let host = format!("{name}.example.com");
        objects.push(http_route_json(&mk_http_route(name, "gw", &[&host], rules)));
    }
    let scene = start(&haproxy, source, &objects).await;
    scene
        .wait_for_service("headers.example.com", "/", "web")
        .await;

    let reply = tugboat_testkit::http::request(
        scene.http_addr(),
        "GET",
        "headers.example.com",
        "/",
        &[("X-Set", "client"), ("X-Add", "client"), ("X-Gone", "yes")],
    )
    .await
    .expect("answer");
    assert_eq!(
        header_values(&reply, "x-echo-req-set"),
        ["one"],
        "{reply:?}"
    );
    let mut added = header_values(&reply, "x-echo-req-add");
    added.sort_unstable();
    assert_eq!(added, ["client", "two"], "{reply:?}");
    assert!(
        header_values(&reply, "x-echo-req-gone").is_empty(),
        "{reply:?}"
    );
    assert_eq!(reply.header("x-served-by"), Some("tugboat"));
    assert_eq!(
        reply.header("x-echo-service"),
        None,
        "removed from the answer"
    );

    let redirect = scene
        .get("moved.example.com", "/old/page?x=1")
        .await
        .expect("answer");
    assert_eq!(redirect.status, 301);
    assert_eq!(
        redirect.header("location"),
        Some("https://new.example.com/new/page?x=1")
    );
    let redirect = scene
        .get("moved.example.com", "/old")
        .await
        .expect("answer");
    assert_eq!(
        redirect.header("location"),
        Some("https://new.example.com/new")
    );
    let redirect = scene
        .get("moved.example.com", "/down")
        .await
        .expect("answer");
    assert_eq!(redirect.status, 302);
    assert_eq!(
        redirect.header("location"),
        Some("http://moved.example.com:8443/maintenance")
    );
    assert_eq!(
        route_condition(&scene, "moved", "Accepted").await,
        ("True".into(), "Accepted".into())
    );

    let rewritten = scene
        .get("rewrite.example.com", "/api/items?q=1")
        .await
        .expect("answer");
    assert_eq!(rewritten.service(), Some("web"));
    assert_eq!(rewritten.path(), Some("/v2/items"), "{rewritten:?}");
    assert_eq!(rewritten.query(), Some("q=1"));
    assert!(
        rewritten.body.contains("host=internal.example.com"),
        "{rewritten:?}"
    );
    let root = scene
        .get("rewrite.example.com", "/api")
        .await
        .expect("answer");
    assert_eq!(root.path(), Some("/v2"));
}

/// How many of `count` requests to `host` each service (or status, for other answers)
/// took.
async fn tally(
    scene: &Scene,
    host: &str,
    count: usize,
) -> std::collections::BTreeMap<String, usize> {
    let mut tally = std::collections::BTreeMap::new();
    for _ in 0..count {
        let reply = scene.get(host, "/").await.expect("answer");
        let key = match reply.service() {
            Some(service) if reply.status == 200 => service.to_string(),
            _ => reply.status.to_string(),
        };
        *tally.entry(key).or_insert(0) += 1;
    }
    tally
}

/// Asserts that `key` took `share` of `count` requests, within 5 points.
fn assert_share(
    tally: &std::collections::BTreeMap<String, usize>,
    key: &str,
    share: f64,
    count: usize,
) {
    let got = *tally.get(key).unwrap_or(&0) as f64 / count as f64;
    assert!(
        (got - share).abs() <= 0.05,
        "{key}: {got:.3} of the requests, expected {share} +/- 0.05 ({tally:?})"
    );
}

async fn weighted_backends_share_the_requests_by_weight(haproxy: HaproxyBinary, source: Source) {
    // 5 points are 6 standard deviations of a fair share of 4,000 draws; of 1,000 they
    // were 3, and a run of the whole suite missed them by chance now and then.
    const REQUESTS: usize = 4000;
    let web = start_backends("web", 192, 1).await;
    let api = start_backends("api", 193, 1).await;
    let mut objects = class_and_gateway();
    objects.extend(services(&[("web", &web), ("api", &api)]));
    let route = |backends: &[(&str, i32, i32)]| {
        http_route_json(&mk_http_route(
            "split",
            "gw",
            &["split.example.com"],
            vec![mk_weighted_rule("/", backends)],
        ))
    };
    objects.push(route(&[("web", 80, 3), ("api", 80, 1)]));
    let scene = start(&haproxy, source, &objects).await;
    scene
        .wait_for_service("split.example.com", "/", "web")
        .await;
    let counts = tally(&scene, "split.example.com", REQUESTS).await;
    assert_share(&counts, "web", 0.75, REQUESTS);
    assert_share(&counts, "api", 0.25, REQUESTS);

    // A share whose Service does not exist answers 500 for its part.
    scene.apply(&route(&[("web", 80, 1), ("gone", 80, 1)]));
    wait_for_route_condition(
        &scene,
        "split",
        "ResolvedRefs",
        ("False", "BackendNotFound"),
    )
    .await;
    // Until the old split is gone for good (it gave api a quarter: 100 requests in a row
    // without one are not chance), then counted.
    eventually("the new split", Duration::from_secs(20), || async {
        let counts = tally(&scene, "split.example.com", 100).await;
        (!counts.contains_key("api")).then_some(())
    })
    .await;
    let counts = tally(&scene, "split.example.com", REQUESTS).await;
    assert_share(&counts, "web", 0.5, REQUESTS);
    assert_share(&counts, "500", 0.5, REQUESTS);

    // Weight 0 takes no requests.
    scene.apply(&route(&[("web", 80, 0), ("api", 80, 5)]));
    scene
        .wait_for_service("split.example.com", "/", "api")
        .await;
    eventually("api alone", Duration::from_secs(15), || async {
        let counts = tally(&scene, "split.example.com", 50).await;
        (counts.get("api") == Some(&50)).then_some(())
    })
    .await;
}

async fn method_header_and_query_matches_pick_the_rule_by_precedence(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = start_backends("web", 194, 1).await;
    let api = start_backends("api", 195, 1).await;
    let canary = start_backends("canary", 196, 1).await;
    let mut objects = class_and_gateway();
    objects.extend(services(&[
        ("web", &web),
        ("api", &api),
        ("canary", &canary),
    ]));
    objects.push(http_route_json(&mk_http_route(
        "matches",
        "gw",
        &["match.example.com"],
        vec![
            mk_rule_to(&[("PathPrefix", "/")], "web", 80),
            matching(
                "api",
                serde_json::json!([{"headers": [{"name": "Version", "value": "2"}]}]),
            ),
            matching("canary", serde_json::json!([{"method": "POST"}])),
            matching(
                "api",
                serde_json::json!([{"path": {"type": "RegularExpression", "value": "^/v[0-9]+/items$"}}]),
            ),
            matching(
                "canary",
                serde_json::json!([{"queryParams": [{"name": "env", "value": "canary"}]}]),
            ),
        ],
    )));
    objects.push(http_route_json(&mk_http_route(
        "team-only",
        "gw",
        &["team.example.com"],
        vec![matching(
            "web",
            serde_json::json!([{"path": {"type": "PathPrefix", "value": "/"},
                                                  "headers": [{"name": "x-team", "value": "a"}]}]),
        )],
    )));
    let scene = start(&haproxy, source, &objects).await;
    scene
        .wait_for_service("match.example.com", "/", "web")
        .await;
    let ask = |method: &'static str,
               path: &'static str,
               headers: &'static [(&'static str, &'static str)]| {
        let scene = &scene;
        async move {
            answer(scene, method, "match.example.com", path, headers)
                .await
                .1
        }
    };
    assert_eq!(ask("GET", "/", &[]).await.as_deref(), Some("web"));
    assert_eq!(
        ask("GET", "/v12/items", &[]).await.as_deref(),
        Some("api"),
        "regex path"
    );
    assert_eq!(
        ask("POST", "/v12/items", &[]).await.as_deref(),
        Some("api"),
        "a path expression comes before a method match"
    );
    assert_eq!(
        ask("GET", "/v12/items/x", &[]).await.as_deref(),
        Some("web")
    );
    assert_eq!(
        ask("GET", "/x", &[("version", "2")]).await.as_deref(),
        Some("api"),
        "header"
    );
    assert_eq!(
        ask("GET", "/x", &[("version", "3")]).await.as_deref(),
        Some("web")
    );
    assert_eq!(
        ask("POST", "/", &[]).await.as_deref(),
        Some("canary"),
        "method"
    );
    assert_eq!(
        ask("POST", "/", &[("version", "2")]).await.as_deref(),
        Some("canary"),
        "a method match comes before header matches"
    );
    assert_eq!(
        ask("GET", "/?env=canary", &[]).await.as_deref(),
        Some("canary"),
        "query"
    );
    assert_eq!(
        ask("GET", "/?env=canary", &[("version", "2")])
            .await
            .as_deref(),
        Some("api"),
        "header matches come before query matches"
    );
    // Only a rule with a header match: other requests of the host and path get 404.
    let team = tugboat_testkit::http::request(
        scene.http_addr(),
        "GET",
        "team.example.com",
        "/",
        &[("X-Team", "a")],
    )
    .await
    .expect("answer");
    assert_eq!(team.service(), Some("web"));
    assert_eq!(
        scene
            .get("team.example.com", "/")
            .await
            .expect("answer")
            .status,
        404
    );
    assert_eq!(
        route_condition(&scene, "matches", "Accepted").await,
        ("True".into(), "Accepted".into())
    );
}

async fn the_http_listener_redirects_while_the_https_listener_serves(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = start_backends("web", 198, 1).await;
    let (cert, key, der) = certificate(&["secure.example.com"], false);
    let mut objects = vec![
        mk_gateway_class("tugboat", GATEWAY_CONTROLLER),
        mk_gateway(
            "gw",
            "tugboat",
            vec![
                mk_listener("http", "HTTP", 80, Some("secure.example.com")),
                mk_https_listener("https", "secure.example.com", (None, "site-tls")),
            ],
        ),
        to_json(&mk_tls_secret("site-tls", &cert, &key)),
    ];
    objects.extend(services(&[("web", &web)]));
    let on = |mut route: HttpRoute, section: &str| {
        route.spec.parent_refs[0].section_name = Some(section.to_string());
        route
    };
    let mut redirect = with_filter_json(
        mk_rule_to(&[("PathPrefix", "/")], "web", 80),
        serde_json::json!({"type": "RequestRedirect",
                           "requestRedirect": {"scheme": "https", "statusCode": 301}}),
    );
    redirect.backend_refs.clear();
    objects.push(http_route_json(&on(
        mk_http_route("to-https", "gw", &[], vec![redirect]),
        "http",
    )));
    objects.push(http_route_json(&on(
        mk_http_route(
            "app",
            "gw",
            &[],
            vec![
                mk_rule_to(&[("PathPrefix", "/")], "web", 80),
                mk_rule_to(&[("PathPrefix", "/admin")], "web", 80),
                mk_rule_to(&[("Exact", "/login")], "web", 80),
            ],
        ),
        "https",
    )));
    let scene = start(&haproxy, source, &objects).await;
    scene
        .wait_for_status("secure.example.com", "/x?y=1", 301)
        .await;
    // The HTTPS listener's longer paths are not the HTTP listener's: its `/` redirects
    // them too.
    for path in ["/x?y=1", "/admin/x?y=1", "/login"] {
        let moved = scene.get("secure.example.com", path).await.expect("answer");
        assert_eq!(moved.status, 301, "{path}");
        assert_eq!(
            moved.header("location"),
            Some(format!("https://secure.example.com{path}").as_str()),
            "{path}"
        );
    }
    for path in ["/admin/x", "/login"] {
        let reply = exchange(
            scene.https_addr(),
            "secure.example.com",
            path,
            &[b"http/1.1"],
        )
        .await
        .expect("TLS exchange");
        assert_eq!(
            reply.reply.expect("answer").service(),
            Some("web"),
            "{path}"
        );
    }

    // Another path of the same backend joins the others' feature set: a map update.
    let reloads = scene.reloads().await;
    scene.apply(&http_route_json(&on(
        mk_http_route(
            "app",
            "gw",
            &[],
            vec![
                mk_rule_to(&[("PathPrefix", "/")], "web", 80),
                mk_rule_to(&[("PathPrefix", "/admin")], "web", 80),
                mk_rule_to(&[("Exact", "/login")], "web", 80),
                mk_rule_to(&[("PathPrefix", "/docs")], "web", 80),
            ],
        ),
        "https",
    )));
    eventually("the new path on HTTPS", Duration::from_secs(15), || async {
        let reply = exchange(
            scene.https_addr(),
            "secure.example.com",
            "/docs/a",
            &[b"http/1.1"],
        )
        .await
        .ok()?;
        (reply.reply?.service() == Some("web")).then_some(())
    })
    .await;
    let moved = scene
        .get("secure.example.com", "/docs/a")
        .await
        .expect("answer");
    assert_eq!(moved.status, 301);
    assert_eq!(scene.reloads().await, reloads, "no reload for the new path");
    let https = scene.https_addr();
    let served = eventually(
        "the HTTPS listener's route",
        Duration::from_secs(15),
        || async {
            let found = exchange(https, "secure.example.com", "/x", &[b"http/1.1"])
                .await
                .ok()?;
            (found.certificate == der).then_some(found)
        },
    )
    .await;
    assert_eq!(served.reply.expect("answer").service(), Some("web"));
    for route in ["to-https", "app"] {
        assert_eq!(
            route_condition(&scene, route, "Accepted").await,
            ("True".into(), "Accepted".into()),
            "{route}"
        );
    }
    let problems = scene.status().problems;
    assert!(
        problems.iter().all(|p| p.object.kind != "HTTPRoute"),
        "no conflict between the two binds' routes: {problems:?}"
    );
}

/// The message of the condition `type_` of the Gateway `gw` once it is `expected`.
async fn gateway_condition(
    server: &tugboat_testkit::FakeApiServer,
    type_: &str,
    expected: (&str, &str),
) -> String {
    eventually(
        &format!("Gateway {type_}={expected:?}"),
        Duration::from_secs(15),
        || async {
            let gateway = server.get("Gateway", "default", "gw")?;
            let found = gateway["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == type_)?
                .clone();
            (found["status"] == expected.0 && found["reason"] == expected.1)
                .then(|| found["message"].as_str().unwrap_or_default().to_string())
        },
    )
    .await
}

/// Through the API only: the publish flags' addresses in the Gateway's status,
/// conditions that follow a new generation of the route, and requested addresses
/// checked against the published ones.
async fn gateway_status_has_the_published_addresses_and_follows_generations(
    haproxy: HaproxyBinary,
) {
    let web = start_backends("web", 199, 1).await;
    let server = tugboat_testkit::FakeApiServer::start().await;
    for object in class_and_gateway()
        .into_iter()
        .chain(services(&[("web", &web)]))
    {
        server.put(object);
    }
    let route = |path: &str| {
        http_route_json(&mk_http_route(
            "shop",
            "gw",
            &["shop.example.com"],
            vec![mk_rule_to(&[("PathPrefix", path)], "web", 80)],
        ))
    };
    server.put(route("/"));
    let mut options = tugboat_testkit::cluster_pod::options("pod-a");
    options.publish.addresses = vec!["192.0.2.10".into(), "lb.example.com".into()];
    let pod = tugboat_testkit::ClusterPod::start_with(&haproxy, &server, options, |config| {
        config.model.gateway = Some(GatewaySettings::new(
            GATEWAY_CONTROLLER,
            config.render.http_port,
            config.render.https_port,
        ));
    })
    .await;
    pod.wait_for_service("shop.example.com", "/", "web").await;
    let addresses = eventually(
        "the Gateway's addresses",
        Duration::from_secs(15),
        || async {
            let gateway = server.get("Gateway", "default", "gw")?;
            let addresses = gateway["status"]["addresses"].as_array()?.clone();
            (!addresses.is_empty()).then_some(addresses)
        },
    )
    .await;
    assert_eq!(
        addresses,
        [
            serde_json::json!({"type": "IPAddress", "value": "192.0.2.10"}),
            serde_json::json!({"type": "Hostname", "value": "lb.example.com"}),
        ]
    );
    let generation_of = |server: &tugboat_testkit::FakeApiServer| {
        let route = server.get("HTTPRoute", "default", "shop")?;
        let generation = route["metadata"]["generation"].as_i64()?;
        let observed =
            route["status"]["parents"][0]["conditions"][0]["observedGeneration"].as_i64()?;
        Some((generation, observed))
    };
    let (first, _) = eventually("the route's status", Duration::from_secs(15), || async {
        generation_of(&server).filter(|(g, o)| g == o)
    })
    .await;
    server.put(route("/shop"));
    let (second, observed) = eventually(
        "the new generation observed",
        Duration::from_secs(15),
        || async { generation_of(&server).filter(|(g, o)| g == o && *g > first) },
    )
    .await;
    assert_eq!(second, observed);
    pod.wait_for_service("shop.example.com", "/shop/x", "web")
        .await;

    // Requested addresses: only published ones can be; another type is not accepted.
    let requesting = |addresses: Value| {
        let mut gateway = class_and_gateway().remove(1);
        gateway["spec"]["addresses"] = addresses;
        gateway
    };
    server.put(requesting(serde_json::json!([
        {"type": "IPAddress", "value": "192.0.2.10"},
        {"type": "IPAddress", "value": "192.0.2.99"},
    ])));
    let message = gateway_condition(&server, "Programmed", ("False", "AddressNotUsable")).await;
    assert!(message.contains("192.0.2.99"), "{message}");
    gateway_condition(&server, "Accepted", ("True", "Accepted")).await;
    server.put(requesting(serde_json::json!([
        {"value": "192.0.2.10"},
        {"type": "Hostname", "value": "lb.example.com"},
    ])));
    gateway_condition(&server, "Programmed", ("True", "Programmed")).await;
    server.put(requesting(serde_json::json!([
        {"type": "example.com/pool", "value": "blue"},
    ])));
    gateway_condition(&server, "Accepted", ("False", "UnsupportedAddress")).await;
}

async fn ingresses_and_http_routes_side_by_side(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 200, 1).await;
    let api = start_backends("api", 201, 1).await;
    let mut objects = class_and_gateway();
    objects.extend(services(&[("web", &web), ("api", &api)]));
    objects.push(to_json(&tugboat_testkit::objects::mk_ingress(
        "legacy",
        "legacy.example.com",
        "web",
    )));
    objects.push(to_json(&tugboat_testkit::objects::mk_ingress(
        "shared",
        "shared.example.com",
        "web",
    )));
    objects.push(http_route_json(&mk_http_route(
        "new",
        "gw",
        &["new.example.com", "shared.example.com"],
        vec![mk_rule_to(&[("PathPrefix", "/")], "api", 80)],
    )));
    let scene = start(&haproxy, source, &objects).await;
    scene
        .wait_for_service("legacy.example.com", "/", "web")
        .await;
    scene.wait_for_service("new.example.com", "/", "api").await;
    assert_eq!(
        scene
            .get("shared.example.com", "/")
            .await
            .expect("answer")
            .service(),
        Some("web"),
        "the Ingress keeps its host and path"
    );
    let problems = scene.status().problems;
    assert!(
        problems.iter().any(|p| p.object.kind == "HTTPRoute"
            && &*p.object.name == "new"
            && p.message.contains("Ingress default/shared")),
        "{problems:?}"
    );
    // The Ingress goes: the route takes the host.
    scene.delete(&tugboat_testkit::objects::mk_ingress(
        "shared",
        "shared.example.com",
        "web",
    ));
    scene
        .wait_for_service("shared.example.com", "/", "api")
        .await;
}

async fn only_the_leader_writes_gateway_status_and_a_new_leader_takes_over(haproxy: HaproxyBinary) {
    let web = start_backends("web", 202, 1).await;
    let server = tugboat_testkit::FakeApiServer::start().await;
    for object in class_and_gateway()
        .into_iter()
        .chain(services(&[("web", &web)]))
    {
        server.put(object);
    }
    server.put(http_route_json(&mk_http_route(
        "shop",
        "gw",
        &["shop.example.com"],
        vec![mk_rule_to(&[("PathPrefix", "/")], "web", 80)],
    )));
    let replica = |name: &str, address: &str| {
        let mut options = tugboat_testkit::cluster_pod::options(name);
        options.publish.addresses = vec![address.to_string()];
        options
    };
    let gateway_on = |config: &mut tugboat::controller::ControllerConfig| {
        config.model.gateway = Some(GatewaySettings::new(
            GATEWAY_CONTROLLER,
            config.render.http_port,
            config.render.https_port,
        ));
    };
    let a = tugboat_testkit::ClusterPod::start_with(
        &haproxy,
        &server,
        replica("pod-a", "127.0.0.11"),
        gateway_on,
    )
    .await;
    let b = tugboat_testkit::ClusterPod::start_with(
        &haproxy,
        &server,
        replica("pod-b", "127.0.0.12"),
        gateway_on,
    )
    .await;
    a.wait_for_service("shop.example.com", "/", "web").await;
    b.wait_for_service("shop.example.com", "/", "web").await;
    let holder = || async {
        let lease = server.get("Lease", "tugboat-system", "tugboat-leader")?;
        lease["spec"]["holderIdentity"].as_str().map(str::to_string)
    };
    let published = || async {
        let gateway = server.get("Gateway", "default", "gw")?;
        gateway["status"]["addresses"][0]["value"]
            .as_str()
            .map(str::to_string)
    };
    let leader = eventually("a Lease holder", Duration::from_secs(15), holder).await;
    let (stopped, survivor, (leader_ip, survivor_ip, survivor_name)) = if leader == "pod-a" {
        (a, b, ("127.0.0.11", "127.0.0.12", "pod-b"))
    } else {
        (b, a, ("127.0.0.12", "127.0.0.11", "pod-a"))
    };
    eventually("the leader's address", Duration::from_secs(10), || async {
        (published().await.as_deref() == Some(leader_ip)).then_some(())
    })
    .await;
    wait_for_route_condition_api(&server, "shop").await;
    let gateway_writes = || {
        server
            .writes()
            .into_iter()
            .filter(|w| w.path.contains("gateway.networking.k8s.io") && w.path.ends_with("/status"))
            .collect::<Vec<_>>()
    };
    for write in gateway_writes() {
        assert!(
            !write.body.to_string().contains(survivor_ip),
            "only the leader writes: {write:?}"
        );
    }
    drop(stopped);
    eventually(
        "the other replica holds the Lease",
        Duration::from_secs(20),
        || async { (holder().await.as_deref() == Some(survivor_name)).then_some(()) },
    )
    .await;
    eventually(
        "the new leader's address",
        Duration::from_secs(10),
        || async { (published().await.as_deref() == Some(survivor_ip)).then_some(()) },
    )
    .await;
    survivor
        .wait_for_service("shop.example.com", "/", "web")
        .await;
}

/// Waits until the route `name` has its Accepted condition from the API server.
async fn wait_for_route_condition_api(server: &tugboat_testkit::FakeApiServer, name: &str) {
    eventually(
        &format!("HTTPRoute {name} accepted"),
        Duration::from_secs(15),
        || async {
            let route = server.get("HTTPRoute", "default", name)?;
            (route["status"]["parents"][0]["conditions"][0]["status"] == "True").then_some(())
        },
    )
    .await;
}

async fn listener_conditions_say_what_is_not_served(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 203, 1).await;
    let mut objects = vec![
        mk_gateway_class("tugboat", GATEWAY_CONTROLLER),
        mk_gateway(
            "gw",
            "tugboat",
            vec![
                mk_listener("http", "HTTP", 80, Some("a.example.com")),
                mk_listener("again", "HTTP", 80, Some("a.example.com")),
                mk_listener("odd-port", "HTTP", 8081, None),
                mk_listener("tcp", "TCP", 5432, None),
                mk_listener("other", "HTTP", 80, Some("b.example.com")),
            ],
        ),
    ];
    objects.extend(services(&[("web", &web)]));
    let mut on_again = mk_http_route(
        "on-again",
        "gw",
        &[],
        vec![mk_rule_to(&[("PathPrefix", "/")], "web", 80)],
    );
    on_again.spec.parent_refs[0].section_name = Some("again".into());
    objects.push(http_route_json(&on_again));
    objects.push(http_route_json(&mk_http_route(
        "everywhere",
        "gw",
        &[],
        vec![mk_rule_to(&[("PathPrefix", "/")], "web", 80)],
    )));
    let scene = start(&haproxy, source, &objects).await;
    scene.wait_for_service("b.example.com", "/", "web").await;
    scene.wait_for_service("a.example.com", "/", "web").await;
    assert_eq!(
        listener_condition(&scene, 0, "Programmed").await,
        ("True".into(), "Programmed".into())
    );
    assert_eq!(
        listener_condition(&scene, 1, "Conflicted").await,
        ("True".into(), "HostnameConflict".into())
    );
    assert_eq!(listener_condition(&scene, 1, "Programmed").await.0, "False");
    assert_eq!(
        listener_condition(&scene, 2, "Accepted").await,
        ("False".into(), "PortUnavailable".into())
    );
    assert_eq!(
        listener_condition(&scene, 3, "Accepted").await,
        ("False".into(), "UnsupportedProtocol".into())
    );
    // Only the conflicted listener: the route is not allowed there.
    assert_eq!(
        route_condition(&scene, "on-again", "Accepted").await,
        ("False".into(), "NotAllowedByListeners".into())
    );
    if let Some(api) = scene.api() {
        let gateway = api.get("Gateway", "default", "gw").expect("the Gateway");
        let attached: Vec<i64> = gateway["status"]["listeners"]
            .as_array()
            .expect("listeners")
            .iter()
            .map(|l| l["attachedRoutes"].as_i64().unwrap_or(-1))
            .collect();
        assert_eq!(attached, [1, 0, 0, 0, 1], "{gateway}");
        let programmed = gateway["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Programmed"))
            .map(|c| c["status"].clone());
        assert_eq!(programmed, Some("True".into()));
    }
}

/// The rule with `timeouts` (`request`, `backendRequest`).
fn with_timeouts(
    mut rule: HttpRouteRule,
    request: Option<&str>,
    backend_request: Option<&str>,
) -> HttpRouteRule {
    rule.timeouts = Some(HttpRouteTimeouts {
        request: request.map(str::to_string),
        backend_request: backend_request.map(str::to_string),
    });
    rule
}

/// Rules of one Service with different `timeouts`: each request gets its rule's time
/// (504 past it), though the rules share one backend; `0s` is none; a rule without
/// `timeouts` (also one that matches on a header of a path with them) has the Service's. A route whose `backendRequest` exceeds its
/// `request` is refused and harms nothing else.
async fn rule_timeouts_answer_504_past_their_time_on_a_shared_backend(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let slow = start_backends("slow", 217, 1).await;
    let mut objects = class_and_gateway();
    // The Service's own server timeout: 1s.
    let addrs: Vec<std::net::SocketAddr> = slow.iter().map(|s| s.addr).collect();
    objects.push(to_json(&tugboat_testkit::objects::with_keys(
        mk_service("slow", "http", 80),
        &[("timeout-server", "1s")],
    )));
    objects.push(to_json(&mk_endpoint_slice("slow", "http", &addrs)));
    objects.push(http_route_json(&mk_http_route(
        "timed",
        "gw",
        &["timed.example.com"],
        vec![
            mk_rule_to(&[("PathPrefix", "/")], "slow", 80),
            with_timeouts(
                mk_rule_to(&[("PathPrefix", "/quick")], "slow", 80),
                Some("2s"),
                Some("400ms"),
            ),
            with_timeouts(
                mk_rule_to(&[("PathPrefix", "/patient")], "slow", 80),
                Some("1m"),
                None,
            ),
            with_timeouts(
                mk_rule_to(&[("PathPrefix", "/forever")], "slow", 80),
                Some("0s"),
                None,
            ),
            with_matches_json(
                mk_rule_to(&[], "slow", 80),
                serde_json::json!([{"path": {"type": "PathPrefix", "value": "/quick"},
                                    "headers": [{"name": "x-patient", "value": "yes"}]}]),
            ),
        ],
    )));
    objects.push(http_route_json(&mk_http_route(
        "backwards",
        "gw",
        &["backwards.example.com"],
        vec![with_timeouts(
            mk_rule_to(&[("PathPrefix", "/")], "slow", 80),
            Some("1s"),
            Some("2s"),
        )],
    )));
    let scene = start(&haproxy, source, &objects).await;
    scene
        .wait_for_service("timed.example.com", "/quick", "slow")
        .await;
    let status = |path: &'static str, headers: &'static [(&'static str, &'static str)]| {
        let scene = &scene;
        async move {
            tugboat_testkit::http::request(
                scene.http_addr(),
                "GET",
                "timed.example.com",
                path,
                headers,
            )
            .await
            .expect("answer")
            .status
        }
    };
    assert_eq!(
        status("/quick", &[("x-delay-ms", "100")]).await,
        200,
        "within backendRequest"
    );
    assert_eq!(
        status("/quick", &[("x-delay-ms", "1500")]).await,
        504,
        "past backendRequest (400ms), within request"
    );
    assert_eq!(
        status("/patient", &[("x-delay-ms", "1500")]).await,
        200,
        "the same backend, another rule's time"
    );
    assert_eq!(
        status("/forever", &[("x-delay-ms", "1500")]).await,
        200,
        "0s: no timeout, not even the Service's"
    );
    assert_eq!(
        status("/", &[("x-delay-ms", "1500")]).await,
        504,
        "a rule without timeouts: the Service's 1s"
    );
    assert_eq!(status("/", &[("x-delay-ms", "100")]).await, 200);
    assert_eq!(
        status("/quick", &[("x-delay-ms", "700"), ("x-patient", "yes")]).await,
        200,
        "the header rule of the same path has its own (the Service's)"
    );
    assert_eq!(
        route_condition(&scene, "timed", "Accepted").await,
        ("True".into(), "Accepted".into())
    );
    assert_eq!(
        route_condition(&scene, "backwards", "Accepted").await,
        ("False".into(), "UnsupportedValue".into())
    );
    assert_eq!(
        scene
            .get("backwards.example.com", "/")
            .await
            .expect("answer")
            .status,
        404
    );
}

/// A rule of a path whose header, query or method conditions a request does not meet
/// leaves it to the next rule that matches, as the spec's precedence orders them: a
/// shorter prefix of the same host (of the same route or another one, or an Ingress,
/// through several conditional paths), the prefix of an exact path, or the rules of a
/// wildcard host. Where no rule matches, 404.
async fn a_request_that_fails_a_rules_conditions_falls_to_the_next_matching_rule(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = start_backends("web", 218, 1).await;
    let api = start_backends("api", 219, 1).await;
    let mut objects = class_and_gateway();
    objects.extend(services(&[("web", &web), ("api", &api)]));
    objects.push(http_route_json(&mk_http_route(
        "fallback",
        "gw",
        &["fall.example.com"],
        vec![
            matching(
                "api",
                serde_json::json!([{"path": {"type": "PathPrefix", "value": "/foo"},
                                    "headers": [{"name": "x-v", "value": "2"}]}]),
            ),
            matching(
                "api",
                serde_json::json!([{"path": {"type": "PathPrefix", "value": "/foo/bar"},
                                    "method": "POST"}]),
            ),
            matching(
                "api",
                serde_json::json!([{"path": {"type": "Exact", "value": "/exact"},
                                    "queryParams": [{"name": "q", "value": "1"}]}]),
            ),
            mk_rule_to(&[("PathPrefix", "/exact")], "web", 80),
        ],
    )));
    // The host's `/` comes from another route.
    objects.push(http_route_json(&mk_http_route(
        "root",
        "gw",
        &["fall.example.com"],
        vec![mk_rule_to(&[("PathPrefix", "/")], "web", 80)],
    )));
    objects.push(http_route_json(&mk_http_route(
        "no-root",
        "gw",
        &["bare.example.com"],
        vec![matching(
            "api",
            serde_json::json!([{"path": {"type": "PathPrefix", "value": "/foo"},
                                "headers": [{"name": "x-v", "value": "2"}]}]),
        )],
    )));
    // The host's `/` comes from an Ingress.
    objects.push(to_json(&tugboat_testkit::objects::mk_ingress(
        "mixed-root",
        "mixed.example.com",
        "web",
    )));
    objects.push(http_route_json(&mk_http_route(
        "mixed",
        "gw",
        &["mixed.example.com"],
        vec![matching(
            "api",
            serde_json::json!([{"path": {"type": "PathPrefix", "value": "/foo"},
                                "headers": [{"name": "x-v", "value": "2"}]}]),
        )],
    )));
    // The `/` of a wildcard host covers a host's conditional path.
    objects.push(http_route_json(&mk_http_route(
        "wild-root",
        "gw",
        &["*.wild.example.com"],
        vec![mk_rule_to(&[("PathPrefix", "/")], "web", 80)],
    )));
    objects.push(http_route_json(&mk_http_route(
        "wild-member",
        "gw",
        &["a.wild.example.com"],
        vec![matching(
            "api",
            serde_json::json!([{"path": {"type": "PathPrefix", "value": "/foo"},
                                "headers": [{"name": "x-v", "value": "2"}]}]),
        )],
    )));
    let scene = start(&haproxy, source, &objects).await;
    scene.wait_for_service("fall.example.com", "/", "web").await;
    scene
        .wait_for_service("mixed.example.com", "/", "web")
        .await;
    let fall = "fall.example.com";
    let web_ok = (200, Some("web".to_string()));
    let api_ok = (200, Some("api".to_string()));
    assert_eq!(
        answer(&scene, "GET", fall, "/foo", &[("x-v", "2")]).await,
        api_ok
    );
    assert_eq!(
        answer(&scene, "GET", fall, "/foo", &[]).await,
        web_ok,
        "without the header: the `/` of another route"
    );
    assert_eq!(
        answer(&scene, "GET", fall, "/foo/x", &[("x-v", "3")]).await,
        web_ok
    );
    assert_eq!(
        answer(&scene, "POST", fall, "/foo/bar/x", &[]).await,
        api_ok
    );
    assert_eq!(
        answer(&scene, "GET", fall, "/foo/bar/x", &[("x-v", "2")]).await,
        api_ok,
        "not a POST: the header rule of /foo"
    );
    assert_eq!(
        answer(&scene, "GET", fall, "/foo/bar/x", &[]).await,
        web_ok,
        "neither: through /foo to /"
    );
    assert_eq!(answer(&scene, "GET", fall, "/exact?q=1", &[]).await, api_ok);
    assert_eq!(
        answer(&scene, "GET", fall, "/exact?q=2", &[]).await,
        web_ok,
        "the prefix of the same path"
    );
    assert_eq!(
        answer(&scene, "GET", "mixed.example.com", "/foo", &[("x-v", "2")]).await,
        api_ok
    );
    assert_eq!(
        answer(&scene, "GET", "mixed.example.com", "/foo", &[]).await,
        web_ok,
        "the Ingress' `/`"
    );
    assert_eq!(
        answer(&scene, "GET", "a.wild.example.com", "/foo", &[("x-v", "2")]).await,
        api_ok
    );
    assert_eq!(
        answer(&scene, "GET", "a.wild.example.com", "/foo/x", &[]).await,
        web_ok,
        "the wildcard host's `/`"
    );
    assert_eq!(
        answer(&scene, "GET", "bare.example.com", "/foo", &[("x-v", "2")]).await,
        api_ok
    );
    assert_eq!(
        answer(&scene, "GET", "bare.example.com", "/foo", &[])
            .await
            .0,
        404,
        "no rule of the host matches"
    );
    for name in [
        "fallback",
        "root",
        "no-root",
        "mixed",
        "wild-root",
        "wild-member",
    ] {
        assert_eq!(
            route_condition(&scene, name, "Accepted").await,
            ("True".into(), "Accepted".into()),
            "{name}"
        );
    }
}

/// A redirect that sets neither scheme nor port keeps the port of the listener the
/// request came through: a listener on the HTTP bind's own port (not 80) puts it in the
/// location; the listener on port 80 leaves it out; a scheme gives its well-known port.
async fn a_redirect_without_a_port_keeps_the_listeners_port(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = start_backends("web", 220, 1).await;
    let mut objects = class_and_gateway();
    objects.extend(services(&[("web", &web)]));
    objects.push(http_route_json(&mk_http_route(
        "ready",
        "gw",
        &["ready.example.com"],
        vec![mk_rule_to(&[("PathPrefix", "/")], "web", 80)],
    )));
    let scene = start(&haproxy, source, &objects).await;
    scene
        .wait_for_service("ready.example.com", "/", "web")
        .await;
    // The HTTP bind's port is only known now.
    let bind_port = scene.http_addr().port();
    scene.apply(&mk_gateway(
        "on-bind",
        "tugboat",
        vec![mk_listener(
            "bind",
            "HTTP",
            i32::from(bind_port),
            Some("bind.example.com"),
        )],
    ));
    let redirect = |rule: HttpRouteRule, redirect: Value| {
        with_filter_json(
            rule,
            serde_json::json!({"type": "RequestRedirect", "requestRedirect": redirect}),
        )
    };
    let moving = |name: &str, gateway: &str, host: &str| {
        let rules = vec![
            redirect(
                mk_rule_to(&[("PathPrefix", "/host")], "web", 80),
                serde_json::json!({"hostname": "new.example.com"}),
            ),
            redirect(
                mk_rule_to(&[("PathPrefix", "/scheme")], "web", 80),
                serde_json::json!({"scheme": "http", "hostname": "new.example.com"}),
            ),
        ];
        http_route_json(&mk_http_route(name, gateway, &[host], rules))
    };
    scene.apply(&moving("on-bind", "on-bind", "bind.example.com"));
    scene.apply(&moving("standard", "gw", "std.example.com"));
    scene
        .wait_for_status("bind.example.com", "/host/a", 302)
        .await;
    scene
        .wait_for_status("std.example.com", "/host/a", 302)
        .await;
    let location = |host: String, path: &'static str| {
        let scene = &scene;
        async move {
            let reply = scene.get(&host, path).await.expect("answer");
            assert_eq!(reply.status, 302, "{host}{path}");
            reply.header("location").map(str::to_string)
        }
    };
    assert_eq!(
        location("bind.example.com".into(), "/host/a?x=1").await,
        Some(format!("http://new.example.com:{bind_port}/host/a?x=1")),
        "the listener's port"
    );
    assert_eq!(
        location("std.example.com".into(), "/host/a")
            .await
            .as_deref(),
        Some("http://new.example.com/host/a"),
        "port 80 on HTTP is left out"
    );
    assert_eq!(
        location("bind.example.com".into(), "/scheme/a")
            .await
            .as_deref(),
        Some("http://new.example.com/scheme/a"),
        "a scheme's well-known port"
    );
    // One route on both listeners of the HTTP bind (ports 80 and the bind's own): the
    // Host header's port says which listener the request was sent to.
    let mut both = mk_http_route(
        "both",
        "gw",
        &["bind.example.com"],
        vec![redirect(
            mk_rule_to(&[("PathPrefix", "/both")], "web", 80),
            serde_json::json!({"hostname": "new.example.com"}),
        )],
    );
    both.spec.parent_refs.push(ParentReference {
        name: "on-bind".into(),
        ..ParentReference::default()
    });
    scene.apply(&http_route_json(&both));
    scene
        .wait_for_status("bind.example.com", "/both/a", 302)
        .await;
    assert_eq!(
        location(format!("bind.example.com:{bind_port}"), "/both/a?x=1").await,
        Some(format!("http://new.example.com:{bind_port}/both/a?x=1")),
        "sent to the listener on the bind's port"
    );
    assert_eq!(
        location("bind.example.com".into(), "/both/a")
            .await
            .as_deref(),
        Some("http://new.example.com/both/a"),
        "sent to the listener on port 80"
    );
    assert_eq!(
        location("bind.example.com:80".into(), "/both/a")
            .await
            .as_deref(),
        Some("http://new.example.com/both/a"),
        "port 80 named: HTTP's own, left out"
    );
    for name in ["on-bind", "both"] {
        assert_eq!(
            route_condition(&scene, name, "Accepted").await,
            ("True".into(), "Accepted".into()),
            "{name}"
        );
    }
}

/// A request that fails the conditions of every rule of its host and path goes on, in
/// the order haproxy looks routes up, to rules that depend on its path: the exact paths,
/// longer prefixes and regular expressions of a less specific host, an Ingress' regular
/// expression of the same host, and an Ingress' canary is drawn there.
async fn a_fall_through_goes_on_to_less_specific_hosts_ingress_regexes_and_canaries(
    haproxy: HaproxyBinary,
    source: Source,
) {
    use tugboat_testkit::objects::{
        PathTo, mk_annotated_ingress, mk_ingress, mk_ingress_with_rules, mk_rule, prefix,
        with_annotations,
    };
    let web = start_backends("web", 221, 1).await;
    let api = start_backends("api", 222, 1).await;
    let other = start_backends("other", 223, 1).await;
    let mut objects = class_and_gateway();
    objects.extend(services(&[("web", &web), ("api", &api), ("other", &other)]));
    let with_header = |path_type: &str, path: &str| {
        matching(
            "other",
            serde_json::json!([{"path": {"type": path_type, "value": path},
                                "headers": [{"name": "x-v", "value": "2"}]}]),
        )
    };
    // A wildcard host whose rules under `/foo` depend on the path, beneath a host whose
    // `/foo` has a condition.
    objects.push(http_route_json(&mk_http_route(
        "deep-wild",
        "gw",
        &["*.deep.example.com"],
        vec![
            mk_rule_to(&[("PathPrefix", "/")], "web", 80),
            mk_rule_to(&[("PathPrefix", "/foo/bar")], "api", 80),
            mk_rule_to(&[("Exact", "/foo/x")], "api", 80),
        ],
    )));
    objects.push(http_route_json(&mk_http_route(
        "deep-member",
        "gw",
        &["a.deep.example.com"],
        vec![with_header("PathPrefix", "/foo")],
    )));
    let regex_path = |path: &'static str, service: &'static str| PathTo {
        path_type: "ImplementationSpecific",
        ..prefix(path, service)
    };
    let use_regex = [("nginx.ingress.kubernetes.io/use-regex", "true")];
    // An Ingress' one-label wildcard host with a regular expression path.
    objects.push(to_json(&with_annotations(
        mk_ingress_with_rules(
            "rx-wild",
            vec![mk_rule(
                Some("*.rx.example.com"),
                &[regex_path("/foo/[0-9]+", "api")],
            )],
        ),
        &use_regex,
    )));
    objects.push(to_json(&mk_ingress_with_rules(
        "rx-wild-root",
        vec![mk_rule(Some("*.rx.example.com"), &[prefix("/", "web")])],
    )));
    objects.push(http_route_json(&mk_http_route(
        "rx-member",
        "gw",
        &["a.rx.example.com"],
        vec![with_header("PathPrefix", "/foo")],
    )));
    // An Ingress' regular expression path of the same host.
    objects.push(to_json(&with_annotations(
        mk_ingress_with_rules(
            "re-regex",
            vec![mk_rule(
                Some("re.example.com"),
                &[regex_path("/foo/[0-9]+", "api")],
            )],
        ),
        &use_regex,
    )));
    objects.push(to_json(&mk_ingress("re-root", "re.example.com", "web")));
    objects.push(http_route_json(&mk_http_route(
        "re-route",
        "gw",
        &["re.example.com"],
        vec![
            with_header("Exact", "/foo/1"),
            with_header("PathPrefix", "/foo/7"),
        ],
    )));
    // An Ingress with a canary that takes every request, under a conditional path.
    objects.push(to_json(&mk_ingress("can-main", "can.example.com", "web")));
    objects.push(to_json(&mk_annotated_ingress(
        "can-canary",
        "can.example.com",
        "/",
        "api",
        &[
            ("nginx.ingress.kubernetes.io/canary", "true"),
            ("nginx.ingress.kubernetes.io/canary-weight", "100"),
        ],
    )));
    objects.push(http_route_json(&mk_http_route(
        "can-route",
        "gw",
        &["can.example.com"],
        vec![with_header("PathPrefix", "/foo")],
    )));
    let scene = start(&haproxy, source, &objects).await;
    scene
        .wait_for_service("b.deep.example.com", "/", "web")
        .await;
    scene
        .wait_for_service("re.example.com", "/foo/5", "api")
        .await;
    let served = |service: &str| (200, Some(service.to_string()));
    let header: &'static [(&'static str, &'static str)] = &[("x-v", "2")];
    let deep = "a.deep.example.com";
    assert_eq!(
        answer(&scene, "GET", deep, "/foo/bar/y", header).await,
        served("other")
    );
    assert_eq!(
        answer(&scene, "GET", deep, "/foo/bar/y", &[]).await,
        served("api"),
        "the wildcard host's longer prefix"
    );
    assert_eq!(
        answer(&scene, "GET", deep, "/foo/x", &[]).await,
        served("api"),
        "the wildcard host's exact path"
    );
    assert_eq!(
        answer(&scene, "GET", deep, "/foo/x/y", &[]).await,
        served("web")
    );
    assert_eq!(
        answer(&scene, "GET", deep, "/foo/barn", &[]).await,
        served("web")
    );
    assert_eq!(
        answer(&scene, "GET", deep, "/foo", &[]).await,
        served("web")
    );
    let rx = "a.rx.example.com";
    assert_eq!(
        answer(&scene, "GET", rx, "/foo/12", header).await,
        served("other")
    );
    assert_eq!(
        answer(&scene, "GET", rx, "/foo/12", &[]).await,
        served("api"),
        "the wildcard Ingress' regular expression"
    );
    assert_eq!(
        answer(&scene, "GET", rx, "/foo/ab", &[]).await,
        served("web")
    );
    let re = "re.example.com";
    assert_eq!(
        answer(&scene, "GET", re, "/foo/1", header).await,
        served("other")
    );
    assert_eq!(
        answer(&scene, "GET", re, "/foo/1", &[]).await,
        served("api"),
        "the Ingress' regular expression of the same host"
    );
    assert_eq!(
        answer(&scene, "GET", re, "/foo/7", header).await,
        served("other")
    );
    assert_eq!(
        answer(&scene, "GET", re, "/foo/7", &[]).await,
        served("api")
    );
    assert_eq!(answer(&scene, "GET", re, "/bar", &[]).await, served("web"));
    let can = "can.example.com";
    assert_eq!(
        answer(&scene, "GET", can, "/foo", header).await,
        served("other")
    );
    assert_eq!(
        answer(&scene, "GET", can, "/foo", &[]).await,
        served("api"),
        "the Ingress' canary is drawn"
    );
    assert_eq!(answer(&scene, "GET", can, "/bar", &[]).await, served("api"));
    for name in [
        "deep-wild",
        "deep-member",
        "rx-member",
        "re-route",
        "can-route",
    ] {
        assert_eq!(
            route_condition(&scene, name, "Accepted").await,
            ("True".into(), "Accepted".into()),
            "{name}"
        );
    }
}

/// The objects of the YAML files of examples/gateway/, as written.
fn example_objects(files: &[&str]) -> Vec<Value> {
    use serde::Deserialize as _;
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .join("examples/gateway");
    let mut objects = Vec::new();
    for file in files {
        let path = folder.join(file);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for document in serde_yaml_ng::Deserializer::from_str(&text) {
            let object = Value::deserialize(document).expect("a YAML object");
            if !object.is_null() {
                objects.push(object);
            }
        }
    }
    objects
}

/// examples/gateway/ as its README walks through it: the class, the Gateway (HTTP for
/// every host, HTTPS for echo.example.com with the Secret echo-tls), the route to the
/// echo Service, and the route of another namespace that its ReferenceGrant allows.
async fn the_examples_route_and_report_their_conditions(haproxy: HaproxyBinary, source: Source) {
    let echo = start_backends("echo", 224, 1).await;
    let (cert, key, der) = certificate(&["echo.example.com"], false);
    let mut objects = example_objects(&[
        "gatewayclass.yaml",
        "gateway.yaml",
        "httproute.yaml",
        "cross-namespace.yaml",
    ]);
    let grant = objects
        .iter()
        .find(|o| o["kind"] == "ReferenceGrant")
        .cloned()
        .expect("the example's ReferenceGrant");
    objects.extend(services(&[("echo", &echo)]));
    objects.push(to_json(&mk_tls_secret("echo-tls", &cert, &key)));
    let scene = start(&haproxy, source, &objects).await;
    scene
        .wait_for_service("echo.example.com", "/", "echo")
        .await;
    scene
        .wait_for_service("blog.example.com", "/", "echo")
        .await;
    assert_eq!(
        answer(&scene, "GET", "echo.example.com", "/healthz", &[]).await,
        (200, Some("echo".to_string()))
    );
    let https = exchange(scene.https_addr(), "echo.example.com", "/", &[b"http/1.1"])
        .await
        .expect("TLS exchange");
    assert_eq!(https.certificate, der, "the listener's certificate");
    assert_eq!(https.reply.expect("answer").service(), Some("echo"));
    for type_ in ["Accepted", "ResolvedRefs"] {
        assert_eq!(
            route_condition(&scene, "echo", type_).await,
            ("True".into(), type_.into())
        );
    }
    for (index, type_) in [(0, "Programmed"), (1, "Programmed"), (1, "ResolvedRefs")] {
        assert_eq!(
            listener_condition_of(&scene, "web", index, type_).await,
            ("True".into(), type_.into()),
            "listener {index}"
        );
    }
    // Without the grant, the other namespace's route answers 500.
    scene.delete(&grant);
    scene.wait_for_status("blog.example.com", "/", 500).await;
    // As the README reads it: the second condition of the route's parent.
    let reason = eventually(
        "the blog route's RefNotPermitted",
        Duration::from_secs(15),
        || async {
            let reason = match scene.api() {
                Some(api) => {
                    let route = api.get("HTTPRoute", "team-a", "blog")?;
                    route["status"]["parents"][0]["conditions"][1]["reason"]
                        .as_str()?
                        .to_string()
                }
                None => {
                    let status = scene.status();
                    let route = status
                        .gateway
                        .routes
                        .get(&ObjectKey::new("team-a", "blog"))?;
                    route.parents[0].conditions.get(1)?.reason.to_string()
                }
            };
            (reason == "RefNotPermitted").then_some(reason)
        },
    )
    .await;
    assert_eq!(reason, "RefNotPermitted");
}

/// Waits until listener `index` of the Gateway `gateway` counts `expected` attached
/// routes (from the API server, or the controller's report with a folder).
async fn wait_for_attached_routes(scene: &Scene, gateway: &str, index: usize, expected: i64) {
    eventually(
        &format!("Gateway {gateway} listener {index} attachedRoutes={expected}"),
        Duration::from_secs(15),
        || async {
            let count = match scene.api() {
                Some(api) => api.get("Gateway", "default", gateway)?["status"]["listeners"][index]
                    ["attachedRoutes"]
                    .as_i64()?,
                None => {
                    let status = scene.status();
                    let state = status
                        .gateway
                        .gateways
                        .get(&ObjectKey::new("default", gateway))?;
                    i64::from(state.listeners.get(index)?.attached_routes)
                }
            };
            (count == expected).then_some(())
        },
    )
    .await;
}

/// The frontend has one structure whatever the routes' hosts: the first route of a
/// Gateway API wildcard host (a listener's `*.` hostname, or the route's own) and the
/// removal of the last are map updates, without a reload.
async fn the_first_and_the_last_wildcard_route_are_map_updates(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = start_backends("web", 240, 1).await;
    let api = start_backends("api", 241, 1).await;
    let mut objects = vec![
        mk_gateway_class("tugboat", GATEWAY_CONTROLLER),
        mk_gateway(
            "gw",
            "tugboat",
            vec![mk_listener("http", "HTTP", 80, Some("*.example.com"))],
        ),
    ];
    objects.extend(services(&[("web", &web), ("api", &api)]));
    // Exact hosts only, so that both backends exist from the start.
    for (name, host, service) in [("a", "a.example.com", "web"), ("b", "b.example.com", "api")] {
        objects.push(http_route_json(&mk_http_route(
            name,
            "gw",
            &[host],
            vec![mk_rule_to(&[("PathPrefix", "/")], service, 80)],
        )));
    }
    let scene = start(&haproxy, source, &objects).await;
    scene.wait_for_service("a.example.com", "/", "web").await;
    scene.wait_for_service("b.example.com", "/", "api").await;
    assert_eq!(
        scene
            .get("x.example.com", "/")
            .await
            .expect("answer")
            .status,
        404
    );
    let reloads = scene.reloads().await;

    // The listener's wildcard, for a route without hostnames.
    let listeners = mk_http_route(
        "listeners",
        "gw",
        &[],
        vec![mk_rule_to(&[("PathPrefix", "/")], "api", 80)],
    );
    scene.apply(&http_route_json(&listeners));
    scene.wait_for_service("x.example.com", "/", "api").await;
    scene.wait_for_service("x.y.example.com", "/", "api").await;
    assert_eq!(
        scene
            .get("a.example.com", "/")
            .await
            .expect("answer")
            .service(),
        Some("web"),
        "an exact host first"
    );
    // The route's own wildcard, deeper.
    let own = mk_http_route(
        "own",
        "gw",
        &["*.shop.example.com"],
        vec![mk_rule_to(&[("PathPrefix", "/")], "web", 80)],
    );
    scene.apply(&http_route_json(&own));
    scene
        .wait_for_service("a.b.shop.example.com", "/", "web")
        .await;
    assert_eq!(
        scene.reloads().await,
        reloads,
        "the first wildcard routes are map updates"
    );

    scene.delete(&http_route_json(&own));
    scene.delete(&http_route_json(&listeners));
    scene.wait_for_status("x.example.com", "/", 404).await;
    scene
        .wait_for_status("a.b.shop.example.com", "/", 404)
        .await;
    assert_eq!(
        scene
            .get("a.example.com", "/")
            .await
            .expect("answer")
            .service(),
        Some("web")
    );
    assert_eq!(
        scene.reloads().await,
        reloads,
        "removing the last wildcard routes is a map update"
    );
}

/// An HTTPS listener without a hostname takes every name on its port: its certificate
/// is the one served for a name no route has, whose requests then get 404.
async fn an_https_listener_without_a_hostname_serves_its_certificate_for_any_name(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = start_backends("web", 242, 1).await;
    let (cert, key, der) = certificate(&["example.org", "*.example.org"], false);
    let gateway = mk_gateway(
        "gw",
        "tugboat",
        vec![mk_https_listener_for("https", None, (None, "site-tls"))],
    );
    let mut objects = vec![
        mk_gateway_class("tugboat", GATEWAY_CONTROLLER),
        gateway.clone(),
        to_json(&mk_tls_secret("site-tls", &cert, &key)),
    ];
    objects.extend(services(&[("web", &web)]));
    objects.push(http_route_json(&mk_http_route(
        "site",
        "gw",
        &["example.org"],
        vec![mk_rule_to(&[("PathPrefix", "/")], "web", 80)],
    )));
    let scene = start(&haproxy, source, &objects).await;
    let https = scene.https_addr();
    let served = |sni: &'static str| async move {
        exchange(https, sni, "/", &[b"http/1.1"])
            .await
            .expect("TLS exchange")
    };
    let routed = eventually("the route over TLS", Duration::from_secs(15), || async {
        let found = served("example.org").await;
        (found.reply.as_ref()?.service() == Some("web")).then_some(found)
    })
    .await;
    assert_eq!(routed.certificate, der, "the listener's certificate");
    for sni in ["unknown-example.org", "other.example.net"] {
        let other = served(sni).await;
        assert_eq!(other.certificate, der, "{sni}: the listener's certificate");
        assert_eq!(other.reply.expect("an answer").status, 404, "{sni}");
    }

    // Without the Gateway, the controller's own certificate again (at runtime).
    let reloads = scene.reloads().await;
    scene.delete(&gateway);
    let fallback = fallback_certificate_der(&scene.lib_dir);
    eventually(
        "the fallback certificate",
        Duration::from_secs(15),
        || async { (served("unknown-example.org").await.certificate == fallback).then_some(()) },
    )
    .await;
    assert_eq!(scene.reloads().await, reloads, "a certificate update");
}

/// Two Gateways' HTTP listeners on port 80 and on the HTTP bind's own port (8080 in a
/// pod) share haproxy's HTTP bind: a route of the second listener whose every host and
/// path the older route of the first already has serves nothing, and its status says so
/// (`Accepted=False`); its listener does not count it. A path of its own makes it
/// accepted and counted.
async fn a_route_that_loses_every_path_says_it_is_not_accepted_and_is_not_counted(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = start_backends("web", 243, 1).await;
    let api = start_backends("api", 244, 1).await;
    let mut objects = vec![
        mk_gateway_class("tugboat", GATEWAY_CONTROLLER),
        mk_gateway(
            "gw80",
            "tugboat",
            vec![mk_listener("http", "HTTP", 80, None)],
        ),
    ];
    objects.extend(services(&[("web", &web), ("api", &api)]));
    objects.push(http_route_json(&route_created_at(
        mk_http_route(
            "first",
            "gw80",
            &["shop.example.com"],
            vec![mk_rule_to(&[("PathPrefix", "/")], "web", 80)],
        ),
        "2030-01-01T00:00:00Z",
    )));
    let scene = start(&haproxy, source, &objects).await;
    scene.wait_for_service("shop.example.com", "/", "web").await;
    // The HTTP bind's port is only known now.
    let bind_port = i32::from(scene.http_addr().port());
    scene.apply(&mk_gateway(
        "on-bind",
        "tugboat",
        vec![mk_listener("http", "HTTP", bind_port, None)],
    ));
    // Created a second later.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mut second = route_created_at(
        mk_http_route(
            "second",
            "on-bind",
            &["shop.example.com"],
            vec![mk_rule_to(&[("PathPrefix", "/")], "api", 80)],
        ),
        "2031-01-01T00:00:00Z",
    );
    scene.apply(&http_route_json(&second));
    wait_for_route_condition(&scene, "second", "Accepted", ("False", "UnsupportedValue")).await;
    wait_for_route_condition(&scene, "first", "Accepted", ("True", "Accepted")).await;
    wait_for_attached_routes(&scene, "on-bind", 0, 0).await;
    wait_for_attached_routes(&scene, "gw80", 0, 1).await;
    assert_eq!(
        scene
            .get("shop.example.com", "/")
            .await
            .expect("answer")
            .service(),
        Some("web"),
        "the older route keeps its host and path"
    );

    second
        .spec
        .rules
        .push(mk_rule_to(&[("PathPrefix", "/api")], "api", 80));
    scene.apply(&http_route_json(&second));
    scene
        .wait_for_service("shop.example.com", "/api/x", "api")
        .await;
    wait_for_route_condition(&scene, "second", "Accepted", ("True", "Accepted")).await;
    wait_for_attached_routes(&scene, "on-bind", 0, 1).await;
}

/// Through the API: a Gateway without a valid listener is `Accepted=False`, reason
/// `ListenersNotValid`, one with some valid `Accepted=True` for the same reason; an
/// invalid listener lists no kinds; the class lists `HTTPRoutePortRedirect`.
async fn the_api_server_gets_listeners_not_valid_empty_kinds_and_the_port_redirect_feature(
    haproxy: HaproxyBinary,
) {
    let invalid = mk_listener("invalid", "INVALID", 1111, None);
    let objects = vec![
        mk_gateway_class("tugboat", GATEWAY_CONTROLLER),
        mk_gateway("none-valid", "tugboat", vec![invalid.clone()]),
        mk_gateway(
            "some-valid",
            "tugboat",
            vec![mk_listener("http", "HTTP", 80, None), invalid],
        ),
    ];
    let scene = start(&haproxy, Source::Api, &objects).await;
    let api = scene.api().expect("the API source");
    // `(status, reason)` of the Gateway's Accepted condition, and the number of kinds
    // of each listener, once written.
    let written = |name: &str| {
        let gateway = api.get("Gateway", "default", name)?;
        let status = &gateway["status"];
        let accepted = status["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Accepted")?;
        let kinds: Vec<usize> = status["listeners"]
            .as_array()?
            .iter()
            .map(|l| l["supportedKinds"].as_array().map_or(usize::MAX, Vec::len))
            .collect();
        Some((
            accepted["status"].as_str()?.to_string(),
            accepted["reason"].as_str()?.to_string(),
            kinds,
        ))
    };
    let none = eventually("none-valid's status", Duration::from_secs(15), || async {
        written("none-valid")
    })
    .await;
    assert_eq!(
        none,
        ("False".into(), "ListenersNotValid".into(), vec![0]),
        "not accepted, the invalid listener takes no kind"
    );
    let some = eventually("some-valid's status", Duration::from_secs(15), || async {
        written("some-valid")
    })
    .await;
    assert_eq!(
        some,
        ("True".into(), "ListenersNotValid".into(), vec![1, 0])
    );
    let features = eventually("the class' features", Duration::from_secs(15), || async {
        let class = api.get("GatewayClass", "", "tugboat")?;
        let names: Vec<String> = class["status"]["supportedFeatures"]
            .as_array()?
            .iter()
            .filter_map(|f| f["name"].as_str().map(str::to_string))
            .collect();
        (!names.is_empty()).then_some(names)
    })
    .await;
    assert!(
        features.iter().any(|f| f == "HTTPRoutePortRedirect"),
        "{features:?}"
    );
}
