//! Rendering: the desired state as haproxy's files.
//!
//! Routing goes through two map files so that the config grows with backends, not with
//! rules:
//! - `routes-exact.map` (exact match, a tree): `host/path` for `Exact` rules, and the
//!   path itself for `Prefix` rules (`/foo` must match `/foo`);
//! - `routes-prefix.map` (`map_beg`, first match in file order): `host/path/` for
//!   `Prefix` rules, longest key first, so that the longest prefix wins.
//!
//! Keys start with the lower-cased host (`a.example.com/...`), the wildcard suffix
//! (`.example.com/...`, looked up with the request's first label removed), a Gateway API
//! wildcard's suffix and `*` (`example.com*/...`, looked up with one label removed, then
//! two, and so on) or nothing at all for rules without a host (`/...`). The four kinds
//! of key never overlap, so one map of each type serves all of them; the frontend looks
//! up exact host, then wildcard, then Gateway API wildcard, then any host, and in each
//! first the exact map, then the prefix map.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use tugboat_model::features::{BackendOptions, ProxyProtocol, Snippet};
use tugboat_model::tls::Pem;
use tugboat_model::{Backend, BackendName, Desired, HostMatch, PathMatch, Route, stable_hash};

use crate::access_log::OWNER_SEPARATOR;
use crate::features::feature_rules;
use crate::layout::{Layout, Server, fresh_slots};
use crate::map_text::{self, MapOrder};
use crate::rules::{FEATURE_SEPARATOR, NOT_FOUND_BACKEND, Place, timeouts};
use crate::runtime::server_line;
pub use crate::settings::*;

/// Every file haproxy needs, by absolute path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderedFiles {
    pub files: BTreeMap<PathBuf, FileText>,
}

impl RenderedFiles {
    pub fn get(&self, path: &Path) -> Option<&str> {
        self.files.get(path).map(FileText::as_str)
    }
}

/// The contents of one file: text rendered for it, or a checked PEM that the desired
/// state holds too (a certificate file shares it rather than copying it: a thousand
/// certificates are megabytes). Debug output hides a PEM, as [`Pem`] does.
#[derive(Clone)]
pub enum FileText {
    Rendered(String),
    Pem(Pem),
}

impl FileText {
    pub fn as_str(&self) -> &str {
        match self {
            FileText::Rendered(text) => text,
            FileText::Pem(pem) => pem.as_str(),
        }
    }

    /// The text to edit in place (a PEM is copied first).
    pub fn to_mut(&mut self) -> &mut String {
        if let FileText::Pem(pem) = self {
            *self = FileText::Rendered(pem.as_str().to_string());
        }
        match self {
            FileText::Rendered(text) => text,
            // Made `Rendered` just above.
            FileText::Pem(_) => unreachable!("a PEM was made rendered text"),
        }
    }
}

impl std::ops::Deref for FileText {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

/// Two files are the same when their texts are, however each is held.
impl PartialEq for FileText {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for FileText {}

impl std::fmt::Debug for FileText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileText::Rendered(text) => std::fmt::Debug::fmt(text, f),
            FileText::Pem(pem) => std::fmt::Debug::fmt(pem, f),
        }
    }
}

impl From<String> for FileText {
    fn from(text: String) -> Self {
        FileText::Rendered(text)
    }
}

impl From<&str> for FileText {
    fn from(text: &str) -> Self {
        FileText::Rendered(text.to_string())
    }
}

impl From<&Pem> for FileText {
    fn from(pem: &Pem) -> Self {
        FileText::Pem(pem.clone())
    }
}

/// Renders the desired state with its server slots. Pure: the same input always gives
/// the same bytes.
/// `files`, rendered for `desired` with another slot layout, with the backends files of
/// `layout`: they are the only files the layout changes (their paths depend on the
/// number of backends, not on the layout).
pub fn with_layout(
    mut files: RenderedFiles,
    desired: &Desired,
    layout: &Layout,
    settings: &RenderSettings,
) -> RenderedFiles {
    for (path, text) in backends_files(desired, layout, settings) {
        files.files.insert(path, rendered(text));
    }
    files
}

pub fn render(desired: &Desired, layout: &Layout, settings: &RenderSettings) -> RenderedFiles {
    let mut files = BTreeMap::new();
    write_files(desired, settings, &mut files);
    for (path, text) in backends_files(desired, layout, settings) {
        files.insert(path, rendered(text));
    }
    RenderedFiles { files }
}

/// The paths of the files [`render`] writes for `desired`, but for the backends files (how
/// many there are depends on the backends alone: [`backends_file_count`]), without
/// rendering a text: what a caller that needs only the paths asks for.
pub fn rendered_paths(desired: &Desired, settings: &RenderSettings) -> BTreeSet<PathBuf> {
    let mut paths = BTreeSet::new();
    write_files(desired, settings, &mut paths);
    paths
}

/// Where [`write_files`] puts each file: its text, or only its path (the text is then
/// never made).
trait FileSink {
    fn file(&mut self, path: PathBuf, text: impl FnOnce() -> FileText);
}

impl FileSink for BTreeMap<PathBuf, FileText> {
    fn file(&mut self, path: PathBuf, text: impl FnOnce() -> FileText) {
        self.insert(path, text());
    }
}

impl FileSink for BTreeSet<PathBuf> {
    fn file(&mut self, path: PathBuf, _text: impl FnOnce() -> FileText) {
        self.insert(path);
    }
}

/// Every file of a render but the backends files, into `sink`: one list of the files,
/// whether their texts are wanted or only their paths.
fn write_files(desired: &Desired, settings: &RenderSettings, sink: &mut impl FileSink) {
    sink.file(settings.config_file(), || {
        rendered(config(desired, settings))
    });
    // Both route maps come from one pass over the routes.
    let mut prefix = None;
    sink.file(settings.exact_map(), || {
        let (exact, prefix_text) = route_maps(desired);
        prefix = Some(prefix_text);
        rendered(exact)
    });
    sink.file(settings.prefix_map(), || {
        rendered(prefix.take().unwrap_or_else(|| route_maps(desired).1))
    });
    sink.file(settings.tls_hosts_map(), || {
        rendered(tls_hosts_map(desired))
    });
    if crate::passthrough::map_needed(desired) {
        sink.file(settings.passthrough_map(), || {
            rendered(crate::passthrough::map(desired))
        });
    }
    let default = desired
        .default_certificate
        .as_ref()
        .unwrap_or(&settings.fallback_certificate);
    sink.file(settings.default_certificate(), || FileText::from(default));
    for certificate in desired.certificates.values() {
        sink.file(settings.certificate(&certificate.name), || {
            FileText::from(&certificate.pem)
        });
    }
    sink.file(settings.crt_list(), || {
        rendered(crt_list(desired, settings))
    });
    for (name, pem) in &desired.client_ca_files {
        sink.file(settings.client_ca_file(name), || FileText::from(pem));
    }
    if crate::client_certs::needed(desired) {
        sink.file(settings.verify_errors_map(), || {
            crate::client_certs::VERIFY_ERRORS.into()
        });
    }
    for (code, page) in &desired.error_pages {
        sink.file(settings.error_page(*code), || page.as_str().into());
    }
    for (name, pem) in &desired.backend_files {
        sink.file(settings.backend_file(name), || FileText::from(pem));
    }
    for (name, entries) in &desired.pattern_files {
        sink.file(settings.pattern_file(name), || entries.as_str().into());
    }
    if crate::external_auth::needed(&desired.feature_sets) {
        sink.file(settings.external_auth_script(), || {
            crate::external_auth::SCRIPT.into()
        });
    }
    if crate::body_limit::needed(&desired.feature_sets) {
        sink.file(settings.body_limit_script(), || {
            crate::body_limit::SCRIPT.into()
        });
        sink.file(settings.body_limit_answer(), || {
            crate::body_limit::TOO_LARGE_ANSWER.into()
        });
    }
    if crate::error_backend::needs_script(&desired.feature_sets) {
        sink.file(settings.error_pages_script(), || {
            crate::error_backend::SCRIPT.into()
        });
    }
}

/// The crt-list: a line per certificate with its hosts, but for the hosts that ask for
/// client certificates, which get a line each with their options (with the certificate
/// of a wildcard that covers them, else the default certificate, when none names them). A certificate whose hosts all have lines of
/// their own gets none: without hosts, it would be served for the names it carries,
/// without the options.
fn crt_list(desired: &Desired, settings: &RenderSettings) -> String {
    let mut out = String::new();
    let mut verified_elsewhere = desired.client_ca_hosts.clone();
    for certificate in desired.certificates.values() {
        let path = settings.certificate(&certificate.name);
        let (verified, plain): (Vec<&String>, Vec<&String>) = certificate
            .hosts
            .iter()
            .partition(|host| desired.client_ca_hosts.contains_key(*host));
        if certificate.hosts.is_empty() || !plain.is_empty() {
            let mut line = path.display().to_string();
            for host in plain {
                line.push(' ');
                line.push_str(host);
            }
            let _ = writeln!(out, "{line}");
        }
        for host in verified {
            if let Some(ca) = verified_elsewhere.remove(host) {
                let options = crate::client_certs::crt_list_options(&ca, settings);
                let _ = writeln!(out, "{} [{options}] {host}", path.display());
            }
        }
    }
    // The others: the certificate of the wildcard that covers them, else the default.
    for (host, ca) in &verified_elsewhere {
        let options = crate::client_certs::crt_list_options(ca, settings);
        let wildcard = host
            .split_once('.')
            .map(|(_, parent)| format!("*.{parent}"));
        let certificate = desired
            .certificates
            .values()
            .find(|c| wildcard.as_ref().is_some_and(|w| c.hosts.contains(w)))
            .map_or_else(
                || settings.default_certificate(),
                |c| settings.certificate(&c.name),
            );
        let _ = writeln!(out, "{} [{options}] {host}", certificate.display());
    }
    out
}

/// A text built by pushing, which holds up to twice its length: kept for as long as
/// haproxy runs it, it is cut to size.
fn rendered(mut text: String) -> FileText {
    text.shrink_to_fit();
    FileText::Rendered(text)
}

