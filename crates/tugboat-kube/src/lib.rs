//! The Kubernetes side of Tugboat: where the objects come from.
//!
//! A source fills a [`tugboat_model::Snapshot`] and publishes a new one on every change,
//! through a `tokio::sync::watch` channel, so the controller always works on the latest
//! complete view and never on a half-applied stream of events. Today's source is a folder
//! of manifests ([`manifests`]); the API server source ([`api_source`]) publishes through the same channel.

pub mod api_source;
pub mod events;
pub mod gateway;
pub mod gateway_status;
pub mod leader;
pub mod manifests;
pub mod status;
pub mod store;
pub mod watch_backoff;
pub mod watch_driver;
pub mod watched;

pub use manifests::{ManifestProblem, load_folder, watch_folder};
