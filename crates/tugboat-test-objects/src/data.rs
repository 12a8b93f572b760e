//! Secrets (TLS, CA bundles, basic auth, any type) and ConfigMaps.

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use crate::meta;

/// A Secret of type `type_` with `data` (base64 on the wire, as the API server stores it).
pub fn mk_secret(name: &str, type_: &str, data: &[(&str, &[u8])]) -> Secret {
    Secret {
        metadata: meta(name),
        type_: Some(type_.to_string()),
        data: Some(
            data.iter()
                .map(|(key, value)| (key.to_string(), ByteString(value.to_vec())))
                .collect(),
        ),
        ..Secret::default()
    }
}

/// A `kubernetes.io/tls` Secret holding a certificate and its key (PEM).
pub fn mk_tls_secret(name: &str, cert_pem: &str, key_pem: &str) -> Secret {
    mk_secret(
        name,
        "kubernetes.io/tls",
        &[
            ("tls.crt", cert_pem.as_bytes()),
            ("tls.key", key_pem.as_bytes()),
        ],
    )
}

/// An Opaque Secret holding a CA bundle (PEM) under `ca.crt`, as `server-ca` reads it.
pub fn mk_ca_secret(name: &str, ca_pem: &str) -> Secret {
    mk_secret(name, "Opaque", &[("ca.crt", ca_pem.as_bytes())])
}

/// An Opaque Secret for basic auth: key `auth` holds one `user:hash` line per user
/// (an htpasswd file).
pub fn mk_basic_auth_secret(name: &str, users: &[(&str, &str)]) -> Secret {
    let auth: String = users
        .iter()
        .map(|(user, hash)| format!("{user}:{hash}\n"))
        .collect();
    mk_secret(name, "Opaque", &[("auth", auth.as_bytes())])
}

/// A ConfigMap with `data`.
pub fn mk_config_map(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: meta(name),
        data: Some(
            data.iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect(),
        ),
        ..ConfigMap::default()
    }
}
