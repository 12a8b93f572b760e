//! Leader election on a `coordination.k8s.io/v1` Lease, the way client-go's
//! leaderelection does it: every replica reads the Lease every retry period; a free or
//! expired Lease is taken with an update that carries the resourceVersion it read (so
//! that two replicas cannot both win); the holder renews it; and a holder that stops
//! releases it (empty `holderIdentity`), so that another replica takes over at its next
//! read, within a retry period, instead of waiting for the Lease to expire.
//!
//! Expiry is judged on this replica's own clock: a Lease held by another replica has
//! expired when its holder and `renewTime` have not changed for `leaseDurationSeconds`
//! since this replica first saw them, so clock skew between nodes does not matter.
//!
//! It needs get, create and update on the Lease (the chart's Role grants exactly those).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use tokio::sync::watch;
use tokio::time::Instant;

/// Who takes part, on which Lease, with which timings.
#[derive(Debug, Clone)]
pub struct LeaderElection {
    pub namespace: String,
    pub lease_name: String,
    pub identity: String,
    /// How long a Lease holds without renewal.
    pub lease_duration: Duration,
}

impl LeaderElection {
    /// How often a non-holder reads the Lease: at most a second, so a released Lease is
    /// taken over within about a second.
    pub fn retry_period(&self) -> Duration {
        (self.lease_duration / 3).min(Duration::from_secs(1))
    }

    /// How often the holder renews: three times per lease duration.
    pub fn renew_period(&self) -> Duration {
        self.lease_duration / 3
    }
}

/// An error talking to the API server about the Lease.
#[derive(Debug, thiserror::Error)]
#[error("Lease {namespace}/{name}: {source}")]
pub struct LeaseError {
    namespace: String,
    name: String,
    #[source]
    source: kube::Error,
}

/// The holder and renew time last seen, and when they were first seen so.
#[derive(Debug, Clone, PartialEq)]
struct Observed {
    holder: Option<String>,
    renew_time: Option<MicroTime>,
    duration: Duration,
}

/// Runs the election until `stop` turns true (or its sender is dropped), publishing on
/// `leader` whether this replica holds the Lease; then releases the Lease if it holds
/// it.
pub async fn run(
    api: Api<Lease>,
    election: LeaderElection,
    leader: watch::Sender<bool>,
    mut stop: watch::Receiver<bool>,
) {
    let mut elector = Elector {
        api,
        election,
        observed: None,
        observed_at: Instant::now(),
        last_renewal: None,
        announced_error: false,
    };
    loop {
        let leading = elector.step().await;
        leader.send_if_modified(|current| {
            let changed = *current != leading;
            *current = leading;
            changed
        });
        let wait = if leading {
            elector.election.renew_period()
        } else {
            elector.election.retry_period()
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    break;
                }
            }
        }
    }
    if *leader.borrow() {
        leader.send_replace(false);
        match elector.release().await {
            Ok(()) => tracing::info!(
                lease = %format!("{}/{}", elector.election.namespace, elector.election.lease_name),
                "released the leader Lease"
            ),
            Err(err) => tracing::warn!("cannot release the leader Lease: {err}"),
        }
    }
}

struct Elector {
    api: Api<Lease>,
    election: LeaderElection,
    observed: Option<Observed>,
    observed_at: Instant,
    /// When this replica last renewed (or took) the Lease.
    last_renewal: Option<Instant>,
    announced_error: bool,
}

impl Elector {
    fn error(&self, source: kube::Error) -> LeaseError {
        LeaseError {
            namespace: self.election.namespace.clone(),
            name: self.election.lease_name.clone(),
            source,
        }
    }

    /// Tries to take or renew the Lease; whether this replica holds it now.
    async fn step(&mut self) -> bool {
        match self.try_acquire_or_renew().await {
            Ok(leading) => {
                self.announced_error = false;
                if leading {
                    self.last_renewal = Some(Instant::now());
                }
                leading
            }
            Err(err) => {
                if !self.announced_error {
                    tracing::warn!("leader election: {err}");
                    self.announced_error = true;
                }
                // A holder that cannot renew keeps leading until the Lease it last
                // wrote would expire (minus a margin), then steps down.
                let deadline = self.election.lease_duration * 2 / 3;
                self.last_renewal.is_some_and(|at| at.elapsed() < deadline)
            }
        }
    }

    fn spec(&self, previous: Option<&LeaseSpec>) -> LeaseSpec {
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let identity = &self.election.identity;
        let held_by_us = previous.and_then(|s| s.holder_identity.as_ref()) == Some(identity);
        let transitions = previous.and_then(|s| s.lease_transitions).unwrap_or(0);
        LeaseSpec {
            holder_identity: Some(identity.clone()),
            lease_duration_seconds: Some(self.election.lease_duration.as_secs().max(1) as i32),
            acquire_time: if held_by_us {
                previous.and_then(|s| s.acquire_time.clone())
            } else {
                Some(now.clone())
            },
            renew_time: Some(now),
            lease_transitions: Some(if held_by_us || previous.is_none() {
                transitions
            } else {
                transitions + 1
            }),
            ..LeaseSpec::default()
        }
    }

    async fn try_acquire_or_renew(&mut self) -> Result<bool, LeaseError> {
        let name = self.election.lease_name.clone();
        let current = match self.api.get_opt(&name).await {
            Ok(current) => current,
            Err(err) => return Err(self.error(err)),
        };
        let Some(mut lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name),
                    namespace: Some(self.election.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(self.spec(None)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                // Another replica created it first.
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
                Err(err) => Err(self.error(err)),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let observed = Observed {
            holder: holder.clone(),
            renew_time: spec.renew_time.clone(),
            duration: Duration::from_secs(
                spec.lease_duration_seconds
                    .map_or(self.election.lease_duration.as_secs(), |s| s.max(0) as u64),
            ),
        };
        if self.observed.as_ref() != Some(&observed) {
            self.observed = Some(observed.clone());
            self.observed_at = Instant::now();
        }
        let ours = holder.as_deref() == Some(self.election.identity.as_str());
        let expired = self.observed_at.elapsed() > observed.duration;
        if holder.is_some() && !ours && !expired {
            return Ok(false);
        }
        lease.spec = Some(self.spec(Some(&spec)));
        match self
            .api
            .replace(&name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(true),
            // Someone else wrote it since we read it: not ours this round.
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(err) => Err(self.error(err)),
        }
    }

    /// Empties `holderIdentity` if this replica still holds the Lease.
    async fn release(&self) -> Result<(), LeaseError> {
        let name = &self.election.lease_name;
        let Some(mut lease) = self.api.get_opt(name).await.map_err(|e| self.error(e))? else {
            return Ok(());
        };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.election.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.acquire_time = None;
        spec.renew_time = None;
        lease.spec = Some(spec);
        self.api
            .replace(name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
            .map_err(|e| self.error(e))
    }
}
