//! Runtime changes: what the planner asks of a running haproxy instead of a reload, and
//! the exact master CLI commands and expected answers for each.
//!
//! Every runtime change is also in the files (written first), so a reload or a restart
//! always reproduces it. An answer other than the expected one means haproxy's state is
//! not what the files say, and the applier falls back to a reload.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};

use tugboat_model::BackendName;

use crate::layout::{Server, SlotChange, server_name};

/// Where a free slot points: nothing listens on port 1 of the loopback.
pub const PARKED_ADDRESS: &str = "127.0.0.1";
pub const PARKED_PORT: u16 = 1;

/// Payloads stay well below haproxy's default buffer (16 KB, command included).
const MAX_PAYLOAD: usize = 12 * 1024;
/// The largest certificate (chain and key) that fits one `set ssl cert` command; a
/// larger one goes through a reload.
pub const MAX_CERTIFICATE: usize = 15 * 1024;

/// One change haproxy can take without a reload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeChange {
    /// A server slot gets an endpoint, is parked, or is added.
    Server {
        backend: BackendName,
        change: SlotChange,
        /// The options of the backend's `default-server` line, given to `add server` so
        /// that an added server is the same as one loaded from the file.
        server_options: String,
        /// The backend's servers carry their slot name as persistence cookie, after
        /// this prefix.
        cookie: Option<&'static str>,
        /// The backend's servers are health-checked: an added server's check is
        /// switched on too (`add server` leaves it off).
        check: bool,
    },
    /// New keys in a map.
    MapAdd {
        map: PathBuf,
        entries: Vec<(String, String)>,
    },
    /// A key of a map gets a new value.
    MapSet {
        map: PathBuf,
        key: String,
        value: String,
    },
    /// A key leaves a map.
    MapDel { map: PathBuf, key: String },
    /// A certificate file's contents go to haproxy (created first when `new`).
    CertUpload {
        path: PathBuf,
        pem: CertText,
        new: bool,
    },
    /// A certificate leaves haproxy (after its crt-list entry).
    CertDel { path: PathBuf },
    /// The contents of a client-certificate CA bundle (`set ssl ca-file`) or
    /// revocation list (`set ssl crl-file`), created first when `new`.
    CaFileUpload {
        path: PathBuf,
        pem: CertText,
        revocation_list: bool,
        new: bool,
    },
    /// A backend haproxy does not have is created, empty and unpublished (haproxy 3.4
    /// and later), from the named `defaults` section.
    AddBackend { backend: BackendName },
    /// A backend added at runtime takes requests (after its servers are in).
    PublishBackend { backend: BackendName },
    /// A line joins the crt-list.
    CrtListAdd { list: PathBuf, line: String },
    /// The entry of a certificate leaves the crt-list.
    CrtListDel { list: PathBuf, cert: PathBuf },
}

/// haproxy's answer to an `add backend` it took.
pub const BACKEND_ADDED: &str = "New backend registered.";

/// Certificate and key text for `set ssl cert`: its `Debug` shows only its size, so a
/// logged plan never carries a private key.
#[derive(Clone, PartialEq, Eq)]
pub struct CertText(pub String);

impl fmt::Debug for CertText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{} bytes>", self.0.len())
    }
}

/// What a command must answer to count as done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Nothing but whitespace.
    Nothing,
    /// Nothing, or this answer.
    NothingOr(&'static str),
    /// An answer that contains this text.
    Contains(&'static str),
    /// The answer of `set server ... addr`: it says what changed, or that nothing had to
    /// (2.6: `no need to change the addr`; 3.x, when address and port are already the
    /// ones given, as after a restart that loaded the files: `nothing changed`).
    AddressChanged,
}

impl Expect {
    pub fn accepts(self, answer: &str) -> bool {
        match self {
            Expect::Nothing => answer.trim().is_empty(),
            Expect::NothingOr(text) => answer.trim().is_empty() || answer.trim() == text,
            Expect::Contains(text) => answer.contains(text),
            Expect::AddressChanged => {
                answer.contains("changed from")
                    || answer.contains("no need to change")
                    || answer.trim() == "nothing changed"
            }
        }
    }
}

/// One master CLI command, sent to the current worker, and its expected answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliStep {
    pub command: String,
    pub expect: Expect,
}