/// The options every server of a backend gets, on the `default-server` line and on
/// every server added at runtime, so both are the same.
pub fn server_options(options: &BackendOptions, settings: &RenderSettings) -> String {
    let mut words: Vec<String> = Vec::new();
    match options.send_proxy {
        None => {}
        Some(ProxyProtocol::V1) => words.push("send-proxy".into()),
        Some(ProxyProtocol::V2) => words.push("send-proxy-v2".into()),
    }
    if let Some(tls) = &options.tls {
        words.push("ssl".into());
        // The backend's own name as SNI on every series (haproxy 3.3+ would otherwise
        // send the request's Host, `sni-auto`, a public name an in-cluster backend's
        // certificate rarely carries), and the name its certificate must carry when a
        // CA verifies it. The name is a validated DNS name.
        // Without a name (not from the model), none is sent: an unset variable.
        let verifyhost = if tls.server_name.is_empty() {
            words.push("sni var(txn.tugboat_no_sni)".into());
            String::new()
        } else {
            words.push(format!("sni str({})", tls.server_name));
            format!(" verifyhost {}", tls.server_name)
        };
        match &tls.ca_file {
            Some(file) => words.push(format!(
                "verify required ca-file {}{verifyhost}",
                settings.backend_file(file).display()
            )),
            None => words.push("verify none".into()),
        }
        if let Some(file) = &tls.client_certificate {
            words.push(format!("crt {}", settings.backend_file(file).display()));
        }
        if options.h2 {
            words.push("alpn h2".into());
        }
    } else if options.h2 {
        words.push("proto h2".into());
    }
    if let Some(check) = &options.health_check {
        words.push("check".into());
        if let Some(interval) = &check.interval {
            words.push(format!("inter {interval}"));
        }
    }
    words.join(" ")
}

fn tls_hosts_map(desired: &Desired) -> String {
    let mut out = String::new();
    for host in &desired.tls_hosts {
        match host {
            HostMatch::Exact(host) | HostMatch::Wildcard(host) => {
                let _ = writeln!(out, "{host} 1");
            }
            HostMatch::Any | HostMatch::Subdomains(_) => {}
        }
    }
    out
}

fn config(desired: &Desired, settings: &RenderSettings) -> String {
    let exact = settings.exact_map();
    let prefix = settings.prefix_map();
    let tls_hosts = settings.tls_hosts_map();
    let (exact, prefix, tls_hosts) = (exact.display(), prefix.display(), tls_hosts.display());
    let http = settings.bind(settings.http_port);
    // With TLS passthrough the HTTPS port is the TCP frontend's, and this is the hop.
    let https = crate::passthrough::terminating_bind(desired, settings);
    let default_cert = settings.default_certificate();
    let crt_list = settings.crt_list();
    let mut out = String::with_capacity(16384);
    let global = &desired.global;
    let log_target = match &global.syslog_server {
        None => "stdout format raw".to_string(),
        Some(server) => server.clone(),
    };
    let global_snippet = snippet_lines(global.snippet.as_ref());
    let mut lua = String::new();
    if crate::external_auth::needed(&desired.feature_sets) {
        // Only where haproxy has Lua: without, the routes refuse every request.
        let _ = write!(
            lua,
            "    .if feature(LUA)\n    lua-load {}\n    .endif\n",
            settings.external_auth_script().display()
        );
    }
    if crate::body_limit::needed(&desired.feature_sets) {
        // Only where haproxy has Lua: without, the routes refuse bodies of unknown
        // length (411).
        let _ = write!(
            lua,
            "    .if feature(LUA)\n    lua-load {}\n    .endif\n",
            settings.body_limit_script().display()
        );
    }
    if crate::error_backend::needs_script(&desired.feature_sets) {
        // Only where haproxy has Lua: without, haproxy warns and answers pass unchanged;
        // the controller finds out through the environment and reports it.
        let _ = write!(
            lua,
            "    .if feature(LUA)\n    lua-load {}\n    .else\n    setenv {} 1\n    .endif\n",
            settings.error_pages_script().display(),
            crate::error_backend::WITHOUT_LUA_VARIABLE
        );
    }
    // Writing into a String cannot fail: the results are ignored on purpose.
    let _ = write!(
        out,
        "\
# Written by tugboat. Every change here is overwritten by the next update.
global
    log {log_target} local0
    # For `http-request normalize-uri` (experimental on every series up to 3.4 at least).
    expose-experimental-directives
    ssl-default-bind-options ssl-min-ver TLSv1.2
{lua}{global_snippet}
defaults {DEFAULTS_NAME}
    mode http
    log global
    option httplog
    option dontlognull
    option redispatch
    # A request that reaches an old worker on an idle keep-alive connection while it
    # stops (a reload) gets its answer, with `Connection: close`, instead of a closed
    # connection.
    option idle-close-on-response
    retries 3
"
    );
    for (name, value) in timeouts(desired) {
        let _ = writeln!(out, "    timeout {name} {value}");
    }
    if let Some(line) = crate::access_log::log_format_line(global) {
        out.push_str(&line);
    }
    let features = feature_rules(desired, settings);
    let strict_sni = if global.strict_sni { " strict-sni" } else { "" };
    for code in desired.error_pages.keys() {
        let _ = writeln!(
            out,
            "    errorfile {code} {}",
            settings.error_page(*code).display()
        );
    }
    let tls_options = format!(
        "ssl crt {} crt-list {} alpn h2,http/1.1{strict_sni}{}",
        default_cert.display(),
        crt_list.display(),
        crate::client_certs::bind_options(desired),
    );
    let own = OwnBinds::of(desired, settings, &tls_options);
    let lookup = own.lookup_path();
    let _ = write!(
        out,
        "
frontend http
    bind {http}
    bind {https} {tls_options}
{own_binds}{proxy_protocol}{stats_start}{client_address}{capture}{normalize}    http-request set-var(txn.host) req.hdr(host),field(1,:),lower
    http-request set-var(txn.path) path
    http-request set-var(txn.path) path,regsub(;[^/]*,,g) if {{ path -m sub ; }}
{own_lookup}    http-request set-var(txn.wild) var(txn.host),regsub(^[^.]*,)
    http-request set-var(txn.route) var(txn.host),concat(,{lookup}),map_str({exact})
{regex_exact}    http-request set-var(txn.route) var(txn.host),concat(,{lookup}),map_beg({prefix}) if !{{ var(txn.route) -m found }}
    http-request set-var(txn.route) var(txn.wild),concat(,{lookup}),map_str({exact}) if !{{ var(txn.route) -m found }}
{regex_wildcard}    http-request set-var(txn.route) var(txn.wild),concat(,{lookup}),map_beg({prefix}) if !{{ var(txn.route) -m found }}
{subdomains}    http-request set-var(txn.route) var({lookup}),map_str({exact}) if !{{ var(txn.route) -m found }}
{regex_any}    http-request set-var(txn.route) var({lookup}),map_beg({prefix}) if !{{ var(txn.route) -m found }}
{owner}    http-request set-var(txn.backend) var(txn.route),field(1,{FEATURE_SEPARATOR}) if {{ var(txn.route) -m found }}
    http-request set-var(txn.fs) var(txn.route),field(2,{FEATURE_SEPARATOR}) if {{ var(txn.route) -m found }}
    http-request set-var(txn.tls_host) var(txn.host),map_str({tls_hosts}){main_only_if}
    http-request set-var(txn.tls_host) var(txn.wild),map_str({tls_hosts}) if !{{ var(txn.tls_host) -m found }}{main_only}
{restore}{feature_request}{service}{stats_responses}",
        own_binds = own.binds,
        owner = crate::access_log::owner_rules(),
        stats_start = crate::request_stats::start_rule(),
        stats_responses = crate::request_stats::response_rules(),
        capture = crate::access_log::capture_rules(global),
        service = crate::access_log::service_rule(global),
        own_lookup = own.lookup_rules(),
        main_only_if = own.main_binds_only(" if"),
        main_only = own.main_binds_only(""),
        proxy_protocol = crate::client_address::connection_rules(global),
        client_address = crate::client_address::request_rules(global),
        normalize = normalize_rules(keeps_original_path(desired)),
        subdomains = subdomain_rules(&exact, &prefix, lookup),
        regex_exact = regex_route_rules(&desired.routes, RegexHosts::Exact, &own),
        regex_wildcard = regex_route_rules(&desired.routes, RegexHosts::Wildcard, &own),
        regex_any = regex_route_rules(&desired.routes, RegexHosts::Any, &own),
        restore = restore_rules(desired),
        feature_request = features.text(Place::Rules),
    );
    let _ = write!(
        out,
        "{proto}{switching}    use_backend %[var(txn.backend)] if {{ var(txn.backend) -m found }}
{own_not_found}    default_backend {default}

# Requests that match no route: 404 (with the 404 error page when one is set), and
# /healthz for load balancers that probe the default backend.
backend {NOT_FOUND_BACKEND}
    http-request return status 200 content-type text/plain string \"ok\\n\" if {{ path /healthz }}
",
        proto = crate::client_address::proto_rules(global),
        switching = features.text(Place::Switching),
        own_not_found = own.not_found_rule(desired),
        default = desired
            .default_backend
            .as_ref()
            .map_or(NOT_FOUND_BACKEND, |b| b.as_str()),
    );
    if desired.error_pages.contains_key(&404) {
        out.push_str("    http-request return status 404 default-errorfiles\n");
    } else {
        out.push_str(
            "    http-request return status 404 content-type text/plain string \"no route for this host and path\\n\"\n",
        );
    }
    if settings.stats_port != 0 {
        let _ = write!(
            out,
            "
# haproxy's own health (for probes), metrics and stats page.
frontend stats
    bind {}
    monitor-uri /healthz
    http-request use-service prometheus-exporter if {{ path /metrics }}
    stats enable
    stats uri /stats
    stats refresh 10s
",
            settings.bind(settings.stats_port)
        );
    }
    out.push_str(&crate::passthrough::sections(desired, settings));
    out.push_str(&crate::tcp_services::sections(desired, settings));
    out.push_str(&features.text(Place::Sections));
    out
}

