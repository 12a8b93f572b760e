//! TLS Secrets: checking a certificate and its key before haproxy ever sees them.
//!
//! haproxy refuses a whole configuration when one certificate file is bad, so a Secret
//! is checked here first: both keys present, PEM that parses, a certificate that is
//! valid now, and a private key that belongs to it. A Secret that fails gets a problem
//! and its hosts fall back to the default certificate; nothing else is affected.
//! Secret contents never appear in messages, and [`Pem`] never prints them.

use std::fmt;

use der::Decode;
use k8s_openapi::api::core::v1::Secret;

/// PEM text holding a certificate chain and its private key, shared (not copied) by the
/// states that hold it. Its `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct Pem(std::sync::Arc<str>);

impl Pem {
    /// Wraps PEM text that was checked (or made) by the caller.
    pub fn from_checked(text: String) -> Self {
        Self(text.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Pem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pem(<{} bytes, hidden>)", self.0.len())
    }
}

/// A checked certificate and key, ready to be written for haproxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedCertificate {
    pub pem: Pem,
    /// When the certificate expires (seconds since the epoch).
    pub not_after: i64,
}

/// A TLS pair as parsed, before the time is looked at: parsing (and matching the key)
/// is the costly part and depends on the content only, so it is done once per content
/// and [`ParsedPair::at`] applies the validity period at any time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedPair {
    /// The validity period of the leaf certificate (seconds since the epoch).
    pub not_before: i64,
    pub not_after: i64,
    /// What the checks that do not depend on the time say: the PEM to serve, or what
    /// is wrong with the key.
    pub pair: Result<Pem, String>,
}

impl ParsedPair {
    /// The pair checked at `now`.
    pub fn at(&self, now: i64) -> Result<CheckedCertificate, String> {
        if now < self.not_before {
            return Err("the certificate in 'tls.crt' is not valid yet".into());
        }
        if now >= self.not_after {
            return Err("the certificate in 'tls.crt' has expired".into());
        }
        self.pair.clone().map(|pem| CheckedCertificate {
            pem,
            not_after: self.not_after,
        })
    }

    /// When, after `now`, the outcome of [`ParsedPair::at`] changes (`None`: never).
    pub fn next_change(&self, now: i64) -> Option<i64> {
        if now < self.not_before {
            Some(self.not_before)
        } else if now < self.not_after {
            Some(self.not_after)
        } else {
            None
        }
    }
}

/// Checks a TLS Secret (`tls.crt`, `tls.key`) at time `now` (seconds since the epoch).
/// The error says what is wrong without quoting the Secret.
pub fn check_tls_secret(secret: &Secret, now: i64) -> Result<CheckedCertificate, String> {
    parse_tls_secret(secret)?.at(now)
}

/// Parses a TLS Secret (`tls.crt`, `tls.key`) without looking at the time.
pub fn parse_tls_secret(secret: &Secret) -> Result<ParsedPair, String> {
    let data = secret.data.as_ref();
    let field = |name: &str| -> Result<String, String> {
        let bytes = data
            .and_then(|d| d.get(name))
            .ok_or_else(|| format!("the Secret has no '{name}' key"))?;
        String::from_utf8(bytes.0.clone()).map_err(|_| format!("'{name}' is not PEM text"))
    };
    let (cert_pem, key_pem) = (field("tls.crt")?, field("tls.key")?);
    parse_pair(&cert_pem, &key_pem)
}

/// Checks a certificate chain and key given as PEM text.
pub fn check_pair(cert_pem: &str, key_pem: &str, now: i64) -> Result<CheckedCertificate, String> {
    parse_pair(cert_pem, key_pem)?.at(now)
}

