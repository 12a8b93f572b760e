//! What the fuzz targets share: the manifests pipeline as `tugboat render` runs it
//! (folder text -> served snapshot -> model -> haproxy files), and the checks every
//! rendered file must pass whatever the input was.
//!
//! The checks are the properties of the output that hold for any input the model
//! accepted, so a finding is a value that passed validation and should not have:
//! - every file is text without control characters other than the newline;
//! - every line of a config file is blank, a comment, a section header of a known
//!   kind, or an indented line whose first word is a known haproxy keyword (a value that
//!   smuggled a newline in would start a line of its own, which haproxy reads as a
//!   directive), with its quotes closed (haproxy's own quoting rules);
//! - every map line is `key value` with a key and no further control characters;
//! - the server slots read back from the config ([`parse_layout`], what adoption
//!   reads) are the layout it was rendered from;
//! - every problem names its object and field (an annotation by its full name).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use tugboat_haproxy::apply::parse_layout;
use tugboat_haproxy::{Layout, RenderSettings, RenderedFiles};
use tugboat_kube::manifests::{FolderContents, parse_file, served};
use tugboat_model::class::{ClassFilter, DEFAULT_CONTROLLER_CLASS};
use tugboat_model::gateway::{DEFAULT_CONTROLLER_NAME, GatewaySettings};
use tugboat_model::tls::Pem;
use tugboat_model::{BuildOutput, ObjectKey, Settings};

/// A fixed "now" (2026-01-01), so that a certificate's validity does not depend on the
/// day the fuzzer runs.
pub const NOW: i64 = 1_767_225_600;

/// The namespace and name of the controller's ConfigMap in the targets' settings.
pub const CONFIG_MAP: (&str, &str) = ("default", "tugboat");

/// What one run of the pipeline gave.
pub struct Rendered {
    pub contents: FolderContents,
    /// The Ingresses of the file left out because their class is not served, and why.
    pub not_served: Vec<(ObjectKey, String)>,
    pub output: BuildOutput,
    pub files: RenderedFiles,
    pub layout: Layout,
    pub settings: RenderSettings,
}

/// The model's settings of the targets: the flags' defaults, the controller's ConfigMap
/// at [`CONFIG_MAP`], and the Gateway API on or off.
pub fn model_settings(gateway: bool) -> Settings {
    let mut settings = Settings::new(NOW);
    settings.config_map = Some(ObjectKey::new(CONFIG_MAP.0, CONFIG_MAP.1));
    if gateway {
        settings.gateway = Some(GatewaySettings::new(DEFAULT_CONTROLLER_NAME, 8080, 8443));
    }
    settings
}

/// A real self-signed certificate and key (haproxy loads it), made once per process.
pub fn fallback_certificate() -> Pem {
    static PEM: OnceLock<Pem> = OnceLock::new();
    PEM.get_or_init(|| {
        let generated = rcgen::generate_simple_self_signed(vec!["fallback.invalid".into()])
            .unwrap_or_else(|e| panic!("cannot generate the fallback certificate: {e}"));
        Pem::from_checked(format!(
            "{}{}",
            generated.cert.pem(),
            generated.signing_key.serialize_pem()
        ))
    })
    .clone()
}

/// Render settings with folders under `root` (nothing is written by rendering).
pub fn render_settings(root: &Path) -> RenderSettings {
    RenderSettings {
        config_dir: root.join("etc"),
        lib_dir: root.join("lib"),
        fallback_certificate: fallback_certificate(),
        ..RenderSettings::example()
    }
}

/// A manifests file's text through the same functions `tugboat render` uses: read as a
/// folder file, served with the default class flags, built, planned from nothing.
pub fn render_manifests(text: &str, gateway: bool, root: &Path) -> Rendered {
    let mut contents = FolderContents::default();
    parse_file(Path::new("fuzz.yaml"), text, &mut contents);
    let model = model_settings(gateway);
    let served = served(&contents, &ClassFilter::default(), &model);
    let output = tugboat_model::build(&served.snapshot, &model);
    let settings = render_settings(root);
    let plan = tugboat_haproxy::plan(None, output.desired.clone(), &settings);
    Rendered {
        contents,
        not_served: served.not_served,
        output,
        files: plan.next.files,
        layout: plan.next.layout,
        settings,
    }
}

/// Objects as one manifests file (YAML documents), as the test objects write them.
pub fn manifest_text(documents: &[String]) -> String {
    documents.join("---\n")
}

/// One object as a YAML document.
pub fn document(object: &impl serde::Serialize) -> String {
    tugboat_test_objects::to_yaml(std::slice::from_ref(object))
}

