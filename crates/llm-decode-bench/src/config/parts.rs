//! The parts of the run configuration that come straight from their flags
//! (no cross-flag checks left to make): `config::build` calls these once
//! its checks passed.

use ldb_runner::config::{
    BurstConfig, KvConfig, OutputConfig, SloConfig, TargetConfig, TimingConfig,
};

use crate::cli::BenchArgs;

/// The server: its address (URL, label), key, model and metrics endpoints.
pub(super) fn target(
    a: &BenchArgs,
    (base_url, server_label): (String, String),
    metrics_urls: Vec<String>,
) -> TargetConfig {
    TargetConfig {
        base_url,
        server_label,
        // An empty key is no key: nothing to send.
        api_key: a.api_key.clone().filter(|k| !k.is_empty()),
        model: a.model.clone(),
        metrics_urls,
        wait_for_server: a.wait_for_server,
        api: a.api,
        ..TargetConfig::default()
    }
}

/// The KV budget overrides.
pub(super) fn kv(a: &BenchArgs) -> KvConfig {
    KvConfig {
        kv_budget: a.kv_budget,
        max_total_tokens: a.max_total_tokens,
        dcp_size: a.dcp_size,
    }
}

/// The burst matrix and its request counts.
pub(super) fn burst(a: &BenchArgs) -> BurstConfig {
    BurstConfig {
        run_burst: a.run_burst,
        burst_request_count: a.burst_request_count,
        burst_warmup_request_count: a.burst_warmup_request_count,
        burst_requests_per_concurrency: a.burst_requests_per_concurrency,
    }
}

/// What the matrix does with an SLO (the spec itself is added by
/// `invocation.rs`, which parses `--slo` and `--slo-preset`).
pub(super) fn slo(a: &BenchArgs) -> SloConfig {
    SloConfig {
        search: a.slo_search,
        bisect: a.slo_bisect,
        ..SloConfig::default()
    }
}

/// Readiness, timeouts, pacing and the error budget.
pub(super) fn timing(a: &BenchArgs, sim: bool) -> TimingConfig {
    let d = TimingConfig::default();
    TimingConfig {
        cell_warmup_timeout: a.cell_warmup_timeout_seconds,
        max_error_rate: a.max_error_rate,
        stream_idle_timeout: a.stream_idle_timeout,
        server_down_grace: a.server_down_grace,
        metrics_interval: a.metrics_interval,
        // The simulator drains at once; a short pause keeps the demo run brief.
        cell_pause_seconds: if sim { 0.5 } else { d.cell_pause_seconds },
        ..d
    }
}

/// The result file and the run's own record (the effective configuration
/// is added by `invocation.rs`, from the finished configuration).
pub(super) fn output(a: &BenchArgs, argv: Vec<String>) -> OutputConfig {
    OutputConfig {
        output: a.output.clone(),
        show_capacity_limited_values: a.show_capacity_limited_values,
        accept_len_ref: a.accept_len_ref,
        argv,
        ..OutputConfig::default()
    }
}
