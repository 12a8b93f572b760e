//! The reference of the keys, `docs/annotations.md`, generated from [`KEYS`]; a test
//! fails when the file is out of date.

use std::fmt::Write as _;

use super::keys::KEYS;

/// The reference of every key, as the Markdown of `docs/annotations.md`.
pub fn reference_markdown() -> String {
    let mut out = String::from(
        "<!-- Generated from crates/tugboat-model/src/annotations/keys.rs (KEYS). Do not edit: \
         regenerate with `cargo run -p tugboat -- annotations-reference > docs/annotations.md`. -->\n\n\
         # Annotations and ConfigMap keys\n\n\
         Set a key in the controller's ConfigMap (`--configmap NAMESPACE/NAME`, plain key: a \
         default for everything), on an Ingress (its routes) or on a Service (its backends and \
         the routes to it) as the annotation `tugboat.dev/<key>`; `ingress.kubernetes.io/<key>` \
         is accepted as an alias. Service beats Ingress beats ConfigMap beats the default. A value \
         that does not parse is ignored for that object only, with a warning naming the key, the \
         value and what was expected.\n\n\
         No annotation under `tugboat.dev/`, `ingress.kubernetes.io/` or another controller's \
         prefix (`nginx.ingress.kubernetes.io/`, `haproxy.org/`, `haproxy.com/`, \
         `haproxy-ingress.github.io/`) is ignored silently: one that Tugboat does not read \
         is a warning naming the object and the key (and `tugboat render` exits 1). When \
         such a key restricts access (authentication of any kind, allow and deny lists, \
         client certificates, rate and connection limits, external authentication, web \
         application firewalls), the routes it applies to answer 403 to every request until \
         it is removed or supported, unless the controller runs with \
         `--unsupported-access-keys=ignore` (Helm: `controller.unsupportedAccessKeys`).\n\n\
         | key | scopes | values | default | example | what it does |\n\
         |---|---|---|---|---|---|\n",
    );
    for key in KEYS {
        let mut name = format!("`{}`", key.name);
        for alias in key.aliases {
            let _ = write!(name, " (alias `{alias}`)");
        }
        let scopes: Vec<&str> = key.scopes.iter().map(|s| s.as_str()).collect();
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | `{}` | {} |",
            scopes.join(", "),
            key.values.replace('|', "\\|"),
            key.default.describe().replace('|', "\\|"),
            key.example.replace('|', "\\|"),
            key.help.replace('|', "\\|"),
        );
    }
    out
}
