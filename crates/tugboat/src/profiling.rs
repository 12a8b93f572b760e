//! Profiles on demand (`--profiling`, alias `--pprof`): a CPU profile of this process
//! over a chosen number of seconds, in pprof's protobuf format or as an SVG flame graph
//! (pprof-rs samples the stacks on `SIGPROF`, 99 times a second, only while a profile
//! is taken), and the heap figures the allocator and `/proc` tell at no cost. The admin
//! server ([`crate::admin`]) serves them under `/debug/pprof/`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pprof::protos::Message;
use serde::Serialize;
use tugboat_haproxy::blocking::blocking;

/// How many stacks a second the CPU profile samples: Go's rate, off a round number so
/// the samples do not beat with periodic work.
const SAMPLES_PER_SECOND: i32 = 99;

/// The seconds a CPU profile lasts when the request names none (Go's default).
pub const DEFAULT_SECONDS: u64 = 30;

/// The longest CPU profile a request may ask.
pub const MAX_SECONDS: u64 = 300;

/// Libraries whose frames are not unwound from the signal handler: unwinding inside
/// them (the C library's locks, the vDSO) can deadlock or crash.
const UNWIND_BLOCKLIST: [&str; 4] = ["libc", "libgcc", "pthread", "vdso"];

/// The shape a CPU profile is delivered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuFormat {
    /// pprof's `profile.proto`, as `go tool pprof` reads it.
    Pprof,
    /// An SVG flame graph.
    FlameGraph,
}

/// Why no CPU profile was taken.
#[derive(Debug)]
pub enum ProfileError {
    /// Profiling is off (`--profiling` not given).
    Disabled,
    /// Another CPU profile is being taken.
    Busy,
    /// The profiler could not start or report.
    Profiler(String),
}

/// Whether profiles are served, and the one CPU profile that may run at a time.
#[derive(Debug, Clone, Default)]
pub struct Profiling {
    enabled: bool,
    cpu_busy: Arc<AtomicBool>,
}

