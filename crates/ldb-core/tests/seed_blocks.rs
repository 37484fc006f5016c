//! The reference tool's result, as the project's fixture
//! (`tests/fixtures/reference-result.json`: its layout, numbers and enum
//! words, without its prose; recorded by
//! `scripts/record-reference-fixture.py` from the reference file, which stays
//! outside the repository), reads into the typed `startup_diagnostics`,
//! `nvidia_p2p_override` and `methodology` blocks, and written again each
//! block has the same keys, in the same order, with the same values: typing
//! them changed no byte of theirs.

use ldb_core::document::ResultDocument;
use serde_json::Value;

/// The fixture's text (compiled in: the test needs nothing beside the crate).
const REFERENCE: &str = include_str!("fixtures/reference-result.json");

#[test]
fn the_reference_blocks_read_typed_and_write_the_same_json() {
    let seed: Value = serde_json::from_str(REFERENCE).expect("fixture JSON");
    let doc = ResultDocument::from_json_str(REFERENCE).expect("fixture loads");

    let diag = doc.startup_diagnostics.as_ref().expect("diagnostics typed");
    assert_eq!(diag.args["concurrency"], "1,2,4");
    assert!(diag.nvidia_p2p_override.effective);
    assert_eq!(
        diag.gpu_inventory, None,
        "the reference records no inventory"
    );
    assert_eq!(
        diag.nvidia_smi_query.as_ref().map(|q| q.returncode),
        Some(0)
    );
    assert!(diag.extra.is_empty(), "every reference key is modelled");
    let p2p = doc.nvidia_p2p_override.as_ref().expect("p2p typed");
    assert_eq!(p2p.runtime["ForceP2P"], "0x11");
    let m = &doc.methodology;
    assert_eq!(
        m.prefill.as_ref().and_then(|n| n.mode.as_deref()),
        Some("integrated_decode_scout")
    );
    assert_eq!(m.burst_e2e_decode.as_ref().map(|n| n.present), Some(false));
    assert!(m.acceptance_normalization.is_some() && m.extra.is_empty());

    let ours = doc.to_json();
    for key in ["startup_diagnostics", "nvidia_p2p_override", "methodology"] {
        // serde_json keeps key order here (`preserve_order`), so equal
        // strings mean equal bytes of the block.
        assert_eq!(
            ours[key].to_string(),
            seed[key].to_string(),
            "{key} changed when written again"
        );
    }
}

#[test]
fn empty_blocks_read_as_absent_and_write_as_before() {
    let text = r#"{"metadata": {}, "results": [], "startup_diagnostics": {},
        "nvidia_p2p_override": null, "methodology": null}"#;
    let doc = ResultDocument::from_json_str(text).expect("loads");
    assert!(doc.startup_diagnostics.is_none() && doc.nvidia_p2p_override.is_none());
    assert!(doc.methodology.is_empty());
    let v = doc.to_json();
    for key in ["startup_diagnostics", "nvidia_p2p_override", "methodology"] {
        assert_eq!(v[key], serde_json::json!({}), "{key}");
    }
}
