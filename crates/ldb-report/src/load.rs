//! Reading a result file from disk (the I/O edge of
//! [`ResultDocument::from_json_str`]).

use std::path::Path;

use ldb_core::document::{LoadError, ResultDocument};

/// Reads and parses the result file at `path`.
///
/// The error is one line that starts with the path, e.g.
/// `run.json: the JSON ends early, the file looks truncated (EOF while parsing
/// an object at line 812 column 0)`.
pub fn load_result_file(path: &Path) -> Result<ResultDocument, LoadError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| LoadError::Unreadable(e.to_string()).in_file(name.clone()))?;
    ResultDocument::from_json_str(&text).map_err(|e| e.in_file(name))
}
