//! Result documents built by hand for the report tests.

#![allow(dead_code)]

use ldb_core::document::{Metadata, ResultDocument};
use ldb_core::hardware::summary::HardwareSummary;
use ldb_core::result::{
    AggregateSource, CellExtras, CellResult, CellStatus, DecodeMode, Dist, LatencyStats,
    PrefillEntry, PrefillMethod, PrefillMode, RunStatus, SchedulerFields, ServerValidation,
    UsageMode,
};

/// Client-side numbers of a measured cell.
pub struct Measured {
    pub tps: f64,
    pub per_req: f64,
    pub source: AggregateSource,
    pub ttft_p50: f64,
    pub itl_p50: f64,
    pub lat: (f64, f64),
    pub requests: (u64, u64),
}

pub fn dist(p50: f64, p90: f64) -> Dist {
    Dist {
        avg: p50,
        p50,
        p90,
        p99: p90,
    }
}

/// A measured duration-mode cell; `sched` is (avg running, avg queue).
pub fn cell(
    c: u32,
    ctx: u64,
    m: Measured,
    sched: (f64, f64),
    limited: bool,
    hw: HardwareSummary,
) -> CellResult {
    CellResult {
        concurrency: c,
        context_tokens: ctx,
        benchmark_mode: DecodeMode::Duration,
        measurement_seconds: 10.0,
        measurement_wall_seconds: 10.0,
        aggregate_source: m.source,
        aggregate_tps: Some(m.tps),
        per_request_avg_tps: Some(m.per_req),
        latency: LatencyStats {
            ttft: Some(dist(m.ttft_p50, m.ttft_p50)),
            inter_token_latency: dist(m.itl_p50, m.itl_p50),
            request_latency: dist(m.lat.0, m.lat.1),
            e2e_output_tps_per_user: dist(1.0 / m.itl_p50.max(1e-9), 1.0 / m.itl_p50.max(1e-9)),
            request_count: m.requests.0,
            completed_request_count: m.requests.1,
            ..LatencyStats::default()
        },
        num_completed: m.requests.1,
        sched: SchedulerFields {
            avg_running_reqs: sched.0,
            max_running_reqs: sched.0.ceil() as u64,
            effective_concurrency: sched.0,
            avg_queue_reqs: sched.1,
            max_queue_reqs: sched.1.ceil() as u64,
            queue_fraction: if sched.1 > 0.0 { 1.0 } else { 0.0 },
            underfilled: f64::from(c) > 1.0 && sched.0 < 0.98 * f64::from(c),
            capacity_limited: limited,
        },
        warmup_timed_out: limited,
        hardware_summary: hw,
        ext: CellExtras {
            status: if limited {
                CellStatus::CapacityLimited
            } else {
                CellStatus::Ok
            },
            usage_mode: UsageMode::Continuous,
            ..CellExtras::default()
        },
        ..CellResult::default()
    }
}

/// A cell that has a status instead of numbers.
pub fn status_cell(c: u32, ctx: u64, status: CellStatus, reason: &str) -> CellResult {
    CellResult::skipped(c, ctx, DecodeMode::Duration, status, reason.to_string())
}

/// A hardware summary with the keys the report reads.
pub fn hw(
    gpu: (f64, f64),
    mem: f64,
    watts: (f64, f64),
    temp: f64,
    cpu: f64,
    vram: f64,
    pcie: (f64, f64),
) -> HardwareSummary {
    HardwareSummary {
        samples: 5,
        gpu_count: 4,
        gpu_util_avg_pct: Some(gpu.0),
        gpu_util_max_pct: Some(gpu.1),
        mem_util_avg_pct: Some(mem),
        power_total_avg_w: Some(watts.0),
        power_total_max_w: Some(watts.1),
        power_limit_total_w: Some(1200.0),
        temp_max_c: Some(temp),
        cpu_temp_max_c: Some(cpu),
        vram_used_avg_pct: Some(vram),
        pcie_rx_avg_mb_s: Some(pcie.0),
        pcie_tx_avg_mb_s: Some(pcie.1),
        ..HardwareSummary::default()
    }
}

