//! External authentication (`auth-url`, ingress-nginx's key and Tugboat's) on real
//! haproxy: a small authentication server in the test (on 127.0.0.1) allows, denies
//! with 401 and 403, fails, and passes headers; the backend counts what reaches it.
//! As ingress-nginx documents: 2xx lets the request through with the named answer
//! headers set on it, 401 and 403 reach the client (401 redirects to `auth-signin`
//! with `rd=`), anything else or no answer is 500, and a denied request never reaches
//! the backend.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::networking::v1::Ingress;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tugboat_testkit::http::request;
use tugboat_testkit::objects::{
    mk_annotated_ingress, mk_endpoint_slice, mk_ingress_with_rules, mk_rule, mk_service, prefix,
    to_json, with_annotations,
};
use tugboat_testkit::{HaproxyBinary, Reply, Scene, Source, scene_tests};

scene_tests!(
    external_authentication_decides_before_the_backend,
    nginx_variables_are_filled_in_per_request,
    host_in_the_auth_url_host_fails_closed_on_a_rule_without_a_host
);

const HOST: &str = "guarded.example.com";

/// A server on 127.0.0.1 that answers every request with `answer` and stops when
/// dropped.
struct TestServer {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type Answer = Arc<dyn Fn(&Request<Incoming>) -> Response<Full<Bytes>> + Send + Sync>;

async fn serve(answer: Answer) -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let answer = answer.clone();
            tokio::spawn(async move {
                let handler = service_fn(move |request: Request<Incoming>| {
                    let response = answer(&request);
                    async move { Ok::<_, Infallible>(response) }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), handler)
                    .await;
            });
        }
    });
    TestServer { addr, task }
}

fn header<'r>(request: &'r Request<Incoming>, name: &str) -> &'r str {
    request
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// What the authentication server saw of one request.
#[derive(Debug, Clone)]
struct Asked {
    method: String,
    authorization: String,
    original_url: String,
    original_method: String,
    /// The path and query the authentication service was asked.
    uri: String,
}

/// The authentication server: `Bearer alice` is allowed (with user headers),
/// `Bearer banned` is forbidden (403), `Bearer broken` gets 502, anything else 401
/// with a challenge.
async fn auth_server(asked: Arc<Mutex<Vec<Asked>>>) -> TestServer {
    serve(Arc::new(move |request| {
        let authorization = header(request, "authorization").to_string();
        if let Ok(mut asked) = asked.lock() {
            asked.push(Asked {
                method: request.method().to_string(),
                authorization: authorization.clone(),
                original_url: header(request, "x-original-url").to_string(),
                original_method: header(request, "x-original-method").to_string(),
                uri: request.uri().to_string(),
            });
        }
        let builder = Response::builder();
        let builder = match authorization.as_str() {
            "Bearer alice" => builder
                .status(200)
                .header("X-Auth-User", "alice")
                .header("X-Auth-Email", "alice@example.com")
                .header("X-Not-Passed", "secret"),
            "Bearer banned" => builder.status(403),
            "Bearer broken" => builder.status(502),
            _ => builder
                .status(401)
                .header("WWW-Authenticate", "Bearer realm=\"shop\""),
        };
        builder.body(Full::new(Bytes::new())).unwrap_or_default()
    }))
    .await
}

/// The backend: counts its requests and sends back the `x-` headers it received as
/// `x-echo-req-*`.
async fn backend(count: Arc<AtomicUsize>) -> TestServer {
    serve(Arc::new(move |request| {
        count.fetch_add(1, Ordering::SeqCst);
        let mut response = Response::builder().status(200);
        for (name, value) in request.headers() {
            if let Some(rest) = name.as_str().strip_prefix("x-") {
                response = response.header(format!("x-echo-req-{rest}"), value);
            }
        }
        response
            .body(Full::new(Bytes::from_static(b"backend\n")))
            .unwrap_or_default()
    }))
    .await
}

fn ingress(name: &str, path: &str, annotations: &[(&str, &str)]) -> Ingress {
    mk_annotated_ingress(name, HOST, path, "web", annotations)
}

async fn send(scene: &Scene, path: &str, headers: &[(&str, &str)]) -> Reply {
    request(scene.http_addr(), "GET", HOST, path, headers)
        .await
        .expect("request through haproxy")
}

