//! The error every flag check returns: a leaf that imports nothing of the
//! crate, so the flag modules (`cli_*`) that report through it do not
//! reach back into the configuration they feed.

/// A configuration problem, one line naming the flag.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// `invalid FLAG: DETAIL`.
pub(crate) fn bad(flag: &str, detail: impl std::fmt::Display) -> ConfigError {
    ConfigError(format!("invalid {flag}: {detail}"))
}
