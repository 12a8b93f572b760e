//! `tugboat-echo SERVICE ADDR [ADDR...]`: echo backends for the quickstart, one per
//! address, each answering with the service name and the endpoint that answered.

use std::net::SocketAddr;

use anyhow::Context;
use tugboat_testkit::EchoServer;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: tugboat-echo SERVICE ADDR [ADDR...]";
    let service = args.next().context(usage)?;
    let mut servers = Vec::new();
    for addr in args {
        let addr: SocketAddr = addr
            .parse()
            .with_context(|| format!("bad address {addr}"))?;
        let server = EchoServer::start(&service, addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        println!("echo backend of service {service} on {}", server.addr);
        servers.push(server);
    }
    anyhow::ensure!(!servers.is_empty(), usage);
    tokio::signal::ctrl_c().await?;
    Ok(())
}
