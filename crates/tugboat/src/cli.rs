//! The command line: `tugboat run` (the controller, on the Kubernetes API or a folder
//! of manifests), `tugboat render` (print what the controller would write for a folder
//! of manifests) and `tugboat status` (the state of a running controller).

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};
use tokio::sync::watch;
use tugboat_haproxy::RenderSettings;
use tugboat_haproxy::blocking::blocking;
use tugboat_model::annotations::UnsupportedAccess;
use tugboat_model::{ObjectKey, Settings};

use tugboat_kube::api_source::ApiSourceConfig;
use tugboat_kube::status::{PublishTarget, StatusPace};
use tugboat_model::class::ClassFilter;

use crate::admin::{self, AdminState};
use crate::cluster::{self, ClusterOptions, Election};
use crate::controller::{self, ControllerConfig, ControllerStatus};
use crate::logging::{self, LogFormat};
use crate::metrics::Metrics;
use crate::profiling::Profiling;

#[derive(Debug, Parser)]
#[command(
    name = "tugboat",
    version,
    about = "Kubernetes ingress controller for an external haproxy"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the controller: watch the objects, write haproxy's files, steer haproxy.
    Run(Box<RunArgs>),
    /// Print the haproxy config and maps the controller would write for a folder of
    /// manifests; exit non-zero when an object has a problem.
    Render(Box<RenderArgs>),
    /// Print the reference of the annotation and ConfigMap keys (docs/annotations.md).
    AnnotationsReference,
    /// Print the migration guide from other controllers (docs/migrating.md).
    MigratingReference,
    /// Report what Tugboat does with Ingresses written for ingress-nginx or the HAProxy
    /// controllers: each key supported, supported with a difference or not supported,
    /// the IngressClass change, the Secrets to fix. Exits 1 when anything is not
    /// supported.
    Migrate(crate::migrate::MigrateArgs),
    /// Print the state of the controller running at `--address` on one screen: haproxy,
    /// the last apply and reload, problems, leader, watches. Exits 1 when it cannot be
    /// reached or is not ready.
    Status(crate::status::StatusArgs),
}

/// What haproxy's files look like and where they go.
#[derive(Debug, Clone, Args)]
pub struct HaproxyArgs {
    /// The folder haproxy loads with `-f` (haproxy.cfg, maps/).
    #[arg(long, default_value = "/etc/haproxy")]
    pub config_dir: PathBuf,
    /// Certificates and crt-lists.
    #[arg(long, default_value = "/var/lib/haproxy")]
    pub lib_dir: PathBuf,
    /// Port haproxy serves HTTP on.
    #[arg(long, default_value_t = 8080)]
    pub http_port: u16,
    /// Port haproxy serves HTTPS on.
    #[arg(long, default_value_t = 8443)]
    pub https_port: u16,
    /// Address haproxy binds.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: IpAddr,
    /// Port of haproxy's own frontend: /healthz (for probes), /metrics (Prometheus),
    /// /stats. 0 leaves it out.
    #[arg(long, default_value_t = 1024)]
    pub stats_port: u16,
    /// Add a new backend at runtime, with no reload, where haproxy can (3.4 and later,
    /// found out from haproxy itself; see docs/haproxy-series.md). `false` reloads for
    /// every new backend, as on earlier series.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub dynamic_backends: bool,
}

impl HaproxyArgs {
    /// The ports haproxy binds for itself, with what binds them: a TCP service may not
    /// take one.
    pub fn taken_ports(&self) -> std::collections::BTreeMap<u16, String> {
        let mut ports = std::collections::BTreeMap::from([
            (
                self.http_port,
                "haproxy's HTTP port (--http-port)".to_string(),
            ),
            (
                self.https_port,
                "haproxy's HTTPS port (--https-port)".to_string(),
            ),
        ]);
        if self.stats_port != 0 {
            ports.insert(
                self.stats_port,
                "haproxy's stats port (--stats-port)".into(),
            );
        }
        ports
    }
}

