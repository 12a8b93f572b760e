//! The text screen of a status report.

use super::*;

fn at(text: &str) -> Timestamp {
    text.parse().expect("timestamp")
}

fn problem(kind: &str, name: &str, field: &str, message: &str) -> ProblemReport {
    ProblemReport {
        kind: kind.into(),
        namespace: "shop".into(),
        name: name.into(),
        field: field.into(),
        reason: "InvalidField".into(),
        message: message.into(),
    }
}

fn report() -> StatusReport {
    StatusReport {
        now: at("2026-11-26T15:00:00Z"),
        ready: true,
        controller: ProcessReport {
            version: "0.1.0".into(),
            uptime_seconds: 7_380,
            resident_bytes: Some(42 * 1024 * 1024),
            leader: Some(true),
        },
        haproxy: HaproxyReport {
            version: Some("3.0.11".into()),
            master_pid: Some(12),
            worker_pid: Some(345),
            reloads: Some(4),
            failed_reloads: Some(0),
            worker_uptime_seconds: Some(302),
            current_connections: Some(3),
            error: None,
        },
        activity: Activity {
            last_apply: Some(ApplyRecord {
                at: at("2026-11-26T14:59:48Z"),
                built: "patch".into(),
                delivery: "runtime".into(),
                result: ApplyResult::Applied,
                duration_ms: 1.4,
                message: None,
            }),
            last_reload: Some(ReloadRecord {
                at: at("2026-11-26T14:58:46Z"),
                reason: "new-backend".into(),
                result: ApplyResult::Applied,
                message: None,
            }),
            applies: ApplyCounts {
                runtime: 12,
                reload: 3,
                refused: 1,
                failed: 0,
            },
        },
        source: SourceSync {
            source: "api".into(),
            synced_at: Some(at("2026-11-26T12:57:00Z")),
            watches: vec![
                WatchSync {
                    kind: "Ingress".into(),
                    synced_at: Some(at("2026-11-26T12:56:59Z")),
                },
                WatchSync {
                    kind: "Gateway".into(),
                    synced_at: None,
                },
            ],
        },
        problems: vec![problem(
            "Ingress",
            "bad",
            "spec.rules[0].host",
            "not a DNS name",
        )],
    }
}

#[test]
fn one_screen_names_haproxy_the_applies_the_source_and_the_problems() {
    assert_eq!(
        render_text(&report()),
        "\
Tugboat 0.1.0: ready, up 2h03m, RSS 42.0 MiB, leader
haproxy     3.0.11, master pid 12, worker pid 345 (up 5m02s, 3 connections), 4 reloads (0 failed since the last success)
Last apply  2026-11-26T14:59:48Z (12s ago): runtime (patch), applied in 1.4 ms
Last reload 2026-11-26T14:58:46Z (1m14s ago): new-backend, loaded
Applies     12 runtime, 3 reload, 1 refused, 0 failed
Source      Kubernetes API, synced 2026-11-26T12:57:00Z (2h03m ago)
            watches synced: Ingress
            NOT listed yet: Gateway
Problems    1 on 1 object
  Ingress shop/bad
    spec.rules[0].host: not a DNS name
"
    );
}

#[test]
fn a_controller_that_has_done_nothing_yet_says_so() {
    let mut report = report();
    report.ready = false;
    report.activity = Activity::default();
    report.controller.leader = None;
    report.haproxy = HaproxyReport {
        error: Some("show proc: connection refused".into()),
        ..HaproxyReport::default()
    };
    report.source = SourceSync::new("manifests", &[]);
    report.problems.clear();
    let text = render_text(&report);
    for expected in [
        "Tugboat 0.1.0: NOT READY (no configuration applied yet), up 2h03m, RSS 42.0 MiB, no leader election\n",
        "haproxy     ?; show proc: connection refused\n",
        "Last apply  none yet\n",
        "Last reload none since the controller started\n",
        "Source      manifests folder, NOT SYNCED yet\n",
        "Problems    none\n",
    ] {
        assert!(text.contains(expected), "{expected:?} not in:\n{text}");
    }
}

#[test]
fn failures_show_their_message_and_long_problem_lists_are_counted() {
    let mut report = report();
    report.activity.last_apply = Some(ApplyRecord {
        at: at("2026-11-26T14:59:00Z"),
        built: "full".into(),
        delivery: "reload".into(),
        result: ApplyResult::Refused,
        duration_ms: 80.0,
        message: Some("unknown keyword 'bogus'".into()),
    });
    report.problems = (0..15)
        .flat_map(|i| {
            (0..5).map(move |j| {
                problem(
                    "Ingress",
                    &format!("web-{i:02}"),
                    &format!("spec.rules[{j}].host"),
                    "not a DNS name",
                )
            })
        })
        .collect();
    let text = render_text(&report);
    assert!(
        text.contains("Last apply  2026-11-26T14:59:00Z (1m00s ago): reload (full), refused in 80 ms: unknown keyword 'bogus'\n"),
        "{text}"
    );
    assert!(text.contains("Problems    75 on 15 objects\n"), "{text}");
    assert!(text.contains("  Ingress shop/web-09\n"), "{text}");
    assert!(!text.contains("web-10"), "{text}");
    assert!(text.contains("    ... and 2 more\n"), "{text}");
    assert!(
        text.contains(
            "  ... and 5 more objects (25 problems): `tugboat status --output json` lists all\n"
        ),
        "{text}"
    );
}

#[test]
fn messages_keep_no_payload() {
    assert_eq!(
        safe_message(
            "haproxy did not take 'set ssl cert a.pem <<\n-----BEGIN PRIVATE KEY-----\nMII"
        ),
        "haproxy did not take 'set ssl cert a.pem"
    );
    assert_eq!(safe_message(&"x".repeat(1000)).len(), MESSAGE_LIMIT);
}

#[test]
fn the_json_keeps_its_field_names_and_reads_back() {
    let report = report();
    let json = serde_json::to_value(&report).expect("json");
    for field in [
        "now",
        "ready",
        "controller",
        "haproxy",
        "last_apply",
        "last_reload",
        "applies",
        "source",
        "problems",
    ] {
        assert!(json.get(field).is_some(), "{field} missing in {json}");
    }
    assert_eq!(json["last_apply"]["delivery"], "runtime");
    assert_eq!(json["last_apply"]["result"], "applied");
    assert_eq!(json["last_apply"]["at"], "2026-11-26T14:59:48Z");
    let back: StatusReport = serde_json::from_value(json).expect("read back");
    assert_eq!(back, report);
}
