//! Token-count values on the command line (`64k`, `1.5k`) and their display.

/// Why a token value or list did not parse.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TokenParseError {
    /// An element of a list was empty.
    #[error("empty value in list {0:?}")]
    Empty(String),
    /// Not a number with an optional `k` suffix.
    #[error("{0:?} is not a token count (use e.g. 8192, 64k or 1.5k)")]
    Invalid(String),
    /// A value appeared twice.
    #[error("duplicate value {0} in list")]
    Duplicate(String),
}

/// Parse `8192`, `64k`, `1.5K` (k = ×1024) into tokens.
pub fn parse_tokens(text: &str) -> Result<u64, TokenParseError> {
    let t = text.trim();
    let bad = || TokenParseError::Invalid(text.to_string());
    let (num, mult) = match t.strip_suffix(['k', 'K']) {
        Some(n) => (n, 1024.0),
        None => (t, 1.0),
    };
    if num.is_empty() || num.starts_with(['+', '-']) {
        return Err(bad());
    }
    let v: f64 = num.parse().map_err(|_| bad())?;
    let tokens = v * mult;
    if !tokens.is_finite() || tokens < 0.0 || tokens.fract() != 0.0 || tokens > 1e12 {
        return Err(bad());
    }
    Ok(tokens as u64)
}

/// Parse a comma list of token counts; rejects empty elements and duplicates.
pub fn parse_token_list(text: &str) -> Result<Vec<u64>, TokenParseError> {
    parse_list(text, parse_tokens)
}

/// Parse a comma list of positive integers (concurrency levels).
pub fn parse_count_list(text: &str) -> Result<Vec<u32>, TokenParseError> {
    parse_list(text, |s| {
        let t = s.trim();
        match t.parse::<u32>() {
            Ok(v) if v > 0 && !t.starts_with('+') => Ok(v),
            _ => Err(TokenParseError::Invalid(s.to_string())),
        }
    })
}

fn parse_list<T: PartialEq + Copy>(
    text: &str,
    one: impl Fn(&str) -> Result<T, TokenParseError>,
) -> Result<Vec<T>, TokenParseError> {
    let mut out = Vec::new();
    for part in text.split(',') {
        if part.trim().is_empty() {
            return Err(TokenParseError::Empty(text.to_string()));
        }
        let v = one(part)?;
        if out.contains(&v) {
            return Err(TokenParseError::Duplicate(part.trim().to_string()));
        }
        out.push(v);
    }
    Ok(out)
}

/// `0` → `0`, multiples of 1024 → `64k`, others as the number.
pub fn format_context(tokens: u64) -> String {
    if tokens >= 1024 && tokens.is_multiple_of(1024) {
        format!("{}k", tokens / 1024)
    } else if tokens >= 1024 {
        format!("{:.1}k", tokens as f64 / 1024.0)
    } else {
        tokens.to_string()
    }
}

/// `1234567` → `1,234,567`.
pub fn thousands(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_suffixes_and_rejects_garbage() {
        assert_eq!(parse_tokens("64k"), Ok(65536));
        assert_eq!(parse_tokens("1.5K"), Ok(1536));
        assert_eq!(parse_tokens(" 0 "), Ok(0));
        assert_eq!(parse_tokens("0.5k"), Ok(512));
        for bad in ["8x", "-1", "", "k", "1.2", "nan", "+4"] {
            assert!(parse_tokens(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_token_list("0,8k,64k"), Ok(vec![0, 8192, 65536]));
        assert!(matches!(
            parse_token_list("0,,8k"),
            Err(TokenParseError::Empty(_))
        ));
        assert!(matches!(
            parse_token_list("8k,8192"),
            Err(TokenParseError::Duplicate(_))
        ));
        assert_eq!(parse_count_list("1, 2,4"), Ok(vec![1, 2, 4]));
        assert!(parse_count_list("0").is_err());
        assert!(parse_count_list("-1").is_err());
        assert!(parse_count_list("").is_err());
    }

    #[test]
    fn formats_contexts_and_thousands() {
        assert_eq!(format_context(0), "0");
        assert_eq!(format_context(65536), "64k");
        assert_eq!(format_context(1000), "1000");
        assert_eq!(thousands(884736), "884,736");
        assert_eq!(thousands(12), "12");
    }
}
