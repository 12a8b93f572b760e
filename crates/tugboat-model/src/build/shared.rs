//! What every part of a build shares: what it reads (the operator's settings, the
//! snapshot, the ConfigMap's keys) and what it adds to (the problems found, and what it
//! read, so that [`crate::incremental`] knows what a later change touches).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use crate::annotations::{Layer, UnsupportedAccess};
use crate::desired::{BackendName, HostMatch, PathMatch};
use crate::problem::{ObjectProblem, ObjectRef, ProblemReason};
use crate::snapshot::{ObjectKey, Snapshot};
use crate::tls::{ParsedPair, parse_tls_secret};
use k8s_openapi::api::core::v1::Secret;

/// The operator's settings the model needs (from the controller's flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `--default-backend-service`: where unmatched requests go when no Ingress sets a
    /// `spec.defaultBackend` (its first port).
    pub default_backend_service: Option<ObjectKey>,
    /// `--default-ssl-certificate`: the TLS Secret served for unmatched SNI.
    pub default_certificate: Option<ObjectKey>,
    /// `--configmap-errorfiles`: status code -> page.
    pub error_pages: Option<ObjectKey>,
    /// `--configmap`: the controller's ConfigMap, the default of every key
    /// (see [`crate::annotations`]).
    pub config_map: Option<ObjectKey>,
    /// ExternalName Services let an Ingress author send traffic to any host: off unless
    /// the operator enables them.
    pub allow_external_name: bool,
    /// Redirect plain HTTP to HTTPS for hosts listed in a `spec.tls`.
    pub ssl_redirect: bool,
    /// Raw configuration snippets (`*-config-snippet` keys): off unless the operator
    /// enables them (`--allow-snippets`).
    pub allow_snippets: bool,
    /// What the routes do when an object sets a key that restricts access and that
    /// Tugboat does not support (`--unsupported-access-keys`): refuse (403) by default.
    pub unsupported_access: UnsupportedAccess,
    /// The Gateway API (`--enable-gateway-api`): `None` when off.
    pub gateway: Option<crate::gateway::GatewaySettings>,
    /// The TCP services ConfigMaps, and the ports their services may not take.
    pub tcp_services: super::TcpServicesSettings,
    /// Now, in seconds since the epoch, to check certificate validity.
    pub now: i64,
}

impl Settings {
    /// Whether the operator's flags are the same (the time aside).
    pub fn same_flags(&self, other: &Settings) -> bool {
        *self
            == Settings {
                now: self.now,
                ..other.clone()
            }
    }

    /// Defaults: nothing optional set, ExternalName off, redirects on.
    pub fn new(now: i64) -> Self {
        Self {
            default_backend_service: None,
            default_certificate: None,
            error_pages: None,
            config_map: None,
            allow_external_name: false,
            ssl_redirect: true,
            allow_snippets: false,
            unsupported_access: UnsupportedAccess::Deny,
            gateway: None,
            tcp_services: Default::default(),
            now,
        }
    }
}

/// What every part of a build shares: what it reads (the snapshot, the operator's
/// settings, the ConfigMap's keys) and what it adds to (the problems found, what was
/// read).
pub(super) struct Shared<'a> {
    pub(super) snapshot: &'a Snapshot,
    pub(super) settings: &'a Settings,
    pub(super) config_map_layer: &'a Layer,
    pub(super) problems: Vec<ObjectProblem>,
    pub(super) reads: Reads,
}

impl Shared<'_> {
    /// An invalid `field` of `object`.
    pub(super) fn problem(&mut self, object: &ObjectRef, field: String, message: String) {
        self.problems.push(ObjectProblem {
            object: object.clone(),
            field,
            reason: ProblemReason::InvalidField,
            message,
        });
    }
}

/// How a build used a Secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SecretUse {
    /// Only as the certificate of `spec.tls` hosts.
    Certificate,
    /// Anything else (the default certificate, backend TLS, basic auth), maybe as well.
    Other,
}

/// What a build read besides the objects it walks, so that [`crate::incremental`]
/// knows what a later change touches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Reads {
    /// Every Secret the build looked for (present or not), and how it used it.
    pub secrets: HashMap<ObjectKey, SecretUse>,
    /// The first time after `now` at which a certificate check changes its outcome.
    pub next_validity_change: Option<i64>,
    /// The (host, path) keys that more than one rule claimed: who gets one depends on
    /// every claimant.
    pub contested_routes: HashSet<(HostMatch, PathMatch)>,
    /// Who uses each backend.
    pub backend_use: HashMap<BackendName, BackendUse>,
}

/// Who uses a backend.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct BackendUse {
    /// The Ingresses that use it, in build order: the first sets its options.
    pub ingresses: Vec<ObjectKey>,
    /// `--default-backend-service` names it.
    pub flag: bool,
}

impl Reads {
    /// The backends in `used` are used by the Ingress `ingress`.
    pub(super) fn used_by(&mut self, used: BTreeSet<BackendName>, ingress: &ObjectKey) {
        for name in used {
            let usage = self.backend_use.entry(name).or_default();
            usage.ingresses.push(ingress.clone());
        }
    }

    pub(super) fn secret(&mut self, key: &ObjectKey, usage: SecretUse) {
        let entry = self.secrets.entry(key.clone()).or_insert(usage);
        if usage == SecretUse::Other {
            *entry = SecretUse::Other;
        }
    }

    /// Takes in what another build read (of one Ingress built alone).
    pub(crate) fn absorb(&mut self, other: Reads) {
        for (key, usage) in other.secrets {
            self.secret(&key, usage);
        }
        self.validity_change(other.next_validity_change);
    }

    pub(super) fn validity_change(&mut self, at: Option<i64>) {
        if let Some(at) = at {
            self.next_validity_change = Some(self.next_validity_change.map_or(at, |t| t.min(at)));
        }
    }
}

/// TLS Secrets as parsed, kept between builds: a Secret is parsed again only when its
/// object changes (the snapshot then holds a new one).
#[derive(Debug, Clone, Default)]
pub struct ParsedSecrets {
    by_key: HashMap<ObjectKey, (Arc<Secret>, Result<ParsedPair, String>)>,
}

impl ParsedSecrets {
    /// The parsed pair of `secret`, from the cache when it holds this very object.
    pub(crate) fn parse(
        &mut self,
        key: &ObjectKey,
        secret: &Arc<Secret>,
    ) -> Result<ParsedPair, String> {
        if let Some((cached, parsed)) = self.by_key.get(key)
            && Arc::ptr_eq(cached, secret)
        {
            return parsed.clone();
        }
        let parsed = parse_tls_secret(secret);
        self.by_key
            .insert(key.clone(), (secret.clone(), parsed.clone()));
        parsed
    }

    /// Forgets the Secrets a build no longer reads.
    pub(super) fn keep_only(&mut self, reads: &Reads) {
        self.by_key.retain(|key, _| reads.secrets.contains_key(key));
    }
}
