//! Client certificates per host (`auth-tls-*`), end to end on real haproxy from both
//! sources: hosts that share one HTTPS port and one server certificate, each with its
//! own verification mode, judged by real TLS clients presenting certificates of the
//! Secret's CA, of another CA, or none. The headers the backend sees are compared byte
//! for byte with what openssl makes of the same certificate, a client's forged headers
//! never get through, a connection made for another name is refused, and a CA or CRL
//! replaced in its Secret changes who gets in.

use std::process::{Command, Stdio};
use std::time::Duration;

use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{
    mk_ca_secret, mk_ingress, mk_ingress_with_rules, mk_rule, mk_secret, mk_service_of,
    mk_tls_secret, prefix, to_json, with_annotations, with_keys, with_tls,
};
use tugboat_testkit::tls::{Authority, ClientIdentity, certificate, get_as_client};
use tugboat_testkit::{HaproxyBinary, Reply, Scene, Source, eventually, scene_tests};

scene_tests!(client_certificates_per_host);

/// `auth-tls-verify-client: on` (ingress-nginx's spellings, with the certificate passed on).
const REQUIRED: &str = "required.example.com";
/// `optional` (Tugboat's spellings).
const OPTIONAL: &str = "optional.example.com";
/// `optional_no_ca` with `auth-tls-match-cn`.
const ANY_CA: &str = "any-ca.example.com";
/// Joins `OPTIONAL`'s Ingress and settings while the controller runs.
const JOINED: &str = "joined.example.com";
/// `on` with `auth-tls-error-page`.
const PAGED: &str = "paged.example.com";
/// `auth-tls-secret` naming a Secret of another namespace.
const FOREIGN: &str = "foreign.example.com";
/// No client certificates.
const PLAIN: &str = "plain.example.com";
const ERROR_PAGE: &str = "https://help.example.com/certificates";

const NGINX: &str = "nginx.ingress.kubernetes.io/";

fn nginx(key: &str) -> String {
    format!("{NGINX}{key}")
}

/// What openssl prints for a certificate (DER): `args` of `openssl x509`.
fn openssl(der: &[u8], args: &[&str]) -> String {
    let mut child = Command::new("openssl")
        .args(["x509", "-inform", "DER"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("openssl runs");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(der).expect("DER to openssl");
    }
    let output = child.wait_with_output().expect("openssl output");
    assert!(output.status.success(), "openssl {args:?}");
    String::from_utf8(output.stdout).expect("UTF-8")
}

/// A DN as nginx's `$ssl_client_s_dn` writes it (RFC 2253), from openssl.
fn rfc2253(der: &[u8], which: &str) -> String {
    let printed = openssl(der, &["-noout", which, "-nameopt", "RFC2253"]);
    let prefix = format!("{}=", which.trim_start_matches('-'));
    printed
        .trim_end()
        .strip_prefix(&prefix)
        .expect("openssl's prefix")
        .to_string()
}

/// nginx's `$ssl_client_escaped_cert`: the PEM openssl writes, URL-encoded.
fn escaped_certificate(der: &[u8]) -> String {
    openssl(der, &["-outform", "PEM"])
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// `GET /` for `host` on a connection made for `sni`, presenting `client`.
async fn get(
    scene: &Scene,
    sni: Option<&str>,
    host: &str,
    client: Option<ClientIdentity<'_>>,
    headers: &[(&str, &str)],
) -> Reply {
    get_as_client(scene.https_addr(), sni, host, "/", headers, client)
        .await
        .unwrap_or_else(|e| panic!("GET https://{host}/ (SNI {sni:?}): {e}"))
}

/// `GET /` for `host` on a connection made for it, presenting `client`.
async fn get_host(scene: &Scene, host: &str, client: Option<ClientIdentity<'_>>) -> Reply {
    get(scene, Some(host), host, client, &[]).await
}

/// Waits until `client` gets `status` from `host`.
async fn wait_for(scene: &Scene, host: &str, client: Option<ClientIdentity<'_>>, status: u16) {
    eventually(
        &format!("{status} from {host}"),
        Duration::from_secs(15),
        || async {
            let reply = get_as_client(scene.https_addr(), Some(host), host, "/", &[], client).await;
            reply.ok().filter(|r| r.status == status).map(drop)
        },
    )
    .await;
}

/// The `ssl-client-*` header `name` the backend received.
fn seen<'a>(reply: &'a Reply, name: &str) -> Option<&'a str> {
    reply.header(&format!("x-echo-ssl-client-{name}"))
}

