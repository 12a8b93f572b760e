//! Client certificates (`auth-tls-secret`): the crt-list options of the hosts that ask
//! for one, and the rules that judge what the handshake found, per route.
//!
//! The handshake never fails on a client certificate: a host's crt-list entry verifies
//! with `verify optional` against its CA, and the HTTPS bind ignores verification errors
//! (`ca-ignore-err all crt-ignore-err all`, bind-only keywords), so that the HTTP layer
//! can answer as ingress-nginx does (400, or a redirect to the error page) and tell the
//! backend the outcome. A request for such a host on a connection whose SNI is another
//! name (or none) was verified against another host's CA, or none: 421.
//!
//! The headers a backend sees (`ssl-client-verify`, `ssl-client-subject-dn`,
//! `ssl-client-issuer-dn`, `ssl-client-cert`) are ingress-nginx's; a client's own are
//! removed on every route.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use tugboat_model::Desired;
use tugboat_model::features::{ClientCa, FeatureSetId, RouteFeatures, VerifyClient};

use crate::rules::{group, group_of, sets_acl};
use crate::settings::RenderSettings;

/// The headers ingress-nginx sends a backend about the client's certificate.
pub const HEADERS: [&str; 4] = [
    "ssl-client-cert",
    "ssl-client-verify",
    "ssl-client-subject-dn",
    "ssl-client-issuer-dn",
];

/// OpenSSL's verification error texts by code, as nginx writes them after `FAILED:`.
pub const VERIFY_ERRORS: &str = include_str!("x509-verify-errors.map");

/// The options of a host's crt-list entry that verify client certificates with `ca`.
pub fn crt_list_options(ca: &ClientCa, settings: &RenderSettings) -> String {
    let mut options = format!(
        "ca-file {} verify optional",
        settings.client_ca_file(&ca.ca_file).display()
    );
    if let Some(crl) = &ca.crl_file {
        let _ = write!(
            options,
            " crl-file {}",
            settings.client_ca_file(crl).display()
        );
    }
    options
}

/// The words the HTTPS bind gets when a host asks for client certificates: verification
/// errors are judged by the rules, not by the handshake.
pub fn bind_options(desired: &Desired) -> &'static str {
    if desired.client_ca_hosts.is_empty() {
        ""
    } else {
        " ca-ignore-err all crt-ignore-err all"
    }
}

/// Whether the verification error texts are needed.
pub fn needed(desired: &Desired) -> bool {
    desired
        .feature_sets
        .values()
        .any(|f| f.client_certificates.is_some())
}

/// The PEM of the client's certificate as nginx's `$ssl_client_escaped_cert`, but for
/// its first and last lines: the base64 DER in lines of 64 characters, URL-encoded
/// (`+`, `/`, `=` and the line breaks), in a variable.
const ESCAPED_CERTIFICATE: &str = "'ssl_c_der,base64,regsub(\"(.{64})\",\"\\1_\",g),regsub(\"_$\",\"\"),regsub(\"\\+\",\"%2B\",g),regsub(\"/\",\"%2F\",g),regsub(\"=\",\"%3D\",g),regsub(\"_\",\"%0A\",g)'";

/// The subject and issuer DN in RFC 2253 form, as nginx writes them.
const SUBJECT_DN: &str = "ssl_c_s_dn(,0,rfc2253)";
const ISSUER_DN: &str = "ssl_c_i_dn(,0,rfc2253)";

