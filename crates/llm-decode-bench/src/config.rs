//! Flags → validated `RunConfig`, before any request is sent.

use ldb_core::tokens::{parse_count_list, parse_token_list, parse_tokens};
use ldb_runner::config::{MatrixConfig, OpenLoopConfig, PrefillConfig};
use ldb_runner::{PrefillMetric, RunConfig};

use crate::cli::BenchArgs;

mod duration;
mod parts;

pub use crate::config_error::ConfigError;
pub(crate) use crate::config_error::bad;

pub use crate::address::server_address;

/// Build the run configuration. `sim` selects the small default matrix.
/// The checks run in a fixed order (the first mistake is the one told):
/// server, matrix, prefill, request counts, open loop, burst, limits.
pub fn build(a: &BenchArgs, sim: bool, argv: Vec<String>) -> Result<RunConfig, ConfigError> {
    let d = RunConfig::default();
    let (base_url, server_label) = server_address(&a.host, a.port)?;
    let m = matrix_settings(a, sim, &d)?;
    let (prefill_metric, standalone) = prefill_settings(a, &m.prefill_contexts)?;
    check_request_counts(a)?;
    let open_loop = open_loop_settings(a, m.duration)?;
    if a.burst_requests_per_concurrency == 0 {
        return Err(bad(
            "--burst-requests-per-concurrency",
            "must be at least 1",
        ));
    }
    check_limits(a)?;
    let calibration_context =
        parse_tokens(&a.calibration_context).map_err(|e| bad("--calibration-context", e))?;
    let calibration_cache = if a.no_calibration_cache {
        None
    } else {
        Some(a.calibration_cache.clone().unwrap_or_else(|| {
            std::env::temp_dir().join("llm_decode_bench_calibration_cache.json")
        }))
    };
    let Matrix {
        concurrency,
        contexts,
        prefill_contexts,
        max_tokens,
        duration,
        auto_stop,
        warm,
    } = m;
    let prefix_cache = crate::cli_prefix::settings(&a.prefix_cache, &contexts)?;
    let metrics_urls = crate::address::metrics_urls(&a.metrics_url)?;
    let energy = crate::cli_energy::settings(&a.energy)?;
    let repeat = repeat(a, open_loop.on)?;
    let mixed_prefill_contexts = crate::cli_mixed::lengths(a)?;
    let replay = crate::workload_config::replay(a)?;
    let tools = crate::cli_tools::tool_set(&a.tools, a.api)?;
    // A replay runs no matrix: one context of 0 and one concurrency,
    // nothing to size, no prefill rows; its in-flight cap is its own.
    let (concurrency, contexts, prefill_contexts, max_in_flight) = if replay.is_some() {
        (vec![1], vec![0], Vec::new(), a.max_in_flight.unwrap_or(0))
    } else {
        (
            concurrency,
            contexts,
            prefill_contexts,
            open_loop.max_in_flight,
        )
    };
    Ok(RunConfig {
        target: parts::target(a, (base_url, server_label), metrics_urls),
        matrix: MatrixConfig {
            concurrency,
            contexts,
            max_tokens,
            duration,
            auto_stop,
            decode_warmup_seconds: warm,
            temperature: a.temperature,
            respect_eos: a.respect_eos,
            // in open loop --request-count counts each rate cell's requests
            request_count: if open_loop.on { 0 } else { a.request_count },
            warmup_request_count: a.warmup_request_count,
            stop_at_saturation: a.stop_at_saturation,
            repeat,
            mixed_prefill_contexts,
            tools,
        },
        prefill: PrefillConfig {
            prefill_contexts,
            prefill_metric,
            skip_prefill: a.skip_prefill || replay.is_some(),
            standalone_prefill: standalone,
            prefill_duration: a.prefill_duration,
            prefill_only: a.prefill_only,
            calibration_context,
            calibration_cache,
            estimate_only: a.token_targeting.as_deref() == Some("estimate"),
        },
        kv: parts::kv(a),
        burst: parts::burst(a),
        open_loop: OpenLoopConfig {
            request_rates: open_loop.rates,
            arrival: open_loop.arrival,
            seed: open_loop.seed,
            rate_request_count: open_loop.count,
            max_in_flight,
            replay_limit: a.workload.replay_limit,
            ..d.open_loop
        },
        slo: parts::slo(a),
        timing: parts::timing(a, sim),
        output: parts::output(a, argv),
        replay,
        prefix_cache,
        energy,
    })
}

