//! The incremental model against full builds: after any sequence of changes (endpoints,
//! TLS Secrets, Ingresses, Services, settings, time), the last output with every patch
//! applied equals a build from scratch.

use std::sync::{Arc, OnceLock};

use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::api::networking::v1::Ingress;
use proptest::prelude::*;
use serde::Serialize;
use tugboat_model::{BuildOutput, Model, ObjectKey, Settings, Snapshot, Update, build};
use tugboat_test_objects::{
    mk_endpoint_slice_named, mk_external_name_service, mk_ingress_with_rules, mk_path, mk_rule,
    mk_service, mk_tls_secret, prefix, with_class, with_creation_timestamp, with_default_backend,
    with_tls,
};

/// 2030-01-01 and 2030-01-10, as seconds since the epoch.
const JAN_1: i64 = 1_893_456_000;
const JAN_10: i64 = JAN_1 + 9 * 86_400;

/// TLS pairs (cert, key): two valid all January 2030, one valid only from Jan 10.
fn pairs() -> &'static [(String, String)] {
    static PAIRS: OnceLock<Vec<(String, String)>> = OnceLock::new();
    PAIRS.get_or_init(|| {
        [(2030, 1, 1), (2030, 1, 1), (2030, 1, 10)]
            .into_iter()
            .map(|(year, month, day)| {
                let mut params =
                    rcgen::CertificateParams::new(vec!["site.example.com".to_string()])
                        .expect("params");
                params.not_before = rcgen::date_time_ymd(year, month, day);
                params.not_after = rcgen::date_time_ymd(2030, 2, 1);
                let key = rcgen::KeyPair::generate().expect("key");
                let cert = params.self_signed(&key).expect("certificate");
                (cert.pem(), key.serialize_pem())
            })
            .collect()
    })
}

/// `object` as the model holds it, read from its JSON as the API source reads it.
fn object<K: serde::de::DeserializeOwned>(object: &impl Serialize) -> Arc<K> {
    let value = serde_json::to_value(object).expect("an object serializes");
    Arc::new(serde_json::from_value(value).expect("a valid object"))
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::new("default", name)
}