/// Parses a certificate chain and key given as PEM text, without looking at the time.
pub fn parse_pair(cert_pem: &str, key_pem: &str) -> Result<ParsedPair, String> {
    let certificates: Vec<Vec<u8>> = pem_blocks(cert_pem)
        .into_iter()
        .filter(|(label, _)| label == "CERTIFICATE")
        .map(|(_, der)| der)
        .collect();
    let leaf_der = certificates
        .first()
        .ok_or("'tls.crt' holds no PEM certificate")?;
    let leaf = x509_cert::Certificate::from_der(leaf_der)
        .map_err(|_| "'tls.crt' is not a valid X.509 certificate".to_string())?;
    let validity = &leaf.tbs_certificate().validity();
    Ok(ParsedPair {
        not_before: validity.not_before.to_unix_duration().as_secs() as i64,
        not_after: validity.not_after.to_unix_duration().as_secs() as i64,
        pair: matched_pair(&leaf, cert_pem, key_pem),
    })
}

/// The PEM haproxy gets when the key in `key_pem` belongs to `leaf`.
fn matched_pair(
    leaf: &x509_cert::Certificate,
    cert_pem: &str,
    key_pem: &str,
) -> Result<Pem, String> {
    let keys: Vec<(String, Vec<u8>)> = pem_blocks(key_pem)
        .into_iter()
        .filter(|(label, _)| label.ends_with("PRIVATE KEY"))
        .collect();
    let [(label, key_der)] = keys.as_slice() else {
        return Err("'tls.key' must hold exactly one PEM private key".into());
    };
    let spki = leaf.tbs_certificate().subject_public_key_info();
    let cert_public = spki.subject_public_key.raw_bytes();
    let matches = match public_key_of(label, key_der)? {
        Some(KeyPublic::Rsa(modulus)) => pkcs1::RsaPublicKeyRef::from_der(cert_public)
            .is_ok_and(|k| strip_zeros(k.modulus.as_bytes()) == strip_zeros(&modulus)),
        Some(KeyPublic::Raw(public)) => public == cert_public,
        // The key does not carry its public part (rare): haproxy checks it on load.
        None => true,
    };
    if !matches {
        return Err("the private key in 'tls.key' does not belong to the certificate".into());
    }
    let mut pem = String::with_capacity(cert_pem.len() + key_pem.len() + 2);
    pem.push_str(cert_pem.trim_end());
    pem.push('\n');
    pem.push_str(key_pem.trim_end());
    pem.push('\n');
    Ok(Pem(pem.into()))
}

/// Checks the CA bundle of a Secret (`ca.crt`): PEM certificates only, each a valid
/// X.509 certificate. Returns the bundle as it will be written for haproxy.
pub fn check_ca_secret(secret: &Secret) -> Result<Pem, String> {
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get("ca.crt"))
        .ok_or("the Secret has no 'ca.crt' key")?;
    let text = std::str::from_utf8(&bytes.0).map_err(|_| "'ca.crt' is not PEM text")?;
    check_ca_bundle(text)
}

/// Checks PEM text holding CA certificates, and nothing else.
pub fn check_ca_bundle(text: &str) -> Result<Pem, String> {
    let blocks = pem_blocks(text);
    if blocks.is_empty() {
        return Err("'ca.crt' holds no PEM certificate".into());
    }
    let mut pem = String::with_capacity(text.len());
    for (label, der_bytes) in &blocks {
        if label != "CERTIFICATE" {
            return Err(format!(
                "'ca.crt' must hold certificates only, not '{label}'"
            ));
        }
        x509_cert::Certificate::from_der(der_bytes)
            .map_err(|_| "'ca.crt' holds something that is not an X.509 certificate")?;
        // Written again from the parsed bytes: nothing but the certificates reaches haproxy.
        let block = der::pem::encode_string("CERTIFICATE", der::pem::LineEnding::LF, der_bytes)
            .map_err(|_| "'ca.crt' holds a certificate that cannot be encoded")?;
        pem.push_str(&block);
    }
    Ok(Pem(pem.into()))
}

/// The files of a client-certificate CA Secret (`auth-tls-secret`): the CA bundle of
/// `ca.crt` and the revocation lists of `ca.crl` when it has one, each written again
/// from what parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCaFiles {
    pub ca: Pem,
    pub crl: Option<Pem>,
    /// When the last certificate of `ca.crt` expires (seconds since the epoch): from
    /// then on no client certificate verifies.
    pub expires: i64,
}

