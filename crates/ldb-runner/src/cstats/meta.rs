//! The metadata of a completion-stats result (its methodology texts are
//! `ldb_eval::cstats::CsMethodology::standard`).

use ldb_client::discovery::Discovery;
use ldb_core::hardware::P2pOverride;
use ldb_eval::cstats::CsMetadata;
use ldb_eval::sha256::sha256_hex;

use super::config::CsConfig;
use crate::kvbudget::KvBudget;

/// The metadata as known after discovery.
pub(crate) fn metadata(
    cfg: &CsConfig,
    d: &Discovery,
    kv: &KvBudget,
    p2p: Option<&P2pOverride>,
) -> CsMetadata {
    let task = &cfg.task;
    let prompt = task.items.first().map_or("", |i| i.prompt.as_str());
    let ds = task.dataset.as_ref();
    let api = cfg.base.target.api;
    let sent = api.limit_sent(cfg.max_tokens);
    CsMetadata {
        version: env!("CARGO_PKG_VERSION").into(),
        mode: "completion_stats".into(),
        interrupted: false,
        server: ldb_core::redact::redact_url(&cfg.base.target.base_url),
        engine: d.engine.as_str().into(),
        server_version: Some(d.engine_version.clone()).filter(|v| !v.is_empty()),
        kv_budget: (kv.budget > 0).then_some(kv.budget),
        kv_source: Some(kv.source.clone()).filter(|s| !s.is_empty()),
        max_running_requests: (d.max_running > 0).then_some(d.max_running),
        model: d.model.clone(),
        models: d.models.clone(),
        test_profile: task.profile.clone(),
        test_profile_description: task.description.clone(),
        prompt_source: task.prompt_source.clone(),
        prompt_chars: prompt.chars().count(),
        timestamp: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        api: Some(api.name().into()),
        max_tokens: sent,
        token_limit_field: api.limit_field().into(),
        max_tokens_omitted: sent.is_none(),
        fixed_concurrency: cfg.fixed_concurrency,
        requested_runs: cfg.requested_runs,
        concurrency_levels_requested: cfg.levels.clone(),
        min_results: cfg.min_results,
        probe_waves: cfg.probe_waves,
        auto_stop: cfg.auto_stop,
        min_improvement: cfg.min_improvement,
        patience: cfg.patience,
        correct_regex: cfg.correct_regex.clone(),
        score_source: cfg.score_source.as_str().into(),
        profile_scorer: task
            .scorer
            .as_ref()
            .map(|s| s.name().to_owned())
            .unwrap_or_default(),
        expected_answer: if task.one_item_per_run {
            None
        } else {
            task.items.first().and_then(|i| i.expected_answer.clone())
        },
        approx_tolerance: None,
        dataset_rows: ds.map(|d| d.items_total),
        dataset_sha256: ds.map(|d| d.sha256.clone()),
        dataset: ds.map(|d| d.name.clone()),
        dataset_path: ds.map(|d| d.path.clone()),
        dataset_source: ds.map(|d| d.source.clone()),
        dataset_items_total: ds.map(|d| d.items_total),
        dataset_items_selected: ds.map(|_| task.items.len()),
        prompt_sha256: sha256_hex(prompt.as_bytes()),
        prefill_scout: cfg.prefill_scout,
        temperature: cfg.temperature,
        top_p: cfg.top_p,
        request_overrides: task.request_overrides.clone(),
        system_prompt: task.system_prompt.is_some(),
        nvidia_p2p_override_effective: p2p.map(|p| p.effective),
        p2pmark_status: "not_run".into(),
        amd_fabric_status: "not_run".into(),
    }
}
