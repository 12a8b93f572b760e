//! The keys users configure: where each may be set, how values are read and validated,
//! and the precedence between scopes.
//!
//! A key can be set in the controller's ConfigMap (plain key), on an Ingress (its
//! routes) and, where it makes sense, on a Service (its backends and the routes to it),
//! as an annotation `tugboat.dev/<key>` (or the legacy prefix `ingress.kubernetes.io/`,
//! read as Tugboat's except for the keys its users gave another meaning, see
//! [`keys::targets`]).
//! Service beats Ingress beats ConfigMap beats the built-in default. A value that does
//! not parse is ignored for that object only (the next scope down applies) and becomes a
//! problem naming the key, the value and what was expected.
//!
//! - [`keys`]: every key as one typed definition ([`KEYS`] is the reference);
//! - [`parse`]: the parsers, the door for these values: each accepts only the syntax it
//!   documents, so a value that passes can be written into haproxy's config as it is;
//! - [`snippet`]: the operator's raw lines, checked directive by directive, and whether
//!   the HAProxy controllers' (never run) restrict access;
//! - [`nginx_snippet`]: ingress-nginx's snippets, never run, and whether they restrict
//!   access;
//! - [`peers`]: other controllers' keys read as Tugboat's, and what differs;
//! - [`prefixes`]: the prefixes read, other controllers' included, and which unsupported
//!   keys restrict access;
//! - [`layer`]: the keys one object sets and their reading through the scopes;
//! - [`read`]: what the keys say about routes, backends and the process;
//! - [`reference`]: `docs/annotations.md`, generated from [`KEYS`].

pub mod keys;
pub mod layer;
pub mod nginx_snippet;
pub mod parse;
pub mod peers;
pub mod prefixes;
pub mod read;
pub mod reference;
pub mod snippet;

pub use keys::{KEYS, Key, KeyDefault, KeySpec, Named, Refers, Scope, default_timeouts, find_key};
pub use layer::{Layer, Resolver, read_keys, set_by};
pub use parse::{AccessList, BackendPath, ConfigMapKeyRef, ValueError, parse_pattern_list};
pub use prefixes::{Ecosystem, UnsupportedAccess};
pub use read::{
    BackendLookups, CanarySettings, RouteLookups, ServedHosts, auth_realm, backend_options, canary,
    global_options, refused_snippet_restricts, route_features,
};
pub use reference::{Support, migrating_markdown, reference_markdown, support};

/// The annotation prefix of Tugboat's keys.
pub const PREFIX: &str = "tugboat.dev/";
/// The legacy prefix (HAProxy Ingress' backward-compatible one, ingress-nginx's before
/// 0.9): an alias of Tugboat's, except for the keys those controllers gave another
/// meaning.
pub const ALIAS_PREFIX: &str = "ingress.kubernetes.io/";
