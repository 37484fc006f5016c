//! A result file written by someone else (issue 34): every string in it is
//! replaced by markup, script and formula payloads, and neither the HTML page
//! nor the CSV lets one act (docs/security.md, "Other surfaces").

use ldb_core::document::ResultDocument;
use serde_json::Value;

use crate::html::{HtmlOptions, Input, render, synthetic_result};

/// Breaks out of an attribute, a `<script>` blob and an SVG text, and is
/// a spreadsheet formula when it starts a cell.
const PAYLOAD: &str = "=HYPERLINK(\"http://evil.example\",\"x\")\"><img src=x \
                       onerror=alert(1)></script><script>alert(2)</script><svg onload=alert(3)>";

/// The rendered page must hold none of these (it has no script of its own).
const FORBIDDEN: &[&str] = &["<img", "<script", "</script", "<svg onload", "\"><"];

/// Every string leaf of `v`, as a path of keys and indices.
fn string_paths(v: &Value, at: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
    match v {
        Value::String(_) => out.push(at.clone()),
        Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| {
            at.push(i.into());
            string_paths(x, at, out);
            at.pop();
        }),
        Value::Object(o) => o.iter().for_each(|(k, x)| {
            at.push(k.clone().into());
            string_paths(x, at, out);
            at.pop();
        }),
        _ => {}
    }
}

fn leaf<'a>(v: &'a mut Value, path: &[Value]) -> &'a mut Value {
    path.iter().fold(v, |v, k| match k {
        Value::String(k) => &mut v[k.as_str()],
        k => &mut v[k.as_u64().unwrap_or(0) as usize],
    })
}

/// The synthetic run plus a replay, notes, an event log and the per-cell
/// timeline, TTFT breakdown and interference blocks, with every
/// string the document still reads after the swap replaced by [`PAYLOAD`]
/// (enum words that would make the file unreadable stay as they were).
fn hostile_doc() -> (ResultDocument, usize) {
    // The per-cell blocks of issue 37 carry strings too (reasons, metric
    // names, notes).
    let mut doc = crate::hostile_numbers_tests::with_new_blocks(synthetic_result(3, 2, 2), "x");
    let replay = crate::replay_fixture::doc(1.0);
    doc.trace_results = replay.trace_results;
    doc.session_results = replay.session_results;
    doc.event_log = vec!["00:00:01 started".into(), "00:00:02 note".into()];
    doc.metadata.metrics_warning = "warning".into();
    let mut v = serde_json::to_value(&doc).expect("serialises");
    let mut paths = Vec::new();
    string_paths(&v, &mut Vec::new(), &mut paths);
    // Whether a key takes any text is the same in every element of an
    // array: tried once per shape (indices left out), then applied to all.
    let shape = |p: &[Value]| -> Vec<String> {
        p.iter()
            .map(|k| k.as_str().unwrap_or("#").to_string())
            .collect()
    };
    let mut takes_text = std::collections::HashMap::new();
    let mut swapped = 0;
    for p in &paths {
        let ok = *takes_text.entry(shape(p)).or_insert_with(|| {
            let mut trial = v.clone();
            *leaf(&mut trial, p) = PAYLOAD.into();
            serde_json::from_value::<ResultDocument>(trial).is_ok()
        });
        if ok {
            *leaf(&mut v, p) = PAYLOAD.into();
            swapped += 1;
        }
    }
    (serde_json::from_value(v).expect("still a result"), swapped)
}

#[test]
fn no_string_of_a_hostile_result_becomes_markup_in_the_html() {
    let (doc, swapped) = hostile_doc();
    assert!(swapped > 20, "only {swapped} strings swapped");
    let html = render(
        &[Input {
            name: PAYLOAD,
            doc: &doc,
        }],
        &HtmlOptions::default(),
    );
    for bad in FORBIDDEN {
        assert!(!html.contains(bad), "{bad} in the page");
    }
    assert!(
        html.contains("&lt;script&gt;alert(2)"),
        "the text is shown, escaped"
    );
}

#[test]
fn no_field_of_a_hostile_result_is_a_formula_in_the_csv() {
    let (doc, _) = hostile_doc();
    let mut buf = Vec::new();
    crate::csv::write(&doc, &mut buf).expect("written");
    let mut r = ::csv::Reader::from_reader(buf.as_slice());
    let mut payloads = 0;
    for row in r.records() {
        for field in row.expect("parses").iter() {
            payloads += usize::from(field.contains("HYPERLINK"));
            let formula = field.starts_with(['=', '+', '@', '\t', '\r'])
                || (field.starts_with('-') && field.parse::<f64>().is_err());
            assert!(!formula, "{field:?} would run as a formula");
        }
    }
    assert!(payloads > 0, "the hostile text reaches the CSV");
}
