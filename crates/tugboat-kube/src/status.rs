//! Ingress status: the addresses clients reach the controller on, written to
//! `status.loadBalancer.ingress` of the Ingresses it serves and cleared from those it
//! stops serving.
//!
//! The addresses come from `--publish-service` (its LoadBalancer ingress, else its
//! external IPs, else its cluster IP) or `--publish-address`. Only the leader writes;
//! a write happens only when an Ingress' status (as the watch store holds it) differs
//! from what it should be, so a steady state, a re-list or a new leader costs no API
//! calls. An Ingress is cleared only when its status holds exactly our addresses, so
//! that the status another controller wrote is left alone. Writes go at a pace
//! ([`StatusPace`]): a few in flight, a bounded rate, and a growing pause after
//! failures and `429 Too Many Requests` (for `Retry-After` when the server gives it).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::IngressLoadBalancerIngress;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use tokio::time::Instant;
use tugboat_model::backoff::Backoff;
use tugboat_model::objects::Ingress;
use tugboat_model::snapshot::changed_keys;
use tugboat_model::{ObjectKey, ObjectKeys, Objects};

/// The field manager the controller writes status with.
pub const FIELD_MANAGER: &str = "tugboat";

/// Where the published addresses come from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PublishTarget {
    /// `--publish-service NAMESPACE/NAME`.
    pub service: Option<ObjectKey>,
    /// `--publish-address`: IPs and host names.
    pub addresses: Vec<String>,
}

impl PublishTarget {
    /// Whether the operator asked for status at all.
    pub fn is_set(&self) -> bool {
        self.service.is_some() || !self.addresses.is_empty()
    }
}

/// Status writing failed.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("cannot read the publish Service {service}: {source}")]
    PublishService {
        service: ObjectKey,
        source: kube::Error,
    },
}

/// `--publish-address` values as status entries: IPs become `ip`, names `hostname`.
pub fn entries_from_addresses(addresses: &[String]) -> Vec<IngressLoadBalancerIngress> {
    addresses
        .iter()
        .map(|address| address.trim())
        .filter(|address| !address.is_empty())
        .map(|address| match address.parse::<IpAddr>() {
            Ok(_) => IngressLoadBalancerIngress {
                ip: Some(address.to_string()),
                ..Default::default()
            },
            Err(_) => IngressLoadBalancerIngress {
                hostname: Some(address.to_string()),
                ..Default::default()
            },
        })
        .collect()
}

/// A Service's addresses as status entries: its LoadBalancer ingress, else its external
/// IPs, else its cluster IP.
pub fn entries_from_service(service: &Service) -> Vec<IngressLoadBalancerIngress> {
    let load_balancer: Vec<IngressLoadBalancerIngress> = service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .map(|lb| IngressLoadBalancerIngress {
            ip: lb.ip.clone(),
            hostname: lb.hostname.clone(),
            ..Default::default()
        })
        .collect();
    if !load_balancer.is_empty() {
        return load_balancer;
    }
    let spec = service.spec.as_ref();
    let external: Vec<String> = spec
        .and_then(|s| s.external_ips.clone())
        .unwrap_or_default();
    if !external.is_empty() {
        return entries_from_addresses(&external);
    }
    spec.and_then(|s| s.cluster_ip.clone())
        .filter(|ip| !ip.is_empty() && ip != "None")
        .map(|ip| entries_from_addresses(&[ip]))
        .unwrap_or_default()
}

/// The entries an Ingress' status holds now, borrowed.
fn current_entries(ingress: &Ingress) -> &[IngressLoadBalancerIngress] {
    ingress
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_deref())
        .unwrap_or_default()
}

/// What to write to one Ingress: `Some(entries)` (empty: clear), or `None` to leave it.
pub fn status_change(
    ingress: &Ingress,
    served: bool,
    ours: &[IngressLoadBalancerIngress],
) -> Option<Vec<IngressLoadBalancerIngress>> {
    needs_write(ingress, served, ours).then(|| if served { ours.to_vec() } else { Vec::new() })
}

/// Whether an Ingress' status differs from what it should be: ours when `served`,
/// else not ours (cleared only when it holds exactly our addresses).
fn needs_write(ingress: &Ingress, served: bool, ours: &[IngressLoadBalancerIngress]) -> bool {
    let current = current_entries(ingress);
    if served {
        current != ours
    } else {
        !current.is_empty() && current == ours
    }
}

