//! `ssl-passthrough` as the model reads it: each spelling passes the TLS of the
//! Ingress' rule hosts (exact and wildcard) to a mode tcp backend of the rule's `/` path
//! (else its first path), beside the HTTP routes; a rule without a host, a host an older
//! Ingress has, a bad value and an access-restricting key (on the Ingress or in the
//! ConfigMap: fail closed) are problems naming the object and the field.

mod common;

use common::{Object, in_namespace, ingress, mk_config_map, mk_rule, prefix};
use k8s_openapi::api::networking::v1::Ingress;
use tugboat_model::problem::ProblemReason;
use tugboat_model::{BackendName, BuildOutput, HostMatch, PassthroughRoute};

const KEY: &str = "nginx.ingress.kubernetes.io/ssl-passthrough";

/// The Ingress `name`, created at `created`, routing `/` of each host to `web`.
fn passthrough_ingress(
    name: &str,
    created: &str,
    hosts: &[&str],
    keys: &[(&str, &str)],
) -> Ingress {
    let rules = hosts
        .iter()
        .map(|host| mk_rule(Some(host), &[prefix("/", "web")]))
        .collect();
    ingress(name, created, keys, rules)
}

fn build(ingresses: impl IntoIterator<Item = Ingress>) -> BuildOutput {
    let objects = ingresses.into_iter().map(Object::from).chain([
        common::web_service(&[]).into(),
        common::service("api", "http").into(),
    ]);
    common::build_at_fixed_time(&common::snapshot_of(objects))
}

fn web_passthrough() -> BackendName {
    BackendName::parse("default_web_80")
        .expect("a backend name")
        .passthrough()
}

fn hosts(output: &BuildOutput) -> Vec<(HostMatch, &str)> {
    output
        .desired
        .passthrough
        .iter()
        .map(|route| (route.host.clone(), route.backend.as_str()))
        .collect()
}

#[test]
fn each_spelling_passes_the_rule_hosts_to_a_tcp_backend() {
    for key in [
        "nginx.ingress.kubernetes.io/ssl-passthrough",
        "haproxy.org/ssl-passthrough",
        "haproxy-ingress.github.io/ssl-passthrough",
        "tugboat.dev/ssl-passthrough",
    ] {
        let output = build([passthrough_ingress(
            "cd",
            "2024-01-01T00:00:00Z",
            &["cd.example.com", "*.apps.example.com"],
            &[(key, "true")],
        )]);
        assert!(output.problems.is_empty(), "{key}: {:?}", output.problems);
        let name = web_passthrough();
        assert_eq!(name.as_str(), "passthrough:default_web_80");
        assert_eq!(
            hosts(&output),
            [
                (HostMatch::Exact("cd.example.com".into()), name.as_str()),
                (
                    HostMatch::Wildcard(".apps.example.com".into()),
                    name.as_str()
                ),
            ],
            "{key}"
        );
        let route: &PassthroughRoute = &output.desired.passthrough[0];
        assert_eq!(route.owner.kind, "Ingress");
        assert_eq!(&*route.owner.name, "cd");
        let backend = &output.desired.backends[&name];
        assert!(backend.options.tls_passthrough, "{key}");
        let http = BackendName::parse("default_web_80").expect("name");
        assert_eq!(backend.endpoints, output.desired.backends[&http].endpoints);
        // Plain HTTP is still routed by the rules.
        assert_eq!(output.desired.routes.len(), 2, "{key}");
        assert!(output.desired.routes.iter().all(|r| r.backend == http));
    }
}

#[test]
fn without_the_key_or_with_false_nothing_passes_through() {
    for keys in [&[][..], &[(KEY, "false")][..]] {
        let output = build([passthrough_ingress(
            "cd",
            "2024-01-01T00:00:00Z",
            &["cd.example.com"],
            keys,
        )]);
        assert!(output.problems.is_empty(), "{:?}", output.problems);
        assert!(output.desired.passthrough.is_empty());
        assert!(!output.desired.backends.contains_key(&web_passthrough()));
    }
}

