//! TCP services from the operator's ConfigMaps (`--tcp-services-configmap`,
//! `--configmap-tcp-services`): each good entry is a port with a mode tcp backend; a bad
//! one is left out with a problem naming the ConfigMap and its key, and harms no other.

mod common;

use std::collections::BTreeMap;

use common::*;
use tugboat_model::build::TcpServicesSettings;
use tugboat_model::problem::ProblemReason;
use tugboat_model::{BuildOutput, ObjectKey, ObjectRef, Settings, TcpService};

/// The Service `db/postgres` (port 5432 named `pg`) and its EndpointSlice of one
/// endpoint, 10.0.0.7:5432.
fn postgres() -> Vec<Object> {
    let service = in_namespace(mk_service("postgres", "pg", 5432), "db");
    let slice = in_namespace(
        mk_endpoint_slice_named(
            "postgres-1",
            "postgres",
            "pg",
            Some(5432),
            vec![mk_endpoint("10.0.0.7", Some(true))],
        ),
        "db",
    );
    vec![service.into(), slice.into()]
}

/// The build of `postgres()` with the ConfigMaps `ops/nginx-tcp` (ingress-nginx's
/// format, holding `nginx`) and `ops/haproxy-tcp` (haproxytech's, holding `haproxytech`).
fn build_with(nginx: &[(&str, &str)], haproxytech: &[(&str, &str)]) -> BuildOutput {
    let objects = postgres().into_iter().chain([
        in_namespace(mk_config_map("nginx-tcp", nginx), "ops").into(),
        in_namespace(mk_config_map("haproxy-tcp", haproxytech), "ops").into(),
    ]);
    let settings = Settings {
        tcp_services: TcpServicesSettings {
            nginx: Some(ObjectKey::new("ops", "nginx-tcp")),
            haproxytech: Some(ObjectKey::new("ops", "haproxy-tcp")),
            taken_ports: BTreeMap::from([(18080, "haproxy's HTTP port".to_string())]),
        },
        ..Settings::new(1_700_000_000)
    };
    tugboat_model::build(&snapshot_of(objects), &settings)
}

fn nginx_map() -> ObjectRef {
    ObjectRef::of("ConfigMap", &ObjectKey::new("ops", "nginx-tcp"))
}

/// The problems of `output`, as (object name, field, reason, message).
fn problems(output: &BuildOutput) -> Vec<(String, String, ProblemReason, String)> {
    output
        .problems
        .iter()
        .map(|p| {
            (
                p.object.name.to_string(),
                p.field.clone(),
                p.reason,
                p.message.clone(),
            )
        })
        .collect()
}

#[test]
fn entries_of_both_formats_are_ports_with_mode_tcp_backends() {
    let output = build_with(
        &[("5432", "db/postgres:pg:PROXY:PROXY")],
        &[("6432", "db/postgres:5432")],
    );
    assert_eq!(problems(&output), vec![]);
    let ports: Vec<(u16, String, bool, bool)> = output
        .desired
        .tcp_services
        .iter()
        .map(|s: &TcpService| {
            let backend = s
                .backend
                .as_ref()
                .map(|b| b.to_string())
                .unwrap_or_default();
            (s.port, backend, s.accept_proxy, s.send_proxy)
        })
        .collect();
    assert_eq!(
        ports,
        vec![
            (5432, "tcp-proxy:db_postgres_pg".to_string(), true, true),
            (6432, "tcp:db_postgres_5432".to_string(), false, false),
        ]
    );
    for service in &output.desired.tcp_services {
        let name = service.backend.as_ref().expect("a backend");
        let backend = &output.desired.backends[name];
        assert!(backend.options.tcp_service);
        assert_eq!(backend.endpoints.len(), 1, "{name}");
        assert_eq!(backend.endpoints[0].port, 5432);
    }
    assert_eq!(output.desired.tcp_services[0].owner, nginx_map());
}

