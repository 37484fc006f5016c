//! Made-up snapshots for the demo example, the render bench and the
//! snapshot tests. Deterministic: no clocks, no randomness.

use ldb_core::hardware::GpuSample;
use ldb_core::live::{
    CellStage, CurrentCell, HardwareLive, LiveSnapshot, MatrixCell, MatrixCellState, Phase,
    PrefillRow, StreamText,
};
use ldb_core::result::CellStatus;

const CONTEXTS: [u64; 4] = [0, 8192, 32768, 131072];
const CONCS: [u32; 5] = [1, 2, 4, 8, 16];

fn base() -> LiveSnapshot {
    LiveSnapshot {
        model: "Qwen/Qwen3-30B-A3B-FP8".into(),
        engine: "SGLang".into(),
        server: "http://127.0.0.1:30000".into(),
        kv_budget: 884_736,
        concurrencies: CONCS.to_vec(),
        contexts: CONTEXTS.to_vec(),
        matrix: CONTEXTS
            .iter()
            .flat_map(|&context| {
                CONCS.iter().map(move |&concurrency| MatrixCell {
                    context,
                    concurrency,
                    state: MatrixCellState::Pending,
                })
            })
            .collect(),
        ..LiveSnapshot::default()
    }
}

fn done(tps: f64, c: u32, ctx: u64) -> MatrixCellState {
    let ctx_k = ctx as f64 / 1024.0;
    MatrixCellState::Done {
        tps: Some(tps),
        ttft_p50: 0.045 + ctx_k * 0.004 * f64::from(c).sqrt(),
        itl_p50: f64::from(c) / tps,
        ttfo_p50: f64::NAN,
        status: CellStatus::Ok,
        effective: f64::from(c),
        tps_ci95: None,
    }
}

fn set(s: &mut LiveSnapshot, ctx: u64, c: u32, state: MatrixCellState) {
    if let Some(m) = s
        .matrix
        .iter_mut()
        .find(|m| m.context == ctx && m.concurrency == c)
    {
        m.state = state;
    }
}

/// A finished prefill table for 8k, 32k and 128k.
fn prefill_done() -> Vec<PrefillRow> {
    [(8192, 0.61), (32768, 2.4), (131072, 11.8)]
        .iter()
        .map(|&(context, ttft)| PrefillRow {
            context,
            method: "integrated_scout".into(),
            tok_per_sec: Some(context as f64 / ttft),
            ttft: Some(ttft),
            ..PrefillRow::default()
        })
        .collect()
}

/// Four busy GPUs and a CPU.
pub fn hardware() -> HardwareLive {
    HardwareLive {
        gpus: (0..4)
            .map(|i| GpuSample {
                index: i,
                util_pct: Some(97.0 - f64::from(i)),
                mem_util_pct: Some(61.0 + f64::from(i) * 2.0),
                vram_used_mb: Some(131_000.0 + f64::from(i) * 900.0),
                vram_total_mb: Some(143_771.0),
                power_w: Some(520.0 + f64::from(i) * 31.0),
                power_limit_w: Some(700.0),
                temp_c: Some(64.0 + f64::from(i) * 6.0),
                sm_clock_mhz: Some(1980.0),
                pcie_rx_mb_s: Some(412.0),
                pcie_tx_mb_s: Some(388.0),
                ..GpuSample::default()
            })
            .collect(),
        cpu_util_pct: Some(7.0),
        cpu_freq_mhz: Some(3100.0),
        cpu_temp_c: Some(54.0),
    }
}

/// Mid-decode: prefill finished, several cells done (one capacity-limited,
/// one error, one user-skipped, KV pre-skips), C=4 ctx=32k measuring.
pub fn mid_decode() -> LiveSnapshot {
    let mut s = base();
    s.phase = Phase::Decode;
    s.elapsed = 1234.0;
    s.eta = Some(2710.0);
    s.prefill = prefill_done();
    for (i, &c) in CONCS.iter().enumerate() {
        set(
            &mut s,
            0,
            c,
            done(141.2 * f64::from(c) * 0.93f64.powi(i as i32), c, 0),
        );
        set(
            &mut s,
            8192,
            c,
            done(133.9 * f64::from(c) * 0.9f64.powi(i as i32), c, 8192),
        );
    }
    set(
        &mut s,
        8192,
        16,
        MatrixCellState::Done {
            tps: Some(1298.4),
            ttft_p50: 0.92,
            itl_p50: 0.0098,
            ttfo_p50: f64::NAN,
            status: CellStatus::CapacityLimited,
            effective: 12.6,
            tps_ci95: None,
        },
    );
    set(&mut s, 32768, 1, done(128.7, 1, 32768));
    set(
        &mut s,
        32768,
        2,
        MatrixCellState::Done {
            tps: None,
            ttft_p50: f64::NAN,
            itl_p50: f64::NAN,
            ttfo_p50: f64::NAN,
            status: CellStatus::Error,
            effective: 2.0,
            tps_ci95: None,
        },
    );
    set(&mut s, 32768, 4, MatrixCellState::Running);
    set(&mut s, 131072, 8, skipped(CellStatus::SkippedKv));
    set(&mut s, 131072, 16, skipped(CellStatus::SkippedKv));
    set(&mut s, 131072, 1, skipped(CellStatus::SkippedUser));
    s.current = Some(CurrentCell {
        concurrency: 4,
        context: 32768,
        stage: CellStage::Window,
        running: Some(4.0),
        queued: Some(0.0),
        producing: 4,
        tps_trace: (0..40)
            .map(|i| 468.0 + 9.0 * (f64::from(i) * 0.7).sin())
            .collect(),
        window_tokens: 2810,
        window_elapsed: 6.0,
        window_total: 10.0,
        stage_elapsed: 6.0,
        accept_length: Some(2.94),
        rate_ci: None,
    });
    s.hardware = Some(hardware());
    s.events = vec![
        "10:02:11 startup preparation done".into(),
        "10:02:40 prefill done ctx=128k 11,108 tok/s".into(),
        "10:03:02 cell done C=1 ctx=0 141.2 tok/s".into(),
        "10:09:15 cell done C=16 ctx=8k 1,298.4 tok/s (12.6/16 running)".into(),
        "10:09:31 cell start C=1 ctx=32k".into(),
        "10:09:52 cell done C=1 ctx=32k 128.7 tok/s".into(),
        "10:10:20 ERROR C=2 ctx=32k: stream ended: connection reset".into(),
        "10:10:24 cell start C=4 ctx=32k".into(),
        "10:10:31 ready C=4 ctx=32k running=4 queue=0".into(),
        "10:10:31 measure start C=4 ctx=32k 10s".into(),
    ];
    s.outputs = (0..4)
        .map(|slot| StreamText {
            slot,
            text: format!(
                "Stream {slot}: The quick brown fox jumps over the lazy dog. {}",
                "Counting tokens one by one while the window runs. ".repeat(12)
            ),
        })
        .collect();
    s
}

