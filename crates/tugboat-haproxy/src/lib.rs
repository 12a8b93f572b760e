//! The haproxy side of Tugboat.
//!
//! - [`render`] turns the desired state into haproxy's files (config and maps), pure;
//! - [`files`] writes them atomically and can put the previous ones back;
//! - [`blocking`] runs such blocking work off the async runtime;
//! - [`body_limit`] holds request bodies to `proxy-body-size` however they are framed;
//! - [`external_auth`] is the Lua action and the rules of `auth-url`;
//! - [`error_backend`] is the fallback and the Lua action of `default-backend` and
//!   `custom-http-errors`;
//! - [`client_certs`] is the crt-list options and the rules of `auth-tls-secret`;
//! - [`cli`] talks to haproxy's master CLI socket (commands, `show proc`, `reload`);
//! - [`layout`] keeps every endpoint in a stable server slot;
//! - [`map_text`] edits route map files in place, a line at a time;
//! - [`passthrough`] is the TCP frontend of TLS passthrough, chosen by SNI;
//! - [`tcp_services`] is the frontends of TCP services, one per port;
//! - [`request_stats`] counts requests per route in a stick table haproxy keeps;
//! - [`runtime`] names the changes haproxy takes without a reload, as CLI commands;
//! - [`plan`] decides, from what is applied and what is desired, what has to change;
//! - [`apply`] carries a plan out: files first, then haproxy, rolling back on failure.

pub mod access_log;
pub mod apply;
pub mod blocking;
pub mod body_limit;
pub mod cli;
pub mod client_address;
pub mod client_certs;
pub mod error_backend;
pub mod external_auth;
pub mod features;
pub mod files;
pub mod gateway_features;
pub mod layout;
pub mod map_text;
pub mod passthrough;
pub mod plan;
pub mod render;
pub mod request_stats;
pub mod rules;
pub mod runtime;
pub mod settings;
pub mod tcp_services;

pub use apply::{Applier, ApplyError, ApplyReport, Delivery, supports_dynamic_backends};
pub use cli::{CliError, MasterCli, ProcInfo, ReloadOutcome};
pub use layout::Layout;
pub use plan::{
    Applied, Plan, ReloadReason, ReloadWindow, plan, plan_patch, plan_within, runtime_projection,
};
pub use render::{RenderSettings, RenderedFiles, render};