/// How many files the backends of a state with `backends` backends are spread over.
pub fn backends_file_count(backends: usize) -> usize {
    backends.div_ceil(BACKENDS_PER_FILE).max(1)
}

/// Which of `count` backends' files holds backend `name`: by a stable hash of the name,
/// so that a backend stays in its file while the number of files stays the same.
pub fn backends_file_index(name: &BackendName, count: usize) -> usize {
    // The remainder is below `count`, a usize: the conversion back cannot fail.
    usize::try_from(stable_hash(name.as_str().as_bytes()) % count.max(1) as u64).unwrap_or(0)
}

/// The backends' sections, in [`backends_file_count`] files, each backend in the file
/// [`backends_file_index`] gives.
fn backends_files(
    desired: &Desired,
    layout: &Layout,
    settings: &RenderSettings,
) -> Vec<(PathBuf, String)> {
    let count = backends_file_count(desired.backends.len());
    let rule_timeouts = has_rule_timeouts(desired);
    // Sized up front, a quarter more than an even share.
    let slots: usize = layout.backends.values().map(Vec::len).sum();
    let share = (desired.backends.len() * 200 + slots * 48) / count;
    let mut texts: Vec<String> = (0..count)
        .map(|index| {
            let mut text = String::with_capacity(256 + share + share / 4);
            let _ = writeln!(
                text,
                "# Written by tugboat: backends, file {} of {count} (haproxy.cfg holds the rest).",
                index + 1
            );
            text
        })
        .collect();
    for (name, backend) in &desired.backends {
        let fresh;
        let slots = match layout.backends.get(name) {
            Some(slots) => slots,
            // Not in the layout (a caller's mistake): a fresh set of slots.
            None => {
                fresh = fresh_slots(backend);
                &fresh
            }
        };
        let text = &mut texts[backends_file_index(name, count)];
        write_backend(text, name, backend, slots, rule_timeouts, settings);
    }
    texts
        .into_iter()
        .enumerate()
        .map(|(index, text)| (settings.backends_file(index), text))
        .collect()
}

/// The `backend` section of one backend with its server slots, as [`render`] writes it
/// (the planner patches the config with it when only servers change).
pub fn backend_section(
    name: &BackendName,
    backend: &Backend,
    slots: &[Option<Server>],
    rule_timeouts: bool,
    settings: &RenderSettings,
) -> String {
    let mut out = String::with_capacity(256 + slots.len() * 48);
    write_backend(&mut out, name, backend, slots, rule_timeouts, settings);
    out
}

/// Whether a route of `desired` has a timeout of its own (an HTTPRoute rule's
/// `timeouts`): then every backend section applies the request's timeout.
pub fn has_rule_timeouts(desired: &Desired) -> bool {
    desired.feature_sets.values().any(|features| {
        features
            .gateway
            .as_ref()
            .is_some_and(|gateway| gateway.server_timeout_ms.is_some())
    })
}

fn write_backend(
    out: &mut String,
    name: &BackendName,
    backend: &Backend,
    slots: &[Option<Server>],
    rule_timeouts: bool,
    settings: &RenderSettings,
) {
    let options = &backend.options;
    if options.tls_passthrough || options.tcp_service {
        write_tcp_backend(out, name, backend, slots, settings);
        return;
    }
    let balance = options
        .balance
        .as_ref()
        .map_or_else(|| "roundrobin".to_string(), |b| b.directive());
    let _ = write!(
        out,
        "\n# Service {} port {}\nbackend {name}\n    balance {balance}\n",
        backend.service, backend.port
    );
    if let Some(timeout) = &options.timeout_server {
        let _ = writeln!(out, "    timeout server {timeout}");
    }
    if let Some(timeout) = &options.timeout_connect {
        let _ = writeln!(out, "    timeout connect {timeout}");
    }
    if let Some(path) = options
        .health_check
        .as_ref()
        .and_then(|c| c.http_path.as_ref())
    {
        let _ = writeln!(out, "    option httpchk GET {path}");
    }
    if let Some(cookie) = &options.cookie {
        let _ = write!(out, "    cookie {} insert indirect nocache", cookie.name);
        if cookie.http_only {
            out.push_str(" httponly");
        }
        // haproxy writes `path=/` itself; a later `Path` is the one browsers keep.
        if let Some(path) = &cookie.path {
            let _ = write!(out, " attr \"Path={path}\"");
        }
        if let Some(max_age) = cookie.max_age {
            let _ = write!(out, " attr \"Max-Age={max_age}\"");
        }
        out.push('\n');
    }
    // The server timeout of the request's HTTPRoute rule, when one has one.
    if rule_timeouts {
        out.push_str(crate::gateway_features::SERVER_TIMEOUT_RULE);
    }
    if options.blocked {
        // A Secret the backend's TLS needs is missing: no request goes out without it.
        out.push_str("    http-request deny deny_status 503\n");
    }
    let server_options = server_options(options, settings);
    if !server_options.is_empty() {
        let _ = writeln!(out, "    default-server {server_options}");
    }
    if let Some((host, port)) = &backend.external {
        // Resolved when haproxy loads the config; a name that does not resolve
        // leaves the server down instead of failing the whole config.
        let _ = writeln!(out, "    server external {host}:{port} init-addr libc,none");
        out.push_str(&snippet_lines(options.snippet.as_ref()));
        return;
    }
    let cookie = options.cookie.as_ref().map(|c| c.value_prefix());
    for (slot, server) in slots.iter().enumerate() {
        out.push_str(&server_line(slot, server.as_ref(), cookie));
    }
    out.push_str(&snippet_lines(options.snippet.as_ref()));
}

/// A mode tcp backend: a TLS passthrough backend (its servers get the client's TLS as
/// it is) or a TCP service's (long-lived connections, a PROXY header when asked); no
/// HTTP option applies.
fn write_tcp_backend(
    out: &mut String,
    name: &BackendName,
    backend: &Backend,
    slots: &[Option<Server>],
    settings: &RenderSettings,
) {
    let options = &backend.options;
    let kind = if options.tcp_service {
        "TCP service"
    } else {
        "TLS passthrough"
    };
    let _ = write!(
        out,
        "\n# Service {} port {}, {kind}\nbackend {name}\n    mode tcp\n    balance roundrobin\n",
        backend.service, backend.port
    );
    if options.tcp_service {
        // The tunnel timeout supersedes the server's once both sides are connected: the
        // ConfigMap's (for HTTP upgrades) must not cut TCP services.
        let idle = crate::tcp_services::IDLE_TIMEOUT;
        let _ = writeln!(out, "    timeout server {idle}\n    timeout tunnel {idle}");
    }
    let server_options = server_options(options, settings);
    if !server_options.is_empty() {
        let _ = writeln!(out, "    default-server {server_options}");
    }
    if let Some((host, port)) = &backend.external {
        let _ = writeln!(out, "    server external {host}:{port} init-addr libc,none");
        return;
    }
    for (slot, server) in slots.iter().enumerate() {
        out.push_str(&server_line(slot, server.as_ref(), None));
    }
}

/// The rules that normalize the request's path before anything looks at it, so that
/// routing and every route feature (authentication, access lists, rate limits) see the
/// path the application will serve: `//admin`, `/./admin`, `/x/../admin` and
/// `/%61dmin` all meet the rules of `/admin`.
///
/// haproxy's own normalizers (`normalize-uri`, RFC 3986) do the work: they give a valid
/// URI that can be forwarded as it is, which converters on the routing key (`url_dec`
/// decodes every character, `regsub` cannot resolve `..` repeatedly) cannot. What cannot
/// be normalized safely is refused with 400 first: a malformed `%`, an encoded `/`, an
/// encoded or raw `\` and an encoded NUL (applications disagree on what they mean);
/// after normalizing, a `..` that climbs above the root, and a `.` or `..` segment with
/// path parameters (`/x/..;/admin`: servers that drop `;` parameters, as Java's do,
/// resolve it as `..`, where haproxy sees a plain segment). `percent-decode-unreserved`
/// also decodes the query string, which must reach the backend untouched: it is kept
/// aside and put back. With `keep_original`, the path as received is kept too
/// (`txn.raw_path`), for [`restore_rules`].
fn normalize_rules(keep_original: bool) -> String {
    let mut out = String::from("    http-request set-var(txn.query) query\n");
    if keep_original {
        out.push_str("    http-request set-var(txn.raw_path) path\n");
    }
    out.push_str(
        "    http-request deny deny_status 400 if { path -m reg %([^0-9A-Fa-f]|.[^0-9A-Fa-f]|.?$) }
    http-request deny deny_status 400 if { path -m sub -i %2f %5c %00 \\\\ }
    http-request normalize-uri percent-decode-unreserved
    http-request normalize-uri path-merge-slashes
    http-request normalize-uri path-strip-dot
    http-request normalize-uri path-strip-dotdot
    http-request set-query %[var(txn.query)] if { var(txn.query) -m found }
    http-request deny deny_status 400 if { path -m beg /../ } || { path /.. }
    http-request deny deny_status 400 if { path -m reg (^|/)[.][.]?; }
",
    );
    out
}

/// The lookups of Gateway API wildcard hosts (any depth), after the one-label wildcard
/// lookups of Ingresses: the host without its first label, then without its first two,
/// and so on, the longest suffix first (`a.b.example.com`: `b.example.com*`, then
/// `example.com*`, then `com*`; see [`key`]).
///
/// Always written, whatever the routes' hosts: the frontend keeps one structure, so the
/// first route of a wildcard host (and the removal of the last) is a map update, not a
/// reload. They cost a request that a lookup before them routed one variable check
/// per line; the others one `field` and a tree lookup per line, which find nothing once
/// the host has no label left. Each line computes its own suffix (`field` of the host
/// from a label on), so there are two lines per level, none to cut labels. The path
/// after the suffix is the variable `lookup_path` ([`OwnBinds::lookup_path`]).
fn subdomain_rules(
    exact: &impl std::fmt::Display,
    prefix: &impl std::fmt::Display,
    lookup_path: &str,
) -> String {
    let mut out = String::new();
    for level in 0..SUBDOMAIN_DEPTH {
        // The host from its label `level + 2` on.
        let from = level + 2;
        for (map, lookup) in [
            (exact.to_string(), "map_str"),
            (prefix.to_string(), "map_beg"),
        ] {
            let _ = writeln!(
                out,
                "    http-request set-var(txn.route) var(txn.host),field({from},.,0),concat(*,{path}),{lookup}({map}) if !{{ var(txn.route) -m found }}",
                path = lookup_path,
            );
        }
    }
    out
}

