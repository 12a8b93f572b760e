//! `proxy-body-size` however the body is framed: with `Content-Length`, with
//! `Transfer-Encoding: chunked` and over HTTP/2 without `Content-Length` (prior
//! knowledge on the clear-text port), for a small limit (1k, within haproxy's buffer)
//! and a large one (1m, far past it). A body over the limit is refused (413) and never
//! reaches the service whole; a body within it reaches the service unchanged (its
//! length and digest, as the echo backend saw them).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Mutex, Notify};
use tugboat_testkit::echo::body_digest;
use tugboat_testkit::http::request_with_body;
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{mk_annotated_ingress, mk_service_of, to_json};
use tugboat_testkit::{HaproxyBinary, Reply, Scene, Source, scene_tests};

scene_tests!(body_limits_hold_whatever_the_framing);

const HOST: &str = "bodies.example.com";
const SMALL: usize = 1024;
const LARGE: usize = 1 << 20;

/// A body of `size` bytes that is not the same byte over and over.
fn body_of(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i % 251) as u8).collect()
}

/// What a request got: the status and the echo backend's account of the body.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    status: u16,
    body_length: Option<usize>,
    body_digest: Option<String>,
}

impl Outcome {
    fn of(reply: &Reply) -> Self {
        Self {
            status: reply.status,
            body_length: reply
                .header("x-echo-body-length")
                .and_then(|v| v.parse().ok()),
            body_digest: reply.header("x-echo-body-digest").map(str::to_string),
        }
    }

    /// The backend's answer to `body`, received whole.
    fn passed(body: &[u8]) -> Self {
        Self {
            status: 200,
            body_length: Some(body.len()),
            body_digest: Some(body_digest(body)),
        }
    }
}

/// `POST path` with `body` in chunks of 4 KiB (`Transfer-Encoding: chunked`), written
/// while the answer is read, as a client that streams an upload does.
async fn post_chunked(addr: SocketAddr, path: &str, body: &[u8]) -> std::io::Result<Reply> {
    let stream = TcpStream::connect(addr).await?;
    let (mut read, mut write) = stream.into_split();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {HOST}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
    let body = body.to_vec();
    let writer = tokio::spawn(async move {
        write.write_all(head.as_bytes()).await?;
        for chunk in body.chunks(4096) {
            write
                .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                .await?;
            write.write_all(chunk).await?;
            write.write_all(b"\r\n").await?;
        }
        write.write_all(b"0\r\n\r\n").await?;
        Ok::<_, std::io::Error>(write)
    });
    let mut raw = Vec::new();
    // Until the answer is whole (haproxy may keep the connection open to drain the
    // rest of a refused upload) or the connection ends.
    let read_all = async {
        let mut chunk = [0u8; 8192];
        while !answer_is_whole(&raw) {
            match read.read(&mut chunk).await {
                Ok(0) => break,
                Ok(n) => raw.extend_from_slice(&chunk[..n]),
                // A reset after the answer: keep what came.
                Err(error) if raw.is_empty() => return Err(error),
                Err(_) => break,
            }
        }
        Ok(())
    };
    tokio::time::timeout(Duration::from_secs(10), read_all)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in 10 s"))??;
    // The upload may have been cut short by the answer: that is not a failure.
    writer.abort();
    tugboat_testkit::http::parse(&raw)
}

/// Whether `raw` holds an answer's head and the body its `Content-Length` announces.
fn answer_is_whole(raw: &[u8]) -> bool {
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let Ok(head) = tugboat_testkit::http::parse(&raw[..end + 4]) else {
        return false;
    };
    head.header("content-length")
        .and_then(|length| length.parse::<usize>().ok())
        .is_some_and(|length| raw.len() >= end + 4 + length)
}

// ---- A minimal HTTP/2 client (prior knowledge, one stream, no Huffman) ----

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const ACK: u8 = 0x1;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let length = payload.len() as u32;
    let mut out = vec![
        (length >> 16) as u8,
        (length >> 8) as u8,
        length as u8,
        kind,
        flags,
    ];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// A header as an HPACK literal without indexing, with a literal name.
fn literal(out: &mut Vec<u8>, name: &str, value: &str) {
    out.push(0);
    out.push(name.len() as u8);
    out.extend_from_slice(name.as_bytes());
    out.push(value.len() as u8);
    out.extend_from_slice(value.as_bytes());
}

