//! The bytes of the result file are a contract: scripts diff, hash and parse
//! them. These goldens were written by the hand-built serializer before the
//! result model became serde-derived; the derived one must reproduce them
//! exactly, and a file read back must write the same bytes again.
//!
//! `LDB_BLESS=1 cargo test -p ldb-report --test golden` rewrites the goldens
//! (only for a deliberate change of the layout).

mod common;

use std::path::PathBuf;

use ldb_core::document::ResultDocument;

fn golden(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.json"))
}

fn documents() -> Vec<(&'static str, ResultDocument)> {
    vec![
        ("seed", common::seed_doc()),
        ("problems", common::problems_doc()),
        ("burst", common::burst_doc()),
        ("interrupted", common::interrupted_doc()),
        ("default", ResultDocument::default()),
    ]
}

#[test]
fn fixture_documents_write_the_golden_bytes() {
    let bless = std::env::var_os("LDB_BLESS").is_some();
    for (name, doc) in documents() {
        let path = golden(name);
        let written = doc.to_json_string();
        if bless {
            std::fs::write(&path, &written).expect("write golden");
            continue;
        }
        let want = std::fs::read_to_string(&path).expect("golden file");
        assert!(written == want, "{name}: output differs from {}", path.display());
    }
}
