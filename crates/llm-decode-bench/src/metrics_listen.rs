//! `--metrics-listen ADDR:PORT`: the benchmark's own state in the Prometheus
//! text format at `/metrics` while it runs, for Grafana beside the engine's
//! series (deploy/grafana/llm-decode-bench.json). The page is drawn from the
//! live snapshot the dashboard reads, plus two readings of this process
//! taken here: its CPU share since the previous scrape and the lateness of
//! a 10 ms timer on its runtime (event-loop lag). Loopback unless an address
//! is given; the socket is bound before anything is sent, so a port in use
//! is a configuration error (exit 2). The connections are served by
//! [`http`], which bounds the time and bytes of a request head and the
//! number of connections open at once.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ldb_core::live::{LiveSnapshot, MatrixCellState};
use ldb_core::result::CellStatus;
use ldb_runner::Live;
use tokio::net::TcpListener;

use crate::error::AppError;

mod http;

/// Bind `--metrics-listen` (`PORT` or `:PORT` alone: 127.0.0.1).
pub async fn bind(spec: &str) -> Result<TcpListener, AppError> {
    let spec = spec.trim();
    let addr = if spec.chars().all(|c| c.is_ascii_digit()) {
        format!("127.0.0.1:{spec}")
    } else if let Some(port) = spec.strip_prefix(':') {
        format!("127.0.0.1:{port}")
    } else {
        spec.to_string()
    };
    let parsed: std::net::SocketAddr = addr.parse().map_err(|_| {
        AppError::Config(format!(
            "invalid --metrics-listen: {spec:?} is not ADDR:PORT (e.g. 127.0.0.1:9464)"
        ))
    })?;
    TcpListener::bind(parsed)
        .await
        .map_err(|e| AppError::Config(format!("--metrics-listen {parsed}: cannot listen: {e}")))
}

/// This process's own readings, kept between scrapes.
struct Probe {
    /// (when, CPU time of all threads in ns) at the previous scrape.
    last_cpu: Mutex<Option<(Instant, u64)>>,
    /// Largest timer lateness of the last second, seconds, as f64 bits.
    lag: std::sync::atomic::AtomicU64,
}

/// Serve `/metrics` on `listener` until the returned task is aborted
/// (with the limits of [`http`]: head timeout, connection cap).
pub fn serve(listener: TcpListener, live: Live) -> tokio::task::JoinHandle<()> {
    let probe = Arc::new(Probe {
        last_cpu: Mutex::new(None),
        lag: Default::default(),
    });
    tokio::spawn(lag_probe(probe.clone()));
    let page = move || {
        let cpu = cpu_share(&probe);
        let lag = f64::from_bits(probe.lag.load(std::sync::atomic::Ordering::Relaxed));
        render(&live.snapshot(), cpu, Some(lag))
    };
    tokio::spawn(http::accept_loop(
        listener,
        Arc::new(page),
        http::HEADER_READ_TIMEOUT,
    ))
}

/// A 10 ms timer; the largest lateness of each second is published.
async fn lag_probe(probe: Arc<Probe>) {
    const PERIOD: Duration = Duration::from_millis(10);
    let (mut worst, mut since) = (0.0_f64, Instant::now());
    loop {
        let due = Instant::now() + PERIOD;
        tokio::time::sleep(PERIOD).await;
        worst = worst.max(Instant::now().saturating_duration_since(due).as_secs_f64());
        if since.elapsed() >= Duration::from_secs(1) {
            probe
                .lag
                .store(worst.to_bits(), std::sync::atomic::Ordering::Relaxed);
            (worst, since) = (0.0, Instant::now());
        }
    }
}

/// CPU time of this process over wall time × usable CPUs since the previous
/// scrape (the first scrape: since the process started is not known, so none).
fn cpu_share(probe: &Probe) -> Option<f64> {
    let now = (
        Instant::now(),
        ldb_runner::client_load::read_client_load().cpu_ns?,
    );
    let mut last = probe.last_cpu.lock().unwrap_or_else(|p| p.into_inner());
    let share = last.and_then(|(t0, c0)| {
        let wall = now.0.duration_since(t0).as_secs_f64();
        let cpus = ldb_runner::client_load::usable_cpus() as f64;
        (wall > 0.0).then(|| now.1.saturating_sub(c0) as f64 / 1e9 / (wall * cpus))
    });
    *last = Some(now);
    share
}