/// How fast the leader writes status: a few writes in flight, a steady rate, and a
/// growing pause after a failure or a `429 Too Many Requests`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusPace {
    /// Writes in flight at most.
    pub in_flight: usize,
    /// Writes started per second at most.
    pub per_second: u32,
    /// The pause after the first failure in a row; it doubles with each further one.
    pub backoff_first: Duration,
    /// The longest pause.
    pub backoff_max: Duration,
}

impl Default for StatusPace {
    fn default() -> Self {
        Self {
            in_flight: 4,
            per_second: 50,
            backoff_first: Duration::from_millis(500),
            backoff_max: Duration::from_secs(60),
        }
    }
}

impl StatusPace {
    /// The time between two starts.
    fn spacing(&self) -> Duration {
        Duration::from_secs(1) / self.per_second.max(1)
    }

    /// The pauses after failures in a row: doubling from `backoff_first`.
    fn backoff(&self) -> Backoff {
        Backoff::new(self.backoff_first, self.backoff_max)
    }
}

/// What became of one status write that the API server took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchOutcome {
    Written,
    /// The Ingress is gone (deleted since the store saw it): nothing to write.
    Gone,
}

/// A status write that did not go through; it is tried again after a pause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// `429 Too Many Requests`, with the server's `Retry-After` when it gave one.
    #[error("the API server asks to slow down (429)")]
    Throttled { retry_after: Option<Duration> },
    #[error("{0}")]
    Failed(String),
}

/// A write in flight: the Ingress and how it went.
type PatchFuture = BoxFuture<'static, (ObjectKey, Result<PatchOutcome, PatchError>)>;

/// Writes the status of one Ingress: `entries`, or none (cleared) when empty.
pub trait PatchStatus: Send + Sync + 'static {
    fn patch(
        &self,
        ingress: &ObjectKey,
        entries: Vec<IngressLoadBalancerIngress>,
    ) -> BoxFuture<'static, Result<PatchOutcome, PatchError>>;
}

/// [`PatchStatus`] through the Kubernetes API: a merge patch of the `status`
/// subresource. The answer's body (the whole Ingress) is read and dropped, not decoded.
#[derive(Clone)]
pub struct ApiPatch {
    client: Client,
}

impl ApiPatch {
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

impl PatchStatus for ApiPatch {
    fn patch(
        &self,
        ingress: &ObjectKey,
        entries: Vec<IngressLoadBalancerIngress>,
    ) -> BoxFuture<'static, Result<PatchOutcome, PatchError>> {
        let client = self.client.clone();
        let key = ingress.clone();
        Box::pin(async move {
            let api: Api<k8s_openapi::api::networking::v1::Ingress> =
                Api::namespaced(client.clone(), &key.namespace);
            let value = if entries.is_empty() {
                serde_json::Value::Null
            } else {
                serde_json::json!(entries)
            };
            let patch = serde_json::json!({"status": {"loadBalancer": {"ingress": value}}});
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            };
            let request = kube::core::Request::new(api.resource_url())
                .patch_subresource("status", &key.name, &params, &Patch::Merge(&patch))
                .map_err(|err| PatchError::Failed(err.to_string()))?;
            let response = client
                .send(request.map(kube::client::Body::from))
                .await
                .map_err(|err| PatchError::Failed(err.to_string()))?;
            let status = response.status();
            let retry_after = response
                .headers()
                .get(http::header::RETRY_AFTER)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            let body = response
                .into_body()
                .collect_bytes()
                .await
                .map_err(|err| PatchError::Failed(err.to_string()))?;
            match status {
                status if status.is_success() => Ok(PatchOutcome::Written),
                http::StatusCode::NOT_FOUND => Ok(PatchOutcome::Gone),
                http::StatusCode::TOO_MANY_REQUESTS => Err(PatchError::Throttled { retry_after }),
                status => {
                    let message = serde_json::from_slice::<serde_json::Value>(&body)
                        .ok()
                        .and_then(|v| v["message"].as_str().map(str::to_string))
                        .unwrap_or_default();
                    Err(PatchError::Failed(format!("{status}: {message}")))
                }
            }
        })
    }
}

/// How one status write ended, whatever the object's kind: a closed set (the `result`
/// label of `tugboat_status_writes_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WriteResult {
    /// The API server took the new status.
    Written,
    /// The object was gone (404): nothing to write.
    Gone,
    /// The API server asked to slow down (429); retried after a pause.
    Throttled,
    /// Any other error; retried after a growing pause.
    Failed,
}