/// How objects become the desired state.
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// Service (NAMESPACE/NAME, its first port) for requests no rule matches, when no
    /// Ingress sets a defaultBackend. Default: haproxy answers 404.
    #[arg(long, value_parser = parse_object_key)]
    pub default_backend_service: Option<ObjectKey>,
    /// TLS Secret (NAMESPACE/NAME) served for unmatched SNI. Default: a certificate the
    /// controller generates.
    #[arg(long, value_parser = parse_object_key)]
    pub default_ssl_certificate: Option<ObjectKey>,
    /// ConfigMap (NAMESPACE/NAME) of error pages: keys are status codes, values the page
    /// (HTML, or a full HTTP response).
    #[arg(long, value_parser = parse_object_key)]
    pub configmap_errorfiles: Option<ObjectKey>,
    /// The controller's ConfigMap (NAMESPACE/NAME): defaults for every annotation key
    /// (see docs/annotations.md).
    #[arg(long, value_parser = parse_object_key)]
    pub configmap: Option<ObjectKey>,
    /// ConfigMap (NAMESPACE/NAME) of TCP services in ingress-nginx's format: key = the
    /// port clients connect to, value `namespace/service:port[:PROXY][:PROXY]`. haproxy
    /// binds port P at P + 10000 (docs/tcp-services.md).
    #[arg(long, value_parser = parse_object_key)]
    pub tcp_services_configmap: Option<ObjectKey>,
    /// ConfigMap (NAMESPACE/NAME) of TCP services in haproxytech's format: key = the
    /// port, value `namespace/service:port`. haproxy binds port P at P + 10000
    /// (docs/tcp-services.md).
    #[arg(long, value_parser = parse_object_key)]
    pub configmap_tcp_services: Option<ObjectKey>,
    /// Allow Ingresses to use ExternalName Services (they can send traffic to any host).
    #[arg(long)]
    pub allow_external_name: bool,
    /// Allow raw haproxy configuration snippets (`global-config-snippet`,
    /// `backend-config-snippet`). Even then, directives that read files, load code or run
    /// programs are refused (see docs/annotations.md).
    #[arg(long)]
    pub allow_snippets: bool,
    /// What the routes of an Ingress (or of a Service) do when it sets an annotation that
    /// restricts access (authentication, allow or deny lists, client certificates, rate
    /// limits, external authentication) and that Tugboat does not support, under its own
    /// prefix or another controller's: `deny` answers 403 to every request until the key
    /// is removed or supported (fail closed); `ignore` serves them without the
    /// restriction. Either way the object gets a problem naming the key.
    #[arg(long, default_value = "deny", value_parser = parse_unsupported_access)]
    pub unsupported_access_keys: UnsupportedAccess,
    /// Redirect plain HTTP to HTTPS (308) for hosts listed in an Ingress' spec.tls.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub ssl_redirect: bool,
    /// Serve the Gateway API (GatewayClass, Gateway, HTTPRoute, ReferenceGrant; see
    /// docs/gateway-api.md). Its CRDs are the cluster's to install.
    #[arg(long)]
    pub enable_gateway_api: bool,
    /// Serve the GatewayClasses whose spec.controllerName is this.
    #[arg(long, default_value = tugboat_model::gateway::DEFAULT_CONTROLLER_NAME)]
    pub gateway_controller_name: String,
    /// The ports (and ranges: `8080,9000-9010`) on which a Gateway listener may get a bind
    /// of its own, besides 80 and 443 (the HTTP and HTTPS binds). haproxy binds listener
    /// port P at P + 10000 (docs/gateway-api.md). Default: none.
    #[arg(long, default_value = "", value_parser = tugboat_model::ports::parse_port_list)]
    pub gateway_listener_ports: std::collections::BTreeSet<u16>,
}

impl ModelArgs {
    /// The model's settings; `haproxy`'s ports are where Gateway listeners map.
    pub fn settings(&self, haproxy: &HaproxyArgs, now: i64) -> Settings {
        Settings {
            default_backend_service: self.default_backend_service.clone(),
            default_certificate: self.default_ssl_certificate.clone(),
            error_pages: self.configmap_errorfiles.clone(),
            config_map: self.configmap.clone(),
            allow_external_name: self.allow_external_name,
            ssl_redirect: self.ssl_redirect,
            allow_snippets: self.allow_snippets,
            unsupported_access: self.unsupported_access_keys,
            gateway: self.enable_gateway_api.then(|| {
                tugboat_model::gateway::GatewaySettings::new(
                    self.gateway_controller_name.clone(),
                    haproxy.http_port,
                    haproxy.https_port,
                )
                .with_listener_ports(self.gateway_listener_ports.clone())
            }),
            tcp_services: tugboat_model::build::TcpServicesSettings {
                nginx: self.tcp_services_configmap.clone(),
                haproxytech: self.configmap_tcp_services.clone(),
                taken_ports: haproxy.taken_ports(),
            },
            now,
        }
    }
}