/// An HPACK integer with an `prefix`-bit prefix at `input[*at]`.
fn hpack_int(input: &[u8], at: &mut usize, prefix: u32) -> Option<usize> {
    let max = (1usize << prefix) - 1;
    let mut value = usize::from(*input.get(*at)?) & max;
    *at += 1;
    if value < max {
        return Some(value);
    }
    let mut shift = 0;
    loop {
        let byte = *input.get(*at)?;
        *at += 1;
        value += usize::from(byte & 0x7f) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
}

/// An HPACK string (plain only: haproxy does not Huffman-encode).
fn hpack_str(input: &[u8], at: &mut usize) -> Option<String> {
    let huffman = input.get(*at)? & 0x80 != 0;
    let length = hpack_int(input, at, 7)?;
    let raw = input.get(*at..*at + length)?;
    *at += length;
    (!huffman).then(|| String::from_utf8_lossy(raw).into_owned())
}

/// The static table's `:status` entries (indices 8 to 14).
const STATUSES: [u16; 7] = [200, 204, 206, 304, 400, 404, 500];

/// The status and headers of an HPACK block (static table only).
fn decode_headers(block: &[u8]) -> Option<(u16, Vec<(String, String)>)> {
    let (mut at, mut status, mut headers) = (0, 0, Vec::new());
    while at < block.len() {
        let byte = block[at];
        let index = if byte & 0x80 != 0 {
            let index = hpack_int(block, &mut at, 7)?;
            if (8..=14).contains(&index) {
                status = STATUSES[index - 8];
            }
            continue;
        } else if byte & 0xe0 == 0x20 {
            // A dynamic table size update.
            hpack_int(block, &mut at, 5)?;
            continue;
        } else if byte & 0xc0 == 0x40 {
            hpack_int(block, &mut at, 6)?
        } else {
            hpack_int(block, &mut at, 4)?
        };
        let name = match index {
            0 => hpack_str(block, &mut at)?,
            8..=14 => ":status".to_string(),
            _ => String::new(),
        };
        let value = hpack_str(block, &mut at)?;
        if name == ":status" {
            status = value.parse().ok()?;
        } else {
            headers.push((name, value));
        }
    }
    Some((status, headers))
}

/// Flow control windows (the connection's and the stream's) and how the exchange ends.
struct H2State {
    window: i64,
    stream_window: i64,
    answer: Option<Result<Reply, String>>,
}

/// `POST path` with `body` over HTTP/2 with prior knowledge and no `Content-Length`,
/// the body written while the answer is read. `Err` names how the stream ended when
/// no answer came (a reset stream).
async fn post_h2(addr: SocketAddr, path: &str, body: &[u8]) -> Result<Reply, String> {
    let stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let (mut read, write) = stream.into_split();
    let write = Arc::new(Mutex::new(write));
    let state = Arc::new(std::sync::Mutex::new(H2State {
        window: 65_535,
        stream_window: 65_535,
        answer: None,
    }));
    let wake = Arc::new(Notify::new());
    let mut block = Vec::new();
    for (name, value) in [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", HOST),
    ] {
        literal(&mut block, name, value);
    }
    let mut start = H2_PREFACE.to_vec();
    start.extend(frame(SETTINGS, 0, 0, &[]));
    start.extend(frame(HEADERS, END_HEADERS, 1, &block));
    write
        .lock()
        .await
        .write_all(&start)
        .await
        .map_err(|e| e.to_string())?;

    let writer = {
        let (write, state, wake, body) =
            (write.clone(), state.clone(), wake.clone(), body.to_vec());
        tokio::spawn(async move {
            let mut sent = 0;
            while sent < body.len() {
                let allowed = {
                    let state = state.lock().expect("state");
                    if state.answer.is_some() {
                        return;
                    }
                    state.window.min(state.stream_window).min(16_384)
                };
                if allowed <= 0 {
                    wake.notified().await;
                    continue;
                }
                let size = (allowed as usize).min(body.len() - sent);
                {
                    let mut state = state.lock().expect("state");
                    state.window -= size as i64;
                    state.stream_window -= size as i64;
                }
                let last = sent + size == body.len();
                let data = frame(
                    DATA,
                    if last { END_STREAM } else { 0 },
                    1,
                    &body[sent..sent + size],
                );
                if write.lock().await.write_all(&data).await.is_err() {
                    return;
                }
                sent += size;
            }
        })
    };

    let reader = async {
        let mut answer: Option<Reply> = None;
        loop {
            let mut head = [0u8; 9];
            if read.read_exact(&mut head).await.is_err() {
                return answer.ok_or_else(|| "connection closed".to_string());
            }
            let length =
                (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
            let (kind, flags) = (head[3], head[4]);
            let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
            let mut payload = vec![0u8; length];
            if read.read_exact(&mut payload).await.is_err() {
                return answer.ok_or_else(|| "connection closed".to_string());
            }
            match kind {
                SETTINGS if flags & ACK == 0 => {
                    for setting in payload.chunks(6) {
                        if setting.len() == 6 && u16::from_be_bytes([setting[0], setting[1]]) == 4 {
                            let size = u32::from_be_bytes([
                                setting[2], setting[3], setting[4], setting[5],
                            ]);
                            let mut state = state.lock().expect("state");
                            state.stream_window += i64::from(size) - 65_535;
                        }
                    }
                    let _ = write
                        .lock()
                        .await
                        .write_all(&frame(SETTINGS, ACK, 0, &[]))
                        .await;
                    wake.notify_one();
                }
                PING if flags & ACK == 0 => {
                    let _ = write
                        .lock()
                        .await
                        .write_all(&frame(PING, ACK, 0, &payload))
                        .await;
                }
                WINDOW_UPDATE if payload.len() == 4 => {
                    let increment = i64::from(
                        u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])
                            & 0x7fff_ffff,
                    );
                    let mut state = state.lock().expect("state");
                    if id == 0 {
                        state.window += increment;
                    } else {
                        state.stream_window += increment;
                    }
                    wake.notify_one();
                }
                HEADERS if id == 1 => {
                    let (status, headers) =
                        decode_headers(&payload).ok_or("an HPACK block this client cannot read")?;
                    answer = Some(Reply {
                        status,
                        headers,
                        body: String::new(),
                    });
                    if flags & END_STREAM != 0 {
                        return answer.ok_or_else(|| "no answer".to_string());
                    }
                }
                DATA if id == 1 => {
                    if let Some(reply) = answer.as_mut() {
                        reply.body.push_str(&String::from_utf8_lossy(&payload));
                    }
                    if flags & END_STREAM != 0 {
                        return answer.ok_or_else(|| "data without headers".to_string());
                    }
                }
                RST_STREAM if id == 1 => {
                    let code = payload
                        .get(..4)
                        .map_or(0, |c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
                    return answer.ok_or_else(|| format!("stream reset (error code {code})"));
                }
                GOAWAY => {
                    return answer.ok_or_else(|| "connection ended (GOAWAY)".to_string());
                }
                _ => {}
            }
        }
    };
    let result = tokio::time::timeout(Duration::from_secs(10), reader)
        .await
        .unwrap_or_else(|_| Err("no answer in 10 s".to_string()));
    state.lock().expect("state").answer = Some(result.clone());
    wake.notify_one();
    writer.abort();
    result
}

async fn body_limits_hold_whatever_the_framing(haproxy: HaproxyBinary, source: Source) {
    let web = start_backends("web", 243, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    objects.extend([
        to_json(&mk_annotated_ingress(
            "small",
            HOST,
            "/small",
            "web",
            &[("nginx.ingress.kubernetes.io/proxy-body-size", "1k")],
        )),
        to_json(&mk_annotated_ingress(
            "large",
            HOST,
            "/large",
            "web",
            &[("nginx.ingress.kubernetes.io/proxy-body-size", "1m")],
        )),
        to_json(&mk_annotated_ingress("open", HOST, "/open", "web", &[])),
    ]);
    let scene = Scene::start(&haproxy, source, &objects).await;
    scene.wait_for_status(HOST, "/small", 200).await;
    scene.wait_for_status(HOST, "/large", 200).await;
    scene.wait_for_status(HOST, "/open", 200).await;
    let addr = scene.http_addr();

    for (path, limit) in [("/small", SMALL), ("/large", LARGE)] {
        let within = body_of(limit);
        let over = body_of(limit + 1);
        let far_over = body_of(limit * 5);

        // Content-Length: judged by the header.
        let reply = request_with_body(addr, "POST", HOST, path, &[], Some(&within))
            .await
            .expect("an answer");
        assert_eq!(
            Outcome::of(&reply),
            Outcome::passed(&within),
            "{path}: {reply:?}"
        );

        // Chunked: counted.
        for body in [&within, &over, &far_over] {
            let reply = post_chunked(addr, path, body).await.expect("an answer");
            if body.len() <= limit {
                assert_eq!(
                    Outcome::of(&reply),
                    Outcome::passed(body),
                    "{path} chunked {}: {reply:?}",
                    body.len()
                );
                // The way through haproxy's internal frontend leaves no trace: one
                // X-Forwarded-For, the client's, and no internal header.
                let forwarded: Vec<&str> = reply
                    .headers
                    .iter()
                    .filter(|(name, _)| name.eq_ignore_ascii_case("x-echo-req-forwarded-for"))
                    .map(|(_, value)| value.as_str())
                    .collect();
                assert_eq!(forwarded, ["127.0.0.1"], "{reply:?}");
                assert!(
                    !reply
                        .headers
                        .iter()
                        .any(|(name, _)| name.to_ascii_lowercase().contains("body-limit")),
                    "{reply:?}"
                );
            } else {
                assert_eq!(
                    reply.status,
                    413,
                    "{path} chunked {}: {reply:?}",
                    body.len()
                );
            }
        }

        // HTTP/2 without Content-Length: counted. A client still sending when the
        // answer comes may see its stream reset instead of the 413 (haproxy 2.6 and 3.0).
        for body in [&within, &over, &far_over] {
            let outcome = post_h2(addr, path, body).await;
            if body.len() <= limit {
                let reply = outcome.unwrap_or_else(|e| panic!("{path} h2 {}: {e}", body.len()));
                assert_eq!(
                    Outcome::of(&reply),
                    Outcome::passed(body),
                    "{path} h2 {}: {reply:?}",
                    body.len()
                );
            } else {
                match outcome {
                    Ok(reply) => {
                        assert_eq!(reply.status, 413, "{path} h2 {}: {reply:?}", body.len())
                    }
                    Err(reset) => assert!(
                        reset.starts_with("stream reset"),
                        "{path} h2 {}: {reset}",
                        body.len()
                    ),
                }
            }
        }
        // Nothing over the limit reached the service whole.
        assert!(
            web[0].largest_body() <= LARGE,
            "the service received a body of {} bytes",
            web[0].largest_body()
        );
        if path == "/small" {
            assert_eq!(
                web[0].largest_body(),
                SMALL,
                "the service received more than 1k on /small"
            );
        }
    }

    // A route without a limit takes any body, chunked or not, at no cost.
    let big = body_of(3 * LARGE);
    let reply = post_chunked(addr, "/open", &big).await.expect("an answer");
    assert_eq!(Outcome::of(&reply), Outcome::passed(&big), "{reply:?}");
    let reply = post_h2(addr, "/open", &big).await.expect("an answer");
    assert_eq!(Outcome::of(&reply), Outcome::passed(&big), "{reply:?}");
    // A request without a body on a limited route goes straight on.
    let reply = scene.get(HOST, "/large").await.expect("an answer");
    assert_eq!(Outcome::of(&reply), Outcome::passed(&[]), "{reply:?}");

    // A reload (a new Service behind a new Ingress, with a server timeout of its own:
    // haproxy 3.4 adds plainer backends at runtime) keeps the internal frontend and the
    // limits.
    let before = scene.reloads().await;
    let other = start_backends("other", 244, 1).await;
    for object in mk_service_of("other", &other) {
        scene.apply(&object);
    }
    scene.apply(&mk_annotated_ingress(
        "other",
        "other.bodies.example.com",
        "/",
        "other",
        &[("tugboat.dev/timeout-server", "40s")],
    ));
    scene
        .wait_for_service("other.bodies.example.com", "/", "other")
        .await;
    assert!(scene.reloads().await > before, "no reload happened");
    let within = body_of(SMALL);
    let reply = post_chunked(addr, "/small", &within)
        .await
        .expect("an answer");
    assert_eq!(Outcome::of(&reply), Outcome::passed(&within), "{reply:?}");
    let reply = post_chunked(addr, "/small", &body_of(SMALL + 1))
        .await
        .expect("an answer");
    assert_eq!(reply.status, 413, "after a reload: {reply:?}");
}
