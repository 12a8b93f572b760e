//! A banner backend, for TCP services whose server speaks first (SMTP, SSH, MySQL):
//! on each connection it sends a greeting line naming its service and the client it
//! sees, then echoes every line it receives. Started with `expect_proxy`, it first reads
//! the PROXY v1 header haproxy sends and greets the client that header names.

use std::net::SocketAddr;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A running banner backend; stops when dropped.
pub struct BannerServer {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for BannerServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The greeting a banner backend of `service` sends a client at `client` (an address,
/// without port).
pub fn greeting(service: &str, client: &str) -> String {
    format!("220 {service} ready for {client}\n")
}

impl BannerServer {
    /// Starts a banner backend for `service` on `addr`; with `expect_proxy` every
    /// connection starts with a PROXY v1 header.
    pub async fn start(
        service: &str,
        addr: SocketAddr,
        expect_proxy: bool,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        Self::serve_on(service, listener, expect_proxy)
    }

    /// Starts a banner backend for `service` on a socket already bound (in a pod's
    /// network, for one).
    pub fn start_on(
        service: &str,
        listener: std::net::TcpListener,
        expect_proxy: bool,
    ) -> std::io::Result<Self> {
        listener.set_nonblocking(true)?;
        Self::serve_on(service, TcpListener::from_std(listener)?, expect_proxy)
    }

    fn serve_on(service: &str, listener: TcpListener, expect_proxy: bool) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let service = service.to_string();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, peer)) = listener.accept().await else {
                    continue;
                };
                let service = service.clone();
                tokio::spawn(async move {
                    // A connection the client drops is no concern of the server.
                    let _ = serve(stream, peer, &service, expect_proxy).await;
                });
            }
        });
        Ok(Self { addr, task })
    }
}

/// One connection: the PROXY header if expected, the greeting, then echoed lines.
async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    service: &str,
    expect_proxy: bool,
) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let client = if expect_proxy {
        // `PROXY TCP4 <source> <destination> <source port> <destination port>`.
        let header = lines.next_line().await?.unwrap_or_default();
        let mut words = header.split(' ');
        match (words.next(), words.next(), words.next()) {
            (Some("PROXY"), Some(_), Some(source)) => source.to_string(),
            _ => format!("no-proxy-header({header})"),
        }
    } else {
        peer.ip().to_string()
    };
    write
        .write_all(greeting(service, &client).as_bytes())
        .await?;
    while let Some(line) = lines.next_line().await? {
        write.write_all(format!("{line}\n").as_bytes()).await?;
    }
    Ok(())
}

/// Banner backends for one Service: `count` servers on consecutive loopback addresses
/// from 127.0.`net`.1, all on the same free port.
pub async fn start_banners(
    service: &str,
    net: u8,
    count: u8,
    expect_proxy: bool,
) -> Vec<BannerServer> {
    for _attempt in 0..20 {
        let port = crate::free_port();
        let mut servers = Vec::new();
        for host in 1..=count {
            let addr = SocketAddr::from(([127, 0, net, host], port));
            match BannerServer::start(service, addr, expect_proxy).await {
                Ok(server) => servers.push(server),
                Err(_) => break,
            }
        }
        if servers.len() == usize::from(count) {
            return servers;
        }
    }
    panic!("cannot start {count} banner backends for {service} on 127.0.{net}.x");
}
