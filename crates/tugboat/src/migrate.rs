//! `tugboat migrate`: reads Ingresses written for another controller from a folder of
//! manifests or from a cluster and prints what Tugboat does with each of their keys
//! (see [`tugboat_model::migration`]); exits 1 when anything is not supported.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, ValueEnum};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams};
use tugboat_model::migration::{self, Report};
use tugboat_model::objects::Ingress;
use tugboat_model::{ObjectKey, Objects};

/// How the report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// One line per Ingress and key, for people.
    Text,
    /// The report as JSON, for scripts.
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct MigrateArgs {
    /// Read the Ingresses (and the basic-auth Secrets they name) from this folder of
    /// YAML manifests instead of a cluster.
    #[arg(long, conflicts_with = "kubeconfig")]
    pub manifests: Option<PathBuf>,
    /// kubeconfig file of the cluster to read; default: `KUBECONFIG`, then
    /// `~/.kube/config`, then the in-cluster service account.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Only the Ingresses of this namespace (cluster only); default: all.
    #[arg(long)]
    pub namespace: Option<String>,
    /// The name of Tugboat's IngressClass, for the class change to make.
    #[arg(long, default_value = "tugboat")]
    pub ingress_class: String,
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

/// The report of the Ingresses the arguments name.
pub fn report(args: &MigrateArgs) -> anyhow::Result<Report> {
    let mut old_versions = BTreeMap::new();
    let (ingresses, secrets) = match &args.manifests {
        Some(folder) => {
            let contents = tugboat_kube::load_folder(folder)
                .with_context(|| format!("cannot read --manifests {}", folder.display()))?;
            let mut ingresses = contents.snapshot.ingresses;
            // Ingresses of an old API version are read as networking.k8s.io/v1 and
            // reported with the rewrite to make (a v1 one of the same name wins).
            for (key, (version, ingress)) in contents.old_ingresses {
                if !ingresses.contains_key(&key) {
                    ingresses.insert(key.clone(), ingress);
                    old_versions.insert(key, version);
                }
            }
            for problem in &contents.problems {
                let reported = problem.field.as_deref() == Some("apiVersion")
                    && old_versions.keys().any(|key| {
                        problem.object.as_deref()
                            == Some(format!("Ingress {}/{}", key.namespace, key.name).as_str())
                    });
                if !reported {
                    eprintln!("warning: {problem}");
                }
            }
            (ingresses, contents.snapshot.secrets)
        }
        None => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start the async runtime")?;
            runtime.block_on(from_cluster(args))?
        }
    };
    let mut report = migration::report(&ingresses, &secrets, &args.ingress_class);
    report.note_api_versions(&old_versions);
    Ok(report)
}

/// The Ingresses of the cluster, and the basic-auth Secrets they name.
async fn from_cluster(args: &MigrateArgs) -> anyhow::Result<(Objects<Ingress>, Objects<Secret>)> {
    let client = crate::command_edges::kube_client(args.kubeconfig.as_deref()).await?;
    let api: Api<k8s_openapi::api::networking::v1::Ingress> = match &args.namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    };
    let list = api
        .list(&ListParams::default())
        .await
        .context("cannot list the Ingresses")?;
    let ingresses: Objects<Ingress> = list
        .items
        .into_iter()
        .filter_map(|ingress| {
            let key = ObjectKey::new(
                ingress.metadata.namespace.as_deref()?,
                ingress.metadata.name.as_deref()?,
            );
            Some((key, Arc::new(Ingress::from(ingress))))
        })
        .collect();
    let mut secrets = Objects::default();
    for key in migration::auth_secrets(&ingresses) {
        let api: Api<Secret> = Api::namespaced(client.clone(), &key.namespace);
        let secret = api
            .get_opt(&key.name)
            .await
            .with_context(|| format!("cannot read Secret {}/{}", key.namespace, key.name))?;
        if let Some(secret) = secret {
            secrets.insert(key, Arc::new(secret));
        }
    }
    Ok((ingresses, secrets))
}

/// Prints the report; exit 1 when anything is not supported.
pub fn run(args: &MigrateArgs) -> anyhow::Result<ExitCode> {
    let report = report(args)?;
    let text = match args.output {
        Output::Text => migration::text(&report),
        Output::Json => {
            serde_json::to_string_pretty(&report).context("cannot write the report")? + "\n"
        }
    };
    crate::command_edges::print_out(&text);
    Ok(if report.all_supported() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