impl WriteResult {
    pub fn as_str(self) -> &'static str {
        match self {
            WriteResult::Written => "written",
            WriteResult::Gone => "gone",
            WriteResult::Throttled => "throttled",
            WriteResult::Failed => "failed",
        }
    }
}

/// Status writes concluded, by object kind (`Ingress`, `Gateway`, `HTTPRoute`...) and
/// [`WriteResult`]: what a writer hands to the metrics.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WriteTally(BTreeMap<(&'static str, WriteResult), u64>);

impl WriteTally {
    /// Counts one write of an object of `kind` that ended with `result`.
    pub fn add(&mut self, kind: &'static str, result: WriteResult) {
        *self.0.entry((kind, result)).or_default() += 1;
    }

    /// The writes that ended with `result`, of every kind.
    pub fn count(&self, result: WriteResult) -> u64 {
        self.0
            .iter()
            .filter(|((_, r), _)| *r == result)
            .map(|(_, count)| count)
            .sum()
    }

    /// Each kind and result counted, with its count.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, WriteResult, u64)> + '_ {
        self.0
            .iter()
            .map(|((kind, result), count)| (*kind, *result, *count))
    }
}

/// The addresses to publish now, from `--publish-address` and the publish Service.
pub async fn published_addresses(
    client: &Client,
    target: &PublishTarget,
) -> Result<Vec<IngressLoadBalancerIngress>, StatusError> {
    let mut entries = entries_from_addresses(&target.addresses);
    if let Some(key) = &target.service {
        let api: Api<Service> = Api::namespaced(client.clone(), &key.namespace);
        let service = api
            .get(&key.name)
            .await
            .map_err(|source| StatusError::PublishService {
                service: key.clone(),
                source,
            })?;
        entries.extend(entries_from_service(&service));
    }
    Ok(entries)
}

/// Keeps Ingress status in line, writing only what differs, at a pace.
///
/// It keeps the set of served Ingresses it last saw (a copy that shares the
/// controller's), so a new served set costs what differs between the two, and a check of
/// the Ingresses that joined or left it. A check of every Ingress (a new leader, new
/// addresses, the periodic check) walks the watch store from a cursor, as far as the pace
/// lets it write. Whether a write is needed is decided from the watch store's copy of the
/// Ingress just before writing, so that an Ingress already right (after a re-list, a
/// restart or a change of leader) is never written. What the writer holds is bounded by
/// the pace, not by the number of Ingresses: at most [`StatusPace::in_flight`] writes,
/// one cursor, and the keys of the served-set changes and failed writes still to retry.
pub struct StatusWriter<P> {
    patcher: Arc<P>,
    pace: StatusPace,
    /// The addresses to publish; `None` until known.
    ours: Option<Vec<IngressLoadBalancerIngress>>,
    /// The served Ingresses as last seen; `None` until the controller is ready.
    served: Option<ObjectKeys>,
    /// Whether this replica writes (it leads).
    active: bool,
    /// A check of every Ingress is to start at the next [`reconcile`](Self::reconcile).
    sweep_due: bool,
    /// The check of every Ingress under way: where it has come to (`Unbounded` before
    /// the first Ingress), `None` when none is.
    sweep: Option<Bound<ObjectKey>>,
    /// Single Ingresses to check (served-set changes, failed writes), and write if they
    /// differ.
    pending: BTreeSet<ObjectKey>,
    in_flight: FuturesUnordered<PatchFuture>,
    /// When the next write may start (the rate, or a pause after failures).
    next_start: Instant,
    /// The pause after the next failure (back to the first after a success).
    backoff: Backoff,
    /// Writes concluded since [`take_concluded`](Self::take_concluded).
    concluded: WriteTally,
}

impl<P: PatchStatus> StatusWriter<P> {
    pub fn new(patcher: P, pace: StatusPace) -> Self {
        Self {
            patcher: Arc::new(patcher),
            pace,
            ours: None,
            served: None,
            active: false,
            sweep_due: false,
            sweep: None,
            pending: BTreeSet::new(),
            in_flight: FuturesUnordered::new(),
            next_start: Instant::now(),
            backoff: pace.backoff(),
            concluded: WriteTally::default(),
        }
    }

