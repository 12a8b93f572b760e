//! A minimal HTTP/1.1 client for tests: one request per connection, any Host header,
//! the status and body back. It speaks to haproxy on loopback only.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Status, headers and body of one answer.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    /// The service an echo backend named in its body, if an echo backend answered.
    pub fn service(&self) -> Option<&str> {
        self.field("service")
    }

    /// The path an echo backend received.
    pub fn path(&self) -> Option<&str> {
        self.field("path")
    }

    /// The query string an echo backend received (empty without one).
    pub fn query(&self) -> Option<&str> {
        self.field("query")
    }

    /// The endpoint (address:port) of the echo backend that answered.
    pub fn endpoint(&self) -> Option<&str> {
        self.field("endpoint")
    }

    fn field(&self, name: &str) -> Option<&str> {
        self.body
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One answer read from `stream` (framed by its `Content-Length`), within 5 s; `None`
/// when the connection closes or stalls first. For keep-alive connections, plain or TLS.
pub async fn read_answer<S>(stream: &mut S) -> Option<Reply>
where
    S: tokio::io::AsyncRead + Unpin,
{
    let read = async {
        let mut raw = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = parse(&raw[..end + 4]).ok()?;
                let length: usize = head.header("content-length")?.parse().ok()?;
                if raw.len() >= end + 4 + length {
                    return parse(&raw[..end + 4 + length]).ok();
                }
            }
            let read = stream.read(&mut chunk).await.ok()?;
            if read == 0 {
                return None;
            }
            raw.extend_from_slice(&chunk[..read]);
        }
    };
    tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .ok()
        .flatten()
}

/// `GET path` with `Host: host` to `addr`, on a new connection, within 5 s.
pub async fn get(addr: SocketAddr, host: &str, path: &str) -> std::io::Result<Reply> {
    request(addr, "GET", host, path, &[]).await
}

/// `method path` with `Host: host` and more `headers` to `addr`, on a new connection,
/// within 5 s.
pub async fn request(
    addr: SocketAddr,
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<Reply> {
    request_with_body(addr, method, host, path, headers, None).await
}

/// [`request`] with a body sent with its `Content-Length` (`None`: no body).
pub async fn request_with_body(
    addr: SocketAddr,
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> std::io::Result<Reply> {
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        request.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    request.push_str("\r\n");
    let mut request = request.into_bytes();
    request.extend_from_slice(body.unwrap_or_default());
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await?;
        stream.write_all(&request).await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        Ok::<_, std::io::Error>(raw)
    };
    let raw = tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in 5 s"))??;
    parse(&raw)
}

/// Parses a raw HTTP/1.1 answer.
pub fn parse(raw: &[u8]) -> std::io::Result<Reply> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| bad("no header end"))?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no status line"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    Ok(Reply {
        status,
        headers,
        body,
    })
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}
