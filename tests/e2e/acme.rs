//! cert-manager's HTTP-01 solver, end to end on real haproxy from both sources: the
//! Service, EndpointSlice and Ingress cert-manager creates for a challenge are added to
//! a running controller and removed again, on hosts that redirect to HTTPS (a
//! `spec.tls` host's automatic redirect, Tugboat's `ssl-redirect` and ingress-nginx's
//! `force-ssl-redirect`, one of them with an allow list that keeps the CA out). While a
//! challenge lasts, its path is answered by the solver on plain HTTP, through the
//! solver's own allow list of every address; every other path keeps its redirect.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::Ingress;
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{
    mk_endpoint_slice, mk_ingress, mk_ingress_with_rules, mk_path, mk_rule, mk_service,
    mk_service_of, mk_tls_secret, to_json, with_annotations, with_class, with_keys, with_tls,
};
use tugboat_testkit::tls::certificate;
use tugboat_testkit::{EchoServer, HaproxyBinary, Scene, Source, scene_tests};

scene_tests!(cert_manager_http01_solver_comes_and_goes_at_runtime);

/// A host served by a `spec.tls` Ingress: redirected by default.
const TLS_HOST: &str = "tls.example.com";
/// A host whose Ingress sets `tugboat.dev/ssl-redirect: "true"`.
const FORCED_HOST: &str = "forced.example.com";
/// A host whose Ingress sets `nginx.ingress.kubernetes.io/force-ssl-redirect: "true"`.
const NGINX_HOST: &str = "nginx.example.com";
/// A host whose Ingress also lets only 192.0.2.0/24 in (`whitelist-source-range`): not
/// the test's client, nor a CA.
const PRIVATE_HOST: &str = "private.example.com";
/// The path the CA asks for: ACME's prefix and the challenge's token (43 characters of
/// base64url, as ACME servers hand them out).
const CHALLENGE: &str = "/.well-known/acme-challenge/oN2cmVzYcXhR0nKbTB1S1tqJq6mQmaS9Vg0cR9rX-7E";
/// How cert-manager names the solver's Ingress and Service (`generateName`).
const SOLVER_PREFIX: &str = "cm-acme-http-solver-";
/// The port cert-manager's solver pod listens on, and its Service's port.
const SOLVER_PORT: i32 = 8089;

/// How the Issuer names the class of the solver's Ingress.
#[derive(Clone, Copy)]
enum IssuerClass {
    /// `solvers[].http01.ingress.ingressClassName`: the Ingress' `spec.ingressClassName`.
    Name,
    /// `solvers[].http01.ingress.class`: the `kubernetes.io/ingress.class` annotation,
    /// no `spec.ingressClassName`.
    Annotation,
}

/// What cert-manager creates to solve one HTTP-01 challenge for a host: the solver
/// pod (an echo backend that reports the Service's name), its Service (NodePort, port
/// 8089 named `http`) and EndpointSlice, and the Ingress routing the challenge's path
/// (`ImplementationSpecific`) of the host to that port, with the annotation
/// cert-manager always sets (`whitelist-source-range: 0.0.0.0/0,::/0`, so that an
/// allow list on the host does not keep the CA out). Ingress and Service are named
/// `cm-acme-http-solver-` and five random characters each.
struct Solver {
    _pod: Vec<EchoServer>,
    service: Service,
    slice: EndpointSlice,
    ingress: Ingress,
}

