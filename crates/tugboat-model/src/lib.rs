//! The pure core of Tugboat: a [`Snapshot`] of Kubernetes objects goes in, the [`Desired`]
//! proxy state and the list of [`ObjectProblem`]s come out.
//!
//! Nothing here does I/O or knows about haproxy's syntax: the same inputs always give the
//! same outputs, which is what lets the planner compare two states and the tests use plain
//! tables. Every value that comes from a user is validated here (see [`validate`]) before it
//! can reach the desired state.

pub mod annotations;
pub mod auth;
pub mod backoff;
pub mod build;
pub mod class;
pub mod desired;
pub mod features;
pub mod gateway;
pub mod incremental;
pub mod migration;
pub mod objects;
pub mod patch;
pub mod ports;
pub mod problem;
pub mod references;
pub mod route_parts;
mod route_patch;
pub mod snapshot;
pub mod tls;
pub mod validate;

pub use build::{BuildOutput, Settings, build};
pub use desired::{
    Backend, BackendName, Canary, Desired, Endpoint, HostMatch, ListenerBind, PassthroughRoute,
    PathMatch, Route, RouteOwnerKind, TcpService, TlsCertificate, UserHash,
};
pub use features::{BackendOptions, FeatureSetId, GlobalOptions, RouteFeatures};
pub use incremental::{IngressRoutes, Model, Patch, Rebuilt, Update};
pub use problem::{ObjectProblem, ObjectRef};
pub use references::{NarrowMemo, References, ReferencesMemo, references};
pub use snapshot::{ObjectKey, ObjectKeys, Objects, Snapshot};

/// A 64-bit hash that is the same across builds, platforms and versions (XXH3, unlike
/// std's hasher), for names and fingerprints that outlive the process.
pub fn stable_hash(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}
