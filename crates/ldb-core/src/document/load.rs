//! Reading a result file back into the typed model.
//!
//! The derived `Deserialize` does the field work; this adds the checks a
//! reader needs first, so that every bad input gets a one-line reason instead
//! of a serde message about some field deep inside: not JSON at all, cut
//! short, JSON of some other kind, or a layout newer than this build knows.

use serde_json::Value;
use serde_json::error::Category;

use super::ResultDocument;
use crate::result::SCHEMA_VERSION;

/// Why a result file could not be read. Every message is one line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read (I/O; the message comes from the caller).
    #[error("cannot read it: {0}")]
    Unreadable(String),
    /// The text is not JSON.
    #[error("not JSON: {0}")]
    NotJson(String),
    /// The JSON stops before its end: a file cut short while being copied or written.
    #[error("the JSON ends early, the file looks truncated ({0})")]
    Truncated(String),
    /// Valid JSON, but not a result file.
    #[error("JSON, but not an llm-decode-bench result: no `{0}` at the top level")]
    NotAResult(&'static str),
    /// Written by a newer build with a layout this one does not know.
    #[error(
        "metadata.schema_version is {found}, newer than this build reads ({supported}); \
         read it with a newer llm-decode-bench"
    )]
    TooNew {
        /// Version in the file.
        found: u64,
        /// Newest version this build reads.
        supported: u32,
    },
    /// A result file whose content does not fit the model (wrong type, unknown word).
    #[error("a result file, but a value does not fit: {0}")]
    Invalid(String),
    /// One of the above, for a named file.
    #[error("{path}: {problem}")]
    InFile {
        /// The file as given.
        path: String,
        /// What is wrong with it.
        problem: Box<LoadError>,
    },
}

impl LoadError {
    /// The same error, naming the file it came from.
    pub fn in_file(self, path: impl Into<String>) -> LoadError {
        LoadError::InFile {
            path: path.into(),
            problem: Box::new(self),
        }
    }
}

/// serde_json messages are one line already; this keeps it so whatever they say.
fn one_line(e: &serde_json::Error) -> String {
    e.to_string().replace(['\n', '\r'], " ")
}

impl ResultDocument {
    /// Reads a result file's text: this tool's files of any schema version up
    /// to [`SCHEMA_VERSION`], and the reference tool's (keys it lacks take
    /// their defaults). The derived tables (`summary_table*`) are not read;
    /// they are rebuilt from the cells on write.
    pub fn from_json_str(text: &str) -> Result<ResultDocument, LoadError> {
        let value: Value = serde_json::from_str(text).map_err(|e| match e.classify() {
            Category::Eof => LoadError::Truncated(one_line(&e)),
            _ => LoadError::NotJson(one_line(&e)),
        })?;
        for key in ["metadata", "results"] {
            if value.get(key).is_none() {
                return Err(LoadError::NotAResult(key));
            }
        }
        let found = value["metadata"]["schema_version"].as_u64().unwrap_or(0);
        if found > u64::from(SCHEMA_VERSION) {
            return Err(LoadError::TooNew {
                found,
                supported: SCHEMA_VERSION,
            });
        }
        // Parsed again from the text (not from `value`) so that a misfit
        // value is reported with its line and column.
        let mut doc: ResultDocument =
            serde_json::from_str(text).map_err(|e| LoadError::Invalid(one_line(&e)))?;
        upgrade(&mut doc, found);
        Ok(doc)
    }
}

/// Reads keys whose meaning changed in the layout the file was written in
/// (`found`) with their current meaning, so `report` and `compare` never
/// set an old value against a new one of another quantity.
fn upgrade(doc: &mut ResultDocument, found: u64) {
    if found < 2 {
        // Schema 1's `achieved_rate` was the send rate: it is the
        // `offered_rate_measured` of schema 2, and the completion rate
        // that key now holds was not recorded.
        for r in &mut doc.rate_results {
            if r.offered_rate_measured.is_none() {
                r.offered_rate_measured = r.achieved_rate.take();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A schema-1 file's `achieved_rate` was the send rate: it reads back
    /// as `offered_rate_measured`, and the completion rate as unknown.
    #[test]
    fn an_older_achieved_rate_reads_as_the_send_rate() {
        let file = |version: u32| {
            format!(
                r#"{{"metadata": {{"tool": "llm-decode-bench", "schema_version": {version}}},
                "results": [], "rate_results": [{{"request_rate": 10.0, "achieved_rate": 9.5}}]}}"#
            )
        };
        let old = ResultDocument::from_json_str(&file(1)).expect("schema 1");
        assert_eq!(old.rate_results[0].achieved_rate, None);
        assert_eq!(old.rate_results[0].offered_rate_measured, Some(9.5));
        let new = ResultDocument::from_json_str(&file(2)).expect("schema 2");
        assert_eq!(new.rate_results[0].achieved_rate, Some(9.5));
        assert_eq!(new.rate_results[0].offered_rate_measured, None);
    }
}
