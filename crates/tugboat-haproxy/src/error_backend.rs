//! ingress-nginx's `default-backend` and `custom-http-errors`: another backend answers
//! for a route whose backend has no usable server, or whose answer has one of some
//! status codes.
//!
//! **No usable server** is decided per request in the frontend, with no Lua: the route's
//! feature set names the fallback (`txn.fallback`), and one rule per backend that such a
//! route uses tests `nbsrv(<backend>)`, the number of its servers that are up and not
//! in maintenance, then switches `txn.backend` to the fallback. Endpoints come and go
//! through server slots at runtime (a slot in maintenance does not count), so when the
//! last endpoint of a Service goes, or the first comes back, the switch follows at once,
//! with no reload. Backup servers were the other way: they would copy the default
//! backend's endpoints into every backend that falls back to it (each endpoint change
//! of the default backend then touches all of them), and a backend shared by Ingresses
//! with different `default-backend`s could not have both. The rules grow with the
//! backends of such routes, not with the routes; a route that starts or stops using
//! one reloads (the planner sees the config change).
//!
//! **Status codes** need the response of another backend in place of the one haproxy
//! has: haproxy cannot send a response to another backend by itself, so a small Lua
//! action (`core.httpclient`, haproxy 2.6 and later built with Lua, as the official
//! image is) asks the error backend through an internal frontend bound to an abstract
//! socket, and answers the client with what it got (`txn:done`). The socket's name
//! comes from the config folder, so two haproxy processes on one host never share it.
//! On a haproxy built without Lua, the config warns at every load, naming the key and
//! the Ingresses, the backend's answers pass unchanged, and haproxy's environment gets
//! [`WITHOUT_LUA_VARIABLE`], which the controller reads after a reload to report a
//! problem on each Ingress ([`without_lua_problems`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use tugboat_model::features::{ErrorBackend, FeatureSetId, RouteFeatures};
use tugboat_model::problem::ProblemReason;
use tugboat_model::{BackendName, Desired, ObjectProblem, ObjectRef};

use crate::rules::{NOT_FOUND_BACKEND, group, groups_acl, sets_acl};
use crate::settings::RenderSettings;

/// The Lua script, loaded with `lua-load` when some route uses `custom-http-errors`.
pub const SCRIPT: &str = include_str!("lua/error_pages.lua");

/// The internal frontend the Lua action sends its requests to.
pub const FRONTEND: &str = "tugboat_error_pages";

/// The environment variable a haproxy built without Lua sets (to `1`) when the config
/// needs the script: `show env` tells the controller.
pub const WITHOUT_LUA_VARIABLE: &str = "TUGBOAT_HAPROXY_WITHOUT_LUA";

/// Whether a `show env WITHOUT_LUA_VARIABLE` answer says haproxy has no Lua.
pub fn says_without_lua(show_env: &str) -> bool {
    show_env
        .lines()
        .any(|line| line.trim() == format!("{WITHOUT_LUA_VARIABLE}=1"))
}

/// The problems of a haproxy without Lua: one per Ingress whose `custom-http-errors`
/// it cannot run, naming the key's field.
pub fn without_lua_problems(desired: &Desired) -> Vec<ObjectProblem> {
    let mut problems: Vec<ObjectProblem> = desired
        .feature_sets
        .values()
        .filter_map(|f| f.error_backend.as_ref())
        .filter(|e| !e.codes.is_empty())
        .map(|e| ObjectProblem {
            object: ObjectRef::of("Ingress", &e.ingress),
            field: e
                .codes_field
                .clone()
                .unwrap_or_else(|| "metadata.annotations".to_string()),
            reason: ProblemReason::NotAllowed,
            message: "key 'custom-http-errors' needs haproxy built with Lua (as the official \
                      image is), and this haproxy is not: the backend's answers pass unchanged"
                .to_string(),
        })
        .collect();
    problems.sort();
    problems.dedup();
    problems
}

/// Whether some feature set replaces answers by status code (and haproxy needs the
/// script and the internal frontend).
pub fn needs_script(sets: &BTreeMap<FeatureSetId, RouteFeatures>) -> bool {
    sets.values().any(|f| {
        f.error_backend
            .as_ref()
            .is_some_and(|e| !e.codes.is_empty())
    })
}

/// Whether some feature set falls back to another backend without a usable server.
pub fn has_fallback(sets: &BTreeMap<FeatureSetId, RouteFeatures>) -> bool {
    sets.values()
        .any(|f| f.error_backend.as_ref().is_some_and(|e| e.when_unserved))
}