impl Solver {
    async fn start(host: &str, suffixes: (&str, &str), net: u8, class: IssuerClass) -> Self {
        let labels = BTreeMap::from([(
            "acme.cert-manager.io/http01-solver".to_string(),
            "true".to_string(),
        )]);
        let service_name = format!("{SOLVER_PREFIX}{}", suffixes.1);
        let pod = start_backends(&service_name, net, 1).await;
        let addrs: Vec<SocketAddr> = pod.iter().map(|s| s.addr).collect();

        let mut service = mk_service(&service_name, "http", SOLVER_PORT);
        let spec = service.spec.as_mut().expect("mk_service sets a spec");
        spec.type_ = Some("NodePort".to_string());
        spec.selector = Some(labels.clone());
        service.metadata.labels = Some(labels.clone());

        let path = mk_path(CHALLENGE, "ImplementationSpecific", &service_name).port(SOLVER_PORT);
        let ingress = mk_ingress_with_rules(
            &format!("{SOLVER_PREFIX}{}", suffixes.0),
            vec![mk_rule(Some(host), &[path])],
        );
        let mut ingress = with_annotations(
            ingress,
            &[(
                "nginx.ingress.kubernetes.io/whitelist-source-range",
                "0.0.0.0/0,::/0",
            )],
        );
        if let IssuerClass::Annotation = class {
            ingress = with_annotations(
                with_class(ingress, None),
                &[("kubernetes.io/ingress.class", "tugboat")],
            );
        }
        ingress.metadata.labels = Some(labels);
        Self {
            slice: mk_endpoint_slice(&service_name, "http", &addrs),
            _pod: pod,
            service,
            ingress,
        }
    }

    /// The Service's name, which its echo backend reports.
    fn name(&self) -> &str {
        self.service.metadata.name.as_deref().unwrap_or_default()
    }

    /// Creates its objects as cert-manager does: the Service (and the EndpointSlice
    /// Kubernetes makes for its pod) first, then the Ingress.
    fn create(&self, scene: &Scene) {
        scene.apply(&self.service);
        scene.apply(&self.slice);
        scene.apply(&self.ingress);
    }

    /// Removes its objects once the challenge is done: the garbage collector deletes
    /// them in no set order; the Service first is the harder case (a route left for a
    /// moment without its Service).
    fn remove(&self, scene: &Scene) {
        scene.delete(&self.service);
        scene.delete(&self.slice);
        scene.delete(&self.ingress);
    }
}

/// `GET http://host/path` is answered on plain HTTP by `service`, which receives the
/// path unchanged.
async fn assert_answered_by(scene: &Scene, host: &str, path: &str, service: &str) {
    let reply = scene.get(host, path).await.expect("request");
    assert_eq!(reply.status, 200, "{host}{path}: {reply:?}");
    assert_eq!(reply.service(), Some(service), "{host}{path}: {reply:?}");
    assert_eq!(reply.path(), Some(path), "{host}{path}: {reply:?}");
}

/// The status of `GET http://host/path`.
async fn status(scene: &Scene, host: &str, path: &str) -> u16 {
    scene.get(host, path).await.expect("request").status
}

