//! The reference of the keys, `docs/annotations.md`, generated from [`KEYS`]; a test
//! fails when the file is out of date.

use std::fmt::Write as _;

use super::keys::{KEYS, KeySpec};
use super::peers::{CHART_VALUES, CONFIG_MAP_KEYS, NOT_SUPPORTED, PEER_FLAGS, PeerKey};
use super::prefixes::Ecosystem;

/// The reference of every key, as the Markdown of `docs/annotations.md`.
pub fn reference_markdown() -> String {
    let mut out = String::from(
        "<!-- Generated from crates/tugboat-model/src/annotations/keys.rs (KEYS). Do not edit: \
         regenerate with `cargo run -p tugboat -- annotations-reference > docs/annotations.md`. -->\n\n\
         # Annotations and ConfigMap keys\n\n\
         Set a key in the controller's ConfigMap (`--configmap NAMESPACE/NAME`, plain key: a \
         default for everything), on an Ingress (its routes) or on a Service (its backends and \
         the routes to it) as the annotation `tugboat.dev/<key>`; `ingress.kubernetes.io/<key>` \
         is accepted as an alias, except where the controllers that used that legacy prefix \
         (HAProxy Ingress, ingress-nginx before 0.9) gave a key another meaning: there theirs \
         applies (`auth-type: basic`, a lone `auth-secret`; see docs/migrating.md). Service beats Ingress beats ConfigMap beats the default. A value \
         that does not parse is ignored for that object only, with a warning naming the key, the \
         value and what was expected; except for a key that restricts access (allow and deny \
         lists, authentication, rate limits): its routes then refuse every request (403) until \
         the value is fixed.\n\n\
         No annotation under `tugboat.dev/`, `ingress.kubernetes.io/` or another controller's \
         prefix (`nginx.ingress.kubernetes.io/`, `haproxy.org/`, `haproxy.com/`, \
         `haproxy-ingress.github.io/`) is ignored silently: one that Tugboat does not read \
         is a warning naming the object and the key (and `tugboat render` exits 1). When \
         such a key restricts access (authentication of any kind, allow and deny lists, \
         client certificates, rate and connection limits, external authentication, web \
         application firewalls), the routes it applies to answer 403 to every request until \
         it is removed or supported, unless the controller runs with \
         `--unsupported-access-keys=ignore` (Helm: `controller.unsupportedAccessKeys`).\n\n\
         The last column gives the names other controllers use for the same key, which \
         Tugboat reads as it (see docs/migrating.md), and what still differs.\n\n\
         | key | scopes | values | default | example | what it does | other controllers |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for key in KEYS {
        let mut name = format!("`{}`", key.name);
        for alias in key.aliases {
            let _ = write!(name, " (alias `{alias}`)");
        }
        let scopes: Vec<&str> = key.scopes.iter().map(|s| s.as_str()).collect();
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | `{}` | {} | {} |",
            scopes.join(", "),
            key.values.replace('|', "\\|"),
            key.default.describe().replace('|', "\\|"),
            key.example.replace('|', "\\|"),
            key.help.replace('|', "\\|"),
            peer_names(key).replace('|', "\\|"),
        );
    }
    out
}

/// The other controllers' names of a key, with their differences.
fn peer_names(key: &KeySpec) -> String {
    let names: Vec<String> = key
        .peers
        .iter()
        .map(|peer| match peer.difference {
            None => format!("`{}{}`", peer.ecosystem.prefix(), peer.name),
            Some(difference) => {
                format!(
                    "`{}{}` (differs: {difference})",
                    peer.ecosystem.prefix(),
                    peer.name
                )
            }
        })
        .collect();
    names.join(", ")
}

