//! `--resume`: may this file be continued by this run, and the document the
//! continued run starts from. Pure: the binary reads the file, the run
//! discovers the server; these functions only compare and assemble.

use ldb_core::document::{CellKey, Metadata, ResultDocument, ResumeEntry, Resumed};
use serde::Serialize;
use serde_json::Value;

use crate::plan::RunPlan;

/// Why a file cannot be resumed at all, whatever the run: it was not written
/// by this tool.
pub fn check_resumable(doc: &ResultDocument) -> Result<(), String> {
    let tool = doc.metadata.tool.as_str();
    if tool != "llm-decode-bench" {
        let shown = if tool.is_empty() {
            "no metadata.tool".to_string()
        } else {
            format!("metadata.tool is {tool:?}")
        };
        return Err(format!(
            "it was not written by llm-decode-bench ({shown}), so there is no run to continue"
        ));
    }
    Ok(())
}

/// The settings that differ between the file (`saved`) and this run (`now`),
/// one `key: file X, now Y` item each (values as the file writes them);
/// empty when the file may be resumed.
///
/// Compared: who was measured (server, model, engine and its version, this
/// tool's version) and every setting that shapes a cell or a prefill row.
/// With `--sim` the simulator's port changes from run to run, so its
/// scenario stands in for the server. Each field is compared as its own
/// type, in this order.
pub fn setting_differences(saved: &Metadata, now: &Metadata) -> Vec<String> {
    let mut out = Vec::new();
    let (a, b) = (saved, now);
    // The server, or the simulator's scenario when the file's run used one.
    let who = |m: &Metadata| {
        if a.sim_scenario.is_empty() {
            m.server.clone()
        } else {
            m.sim_scenario.clone()
        }
    };
    let key = if a.sim_scenario.is_empty() {
        "server"
    } else {
        "sim_scenario"
    };
    differs(&mut out, key, &who(a), &who(b));
    // A budget given on the command line is a setting; a detected one may
    // move by a few blocks when the server restarts, and is not compared.
    let kv = |m: &Metadata| {
        m.kv_budget_source
            .starts_with("argument:")
            .then_some(m.kv_budget_tokens)
    };
    differs_shown(&mut out, "kv_budget", &kv(a), &kv(b), |v| match v {
        Some(tokens) => shown(tokens),
        None => "detected".into(),
    });
    macro_rules! fields {
        ($($f:ident),* $(,)?) => { $( differs(&mut out, stringify!($f), &a.$f, &b.$f); )* };
    }
    fields!(
        model,
        engine,
        engine_version,
        version,
        decode_mode,
        duration_per_test,
        request_count,
        warmup_request_count,
        run_burst,
        burst_request_count,
        burst_warmup_request_count,
        burst_requests_per_concurrency,
        prefill_mode,
        standalone_prefill,
        prefill_only,
        skip_prefill,
        prefill_contexts,
        prefill_metric,
        max_tokens,
        temperature,
        ignore_eos,
        concurrency_levels,
        context_lengths,
        max_error_rate,
        cell_warmup_timeout_seconds,
        dcp_size,
        // how often the server's /metrics was read while measuring: on a
        // CPU-bound server it moves the numbers (docs/performance.md §3)
        metrics_interval,
        // --duration auto closes windows early: a different rule, different cells
        duration_auto,
    );
    // a file written before `--api` spoke chat
    let api = |m: &Metadata| m.api.unwrap_or_default();
    differs(&mut out, "api", &api(a), &api(b));
    out
}

/// Adds `key: file X, now Y` when the two values differ.
fn differs<T: PartialEq + Serialize>(out: &mut Vec<String>, key: &str, file: &T, now: &T) {
    differs_shown(out, key, file, now, shown);
}

/// [`differs`] with the values shown by `show`.
fn differs_shown<T: PartialEq>(
    out: &mut Vec<String>,
    key: &str,
    file: &T,
    now: &T,
    show: impl Fn(&T) -> String,
) {
    if file != now {
        out.push(format!("{key}: file {}, now {}", show(file), show(now)));
    }
}

/// A value as the file shows it: `none` for null or an empty list (the file
/// leaves those out), `""` for an empty string, strings bare, everything
/// else as JSON.
fn shown<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v).unwrap_or(Value::Null) {
        Value::Null => "none".into(),
        Value::Array(a) if a.is_empty() => "none".into(),
        Value::String(s) if s.is_empty() => "\"\"".into(),
        Value::String(s) => s,
        other => other.to_string(),
    }
}