#[test]
fn the_root_path_is_passed_through_else_the_first_path() {
    let both = mk_rule(
        Some("both.example.com"),
        &[prefix("/api", "api"), prefix("/", "web")],
    );
    let api_only = mk_rule(Some("api.example.com"), &[prefix("/api", "api")]);
    let output = build([ingress(
        "cd",
        "2024-01-01T00:00:00Z",
        &[(KEY, "true")],
        vec![both, api_only],
    )]);
    assert!(output.problems.is_empty(), "{:?}", output.problems);
    assert_eq!(
        hosts(&output),
        [
            (
                HostMatch::Exact("api.example.com".into()),
                "passthrough:default_api_80"
            ),
            (
                HostMatch::Exact("both.example.com".into()),
                "passthrough:default_web_80"
            ),
        ]
    );
}

#[test]
fn a_rule_without_a_host_is_a_problem_and_the_others_pass_through() {
    let rules = vec![
        mk_rule(None, &[prefix("/", "web")]),
        mk_rule(Some("cd.example.com"), &[prefix("/", "web")]),
    ];
    let output = build([ingress(
        "cd",
        "2024-01-01T00:00:00Z",
        &[(KEY, "true")],
        rules,
    )]);
    let problem = common::only_problem(&output);
    assert_eq!(problem.field, "spec.rules[0].host", "{problem}");
    assert!(problem.message.contains("needs a host"), "{problem}");
    assert_eq!(hosts(&output).len(), 1);
}

#[test]
fn the_older_ingress_keeps_a_passthrough_host() {
    let older = passthrough_ingress(
        "older",
        "2024-01-01T00:00:00Z",
        &["cd.example.com"],
        &[(KEY, "true")],
    );
    let newer = ingress(
        "newer",
        "2024-02-01T00:00:00Z",
        &[(KEY, "true")],
        vec![mk_rule(Some("cd.example.com"), &[prefix("/other", "api")])],
    );
    let output = build([newer, older]);
    let problem = common::only_problem(&output);
    assert_eq!(&*problem.object.name, "newer", "{problem}");
    assert_eq!(problem.field, "spec.rules[0].host", "{problem}");
    assert_eq!(problem.reason, ProblemReason::RouteConflict, "{problem}");
    assert_eq!(&*output.desired.passthrough[0].owner.name, "older");
    assert_eq!(output.desired.passthrough.len(), 1);
}

#[test]
fn a_bad_value_is_a_problem_naming_the_key() {
    let output = build([passthrough_ingress(
        "cd",
        "2024-01-01T00:00:00Z",
        &["cd.example.com"],
        &[(KEY, "yes please")],
    )]);
    let problem = common::only_problem(&output);
    assert_eq!(
        problem.field,
        format!("metadata.annotations.{KEY}"),
        "{problem}"
    );
    assert!(output.desired.passthrough.is_empty());
}

/// An access restriction cannot be enforced on TLS haproxy does not decrypt: the
/// passthrough is refused (a problem names the key) and the restriction applies to
/// the host's routes, which haproxy terminates.
#[test]
fn a_key_that_restricts_access_refuses_the_passthrough() {
    for (restriction, named) in [
        (
            (
                "nginx.ingress.kubernetes.io/whitelist-source-range",
                "10.0.0.0/8",
            ),
            "nginx.ingress.kubernetes.io/whitelist-source-range",
        ),
        (("tugboat.dev/auth-type", "basic"), "tugboat.dev/auth-type"),
        // Not supported, so its routes refuse every request: no passthrough either.
        (
            ("nginx.ingress.kubernetes.io/auth-tls-secret", "default/ca"),
            "nginx.ingress.kubernetes.io/auth-tls-secret",
        ),
    ] {
        let output = build([passthrough_ingress(
            "cd",
            "2024-01-01T00:00:00Z",
            &["cd.example.com"],
            &[(KEY, "true"), restriction],
        )]);
        assert!(output.desired.passthrough.is_empty(), "{restriction:?}");
        assert!(!output.desired.backends.contains_key(&web_passthrough()));
        let refusal = output
            .problems
            .iter()
            .find(|p| p.field == format!("metadata.annotations.{KEY}"))
            .unwrap_or_else(|| panic!("{restriction:?}: {:?}", output.problems));
        assert!(
            refusal.message.contains(&format!("key '{named}'")),
            "{refusal}"
        );
        assert!(!output.desired.routes.is_empty(), "the HTTP routes stay");
    }
}