/// Whether some requests reach their backend with the path as the client sent it
/// (`backend-path: original`).
fn keeps_original_path(desired: &Desired) -> bool {
    desired.global.original_path || desired.feature_sets.values().any(|f| f.original_path)
}

/// The rules that give back the path as received to the requests whose route (or, for
/// requests that match none, the ConfigMap) says `backend-path: original`. They come
/// right after the route lookup, so the route features after them see the path the
/// backend will get.
fn restore_rules(desired: &Desired) -> String {
    let restore =
        "    http-request set-path %[var(txn.raw_path)] if { var(txn.raw_path) -m found }";
    let mut out = String::new();
    let ids: Vec<&str> = desired
        .feature_sets
        .iter()
        .filter(|(_, f)| f.original_path)
        .map(|(id, _)| id.as_str())
        .collect();
    if !ids.is_empty() {
        let _ = writeln!(out, "{restore} {{ var(txn.fs) -m str {} }}", ids.join(" "));
    }
    if desired.global.original_path {
        let _ = writeln!(out, "{restore} !{{ var(txn.route) -m found }}");
    }
    out
}

/// The lines of an operator's snippet, indented, after a comment saying where they
/// come from.
fn snippet_lines(snippet: Option<&Snippet>) -> String {
    let Some(snippet) = snippet else {
        return String::new();
    };
    let mut out = format!("    # snippet of {}\n", snippet.source);
    for line in &snippet.lines {
        let _ = writeln!(out, "    {line}");
    }
    out
}

/// The two route maps, as file contents: the routes of the HTTP and HTTPS binds, and
/// those of each port with a bind of its own (keys with `|PORT` before the path).
fn route_maps(desired: &Desired) -> (String, String) {
    let mut at_path: BTreeMap<(Option<u16>, &HostMatch, &str), RoutesAtPath> = BTreeMap::new();
    let tables = std::iter::once((None, &desired.routes)).chain(
        desired
            .listener_binds
            .iter()
            .map(|bind| (Some(bind.port), &bind.routes)),
    );
    for (port, route) in tables.flat_map(|(port, routes)| routes.iter().map(move |r| (port, r))) {
        let entry = at_path
            .entry((port, &route.host, path_text(&route.path)))
            .or_default();
        match route.path {
            PathMatch::Exact(_) => entry.exact = Some(route),
            PathMatch::Prefix(_) => entry.prefix = Some(route),
            // In the config, not in a map: see `regex_route_rules`.
            PathMatch::Regex(_) => {}
        }
    }
    let (mut exact, mut prefix) = (Vec::new(), Vec::new());
    for ((port, host, path), routes) in &at_path {
        exact.extend(routes.exact_line(*port, host, path));
        prefix.extend(routes.prefix_line(*port, host, path));
    }
    (
        map_text::lines(
            MapOrder::Key,
            exact.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        ),
        map_text::lines(
            MapOrder::LongestFirst,
            prefix.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        ),
    )
}

/// The path of a rule, whatever its type.
pub fn path_text(path: &PathMatch) -> &str {
    match path {
        PathMatch::Exact(path) | PathMatch::Prefix(path) | PathMatch::Regex(path) => path,
    }
}

/// Which hosts' regex routes a group of lookup rules is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RegexHosts {
    Exact,
    Wildcard,
    Any,
}

/// The lookups of the regex routes (ingress-nginx's `use-regex`) of one kind of host:
/// one rule each, in the config rather than a map (map files cannot keep the order
/// they need at runtime, so a change of them is a reload), the longest expression of a
/// host first. They come after the host's exact map and before its prefix map. The
/// expressions were checked by the model (`validate::regex`): between single quotes,
/// haproxy reads them as they are.
fn regex_route_rules(routes: &[Route], hosts: RegexHosts, own: &OwnBinds) -> String {
    let mut found: Vec<(&str, &str, &Route)> = routes
        .iter()
        .filter_map(|route| {
            let PathMatch::Regex(pattern) = &route.path else {
                return None;
            };
            let host = match (&route.host, hosts) {
                (HostMatch::Exact(host), RegexHosts::Exact)
                | (HostMatch::Wildcard(host), RegexHosts::Wildcard) => host.as_str(),
                (HostMatch::Any, RegexHosts::Any) => "",
                _ => return None,
            };
            Some((host, pattern.as_str(), route))
        })
        .collect();
    found.sort_by(|a, b| {
        (a.0, std::cmp::Reverse(a.1.len()), a.1).cmp(&(b.0, std::cmp::Reverse(b.1.len()), b.1))
    });
    let mut out = String::new();
    for (host, pattern, route) in found {
        let host_condition = match hosts {
            RegexHosts::Exact => format!(" {{ var(txn.host) -m str {host} }}"),
            RegexHosts::Wildcard => format!(" {{ var(txn.wild) -m str {host} }}"),
            RegexHosts::Any => String::new(),
        };
        let _ = writeln!(
            out,
            "    http-request set-var(txn.route) str({}) if !{{ var(txn.route) -m found }}{host_condition} {{ var(txn.path) -m reg -i '^{pattern}' }}{}",
            map_value(route),
            own.main_binds_only(""),
        );
    }
    out
}

/// The routes on one host and path: the Exact one and the Prefix one. Together they
/// make at most one line of each route map.
#[derive(Debug, Default, Clone, Copy)]
pub struct RoutesAtPath<'a> {
    pub exact: Option<&'a Route>,
    pub prefix: Option<&'a Route>,
}

impl<'a> RoutesAtPath<'a> {
    /// The routes of `routes` (sorted by host and path) on `host` and `path`.
    pub fn find(routes: &'a [Route], host: &HostMatch, path: &str) -> Self {
        let find = |path: PathMatch| {
            routes
                .binary_search_by(|r| (&r.host, &r.path).cmp(&(host, &path)))
                .ok()
                .and_then(|at| routes.get(at))
        };
        Self {
            exact: find(PathMatch::Exact(path.to_string())),
            prefix: find(PathMatch::Prefix(path.to_string())),
        }
    }

    /// The line of the exact map: the Exact rule's, else the Prefix rule's for its own
    /// path (`/` has none: the prefix map's `host/` covers it).
    /// `port`: the port of a bind of its own whose routes these are.
    pub fn exact_line(
        &self,
        port: Option<u16>,
        host: &HostMatch,
        path: &str,
    ) -> Option<(String, String)> {
        let route = self.exact.or(self.prefix.filter(|_| path != "/"))?;
        Some((key(port, host, path), map_value(route)))
    }

    /// The line of the prefix map: the Prefix rule's, for what is under its path.
    pub fn prefix_line(
        &self,
        port: Option<u16>,
        host: &HostMatch,
        path: &str,
    ) -> Option<(String, String)> {
        let route = self.prefix?;
        let key = if path == "/" {
            key(port, host, "/")
        } else {
            key(port, host, &format!("{path}/"))
        };
        Some((key, map_value(route)))
    }
}

/// The map value of a route: its backend, its feature set when it has one, then its
/// canary's backend and share (see `features::canary`); after
/// [`OWNER_SEPARATOR`], the object it comes from (`txn.owner`, see `access_log`), and
/// after another, the route's id in the request counters (`txn.rid`, see
/// `request_stats`).
fn map_value(route: &Route) -> String {
    let sep = FEATURE_SEPARATOR;
    let target = match (&route.features, &route.canary) {
        (None, _) => route.backend.to_string(),
        (Some(features), None) => format!("{}{sep}{features}", route.backend),
        (Some(features), Some(canary)) => format!(
            "{}{sep}{features}{sep}{}{sep}{}",
            route.backend, canary.backend, canary.per_million
        ),
    };
    format!(
        "{target}{OWNER_SEPARATOR}{}{OWNER_SEPARATOR}{}",
        route.owner(),
        crate::request_stats::route_id(route)
    )
}

/// The map key of a host and a path, on the HTTP and HTTPS binds (`port`: `None`) or
/// on the bind of its own of a listener port: there, `|PORT` comes before the path, as
/// requests on that bind look it up ([`OwnBinds::lookup_rules`]).
fn key(port: Option<u16>, host: &HostMatch, path: &str) -> String {
    match port {
        None => host_key(host, path),
        Some(port) => host_key(host, &format!("|{port}{path}")),
    }
}

/// The map key of a host and what follows it.
fn host_key(host: &HostMatch, path: &str) -> String {
    match host {
        HostMatch::Any => path.to_string(),
        HostMatch::Exact(host) | HostMatch::Wildcard(host) => format!("{host}{path}"),
        // The suffix without its leading dot, then `*`: apart from the one-label
        // wildcards of Ingresses (`.example.com/`) and from hosts (no `*` in them); a
        // host without labels left looks up `*/...`, which no key is.
        HostMatch::Subdomains(suffix) => {
            format!("{}*{path}", suffix.strip_prefix('.').unwrap_or(suffix))
        }
    }
}

/// The binds of their own of Gateway listener ports (`--gateway-listener-ports`) in the
/// HTTP frontend, and the rules that keep their routes apart. Their routes share the
/// route maps, their keys with `|PORT` before the path: a request on such a bind looks
/// its routes up with that prefix (`txn.lpath`), a request on the HTTP and HTTPS binds
/// with its plain path; a `Host` with a `|` is refused (not a valid host), so no request
/// reaches another bind's routes. Without such a bind the frontend is as it was: the
/// lookups read `txn.path` and no rule is added.
struct OwnBinds {
    /// The `bind` lines.
    binds: String,
    /// The ports, for the lookup rules.
    ports: Vec<u16>,
}

