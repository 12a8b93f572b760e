//! What users moving from the other controllers wrote, read with the meaning they gave
//! it, end to end on real haproxy: the legacy prefix `ingress.kubernetes.io/` protects
//! what its users protected (a lone `auth-secret`, `auth-type: basic`); the peers'
//! snippets, never run, fail closed when their directives restrict access; the
//! remaining differences answer as docs/migrating.md says; and `tugboat migrate` reports
//! each of them as the controller serves it, old `extensions/v1beta1` manifests included.

use clap::Parser as _;
use k8s_openapi::api::networking::v1::Ingress;
use serde_json::json;
use tugboat::cli::{Cli, Command};
use tugboat::migrate::MigrateArgs;
use tugboat_model::annotations::UnsupportedAccess;
use tugboat_model::migration::{KeyReport, Report, Status};
use tugboat_testkit::http::request;
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{
    ANN_S3CRET, S3CRET_HASH, in_namespace, mk_annotated_ingress, mk_secret, mk_service_of, to_json,
    to_yaml,
};
use tugboat_testkit::{HaproxyBinary, Reply, Scene, Source, scene_tests};

scene_tests!(
    legacy_prefix_and_haproxy_ingress_auth_type_protect_their_routes,
    refused_snippets_that_restrict_access_fail_closed,
    restricting_snippets_are_served_when_the_operator_says_so,
    remaining_differences_answer_as_documented,
);

const HOST: &str = "peers.example.com";
/// A wrong password for `ann`.
const ANN_WRONG: &str = "Basic YW5uOndyb25n";

fn ingress(name: &str, path: &str, annotations: &[(&str, &str)]) -> Ingress {
    mk_annotated_ingress(name, HOST, path, "web", annotations)
}

async fn send(scene: &Scene, path: &str, headers: &[(&str, &str)]) -> Reply {
    request(scene.http_addr(), "GET", HOST, path, headers)
        .await
        .expect("request through haproxy")
}

/// The Secret of user `ann` (password `s3cret`), one key per user.
fn users() -> serde_json::Value {
    to_json(&mk_secret(
        "users",
        "Opaque",
        &[("ann", S3CRET_HASH.as_bytes())],
    ))
}

/// The problem of Ingress `name` about annotation `key`.
fn problem_of(scene: &Scene, name: &str, key: &str) -> String {
    let field = format!("metadata.annotations.{key}");
    let problems = scene.status().problems;
    problems
        .iter()
        .find(|p| &*p.object.name == name && p.field == field)
        .unwrap_or_else(|| panic!("a problem of {name} naming {key}: {problems:?}"))
        .message
        .clone()
}

