//! Tugboat, the binary's library: command line, wiring of source, model and haproxy,
//! and the controller loop. Everything with logic of its own lives in the crates it
//! wires: `tugboat-kube` (sources), `tugboat-model` (pure core), `tugboat-haproxy`.

pub mod admin;
pub mod cli;
pub mod cluster;
pub mod command_edges;
pub mod controller;
pub mod logging;
pub mod metrics;
pub mod migrate;
pub mod profiling;
pub mod request_metrics;
pub mod status;
pub mod tls;