impl OwnBinds {
    fn of(desired: &Desired, settings: &RenderSettings, tls_options: &str) -> Self {
        let mut binds = String::new();
        let mut ports = Vec::new();
        for bind in &desired.listener_binds {
            // The model's ports come from the flag, which checked them.
            let Ok(bind_port) = tugboat_model::ports::bind_port(i64::from(bind.port)) else {
                continue;
            };
            let tls = if bind.tls {
                format!(" {tls_options}")
            } else {
                String::new()
            };
            let _ = writeln!(
                binds,
                "    bind {} name {}{tls}",
                settings.bind(bind_port),
                Self::name(bind.port)
            );
            ports.push(bind.port);
        }
        Self { binds, ports }
    }

    /// The `name` of the bind of `port`, for `so_name`.
    fn name(port: u16) -> String {
        format!("listener_{port}")
    }

    /// The variable the route lookups read after the host.
    fn lookup_path(&self) -> &'static str {
        if self.ports.is_empty() {
            "txn.path"
        } else {
            "txn.lpath"
        }
    }

    /// The rules that set `txn.lpath`: the path, with `|PORT` before it on a bind of
    /// its own.
    fn lookup_rules(&self) -> String {
        if self.ports.is_empty() {
            return String::new();
        }
        let mut out = String::from(
            "    http-request deny deny_status 400 if { var(txn.host) -m sub | }\n    http-request set-var(txn.lpath) var(txn.path)\n",
        );
        for port in &self.ports {
            let _ = writeln!(
                out,
                "    http-request set-var(txn.lpath) str(|{port}),concat(,txn.path) if {{ so_name {} }}",
                Self::name(*port)
            );
        }
        out
    }

    /// A condition that holds on the HTTP and HTTPS binds only (after `lead`, e.g.
    /// ` if`), for what only their routes do (Ingress regular expressions, the HTTPS
    /// redirect of the Ingresses' TLS hosts); nothing without binds of their own.
    fn main_binds_only(&self, lead: &str) -> String {
        if self.ports.is_empty() {
            String::new()
        } else {
            format!("{lead} {{ var(txn.lpath) -m beg / }}")
        }
    }

    /// The requests of a bind of its own that no route takes get the 404, never the
    /// Ingresses' default backend.
    fn not_found_rule(&self, desired: &Desired) -> String {
        if self.ports.is_empty() || desired.default_backend.is_none() {
            return String::new();
        }
        format!("    use_backend {NOT_FOUND_BACKEND} if {{ var(txn.lpath) -m beg | }}\n")
    }
}

#[cfg(test)]
mod tests {

    use tugboat_model::desired::ServicePortRef;
    use tugboat_model::{Backend, BackendName, Endpoint, ObjectKey};

    use super::*;

    fn settings() -> RenderSettings {
        RenderSettings::example()
    }

    fn backend(service: &str, port: u16, endpoints: &[&str]) -> (BackendName, Backend) {
        let key = ObjectKey::new("shop", service);
        let port = ServicePortRef::Number(port);
        let name = BackendName::for_service_port(&key, &port).expect("valid name");
        let endpoints = endpoints
            .iter()
            .map(|e| {
                let addr: std::net::SocketAddr = e.parse().expect("endpoint");
                Endpoint {
                    address: addr.ip(),
                    port: addr.port(),
                }
            })
            .collect();
        (
            name,
            Backend {
                service: key,
                port,
                endpoints,
                draining: Vec::new(),
                external: None,
                options: Default::default(),
            },
        )
    }

    fn route(host: HostMatch, path: PathMatch, backend: &BackendName) -> Route {
        Route {
            host,
            path,
            backend: backend.clone(),
            ingress: ObjectKey::new("shop", "ing"),
            owner_kind: tugboat_model::RouteOwnerKind::Ingress,
            features: None,
            canary: None,
        }
    }

    fn desired() -> Desired {
        let (web, web_backend) = backend("web", 80, &["10.0.0.1:8080", "10.0.0.2:8080"]);
        let (api, api_backend) = backend("api", 80, &[]);
        let host = HostMatch::Exact("shop.example.com".into());
        Desired {
            routes: vec![
                route(host.clone(), PathMatch::Prefix("/".into()), &web),
                route(host.clone(), PathMatch::Prefix("/api".into()), &api),
                route(host.clone(), PathMatch::Exact("/api".into()), &web),
                route(
                    HostMatch::Wildcard(".example.com".into()),
                    PathMatch::Prefix("/static".into()),
                    &web,
                ),
                route(HostMatch::Any, PathMatch::Exact("/healthz".into()), &api),
            ],
            backends: [(web, web_backend), (api, api_backend)].into(),
            tls_hosts: vec![HostMatch::Exact("shop.example.com".into())],
            ssl_redirect: true,
            ..Desired::default()
        }
    }

    fn render_fresh(desired: &Desired) -> RenderedFiles {
        render(desired, &Layout::fresh(desired), &settings())
    }

    #[test]
    fn renders_config_and_maps() {
        let rendered = render_fresh(&desired());
        for (path, text) in rendered
            .files
            .iter()
            .filter(|(p, _)| !p.ends_with("default.pem"))
        {
            insta::assert_snapshot!(path.display().to_string(), text.as_str());
        }
    }

    #[test]
    fn listener_ports_bind_at_the_offset_and_look_up_their_own_keys() {
        let mut desired = desired();
        let plain = frontend(&desired);
        assert!(!plain.contains("txn.lpath"), "nothing new without them");
        let web = desired.routes[0].backend.clone();
        let api = desired.routes[1].backend.clone();
        desired.default_backend = Some(api.clone());
        desired.listener_binds = vec![
            tugboat_model::ListenerBind {
                port: 8080,
                tls: false,
                routes: vec![
                    route(HostMatch::Any, PathMatch::Prefix("/".into()), &api),
                    route(
                        HostMatch::Exact("shop.example.com".into()),
                        PathMatch::Prefix("/app".into()),
                        &web,
                    ),
                ],
            },
            tugboat_model::ListenerBind {
                port: 9443,
                tls: true,
                routes: vec![route(
                    HostMatch::Subdomains(".example.com".into()),
                    PathMatch::Exact("/x".into()),
                    &web,
                )],
            },
        ];
        let config = frontend(&desired);
        assert!(
            config.contains("    bind 0.0.0.0:18080 name listener_8080\n"),
            "{config}"
        );
        assert!(
            config.contains("    bind 0.0.0.0:19443 name listener_9443 ssl crt "),
            "{config}"
        );
        for line in [
            "http-request deny deny_status 400 if { var(txn.host) -m sub | }",
            "http-request set-var(txn.lpath) str(|8080),concat(,txn.path) if { so_name listener_8080 }",
            "http-request set-var(txn.route) var(txn.host),concat(,txn.lpath),map_str(",
            "http-request set-var(txn.route) var(txn.lpath),map_beg(",
            "use_backend tugboat_not_found if { var(txn.lpath) -m beg | }",
        ] {
            assert!(config.contains(line), "{line} in {config}");
        }
        let rendered = render_fresh(&desired);
        let settings = settings();
        let exact = rendered.get(&settings.exact_map()).unwrap_or_default();
        let prefix = rendered.get(&settings.prefix_map()).unwrap_or_default();
        assert!(exact.contains("shop.example.com|8080/app "), "{exact}");
        assert!(exact.contains("example.com*|9443/x "), "{exact}");
        assert!(prefix.contains("|8080/ "), "{prefix}");
        assert!(prefix.contains("shop.example.com|8080/app/ "), "{prefix}");
        assert!(
            prefix.contains("shop.example.com/ "),
            "the main binds' keys stay"
        );
    }

    #[test]
    fn the_rendered_paths_are_those_of_a_render_but_the_backends_files() {
        let mut desired = with_features(tugboat_model::features::RouteFeatures {
            max_body_size: Some(1024),
            ..Default::default()
        });
        desired
            .error_pages
            .insert(503, "HTTP/1.0 503\r\n\r\n".into());
        desired
            .pattern_files
            .insert("shop_allow".into(), "10.0.0.0/8\n".into());
        let settings = settings();
        let rendered = render_fresh(&desired);
        let expected: BTreeSet<PathBuf> = rendered
            .files
            .keys()
            .filter(|path| !settings.is_backends_file(path))
            .cloned()
            .collect();
        assert!(expected.contains(&settings.error_page(503)), "{expected:?}");
        assert!(
            expected.contains(&settings.body_limit_script()),
            "{expected:?}"
        );
        assert_eq!(rendered_paths(&desired, &settings), expected);
    }

    #[test]
    fn a_route_map_value_names_the_routes_owner_after_the_owner_separator() {
        let mut desired = desired();
        for route in &mut desired.routes {
            route.owner_kind = tugboat_model::RouteOwnerKind::HttpRoute;
        }
        let rendered = render_fresh(&desired);
        let exact = rendered.get(&settings().exact_map()).expect("exact map");
        assert!(
            exact.contains("shop.example.com/api shop_web_80|HTTPRoute/shop/ing|"),
            "{exact}"
        );
        let config = frontend(&desired);
        let owner = config
            .find("set-var(txn.owner) var(txn.route),field(2,|)")
            .expect("the owner rule");
        let strip = config
            .find("set-var(txn.route) var(txn.route),field(1,|)")
            .expect("the value without the owner");
        let backend = config
            .find("set-var(txn.backend) var(txn.route),field(1,.)")
            .expect("the backend rule");
        assert!(owner < strip && strip < backend, "{config}");
    }

    #[test]
    fn exact_rule_keeps_its_key_over_a_prefix_rule_on_the_same_path() {
        let rendered = render_fresh(&desired());
        let exact = rendered.get(&settings().exact_map()).expect("exact map");
        assert!(
            exact.contains("shop.example.com/api shop_web_80|Ingress/shop/ing|"),
            "{exact}"
        );
        assert!(
            !exact.contains("shop.example.com/api shop_api_80"),
            "{exact}"
        );
    }

    #[test]
    fn prefix_map_is_longest_key_first() {
        let rendered = render_fresh(&desired());
        let prefix = rendered.get(&settings().prefix_map()).expect("prefix map");
        let keys: Vec<usize> = prefix
            .lines()
            .map(|l| l.split(' ').next().map_or(0, str::len))
            .collect();
        assert!(keys.windows(2).all(|w| w[0] >= w[1]), "{prefix}");
    }