impl RuntimeChange {
    /// The commands that carry this change out, in order.
    pub fn steps(&self) -> Vec<CliStep> {
        let step = |command: String, expect| CliStep { command, expect };
        match self {
            RuntimeChange::Server {
                backend,
                change,
                server_options,
                cookie,
                check,
            } => {
                let name = server_name(change.slot);
                let server = format!("{backend}/{name}");
                let weight = |s: &Server| if s.draining { 0 } else { 1 };
                match (change.before, change.after) {
                    (_, Some(after)) if change.added => {
                        let mut add = format!("@1 add server {server} {}", after.endpoint);
                        if !server_options.is_empty() {
                            add.push(' ');
                            add.push_str(server_options);
                        }
                        if let Some(prefix) = cookie {
                            add.push_str(&format!(" cookie {prefix}{name}"));
                        }
                        if after.draining {
                            add.push_str(" weight 0");
                        }
                        let mut steps = vec![
                            step(add, Expect::Contains("New server registered.")),
                            step(format!("@1 enable server {server}"), Expect::Nothing),
                        ];
                        if *check {
                            steps.push(step(format!("@1 enable health {server}"), Expect::Nothing));
                        }
                        steps
                    }
                    // A free slot of a backend added at runtime: in maintenance at the
                    // parked address, as the file has it.
                    (_, None) if change.added => {
                        let mut add =
                            format!("@1 add server {server} {PARKED_ADDRESS}:{PARKED_PORT}");
                        if !server_options.is_empty() {
                            add.push(' ');
                            add.push_str(server_options);
                        }
                        if let Some(prefix) = cookie {
                            add.push_str(&format!(" cookie {prefix}{name}"));
                        }
                        let mut steps = vec![step(add, Expect::Contains("New server registered."))];
                        if *check {
                            steps.push(step(format!("@1 enable health {server}"), Expect::Nothing));
                        }
                        steps
                    }
                    (Some(before), Some(after)) if before.endpoint == after.endpoint => vec![step(
                        format!("@1 set weight {server} {}", weight(&after)),
                        Expect::Nothing,
                    )],
                    (_, Some(after)) => vec![
                        step(
                            format!(
                                "@1 set server {server} addr {} port {}",
                                after.endpoint.address, after.endpoint.port
                            ),
                            Expect::AddressChanged,
                        ),
                        step(
                            format!("@1 set weight {server} {}", weight(&after)),
                            Expect::Nothing,
                        ),
                        step(
                            format!("@1 set server {server} state ready"),
                            Expect::Nothing,
                        ),
                    ],
                    (_, None) => vec![
                        step(
                            format!("@1 set server {server} state maint"),
                            Expect::Nothing,
                        ),
                        step(
                            format!(
                                "@1 set server {server} addr {PARKED_ADDRESS} port {PARKED_PORT}"
                            ),
                            Expect::AddressChanged,
                        ),
                    ],
                }
            }
            RuntimeChange::MapAdd { map, entries } => {
                let mut steps = Vec::new();
                let mut payload = String::new();
                let flush = |payload: &mut String, steps: &mut Vec<CliStep>| {
                    if !payload.is_empty() {
                        // The payload ends with an empty line.
                        steps.push(step(
                            format!("@1 add map {} <<\n{payload}\n", map.display()),
                            Expect::Nothing,
                        ));
                        payload.clear();
                    }
                };
                for (key, value) in entries {
                    if payload.len() + key.len() + value.len() + 2 > MAX_PAYLOAD {
                        flush(&mut payload, &mut steps);
                    }
                    let _ = writeln!(payload, "{key} {value}");
                }
                flush(&mut payload, &mut steps);
                steps
            }
            RuntimeChange::MapSet { map, key, value } => vec![step(
                format!("@1 set map {} {} {value}", map.display(), escape(key)),
                Expect::Nothing,
            )],
            // A key already gone is what a deletion wants.
            RuntimeChange::MapDel { map, key } => vec![step(
                format!("@1 del map {} {}", map.display(), escape(key)),
                Expect::NothingOr("Key not found."),
            )],
            RuntimeChange::CertUpload { path, pem, new } => {
                let path = path.display();
                let mut steps = Vec::new();
                if *new {
                    steps.push(step(
                        format!("@1 new ssl cert {path}"),
                        Expect::Contains("New empty certificate store"),
                    ));
                }
                steps.push(step(
                    format!("@1 set ssl cert {path} <<\n{}\n\n", pem.0.trim_end()),
                    Expect::Contains("Transaction "),
                ));
                steps.push(step(
                    format!("@1 commit ssl cert {path}"),
                    Expect::Contains("Success!"),
                ));
                steps
            }
            RuntimeChange::CaFileUpload {
                path,
                pem,
                revocation_list,
                new,
            } => {
                let (kind, created) = if *revocation_list {
                    ("crl-file", "New CRL file created")
                } else {
                    ("ca-file", "New CA file created")
                };
                let path = path.display();
                let mut steps = Vec::new();
                if *new {
                    steps.push(step(
                        format!("@1 new ssl {kind} {path}"),
                        Expect::Contains(created),
                    ));
                }
                steps.extend([
                    step(
                        format!("@1 set ssl {kind} {path} <<\n{}\n\n", pem.0.trim_end()),
                        Expect::Contains("transaction created"),
                    ),
                    step(
                        format!("@1 commit ssl {kind} {path}"),
                        Expect::Contains("Success!"),
                    ),
                ]);
                steps
            }
            // Sent on the master's session first: haproxy's documentation says the
            // command needs it (3.4.0 takes it without), and the master passes it on.
            RuntimeChange::AddBackend { backend } => vec![
                step("experimental-mode on".into(), Expect::Nothing),
                step(
                    format!(
                        "@1 add backend {backend} from {} mode http",
                        crate::settings::DEFAULTS_NAME
                    ),
                    Expect::Contains(BACKEND_ADDED),
                ),
            ],
            RuntimeChange::PublishBackend { backend } => vec![step(
                format!("@1 publish backend {backend}"),
                Expect::Contains("Backend published."),
            )],
            RuntimeChange::CertDel { path } => vec![step(
                format!("@1 del ssl cert {}", path.display()),
                Expect::Contains("deleted!"),
            )],
            RuntimeChange::CrtListAdd { list, line } => vec![step(
                format!("@1 add ssl crt-list {} <<\n{line}\n\n", list.display()),
                Expect::Contains("Success!"),
            )],
            RuntimeChange::CrtListDel { list, cert } => vec![step(
                format!("@1 del ssl crt-list {} {}", list.display(), cert.display()),
                Expect::Contains("deleted in crtlist"),
            )],
        }
    }
}