/// Parses `deny` or `ignore`.
fn parse_unsupported_access(text: &str) -> Result<UnsupportedAccess, String> {
    match text {
        "deny" => Ok(UnsupportedAccess::Deny),
        "ignore" => Ok(UnsupportedAccess::Ignore),
        _ => Err(format!("'{text}': expected deny or ignore")),
    }
}

/// Parses `NAMESPACE/NAME`.
fn parse_object_key(text: &str) -> Result<ObjectKey, String> {
    let (namespace, name) = text
        .split_once('/')
        .ok_or_else(|| format!("'{text}': expected NAMESPACE/NAME"))?;
    tugboat_model::validate::dns_label(namespace).map_err(|e| e.to_string())?;
    tugboat_model::validate::dns_subdomain(name).map_err(|e| e.to_string())?;
    Ok(ObjectKey::new(namespace, name))
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// haproxy's master CLI socket (haproxy -S).
    #[arg(long)]
    pub master_socket: PathBuf,
    /// Take the objects from this folder of YAML manifests, followed live, instead of the
    /// Kubernetes API.
    #[arg(long)]
    pub manifests: Option<PathBuf>,
    #[command(flatten)]
    pub haproxy: HaproxyArgs,
    #[command(flatten)]
    pub model: ModelArgs,
    /// How long changes that need a reload are gathered into one reload (e.g. 500ms,
    /// 2s; 0 reloads at once). Changes haproxy takes at runtime never wait for it.
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    pub reload_window: Duration,
    /// Log format on stdout.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Port of the admin server: /healthz, /readyz, /metrics.
    #[arg(long, default_value_t = 6060)]
    pub controller_port: u16,
    /// Address the admin server binds.
    #[arg(long, default_value = "0.0.0.0")]
    pub controller_address: IpAddr,
    /// Serve CPU profiles and heap figures under /debug/pprof/ on the admin server
    /// (ingress-nginx's --profiling; haproxytech's --pprof is an alias). Off, they answer
    /// 404 and nothing is sampled.
    #[arg(long, alias = "pprof")]
    pub profiling: bool,
}

/// Which Ingresses are served, on the cluster and in a folder of manifests alike.
#[derive(Debug, Clone, Args)]
pub struct ClassArgs {
    /// Serve the IngressClasses whose spec.controller is this.
    #[arg(long, default_value = tugboat_model::class::DEFAULT_CONTROLLER_CLASS)]
    pub controller_class: String,
    /// Serve only the IngressClass of this name.
    #[arg(long)]
    pub ingress_class: Option<String>,
    /// Also serve Ingresses that name no class when no default IngressClass exists (a
    /// folder of manifests without any IngressClass implies it).
    #[arg(long)]
    pub watch_ingress_without_class: bool,
}

impl ClassArgs {
    pub fn filter(&self) -> ClassFilter {
        ClassFilter {
            controller: self.controller_class.clone(),
            only_class: self.ingress_class.clone(),
            watch_without_class: self.watch_ingress_without_class,
        }
    }
}

/// Where the Kubernetes API is and what to take from it (the class flags also apply to
/// `--manifests`).
#[derive(Debug, Clone, Args)]
pub struct ClusterArgs {
    /// kubeconfig file to reach the API server; default: `KUBECONFIG`, then the
    /// in-cluster service account.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    #[command(flatten)]
    pub class: ClassArgs,
    /// Watch only this namespace (repeatable, or a comma list); default: all.
    #[arg(long, value_delimiter = ',')]
    pub watch_namespace: Vec<String>,
    /// Name of the leader-election Lease, in the controller's own namespace.
    #[arg(long, default_value = "tugboat-leader")]
    pub election_id: String,
    /// Publish this Service's addresses in Ingress status, NAMESPACE/NAME.
    #[arg(long, value_parser = parse_object_key)]
    pub publish_service: Option<ObjectKey>,
    /// Publish these addresses in Ingress status: IPs or host names (repeatable, or a
    /// comma list).
    #[arg(long, value_delimiter = ',')]
    pub publish_address: Vec<String>,
}

/// The config with the hashes of userlist passwords replaced: they come from Secrets.
fn hide_password_hashes(config: &str) -> String {
    config
        .lines()
        .map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["user", name, "password", _] => {
                    format!("    user {name} password <hidden: from a Secret>\n")
                }
                _ => format!("{line}\n"),
            }
        })
        .collect()
}

