//! The controller's Prometheus metrics: what it applied, how long that took, what it
//! watches, what is wrong with the objects, whether it leads, and what the process costs.
//!
//! One [`Metrics`] lives for the process; the controller loop, the Kubernetes wiring
//! and the admin server share it through an `Arc`. Process figures are read from
//! `/proc/self` at scrape time.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tugboat_kube::status::WriteTally;
use tugboat_model::ObjectProblem;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApplyLabels {
    delivery: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeliveryLabel {
    delivery: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusWriteLabels {
    kind: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProblemLabels {
    kind: &'static str,
    reason: &'static str,
}

/// How one apply ended, as the metrics count it. A `reason` is why haproxy was asked
/// to reload, one of the planner's closed set
/// ([`ReloadReason::as_str`](tugboat_haproxy::ReloadReason::as_str), or
/// `runtime-not-taken`): never text from an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// haproxy reloaded with the new files.
    Reloaded { reason: &'static str },
    /// Applied without a reload.
    Runtime,
    /// haproxy refused the new configuration on reload.
    Refused { reason: &'static str },
    /// haproxy could not be reached or the apply failed otherwise (retried); `reload`:
    /// the reason of the reload the plan asked for, `None` for runtime commands.
    Failed { reload: Option<&'static str> },
    /// haproxy did not take a runtime update as expected; a reload followed.
    RuntimeFellBack,
}

/// The reason of the reload that follows runtime commands haproxy did not take.
const RUNTIME_NOT_TAKEN: &str = "runtime-not-taken";

impl ApplyOutcome {
    /// The `delivery` and `result` labels of `tugboat_applies_total`.
    fn labels(self) -> ApplyLabels {
        let (delivery, result) = match self {
            ApplyOutcome::Reloaded { .. } => ("reload", "applied"),
            ApplyOutcome::Runtime => ("runtime", "applied"),
            ApplyOutcome::Refused { .. } => ("reload", "refused"),
            ApplyOutcome::Failed { reload: Some(_) } => ("reload", "failed"),
            ApplyOutcome::Failed { reload: None } => ("runtime", "failed"),
            ApplyOutcome::RuntimeFellBack => ("runtime", "fell_back"),
        };
        ApplyLabels { delivery, result }
    }

    /// Why haproxy was asked to reload, when it was.
    pub fn reload_reason(self) -> Option<&'static str> {
        match self {
            ApplyOutcome::Reloaded { reason } | ApplyOutcome::Refused { reason } => Some(reason),
            ApplyOutcome::Failed { reload } => reload,
            ApplyOutcome::RuntimeFellBack => Some(RUNTIME_NOT_TAKEN),
            ApplyOutcome::Runtime => None,
        }
    }

    /// Whether haproxy serves the new state after it.
    fn served(self) -> bool {
        matches!(
            self,
            ApplyOutcome::Reloaded { .. } | ApplyOutcome::Runtime | ApplyOutcome::RuntimeFellBack
        )
    }
}

/// Every metric the controller exports.
pub struct Metrics {
    registry: Registry,
    applies: Family<ApplyLabels, Counter>,
    reloads: Family<ReasonLabel, Counter>,
    apply_duration: Family<DeliveryLabel, Histogram>,
    apply_lag: Family<DeliveryLabel, Histogram>,
    objects: Family<KindLabel, Gauge>,
    problems: Family<ProblemLabels, Gauge>,
    events_posted: Counter,
    status_writes: Family<StatusWriteLabels, Counter>,
    leader: Gauge,
    resident_memory: Gauge,
    peak_resident_memory: Gauge,
    cpu_seconds: Gauge<f64, AtomicU64>,
    /// Requests per route, read from haproxy at scrape time.
    pub requests: crate::request_metrics::RequestMetrics,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let applies = Family::<ApplyLabels, Counter>::default();
        registry.register(
            "tugboat_applies",
            "Updates sent to haproxy, by delivery (runtime, reload) and result (applied, \
             refused, failed, fell_back)",
            applies.clone(),
        );
        let reloads = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "tugboat_reloads",
            "Reloads asked of haproxy, whatever their result, by reason",
            reloads.clone(),
        );
        let apply_duration = Family::<DeliveryLabel, Histogram>::new_with_constructor(
            (|| Histogram::new(exponential_buckets(0.001, 2.0, 16))) as fn() -> Histogram,
        );
        registry.register(
            "tugboat_apply_duration_seconds",
            "Time to build, render, write and apply one update, by delivery",
            apply_duration.clone(),
        );
        let apply_lag = Family::<DeliveryLabel, Histogram>::new_with_constructor(
            (|| Histogram::new(exponential_buckets(0.005, 2.0, 14))) as fn() -> Histogram,
        );
        registry.register(
            "tugboat_apply_lag_seconds",
            "From the first change of an update seen by the controller's source to haproxy \
             serving it, by delivery",
            apply_lag.clone(),
        );
        let objects = Family::<KindLabel, Gauge>::default();
        registry.register(
            "tugboat_objects_watched",
            "Objects held in the controller's stores, by kind",
            objects.clone(),
        );
        let problems = Family::<ProblemLabels, Gauge>::default();
        registry.register(
            "tugboat_object_problems",
            "Problems found in objects by the last update, by object kind and reason",
            problems.clone(),
        );
        let events_posted = Counter::default();
        registry.register(
            "tugboat_events_posted",
            "Warning Events posted on objects",
            events_posted.clone(),
        );
        let status_writes = Family::<StatusWriteLabels, Counter>::default();
        registry.register(
            "tugboat_status_writes",
            "Status writes concluded (by the leader), by object kind and result (written, \
             gone, throttled, failed)",
            status_writes.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "tugboat_leader",
            "1 while this replica holds the leader Lease (writes status and Events)",
            leader.clone(),
        );
        let resident_memory = Gauge::default();
        registry.register(
            "process_resident_memory_bytes",
            "Resident set size (VmRSS)",
            resident_memory.clone(),
        );
        let peak_resident_memory = Gauge::default();
        registry.register(
            "process_peak_resident_memory_bytes",
            "Peak resident set size (VmHWM)",
            peak_resident_memory.clone(),
        );
        let cpu_seconds = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "process_cpu_seconds",
            "User and system CPU time spent by the process",
            cpu_seconds.clone(),
        );
        Self {
            registry,
            applies,
            reloads,
            apply_duration,
            apply_lag,
            objects,
            problems,
            events_posted,
            status_writes,
            leader,
            resident_memory,
            peak_resident_memory,
            cpu_seconds,
            requests: Default::default(),
        }
    }

    /// Counts one apply, its duration and, when haproxy serves its state, the time since
    /// its first change was seen (`since_change`, when known).
    pub fn record_apply(
        &self,
        outcome: ApplyOutcome,
        duration: Duration,
        since_change: Option<Duration>,
    ) {
        let labels = outcome.labels();
        self.applies.get_or_create(&labels).inc();
        if let Some(reason) = outcome.reload_reason() {
            self.reloads.get_or_create(&ReasonLabel { reason }).inc();
        }
        let delivery = DeliveryLabel {
            delivery: labels.delivery,
        };
        self.apply_duration
            .get_or_create(&delivery)
            .observe(duration.as_secs_f64());
        if let Some(lag) = since_change.filter(|_| outcome.served()) {
            self.apply_lag
                .get_or_create(&delivery)
                .observe(lag.as_secs_f64());
        }
    }

    /// Sets the current problems, counted by object kind and reason.
    pub fn set_problems(&self, problems: &[ObjectProblem]) {
        let mut counts: BTreeMap<(&'static str, &'static str), i64> = BTreeMap::new();
        for problem in problems {
            *counts
                .entry((problem.object.kind, problem.reason.as_str()))
                .or_default() += 1;
        }
        self.problems.clear();
        for ((kind, reason), count) in counts {
            self.problems
                .get_or_create(&ProblemLabels { kind, reason })
                .set(count);
        }
    }

    /// Sets the number of watched objects of each kind.
    pub fn set_objects(&self, counts: &BTreeMap<&'static str, usize>) {
        for (kind, count) in counts {
            self.objects
                .get_or_create(&KindLabel {
                    kind: (*kind).to_string(),
                })
                .set(i64::try_from(*count).unwrap_or(i64::MAX));
        }
    }

    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    pub fn add_events_posted(&self, count: usize) {
        self.events_posted.inc_by(count as u64);
    }

    /// Counts the status writes a writer concluded.
    pub fn add_status_writes(&self, concluded: &WriteTally) {
        for (kind, result, count) in concluded.iter() {
            self.status_writes
                .get_or_create(&StatusWriteLabels {
                    kind,
                    result: result.as_str(),
                })
                .inc_by(count);
        }
    }

    /// The metrics in Prometheus' text format, with fresh process figures. Blocking: it
    /// reads `/proc`.
    pub fn encode(&self) -> String {
        if let Some(usage) = ProcessUsage::read() {
            self.resident_memory
                .set(i64::try_from(usage.resident_bytes).unwrap_or(i64::MAX));
            self.peak_resident_memory
                .set(i64::try_from(usage.peak_resident_bytes).unwrap_or(i64::MAX));
            self.cpu_seconds.set(usage.cpu_seconds);
        }
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }

    /// [`Metrics::encode`] with the request metrics (`requests`, from
    /// [`RequestMetrics::scrape`](crate::request_metrics::RequestMetrics::scrape)) before
    /// the end marker.
    pub fn encode_with(&self, requests: &str) -> String {
        let mut text = self.encode();
        let end = text.rfind("# EOF").unwrap_or(text.len());
        text.insert_str(end, requests);
        text
    }
}

/// Memory and CPU of this process, from `/proc/self`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessUsage {
    pub resident_bytes: u64,
    pub peak_resident_bytes: u64,
    /// The part of the resident memory mapped from files: the binary's code and data,
    /// and the libraries'; the rest is the heap and the stacks.
    pub file_resident_bytes: u64,
    pub cpu_seconds: f64,
}

