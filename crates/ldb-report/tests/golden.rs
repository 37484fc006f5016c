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
        if written != want {
            let actual = std::env::temp_dir().join(format!("ldb-golden-{name}.json"));
            std::fs::write(&actual, &written).expect("write actual");
            panic!(
                "{name}: output differs from {} (written: {})",
                path.display(),
                actual.display()
            );
        }
    }
}

/// Files the simulator wrote through the whole runner before the model became
/// serde-derived (a `--run-burst` run, the seed's matrix with 2 s cells, and
/// a request-count run with standalone prefill).
const SIM_GOLDENS: [&str; 3] = ["sim-burst", "sim-seed-args", "sim-request-count"];

#[test]
fn golden_files_read_back_and_write_the_same_bytes() {
    let names = documents().into_iter().map(|(n, _)| n).chain(SIM_GOLDENS);
    for name in names {
        let path = golden(name);
        let text = std::fs::read_to_string(&path).expect("golden file");
        let doc = ResultDocument::from_json_str(&text)
            .unwrap_or_else(|e| panic!("{name}: does not load: {e}"));
        let again = doc.to_json_string();
        if again != text {
            let actual = std::env::temp_dir().join(format!("ldb-reread-{name}.json"));
            std::fs::write(&actual, &again).expect("write actual");
            panic!(
                "{name}: read and written again, the bytes changed ({})",
                actual.display()
            );
        }
    }
}