/// One change to the cluster or the controller's settings.
#[derive(Debug, Clone)]
enum Change {
    /// EndpointSlice `slice` of Service `service`: endpoints (address, ready) or deleted.
    Slice {
        service: usize,
        slice: usize,
        endpoints: Option<Vec<(u8, bool)>>,
    },
    /// TLS Secret `secret`: a pair of [`pairs`], a broken one, or deleted.
    Secret { secret: usize, content: usize },
    /// Ingress `ingress` in one of its variants.
    Ingress { ingress: usize, variant: usize },
    /// The first path of Ingress `ingress` (if it exists) goes to Service `service`.
    RouteTo { ingress: usize, service: usize },
    /// The second path of Ingress `ingress` (if it exists) becomes `path`.
    Path { ingress: usize, path: &'static str },
    /// Ingress `ingress` gets an allow list, or loses it.
    AllowList { ingress: usize, set: bool },
    /// Ingress `ingress` becomes an ingress-nginx canary of this weight, or stops being one.
    Canary { ingress: usize, weight: Option<u64> },
    /// Ingress `ingress` gets these `server-alias` hosts (which may be another Ingress'
    /// host), or loses them.
    Alias {
        ingress: usize,
        aliases: Option<&'static str>,
    },
    /// Ingress `ingress` gets `from-to-www-redirect`, or loses it.
    Www { ingress: usize, set: bool },
    /// Ingress `ingress` is deleted.
    DeleteIngress(usize),
    /// Service `service` with its port named or not.
    Service { service: usize, named: bool },
    /// The default certificate flag names Secret `tls-2`, or nothing.
    DefaultCertificate(bool),
    /// Time passes.
    Wait(i64),
}

const SERVICES: [&str; 3] = ["web", "api", "ext"];

fn service(name: &str, named: bool) -> Service {
    if name == "ext" {
        return mk_external_name_service(name, "example.org", 80);
    }
    let mut service = mk_service(name, "http", 80);
    if !named {
        let ports = service.spec.as_mut().and_then(|spec| spec.ports.as_mut());
        ports.expect("a port")[0].name = None;
    }
    service
}

fn slice(service: &str, index: usize, endpoints: &[(u8, bool)]) -> EndpointSlice {
    let endpoints = endpoints
        .iter()
        .map(|(address, ready)| Endpoint {
            addresses: vec![format!("127.0.1.{address}")],
            conditions: Some(EndpointConditions {
                ready: Some(*ready),
                serving: Some(true),
                terminating: Some(!ready),
            }),
            ..Endpoint::default()
        })
        .collect();
    let name = format!("{service}-{index}");
    let mut slice = mk_endpoint_slice_named(&name, service, "http", Some(8080), endpoints);
    slice.ports.get_or_insert_with(Vec::new).push(EndpointPort {
        port: Some(8081),
        ..EndpointPort::default()
    });
    slice
}

/// TLS Secret `name` holding pair `content` of [`pairs`], or something that is no pair.
fn secret(name: &str, content: usize) -> Secret {
    let (cert, key) = pairs()
        .get(content)
        .map_or(("not a cert", "not a key"), |(c, k)| {
            (c.as_str(), k.as_str())
        });
    mk_tls_secret(name, cert, key)
}

fn ingress(index: usize, variant: usize) -> Ingress {
    let name = format!("ing-{index}");
    let host = format!("h{}.example.com", (index + variant) % 3);
    let service = SERVICES[(index + variant) % SERVICES.len()];
    let rule = mk_rule(
        Some(&host),
        &[
            prefix("/", service),
            mk_path("/missing", "Prefix", "nowhere"),
        ],
    );
    let ingress = with_class(mk_ingress_with_rules(&name, vec![rule]), None);
    let secret = format!("tls-{}", variant % 3);
    let ingress = with_tls(ingress, &[(&[&host], &secret)]);
    let ingress = if variant == 2 {
        with_default_backend(ingress, "web", 80)
    } else {
        ingress
    };
    with_creation_timestamp(ingress, &format!("2024-01-0{}T00:00:00Z", index + 1))
}

fn apply(change: &Change, snapshot: &mut Snapshot, settings: &mut Settings) {
    match change {
        Change::Slice {
            service,
            slice: index,
            endpoints,
        } => {
            let name = SERVICES[*service];
            let slice_key = key(&format!("{name}-{index}"));
            match endpoints {
                Some(endpoints) => {
                    snapshot
                        .endpoint_slices
                        .insert(slice_key, object(&slice(name, *index, endpoints)));
                }
                None => {
                    snapshot.endpoint_slices.remove(&slice_key);
                }
            }
        }
        Change::Secret {
            secret: index,
            content,
        } => {
            let secret_key = key(&format!("tls-{index}"));
            if *content > pairs().len() {
                snapshot.secrets.remove(&secret_key);
            } else {
                let name = format!("tls-{index}");
                snapshot
                    .secrets
                    .insert(secret_key, Arc::new(secret(&name, *content)));
            }
        }
        Change::Ingress {
            ingress: index,
            variant,
        } => {
            snapshot.ingresses.insert(
                key(&format!("ing-{index}")),
                object(&ingress(*index, *variant)),
            );
        }
        Change::RouteTo { ingress, service } => {
            edit_ingress(snapshot, *ingress, |ingress| {
                let backend = first_rule_path(ingress, 0).backend.service.as_mut();
                backend.expect("a Service").name = SERVICES[*service].to_string();
            });
        }
        Change::Path { ingress, path } => {
            edit_ingress(snapshot, *ingress, |ingress| {
                first_rule_path(ingress, 1).path = Some(path.to_string());
            });
        }
        Change::AllowList { ingress, set } => {
            let annotations: &[(&str, &str)] = if *set {
                &[("tugboat.dev/allow-list", "10.0.0.0/8")]
            } else {
                &[]
            };
            set_annotations(snapshot, *ingress, annotations);
        }
        Change::Canary { ingress, weight } => {
            let weight = weight.map(|weight| weight.to_string());
            let annotations: &[(&str, &str)] = match &weight {
                Some(weight) => &[
                    ("nginx.ingress.kubernetes.io/canary", "true"),
                    ("nginx.ingress.kubernetes.io/canary-weight", weight),
                ],
                None => &[],
            };
            set_annotations(snapshot, *ingress, annotations);
        }
        Change::Alias { ingress, aliases } => {
            let annotations: &[(&str, &str)] = match aliases {
                Some(aliases) => &[("nginx.ingress.kubernetes.io/server-alias", aliases)],
                None => &[],
            };
            set_annotations(snapshot, *ingress, annotations);
        }
        Change::Www { ingress, set } => {
            let annotations: &[(&str, &str)] = if *set {
                &[("nginx.ingress.kubernetes.io/from-to-www-redirect", "true")]
            } else {
                &[]
            };
            set_annotations(snapshot, *ingress, annotations);
        }
        Change::DeleteIngress(index) => {
            snapshot.ingresses.remove(&key(&format!("ing-{index}")));
        }
        Change::Service {
            service: index,
            named,
        } => {
            let name = SERVICES[*index];
            snapshot
                .services
                .insert(key(name), object(&service(name, *named)));
        }
        Change::DefaultCertificate(set) => {
            settings.default_certificate = set.then(|| key("tls-2"));
        }
        Change::Wait(seconds) => settings.now += seconds,
    }
}

/// Changes Ingress `index` in place, when it exists.
fn edit_ingress(
    snapshot: &mut Snapshot,
    index: usize,
    edit: impl FnOnce(&mut tugboat_model::objects::Ingress),
) {
    let ingress_key = key(&format!("ing-{index}"));
    let Some(current) = snapshot.ingresses.get(&ingress_key) else {
        return;
    };
    let mut ingress = current.as_ref().clone();
    edit(&mut ingress);
    snapshot.ingresses.insert(ingress_key, Arc::new(ingress));
}

/// Path `index` of the first rule of `ingress`, which has two.
fn first_rule_path(
    ingress: &mut tugboat_model::objects::Ingress,
    index: usize,
) -> &mut k8s_openapi::api::networking::v1::HTTPIngressPath {
    let rules = ingress.spec.as_mut().and_then(|spec| spec.rules.as_mut());
    let http = rules.expect("rules")[0].http.as_mut().expect("paths");
    &mut http.paths[index]
}

/// Ingress `index`, when it exists, with exactly these annotations.
fn set_annotations(snapshot: &mut Snapshot, index: usize, annotations: &[(&str, &str)]) {
    edit_ingress(snapshot, index, |ingress| {
        ingress.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(name, value)| (name.to_string(), value.to_string()))
                .collect(),
        );
    });
}

