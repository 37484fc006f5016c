//! The SLO section (only when the result carries `--slo` verdicts): per
//! matrix a grid of verdicts with goodput, then the frontier per context.

use std::collections::BTreeMap;

use ldb_core::result::CellResult;
use ldb_core::slo::FrontierPoint;

use super::Ctx;
use super::cells::{self, Grid};
use super::format::{context, rate};
use super::style::Tone;
use super::table::{Cell, Table};

/// The section, empty without `slo` in the document.
pub(crate) fn section(cx: &Ctx<'_>) -> Vec<String> {
    let Some(slo) = &cx.doc.slo else {
        return Vec::new();
    };
    let mut out = cx.para(&format!("SLO: {}", slo.spec), Tone::Title);
    out.push(String::new());
    for (title, cells, frontier) in [
        ("Decode", &cx.doc.results, &slo.frontier),
        ("Burst/E2E", &cx.doc.burst_results, &slo.burst_frontier),
    ] {
        if cells.is_empty() {
            continue;
        }
        out.extend(grid(cx, title, cells).render(cx.color));
        out.extend(frontier_lines(cx, title, frontier));
        out.push(String::new());
    }
    out.extend(cx.note(
        "Each cell: meets (every target met; a value equal to its target meets it), FAIL \
         (then the targets missed) or ? (none missed, but the targets named have no value), \
         with the cell's goodput in tok/s: the tok/s of requests that met every per-request \
         target (TTFT, TTFO, e2e; token-gap targets are judged per cell only). Frontier = \
         the highest concurrency of each context whose cell meets the SLO (status ok). Exit \
         codes do not depend on the SLO.",
    ));
    out.push(String::new());
    out
}

/// `meets|FAIL|? <goodput> [keys]`: the verdict, the cell's goodput, then
/// the targets missed (FAIL) or without a value (?).
fn verdict(c: &CellResult) -> String {
    let goodput = match c.ext.goodput.flatten() {
        Some(g) if g > 0.0 => rate(g),
        Some(_) => "0".into(),
        None => "—".into(),
    };
    let keys = |k: &Option<Vec<String>>| k.as_deref().unwrap_or_default().join(" ");
    let text = match c.ext.slo_met {
        None => return "-".into(),
        Some(Some(true)) => format!("meets {goodput}"),
        Some(Some(false)) => format!("FAIL {goodput} {}", keys(&c.ext.slo_failed)),
        Some(None) if cells::measured(c) => format!("? {goodput} {}", keys(&c.ext.slo_unknown)),
        Some(None) => return cells::status_word(c.ext.status).unwrap_or("-").to_string(),
    };
    text.trim_end().to_string()
}

fn grid(cx: &Ctx<'_>, title: &str, cells: &[CellResult]) -> Table {
    let m = &cx.doc.metadata;
    let g = Grid::new(&m.context_lengths, &m.concurrency_levels, cells);
    let mut headers = vec!["ctx \\ conc".to_string()];
    headers.extend(g.concs.iter().map(u32::to_string));
    let mut t = Table::with_headers(&format!("{title} SLO verdict (goodput tok/s)"), headers);
    for &ctx in &g.contexts {
        let mut row = vec![Cell::plain(context(ctx))];
        for &c in &g.concs {
            let text = cells::find(cells, ctx, c).map_or_else(|| "-".to_string(), verdict);
            row.push(Cell::plain(text));
        }
        t.push(row);
    }
    t
}

fn frontier_lines(
    cx: &Ctx<'_>,
    title: &str,
    frontier: &BTreeMap<u64, Option<FrontierPoint>>,
) -> Vec<String> {
    let parts: Vec<String> = frontier
        .iter()
        .map(|(ctx, p)| match p {
            None => format!("{}: none", context(*ctx)),
            Some(p) => format!(
                "{}: C={} ({} tok/s, goodput {} tok/s)",
                context(*ctx),
                p.concurrency,
                p.aggregate_tps.map_or_else(|| "—".into(), rate),
                p.goodput.map_or_else(|| "—".into(), rate),
            ),
        })
        .collect();
    cx.para(
        &format!("{title} SLO frontier — {}", parts.join("; ")),
        Tone::Plain,
    )
}

#[cfg(test)]
mod tests {
    use ldb_core::document::ResultDocument;
    use ldb_core::slo::{SloSpec, evaluate};

    use crate::text::{TextOptions, render_to_string};

    fn golden(spec: Option<&str>) -> ResultDocument {
        let mut doc = ResultDocument::from_json_str(include_str!("../../tests/golden/burst.json"))
            .expect("golden");
        if let Some(s) = spec {
            evaluate(&SloSpec::parse(s).expect("spec"), &mut doc);
        }
        doc
    }

    #[test]
    fn the_section_appears_only_with_verdicts() {
        let opts = TextOptions::default();
        assert!(!render_to_string(&golden(None), &opts).contains("SLO"));
        let text = render_to_string(&golden(Some("ttft_p99=1000")), &opts);
        assert!(text.contains("SLO: ttft_p99=1000"), "{text}");
        assert!(
            text.contains("Decode SLO verdict (goodput tok/s)"),
            "{text}"
        );
        assert!(text.contains("meets "), "{text}");
        assert!(text.contains("Decode SLO frontier — "), "{text}");
        assert!(text.contains("Burst/E2E SLO frontier — "), "{text}");
        let text = render_to_string(&golden(Some("ttft_p99=0.0000001")), &opts);
        assert!(text.contains("FAIL — ttft_p99"), "{text}"); // no request samples: no goodput
        assert!(text.contains(": none"), "{text}");
        let md = crate::markdown::render(&golden(Some("ttft_p99=1000")));
        assert!(md.contains("## SLO frontier"), "{md}");
        assert!(md.contains("SLO verdict (goodput tok/s)"), "{md}");
    }
}
