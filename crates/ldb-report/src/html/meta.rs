//! The page's prose sections: run metadata, warnings and methodology notes.

use std::collections::BTreeMap;

use ldb_core::document::{MethodologyNote, ResultDocument};
use ldb_core::result::{CellStatus, RunStatus};
use serde_json::Value;

use super::Page;
use super::escape::escape;
use crate::text::INTERRUPTED_NOTE;
use crate::text::cells;
use crate::text::format::context;

/// `—` for an empty text.
fn or_dash(s: &str) -> String {
    if s.trim().is_empty() {
        "—".into()
    } else {
        s.to_string()
    }
}

/// `2 × NVIDIA H200` from the startup GPU inventory, else the GPU count the
/// hardware sampler saw, else `—`.
pub(crate) fn gpus(doc: &ResultDocument) -> String {
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    for g in doc.startup_diagnostics.iter().flat_map(|d| d.gpus()) {
        *names.entry(g.name.clone()).or_default() += 1;
    }
    if !names.is_empty() {
        return names
            .iter()
            .map(|(n, k)| format!("{k} × {n}"))
            .collect::<Vec<_>>()
            .join(", ");
    }
    match doc.hardware_run_summary.gpu_count {
        0 => "—".into(),
        1 => "1 GPU".into(),
        n => format!("{n} GPUs"),
    }
}

fn list<T: ToString>(v: &[T], f: impl Fn(&T) -> String) -> String {
    if v.is_empty() {
        "—".into()
    } else {
        v.iter().map(f).collect::<Vec<_>>().join(", ")
    }
}

/// The rows of the metadata table for one file.
fn rows(doc: &ResultDocument) -> Vec<(&'static str, String)> {
    let m = &doc.metadata;
    let engine = format!("{} {}", m.engine, m.engine_version);
    let window = if m.request_count > 0 {
        format!("{} requests per cell", m.request_count)
    } else if let Some(auto) = &m.duration_auto {
        format!(
            "auto: ±{} % after {} s, at most {} s per cell",
            auto.target_ci_pct, auto.min_duration, m.duration_per_test
        )
    } else {
        format!("{} s per cell", m.duration_per_test)
    };
    vec![
        (
            "run status",
            m.run_status.map_or("—", |s| s.as_str()).into(),
        ),
        ("server", or_dash(&m.server)),
        ("engine", or_dash(engine.trim())),
        ("model", or_dash(&m.model)),
        ("GPUs", gpus(doc)),
        ("started", or_dash(&m.started_at)),
        ("last saved", or_dash(&m.timestamp)),
        (
            "decode mode",
            m.decode_mode.map_or("—".into(), |d| d.as_str().to_string()),
        ),
        ("measurement", window),
        ("max tokens", m.max_tokens.to_string()),
        (
            "concurrency levels",
            list(&m.concurrency_levels, u32::to_string),
        ),
        ("contexts", list(&m.context_lengths, |c| context(*c))),
        (
            "KV budget (tokens)",
            m.kv_budget_tokens
                .or(m.max_total_tokens)
                .map_or("—".into(), |t| t.to_string()),
        ),
        (
            "prefill mode",
            m.prefill_mode
                .map_or("—".into(), |p| p.as_str().to_string()),
        ),
        ("ignore_eos", m.ignore_eos.to_string()),
        (
            "temperature",
            m.temperature.map_or("—".into(), |t| t.to_string()),
        ),
        ("burst matrix", m.run_burst.to_string()),
        ("server metrics", m.metrics_available.to_string()),
        ("token targeting", or_dash(&m.token_targeting)),
        ("simulator scenario", or_dash(&m.sim_scenario)),
        ("tool version", or_dash(&m.version)),
    ]
}

