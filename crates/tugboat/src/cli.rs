//! The command line: `tugboat run` (the controller) and `tugboat render` (print what
//! the controller would write for a folder of manifests).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};
use tokio::sync::watch;
use tugboat_haproxy::RenderSettings;
use tugboat_model::{ObjectKey, Settings};

use crate::controller::{self, ControllerConfig};
use crate::logging::{self, LogFormat};

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
    Run(RunArgs),
    /// Print the haproxy config and maps the controller would write for a folder of
    /// manifests; exit non-zero when an object has a problem.
    Render(RenderArgs),
    /// Print the reference of the annotation and ConfigMap keys (docs/annotations.md).
    AnnotationsReference,
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
    /// Allow Ingresses to use ExternalName Services (they can send traffic to any host).
    #[arg(long)]
    pub allow_external_name: bool,
    /// Redirect plain HTTP to HTTPS (308) for hosts listed in an Ingress' spec.tls.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub ssl_redirect: bool,
}

impl ModelArgs {
    pub fn settings(&self, now: i64) -> Settings {
        Settings {
            default_backend_service: self.default_backend_service.clone(),
            default_certificate: self.default_ssl_certificate.clone(),
            error_pages: self.configmap_errorfiles.clone(),
            config_map: self.configmap.clone(),
            allow_external_name: self.allow_external_name,
            ssl_redirect: self.ssl_redirect,
            now,
        }
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
            run(args)
        }
        Command::Render(args) => render(&args),
        Command::AnnotationsReference => {
            print!("{}", tugboat_model::annotations::reference_markdown());
            Ok(ExitCode::SUCCESS)
        }
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
    let Some(manifests) = args.manifests.clone() else {
        bail!(
            "no source of objects: pass --manifests DIR (the Kubernetes API source is not \
             available in this version)"
        );
    };
    if !manifests.is_dir() {
        bail!("--manifests {}: not a folder", manifests.display());
    }
    let mut config = ControllerConfig::new(
        args.master_socket.clone(),
        args.haproxy.render_settings(true)?,
    );
    config.reload_window = args.reload_window;
    config.model = args.model.settings(0);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        tokio::select! {
            result = controller::run_with_manifests(config, manifests, watch::channel(Default::default()).0) => result?,
            _ = shutdown_signal() => tracing::info!("shutting down"),
        }
        Ok(ExitCode::SUCCESS)
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

fn render(args: &RenderArgs) -> anyhow::Result<ExitCode> {
    let contents = tugboat_kube::load_folder(&args.manifests)
        .with_context(|| format!("cannot read --manifests {}", args.manifests.display()))?;
    let settings = args.haproxy.render_settings(false)?;
    let output = tugboat_model::build(&contents.snapshot, &args.model.settings(crate::tls::now()));
    let rendered = tugboat_haproxy::plan(None, output.desired, &settings)
        .next
        .files;
    for (path, text) in &rendered.files {
        println!("# ---- {} ----", path.display());
        if settings.is_certificate(path) {
            // Private keys are not printed.
            println!(
                "# certificate and private key ({} bytes, not shown)",
                text.len()
            );
        } else {
            print!("{text}");
        }
    }
    let problems: Vec<String> = contents
        .problems
        .iter()
        .map(ToString::to_string)
        .chain(output.problems.iter().map(ToString::to_string))
        .collect();
    for problem in &problems {
        eprintln!("error: {problem}");
    }
    if problems.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "tugboat: {} problem(s) found; the objects (or parts) named above are left out",
            problems.len()
        );
        Ok(ExitCode::FAILURE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("5h").is_err());
    }
}
