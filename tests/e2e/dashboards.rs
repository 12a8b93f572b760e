//! The Grafana dashboards (deploy/helm/tugboat/dashboards/*.json, linked from
//! deploy/grafana/) against a real Prometheus: the rig serves Ingresses and an HTTPRoute
//! through the API source, Prometheus scrapes haproxy's exporter and the controller's
//! admin `/metrics` every second, the test serves traffic and causes what the controller
//! panels show (a reload, a runtime update, an object with a problem, status writes),
//! then runs every query of every panel and template variable, read from the JSON with
//! the template variables set to this run's values, through Prometheus' HTTP API: each
//! must return a number. Each query and its result are printed. Run on the oldest and
//! the newest haproxy series (2.6 and 3.4): the exporter's names are the same between
//! them, and each run costs about 15 s.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tugboat_model::gateway::GatewaySettings;
use tugboat_testkit::cluster_pod::{TUGBOAT_CLASS, options};
use tugboat_testkit::gateway_objects::{
    GATEWAY_CONTROLLER, http_route_json, mk_gateway, mk_gateway_class, mk_http_route, mk_listener,
    mk_rule_to,
};
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{mk_endpoint_slice, mk_ingress, mk_service_of, with_keys};
use tugboat_testkit::prometheus::{self, Prometheus};
use tugboat_testkit::{ClusterPod, FakeApiServer, HaproxyBinary, eventually, haproxy_tests};

haproxy_tests!(@series haproxy_2_6 "2.6" every_dashboard_query_returns_data);
haproxy_tests!(@series haproxy_3_4 "3.4" every_dashboard_query_returns_data);

/// The scrape job's name: the dashboards' `$job`.
const JOB: &str = "tugboat";

/// The dashboards' files, by name.
fn dashboards() -> Vec<(String, Value)> {
    let folder =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/helm/tugboat/dashboards");
    let mut files: Vec<_> = std::fs::read_dir(&folder)
        .unwrap_or_else(|err| panic!("{}: {err}", folder.display()))
        .map(|entry| entry.expect("a folder entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 2, "no dashboards in {}", folder.display());
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("read a dashboard");
            let name = path
                .file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned();
            (
                name,
                serde_json::from_str(&text).expect("a dashboard parses"),
            )
        })
        .collect()
}

/// Every panel's queries: (dashboard, panel title, expression).
fn panel_queries(dashboards: &[(String, Value)]) -> Vec<(String, String, String)> {
    let mut queries = Vec::new();
    for (name, board) in dashboards {
        let panels = board["panels"].as_array().expect("panels");
        for panel in panels.iter().filter(|panel| panel["type"] != "row") {
            let targets = panel["targets"].as_array().expect("a panel's targets");
            assert!(
                !targets.is_empty(),
                "{name}: {} has no query",
                panel["title"]
            );
            for target in targets {
                let expr = target["expr"].as_str().expect("a query's expr");
                queries.push((
                    name.clone(),
                    panel["title"].as_str().unwrap_or_default().to_string(),
                    expr.to_string(),
                ));
            }
        }
    }
    queries
}

/// Each template variable's query, `label_values(SELECTOR, LABEL)`, as the PromQL that
/// returns the same values: (dashboard, variable, expression).
fn variable_queries(dashboards: &[(String, Value)]) -> Vec<(String, String, String)> {
    let mut queries = Vec::new();
    for (name, board) in dashboards {
        let variables = board["templating"]["list"].as_array().expect("variables");
        for variable in variables.iter().filter(|v| v["type"] == "query") {
            let query = variable["query"]["query"]
                .as_str()
                .expect("a variable's query");
            let (selector, label) = query
                .strip_prefix("label_values(")
                .and_then(|rest| rest.strip_suffix(')'))
                .and_then(|rest| rest.rsplit_once(','))
                .unwrap_or_else(|| panic!("{name}: not label_values(SELECTOR, LABEL): {query}"));
            queries.push((
                name.clone(),
                format!("variable {}", variable["name"]),
                format!("count by ({}) ({selector})", label.trim()),
            ));
        }
    }
    queries
}

