//! `--api`: the same matrix cell over each request API against the
//! simulator measures the chat run's truth, and an API the server does not
//! serve is refused before the run with one line naming it and its path.

mod common;

use std::sync::Arc;

use common::{FLAT, SERIAL, bench, cell, config, start, within};
use ldb_core::api::Api;
use ldb_core::result::CellStatus;
use ldb_runner::{Live, RunHooks, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_api_measures_the_chat_truth() {
    let _serial = SERIAL.lock().await;
    let sim = start(FLAT, |_| {}).await;
    // 4 sequences emit one token each per step of 10 ms + 0.2 ms per sequence
    let truth = 4.0 / (0.010 + 0.0002 * 4.0);
    for api in Api::ALL {
        let mut cfg = config(&sim, &[4], &[0], 2.0);
        cfg.target.api = api;
        let (doc, _) = bench(cfg, Arc::default()).await;
        let r = cell(&doc, 4, 0);
        assert_eq!(
            r.ext.status,
            CellStatus::Ok,
            "{api}: {}",
            r.ext.status_reason
        );
        let tps = r.aggregate_tps.expect("value");
        assert!(
            within(tps, truth, 0.03),
            "{api}: {tps:.1} vs truth {truth:.1}"
        );
        assert_eq!(doc.metadata.api, Some(api));
        assert_eq!(
            doc.metadata.apis_served,
            Api::ALL.to_vec(),
            "vLLM serves all four"
        );
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_the_server_lacks_is_refused_before_the_run() {
    let sim = start(FLAT, |s| s.personality = ldb_sim::Personality::OpenAi).await;
    let mut cfg = config(&sim, &[1], &[0], 1.0);
    cfg.target.api = Api::Messages;
    let (live, _rx) = Live::new();
    let hooks = RunHooks {
        live,
        controls: Arc::default(),
        hardware: None,
        diagnostics: None,
        p2p: None,
        save: Box::new(|_| {}),
        resume: None,
    };
    let err = run(cfg, hooks).await.expect_err("refused").to_string();
    assert!(
        err.contains("/v1/messages") && err.contains("--api messages"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    sim.shutdown().await;
}

/// A request-count cell and an open-loop rate over each non-chat API: every
/// generation request goes to that API's route (none to chat's), and the
/// counts are the closed-form truth of the schedule (N requests of m tokens).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_count_and_rate_cells_speak_each_api() {
    let _serial = SERIAL.lock().await;
    let (n, m) = (4u64, 16u64);
    for api in [Api::Completions, Api::Responses, Api::Messages] {
        let sim = start(FLAT, |_| {}).await;
        let mut cfg = config(&sim, &[2], &[0], 1.0);
        cfg.target.api = api;
        cfg.matrix.max_tokens = m;
        cfg.matrix.request_count = n;
        cfg.matrix.warmup_request_count = 0;
        let mut rates = cfg.clone();
        rates.open_loop.request_rates = vec![20.0];
        rates.open_loop.rate_request_count = 10;
        let (doc, _) = bench(cfg, Arc::default()).await;
        let r = cell(&doc, 2, 0);
        assert_eq!(
            r.ext.status,
            CellStatus::Ok,
            "{api}: {}",
            r.ext.status_reason
        );
        assert_eq!(r.num_completed, n, "{api}");
        assert_eq!(r.client_output_tokens, n * m, "{api}");
        let (doc, _) = bench(rates, Arc::default()).await;
        let rate = &doc.rate_results[0];
        assert_eq!(rate.status, CellStatus::Ok, "{api}: {rate:?}");
        assert_eq!((rate.request_count, rate.completed), (10, 10), "{api}");
        let by_route = &sim.stats().http.requests_by_endpoint;
        let on = |path: &str| by_route.get(&format!("POST {path}")).copied().unwrap_or(0);
        assert!(on(api.path()) >= n + 10, "{api}: {by_route:?}");
        assert_eq!(on(Api::Chat.path()), 0, "{api}: {by_route:?}");
        sim.shutdown().await;
    }
}