/// The document a resumed run starts from: this run's metadata (`fresh`)
/// with the file's start time, served prompt sizes and resume history, and
/// the file's carried cells and prefill rows untouched; failed cells are
/// dropped (they are measured again). The event log of the file is kept
/// (the recorder appends to it).
pub fn resumed_document(
    prior: ResultDocument,
    fresh: Metadata,
    plan: &RunPlan,
    at_unix: f64,
) -> ResultDocument {
    let carried = |cells: &[ldb_core::result::CellResult], burst: bool| {
        let keep: Vec<(u32, u64)> = plan
            .cells
            .iter()
            .filter(|p| {
                if burst {
                    p.burst_carried.is_some()
                } else {
                    // Partly repeated cells keep their record: the run adds
                    // the missing repeats to it.
                    p.carried.is_some() || p.carried_repeats > 0
                }
            })
            .map(|p| (p.concurrency, p.context))
            .collect();
        let mut out: Vec<ldb_core::result::CellResult> = Vec::new();
        for c in cells {
            let key = (c.concurrency, c.context_tokens);
            let taken = out.iter().any(|o| (o.concurrency, o.context_tokens) == key);
            if c.ext.status.is_finished() && keep.contains(&key) && !taken {
                out.push(c.clone());
            }
        }
        out
    };
    let results = carried(&prior.results, false);
    let burst_results = carried(&prior.burst_results, true);
    let keys = |cells: &[ldb_core::result::CellResult]| {
        cells
            .iter()
            .map(|c| CellKey {
                concurrency: c.concurrency,
                context_tokens: c.context_tokens,
            })
            .collect::<Vec<_>>()
    };
    let entry = ResumeEntry {
        at_unix,
        carried_cells: keys(&results),
        carried_burst_cells: keys(&burst_results),
        carried_prefill_contexts: plan.prefill_carried.clone(),
    };
    let old = prior.metadata;
    let mut md = fresh;
    md.started_at = old.started_at;
    md.usage_mode = old.usage_mode.or(md.usage_mode);
    md.prompt_tokens_served_by_context = old.prompt_tokens_served_by_context;
    for (k, v) in old.prompt_tokens_by_context {
        md.prompt_tokens_by_context.insert(k, v);
    }
    md.resumed = Some(Resumed::push(old.resumed, entry));
    let prefill = prior
        .prefill
        .into_iter()
        .filter(|(x, _)| plan.prefill_carried.contains(x))
        .collect();
    ResultDocument {
        metadata: md,
        event_log: prior.event_log,
        prefill,
        results,
        burst_results,
        ..ResultDocument::default()
    }
}

#[cfg(test)]
mod tests {
    use ldb_core::result::{CellResult, CellStatus, PrefillEntry};

    use super::*;
    use crate::config::RunConfig;
    use crate::plan::{ServerLimits, mark_carried, plan};

    fn md() -> Metadata {
        Metadata {
            tool: "llm-decode-bench".into(),
            server: "10.0.0.1:8000".into(),
            model: "m".into(),
            engine: "vllm".into(),
            engine_version: "0.11.0".into(),
            duration_per_test: 30.0,
            max_tokens: 8192,
            concurrency_levels: vec![1, 2],
            context_lengths: vec![0, 8192],
            prefill_contexts: vec![16_384],
            prefill_metric: "client".into(),
            kv_budget_source: "vllm cache_config".into(),
            kv_budget_tokens: Some(100_000),
            ..Metadata::default()
        }
    }

    #[test]
    fn equal_settings_have_no_difference() {
        assert!(setting_differences(&md(), &md()).is_empty());
        // What is not a setting may change: the time, a detected KV budget.
        let mut now = md();
        now.timestamp = "later".into();
        now.kv_budget_tokens = Some(99_800);
        assert!(setting_differences(&md(), &now).is_empty());
    }

    #[test]
    fn each_difference_is_listed_with_both_values() {
        let mut now = md();
        now.duration_per_test = 10.0;
        now.concurrency_levels = vec![1, 4];
        now.engine_version = "0.12.0".into();
        now.prefill_contexts = vec![];
        let d = setting_differences(&md(), &now);
        assert_eq!(
            d,
            [
                "engine_version: file 0.11.0, now 0.12.0",
                "duration_per_test: file 30.0, now 10.0",
                "prefill_contexts: file [16384], now none",
                "concurrency_levels: file [1,2], now [1,4]",
            ]
        );
    }