    /// The desired state with one feature set on the `/api` prefix.
    fn with_features(features: tugboat_model::features::RouteFeatures) -> Desired {
        let mut desired = desired();
        let id = tugboat_model::features::FeatureSetId::of(&features);
        desired.feature_sets.insert(id.clone(), features);
        for route in &mut desired.routes {
            if route.path == PathMatch::Prefix("/api".into()) {
                route.features = Some(id.clone());
            }
        }
        desired
    }

    fn frontend(desired: &Desired) -> String {
        let rendered = render_fresh(desired);
        rendered
            .get(&settings().config_file())
            .expect("config")
            .to_string()
    }

    /// The backends' config files, one after the other.
    fn backends_config(desired: &Desired) -> String {
        let rendered = render_fresh(desired);
        rendered
            .files
            .iter()
            .filter(|(path, _)| settings().is_backends_file(path))
            .map(|(_, text)| text.as_str())
            .collect()
    }

    #[test]
    fn regex_routes_are_looked_up_after_exact_and_before_prefix_paths_longest_first() {
        let mut desired = desired();
        let backend = desired.routes[0].backend.clone();
        for pattern in ["/v[0-9]+", "/v[0-9]+/items/(.*)"] {
            desired.routes.push(Route {
                host: HostMatch::Exact("a.example.com".into()),
                path: PathMatch::Regex(pattern.into()),
                backend: backend.clone(),
                ingress: desired.routes[0].ingress.clone(),
                owner_kind: tugboat_model::RouteOwnerKind::Ingress,
                features: None,
                canary: None,
            });
        }
        desired
            .routes
            .sort_by(|a, b| (&a.host, &a.path).cmp(&(&b.host, &b.path)));
        let rendered = render_fresh(&desired);
        let config = frontend(&desired);
        let at = |needle: &str| {
            config
                .find(needle)
                .unwrap_or_else(|| panic!("{needle} in {config}"))
        };
        let exact_lookup = at("var(txn.host),concat(,txn.path),map_str(");
        let longer = at("-m reg -i '^/v[0-9]+/items/(.*)'");
        let shorter = at("-m reg -i '^/v[0-9]+'");
        let prefix_lookup = at("var(txn.host),concat(,txn.path),map_beg(");
        assert!(exact_lookup < longer && longer < shorter && shorter < prefix_lookup);
        let shorter_route = desired
            .routes
            .iter()
            .find(|route| route.path == PathMatch::Regex("/v[0-9]+".into()))
            .expect("the shorter regex route");
        assert!(config.contains(&format!(
            "    http-request set-var(txn.route) str({backend}|Ingress/shop/ing|{}) if !{{ var(txn.route) -m found }} {{ var(txn.host) -m str a.example.com }} {{ var(txn.path) -m reg -i '^/v[0-9]+' }}\n",
            crate::request_stats::route_id(shorter_route)
        )));
        // Not in the maps.
        for map in [settings().exact_map(), settings().prefix_map()] {
            let text = rendered.get(&map).expect("map");
            assert!(!text.contains("[0-9]"), "{text}");
        }
    }

    #[test]
    fn backend_tls_sends_the_name_and_verifies_it_with_a_ca() {
        let mut options = BackendOptions {
            tls: Some(tugboat_model::features::ServerTls {
                ca_file: None,
                client_certificate: None,
                server_name: "web.shop.svc".into(),
            }),
            ..BackendOptions::default()
        };
        assert_eq!(
            server_options(&options, &settings()),
            "ssl sni str(web.shop.svc) verify none"
        );
        if let Some(tls) = options.tls.as_mut() {
            tls.ca_file = Some("ca_shop_web.pem".into());
        }
        assert_eq!(
            server_options(&options, &settings()),
            format!(
                "ssl sni str(web.shop.svc) verify required ca-file {} verifyhost web.shop.svc",
                settings().backend_file("ca_shop_web.pem").display()
            )
        );
    }

    #[test]
    fn app_root_redirects_only_the_root_to_the_same_scheme_and_host() {
        let desired = with_features(tugboat_model::features::RouteFeatures {
            app_root: Some("/app1".into()),
            ..Default::default()
        });
        let id = desired.feature_sets.keys().next().expect("a set").clone();
        assert!(frontend(&desired).contains(&format!(
            "    http-request redirect location %[ssl_fc,iif(https,http)]://%[req.hdr(host)]/app1 code 302 if {{ var(txn.fs) -m str {id} }} {{ path / }}\n"
        )));
    }

    #[test]
    fn a_www_redirect_goes_to_the_host_on_the_request_scheme_before_any_https_redirect() {
        use tugboat_model::features::{
            HttpsRedirect, Redirect, RedirectTarget, RedirectWhen, RouteFeatures,
        };
        // The feature set of ingress-nginx's `from-to-www-redirect` (the model's).
        let mut desired = with_features(RouteFeatures {
            https_redirect: Some(HttpsRedirect {
                when: RedirectWhen::Never,
                code: 308,
                port: None,
            }),
            redirect: Some(Redirect {
                target: RedirectTarget::Host("shop.example.com".into()),
                code: 308,
            }),
            ..Default::default()
        });
        desired.ssl_redirect = true;
        let id = desired.feature_sets.keys().next().expect("a set").clone();
        let config = frontend(&desired);
        let acl = format!("{{ var(txn.fs) -m str {id} }}");
        let to_http = format!(
            "    http-request redirect prefix http://shop.example.com code 308 if {acl} !{{ ssl_fc }}\n"
        );
        let to_https = format!(
            "    http-request redirect prefix https://shop.example.com code 308 if {acl} {{ ssl_fc }}\n"
        );
        assert!(config.contains(&to_http), "{config}");
        assert!(config.contains(&to_https), "{config}");
        // The default HTTPS redirect of TLS hosts leaves the set alone.
        let default_redirect = config
            .lines()
            .find(|l| l.contains("http-request redirect scheme https"))
            .expect("the default HTTPS redirect");
        assert!(
            default_redirect.ends_with(&format!(" !{acl}")),
            "{default_redirect}"
        );
    }

    #[test]
    fn external_authentication_loads_its_script_only_when_used() {
        let script = settings().external_auth_script();
        let plain = render_fresh(&desired());
        assert_eq!(plain.get(&script), None);
        assert!(!frontend(&desired()).contains("lua-load"));
        let guarded = with_features(tugboat_model::features::RouteFeatures {
            external_auth: Some(tugboat_model::features::ExternalAuth {
                url: "http://auth.example.com/check".into(),
                method: "GET".into(),
                response_headers: vec![],
                signin: None,
            }),
            ..Default::default()
        });
        let rendered = render_fresh(&guarded);
        assert_eq!(rendered.get(&script), Some(crate::external_auth::SCRIPT));
        let config = frontend(&guarded);
        let global = config.split("\ndefaults").next().unwrap_or("");
        assert!(
            global.contains(&format!("    lua-load {}\n", script.display())),
            "{global}"
        );
    }

    /// The desired state with client certificates (`verify`) on `shop.example.com`'s
    /// `/api`, whose certificate it shares with `www.example.com`.
    fn with_client_certificates(verify: tugboat_model::features::VerifyClient) -> Desired {
        use tugboat_model::features::{ClientCa, ClientCertificates, RouteFeatures};
        let ca = ClientCa {
            ca_file: "shop_client-ca.ca.pem".into(),
            crl_file: Some("shop_client-ca.crl.pem".into()),
        };
        let mut desired = with_features(RouteFeatures {
            client_certificates: Some(ClientCertificates {
                ca: ca.clone(),
                verify,
                error_page: None,
                pass_certificate: true,
                match_subject: Some("CN=app".into()),
            }),
            ..Default::default()
        });
        desired.certificates.insert(
            "shop_site".into(),
            tugboat_model::TlsCertificate {
                name: "shop_site".into(),
                pem: tugboat_model::tls::Pem::from_checked("SITE PEM\n".into()),
                hosts: vec!["shop.example.com".into(), "www.example.com".into()],
            },
        );
        desired.certificates.insert(
            "shop_wildcard".into(),
            tugboat_model::TlsCertificate {
                name: "shop_wildcard".into(),
                pem: tugboat_model::tls::Pem::from_checked("WILDCARD PEM\n".into()),
                hosts: vec!["*.example.net".into()],
            },
        );
        desired
            .client_ca_hosts
            .insert("api.example.net".into(), ca.clone());
        desired
            .client_ca_hosts
            .insert("shop.example.com".into(), ca.clone());
        desired.client_ca_hosts.insert("*.example.org".into(), ca);
        for file in ["shop_client-ca.ca.pem", "shop_client-ca.crl.pem"] {
            desired.client_ca_files.insert(
                file.into(),
                tugboat_model::tls::Pem::from_checked("CA PEM\n".into()),
            );
        }
        desired
    }

    #[test]
    fn a_host_with_client_certificates_has_a_crt_list_line_of_its_own() {
        let verified = with_client_certificates(tugboat_model::features::VerifyClient::On);
        let rendered = render_fresh(&verified);
        let list = rendered.get(&settings().crt_list()).expect("crt-list");
        let options = "[ca-file /var/lib/haproxy/client-ca/shop_client-ca.ca.pem verify optional \
                       crl-file /var/lib/haproxy/client-ca/shop_client-ca.crl.pem]";
        assert_eq!(
            list,
            format!(
                "/var/lib/haproxy/certs/shop_site.pem www.example.com\n\
                 /var/lib/haproxy/certs/shop_site.pem {options} shop.example.com\n\
                 /var/lib/haproxy/certs/shop_wildcard.pem *.example.net\n\
                 /var/lib/haproxy/default.pem {options} *.example.org\n\
                 /var/lib/haproxy/certs/shop_wildcard.pem {options} api.example.net\n"
            )
        );
        assert_eq!(
            rendered.get(&settings().client_ca_file("shop_client-ca.ca.pem")),
            Some("CA PEM\n")
        );
        assert_eq!(
            rendered.get(&settings().verify_errors_map()),
            Some(crate::client_certs::VERIFY_ERRORS)
        );
        let config = frontend(&verified);
        assert!(
            config.contains("alpn h2,http/1.1 ca-ignore-err all crt-ignore-err all\n"),
            "{config}"
        );
        // Without such hosts, none of it.
        let plain = render_fresh(&desired());
        assert_eq!(plain.get(&settings().verify_errors_map()), None);
        assert!(!frontend(&desired()).contains("ignore-err"));
    }

