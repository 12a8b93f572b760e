//! No annotation or ConfigMap value can inject haproxy configuration: arbitrary strings
//! are fed to every key, and the rendered files must hold exactly the directives the
//! model intends. Every line is either one that renders without the key or with a
//! known-good value, or a line of the same directive as one the key owns with the same
//! structure (its `if`, `!`, `{`, `}` tokens); no new sections, no control characters.
//! A map entry is the key's when its map key is one the key owns and its value differs
//! from an owned entry's in numbers at most; an entry for a host the value adds (a
//! well-formed alias host of `server-alias`) is the key's when the same entry for the
//! rule's own host is.
//! Raw snippets are configuration by design: for them, what must hold is that nothing
//! they add opens a section, reads a file, loads code or reads the environment.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, Ingress, IngressBackend, IngressRule,
    IngressServiceBackend, IngressSpec, ServiceBackendPort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use proptest::prelude::*;
use tugboat_haproxy::{RenderSettings, plan};
use tugboat_model::annotations::{KEYS, KeySpec, Scope};
use tugboat_model::objects::{LeanMeta, Service, ServicePort, ServiceSpec};
use tugboat_model::{ObjectKey, Settings, Snapshot, build};

/// The host of the Ingress rule every key is tried on.
const RULE_HOST: &str = "shop.example.com";

/// Keys that other keys need, and their values when the key under test is not them.
const COMPANIONS: &[(&str, &str)] = &[
    ("hsts", "true"),
    ("cors-enable", "true"),
    ("request-redirect", "https://moved.example.com/"),
    ("rate-limit-requests", "5"),
    ("deny-list", "192.0.2.1"),
    ("auth-type", "basic-auth"),
    ("auth-secret", "shop-users"),
    ("auth-url", "http://auth.example.com/check"),
    ("server-ssl", "true"),
    ("server-ca", "backend-ca"),
    ("check", "true"),
    ("auth-tls-secret", "shop-client-ca"),
];

/// Keys read for their problems only: a valid value changes nothing haproxy runs.
const CHECKED_ONLY: &[&str] = &["auth-tls-verify-depth"];

/// A CA certificate and a client certificate with its key, made once.
fn certificates() -> &'static (String, String, String) {
    static CERTS: std::sync::OnceLock<(String, String, String)> = std::sync::OnceLock::new();
    CERTS.get_or_init(|| {
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = params.self_signed(&ca_key).expect("CA");
        let client_key = rcgen::KeyPair::generate().expect("key");
        let client = rcgen::CertificateParams::new(vec!["haproxy".to_string()])
            .expect("params")
            .self_signed(&client_key)
            .expect("client certificate");
        (ca.pem(), client.pem(), client_key.serialize_pem())
    })
}

fn secret_of(name: &str, data: &[(&str, &str)]) -> (ObjectKey, Arc<Secret>) {
    (
        ObjectKey::new("shop", name),
        Arc::new(Secret {
            metadata: meta(name, BTreeMap::new()),
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Secret::default()
        }),
    )
}

/// Whether a key's value is the name of a Secret.
fn names_a_secret(key: &KeySpec) -> bool {
    key.values.starts_with("the name of a") && key.values.contains("Secret")
}

/// Whether a key takes raw configuration lines.
fn is_snippet(key: &KeySpec) -> bool {
    key.name.ends_with("-config-snippet")
}

fn meta(name: &str, annotations: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some("shop".into()),
        annotations: Some(annotations),
        ..ObjectMeta::default()
    }
}

