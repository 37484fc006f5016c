//! The hardware sampler: a background thread that reads GPUs and the CPU
//! every `interval` and keeps a bounded history, plus the handle the runner
//! uses to slice that history into per-cell summaries.
//!
//! ```no_run
//! use ldb_telemetry::{HardwareMonitor, MonitorConfig};
//! let hw = HardwareMonitor::start(MonitorConfig::from_flags(2.0, false, 8));
//! let mark = hw.mark(); // measurement window starts
//! // ... run the cell ...
//! let cell = hw.summary_since(mark); // attach as `hardware_summary`
//! let run = hw.summary(); // `hardware_run_summary`
//! hw.stop();
//! # let _ = (cell, run);
//! ```

mod history;

use crate::cpu::{CpuSource, HWMON_ROOT};
use crate::gpu::{GpuConfig, GpuSource};
use history::History;
use ldb_core::hardware::{HardwareSnapshot, HardwareSummary, summarize, summarize_window};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, mpsc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Default number of snapshots kept (≈ 11 h at 2 s).
pub const HISTORY_CAP: usize = 20_000;
/// Failed GPU reads in a row before a warning is raised.
const FAILURES_BEFORE_WARNING: u32 = 3;
/// Mark times remembered (oldest dropped first).
const MARKS_KEPT: usize = 4096;
/// How long `stop` waits for the sampler thread to finish.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// Sampler settings (CLI: `--hw-monitor-interval`, `--no-hw-monitor`,
/// `--hw-gpu-limit`).
#[derive(Debug, Clone, PartialEq)]
pub struct MonitorConfig {
    /// Sampling on at all.
    pub enabled: bool,
    /// Time between sample starts; zero disables sampling.
    pub interval: Duration,
    /// Most GPU rows a live panel shows (summaries still cover all GPUs).
    pub gpu_limit: usize,
    /// Snapshots kept; the oldest are dropped beyond this.
    pub history_cap: usize,
    /// GPU source settings.
    pub gpu: GpuConfig,
    /// hwmon root for CPU temperatures.
    pub hwmon_root: PathBuf,
}

impl Default for MonitorConfig {
    fn default() -> Self {
        MonitorConfig {
            enabled: true,
            interval: Duration::from_secs(2),
            gpu_limit: 8,
            history_cap: HISTORY_CAP,
            gpu: GpuConfig::default(),
            hwmon_root: PathBuf::from(HWMON_ROOT),
        }
    }
}

impl MonitorConfig {
    /// Settings from the CLI flags. A non-finite or non-positive interval or
    /// `no_hw_monitor` disables sampling; `gpu_limit` is at least 1.
    pub fn from_flags(interval_s: f64, no_hw_monitor: bool, gpu_limit: usize) -> Self {
        let interval = if interval_s.is_finite() && interval_s > 0.0 {
            Duration::from_secs_f64(interval_s.min(3600.0))
        } else {
            Duration::ZERO
        };
        MonitorConfig {
            enabled: !no_hw_monitor,
            interval,
            gpu_limit: gpu_limit.max(1),
            ..MonitorConfig::default()
        }
    }

    /// True when a sampler thread will run.
    pub fn is_active(&self) -> bool {
        self.enabled && !self.interval.is_zero()
    }
}

#[derive(Debug)]
struct State {
    history: History,
    startup_warning: Option<String>,
    sample_error: Option<String>,
    failures_in_a_row: u32,
}