/// The backend that answers for `error_backend`: its own, else the controller's
/// default backend.
fn target<'a>(error_backend: &'a ErrorBackend, desired: &'a Desired) -> &'a str {
    error_backend
        .backend
        .as_ref()
        .or(desired.default_backend.as_ref())
        .map_or(NOT_FOUND_BACKEND, BackendName::as_str)
}

/// The backends of the routes (and their canaries) whose feature set falls back when
/// they have no usable server.
fn guarded_backends(desired: &Desired) -> BTreeSet<&BackendName> {
    let falls_back = |id: &FeatureSetId| {
        desired
            .feature_sets
            .get(id)
            .and_then(|f| f.error_backend.as_ref())
            .is_some_and(|e| e.when_unserved)
    };
    desired
        .every_route()
        .filter(|route| route.features.as_ref().is_some_and(falls_back))
        .flat_map(|route| {
            std::iter::once(&route.backend).chain(route.canary.as_ref().map(|c| &c.backend))
        })
        .filter(|name| desired.backends.contains_key(*name))
        .collect()
}

/// The `http-request` rules, last before `use_backend` (after a canary has chosen its
/// backend): what the error answers need to know of the request, then the switch to
/// the fallback of the routes whose backend has no usable server.
pub fn request_rules(desired: &Desired, out: &mut String) {
    let sets = &desired.feature_sets;
    let groups = group(sets, |f| f.error_backend.as_ref());
    if groups.is_empty() {
        return;
    }
    let acl = groups_acl(&groups);
    // As ingress-nginx: the backend and the error backend get the same request id.
    let _ = writeln!(
        out,
        "    http-request set-header X-Request-ID %[uuid] if {acl} !{{ req.hdr(x-request-id) -m found }}"
    );
    for (error_backend, ids) in &groups {
        let acl = sets_acl(ids);
        let ingress = &error_backend.ingress;
        let _ = writeln!(
            out,
            "    http-request set-var(txn.error_ns) str({}) if {acl}\n    \
             http-request set-var(txn.error_ingress) str({}) if {acl}",
            ingress.namespace, ingress.name
        );
        if error_backend.when_unserved {
            let _ = writeln!(
                out,
                "    http-request set-var(txn.fallback) str({}) if {acl}",
                target(error_backend, desired)
            );
        }
    }
    let with_codes: Vec<&FeatureSetId> = groups
        .iter()
        .filter(|(e, _)| !e.codes.is_empty())
        .flat_map(|(_, ids)| ids.iter().copied())
        .collect();
    if !with_codes.is_empty() {
        let acl = sets_acl(&with_codes);
        let _ = writeln!(
            out,
            "    http-request set-var(txn.error_host) req.hdr(host) if {acl}\n    \
             http-request set-var(txn.error_format) req.fhdr(accept) if {acl}\n    \
             http-request set-var(txn.error_id) req.fhdr(x-request-id) if {acl}"
        );
    }
    let guarded = guarded_backends(desired);
    if guarded.is_empty() {
        return;
    }
    for backend in guarded {
        let _ = writeln!(
            out,
            "    http-request set-var(txn.unserved) bool(true) if {{ var(txn.fallback) -m found }} \
             {{ var(txn.backend) -m str {backend} }} !{{ nbsrv({backend}) gt 0 }}"
        );
    }
    let unserved = "{ var(txn.unserved) -m bool }";
    let _ = writeln!(
        out,
        "    http-request set-header X-Code 503 if {unserved}\n    \
         http-request set-header X-Format %[req.fhdr(accept)] if {unserved}\n    \
         http-request set-header X-Namespace %[var(txn.error_ns)] if {unserved}\n    \
         http-request set-header X-Ingress-Name %[var(txn.error_ingress)] if {unserved}\n    \
         http-request set-header X-Service-Name %[var(txn.backend),field(2,_)] if {unserved}\n    \
         http-request set-header X-Service-Port %[var(txn.backend),field(3,_)] if {unserved}\n    \
         http-request set-var(txn.backend) var(txn.fallback) if {unserved}"
    );
}