#[test]
fn a_config_map_key_that_restricts_access_refuses_the_passthrough() {
    let config_map = in_namespace(
        mk_config_map("tugboat", &[("allow-list", "10.0.0.0/8")]),
        "ops",
    );
    let snapshot = common::snapshot_of([
        Object::from(passthrough_ingress(
            "cd",
            "2024-01-01T00:00:00Z",
            &["cd.example.com"],
            &[(KEY, "true")],
        )),
        common::web_service(&[]).into(),
        config_map.into(),
    ]);
    let settings = tugboat_model::Settings {
        config_map: Some(tugboat_model::ObjectKey::new("ops", "tugboat")),
        ..tugboat_model::Settings::new(1_700_000_000)
    };
    let output = tugboat_model::build(&snapshot, &settings);
    let problem = common::only_problem(&output);
    assert!(
        problem.message.contains("'allow-list in the ConfigMap'"),
        "{problem}"
    );
    assert!(output.desired.passthrough.is_empty());
}

#[test]
fn a_service_key_that_restricts_access_refuses_the_passthrough_of_its_hosts() {
    let snapshot = common::snapshot_of([
        Object::from(passthrough_ingress(
            "cd",
            "2024-01-01T00:00:00Z",
            &["cd.example.com"],
            &[(KEY, "true")],
        )),
        common::web_service(&[("haproxy.org/allow-list", "10.0.0.0/8")]).into(),
    ]);
    let output = common::build_at_fixed_time(&snapshot);
    let problem = common::only_problem(&output);
    assert_eq!(&*problem.object.name, "cd", "{problem}");
    assert_eq!(problem.field, "spec.rules[0].host", "{problem}");
    assert!(
        problem.message.contains("'haproxy.org/allow-list'"),
        "{problem}"
    );
    assert!(output.desired.passthrough.is_empty());
}

/// Another object's route of the host that restricts access would be bypassed by the
/// passthrough: refused, with a problem naming that route.
#[test]
fn another_ingress_restricting_the_host_refuses_its_passthrough() {
    let private = ingress(
        "private",
        "2024-02-01T00:00:00Z",
        &[(
            "nginx.ingress.kubernetes.io/whitelist-source-range",
            "10.0.0.0/8",
        )],
        vec![mk_rule(Some("cd.example.com"), &[prefix("/admin", "api")])],
    );
    let output = build([
        passthrough_ingress(
            "cd",
            "2024-01-01T00:00:00Z",
            &["cd.example.com"],
            &[(KEY, "true")],
        ),
        private,
    ]);
    let problem = common::only_problem(&output);
    assert_eq!(&*problem.object.name, "cd", "{problem}");
    assert_eq!(problem.field, "spec.rules[0].host", "{problem}");
    assert!(
        problem.message.contains("Ingress default/private"),
        "{problem}"
    );
    assert!(output.desired.passthrough.is_empty());
    assert!(!output.desired.backends.contains_key(&web_passthrough()));
}

#[test]
fn a_passthrough_backend_name_reads_back_and_never_meets_a_service_backend() {
    let name = web_passthrough();
    assert_eq!(BackendName::parse(name.as_str()), Some(name.clone()));
    assert!(name.is_passthrough());
    assert!(
        !BackendName::parse("default_web_80")
            .expect("name")
            .is_passthrough()
    );
}