    /// Starts writing (becoming the leader: every Ingress is checked once) or stops
    /// (dropping the writes in flight and what was left to check).
    pub fn set_active(&mut self, active: bool) {
        if active == self.active {
            return;
        }
        self.active = active;
        self.sweep_due = active;
        self.sweep = None;
        self.pending.clear();
        self.in_flight = FuturesUnordered::new();
        self.backoff.reset();
    }

    /// Every Ingress is checked at the next [`reconcile`](Self::reconcile) (a periodic
    /// check, e.g. for status another writer changed).
    pub fn check_all(&mut self) {
        self.sweep_due = self.active;
    }

    /// The addresses to publish; when they change, every Ingress is checked.
    pub fn set_addresses(&mut self, ours: Vec<IngressLoadBalancerIngress>) {
        if self.ours.as_ref() != Some(&ours) {
            self.ours = Some(ours);
            self.sweep_due = self.active;
        }
    }

    /// The Ingresses the controller serves now: those that joined or left the set are
    /// checked.
    pub fn set_served(&mut self, served: &ObjectKeys) {
        let Some(known) = self.served.replace(served.clone()) else {
            self.sweep_due = self.active;
            return;
        };
        if self.active {
            self.pending.extend(changed_keys(&known, served).cloned());
        }
    }

    /// Whether it may write: it leads, and knows the addresses and the served set.
    fn can_write(&self) -> bool {
        self.active && self.ours.is_some() && self.served.is_some()
    }

    /// Whether there are writes to start or in flight.
    pub fn is_busy(&self) -> bool {
        self.can_write()
            && (self.sweep_due
                || self.sweep.is_some()
                || !self.pending.is_empty()
                || !self.in_flight.is_empty())
    }

    /// Checks what is due against `ingresses` (the watch store) and starts the writes
    /// the pace allows now.
    pub fn reconcile(&mut self, ingresses: &Objects<Ingress>) {
        if !self.active {
            return;
        }
        let (Some(ours), Some(served)) = (self.ours.as_deref(), self.served.as_ref()) else {
            return;
        };
        if std::mem::take(&mut self.sweep_due) {
            self.sweep = Some(Bound::Unbounded);
        }
        let now = Instant::now();
        while self.in_flight.len() < self.pace.in_flight.max(1) && now >= self.next_start {
            let Some(key) = self.pending.pop_first().or_else(|| {
                next_to_write(&mut self.sweep, ingresses, |key, ingress| {
                    needs_write(ingress, served.contains(key), ours)
                })
            }) else {
                break;
            };
            let Some(entries) = ingresses
                .get(&key)
                .and_then(|ingress| status_change(ingress, served.contains(&key), ours))
            else {
                continue;
            };
            let write = self.patcher.patch(&key, entries);
            self.in_flight
                .push(Box::pin(async move { (key, write.await) }));
            self.next_start = self.next_start.max(now) + self.pace.spacing();
        }
    }

    /// Waits until a write finishes (and takes its outcome in) or the next one may
    /// start; never resolves while there is nothing to do. Cancel-safe.
    pub async fn progress(&mut self) {
        // Nothing may start before the addresses and the served set are known: without
        // them `reconcile` does nothing, and waking it would spin.
        let may_start = self.can_write()
            && self.in_flight.len() < self.pace.in_flight.max(1)
            && (self.sweep_due || self.sweep.is_some() || !self.pending.is_empty());
        let next_start = self.next_start;
        let finished = tokio::select! {
            Some(finished) = self.in_flight.next(), if !self.in_flight.is_empty() => finished,
            () = tokio::time::sleep_until(next_start), if may_start => return,
            else => return std::future::pending().await,
        };
        self.finished(finished);
    }

    fn finished(&mut self, (key, outcome): (ObjectKey, Result<PatchOutcome, PatchError>)) {
        let result = match &outcome {
            Ok(PatchOutcome::Written) => WriteResult::Written,
            Ok(PatchOutcome::Gone) => WriteResult::Gone,
            Err(PatchError::Throttled { .. }) => WriteResult::Throttled,
            Err(PatchError::Failed(_)) => WriteResult::Failed,
        };
        self.concluded.add("Ingress", result);
        let pause = match outcome {
            Ok(PatchOutcome::Written | PatchOutcome::Gone) => {
                self.backoff.reset();
                return;
            }
            Err(PatchError::Throttled { retry_after }) => {
                // A failure in a row either way; the server's word wins when it gives one.
                let backoff = self.backoff.next_delay();
                let pause = retry_after.unwrap_or(backoff);
                tracing::debug!(ingress = %key, ?pause, "status writes throttled");
                pause
            }
            Err(PatchError::Failed(message)) => {
                let pause = self.backoff.next_delay();
                tracing::warn!(
                    "cannot write the status of Ingress {key}: {message}; retrying in {pause:?}"
                );
                pause
            }
        };
        self.next_start = self.next_start.max(Instant::now() + pause);
        self.pending.insert(key);
    }