pub fn metadata(concs: &[u32], ctxs: &[u64]) -> Metadata {
    Metadata {
        version: "0.1.0".into(),
        tool: "llm-decode-bench".into(),
        engine: "vllm".into(),
        model: "GLM-5.3-Flash-EXL3-4bpw".into(),
        server: "127.0.0.1:5001".into(),
        decode_mode: Some(DecodeMode::Duration),
        primary_decode_layer: "sustained_decode".into(),
        duration_per_test: 10.0,
        prefill_mode: Some(PrefillMode::IntegratedDecodeScout),
        burst_e2e_status: "not_run_use_--run-burst".into(),
        max_tokens: 1024,
        concurrency_levels: concs.to_vec(),
        context_lengths: ctxs.to_vec(),
        run_status: Some(RunStatus::Complete),
        ..Metadata::default()
    }
}

/// A client-measured prefill row.
pub fn prefill(method: PrefillMethod, tokens: u64, ttft: f64, tps: f64) -> PrefillEntry {
    PrefillEntry {
        ttft_seconds: ttft,
        prefill_seconds: ttft,
        tok_per_sec: tps,
        client_ttft_seconds: ttft,
        client_tok_per_sec: tps,
        prompt_tokens: tokens,
        samples: 1,
        method: Some(method),
        ..PrefillEntry::default()
    }
}

fn m(
    tps: f64,
    per_req: f64,
    source: AggregateSource,
    ttft_itl: (f64, f64),
    lat: (f64, f64),
    requests: (u64, u64),
) -> Measured {
    Measured {
        tps,
        per_req,
        source,
        ttft_p50: ttft_itl.0,
        itl_p50: ttft_itl.1,
        lat,
        requests,
    }
}

const CU: AggregateSource = AggregateSource::OpenaiContinuousUsage;

/// The seed result (C 1,2,4 × ctx 0,64k) with the reference's values.
pub fn seed_doc() -> ResultDocument {
    let mut p64 = prefill(PrefillMethod::IntegratedScout, 64513, 15.015, 4297.0);
    p64.server_validation = ServerValidation {
        method: "prometheus:kv_computed".into(),
        tok_per_sec: 4320.0,
        prefill_seconds: 14.934,
        prompt_tokens: 64513,
        samples: 1,
        token_source: "kv_computed".into(),
        ..ServerValidation::default()
    };
    let results = vec![
        cell(
            1,
            0,
            m(
                129.45196578500713,
                129.45196578500713,
                CU,
                (0.13393967098090798, 0.0078036521248696505),
                (8.68479720497271, 8.68479720497271),
                (2, 1),
            ),
            (1.0, 0.0),
            false,
            hw(
                (49.5, 99.0),
                26.75,
                (619.0, 619.23),
                57.0,
                66.62,
                48.42,
                (2535.0, 2322.5),
            ),
        ),
        cell(
            1,
            65536,
            m(
                122.23577506588123,
                122.23577506588123,
                CU,
                (15.145516593009233, 0.007767802618777622),
                (23.09197867201874, 23.09197867201874),
                (1, 1),
            ),
            (1.0, 0.0),
            false,
            hw(
                (49.81, 100.0),
                14.59,
                (617.6, 622.46),
                65.0,
                66.88,
                48.42,
                (10950.75, 15013.5),
            ),
        ),
        cell(
            2,
            0,
            m(
                115.94808445857444,
                57.97404222928722,
                CU,
                (8.624857554968912, 0.00816347410365027),
                (17.21378530547372, 17.579868975607678),
                (9, 8),
            ),
            (1.0, 1.0),
            true,
            hw(
                (49.4, 99.0),
                25.45,
                (619.02, 619.47),
                67.0,
                66.38,
                48.42,
                (2422.0, 2273.8),
            ),
        ),
        cell(
            4,
            0,
            m(
                118.97538984991404,
                29.74384746247851,
                CU,
                (24.75903701898642, 0.008184581259989297),
                (33.088808445987524, 33.99806104596937),
                (9, 8),
            ),
            (1.0, 3.0),
            true,
            hw(
                (49.5, 99.0),
                26.0,
                (619.54, 619.93),
                69.0,
                67.12,
                48.42,
                (2439.75, 2278.25),
            ),
        ),
        cell(
            2,
            65536,
            m(
                12.118983865880503,
                6.059491932940252,
                CU,
                (40.205350022006314, 0.008107823757570827),
                (48.06976508401567, 48.95471742947702),
                (5, 4),
            ),
            (1.0, 1.0),
            true,
            hw(
                (49.75, 100.0),
                10.07,
                (617.96, 618.92),
                74.0,
                67.25,
                48.42,
                (14405.09, 16793.09),
            ),
        ),
        cell(
            4,
            65536,
            m(
                0.06453558471444981,
                0.016133896178612453,
                AggregateSource::PrometheusFallback,
                (53.92967229100759, 0.008637062442312125),
                (62.90479161249823, 92.55194512308226),
                (4, 4),
            ),
            (1.0, 3.0),
            true,
            hw(
                (49.72, 100.0),
                10.35,
                (618.56, 620.17),
                75.0,
                67.12,
                48.42,
                (14517.06, 17394.76),
            ),
        ),
    ];
    ResultDocument {
        metadata: metadata(&[1, 2, 4], &[0, 65536]),
        hardware_run_summary: HardwareSummary {
            samples: 243,
            duration_seconds: 577.387,
            gpu_count: 4,
            power_total_avg_w: Some(604.36),
            power_total_max_w: Some(624.86),
            power_limit_total_w: Some(1200.0),
            ..HardwareSummary::default()
        },
        prefill: [
            (8192, prefill(PrefillMethod::ScoutOnly, 8199, 2.104, 3897.0)),
            (65536, p64),
        ]
        .into(),
        results,
        ..ResultDocument::default()
    }
}