/// Clock ticks per second of `/proc/*/stat` times; 100 on every Linux Tugboat runs on.
pub(crate) const CLOCK_TICKS_PER_SECOND: f64 = 100.0;

impl ProcessUsage {
    /// Reads this process' figures; `None` off Linux.
    pub fn read() -> Option<Self> {
        Self::read_pid("self")
    }

    /// Reads the figures of process `pid` (a number, or `self`). Blocking: the admin
    /// server encodes the metrics through [`blocking`](tugboat_haproxy::blocking::blocking).
    #[allow(
        clippy::disallowed_methods,
        reason = "reads /proc; its async caller runs it through the blocking helper"
    )]
    pub fn read_pid(pid: &str) -> Option<Self> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        Some(Self {
            resident_bytes: status_kib(&status, "VmRSS:")? * 1024,
            peak_resident_bytes: status_kib(&status, "VmHWM:")? * 1024,
            file_resident_bytes: status_kib(&status, "RssFile:")? * 1024,
            cpu_seconds: cpu_ticks(&stat)? as f64 / CLOCK_TICKS_PER_SECOND,
        })
    }
}

/// A `kB` figure from `/proc/PID/status`.
pub(crate) fn status_kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
}

/// utime + stime from `/proc/PID/stat` (fields 14 and 15; the command name in field 2
/// may hold spaces, so count from its closing parenthesis).
fn cpu_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // after_name starts at field 3 (state): utime is field 14, so index 11.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_figures() {
        let status = "Name:\ttugboat\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\n";
        assert_eq!(status_kib(status, "VmRSS:"), Some(10240));
        assert_eq!(status_kib(status, "VmHWM:"), Some(20480));
        let stat = "4242 (tug boat) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0";
        assert_eq!(cpu_ticks(stat), Some(300));
    }

    #[test]
    fn reads_this_process() {
        let usage = ProcessUsage::read().expect("/proc/self on Linux");
        assert!(usage.resident_bytes > 0);
        assert!(usage.peak_resident_bytes >= usage.resident_bytes);
        assert!(usage.file_resident_bytes > 0 && usage.file_resident_bytes < usage.resident_bytes);
    }

    #[test]
    fn exports_applies_by_delivery_reloads_by_reason_and_problems_by_kind() {
        let metrics = Metrics::new();
        let ms = Duration::from_millis;
        let structure = ApplyOutcome::Reloaded {
            reason: "structure",
        };
        metrics.record_apply(structure, ms(5), Some(ms(40)));
        metrics.record_apply(structure, ms(5), None);
        metrics.record_apply(ApplyOutcome::Runtime, ms(1), Some(ms(3)));
        metrics.record_apply(
            ApplyOutcome::Refused {
                reason: "structure",
            },
            ms(5),
            Some(ms(9)),
        );
        metrics.record_apply(ApplyOutcome::Failed { reload: None }, ms(1), None);
        metrics.record_apply(ApplyOutcome::RuntimeFellBack, ms(9), Some(ms(20)));
        let problem = |kind, reason| ObjectProblem {
            object: tugboat_model::ObjectRef {
                kind,
                namespace: "shop".into(),
                name: "web".into(),
            },
            field: "spec".into(),
            reason,
            message: "bad".into(),
        };
        use tugboat_model::problem::ProblemReason;
        metrics.set_problems(&[
            problem("Ingress", ProblemReason::ServiceNotFound),
            problem("Ingress", ProblemReason::ServiceNotFound),
            problem("HTTPRoute", ProblemReason::ServiceNotFound),
        ]);
        metrics.set_objects(&BTreeMap::from([("Ingress", 3)]));
        metrics.set_leader(true);
        let mut concluded = WriteTally::default();
        use tugboat_kube::status::WriteResult;
        concluded.add("Ingress", WriteResult::Written);
        concluded.add("Ingress", WriteResult::Written);
        concluded.add("HTTPRoute", WriteResult::Failed);
        metrics.add_status_writes(&concluded);
        metrics.add_status_writes(&concluded);
        let text = metrics.encode();
        for expected in [
            "tugboat_applies_total{delivery=\"reload\",result=\"applied\"} 2",
            "tugboat_applies_total{delivery=\"runtime\",result=\"applied\"} 1",
            "tugboat_applies_total{delivery=\"reload\",result=\"refused\"} 1",
            "tugboat_applies_total{delivery=\"runtime\",result=\"failed\"} 1",
            "tugboat_applies_total{delivery=\"runtime\",result=\"fell_back\"} 1",
            // Refused reloads were asked for too; a runtime fallback reloads.
            "tugboat_reloads_total{reason=\"structure\"} 3",
            "tugboat_reloads_total{reason=\"runtime-not-taken\"} 1",
            "tugboat_apply_duration_seconds_count{delivery=\"reload\"} 3",
            "tugboat_apply_duration_seconds_count{delivery=\"runtime\"} 3",
            // Only what haproxy serves, when the first change is known.
            "tugboat_apply_lag_seconds_count{delivery=\"reload\"} 1",
            "tugboat_apply_lag_seconds_count{delivery=\"runtime\"} 2",
            "tugboat_apply_lag_seconds_sum{delivery=\"runtime\"} 0.023",
            "tugboat_object_problems{kind=\"Ingress\",reason=\"ServiceNotFound\"} 2",
            "tugboat_object_problems{kind=\"HTTPRoute\",reason=\"ServiceNotFound\"} 1",
            "tugboat_objects_watched{kind=\"Ingress\"} 3",
            "tugboat_leader 1",
            "tugboat_status_writes_total{kind=\"Ingress\",result=\"written\"} 4",
            "tugboat_status_writes_total{kind=\"HTTPRoute\",result=\"failed\"} 2",
            "process_resident_memory_bytes ",
        ] {
            assert!(
                text.lines().any(|line| line.starts_with(expected)),
                "{expected} not in:\n{text}"
            );
        }
        // The problems are replaced, not added to.
        metrics.set_problems(&[]);
        assert!(!metrics.encode().contains("tugboat_object_problems{"));
    }
}