#[derive(Debug)]
struct Shared {
    started: Instant,
    backend: Mutex<&'static str>,
    gpu_limit: usize,
    /// Time of the latest `mark()` per history index (bounded).
    marks: Mutex<BTreeMap<usize, f64>>,
    state: Mutex<State>,
    stop: Mutex<bool>,
    wake: Condvar,
    finished: Mutex<bool>,
    finished_cv: Condvar,
    thread: Mutex<Option<JoinHandle<()>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Starts samplers.
#[derive(Debug)]
pub struct HardwareMonitor;

impl HardwareMonitor {
    /// Starts the sampler thread, which first picks the GPU source (NVML,
    /// else `nvidia-smi`, else none), then samples at once and every
    /// `interval`. Waits for the source choice at most
    /// `2 × gpu.query_timeout + 2 s`; if that runs out (a hung driver), the
    /// handle reports backend `"none"` with a warning until the source
    /// answers. With sampling disabled it returns an idle handle whose
    /// summaries are empty.
    pub fn start(cfg: MonitorConfig) -> MonitorHandle {
        let active = cfg.is_active();
        let shared = Arc::new(Shared {
            started: Instant::now(),
            backend: Mutex::new("none"),
            gpu_limit: cfg.gpu_limit.max(1),
            marks: Mutex::new(BTreeMap::new()),
            state: Mutex::new(State {
                history: History::new(cfg.history_cap),
                startup_warning: None,
                sample_error: None,
                failures_in_a_row: 0,
            }),
            stop: Mutex::new(false),
            wake: Condvar::new(),
            finished: Mutex::new(!active),
            finished_cv: Condvar::new(),
            thread: Mutex::new(None),
        });
        if active {
            let open_limit = cfg.gpu.query_timeout * 2 + Duration::from_secs(2);
            let (ready_tx, ready_rx) = mpsc::channel();
            let s = Arc::clone(&shared);
            let spawned = thread::Builder::new()
                .name("ldb-hw-monitor".to_string())
                .spawn(move || {
                    let (gpu, warning) = GpuSource::open(&cfg.gpu);
                    *lock(&s.backend) = gpu.name();
                    lock(&s.state).startup_warning = warning;
                    let _ = ready_tx.send(());
                    let cpu = CpuSource::new(cfg.hwmon_root.clone());
                    sampler_loop(&s, gpu, cpu, cfg.interval);
                });
            match spawned {
                Ok(h) => {
                    *lock(&shared.thread) = Some(h);
                    if ready_rx.recv_timeout(open_limit).is_err() {
                        lock(&shared.state).startup_warning = Some(format!(
                            "GPU source did not answer within {:.0} s; GPU telemetry off until it does",
                            open_limit.as_secs_f64()
                        ));
                    }
                }
                Err(e) => {
                    lock(&shared.state).startup_warning =
                        Some(format!("hardware monitor thread failed: {e}"));
                    *lock(&shared.finished) = true;
                }
            }
        }
        MonitorHandle {
            guard: Arc::new(StopGuard(Arc::clone(&shared))),
            shared,
        }
    }
}

fn sampler_loop(shared: &Shared, mut gpu: GpuSource, mut cpu: CpuSource, interval: Duration) {
    loop {
        let tick = Instant::now();
        let gpus = gpu.sample();
        let t_s = shared.started.elapsed().as_secs_f64();
        let cpu_sample = cpu.sample();
        {
            let mut st = lock(&shared.state);
            let gpus = match gpus {
                Ok(g) => {
                    st.failures_in_a_row = 0;
                    st.sample_error = None;
                    g
                }
                Err(e) => {
                    st.failures_in_a_row += 1;
                    if st.failures_in_a_row >= FAILURES_BEFORE_WARNING {
                        st.sample_error = Some(format!(
                            "GPU sampling failing ({}x): {e}",
                            st.failures_in_a_row
                        ));
                    }
                    Vec::new()
                }
            };
            st.history.push(HardwareSnapshot {
                t_s,
                gpus,
                cpu: cpu_sample,
            });
        }
        let deadline = tick + interval;
        let mut stop = lock(&shared.stop);
        while !*stop {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            stop = shared
                .wake
                .wait_timeout(stop, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        if *stop {
            break;
        }
    }
    *lock(&shared.finished) = true;
    shared.finished_cv.notify_all();
}

/// Stops the sampler when the last handle clone goes away.
#[derive(Debug)]
struct StopGuard(Arc<Shared>);

impl Drop for StopGuard {
    fn drop(&mut self) {
        stop_shared(&self.0);
    }
}

fn stop_shared(shared: &Shared) {
    *lock(&shared.stop) = true;
    shared.wake.notify_all();
    let finished = lock(&shared.finished);
    let (finished, _) = shared
        .finished_cv
        .wait_timeout_while(finished, STOP_WAIT, |f| !*f)
        .unwrap_or_else(|e| e.into_inner());
    if *finished {
        drop(finished);
        if let Some(h) = lock(&shared.thread).take() {
            let _ = h.join();
        }
    }
}

/// Handle to a running (or idle) sampler. Cheap to clone; the sampler stops
/// on [`MonitorHandle::stop`] or when the last clone is dropped.
#[derive(Debug, Clone)]
pub struct MonitorHandle {
    shared: Arc<Shared>,
    guard: Arc<StopGuard>,
}

impl MonitorHandle {
    /// Seconds since the monitor started (the time base of snapshots).
    pub fn elapsed_s(&self) -> f64 {
        self.shared.started.elapsed().as_secs_f64()
    }

    /// Marks the start of a window (e.g. a cell's measurement start) and
    /// returns the history index of the next snapshot. The time of the mark
    /// is remembered, so that a later summary's energy starts at the mark and
    /// not at the first snapshot after it.
    pub fn mark(&self) -> usize {
        let index = lock(&self.shared.state).history.next_index();
        let mut marks = lock(&self.shared.marks);
        marks.insert(index, self.elapsed_s());
        while marks.len() > MARKS_KEPT {
            marks.pop_first();
        }
        index
    }

    /// Summary of the snapshots from history index `mark` on. When `mark`
    /// came from [`MonitorHandle::mark`], energy covers mark time → now;
    /// otherwise (e.g. `0` for "everything") it covers the snapshots' span.
    pub fn summary_since(&self, mark: usize) -> HardwareSummary {
        let end = self.elapsed_s();
        let start = lock(&self.shared.marks).get(&mark).copied();
        let slice = lock(&self.shared.state).history.range(mark, usize::MAX);
        summarize_window(&slice, start.map(|a| (a, end)))
    }

    /// Summary of the snapshots with history index in `[a, b)`; energy covers
    /// the two marks' times when both came from [`MonitorHandle::mark`].
    pub fn summary_between(&self, a: usize, b: usize) -> HardwareSummary {
        let window = {
            let marks = lock(&self.shared.marks);
            marks.get(&a).copied().zip(marks.get(&b).copied())
        };
        let slice = lock(&self.shared.state).history.range(a, b);
        summarize_window(&slice, window)
    }

    /// The snapshots with history index in `[a, b)` (a cell's timeline).
    pub fn samples_between(&self, a: usize, b: usize) -> Vec<HardwareSnapshot> {
        lock(&self.shared.state).history.range(a, b)
    }

    /// Summary of the whole retained history (`hardware_run_summary`).
    pub fn summary(&self) -> HardwareSummary {
        let slice = lock(&self.shared.state).history.range(0, usize::MAX);
        summarize(&slice)
    }

    /// Most recent snapshot (for the live dashboard).
    pub fn latest(&self) -> Option<HardwareSnapshot> {
        lock(&self.shared.state).history.latest().cloned()
    }

    /// The dashboard's hardware panel model from the latest snapshot, GPU
    /// rows capped at [`MonitorHandle::gpu_limit`]; `None` without GPU data.
    pub fn live(&self) -> Option<ldb_core::live::HardwareLive> {
        let st = lock(&self.shared.state);
        st.history
            .latest()
            .and_then(|s| crate::live::to_live(s, self.shared.gpu_limit))
    }

    /// `"nvml"`, `"nvidia-smi"` or `"none"`.
    pub fn backend(&self) -> &'static str {
        *lock(&self.shared.backend)
    }

    /// Most GPU rows a live panel should show.
    pub fn gpu_limit(&self) -> usize {
        self.shared.gpu_limit
    }

    /// Why GPU telemetry is off or failing, if it is.
    pub fn warning(&self) -> Option<String> {
        let st = lock(&self.shared.state);
        st.startup_warning
            .clone()
            .or_else(|| st.sample_error.clone())
    }

    /// True while the sampler thread runs.
    pub fn is_running(&self) -> bool {
        !*lock(&self.shared.finished)
    }

    /// Stops sampling; waits at most a few seconds for the thread (a stuck
    /// NVML call is left behind rather than stalling the caller).
    pub fn stop(&self) {
        stop_shared(&self.guard.0);
    }
}