async fn client_certificates_per_host(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 193, 1).await;
    let ca = Authority::new("Client CA A");
    let other_ca = Authority::new("Client CA B");
    let (_, _, alice, alice_key) = ca.sign_serial("alice", 1001);
    let (_, _, carol, carol_key) = ca.sign_serial("carol", 1003);
    let (_, _, bob, bob_key) = other_ca.sign_serial("bob", 2002);
    let alice_id = Some((alice.as_slice(), alice_key.as_slice()));
    let carol_id = Some((carol.as_slice(), carol_key.as_slice()));
    let bob_id = Some((bob.as_slice(), bob_key.as_slice()));

    let hosts = [REQUIRED, OPTIONAL, ANY_CA, PAGED, FOREIGN, PLAIN];
    let (cert, key, _) = certificate(&hosts, false);
    let tls = |ingress, host: &'static str| with_tls(ingress, &[(&[host][..], "site-tls")]);
    let mut objects = mk_service_of("web", &web).to_vec();
    objects.extend([
        to_json(&mk_tls_secret("site-tls", &cert, &key)),
        to_json(&mk_ca_secret("client-ca", &ca.pem)),
        to_json(&with_annotations(
            tls(mk_ingress("required", REQUIRED, "web"), REQUIRED),
            &[
                (&nginx("auth-tls-secret"), "default/client-ca"),
                (&nginx("auth-tls-verify-client"), "on"),
                (&nginx("auth-tls-verify-depth"), "1"),
                (&nginx("auth-tls-pass-certificate-to-upstream"), "true"),
            ],
        )),
        to_json(&with_keys(
            tls(mk_ingress("optional", OPTIONAL, "web"), OPTIONAL),
            &[
                ("auth-tls-secret", "client-ca"),
                ("auth-tls-verify-client", "optional"),
            ],
        )),
        to_json(&with_annotations(
            tls(mk_ingress("any-ca", ANY_CA, "web"), ANY_CA),
            &[
                (&nginx("auth-tls-secret"), "default/client-ca"),
                (&nginx("auth-tls-verify-client"), "optional_no_ca"),
                (&nginx("auth-tls-match-cn"), "CN=(alice|bob)$"),
            ],
        )),
        to_json(&with_annotations(
            tls(mk_ingress("paged", PAGED, "web"), PAGED),
            &[
                ("haproxy-ingress.github.io/auth-tls-secret", "client-ca"),
                ("haproxy-ingress.github.io/auth-tls-error-page", ERROR_PAGE),
            ],
        )),
        to_json(&with_annotations(
            tls(mk_ingress("foreign", FOREIGN, "web"), FOREIGN),
            &[(&nginx("auth-tls-secret"), "other/client-ca")],
        )),
        to_json(&tls(mk_ingress("plain", PLAIN, "web"), PLAIN)),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    wait_for(&scene, REQUIRED, alice_id, 200).await;

    // `on`: the CA's client gets in, and the backend is told who it is, byte for byte
    // as ingress-nginx would tell it.
    let reply = get_host(&scene, REQUIRED, alice_id).await;
    assert_eq!(reply.service(), Some("web"));
    assert_eq!(seen(&reply, "verify"), Some("SUCCESS"));
    assert_eq!(
        seen(&reply, "subject-dn"),
        Some(rfc2253(&alice, "-subject").as_str())
    );
    assert_eq!(
        seen(&reply, "issuer-dn"),
        Some(rfc2253(&alice, "-issuer").as_str())
    );
    assert_eq!(seen(&reply, "subject-dn"), Some("CN=alice"));
    assert_eq!(seen(&reply, "issuer-dn"), Some("CN=Client CA A"));
    assert_eq!(
        seen(&reply, "cert"),
        Some(escaped_certificate(&alice).as_str())
    );
    // No certificate, or one of another CA: 400 with nginx's texts.
    let reply = get_host(&scene, REQUIRED, None).await;
    assert_eq!(reply.status, 400);
    assert!(
        reply.body.contains("No required SSL certificate was sent"),
        "{reply:?}"
    );
    let reply = get_host(&scene, REQUIRED, bob_id).await;
    assert_eq!(reply.status, 400);
    assert!(
        reply.body.contains("The SSL certificate error"),
        "{reply:?}"
    );
    // Forged headers never reach a backend: the real values replace them, and a host
    // without client certificates passes none.
    let forged = [
        ("ssl-client-verify", "SUCCESS"),
        ("ssl-client-subject-dn", "CN=admin"),
        ("ssl-client-issuer-dn", "CN=Client CA A"),
        ("ssl-client-cert", "forged"),
    ];
    let reply = get(&scene, Some(REQUIRED), REQUIRED, carol_id, &forged).await;
    assert_eq!(seen(&reply, "subject-dn"), Some("CN=carol"));
    assert_eq!(
        seen(&reply, "cert"),
        Some(escaped_certificate(&carol).as_str())
    );
    let reply = get(&scene, Some(REQUIRED), REQUIRED, None, &forged).await;
    assert_eq!(reply.status, 400);
    let reply = get(&scene, Some(PLAIN), PLAIN, alice_id, &forged).await;
    assert_eq!(reply.service(), Some("web"));
    for name in ["verify", "subject-dn", "issuer-dn", "cert"] {
        assert_eq!(seen(&reply, name), None, "{name}");
    }
    // Plain HTTP to a `spec.tls` host goes to HTTPS first, as in ingress-nginx.
    scene.assert_https_redirect(REQUIRED, "/").await;
    // A connection made for another name (or none) was not verified by this host's
    // CA: 421, even for a client the CA signed.
    for sni in [Some(PLAIN), Some(OPTIONAL), None] {
        let reply = get(&scene, sni, REQUIRED, alice_id, &[]).await;
        assert_eq!(reply.status, 421, "SNI {sni:?}");
    }

    // `optional`: no certificate passes and says so; a failing one is refused.
    let reply = get_host(&scene, OPTIONAL, None).await;
    assert_eq!(reply.service(), Some("web"));
    assert_eq!(seen(&reply, "verify"), Some("NONE"));
    assert_eq!(seen(&reply, "subject-dn"), None);
    let reply = get_host(&scene, OPTIONAL, alice_id).await;
    assert_eq!(seen(&reply, "verify"), Some("SUCCESS"));
    // Without `pass-certificate-to-upstream`, the certificate stays home.
    assert_eq!(seen(&reply, "cert"), None);
    assert_eq!(get_host(&scene, OPTIONAL, bob_id).await.status, 400);

    // A host that joins existing settings (a second rule of the same Ingress) is a
    // crt-list line added at runtime (`add ssl crt-list` with the options): no reload.
    let reloads = scene.reloads().await;
    let optional = mk_ingress_with_rules(
        "optional",
        vec![
            mk_rule(Some(OPTIONAL), &[prefix("/", "web")]),
            mk_rule(Some(JOINED), &[prefix("/", "web")]),
        ],
    );
    scene.apply(&with_keys(
        with_tls(optional, &[(&[OPTIONAL, JOINED][..], "site-tls")]),
        &[
            ("auth-tls-secret", "client-ca"),
            ("auth-tls-verify-client", "optional"),
        ],
    ));
    wait_for(&scene, JOINED, bob_id, 400).await;
    let reply = get_host(&scene, JOINED, alice_id).await;
    assert_eq!(seen(&reply, "verify"), Some("SUCCESS"));
    assert_eq!(
        seen(&get_host(&scene, JOINED, None).await, "verify"),
        Some("NONE")
    );
    assert_eq!(
        get(&scene, Some(OPTIONAL), JOINED, alice_id, &[])
            .await
            .status,
        421
    );
    assert_eq!(
        scene.reloads().await,
        reloads,
        "the host joined without a reload"
    );

    // `optional_no_ca`: any certificate passes with the outcome; the subject must match.
    let reply = get_host(&scene, ANY_CA, bob_id).await;
    assert_eq!(reply.service(), Some("web"));
    assert_eq!(
        seen(&reply, "verify"),
        Some("FAILED:unable to get local issuer certificate")
    );
    assert_eq!(seen(&reply, "subject-dn"), Some("CN=bob"));
    assert_eq!(get_host(&scene, ANY_CA, carol_id).await.status, 403);
    assert_eq!(get_host(&scene, ANY_CA, None).await.status, 403);

    // The error page takes the refused clients (302).
    for client in [None, bob_id] {
        let reply = get_host(&scene, PAGED, client).await;
        assert_eq!(reply.status, 302);
        assert_eq!(reply.header("location"), Some(ERROR_PAGE));
    }
    assert_eq!(get_host(&scene, PAGED, alice_id).await.status, 200);

    // A Secret of another namespace is refused: the routes fail closed.
    assert_eq!(get_host(&scene, FOREIGN, alice_id).await.status, 403);

    // The CA replaced in its Secret: the other CA's clients get in, the first's not.
    let reloads = scene.reloads().await;
    scene.apply(&mk_ca_secret("client-ca", &other_ca.pem));
    wait_for(&scene, REQUIRED, bob_id, 200).await;
    assert_eq!(get_host(&scene, REQUIRED, alice_id).await.status, 400);
    assert_eq!(get_host(&scene, OPTIONAL, bob_id).await.status, 200);
    // The new CA went to haproxy through its runtime API (`set ssl ca-file`).
    assert_eq!(
        scene.reloads().await,
        reloads,
        "the CA was replaced without a reload"
    );

    // A revocation list revokes alice, not carol.
    let crl = ca.crl(&[1001]);
    scene.apply(&mk_secret(
        "client-ca",
        "Opaque",
        &[("ca.crt", ca.pem.as_bytes()), ("ca.crl", crl.as_bytes())],
    ));
    wait_for(&scene, REQUIRED, carol_id, 200).await;
    assert_eq!(get_host(&scene, REQUIRED, alice_id).await.status, 400);
    assert_eq!(get_host(&scene, REQUIRED, bob_id).await.status, 400);
    let reply = get_host(&scene, ANY_CA, alice_id).await;
    assert_eq!(seen(&reply, "verify"), Some("FAILED:certificate revoked"));
    // A new revocation list (a new crt-list option) reloaded; a changed one goes at
    // runtime (`set ssl crl-file`): carol revoked too.
    let reloads = scene.reloads().await;
    let crl = ca.crl(&[1001, 1003]);
    scene.apply(&mk_secret(
        "client-ca",
        "Opaque",
        &[("ca.crt", ca.pem.as_bytes()), ("ca.crl", crl.as_bytes())],
    ));
    wait_for(&scene, REQUIRED, carol_id, 400).await;
    assert_eq!(
        scene.reloads().await,
        reloads,
        "the CRL was replaced without a reload"
    );

    // A CA that is not one fails closed on its hosts only, with a problem naming the
    // Secret and its field.
    scene.apply(&mk_secret(
        "client-ca",
        "Opaque",
        &[("ca.crt", b"not a certificate".as_slice())],
    ));
    wait_for(&scene, REQUIRED, carol_id, 403).await;
    assert_eq!(get_host(&scene, OPTIONAL, None).await.status, 403);
    assert_eq!(get_host(&scene, PLAIN, None).await.status, 200);
    let problem = scene
        .status()
        .problems
        .into_iter()
        .find(|p| &*p.object.name == "required" && p.field.contains("auth-tls-secret"))
        .expect("a problem about the CA");
    assert!(problem.message.contains("default/client-ca"), "{problem}");
    assert!(problem.message.contains("'ca.crt'"), "{problem}");
}
