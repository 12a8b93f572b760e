//! The chart's pod, run on this machine as processes (tugboat_testkit::pod_runner):
//! `helm template` of deploy/helm/tugboat with the default values and with each values
//! file of examples/helm/, two replicas of a Deployment (two pods, each in its own
//! namespaces), or the one pod of a DaemonSet on this machine as the node (with
//! `hostNetwork`, in the test's own network: its ports are this machine's), beside the
//! fake API server, which they reach only through the in-cluster configuration
//! (service-account token and CA where the chart mounts them, HTTPS) and which answers
//! 403 to whatever the chart's RBAC does not grant.
//!
//! Each test checks: an Ingress created through the API routes through both pods;
//! on the HTTPS port, an `ssl-passthrough` host's TLS reaches its own TLS backend while
//! the other host is terminated by haproxy (through the internal hop, as the spec's uid);
//! the backend sees the client's own address (a client on 127.0.0.2); a TCP service of
//! the values (`tcpServices`) carries a protocol whose server speaks first, both ways;
//! every probe of the spec answers; haproxy's access log is on haproxy's stdout and
//! the controller's update lines on the controller's; haproxy sees no token and cannot
//! write its configuration; each container runs as the spec's uid; no request was
//! refused; and deleting the leader pod as the kubelet does (preStop, then SIGTERM to
//! the controller and SIGUSR1, the official image's stop signal, to haproxy) lets a
//! request in flight finish, stops haproxy within the grace period, and hands the
//! Lease to the other replica within two seconds (releases it, for a single pod).
//!
//! Needs root, util-linux (`unshare`, `nsenter`), iproute2 (`ip`) and helm (on the PATH
//! or from scripts/get-helm.sh). Without them the tests say so and pass, unless
//! `TUGBOAT_REQUIRE_CHART_POD=1` (scripts/test.sh sets it) makes that a failure.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Container;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tugboat_testkit::banner::BannerServer;
use tugboat_testkit::fake_apiserver::{ApiTls, Guard};
use tugboat_testkit::pod_runner::{
    self, Image, Pod, PodIdentity, RenderedChart, SERVICE_ACCOUNT_DIR, Sandbox, Tools,
};
use tugboat_testkit::rbac::{Rbac, service_account_user};
use tugboat_testkit::tls::{TlsEchoServer, TlsExchange, exchange_over};
use tugboat_testkit::{EchoServer, FakeApiServer, HAPROXY_SERIES, HaproxyBinary};

const RELEASE: &str = "tugboat";
const NAMESPACE: &str = "tugboat";
/// Where the API server listens inside each pod (KUBERNETES_SERVICE_PORT).
const API_PORT: u16 = 6443;
/// The echo backend's port inside each pod's network.
const BACKEND_PORT: u16 = 9090;
const HOST: &str = "shop.example.com";
/// The TLS backend's port inside each pod's network: it terminates its own TLS.
const TLS_BACKEND_PORT: u16 = 9443;
/// The host whose TLS passes through haproxy to the TLS backend (`ssl-passthrough`).
const PASSTHROUGH_HOST: &str = "cd.example.com";
/// The port of the TCP service the test asks for through the values (`tcpServices`).
const TCP_SERVICE_PORT: u16 = 9000;
/// The server that speaks first, behind the TCP service, inside each pod's network.
const BANNER_PORT: u16 = 9025;
/// The address a client elsewhere connects from.
const CLIENT: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// helm from the PATH, else where scripts/get-helm.sh caches it.
fn find_helm() -> Option<PathBuf> {
    let on_path = std::process::Command::new("helm")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if on_path {
        return Some("helm".into());
    }
    let home = std::env::var_os("HOME")?;
    let cache = PathBuf::from(home).join(".cache/tugboat/helm");
    std::fs::read_dir(cache)
        .ok()?
        .flatten()
        .map(|e| e.path().join("helm"))
        .find(|p| p.is_file())
}

/// helm, or None (skipped) when this machine cannot run a pod.
fn prerequisites() -> Option<PathBuf> {
    let mut missing = pod_runner::missing_prerequisites();
    let helm = find_helm();
    if helm.is_none() {
        missing.push("helm (scripts/get-helm.sh)".into());
    }
    if missing.is_empty() {
        return helm;
    }
    assert!(
        std::env::var("TUGBOAT_REQUIRE_CHART_POD").as_deref() != Ok("1"),
        "the chart pod test is required (TUGBOAT_REQUIRE_CHART_POD=1) but this machine lacks: {}",
        missing.join(", ")
    );
    eprintln!("skipped: the chart pod test needs {}", missing.join(", "));
    None
}