/// How another controller's key reads in Tugboat: supported, supported with a
/// difference (named), or not supported (with the reason when known).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// Read as these Tugboat keys, with the same meaning.
    Supported { keys: Vec<&'static str> },
    /// Read as these Tugboat keys; this differs.
    Differs {
        keys: Vec<&'static str>,
        difference: String,
    },
    /// Not read; why, or what to use instead, when known.
    NotSupported { reason: Option<&'static str> },
}

/// How Tugboat reads key `name` of `ecosystem`.
pub fn support(ecosystem: Ecosystem, name: &str) -> Support {
    let aliases: Vec<(&'static KeySpec, &'static PeerKey)> =
        super::keys::find_peer(ecosystem, name);
    if aliases.is_empty() {
        let reason = super::peers::not_supported_reason(ecosystem, name);
        return Support::NotSupported { reason };
    }
    let keys: Vec<&'static str> = aliases.iter().map(|(spec, _)| spec.name).collect();
    let differences: Vec<&str> = aliases.iter().filter_map(|(_, p)| p.difference).collect();
    if differences.is_empty() {
        Support::Supported { keys }
    } else {
        Support::Differs {
            keys,
            difference: differences.join("; "),
        }
    }
}

/// The migration guide, `docs/migrating.md`: for each controller users move from, its
/// keys Tugboat reads (and what differs) and those it does not.
pub fn migrating_markdown() -> String {
    let mut out = String::from(
        "<!-- Generated from crates/tugboat-model/src/annotations/peers.rs. Do not edit: \
         regenerate with `cargo run -p tugboat -- migrating-reference > docs/migrating.md`. -->\n\n\
         # Moving to Tugboat\n\n\
         Tugboat reads the annotations of ingress-nginx (`nginx.ingress.kubernetes.io/`), \
         HAProxy Technologies' controller (`haproxy.org/`, `haproxy.com/`) and HAProxy Ingress \
         (`haproxy-ingress.github.io/`) where their meaning is Tugboat's, so Ingresses move \
         without being rewritten. Check a folder of manifests, or a cluster, before switching:\n\n\
         ```sh\n\
         tugboat migrate --manifests ./ingresses          # or --kubeconfig ~/.kube/config\n\
         tugboat migrate --manifests ./ingresses --output json\n\
         ```\n\n\
         It prints, for each Ingress and key, *supported*, *supported with a difference* (named) \
         or *not supported*, the IngressClass change to make, and the basic-auth Secrets whose \
         `$apr1$` hashes haproxy cannot verify; it exits 1 when anything is not supported.\n\n\
         What happens with a key Tugboat does not read: the Ingress gets a warning (an Event) \
         naming it; when the key restricts access (authentication, allow or deny lists, \
         client certificates, rate limits, external authentication, firewalls) its routes \
         answer 403 until the key is removed or supported, unless the controller runs with \
         `--unsupported-access-keys=ignore`. A restriction whose value Tugboat cannot honour \
         (a digest authentication, an allow list with exceptions) is refused the same way, \
         and so is an ingress-nginx snippet (never run) whose nginx directives restrict \
         access (`deny`, `allow`, `auth_basic`, `return 403`, `limit_req`, ...): the report \
         names the directive.\n\n\
         Manifests still written as `extensions/v1beta1` or `networking.k8s.io/v1beta1` are \
         read as the API server converted them (`serviceName`/`servicePort` as \
         `service.name`/`service.port`, `backend` as `defaultBackend`, `pathType: \
         ImplementationSpecific` where none is set) and reported as v1 ones, with the \
         rewrite to make: Kubernetes 1.22 and later, and Tugboat's `--manifests`, take only \
         `networking.k8s.io/v1`.\n\n\
         Switching: set `spec.ingressClassName: tugboat` on each Ingress (or make Tugboat's \
         IngressClass the default), and replace `$apr1$` hashes with bcrypt ones: \
         `htpasswd -nbB USER PASSWORD`, or `openssl passwd -6 PASSWORD` for SHA-512-crypt.\n",
    );
    for ecosystem in [
        Ecosystem::IngressNginx,
        Ecosystem::HaproxyTech,
        Ecosystem::HaproxyIngress,
        Ecosystem::Legacy,
    ] {
        let _ = write!(
            out,
            "\n## From {ecosystem} (`{}`)\n\n\
             | their key | Tugboat key | support |\n|---|---|---|\n",
            ecosystem.prefix()
        );
        let mut names: Vec<&str> = KEYS
            .iter()
            .flat_map(|k| k.peers.iter())
            .filter(|p| p.ecosystem == ecosystem)
            .map(|p| p.name)
            .chain(
                NOT_SUPPORTED
                    .iter()
                    .filter(|(e, _, _)| *e == ecosystem)
                    .map(|(_, n, _)| *n),
            )
            .collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            let (keys, what) = match support(ecosystem, name) {
                Support::Supported { keys } => (keys, "supported".to_string()),
                Support::Differs { keys, difference } => {
                    (keys, format!("supported with a difference: {difference}"))
                }
                Support::NotSupported { reason } => (
                    Vec::new(),
                    format!("not supported: {}", reason.unwrap_or("no equivalent")),
                ),
            };
            let keys: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
            let _ = writeln!(
                out,
                "| `{name}` | {} | {} |",
                if keys.is_empty() {
                    "-".to_string()
                } else {
                    keys.join(", ")
                },
                what.replace('|', "\\|")
            );
        }
        out.push_str(if ecosystem == Ecosystem::Legacy {
            "\nHAProxy Ingress documents this prefix as its backward-compatible one, and \
             ingress-nginx used it before 0.9: the keys above are read with their meaning, \
             never more open than theirs. Any other key under this prefix is read as \
             Tugboat's key of that name (docs/annotations.md); one Tugboat does not have gets \
             a warning, and fails closed when it restricts access, as does an ingress-nginx \
             snippet under this prefix whose directives restrict access.\n"
        } else {
            "\nAny other key under this prefix is not supported: it gets a warning, and \
             fails closed when it restricts access; a snippet of raw configuration (never \
             run) restricts access when one of its directives does (`deny all;`, \
             `http-request deny`, `maxconn`, ...; in doubt, it does).\n"
        });
        out.push_str(&config_map_keys_markdown(ecosystem));
        out.push_str(&chart_values_markdown(ecosystem));
        out.push_str(&controller_flags_markdown(ecosystem));
    }
    out
}