/// The rules: the client's own `ssl-client-*` headers go on every route; on the routes
/// with client certificates, the connection must be made for the request's host, the
/// outcome of the verification is worked out and judged, and the backend is told.
pub fn request_rules(desired: &Desired, settings: &RenderSettings, out: &mut String) {
    for header in HEADERS {
        let _ = writeln!(out, "    http-request del-header {header}");
    }
    let sets = &desired.feature_sets;
    let groups = group(sets, |f| f.client_certificates.as_ref().map(|c| c.verify));
    if groups.is_empty() {
        return;
    }
    let mut all: Vec<_> = groups.values().flatten().copied().collect();
    all.sort();
    let acl = sets_acl(&all);
    let errors = settings.verify_errors_map();
    let _ = write!(
        out,
        "    http-request return status 421 content-type text/plain string \"Misdirected Request: this host asks for a client certificate; connect with its name (SNI)\\n\" if {acl} {{ ssl_fc }} !{{ ssl_fc_sni,lower,strcmp(txn.host) eq 0 }}
    http-request set-var(txn.tugboat_cc_verify) str(NONE) if {acl} !{{ ssl_c_used }}
    http-request set-var(txn.tugboat_cc_verify) str(SUCCESS) if {acl} {{ ssl_c_used }} {{ ssl_c_verify 0 }} {{ ssl_c_err 0 }} {{ ssl_c_ca_err 0 }}
    http-request set-var(txn.tugboat_cc_error) ssl_c_verify if {acl} !{{ var(txn.tugboat_cc_verify) -m found }}
    http-request set-var(txn.tugboat_cc_error) ssl_c_err if {acl} !{{ var(txn.tugboat_cc_verify) -m found }} !{{ ssl_c_err 0 }}
    http-request set-var(txn.tugboat_cc_error) ssl_c_ca_err if {acl} !{{ var(txn.tugboat_cc_verify) -m found }} !{{ ssl_c_ca_err 0 }}
    http-request set-var-fmt(txn.tugboat_cc_verify) \"FAILED:%[var(txn.tugboat_cc_error),map_int({errors})]\" if {acl} !{{ var(txn.tugboat_cc_verify) -m found }}
",
        errors = errors.display()
    );
    // Refused: no certificate (`on`), or one that fails (`on`, `optional`); to the error
    // page when there is one, else 400 with nginx's texts.
    let refusing: Vec<_> = groups
        .iter()
        .filter(|(verify, _)| matches!(verify, VerifyClient::On | VerifyClient::Optional))
        .flat_map(|(_, ids)| ids.iter().copied())
        .collect();
    let requiring: Vec<_> = groups
        .get(&VerifyClient::On)
        .into_iter()
        .flatten()
        .copied()
        .collect();
    for (page, ids) in error_pages(sets, &requiring) {
        let condition = format!(
            "{} {{ var(txn.tugboat_cc_verify) -m str NONE }}",
            sets_acl(&ids)
        );
        refuse(
            out,
            page,
            &condition,
            "No required SSL certificate was sent",
        );
    }
    for (page, ids) in error_pages(sets, &refusing) {
        let condition = format!(
            "{} {{ var(txn.tugboat_cc_verify) -m beg FAILED: }}",
            sets_acl(&ids)
        );
        refuse(out, page, &condition, "The SSL certificate error");
    }
    for (pattern, ids) in group(sets, |f| {
        f.client_certificates
            .as_ref()
            .and_then(|c| c.match_subject.as_deref())
    }) {
        let _ = writeln!(
            out,
            "    http-request return status 403 content-type text/plain string \"client certificate unauthorized\\n\" if {} !{{ {SUBJECT_DN} -m reg '{pattern}' }}",
            sets_acl(&ids)
        );
    }
    let _ = write!(
        out,
        "    http-request set-header ssl-client-verify %[var(txn.tugboat_cc_verify)] if {acl}
    http-request set-header ssl-client-subject-dn %[{SUBJECT_DN}] if {acl} {{ ssl_c_used }}
    http-request set-header ssl-client-issuer-dn %[{ISSUER_DN}] if {acl} {{ ssl_c_used }}
"
    );
    let passing = group(sets, |f| {
        f.client_certificates
            .as_ref()
            .and_then(|c| c.pass_certificate.then_some(()))
    });
    if let Some(ids) = passing.get(&()) {
        let pass = sets_acl(ids);
        let _ = write!(
            out,
            "    http-request set-var(txn.tugboat_cc_cert) {ESCAPED_CERTIFICATE} if {pass} {{ ssl_c_used }}
    http-request set-header ssl-client-cert -----BEGIN%%20CERTIFICATE-----%%0A%[var(txn.tugboat_cc_cert)]%%0A-----END%%20CERTIFICATE-----%%0A if {pass} {{ ssl_c_used }}
"
        );
    }
}

/// The sets of `ids` by their error page (`None`: none).
fn error_pages<'a>(
    sets: &'a BTreeMap<FeatureSetId, RouteFeatures>,
    ids: &[&'a FeatureSetId],
) -> BTreeMap<Option<&'a str>, Vec<&'a FeatureSetId>> {
    group_of(sets, ids, |f| {
        f.client_certificates
            .as_ref()
            .map(|c| c.error_page.as_deref())
    })
}

/// A refusal under `condition`: a redirect to `page`, else 400 with `text`.
fn refuse(out: &mut String, page: Option<&str>, condition: &str, text: &str) {
    let _ = match page {
        Some(url) => writeln!(
            out,
            "    http-request redirect location {url} code 302 if {condition}"
        ),
        None => writeln!(
            out,
            "    http-request return status 400 content-type text/plain string \"{text}\\n\" if {condition}"
        ),
    };
}