/// The rendered config and maps for `key` set to `value` (`None`: not set), on an
/// Ingress when the key can be set there, else in the ConfigMap; companions on the
/// Ingress.
fn render_with(key: &KeySpec, value: Option<&str>) -> BTreeMap<String, String> {
    let mut annotations: BTreeMap<String, String> = COMPANIONS
        .iter()
        .filter(|(k, _)| *k != key.name)
        .map(|(k, v)| (format!("tugboat.dev/{k}"), v.to_string()))
        .collect();
    // A canary key is tried on a canary of a main Ingress of the same host and path,
    // with the canary keys it needs (and a weight that its total divides).
    let canary = key.name.starts_with("canary") || key.name == "affinity-canary-behavior";
    if canary {
        for (name, companion) in [
            ("canary", "true"),
            ("canary-by-header", "X-Canary"),
            ("canary-weight", "50"),
        ] {
            if name != key.name {
                annotations.insert(format!("tugboat.dev/{name}"), companion.to_string());
            }
        }
    }
    // Passthrough is refused beside a key that restricts access (the companions have
    // several): it is tried alone.
    if key.name == "ssl-passthrough" {
        annotations.clear();
    }
    if key.name == "limit-burst-multiplier" || key.name == "limit-allowlist" {
        annotations.insert("tugboat.dev/limit-rps".into(), "10".into());
    }
    // The session cookie's keys need `affinity: cookie`.
    if key.name.starts_with("session-cookie-") {
        annotations.insert("tugboat.dev/affinity".into(), "cookie".into());
    }
    // Credentials are offered to listed origins only.
    if key.name == "cors-allow-credentials" {
        annotations.insert(
            "tugboat.dev/cors-allow-origin".into(),
            "https://app.example.com".into(),
        );
    }
    let mut data = BTreeMap::new();
    // The keys of the client's address act with trusted forwarders only.
    const CLIENT_ADDRESS: &[&str] = &[
        "use-forwarded-headers",
        "forwarded-for-header",
        "proxy-real-ip-cidr",
        "compute-full-forwarded-for",
        "use-proxy-protocol",
    ];
    if CLIENT_ADDRESS.contains(&key.name) {
        for (name, companion) in [
            ("use-forwarded-headers", "true"),
            ("proxy-real-ip-cidr", "10.0.0.0/8"),
        ] {
            if name != key.name {
                data.insert(name.to_string(), companion.to_string());
            }
        }
    }
    if let Some(value) = value {
        if key.scopes.contains(&Scope::Ingress) {
            annotations.insert(format!("tugboat.dev/{}", key.name), value.to_string());
        } else {
            data.insert(key.name.to_string(), value.to_string());
        }
    }
    let backend = IngressBackend {
        service: Some(IngressServiceBackend {
            name: "web".into(),
            port: Some(ServiceBackendPort {
                number: Some(80),
                name: None,
            }),
        }),
        resource: None,
    };
    let ingress = Ingress {
        metadata: meta("ing", annotations),
        spec: Some(IngressSpec {
            rules: Some(vec![IngressRule {
                host: Some(RULE_HOST.into()),
                http: Some(HTTPIngressRuleValue {
                    paths: vec![HTTPIngressPath {
                        path: Some("/api".into()),
                        path_type: "Prefix".into(),
                        backend,
                    }],
                }),
            }]),
            ..IngressSpec::default()
        }),
        status: None,
    };
    let service = Service {
        metadata: LeanMeta {
            name: Some("web".into()),
            namespace: Some("shop".into()),
            ..LeanMeta::default()
        },
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                port: 80,
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
    };
    let secret = Secret {
        metadata: meta("shop-users", BTreeMap::new()),
        data: Some(
            [(
                "ann".to_string(),
                ByteString(b"$6$salt$0123456789abcdef".to_vec()),
            )]
            .into(),
        ),
        ..Secret::default()
    };
    let config_map = ConfigMap {
        metadata: meta("tugboat", BTreeMap::new()),
        data: Some(data),
        ..ConfigMap::default()
    };
    let mut snapshot = Snapshot::default();
    snapshot.ingresses.insert(
        ObjectKey::new("shop", "ing"),
        Arc::new(ingress.clone().into()),
    );
    if canary {
        let mut main = ingress;
        // Session affinity on the main backend, which affinity-canary-behavior is about.
        let main_annotations = if key.name == "affinity-canary-behavior" {
            [("tugboat.dev/affinity".to_string(), "cookie".to_string())].into()
        } else {
            BTreeMap::new()
        };
        main.metadata = meta("main", main_annotations);
        for rule in main
            .spec
            .iter_mut()
            .flat_map(|s| s.rules.iter_mut().flatten())
        {
            for path in rule.http.iter_mut().flat_map(|h| &mut h.paths) {
                if let Some(service) = path.backend.service.as_mut() {
                    service.name = "main".into();
                }
            }
        }
        let mut main_service = service.clone();
        main_service.metadata.name = Some("main".into());
        snapshot
            .ingresses
            .insert(ObjectKey::new("shop", "main"), Arc::new(main.into()));
        snapshot
            .services
            .insert(ObjectKey::new("shop", "main"), Arc::new(main_service));
    }
    // The Service `default-backend`'s example names.
    let mut error_pages = service.clone();
    error_pages.metadata.name = Some("error-pages".into());
    snapshot
        .services
        .insert(ObjectKey::new("shop", "error-pages"), Arc::new(error_pages));
    snapshot
        .services
        .insert(ObjectKey::new("shop", "web"), Arc::new(service));
    snapshot
        .secrets
        .insert(ObjectKey::new("shop", "shop-users"), Arc::new(secret));
    snapshot
        .config_maps
        .insert(ObjectKey::new("shop", "tugboat"), Arc::new(config_map));
    let (ca, client, client_key) = certificates();
    snapshot.secrets.extend([
        secret_of("backend-ca", &[("ca.crt", ca)]),
        secret_of("shop-client-ca", &[("ca.crt", ca)]),
        secret_of(
            "haproxy-client",
            &[("tls.crt", client), ("tls.key", client_key)],
        ),
    ]);
    let mut settings = Settings::new(now());
    settings.config_map = Some(ObjectKey::new("shop", "tugboat"));
    settings.allow_snippets = true;
    let desired = build(&snapshot, &settings).desired;
    let render_settings = RenderSettings::example();
    plan(None, desired, &render_settings)
        .next
        .files
        .files
        .into_iter()
        .filter(|(path, _)| path.extension().is_some_and(|e| e == "cfg" || e == "map"))
        .map(|(path, text)| (path.display().to_string(), text.to_string()))
        .collect()
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Feature set ids change with any value: compare lines without them.
fn normalise(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find('f') {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let id = from.get(1..17);
        if id.is_some_and(|id| id.bytes().all(|b| b.is_ascii_hexdigit())) {
            out.push_str("fID");
            rest = &from[17..];
        } else {
            out.push('f');
            rest = &from[1..];
        }
    }
    out.push_str(rest);
    out
}

/// A word of a config line, and whether any of it is quoted or escaped (so that it is
/// text to haproxy, never a keyword, an operator or a brace).
struct Token {
    text: String,
    literal: bool,
}

/// Tokens as haproxy splits them: at whitespace, except inside quotes or after a
/// backslash (which escapes outside quotes and inside double quotes); an unquoted `#`
/// ends the line.
fn tokens(line: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut current = String::new();
    let mut literal = false;
    let mut quote = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None | Some('"'), '\\') => {
                literal = true;
                current.extend(chars.next());
            }
            (None, '"' | '\'') => {
                quote = Some(c);
                literal = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, '#') => break,
            (None, c) if c.is_whitespace() => {
                if !current.is_empty() || literal {
                    tokens.push(Token {
                        text: std::mem::take(&mut current),
                        literal,
                    });
                }
                literal = false;
            }
            (_, c) => current.push(c),
        }
    }
    if !current.is_empty() || literal {
        tokens.push(Token {
            text: current,
            literal,
        });
    }
    tokens
}

