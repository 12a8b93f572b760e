//! The key reference in docs/annotations.md is generated from the key table: this test
//! fails when the file is out of date and says how to regenerate it.
#![allow(
    clippy::disallowed_methods,
    reason = "test code: blocking file work is fine here"
)]

#[test]
fn docs_migrating_md_is_up_to_date() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/migrating.md");
    let current = std::fs::read_to_string(path).unwrap_or_default();
    let generated = tugboat_model::annotations::migrating_markdown();
    assert!(
        current == generated,
        "docs/migrating.md is out of date with crates/tugboat-model/src/annotations/peers.rs; \
         regenerate it with:\n    cargo run -p tugboat -- migrating-reference > docs/migrating.md"
    );
}

#[test]
fn docs_annotations_md_is_up_to_date() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/annotations.md");
    let current = std::fs::read_to_string(path).unwrap_or_default();
    let generated = tugboat_model::annotations::reference_markdown();
    assert!(
        current == generated,
        "docs/annotations.md is out of date with crates/tugboat-model/src/annotations/keys.rs; \
         regenerate it with:\n    cargo run -p tugboat -- annotations-reference > docs/annotations.md"
    );
}

#[test]
fn every_key_is_documented_with_an_example_that_parses() {
    use tugboat_model::annotations::{KEYS, Layer, Resolver, Scope};
    use tugboat_model::problem::ObjectRef;
    for key in KEYS {
        assert!(
            !key.help.is_empty() && !key.values.is_empty(),
            "{}",
            key.name
        );
        if !key.scopes.contains(&Scope::ConfigMap) {
            ingress_key_example_parses(key);
            continue;
        }
        let object = ObjectRef {
            kind: "ConfigMap",
            namespace: "ops".into(),
            name: "tugboat".into(),
        };
        let mut data: std::collections::BTreeMap<String, String> =
            [(key.name.to_string(), key.example.to_string())].into();
        // Keys that only apply with another one.
        if key.name.starts_with("server-") && key.name != "server-ssl" {
            data.insert("server-ssl".into(), "true".into());
        }
        if key.name.starts_with("auth-") && key.name != "auth-url" {
            data.insert("auth-url".into(), "http://auth.example.com/check".into());
        }
        if key.name == "limit-burst-multiplier" || key.name == "limit-allowlist" {
            data.insert("limit-rps".into(), "10".into());
        }
        if key.name == "use-forwarded-headers" || key.name == "use-proxy-protocol" {
            data.insert("proxy-real-ip-cidr".into(), "10.0.0.0/8".into());
        }
        if key.name.starts_with("session-cookie-") {
            data.insert("affinity".into(), "cookie".into());
        }
        let mut problems = Vec::new();
        let layer = Layer::from_config_map(object, Some(&data), &mut problems);
        assert!(problems.is_empty(), "{}: {problems:?}", key.name);
        let mut resolver = Resolver::new(vec![&layer]);
        // Reading every kind of key through every reader reports only real problems.
        let _ = tugboat_model::annotations::global_options(&mut resolver, true);
        let _ = tugboat_model::annotations::backend_options(&mut resolver, true);
        let hosts = tugboat_model::annotations::ServedHosts {
            owner: &layer.object,
            exact: true,
        };
        let _ = tugboat_model::annotations::route_features(&mut resolver, hosts);
        let _ = tugboat_model::annotations::auth_realm(&mut resolver);
        assert!(
            resolver.problems.is_empty(),
            "the example of {} does not parse: {:?}",
            key.name,
            resolver.problems
        );
        assert!(key.scopes.contains(&Scope::ConfigMap), "{}", key.name);
    }
}

/// A key set on Ingresses only (the canary keys): its example, on a canary Ingress,
/// reads without a problem.
fn ingress_key_example_parses(key: &tugboat_model::annotations::KeySpec) {
    use tugboat_model::annotations::{Layer, Resolver, Scope, UnsupportedAccess};
    use tugboat_model::problem::ObjectRef;
    assert_eq!(key.scopes, [Scope::Ingress], "{}", key.name);
    let object = ObjectRef {
        kind: "Ingress",
        namespace: "shop".into(),
        name: "web".into(),
    };
    let mut annotations: std::collections::BTreeMap<String, String> = [
        ("tugboat.dev/canary".to_string(), "true".to_string()),
        (
            "tugboat.dev/canary-by-header".to_string(),
            "X-Canary".to_string(),
        ),
    ]
    .into();
    annotations.insert(format!("tugboat.dev/{}", key.name), key.example.to_string());
    let mut problems = Vec::new();
    let layer = Layer::from_annotations(
        object,
        Scope::Ingress,
        Some(&annotations),
        UnsupportedAccess::Deny,
        &mut problems,
    );
    assert!(problems.is_empty(), "{}: {problems:?}", key.name);
    let mut resolver = Resolver::new(vec![&layer]);
    assert!(
        tugboat_model::annotations::canary(&mut resolver).is_some(),
        "{}",
        key.name
    );
    assert!(
        resolver.problems.is_empty(),
        "the example of {} does not parse: {:?}",
        key.name,
        resolver.problems
    );
}

/// Every value of Tugboat's chart that docs/migrating.md names exists in the chart's
/// values schema, and a `config.` key is a key of the controller's ConfigMap.
#[test]
fn chart_values_in_the_migration_guide_exist() {
    use tugboat_model::annotations::peers::CHART_VALUES;
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/helm/tugboat/values.schema.json"
    );
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("values.schema.json"))
            .expect("values.schema.json is JSON");
    for value in CHART_VALUES.iter().filter(|v| v.ours != "-") {
        if let Some(key) = value.ours.strip_prefix("config.") {
            assert!(
                tugboat_model::annotations::find_key(key).is_some()
                    || tugboat_model::annotations::peers::config_map_key(key).is_some(),
                "{}: {key} is not a key of the controller's ConfigMap",
                value.theirs
            );
            continue;
        }
        let mut node = &schema;
        for part in value.ours.split('.') {
            node = &node["properties"][part];
            assert!(
                !node.is_null(),
                "{} -> {}: the chart has no value {part} there",
                value.theirs,
                value.ours
            );
        }
    }
}
