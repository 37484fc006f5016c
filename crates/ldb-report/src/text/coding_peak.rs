//! The **Coding Peak** tables (only when the result has a `coding_peak`
//! section): the summary over the ok runs, then one row per run.

use ldb_core::coding_peak::CodingPeak;

use super::Ctx;
use super::format::rate;
use super::table::{Cell, Table};

/// The section, empty without `coding_peak` in the document.
pub(crate) fn section(cx: &Ctx<'_>) -> Vec<String> {
    let Some(p) = &cx.doc.coding_peak else {
        return Vec::new();
    };
    lines(cx, p)
}

fn lines(cx: &Ctx<'_>, p: &CodingPeak) -> Vec<String> {
    let opt_rate = |v: Option<f64>| v.map_or_else(|| "—".to_string(), rate);
    let mut summary = Table::new(
        "Coding Peak",
        &[
            "runs",
            "median tok/s",
            "mean tok/s",
            "max tok/s",
            "CJK runs",
        ],
    )
    .title_suffix(&format!(
        "single stream, max_tokens {}, no ignore_eos",
        p.max_tokens
    ))
    .right(&[0, 1, 2, 3, 4]);
    let s = &p.summary;
    summary.push(vec![
        Cell::plain(format!("{}/{}", p.runs_ok, p.runs_requested)),
        Cell::plain(opt_rate(s.median_generation_tok_s)),
        Cell::plain(opt_rate(s.mean_generation_tok_s)),
        Cell::plain(opt_rate(s.max_generation_tok_s)),
        Cell::plain(s.cjk_runs.to_string()),
    ]);
    let mut out = summary.render(cx.color);
    out.push(String::new());
    let mut runs = Table::new(
        "Coding Peak runs",
        &[
            "run",
            "finish",
            "tokens",
            "TTFT s",
            "gen tok/s",
            "total tok/s",
            "CJK",
        ],
    )
    .right(&[0, 2, 3, 4, 5, 6]);
    for r in &p.samples {
        if !r.ok {
            let error = r.error.as_deref().unwrap_or("failed");
            runs.push(vec![
                Cell::plain(r.run.to_string()),
                Cell::plain(format!("ERROR: {}", clip(error, 60))),
                Cell::plain("—"),
                Cell::plain("—"),
                Cell::plain("—"),
                Cell::plain("—"),
                Cell::plain("—"),
            ]);
            continue;
        }
        runs.push(vec![
            Cell::plain(r.run.to_string()),
            Cell::plain(r.finish_reason.as_deref().unwrap_or("—")),
            Cell::plain(r.completion_tokens.map_or("—".into(), |n| n.to_string())),
            Cell::plain(r.ttft.map_or("—".into(), |t| format!("{t:.3}"))),
            Cell::plain(opt_rate(r.generation_tok_s)),
            Cell::plain(opt_rate(r.total_tok_s)),
            Cell::plain(r.cjk_chars.unwrap_or(0).to_string()),
        ]);
    }
    out.extend(runs.render(cx.color));
    out.push(String::new());
    out.extend(cx.note(
        "gen tok/s = usage completion_tokens / (end of stream − first token); the summary is \
         over the runs that completed. CJK = Han ideographs in reasoning and answer.",
    ));
    out.push(String::new());
    out
}

/// `s` cut to `n` characters, with an ellipsis when cut.
fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use ldb_core::coding_peak::{CodingPeak, Measured, Sample};
    use ldb_core::document::ResultDocument;

    use crate::text::{TextOptions, render_coding_peak, render_to_string};

    fn doc() -> ResultDocument {
        let m = Measured {
            finish_reason: Some("stop".into()),
            completion_tokens: Some(120),
            first_token: Some(0.2),
            end: 1.4,
            content: "def sieve(n): 水".into(),
            reasoning: String::new(),
        };
        let samples = vec![
            Sample::measured(1, &m),
            Sample::failed(
                2,
                "HTTP 500 from http://127.0.0.1:1/v1/chat/completions: boom",
            ),
            Sample::measured(3, &m),
        ];
        ResultDocument {
            coding_peak: Some(CodingPeak::new("p", 3, 2000, None, samples)),
            ..ResultDocument::default()
        }
    }

    #[test]
    fn the_tables_show_the_summary_and_every_run() {
        let d = doc();
        let text = render_coding_peak(&d, &TextOptions::default());
        assert!(text.contains("Coding Peak"), "{text}");
        assert!(text.contains("2/3"), "{text}");
        assert!(text.contains("ERROR: HTTP 500"), "{text}");
        // 120 tokens over 1.2 s of generation.
        assert!(text.contains("100"), "{text}");
        assert!(render_to_string(&d, &TextOptions::default()).contains("Coding Peak runs"));
        assert_eq!(
            render_coding_peak(&ResultDocument::default(), &TextOptions::default()),
            ""
        );
    }

    #[test]
    fn the_section_survives_a_save_and_a_load() {
        let d = doc();
        let back = ResultDocument::from_json_str(&d.to_json_string()).expect("loads");
        assert_eq!(back.coding_peak, d.coding_peak);
    }
}
