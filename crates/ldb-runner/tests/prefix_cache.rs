//! Shared prefixes, the intended prefix-cache hit rate and cache resets
//! against the simulator, whose block cache is the truth: with room for
//! every prefix the server's hit rate equals the intended one; with a small
//! capacity eviction shows as the difference; a reset leaves the next
//! request nothing cached; a refused reset is recorded and said once.

mod common;

use std::sync::Arc;

use common::{FLAT, SERIAL, bench, start};
use ldb_core::document::ResultDocument;
use ldb_core::open_loop::RateResult;
use ldb_core::prefix_cache::CacheGranularity;
use ldb_core::result::ResetStatus;
use ldb_runner::RunConfig;
use ldb_runner::prefix::{PrefixCacheSettings, ResetMode};
use ldb_sim::{Personality, SimHandle};

/// Rate cells at `rates` of `count` requests each at a 2k context, every
/// prompt opening with one of two 1,024-token shared prefixes.
fn config(sim: &SimHandle, rates: &[f64], count: u64, reset: ResetMode) -> RunConfig {
    RunConfig {
        target: ldb_runner::config::TargetConfig {
            base_url: sim.base_url(),
            server_label: sim.base_url(),
            ..Default::default()
        },
        matrix: ldb_runner::config::MatrixConfig {
            concurrency: vec![1],
            contexts: vec![2048],
            max_tokens: 4,
            duration: 1.0,
            decode_warmup_seconds: 0.0,
            ..Default::default()
        },
        prefill: ldb_runner::config::PrefillConfig {
            prefill_contexts: vec![],
            calibration_cache: None, // No prefill row (its server check waits for a scrape): the tests
            // that want one turn it back on.
            skip_prefill: true,
            ..Default::default()
        },
        open_loop: ldb_runner::config::OpenLoopConfig {
            request_rates: rates.to_vec(),
            rate_request_count: count,
            ..Default::default()
        },
        timing: ldb_runner::config::TimingConfig {
            cell_pause_seconds: 0.0,
            ..Default::default()
        },
        output: ldb_runner::config::OutputConfig {
            output: std::env::temp_dir().join("ldb-runner-prefix-cache-test.json"),
            ..Default::default()
        },
        prefix_cache: PrefixCacheSettings {
            shared_prefix_tokens: 1024,
            prefix_groups: 2,
            reset,
            block_override: None,
        },
        ..RunConfig::default()
    }
}

fn rows(doc: &ResultDocument) -> &[RateResult] {
    assert!(!doc.rate_results.is_empty(), "no rate cells");
    &doc.rate_results
}

fn rates(r: &RateResult) -> (f64, f64) {
    let intended = r.prefix_cache.prefix_cache_intended.expect("intended");
    let achieved = r.server_prefix_cache_hit_rate.expect("achieved");
    (intended, achieved)
}

/// Unlimited capacity, on each engine's dialect: intended equals the
/// server's truth within 1 point, from each engine's own source, and the
/// prefill row measures the part after the warm prefix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intended_equals_the_servers_hits_with_room_for_every_prefix() {
    let _serial = SERIAL.lock().await;
    for (p, source, block) in [
        (Personality::Vllm, "vllm_counters", 16),
        (Personality::Sglang, "sglang_counters", 1),
        (Personality::LlamaCpp, "llamacpp_timings", 1),
    ] {
        let sim = start(FLAT, |s| {
            s.personality = p;
            s.kv.block_size = block;
        })
        .await;
        // One engine measures its prefill row and two rates; the others one.
        let vllm = p == Personality::Vllm;
        let cell_rates: &[f64] = if vllm { &[20.0, 40.0] } else { &[40.0] };
        let mut cfg = config(&sim, cell_rates, 30, ResetMode::Never);
        cfg.prefill.skip_prefill = !vllm;
        let (doc, _) = bench(cfg, Arc::default()).await;
        for r in rows(&doc) {
            let (intended, achieved) = rates(r);
            assert!(
                (intended - achieved).abs() < 0.01,
                "{p:?} R={}: intended {intended:.4} vs achieved {achieved:.4}",
                r.request_rate
            );
            // two prefixes of about half of each prompt, both warm
            assert!((0.45..0.56).contains(&intended), "{p:?}: {intended}");
            assert_eq!(r.prefix_cache.server_prefix_cache_source, source);
            assert_eq!(
                r.prefix_cache.prefix_cache_granularity,
                Some(CacheGranularity::Block(block))
            );
        }
        let run = doc.metadata.prefix_cache.as_ref().expect("run keys");
        assert_eq!(run.prefix_groups, 2);
        assert_eq!(run.reset, Some(ResetStatus::NotRequested));
        if vllm {
            let row = doc.prefill.get(&2048).expect("prefill row");
            assert_eq!(row.prefill_mode, "warm_prefix");
            assert!(row.prompt_tokens < 1100, "rest only: {}", row.prompt_tokens);
        }
        sim.shutdown().await;
    }
}