/// Checks a client-certificate CA Secret: `ca.crt` as [`check_ca_bundle`] does, and
/// `ca.crl`, when present, as [`check_crl`] does. The error names the field.
pub fn check_client_ca_secret(secret: &Secret) -> Result<ClientCaFiles, String> {
    let ca = check_ca_secret(secret)?;
    let expires = pem_blocks(ca.as_str())
        .iter()
        .filter_map(|(_, der_bytes)| x509_cert::Certificate::from_der(der_bytes).ok())
        .map(|cert| {
            let not_after = cert.tbs_certificate().validity().not_after;
            not_after.to_unix_duration().as_secs() as i64
        })
        .max()
        .unwrap_or(0);
    let crl = match secret.data.as_ref().and_then(|d| d.get("ca.crl")) {
        None => None,
        Some(bytes) => {
            let text = std::str::from_utf8(&bytes.0).map_err(|_| "'ca.crl' is not PEM text")?;
            Some(check_crl(text)?)
        }
    };
    Ok(ClientCaFiles { ca, crl, expires })
}

/// Checks PEM text holding certificate revocation lists (`X509 CRL`), and nothing else.
pub fn check_crl(text: &str) -> Result<Pem, String> {
    let blocks = pem_blocks(text);
    if blocks.is_empty() {
        return Err("'ca.crl' holds no PEM revocation list".into());
    }
    let mut pem = String::with_capacity(text.len());
    for (label, der_bytes) in &blocks {
        if label != "X509 CRL" {
            return Err(format!(
                "'ca.crl' must hold revocation lists (X509 CRL) only, not '{label}'"
            ));
        }
        x509_cert::crl::CertificateList::<x509_cert::certificate::Rfc5280>::from_der(der_bytes)
            .map_err(|_| "'ca.crl' holds something that is not an X.509 revocation list")?;
        let block = der::pem::encode_string("X509 CRL", der::pem::LineEnding::LF, der_bytes)
            .map_err(|_| "'ca.crl' holds a revocation list that cannot be encoded")?;
        pem.push_str(&block);
    }
    Ok(Pem(pem.into()))
}

enum KeyPublic {
    Rsa(Vec<u8>),
    Raw(Vec<u8>),
}

const RSA_ENCRYPTION: der::asn1::ObjectIdentifier =
    der::asn1::ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");
const EC_PUBLIC_KEY: der::asn1::ObjectIdentifier =
    der::asn1::ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");

/// The public part of a private key, when the key holds it.
fn public_key_of(label: &str, der_bytes: &[u8]) -> Result<Option<KeyPublic>, String> {
    let unreadable = || "'tls.key' is not a readable private key".to_string();
    match label {
        "RSA PRIVATE KEY" => {
            let key = pkcs1::RsaPrivateKeyRef::from_der(der_bytes).map_err(|_| unreadable())?;
            Ok(Some(KeyPublic::Rsa(key.modulus.as_bytes().to_vec())))
        }
        "EC PRIVATE KEY" => {
            let key = sec1::EcPrivateKey::from_der(der_bytes).map_err(|_| unreadable())?;
            Ok(key.public_key.map(|p| KeyPublic::Raw(p.to_vec())))
        }
        "PRIVATE KEY" => {
            let info = pkcs8::PrivateKeyInfoRef::from_der(der_bytes).map_err(|_| unreadable())?;
            let inner = info.private_key.as_bytes();
            if info.algorithm.oid == RSA_ENCRYPTION {
                let key = pkcs1::RsaPrivateKeyRef::from_der(inner).map_err(|_| unreadable())?;
                return Ok(Some(KeyPublic::Rsa(key.modulus.as_bytes().to_vec())));
            }
            if info.algorithm.oid == EC_PUBLIC_KEY {
                let key = sec1::EcPrivateKey::from_der(inner).map_err(|_| unreadable())?;
                if let Some(public) = key.public_key {
                    return Ok(Some(KeyPublic::Raw(public.to_vec())));
                }
            }
            Ok(info
                .public_key
                .and_then(|p| p.as_bytes().map(|b| KeyPublic::Raw(b.to_vec()))))
        }
        "ENCRYPTED PRIVATE KEY" => {
            Err("'tls.key' is encrypted: haproxy needs an unencrypted private key".into())
        }
        _ => Err(unreadable()),
    }
}