/// HAProxy Ingress documents `ingress.kubernetes.io/` as its backward-compatible prefix
/// (a lone `auth-secret` turns basic authentication on) and ingress-nginx before 0.9
/// used it (`auth-type: basic`); HAProxy Ingress' own `auth-type: basic` is deprecated
/// but common. Each protects its route with the Secret's users; `digest` fails closed.
async fn legacy_prefix_and_haproxy_ingress_auth_type_protect_their_routes(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = start_backends("web", 246, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    objects.extend([
        users(),
        to_json(&ingress(
            "legacy-secret",
            "/legacy-secret",
            &[
                ("ingress.kubernetes.io/auth-secret", "users"),
                ("ingress.kubernetes.io/auth-realm", "Legacy staff"),
            ],
        )),
        to_json(&ingress(
            "legacy-basic",
            "/legacy-basic",
            &[
                ("ingress.kubernetes.io/auth-type", "basic"),
                ("ingress.kubernetes.io/auth-secret", "default/users"),
            ],
        )),
        to_json(&ingress(
            "hi-basic",
            "/hi-basic",
            &[
                ("haproxy-ingress.github.io/auth-type", "basic"),
                ("haproxy-ingress.github.io/auth-secret", "users"),
            ],
        )),
        to_json(&ingress(
            "legacy-digest",
            "/legacy-digest",
            &[
                ("ingress.kubernetes.io/auth-type", "digest"),
                ("ingress.kubernetes.io/auth-secret", "users"),
            ],
        )),
        to_json(&ingress("site", "/", &[])),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_status(HOST, "/legacy-digest", 403).await;
    for path in ["/legacy-secret", "/legacy-basic/x", "/hi-basic"] {
        let reply = send(&scene, path, &[]).await;
        assert_eq!(reply.status, 401, "{path}: {reply:?}");
        let wrong = send(&scene, path, &[("Authorization", ANN_WRONG)]).await;
        assert_eq!(wrong.status, 401, "{path}: {wrong:?}");
        let good = send(&scene, path, &[("Authorization", ANN_S3CRET)]).await;
        assert_eq!(good.status, 200, "{path}: {good:?}");
    }
    let reply = send(&scene, "/legacy-secret", &[]).await;
    assert_eq!(
        reply.header("www-authenticate"),
        Some("Basic realm=\"Legacy staff\"")
    );
    // Digest authentication is not supported: nobody passes, the key is named.
    let good = send(&scene, "/legacy-digest", &[("Authorization", ANN_S3CRET)]).await;
    assert_eq!(good.status, 403, "{good:?}");
    assert_eq!(send(&scene, "/", &[]).await.status, 200);
    let message = problem_of(&scene, "legacy-digest", "ingress.kubernetes.io/auth-type");
    assert!(message.contains("'digest'"), "{message}");
    assert!(message.contains("answer 403"), "{message}");
    if let Some(event) = scene
        .wait_for_warning(
            "legacy-digest",
            "metadata.annotations.ingress.kubernetes.io/auth-type",
        )
        .await
    {
        assert!(event.to_string().contains("digest"), "{event}");
    }
    let problems = scene.status().problems;
    assert!(
        problems.iter().all(|p| &*p.object.name == "legacy-digest"),
        "{problems:?}"
    );
}

/// ingress-nginx's snippets (nginx) and the HAProxy controllers' (haproxy lines) are
/// never run, nor Tugboat's own while raw snippets are off. One whose directives restrict access fails closed (403 to everyone, a
/// problem naming the key and the directive); one that only adds headers, whatever its
/// comments and quoted text say, is served with a warning.
async fn refused_snippets_that_restrict_access_fail_closed(haproxy: HaproxyBinary, source: Source) {
    const NGINX: &str = "nginx.ingress.kubernetes.io/";
    let web = start_backends("web", 247, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    let snippet = |name: &str, key: &str, value: &str| {
        let key = format!("{NGINX}{key}");
        to_json(&ingress(
            name,
            &format!("/{name}"),
            &[(key.as_str(), value)],
        ))
    };
    objects.extend([
        snippet("denied", "configuration-snippet", "deny all;"),
        snippet(
            "listed",
            "configuration-snippet",
            "# office only\nallow 10.0.0.0/8; deny all;",
        ),
        snippet(
            "staff",
            "server-snippet",
            "location /staff {\n  auth_basic \"Staff\";\n  auth_basic_user_file /etc/nginx/htpasswd;\n}",
        ),
        snippet(
            "guarded",
            "configuration-snippet",
            "if ($http_x_token != \"s3cret\") { return 403; }",
        ),
        snippet(
            "limited",
            "configuration-snippet",
            "more_set_headers \"X-A: b\"; limit_req zone=one burst=5;",
        ),
        snippet(
            "headers",
            "configuration-snippet",
            "# deny all;\nmore_set_headers \"X-Team: shop\"; add_header X-Note \"deny all; allow;\";",
        ),
        snippet(
            "moved",
            "configuration-snippet",
            "return 301 https://elsewhere.example.com$request_uri;",
        ),
        // The HAProxy controllers' snippets are haproxy lines, never run either.
        to_json(&ingress(
            "ht-denied",
            "/ht-denied",
            &[(
                "haproxy.org/backend-config-snippet",
                "# office only\nhttp-request deny if !{ src 10.0.0.0/8 }",
            )],
        )),
        to_json(&ingress(
            "hi-headers",
            "/hi-headers",
            &[(
                "haproxy-ingress.github.io/config-backend",
                "http-response set-header X-Team shop",
            )],
        )),
        // Tugboat's own, not applied while raw snippets are off.
        to_json(&ingress(
            "own-denied",
            "/own-denied",
            &[(
                "tugboat.dev/backend-config-snippet",
                "http-request deny unless { src 10.0.0.0/8 }",
            )],
        )),
        to_json(&ingress(
            "own-headers",
            "/own-headers",
            &[(
                "tugboat.dev/backend-config-snippet",
                "http-response set-header X-Team shop",
            )],
        )),
        to_json(&ingress("site", "/", &[])),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_status(HOST, "/denied", 403).await;
    for path in [
        "/denied",
        "/listed",
        "/staff",
        "/guarded/x",
        "/limited",
        "/ht-denied",
        "/own-denied",
    ] {
        let reply = send(&scene, path, &[("X-Token", "s3cret")]).await;
        assert_eq!(reply.status, 403, "{path}: {reply:?}");
    }
    for path in ["/headers", "/moved", "/hi-headers", "/own-headers", "/"] {
        assert_eq!(send(&scene, path, &[]).await.status, 200, "{path}");
    }
    for (name, key, directive) in [
        ("denied", "configuration-snippet", "`deny`"),
        ("listed", "configuration-snippet", "`allow`"),
        ("staff", "server-snippet", "`auth_basic`"),
        ("guarded", "configuration-snippet", "`return 403`"),
        ("limited", "configuration-snippet", "`limit_req`"),
    ] {
        let key = format!("{NGINX}{key}");
        let message = problem_of(&scene, name, &key);
        assert!(message.contains(directive), "{message}");
        assert!(message.contains("answer 403"), "{message}");
        if let Some(event) = scene
            .wait_for_warning(name, &format!("metadata.annotations.{key}"))
            .await
        {
            assert!(event.to_string().contains(&key), "{event}");
        }
    }
    let message = problem_of(&scene, "ht-denied", "haproxy.org/backend-config-snippet");
    assert!(
        message.contains("`http-request deny if !{ src 10.0.0.0/8 }` restricts access"),
        "{message}"
    );
    assert!(message.contains("answer 403"), "{message}");
    let message = problem_of(&scene, "own-denied", "tugboat.dev/backend-config-snippet");
    assert!(
        message.contains("`http-request deny unless { src 10.0.0.0/8 }` restricts access"),
        "{message}"
    );
    assert!(message.contains("answer 403"), "{message}");
    let message = problem_of(&scene, "own-headers", "tugboat.dev/backend-config-snippet");
    assert!(
        message.contains("is ignored: raw snippets are off"),
        "{message}"
    );
    for (name, key) in [
        (
            "headers",
            "nginx.ingress.kubernetes.io/configuration-snippet",
        ),
        ("moved", "nginx.ingress.kubernetes.io/configuration-snippet"),
        ("hi-headers", "haproxy-ingress.github.io/config-backend"),
    ] {
        let message = problem_of(&scene, name, key);
        assert!(message.contains("no effect"), "{message}");
    }
}

/// `--unsupported-access-keys=ignore` serves a restricting snippet's routes too, and
/// says so.
async fn restricting_snippets_are_served_when_the_operator_says_so(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = start_backends("web", 248, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    objects.push(to_json(&ingress(
        "denied",
        "/denied",
        &[(
            "nginx.ingress.kubernetes.io/configuration-snippet",
            "deny all;",
        )],
    )));
    let scene = Scene::start_with(&haproxy, source, &objects, |config| {
        config.model.unsupported_access = UnsupportedAccess::Ignore;
    })
    .await;
    scene.wait_for_status(HOST, "/denied", 200).await;
    let message = problem_of(
        &scene,
        "denied",
        "nginx.ingress.kubernetes.io/configuration-snippet",
    );
    assert!(message.contains("`deny`"), "{message}");
    assert!(
        message.contains("--unsupported-access-keys=ignore serves"),
        "{message}"
    );
}

/// What still differs from the peers answers as docs/migrating.md says: HAProxy
/// Ingress' `ssl-redirect` redirects with its 302; an `auth-secret` in another
/// namespace fails closed and every problem says 403; a Secret without users answers
/// 401 (ingress-nginx: 503).
async fn remaining_differences_answer_as_documented(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 249, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    objects.extend([
        users(),
        to_json(&in_namespace(
            mk_secret("users", "Opaque", &[("ann", S3CRET_HASH.as_bytes())]),
            "otherns",
        )),
        to_json(&mk_secret("empty", "Opaque", &[])),
        to_json(&ingress(
            "hi-redirect",
            "/hi-redirect",
            &[("haproxy-ingress.github.io/ssl-redirect", "true")],
        )),
        to_json(&ingress(
            "elsewhere",
            "/elsewhere",
            &[
                ("nginx.ingress.kubernetes.io/auth-type", "basic"),
                ("nginx.ingress.kubernetes.io/auth-secret", "otherns/users"),
            ],
        )),
        to_json(&ingress(
            "no-users",
            "/no-users",
            &[
                ("nginx.ingress.kubernetes.io/auth-type", "basic"),
                ("nginx.ingress.kubernetes.io/auth-secret", "empty"),
            ],
        )),
        to_json(&ingress("site", "/", &[])),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_status(HOST, "/hi-redirect/a?b=1", 302).await;
    let reply = send(&scene, "/hi-redirect/a?b=1", &[]).await;
    assert_eq!(
        reply.header("location"),
        Some("https://peers.example.com/hi-redirect/a?b=1")
    );
    let good = [("Authorization", ANN_S3CRET)];
    assert_eq!(send(&scene, "/elsewhere", &good).await.status, 403);
    assert_eq!(send(&scene, "/no-users", &good).await.status, 401);
    assert_eq!(send(&scene, "/", &[]).await.status, 200);
    let problems = scene.status().problems;
    let elsewhere: Vec<_> = problems
        .iter()
        .filter(|p| &*p.object.name == "elsewhere")
        .collect();
    assert!(!elsewhere.is_empty(), "{problems:?}");
    for problem in elsewhere {
        assert!(problem.message.contains("403"), "{problem}");
        assert!(!problem.message.contains("401"), "{problem}");
    }
    let no_users = problems
        .iter()
        .find(|p| &*p.object.name == "no-users")
        .unwrap_or_else(|| panic!("a problem of no-users: {problems:?}"));
    assert!(no_users.message.contains("(401)"), "{no_users}");
}

fn migrate_args(extra: &[&str]) -> MigrateArgs {
    let cli = Cli::try_parse_from(["tugboat", "migrate"].iter().chain(extra)).expect("arguments");
    let Command::Migrate(args) = cli.command else {
        panic!("expected migrate");
    };
    args
}

/// The report of a folder holding these manifests.
fn migrate_folder(manifests: &str) -> Report {
    let dir = tempfile::tempdir().expect("temporary folder");
    std::fs::write(dir.path().join("ingresses.yaml"), manifests).expect("write");
    let folder = dir.path().to_str().expect("UTF-8 path");
    tugboat::migrate::report(&migrate_args(&["--manifests", folder])).expect("report")
}

fn key<'a>(report: &'a Report, ingress: &str, annotation: &str) -> &'a KeyReport {
    let found = report
        .ingresses
        .iter()
        .find(|i| i.name == ingress)
        .unwrap_or_else(|| panic!("Ingress {ingress}: {report:?}"));
    found
        .keys
        .iter()
        .find(|k| k.annotation == annotation)
        .unwrap_or_else(|| panic!("{annotation}: {found:?}"))
}

/// `tugboat migrate` says of the legacy keys and the snippets what the controller does
/// with them: the legacy authentication keys are read (and say how), digest and
/// restricting snippets are not supported and restrict access (403).
#[test]
fn migrate_reports_legacy_keys_and_snippets_as_they_are_served() {
    let objects = [
        to_json(&ingress(
            "legacy",
            "/legacy",
            &[
                ("ingress.kubernetes.io/auth-secret", "users"),
                ("ingress.kubernetes.io/auth-realm", "Legacy staff"),
            ],
        )),
        to_json(&ingress(
            "legacy-basic",
            "/legacy-basic",
            &[
                ("ingress.kubernetes.io/auth-type", "basic"),
                ("ingress.kubernetes.io/auth-secret", "users"),
                ("haproxy-ingress.github.io/auth-type", "basic"),
            ],
        )),
        to_json(&ingress(
            "digest",
            "/digest",
            &[("ingress.kubernetes.io/auth-type", "digest")],
        )),
        to_json(&ingress(
            "snippets",
            "/snippets",
            &[
                (
                    "nginx.ingress.kubernetes.io/configuration-snippet",
                    "more_set_headers \"X-A: b\";\ndeny all;",
                ),
                (
                    "nginx.ingress.kubernetes.io/server-snippet",
                    "add_header X-Note \"deny all;\";",
                ),
            ],
        )),
        users(),
    ];
    let report = migrate_folder(&to_yaml(&objects));
    let secret = key(&report, "legacy", "ingress.kubernetes.io/auth-secret");
    assert_eq!(secret.status, Status::SupportedWithDifference, "{secret:?}");
    assert!(
        secret
            .note
            .as_deref()
            .is_some_and(|n| n.contains("`auth-secret` alone")),
        "{secret:?}"
    );
    for annotation in [
        "ingress.kubernetes.io/auth-type",
        "haproxy-ingress.github.io/auth-type",
    ] {
        let read = key(&report, "legacy-basic", annotation);
        assert_ne!(read.status, Status::NotSupported, "{read:?}");
        assert_eq!(read.tugboat_keys, ["auth-type"], "{read:?}");
    }
    let digest = key(&report, "digest", "ingress.kubernetes.io/auth-type");
    assert_eq!(digest.status, Status::NotSupported, "{digest:?}");
    assert!(digest.restricts_access, "{digest:?}");
    let denies = key(
        &report,
        "snippets",
        "nginx.ingress.kubernetes.io/configuration-snippet",
    );
    assert_eq!(denies.status, Status::NotSupported, "{denies:?}");
    assert!(denies.restricts_access, "{denies:?}");
    assert!(
        denies.note.as_deref().is_some_and(|n| n.contains("`deny`")),
        "{denies:?}"
    );
    let headers = key(
        &report,
        "snippets",
        "nginx.ingress.kubernetes.io/server-snippet",
    );
    assert_eq!(headers.status, Status::NotSupported, "{headers:?}");
    assert!(!headers.restricts_access, "{headers:?}");
    let text = tugboat_model::migration::text(&report);
    assert!(
        text.lines().any(|line| {
            line.starts_with("  not supported: nginx.ingress.kubernetes.io/configuration-snippet: ")
                && line.ends_with(
                    "; its `deny` restricts access [restricts access: its routes will answer 403]",
                )
        }),
        "{text}"
    );
}

/// An Ingress as written for `extensions/v1beta1` (or `networking.k8s.io/v1beta1`) is
/// read as the API server converted it, and reported as a v1 one is, with the rewrite
/// to make.
#[test]
fn migrate_reads_v1beta1_ingresses() {
    let old = |api_version: &str, name: &str, annotations: serde_json::Value| {
        json!({
            "apiVersion": api_version,
            "kind": "Ingress",
            "metadata": {"name": name, "namespace": "shop", "annotations": annotations},
            "spec": {
                "backend": {"serviceName": "fallback", "servicePort": 8080},
                "rules": [{"host": HOST, "http": {"paths": [
                    {"path": "/", "backend": {"serviceName": "web", "servicePort": "http"}},
                    {"path": "/api", "pathType": "Prefix",
                     "backend": {"serviceName": "api", "servicePort": 80}},
                ]}}],
            },
        })
    };
    let objects = [
        old(
            "extensions/v1beta1",
            "shop",
            json!({
                "kubernetes.io/ingress.class": "nginx",
                "nginx.ingress.kubernetes.io/proxy-read-timeout": "120",
                "nginx.ingress.kubernetes.io/limit-rpm": "60",
            }),
        ),
        old(
            "networking.k8s.io/v1beta1",
            "blog",
            json!({"nginx.ingress.kubernetes.io/ssl-redirect": "false"}),
        ),
    ];
    let report = migrate_folder(&to_yaml(&objects));
    assert_eq!(report.ingresses.len(), 2, "{report:?}");
    let shop = report
        .ingresses
        .iter()
        .find(|i| i.name == "shop")
        .expect("the shop Ingress");
    assert_eq!(shop.namespace, "shop");
    assert!(
        shop.api_version_change
            .as_deref()
            .is_some_and(|c| c.contains("networking.k8s.io/v1 (now: extensions/v1beta1")),
        "{shop:?}"
    );
    assert_eq!(
        shop.class_change.as_deref(),
        Some(
            "set spec.ingressClassName: tugboat and remove the kubernetes.io/ingress.class annotation (now: nginx)"
        )
    );
    let timeout = key(
        &report,
        "shop",
        "nginx.ingress.kubernetes.io/proxy-read-timeout",
    );
    assert_eq!(timeout.status, Status::SupportedWithDifference);
    let rpm = key(&report, "shop", "nginx.ingress.kubernetes.io/limit-rpm");
    assert_eq!(rpm.status, Status::NotSupported);
    let blog = key(&report, "blog", "nginx.ingress.kubernetes.io/ssl-redirect");
    assert_ne!(blog.status, Status::NotSupported);
    // An unsupported key: exit 1, as for a v1 manifest.
    assert!(!report.all_supported());
    let text = tugboat_model::migration::text(&report);
    assert!(
        text.contains(
            "  apiVersion: rewrite it as networking.k8s.io/v1 (now: networking.k8s.io/v1beta1"
        ),
        "{text}"
    );
}
