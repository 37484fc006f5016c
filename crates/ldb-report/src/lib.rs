//! Final console report, atomic JSON writer and result-file reader of
//! llm-decode-bench.
//!
//! This crate renders and stores: it takes a finished (or partial)
//! [`ResultDocument`](ldb_core::document::ResultDocument) and writes text to any
//! [`std::io::Write`], or the JSON file to disk atomically; and it reads such a
//! file back ([`load_result_file`]).
//!
//! ```no_run
//! use ldb_core::document::ResultDocument;
//! use ldb_report::text::{TextOptions, render};
//!
//! let doc = ResultDocument::default();
//! let opts = TextOptions { width: 120, show_capacity_limited_values: false, color: false };
//! render(&doc, &opts, &mut std::io::stdout().lock())?;
//! ldb_report::json::write_atomic("benchmark_results.json".as_ref(), &doc)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! See also: `docs/report.md` (every table, column and marker),
//! `ldb-core` (the result model), `ldb-tui` (the live dashboard).

pub mod compare;
pub mod cstats;
pub mod csv;
mod error;
pub mod export;
pub mod fabric_only;
#[cfg(test)]
mod hostile_numbers_tests;
#[cfg(test)]
mod hostile_tests;
pub mod html;
pub mod json;
pub mod jsonl;
mod load;
pub mod markdown;
pub mod paired;
pub mod prefix_flags;
#[cfg(test)]
mod replay_fixture;
pub mod text;
pub mod timeline;

pub use error::{ReportError, Result};
pub use load::load_result_file;
