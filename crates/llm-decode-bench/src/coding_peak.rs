//! `--coding-peak`: after the matrix's report and save, the single-stream
//! coding probe; its section is added to the result file (saved atomically
//! again) and its tables are printed.

use std::io::{IsTerminal, Write};
use std::path::Path;

use ldb_core::document::ResultDocument;
use ldb_report::export::{self, Run};
use ldb_runner::Controls;
use ldb_runner::coding_peak::CodingPeakConfig;

use crate::error::{AppError, exit};

/// Runs the probe (`cfg`) against the benchmarked server (`server`: base
/// URL and API key) and model; `html`: the `--html` page to update.
/// `Ok(Some(130))` when Ctrl-C stopped it (the file keeps the matrix
/// alone); `Ok(None)` when the run's own exit code stands.
pub async fn run(
    cfg: &CodingPeakConfig,
    html: Option<&Path>,
    server: &(String, Option<String>),
    doc: &mut ResultDocument,
    controls: &Controls,
    output: &Path,
    opts: &ldb_report::text::TextOptions,
) -> Result<Option<i32>, AppError> {
    let color = std::io::stdout().is_terminal();
    let title = format!(
        "Running the coding peak: {} single-stream run(s), max_tokens {}...",
        cfg.runs, cfg.max_tokens
    );
    if color {
        println!("\x1b[1;36m{title}\x1b[0m");
    } else {
        println!("{title}");
    }
    let http = ldb_client::Http::new(&server.0, server.1.clone(), 1)
        .map_err(|e| AppError::Server(e.to_string()))?;
    let model = doc.metadata.model.clone();
    let runs = cfg.runs;
    let probe = ldb_runner::coding_peak::run(&http, &model, cfg, |s| {
        println!("  {}", progress_line(s, runs));
        let _ = std::io::stdout().flush();
    });
    let peak = tokio::select! {
        p = probe => p,
        () = controls.stop.cancelled() => {
            println!("Coding peak interrupted: {} keeps the matrix alone.", output.display());
            return Ok(Some(exit::INTERRUPTED));
        }
    };
    doc.coding_peak = Some(peak);
    doc.methodology.coding_peak = Some(ldb_core::document::coding_peak_note());
    print!("\n{}", ldb_report::text::render_coding_peak(doc, opts));
    let name = ldb_report::html::name_of(output);
    let runs = [Run { name: &name, doc }];
    export::write_atomic(&export::Json, &runs, output)
        .map_err(|e| AppError::Output(e.to_string()))?;
    println!("Results saved to {}", output.display());
    if let Some(path) = html {
        // The page was last written with the matrix; add the probe to it.
        let html = export::Html::new(opts.show_capacity_limited_values);
        if let Err(e) = export::write_atomic(&html, &runs, path) {
            eprintln!("warning: the HTML report was not updated with the coding peak: {e}");
        }
    }
    Ok(None)
}

/// `run 2/5: 1,234 tokens in 9.8 s, 125.9 tok/s (stop)` or the error.
fn progress_line(s: &ldb_core::coding_peak::Sample, runs: u32) -> String {
    if !s.ok {
        return format!(
            "run {}/{runs}: ERROR {}",
            s.run,
            s.error.as_deref().unwrap_or("")
        );
    }
    let tokens = s
        .completion_tokens
        .map_or_else(|| "? (no usage)".to_string(), |n| n.to_string());
    let rate = s
        .generation_tok_s
        .map_or_else(|| "—".to_string(), |r| format!("{r:.1}"));
    let cjk = match s.cjk_chars {
        Some(n) if n > 0 => format!(", {n} Han characters"),
        _ => String::new(),
    };
    format!(
        "run {}/{runs}: {tokens} tokens in {:.2} s, {rate} tok/s generation ({}){cjk}",
        s.run,
        s.total_elapsed.unwrap_or(0.0),
        s.finish_reason.as_deref().unwrap_or("no finish reason"),
    )
}
