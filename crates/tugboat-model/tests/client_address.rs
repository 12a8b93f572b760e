//! The keys of the client's address as the model reads them from the controller's
//! ConfigMap: off by default, trusted forwarders only when named, and a bad value is a
//! problem naming the ConfigMap's field while the header is not trusted (fails closed)
//! and the routes are served; `use-proxy-protocol` likewise, and HAProxy Technologies'
//! `proxy-protocol` as it.

mod common;

use common::shop_ingress;
use tugboat_model::BuildOutput;
use tugboat_model::features::ForwardedHeaders;

/// The build of an Ingress routing `shop.example.com/` with the controller's ConfigMap
/// `ops/tugboat` holding `data`.
fn build_with_config_map(data: &[(&str, &str)]) -> BuildOutput {
    common::build_with_config_map([shop_ingress("shop", "/", &[])], data)
}

#[test]
fn the_peer_is_the_client_by_default() {
    let output = build_with_config_map(&[("proxy-real-ip-cidr", "10.0.0.0/8")]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    assert_eq!(output.desired.global.forwarded, None);
}

#[test]
fn trusted_forwarders_are_read_in_canonical_form() {
    let output = build_with_config_map(&[
        ("use-forwarded-headers", "true"),
        (
            "proxy-real-ip-cidr",
            "10.0.0.0/8, 192.168.1.1,2001:db8::/32",
        ),
        ("forwarded-for-header", "X-Real-IP"),
        ("compute-full-forwarded-for", "true"),
    ]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    assert_eq!(
        output.desired.global.forwarded,
        Some(ForwardedHeaders {
            header: "X-Real-IP".into(),
            trusted: vec![
                "10.0.0.0/8".into(),
                "192.168.1.1".into(),
                "2001:db8::/32".into()
            ],
            full: true,
        })
    );
}

#[test]
fn without_trusted_forwarders_nothing_is_trusted_and_a_problem_says_so() {
    let output = build_with_config_map(&[("use-forwarded-headers", "true")]);
    let problem = common::only_problem(&output);
    assert_eq!(problem.object.kind, "ConfigMap", "{problem}");
    assert_eq!(problem.field, "data.use-forwarded-headers", "{problem}");
    assert!(problem.message.contains("proxy-real-ip-cidr"), "{problem}");
    assert_eq!(output.desired.global.forwarded, None);
    assert_eq!(output.desired.routes.len(), 1);
}

#[test]
fn a_bad_value_is_a_problem_naming_the_field_and_the_header_is_not_trusted() {
    for (key, bad) in [
        ("proxy-real-ip-cidr", "10.0.0.0/33"),
        ("proxy-real-ip-cidr", "10.0.0.0/8 if TRUE"),
        ("proxy-real-ip-cidr", "example.com"),
        ("forwarded-for-header", "X-Forwarded-For\nhttp-request deny"),
        ("forwarded-for-header", "X Real"),
        ("use-forwarded-headers", "yes please"),
    ] {
        let output = build_with_config_map(&[
            ("use-forwarded-headers", "true"),
            ("proxy-real-ip-cidr", "127.0.0.1"),
            (key, bad),
        ]);
        let field = format!("data.{key}");
        assert!(
            output
                .problems
                .iter()
                .any(|p| p.field == field && p.object.kind == "ConfigMap"),
            "{key}={bad:?}: {:?}",
            output.problems
        );
        let global = &output.desired.global;
        if key == "forwarded-for-header" {
            // The default header, never the bad one.
            assert_eq!(
                global.forwarded.as_ref().map(|f| f.header.as_str()),
                Some("X-Forwarded-For")
            );
        } else {
            assert_eq!(global.forwarded, None, "{key}={bad:?}");
        }
        assert_eq!(output.desired.routes.len(), 1, "{key}={bad:?}");
    }
}

#[test]
fn proxy_protocol_is_accepted_from_the_trusted_peers_only() {
    let output = build_with_config_map(&[
        ("use-proxy-protocol", "true"),
        ("proxy-real-ip-cidr", "10.0.0.0/8"),
    ]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    let global = &output.desired.global;
    assert_eq!(global.proxy_protocol_from, Some(vec!["10.0.0.0/8".into()]));
    // The header is a key of its own.
    assert_eq!(global.forwarded, None);

    let output = build_with_config_map(&[("use-proxy-protocol", "true")]);
    let problem = common::only_problem(&output);
    assert_eq!(problem.field, "data.use-proxy-protocol", "{problem}");
    assert_eq!(output.desired.global.proxy_protocol_from, None);
    assert_eq!(output.desired.routes.len(), 1);
}

/// HAProxy Technologies' ConfigMap key `proxy-protocol` lists the peers that send
/// PROXY: Tugboat's `use-proxy-protocol` with them as `proxy-real-ip-cidr`.
#[test]
fn haproxytechs_proxy_protocol_is_use_proxy_protocol_with_its_peers() {
    let output = build_with_config_map(&[("proxy-protocol", "10.0.0.0/8, 192.168.1.7")]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    let global = &output.desired.global;
    assert_eq!(
        global.proxy_protocol_from,
        Some(vec!["10.0.0.0/8".into(), "192.168.1.7".into()])
    );
    assert_eq!(global.forwarded, None);

    // Tugboat's own keys in the same ConfigMap win; a disagreement is a problem on
    // their key.
    let output = build_with_config_map(&[
        ("proxy-protocol", "10.0.0.0/8"),
        ("proxy-real-ip-cidr", "172.16.0.0/12"),
        ("use-proxy-protocol", "true"),
    ]);
    let problem = common::only_problem(&output);
    assert_eq!(problem.field, "data.proxy-protocol", "{problem}");
    assert!(
        problem.message.contains("data.proxy-real-ip-cidr"),
        "{problem}"
    );
    assert_eq!(
        output.desired.global.proxy_protocol_from,
        Some(vec!["172.16.0.0/12".into()])
    );
    let output = build_with_config_map(&[
        ("proxy-protocol", "10.0.0.0/8"),
        ("use-proxy-protocol", "false"),
    ]);
    let problem = common::only_problem(&output);
    assert_eq!(problem.field, "data.proxy-protocol", "{problem}");
    assert_eq!(output.desired.global.proxy_protocol_from, None);

    // A bad address is a problem naming their key, and nothing is trusted.
    let output = build_with_config_map(&[("proxy-protocol", "10.0.0.0/33")]);
    assert!(!output.problems.is_empty());
    for problem in &output.problems {
        assert_eq!(problem.field, "data.proxy-protocol", "{problem}");
    }
    assert!(
        output
            .problems
            .iter()
            .any(|p| p.message.contains("10.0.0.0/33")),
        "{:?}",
        output.problems
    );
    assert_eq!(output.desired.global.proxy_protocol_from, None);
    assert_eq!(output.desired.routes.len(), 1);
}