/// A healthy measured cell with simple numbers.
pub fn ok_cell(c: u32, ctx: u64, tps: f64) -> CellResult {
    let per = tps / f64::from(c);
    cell(
        c,
        ctx,
        m(
            tps,
            per,
            CU,
            (0.05 + ctx as f64 / 20000.0, 1.0 / per),
            (1024.0 / per, 1100.0 / per),
            (2 * u64::from(c), u64::from(c)),
        ),
        (f64::from(c), 0.0),
        false,
        HardwareSummary::default(),
    )
}

/// Failed, skipped and empty cells on a wide matrix (C 1..16 × ctx 0, 32k, 128k).
pub fn problems_doc() -> ResultDocument {
    let mut with_err = ok_cell(2, 0, 480.1);
    with_err.num_errors = 1;
    with_err.hardware_summary = hw(
        (91.0, 99.0),
        40.0,
        (680.0, 702.0),
        71.0,
        0.0,
        62.5,
        (120.0, 80.0),
    );
    with_err.hardware_summary.energy_joules = Some(6843.2);
    with_err.ext.tokens_per_joule = 0.7;
    let mut first = ok_cell(1, 0, 250.3);
    first.hardware_summary = hw(
        (60.0, 80.0),
        30.0,
        (450.0, 470.0),
        60.0,
        55.0,
        62.5,
        (100.0, 60.0),
    );
    let mut limited = ok_cell(16, 0, 2950.0);
    limited.sched.avg_running_reqs = 12.4;
    limited.sched.avg_queue_reqs = 3.6;
    limited.sched.capacity_limited = true;
    limited.ext.status = CellStatus::CapacityLimited;
    let mut under = ok_cell(4, 32768, 610.0);
    under.sched.avg_running_reqs = 3.4;
    let mut kv8 = status_cell(8, 32768, CellStatus::SkippedKv, "");
    kv8.ext.kv_required_tokens = 8 * (32768 + 1024);
    kv8.ext.kv_deficit_tokens = 8 * (32768 + 1024) - 200_000;
    let mut kv16 = status_cell(
        16,
        32768,
        CellStatus::SkippedKv,
        "C × (context + max_tokens) exceeds the KV budget of 200,000 tokens",
    );
    kv16.ext.kv_required_tokens = 16 * (32768 + 1024);
    kv16.ext.kv_deficit_tokens = 16 * (32768 + 1024) - 200_000;
    let results = vec![
        first,
        with_err,
        status_cell(
            4,
            0,
            CellStatus::Error,
            "stream 3 failed mid-cell: HTTP 500 Internal Server Error",
        ),
        ok_cell(8, 0, 1500.0),
        limited,
        ok_cell(1, 32768, 201.7),
        status_cell(
            2,
            32768,
            CellStatus::NoTokens,
            "no output tokens arrived inside the 10 s window",
        ),
        under,
        kv8,
        kv16,
        status_cell(
            1,
            131072,
            CellStatus::SkippedContext,
            "131,072 + 1,024 tokens exceed the model context of 131,072",
        ),
        status_cell(
            2,
            131072,
            CellStatus::SkippedUser,
            "skipped by the user (s)",
        ),
    ];
    let mut p32 = prefill(PrefillMethod::IntegratedScout, 32781, 4.2, 7805.0);
    p32.server_validation = ServerValidation {
        method: "prometheus:kv_computed".into(),
        invalid_reason: "2 prefills counted during the scout (want 1)".into(),
        ..ServerValidation::default()
    };
    let p128 = PrefillEntry {
        skipped: true,
        skip_reason: "beyond the model context (131,072 tokens)".into(),
        method: Some(PrefillMethod::ScoutOnly),
        ..PrefillEntry::default()
    };
    ResultDocument {
        metadata: metadata(&[1, 2, 4, 8, 16], &[0, 32768, 131072]),
        prefill: [(32768, p32), (131072, p128)].into(),
        results,
        ..ResultDocument::default()
    }
}