/// Marks the CPU profiler busy while it lives.
struct BusyGuard(Arc<AtomicBool>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl Profiling {
    /// Profiles served when `enabled`; otherwise every profiling endpoint is absent.
    pub fn new(enabled: bool) -> Self {
        Self {
            enabled,
            cpu_busy: Arc::default(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Samples this process for `duration`, then encodes the profile as `format`.
    pub async fn cpu_profile(
        &self,
        duration: Duration,
        format: CpuFormat,
    ) -> Result<Vec<u8>, ProfileError> {
        if !self.enabled {
            return Err(ProfileError::Disabled);
        }
        if self
            .cpu_busy
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(ProfileError::Busy);
        }
        let _busy = BusyGuard(self.cpu_busy.clone());
        // Starting resolves a first backtrace (pprof-rs loads the symbols then), which
        // takes seconds on a first profile: off the runtime, and before the duration runs.
        let guard = blocking(|| {
            pprof::ProfilerGuardBuilder::default()
                .frequency(SAMPLES_PER_SECOND)
                .blocklist(&UNWIND_BLOCKLIST)
                .build()
                .map_err(|err| ProfileError::Profiler(err.to_string()))
        })
        .await?;
        tokio::time::sleep(duration).await;
        // Resolving the symbols reads the binary: off the runtime. Dropping the guard
        // there stops the sampling.
        blocking(move || {
            let report = guard
                .report()
                .frames_post_processor(drop_profiler_frames)
                .build()
                .map_err(|err| ProfileError::Profiler(err.to_string()))?;
            drop(guard);
            encode(&report, format)
        })
        .await
    }
}

/// How far from the leaf the profiler's own frames may sit.
const PROFILER_FRAMES_MAX: usize = 8;

/// Drops the profiler's own frames (its unwinder, called from the signal handler) from
/// the leaf end of a stack, so the time is charged to the code that ran.
fn drop_profiler_frames(frames: &mut pprof::Frames) {
    let is_profiler_frame = |symbols: &Vec<pprof::Symbol>| {
        symbols.iter().any(|symbol| {
            let name = symbol.name();
            name.contains("pprof::")
                || name.contains("perf_signal_handler")
                || name == "__restore_rt"
        })
    };
    let leaf_end = frames.frames.len().min(PROFILER_FRAMES_MAX);
    if let Some(last) = frames.frames[..leaf_end]
        .iter()
        .rposition(is_profiler_frame)
    {
        frames.frames.drain(..=last);
    }
}

fn encode(report: &pprof::Report, format: CpuFormat) -> Result<Vec<u8>, ProfileError> {
    let mut body = Vec::new();
    match format {
        CpuFormat::Pprof => {
            let profile = report
                .pprof()
                .map_err(|err| ProfileError::Profiler(err.to_string()))?;
            profile
                .encode(&mut body)
                .map_err(|err| ProfileError::Profiler(err.to_string()))?;
        }
        CpuFormat::FlameGraph => report
            .flamegraph(&mut body)
            .map_err(|err| ProfileError::Profiler(err.to_string()))?,
    }
    Ok(body)
}

/// What the allocator and the kernel tell of this process' memory: totals, not a
/// profile of who allocated what.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HeapFigures {
    /// The global allocator: `jemalloc` (the default build) or `system`.
    pub allocator: &'static str,
    /// Bytes the program holds in live allocations (jemalloc's `stats.allocated`).
    pub allocated_bytes: Option<u64>,
    /// Bytes in the allocator's pages in use, live allocations and their slack
    /// (`stats.active`).
    pub active_bytes: Option<u64>,
    /// Bytes of the allocator's memory resident in RAM, its metadata included
    /// (`stats.resident`).
    pub allocator_resident_bytes: Option<u64>,
    /// Bytes the allocator has mapped (`stats.mapped`).
    pub mapped_bytes: Option<u64>,
    /// Bytes the allocator keeps mapped for reuse after freeing them (`stats.retained`).
    pub retained_bytes: Option<u64>,
    /// Bytes of the allocator's own bookkeeping (`stats.metadata`).
    pub metadata_bytes: Option<u64>,
    /// The process' resident memory (`VmRSS` in `/proc/self/status`).
    pub resident_bytes: u64,
    /// Its anonymous part: heap and stacks (`RssAnon`).
    pub anonymous_resident_bytes: u64,
    /// Its part mapped from files: the binary's code and the libraries' (`RssFile`).
    pub file_resident_bytes: u64,
    /// The highest resident memory since the start (`VmHWM`).
    pub peak_resident_bytes: u64,
}

impl HeapFigures {
    /// Reads the figures of the moment; `None` off Linux. Blocking (reads `/proc`).
    #[allow(
        clippy::disallowed_methods,
        reason = "reads /proc; its async caller runs it through the blocking helper"
    )]
    pub fn read() -> Option<Self> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let bytes = |field: &str| crate::metrics::status_kib(&status, field).map(|kib| kib * 1024);
        let mut figures = Self {
            allocator: "system",
            resident_bytes: bytes("VmRSS:")?,
            anonymous_resident_bytes: bytes("RssAnon:")?,
            file_resident_bytes: bytes("RssFile:")?,
            peak_resident_bytes: bytes("VmHWM:")?,
            ..Self::default()
        };
        figures.read_allocator();
        Some(figures)
    }

    #[cfg(feature = "jemalloc")]
    fn read_allocator(&mut self) {
        use tikv_jemalloc_ctl::{epoch, stats};
        self.allocator = "jemalloc";
        // jemalloc's statistics are a snapshot refreshed when the epoch advances.
        if epoch::advance().is_err() {
            return;
        }
        let figure = |read: fn() -> tikv_jemalloc_ctl::Result<usize>| {
            read().ok().and_then(|value| u64::try_from(value).ok())
        };
        self.allocated_bytes = figure(stats::allocated::read);
        self.active_bytes = figure(stats::active::read);
        self.allocator_resident_bytes = figure(stats::resident::read);
        self.mapped_bytes = figure(stats::mapped::read);
        self.retained_bytes = figure(stats::retained::read);
        self.metadata_bytes = figure(stats::metadata::read);
    }

    /// The system allocator tells nothing without unsafe calls: `/proc` only.
    #[cfg(not(feature = "jemalloc"))]
    fn read_allocator(&mut self) {}

    /// One `name value` line each, as a person reads them.
    pub fn to_text(&self) -> String {
        let optional = |value: Option<u64>| match value {
            Some(value) => value.to_string(),
            None => "-".to_string(),
        };
        let mut text = format!("allocator {}\n", self.allocator);
        for (name, value) in [
            ("allocated_bytes", optional(self.allocated_bytes)),
            ("active_bytes", optional(self.active_bytes)),
            (
                "allocator_resident_bytes",
                optional(self.allocator_resident_bytes),
            ),
            ("mapped_bytes", optional(self.mapped_bytes)),
            ("retained_bytes", optional(self.retained_bytes)),
            ("metadata_bytes", optional(self.metadata_bytes)),
            ("resident_bytes", self.resident_bytes.to_string()),
            (
                "anonymous_resident_bytes",
                self.anonymous_resident_bytes.to_string(),
            ),
            ("file_resident_bytes", self.file_resident_bytes.to_string()),
            ("peak_resident_bytes", self.peak_resident_bytes.to_string()),
        ] {
            text.push_str(&format!("{name} {value}\n"));
        }
        text
    }
}

/// Reads the heap figures off the runtime.
pub async fn heap_figures() -> Option<HeapFigures> {
    blocking(HeapFigures::read).await
}