    /// The writes concluded since the last call, by result.
    pub fn take_concluded(&mut self) -> WriteTally {
        std::mem::take(&mut self.concluded)
    }

    /// Single Ingresses still to check (for tests and logs); a check of every Ingress
    /// under way is not counted.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

/// The next Ingress after `sweep`'s cursor that `needs_write`, moving the cursor past
/// it; at the end of the store the sweep is over (`None`).
fn next_to_write(
    sweep: &mut Option<Bound<ObjectKey>>,
    ingresses: &Objects<Ingress>,
    needs_write: impl Fn(&ObjectKey, &Ingress) -> bool,
) -> Option<ObjectKey> {
    let after = sweep.take()?;
    let found = ingresses
        .range((after, Bound::Unbounded))
        .find(|(key, ingress)| needs_write(key, ingress))
        .map(|(key, _)| key.clone());
    if let Some(key) = &found {
        *sweep = Some(Bound::Excluded(key.clone()));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(value: &str) -> IngressLoadBalancerIngress {
        IngressLoadBalancerIngress {
            ip: Some(value.into()),
            ..Default::default()
        }
    }

    fn hostname(value: &str) -> IngressLoadBalancerIngress {
        IngressLoadBalancerIngress {
            hostname: Some(value.into()),
            ..Default::default()
        }
    }

    #[test]
    fn addresses_become_ips_or_hostnames() {
        let addresses = vec![
            "192.0.2.10".to_string(),
            "2001:db8::1".to_string(),
            " lb.example.com ".to_string(),
            String::new(),
        ];
        assert_eq!(
            entries_from_addresses(&addresses),
            vec![
                ip("192.0.2.10"),
                ip("2001:db8::1"),
                hostname("lb.example.com")
            ]
        );
    }

    #[test]
    fn service_addresses_prefer_load_balancer_then_external_then_cluster_ip() {
        let service = |value: serde_json::Value| -> Service {
            serde_json::from_value(value).expect("valid Service")
        };
        let lb = service(serde_json::json!({
            "spec": {"clusterIP": "10.0.0.1", "externalIPs": ["192.0.2.1"]},
            "status": {"loadBalancer": {"ingress": [{"hostname": "lb.example.com"}, {"ip": "198.51.100.7"}]}}
        }));
        assert_eq!(
            entries_from_service(&lb),
            vec![hostname("lb.example.com"), ip("198.51.100.7")]
        );
        let external = service(serde_json::json!({
            "spec": {"clusterIP": "10.0.0.1", "externalIPs": ["192.0.2.1"]}
        }));
        assert_eq!(entries_from_service(&external), vec![ip("192.0.2.1")]);
        let cluster = service(serde_json::json!({"spec": {"clusterIP": "10.0.0.1"}}));
        assert_eq!(entries_from_service(&cluster), vec![ip("10.0.0.1")]);
        let headless = service(serde_json::json!({"spec": {"clusterIP": "None"}}));
        assert_eq!(entries_from_service(&headless), vec![]);
    }

    #[test]
    fn writes_only_what_differs_and_clears_only_our_own_status() {
        let ingress = |entries: serde_json::Value| -> Ingress {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "x", "namespace": "default"},
                "status": {"loadBalancer": {"ingress": entries}}
            }))
            .expect("valid Ingress")
        };
        let ours = vec![ip("192.0.2.10")];
        let empty = ingress(serde_json::json!([]));
        let with_ours = ingress(serde_json::json!([{"ip": "192.0.2.10"}]));
        let with_theirs = ingress(serde_json::json!([{"ip": "198.51.100.1"}]));
        assert_eq!(status_change(&empty, true, &ours), Some(ours.clone()));
        assert_eq!(status_change(&with_ours, true, &ours), None);
        assert_eq!(status_change(&with_theirs, true, &ours), Some(ours.clone()));
        assert_eq!(status_change(&with_ours, false, &ours), Some(vec![]));
        assert_eq!(status_change(&with_theirs, false, &ours), None);
        assert_eq!(status_change(&empty, false, &ours), None);
    }

    /// A [`PatchStatus`] that takes `latency` per write, answers from `script` (then
    /// `Written`), and records every write and the most writes in flight at once.
    #[derive(Default)]
    struct FakePatch {
        state: std::sync::Mutex<FakeState>,
        latency: Duration,
    }

    #[derive(Default)]
    struct FakeState {
        script: std::collections::VecDeque<Result<PatchOutcome, PatchError>>,
        writes: Vec<Write>,
        in_flight: usize,
        most_in_flight: usize,
    }

    /// When a write started, to which Ingress, what, and how it went.
    type Write = (
        Instant,
        ObjectKey,
        Vec<IngressLoadBalancerIngress>,
        Result<PatchOutcome, PatchError>,
    );

    /// Shares the fake between the writer and the test.
    struct SharedPatch(Arc<FakePatch>);

    impl PatchStatus for SharedPatch {
        fn patch(
            &self,
            ingress: &ObjectKey,
            entries: Vec<IngressLoadBalancerIngress>,
        ) -> BoxFuture<'static, Result<PatchOutcome, PatchError>> {
            let fake = self.0.clone();
            let key = ingress.clone();
            Box::pin(async move {
                let outcome = {
                    let mut state = fake.state.lock().expect("lock");
                    let outcome = state
                        .script
                        .pop_front()
                        .unwrap_or(Ok(PatchOutcome::Written));
                    state
                        .writes
                        .push((Instant::now(), key, entries, outcome.clone()));
                    state.in_flight += 1;
                    state.most_in_flight = state.most_in_flight.max(state.in_flight);
                    outcome
                };
                tokio::time::sleep(fake.latency).await;
                fake.state.lock().expect("lock").in_flight -= 1;
                outcome
            })
        }
    }

    fn key(i: usize) -> ObjectKey {
        ObjectKey::new("default", format!("ing-{i:05}"))
    }

    fn ingress_with(i: usize, entries: &[IngressLoadBalancerIngress]) -> Arc<Ingress> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": &*key(i).name, "namespace": "default"},
                "status": {"loadBalancer": {"ingress": entries}}
            }))
            .expect("valid Ingress"),
        )
    }

    /// `count` Ingresses with no status.
    fn store(count: usize) -> Objects<Ingress> {
        (0..count).map(|i| (key(i), ingress_with(i, &[]))).collect()
    }

    fn new_writer(
        pace: StatusPace,
        latency: Duration,
    ) -> (StatusWriter<SharedPatch>, Arc<FakePatch>) {
        let fake = Arc::new(FakePatch {
            latency,
            ..Default::default()
        });
        let mut writer = StatusWriter::new(SharedPatch(fake.clone()), pace);
        writer.set_addresses(vec![ip("192.0.2.10")]);
        (writer, fake)
    }

    /// Runs the writer until it has nothing left to do; each write lands in `store`, as
    /// the watch would bring it back.
    async fn run_until_idle(
        writer: &mut StatusWriter<SharedPatch>,
        fake: &FakePatch,
        store: &mut Objects<Ingress>,
    ) {
        let mut landed = 0;
        let limit = Instant::now() + Duration::from_secs(3600);
        while writer.is_busy() {
            assert!(Instant::now() < limit, "the writer never went idle");
            writer.reconcile(store);
            if !writer.is_busy() {
                break;
            }
            writer.progress().await;
            let state = fake.state.lock().expect("lock");
            for (_, key, entries, _) in state.writes[landed..]
                .iter()
                .filter(|w| w.3 == Ok(PatchOutcome::Written))
            {
                let i: usize = key.name["ing-".len()..].parse().expect("index");
                store.insert(key.clone(), ingress_with(i, entries));
            }
            landed = state.writes.len();
        }
    }

    /// The Ingresses written so far, in the order the writes started.
    fn written_keys(fake: &FakePatch) -> Vec<ObjectKey> {
        let state = fake.state.lock().expect("lock");
        state.writes.iter().map(|w| w.1.clone()).collect()
    }

    fn served(range: std::ops::Range<usize>) -> ObjectKeys {
        range.map(key).collect()
    }

    /// Before the controller's first apply (no served set yet) an active writer with a
    /// check due waits: its progress does not resolve, so the leader's loop does not
    /// spin on it.
    #[tokio::test(start_paused = true)]
    async fn nothing_to_do_before_the_served_set_is_known() {
        let (mut writer, _fake) = new_writer(StatusPace::default(), Duration::from_millis(5));
        writer.set_active(true);
        writer.check_all();
        writer.reconcile(&store(10));
        let waited = tokio::time::timeout(Duration::from_secs(60), writer.progress()).await;
        assert!(
            waited.is_err(),
            "progress resolved with nothing it could do"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn writes_what_differs_once_and_nothing_after_a_restart() {
        let mut ingresses = store(10);
        // Ingress 0 already holds our address.
        ingresses.insert(key(0), ingress_with(0, &[ip("192.0.2.10")]));
        let (mut writer, fake) = new_writer(StatusPace::default(), Duration::from_millis(5));
        writer.set_served(&served(0..6));
        writer.set_active(true);
        run_until_idle(&mut writer, &fake, &mut ingresses).await;
        let written = written_keys(&fake);
        assert_eq!(written, (1..6).map(key).collect::<Vec<_>>());
        assert_eq!(writer.take_concluded().count(WriteResult::Written), 5);

        // A new leader (or a restart) on the same store writes nothing.
        let (mut restarted, fake) = new_writer(StatusPace::default(), Duration::from_millis(5));
        restarted.set_served(&served(0..6));
        restarted.set_active(true);
        run_until_idle(&mut restarted, &fake, &mut ingresses).await;
        assert!(fake.state.lock().expect("lock").writes.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_of_served_set_checks_only_what_joined_or_left() {
        let mut ingresses = store(1000);
        let (mut writer, fake) = new_writer(StatusPace::default(), Duration::from_millis(5));
        writer.set_served(&served(0..500));
        writer.set_active(true);
        run_until_idle(&mut writer, &fake, &mut ingresses).await;
        fake.state.lock().expect("lock").writes.clear();

        // 500 leaves (cleared), 500 and 501 join (ours).
        let mut now_served = served(0..500);
        now_served.remove(&key(499));
        now_served.extend([key(500), key(501)]);
        writer.set_served(&now_served);
        assert_eq!(writer.pending(), 3);
        run_until_idle(&mut writer, &fake, &mut ingresses).await;
        let writes = fake.state.lock().expect("lock").writes.clone();
        let written: Vec<_> = writes.iter().map(|w| (w.1.clone(), w.2.clone())).collect();
        assert_eq!(
            written,
            vec![
                (key(499), vec![]),
                (key(500), vec![ip("192.0.2.10")]),
                (key(501), vec![ip("192.0.2.10")]),
            ]
        );
    }

    /// A check of every Ingress keeps a cursor, not a list of what is to write: the
    /// writer holds nothing that grows with the number of Ingresses, and each Ingress is
    /// written once, in order, even when the store changes under the sweep.
    #[tokio::test(start_paused = true)]
    async fn a_check_of_every_ingress_holds_a_cursor_not_a_list() {
        let mut ingresses = store(1000);
        let (mut writer, fake) = new_writer(StatusPace::default(), Duration::from_millis(5));
        writer.set_served(&served(0..1000));
        writer.set_active(true);
        writer.reconcile(&ingresses);
        assert_eq!((writer.pending(), writer.in_flight.len()), (0, 1));
        // An Ingress made right by someone else before the sweep reaches it is skipped.
        ingresses.insert(key(900), ingress_with(900, &[ip("192.0.2.10")]));
        run_until_idle(&mut writer, &fake, &mut ingresses).await;
        let written = written_keys(&fake);
        let mut expected: Vec<ObjectKey> = (0..1000).filter(|&i| i != 900).map(key).collect();
        expected.sort();
        assert_eq!(written, expected);
    }

    #[tokio::test(start_paused = true)]
    async fn writes_keep_to_the_concurrency_and_the_rate() {
        let pace = StatusPace {
            in_flight: 3,
            per_second: 20,
            ..StatusPace::default()
        };
        let mut ingresses = store(60);
        // Slow writes: the concurrency is what holds them back.
        let (mut writer, fake) = new_writer(pace, Duration::from_millis(400));
        writer.set_served(&served(0..60));
        writer.set_active(true);
        let started = Instant::now();
        run_until_idle(&mut writer, &fake, &mut ingresses).await;
        {
            let state = fake.state.lock().expect("lock");
            assert_eq!(state.writes.len(), 60);
            assert_eq!(state.most_in_flight, 3);
            // 3 at a time, 400 ms each: 20 rounds.
            assert!(started.elapsed() >= Duration::from_millis(20 * 400));
        }

        // Fast writes: the rate is what holds them back.
        let mut ingresses = store(60);
        let (mut writer, fake) = new_writer(pace, Duration::from_millis(1));
        writer.set_served(&served(0..60));
        writer.set_active(true);
        run_until_idle(&mut writer, &fake, &mut ingresses).await;
        let state = fake.state.lock().expect("lock");
        for pair in state.writes.windows(2) {
            assert!(
                pair[1].0 - pair[0].0 >= Duration::from_millis(50),
                "writes 50 ms apart at least"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_429_pauses_for_retry_after_and_errors_back_off_doubling() {
        let pace = StatusPace {
            in_flight: 1,
            per_second: 1000,
            backoff_first: Duration::from_millis(500),
            backoff_max: Duration::from_secs(2),
        };
        let mut ingresses = store(2);
        let (mut writer, fake) = new_writer(pace, Duration::from_millis(1));
        fake.state.lock().expect("lock").script = [
            Err(PatchError::Throttled {
                retry_after: Some(Duration::from_secs(7)),
            }),
            Err(PatchError::Failed("boom".into())),
            Err(PatchError::Failed("boom".into())),
            Err(PatchError::Failed("boom".into())),
            Err(PatchError::Failed("boom".into())),
            Ok(PatchOutcome::Gone),
        ]
        .into();
        writer.set_served(&served(0..2));
        writer.set_active(true);
        run_until_idle(&mut writer, &fake, &mut ingresses).await;
        let state = fake.state.lock().expect("lock");
        let gaps: Vec<u128> = state
            .writes
            .windows(2)
            .map(|pair| (pair[1].0 - pair[0].0).as_millis())
            .collect();
        // Retry-After 7 s (failures in a row: 1), then 1 s, 2 s, 2 s (the cap), 2 s;
        // after the answer that is not a failure, at the rate again. Each gap also holds
        // the 1 ms write.
        assert_eq!(gaps, vec![7001, 1001, 2001, 2001, 2001, 1]);
        let names: Vec<&str> = state.writes.iter().map(|w| w.1.name.as_ref()).collect();
        assert_eq!(
            names,
            ["ing-00000"; 6]
                .into_iter()
                .chain(["ing-00001"])
                .collect::<Vec<_>>()
        );
        drop(state);
        // Every write is counted by how it ended.
        let concluded = writer.take_concluded();
        let counted: Vec<_> = concluded.iter().collect();
        assert_eq!(
            counted,
            [
                ("Ingress", WriteResult::Written, 1),
                ("Ingress", WriteResult::Gone, 1),
                ("Ingress", WriteResult::Throttled, 1),
                ("Ingress", WriteResult::Failed, 4),
            ]
        );
        assert!(writer.take_concluded().iter().next().is_none(), "taken");
    }

    /// The leader's loop reconciles only a busy writer: before the served set is known
    /// it is not busy, and once it is, the due check starts its writes.
    #[tokio::test(start_paused = true)]
    async fn idle_until_the_served_set_is_known_then_writes() {
        let ingresses = store(5);
        let (mut writer, fake) = new_writer(StatusPace::default(), Duration::from_millis(5));
        writer.set_active(true);
        writer.check_all();
        writer.reconcile(&ingresses);
        assert!(!writer.is_busy());
        writer.set_served(&served(0..5));
        assert!(writer.is_busy());
        writer.reconcile(&ingresses);
        writer.progress().await;
        assert_eq!(fake.state.lock().expect("lock").writes.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn only_an_active_writer_writes_and_stopping_drops_the_rest() {
        let mut ingresses = store(20);
        let (mut writer, fake) = new_writer(StatusPace::default(), Duration::from_millis(5));
        writer.set_served(&served(0..20));
        writer.reconcile(&ingresses);
        assert!(!writer.is_busy());
        writer.set_active(true);
        writer.reconcile(&ingresses);
        writer.progress().await;
        writer.set_active(false);
        assert!(!writer.is_busy());
        let written = fake.state.lock().expect("lock").writes.len();
        assert!(written < 20, "{written} writes");
        run_until_idle(&mut writer, &fake, &mut ingresses).await;
        assert_eq!(fake.state.lock().expect("lock").writes.len(), written);
    }
}
