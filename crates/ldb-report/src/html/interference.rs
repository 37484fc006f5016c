//! `<section id="interference">`: the prefill–decode interference table of
//! each file that has one (`--mixed-prefill-contexts`; nothing at all when
//! none has, so pages of runs without the probe stay as they were). The
//! columns and their text are the console report's.

use super::Page;
use super::escape::escape;
use crate::text::interference::{HEADERS, cells, rows};

/// The section, or an empty string.
pub(crate) fn section(page: &Page<'_>) -> String {
    let files: Vec<_> = page
        .inputs
        .iter()
        .map(|i| (i.name, rows(i.doc)))
        .filter(|(_, r)| !r.is_empty())
        .collect();
    if files.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<section id=\"interference\">\n<h2>Prefill–decode interference</h2>\n<p class=\"note\">\
         One fresh prompt of L tokens sent after each window closed, the C streams still \
         decoding. TTFT × = its TTFT ÷ the same length alone on the idle server; decode loss = \
         1 − the streams' tok/s until its first token ÷ their tok/s before; stall = each \
         stream's longest token gap meanwhile (median and longest over the streams); stalled = \
         streams above their stall factor × their median gap before.</p>\n",
    );
    for (name, rows) in files {
        if page.multi() {
            out.push_str(&format!("<h3>{}</h3>\n", escape(name)));
        }
        out.push_str("<table class=\"meta\">\n<tr>");
        for h in HEADERS {
            out.push_str(&format!("<th>{}</th>", escape(h)));
        }
        out.push_str("</tr>\n");
        for (c, i) in rows {
            out.push_str("<tr>");
            for v in cells(c, i) {
                out.push_str(&format!("<td>{}</td>", escape(&v)));
            }
            out.push_str("</tr>\n");
            if let Some(why) = &i.skipped {
                out.push_str(&format!(
                    "<tr><td colspan=\"{}\" class=\"note\">not injected: {}</td></tr>\n",
                    HEADERS.len(),
                    escape(why)
                ));
            }
        }
        out.push_str("</table>\n");
    }
    out.push_str("</section>\n");
    out
}