    #[test]
    fn client_certificate_rules_refuse_misdirected_missing_and_failed_then_tell_the_backend() {
        let desired = with_client_certificates(tugboat_model::features::VerifyClient::On);
        let config = frontend(&desired);
        let position = |text: &str| {
            config
                .find(text)
                .unwrap_or_else(|| panic!("{text} in {config}"))
        };
        let deleted = position("http-request del-header ssl-client-verify\n");
        let misdirected = position("http-request return status 421 ");
        let missing = position("\"No required SSL certificate was sent\\n\"");
        let failed = position("\"The SSL certificate error\\n\"");
        let subject = position("!{ ssl_c_s_dn(,0,rfc2253) -m reg 'CN=app' }");
        let told =
            position("http-request set-header ssl-client-verify %[var(txn.tugboat_cc_verify)]");
        let certificate =
            position("http-request set-header ssl-client-cert -----BEGIN%%20CERTIFICATE-----%%0A");
        assert!(deleted < misdirected && misdirected < missing && missing < failed);
        assert!(failed < subject && subject < told && told < certificate);
        assert!(config.contains("!{ ssl_fc_sni,lower,strcmp(txn.host) eq 0 }"));
        // `optional_no_ca` refuses nothing for the certificate itself.
        let any = frontend(&with_client_certificates(
            tugboat_model::features::VerifyClient::OptionalNoCa,
        ));
        assert!(!any.contains("No required SSL certificate"), "{any}");
        assert!(!any.contains("The SSL certificate error"), "{any}");
        assert!(any.contains("http-request return status 421 "), "{any}");
    }

    #[test]
    fn the_path_is_normalized_before_the_route_lookup() {
        let config = frontend(&desired());
        let normalize = config
            .find("normalize-uri path-strip-dotdot")
            .expect("normalizers");
        let lookup = config.find("set-var(txn.path) path").expect("lookup");
        assert!(normalize < lookup, "{config}");
        assert!(config.contains("\n    expose-experimental-directives\n"));
        // Nobody asks for the original path: it is not kept.
        assert!(!config.contains("txn.raw_path"), "{config}");
    }

    #[test]
    fn original_path_is_put_back_for_its_feature_sets_after_the_lookup() {
        let features = tugboat_model::features::RouteFeatures {
            original_path: true,
            ..Default::default()
        };
        let id = tugboat_model::features::FeatureSetId::of(&features);
        let config = frontend(&with_features(features));
        let keep = config
            .find("http-request set-var(txn.raw_path) path\n")
            .expect("kept");
        let normalize = config
            .find("    http-request normalize-uri percent-decode-unreserved\n")
            .expect("normalizers");
        let restore = format!(
            "    http-request set-path %[var(txn.raw_path)] if {{ var(txn.raw_path) -m found }} \
             {{ var(txn.fs) -m str {id} }}\n"
        );
        let restored = config.find(&restore).expect(&restore);
        let fs = config.find("set-var(txn.fs)").expect("feature set lookup");
        assert!(keep < normalize && fs < restored, "{config}");
        assert_eq!(config.matches("set-path %[var(txn.raw_path)]").count(), 1);
    }

    #[test]
    fn original_path_from_the_config_map_covers_requests_without_a_route() {
        let mut desired = desired();
        desired.global.original_path = true;
        let config = frontend(&desired);
        assert!(config.contains("http-request set-var(txn.raw_path) path\n"));
        assert!(
            config.contains(
                "    http-request set-path %[var(txn.raw_path)] if { var(txn.raw_path) -m found } \
                 !{ var(txn.route) -m found }\n"
            ),
            "{config}"
        );
    }

    #[test]
    fn a_redirect_to_a_host_keeps_the_scheme_path_and_query() {
        use tugboat_model::features::{Redirect, RedirectTarget, RouteFeatures};
        let features = RouteFeatures {
            redirect: Some(Redirect {
                target: RedirectTarget::Host("example.com:8443".into()),
                code: 301,
            }),
            ..Default::default()
        };
        let id = tugboat_model::features::FeatureSetId::of(&features);
        let config = frontend(&with_features(features));
        assert!(
            config.contains(&format!(
                "    http-request redirect prefix https://example.com:8443 code 301 if \
             {{ var(txn.fs) -m str {id} }} {{ ssl_fc }}\n    \
             http-request redirect prefix http://example.com:8443 code 301 if \
             {{ var(txn.fs) -m str {id} }} !{{ ssl_fc }}\n"
            )),
            "{config}"
        );
    }

    #[test]
    fn a_redirect_to_a_url_sends_every_request_there() {
        use tugboat_model::features::{Redirect, RedirectTarget, RouteFeatures};
        let features = RouteFeatures {
            redirect: Some(Redirect {
                target: RedirectTarget::Url("https://www.example.com/new".into()),
                code: 302,
            }),
            ..Default::default()
        };
        let id = tugboat_model::features::FeatureSetId::of(&features);
        let config = frontend(&with_features(features));
        assert!(
            config.contains(&format!(
                "    http-request redirect location https://www.example.com/new code 302 if \
             {{ var(txn.fs) -m str {id} }}\n"
            )),
            "{config}"
        );
    }

    #[test]
    fn a_canary_is_in_the_route_map_and_its_rules_in_the_set() {
        use tugboat_model::Canary;
        use tugboat_model::features::{CanaryRules, FeatureSetId, RouteFeatures};
        let features = RouteFeatures {
            canary: Some(CanaryRules {
                header: Some("X-Canary".into()),
                header_value: None,
                header_pattern: None,
                cookie: Some("beta".into()),
                affinity: None,
            }),
            ..Default::default()
        };
        let id = FeatureSetId::of(&features);
        let mut desired = with_features(features);
        let (canary, canary_backend) = backend("canary", 80, &["10.0.0.9:8080"]);
        desired.backends.insert(canary.clone(), canary_backend);
        for route in &mut desired.routes {
            if route.path == PathMatch::Prefix("/api".into()) {
                route.canary = Some(Canary {
                    backend: canary.clone(),
                    per_million: 250_000,
                    ingress: ObjectKey::new("shop", "canary"),
                });
            }
        }
        let rendered = render_fresh(&desired);
        let prefix = rendered.get(&settings().prefix_map()).expect("prefix map");
        assert!(
            prefix.contains(&format!(
                "shop.example.com/api/ shop_api_80.{id}.shop_canary_80.250000|Ingress/shop/ing|"
            )),
            "{prefix}"
        );
        let config = frontend(&desired);
        let acl = format!("{{ var(txn.fs) -m str {id} }}");
        let rules = [
            format!("http-request set-var(txn.canary) var(txn.route),field(3,.) if {acl}"),
            format!(
                "http-request set-var(txn.to_canary) bool(true) if {acl} !{{ var(txn.to_canary) -m found }} {{ req.fhdr(X-Canary) -m str always }}"
            ),
            format!(
                "http-request set-var(txn.to_canary) bool(false) if {acl} !{{ var(txn.to_canary) -m found }} {{ req.fhdr(X-Canary) -m str never }}"
            ),
            format!(
                "http-request set-var(txn.to_canary) bool(true) if {acl} !{{ var(txn.to_canary) -m found }} {{ req.cook(beta) -m str always }}"
            ),
            format!(
                "http-request set-var(txn.to_canary) bool(true) if {acl} !{{ var(txn.to_canary) -m found }} {{ rand(1000000),neg,add(txn.canary_share) -m int gt 0 }}"
            ),
            format!(
                "http-request set-var(txn.backend) var(txn.canary) if {acl} {{ var(txn.to_canary) -m bool }}"
            ),
        ];
        // In this order: header, cookie, weight, then the backend.
        let mut at = 0;
        for rule in &rules {
            let found = config[at..]
                .find(rule.as_str())
                .unwrap_or_else(|| panic!("{rule} after byte {at}:\n{config}"));
            at += found + rule.len();
        }
        let use_backend = config.find("use_backend").expect("use_backend");
        assert!(at < use_backend, "{config}");
    }

    #[test]
    fn backends_apply_a_rule_timeout_only_when_a_route_has_one() {
        use tugboat_model::gateway::features::GatewayFeatures;
        let rule = crate::gateway_features::SERVER_TIMEOUT_RULE;
        let plain = backends_config(&desired());
        assert!(!plain.contains(rule), "{plain}");
        let timed = with_features(tugboat_model::features::RouteFeatures {
            gateway: Some(GatewayFeatures {
                server_timeout_ms: Some(400),
                ..Default::default()
            }),
            ..Default::default()
        });
        let config = backends_config(&timed);
        assert_eq!(
            config.matches(rule).count(),
            timed.backends.len(),
            "{config}"
        );
    }

    #[test]
    fn an_affinity_cookie_has_its_attributes() {
        use tugboat_model::features::{BackendOptions, PersistenceCookie};
        let mut desired = desired();
        for backend in desired.backends.values_mut() {
            backend.options = std::sync::Arc::new(BackendOptions {
                cookie: Some(PersistenceCookie {
                    name: "route".into(),
                    http_only: true,
                    path: Some("/shop".into()),
                    max_age: Some(60),
                    canary: false,
                }),
                ..Default::default()
            });
        }
        let config = backends_config(&desired);
        assert!(
            config.contains(
                "    cookie route insert indirect nocache httponly attr \"Path=/shop\" attr \"Max-Age=60\"\n"
            ),
            "{config}"
        );
        assert!(config.contains(" cookie s1"), "{config}");
    }