/// The matrix and its windows (`--concurrency`, `--contexts`,
/// `--prefill-contexts`, `--max-tokens`, `--duration`, the warmups).
struct Matrix {
    concurrency: Vec<u32>,
    contexts: Vec<u64>,
    prefill_contexts: Vec<u64>,
    max_tokens: u64,
    duration: f64,
    auto_stop: Option<ldb_core::autostop::AutoStop>,
    warm: f64,
}

fn matrix_settings(a: &BenchArgs, sim: bool, d: &RunConfig) -> Result<Matrix, ConfigError> {
    let concurrency = match &a.concurrency {
        Some(s) => parse_count_list(s).map_err(|e| bad("--concurrency", e))?,
        None if sim => vec![1, 4, 16],
        None => d.matrix.concurrency.clone(),
    };
    let contexts = match &a.contexts {
        Some(s) => parse_token_list(s).map_err(|e| bad("--contexts", e))?,
        None if sim => vec![0, 8192],
        None => d.matrix.contexts.clone(),
    };
    let prefill_contexts = match &a.prefill_contexts {
        Some(s) if s.trim().is_empty() => vec![],
        Some(s) => parse_token_list(s).map_err(|e| bad("--prefill-contexts", e))?,
        None if sim => vec![16384],
        None => d.prefill.prefill_contexts.clone(),
    };
    let max_tokens = a
        .max_tokens
        .unwrap_or(if sim { 512 } else { d.matrix.max_tokens });
    if max_tokens == 0 {
        return Err(bad("--max-tokens", "must be at least 1"));
    }
    let (duration, auto_stop) =
        duration::window_settings(a, if sim { 4.0 } else { d.matrix.duration })?;
    let warm = a.decode_warmup_seconds.unwrap_or(if sim {
        1.0
    } else {
        d.matrix.decode_warmup_seconds
    });
    if !(warm.is_finite() && warm >= 0.0) {
        return Err(bad("--decode-warmup-seconds", "must be ≥ 0"));
    }
    if !(a.cell_warmup_timeout_seconds.is_finite() && a.cell_warmup_timeout_seconds >= 0.0) {
        return Err(bad("--cell-warmup-timeout-seconds", "must be ≥ 0"));
    }
    Ok(Matrix {
        concurrency,
        contexts,
        prefill_contexts,
        max_tokens,
        duration,
        auto_stop,
        warm,
    })
}

/// The prefill headline metric and whether the standalone profile runs.
fn prefill_settings(
    a: &BenchArgs,
    prefill_contexts: &[u64],
) -> Result<(PrefillMetric, bool), ConfigError> {
    let prefill_metric = match a.prefill_metric.as_str() {
        "client" | "ttft" | "aiperf" => PrefillMetric::Client,
        "auto" => PrefillMetric::Auto,
        "prometheus" => PrefillMetric::Prometheus,
        other => {
            return Err(bad(
                "--prefill-metric",
                format!("{other:?} (use client, auto or prometheus)"),
            ));
        }
    };
    if a.prefill_only && a.skip_prefill {
        return Err(bad(
            "--prefill-only",
            "cannot be combined with --skip-prefill (it measures prefill only)",
        ));
    }
    if a.standalone_prefill && a.skip_prefill {
        return Err(bad(
            "--standalone-prefill",
            "cannot be combined with --skip-prefill",
        ));
    }
    let standalone = a.standalone_prefill || a.prefill_only;
    if standalone && prefill_contexts.is_empty() {
        return Err(bad(
            "--prefill-contexts",
            "the standalone prefill profile needs at least one context",
        ));
    }
    if standalone && prefill_contexts.contains(&0) {
        return Err(bad(
            "--prefill-contexts",
            "context 0 has no prompt to prefill; list positive contexts",
        ));
    }
    if !(a.prefill_duration.is_finite() && a.prefill_duration > 0.0) {
        return Err(bad(
            "--prefill-duration",
            "must be a positive number of seconds",
        ));
    }
    Ok((prefill_metric, standalone))
}

