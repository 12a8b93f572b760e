//! Typed Kubernetes objects for the end-to-end suites: the shared vocabulary of
//! `tugboat-test-objects` (every test crate builds its objects from it), and what only
//! these suites need: a Service of echo backends, and basic-auth credentials.

use std::net::SocketAddr;

pub use tugboat_test_objects::*;

/// Service `name` (port 80 named `http`) and its EndpointSlice of `servers`, as JSON:
/// what a scenario needs for a Service of echo backends.
pub fn mk_service_of(name: &str, servers: &[crate::EchoServer]) -> [serde_json::Value; 2] {
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    [
        to_json(&mk_service(name, "http", 80)),
        to_json(&mk_endpoint_slice(name, "http", &addrs)),
    ]
}

/// `openssl passwd -6 -salt tugboatsalt s3cret`: a SHA-512-crypt hash of the password
/// `s3cret`, as a basic-auth Secret holds it.
pub const S3CRET_HASH: &str = "$6$tugboatsalt$6DCrLIVuHuI1gvyKjEQEpbFrO4u9Q.BH36L9Y.MGa2DB448gX.Mfgzsbvarlgb/aCVDOWmjnakgB8vKFBojCv1";
/// The `Authorization` value of user `ann` with password `s3cret`.
pub const ANN_S3CRET: &str = "Basic YW5uOnMzY3JldA==";