/// Every check of the module's doc that holds for any input; panics with what broke.
pub fn check_rendered(rendered: &Rendered) {
    for problem in &rendered.contents.problems {
        assert!(
            problem.document > 0,
            "a manifest problem without its document: {problem}"
        );
        assert!(
            !problem.message.is_empty(),
            "a manifest problem without a message"
        );
    }
    for problem in &rendered.output.problems {
        assert!(
            !problem.object.name.is_empty() && !problem.field.is_empty(),
            "a problem that names no object or field: {problem:?}"
        );
        // An annotation's name always has its prefix (`tugboat.dev/KEY`).
        if let Some(name) = problem.field.strip_prefix("metadata.annotations.") {
            assert!(name.contains('/'), "a field no object has: {problem:?}");
        }
    }
    let settings = &rendered.settings;
    let mut read_back = Layout::default();
    for (path, text) in &rendered.files.files {
        if settings.is_certificate(path) {
            continue;
        }
        check_text(path, text);
        if settings.is_config(path) {
            check_config(path, text);
            read_back.backends.extend(parse_layout(text).backends);
        } else if path.extension().is_some_and(|e| e == "map") {
            check_map(path, text);
        }
    }
    // A backend without server lines (the not-found backend) is read back with no
    // slots, where the layout has no entry: the same servers either way.
    let with_slots = |layout: &Layout| {
        let mut layout = layout.clone();
        layout.backends.retain(|_, slots| !slots.is_empty());
        layout
    };
    assert_eq!(
        with_slots(&read_back),
        with_slots(&rendered.layout),
        "the server slots read back from the config differ from those rendered"
    );
}

/// No control characters but the newline (and the tab of Lua scripts).
fn check_text(path: &Path, text: &str) {
    let lua = path.extension().is_some_and(|e| e == "lua");
    if let Some((number, line)) = text
        .lines()
        .enumerate()
        .find(|(_, line)| line.chars().any(|c| c.is_control() && !(lua && c == '\t')))
    {
        panic!(
            "{}:{}: a control character: {line:?}",
            path.display(),
            number + 1
        );
    }
}

/// The kinds of section Tugboat writes.
const SECTIONS: &[&str] = &[
    "global",
    "defaults",
    "frontend",
    "backend",
    "listen",
    "userlist",
    "http-errors",
    "cache",
    "peers",
    "resolvers",
    "ring",
    "program",
];

/// The first words of the indented lines Tugboat writes (haproxy keywords, and the
/// conditional blocks `.if`/`.else`/`.endif`).
const KEYWORDS: &[&str] = &[
    ".if",
    ".else",
    ".elif",
    ".endif",
    ".warning",
    ".notice",
    ".diag",
    ".alert",
    "acl",
    "balance",
    "bind",
    "capture",
    "ca-base",
    "chroot",
    "compression",
    "cookie",
    "crt-base",
    "daemon",
    "default-server",
    "default_backend",
    "description",
    "errorfile",
    "errorfiles",
    "expose-experimental-directives",
    "filter",
    "fullconn",
    "group",
    "hard-stop-after",
    "hash-type",
    "http-after-response",
    "http-check",
    "http-error",
    "http-request",
    "http-response",
    "http-reuse",
    "log",
    "log-format",
    "log-tag",
    "lua-load",
    "lua-load-per-thread",
    "lua-prepend-path",
    "master-worker",
    "maxconn",
    "mode",
    "monitor-uri",
    "nbthread",
    "option",
    "persist",
    "pidfile",
    "quic-initial",
    "redirect",
    "retries",
    "retry-on",
    "server",
    "server-state-base",
    "server-state-file",
    "server-template",
    "source",
    "ssl-default-bind-ciphers",
    "ssl-default-bind-ciphersuites",
    "ssl-default-bind-options",
    "ssl-default-server-ciphers",
    "ssl-default-server-options",
    "stats",
    "stick",
    "stick-table",
    "tcp-check",
    "tcp-request",
    "tcp-response",
    "timeout",
    "tune.bufsize",
    "tune.maxrewrite",
    "tune.ssl.default-dh-param",
    "unique-id-format",
    "unique-id-header",
    "use-server",
    "use_backend",
    "user",
    "users",
    "insecure-fork-wanted",
    "set-var",
    "setenv",
    "presetenv",
    "localpeer",
    "peer",
    "nameserver",
    "email-alert",
    "declare",
    "no",
    "dynamic-cookie-key",
    "external-check",
    "grace",
    "load-server-state-from-file",
    "max-keep-alive-queue",
    "max-session-srv-conns",
    "rate-limit",
    "strict-limits",
];