/// `--warmup-request-count` and `--run-burst` against `--request-count`.
fn check_request_counts(a: &BenchArgs) -> Result<(), ConfigError> {
    if a.warmup_request_count > 0 && a.request_count == 0 {
        return Err(bad(
            "--warmup-request-count",
            "needs --request-count N (N > 0)",
        ));
    }
    if a.run_burst && a.request_count > 0 {
        return Err(bad(
            "--run-burst",
            "cannot be combined with --request-count: request-count mode already measures finite batches instead of the sustained matrix",
        ));
    }
    Ok(())
}

/// Sampling, error rate, timeouts, intervals and the display's pace.
fn check_limits(a: &BenchArgs) -> Result<(), ConfigError> {
    if let Some(t) = a.temperature
        && !(t.is_finite() && t >= 0.0)
    {
        return Err(bad("--temperature", "must be ≥ 0"));
    }
    if !(a.max_error_rate.is_finite() && (0.0..=1.0).contains(&a.max_error_rate)) {
        return Err(bad("--max-error-rate", "must be between 0 and 1"));
    }
    if !(a.wait_for_server.is_finite() && a.wait_for_server >= 0.0) {
        return Err(bad("--wait-for-server", "must be ≥ 0 seconds"));
    }
    if !(a.metrics_interval.is_finite() && a.metrics_interval >= 0.0) {
        return Err(bad(
            "--metrics-interval",
            "must be ≥ 0 seconds (0 = only at each measurement's start and end)",
        ));
    }
    if !(a.hw_monitor_interval.is_finite() && a.hw_monitor_interval >= 0.0) {
        return Err(bad("--hw-monitor-interval", "must be ≥ 0"));
    }
    if a.hw_gpu_limit == 0 {
        return Err(bad("--hw-gpu-limit", "must be at least 1"));
    }
    if !(a.stream_idle_timeout.is_finite() && a.stream_idle_timeout >= 0.0) {
        return Err(bad(
            "--stream-idle-timeout",
            "must be ≥ 0 seconds (0 = off)",
        ));
    }
    if !(a.server_down_grace.is_finite() && a.server_down_grace >= 0.0) {
        return Err(bad("--server-down-grace", "must be ≥ 0 seconds"));
    }
    if let Some(r) = a.refresh_rate
        && !(r.is_finite() && r > 0.0)
    {
        return Err(bad(
            "--refresh-rate",
            "must be a positive number of redraws per second (0.2–10)",
        ));
    }
    if let Some(t) = &a.token_targeting
        && !matches!(t.as_str(), "estimate" | "exact" | "auto")
    {
        return Err(bad(
            "--token-targeting",
            format!("{t:?} (use estimate or exact)"),
        ));
    }
    Ok(())
}

/// `--repeat N`: at least 1, and only for the concurrency matrix.
fn repeat(a: &BenchArgs, open_loop: bool) -> Result<u32, ConfigError> {
    let n = a.repeat.unwrap_or(1);
    if n == 0 {
        return Err(bad(
            "--repeat",
            "0 measures nothing; give the number of times to measure each cell (1 or more)",
        ));
    }
    if n > 1 && open_loop {
        return Err(bad(
            "--repeat",
            "applies to the concurrency matrix, not to open-loop runs (--request-rate)",
        ));
    }
    if n > 1 && a.prefill_only {
        return Err(bad(
            "--repeat",
            "a --prefill-only run measures no decode cell",
        ));
    }
    Ok(n)
}

/// The open-loop flags, checked together.
struct OpenLoop {
    on: bool,
    rates: Vec<f64>,
    arrival: ldb_core::arrivals::Arrival,
    seed: u64,
    count: u64,
    max_in_flight: u64,
}

/// More requests than this in one rate cell is surely a typo.
const MAX_RATE_CELL_REQUESTS: f64 = 10_000_000.0;

/// No `--request-rate`: the flags that only shape open-loop cells are
/// mistakes (`--max-in-flight` also caps a trace replay).
fn closed_loop(a: &BenchArgs) -> Result<OpenLoop, ConfigError> {
    for (given, flag) in [
        (a.arrival.is_some(), "--arrival"),
        (a.seed.is_some(), "--seed"),
        (
            a.max_in_flight.is_some() && a.workload.trace.is_none(),
            "--max-in-flight",
        ),
        (a.stop_at_saturation, "--stop-at-saturation"),
    ] {
        if given {
            return Err(bad(
                flag,
                "only applies to open-loop runs: add --request-rate R1,R2,…",
            ));
        }
    }
    Ok(OpenLoop {
        on: false,
        rates: vec![],
        arrival: ldb_core::arrivals::Arrival::Poisson,
        seed: ldb_runner::config::DEFAULT_SEED,
        count: 0,
        max_in_flight: 0,
    })
}