fn change() -> impl Strategy<Value = Change> {
    let endpoints = proptest::collection::vec((1u8..6, any::<bool>()), 0..4);
    prop_oneof![
        6 => (0..SERVICES.len(), 0..2usize, proptest::option::weighted(0.85, endpoints))
            .prop_map(|(service, slice, endpoints)| Change::Slice { service, slice, endpoints }),
        3 => (0..3usize, 0..5usize).prop_map(|(secret, content)| Change::Secret { secret, content }),
        1 => (0..3usize, 0..3usize).prop_map(|(ingress, variant)| Change::Ingress { ingress, variant }),
        3 => (0..3usize, 0..SERVICES.len()).prop_map(|(ingress, service)| Change::RouteTo { ingress, service }),
        2 => (0..3usize, prop_oneof![Just("/missing"), Just("/a"), Just("/b")])
            .prop_map(|(ingress, path)| Change::Path { ingress, path }),
        1 => (0..3usize, any::<bool>()).prop_map(|(ingress, set)| Change::AllowList { ingress, set }),
        1 => (0..3usize, proptest::option::of(prop_oneof![Just(0u64), Just(30), Just(100)]))
            .prop_map(|(ingress, weight)| Change::Canary { ingress, weight }),
        1 => (0..3usize, proptest::option::of(prop_oneof![
                Just("alias.example.com"),
                Just("h0.example.com"),
                Just("h1.example.com,alias.example.com"),
            Just("www.h2.example.com"),
            ]))
            .prop_map(|(ingress, aliases)| Change::Alias { ingress, aliases }),
        1 => (0..3usize, any::<bool>()).prop_map(|(ingress, set)| Change::Www { ingress, set }),
        1 => (0..3usize).prop_map(Change::DeleteIngress),
        1 => (0..SERVICES.len(), any::<bool>())
            .prop_map(|(service, named)| Change::Service { service, named }),
        1 => any::<bool>().prop_map(Change::DefaultCertificate),
        1 => prop_oneof![Just(60i64), Just(4 * 86_400), Just(30 * 86_400)].prop_map(Change::Wait),
    ]
}

