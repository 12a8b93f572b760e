//! The controller's own certificate: served for unmatched SNI when no valid
//! `--default-ssl-certificate` is given.
//!
//! It is generated once and kept in the lib folder (a hidden file haproxy never loads),
//! so a restarted controller serves the same certificate and changes nothing.
//!
//! Blocking file work, done before the async runtime starts (`tugboat run`) or without
//! one (`tugboat render`).
#![allow(
    clippy::disallowed_methods,
    reason = "runs before the async runtime starts, or without one (see above)"
)]

use std::path::Path;

use anyhow::Context;
use tugboat_model::tls::{Pem, check_pair};

const FILE: &str = ".tugboat-fallback.pem";
/// The name in the certificate: a reserved name that matches no real host.
const NAME: &str = "tugboat-default-certificate.invalid";

/// The fallback certificate in `lib_dir`, made when missing, invalid or expired.
pub fn fallback_certificate(lib_dir: &Path, now: i64) -> anyhow::Result<Pem> {
    let path = lib_dir.join(FILE);
    if let Ok(text) = std::fs::read_to_string(&path)
        && check_pair(&text, &text, now).is_ok()
    {
        return Ok(Pem::from_checked(text));
    }
    let generated = rcgen::generate_simple_self_signed(vec![NAME.to_string()])
        .context("cannot generate the default certificate")?;
    let text = format!(
        "{}{}",
        generated.cert.pem(),
        generated.signing_key.serialize_pem()
    );
    check_pair(&text, &text, now)
        .map_err(|e| anyhow::anyhow!("the generated default certificate is unusable: {e}"))?;
    tugboat_haproxy::files::write_atomic(&path, text.as_bytes(), 0o600)
        .context("cannot store the default certificate")?;
    Ok(Pem::from_checked(text))
}

/// Seconds since the epoch.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_made_once_and_kept() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let first = fallback_certificate(dir.path(), now())?;
        let second = fallback_certificate(dir.path(), now())?;
        assert_eq!(first, second);
        assert!(first.as_str().contains("BEGIN CERTIFICATE"));
        Ok(())
    }
}