/// The directive (its keyword, and its action for the keywords that have one) and the
/// structure tokens of a line (unquoted condition words and braces).
fn shape(line: &str) -> (String, Vec<String>) {
    let tokens = tokens(line);
    let with_action = ["http-request", "http-response", "timeout", "option"];
    let words = if tokens
        .first()
        .is_some_and(|t| with_action.contains(&t.text.as_str()))
    {
        2
    } else {
        1
    };
    let directive = tokens
        .iter()
        .take(words)
        .map(|t| t.text.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let structure = tokens
        .iter()
        .filter(|t| {
            !t.literal && ["if", "unless", "!", "{", "}", "or", "||"].contains(&t.text.as_str())
        })
        .map(|t| t.text.clone())
        .collect();
    (directive, structure)
}

fn lines(files: &BTreeMap<String, String>) -> BTreeSet<(String, String)> {
    files
        .iter()
        .flat_map(|(path, text)| {
            text.lines().map(move |l| {
                let line = if is_map(path) {
                    without_route_id(l)
                } else {
                    l.to_string()
                };
                (path.clone(), normalise(&line))
            })
        })
        .collect()
}

fn is_map(path: &str) -> bool {
    path.ends_with(".map")
}

/// A line's shape: a config line's directive and structure, a map entry's key and its
/// value with numbers left out (a canary's weight is a number in the value).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Shape {
    Directive(String, Vec<String>),
    MapEntry(String, String),
}

