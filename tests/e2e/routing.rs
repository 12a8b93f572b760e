//! End to end: manifests in a folder, a controller, a real haproxy, real HTTP to echo
//! backends. Routing by host and path, balancing, live changes, bad input, and
//! IngressClasses in a folder (served as the cluster serves them, `tugboat render` too).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use clap::Parser;

use k8s_openapi::api::networking::v1::Ingress;
use tugboat_testkit::manifests::{service_with_endpoints, start_backends};
use tugboat_testkit::objects::{
    exact, mk_ingress, mk_ingress_with_rules, mk_rule, mk_service_of, prefix, to_json,
};
use tugboat_testkit::{EchoServer, HaproxyBinary, Pod, Scene, Source, haproxy_tests, scene_tests};

/// The shop: `/` to web, `/api` to api's port named http, `/healthz` (Exact) to api.
fn shop_ingress(root_service: &str) -> Ingress {
    mk_ingress_with_rules(
        "shop",
        vec![mk_rule(
            Some("shop.example.com"),
            &[
                prefix("/", root_service),
                prefix("/api", "api").port_named("http"),
                exact("/healthz", "api"),
            ],
        )],
    )
}

scene_tests!(
    routes_by_host_and_path,
    balances_across_ready_endpoints,
    follows_changes_live,
    bad_input_is_reported_and_skipped,
);

haproxy_tests!(a_folder_serves_only_its_ingress_classes);

/// The shop with its Services `web` and `api`, each with its echo backends.
fn shop_objects(web: &[EchoServer], api: &[EchoServer]) -> Vec<serde_json::Value> {
    [
        &mk_service_of("web", web)[..],
        &mk_service_of("api", api),
        &[to_json(&shop_ingress("web"))],
    ]
    .concat()
}

async fn routes_by_host_and_path(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 11, 1).await;
    let api = start_backends("api", 12, 1).await;
    let pod = Scene::start(&haproxy, source, &shop_objects(&web, &api)).await;
    pod.wait_for_service("shop.example.com", "/", "web").await;

    let cases = [
        ("shop.example.com", "/", Some("web")),
        ("shop.example.com", "/index.html", Some("web")),
        ("shop.example.com", "/api", Some("api")),
        ("shop.example.com", "/api/", Some("api")),
        ("shop.example.com", "/api/v1/items", Some("api")),
        // Prefix matches whole path elements only.
        ("shop.example.com", "/apis", Some("web")),
        // Host is case-insensitive and its port is ignored.
        ("SHOP.Example.COM:8080", "/api", Some("api")),
        // Exact is literal: no trailing slash, case-sensitive.
        ("shop.example.com", "/healthz", Some("api")),
        ("shop.example.com", "/healthz/", Some("web")),
        ("shop.example.com", "/HEALTHZ", Some("web")),
        // Nothing matches: 404.
        ("other.example.com", "/", None),
        ("", "/", None),
    ];
    for (host, path, expected) in cases {
        let reply = pod.get(host, path).await.expect("request through haproxy");
        match expected {
            Some(service) => {
                assert_eq!(reply.status, 200, "{host}{path}: {reply:?}");
                assert_eq!(reply.service(), Some(service), "{host}{path}: {reply:?}");
            }
            None => assert_eq!(reply.status, 404, "{host}{path}: {reply:?}"),
        }
    }
}

async fn balances_across_ready_endpoints(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 13, 3).await;
    let objects = [
        &mk_service_of("web", &web)[..],
        &[to_json(&shop_ingress("web"))],
    ]
    .concat();
    let pod = Scene::start(&haproxy, source, &objects).await;
    pod.wait_for_service("shop.example.com", "/", "web").await;
    let mut seen = BTreeSet::new();
    for _ in 0..30 {
        let reply = pod.get("shop.example.com", "/").await.expect("request");
        assert_eq!(reply.status, 200);
        seen.insert(reply.endpoint().expect("echo endpoint").to_string());
    }
    let expected: BTreeSet<String> = web.iter().map(|s| s.addr.to_string()).collect();
    assert_eq!(seen, expected, "every ready endpoint receives traffic");
}

async fn follows_changes_live(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 14, 1).await;
    let api = start_backends("api", 15, 1).await;
    let pod = Scene::start(&haproxy, source, &shop_objects(&web, &api)).await;
    pod.wait_for_service("shop.example.com", "/", "web").await;

    // Edit: the root of the shop now goes to api.
    let started = Instant::now();
    pod.apply(&shop_ingress("api"));
    pod.wait_for_service("shop.example.com", "/", "api").await;
    let edit_took = started.elapsed();

    // A new Ingress adds a host.
    let blog = mk_ingress("blog", "blog.example.com", "web");
    pod.apply(&blog);
    pod.wait_for_service("blog.example.com", "/", "web").await;

    // Deleting Ingresses removes their routes.
    pod.delete(&blog);
    pod.wait_for_status("blog.example.com", "/", 404).await;
    pod.delete(&shop_ingress("api"));
    pod.wait_for_status("shop.example.com", "/api", 404).await;
    assert!(
        edit_took < Duration::from_secs(2),
        "an edit took {edit_took:?} to route"
    );
}