/// Every line of a config file has a known shape, and its quotes are closed.
pub fn check_config(path: &Path, text: &str) {
    for (number, line) in text.lines().enumerate() {
        let at = || format!("{}:{}: {line:?}", path.display(), number + 1);
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let first = trimmed.split_whitespace().next().unwrap_or_default();
        if first.starts_with('.') {
            assert!(KEYWORDS.contains(&first), "not a known directive: {}", at());
        } else if trimmed.len() == line.len() {
            assert!(
                SECTIONS.contains(&first),
                "not a known section header: {}",
                at()
            );
        } else {
            assert!(KEYWORDS.contains(&first), "not a known keyword: {}", at());
        }
        assert!(quotes_closed(line), "a quote left open: {}", at());
    }
}

/// Whether haproxy's line reader ends `line` outside any quote: `\` escapes the next
/// character outside single quotes, `"` and `'` open and close their quotes.
pub fn quotes_closed(line: &str) -> bool {
    let mut open: Option<char> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (open, c) {
            (Some('\''), '\'') => open = None,
            (Some('\''), _) => {}
            (_, '\\') => {
                chars.next();
            }
            (Some('"'), '"') => open = None,
            (None, '"' | '\'') => open = Some(c),
            _ => {}
        }
    }
    open.is_none()
}

/// Every line of a map is `key value` (or a comment).
fn check_map(path: &Path, text: &str) {
    for (number, line) in text.lines().enumerate() {
        if line.starts_with('#') {
            continue;
        }
        let (key, _) = line.split_once(' ').unwrap_or((line, ""));
        assert!(
            !key.is_empty(),
            "{}:{}: a map line without a key: {line:?}",
            path.display(),
            number + 1
        );
    }
}

/// The haproxy binaries a differential target loads configs with: every installed
/// series of `$TUGBOAT_HAPROXY_DIR` (default `~/.cache/tugboat/haproxy`), as the
/// end-to-end tests find them. At least one must be there.
pub fn haproxy_binaries() -> &'static [PathBuf] {
    static FOUND: OnceLock<Vec<PathBuf>> = OnceLock::new();
    FOUND.get_or_init(|| {
        let dir = std::env::var_os("TUGBOAT_HAPROXY_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
                PathBuf::from(home).join(".cache/tugboat/haproxy")
            });
        let found: Vec<PathBuf> = ["2.6", "3.4"]
            .iter()
            .map(|series| dir.join(format!("haproxy-{series}/haproxy")))
            .filter(|path| path.is_file())
            .collect();
        assert!(
            !found.is_empty(),
            "no haproxy 2.6 or 3.4 under {} (scripts/get-haproxy.sh installs them)",
            dir.display()
        );
        found
    })
}

/// Writes the files under their paths (below a folder of the caller's) and has every
/// haproxy binary check the config folder (`haproxy -c`); panics with haproxy's words
/// when one refuses it.
pub fn check_loads(rendered: &Rendered) {
    let settings = &rendered.settings;
    for dir in [&settings.config_dir, &settings.lib_dir] {
        let _ = std::fs::remove_dir_all(dir);
    }
    for (path, text) in &rendered.files.files {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .unwrap_or_else(|e| panic!("cannot make {}: {e}", parent.display()));
        }
        std::fs::write(path, text.as_bytes())
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    }
    for binary in haproxy_binaries() {
        let run = std::process::Command::new(binary)
            .arg("-c")
            .arg("-q")
            .arg("-f")
            .arg(&settings.config_dir)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", binary.display()));
        if !run.status.success() {
            let config = settings.config_file();
            panic!(
                "{} -c refused the rendered config:\n{}{}\n--- {} ---\n{}",
                binary.display(),
                String::from_utf8_lossy(&run.stdout),
                String::from_utf8_lossy(&run.stderr),
                config.display(),
                rendered.files.get(&config).unwrap_or_default()
            );
        }
    }
}

/// Remembers what was seen, to run the slow checks once per distinct value.
#[derive(Default)]
pub struct Seen(BTreeSet<u64>);

impl Seen {
    /// Whether `text` is new (and remembers it).
    pub fn first_time(&mut self, text: &str) -> bool {
        self.0.insert(tugboat_model::stable_hash(text.as_bytes()))
    }
}

