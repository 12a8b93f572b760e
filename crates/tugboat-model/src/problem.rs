//! Problems found in user objects: which object, which field, and what is wrong.
//!
//! A problem never stops the build: the object (or the part of it that is wrong) is
//! skipped and everything else is still routed. The controller turns problems into log
//! lines (and, with the Kubernetes source, Events and metrics).

use std::fmt;
use std::sync::Arc;

use crate::snapshot::ObjectKey;

/// Kind, namespace and name of the object a problem belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    pub kind: &'static str,
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

impl ObjectRef {
    /// The object of kind `kind` that `key` names.
    pub fn of(kind: &'static str, key: &ObjectKey) -> Self {
        Self {
            kind,
            namespace: key.namespace.clone(),
            name: key.name.clone(),
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// Why a problem happened, in a few stable words (a metric label, an Event reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProblemReason {
    /// A field does not have a value the controller accepts.
    InvalidField,
    /// The object refers to a Service that does not exist.
    ServiceNotFound,
    /// The object refers to a Service port that the Service does not have.
    ServicePortNotFound,
    /// Another, older Ingress already claims the same host and path.
    RouteConflict,
    /// The object refers to a Secret that does not exist.
    SecretNotFound,
    /// A TLS Secret that cannot be served (malformed, expired, key mismatch).
    InvalidCertificate,
    /// The object needs a feature the operator has not enabled.
    NotAllowed,
}

impl ProblemReason {
    pub fn as_str(self) -> &'static str {
        match self {
            ProblemReason::InvalidField => "InvalidField",
            ProblemReason::ServiceNotFound => "ServiceNotFound",
            ProblemReason::ServicePortNotFound => "ServicePortNotFound",
            ProblemReason::RouteConflict => "RouteConflict",
            ProblemReason::SecretNotFound => "SecretNotFound",
            ProblemReason::InvalidCertificate => "InvalidCertificate",
            ProblemReason::NotAllowed => "NotAllowed",
        }
    }
}

/// One thing wrong with one object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectProblem {
    pub object: ObjectRef,
    /// JSON-path-like location of the field, e.g. `spec.rules[0].host`.
    pub field: String,
    pub reason: ProblemReason,
    pub message: String,
}

impl fmt::Display for ObjectProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.object, self.field, self.message)
    }
}
