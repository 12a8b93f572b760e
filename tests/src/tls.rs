//! A TLS client for tests: connects with a chosen SNI and ALPN, and reports which
//! certificate haproxy presented, which protocol it picked, and (over HTTP/1.1) the
//! answer. It accepts any certificate on purpose: what it checks is *which* one. Also
//! the certificates tests need: self-signed ones, and a certificate authority that signs
//! server and client certificates (for backends that speak TLS).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::Reply;

/// What one TLS exchange showed.
#[derive(Debug)]
pub struct TlsExchange {
    /// The leaf certificate haproxy presented (DER).
    pub certificate: Vec<u8>,
    /// The protocol ALPN settled on.
    pub alpn: Option<Vec<u8>>,
    /// The answer to `GET path`, when the protocol is HTTP/1.1.
    pub reply: Option<Reply>,
}

#[derive(Debug)]
struct AcceptAny;

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A TLS connection to `addr` with SNI `sni` offering `alpn`, accepting any
/// certificate (the caller checks which one it got).
pub async fn connect(
    addr: SocketAddr,
    sni: &str,
    alpn: &[&[u8]],
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    connect_over(TcpStream::connect(addr).await?, sni, alpn).await
}

/// [`connect`] over a TCP connection made elsewhere (e.g. into a pod's network).
pub async fn connect_over(
    tcp: TcpStream,
    sni: &str,
    alpn: &[&[u8]],
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(std::io::Error::other)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAny))
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let connector = TlsConnector::from(Arc::new(config));
    let name = ServerName::try_from(sni.to_string()).map_err(std::io::Error::other)?;
    connector.connect(name, tcp).await
}

/// Connects to `addr` with SNI `sni` offering `alpn`, and when HTTP/1.1 is agreed sends
/// `GET path` with `Host: sni`.
pub async fn exchange(
    addr: SocketAddr,
    sni: &str,
    path: &str,
    alpn: &[&[u8]],
) -> std::io::Result<TlsExchange> {
    let tcp = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no connection in 5 s"))??;
    exchange_over(tcp, sni, path, alpn).await
}

/// [`exchange`] over a TCP connection made elsewhere (e.g. into a pod's network).
pub async fn exchange_over(
    tcp: TcpStream,
    sni: &str,
    path: &str,
    alpn: &[&[u8]],
) -> std::io::Result<TlsExchange> {
    let work = async {
        let mut tls = connect_over(tcp, sni, alpn).await?;
        let (_, session) = tls.get_ref();
        let certificate = session
            .peer_certificates()
            .and_then(|chain| chain.first())
            .map(|c| c.to_vec())
            .unwrap_or_default();
        let alpn = session.alpn_protocol().map(<[u8]>::to_vec);
        let reply = if alpn.as_deref() == Some(b"h2") {
            None
        } else {
            let request =
                format!("GET {path} HTTP/1.1\r\nHost: {sni}\r\nConnection: close\r\n\r\n");
            tls.write_all(request.as_bytes()).await?;
            let mut raw = Vec::new();
            // haproxy may close without close_notify: what was read still counts.
            let _ = tls.read_to_end(&mut raw).await;
            Some(crate::http::parse(&raw)?)
        };
        Ok::<_, std::io::Error>(TlsExchange {
            certificate,
            alpn,
            reply,
        })
    };
    tokio::time::timeout(Duration::from_secs(5), work)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in 5 s"))?
}

/// A self-signed certificate for `hosts`: (certificate PEM, key PEM, certificate DER).
/// With `expired`, it was valid in 2020 only.
pub fn certificate(hosts: &[&str], expired: bool) -> (String, String, Vec<u8>) {
    let mut params =
        rcgen::CertificateParams::new(hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>())
            .expect("certificate parameters");
    if expired {
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2020, 12, 31);
    }
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = params.self_signed(&key).expect("certificate");
    (cert.pem(), key.serialize_pem(), cert.der().to_vec())
}

/// A TLS Secret manifest (YAML of [`crate::objects::mk_tls_secret`]).
pub fn tls_secret(name: &str, cert_pem: &str, key_pem: &str) -> String {
    crate::objects::to_yaml(&[crate::objects::mk_tls_secret(name, cert_pem, key_pem)])
}

/// The DER of the default certificate Tugboat generated in haproxy's `lib_dir` (served
/// for an SNI with no usable certificate).
pub fn fallback_certificate_der(lib_dir: &std::path::Path) -> Vec<u8> {
    let text = std::fs::read_to_string(lib_dir.join(".tugboat-fallback.pem"))
        .expect("fallback certificate");
    let begin = "-----BEGIN CERTIFICATE-----";
    let end_marker = "-----END CERTIFICATE-----";
    let start = text.find(begin).expect("certificate");
    let end = text.find(end_marker).expect("certificate end") + end_marker.len();
    der::pem::decode_vec(&text.as_bytes()[start..end])
        .expect("PEM")
        .1
}