fn start() -> (Snapshot, Settings) {
    let mut snapshot = Snapshot::default();
    let mut settings = Settings::new(JAN_1 + 3600);
    let setup = [
        Change::Service {
            service: 0,
            named: true,
        },
        Change::Service {
            service: 1,
            named: false,
        },
        Change::Service {
            service: 2,
            named: false,
        },
        Change::Slice {
            service: 0,
            slice: 0,
            endpoints: Some(vec![(1, true), (2, true)]),
        },
        Change::Slice {
            service: 1,
            slice: 0,
            endpoints: Some(vec![(3, true)]),
        },
        Change::Secret {
            secret: 0,
            content: 0,
        },
        Change::Secret {
            secret: 1,
            content: 2,
        },
        Change::Ingress {
            ingress: 0,
            variant: 0,
        },
        Change::Ingress {
            ingress: 1,
            variant: 1,
        },
        Change::Ingress {
            ingress: 2,
            variant: 2,
        },
    ];
    for change in &setup {
        apply(change, &mut snapshot, &mut settings);
    }
    (snapshot, settings)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn patches_give_what_a_full_build_gives(changes in proptest::collection::vec(change(), 1..40)) {
        let (mut snapshot, mut settings) = start();
        let mut model = Model::default();
        let mut current: BuildOutput = match model.update(&snapshot, &settings) {
            Update::Full(output, _) => *output,
            Update::Patch(_) => panic!("the first update is a full build"),
        };
        for change in &changes {
            apply(change, &mut snapshot, &mut settings);
            match model.update(&snapshot, &settings) {
                Update::Patch(patch) => patch.apply_to_output(&mut current),
                Update::Full(output, _) => current = *output,
            }
            prop_assert_eq!(&current, &build(&snapshot, &settings), "after {:?}", change);
        }
    }
}

#[test]
fn endpoint_and_certificate_changes_are_patches() {
    let (mut snapshot, mut settings) = start();
    let mut model = Model::default();
    assert!(matches!(
        model.update(&snapshot, &settings),
        Update::Full(..)
    ));
    apply(
        &Change::Slice {
            service: 0,
            slice: 0,
            endpoints: Some(vec![(4, true)]),
        },
        &mut snapshot,
        &mut settings,
    );
    let Update::Patch(patch) = model.update(&snapshot, &settings) else {
        panic!("an endpoint change is a patch");
    };
    assert_eq!(patch.endpoints.len(), 1, "{patch:?}");
    assert!(patch.certificates.is_empty());
    apply(
        &Change::Secret {
            secret: 0,
            content: 1,
        },
        &mut snapshot,
        &mut settings,
    );
    let Update::Patch(patch) = model.update(&snapshot, &settings) else {
        panic!("a certificate rotation is a patch");
    };
    assert_eq!(
        patch.certificates.keys().collect::<Vec<_>>(),
        vec!["default_tls-0"]
    );
    // Secret tls-1 becomes valid on Jan 10: the outcome changes, so a full build.
    apply(&Change::Wait(10 * 86_400), &mut snapshot, &mut settings);
    assert!(matches!(
        model.update(&snapshot, &settings),
        Update::Full(_, tugboat_model::Rebuilt::Validity)
    ));
    assert!(settings.now > JAN_10);
    // An Ingress change: a full build.
    apply(
        &Change::Ingress {
            ingress: 0,
            variant: 1,
        },
        &mut snapshot,
        &mut settings,
    );
    assert!(matches!(
        model.update(&snapshot, &settings),
        Update::Full(_, tugboat_model::Rebuilt::Ingresses(_))
    ));
}

#[test]
fn a_route_moved_between_services_is_a_patch_of_its_routes() {
    let (mut snapshot, mut settings) = start();
    let mut model = Model::default();
    let Update::Full(first, _) = model.update(&snapshot, &settings) else {
        panic!("the first update is a full build");
    };
    let mut current = *first;
    let ext = tugboat_model::BackendName::parse("default_ext_80").expect("a backend name");
    // ing-1 alone uses Service ext: moving it to api (used by ing-2) drops ext.
    for (service, ext_after) in [(1, None), (2, Some(()))] {
        apply(
            &Change::RouteTo {
                ingress: 1,
                service,
            },
            &mut snapshot,
            &mut settings,
        );
        let Update::Patch(patch) = model.update(&snapshot, &settings) else {
            panic!("moving a route to an existing Service is a patch");
        };
        assert_eq!(
            patch.routes.keys().collect::<Vec<_>>(),
            vec![&key("ing-1")],
            "{patch:?}"
        );
        assert_eq!(
            patch.backends.get(&ext).map(|b| b.as_ref().map(|_| ())),
            Some(ext_after),
            "{patch:?}"
        );
        patch.apply_to_output(&mut current);
        assert_eq!(current, build(&snapshot, &settings));
    }
    // New keys on an Ingress: an allow list changes the route's features, a full build.
    apply(
        &Change::AllowList {
            ingress: 1,
            set: true,
        },
        &mut snapshot,
        &mut settings,
    );
    assert!(matches!(
        model.update(&snapshot, &settings),
        Update::Full(_, tugboat_model::Rebuilt::Ingresses(_))
    ));
}