/// `<section id="run-metadata">`: one row per setting, one column per file.
pub(crate) fn metadata_section(page: &Page<'_>) -> String {
    let mut out = String::from("<section id=\"run-metadata\">\n<h2>Run</h2>\n");
    if page.inputs.is_empty() {
        out.push_str("<p class=\"no-data\">no data</p>\n</section>\n");
        return out;
    }
    let tables: Vec<Vec<(&str, String)>> = page.inputs.iter().map(|i| rows(i.doc)).collect();
    out.push_str("<table class=\"meta\">\n<tr><th>setting</th>");
    for i in page.inputs {
        out.push_str(&format!("<th>{}</th>", escape(i.name)));
    }
    out.push_str("</tr>\n");
    for (r, (key, _)) in tables[0].iter().enumerate() {
        out.push_str(&format!("<tr><th>{}</th>", escape(key)));
        for t in &tables {
            out.push_str(&format!("<td>{}</td>", escape(&t[r].1)));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n</section>\n");
    out
}

/// One warning or note: its text and whether it is a warning (red) or a note.
fn warnings(doc: &ResultDocument) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    if doc.metadata.run_status == Some(RunStatus::Interrupted) {
        out.push((INTERRUPTED_NOTE.to_string(), true));
    }
    if !doc.metadata.metrics_warning.trim().is_empty() {
        out.push((
            format!("server metrics: {}", doc.metadata.metrics_warning.trim()),
            true,
        ));
    }
    for (ctx, row) in &doc.prefill {
        if row.skipped && !row.skip_reason.is_empty() {
            out.push((
                format!("prefill {}: skipped, {}", context(*ctx), row.skip_reason),
                false,
            ));
        }
        let v = &row.server_validation;
        if !v.invalid_reason.is_empty() {
            out.push((
                format!(
                    "prefill {}: server sample rejected, {}",
                    context(*ctx),
                    v.invalid_reason
                ),
                false,
            ));
        }
    }
    out.extend(
        crate::prefix_flags::flags(doc)
            .into_iter()
            .map(|f| (f, true)),
    );
    for (layer, list) in [("", &doc.results), ("burst ", &doc.burst_results)] {
        for c in list {
            if let Some(f) = cells::footnote(c) {
                out.push((format!("{layer}{f}"), c.ext.status == CellStatus::Error));
            }
            for w in cells::warnings(c) {
                out.push((format!("{layer}{w}"), true));
            }
        }
    }
    out
}

/// `<section id="warnings">`: the text report's warnings and cell notes.
pub(crate) fn warnings_section(page: &Page<'_>) -> String {
    let mut items = Vec::new();
    for i in page.inputs {
        for (text, warn) in warnings(i.doc) {
            let text = if page.multi() {
                format!("{}: {text}", i.name)
            } else {
                text
            };
            items.push(format!(
                "<li class=\"{}\">{}</li>",
                if warn { "warn" } else { "info" },
                escape(&text)
            ));
        }
    }
    let mut out = String::from("<section id=\"warnings\">\n<h2>Warnings and notes</h2>\n");
    if items.is_empty() {
        out.push_str("<p class=\"note\">No warnings: every cell was measured as asked.</p>\n");
    } else {
        out.push_str("<ul class=\"warnings\">\n");
        for i in items {
            out.push_str(&i);
            out.push('\n');
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</section>\n");
    out
}

/// `<section id="methodology">`: each note of the files' `methodology`
/// blocks (the first file's text wins for a key several files have).
pub(crate) fn methodology_section(page: &Page<'_>) -> String {
    let mut seen: Vec<&str> = Vec::new();
    let mut out = String::from("<section id=\"methodology\">\n<h2>Methodology</h2>\n");
    for i in page.inputs {
        let m = &i.doc.methodology;
        for (key, note) in m.notes() {
            if !seen.contains(&key) {
                seen.push(key);
                out.push_str(&note_html(key, note));
            }
        }
        for (key, entry) in &m.extra {
            if !seen.contains(&key.as_str()) {
                seen.push(key);
                out.push_str(&other_note_html(key, entry));
            }
        }
    }
    if seen.is_empty() {
        out.push_str("<p class=\"no-data\">no data: the result carries no methodology notes</p>\n");
    }
    out.push_str("</section>\n");
    out
}

/// One methodology note: its name, whether this run has it, formula, notes.
fn note_html(key: &str, note: &MethodologyNote) -> String {
    let name = if note.name.is_empty() {
        key
    } else {
        &note.name
    };
    let mut out = format!(
        "<h3>{}{}</h3>\n",
        escape(name),
        if note.present {
            ""
        } else {
            " <small>(not in this run)</small>"
        }
    );
    if !note.formula.is_empty() {
        out.push_str(&format!(
            "<p><b>Formula:</b> <code>{}</code></p>\n",
            escape(&note.formula)
        ));
    }
    if !note.notes.is_empty() {
        out.push_str(&format!("<p>{}</p>\n", escape(&note.notes)));
    }
    out
}

/// A note of another writer, kept as read: shown as a note when it has a
/// note's keys, as a paragraph when it is plain text.
fn other_note_html(key: &str, entry: &Value) -> String {
    if let Value::String(s) = entry {
        return format!("<h3>{}</h3>\n<p>{}</p>\n", escape(key), escape(s));
    }
    let mut note: MethodologyNote = serde_json::from_value(entry.clone()).unwrap_or_default();
    // A note without `present` is not marked absent.
    note.present = entry.get("present").and_then(Value::as_bool) != Some(false);
    note_html(key, &note)
}