/// One gauge: `# HELP`, `# TYPE` and its samples.
fn gauge(out: &mut String, name: &str, help: &str, samples: &[(String, f64)]) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
    for (labels, v) in samples {
        let _ = writeln!(out, "{name}{labels} {v}");
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The page for one snapshot (pure; `cpu` and `lag` as measured here).
pub fn render(s: &LiveSnapshot, cpu: Option<f64>, lag: Option<f64>) -> String {
    let mut o = String::new();
    let one = |v: f64| vec![(String::new(), v)];
    let info = format!(
        "{{engine=\"{}\",model=\"{}\",server=\"{}\",phase=\"{}\"}}",
        escape(&s.engine),
        escape(&s.model),
        escape(&s.server),
        s.phase.label()
    );
    gauge(
        &mut o,
        "ldb_info",
        "The run: engine, model, server and phase (always 1).",
        &[(info, 1.0)],
    );
    gauge(
        &mut o,
        "ldb_elapsed_seconds",
        "Seconds since the run started.",
        &one(s.elapsed),
    );
    running_cell(&mut o, s);
    matrix(&mut o, s);
    let opt = |v: Option<f64>| v.map(&one).unwrap_or_default();
    gauge(
        &mut o,
        "ldb_client_cpu_share",
        "CPU time of this process over wall time x usable CPUs since the previous scrape, 0-1.",
        &opt(cpu),
    );
    gauge(
        &mut o,
        "ldb_event_loop_lag_seconds",
        "Largest lateness of a 10 ms timer on the client's runtime in the last second.",
        &opt(lag),
    );
    o
}

/// The running cell's gauges (zeros between cells).
fn running_cell(o: &mut String, s: &LiveSnapshot) {
    let one = |v: f64| vec![(String::new(), v)];
    let cur = s.current.as_ref();
    let cell = |f: fn(&ldb_core::live::CurrentCell) -> f64| one(cur.map_or(0.0, f));
    gauge(
        o,
        "ldb_cell_concurrency",
        "Concurrency of the running cell (0: none).",
        &cell(|c| f64::from(c.concurrency)),
    );
    gauge(
        o,
        "ldb_cell_context_tokens",
        "Context of the running cell, tokens.",
        &cell(|c| c.context as f64),
    );
    gauge(
        o,
        "ldb_cell_window_progress",
        "Share of the running cell's window measured, 0-1.",
        &cell(|c| {
            if c.window_total > 0.0 {
                (c.window_elapsed / c.window_total).clamp(0.0, 1.0)
            } else {
                0.0
            }
        }),
    );
    gauge(
        o,
        "ldb_cell_window_tokens",
        "Tokens counted in the running cell's window so far.",
        &cell(|c| c.window_tokens as f64),
    );
    gauge(
        o,
        "ldb_live_tokens_per_second",
        "Live aggregate decode tok/s of the running cell (latest trace point).",
        &cell(|c| c.tps_trace.last().copied().unwrap_or(0.0)),
    );
    gauge(
        o,
        "ldb_requests_in_flight",
        "Streams of the running cell producing tokens.",
        &cell(|c| f64::from(c.producing)),
    );
}

/// The matrix by state, and each finished cell's headline tok/s.
fn matrix(o: &mut String, s: &LiveSnapshot) {
    let one = |v: f64| vec![(String::new(), v)];
    let (mut done, mut errors, mut skipped, mut pending) = (0.0, 0.0, 0.0, 0.0);
    let mut finished = Vec::new();
    for m in &s.matrix {
        match &m.state {
            MatrixCellState::Pending | MatrixCellState::Running => pending += 1.0,
            MatrixCellState::Done { tps, status, .. } => {
                match status {
                    CellStatus::Error | CellStatus::NoTokens => errors += 1.0,
                    s if s.is_skip() => skipped += 1.0,
                    _ => done += 1.0,
                }
                if let Some(t) = tps {
                    let l = format!(
                        "{{concurrency=\"{}\",context=\"{}\"}}",
                        m.concurrency, m.context
                    );
                    finished.push((l, *t));
                }
            }
        }
    }
    let states = [
        ("valid", done),
        ("error", errors),
        ("skipped", skipped),
        ("pending", pending),
    ]
    .map(|(k, v)| (format!("{{state=\"{k}\"}}"), v));
    gauge(
        o,
        "ldb_cells",
        "Cells of the matrix by state (error: ERROR or no tokens).",
        &states,
    );
    gauge(
        o,
        "ldb_cell_errors",
        "Finished cells that are invalid (ERROR or no tokens).",
        &one(errors),
    );
    gauge(
        o,
        "ldb_cell_tokens_per_second",
        "Headline tok/s of each finished cell, as in the result.",
        &finished,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldb_core::live::{CurrentCell, MatrixCell};

    #[test]
    fn the_page_reads_the_snapshot() {
        let s = LiveSnapshot {
            engine: "vllm".into(),
            current: Some(CurrentCell {
                concurrency: 4,
                context: 8192,
                window_elapsed: 1.0,
                window_total: 4.0,
                producing: 3,
                tps_trace: vec![10.0, 120.5],
                ..CurrentCell::default()
            }),
            matrix: vec![MatrixCell {
                context: 0,
                concurrency: 1,
                state: MatrixCellState::Done {
                    tps: Some(99.5),
                    ttft_p50: 0.1,
                    itl_p50: 0.01,
                    ttfo_p50: f64::NAN,
                    status: CellStatus::Ok,
                    effective: 1.0,
                    tps_ci95: None,
                },
            }],
            ..LiveSnapshot::default()
        };
        let page = render(&s, Some(0.25), None);
        for line in [
            "ldb_cell_concurrency 4",
            "ldb_cell_context_tokens 8192",
            "ldb_cell_window_progress 0.25",
            "ldb_live_tokens_per_second 120.5",
            "ldb_requests_in_flight 3",
            "ldb_cell_tokens_per_second{concurrency=\"1\",context=\"0\"} 99.5",
            "ldb_cells{state=\"valid\"} 1",
            "ldb_client_cpu_share 0.25",
        ] {
            assert!(page.lines().any(|l| l == line), "{line} not in\n{page}");
        }
        assert!(
            !page
                .lines()
                .any(|l| l.starts_with("ldb_event_loop_lag_seconds")),
            "no lag sample when unknown"
        );
    }

    #[test]
    fn the_grafana_dashboard_asks_only_for_series_the_page_has() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/grafana/llm-decode-bench.json"
        );
        let dash = std::fs::read_to_string(path).expect("dashboard");
        let page = render(&LiveSnapshot::default(), Some(0.0), Some(0.0));
        let mut asked = 0;
        for (i, _) in dash.match_indices("ldb_") {
            let name: String = dash[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            assert!(
                page.contains(&format!("# TYPE {name} gauge")),
                "{name} is not served"
            );
            asked += 1;
        }
        assert!(asked >= 8, "the dashboard shows the benchmark's own series");
    }
}