fn skipped(status: CellStatus) -> MatrixCellState {
    MatrixCellState::Done {
        tps: None,
        ttft_p50: f64::NAN,
        itl_p50: f64::NAN,
        ttfo_p50: f64::NAN,
        status,
        effective: 0.0,
        tps_ci95: None,
    }
}

/// Prefill phase: 8k done, 32k running with an ETA, 128k pending, no
/// hardware telemetry.
pub fn prefill_running() -> LiveSnapshot {
    let mut s = base();
    s.phase = Phase::Prefill;
    s.elapsed = 48.0;
    s.eta = None;
    let mut rows = prefill_done();
    rows[1] = PrefillRow {
        context: 32768,
        method: "client".into(),
        elapsed: 1.6,
        eta: Some(0.9),
        ..PrefillRow::default()
    };
    rows[2] = PrefillRow {
        context: 131072,
        method: "client".into(),
        ..PrefillRow::default()
    };
    s.prefill = rows;
    s.events = vec![
        "10:01:20 startup engine SGLang 0.5.2 models=[Qwen/Qwen3-30B-A3B-FP8]".into(),
        "10:01:20 startup KV cache budget: 884,736 tokens".into(),
        "10:01:58 prefill start ctx=8k".into(),
        "10:01:59 prefill done ctx=8k 13,429 tok/s".into(),
        "10:02:00 prefill start ctx=32k".into(),
    ];
    s
}

/// A run `t` seconds in, for the demo example: prefill for 2 s, then the
/// decode matrix filling in one cell per 0.25 s with a live current cell.
pub fn at(t: f64) -> LiveSnapshot {
    let mut s = base();
    s.hardware = Some(hardware());
    s.elapsed = t;
    if t < 2.0 {
        s = prefill_running();
        s.elapsed = t;
        s.hardware = Some(hardware());
        return s;
    }
    s.phase = Phase::Decode;
    s.prefill = prefill_done();
    let step = ((t - 2.0) / 0.25) as usize;
    let total = s.matrix.len();
    s.eta = Some((total.saturating_sub(step)) as f64 * 0.25);
    let mut current = None;
    for (i, m) in s.matrix.iter_mut().enumerate() {
        if i < step {
            m.state = done(
                140.0 * f64::from(m.concurrency) * 0.95,
                m.concurrency,
                m.context,
            );
        } else if i == step {
            m.state = MatrixCellState::Running;
            let frac = (t - 2.0) / 0.25 - step as f64;
            current = Some(CurrentCell {
                concurrency: m.concurrency,
                context: m.context,
                stage: CellStage::Window,
                running: Some(f64::from(m.concurrency)),
                queued: Some(0.0),
                producing: m.concurrency,
                tps_trace: (0..(frac * 40.0) as usize)
                    .map(|k| 130.0 * f64::from(m.concurrency) + 5.0 * (k as f64).sin())
                    .collect(),
                window_tokens: (frac * 1300.0) as u64,
                window_elapsed: frac * 10.0,
                window_total: 10.0,
                stage_elapsed: frac * 10.0,
                accept_length: None,
                rate_ci: None,
            });
        }
    }
    if let Some(c) = &current {
        s.outputs = (0..c.concurrency.min(4))
            .map(|slot| StreamText {
                slot,
                text: (0..(t * 6.0) as usize)
                    .map(|i| format!("[{slot}] token run {i}: lorem ipsum dolor sit amet"))
                    .collect::<Vec<_>>()
                    .join("\n"),
            })
            .collect();
    }
    s.current = current;
    s.events = (0..step.min(total))
        .map(|i| format!("cell done #{i}"))
        .collect();
    s
}