/// Room for 40 cached blocks: each finished request pushes its group's
/// prefix (65 blocks) out, so the server reuses almost nothing while the
/// intended rate stays about one half; the achieved value is the
/// simulator's own counters over the cell. Requests 0.5 s apart never
/// overlap (one takes about 0.25 s), so none finds a prefix still held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_cache_shows_eviction_as_achieved_below_intended() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |s| s.kv.prefix_cache_blocks = Some(40)).await;
    let before = sim.stats().engine;
    let mut cfg = config(&sim, &[2.0], 10, ResetMode::Never);
    cfg.open_loop.arrival = ldb_core::arrivals::Arrival::Constant;
    let (doc, _) = bench(cfg, Arc::default()).await;
    let r = &rows(&doc)[0];
    let (intended, achieved) = rates(r);
    assert!(intended > 0.45, "intended {intended}");
    assert!(
        achieved < intended - 0.3,
        "achieved {achieved} vs intended {intended}"
    );
    let after = sim.stats().engine;
    let (q, h) = (
        after.prefix_queries - before.prefix_queries,
        after.prefix_hits - before.prefix_hits,
    );
    // the whole run's hits bound the cell's from above
    assert!(
        achieved <= h as f64 / q as f64 + 0.01,
        "{achieved} vs run {h}/{q}"
    );
    sim.shutdown().await;
}

/// `before-cell` on a server that allows resets: every reset empties the
/// cache for the request after it (the simulator logs its cached tokens),
/// every cell records `done`, and both cells intend the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_before_each_cell_makes_its_first_request_cold() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |s| s.server.cache_reset_enabled = true).await;
    let (doc, _) = bench(
        config(&sim, &[20.0, 40.0], 20, ResetMode::BeforeCell),
        Arc::default(),
    )
    .await;
    let truth = sim.stats().engine;
    assert_eq!(
        truth.prefix_cache_resets, 2,
        "before the run, before cell 2"
    );
    assert_eq!(truth.first_cached_after_reset, vec![0, 0]);
    for r in rows(&doc) {
        assert_eq!(r.prefix_cache.prefix_cache_reset, Some(ResetStatus::Done));
        let (intended, achieved) = rates(r);
        assert!(
            (intended - achieved).abs() < 0.01,
            "{intended} vs {achieved}"
        );
    }
    assert_eq!(
        doc.metadata.prefix_cache.as_ref().and_then(|p| p.reset),
        Some(ResetStatus::Done)
    );
    // the runner saw the same in the server's counters
    assert!(
        doc.event_log
            .iter()
            .any(|e| e.contains("the first request after it found 0 cached tokens")),
        "{:?}",
        doc.event_log
    );
    sim.shutdown().await;
}