/// The newest haproxy series installed.
fn newest_series() -> Option<&'static str> {
    HAPROXY_SERIES
        .iter()
        .rev()
        .copied()
        .find(|s| HaproxyBinary::installed(s).is_some())
}

/// `repository:tag` of a container's image.
fn image_of(container: &Container) -> (String, String) {
    let image = container.image.clone().unwrap_or_default();
    match image.rsplit_once(':') {
        Some((repository, tag)) if !tag.contains('/') => (repository.into(), tag.into()),
        _ => (image, "latest".into()),
    }
}

/// The value of `--NAME=` in a container's args, every occurrence.
fn flag(container: &Container, name: &str) -> Vec<String> {
    let prefix = format!("--{name}=");
    container
        .args
        .iter()
        .flatten()
        .filter_map(|a| a.strip_prefix(&prefix).map(str::to_string))
        .collect()
}

fn container_port(container: &Container, name: &str) -> u16 {
    optional_container_port(container, name)
        .unwrap_or_else(|| panic!("container {} has no port {name}", container.name))
}

fn optional_container_port(container: &Container, name: &str) -> Option<u16> {
    container
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some(name))
        .map(|p| p.container_port as u16)
}

/// Maps the chart's images onto this machine: the official haproxy image (and the
/// example's setcap'ed build of it) onto the haproxy binary of `binary`, the
/// controller image onto the controller Cargo built.
fn images(binary: PathBuf, scratch: PathBuf) -> impl Fn(&str) -> anyhow::Result<Image> {
    let setcap_copy: OnceLock<PathBuf> = OnceLock::new();
    move |reference: &str| {
        let repository = reference.rsplit_once(':').map_or(reference, |(r, _)| r);
        match repository {
            "haproxy" | "docker.io/library/haproxy" => Ok(Image::official_haproxy(&binary)),
            // examples/haproxy-netbind/Dockerfile: the official image with
            // `setcap cap_net_bind_service=+ep /usr/local/sbin/haproxy`.
            "registry.example.com/haproxy-netbind" => {
                const CAP_NET_BIND_SERVICE: u64 = 1 << 10;
                // One copy for every pod: a running binary cannot be overwritten.
                let copy = match setcap_copy.get() {
                    Some(copy) => copy.clone(),
                    None => {
                        let copy = pod_runner::with_file_capabilities(
                            &binary,
                            &scratch,
                            CAP_NET_BIND_SERVICE,
                        )?;
                        setcap_copy.get_or_init(|| copy).clone()
                    }
                };
                Ok(Image::official_haproxy(&copy))
            }
            "ghcr.io/tugboat-ingress/tugboat" => Ok(Image::tugboat_controller(
                Path::new(env!("CARGO_BIN_EXE_tugboat-pod-controller")),
                &workspace().join("init-config/haproxy.cfg"),
            )),
            other => anyhow::bail!("no mapping of image {other} onto this machine"),
        }
    }
}

/// Where the servers the test runs in a pod's network listen.
#[derive(Debug, Clone, Copy)]
struct PodPorts {
    backend: u16,
    tls_backend: u16,
    banner: u16,
}

/// One replica: its sandbox, echo backends (plain, and TLS for passthrough), the TCP
/// server that speaks first, and pod.
struct Replica {
    pod: Pod,
    ports: PodPorts,
    _echo: EchoServer,
    tls_echo: TlsEchoServer,
    _banner: BannerServer,
}

