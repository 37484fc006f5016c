//! `<section id="fabric">`: the fabric diagnostics of each file that ran
//! one (nothing when none did), as the console's compact report in a
//! preformatted block with each block's status, so the page and the
//! terminal say the same thing (docs/fabric.md).

use super::Page;
use super::escape::escape;
use crate::text::fabric::{FabricTextOptions, render};

/// The section, or an empty string.
pub(crate) fn section(page: &Page<'_>) -> String {
    let with: Vec<_> = page
        .inputs
        .iter()
        .filter(|i| i.doc.p2pmark.ran() || i.doc.amd_fabric.ran())
        .collect();
    if with.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<section id=\"fabric\">\n<h2>Fabric diagnostics</h2>\n<p class=\"note\">Measured before \
         the benchmark: CPU/NUMA bandwidth and latency per (CPU node, memory node) pair, GPU \
         peer-to-peer from its helper. Definitions in docs/fabric.md.</p>\n",
    );
    let opts = FabricTextOptions {
        width: 120,
        p2p_detail: false,
        cpu_detail: false,
    };
    for i in with {
        out.push_str(&format!(
            "<h3>{}</h3>\n<p>p2pmark: {} · amd_fabric: {}</p>\n<pre>{}</pre>\n",
            escape(i.name),
            escape(i.doc.p2pmark.status.as_str()),
            escape(i.doc.amd_fabric.status.as_str()),
            escape(&render(&i.doc.p2pmark, &i.doc.amd_fabric, &opts))
        ));
    }
    out.push_str("</section>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::html::{HtmlOptions, Input};
    use ldb_core::document::{FabricBlock, ResultDocument};

    #[test]
    fn a_run_with_a_fabric_block_gets_the_section_and_others_do_not() {
        let mut doc = ResultDocument::default();
        let page = |doc: &ResultDocument| {
            section(&Page {
                inputs: &[Input {
                    name: "r<1>.json",
                    doc,
                }],
                opts: HtmlOptions::default(),
            })
        };
        assert_eq!(page(&doc), "");
        doc.amd_fabric = FabricBlock::from_value(
            &serde_json::json!({"status": "timeout", "timeout_seconds": 1.0}),
        );
        let s = page(&doc);
        assert!(s.contains("<section id=\"fabric\">"), "{s}");
        assert!(s.contains("amd_fabric: timeout"), "{s}");
        assert!(s.contains("r&lt;1&gt;.json"), "{s}");
    }
}
