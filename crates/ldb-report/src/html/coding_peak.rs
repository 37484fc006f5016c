//! `<section id="coding-peak">`: the coding-peak summary of each file that
//! has one (nothing at all when none has: pages of runs without the probe
//! stay as they were).

use super::Page;
use super::escape::escape;
use crate::text::format::rate;

/// The section, or an empty string.
pub(crate) fn section(page: &Page<'_>) -> String {
    let peaks: Vec<_> = page
        .inputs
        .iter()
        .filter_map(|i| i.doc.coding_peak.as_ref().map(|p| (i.name, p)))
        .collect();
    if peaks.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<section id=\"coding-peak\">\n<h2>Coding Peak</h2>\n<p class=\"note\">Single-stream \
         coding requests after the matrix, one at a time, the server's own stop: generation \
         tok/s = usage completion_tokens / (end of stream − first token).</p>\n\
         <table class=\"meta\">\n<tr><th>run</th><th>runs ok</th><th>median tok/s</th>\
         <th>mean tok/s</th><th>max tok/s</th><th>min tok/s</th><th>CJK runs</th></tr>\n",
    );
    let cell = |v: Option<f64>| v.map_or_else(|| "—".to_string(), rate);
    for (name, p) in peaks {
        let s = &p.summary;
        out.push_str(&format!(
            "<tr><th>{}</th><td>{}/{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            escape(name),
            p.runs_ok,
            p.runs_requested,
            cell(s.median_generation_tok_s),
            cell(s.mean_generation_tok_s),
            cell(s.max_generation_tok_s),
            cell(s.min_generation_tok_s),
            s.cjk_runs
        ));
    }
    out.push_str("</table>\n</section>\n");
    out
}
