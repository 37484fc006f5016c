use ldb_core::document::ResultDocument;
use ldb_core::result::{CellResult, CellStatus, PrefillEntry, RunStatus};

use super::*;

fn page(doc: &ResultDocument) -> String {
    render(&[Input { name: "run", doc }], &HtmlOptions::default())
}

/// The text of the `<figure>` with this id.
fn figure_of<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("{id} missing"));
    let end = html[start..]
        .find("</figure>")
        .map_or(html.len(), |e| start + e);
    &html[start..end]
}

#[test]
fn every_section_and_chart_has_its_stable_id() {
    let doc = synthetic_result(4, 2, 3);
    let html = page(&doc);
    for id in SECTION_IDS.iter().chain(CHART_IDS.iter()) {
        assert_eq!(
            html.matches(&format!("id=\"{id}\"")).count(),
            1,
            "{id} must appear exactly once"
        );
    }
    for id in CHART_IDS {
        let f = figure_of(&html, id);
        assert!(f.contains("<svg"), "{id} has no chart: {f}");
        assert!(!f.contains("no data"), "{id}");
    }
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("id=\"heatmap-0\""));
}

#[test]
fn the_page_is_self_contained() {
    let html = page(&synthetic_result(3, 2, 1));
    for banned in ["<script", "<link", "<img", "@import", "url(", "src="] {
        assert!(!html.contains(banned), "found {banned}");
    }
    // plotters' SVG carries its own namespace; nothing is fetched by it.
    assert!(!html.contains("xlink:href"));
}

