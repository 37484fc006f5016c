//! A made-up result of any size, for the page's size test and speed bench.

use ldb_core::document::ResultDocument;
use ldb_core::hardware::HardwareSummary;
use ldb_core::result::{
    CellResult, CellStatus, DecodeMode, Dist, PrefillEntry, RequestSample, RunStatus,
};

/// A complete-looking result: `concs` concurrencies (1, 2, 4, …) ×
/// `contexts` contexts (0, 4k, 8k, …), every cell measured with
/// `samples_per_cell` request samples, token gaps and hardware figures;
/// one cell in each row of eight failed and one was skipped for KV.
pub fn synthetic_result(concs: u32, contexts: u64, samples_per_cell: usize) -> ResultDocument {
    let mut doc = ResultDocument::default();
    let m = &mut doc.metadata;
    m.engine = "vllm".into();
    m.engine_version = "0.0-synthetic".into();
    m.model = "synthetic-model".into();
    m.server = "127.0.0.1:1".into();
    m.decode_mode = Some(DecodeMode::Duration);
    m.duration_per_test = 30.0;
    m.max_tokens = 1024;
    m.run_status = Some(RunStatus::Complete);
    m.concurrency_levels = (0..concs).map(|i| 1u32 << i.min(30)).collect();
    m.context_lengths = (0..contexts).map(|i| i * 4096).collect();
    let (levels, ctxs) = (m.concurrency_levels.clone(), m.context_lengths.clone());
    for (k, &ctx) in ctxs.iter().enumerate() {
        doc.prefill.insert(
            ctx.max(1024),
            PrefillEntry {
                tok_per_sec: 9000.0 - 100.0 * k as f64,
                ttft_seconds: 0.2,
                prompt_tokens: ctx.max(1024),
                samples: 1,
                ..PrefillEntry::default()
            },
        );
        for (j, &c) in levels.iter().enumerate() {
            let n = j + 8 * k;
            let mut cell = CellResult {
                concurrency: c,
                context_tokens: ctx,
                benchmark_mode: DecodeMode::Duration,
                ..CellResult::default()
            };
            if n % 8 == 5 {
                cell.ext.status = CellStatus::Error;
                cell.ext.status_reason = format!("HTTP 500 at C={c}");
            } else if n % 8 == 7 {
                cell.ext.status = CellStatus::SkippedKv;
            } else {
                let per_user = 80.0 / (1.0 + 0.05 * f64::from(c).sqrt()) / (1.0 + k as f64 * 0.05);
                let total = per_user * f64::from(c);
                cell.aggregate_tps = Some(total);
                cell.per_request_avg_tps = Some(per_user);
                cell.sched.effective_concurrency = f64::from(c);
                cell.sched.avg_running_reqs = f64::from(c);
                let ttft = 0.05 + 0.001 * f64::from(c) + ctx as f64 / 20000.0;
                cell.latency.ttft = Some(Dist {
                    avg: ttft,
                    p50: ttft,
                    p90: ttft * 1.5,
                    p99: ttft * 2.0,
                });
                cell.latency.ttfo = cell.latency.ttft;
                cell.latency.inter_token_latency.p50 = 1.0 / per_user;
                cell.latency.request_count = samples_per_cell as u64;
                cell.ext.token_gap_p50 = Some(1.0 / per_user);
                cell.ext.token_gap_p99 = Some(3.0 / per_user);
                cell.ext.tokens_per_joule = total / 400.0;
                cell.hardware_summary = HardwareSummary {
                    samples: 30,
                    gpu_count: 2,
                    power_total_avg_w: Some(300.0 + 2.0 * f64::from(c).min(200.0)),
                    power_total_max_w: Some(700.0),
                    ..HardwareSummary::default()
                };
                cell.request_samples = (0..samples_per_cell)
                    .map(|i| RequestSample {
                        ttft,
                        ttfo: ttft,
                        latency: 10.0,
                        inter_token_latency_avg: 1.0 / per_user,
                        input_tokens: ctx,
                        output_tokens: 1024,
                        output_tps_per_user: per_user,
                        completed: true,
                        start_s: i as f64 * 0.01,
                        first_token_s: Some(i as f64 * 0.01 + ttft),
                        end_s: Some(i as f64 * 0.01 + 10.0),
                        in_window: true,
                        itl_source: "usage".into(),
                        finish_reason: "length".into(),
                        ..RequestSample::default()
                    })
                    .collect();
            }
            doc.results.push(cell);
        }
    }
    doc
}
