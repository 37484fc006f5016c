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
        serde_json::from_str(text).map_err(|e| LoadError::Invalid(one_line(&e)))
    }
}