/// When a change goes in a batch. A batch is not atomic: haproxy serves requests between
/// its commands. So what gives a backend or a route a target goes first and what takes
/// one away goes last, and at no moment of an update does a backend or a route that had
/// a target have none ("make before break").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// A backend is created (empty, unpublished: no request reaches it yet).
    NewBackend,
    /// A slot starts serving: a new server, a parked slot that gets an endpoint, a slot
    /// whose address switches (one `set server ... addr`, the slot serves throughout),
    /// a draining endpoint that is ready again.
    Make,
    /// A new backend, with its servers in, takes requests: before the map keys that
    /// route to it.
    Publish,
    /// Certificates and crt-list entries, in the order [`certificate_changes`] gives.
    Certificates,
    /// Map keys added, or moved to another value (`set map` is atomic).
    MapAddSet,
    /// Map keys removed: after the keys that replace them are in.
    MapDel,
    /// A slot stops taking new requests: parked, or draining.
    Break,
}

impl RuntimeChange {
    /// Where this change goes in a batch.
    pub fn phase(&self) -> Phase {
        match self {
            RuntimeChange::Server { change, .. } => match change.after {
                Some(Server {
                    draining: false, ..
                }) => Phase::Make,
                // A new slot (of a new backend) takes nothing away.
                _ if change.added => Phase::Make,
                _ => Phase::Break,
            },
            RuntimeChange::AddBackend { .. } => Phase::NewBackend,
            RuntimeChange::PublishBackend { .. } => Phase::Publish,
            RuntimeChange::MapAdd { .. } | RuntimeChange::MapSet { .. } => Phase::MapAddSet,
            RuntimeChange::MapDel { .. } => Phase::MapDel,
            RuntimeChange::CertUpload { .. }
            | RuntimeChange::CertDel { .. }
            | RuntimeChange::CaFileUpload { .. }
            | RuntimeChange::CrtListAdd { .. }
            | RuntimeChange::CrtListDel { .. } => Phase::Certificates,
        }
    }
}

