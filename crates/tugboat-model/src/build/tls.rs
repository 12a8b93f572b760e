//! TLS of a build: certificates from Secrets, checked once each, served for the hosts
//! that claim them (`spec.tls` of the Ingresses, HTTPS listeners of the Gateways), the
//! operator's default certificate, and the Secret files of the backends' TLS.

use crate::desired::{HostMatch, TlsCertificate};
use crate::gateway::ListenerCertificate;
use crate::problem::{ObjectProblem, ObjectRef, ProblemReason};
use crate::snapshot::ObjectKey;
use crate::tls::Pem;
use crate::validate;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::routes::ingress_host_match;
use super::shared::{ParsedSecrets, Reads, SecretUse, Shared};

/// The TLS part of a build.
pub(super) struct Tls<'a> {
    /// The certificates served, by name.
    certificates: BTreeMap<String, TlsCertificate>,
    /// Secrets already checked, by key: the PEM or why it cannot be served.
    checked_secrets: HashMap<ObjectKey, Result<Pem, (ProblemReason, String)>>,
    /// TLS Secrets parsed by earlier builds.
    parsed: &'a mut ParsedSecrets,
    /// The name of the certificate of each host that has one.
    certificate_of_host: BTreeMap<String, String>,
    /// The hosts listed in a `spec.tls`.
    tls_hosts: BTreeSet<HostMatch>,
    /// Files of the backends' TLS, by file name.
    backend_files: BTreeMap<String, Pem>,
}

/// What the TLS part of a build gives the desired state.
pub(super) struct TlsOutput {
    pub certificates: BTreeMap<String, TlsCertificate>,
    pub tls_hosts: BTreeSet<HostMatch>,
    pub backend_files: BTreeMap<String, Pem>,
}

impl<'a> Tls<'a> {
    pub(super) fn new(parsed: &'a mut ParsedSecrets) -> Self {
        Tls {
            certificates: BTreeMap::new(),
            checked_secrets: HashMap::new(),
            parsed,
            certificate_of_host: BTreeMap::new(),
            tls_hosts: BTreeSet::new(),
            backend_files: BTreeMap::new(),
        }
    }

    /// One `spec.tls` entry of the Ingress `ingress`: its hosts are served with its
    /// Secret's certificate when the Secret is valid, with the default certificate
    /// otherwise.
    pub(super) fn add_tls(
        &mut self,
        shared: &mut Shared,
        ingress: &ObjectKey,
        index: usize,
        tls: &k8s_openapi::api::networking::v1::IngressTLS,
        aliased_hosts: &BTreeSet<HostMatch>,
        aliases: &[String],
    ) {
        let object = &ObjectRef::of("Ingress", ingress);
        let field = format!("spec.tls[{index}]");
        let mut hosts = Vec::new();
        for (host_index, host) in tls.hosts.iter().flatten().enumerate() {
            match validate::ingress_host(host) {
                Ok(host) => hosts.push(host),
                Err(err) => shared.problem(object, format!("{field}.hosts[{host_index}]"), err.0),
            }
        }
        // As ingress-nginx's server aliases: the aliases of a TLS host are served with
        // its certificate and redirected as it is.
        if hosts
            .iter()
            .any(|h| aliased_hosts.contains(&ingress_host_match(h)))
        {
            for alias in aliases {
                if !hosts.contains(alias) {
                    hosts.push(alias.clone());
                }
            }
        }
        for host in &hosts {
            self.tls_hosts.insert(ingress_host_match(host));
        }
        let Some(secret_name) = tls.secret_name.as_deref().filter(|s| !s.is_empty()) else {
            if !hosts.is_empty() {
                shared.problem(
                    object,
                    format!("{field}.secretName"),
                    "no secretName: these hosts get the default certificate".into(),
                );
            }
            return;
        };
        if let Err(err) = validate::dns_subdomain(secret_name) {
            shared.problem(object, format!("{field}.secretName"), err.0);
            return;
        }
        let secret_key = ObjectKey::new(&ingress.namespace, secret_name);
        let pem = match self.checked_secret(shared, &secret_key, SecretUse::Certificate) {
            Ok(pem) => pem,
            Err((reason, message)) => {
                let fallback = if hosts.is_empty() {
                    String::new()
                } else {
                    format!("; {} get the default certificate", hosts.join(", "))
                };
                shared.problems.push(ObjectProblem {
                    object: object.clone(),
                    field: format!("{field}.secretName"),
                    reason,
                    message: format!("Secret {secret_key}: {message}{fallback}"),
                });
                return;
            }
        };
        let name = format!("{}_{}", secret_key.namespace, secret_key.name);
        let mut claimed = Vec::new();
        for host in hosts {
            match self.certificate_of_host.get(&host) {
                Some(owner) if *owner != name => {
                    let message = format!(
                        "host {host} already has the certificate {owner} from an older Ingress"
                    );
                    shared.problems.push(ObjectProblem {
                        object: object.clone(),
                        field: format!("{field}.hosts"),
                        reason: ProblemReason::RouteConflict,
                        message,
                    });
                }
                _ => {
                    self.certificate_of_host.insert(host.clone(), name.clone());
                    claimed.push(host);
                }
            }
        }
        self.serve_certificate(name, pem, claimed);
    }