/// The table of `ecosystem`'s controller flags and Tugboat's answer to each
/// ([`PEER_FLAGS`]); empty when there are none.
fn controller_flags_markdown(ecosystem: Ecosystem) -> String {
    let rows: Vec<String> = PEER_FLAGS
        .iter()
        .filter(|(e, _, _)| *e == ecosystem)
        .map(|(_, flag, answer)| format!("| `{flag}` | {} |\n", answer.replace('|', "\\|")))
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "\n### Controller flags\n\n\
         | their flag | Tugboat |\n|---|---|\n{}",
        rows.concat()
    )
}

/// The keys of `ecosystem`'s own ConfigMap that Tugboat's ConfigMap reads
/// ([`CONFIG_MAP_KEYS`]); empty when there are none.
fn config_map_keys_markdown(ecosystem: Ecosystem) -> String {
    let rows: Vec<String> = CONFIG_MAP_KEYS
        .iter()
        .filter(|k| k.ecosystem == ecosystem)
        .map(|k| {
            let mut keys = vec![format!("`{}`", k.key)];
            keys.extend(
                k.implies
                    .iter()
                    .map(|(key, value)| format!("`{key}: \"{value}\"`")),
            );
            format!(
                "| `{}` | {} | supported with a difference: {} |\n",
                k.name,
                keys.join(", "),
                k.difference.replace('|', "\\|")
            )
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "\n### ConfigMap keys\n\n\
         Their ConfigMap's keys that Tugboat's ConfigMap (`--configmap`) reads as they are:\n\n\
         | their key | Tugboat keys | support |\n|---|---|---|\n{}",
        rows.concat()
    )
}

/// The table of `ecosystem`'s Helm chart values and Tugboat's chart values
/// ([`CHART_VALUES`]); empty when there are none.
fn chart_values_markdown(ecosystem: Ecosystem) -> String {
    let rows: Vec<String> = CHART_VALUES
        .iter()
        .filter(|v| v.ecosystem == ecosystem)
        .map(|v| {
            let ours = if v.ours == "-" {
                "-".to_string()
            } else {
                format!("`{}`", v.ours)
            };
            format!(
                "| `{}` | {ours} | {} |\n",
                v.theirs,
                v.note.replace('|', "\\|")
            )
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "\n### Helm chart values\n\n\
         Their chart's values for running on the nodes, TCP services and the client's \
         address, and those of Tugboat's chart (deploy/helm/tugboat):\n\n\
         | their value | Tugboat's value | notes |\n|---|---|---|\n{}",
        rows.concat()
    )
}