fn line_shape(path: &str, line: &str) -> Shape {
    if is_map(path) {
        // haproxy reads a map line as its first word and the rest of the line.
        let line = line.trim_start();
        let (key, value) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        Shape::MapEntry(key.to_string(), without_numbers(value.trim()))
    } else {
        let (directive, structure) = shape(line);
        Shape::Directive(directive, structure)
    }
}

/// A route map line with the route's id (its last `|` field, a hash of the host and
/// path among others) as `ID`: an alias' entry is the rule's entry but for it.
fn without_route_id(value: &str) -> String {
    match value.rsplit_once('|') {
        Some((rest, _)) => format!("{rest}|ID"),
        None => value.to_string(),
    }
}

/// `text` with each run of digits as one `N`.
fn without_numbers(text: &str) -> String {
    let mut out = String::new();
    let mut in_number = false;
    for c in text.chars() {
        if !c.is_ascii_digit() {
            out.push(c);
        } else if !in_number {
            out.push('N');
        }
        in_number = c.is_ascii_digit();
    }
    out
}

/// Whether `host` is a host name as the Ingress API takes one (`*.` and a DNS name for a
/// wildcard): lower-case labels of letters, digits and inner hyphens.
fn is_host_name(host: &str) -> bool {
    let name = host.strip_prefix("*.").unwrap_or(host);
    name.len() <= 253
        && name.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// The hosts a key's value adds to the rule's routes, as map keys start with them (an
/// exact host, or a wildcard's suffix `.example.com`). Only `server-alias` adds hosts
/// (`from-to-www-redirect` adds one too, but its value is a flag, so its example's
/// lines are all it adds); only well-formed host names count, so that nothing else a
/// value holds can pass for a host.
fn hosts_added_by(key: &KeySpec, value: &str) -> BTreeSet<String> {
    if key.name != "server-alias" {
        return BTreeSet::new();
    }
    value
        .split(',')
        .map(|alias| alias.trim().to_ascii_lowercase())
        .filter(|alias| is_host_name(alias))
        .map(|alias| match alias.strip_prefix('*') {
            Some(suffix) => suffix.to_string(),
            None => alias,
        })
        .collect()
}

/// A map entry of an added host as the same entry of the rule's host; any other line as
/// it is.
fn as_rule_host_entry(path: &str, line: &str, added_hosts: &BTreeSet<String>) -> String {
    if !is_map(path) {
        return line.to_string();
    }
    match line.split_once('/') {
        Some((host, rest)) if added_hosts.contains(host) => format!("{RULE_HOST}/{rest}"),
        _ => line.to_string(),
    }
}

/// How many sections the config files open (map entries are data, not sections).
fn sections(files: &BTreeMap<String, String>) -> usize {
    files
        .iter()
        .filter(|(path, _)| !is_map(path))
        .flat_map(|(_, text)| text.lines())
        .filter(|l| !l.is_empty() && !l.starts_with(' ') && !l.starts_with('#'))
        .count()
}

/// What no snippet line may hold: file names, code, the environment, sections.
fn snippet_line_is_harmless(line: &str) -> bool {
    let lower = line.trim().to_ascii_lowercase();
    let first = lower.split(' ').next().unwrap_or("");
    let forbidden_first = [
        "lua-load",
        "lua-prepend-path",
        "setenv",
        "external-check",
        "server",
        "default-server",
        "chroot",
        "user",
        "errorfile",
        "ssl-engine",
        "stats",
    ];
    !forbidden_first.contains(&first)
        && !first.starts_with('.')
        && !lower.contains("%[")
        && !lower.contains('$')
        && !lower.contains("env(")
        && !lower.contains("map(")
        && !lower.contains("lua.")
        && !lower.split(' ').any(|t| {
            t == "-f" || t == "file" || t.ends_with("-file") || t == "crt" || t.starts_with("crt-")
        })
}

/// A snippet's value: whatever it adds stays inside the sections Tugboat writes and is
/// harmless.
fn check_snippet(key: &KeySpec, value: &str) -> Result<(), TestCaseError> {
    let none = render_with(key, None);
    let tried = render_with(key, Some(value));
    let none_lines = lines(&none);
    for (path, line) in lines(&tried) {
        prop_assert!(
            !line.chars().any(char::is_control),
            "{}: control character in {path}: {line:?}",
            key.name
        );
        if none_lines.contains(&(path.clone(), line.clone())) {
            continue;
        }
        prop_assert!(
            line.is_empty() || line.starts_with("    "),
            "{} = {value:?} put a line outside a section into {path}: {line:?}",
            key.name
        );
        prop_assert!(
            snippet_line_is_harmless(&line),
            "{} = {value:?} put a harmful line into {path}: {line:?}",
            key.name
        );
    }
    prop_assert!(
        sections(&tried) == sections(&none),
        "{} = {value:?} added a section",
        key.name
    );
    Ok(())
}

fn check(key: &KeySpec, value: &str) -> Result<(), TestCaseError> {
    if is_snippet(key) {
        return check_snippet(key, value);
    }
    let none = render_with(key, None);
    let good = render_with(key, Some(key.example));
    let tried = render_with(key, Some(value));
    let (none_lines, mut good_lines) = (lines(&none), lines(&good));
    if names_a_secret(key) {
        // A name that finds no Secret blocks what needs it: those lines are the key's too.
        good_lines.extend(lines(&render_with(key, Some("no-such-secret"))));
    }
    // An empty value carries no user text: what it renders (a list key's "none", such
    // as no-tls-redirect-locations without exemptions) is the key's own.
    good_lines.extend(lines(&render_with(key, Some(""))));
    if tugboat_model::annotations::prefixes::restricts_access(key.name) {
        // A value a key that restricts access refuses makes its routes refuse everybody:
        // those lines are the key's too (a newline is refused by every key).
        good_lines.extend(lines(&render_with(key, Some("\n"))));
    }
    let owned: BTreeSet<Shape> = good_lines
        .difference(&none_lines)
        .map(|(path, l)| line_shape(path, l))
        .collect();
    let added_hosts = hosts_added_by(key, value);
    for (path, line) in lines(&tried) {
        prop_assert!(
            !line.chars().any(char::is_control),
            "{}: control character in {path}: {line:?}",
            key.name
        );
        let entry = (path.clone(), as_rule_host_entry(&path, &line, &added_hosts));
        let known = none_lines.contains(&entry) || good_lines.contains(&entry);
        prop_assert!(
            known || owned.contains(&line_shape(&path, &entry.1)),
            "{} = {value:?} put a line the key does not own into {path}: {line:?}",
            key.name
        );
    }
    prop_assert!(
        sections(&tried) <= sections(&none).max(sections(&good)),
        "{} = {value:?} added a section",
        key.name
    );
    Ok(())
}

const INJECTIONS: &[&str] = &[
    "\nuse_backend x",
    "\r\nglobal",
    "\" if TRUE",
    "' if TRUE",
    " if TRUE",
    " }",
    " { always_true }",
    "%[env(HOME)]",
    "${HOME}",
    " #",
    "\\",
    "\0",
    "\nbackend evil\n    server s 10.0.0.1:80",
    "\nlua-load /tmp/x.lua",
    "\nhttp-request set-header X %[env(SECRET)]",
    "\nacl bad src -f /etc/passwd",
    "\nerrorfile 503 /etc/shadow",
    "\nsetenv A B",
    "\n.if defined(HOME)",
    "\nserver s9 10.0.0.1:80",
    "\nhttp-request set-var(txn.x) req.hdr(host),map(/etc/passwd)",
    "\nstats socket /tmp/admin.sock level admin",
];

fn value_for(key: &'static KeySpec) -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[ -~\t\n]{0,40}",
        (0..INJECTIONS.len(), 0..=key.example.len()).prop_map(move |(i, at)| {
            let at = (0..=at)
                .rev()
                .find(|a| key.example.is_char_boundary(*a))
                .unwrap_or(0);
            format!(
                "{}{}{}",
                &key.example[..at],
                INJECTIONS[i],
                &key.example[at..]
            )
        }),
    ]
}