async fn external_authentication_decides_before_the_backend(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let auth = auth_server(asked.clone()).await;
    let count = Arc::new(AtomicUsize::new(0));
    let web = backend(count.clone()).await;
    let auth_url = format!("http://{}/check?app=shop", auth.addr);
    let objects = vec![
        to_json(&mk_service("web", "http", 80)),
        to_json(&mk_endpoint_slice("web", "http", &[web.addr])),
        to_json(&ingress(
            "guarded",
            "/guarded",
            &[
                ("nginx.ingress.kubernetes.io/auth-url", &auth_url),
                (
                    "nginx.ingress.kubernetes.io/auth-response-headers",
                    "X-Auth-User, X-Auth-Email, X-Auth-Groups",
                ),
            ],
        )),
        to_json(&ingress(
            "signin",
            "/signin",
            &[
                ("tugboat.dev/auth-url", &auth_url),
                ("tugboat.dev/auth-method", "POST"),
                ("tugboat.dev/auth-signin", "https://login.example.com/start"),
            ],
        )),
        to_json(&ingress(
            "down",
            "/down",
            &[(
                "nginx.ingress.kubernetes.io/auth-url",
                "http://127.0.0.1:1/check",
            )],
        )),
        to_json(&ingress(
            "variables",
            "/variables",
            &[(
                "nginx.ingress.kubernetes.io/auth-url",
                "https://$server_name/oauth2/auth",
            )],
        )),
        to_json(&ingress("open", "/", &[])),
    ];
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_status(HOST, "/", 200).await;
    let served = count.load(Ordering::SeqCst);

    // Allowed: the backend gets the answer's named headers, never the client's own.
    let reply = send(
        &scene,
        "/guarded/x?y=1",
        &[
            ("Authorization", "Bearer alice"),
            ("X-Auth-Email", "mallory@example.com"),
            ("X-Auth-Groups", "admin"),
        ],
    )
    .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.header("x-echo-req-auth-user"), Some("alice"));
    assert_eq!(
        reply.header("x-echo-req-auth-email"),
        Some("alice@example.com")
    );
    assert_eq!(reply.header("x-echo-req-auth-groups"), None, "{reply:?}");
    assert_eq!(reply.header("x-echo-req-not-passed"), None, "{reply:?}");
    assert_eq!(count.load(Ordering::SeqCst), served + 1);
    let last = asked.lock().expect("lock").last().cloned().expect("asked");
    assert_eq!(last.method, "GET");
    assert_eq!(last.authorization, "Bearer alice");
    assert_eq!(last.original_url, format!("http://{HOST}/guarded/x?y=1"));
    assert_eq!(last.original_method, "GET");

    // Denied: the status reaches the client, the request never reaches the backend.
    let served = count.load(Ordering::SeqCst);
    for (token, status) in [
        (None, 401),
        (Some("Bearer nobody"), 401),
        (Some("Bearer banned"), 403),
        (Some("Bearer broken"), 500),
    ] {
        let headers: Vec<(&str, &str)> = token.map(|t| ("Authorization", t)).into_iter().collect();
        let reply = send(&scene, "/guarded/x", &headers).await;
        assert_eq!(reply.status, status, "{token:?}: {reply:?}");
        assert_eq!(reply.header("x-echo-req-auth-user"), None);
        if status == 401 {
            // The service's challenge reaches the client, as with nginx's auth_request.
            assert_eq!(
                reply.header("www-authenticate"),
                Some("Bearer realm=\"shop\"")
            );
        }
    }
    // No answer from the authentication service: 500.
    assert_eq!(send(&scene, "/down", &[]).await.status, 500);
    assert_eq!(
        count.load(Ordering::SeqCst),
        served,
        "denied requests reached the backend"
    );

    // A 401 with auth-signin: a redirect with where the client was going.
    let reply = send(&scene, "/signin/a?b=c", &[]).await;
    assert_eq!(reply.status, 302, "{reply:?}");
    assert_eq!(
        reply.header("location"),
        Some(
            format!("https://login.example.com/start?rd=http://{HOST}%2Fsignin%2Fa%3Fb%3Dc")
                .as_str()
        )
    );
    assert_eq!(
        asked
            .lock()
            .expect("lock")
            .last()
            .map(|a| a.method.clone())
            .as_deref(),
        Some("POST")
    );
    let reply = send(&scene, "/signin/a", &[("Authorization", "Bearer alice")]).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(count.load(Ordering::SeqCst), served + 1);

    // A value Tugboat refuses fails closed with a problem naming the Ingress and key;
    // the other routes of the host keep serving.
    assert_eq!(send(&scene, "/variables", &[]).await.status, 403);
    assert_eq!(send(&scene, "/", &[]).await.status, 200);
    let field = "metadata.annotations.nginx.ingress.kubernetes.io/auth-url";
    let problems = scene.status().problems;
    assert!(
        problems
            .iter()
            .any(|p| &*p.object.name == "variables" && p.field == field),
        "{problems:?}"
    );
    if let Some(event) = scene.wait_for_warning("variables", field).await {
        assert!(event.to_string().contains("auth-url"), "{event}");
    }
}