/// `expr` with the template variables of this run: Grafana's own intervals, the job and
/// the Ingress the traffic went to.
fn substituted(expr: &str, variables: &[(&str, &str)]) -> String {
    let mut expr = expr.to_string();
    // `${name}` first, then `$name` (no variable's name begins another's).
    for (name, value) in variables {
        expr = expr.replace(&format!("${{{name}}}"), value);
    }
    for (name, value) in variables {
        expr = expr.replace(&format!("${name}"), value);
    }
    assert!(!expr.contains('$'), "a variable left in {expr}");
    expr
}

/// A result, short: each series' labels and value.
fn summary(result: &[Value]) -> String {
    result
        .iter()
        .map(|series| {
            let labels = series["metric"]
                .as_object()
                .map(|labels| {
                    labels
                        .iter()
                        .map(|(key, value)| format!("{key}={}", value.as_str().unwrap_or("")))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            let value = series["value"][1].as_str().unwrap_or("?");
            format!("{{{labels}}} {value}")
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Whether a result holds a series whose value is a number (a quantile or a ratio of
/// nothing is NaN).
fn has_a_number(result: &[Value]) -> bool {
    result.iter().any(|series| {
        series["value"][1]
            .as_str()
            .and_then(|value| value.parse::<f64>().ok())
            .is_some_and(f64::is_finite)
    })
}

async fn every_dashboard_query_returns_data(haproxy: HaproxyBinary) {
    let Some(prometheus_binary) = prometheus::find() else {
        return;
    };
    let web = start_backends("web", 66, 3).await;
    let api = start_backends("api", 67, 1).await;
    let more = start_backends("more", 68, 1).await;
    let extra = start_backends("extra", 69, 1).await;
    let server = FakeApiServer::start().await;
    server.apply_yaml(TUGBOAT_CLASS);
    for object in mk_service_of("web", &web[..1]) {
        server.apply(&object);
    }
    for object in mk_service_of("api", &api) {
        server.apply(&object);
    }
    server.apply(&mk_ingress("shop", "shop.example.com", "web"));
    server.put(mk_gateway_class("tugboat", GATEWAY_CONTROLLER));
    server.put(mk_gateway(
        "gw",
        "tugboat",
        vec![mk_listener("http", "HTTP", 80, None)],
    ));
    server.put(http_route_json(&mk_http_route(
        "store",
        "gw",
        &["store.example.com"],
        vec![mk_rule_to(&[("PathPrefix", "/")], "api", 80)],
    )));
    let mut opts = options("pod-a");
    // Published addresses: the leader writes the status of Ingresses and Gateway objects.
    opts.publish.addresses = vec!["127.0.0.16".into()];
    let pod = ClusterPod::start_with(&haproxy, &server, opts, |config| {
        config.model.gateway = Some(GatewaySettings::new(
            GATEWAY_CONTROLLER,
            config.render.http_port,
            config.render.https_port,
        ));
    })
    .await;
    pod.wait_for_service("shop.example.com", "/", "web").await;
    pod.wait_for_service("store.example.com", "/", "api").await;
    let (admin_addr, _admin) = tugboat_testkit::serve_admin(pod.admin_state()).await;

    // A runtime update and a reload before Prometheus starts, and again once it has
    // scraped: a series is born at its first count, and a rate needs a count after it.
    // Each change is waited for until its lag is counted (haproxy serves it), so that the
    // next change is an update of its own.
    let lags = |delivery: &str| {
        let series = format!("tugboat_apply_lag_seconds_count{{delivery=\"{delivery}\"}} ");
        pod.metrics
            .encode()
            .lines()
            .find_map(|line| line.strip_prefix(series.as_str())?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let runtime_and_reload = |endpoints: &'static [usize], name: &'static str, servers| {
        let (server, pod, web, lags) = (&server, &pod, &web, &lags);
        async move {
            // A runtime update: web gets an endpoint.
            let before = lags("runtime");
            let addrs: Vec<SocketAddr> = endpoints.iter().map(|i| web[*i].addr).collect();
            server.apply(&mk_endpoint_slice("web", "http", &addrs));
            eventually("a runtime apply", Duration::from_secs(10), || async {
                (lags("runtime") > before).then_some(())
            })
            .await;
            // A reload: a new Ingress on a new Service, a new backend with a server
            // timeout of its own (haproxy 3.4 adds plainer backends at runtime).
            let before = lags("reload");
            for object in mk_service_of(name, servers) {
                server.apply(&object);
            }
            let host = format!("{name}.example.com");
            server.apply(&with_keys(
                mk_ingress(name, &host, name),
                &[("timeout-server", "40s")],
            ));
            pod.wait_for_service(&host, "/", name).await;
            eventually("a reload", Duration::from_secs(10), || async {
                (lags("reload") > before).then_some(())
            })
            .await;
        }
    };
    runtime_and_reload(&[0, 1], "more", &more).await;

    let stats_addr = SocketAddr::from(([127, 0, 0, 1], pod.haproxy.stats_port));
    let prometheus = Prometheus::start(&prometheus_binary, JOB, &[stats_addr, admin_addr]).await;
    eventually("both targets scraped", Duration::from_secs(15), || async {
        let up = prometheus.query(r#"up{job="tugboat"} == 1"#).await.ok()?;
        (up.len() == 2).then_some(())
    })
    .await;

    // Once scraped: an object with a problem (its Service does not exist; a Warning
    // Event, a status write), a runtime update and a reload.
    // Its backend is new, with a setting of its own: a reload, waited for (a runtime update while a reload waits
    // for its window would count its lag with the reload's).
    let before = lags("reload");
    server.apply(&with_keys(
        mk_ingress("broken", "broken.example.com", "missing"),
        &[("timeout-server", "40s")],
    ));
    eventually(
        "the broken Ingress applied",
        Duration::from_secs(10),
        || async {
            (!pod.status.borrow().problems.is_empty() && lags("reload") > before).then_some(())
        },
    )
    .await;
    runtime_and_reload(&[0, 1, 2], "extra", &extra).await;

    // Traffic, bounded: answers of every class the error panels divide, on an Ingress
    // and on the HTTPRoute, over a few seconds of scrapes.
    let http = pod.haproxy.http_addr();
    for round in 0..60 {
        let status = match round % 6 {
            4 => Some("500"),
            5 => Some("404"),
            _ => None,
        };
        let headers: Vec<(&str, &str)> = status.map(|s| ("x-echo-status", s)).into_iter().collect();
        for host in ["shop.example.com", "store.example.com"] {
            let reply = tugboat_testkit::http::request(http, "GET", host, "/", &headers)
                .await
                .expect("an answer");
            assert_eq!(reply.status.to_string(), status.unwrap_or("200"), "{host}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Two scrapes after the last request.
    tokio::time::sleep(Duration::from_millis(2500)).await;

    // Every query, once Prometheus has scraped what it needs: data (a series with a
    // number, not only NaN), or the test fails naming the queries that had none.
    let variables = [
        ("__rate_interval", "1m"),
        ("__range", "5m"),
        ("datasource", "prometheus"),
        ("job", JOB),
        ("namespace", "default"),
        ("ingress", "shop|store"),
    ];
    let dashboards = dashboards();
    let mut queries = variable_queries(&dashboards);
    queries.extend(panel_queries(&dashboards));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut empty = Vec::new();
    for (dashboard, title, expr) in &queries {
        let expr = substituted(expr, &variables);
        let result = loop {
            let result = prometheus.query(&expr).await;
            match &result {
                Ok(series) if has_a_number(series) => break result,
                _ if tokio::time::Instant::now() >= deadline => break result,
                _ => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        };
        match result {
            Ok(series) if has_a_number(&series) => {
                println!("{dashboard} / {title}\n  {expr}\n  => {}", summary(&series));
            }
            other => {
                println!("{dashboard} / {title}\n  {expr}\n  => NO DATA: {other:?}");
                empty.push(format!("{dashboard} / {title}: {expr}"));
            }
        }
    }
    println!("{} queries, {} without data", queries.len(), empty.len());
    assert!(
        empty.is_empty(),
        "queries without data:\n{}\nPrometheus log:\n{}",
        empty.join("\n"),
        prometheus.log()
    );
}