/// The `http-response` rules: one Lua call per distinct setting, for the answers with
/// its codes (not for an answer of the fallback itself). Without Lua, a warning at
/// every load names the key and the Ingresses.
pub fn response_rules(desired: &Desired, settings: &RenderSettings, out: &mut String) {
    let groups = group(&desired.feature_sets, |f| {
        f.error_backend.as_ref().filter(|e| !e.codes.is_empty())
    });
    if groups.is_empty() {
        return;
    }
    let address = settings.error_pages_address();
    out.push_str("    .if feature(LUA)\n");
    for (error_backend, ids) in &groups {
        let codes: Vec<String> = error_backend.codes.iter().map(u16::to_string).collect();
        let _ = writeln!(
            out,
            "    http-response lua.tugboat_error_page {} {address} if {} {{ status {} }} !{{ var(txn.unserved) -m bool }}",
            target(error_backend, desired),
            sets_acl(ids),
            codes.join(" ")
        );
    }
    let ingresses: BTreeSet<String> = groups
        .keys()
        .map(|e| format!("{}/{}", e.ingress.namespace, e.ingress.name))
        .collect();
    let ingresses: Vec<String> = ingresses.into_iter().collect();
    let _ = writeln!(
        out,
        "    .else\n    .warning \"tugboat: key custom-http-errors of Ingress {} needs haproxy built with Lua: the backends' answers pass unchanged\"\n    .endif",
        ingresses.join(", ")
    );
}