async fn start_replica(
    api: &mut FakeApiServer,
    tls: &ApiTls,
    guard: &Guard,
    chart: &RenderedChart,
    name: &str,
    token: &str,
    images: &dyn Fn(&str) -> anyhow::Result<Image>,
) -> Replica {
    let host_network = chart.pod_spec().expect("pod spec").host_network == Some(true);
    let sandbox = if host_network {
        Sandbox::host_network().await
    } else {
        Sandbox::start(name).await
    }
    .expect("pod sandbox");
    // In a network of its own, each replica's servers take the same fixed ports; in the
    // node's network (this machine's), free ones.
    let listen = |port: u16| {
        let listener = sandbox
            .listen(if host_network { 0 } else { port })
            .expect("listener in the pod");
        let port = listener.local_addr().expect("local address").port();
        (listener, port)
    };
    let (api_listener, api_port) = listen(API_PORT);
    api.serve_guarded(api_listener, tls, guard.clone())
        .expect("serve the API in the pod");
    let (backend, backend_port) = listen(BACKEND_PORT);
    let echo = EchoServer::start_on("web", backend).expect("echo backend");
    let (tls_backend, tls_backend_port) = listen(TLS_BACKEND_PORT);
    let tls_echo = TlsEchoServer::start_on("argocd", &[PASSTHROUGH_HOST], tls_backend)
        .expect("TLS echo backend");
    let (banner_listener, banner_port) = listen(BANNER_PORT);
    let banner = BannerServer::start_on(name, banner_listener, false).expect("banner backend");
    let identity = PodIdentity {
        name: name.into(),
        namespace: NAMESPACE.into(),
        token: token.into(),
        ca_pem: tls.ca_pem.clone(),
        api_port,
        service_account_automount: chart
            .service_account
            .as_ref()
            .and_then(|sa| sa.automount_service_account_token),
    };
    let tools = Tools {
        pod_exec: env!("CARGO_BIN_EXE_tugboat-pod-exec").into(),
    };
    let pod = Pod::start(
        sandbox,
        chart.pod_spec().expect("pod spec"),
        &identity,
        images,
        &tools,
    )
    .await
    .unwrap_or_else(|e| panic!("pod {name} did not start: {e:#}"));
    Replica {
        pod,
        ports: PodPorts {
            backend: backend_port,
            tls_backend: tls_backend_port,
            banner: banner_port,
        },
        _echo: echo,
        tls_echo,
        _banner: banner,
    }
}