/// A burst cell: `done` of `target` requests completed.
pub fn burst_cell(c: u32, ctx: u64, tps: f64, done: u64, target: u64) -> CellResult {
    let mut b = ok_cell(c, ctx, tps);
    b.benchmark_mode = DecodeMode::BurstE2e;
    b.aggregate_source = AggregateSource::OpenaiCompletedUsage;
    b.request_count_target = target;
    b.num_completed = done;
    b
}

/// Sustained cells plus Phase 3 burst cells (C 1,4 × ctx 0, 8k).
pub fn burst_doc() -> ResultDocument {
    let mut meta = metadata(&[1, 4], &[0, 8192]);
    meta.run_burst = true;
    meta.burst_e2e_status = "enabled".into();
    meta.burst_requests_per_concurrency = 5;
    let results = vec![
        ok_cell(1, 0, 131.2),
        ok_cell(4, 0, 498.6),
        ok_cell(1, 8192, 127.9),
        ok_cell(4, 8192, 471.3),
    ];
    let burst_results = vec![
        burst_cell(1, 0, 118.4, 5, 5),
        burst_cell(4, 0, 402.5, 20, 20),
        burst_cell(1, 8192, 96.1, 5, 5),
        status_cell(
            4,
            8192,
            CellStatus::Error,
            "3 of 20 requests failed: connection reset",
        ),
    ];
    let mut burst_results = burst_results;
    burst_results[3].benchmark_mode = DecodeMode::BurstE2e;
    burst_results[3].request_count_target = 20;
    burst_results[3].num_completed = 17;
    ResultDocument {
        metadata: meta,
        prefill: [(
            8192,
            prefill(PrefillMethod::IntegratedScout, 8201, 1.9, 4316.0),
        )]
        .into(),
        results,
        burst_results,
        ..ResultDocument::default()
    }
}

/// The seed run stopped by Ctrl-C after three cells.
pub fn interrupted_doc() -> ResultDocument {
    let mut doc = seed_doc();
    doc.metadata.run_status = Some(RunStatus::Interrupted);
    doc.metadata.run_burst = true;
    doc.metadata.engine = String::new();
    doc.results.truncate(2);
    doc.results.push(status_cell(
        2,
        0,
        CellStatus::SkippedUser,
        "run stopped (Ctrl-C) during this cell",
    ));
    doc.prefill.remove(&8192);
    doc.hardware_run_summary = HardwareSummary::default();
    doc
}
