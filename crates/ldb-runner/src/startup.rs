//! What a run records about itself before the first cell: the startup
//! events (engine, KV budget, model context) and the result's metadata.

use std::collections::BTreeMap;

use ldb_client::discovery::Discovery;
use ldb_core::document::Metadata;
use ldb_core::tokens::thousands;

use crate::config::RunConfig;
use crate::kvbudget::KvBudget;
use crate::live::Live;
use crate::plan::ServerLimits;
use crate::prompts::PromptPlan;

/// What the plan needs from discovery and the KV budget.
pub fn limits(disc: &Discovery, kv: &KvBudget) -> ServerLimits {
    ServerLimits {
        model_context: disc.model_context,
        kv_budget: kv.budget,
    }
}

/// The startup lines of the event log.
pub(crate) fn startup_events(live: &Live, d: &Discovery, kv: &KvBudget) {
    live.event(format!("benchmark start engine={}", d.engine.as_str()));
    live.event(format!(
        "startup engine {} {} models={:?}",
        d.engine.display_name(),
        d.engine_version,
        d.models
    ));
    for n in &d.notes {
        live.event(format!("startup {n}"));
    }
    if !d.metrics_warning.is_empty() {
        live.event(format!("startup WARNING {}", d.metrics_warning));
    }
    for n in &kv.notes {
        live.event(format!("startup {n}"));
    }
    if d.model_context > 0 {
        live.event(format!(
            "startup model context length: {} tokens",
            thousands(d.model_context)
        ));
    }
}

/// How prompts were sized, into the metadata.
pub(crate) fn record_prompts(md: &mut Metadata, plan: &PromptPlan) {
    md.token_targeting = plan.targeting.into();
    md.chars_per_token = plan.model.chars_per_token;
    md.prompt_overhead_tokens = plan.model.overhead_tokens;
    md.prompt_tokens_by_context = plan
        .by_ctx
        .iter()
        .filter_map(|(k, p)| Some((k.to_string(), p.tokens?)))
        .collect::<BTreeMap<String, u64>>();
}

/// The result's metadata as known after discovery, before prompts are sized
/// (see [`record_prompts`]).
pub(crate) fn metadata(cfg: &RunConfig, d: &Discovery, kv: &KvBudget, warm_ctx: u64) -> Metadata {
    let request_mode = cfg.matrix.request_count > 0;
    Metadata {
        version: env!("CARGO_PKG_VERSION").into(),
        engine: d.engine.as_str().into(),
        model: d.model.clone(),
        server: cfg.target.server_label.clone(),
        decode_mode: Some(if request_mode { ldb_core::result::DecodeMode::RequestCount } else { ldb_core::result::DecodeMode::Duration }),
        primary_decode_layer: if request_mode { "burst_e2e_decode" } else { "sustained_decode" }.into(),
        duration_per_test: cfg.matrix.duration,
        request_count: cfg.matrix.request_count,
        warmup_request_count: cfg.matrix.warmup_request_count,
        run_burst: cfg.burst.run_burst,
        prefill_mode: Some(if cfg.prefill.skip_prefill {
            ldb_core::result::PrefillMode::Skipped
        } else if cfg.prefill.standalone_prefill || cfg.prefill.prefill_only {
            ldb_core::result::PrefillMode::StandaloneCold
        } else {
            ldb_core::result::PrefillMode::IntegratedDecodeScout
        }),
        standalone_prefill: cfg.prefill.standalone_prefill || cfg.prefill.prefill_only,
        prefill_only: cfg.prefill.prefill_only,
        skip_prefill: cfg.prefill.skip_prefill,
        burst_e2e_status: if request_mode || cfg.burst.run_burst { "enabled" } else { "not_run_use_--run-burst" }.into(),
        burst_request_count: cfg.burst.burst_request_count,
        burst_warmup_request_count: cfg.burst.burst_warmup_request_count,
        burst_requests_per_concurrency: cfg.burst.burst_requests_per_concurrency,
        decode_warmup_seconds: cfg.matrix.decode_warmup_seconds,
        decode_warmup_context: if cfg.matrix.decode_warmup_seconds > 0.0 { warm_ctx } else { 0 },
        decode_warmup_concurrency: u32::from(cfg.matrix.decode_warmup_seconds > 0.0),
        cell_warmup_timeout_seconds: cfg.timing.cell_warmup_timeout,
        cell_warmup_timeout_policy: "streams launch -> ready: 60s (<64k), 120s (>=64k), 180s (>=128k), raised to fit 30s + 2x one cold prefill + 0.25x prefill per stream at the measured prefill speed; override >0 replaces it".into(),
        show_capacity_limited_values: cfg.output.show_capacity_limited_values,
        max_tokens: cfg.matrix.max_tokens,
        temperature: cfg.matrix.temperature,
        ignore_eos: !cfg.matrix.respect_eos,
        max_total_tokens: (kv.budget > 0).then_some(kv.budget),
        dcp_size: cfg.kv.dcp_size,
        metrics_available: d.metrics_available,
        metrics_warning: d.metrics_warning.clone(),
        concurrency_levels: cfg.matrix.concurrency.clone(),
        context_lengths: cfg.matrix.contexts.clone(),
        startup_diagnostics_available: true,
        p2pmark_status: "not_run".into(),
        amd_fabric_status: "not_run".into(),
        schema_version: ldb_core::result::SCHEMA_VERSION,
        tool: "llm-decode-bench".into(),
        started_at: chrono::Local::now().format("%Y-%m-%dT%H:%M:%S%.6f").to_string(),
        engine_version: d.engine_version.clone(),
        model_context_length: (d.model_context > 0).then_some(d.model_context),
        kv_budget_source: kv.source.clone(),
        kv_budget_tokens: (kv.budget > 0).then_some(kv.budget),
        max_error_rate: cfg.timing.max_error_rate,
        cp_size: kv.cp_size,
        cp_source: kv.cp_source.clone(),
        concurrency_levels_run: cfg.matrix.concurrency.clone(),
        sim_scenario: cfg.target.sim_scenario.clone(),
        api: Some(cfg.target.api),
        apis_served: d.apis_served.clone(),
        prefill_contexts: cfg.prefill.prefill_contexts.clone(),
        prefill_metric: cfg.prefill.prefill_metric.as_str().into(),
        metrics_interval: Some(cfg.timing.metrics_interval),
        duration_auto: cfg.matrix.auto_stop.as_ref().map(ldb_core::autostop::DurationAuto::of),
        config: (!cfg.output.effective_config.is_empty()).then(|| cfg.output.effective_config.clone()),
        open_loop: cfg.open_loop.is_on().then(|| ldb_core::document::OpenLoopSettings {
            request_rates: cfg.open_loop.request_rates.clone(),
            arrival: cfg.open_loop.arrival,
            seed: cfg.open_loop.seed,
            request_count: cfg.open_loop.rate_request_count,
            max_in_flight: cfg.open_loop.max_in_flight,
            stop_at_saturation: cfg.matrix.stop_at_saturation,
        }),
        repeat: cfg.matrix.repeat,
        slo_search: (cfg.slo.search || cfg.slo.bisect).then(|| {
            ldb_core::document::SloSearchSettings {
                search: cfg.slo.search,
                bisect: cfg.slo.bisect,
                spec: cfg.slo.spec.as_ref().map(ToString::to_string).unwrap_or_default(),
            }
        }),
        ..Metadata::default()
    }
}
