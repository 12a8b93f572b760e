//! TLS of the Ingresses: certificates from Secrets, checked once each, served for the
//! hosts that claim them, and the operator's default certificate.

use crate::desired::{HostMatch, TlsCertificate};
use crate::problem::{ObjectProblem, ObjectRef, ProblemReason};
use crate::snapshot::ObjectKey;
use crate::tls::Pem;
use crate::validate;
use std::collections::BTreeSet;

use super::{Builder, SecretUse, ingress_host_match};

impl Builder<'_> {
    /// One `spec.tls` entry: its hosts are served with its Secret's certificate when the
    /// Secret is valid, with the default certificate otherwise.
    pub(super) fn add_tls(
        &mut self,
        object: &ObjectRef,
        ingress: &ObjectKey,
        index: usize,
        tls: &k8s_openapi::api::networking::v1::IngressTLS,
        aliased_hosts: &BTreeSet<HostMatch>,
        aliases: &[String],
    ) {
        let field = format!("spec.tls[{index}]");
        let mut hosts = Vec::new();
        for (host_index, host) in tls.hosts.iter().flatten().enumerate() {
            match validate::ingress_host(host) {
                Ok(host) => hosts.push(host),
                Err(err) => self.problem(object, format!("{field}.hosts[{host_index}]"), err.0),
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
                self.problem(
                    object,
                    format!("{field}.secretName"),
                    "no secretName: these hosts get the default certificate".into(),
                );
            }
            return;
        };
        if let Err(err) = validate::dns_subdomain(secret_name) {
            self.problem(object, format!("{field}.secretName"), err.0);
            return;
        }
        let secret_key = ObjectKey::new(&ingress.namespace, secret_name);
        let pem = match self.checked_secret(&secret_key, SecretUse::Certificate) {
            Ok(pem) => pem,
            Err((reason, message)) => {
                let fallback = if hosts.is_empty() {
                    String::new()
                } else {
                    format!("; {} get the default certificate", hosts.join(", "))
                };
                self.problems.push(ObjectProblem {
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
                    self.problems.push(ObjectProblem {
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

    /// Serves certificate `name` for the hosts it claimed (more, when it has some).
    pub(super) fn serve_certificate(&mut self, name: String, pem: Pem, claimed: Vec<String>) {
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

    pub(super) fn checked_secret(
        &mut self,
        key: &ObjectKey,
        usage: SecretUse,
    ) -> Result<Pem, (ProblemReason, String)> {
        self.reads.secret(key, usage);
        if let Some(result) = self.checked_secrets.get(key) {
            return result.clone();
        }
        let now = self.settings.now;
        let result = match self.snapshot.secrets.get(key) {
            None => Err((ProblemReason::SecretNotFound, "not found".to_string())),
            Some(secret) => {
                let parsed = self.parsed.parse(key, secret);
                if let Ok(parsed) = &parsed {
                    self.reads.validity_change(parsed.next_change(now));
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
    pub(super) fn default_certificate(&mut self) -> Option<Pem> {
        let key = self.settings.default_certificate.clone()?;
        match self.checked_secret(&key, SecretUse::Other) {
            Ok(pem) => Some(pem),
            Err((reason, message)) => {
                self.problems.push(ObjectProblem {
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
}