    #[test]
    fn a_redirect_to_a_url_comes_before_the_https_redirects() {
        use tugboat_model::features::{
            HttpsRedirect, Redirect, RedirectTarget, RedirectWhen, RouteFeatures,
        };
        let mut desired = with_features(RouteFeatures {
            https_redirect: Some(HttpsRedirect {
                when: RedirectWhen::Always,
                code: 308,
                port: None,
            }),
            redirect: Some(Redirect {
                target: RedirectTarget::Url("https://new.example.com/".into()),
                code: 301,
            }),
            ..Default::default()
        });
        desired.ssl_redirect = true;
        let config = frontend(&desired);
        let moved = config
            .find("http-request redirect location https://new.example.com/ code 301")
            .unwrap_or_else(|| panic!("{config}"));
        for https in config
            .match_indices("redirect scheme https")
            .map(|(at, _)| at)
        {
            assert!(moved < https, "{config}");
        }
        assert!(
            config.matches("redirect scheme https").count() >= 2,
            "{config}"
        );
    }

    #[test]
    fn app_root_comes_before_the_https_redirects() {
        use tugboat_model::features::{HttpsRedirect, RedirectWhen, RouteFeatures};
        let mut desired = with_features(RouteFeatures {
            https_redirect: Some(HttpsRedirect {
                when: RedirectWhen::Always,
                code: 308,
                port: None,
            }),
            app_root: Some("/app1".into()),
            ..Default::default()
        });
        desired.ssl_redirect = true;
        let config = frontend(&desired);
        let root = config
            .find("]/app1 code 302 if ")
            .unwrap_or_else(|| panic!("{config}"));
        let https: Vec<usize> = config
            .match_indices("redirect scheme https")
            .map(|(at, _)| at)
            .collect();
        // The route's own HTTPS redirect and the default one for TLS hosts.
        assert!(https.len() >= 2, "{config}");
        for at in https {
            assert!(root < at, "{config}");
        }
    }

    #[test]
    fn the_clients_address_is_settled_before_any_rule_reads_it() {
        use tugboat_model::features::{ForwardedHeaders, RouteFeatures};
        let mut desired = with_features(RouteFeatures {
            allow_list: vec!["203.0.113.0/24".into()],
            ..Default::default()
        });
        let plain = frontend(&desired);
        assert!(!plain.contains("set-src"), "{plain}");
        assert!(!plain.contains("expect-proxy"), "{plain}");
        assert!(!plain.contains("option forwardfor"), "{plain}");
        assert!(plain.contains("    http-request set-header X-Forwarded-For %[src]\n"));

        desired.global.forwarded = Some(ForwardedHeaders {
            header: "X-Real-IP".into(),
            trusted: vec!["10.0.0.0/8".into(), "::1".into()],
            full: false,
        });
        desired.global.proxy_protocol_from = Some(vec!["10.0.0.0/8".into()]);
        let config = frontend(&desired);
        let position = |needle: &str| {
            config
                .find(needle)
                .unwrap_or_else(|| panic!("{needle} in {config}"))
        };
        let expect_proxy = position(
            "    tcp-request connection expect-proxy layer4 if { src -m ip 10.0.0.0/8 }\n",
        );
        let first_walk = position(
            "    http-request set-src req.hdr_ip(X-Real-IP,-1) if { var(txn.forwarded_walk) -m bool }\n",
        );
        let last_walk = position(&format!(
            "req.hdr_ip(X-Real-IP,-{})",
            crate::client_address::MOST_FORWARDERS
        ));
        let allow_list = position("!{ var(txn.src) -m ip 203.0.113.0/24 }");
        let first_rule = position("    http-request set-var(txn.host)");
        assert!(expect_proxy < first_walk, "{config}");
        assert!(first_walk < last_walk && last_walk < first_rule, "{config}");
        assert!(first_rule < allow_list, "{config}");
        assert!(config.contains("{ src -m ip 10.0.0.0/8 ::1 }"), "{config}");
    }

    #[test]
    fn no_tls_redirect_locations_keep_their_paths_out_of_every_https_redirect() {
        use tugboat_model::features::{HttpsRedirect, RedirectWhen, RouteFeatures};
        let mut desired = with_features(RouteFeatures {
            https_redirect: Some(HttpsRedirect {
                when: RedirectWhen::Always,
                code: 308,
                port: None,
            }),
            ..Default::default()
        });
        desired.ssl_redirect = true;
        desired.global.no_tls_redirect_locations =
            vec!["/.well-known/acme-challenge".into(), "/custom".into()];
        let config = frontend(&desired);
        let redirects: Vec<&str> = config
            .lines()
            .filter(|l| l.contains("redirect scheme https"))
            .collect();
        // The route's own HTTPS redirect and the default one for TLS hosts.
        assert_eq!(redirects.len(), 2, "{config}");
        for line in redirects {
            assert!(
                line.ends_with(" !{ var(txn.path) -m beg /.well-known/acme-challenge /custom }"),
                "{line}"
            );
        }

        // An empty list: every path is redirected.
        desired.global.no_tls_redirect_locations.clear();
        let config = frontend(&desired);
        assert!(!config.contains("var(txn.path) -m beg"), "{config}");
    }

    #[test]
    fn a_trusted_forwarders_https_counts_for_every_https_redirect() {
        use tugboat_model::features::{
            ForwardedHeaders, HttpsRedirect, RedirectWhen, RouteFeatures,
        };
        let mut desired = with_features(RouteFeatures {
            https_redirect: Some(HttpsRedirect {
                when: RedirectWhen::Always,
                code: 308,
                port: None,
            }),
            ..Default::default()
        });
        desired.ssl_redirect = true;
        let redirects = |config: &str| -> Vec<String> {
            config
                .lines()
                .filter(|l| l.contains("redirect scheme https"))
                .map(str::to_string)
                .collect()
        };
        // Without forwarders, only haproxy's own TLS counts.
        let config = frontend(&desired);
        assert_eq!(redirects(&config).len(), 2, "{config}");
        assert!(!config.contains("txn.forwarded_proto"), "{config}");

        // Behind trusted forwarders, their X-Forwarded-Proto: https counts too (it is
        // kept only from them).
        desired.global.forwarded = Some(ForwardedHeaders {
            header: "X-Forwarded-For".into(),
            trusted: vec!["10.0.0.0/8".into()],
            full: false,
        });
        let config = frontend(&desired);
        let lines = redirects(&config);
        assert_eq!(lines.len(), 2, "{config}");
        for line in lines {
            assert!(
                line.contains(" if !{ ssl_fc } !{ var(txn.forwarded_proto) -m str https } "),
                "{line}"
            );
        }
        let kept = config
            .find("set-var(txn.forwarded_proto)")
            .expect("the forwarded scheme is kept");
        let redirect = config.find("redirect scheme https").expect("redirect");
        assert!(kept < redirect, "{config}");
    }

    #[test]
    fn a_sticky_canary_backend_marks_its_cookie_values() {
        use tugboat_model::features::{BackendOptions, PersistenceCookie};
        let mut desired = desired();
        for backend in desired.backends.values_mut() {
            backend.options = std::sync::Arc::new(BackendOptions {
                cookie: Some(PersistenceCookie {
                    canary: true,
                    ..PersistenceCookie::named("route".into())
                }),
                ..Default::default()
            });
        }
        let config = backends_config(&desired);
        assert!(config.contains(" cookie canary-s1"), "{config}");
        assert!(!config.contains(" cookie s1"), "{config}");
    }

    #[test]
    fn canary_affinity_is_decided_before_the_header() {
        use tugboat_model::features::{CanaryAffinity, CanaryRules, FeatureSetId, RouteFeatures};
        for sticky in [true, false] {
            let features = RouteFeatures {
                canary: Some(CanaryRules {
                    header: Some("X-Canary".into()),
                    affinity: Some(CanaryAffinity {
                        cookie: "route".into(),
                        sticky,
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            };
            let id = FeatureSetId::of(&features);
            let config = frontend(&with_features(features));
            let acl = format!("{{ var(txn.fs) -m str {id} }}");
            let to_canary = format!(
                "http-request set-var(txn.to_canary) bool(true) if {acl} {{ req.cook(route) -m beg canary- }}"
            );
            let stay = format!(
                "http-request set-var(txn.to_canary) bool(false) if {acl} !{{ var(txn.to_canary) -m found }} {{ req.cook(route) -m found }}"
            );
            let header = config.find("req.fhdr(X-Canary)").expect("header rule");
            let stay_at = config
                .find(&stay)
                .unwrap_or_else(|| panic!("{stay}\n{config}"));
            assert!(stay_at < header, "{config}");
            match config.find(&to_canary) {
                Some(at) => assert!(sticky && at < stay_at, "{config}"),
                None => assert!(!sticky, "{config}"),
            }
        }
    }

    #[test]
    fn nginx_limits_track_the_client_and_answer_503() {
        use tugboat_model::features::{ClientLimits, RouteFeatures};
        let features = RouteFeatures {
            client_limits: Some(ClientLimits {
                requests_per_second: Some((2, 10)),
                connections: Some(3),
                exempt: vec!["10.0.0.0/8".into(), "192.0.2.7".into()],
            }),
            ..Default::default()
        };
        let id = tugboat_model::features::FeatureSetId::of(&features);
        let config = frontend(&with_features(features));
        let acl =
            format!("{{ var(txn.fs) -m str {id} }} !{{ var(txn.src) -m ip 10.0.0.0/8 192.0.2.7 }}");
        for line in [
            format!("    http-request track-sc1 var(txn.src) table tugboat_limit_{id} if {acl}\n"),
            format!("    http-request deny deny_status 503 if {acl} {{ sc_trackers(1) gt 3 }}\n"),
            format!(
                "    http-request deny deny_status 503 if {acl} {{ sc_http_req_rate(1) gt 12 }}\n"
            ),
            format!("    http-request deny deny_status 503 if {acl} {{ sc_gpc0_rate(1) gt 30 }}\n"),
            format!(
                "backend tugboat_limit_{id}\n    stick-table type ipv6 size 100k expire 10s store http_req_rate(1s),gpc0_rate(10s)\n"
            ),
            format!("    http-request sc-inc-gpc0(1) if {acl}\n"),
            "    http-request set-var(txn.src) src\n".to_string(),
        ] {
            assert!(config.contains(&line), "{line}\n{config}");
        }
    }
}