/// nginx variables in `auth-url` and `auth-signin`, as ingress-nginx users write them
/// for oauth2-proxy (`...?rd=$escaped_request_uri`): filled in per request. `$host`
/// stands here in the path and query of `auth-url` (its host is the service's address:
/// `$host` in the host needs a rule with an exact host, whose name haproxy would resolve
/// through DNS) and in the host of `auth-signin`, which sends the client back to the
/// host it asked for (allowed on any rule), asked as `127.0.0.1`. A Host that is not a
/// host name fills in nothing and answers 500.
async fn nginx_variables_are_filled_in_per_request(haproxy: HaproxyBinary, source: Source) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let auth = auth_server(asked.clone()).await;
    let count = Arc::new(AtomicUsize::new(0));
    let web = backend(count.clone()).await;
    let port = auth.addr.port();
    let by_host = format!("http://127.0.0.1:{port}/oauth2/$host/auth?host=${{host}}");
    let signin = format!("http://${{host}}:{port}/oauth2/start?rd=$escaped_request_uri");
    let in_query = format!(
        "http://127.0.0.1:{port}/check?s=$scheme&h=$host&u=$request_uri&t=$http_x_tenant&p=$arg_page"
    );
    let catch_all = |name: &str, path: &str, annotations: &[(&str, &str)]| {
        with_annotations(
            mk_ingress_with_rules(name, vec![mk_rule(None, &[prefix(path, "web")])]),
            annotations,
        )
    };
    let objects = vec![
        to_json(&mk_service("web", "http", 80)),
        to_json(&mk_endpoint_slice("web", "http", &[web.addr])),
        to_json(&catch_all(
            "by-host",
            "/by-host",
            &[
                ("nginx.ingress.kubernetes.io/auth-url", &by_host),
                ("nginx.ingress.kubernetes.io/auth-signin", &signin),
            ],
        )),
        to_json(&catch_all(
            "in-query",
            "/in-query",
            &[("nginx.ingress.kubernetes.io/auth-url", &in_query)],
        )),
        to_json(&catch_all("open", "/", &[])),
    ];
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_status("127.0.0.1", "/", 200).await;
    assert!(
        scene.status().problems.is_empty(),
        "{:?}",
        scene.status().problems
    );
    let last_asked = || asked.lock().expect("lock").last().cloned();
    let get =
        |host: &'static str, path: &'static str, headers: Vec<(&'static str, &'static str)>| {
            let addr = scene.http_addr();
            async move {
                request(addr, "GET", host, path, &headers)
                    .await
                    .expect("request through haproxy")
            }
        };

    // `$host`: the Host in lower case without its port, in the URL's path and query.
    let reply = get(
        "LocalHost.Example:80",
        "/by-host/a",
        vec![("Authorization", "Bearer alice")],
    )
    .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.header("x-echo-req-auth-user"), None);
    let seen = last_asked().expect("the service was asked");
    assert_eq!(
        seen.uri,
        "/oauth2/localhost.example/auth?host=localhost.example"
    );
    assert_eq!(seen.original_url, "http://LocalHost.Example:80/by-host/a");

    // A 401 redirects to the sign-in URL with its variables filled in (its own `rd`).
    let reply = get("127.0.0.1", "/by-host/a?b=c%20d", vec![]).await;
    assert_eq!(reply.status, 302, "{reply:?}");
    assert_eq!(
        reply.header("location"),
        Some(
            format!("http://127.0.0.1:{port}/oauth2/start?rd=%2Fby-host%2Fa%3Fb%3Dc%2520d")
                .as_str()
        )
    );

    // Variables in the query: each filled in from the request, header and query values
    // percent-encoded where they could not stand in a URL.
    let reply = get(
        "127.0.0.1",
        "/in-query/x?page=2&q=1",
        vec![("Authorization", "Bearer alice"), ("X-Tenant", "blue team")],
    )
    .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(
        last_asked().expect("asked").uri,
        "/check?s=http&h=127.0.0.1&u=/in-query/x?page=2&q=1&t=blue%20team&p=2"
    );
    let reply = get(
        "127.0.0.1",
        "/in-query/y",
        vec![("Authorization", "Bearer banned")],
    )
    .await;
    assert_eq!(reply.status, 403, "{reply:?}");
    assert_eq!(
        last_asked().expect("asked").uri,
        "/check?s=http&h=127.0.0.1&u=/in-query/y&t=&p="
    );

    // A Host that is not a host name cannot be put in the URL: refused (500), never
    // sent anywhere, never reaching the backend.
    let served = count.load(Ordering::SeqCst);
    let asked_before = asked.lock().expect("lock").len();
    let reply = get(
        "bad_host",
        "/by-host/a",
        vec![("Authorization", "Bearer alice")],
    )
    .await;
    assert_eq!(reply.status, 500, "{reply:?}");
    assert_eq!(asked.lock().expect("lock").len(), asked_before);
    assert_eq!(count.load(Ordering::SeqCst), served);
}