/// Orders a batch "make before break" (see [`Phase`]); changes of the same phase keep
/// their order.
pub fn make_before_break(mut changes: Vec<RuntimeChange>) -> Vec<RuntimeChange> {
    changes.sort_by_key(RuntimeChange::phase);
    changes
}

/// Escapes what the single-line CLI form treats specially: `;` ends a command.
/// (Keys never hold spaces or backslashes: validation refuses them.)
fn escape(key: &str) -> String {
    key.replace(';', "\\;")
}

/// Parses a map file: `key value` lines; the first entry of a key wins, as in haproxy.
pub fn parse_map(text: &str) -> BTreeMap<&str, &str> {
    let mut entries = BTreeMap::new();
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        if let Some((key, value)) = line.split_once(' ') {
            entries.entry(key).or_insert(value);
        }
    }
    entries
}

/// The runtime changes that turn map `old` into map `new` (file contents).
pub fn map_changes(map: &Path, old: &str, new: &str) -> Vec<RuntimeChange> {
    map_entry_changes(map, &parse_map(old), &parse_map(new))
}

/// The runtime changes that turn the entries `old` of a map into `new`: the new keys
/// in one batch, then the changed values, then the keys that go.
pub fn map_entry_changes<K: AsRef<str> + Ord, V: AsRef<str> + PartialEq>(
    map: &Path,
    old: &BTreeMap<K, V>,
    new: &BTreeMap<K, V>,
) -> Vec<RuntimeChange> {
    let mut changes = Vec::new();
    let mut added = Vec::new();
    for (key, value) in new {
        match old.get(key) {
            None => added.push((key.as_ref().to_string(), value.as_ref().to_string())),
            Some(previous) if previous != value => changes.push(RuntimeChange::MapSet {
                map: map.to_path_buf(),
                key: key.as_ref().to_string(),
                value: value.as_ref().to_string(),
            }),
            Some(_) => {}
        }
    }
    if !added.is_empty() {
        changes.insert(
            0,
            RuntimeChange::MapAdd {
                map: map.to_path_buf(),
                entries: added,
            },
        );
    }
    for key in old.keys().filter(|k| !new.contains_key(*k)) {
        changes.push(RuntimeChange::MapDel {
            map: map.to_path_buf(),
            key: key.as_ref().to_string(),
        });
    }
    changes
}