async fn bad_input_is_reported_and_skipped(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 16, 1).await;
    // One Ingress mixing a host that would inject a line, a good path, a path with a
    // space and a path to a Service that does not exist.
    let mixed = mk_ingress_with_rules(
        "mixed",
        vec![
            mk_rule(
                Some("evil.example.com\n    use_backend x"),
                &[prefix("/", "web")],
            ),
            mk_rule(
                Some("mixed.example.com"),
                &[
                    prefix("/ok", "web"),
                    prefix("/bad path", "web"),
                    prefix("/missing", "nowhere"),
                ],
            ),
        ],
    );
    let objects = [
        &mk_service_of("web", &web)[..],
        &[to_json(&shop_ingress("web")), to_json(&mixed)],
    ]
    .concat();
    let pod = Scene::start(&haproxy, source, &objects).await;
    if let Some(folder) = pod.manifests_dir() {
        // A file that is not YAML: reported, the rest of the folder still applies.
        std::fs::write(
            folder.join("broken.yaml"),
            "apiVersion: v1\nkind: [unclosed\n",
        )
        .expect("write manifest");
    }
    pod.wait_for_service("shop.example.com", "/", "web").await;
    pod.wait_for_service("mixed.example.com", "/ok", "web")
        .await;
    // A rule whose Service does not exist answers 503, not someone else's backend.
    let reply = pod
        .get("mixed.example.com", "/missing")
        .await
        .expect("request");
    assert_eq!(reply.status, 503, "{reply:?}");
    // The rule with the bad path is left out: nothing routes it.
    let reply = pod
        .get("mixed.example.com", "/bad%20path")
        .await
        .expect("request");
    assert_eq!(reply.status, 404, "{reply:?}");
    let config = tugboat_testkit::haproxy::read_config(&pod.config_dir).expect("config written");
    assert!(
        !config.contains("evil"),
        "a bad host never reaches the config"
    );
    let maps = std::fs::read_to_string(pod.config_dir.join("maps/routes-prefix.map"))
        .expect("map written");
    assert!(
        !maps.contains("evil") && !maps.contains("bad path"),
        "{maps}"
    );
    let problems = pod.status().problems;
    assert!(
        problems
            .iter()
            .any(|p| &*p.object.name == "mixed" && p.field == "spec.rules[0].host"),
        "the bad host is reported on its field: {problems:?}"
    );
    // A later change still applies.
    pod.apply(&mk_ingress("later", "later.example.com", "web"));
    pod.wait_for_service("later.example.com", "/", "web").await;
    assert!(pod.controller_running());
}

/// Our IngressClass, the default class, as exported from a cluster.
const OUR_DEFAULT_CLASS: &str = "\
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: tugboat
  annotations:
    ingressclass.kubernetes.io/is-default-class: \"true\"
spec:
  controller: tugboat.dev/ingress
";

/// An Ingress `name` routing `name.example.com` to `web`, of `class` (none: no class).
fn classed_ingress(name: &str, class: Option<&str>) -> String {
    let class = class.map_or(String::new(), |c| format!("  ingressClassName: {c}\n"));
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: {name}}}\n\
         spec:\n{class}  rules: [{{host: {name}.example.com, http: {{paths: [{{path: /, \
         pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}]}}}}]\n"
    )
}

async fn a_folder_serves_only_its_ingress_classes(haproxy: HaproxyBinary) {
    let web = start_backends("web", 163, 1).await;
    let pod = Pod::start(
        &haproxy,
        &[
            ("class.yaml", OUR_DEFAULT_CLASS),
            ("web.yaml", &service_with_endpoints("web", &web)),
            ("ours.yaml", &classed_ingress("ours", Some("tugboat"))),
            (
                "theirs.yaml",
                &classed_ingress("theirs", Some("some-invalid-class-name")),
            ),
            ("unclassed.yaml", &classed_ingress("unclassed", None)),
        ],
    )
    .await;
    pod.wait_for_service("ours.example.com", "/", "web").await;
    // No class: our IngressClass is the default.
    pod.wait_for_service("unclassed.example.com", "/", "web")
        .await;
    // Another class: not ours, haproxy's own 404.
    let reply = pod.get("theirs.example.com", "/").await.expect("request");
    assert_eq!(reply.status, 404, "{reply:?}");

    // `tugboat render` on the same folder shows the same routes.
    let cli = tugboat::cli::Cli::try_parse_from([
        "tugboat".as_ref(),
        "render".as_ref(),
        "--manifests".as_ref(),
        pod.manifests_dir().as_os_str(),
    ])
    .expect("render command line");
    let tugboat::cli::Command::Render(args) = cli.command else {
        panic!("expected the render command");
    };
    let output = tugboat::cli::render_folder(&args).expect("render");
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    assert!(
        output.files.contains("ours.example.com"),
        "{}",
        output.files
    );
    assert!(
        output.files.contains("unclassed.example.com"),
        "{}",
        output.files
    );
    assert!(
        !output.files.contains("theirs.example.com"),
        "{}",
        output.files
    );
    assert_eq!(output.not_served.len(), 1, "{:?}", output.not_served);
    assert!(
        output.not_served[0].contains("default/theirs")
            && output.not_served[0].contains("some-invalid-class-name"),
        "{:?}",
        output.not_served
    );
}
