//! The objects' wire shapes: kinds, fields and a YAML round trip.

use std::net::SocketAddr;

use k8s_openapi::api::discovery::v1::EndpointConditions;
use serde::Deserialize;

use super::*;

#[test]
fn objects_carry_their_kind_and_survive_a_yaml_round_trip() {
    let ingress = with_keys(
        with_tls(
            mk_ingress("site", "site.example.com", "web"),
            &[(&["site.example.com"], "site-tls")],
        ),
        &[("auth-type", "basic-auth")],
    );
    let json = to_json(&ingress);
    assert_eq!(json["apiVersion"], "networking.k8s.io/v1");
    assert_eq!(json["kind"], "Ingress");
    assert_eq!(
        json["metadata"]["annotations"]["tugboat.dev/auth-type"],
        "basic-auth"
    );
    assert_eq!(json["spec"]["tls"][0]["secretName"], "site-tls");
    let secret = to_json(&mk_basic_auth_secret("users", &[("ann", "$6$x$y")]));
    assert_eq!(secret["data"]["auth"], "YW5uOiQ2JHgkeQo=");
    let text = to_yaml(&[json.clone(), secret.clone()]);
    let back: Vec<serde_json::Value> = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde_json::Value::deserialize(d).expect("YAML"))
        .collect();
    assert_eq!(back, vec![json, secret]);
    let slice = to_json(&mk_endpoint_slice(
        "web",
        "http",
        &["127.0.0.1:8080".parse().expect("address")],
    ));
    assert_eq!(slice["ports"][0]["port"], 8080);
    assert_eq!(slice["endpoints"][0]["addresses"][0], "127.0.0.1");
}

#[test]
fn shapes_for_defaults_external_names_ages_and_endpoint_states() {
    let ingress = to_json(&with_creation_timestamp(
        with_default_backend(
            mk_ingress("site", "site.example.com", "web"),
            "fallback",
            8080,
        ),
        "2024-01-01T00:00:00Z",
    ));
    assert_eq!(
        ingress["spec"]["defaultBackend"]["service"]["name"],
        "fallback"
    );
    assert_eq!(
        ingress["spec"]["defaultBackend"]["service"]["port"]["number"],
        8080
    );
    assert_eq!(
        ingress["metadata"]["creationTimestamp"],
        "2024-01-01T00:00:00Z"
    );
    let outside = to_json(&mk_external_name_service("outside", "localhost", 8080));
    assert_eq!(outside["spec"]["type"], "ExternalName");
    assert_eq!(outside["spec"]["externalName"], "localhost");
    assert_eq!(outside["spec"]["ports"][0]["port"], 8080);
    let addrs: Vec<SocketAddr> = ["127.0.0.1:80", "127.0.0.2:80"]
        .iter()
        .map(|a| a.parse().expect("address"))
        .collect();
    let slice = to_json(&with_endpoint_conditions(
        mk_endpoint_slice("web", "http", &addrs),
        addrs[1].ip(),
        EndpointConditions {
            ready: Some(false),
            serving: Some(true),
            terminating: Some(true),
        },
    ));
    assert_eq!(slice["endpoints"][0]["conditions"]["ready"], true);
    assert_eq!(slice["endpoints"][1]["conditions"]["ready"], false);
    assert_eq!(slice["endpoints"][1]["conditions"]["terminating"], true);
    let class = to_json(&mk_ingress_class("tugboat", "tugboat.dev/ingress", true));
    assert_eq!(class["kind"], "IngressClass");
    assert!(class["metadata"]["namespace"].is_null());
    assert_eq!(class["spec"]["controller"], "tugboat.dev/ingress");
    assert_eq!(
        class["metadata"]["annotations"]["ingressclass.kubernetes.io/is-default-class"],
        "true"
    );
    let other = to_json(&mk_ingress_class("nginx", "k8s.io/ingress-nginx", false));
    assert!(other["metadata"]["annotations"].is_null());
}