#[test]
fn good_values_render_the_lines_the_key_owns() {
    for key in KEYS.iter().filter(|k| !CHECKED_ONLY.contains(&k.name)) {
        let none = lines(&render_with(key, None));
        let good = lines(&render_with(key, Some(key.example)));
        assert_ne!(none, good, "{}'s example changes nothing", key.name);
    }
}

proptest! {
    // 256 cases, or as many as `PROPTEST_CASES` says (`with_cases` would ignore it).
    #![proptest_config(ProptestConfig::default())]
    #[test]
    fn no_value_of_any_key_injects_configuration(
        (index, value) in (0..KEYS.len()).prop_flat_map(|i| (Just(i), value_for(&KEYS[i])))
    ) {
        check(&KEYS[index], &value)?;
    }
}

#[test]
fn every_injection_into_every_key_is_refused_or_harmless() {
    for key in KEYS {
        for injection in INJECTIONS {
            for value in [
                format!("{}{injection}", key.example),
                format!("{injection}{}", key.example),
            ] {
                if let Err(err) = check(key, &value) {
                    panic!("{err}");
                }
            }
        }
    }
}

fn key_named(name: &str) -> &'static KeySpec {
    KEYS.iter()
        .find(|k| k.name == name)
        .unwrap_or_else(|| panic!("no key {name}"))
}

