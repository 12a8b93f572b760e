//! Where haproxy's files live and what it binds ([`RenderSettings`]), and the names of
//! its files: what the renderer, the route features and the applier all need, kept
//! apart from the renderer so that nothing depends on it for a path.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use tugboat_model::tls::Pem;

/// Where haproxy's files live and what it binds; fixed for the controller's lifetime
/// (but for what the running haproxy can take at runtime).
#[derive(Debug, Clone)]
pub struct RenderSettings {
    /// The folder haproxy loads with `-f` (absolute).
    pub config_dir: PathBuf,
    /// Certificates and crt-lists (absolute).
    pub lib_dir: PathBuf,
    pub bind_address: IpAddr,
    pub http_port: u16,
    pub https_port: u16,
    /// haproxy's own port: `/healthz` (monitor-uri, for probes), `/metrics` (its
    /// Prometheus exporter) and `/stats`. 0: none.
    pub stats_port: u16,
    /// The certificate for unmatched SNI when no valid `--default-ssl-certificate` is
    /// given: the controller's own.
    pub fallback_certificate: Pem,
    /// haproxy takes a new backend at runtime (`add backend`, 3.4 and later): set from
    /// `--dynamic-backends` (whether it may), then kept by the applier to what the
    /// running haproxy can do (see [`crate::Applier`]).
    pub dynamic_backends: bool,
}

impl RenderSettings {
    /// Settings with the pod's default folders and ports and a placeholder certificate:
    /// for tests and examples, where no haproxy reads the files.
    pub fn example() -> Self {
        Self {
            config_dir: "/etc/haproxy".into(),
            lib_dir: "/var/lib/haproxy".into(),
            bind_address: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            http_port: 8080,
            https_port: 8443,
            stats_port: 1024,
            fallback_certificate: Pem::from_checked("FALLBACK PEM\n".into()),
            dynamic_backends: false,
        }
    }

    pub fn config_file(&self) -> PathBuf {
        self.config_dir.join(CONFIG_FILE)
    }

    /// The backends' config file number `index` (see [`BACKENDS_FILE_PREFIX`]).
    pub fn backends_file(&self, index: usize) -> PathBuf {
        self.config_dir
            .join(format!("{BACKENDS_FILE_PREFIX}{index:03}.cfg"))
    }

    /// Whether `path` is one of the backends' config files.
    pub fn is_backends_file(&self, path: &Path) -> bool {
        path.parent() == Some(self.config_dir.as_path())
            && path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(BACKENDS_FILE_PREFIX) && n.ends_with(".cfg"))
    }

    /// Whether haproxy loads `path` as config: the main file or a backends' file.
    pub fn is_config(&self, path: &Path) -> bool {
        path == self.config_file() || self.is_backends_file(path)
    }

    pub fn exact_map(&self) -> PathBuf {
        self.config_dir.join(MAPS_DIR).join(EXACT_MAP)
    }

    pub fn prefix_map(&self) -> PathBuf {
        self.config_dir.join(MAPS_DIR).join(PREFIX_MAP)
    }

    pub fn tls_hosts_map(&self) -> PathBuf {
        self.config_dir.join(MAPS_DIR).join(TLS_HOSTS_MAP)
    }

    /// What a bind on `port` of the bind address is written as (`[..]` around IPv6).
    pub fn bind(&self, port: u16) -> String {
        match self.bind_address {
            IpAddr::V4(a) => format!("{a}:{port}"),
            IpAddr::V6(a) => format!("[{a}]:{port}"),
        }
    }

    /// The TLS passthrough map: SNI host -> mode tcp backend.
    pub fn passthrough_map(&self) -> PathBuf {
        self.config_dir.join(MAPS_DIR).join(PASSTHROUGH_MAP)
    }

    /// The maps, whose changes go through the runtime API.
    pub fn maps(&self) -> [PathBuf; 4] {
        [
            self.exact_map(),
            self.prefix_map(),
            self.tls_hosts_map(),
            self.passthrough_map(),
        ]
    }

    pub fn crt_list(&self) -> PathBuf {
        self.lib_dir.join(CRT_LIST)
    }

    pub fn default_certificate(&self) -> PathBuf {
        self.lib_dir.join(DEFAULT_CERTIFICATE)
    }

    /// The file of the certificate called `name`.
    pub fn certificate(&self, name: &str) -> PathBuf {
        self.lib_dir.join(CERTS_DIR).join(format!("{name}.pem"))
    }

    /// Whether `path` is a certificate file (its changes go through the runtime API).
    pub fn is_certificate(&self, path: &Path) -> bool {
        path == self.default_certificate()
            || (path.parent() == Some(&self.lib_dir.join(CERTS_DIR))
                && path.extension().is_some_and(|e| e == "pem"))
    }

    /// A file of the backends' TLS (CA bundle, client certificate), by its name.
    pub fn backend_file(&self, name: &str) -> PathBuf {
        self.lib_dir.join(BACKEND_TLS_DIR).join(name)
    }

    /// A client-certificate CA bundle or revocation list, by its name.
    pub fn client_ca_file(&self, name: &str) -> PathBuf {
        self.lib_dir.join(CLIENT_CA_DIR).join(name)
    }

    /// Whether the client-certificate file `path` is a revocation list.
    pub fn is_revocation_list(&self, path: &Path) -> bool {
        path.to_str()
            .is_some_and(|p| p.ends_with(REVOCATION_LIST_SUFFIX))
    }

    /// Whether `path` is a client-certificate CA bundle or revocation list (its changes
    /// go through the runtime API once haproxy has loaded it).
    pub fn is_client_ca_file(&self, path: &Path) -> bool {
        path.parent() == Some(&self.lib_dir.join(CLIENT_CA_DIR))
    }

    /// OpenSSL's verification error texts, for `ssl-client-verify`.
    pub fn verify_errors_map(&self) -> PathBuf {
        self.config_dir.join(MAPS_DIR).join(VERIFY_ERRORS_MAP)
    }

    /// A pattern file of an access list, by its name.
    pub fn pattern_file(&self, name: &str) -> PathBuf {
        self.config_dir.join(PATTERNS_DIR).join(name)
    }

    /// The Lua script of external authentication.
    pub fn external_auth_script(&self) -> PathBuf {
        self.config_dir.join(LUA_DIR).join(EXTERNAL_AUTH_SCRIPT)
    }

    /// The Lua script of `custom-http-errors`.
    pub fn error_pages_script(&self) -> PathBuf {
        self.config_dir.join(LUA_DIR).join(ERROR_PAGES_SCRIPT)
    }

    /// The Lua filter of body limits.
    pub fn body_limit_script(&self) -> PathBuf {
        self.config_dir.join(LUA_DIR).join(BODY_LIMIT_SCRIPT)
    }

    /// The 413 answer of body limits, as an error file.
    pub fn body_limit_answer(&self) -> PathBuf {
        self.config_dir.join(ERRORFILES_DIR).join(BODY_LIMIT_ANSWER)
    }

    /// The abstract socket of the internal frontend of body limits, named after the
    /// config folder like [`Self::error_pages_address`].
    pub fn body_limit_address(&self) -> String {
        let hash = tugboat_model::stable_hash(self.config_dir.as_os_str().as_encoded_bytes());
        format!("abns@tugboat-body-limit-{hash:016x}")
    }

    /// The abstract socket of the hop from TLS passthrough's TCP frontend to the
    /// terminating frontend, named after the config folder like
    /// [`Self::error_pages_address`].
    pub fn tls_hop_address(&self) -> String {
        let hash = tugboat_model::stable_hash(self.config_dir.as_os_str().as_encoded_bytes());
        format!("abns@tugboat-tls-hop-{hash:016x}")
    }

    /// The abstract socket of the internal frontend of `custom-http-errors`: named
    /// after the config folder, so that two haproxy processes on one host (tests) never
    /// share it, and the same across reloads.
    pub fn error_pages_address(&self) -> String {
        let hash = tugboat_model::stable_hash(self.config_dir.as_os_str().as_encoded_bytes());
        format!("abns@tugboat-error-pages-{hash:016x}")
    }

    pub(crate) fn error_page(&self, code: u16) -> PathBuf {
        self.config_dir
            .join(ERRORFILES_DIR)
            .join(format!("{code}.http"))
    }
}