#[test]
fn text_from_the_result_is_escaped() {
    let mut doc = synthetic_result(2, 1, 1);
    doc.metadata.model = "<script>alert('m')</script>".into();
    doc.metadata.server = "host\"><img src=x>".into();
    doc.metadata.metrics_warning = "a <b>bold</b> claim & more".into();
    doc.results[1].ext.status = CellStatus::Error;
    doc.results[1].ext.status_reason = "HTTP 500: <html>oops</html>".into();
    doc.startup_diagnostics = Some(ldb_core::document::StartupDiagnostics {
        gpu_inventory: Some(vec![ldb_core::hardware::smi::GpuInventory {
            name: "GPU <x>".into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    doc.methodology.prefill = Some(ldb_core::document::MethodologyNote {
        name: "N <i>".into(),
        notes: "n </p>".into(),
        present: true,
        ..Default::default()
    });
    let html = render(
        &[Input {
            name: "<evil>",
            doc: &doc,
        }],
        &HtmlOptions::default(),
    );
    for raw in [
        "<script>",
        "<img",
        "<b>bold",
        "<html>oops",
        "GPU <x>",
        "N <i>",
        "<evil>",
    ] {
        assert!(!html.contains(raw), "{raw} was not escaped");
    }
    assert!(html.contains("&lt;script&gt;alert(&#39;m&#39;)&lt;/script&gt;"));
    assert!(html.contains("a &lt;b&gt;bold&lt;/b&gt; claim &amp; more"));
    assert!(html.contains("HTTP 500: &lt;html&gt;oops&lt;/html&gt;"));
    assert!(html.contains("1 × GPU &lt;x&gt;"));
}

#[test]
fn an_empty_result_says_no_data_everywhere() {
    let html = page(&ResultDocument::default());
    for id in CHART_IDS {
        assert!(figure_of(&html, id).contains("no data"), "{id}");
    }
    assert!(html.contains("the result carries no methodology notes"));
    // No files at all still gives a page.
    let none = render(&[], &HtmlOptions::default());
    for id in CHART_IDS {
        assert!(figure_of(&none, id).contains("no data"), "{id}");
    }
}

#[test]
fn missing_values_leave_only_their_chart_empty() {
    let mut doc = synthetic_result(3, 2, 0);
    for c in &mut doc.results {
        c.hardware_summary = Default::default();
        c.ext.tokens_per_joule = 0.0;
        c.ext.token_gap_p50 = None;
        c.ext.token_gap_p99 = None;
    }
    doc.prefill.clear();
    let html = page(&doc);
    for id in [
        "chart-power",
        "chart-tokens-per-joule",
        "chart-token-gap",
        "chart-prefill",
    ] {
        assert!(figure_of(&html, id).contains("no data"), "{id}");
    }
    for id in ["chart-aggregate", "chart-pareto", "chart-ttft"] {
        assert!(figure_of(&html, id).contains("<svg"), "{id}");
    }
}

#[test]
fn the_heatmap_shows_status_words_as_the_text_report() {
    let mut doc = synthetic_result(4, 1, 0);
    doc.results[0].ext.status = CellStatus::CapacityLimited;
    doc.results[0].sched.capacity_limited = true;
    doc.results[1].ext.status = CellStatus::SkippedContext;
    doc.results[2].ext.status = CellStatus::SkippedUser;
    doc.results[3].ext.status = CellStatus::NoTokens;
    doc.metadata.run_status = Some(RunStatus::Interrupted);
    let html = page(&doc);
    let heat =
        &html[html.find("id=\"heatmap\"").unwrap_or(0)..html.find("id=\"charts\"").unwrap_or(0)];
    for word in ["∅", "skip ctx", "skip", "0 tok"] {
        assert!(heat.contains(&format!(">{word}")), "{word} missing: {heat}");
    }
    assert!(
        heat.contains("value hidden"),
        "the legend follows the table"
    );
    assert!(html.contains("Run interrupted"));
    // A hidden value is not plotted either.
    let shown = render(
        &[Input {
            name: "run",
            doc: &doc,
        }],
        &HtmlOptions {
            show_capacity_limited_values: true,
        },
    );
    let v = format!("{:.1}", doc.results[0].aggregate_tps.unwrap_or(0.0));
    assert!(shown.contains(&format!(">{v}")));
    assert!(!heat.contains(&format!(">{v}")));
}

#[test]
fn errors_and_warnings_of_cells_are_listed() {
    let mut doc = synthetic_result(8, 1, 0);
    doc.results[2].ext.early_stop_requests = 3;
    let html = page(&doc);
    let w = &html[html.find("id=\"warnings\"").unwrap_or(0)..];
    assert!(w.contains("C=32 ctx=0: HTTP 500 at C=32"), "{w}");
    assert!(w.contains("C=128 ctx=0: over the KV budget"), "{w}");
    assert!(w.contains("3 requests stopped at end-of-sequence"), "{w}");
}

#[test]
fn several_files_overlay_their_series_by_stem() {
    let a = synthetic_result(3, 1, 0);
    let mut b = synthetic_result(3, 1, 0);
    b.metadata.model = "other".into();
    let html = render(
        &[
            Input {
                name: "base",
                doc: &a,
            },
            Input {
                name: "new",
                doc: &b,
            },
        ],
        &HtmlOptions::default(),
    );
    let agg = figure_of(&html, "chart-aggregate");
    assert!(
        agg.contains("base ctx=0") && agg.contains("new ctx=0"),
        "{agg}"
    );
    assert!(figure_of(&html, "chart-prefill").contains("\nnew\n"));
    assert!(html.contains("id=\"heatmap-1\""));
    assert!(html.contains("<th>base</th><th>new</th>"));
    assert_eq!(name_of(std::path::Path::new("runs/new.json")), "new");
}

#[test]
fn two_hundred_cells_and_100k_samples_stay_under_2_mb() {
    // 20 concurrencies × 10 contexts, 667 samples in each of the 150
    // measured cells.
    let doc = synthetic_result(20, 10, 667);
    assert_eq!(doc.results.len(), 200);
    let samples: usize = doc.results.iter().map(|c| c.request_samples.len()).sum();
    assert!(samples >= 100_000, "{samples}");
    let html = page(&doc);
    assert!(html.len() < 2_000_000, "{} bytes", html.len());
    for id in CHART_IDS {
        assert!(figure_of(&html, id).contains("<svg"), "{id}");
    }
}

#[test]
fn the_page_is_written_atomically() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("sub/report.html");
    // The directory must exist (the run creates it for its JSON); a missing
    // one is a clean error, not a panic.
    let doc = synthetic_result(2, 1, 0);
    let inputs = [Input {
        name: "r",
        doc: &doc,
    }];
    assert!(write_atomic(&path, &inputs, &HtmlOptions::default()).is_err());
    std::fs::create_dir(dir.path().join("sub"))?;
    write_atomic(&path, &inputs, &HtmlOptions::default())?;
    assert!(std::fs::read_to_string(&path)?.contains("chart-aggregate"));
    let names: Vec<_> = std::fs::read_dir(dir.path().join("sub"))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names.len(), 1, "no temporary file is left: {names:?}");
    Ok(())
}

#[test]
fn a_cell_without_a_value_is_not_plotted() {
    let mut doc = ResultDocument::default();
    doc.results.push(CellResult {
        concurrency: 1,
        aggregate_tps: None,
        ..CellResult::default()
    });
    doc.prefill.insert(
        1024,
        PrefillEntry {
            skipped: true,
            skip_reason: "beyond the model context".into(),
            ..PrefillEntry::default()
        },
    );
    let html = page(&doc);
    assert!(figure_of(&html, "chart-aggregate").contains("no data"));
    assert!(figure_of(&html, "chart-prefill").contains("no data"));
    assert!(html.contains("prefill 1k: skipped, beyond the model context"));
}

#[test]
fn burst_and_slo_frontier_charts_appear_only_with_their_data() {
    let plain = page(&synthetic_result(4, 2, 3));
    assert!(!plain.contains("id=\"chart-burst\""));
    assert!(!plain.contains("id=\"chart-slo-frontier\""));
    let mut doc = synthetic_result(4, 2, 3);
    doc.burst_results = doc.results.clone();
    ldb_core::slo::evaluate(
        &ldb_core::slo::SloSpec::parse("ttft_p99=1000").expect("spec"),
        &mut doc,
    );
    let html = page(&doc);
    for id in ["chart-burst", "chart-slo-frontier"] {
        let f = figure_of(&html, id);
        assert!(f.contains("<svg"), "{id} has no chart: {f}");
    }
}

#[test]
fn the_coding_peak_section_appears_only_with_the_probe() {
    let plain = ResultDocument::default();
    assert!(!page(&plain).contains("id=\"coding-peak\""));
    let m = ldb_core::coding_peak::Measured {
        finish_reason: Some("stop".into()),
        completion_tokens: Some(90),
        first_token: Some(0.1),
        end: 1.0,
        content: "<b>".into(),
        reasoning: String::new(),
    };
    let doc = ResultDocument {
        coding_peak: Some(ldb_core::coding_peak::CodingPeak::new(
            "p",
            2,
            100,
            None,
            vec![
                ldb_core::coding_peak::Sample::measured(1, &m),
                ldb_core::coding_peak::Sample::failed(2, "x"),
            ],
        )),
        ..ResultDocument::default()
    };
    let html = page(&doc);
    assert!(html.contains("id=\"coding-peak\""), "{html}");
    assert!(html.contains("<td>1/2</td><td>100.0</td>"), "{html}");
}

#[test]
fn open_loop_charts_appear_only_with_rate_cells() {
    use ldb_core::open_loop::RateResult;
    use ldb_core::result::CellStatus;
    let plain = page(&synthetic_result(4, 2, 3));
    assert!(!plain.contains("id=\"chart-rate-throughput\""));
    let mut doc = synthetic_result(4, 2, 3);
    doc.rate_results = [1.0, 2.0, 4.0, 8.0]
        .iter()
        .map(|&r| RateResult {
            request_rate: r,
            context_tokens: 0,
            status: CellStatus::Ok,
            achieved_rate: Some(r.min(5.0)),
            ttft_p99: Some(0.1 * r),
            ..RateResult::default()
        })
        .collect();
    let html = page(&doc);
    for id in ["chart-rate-throughput", "chart-rate-latency"] {
        let f = figure_of(&html, id);
        assert!(f.contains("<svg"), "{id} has no chart: {f}");
    }
}

/// Notes under keys this build does not model (another writer's) are kept
/// on read and shown like the typed ones, escaped; a note without
/// `present` is not marked absent, and a plain-text note is a paragraph.
#[test]
fn notes_of_other_writers_are_shown_after_the_typed_ones() {
    let text = r#"{"metadata": {}, "results": [], "methodology": {
        "prefill": {"name": "Prefill", "present": false, "formula": "f", "notes": "n"},
        "k": {"name": "N <i>", "notes": "n </p>"},
        "plain": "just <words>"}}"#;
    let doc = ResultDocument::from_json_str(text).expect("loads");
    assert_eq!(doc.methodology.extra.len(), 2);
    let html = page(&doc);
    let at = |s: &str| html.find(s).unwrap_or_else(|| panic!("{s} missing"));
    assert!(at("<h3>Prefill <small>(not in this run)</small></h3>") < at("<h3>N &lt;i&gt;</h3>"));
    assert!(html.contains("<p>n &lt;/p&gt;</p>"));
    assert!(html.contains("<h3>plain</h3>\n<p>just &lt;words&gt;</p>"));
}
