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
}

impl HaproxyArgs {
    /// Render settings with absolute folders (haproxy resolves relative paths from its
    /// own working directory, not ours).
    pub fn render_settings(&self) -> anyhow::Result<RenderSettings> {
        Ok(RenderSettings {
            config_dir: absolute(&self.config_dir)?,
            lib_dir: absolute(&self.lib_dir)?,
            bind_address: self.bind_address,
            http_port: self.http_port,
            https_port: self.https_port,
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
    let mut config =
        ControllerConfig::new(args.master_socket.clone(), args.haproxy.render_settings()?);
    config.reload_window = args.reload_window;
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
    let settings = args.haproxy.render_settings()?;
    let output = tugboat_model::build(&contents.snapshot);
    let rendered = tugboat_haproxy::plan(None, output.desired, &settings)
        .next
        .files;
    for (path, text) in &rendered.files {
        println!("# ---- {} ----", path.display());
        print!("{text}");
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
