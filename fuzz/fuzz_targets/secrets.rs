//! Secrets' text: the input's first line says which (`tls`, `ca`, `crl`, `htpasswd`,
//! `users`), the rest is the content. `tls`: a certificate and a key (split at a line
//! `%%`, else the same text for both), through the TLS pair's checks, then served in a
//! `spec.tls`; `ca`: a CA bundle, through its checks, then used by `auth-tls-secret`;
//! `crl`: a revocation list; `htpasswd`: an `auth` key; `users`: `user:hash` lines as one
//! key per user; both then used by basic authentication. Nothing panics, what the
//! checks accept parses, accepted users and hashes are single words that haproxy reads
//! as such, and the rendered files pass every check of `tugboat_fuzz`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tugboat_fuzz::{NOW, Scene, check_rendered, document};
use tugboat_model::auth::users_from_secret;
use tugboat_model::tls::{check_ca_bundle, check_crl, check_pair, parse_pair};
use tugboat_test_objects::{mk_ca_secret, mk_secret, mk_tls_secret};

fuzz_target!(|text: &str| {
    let (kind, content) = text.split_once('\n').unwrap_or((text, ""));
    let mut scene = Scene::default();
    match kind {
        "tls" => {
            let (cert, key) = content.split_once("\n%%\n").unwrap_or((content, content));
            if check_pair(cert, key, NOW).is_ok() {
                assert!(
                    parse_pair(cert, key).is_ok(),
                    "a checked pair does not parse"
                );
            }
            scene.tls = Some("site".into());
            scene
                .extra
                .push(document(&mk_tls_secret("site", cert, key)));
        }
        "ca" => {
            if let Ok(pem) = check_ca_bundle(content) {
                assert!(pem.as_str().contains("-----BEGIN CERTIFICATE-----"));
            }
            scene.ingress.push(("auth-tls-secret".into(), "ca".into()));
            scene.tls = Some("site".into());
            scene.extra.push(document(&mk_ca_secret("ca", content)));
        }
        "crl" => {
            let _ = check_crl(content);
            return;
        }
        "htpasswd" | "users" => {
            let secret = if kind == "htpasswd" {
                mk_secret("users", "Opaque", &[("auth", content.as_bytes())])
            } else {
                let pairs: Vec<(&str, &[u8])> = content
                    .lines()
                    .filter_map(|line| line.split_once(':'))
                    .map(|(user, hash)| (user, hash.as_bytes()))
                    .collect();
                mk_secret("users", "Opaque", &pairs)
            };
            if let Ok(users) = users_from_secret(&secret) {
                for (user, hash) in &users {
                    for word in [user, hash] {
                        assert!(
                            !word.is_empty()
                                && !word.contains(|c: char| {
                                    c.is_whitespace() || c.is_control() || "'\"\\#".contains(c)
                                }),
                            "an accepted user or hash is not one word: {word:?}"
                        );
                    }
                }
            }
            scene.ingress.push(("auth-type".into(), "basic".into()));
            scene.ingress.push(("auth-secret".into(), "users".into()));
            scene.extra.push(document(&secret));
        }
        _ => return,
    }
    check_rendered(&scene.render());
});