/// The internal frontend the Lua action asks: to the backend its `X-Tugboat-Backend`
/// header names (else the built-in 404), bound to an abstract socket nothing outside
/// the pod's network namespace reaches. Empty when no route needs it.
pub fn section(desired: &Desired, settings: &RenderSettings) -> String {
    if !needs_script(&desired.feature_sets) {
        return String::new();
    }
    format!(
        "
# The error pages of custom-http-errors: the Lua action asks the backend named in
# X-Tugboat-Backend here.
.if feature(LUA)
frontend {FRONTEND}
    bind {}
    http-request set-var(txn.backend) req.hdr(x-tugboat-backend)
    http-request del-header x-tugboat-backend
    use_backend %[var(txn.backend)] if {{ var(txn.backend) -m found }}
    default_backend {NOT_FOUND_BACKEND}
.endif
",
        settings.error_pages_address()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tugboat_model::desired::{HostMatch, PathMatch, ServicePortRef};
    use tugboat_model::{Backend, ObjectKey, Route};

    fn backend_name(service: &str) -> BackendName {
        BackendName::for_service_port(
            &ObjectKey::new("shop", service),
            &ServicePortRef::Number(80),
        )
        .expect("a valid name")
    }

    fn backend(service: &str) -> Backend {
        Backend {
            service: ObjectKey::new("shop", service),
            port: ServicePortRef::Number(80),
            endpoints: vec![],
            draining: vec![],
            external: None,
            options: Default::default(),
        }
    }

    /// A state with one route to `web` whose Ingress `front` has this error backend.
    fn desired(error_backend: ErrorBackend) -> (Desired, FeatureSetId) {
        let features = RouteFeatures {
            error_backend: Some(error_backend),
            ..RouteFeatures::default()
        };
        let id = FeatureSetId::of(&features);
        let mut desired = Desired::default();
        desired.feature_sets.insert(id.clone(), features);
        for service in ["web", "errors"] {
            desired
                .backends
                .insert(backend_name(service), backend(service));
        }
        desired.routes.push(Route {
            host: HostMatch::Exact("shop.example.com".into()),
            path: PathMatch::Prefix("/".into()),
            backend: backend_name("web"),
            ingress: ObjectKey::new("shop", "front"),
            owner_kind: tugboat_model::RouteOwnerKind::Ingress,
            features: Some(id.clone()),
            canary: None,
        });
        (desired, id)
    }

    fn error_backend(backend: Option<&str>, codes: &[u16]) -> ErrorBackend {
        ErrorBackend {
            backend: backend.map(backend_name),
            when_unserved: backend.is_some() || codes.contains(&503),
            codes: codes.to_vec(),
            ingress: ObjectKey::new("shop", "front"),
            codes_field: (!codes.is_empty())
                .then(|| "metadata.annotations.tugboat.dev/custom-http-errors".to_string()),
        }
    }

    #[test]
    fn a_haproxy_without_lua_is_a_problem_on_each_ingress_with_codes() {
        let (with_codes, _) = desired(error_backend(Some("errors"), &[404]));
        assert!(says_without_lua(&format!("{WITHOUT_LUA_VARIABLE}=1\n")));
        assert!(!says_without_lua("Variable not found\n"));
        let problems = without_lua_problems(&with_codes);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(&*problems[0].object.name, "front");
        assert_eq!(
            problems[0].field,
            "metadata.annotations.tugboat.dev/custom-http-errors"
        );
        assert!(problems[0].message.contains("custom-http-errors"));
        // default-backend alone needs no Lua.
        let (without_codes, _) = desired(error_backend(Some("errors"), &[]));
        assert!(without_lua_problems(&without_codes).is_empty());
    }

    #[test]
    fn nothing_without_an_error_backend() {
        let desired = Desired::default();
        let (mut request, mut response) = (String::new(), String::new());
        request_rules(&desired, &mut request);
        response_rules(&desired, &RenderSettings::example(), &mut response);
        assert_eq!((request.as_str(), response.as_str()), ("", ""));
        assert_eq!(section(&desired, &RenderSettings::example()), "");
    }

    #[test]
    fn a_backend_without_servers_switches_to_the_default_backend_annotation() {
        let (desired, id) = desired(error_backend(Some("errors"), &[]));
        let mut out = String::new();
        request_rules(&desired, &mut out);
        let acl = format!("{{ var(txn.fs) -m str {id} }}");
        assert!(
            out.contains(&format!(
                "    http-request set-var(txn.fallback) str(shop_errors_80) if {acl}\n"
            )),
            "{out}"
        );
        assert!(out.contains(
            "    http-request set-var(txn.unserved) bool(true) if { var(txn.fallback) -m found } \
             { var(txn.backend) -m str shop_web_80 } !{ nbsrv(shop_web_80) gt 0 }\n"
        ));
        let switch = out
            .find("http-request set-var(txn.backend) var(txn.fallback) if { var(txn.unserved) -m bool }")
            .expect("the switch");
        let service = out
            .find("set-header X-Service-Name %[var(txn.backend),field(2,_)]")
            .expect("the service header");
        assert!(
            service < switch,
            "the headers name the route's Service: {out}"
        );
        assert!(
            out.contains("http-request set-header X-Code 503 if { var(txn.unserved) -m bool }")
        );
        // No Lua without codes.
        let mut response = String::new();
        response_rules(&desired, &RenderSettings::example(), &mut response);
        assert_eq!(response, "");
        assert!(!needs_script(&desired.feature_sets));
    }

    #[test]
    fn codes_call_the_lua_action_with_the_target_and_the_internal_address() {
        let (desired, id) = desired(error_backend(None, &[404, 500]));
        let settings = RenderSettings::example();
        let mut out = String::new();
        response_rules(&desired, &settings, &mut out);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 5, "{out}");
        assert_eq!(lines[0], "    .if feature(LUA)");
        assert_eq!(
            lines[1],
            format!(
                "    http-response lua.tugboat_error_page {NOT_FOUND_BACKEND} {} if {{ var(txn.fs) -m str {id} }} {{ status 404 500 }} !{{ var(txn.unserved) -m bool }}",
                settings.error_pages_address()
            )
        );
        assert_eq!(lines[2], "    .else");
        assert!(
            lines[3].starts_with(
                "    .warning \"tugboat: key custom-http-errors of Ingress shop/front "
            )
        );
        assert_eq!(lines[4], "    .endif");
        assert!(needs_script(&desired.feature_sets));
        assert!(section(&desired, &settings).contains(&format!(
            ".if feature(LUA)\nfrontend {FRONTEND}\n    bind {}\n",
            settings.error_pages_address()
        )));
        // Without 503 among the codes, a backend without servers answers 503 itself.
        let mut request = String::new();
        request_rules(&desired, &mut request);
        assert!(!request.contains("nbsrv"), "{request}");
        assert!(request.contains("set-var(txn.error_format) req.fhdr(accept)"));
    }

    #[test]
    fn codes_without_an_annotation_go_to_the_ingress_default_backend() {
        let (mut desired, _) = desired(error_backend(None, &[503]));
        desired.default_backend = Some(backend_name("errors"));
        let mut out = String::new();
        request_rules(&desired, &mut out);
        assert!(
            out.contains("set-var(txn.fallback) str(shop_errors_80)"),
            "{out}"
        );
        assert!(out.contains("nbsrv(shop_web_80)"), "{out}");
        let mut response = String::new();
        response_rules(&desired, &RenderSettings::example(), &mut response);
        assert!(
            response.contains("lua.tugboat_error_page shop_errors_80 "),
            "{response}"
        );
    }
}