async fn cert_manager_http01_solver_comes_and_goes_at_runtime(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = start_backends("web", 135, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    let (cert, key, _) = certificate(&[TLS_HOST], false);
    objects.extend([
        to_json(&mk_tls_secret("site-tls", &cert, &key)),
        to_json(&with_tls(
            mk_ingress("site", TLS_HOST, "web"),
            &[(&[TLS_HOST], "site-tls")],
        )),
        to_json(&with_keys(
            mk_ingress("forced", FORCED_HOST, "web"),
            &[("ssl-redirect", "true")],
        )),
        to_json(&with_annotations(
            mk_ingress("nginx-forced", NGINX_HOST, "web"),
            &[("nginx.ingress.kubernetes.io/force-ssl-redirect", "true")],
        )),
        to_json(&with_annotations(
            mk_ingress("private", PRIVATE_HOST, "web"),
            &[
                ("nginx.ingress.kubernetes.io/force-ssl-redirect", "true"),
                (
                    "nginx.ingress.kubernetes.io/whitelist-source-range",
                    "192.0.2.0/24",
                ),
            ],
        )),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    let hosts = [TLS_HOST, FORCED_HOST, NGINX_HOST];

    // Before any challenge: every host redirects, and ACME's path, kept on plain HTTP,
    // is the host's own route.
    scene.wait_for_service(TLS_HOST, CHALLENGE, "web").await;
    for host in hosts {
        assert_answered_by(&scene, host, CHALLENGE, "web").await;
        scene.assert_https_redirect(host, "/page").await;
    }
    // The private host's own route keeps the CA out.
    assert_eq!(status(&scene, PRIVATE_HOST, CHALLENGE).await, 403);

    // cert-manager starts one challenge per host, with either spelling of the class.
    let solvers = [
        Solver::start(TLS_HOST, ("x7k2p", "q9d4m"), 136, IssuerClass::Name).await,
        Solver::start(
            FORCED_HOST,
            ("b3n8v", "h5t1c"),
            137,
            IssuerClass::Annotation,
        )
        .await,
        Solver::start(NGINX_HOST, ("r6w2z", "f4j7s"), 138, IssuerClass::Name).await,
        Solver::start(PRIVATE_HOST, ("m2c9q", "t8v3k"), 139, IssuerClass::Name).await,
    ];
    for solver in &solvers {
        solver.create(&scene);
    }
    for (host, solver) in hosts.into_iter().zip(&solvers[..3]) {
        scene.wait_for_service(host, CHALLENGE, solver.name()).await;
        assert_answered_by(&scene, host, CHALLENGE, solver.name()).await;
        // Only the challenge's path goes to the solver; the rest keeps its redirect.
        scene.assert_https_redirect(host, "/page").await;
        scene
            .assert_https_redirect(host, "/.well-known/security.txt")
            .await;
        // Another token (an earlier challenge's, say) is not the solver's: the host's
        // own route, still on plain HTTP.
        assert_answered_by(&scene, host, "/.well-known/acme-challenge/other", "web").await;
    }
    // On the private host, the solver's whitelist (every address) is its route's own:
    // the challenge gets in, the host's other paths stay closed to this client.
    let private = &solvers[3];
    scene
        .wait_for_service(PRIVATE_HOST, CHALLENGE, private.name())
        .await;
    assert_answered_by(&scene, PRIVATE_HOST, CHALLENGE, private.name()).await;
    assert_eq!(status(&scene, PRIVATE_HOST, "/page").await, 403);

    // cert-manager's annotations are read without a problem: the whitelist is an
    // allow list of every address (the requests above got no 403), and the class
    // annotation selects Tugboat's class. (A build that saw a solver's Ingress before
    // its Service may have warned about the Service; none may be about an annotation.)
    let status = scene.status();
    let about_solvers: Vec<_> = status
        .problems
        .iter()
        .filter(|p| p.object.name.starts_with(SOLVER_PREFIX))
        .collect();
    assert!(about_solvers.is_empty(), "{about_solvers:?}");
    if let Some(server) = scene.api() {
        let about_annotations: Vec<_> = server
            .list("Event")
            .into_iter()
            .filter(|e| {
                let name = e["regarding"]["name"]
                    .as_str()
                    .or(e["involvedObject"]["name"].as_str())
                    .unwrap_or_default();
                let note = e["note"]
                    .as_str()
                    .or(e["message"].as_str())
                    .unwrap_or_default();
                name.starts_with(SOLVER_PREFIX) && note.starts_with("metadata.annotations")
            })
            .collect();
        assert!(about_annotations.is_empty(), "{about_annotations:?}");
    }

    // The challenges are done: cert-manager deletes what it created. The path no longer
    // reaches a solver; it is the host's own route again, on plain HTTP (the exemption
    // is on the request's path, whichever route serves it).
    for solver in &solvers {
        solver.remove(&scene);
    }
    for host in hosts {
        scene.wait_for_service(host, CHALLENGE, "web").await;
        assert_answered_by(&scene, host, CHALLENGE, "web").await;
        scene.assert_https_redirect(host, "/page").await;
    }
    scene.wait_for_status(PRIVATE_HOST, CHALLENGE, 403).await;
}