#[test]
fn gateway_api_objects_carry_their_kind_and_wire_shape() {
    use serde_json::json;

    use crate::gateway::*;

    let listener = mk_https_listener("https", "a.example.com", (Some("certs"), "tls"))
        .routes_from_all_namespaces();
    let gateway = to_json(&in_namespace(
        with_generation(mk_gateway("gw", "tugboat", vec![listener]), 2),
        "shop",
    ));
    assert_eq!(gateway["apiVersion"], "gateway.networking.k8s.io/v1");
    assert_eq!(gateway["kind"], "Gateway");
    assert_eq!(gateway["metadata"]["namespace"], "shop");
    assert_eq!(gateway["metadata"]["generation"], 2);
    let listener = &gateway["spec"]["listeners"][0];
    assert_eq!(
        listener["tls"]["certificateRefs"],
        json!([{"name": "tls", "namespace": "certs"}])
    );
    assert_eq!(listener["allowedRoutes"]["namespaces"]["from"], "All");
    let redirect = mk_redirect()
        .status_code(301)
        .path(replace_prefix_match("/new"));
    let route = to_json(&with_creation_timestamp(
        mk_http_route_on(
            "web",
            mk_parent_ref("gw").section("https"),
            &["a.example.com"],
            vec![mk_rule_to(&[("Exact", "/cart")], "web", 80).filter(mk_redirect_filter(redirect))],
        ),
        "2024-01-01T00:00:00Z",
    ));
    assert_eq!(route["kind"], "HTTPRoute");
    assert_eq!(
        route["metadata"]["creationTimestamp"],
        "2024-01-01T00:00:00Z"
    );
    assert_eq!(
        route["spec"]["parentRefs"],
        json!([{"name": "gw", "sectionName": "https"}])
    );
    assert_eq!(
        route["spec"]["rules"][0],
        json!({
            "matches": [{"path": {"type": "Exact", "value": "/cart"}}],
            "filters": [{"type": "RequestRedirect", "requestRedirect": {
                "statusCode": 301,
                "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"}}}],
            "backendRefs": [{"name": "web", "port": 80}],
        })
    );
    let grant = to_json(&mk_service_grant("blog", "shop-routes", "shop").only_to("posts"));
    assert_eq!(grant["apiVersion"], "gateway.networking.k8s.io/v1beta1");
    assert_eq!(grant["metadata"]["namespace"], "blog");
    assert_eq!(
        grant["spec"],
        json!({"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute",
                         "namespace": "shop"}],
               "to": [{"group": "", "kind": "Service", "name": "posts"}]})
    );
    let class = to_json(&mk_gateway_class("tugboat", "tugboat.dev/gateway"));
    assert_eq!(class["spec"]["controllerName"], "tugboat.dev/gateway");
    assert!(class["metadata"]["namespace"].is_null());
    let namespace = to_json(&mk_namespace("blog", &[("team", "writers")]));
    assert_eq!(namespace["kind"], "Namespace");
    assert_eq!(namespace["metadata"]["labels"]["team"], "writers");
}

#[test]
fn tls_routes_and_passthrough_listeners_serialize_as_the_api_serves_them() {
    use serde_json::json;

    use crate::gateway::*;

    let listener = serde_json::to_value(mk_tls_passthrough_listener(
        "tls",
        443,
        Some("a.example.com"),
    ))
    .expect("a listener");
    assert_eq!(
        listener,
        json!({"name": "tls", "hostname": "a.example.com", "port": 443, "protocol": "TLS",
               "tls": {"mode": "Passthrough"}})
    );
    let route = to_json(&mk_tls_route(
        "argo",
        "gw",
        &["argo.example.com"],
        vec![mk_backend_ref("argocd", 443).weight(2)],
    ));
    assert_eq!(route["apiVersion"], "gateway.networking.k8s.io/v1");
    assert_eq!(route["kind"], "TLSRoute");
    assert_eq!(
        route["spec"],
        json!({"parentRefs": [{"name": "gw"}], "hostnames": ["argo.example.com"],
               "rules": [{"backendRefs": [{"name": "argocd", "port": 443, "weight": 2}]}]})
    );
}