#[test]
fn a_bad_entry_is_left_out_with_a_problem_naming_its_key() {
    let output = build_with(
        &[
            ("22", "db/postgres:5432"),
            ("ssh", "db/postgres:5432"),
            ("60000", "db/postgres:5432"),
            ("8080", "db/postgres:5432"),
            ("3306", "db/mysql:3306"),
            ("5433", "db/postgres:5433"),
            ("5434", "postgres:5432"),
        ],
        &[("22", "db/postgres:5432"), ("389", "db/postgres:5432:ssl")],
    );
    let served: Vec<u16> = output.desired.tcp_services.iter().map(|s| s.port).collect();
    assert_eq!(served, vec![22]);
    let found = problems(&output);
    let expect = |name: &str, field: &str, reason: ProblemReason, part: &str| {
        assert!(
            found
                .iter()
                .any(|(n, f, r, m)| n == name && f == field && *r == reason && m.contains(part)),
            "no problem on {name} {field} with {part:?} in {found:#?}"
        );
    };
    let invalid = ProblemReason::InvalidField;
    expect("nginx-tcp", "data.ssh", invalid, "is not a port");
    expect("nginx-tcp", "data.60000", invalid, "between 1 and 55535");
    expect(
        "nginx-tcp",
        "data.8080",
        invalid,
        "18080, which is haproxy's HTTP port",
    );
    expect(
        "nginx-tcp",
        "data.3306",
        ProblemReason::ServiceNotFound,
        "db/mysql not found: port 3306 is not served",
    );
    expect(
        "nginx-tcp",
        "data.5433",
        ProblemReason::ServicePortNotFound,
        "no port 5433",
    );
    expect(
        "nginx-tcp",
        "data.5434",
        invalid,
        "expected namespace/service",
    );
    expect(
        "haproxy-tcp",
        "data.22",
        invalid,
        "already a TCP service of ConfigMap ops/nginx-tcp",
    );
    expect("haproxy-tcp", "data.389", invalid, "'ssl'");
    assert_eq!(found.len(), 8, "{found:#?}");
}

#[test]
fn a_missing_config_map_is_a_problem_and_serves_nothing() {
    let settings = Settings {
        tcp_services: TcpServicesSettings {
            nginx: Some(ObjectKey::new("ops", "nginx-tcp")),
            ..TcpServicesSettings::default()
        },
        ..Settings::new(1_700_000_000)
    };
    let output = tugboat_model::build(&snapshot_of(postgres()), &settings);
    assert!(output.desired.tcp_services.is_empty());
    let found = problems(&output);
    assert_eq!(found.len(), 1);
    assert!(
        found[0]
            .3
            .contains("--tcp-services-configmap ConfigMap does not exist")
    );
}

#[test]
fn the_config_maps_are_referenced_so_both_sources_read_them() {
    let settings = Settings {
        tcp_services: TcpServicesSettings {
            nginx: Some(ObjectKey::new("ops", "nginx-tcp")),
            haproxytech: Some(ObjectKey::new("ops", "haproxy-tcp")),
            ..TcpServicesSettings::default()
        },
        ..Settings::new(0)
    };
    let references = tugboat_model::references(&tugboat_model::Snapshot::default(), &settings);
    assert!(
        references
            .config_maps
            .contains(&ObjectKey::new("ops", "nginx-tcp"))
    );
    assert!(
        references
            .config_maps
            .contains(&ObjectKey::new("ops", "haproxy-tcp"))
    );
}

#[test]
fn an_endpoint_change_is_a_patch_of_the_tcp_backend() {
    let settings = Settings {
        tcp_services: TcpServicesSettings {
            nginx: Some(ObjectKey::new("ops", "nginx-tcp")),
            ..TcpServicesSettings::default()
        },
        ..Settings::new(1_700_000_000)
    };
    let config_map = in_namespace(
        mk_config_map("nginx-tcp", &[("5432", "db/postgres:pg")]),
        "ops",
    );
    let before = snapshot_of(postgres().into_iter().chain([config_map.clone().into()]));
    let mut model = tugboat_model::Model::default();
    model.rebuild(&before, &settings);
    let moved = in_namespace(
        mk_endpoint_slice_named(
            "postgres-1",
            "postgres",
            "pg",
            Some(5432),
            vec![mk_endpoint("10.0.0.8", Some(true))],
        ),
        "db",
    );
    let after = snapshot_of([postgres()[0].clone(), moved.into(), config_map.into()]);
    match model.update(&after, &settings) {
        tugboat_model::Update::Patch(patch) => {
            let name = tugboat_model::BackendName::parse("tcp:db_postgres_pg").expect("a name");
            let (ready, _) = &patch.endpoints[&name];
            assert_eq!(ready[0].address.to_string(), "10.0.0.8");
        }
        tugboat_model::Update::Full(_, why) => panic!("rebuilt: {why:?}"),
    }
}