/// Polls until `check` holds, or fails with `what` and the pods' logs.
async fn wait_for<F, Fut>(what: &str, limit: Duration, pods: &[&Pod], mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while !check().await {
        if Instant::now() > deadline {
            let logs: Vec<String> = pods.iter().map(|p| p.logs(30)).collect();
            panic!(
                "timed out after {limit:?} waiting for: {what}\n{}",
                logs.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn lease_holder(api: &FakeApiServer, lease: &str) -> Option<String> {
    api.get("Lease", NAMESPACE, lease)?["spec"]["holderIdentity"]
        .as_str()
        .map(str::to_string)
}

/// Waits until every probe of the pod answers; fails naming those that do not.
async fn wait_for_probes(pod: &Pod, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let results = pod.probe_all().await;
        let failing: Vec<String> = results
            .iter()
            .filter_map(|r| {
                r.outcome
                    .as_ref()
                    .err()
                    .map(|e| format!("{} {} {}: {e}", r.container, r.kind, r.target))
            })
            .collect();
        if failing.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "probes of pod {} fail after {limit:?}:\n{}\n{}",
            pod.name,
            failing.join("\n"),
            pod.logs(30)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The uid a process runs as (real uid from /proc/PID/status).
fn uid_of(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|u| u.parse().ok())
}

fn typed<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("typed object")
}

/// Objects of the backend and the Ingress, created through the API as a user would.
async fn create_ingress(api: &FakeApiServer, namespace: &str, class: &str, ports: PodPorts) {
    let client = api.client();
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(client.clone(), namespace);
    let slices: Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
        Api::namespaced(client.clone(), namespace);
    let ingresses: Api<k8s_openapi::api::networking::v1::Ingress> =
        Api::namespaced(client, namespace);
    let (backend_port, tls_backend_port) = (ports.backend, ports.tls_backend);
    let pp = PostParams::default();
    services
        .create(
            &pp,
            &typed(json!({"metadata": {"name": "web", "namespace": namespace},
                "spec": {"ports": [{"name": "http", "port": 80, "targetPort": backend_port}]}})),
        )
        .await
        .expect("create Service");
    slices
        .create(
            &pp,
            &typed(json!({"metadata": {"name": "web-1", "namespace": namespace,
                    "labels": {"kubernetes.io/service-name": "web"}},
                "addressType": "IPv4",
                "ports": [{"name": "http", "port": backend_port, "protocol": "TCP"}],
                "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]})),
        )
        .await
        .expect("create EndpointSlice");
    ingresses
        .create(
            &pp,
            &typed(json!({"metadata": {"name": "shop", "namespace": namespace},
                "spec": {"ingressClassName": class, "rules": [{"host": HOST, "http": {"paths": [
                    {"path": "/", "pathType": "Prefix",
                     "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}})),
        )
        .await
        .expect("create Ingress");
    // A backend that terminates its own TLS, behind ingress-nginx's `ssl-passthrough`.
    services
        .create(
            &pp,
            &typed(json!({"metadata": {"name": "argocd", "namespace": namespace},
                "spec": {"ports": [{"name": "https", "port": 443, "targetPort": tls_backend_port}]}})),
        )
        .await
        .expect("create Service");
    slices
        .create(
            &pp,
            &typed(
                json!({"metadata": {"name": "argocd-1", "namespace": namespace,
                    "labels": {"kubernetes.io/service-name": "argocd"}},
                "addressType": "IPv4",
                "ports": [{"name": "https", "port": tls_backend_port, "protocol": "TCP"}],
                "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]}),
            ),
        )
        .await
        .expect("create EndpointSlice");
    ingresses
        .create(
            &pp,
            &typed(json!({"metadata": {"name": "argocd", "namespace": namespace,
                    "annotations": {"nginx.ingress.kubernetes.io/ssl-passthrough": "true"}},
                "spec": {"ingressClassName": class, "rules": [{"host": PASSTHROUGH_HOST, "http": {"paths": [
                    {"path": "/", "pathType": "Prefix",
                     "backend": {"service": {"name": "argocd", "port": {"number": 443}}}}]}}]}})),
        )
        .await
        .expect("create Ingress");
}

/// The Service `banner` of the TCP service (its ConfigMap names it) and its
/// EndpointSlice, on the server that speaks first.
async fn create_banner_service(api: &FakeApiServer, namespace: &str, banner_port: u16) {
    let client = api.client();
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(client.clone(), namespace);
    let slices: Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
        Api::namespaced(client, namespace);
    let pp = PostParams::default();
    services
        .create(
            &pp,
            &typed(json!({"metadata": {"name": "banner", "namespace": namespace},
                "spec": {"ports": [{"name": "tcp", "port": TCP_SERVICE_PORT, "targetPort": banner_port}]}})),
        )
        .await
        .expect("create Service");
    slices
        .create(
            &pp,
            &typed(
                json!({"metadata": {"name": "banner-1", "namespace": namespace,
                    "labels": {"kubernetes.io/service-name": "banner"}},
                "addressType": "IPv4",
                "ports": [{"name": "tcp", "port": banner_port, "protocol": "TCP"}],
                "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]}),
            ),
        )
        .await
        .expect("create EndpointSlice");
}

/// Through haproxy's TCP bind `port` in `pod`: the server's banner line, then the
/// answer to a line the client sends.
async fn banner_exchange(pod: &Pod, port: u16) -> std::io::Result<(String, String)> {
    let stream = pod.sandbox.connect(port).await?;
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let exchange = async {
        let banner = lines.next_line().await?.unwrap_or_default();
        write.write_all(b"ping from the client\r\n").await?;
        let answer = lines.next_line().await?.unwrap_or_default();
        Ok::<_, std::io::Error>((banner, answer))
    };
    tokio::time::timeout(Duration::from_secs(3), exchange)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no exchange in 3 s"))?
}

/// `GET path` on this machine's 127.0.0.1:`port`, from the test's own network.
async fn get_on_this_machine(port: u16, path: &str) -> std::io::Result<tugboat_testkit::Reply> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        Ok::<_, std::io::Error>(raw)
    };
    let raw = tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in 5 s"))??;
    tugboat_testkit::http::parse(&raw)
}

/// A TLS exchange with SNI `sni` on 127.0.0.1:`port` in `pod`.
async fn tls_in_pod(pod: &Pod, port: u16, sni: &str) -> std::io::Result<TlsExchange> {
    let tcp = pod.sandbox.connect(port).await?;
    exchange_over(tcp, sni, "/", &[b"x-tugboat-test", b"http/1.1"]).await
}

/// Runs the chart's pod for `values` (a file of examples/helm/, or the defaults); on
/// the newest installed haproxy when `newest`, else on the series the chart's image
/// tag names.
async fn chart_pod(values: Option<&str>, newest: bool) {
    chart_pod_with(values, newest, &[]).await;
}

/// [`chart_pod`] with more values (`helm template --set`).
async fn chart_pod_with(values: Option<&str>, newest: bool, more: &[&str]) {
    let Some(helm) = prerequisites() else {
        return;
    };
    let mut set: Vec<String> = more.iter().map(|s| s.to_string()).collect();
    if newest {
        let Some(series) = newest_series() else {
            // None is installed: the newest series is missing, which fails the test
            // unless TUGBOAT_SKIP_MISSING_HAPROXY skips it.
            let newest = HAPROXY_SERIES[HAPROXY_SERIES.len() - 1];
            assert!(HaproxyBinary::find(newest).is_none());
            return;
        };
        set.push(format!("haproxy.image.tag={series}-alpine"));
    }
    let values_path = values.map(|v| workspace().join("examples/helm").join(v));
    let chart = RenderedChart::render(
        &helm,
        &workspace().join("deploy/helm/tugboat"),
        RELEASE,
        NAMESPACE,
        values_path.as_deref(),
        &set,
    )
    .expect("helm template");
    let spec = chart.pod_spec().expect("pod spec").clone();
    let haproxy = chart
        .container("haproxy")
        .expect("haproxy container")
        .clone();
    let controller = chart
        .container("controller")
        .expect("controller container")
        .clone();
    let (_, tag) = image_of(&haproxy);
    let series = tag.split('-').next().unwrap_or_default().to_string();
    let Some(binary) = HaproxyBinary::find(&series) else {
        return;
    };
    eprintln!(
        "chart pod: values {}, haproxy image {} -> {}",
        values.unwrap_or("(defaults)"),
        haproxy.image.as_deref().unwrap_or_default(),
        binary.path.display()
    );

    // What `helm install` leaves in the cluster, as far as the fake server stores it,
    // and the namespaces it goes into.
    let mut api = FakeApiServer::start().await;
    let watched = flag(&controller, "watch-namespace");
    for ns in [NAMESPACE, "default"]
        .into_iter()
        .chain(watched.iter().map(String::as_str))
    {
        api.put(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
    }
    for object in &chart.objects {
        if FakeApiServer::knows(object) {
            let mut object = object.clone();
            if object["metadata"]["namespace"].is_null() {
                object["metadata"]["namespace"] = json!(NAMESPACE);
            }
            api.put(object);
        }
    }
    let tls = ApiTls::generate();
    let rbac = Rbac::from_objects(&chart.objects).expect("the chart's RBAC");
    let user = service_account_user(NAMESPACE, &chart.service_account_name());
    // A Deployment: two replicas. A DaemonSet: its pod on this machine, the one node.
    let daemon_set = chart.workload_kind == "DaemonSet";
    let host_network = spec.host_network == Some(true);
    let names: &[&str] = if daemon_set {
        &["tugboat-x7k2p"]
    } else {
        &["tugboat-6c9f7d8b5-k2x7q", "tugboat-6c9f7d8b5-p9w4z"]
    };
    let tokens: HashMap<String, String> = names
        .iter()
        .map(|n| (format!("token-of-{n}"), user.clone()))
        .collect();
    let guard = Guard {
        tokens,
        authorize: Arc::new(move |user, request| rbac.allows(user, request)),
    };
    let scratch = tempfile::tempdir().expect("scratch folder");
    let images = images(binary.path.clone(), scratch.path().to_path_buf());
    let lease = flag(&controller, "election-id")
        .pop()
        .expect("the controller has --election-id");

    // Replica A first: it takes the Lease; then replica B.
    let mut replicas = Vec::new();
    for (index, name) in names.iter().enumerate() {
        let replica = start_replica(
            &mut api,
            &tls,
            &guard,
            &chart,
            name,
            &format!("token-of-{name}"),
            &images,
        )
        .await;
        if index == 0 {
            wait_for(
                "replica A holds the Lease",
                Duration::from_secs(20),
                &[&replica.pod],
                || {
                    let holder = lease_holder(&api, &lease);
                    async move { holder.as_deref() == Some(names[0]) }
                },
            )
            .await;
        }
        replicas.push(replica);
    }
    let pods: Vec<&Pod> = replicas.iter().map(|r| &r.pod).collect();

    // An Ingress created through the API routes through every pod, on the spec's port.
    let namespace = watched.first().cloned().unwrap_or_else(|| "default".into());
    let class = flag(&controller, "ingress-class")
        .pop()
        .expect("--ingress-class");
    create_ingress(&api, &namespace, &class, replicas[0].ports).await;
    let http_port = container_port(&haproxy, "http");
    for replica in &replicas {
        let pod = &replica.pod;
        wait_for(
            &format!(
                "{HOST} routed to web through pod {} on port {http_port}",
                pod.name
            ),
            Duration::from_secs(20),
            &[pod],
            || async move {
                pod.sandbox
                    .get(http_port, HOST, "/routed", &[], Duration::from_secs(2))
                    .await
                    .is_ok_and(|r| r.status == 200 && r.service() == Some("web"))
            },
        )
        .await;
    }

    // On the HTTPS port, the passthrough host's TLS reaches the TLS backend itself (its
    // certificate, the client's SNI and ALPN), and the other host is still terminated
    // by haproxy (through the internal hop, as haproxy's non-root user).
    let https_port = container_port(&haproxy, "https");
    for replica in &replicas {
        let pod = &replica.pod;
        let backend = &replica.tls_echo;
        wait_for(
            &format!(
                "{PASSTHROUGH_HOST} passed through pod {} on port {https_port}",
                pod.name
            ),
            Duration::from_secs(20),
            &[pod],
            || async move {
                tls_in_pod(pod, https_port, PASSTHROUGH_HOST)
                    .await
                    .is_ok_and(|seen| {
                        seen.certificate == backend.certificate
                            && seen.reply.is_some_and(|r| {
                                r.body.contains("sni=cd.example.com")
                                    && r.body.contains("alpn=x-tugboat-test,http/1.1")
                            })
                    })
            },
        )
        .await;
        let terminated = tls_in_pod(pod, https_port, HOST)
            .await
            .expect("TLS terminated by haproxy");
        assert_ne!(terminated.certificate, backend.certificate);
        let reply = terminated.reply.expect("an HTTP/1.1 answer");
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(reply.service(), Some("web"), "{reply:?}");
        assert_eq!(
            reply.header("x-echo-req-forwarded-for"),
            Some("127.0.0.1"),
            "{reply:?}"
        );
    }

    // The backend sees the client's own address: a client on 127.0.0.2 (for a pod on
    // the node's network, a client of this machine) is not hidden behind a hop.
    for replica in &replicas {
        let reply = replica
            .pod
            .sandbox
            .get_from(
                CLIENT,
                http_port,
                HOST,
                "/client",
                &[],
                Duration::from_secs(5),
            )
            .await
            .expect("request from 127.0.0.2");
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(
            reply.header("x-echo-req-forwarded-for"),
            Some("127.0.0.2"),
            "pod {}: the backend does not see the client's address: {reply:?}",
            replica.pod.name
        );
    }
    if host_network {
        // The pod's ports are this machine's own: reached without entering any
        // namespace.
        let reply = get_on_this_machine(http_port, "/on-the-node")
            .await
            .expect("haproxy on this machine's port");
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(reply.service(), Some("web"), "{reply:?}");
    }

    // A TCP service of the values: the server speaks first, then both ways, through
    // every pod, on the port haproxy binds for it (port + 10000).
    let tcp_name = format!("tcp-{TCP_SERVICE_PORT}");
    if let Some(tcp_port) = optional_container_port(&haproxy, &tcp_name) {
        create_banner_service(&api, "default", replicas[0].ports.banner).await;
        for pod in &pods {
            let pod: &Pod = pod;
            wait_for(
                &format!(
                    "the TCP service's banner through pod {} on port {tcp_port}",
                    pod.name
                ),
                Duration::from_secs(20),
                &[pod],
                || async move {
                    banner_exchange(pod, tcp_port)
                        .await
                        .is_ok_and(|(banner, answer)| {
                            banner.starts_with(&format!("220 {} ready for ", pod.name))
                                && answer == "ping from the client"
                        })
                },
            )
            .await;
        }
    }

    // Every probe of the spec answers, on the ports it names.
    for replica in &replicas {
        wait_for_probes(&replica.pod, Duration::from_secs(20)).await;
    }

    // Logs as `kubectl logs -c` shows them: haproxy's access log on its stdout, the
    // controller's update lines on its stdout.
    let marker = "/access-log-check";
    let a = &replicas[0];
    let reply = a
        .pod
        .sandbox
        .get(http_port, HOST, marker, &[], Duration::from_secs(5))
        .await
        .expect("request through haproxy");
    assert_eq!(reply.status, 200, "{reply:?}");
    wait_for(
        "haproxy's access log line on its stdout",
        Duration::from_secs(5),
        &[&a.pod],
        || {
            let out = a.pod.stdout("haproxy");
            async move { out.lines().any(|l| l.contains(marker)) }
        },
    )
    .await;
    let controller_out = a.pod.stdout("controller");
    assert!(
        controller_out.lines().any(|l| l.contains("applied")),
        "no update line on the controller's stdout:\n{}",
        a.pod.logs(30)
    );

    // Isolation, seen from inside each container's mount namespace and root.
    for replica in &replicas {
        let pod = &replica.pod;
        let token = pod
            .path_in("haproxy", SERVICE_ACCOUNT_DIR)
            .expect("haproxy's root");
        assert!(
            !token.exists(),
            "pod {}: haproxy can see {SERVICE_ACCOUNT_DIR} (a service-account token is mounted into haproxy)",
            pod.name
        );
        for folder in ["/etc/haproxy", "/var/lib/haproxy"] {
            let probe = pod
                .path_in("haproxy", &format!("{folder}/.write-check"))
                .expect("haproxy's root");
            let written = std::fs::write(&probe, b"x");
            assert!(
                written.as_ref().is_err_and(
                    |e| e.raw_os_error() == Some(rustix::io::Errno::ROFS.raw_os_error())
                ),
                "pod {}: haproxy's {folder} is writable ({written:?}): its mount must be read-only",
                pod.name
            );
        }
        let controller_token = pod
            .path_in("controller", &format!("{SERVICE_ACCOUNT_DIR}/token"))
            .expect("controller's root");
        assert!(
            controller_token.is_file(),
            "pod {}: the controller has no token at {SERVICE_ACCOUNT_DIR}/token",
            pod.name
        );
        for container in &spec.containers {
            let pid = pod.pid(&container.name).expect("pid");
            let expected = container
                .security_context
                .as_ref()
                .and_then(|s| s.run_as_user)
                .or(spec.security_context.as_ref().and_then(|s| s.run_as_user));
            if let Some(expected) = expected {
                assert_eq!(
                    uid_of(pid),
                    Some(expected as u32),
                    "pod {}: container {} does not run as uid {expected}",
                    pod.name,
                    container.name
                );
            }
            let read_only_root = container
                .security_context
                .as_ref()
                .and_then(|s| s.read_only_root_filesystem)
                == Some(true);
            if read_only_root {
                let probe = pod.path_in(&container.name, "/.write-check").expect("root");
                assert!(
                    std::fs::write(&probe, b"x").is_err(),
                    "pod {}: container {} has readOnlyRootFilesystem but / is writable",
                    pod.name,
                    container.name
                );
            }
        }
    }

    // Only what the chart's RBAC grants was asked for.
    let denied = api.denied();
    assert!(
        denied.is_empty(),
        "the API server refused requests of the controller (the chart's RBAC lacks them):\n{}\n{}",
        denied.join("\n"),
        a.pod.logs(20)
    );

    // Delete replica A as the kubelet does, with a request in flight through it.
    let (first, others) = replicas.split_at_mut(1);
    let a = &mut first[0];
    let b = others.first();
    // The Lease goes to replica B; a single pod releases it.
    let successor = b.map(|b| b.pod.name.clone());
    let pre_stop = haproxy
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.as_ref())
        .and_then(|h| h.sleep.as_ref())
        .map_or(0, |s| s.seconds.max(0) as u64);
    let grace = Duration::from_secs(spec.termination_grace_period_seconds.unwrap_or(30) as u64);
    let delay_ms = pre_stop * 1000 + 1500;
    let mut in_flight = a.pod.sandbox.connect(http_port).await.expect("connect");
    in_flight
        .write_all(
            format!(
                "GET /in-flight HTTP/1.1\r\nHost: {HOST}\r\nx-delay-ms: {delay_ms}\r\nConnection: close\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .expect("send");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let deletion = Instant::now();
    let in_flight_reply = async move {
        let mut raw = Vec::new();
        let read =
            tokio::time::timeout(Duration::from_secs(40), in_flight.read_to_end(&mut raw)).await;
        (read, raw)
    };
    let takeover = async {
        loop {
            if lease_holder(&api, &lease) == successor {
                return Some(deletion.elapsed());
            }
            if deletion.elapsed() > Duration::from_secs(30) {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let (terminations, (read, raw), takeover) =
        tokio::join!(a.pod.delete(), in_flight_reply, takeover);
    let logs = a.pod.logs(30);
    let of = |name: &str| {
        terminations
            .iter()
            .find(|t| t.container == name)
            .unwrap_or_else(|| panic!("no termination of {name}"))
            .clone()
    };
    let haproxy_end = of("haproxy");
    let controller_end = of("controller");
    assert!(
        haproxy_end.signalled_after >= Duration::from_secs(pre_stop),
        "haproxy got its stop signal before its preStop hook ended: {haproxy_end:?}"
    );
    assert!(
        !haproxy_end.killed && haproxy_end.status.is_some_and(|s| s.success()),
        "haproxy did not stop cleanly on SIGUSR1 within the grace period {grace:?}: {haproxy_end:?}\n{logs}"
    );
    assert!(
        !controller_end.killed && controller_end.status.is_some_and(|s| s.success()),
        "the controller did not stop cleanly on SIGTERM: {controller_end:?}\n{logs}"
    );
    let reply = read
        .ok()
        .and_then(|r| r.ok())
        .and_then(|_| tugboat_testkit::http::parse(&raw).ok());
    assert!(
        reply
            .as_ref()
            .is_some_and(|r| r.status == 200 && r.service() == Some("web")),
        "the request in flight when the pod was deleted did not complete: {reply:?}\n{logs}"
    );
    let takeover = takeover.unwrap_or_else(|| {
        panic!(
            "the Lease never went to {successor:?} (None: released) after replica A was deleted; holder: {:?}\n{logs}",
            lease_holder(&api, &lease)
        )
    });
    let after_sigterm = takeover.saturating_sub(controller_end.signalled_after);
    assert!(
        after_sigterm <= Duration::from_millis(2500),
        "the Lease went to {successor:?} (None: released) {after_sigterm:?} after replica A's controller got SIGTERM \
         (expected within two seconds: the leader must release it)\n{logs}"
    );
    eprintln!(
        "chart pod: haproxy stopped {:?} after deletion (preStop {pre_stop}s), controller {:?}, Lease to {successor:?} {after_sigterm:?} after SIGTERM",
        haproxy_end.after, controller_end.after
    );

    // Replica B still serves.
    if let Some(b) = b {
        let reply = b
            .pod
            .sandbox
            .get(http_port, HOST, "/after", &[], Duration::from_secs(5))
            .await
            .expect("request through replica B");
        assert_eq!(reply.status, 200, "{reply:?}");
    }
    let denied = api.denied();
    assert!(
        denied.is_empty(),
        "refused requests:\n{}",
        denied.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_values() {
    chart_pod(None, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_values_on_newest_haproxy() {
    chart_pod(None, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_haproxy_2_6() {
    chart_pod(Some("values-haproxy-2.6.yaml"), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_unprivileged_ports_on_newest_haproxy() {
    chart_pod(Some("values-unprivileged-ports.yaml"), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_sysctl_80_443_on_newest_haproxy() {
    chart_pod(Some("values-sysctl-80-443.yaml"), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_root_haproxy_on_newest_haproxy() {
    chart_pod(Some("values-root-haproxy.yaml"), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_cap_net_bind_image_on_newest_haproxy() {
    chart_pod(Some("values-cap-net-bind-image.yaml"), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_watch_namespaces_on_newest_haproxy() {
    chart_pod(Some("values-watch-namespaces.yaml"), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_gateway_api_on_newest_haproxy() {
    chart_pod(Some("values-gateway-api.yaml"), true).await;
}

/// The DaemonSet on the node's network: the one pod on this machine as the node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_daemonset_host_network_on_newest_haproxy() {
    chart_pod(Some("values-daemonset-host-network.yaml"), true).await;
}

/// One TCP service through the values (`tcpServices`): the chart's ConfigMap, the
/// controller's `--tcp-services-configmap` and haproxy's bind at port + 10000.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_service_on_newest_haproxy() {
    let service = format!("tcpServices.{TCP_SERVICE_PORT}=default/banner:{TCP_SERVICE_PORT}");
    chart_pod_with(None, true, &[&service]).await;
}

/// Every values file of examples/helm/ has a test above.
#[test]
fn every_example_values_file_is_run() {
    let source = include_str!("chart_pod.rs");
    let mut files: Vec<String> = std::fs::read_dir(workspace().join("examples/helm"))
        .expect("examples/helm")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    files.sort();
    for file in files {
        assert!(
            source.contains(&format!("Some(\"{file}\")")),
            "examples/helm/{file} has no chart pod test in tests/e2e/chart_pod.rs"
        );
    }
}