/// The text of a server line for a slot, as the config file has it; with `cookie`, the
/// slot name after that prefix is the server's persistence cookie.
pub fn server_line(slot: usize, server: Option<&Server>, cookie: Option<&str>) -> String {
    let name = server_name(slot);
    let cookie = match cookie {
        Some(prefix) => format!(" cookie {prefix}{name}"),
        None => String::new(),
    };
    match server {
        Some(Server {
            endpoint,
            draining: false,
        }) => format!("    server {name} {endpoint}{cookie}\n"),
        Some(Server {
            endpoint,
            draining: true,
        }) => format!("    server {name} {endpoint}{cookie} weight 0\n"),
        None => format!("    server {name} {PARKED_ADDRESS}:{PARKED_PORT}{cookie} disabled\n"),
    }
}

/// Whether a config line is a slot's server line (what runtime commands change).
pub fn is_slot_line(line: &str) -> bool {
    line.trim_start()
        .strip_prefix("server s")
        .and_then(|rest| rest.split(' ').next())
        .is_some_and(|index| !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()))
}

/// The runtime changes that turn the certificates of `old` into those of `new`: cert
/// files (by path) and crt-list lines (by the certificate they name).
pub fn certificate_changes(
    list: &Path,
    old_certs: &BTreeMap<&Path, &str>,
    new_certs: &BTreeMap<&Path, &str>,
    old_list: &str,
    new_list: &str,
) -> Vec<RuntimeChange> {
    let lines = |text: &str| -> BTreeMap<PathBuf, String> {
        text.lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .filter_map(|l| Some((PathBuf::from(l.split(' ').next()?), l.to_string())))
            .collect()
    };
    let (old_lines, new_lines) = (lines(old_list), lines(new_list));
    let mut changes = Vec::new();
    for (path, pem) in new_certs {
        match old_certs.get(path) {
            None => changes.push(RuntimeChange::CertUpload {
                path: path.to_path_buf(),
                pem: CertText(pem.to_string()),
                new: true,
            }),
            Some(old) if old != pem => changes.push(RuntimeChange::CertUpload {
                path: path.to_path_buf(),
                pem: CertText(pem.to_string()),
                new: false,
            }),
            Some(_) => {}
        }
    }
    for (cert, line) in &old_lines {
        if new_lines.get(cert) != Some(line) {
            changes.push(RuntimeChange::CrtListDel {
                list: list.to_path_buf(),
                cert: cert.clone(),
            });
        }
    }
    for (cert, line) in &new_lines {
        if old_lines.get(cert) != Some(line) {
            changes.push(RuntimeChange::CrtListAdd {
                list: list.to_path_buf(),
                line: line.clone(),
            });
        }
    }
    for path in old_certs.keys().filter(|p| !new_certs.contains_key(*p)) {
        changes.push(RuntimeChange::CertDel {
            path: path.to_path_buf(),
        });
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_ca_or_revocation_list_is_set_then_committed() {
        let change = RuntimeChange::CaFileUpload {
            path: "/var/lib/haproxy/client-ca/ns_ca.crl.pem".into(),
            pem: CertText("-----BEGIN X509 CRL-----\nAAA\n-----END X509 CRL-----\n".into()),
            revocation_list: true,
            new: false,
        };
        let steps = change.steps();
        assert_eq!(
            steps[0].command,
            "@1 set ssl crl-file /var/lib/haproxy/client-ca/ns_ca.crl.pem <<\n-----BEGIN X509 CRL-----\nAAA\n-----END X509 CRL-----\n\n"
        );
        assert!(steps[0].expect.accepts("transaction created for CRL /x!"));
        assert_eq!(
            steps[1].command,
            "@1 commit ssl crl-file /var/lib/haproxy/client-ca/ns_ca.crl.pem"
        );
        assert!(!format!("{change:?}").contains("AAA"));
    }

    #[test]
    fn map_changes_add_set_and_delete() {
        let map = Path::new("/etc/haproxy/maps/routes-exact.map");
        let old = "a/x be1\nb/y be2\nc/z be3\n";
        let new = "a/x be1\nb/y be9\nd/w be4\n";
        let changes = map_changes(map, old, new);
        assert_eq!(
            changes,
            vec![
                RuntimeChange::MapAdd {
                    map: map.into(),
                    entries: vec![("d/w".into(), "be4".into())]
                },
                RuntimeChange::MapSet {
                    map: map.into(),
                    key: "b/y".into(),
                    value: "be9".into()
                },
                RuntimeChange::MapDel {
                    map: map.into(),
                    key: "c/z".into()
                },
            ]
        );
    }

    #[test]
    fn large_map_additions_are_split_below_the_buffer_size() {
        let entries: Vec<(String, String)> = (0..2000)
            .map(|i| {
                (
                    format!("host-{i}.example.com/some/path/{i}"),
                    format!("ns_svc_{i}"),
                )
            })
            .collect();
        let total: usize = entries.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
        let change = RuntimeChange::MapAdd {
            map: "/etc/haproxy/maps/m.map".into(),
            entries,
        };
        let steps = change.steps();
        assert!(steps.len() > 1);
        assert!(steps.iter().all(|s| s.command.len() < 16 * 1024 - 100));
        assert!(steps.iter().all(|s| s.command.ends_with("\n\n")));
        let lines: usize = steps.iter().map(|s| s.command.lines().count() - 2).sum();
        assert_eq!(lines, 2000, "no entry lost in the split");
        assert!(total > MAX_PAYLOAD);
    }

    #[test]
    fn semicolons_in_keys_are_escaped_in_single_line_commands() {
        let change = RuntimeChange::MapDel {
            map: "/m.map".into(),
            key: "a.com/x;y=1".into(),
        };
        assert_eq!(change.steps()[0].command, "@1 del map /m.map a.com/x\\;y=1");
    }

    #[test]
    fn added_servers_get_their_cookie_and_their_health_check() {
        let endpoint = tugboat_model::Endpoint {
            address: std::net::Ipv4Addr::new(10, 0, 0, 9).into(),
            port: 8080,
        };
        let change = RuntimeChange::Server {
            backend: tugboat_model::BackendName::parse("ns_web_80").expect("name"),
            change: SlotChange {
                slot: 8,
                before: None,
                after: Some(Server {
                    endpoint,
                    draining: false,
                }),
                added: true,
            },
            server_options: "check inter 1s".into(),
            cookie: Some(""),
            check: true,
        };
        let commands: Vec<String> = change.steps().into_iter().map(|s| s.command).collect();
        assert_eq!(
            commands,
            vec![
                "@1 add server ns_web_80/s9 10.0.0.9:8080 check inter 1s cookie s9",
                "@1 enable server ns_web_80/s9",
                "@1 enable health ns_web_80/s9",
            ]
        );
        assert_eq!(
            server_line(8, None, Some("")),
            "    server s9 127.0.0.1:1 cookie s9 disabled\n"
        );
    }

    #[test]
    fn certificate_text_never_shows_in_debug_output() {
        let change = RuntimeChange::CertUpload {
            path: "/var/lib/haproxy/certs/a.pem".into(),
            pem: CertText("-----BEGIN PRIVATE KEY-----\nsecret\n".into()),
            new: true,
        };
        let shown = format!("{change:?}");
        assert!(
            !shown.contains("PRIVATE KEY") && !shown.contains("secret"),
            "{shown}"
        );
        assert!(shown.contains("a.pem"));
    }

    #[test]
    fn expectations() {
        assert!(Expect::Nothing.accepts("\n"));
        assert!(!Expect::Nothing.accepts("No such server.\n"));
        assert!(Expect::AddressChanged.accepts(
            "IP changed from '127.0.0.1' to '10.0.0.1', port changed from '1' to '80' by 'stats socket command'\n"
        ));
        assert!(Expect::AddressChanged.accepts("nothing changed\n"));
        assert!(!Expect::AddressChanged.accepts("No such server.\n"));
    }
}
