//! The final console report, printed on stdout after a run.
//!
//! Sections, in print order: the header line, a note for interrupted runs,
//! **Prefill**, the **Phase 2** panel, **Aggregate tok/s + TTFT/ITL**,
//! **Per-Request tok/s**, **Client request latency: p50 / p90 ms**,
//! **Prefill–decode interference** (only with `--mixed-prefill-contexts`),
//! **Hardware Summary** and **Whole-run GPU Power**, **Phase 3** (burst grid
//! and p50 table, or a "not run" note), the **SLO** verdicts and frontier
//! (only with `--slo`), the **Primary Summary** (prefill and
//! aggregate decode side by side when the terminal is wide enough) and the
//! **Coding Peak** (only with `--coding-peak`).
//!
//! `docs/report.md` describes every table, column and marker.

mod burst;
mod coding_peak;
mod energy_cost;
// The HTML report reuses the cell grammar, legend and formats.
pub(crate) mod cells;
pub(crate) mod decode;
pub mod fabric;
pub(crate) mod format;
pub(crate) mod hardware;
pub(crate) mod interference;
mod open_loop;
mod paired;
pub mod plan;
mod prefill;
mod prefix_cache;
mod replay;
mod session_router;
mod slo;
pub(crate) mod style;
mod summary;
pub(crate) mod table;
pub(crate) mod ttft_breakdown;

use std::io::{self, Write};

use ldb_core::document::ResultDocument;
use ldb_core::result::{DecodeMode, RunStatus};

pub use paired::render_paired;
use style::{Tone, paint};
use table::panel;

/// How the report is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextOptions {
    /// Terminal width in columns (decides inline detail and side-by-side tables).
    pub width: u16,
    /// Print the tok/s of capacity-limited cells instead of `∅`.
    pub show_capacity_limited_values: bool,
    /// Emit ANSI colour codes (never in snapshots or when stdout is not a TTY).
    pub color: bool,
}

impl Default for TextOptions {
    fn default() -> Self {
        TextOptions {
            width: 120,
            show_capacity_limited_values: false,
            color: false,
        }
    }
}

/// The warning on the report of an interrupted run (text and HTML).
pub(crate) const INTERRUPTED_NOTE: &str = "Run interrupted: this report covers only the cells that \
     finished before the stop; cells shown as - were never reached.";

/// Widest line of prose (notes, panels), whatever the terminal width.
const TEXT_WIDTH: usize = 120;

/// What every section needs: the document and the options.
pub(crate) struct Ctx<'a> {
    pub doc: &'a ResultDocument,
    pub width: usize,
    pub color: bool,
    pub show_hidden: bool,
}

impl Ctx<'_> {
    /// A dim paragraph, wrapped at the report width (at most [`TEXT_WIDTH`]).
    pub fn note(&self, text: &str) -> Vec<String> {
        style::note(text, self.text_width(), self.color)
    }

    /// A paragraph in the given tone, wrapped like a note.
    pub fn para(&self, text: &str, tone: Tone) -> Vec<String> {
        style::wrap(text, self.text_width())
            .iter()
            .map(|l| paint(l, tone, self.color))
            .collect()
    }

    /// Width for prose: notes and panels stay readable on very wide terminals.
    pub fn text_width(&self) -> usize {
        self.width.min(TEXT_WIDTH)
    }

    /// True when the primary decode layer is request-count bursts.
    pub fn request_mode(&self) -> bool {
        self.doc.metadata.decode_mode == Some(DecodeMode::RequestCount)
    }
}

/// Writes the whole report for `doc` to `w`.
pub fn render(doc: &ResultDocument, opts: &TextOptions, w: &mut impl Write) -> io::Result<()> {
    for line in render_lines(doc, opts) {
        writeln!(w, "{line}")?;
    }
    Ok(())
}

/// The report as a string (convenience for tests and callers that buffer).
pub fn render_to_string(doc: &ResultDocument, opts: &TextOptions) -> String {
    let mut out = String::new();
    for line in render_lines(doc, opts) {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn render_lines(doc: &ResultDocument, opts: &TextOptions) -> Vec<String> {
    let cx = Ctx {
        doc,
        width: usize::from(opts.width.max(40)),
        color: opts.color,
        show_hidden: opts.show_capacity_limited_values,
    };
    let mut out = vec![String::new()];
    let version = if doc.metadata.version.is_empty() {
        env!("CARGO_PKG_VERSION")
    } else {
        doc.metadata.version.as_str()
    };
    out.push(paint(
        &format!("llm-decode-bench v{version}"),
        Tone::Dim,
        cx.color,
    ));
    if doc.metadata.run_status == Some(RunStatus::Interrupted) {
        out.extend(cx.para(INTERRUPTED_NOTE, Tone::Warn));
    }
    out.push(String::new());
    out.extend(prefill::section(&cx));
    out.extend(open_loop::section(&cx));
    out.extend(prefix_cache::section(&cx));
    out.extend(replay::section(&cx));
    if doc.results.is_empty() && doc.burst_results.is_empty() {
        let replays = doc.trace_results.len() + doc.session_results.len();
        if doc.prefill.is_empty() && doc.rate_results.is_empty() && replays == 0 {
            out.extend(cx.note("No results were collected."));
            out.push(String::new());
        }
        out.extend(summary::section(&cx));
        out.extend(coding_peak::section(&cx));
        return out;
    }
    if !doc.results.is_empty() {
        out.extend(phase2_panel(&cx));
        out.push(String::new());
        out.extend(decode::section(&cx));
        out.extend(interference::section(&cx));
    }
    out.extend(hardware::section(&cx));
    out.extend(energy_cost::section(&cx));
    out.extend(ttft_breakdown::section(&cx));
    out.extend(burst::section(&cx));
    out.extend(slo::section(&cx));
    out.extend(summary::section(&cx));
    out.extend(coding_peak::section(&cx));
    out
}

/// The **Coding Peak** tables alone (printed after the probe, which runs
/// once the report of the matrix is out); empty without the section.
pub fn render_coding_peak(doc: &ResultDocument, opts: &TextOptions) -> String {
    let cx = Ctx {
        doc,
        width: usize::from(opts.width.max(40)),
        color: opts.color,
        show_hidden: opts.show_capacity_limited_values,
    };
    let mut out = String::new();
    for line in coding_peak::section(&cx) {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn phase2_panel(cx: &Ctx<'_>) -> Vec<String> {
    if cx.request_mode() {
        panel(
            "Decode",
            "Burst / E2E Decode — the primary decode layer is a fixed number of requests per cell \
             (--request-count); tok/s is output tokens over the time from the first measured send \
             to the last completion.",
            cx.text_width(),
            cx.color,
            false,
        )
    } else {
        panel(
            "Phase 2",
            "Sustained Decode — each cell keeps C streams busy and counts only the tokens that \
             arrive inside a fixed wall-clock window after the server is running all of them.",
            cx.text_width(),
            cx.color,
            false,
        )
    }
}