/// `$host` in the host of `auth-url` on a rule without a host: the client would choose
/// the authentication service with its Host header (here naming the test's own service
/// on loopback, which would allow it). Refused: a problem (and in API mode a Warning)
/// naming the Ingress and the key, and the route answers 403 without asking any
/// service or reaching the backend; the other routes keep serving.
async fn host_in_the_auth_url_host_fails_closed_on_a_rule_without_a_host(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let auth = auth_server(asked.clone()).await;
    let count = Arc::new(AtomicUsize::new(0));
    let web = backend(count.clone()).await;
    let chosen_by_host = format!("http://$host:{}/oauth2/auth", auth.addr.port());
    let objects = vec![
        to_json(&mk_service("web", "http", 80)),
        to_json(&mk_endpoint_slice("web", "http", &[web.addr])),
        to_json(&with_annotations(
            mk_ingress_with_rules(
                "any-host",
                vec![mk_rule(None, &[prefix("/guarded", "web")])],
            ),
            &[("nginx.ingress.kubernetes.io/auth-url", &chosen_by_host)],
        )),
        to_json(&mk_ingress_with_rules(
            "open",
            vec![mk_rule(None, &[prefix("/", "web")])],
        )),
    ];
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_status("127.0.0.1", "/", 200).await;
    let served = count.load(Ordering::SeqCst);

    for host in ["127.0.0.1", "localhost"] {
        let reply = request(
            scene.http_addr(),
            "GET",
            host,
            "/guarded/a",
            &[("Authorization", "Bearer alice")],
        )
        .await
        .expect("request through haproxy");
        assert_eq!(reply.status, 403, "{host}: {reply:?}");
    }
    assert!(
        asked.lock().expect("lock").is_empty(),
        "the authentication service was asked"
    );
    assert_eq!(
        count.load(Ordering::SeqCst),
        served,
        "a refused request reached the backend"
    );

    let field = "metadata.annotations.nginx.ingress.kubernetes.io/auth-url";
    let problems = scene.status().problems;
    let problem = problems
        .iter()
        .find(|p| &*p.object.name == "any-host" && p.field == field)
        .unwrap_or_else(|| panic!("no problem for the key: {problems:?}"));
    assert!(
        problem.message.contains("$host")
            && problem
                .message
                .contains("the client would choose the authentication service"),
        "{problem:?}"
    );
    if let Some(event) = scene.wait_for_warning("any-host", field).await {
        assert!(
            event.to_string().contains("the client would choose"),
            "{event}"
        );
    }
}
