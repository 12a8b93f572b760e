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
use tugboat_model::ObjectProblem;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

/// How one apply ended, as the metrics count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// haproxy reloaded with the new files.
    Reloaded,
    /// Applied without a reload.
    Runtime,
    /// haproxy refused the new configuration on reload.
    Refused,
    /// haproxy could not be reached or the apply failed otherwise (retried).
    Failed { reload: bool },
    /// haproxy did not take a runtime update as expected; a reload followed.
    RuntimeFellBack,
}

/// Every metric the controller exports.
pub struct Metrics {
    registry: Registry,
    reloads: Family<ResultLabel, Counter>,
    runtime_updates: Family<ResultLabel, Counter>,
    apply_duration: Histogram,
    objects: Family<KindLabel, Gauge>,
    problems: Family<ReasonLabel, Gauge>,
    events_posted: Counter,
    status_writes: Counter,
    leader: Gauge,
    resident_memory: Gauge,
    peak_resident_memory: Gauge,
    cpu_seconds: Gauge<f64, AtomicU64>,
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
        let reloads = Family::<ResultLabel, Counter>::default();
        registry.register(
            "tugboat_haproxy_reloads",
            "haproxy reloads, by result (ok, refused, failed)",
            reloads.clone(),
        );
        let runtime_updates = Family::<ResultLabel, Counter>::default();
        registry.register(
            "tugboat_haproxy_runtime_updates",
            "Updates applied without a reload, by result (ok, failed)",
            runtime_updates.clone(),
        );
        let apply_duration = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        registry.register(
            "tugboat_apply_duration_seconds",
            "Time to build, render, write and apply one update",
            apply_duration.clone(),
        );
        let objects = Family::<KindLabel, Gauge>::default();
        registry.register(
            "tugboat_objects_watched",
            "Objects held in the controller's stores, by kind",
            objects.clone(),
        );
        let problems = Family::<ReasonLabel, Gauge>::default();
        registry.register(
            "tugboat_object_problems",
            "Problems found in objects by the last update, by reason",
            problems.clone(),
        );
        let events_posted = Counter::default();
        registry.register(
            "tugboat_events_posted",
            "Warning Events posted on objects",
            events_posted.clone(),
        );
        let status_writes = Counter::default();
        registry.register(
            "tugboat_ingress_status_writes",
            "Ingress status updates written",
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
            reloads,
            runtime_updates,
            apply_duration,
            objects,
            problems,
            events_posted,
            status_writes,
            leader,
            resident_memory,
            peak_resident_memory,
            cpu_seconds,
        }
    }

    /// Counts one apply and its duration.
    pub fn record_apply(&self, outcome: ApplyOutcome, duration: Duration) {
        let result = |result| ResultLabel { result };
        match outcome {
            ApplyOutcome::Reloaded => self.reloads.get_or_create(&result("ok")).inc(),
            ApplyOutcome::Refused => self.reloads.get_or_create(&result("refused")).inc(),
            ApplyOutcome::Failed { reload: true } => {
                self.reloads.get_or_create(&result("failed")).inc()
            }
            ApplyOutcome::Runtime => self.runtime_updates.get_or_create(&result("ok")).inc(),
            ApplyOutcome::Failed { reload: false } => {
                self.runtime_updates.get_or_create(&result("failed")).inc()
            }
            ApplyOutcome::RuntimeFellBack => {
                self.runtime_updates
                    .get_or_create(&result("fallback"))
                    .inc();
                self.reloads.get_or_create(&result("ok")).inc()
            }
        };
        self.apply_duration.observe(duration.as_secs_f64());
    }

    /// Sets the current problems, counted by reason.
    pub fn set_problems(&self, problems: &[ObjectProblem]) {
        let mut by_reason: BTreeMap<&'static str, i64> = BTreeMap::new();
        for problem in problems {
            *by_reason.entry(problem.reason.as_str()).or_default() += 1;
        }
        self.problems.clear();
        for (reason, count) in by_reason {
            self.problems
                .get_or_create(&ReasonLabel { reason })
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

    pub fn add_status_writes(&self, count: usize) {
        self.status_writes.inc_by(count as u64);
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
    fn exports_counters_by_result_and_problems_by_reason() {
        let metrics = Metrics::new();
        metrics.record_apply(ApplyOutcome::Reloaded, Duration::from_millis(5));
        metrics.record_apply(ApplyOutcome::Reloaded, Duration::from_millis(5));
        metrics.record_apply(ApplyOutcome::Refused, Duration::from_millis(5));
        metrics.set_objects(&BTreeMap::from([("Ingress", 3)]));
        metrics.set_leader(true);
        let text = metrics.encode();
        assert!(
            text.contains("tugboat_haproxy_reloads_total{result=\"ok\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("tugboat_haproxy_reloads_total{result=\"refused\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("tugboat_objects_watched{kind=\"Ingress\"} 3"),
            "{text}"
        );
        assert!(text.contains("tugboat_leader 1"), "{text}");
        assert!(
            text.contains("tugboat_apply_duration_seconds_count 3"),
            "{text}"
        );
        assert!(text.contains("process_resident_memory_bytes "), "{text}");
    }
}
