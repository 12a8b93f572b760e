//! Driving one watch: its events go into the kind's store, each change wakes whoever
//! builds snapshots, and a failing watch is logged once when it fails and once when it
//! is back. Shared by the API source's kinds and the Gateway API's.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use kube::runtime::watcher;
use tokio::sync::Notify;

use crate::store::StoreWriter;
use crate::watched::Watched;

/// Number of objects held in the stores, by kind (a metric).
pub type ObjectCounts = BTreeMap<&'static str, usize>;

/// Applies the events of `stream` (a watch of `kind`) to `writer` until the stream ends.
pub(crate) async fn drive<S, K>(
    kind: String,
    stream: S,
    mut writer: StoreWriter<K>,
    changed: Arc<Notify>,
) where
    S: Stream<Item = Result<watcher::Event<K::Wire>, watcher::Error>>,
    K: Watched,
{
    let mut stream = std::pin::pin!(stream);
    let mut failing = false;
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) => {
                if failing {
                    tracing::info!(kind, "watch is back");
                    failing = false;
                }
                if writer.apply(event) {
                    changed.notify_one();
                }
            }
            Err(err) => {
                if !failing {
                    tracing::warn!(kind, "watch failed, retrying with backoff: {err}");
                }
                failing = true;
            }
        }
    }
}