/// A small set of objects written as text lines, which the targets that build Ingresses
/// and ConfigMaps read from their input (readable seeds, and a dictionary of key names
/// steers the fuzzer to real keys):
/// - `host=H`, `path=P`, `path-type=T`: the Ingress' one rule (default
///   `shop.example.com`, `/`, `Prefix`);
/// - `tls=SECRET`: the rule's host in `spec.tls` with that Secret;
/// - `ingress.KEY=VALUE`, `service.KEY=VALUE`: an annotation of the Ingress or of its
///   Service, `KEY` a Tugboat key (`tugboat.dev/` is added) or a full annotation name;
/// - `config.KEY=VALUE`: a key of the controller's ConfigMap;
/// - any other line `KEY=VALUE` is a ConfigMap key too.
///
/// In a value, `\n` stands for a newline and `\\` for a backslash. The Ingress has the
/// class `tugboat`, which the file's IngressClass gives this controller; the Service
/// `app` (port `http`, 80) has one ready endpoint, 10.0.0.1:8080.
#[derive(Debug, Clone, Default)]
pub struct Scene {
    pub host: Option<String>,
    pub path: Option<String>,
    pub path_type: Option<String>,
    pub tls: Option<String>,
    pub ingress: Vec<(String, String)>,
    pub service: Vec<(String, String)>,
    pub config: Vec<(String, String)>,
    /// More documents (Secrets) added as they are.
    pub extra: Vec<String>,
}

impl Scene {
    pub fn parse(text: &str) -> Self {
        let mut scene = Scene::default();
        for line in text.lines() {
            let Some((name, value)) = line.split_once('=') else {
                continue;
            };
            let value = unescape(value);
            match name {
                "host" => scene.host = Some(value),
                "path" => scene.path = Some(value),
                "path-type" => scene.path_type = Some(value),
                "tls" => scene.tls = Some(value),
                _ => {
                    let (list, key) = if let Some(key) = name.strip_prefix("ingress.") {
                        (&mut scene.ingress, key)
                    } else if let Some(key) = name.strip_prefix("service.") {
                        (&mut scene.service, key)
                    } else {
                        (
                            &mut scene.config,
                            name.strip_prefix("config.").unwrap_or(name),
                        )
                    };
                    list.push((key.to_string(), value));
                }
            }
        }
        scene
    }

    /// The scene through the pipeline ([`render_manifests`]); its Ingress is served.
    pub fn render(&self) -> Rendered {
        let rendered = render_manifests(&self.manifests(), false, scratch_dir());
        assert!(
            rendered.not_served.is_empty(),
            "the scene's Ingress is not served: {:?}",
            rendered.not_served
        );
        rendered
    }

    /// The scene as one manifests file.
    pub fn manifests(&self) -> String {
        use tugboat_test_objects::*;
        let full = |keys: &[(String, String)]| -> Vec<(String, String)> {
            keys.iter()
                .map(|(key, value)| {
                    let name = if key.contains('/') {
                        key.clone()
                    } else {
                        format!("{KEY_PREFIX}{key}")
                    };
                    (name, value.clone())
                })
                .collect()
        };
        let host = self.host.as_deref().unwrap_or("shop.example.com");
        let path = self.path.as_deref().unwrap_or("/");
        let path_type = self.path_type.as_deref().unwrap_or("Prefix");
        let rule = mk_rule(Some(host), &[mk_path(path, path_type, "app")]);
        let mut ingress = mk_ingress_with_rules("shop", vec![rule]);
        if let Some(secret) = &self.tls {
            ingress = with_tls(ingress, &[(&[host], secret)]);
        }
        let ingress_keys = full(&self.ingress);
        let service_keys = full(&self.service);
        let ingress = with_annotations(ingress, &pairs(&ingress_keys));
        let service = with_annotations(mk_service("app", "http", 80), &pairs(&service_keys));
        let endpoint: std::net::SocketAddr = ([10, 0, 0, 1], 8080).into();
        let slice = mk_endpoint_slice("app", "http", &[endpoint]);
        let mut config = mk_config_map(CONFIG_MAP.1, &pairs(&self.config));
        config.metadata.namespace = Some(CONFIG_MAP.0.to_string());
        let class = mk_ingress_class("tugboat", DEFAULT_CONTROLLER_CLASS, false);
        let mut documents = vec![
            document(&class),
            document(&ingress),
            document(&service),
            document(&slice),
            document(&config),
        ];
        documents.extend(self.extra.iter().cloned());
        manifest_text(&documents)
    }
}

fn pairs(keys: &[(String, String)]) -> Vec<(&str, &str)> {
    keys.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// `\n` -> newline, `\\` -> backslash; any other backslash stays.
pub fn unescape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        match (c, chars.clone().next()) {
            ('\\', Some('n')) => {
                out.push('\n');
                chars.next();
            }
            ('\\', Some('\\')) => {
                out.push('\\');
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

/// A folder under the system's temporary folder for one fuzzing process (removed at
/// exit only by the operating system's cleaning: the targets never end normally).
pub fn scratch_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("tugboat-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot make {}: {e}", dir.display()));
        dir
    })
}
