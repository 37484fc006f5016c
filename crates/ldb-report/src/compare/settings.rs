//! Whether two runs measured the same thing: the settings that must match
//! for their numbers to be compared, and the ones that are only shown.

use std::collections::BTreeMap;
use std::fmt::Display;

use ldb_core::document::Metadata;

/// One setting that differs between the base run and a new run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingDiff {
    /// The `metadata` key in the result file.
    pub key: &'static str,
    /// The base run's value, as text.
    pub base: String,
    /// The new run's value, as text.
    pub new: String,
    /// A difference that makes the runs not comparable (refused without
    /// `--force`); otherwise it is listed for information only.
    pub blocking: bool,
}

impl SettingDiff {
    /// `key base → new`, for one-line messages.
    pub fn short(&self) -> String {
        format!("{} {} → {}", self.key, self.base, self.new)
    }
}

/// Every setting that differs, blocking ones first (in the order of
/// [`blocking_pairs`]), then the informational ones.
pub fn differences(base: &Metadata, new: &Metadata) -> Vec<SettingDiff> {
    let mut out = Vec::new();
    for (blocking, pairs) in [
        (true, blocking_pairs(base, new)),
        (false, info_pairs(base, new)),
    ] {
        for (key, b, n) in pairs {
            if b != n {
                out.push(SettingDiff {
                    key,
                    base: b,
                    new: n,
                    blocking,
                });
            }
        }
    }
    out
}