/// The model kept between updates: a passthrough Ingress' change is built whole (who
/// gets a host depends on the other Ingresses), and an endpoint change of its Service
/// patches the passthrough backend like the HTTP one; each gives what a full build gives.
#[test]
fn updates_of_a_passthrough_ingress_give_what_a_full_build_gives() {
    use std::sync::Arc;
    use tugboat_model::{Model, ObjectKey, Rebuilt, Update};

    let slice = |ip: &str| {
        common::endpoint_slice(
            "web",
            "http",
            8080,
            vec![common::mk_endpoint(ip, Some(true))],
        )
    };
    let cd =
        |hosts: &[&str]| passthrough_ingress("cd", "2024-01-01T00:00:00Z", hosts, &[(KEY, "true")]);
    let allow_list = [(
        "nginx.ingress.kubernetes.io/whitelist-source-range",
        "10.0.0.0/8",
    )];
    let restricted = |name: &str, host: &str| {
        let rule = mk_rule(Some(host), &[prefix("/admin", "web")]);
        ingress(name, "2024-02-01T00:00:00Z", &allow_list, vec![rule])
    };
    let mut snapshot = common::snapshot_of([
        Object::from(cd(&["cd.example.com"])),
        restricted("other", "other.example.com").into(),
        common::web_service(&[]).into(),
        slice("10.0.0.1").into(),
    ]);
    let settings = tugboat_model::Settings::new(1_700_000_000);
    let mut model = Model::default();
    let Update::Full(first, _) = model.update(&snapshot, &settings) else {
        panic!("the first update is a full build");
    };
    assert_eq!(first.desired.passthrough.len(), 1);

    snapshot.ingresses.insert(
        ObjectKey::new("default", "cd"),
        Arc::new(typed(&cd(&["cd.example.com", "argo.example.com"]))),
    );
    let mut current = match model.update(&snapshot, &settings) {
        Update::Full(output, Rebuilt::Ingresses(why)) => {
            assert_eq!(why, "TLS passthrough");
            output
        }
        other => panic!("a passthrough Ingress is built whole: {other:?}"),
    };
    assert_eq!(*current, tugboat_model::build(&snapshot, &settings));
    assert_eq!(current.desired.passthrough.len(), 2);

    snapshot.endpoint_slices.insert(
        ObjectKey::new("default", "web-1"),
        Arc::new(typed(&slice("10.0.0.2"))),
    );
    let Update::Patch(patch) = model.update(&snapshot, &settings) else {
        panic!("an endpoint change is a patch");
    };
    assert!(
        patch.endpoints.contains_key(&web_passthrough()),
        "{patch:?}"
    );
    patch.apply_to_output(&mut current);
    assert_eq!(*current, tugboat_model::build(&snapshot, &settings));

    // Another Ingress restricts a path of a passthrough host: built whole, and the
    // passthrough of that host goes.
    let private = ingress(
        "private",
        "2024-02-01T00:00:00Z",
        &[(
            "nginx.ingress.kubernetes.io/whitelist-source-range",
            "10.0.0.0/8",
        )],
        vec![mk_rule(
            Some("argo.example.com"),
            &[prefix("/admin", "web")],
        )],
    );
    snapshot.ingresses.insert(
        ObjectKey::new("default", "private"),
        Arc::new(typed(&private)),
    );
    match model.update(&snapshot, &settings) {
        Update::Full(output, Rebuilt::Ingresses(_)) => current = output,
        other => panic!("a route of a passthrough host is built whole: {other:?}"),
    }
    assert_eq!(*current, tugboat_model::build(&snapshot, &settings));
    assert_eq!(current.desired.passthrough.len(), 1);
}

/// A test object as the snapshot holds it (read from its JSON, as the sources do).
fn typed<T: serde::de::DeserializeOwned>(object: &impl serde::Serialize) -> T {
    serde_json::from_value(common::to_json(object)).expect("typed object")
}

#[test]
fn a_canary_ingress_asking_for_passthrough_is_a_problem_and_changes_nothing() {
    let main = passthrough_ingress("site", "2024-01-01T00:00:00Z", &["site.example.com"], &[]);
    let canary = ingress(
        "site-canary",
        "2024-01-02T00:00:00Z",
        &[
            ("nginx.ingress.kubernetes.io/canary", "true"),
            ("nginx.ingress.kubernetes.io/canary-weight", "10"),
            (KEY, "true"),
        ],
        vec![mk_rule(Some("site.example.com"), &[prefix("/", "api")])],
    );
    let output = build([main, canary]);
    assert!(output.desired.passthrough.is_empty());
    let [problem] = output.problems.as_slice() else {
        panic!("one problem: {:?}", output.problems);
    };
    assert_eq!(problem.object.to_string(), "Ingress default/site-canary");
    assert_eq!(problem.field, format!("metadata.annotations.{KEY}"));
    assert!(problem.message.contains("canary"), "{problem}");
}