/// Alias hosts other than the example's are legitimate: a single label, a wildcard, and
/// more aliases (so more map entries) than the example has.
#[test]
fn server_alias_hosts_that_are_not_the_examples_are_owned() {
    for value in ["*.example.org", "a,b.example.org, c ,d,e"] {
        if let Err(err) = check(key_named("server-alias"), value) {
            panic!("{err}");
        }
    }
}

/// Values the property test once failed on although the product renders them safely
/// (seeds in the regressions file name keys by index, which moves as keys are added).
#[test]
fn values_that_render_safely_pass() {
    for (key, value) in [
        ("server-alias", "a"),
        ("auth-realm", "{"),
        ("canary-weight", "1"),
    ] {
        if let Err(err) = check(key_named(key), value) {
            panic!("{err}");
        }
    }
}

#[test]
fn quoted_words_are_text_and_a_hash_ends_the_line() {
    let (directive, structure) = shape(r#"    http-request auth realm "{ if" if { x } !y"#);
    assert_eq!(directive, "http-request auth");
    assert_eq!(structure, ["if", "{", "}"]);
    let (_, structure) = shape(r#"    http-request deny \{ '}' #x if { x }"#);
    assert!(structure.is_empty(), "{structure:?}");
}

#[test]
fn map_entries_are_alike_when_only_their_numbers_differ() {
    let map = "/etc/haproxy/maps/routes-exact.map";
    let entry = |line| line_shape(map, line);
    assert_eq!(
        entry("h/api b_80.f.w_80.10000"),
        entry("h/api b_80.f.w_80.500000")
    );
    assert_ne!(entry("h/api b_80"), entry("h/api b_80 if TRUE"));
    assert_ne!(entry("h/api b_80"), entry("h/api c_80"));
    assert_ne!(entry("h/api b_80"), entry("h/other b_80"));
}

#[test]
fn only_well_formed_alias_hosts_stand_for_the_rule_host() {
    let alias = key_named("server-alias");
    let added = hosts_added_by(
        alias,
        "a, *.b.example,C.example,a/x,x y,-a,a..b,*,a_b,%[env(HOME)]",
    );
    let expected: BTreeSet<String> = ["a", ".b.example", "c.example"].map(String::from).into();
    assert_eq!(added, expected);
    assert!(hosts_added_by(key_named("app-root"), "a").is_empty());
    let added = hosts_added_by(alias, "a");
    let map = "/etc/haproxy/maps/routes-exact.map";
    assert_eq!(
        as_rule_host_entry(map, "a/api b", &added),
        format!("{RULE_HOST}/api b")
    );
    assert_eq!(as_rule_host_entry(map, "ab/api b", &added), "ab/api b");
    assert_eq!(
        as_rule_host_entry("/etc/haproxy/haproxy.cfg", "a/api b", &added),
        "a/api b"
    );
}