/// Parses `250ms`, `2s`, `1m` or a plain number of seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .map_or((text, "s"), |at| text.split_at(at));
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a duration: expected e.g. 500ms, 2s or 1m"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        _ => return Err(format!("'{text}': unknown unit '{unit}' (use ms, s or m)")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("'{text}': {e}"))
}

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// The folder of YAML manifests to render.
    #[arg(long)]
    pub manifests: PathBuf,
    #[command(flatten)]
    pub haproxy: HaproxyArgs,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub class: ClassArgs,
}

impl HaproxyArgs {
    /// Render settings with absolute folders (haproxy resolves relative paths from its
    /// own working directory, not ours), and the controller's own certificate (kept in
    /// the lib folder when `store_certificate`, made afresh otherwise).
    pub fn render_settings(&self, store_certificate: bool) -> anyhow::Result<RenderSettings> {
        let lib_dir = absolute(&self.lib_dir)?;
        let fallback_certificate = if store_certificate {
            crate::tls::fallback_certificate(&lib_dir, crate::tls::now())?
        } else {
            let dir = tempfile::tempdir().context("cannot make a temporary folder")?;
            crate::tls::fallback_certificate(dir.path(), crate::tls::now())?
        };
        Ok(RenderSettings {
            config_dir: absolute(&self.config_dir)?,
            lib_dir,
            bind_address: self.bind_address,
            http_port: self.http_port,
            https_port: self.https_port,
            stats_port: self.stats_port,
            fallback_certificate,
            dynamic_backends: self.dynamic_backends,
        })
    }
}

fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("cannot resolve {}", path.display()))
}