fn open_loop_settings(a: &BenchArgs, duration: f64) -> Result<OpenLoop, ConfigError> {
    let Some(list) = a.request_rate.as_deref() else {
        return closed_loop(a);
    };
    let mut rates = Vec::new();
    for item in list.split(',').map(str::trim) {
        match item.parse::<f64>() {
            Ok(r) if r.is_finite() && r > 0.0 => rates.push(r),
            _ => {
                return Err(bad(
                    "--request-rate",
                    format!("{item:?} is not a positive number of requests per second"),
                ));
            }
        }
    }
    if a.run_burst {
        return Err(bad(
            "--request-rate",
            "cannot be combined with --run-burst: an open-loop run replaces the closed-loop matrices",
        ));
    }
    if a.warmup_request_count > 0 {
        return Err(bad(
            "--request-rate",
            "cannot be combined with --warmup-request-count (a closed-loop request-count flag)",
        ));
    }
    if a.prefill_only {
        return Err(bad(
            "--request-rate",
            "cannot be combined with --prefill-only",
        ));
    }
    if a.resume {
        return Err(bad(
            "--request-rate",
            "--resume does not continue open-loop runs yet; run the rates again",
        ));
    }
    let arrival = match a.arrival.as_deref() {
        Some(s) => s.parse().map_err(|e: String| bad("--arrival", e))?,
        None => ldb_core::arrivals::Arrival::Poisson,
    };
    let max_in_flight = match a.max_in_flight {
        Some(0) => {
            return Err(bad(
                "--max-in-flight",
                "must be at least 1 (leave it out for no cap)",
            ));
        }
        Some(n) => n,
        None => 0,
    };
    for &r in &rates {
        let n = if a.request_count > 0 {
            a.request_count as f64
        } else {
            r * duration
        };
        if n > MAX_RATE_CELL_REQUESTS {
            return Err(bad(
                "--request-rate",
                format!(
                    "{r} req/s gives {n:.0} requests per cell, more than 10 million; lower the rate, --duration or --request-count"
                ),
            ));
        }
    }
    Ok(OpenLoop {
        on: true,
        rates,
        arrival,
        seed: a.seed.unwrap_or(ldb_runner::config::DEFAULT_SEED),
        count: a.request_count,
        max_in_flight,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_lists_fail_before_any_request() {
        let mut a = BenchArgs {
            host: "localhost".into(),
            prefill_metric: "client".into(),
            calibration_context: "8k".into(),
            hw_gpu_limit: 8,
            prefill_duration: 10.0,
            burst_requests_per_concurrency: 5,
            ..Default::default()
        };
        for bad in ["8x", "-1", "", "1,1"] {
            a.concurrency = Some(bad.into());
            let e = build(&a, false, vec![]).unwrap_err().to_string();
            assert!(e.starts_with("invalid --concurrency"), "{e}");
        }
        a.concurrency = None;
        a.contexts = Some("0,8x".into());
        assert!(
            build(&a, false, vec![])
                .unwrap_err()
                .to_string()
                .contains("--contexts")
        );
        a.contexts = None;
        a.prefill_metric = "magic".into();
        assert!(build(&a, false, vec![]).is_err());
        a.prefill_metric = "aiperf".into();
        let c = build(&a, true, vec![]).unwrap();
        assert_eq!(c.matrix.concurrency, vec![1, 4, 16]);
        assert_eq!(c.matrix.contexts, vec![0, 8192]);
    }

    fn parse(args: &[&str]) -> Result<BenchArgs, clap::Error> {
        use clap::Parser;
        let mut argv = vec!["llm-decode-bench"];
        argv.extend_from_slice(args);
        crate::cli::Cli::try_parse_from(argv).map(|c| c.bench)
    }

    fn build_err(args: &[&str]) -> String {
        let a = parse(args).expect("parses");
        build(&a, false, vec![]).unwrap_err().to_string()
    }

    #[test]
    fn open_loop_flags() {
        let a = parse(&[
            "--request-rate",
            "0.5, 2,8",
            "--arrival",
            "constant",
            "--seed",
            "7",
        ])
        .unwrap();
        let c = build(&a, false, vec![]).unwrap();
        assert_eq!(c.open_loop.request_rates, vec![0.5, 2.0, 8.0]);
        assert_eq!(c.open_loop.arrival, ldb_core::arrivals::Arrival::Constant);
        assert_eq!(
            (
                c.open_loop.seed,
                c.open_loop.max_in_flight,
                c.open_loop.rate_request_count
            ),
            (7, 0, 0)
        );
        let a = parse(&[
            "--request-rate",
            "4",
            "--request-count",
            "100",
            "--max-in-flight",
            "16",
        ])
        .unwrap();
        let c = build(&a, false, vec![]).unwrap();
        // --request-count counts each rate cell, not closed-loop batches
        assert_eq!(
            (
                c.matrix.request_count,
                c.open_loop.rate_request_count,
                c.open_loop.max_in_flight
            ),
            (0, 100, 16)
        );
        assert_eq!(c.open_loop.seed, ldb_runner::config::DEFAULT_SEED);
        for (args, want) in [
            (&["--request-rate", "0"][..], "invalid --request-rate"),
            (&["--request-rate=-1"], "invalid --request-rate"),
            (&["--request-rate", "fast"], "invalid --request-rate"),
            (&["--request-rate", "1,,2"], "invalid --request-rate"),
            (&["--request-rate", "1", "--run-burst"], "--run-burst"),
            (
                &["--request-rate", "1", "--warmup-request-count", "2"],
                "--warmup-request-count",
            ),
            (&["--request-rate", "1", "--prefill-only"], "--prefill-only"),
            (&["--request-rate", "1", "--resume"], "--resume"),
            (
                &["--request-rate", "1", "--arrival", "uniform"],
                "invalid --arrival",
            ),
            (
                &["--request-rate", "1", "--max-in-flight", "0"],
                "invalid --max-in-flight",
            ),
            (
                &["--request-rate", "100000", "--duration", "1000"],
                "more than 10 million",
            ),
            (&["--arrival", "poisson"], "invalid --arrival"),
            (&["--seed", "3"], "invalid --seed"),
            (&["--max-in-flight", "3"], "invalid --max-in-flight"),
            (&["--stop-at-saturation"], "invalid --stop-at-saturation"),
        ] {
            let e = build(&parse(args).unwrap(), false, vec![])
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{args:?}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn burst_and_request_count_flags() {
        let c = build(&parse(&[]).unwrap(), false, vec![]).unwrap();
        assert_eq!(
            (c.matrix.request_count, c.matrix.warmup_request_count),
            (0, 0)
        );
        assert!(!c.burst.run_burst && !c.prefill.standalone_prefill && !c.prefill.prefill_only);
        assert_eq!(c.burst.burst_requests_per_concurrency, 5);
        assert_eq!(c.prefill.prefill_duration, 10.0);
        let a = parse(&["--request-count", "40", "--warmup-request-count", "4"]).unwrap();
        let c = build(&a, false, vec![]).unwrap();
        assert_eq!(
            (c.matrix.request_count, c.matrix.warmup_request_count),
            (40, 4)
        );
        let a = parse(&[
            "--run-burst",
            "--burst-request-count",
            "12",
            "--burst-warmup-request-count",
            "3",
            "--burst-requests-per-concurrency",
            "2",
        ])
        .unwrap();
        let c = build(&a, false, vec![]).unwrap();
        assert!(c.burst.run_burst);
        assert_eq!(c.burst.burst_request_count, 12);
        assert_eq!(c.burst.burst_warmup_request_count, 3);
        assert_eq!(c.burst.burst_requests_per_concurrency, 2);
        // --prefill-only implies the standalone profile.
        let c = build(&parse(&["--prefill-only"]).unwrap(), false, vec![]).unwrap();
        assert!(c.prefill.prefill_only && c.prefill.standalone_prefill);
    }

    #[test]
    fn bad_burst_and_prefill_input_is_a_one_line_error() {
        let cases: &[(&[&str], &str)] = &[
            (
                &["--request-count", "10", "--run-burst"],
                "invalid --run-burst: cannot be combined with --request-count",
            ),
            (
                &["--warmup-request-count", "3"],
                "invalid --warmup-request-count",
            ),
            (
                &["--burst-requests-per-concurrency", "0"],
                "invalid --burst-requests-per-concurrency",
            ),
            (
                &["--prefill-only", "--skip-prefill"],
                "invalid --prefill-only",
            ),
            (
                &["--standalone-prefill", "--skip-prefill"],
                "invalid --standalone-prefill",
            ),
            (
                &["--prefill-only", "--prefill-contexts", ""],
                "invalid --prefill-contexts",
            ),
            (
                &["--standalone-prefill", "--prefill-contexts", "0,8k"],
                "invalid --prefill-contexts",
            ),
            (&["--prefill-duration", "0"], "invalid --prefill-duration"),
            (&["--prefill-duration=-1"], "invalid --prefill-duration"),
            (
                &["--stream-idle-timeout=-1"],
                "invalid --stream-idle-timeout",
            ),
            (&["--server-down-grace=-1"], "invalid --server-down-grace"),
            (&["--metrics-interval=-1"], "invalid --metrics-interval"),
            (&["--refresh-rate", "0"], "invalid --refresh-rate"),
            (&["--refresh-rate=-2"], "invalid --refresh-rate"),
        ];
        for (args, want) in cases {
            let e = build_err(args);
            assert!(e.starts_with(want), "{args:?}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
        // Not a finite number: refused while parsing (cli_float.rs), exit 2.
        for flag in ["--prefill-duration", "--metrics-interval", "--refresh-rate"] {
            for v in ["nan", "inf"] {
                let e = parse(&[flag, v]).expect_err(flag);
                assert_eq!(e.exit_code(), 2);
                assert!(e.to_string().contains(flag), "{e}");
            }
        }
    }

    #[test]
    fn metrics_interval_defaults_to_ten_seconds_and_zero_means_edges_only() {
        let c = build(&parse(&[]).unwrap(), false, vec![]).unwrap();
        assert_eq!(c.timing.metrics_interval, 10.0);
        assert_eq!(
            c.timing.scrape_interval, 0.5,
            "ramp-up keeps the quick pace"
        );
        let a = parse(&["--metrics-interval", "0"]).unwrap();
        assert_eq!(
            build(&a, false, vec![]).unwrap().timing.metrics_interval,
            0.0
        );
    }

    #[test]
    fn a_replay_is_built_without_a_matrix_in_one_go() {
        let c = build(&parse(&["--sessions", "2"]).unwrap(), false, vec![]).unwrap();
        assert!(c.replay.is_some());
        assert_eq!(
            (c.matrix.concurrency, c.matrix.contexts),
            (vec![1], vec![0])
        );
        assert!(c.prefill.prefill_contexts.is_empty() && c.prefill.skip_prefill);
        assert_eq!(c.open_loop.max_in_flight, 0);
        // Without a replay the flags' matrix stands.
        let c = build(&parse(&["--concurrency", "1,2"]).unwrap(), false, vec![]).unwrap();
        assert!(c.replay.is_none() && !c.prefill.skip_prefill);
        assert_eq!(c.matrix.concurrency, vec![1, 2]);
    }

    #[test]
    fn the_reference_parser_conveniences_work() {
        // An unambiguous prefix of a long flag, `--flag=value`, and a
        // repeated flag where the last one wins, as the reference's parser did.
        let a = parse(&["--conc", "1,2", "--dur=7", "--duration", "9"]).expect("parses");
        assert_eq!(a.concurrency.as_deref(), Some("1,2"));
        assert_eq!(a.duration, Some(crate::cli::DurationArg::Seconds(9.0)));
        let a = parse(&["--output", "a.json", "--output", "b.json"]).expect("parses");
        assert_eq!(a.output, std::path::PathBuf::from("b.json"));
        // An ambiguous prefix is refused (--prefill-contexts, --prefill-metric, …).
        let e = parse(&["--prefill", "1k"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let a = parse(&["--refresh-rate", "0.5"]).expect("parses");
        assert_eq!(a.refresh_rate, Some(0.5));
    }

    #[test]
    fn negative_counts_are_clap_errors_with_exit_code_2() {
        for flag in [
            "--request-count",
            "--warmup-request-count",
            "--burst-request-count",
            "--burst-warmup-request-count",
            "--burst-requests-per-concurrency",
        ] {
            let e = parse(&[flag, "-3"]).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{flag}");
            let e = parse(&[&format!("{flag}=-3")]).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{flag}");
        }
    }
}
