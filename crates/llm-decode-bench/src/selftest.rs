//! `llm-decode-bench selftest`: this host's client ceiling. Starts the
//! `firehose-paced` simulator on a thread of its own (so its CPU is not billed
//! to the client), measures rising levels with `ldb_runner::selftest`, prints
//! the table and the verdict (methodology §9.3).

use std::net::SocketAddr;

use ldb_core::selftest::{LevelResult, ceiling, header_line, level_line, verdict};
use ldb_runner::selftest::{SelftestOptions, run as measure};
use serde_json::json;
use tokio::sync::oneshot;

use crate::cli::SelftestArgs;
use crate::error::{AppError, exit, exit_with};
use crate::fdlimit::{BASE_FILES, ensure_open_files};

/// The simulator thread's name; the client's CPU leaves it out.
const SIM_THREAD: &str = "ldb-sim";

/// Runs the subcommand; the return value is the process exit code.
pub async fn run(a: &SelftestArgs) -> i32 {
    exit_with(selftest(a).await)
}

/// 16, 64, 256, … (×4) below `max`, then `max`.
pub fn levels(max: u32) -> Vec<u32> {
    let mut v = Vec::new();
    let mut n = 16u32;
    while n < max {
        v.push(n);
        n = n.saturating_mul(4);
    }
    v.push(max);
    v
}

/// The simulator on its own thread; dropping the sender stops it.
struct SimThread {
    url: String,
    truth: ldb_sim::TruthProbe,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for SimThread {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn start_sim(max_streams: u32) -> Result<SimThread, AppError> {
    let mut scenario = ldb_sim::Scenario::builtin("firehose-paced").map_err(AppError::config)?;
    scenario.scheduler.max_running = scenario.scheduler.max_running.max(max_streams);
    type Started = Result<(String, ldb_sim::TruthProbe), String>;
    let (url_tx, url_rx) = std::sync::mpsc::channel::<Started>();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name(SIM_THREAD.into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .thread_name(SIM_THREAD)
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = url_tx.send(Err(format!("cannot start the simulator's runtime: {e}")));
                    return;
                }
            };
            rt.block_on(async move {
                let addr: SocketAddr = ([127, 0, 0, 1], 0).into();
                match ldb_sim::SimServer::start(scenario, None, addr).await {
                    Ok(sim) => {
                        let _ = url_tx.send(Ok((sim.base_url(), sim.truth())));
                        let _ = stop_rx.await;
                        sim.shutdown().await;
                    }
                    Err(e) => {
                        let _ = url_tx.send(Err(format!("cannot start the simulator: {e}")));
                    }
                }
            });
        })
        .map_err(|e| AppError::config(format!("cannot start the simulator thread: {e}")))?;
    let (url, truth) = url_rx
        .recv()
        .map_err(|_| AppError::config("the simulator thread ended before it served"))?
        .map_err(AppError::config)?;
    Ok(SimThread {
        url,
        truth,
        stop: Some(stop_tx),
        thread: Some(thread),
    })
}

fn level_json(l: &LevelResult) -> serde_json::Value {
    json!({
        "streams": l.streams,
        "window_s": l.window_s,
        "truth_tokens": l.truth_tokens,
        "measured_tokens": l.measured_tokens,
        "truth_tok_s": l.truth_tps(),
        "measured_tok_s": l.measured_tps(),
        "ratio": l.ratio(),
        "client_cpu_us_per_token": l.cpu_us_per_token(),
        "event_loop_lag_p99": l.loop_lag_p99_s,
        "failed": l.failed,
        "kept_up": l.kept_up(),
    })
}

async fn selftest(a: &SelftestArgs) -> Result<i32, AppError> {
    let levels = levels(a.max_streams);
    // both ends of every stream live in this process
    ensure_open_files(
        2 * u64::from(a.max_streams) + BASE_FILES,
        &format!("selftest up to {} streams", a.max_streams),
    )?;
    let sim = start_sim(a.max_streams)?;
    let opts = SelftestOptions {
        levels,
        warmup_s: 1.0,
        window_s: a.window,
        max_tokens: 512,
        model: "sim-firehose".into(),
        sim_thread_prefix: SIM_THREAD.into(),
        stop_at_first_miss: !a.all_levels,
    };
    if !a.json {
        println!(
            "client self-check: streams from an in-process simulator (125 tok/s each), \
             {:.0} s windows; the truth is the simulator's own token counter",
            a.window
        );
        println!("{}", header_line());
    }
    let json_out = a.json;
    let probe = sim.truth.clone();
    let truth: ldb_runner::selftest::Truth = std::sync::Arc::new(move || {
        let (generated, running) = probe.generated_and_running();
        (generated, running)
    });
    let result = crate::stop_signals::until_stopped(measure(&sim.url, truth, &opts, |l| {
        if !json_out {
            println!("{}", level_line(l));
        }
    }))
    .await;
    drop(sim);
    let Some(result) = result else {
        eprintln!("selftest interrupted: no verdict (the levels above were measured)");
        return Ok(exit::INTERRUPTED);
    };
    let done = result.map_err(|e| AppError::Server(format!("selftest: {e}")))?;
    let v = verdict(&done);
    if a.json {
        let c = ceiling(&done);
        println!(
            "{}",
            json!({
                "levels": done.iter().map(level_json).collect::<Vec<_>>(),
                "ceiling_streams": c.last_ok.map(|i| done[i].streams),
                "first_missed_streams": c.first_miss.map(|i| done[i].streams),
                "verdict": v,
            })
        );
    } else {
        println!("{v}");
    }
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_rise_by_four_and_end_at_the_maximum() {
        assert_eq!(levels(1024), vec![16, 64, 256, 1024]);
        assert_eq!(levels(1000), vec![16, 64, 256, 1000]);
        assert_eq!(levels(10), vec![10]);
        assert_eq!(levels(16), vec![16]);
        assert_eq!(levels(4096), vec![16, 64, 256, 1024, 4096]);
    }
}
