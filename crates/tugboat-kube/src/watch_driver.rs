//! Driving one watch: its events go into the kind's store, each change wakes whoever
//! builds snapshots ([`Changes`]), and a failing watch is logged once when it fails and
//! once when it is back. Shared by the API source's kinds and the Gateway API's.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use futures::{Stream, StreamExt};
use kube::runtime::watcher;
use tokio::sync::Notify;

use crate::store::StoreWriter;
use crate::watched::Watched;

/// Number of objects held in the stores, by kind (a metric).
pub type ObjectCounts = BTreeMap<&'static str, usize>;

/// The changes to the stores not yet taken into a snapshot: a wake-up for the snapshot
/// builder, and when the first of them arrived. Changes that arrive while a snapshot is
/// built wake the builder once more, so a burst is gathered into the next snapshot
/// without any timer.
#[derive(Debug, Default)]
pub(crate) struct Changes {
    wake: Notify,
    first_pending: Mutex<Option<Instant>>,
}

impl Changes {
    /// A store changed now.
    pub(crate) fn record(&self) {
        self.first_pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(Instant::now);
        self.wake.notify_one();
    }

    /// Waits for a change not yet taken (at once when one arrived since the last take).
    pub(crate) async fn wait(&self) {
        self.wake.notified().await;
    }

    /// When the first change since the last take arrived (`None`: none since), and
    /// counts every change from now on as the next snapshot's.
    pub(crate) fn take_first(&self) -> Option<Instant> {
        self.first_pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// Applies the events of `stream` (a watch of `kind`) to `writer` until the stream ends.
pub(crate) async fn drive<S, K>(
    kind: String,
    stream: S,
    mut writer: StoreWriter<K>,
    changed: Arc<Changes>,
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
                    changed.record();
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