    #[test]
    fn an_auto_duration_rule_must_match_to_resume() {
        let rule = |pct: f64| {
            Some(ldb_core::autostop::DurationAuto::of(
                &ldb_core::autostop::AutoStop {
                    target_rel: pct / 100.0,
                    min_s: 5.0,
                },
            ))
        };
        let mut auto = md();
        auto.duration_auto = rule(1.0);
        let d = setting_differences(&md(), &auto);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].starts_with("duration_auto: file none, now {"), "{d:?}");
        let mut wider = md();
        wider.duration_auto = rule(2.0);
        assert_eq!(setting_differences(&auto, &wider).len(), 1);
        assert!(setting_differences(&auto, &auto.clone()).is_empty());
    }

    #[test]
    fn the_server_counts_except_for_the_simulator_whose_port_moves() {
        let mut now = md();
        now.server = "10.0.0.2:8000".into();
        assert_eq!(
            setting_differences(&md(), &now),
            ["server: file 10.0.0.1:8000, now 10.0.0.2:8000"]
        );
        let (mut a, mut b) = (md(), md());
        a.sim_scenario = "quickstart".into();
        a.server = "127.0.0.1:4001 (simulator: quickstart)".into();
        b.sim_scenario = "quickstart".into();
        b.server = "127.0.0.1:4777 (simulator: quickstart)".into();
        assert!(setting_differences(&a, &b).is_empty());
        b.sim_scenario = "seed".into();
        assert_eq!(setting_differences(&a, &b).len(), 1);
    }

    #[test]
    fn a_budget_from_the_command_line_is_compared() {
        let mut a = md();
        a.kv_budget_source = "argument:--kv-budget".into();
        a.kv_budget_tokens = Some(50_000);
        let mut b = a.clone();
        b.kv_budget_tokens = Some(60_000);
        assert_eq!(
            setting_differences(&a, &b),
            ["kv_budget: file 50000, now 60000"]
        );
        assert_eq!(
            setting_differences(&a, &md()),
            ["kv_budget: file 50000, now detected"]
        );
    }

    #[test]
    fn only_files_of_this_tool_can_be_resumed() {
        let mut doc = ResultDocument::default();
        let e = check_resumable(&doc).unwrap_err();
        assert!(e.contains("no metadata.tool"), "{e}");
        doc.metadata.tool = "other".into();
        assert!(check_resumable(&doc).unwrap_err().contains("\"other\""));
        doc.metadata.tool = "llm-decode-bench".into();
        assert!(check_resumable(&doc).is_ok());
    }

    fn cell(c: u32, x: u64, status: CellStatus, tps: f64) -> CellResult {
        let mut r = CellResult {
            concurrency: c,
            context_tokens: x,
            aggregate_tps: Some(tps),
            ..CellResult::default()
        };
        r.ext.status = status;
        r
    }

    #[test]
    fn the_resumed_document_keeps_finished_cells_and_appends_the_history() {
        let cfg = RunConfig {
            matrix: crate::config::MatrixConfig {
                concurrency: vec![1, 2],
                contexts: vec![0, 1024],
                ..Default::default()
            },
            prefill: crate::config::PrefillConfig {
                prefill_contexts: vec![],
                ..Default::default()
            },
            ..RunConfig::default()
        };
        let mut p = plan(&cfg, ServerLimits::default());
        let mut prior = ResultDocument {
            results: vec![
                cell(1, 0, CellStatus::Ok, 50.0),
                cell(1, 1024, CellStatus::Error, 0.0),
                cell(2, 0, CellStatus::SkippedKv, 0.0),
            ],
            event_log: vec!["10:00:00 benchmark start".into()],
            ..ResultDocument::default()
        };
        prior.metadata = md();
        prior.metadata.started_at = "2026-12-01T10:00:00".into();
        prior.metadata.resumed = Some(Resumed::push(None, ResumeEntry::default()));
        prior.prefill.insert(1024, PrefillEntry::default());
        mark_carried(&mut p, &cfg, &prior);
        let mut fresh = md();
        fresh.started_at = "2026-12-01T11:00:00".into();
        let doc = resumed_document(prior.clone(), fresh, &p, 1_764_590_400.5);
        assert_eq!(doc.results.len(), 2);
        assert_eq!(doc.results[0].aggregate_tps, Some(50.0));
        assert_eq!(doc.results[1].ext.status, CellStatus::SkippedKv);
        assert_eq!(doc.metadata.started_at, "2026-12-01T10:00:00");
        assert_eq!(doc.event_log, prior.event_log);
        assert!(doc.prefill.contains_key(&1024));
        let r = doc.metadata.resumed.expect("history");
        assert_eq!(r.count, 2);
        let last = r.history.last().expect("entry");
        assert_eq!(last.at_unix, 1_764_590_400.5);
        let keys: Vec<(u32, u64)> = last
            .carried_cells
            .iter()
            .map(|k| (k.concurrency, k.context_tokens))
            .collect();
        assert_eq!(keys, [(1, 0), (2, 0)]);
        assert_eq!(last.carried_prefill_contexts, [1024]);
    }
}
