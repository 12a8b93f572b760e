//! JSON access logs (`log-format-json`), end to end on real haproxy from both sources:
//! requests with hostile header values (tab, quote, backslash, control characters,
//! UTF-8 and invalid UTF-8 bytes) through an Ingress route, and a request no route
//! matches, each give one line that a JSON parser reads, naming the Ingress and the
//! Service that served it (none for the unrouted one).

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use tugboat_model::ObjectKey;
use tugboat_testkit::manifests::start_backends;
use tugboat_testkit::objects::{
    in_namespace, mk_config_map, mk_ingress_with_rules, mk_rule, mk_service_of, prefix, to_json,
};
use tugboat_testkit::{HaproxyBinary, Scene, Source, scene_tests};

scene_tests!(json_lines_name_the_ingress_and_service_whatever_the_headers);

const HOST: &str = "logs.example.com";

/// Header values a client may send that a naive JSON log would break on.
const HOSTILE_AGENTS: &[&[u8]] = &[
    b"tab\there",
    b"quote\"here",
    b"backslash\\here",
    b"controls\x01\x02\x1b\x1f",
    "utf8 \u{e9}\u{4e2d}\u{1f6a2}".as_bytes(),
    b"invalid \xff\xfe\xc3 utf8",
];

/// Sends one raw HTTP/1.1 request (its bytes as they are) and returns the status.
async fn raw_request(scene: &Scene, path: &str, agent: &[u8]) -> u16 {
    let mut stream = TcpStream::connect(scene.http_addr())
        .await
        .unwrap_or_else(|e| panic!("connect: {e}; haproxy said:\n{}", scene.log()));
    let mut request = format!(
        "GET {path} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\nX-Request-ID: id\"\t1\r\nUser-Agent: "
    )
    .into_bytes();
    request.extend_from_slice(agent);
    request.extend_from_slice(b"\r\n\r\n");
    stream.write_all(&request).await.expect("send");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("an answer in time")
        .expect("read");
    let text = String::from_utf8_lossy(&answer);
    text.split_whitespace()
        .nth(1)
        .and_then(|status| status.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text}"))
}

/// Every access log line so far (the JSON format's lines start with `{`; haproxy's
/// own messages in the same output do not). Each must be a JSON object.
fn access_lines(scene: &Scene) -> Vec<Value> {
    scene
        .log()
        .lines()
        .filter(|line| line.starts_with('{'))
        .map(|line| {
            serde_json::from_str::<Value>(line)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line:?}"))
        })
        .collect()
}

/// Waits until the log holds a line for each of `paths`, then returns every line.
async fn lines_for(scene: &Scene, paths: &[String]) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let lines = access_lines(scene);
        let logged = |path: &String| lines.iter().any(|line| line["path"] == path.as_str());
        if paths.iter().all(logged) {
            return lines;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not every request was logged: {paths:?} in {lines:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn json_lines_name_the_ingress_and_service_whatever_the_headers(
    haproxy: HaproxyBinary,
    source: Source,
) {
    let web = start_backends("web", 150, 1).await;
    let mut objects = mk_service_of("web", &web).to_vec();
    objects.extend([
        to_json(&in_namespace(
            mk_config_map("tugboat", &[("log-format-json", "true")]),
            "ops",
        )),
        to_json(&mk_ingress_with_rules(
            "logged.site",
            vec![mk_rule(Some(HOST), &[prefix("/app", "web")])],
        )),
    ]);
    let scene = Scene::start_with(&haproxy, source, &objects, |config| {
        config.model.config_map = Some(ObjectKey::new("ops", "tugboat"));
    })
    .await;
    scene.wait_until_ready().await;

    // haproxy passes each of them to the backend; the echo backend (hyper) answers 400
    // to the control characters, 200 to the others.
    let mut routed = Vec::new();
    for (index, agent) in HOSTILE_AGENTS.iter().enumerate() {
        let path = format!("/app/{index}");
        let status = raw_request(&scene, &path, agent).await;
        let expected = if agent.iter().any(|byte| *byte < 0x20 && *byte != b'\t') {
            400
        } else {
            200
        };
        assert_eq!(status, expected, "{path}");
        routed.push((path, status));
    }
    let unrouted = "/nowhere".to_string();
    assert_eq!(raw_request(&scene, &unrouted, b"curl").await, 404);

    let mut paths: Vec<String> = routed.iter().map(|(path, _)| path.clone()).collect();
    paths.push(unrouted.clone());
    let lines = lines_for(&scene, &paths).await;
    for ((path, status), agent) in routed.iter().zip(HOSTILE_AGENTS) {
        let line = lines
            .iter()
            .find(|line| line["path"] == path.as_str())
            .expect("logged");
        assert_eq!(line["owner"], "Ingress/default/logged.site", "{line}");
        assert_eq!(line["service"], "default/web:80", "{line}");
        assert_eq!(line["status"], *status, "{line}");
        assert_eq!(line["backend"], "default_web_80", "{line}");
        assert_ne!(line["server"], "-", "{line}");
        assert_eq!(line["method"], "GET", "{line}");
        assert_eq!(line["host"], HOST, "{line}");
        assert_eq!(line["request_id"], "id\"\t1", "{line}");
        // UTF-8 comes back as sent, but for what `json(utf8s)` drops: invalid bytes and
        // characters beyond the Basic Multilingual Plane (4-byte sequences, an emoji).
        let sent: String = String::from_utf8_lossy(agent)
            .chars()
            .filter(|c| *c != '\u{fffd}' && u32::from(*c) <= 0xffff)
            .collect();
        assert_eq!(line["user_agent"], sent.as_str(), "{line}");
    }
    let line = lines
        .iter()
        .find(|line| line["path"] == unrouted.as_str())
        .expect("logged");
    assert_eq!(line["owner"], "-", "{line}");
    assert_eq!(line["service"], "-", "{line}");
    assert_eq!(line["status"], 404, "{line}");
}
