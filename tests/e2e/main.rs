//! The end-to-end tests: one binary, one module per suite. Each scenario runs on every
//! haproxy series of the matrix (`tugboat_testkit::haproxy_tests!`), against real
//! haproxy, real HTTP and, where objects come from the cluster, the fake API server.
//! Select a suite with `cargo nextest run -p tugboat-testkit --test e2e -E 'test(/^kube::/)'`.
#![allow(
    clippy::disallowed_methods,
    reason = "test code: blocking file work is fine here"
)]

mod access_log;
mod acme;
mod annotations;
mod api_features;
mod app_root;
mod backend_keys;
mod body_limit;
mod canary;
mod chart_pod;
mod client_address;
mod client_certs;
mod conformance;
mod cors;
mod dashboards;
mod dynamic_backends;
mod error_backend;
mod external_auth;
mod gateway;
mod keep_alive;
mod kube;
mod migration;
mod nginx_keys;
mod normalize;
mod passthrough;
mod peer_readings;
mod references;
mod regex_paths;
mod reload;
mod request_metrics;
mod routing;
mod runtime;
mod server_alias;
mod status;
mod tcp_services;
mod www_redirect;
