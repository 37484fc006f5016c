//! `report --html` (and `--html` on a run): one self-contained HTML page.
//!
//! The page needs nothing from the network: the style sheet is inline and
//! every chart is an inline SVG drawn by `plotters`' SVG backend; there are no
//! scripts, fonts or images. Sections, in page order (each with a stable id):
//! `run-metadata` (one column per result file), `heatmap` (the aggregate
//! tok/s matrix of each file, coloured by value, status words as in the text
//! report), `charts` (the figures listed in [`CHART_IDS`]), `energy-cost`
//! and `timelines` (only when a file has energy figures or cell timelines:
//! `energy.rs`, `timeline.rs`), `replay` (trace
//! replays and sessions, only when a file has one: [`REPLAY_CHART_IDS`]),
//! `warnings` (the
//! text report's cell footnotes and warnings) and `methodology` (the result's
//! notes on how each number is made).
//!
//! Several files in one page overlay their curves, each series named by the
//! file stem. Every text from a result file is escaped. Request samples are
//! summarised by the cells' statistics and never embedded, so the page stays
//! small whatever the run's size (`docs/report.md`, "HTML report").

mod chart;
mod charts;
mod coding_peak;
mod energy;
mod escape;
mod fabric;
mod heatmap;
mod interference;
mod meta;
mod plot_range;
mod replay;
mod synthetic;
#[cfg(test)]
mod tests;
mod timeline;
mod ttft_breakdown;

use std::io::Write as _;
use std::path::Path;

use ldb_core::document::ResultDocument;

use crate::error::Result;
use escape::escape;
pub use replay::REPLAY_CHART_IDS;
#[doc(hidden)]
pub use synthetic::synthetic_result;

/// The `id` of every chart figure, in page order.
pub const CHART_IDS: [&str; 7] = [
    "chart-aggregate",
    "chart-pareto",
    "chart-ttft",
    "chart-prefill",
    "chart-token-gap",
    "chart-power",
    "chart-tokens-per-joule",
];

/// The `id` of every section, in page order.
pub const SECTION_IDS: [&str; 5] = [
    "run-metadata",
    "heatmap",
    "charts",
    "warnings",
    "methodology",
];

/// One result file of the page.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// Its name in legends and headings (the file stem, see [`name_of`]).
    pub name: &'a str,
    /// The result.
    pub doc: &'a ResultDocument,
}

/// How the page is built.
#[derive(Debug, Clone, Copy, Default)]
pub struct HtmlOptions {
    /// Show and plot the tok/s of capacity-limited cells (the text report's
    /// flag of the same name); a file whose run had it shows them anyway.
    pub show_capacity_limited_values: bool,
}

/// The name a result file goes by in the page: its stem (`run-a` for
/// `results/run-a.json`).
pub fn name_of(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| path.display().to_string())
}

/// Inputs plus what every section needs.
pub(crate) struct Page<'a> {
    pub inputs: &'a [Input<'a>],
    pub opts: HtmlOptions,
}

impl Page<'_> {
    /// Several files: series and headings carry the file name.
    pub fn multi(&self) -> bool {
        self.inputs.len() > 1
    }

    /// Capacity-limited values shown for this file.
    pub fn show_hidden(&self, doc: &ResultDocument) -> bool {
        self.opts.show_capacity_limited_values || doc.metadata.show_capacity_limited_values
    }
}

/// The whole page.
pub fn render(inputs: &[Input<'_>], opts: &HtmlOptions) -> String {
    let page = Page {
        inputs,
        opts: *opts,
    };
    let names: Vec<String> = inputs.iter().map(|i| escape(i.name)).collect();
    let title = if names.is_empty() {
        "llm-decode-bench report".to_string()
    } else {
        format!("llm-decode-bench report: {}", names.join(", "))
    };
    let mut out = String::with_capacity(256 * 1024);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    out.push_str(&format!(
        "<title>{title}</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n"
    ));
    out.push_str(&format!("<h1>{title}</h1>\n"));
    out.push_str(&format!(
        "<p class=\"note\">Written by llm-decode-bench v{}. Self-contained: no scripts, no \
         network; reload the page to see a running benchmark's latest save.</p>\n",
        env!("CARGO_PKG_VERSION")
    ));
    out.push_str(&meta::metadata_section(&page));
    out.push_str(&heatmap::section(&page));
    out.push_str(&charts::section(&page));
    out.push_str(&energy::section(&page));
    out.push_str(&timeline::section(&page));
    out.push_str(&coding_peak::section(&page));
    out.push_str(&interference::section(&page));
    out.push_str(&replay::section(&page));
    out.push_str(&fabric::section(&page));
    out.push_str(&ttft_breakdown::section(&page));
    out.push_str(&meta::warnings_section(&page));
    out.push_str(&meta::methodology_section(&page));
    out.push_str("</body>\n</html>\n");
    out
}

/// Writes the page to `path`, replacing the file atomically (temporary file
/// and rename, like the result JSON), so a browser reloading it mid-run
/// never reads half a page.
pub fn write_atomic(path: &Path, inputs: &[Input<'_>], opts: &HtmlOptions) -> Result<()> {
    let text = render(inputs, opts);
    crate::json::write_bytes_atomic(path, |f| f.write_all(text.as_bytes()))
}

/// The page's style sheet (inline: the page must work offline).
const CSS: &str = r#"body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5rem auto; max-width: 1200px; padding: 0 1rem; color: #1a1a1a; background: #fff; }
h1 { font-size: 1.5rem; margin-bottom: .3rem; }
h2 { font-size: 1.25rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; margin-top: 2rem; }
h3 { font-size: 1.05rem; margin: 1.2rem 0 .4rem; }
.note { color: #555; font-size: .9rem; margin: .3rem 0; }
table { border-collapse: collapse; margin: .5rem 0; font-size: .9rem; }
th, td { border: 1px solid #d0d0d0; padding: .25rem .55rem; }
th { background: #f3f3f3; text-align: left; }
table.meta td { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: .85rem; }
table.heatmap td { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.heatmap td.err { background: #f8d0d0; color: #8a0000; font-weight: 600; }
table.heatmap td.skip { background: #eeeeee; color: #666; }
table.heatmap td .detail { display: block; font-size: .75rem; opacity: .8; }
figure.chart { margin: 1.2rem 0; }
figure.chart figcaption { font-weight: 600; }
figure.chart svg { max-width: 100%; height: auto; border: 1px solid #e4e4e4; }
.no-data { color: #777; font-style: italic; border: 1px dashed #ccc; padding: 1rem; }
ul.warnings li.warn { color: #8a0000; }
ul.warnings li { margin: .3rem 0; }
code { font-size: .85rem; background: #f6f6f6; padding: 0 .2rem; }
table.energy td { text-align: right; font-variant-numeric: tabular-nums; }
table.energy td.why, table.energy td.basis { text-align: left; font-size: .8rem; }
table.energy td .detail { display: block; color: #8a0000; }
div.timelines { display: grid; grid-template-columns: repeat(auto-fill, minmax(380px, 1fr)); gap: .8rem; }
figure.timeline { margin: 0; }
figure.timeline figcaption { font-size: .85rem; font-weight: 600; }
figure.timeline svg { max-width: 100%; height: auto; border: 1px solid #e4e4e4; }
"#;
