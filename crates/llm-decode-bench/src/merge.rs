//! `merge A.json B.json … --output M.json`: offline shards' records
//! (`--start-at`) combined cell by cell from their requests into one result
//! file, only where every shard's window is the same (docs/shards.md).

use std::path::PathBuf;

use clap::Args;
use ldb_report::export::{self, Run};
use ldb_runner::shard::offline::merged_document;
use ldb_runner::shard::record::read_record;

use crate::error::{AppError, exit};

/// `merge` flags.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The shards' record files (`OUTPUT.shard-I.json`), one per shard.
    #[arg(value_name = "SHARD", required = true, num_args = 1..)]
    pub records: Vec<PathBuf>,
    /// Where the merged result goes.
    #[arg(long, value_name = "FILE", default_value = "benchmark_results.json")]
    pub output: PathBuf,
}

/// Merge, or refuse with the reason (exit 2).
pub fn run(a: &MergeArgs) -> Result<i32, AppError> {
    let recs = a
        .records
        .iter()
        .map(|p| read_record(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(AppError::Config)?;
    let doc =
        merged_document(&recs).map_err(|e| AppError::Config(format!("merge refused: {e}")))?;
    ldb_report::json::prepare_output(&a.output).map_err(|e| AppError::Output(e.to_string()))?;
    let runs = [Run {
        name: "",
        doc: &doc,
    }];
    export::write_atomic(&export::Json, &runs, &a.output)
        .map_err(|e| AppError::Output(e.to_string()))?;
    println!(
        "merged {} shards, {} cells into {}",
        recs.len(),
        doc.results.len(),
        a.output.display()
    );
    // The windows agree by construction; only the hosts' own clock state
    // can say they were one time base (metadata.merge_clocks).
    if let Some(m) = doc
        .metadata
        .merge_clocks
        .as_ref()
        .filter(|m| !m.synchronised)
    {
        eprintln!(
            "WARNING: the shards' host clocks were not shown synchronised: {}",
            m.problem
        );
    }
    Ok(exit::OK)
}