type Pair = (&'static str, String, String);

fn pair<T: Display>(key: &'static str, b: T, n: T) -> Pair {
    (key, b.to_string(), n.to_string())
}

/// What was measured and how: the server's engine, model and version, the
/// matrix, the window, the request shape, the prompts and the run's end.
/// A change of any of these can move every number by itself.
fn blocking_pairs(b: &Metadata, n: &Metadata) -> Vec<Pair> {
    vec![
        pair("engine", text(&b.engine), text(&n.engine)),
        pair("model", text(&b.model), text(&n.model)),
        pair(
            "engine_version",
            text(&b.engine_version),
            text(&n.engine_version),
        ),
        pair("decode_mode", opt(&b.decode_mode), opt(&n.decode_mode)),
        pair(
            "concurrency_levels",
            list(&b.concurrency_levels),
            list(&n.concurrency_levels),
        ),
        pair(
            "context_lengths",
            list(&b.context_lengths),
            list(&n.context_lengths),
        ),
        pair(
            "duration_per_test",
            b.duration_per_test,
            n.duration_per_test,
        ),
        pair("request_count", b.request_count, n.request_count),
        pair(
            "warmup_request_count",
            b.warmup_request_count,
            n.warmup_request_count,
        ),
        pair("max_tokens", b.max_tokens, n.max_tokens),
        pair("ignore_eos", b.ignore_eos, n.ignore_eos),
        pair("temperature", opt(&b.temperature), opt(&n.temperature)),
        pair("run_burst", b.run_burst, n.run_burst),
        pair(
            "burst_request_count",
            b.burst_request_count,
            n.burst_request_count,
        ),
        pair(
            "burst_requests_per_concurrency",
            b.burst_requests_per_concurrency,
            n.burst_requests_per_concurrency,
        ),
        pair("prefill_mode", opt(&b.prefill_mode), opt(&n.prefill_mode)),
        pair(
            "token_targeting",
            text(&b.token_targeting),
            text(&n.token_targeting),
        ),
        pair(
            "prompt_tokens_by_context",
            map(&b.prompt_tokens_by_context),
            map(&n.prompt_tokens_by_context),
        ),
        pair("run_status", opt(&b.run_status), opt(&n.run_status)),
        pair(
            "open_loop.request_rates",
            open_loop(b, |o| list(&o.request_rates)),
            open_loop(n, |o| list(&o.request_rates)),
        ),
        pair(
            "open_loop.arrival",
            open_loop(b, |o| o.arrival.to_string()),
            open_loop(n, |o| o.arrival.to_string()),
        ),
        pair(
            "open_loop.request_count",
            open_loop(b, |o| o.request_count.to_string()),
            open_loop(n, |o| o.request_count.to_string()),
        ),
        pair(
            "open_loop.max_in_flight",
            open_loop(b, |o| o.max_in_flight.to_string()),
            open_loop(n, |o| o.max_in_flight.to_string()),
        ),
    ]
}

/// A setting of the open-loop mode, `(none)` for a closed-loop run.
fn open_loop(m: &Metadata, f: impl Fn(&ldb_core::document::OpenLoopSettings) -> String) -> String {
    m.open_loop.as_ref().map_or_else(|| "(none)".into(), f)
}

/// Where and by what the run was made: shown so a reader sees it, but a new
/// address or tool build does not by itself change what was measured.
fn info_pairs(b: &Metadata, n: &Metadata) -> Vec<Pair> {
    vec![
        pair("server", text(&b.server), text(&n.server)),
        pair("sim_scenario", text(&b.sim_scenario), text(&n.sim_scenario)),
        pair("version", text(&b.version), text(&n.version)),
        pair("max_error_rate", b.max_error_rate, n.max_error_rate),
        // another seed draws another schedule from the same process
        pair(
            "open_loop.seed",
            open_loop(b, |o| o.seed.to_string()),
            open_loop(n, |o| o.seed.to_string()),
        ),
        pair(
            "kv_budget_tokens",
            opt(&b.kv_budget_tokens),
            opt(&n.kv_budget_tokens),
        ),
        // --duration auto closes windows early at the same values within
        // its target: shown, not blocking (bench/auto-duration.sh compares
        // exactly this)
        pair(
            "duration_auto",
            opt(&b.duration_auto),
            opt(&n.duration_auto),
        ),
    ]
}

fn text(s: &str) -> String {
    if s.is_empty() {
        "(none)".into()
    } else {
        s.to_string()
    }
}

fn opt<T: serde::Serialize>(v: &Option<T>) -> String {
    match v {
        None => "(none)".into(),
        // Enums print as their JSON word, numbers as JSON numbers.
        Some(x) => match serde_json::to_value(x) {
            Ok(serde_json::Value::String(s)) => s,
            Ok(other) => other.to_string(),
            Err(_) => "?".into(),
        },
    }
}

fn list<T: Display>(v: &[T]) -> String {
    let items: Vec<String> = v.iter().map(ToString::to_string).collect();
    format!("[{}]", items.join(","))
}

fn map(m: &BTreeMap<String, u64>) -> String {
    let items: Vec<String> = m.iter().map(|(k, v)| format!("{k}:{v}")).collect();
    format!("{{{}}}", items.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_settings_have_no_difference() {
        let m = Metadata {
            engine: "vllm".into(),
            concurrency_levels: vec![1, 2],
            ..Metadata::default()
        };
        assert!(differences(&m, &m.clone()).is_empty());
    }

    #[test]
    fn the_matrix_and_window_block_the_address_does_not() {
        let b = Metadata {
            engine_version: "0.11.0".into(),
            concurrency_levels: vec![1, 2],
            duration_per_test: 4.0,
            server: "a:1".into(),
            ..Metadata::default()
        };
        let n = Metadata {
            engine_version: "0.12.0".into(),
            concurrency_levels: vec![1, 2, 4],
            duration_per_test: 2.5,
            server: "b:2".into(),
            ..Metadata::default()
        };
        let d = differences(&b, &n);
        let blocking: Vec<String> = d
            .iter()
            .filter(|x| x.blocking)
            .map(SettingDiff::short)
            .collect();
        assert_eq!(
            blocking,
            [
                "engine_version 0.11.0 → 0.12.0",
                "concurrency_levels [1,2] → [1,2,4]",
                "duration_per_test 4 → 2.5",
            ]
        );
        assert!(d.iter().any(|x| x.key == "server" && !x.blocking));
    }

    #[test]
    fn an_auto_duration_run_is_compared_with_a_note() {
        let fixed = Metadata::default();
        let auto = Metadata {
            duration_auto: Some(ldb_core::autostop::DurationAuto::of(
                &ldb_core::autostop::AutoStop {
                    target_rel: 0.01,
                    min_s: 5.0,
                },
            )),
            ..Metadata::default()
        };
        let d = differences(&fixed, &auto);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].key, "duration_auto");
        assert!(!d[0].blocking);
    }
}