fn strip_zeros(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
    &bytes[start..]
}

/// The PEM blocks of a text, as (label, DER); blocks that do not decode are skipped.
fn pem_blocks(text: &str) -> Vec<(String, Vec<u8>)> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("-----BEGIN ") {
        let block = &rest[start..];
        let Some(label_end) = block["-----BEGIN ".len()..].find("-----") else {
            break;
        };
        let label = &block["-----BEGIN ".len().."-----BEGIN ".len() + label_end];
        let end_marker = format!("-----END {label}-----");
        let Some(end) = block.find(&end_marker) else {
            break;
        };
        let whole = &block[..end + end_marker.len()];
        if let Ok((decoded_label, der_bytes)) = der::pem::decode_vec(whole.as_bytes()) {
            blocks.push((decoded_label.to_string(), der_bytes));
        }
        rest = &block[end + end_marker.len()..];
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0)
    }

    fn generated(name: &str) -> (String, String) {
        let cert = rcgen::generate_simple_self_signed(vec![name.to_string()]).expect("cert");
        (cert.cert.pem(), cert.signing_key.serialize_pem())
    }

    #[test]
    fn accepts_a_matching_pair_and_hides_it_in_debug() {
        let (cert, key) = generated("a.example.com");
        let checked = check_pair(&cert, &key, now()).expect("valid pair");
        assert!(checked.pem.as_str().contains("BEGIN CERTIFICATE"));
        assert!(checked.pem.as_str().contains("PRIVATE KEY"));
        assert!(!format!("{checked:?}").contains("BEGIN"));
    }

    #[test]
    fn refuses_a_key_of_another_certificate() {
        let (cert, _) = generated("a.example.com");
        let (_, other_key) = generated("b.example.com");
        let err = check_pair(&cert, &other_key, now()).expect_err("mismatch");
        assert!(err.contains("does not belong"), "{err}");
    }

    #[test]
    fn refuses_expired_garbage_and_missing_parts() {
        let (cert, key) = generated("a.example.com");
        // Past year 4096, where rcgen's default validity ends.
        let far_future = 70_000_000_000;
        assert!(
            check_pair(&cert, &key, far_future)
                .expect_err("expired")
                .contains("expired")
        );
        assert!(check_pair("not pem", &key, now()).is_err());
        assert!(check_pair(&cert, "", now()).is_err());
        let broken = cert.replace('M', "A");
        assert!(check_pair(&broken, &key, now()).is_err());
    }
}

#[cfg(test)]
mod key_formats {
    //! RSA (PKCS#1 and PKCS#8) and EC (SEC1) keys as openssl and cert-manager write them;
    //! the fixtures are test-only certificates valid until 2125.
    use super::check_pair;

    const RSA_CERT: &str = include_str!("testdata/rsa.crt");
    const RSA_PKCS1: &str = include_str!("testdata/rsa-pkcs1.key");
    const RSA_PKCS8: &str = include_str!("testdata/rsa-pkcs8.key");
    const EC_CERT: &str = include_str!("testdata/ec.crt");
    const EC_SEC1: &str = include_str!("testdata/ec-sec1.key");
    const NOW: i64 = 1_800_000_000;

    #[test]
    fn every_key_format_matches_its_certificate() {
        for (cert, key) in [
            (RSA_CERT, RSA_PKCS1),
            (RSA_CERT, RSA_PKCS8),
            (EC_CERT, EC_SEC1),
        ] {
            check_pair(cert, key, NOW).expect("matching pair");
        }
    }

    #[test]
    fn keys_of_the_other_certificate_are_refused() {
        for (cert, key) in [
            (RSA_CERT, EC_SEC1),
            (EC_CERT, RSA_PKCS1),
            (EC_CERT, RSA_PKCS8),
        ] {
            assert!(check_pair(cert, key, NOW).is_err());
        }
    }
}