    /// The certificate of an HTTPS listener, served for its hosts (a host another
    /// certificate already has keeps that one).
    pub(super) fn add_listener_certificate(
        &mut self,
        shared: &mut Shared,
        certificate: &ListenerCertificate,
    ) {
        let Ok(pem) = self.checked_secret(shared, &certificate.secret, SecretUse::Certificate)
        else {
            return;
        };
        let name = format!(
            "{}_{}",
            certificate.secret.namespace, certificate.secret.name
        );
        let mut claimed = Vec::new();
        for host in &certificate.hosts {
            match self.certificate_of_host.get(host) {
                Some(owner) if *owner != name => shared.problems.push(ObjectProblem {
                    object: ObjectRef::of("Gateway", &certificate.gateway),
                    field: format!("spec.listeners[{}].tls", certificate.listener),
                    reason: ProblemReason::RouteConflict,
                    message: format!("host {host} already has the certificate {owner}"),
                }),
                _ => {
                    self.certificate_of_host.insert(host.clone(), name.clone());
                    claimed.push(host.clone());
                }
            }
        }
        self.serve_certificate(name, pem, claimed);
    }

    /// Serves certificate `name` for the hosts it claimed (more, when it has some).
    fn serve_certificate(&mut self, name: String, pem: Pem, claimed: Vec<String>) {
        let certificate = self
            .certificates
            .entry(name.clone())
            .or_insert_with(|| TlsCertificate {
                name,
                pem,
                hosts: Vec::new(),
            });
        certificate.hosts.extend(claimed);
        certificate.hosts.sort();
        certificate.hosts.dedup();
    }

    /// The PEM of the TLS Secret `key`, valid now, or why it cannot be served; the
    /// Secret is read as `usage`.
    pub(super) fn checked_secret(
        &mut self,
        shared: &mut Shared,
        key: &ObjectKey,
        usage: SecretUse,
    ) -> Result<Pem, (ProblemReason, String)> {
        shared.reads.secret(key, usage);
        if let Some(result) = self.checked_secrets.get(key) {
            return result.clone();
        }
        let now = shared.settings.now;
        let result = match shared.snapshot.secrets.get(key) {
            None => Err((ProblemReason::SecretNotFound, "not found".to_string())),
            Some(secret) => {
                let parsed = self.parsed.parse(key, secret);
                if let Ok(parsed) = &parsed {
                    shared.reads.validity_change(parsed.next_change(now));
                }
                parsed
                    .and_then(|parsed| parsed.at(now))
                    .map(|checked| checked.pem)
                    .map_err(|message| (ProblemReason::InvalidCertificate, message))
            }
        };
        self.checked_secrets.insert(key.clone(), result.clone());
        result
    }

    /// The certificate of `--default-ssl-certificate`, if set and valid.
    pub(super) fn default_certificate(&mut self, shared: &mut Shared) -> Option<Pem> {
        let key = shared.settings.default_certificate.clone()?;
        match self.checked_secret(shared, &key, SecretUse::Other) {
            Ok(pem) => Some(pem),
            Err((reason, message)) => {
                shared.problems.push(ObjectProblem {
                    object: ObjectRef::of("Secret", &key),
                    field: "data".into(),
                    reason,
                    message: format!(
                        "--default-ssl-certificate: {message}; a hostless HTTPS listener's or the controller's own \
                         certificate is served instead"
                    ),
                });
                None
            }
        }
    }

    /// A Secret file a backend's TLS needs (`ca.crt` for `server-ca`, a TLS pair for
    /// `server-crt`); `None` (and a problem of `object`) when it cannot be used.
    pub(super) fn backend_file(
        &mut self,
        shared: &mut Shared,
        (object, field): &(ObjectRef, String),
        namespace: &str,
        secret: &str,
        ca: bool,
    ) -> Option<String> {
        let (prefix, key_name) = if ca {
            ("ca", "server-ca")
        } else {
            ("client", "server-crt")
        };
        let file = format!("{prefix}_{namespace}_{secret}.pem");
        if self.backend_files.contains_key(&file) {
            return Some(file);
        }
        let key = ObjectKey::new(namespace, secret);
        shared.reads.secret(&key, SecretUse::Other);
        let checked = match shared.snapshot.secrets.get(&key) {
            None => Err((ProblemReason::SecretNotFound, "not found".to_string())),
            Some(found) if ca => crate::tls::check_ca_secret(found)
                .map_err(|m| (ProblemReason::InvalidCertificate, m)),
            Some(_) => self.checked_secret(shared, &key, SecretUse::Other),
        };
        match checked {
            Ok(pem) => {
                self.backend_files.insert(file.clone(), pem);
                Some(file)
            }
            Err((reason, message)) => {
                shared.problems.push(ObjectProblem {
                    object: object.clone(),
                    field: field.clone(),
                    reason,
                    message: format!(
                        "{key_name} Secret {key}: {message}; the backend answers 503 until it \
                         can be used"
                    ),
                });
                None
            }
        }
    }

    /// Forgets the parsed Secrets a build no longer reads.
    pub(super) fn keep_parsed(&mut self, reads: &Reads) {
        self.parsed.keep_only(reads);
    }

    pub(super) fn into_output(self) -> TlsOutput {
        TlsOutput {
            certificates: self.certificates,
            tls_hosts: self.tls_hosts,
            backend_files: self.backend_files,
        }
    }
}