/// The main config file, the one the init container seeds.
/// How many labels below its suffix a Gateway API wildcard host reaches.
pub const SUBDOMAIN_DEPTH: usize = 8;

pub const CONFIG_FILE: &str = "haproxy.cfg";
/// The backends' sections are spread over config files of their own
/// (`haproxy_backends_000.cfg`, ...), so that an endpoint change rewrites one small file
/// and not the whole config. haproxy loads the `*.cfg` files of its folder in name order
/// (C collation), and these names come after `haproxy.cfg`, whose `defaults` section the
/// backends need.
pub const BACKENDS_FILE_PREFIX: &str = "haproxy_backends_";
/// About how many backends go in one backends' file.
pub const BACKENDS_PER_FILE: usize = 256;
/// The name of the `defaults` section every proxy inherits from: named, so that a
/// backend added at runtime (`add backend NAME from tugboat`, haproxy 3.4) inherits the
/// same settings as one loaded from the files.
pub const DEFAULTS_NAME: &str = "tugboat";
pub const MAPS_DIR: &str = "maps";
pub const EXACT_MAP: &str = "routes-exact.map";
pub const PREFIX_MAP: &str = "routes-prefix.map";
pub const TLS_HOSTS_MAP: &str = "tls-hosts.map";
pub const PASSTHROUGH_MAP: &str = "passthrough.map";
/// OpenSSL's verification error texts by code (never changed at runtime).
pub const VERIFY_ERRORS_MAP: &str = "x509-verify-errors.map";
/// CA bundles and revocation lists that verify clients' certificates (under the lib
/// folder).
pub const CLIENT_CA_DIR: &str = "client-ca";
/// How the name of a revocation list in [`CLIENT_CA_DIR`] ends (the model names them).
pub const REVOCATION_LIST_SUFFIX: &str = ".crl.pem";
pub const CRT_LIST: &str = "crt-list.txt";
pub const DEFAULT_CERTIFICATE: &str = "default.pem";
pub const CERTS_DIR: &str = "certs";
pub const ERRORFILES_DIR: &str = "errorfiles";
/// CA bundles and client certificates for TLS to backends (under the lib folder).
pub const BACKEND_TLS_DIR: &str = "backend-tls";
/// Lua scripts (under the config folder).
pub const LUA_DIR: &str = "lua";
pub const EXTERNAL_AUTH_SCRIPT: &str = "external-auth.lua";
pub const ERROR_PAGES_SCRIPT: &str = "error-pages.lua";
pub const BODY_LIMIT_SCRIPT: &str = "body-limit.lua";
/// The 413 answer of body limits (under the error files' folder; not a status code's
/// name, so never one of the ConfigMap's error pages).
pub const BODY_LIMIT_ANSWER: &str = "body-limit-413.http";
/// Pattern files of long access lists (under the config folder).
pub const PATTERNS_DIR: &str = "patterns";