/// vLLM without its dev endpoints: the reset is refused, said once in the
/// log with how to enable it, and recorded in the run and in every cell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_reset_is_recorded_and_said_once() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |_| {}).await;
    let (doc, _) = bench(
        config(&sim, &[20.0, 40.0], 10, ResetMode::BeforeCell),
        Arc::default(),
    )
    .await;
    assert_eq!(sim.stats().engine.prefix_cache_resets, 0);
    for r in rows(&doc) {
        assert_eq!(
            r.prefix_cache.prefix_cache_reset,
            Some(ResetStatus::Refused)
        );
    }
    let said: Vec<_> = doc
        .event_log
        .iter()
        .filter(|e| e.contains("prefix cache NOT reset"))
        .collect();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].contains("VLLM_SERVER_DEV_MODE=1"));
    sim.shutdown().await;
}

/// Matrix cells with two prefix groups: the streams are spread over both
/// (stream s behind prefix s mod 2), the server computes the cell's prompt
/// behind each prefix once (its own bookkeeping: the rest after prefix 1 is
/// computed too), and the intended rate, fed what each stream sends,
/// equals the server's counters over the window within 1 point.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matrix_streams_spread_over_the_prefix_groups() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |_| {}).await;
    let mut cfg = config(&sim, &[], 0, ResetMode::Never);
    cfg.matrix.concurrency = vec![2];
    // Requests of about 0.3 s: each stream sends a few inside the window.
    cfg.matrix.max_tokens = 30;
    let (doc, _) = bench(cfg, Arc::default()).await;
    let cell = doc.results.first().expect("one cell");
    let intended = cell
        .ext
        .prefix_cache
        .prefix_cache_intended
        .expect("intended");
    let achieved = cell.ext.server_prefix_cache_hit_rate.expect("achieved");
    assert!(
        (intended - achieved).abs() < 0.01,
        "intended {intended:.4} vs achieved {achieved:.4}"
    );
    assert!(intended > 0.9, "every stream's prompt warm: {intended}");
    // Two prefixes of 1,024 tokens and their warm-ups, then the rest
    // (about 1,024) behind each of them: with the streams all behind
    // prefix 0 the server computes about 3,760 tokens, spread about 4,790.
    let computed = sim.stats().engine.prompt_tokens_computed;
    assert!(computed > 4300, "computed {computed}: group 1 was not used");
    sim.shutdown().await;
}

/// The standalone prefill sweep behind a shared prefix: every sample opens
/// with the warmed prefix, so the simulator serves its blocks from the cache
/// and prefills the rest; the row says `warm_prefix` and counts the rest,
/// as a scout's row does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standalone_sweep_measures_the_rest_behind_a_warm_prefix() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |_| {}).await;
    let mut cfg = config(&sim, &[], 0, ResetMode::Never);
    cfg.prefill.prefill_only = true;
    cfg.prefill.standalone_prefill = true;
    cfg.prefill.skip_prefill = false;
    cfg.prefill.prefill_contexts = vec![2048];
    cfg.prefill.prefill_duration = 0.2;
    let before = sim.stats().engine;
    let (doc, _) = bench(cfg, Arc::default()).await;
    let after = sim.stats().engine;
    let row = doc.prefill.get(&2048).expect("standalone row");
    assert!(!row.skipped, "{row:?}");
    assert_eq!(row.prefill_mode, "warm_prefix", "{row:?}");
    let shared = doc
        .metadata
        .prefix_cache
        .as_ref()
        .and_then(|p| p.shared_prefix_tokens_counted)
        .expect("counted shared tokens");
    assert!(
        row.prompt_tokens + shared >= 2000 && row.prompt_tokens < 1100,
        "the rest only: {} + {shared}",
        row.prompt_tokens
    );
    // Truth: the simulator served (at least) each sample's prefix blocks
    // from its cache; the warm-up requests hit nothing.
    let hits = after.prefix_hits - before.prefix_hits;
    assert!(
        hits >= row.samples * (shared / 16) * 16,
        "{hits} cached tokens over {} samples of a {shared}-token prefix",
        row.samples
    );
    sim.shutdown().await;
}