/// Runs a parsed command line; the exit code tells success.
pub fn main(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Run(args) => {
            logging::init(args.log_format);
            run(*args)
        }
        Command::Render(args) => render(&args),
        Command::AnnotationsReference => {
            crate::command_edges::print_out(&tugboat_model::annotations::reference_markdown());
            Ok(ExitCode::SUCCESS)
        }
        Command::MigratingReference => {
            crate::command_edges::print_out(&tugboat_model::annotations::migrating_markdown());
            Ok(ExitCode::SUCCESS)
        }
        Command::Migrate(args) => crate::migrate::run(&args),
        Command::Status(args) => crate::status::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("tugboat: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    if let Some(manifests) = &args.manifests
        && !manifests.is_dir()
    {
        bail!("--manifests {}: not a folder", manifests.display());
    }
    let metrics = Arc::new(Metrics::new());
    let mut config = ControllerConfig::new(
        args.master_socket.clone(),
        args.haproxy.render_settings(true)?,
    );
    config.reload_window = args.reload_window;
    config.model = args.model.settings(&args.haproxy, 0);
    config.model.tcp_services.taken_ports.insert(
        args.controller_port,
        "the controller's port (--controller-port)".into(),
    );
    config.metrics = Some(metrics.clone());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let admin_address = SocketAddr::new(args.controller_address, args.controller_port);
        let listener = tokio::net::TcpListener::bind(admin_address)
            .await
            .with_context(|| format!("cannot listen on --controller-port {admin_address}"))?;
        let (status, status_rx) = watch::channel(ControllerStatus::default());
        let admin = admin::serve(
            listener,
            AdminState {
                metrics,
                status: status_rx,
                master_socket: args.master_socket.clone(),
                profiling: Profiling::new(args.profiling),
            },
        );
        let controller = async {
            match &args.manifests {
                Some(manifests) => {
                    let class = args.cluster.class.filter();
                    controller::run_with_manifests(config, manifests.clone(), class, status).await
                }
                None => {
                    let client = crate::command_edges::kube_client(args.cluster.kubeconfig.as_deref()).await?;
                    let pod = blocking(PodFiles::read).await;
                    let options =
                        cluster_options(&args.cluster, &args.model, &args.haproxy, &client, pod)?;
                    tracing::info!(
                        namespaces = ?options.source.namespaces,
                        controller_class = %options.source.class.controller,
                        lease = %format!("{}/{}", options.election.namespace, options.election.lease_name),
                        identity = %options.election.identity,
                        "watching the Kubernetes API"
                    );
                    // On SIGTERM the cluster side stops itself, releasing the leader
                    // Lease first.
                    let shutdown = async {
                        shutdown_signal().await;
                        tracing::info!("shutting down");
                    };
                    cluster::run_with_cluster_until(config, client, options, status, shutdown)
                        .await
                }
            }
        };
        // With the API source, the controller future handles SIGTERM itself (it must
        // release the Lease before the process ends).
        let api_source = args.manifests.is_none();
        tokio::select! {
            result = controller => result?,
            () = admin => {}
            () = shutdown_signal(), if !api_source => tracing::info!("shutting down"),
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// File holding the pod's namespace in a service-account mount.
const SERVICE_ACCOUNT_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// What the pod's own files say of it, when `POD_NAMESPACE` and `POD_NAME` do not:
/// each trimmed, `None` when missing or empty.
struct PodFiles {
    namespace: Option<String>,
    hostname: Option<String>,
}

impl PodFiles {
    /// Reads them. Blocking: the async caller runs it through
    /// [`blocking`](tugboat_haproxy::blocking::blocking).
    #[allow(
        clippy::disallowed_methods,
        reason = "its async caller runs it through the blocking helper"
    )]
    fn read() -> Self {
        let read = |path| {
            std::fs::read_to_string(path)
                .ok()
                .map(|text| text.trim().to_string())
                .filter(|text| !text.is_empty())
        };
        Self {
            namespace: read(SERVICE_ACCOUNT_NAMESPACE),
            hostname: read("/proc/sys/kernel/hostname"),
        }
    }
}

fn cluster_options(
    args: &ClusterArgs,
    model: &ModelArgs,
    haproxy: &HaproxyArgs,
    client: &kube::Client,
    pod: PodFiles,
) -> anyhow::Result<ClusterOptions> {
    let namespace = std::env::var("POD_NAMESPACE")
        .ok()
        .filter(|ns| !ns.is_empty())
        .or(pod.namespace)
        .unwrap_or_else(|| client.default_namespace().to_string());
    let identity = std::env::var("POD_NAME")
        .ok()
        .filter(|name| !name.is_empty())
        .or(pod.hostname)
        .context("cannot tell this replica's identity: set POD_NAME")?;
    let mut namespaces = args.watch_namespace.clone();
    namespaces.retain(|ns| !ns.trim().is_empty());
    namespaces.sort();
    namespaces.dedup();
    Ok(ClusterOptions {
        source: ApiSourceConfig {
            namespaces,
            class: args.class.filter(),
            settings: model.settings(haproxy, 0),
            ..ApiSourceConfig::default()
        },
        election: Election {
            lease_name: args.election_id.clone(),
            namespace,
            identity,
            lease_duration: Duration::from_secs(15),
        },
        publish: PublishTarget {
            service: args.publish_service.clone(),
            addresses: args.publish_address.clone(),
        },
        status_interval: Duration::from_secs(30),
        status_pace: StatusPace::default(),
    })
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// What `tugboat render` prints: the files on stdout, problems and notes on stderr.
#[derive(Debug, Clone, Default)]
pub struct RenderOutput {
    /// The files, each after a `# ---- PATH ----` line; keys and password hashes hidden.
    pub files: String,
    /// Problems of the objects (the command then exits 1).
    pub problems: Vec<String>,
    /// Ingresses of the folder that are not served, and why.
    pub not_served: Vec<String>,
}

/// Renders a folder of manifests as the controller would serve it.
pub fn render_folder(args: &RenderArgs) -> anyhow::Result<RenderOutput> {
    let contents = tugboat_kube::load_folder(&args.manifests)
        .with_context(|| format!("cannot read --manifests {}", args.manifests.display()))?;
    let settings = args.haproxy.render_settings(false)?;
    let model = args.model.settings(&args.haproxy, crate::tls::now());
    let served = tugboat_kube::manifests::served(&contents, &args.class.filter(), &model);
    let output = tugboat_model::build(&served.snapshot, &model);
    let rendered = tugboat_haproxy::plan(None, output.desired, &settings)
        .next
        .files;
    let mut files = String::new();
    for (path, text) in &rendered.files {
        files.push_str(&format!("# ---- {} ----\n", path.display()));
        if settings.is_certificate(path) {
            // Private keys are not printed.
            files.push_str(&format!(
                "# certificate and private key ({} bytes, not shown)\n",
                text.len()
            ));
        } else {
            files.push_str(&hide_password_hashes(text));
        }
    }
    Ok(RenderOutput {
        files,
        problems: contents
            .problems
            .iter()
            .map(ToString::to_string)
            .chain(output.problems.iter().map(ToString::to_string))
            .collect(),
        not_served: served
            .not_served
            .iter()
            .map(|(ingress, why)| format!("Ingress {ingress} is not served: {why}"))
            .collect(),
    })
}

fn render(args: &RenderArgs) -> anyhow::Result<ExitCode> {
    let output = render_folder(args)?;
    crate::command_edges::print_out(&output.files);
    for note in &output.not_served {
        eprintln!("note: {note}");
    }
    for problem in &output.problems {
        eprintln!("error: {problem}");
    }
    if output.problems.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "tugboat: {} problem(s) found; the objects (or parts) named above are left out",
            output.problems.len()
        );
        Ok(ExitCode::FAILURE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_hides_password_hashes() {
        let config = "userlist u1\n    user alice password $6$salt$hash\nbackend b\n";
        let shown = hide_password_hashes(config);
        assert!(!shown.contains("$6$"), "{shown}");
        assert!(shown.contains("user alice password <hidden"));
        assert!(shown.contains("backend b\n"));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("5h").is_err());
    }

    fn run_args(args: &[&str]) -> RunArgs {
        let cli = Cli::try_parse_from(
            ["tugboat", "run", "--master-socket", "/run/master.sock"]
                .iter()
                .chain(args),
        )
        .expect("valid command line");
        match cli.command {
            Command::Run(args) => *args,
            _ => panic!("expected run"),
        }
    }

    #[test]
    fn kubernetes_flags_keep_their_documented_names_and_defaults() {
        let defaults = run_args(&[]);
        assert_eq!(
            defaults.cluster.class.controller_class,
            "tugboat.dev/ingress"
        );
        assert_eq!(defaults.cluster.election_id, "tugboat-leader");
        assert_eq!(defaults.controller_port, 6060);
        assert!(defaults.cluster.watch_namespace.is_empty());
        assert!(!defaults.cluster.class.watch_ingress_without_class);

        let args = run_args(&[
            "--kubeconfig=/k",
            "--configmap=tugboat/settings",
            "--controller-class=example.com/x",
            "--ingress-class=public",
            "--watch-ingress-without-class",
            "--watch-namespace=a",
            "--watch-namespace=b,c",
            "--election-id=lead",
            "--publish-service=tugboat/lb",
            "--publish-address=192.0.2.1,lb.example.com",
            "--publish-address=192.0.2.2",
            "--controller-port=7070",
        ]);
        let cluster = &args.cluster;
        assert_eq!(cluster.kubeconfig.as_deref(), Some(Path::new("/k")));
        assert_eq!(
            args.model.configmap,
            Some(ObjectKey::new("tugboat", "settings"))
        );
        assert_eq!(cluster.class.controller_class, "example.com/x");
        assert_eq!(cluster.class.ingress_class.as_deref(), Some("public"));
        assert!(cluster.class.watch_ingress_without_class);
        assert_eq!(cluster.watch_namespace, ["a", "b", "c"]);
        assert_eq!(cluster.election_id, "lead");
        assert_eq!(
            cluster.publish_service,
            Some(ObjectKey::new("tugboat", "lb"))
        );
        assert_eq!(
            cluster.publish_address,
            ["192.0.2.1", "lb.example.com", "192.0.2.2"]
        );
        assert_eq!(args.controller_port, 7070);
    }

    #[test]
    fn profiling_is_off_by_default_and_takes_the_peers_names() {
        assert!(!run_args(&[]).profiling);
        assert!(run_args(&["--profiling"]).profiling);
        assert!(run_args(&["--pprof"]).profiling);
    }

    #[test]
    fn render_takes_the_same_class_flags_as_run() {
        let cli = Cli::try_parse_from([
            "tugboat",
            "render",
            "--manifests",
            "/m",
            "--controller-class=example.com/x",
            "--ingress-class=public",
            "--watch-ingress-without-class",
        ])
        .expect("valid command line");
        let Command::Render(args) = cli.command else {
            panic!("expected render");
        };
        assert_eq!(
            args.class.filter(),
            ClassFilter {
                controller: "example.com/x".into(),
                only_class: Some("public".into()),
                watch_without_class: true,
            }
        );
    }

    #[test]
    fn object_keys_need_a_namespace_and_a_name() {
        assert!(parse_object_key("ns/name").is_ok());
        for bad in ["name", "/name", "ns/", "a/b/c"] {
            assert!(parse_object_key(bad).is_err(), "{bad}");
        }
    }
}