/// A certificate authority that signs server and client certificates.
pub struct Authority {
    /// The authority's own certificate (PEM), what a `ca.crt` holds.
    pub pem: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl Authority {
    pub fn new(name: &str) -> Self {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let cert = params.self_signed(&key).expect("CA certificate");
        Self {
            pem: cert.pem(),
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// (certificate PEM, key PEM, certificate DER, key DER) for `cn`, valid for `cn` and
    /// 127.0.0.1.
    pub fn sign(&self, cn: &str) -> (String, String, Vec<u8>, Vec<u8>) {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params =
            rcgen::CertificateParams::new(vec![cn.to_string(), "127.0.0.1".to_string()])
                .expect("params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        let cert = params.signed_by(&key, &self.issuer).expect("certificate");
        (
            cert.pem(),
            key.serialize_pem(),
            cert.der().to_vec(),
            key.serialize_der(),
        )
    }

    /// The authority's own certificate (DER).
    pub fn der(&self) -> Vec<u8> {
        let (_, der) = der::pem::decode_vec(self.pem.as_bytes()).expect("CA PEM");
        der
    }
}

/// A backend that terminates TLS itself with a certificate of its own (for TLS
/// passthrough): it reads the ClientHello first and answers an HTTP/1.1 request with
/// `service=NAME endpoint=ADDR sni=SNI alpn=OFFERED tls=backend`, where `sni` is the
/// name the client asked for (`-` without) and `alpn` the protocols it offered, joined
/// by `,` (`-` without). Stops when dropped.
pub struct TlsEchoServer {
    pub addr: SocketAddr,
    /// The certificate it presents (DER).
    pub certificate: Vec<u8>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TlsEchoServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TlsEchoServer {
    /// Starts one for `service` on `addr` (port 0 picks a free port), with a self-signed
    /// certificate for `hosts`.
    pub async fn start(service: &str, hosts: &[&str], addr: SocketAddr) -> std::io::Result<Self> {
        let (config, certificate) = Self::config(hosts)?;
        let listener = tokio::net::TcpListener::bind(addr).await?;
        Self::serve(service, config, certificate, listener)
    }

    /// The server's TLS configuration with a new self-signed certificate for `hosts`,
    /// and that certificate (DER).
    fn config(hosts: &[&str]) -> std::io::Result<(Arc<rustls::ServerConfig>, Vec<u8>)> {
        use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
        let key = rcgen::KeyPair::generate().map_err(std::io::Error::other)?;
        let params =
            rcgen::CertificateParams::new(hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>())
                .map_err(std::io::Error::other)?;
        let cert = params.self_signed(&key).map_err(std::io::Error::other)?;
        let certificate = cert.der().to_vec();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(std::io::Error::other)?
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(certificate.clone())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .map_err(std::io::Error::other)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok((Arc::new(config), certificate))
    }

    /// Starts one for `service` on a listener bound elsewhere (e.g. in a pod's
    /// network namespace), with a self-signed certificate for `hosts`.
    pub fn start_on(
        service: &str,
        hosts: &[&str],
        listener: std::net::TcpListener,
    ) -> std::io::Result<Self> {
        let (config, certificate) = Self::config(hosts)?;
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        Self::serve(service, config, certificate, listener)
    }

    fn serve(
        service: &str,
        config: Arc<rustls::ServerConfig>,
        certificate: Vec<u8>,
        listener: tokio::net::TcpListener,
    ) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let service = service.to_string();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (config, service) = (config.clone(), service.clone());
                tokio::spawn(async move {
                    let work = tls_echo_one(stream, config, &service, addr);
                    let _ = tokio::time::timeout(Duration::from_secs(10), work).await;
                });
            }
        });
        Ok(Self {
            addr,
            certificate,
            task,
        })
    }
}

/// One connection of a [`TlsEchoServer`].
async fn tls_echo_one(
    stream: TcpStream,
    config: Arc<rustls::ServerConfig>,
    service: &str,
    endpoint: SocketAddr,
) -> std::io::Result<()> {
    let acceptor =
        tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), stream);
    let start = acceptor.await?;
    let hello = start.client_hello();
    let sni = hello.server_name().unwrap_or("-").to_string();
    let alpn = hello
        .alpn()
        .map(|offered| {
            offered
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_else(|| "-".to_string());
    let mut tls = start.into_stream(config).await?;
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
        match tls.read(&mut buf).await? {
            0 => return Ok(()),
            n => head.extend_from_slice(&buf[..n]),
        }
    }
    let body = format!("service={service} endpoint={endpoint} sni={sni} alpn={alpn} tls=backend\n");
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(response.as_bytes()).await?;
    tls.shutdown().await
}
