//! BurstGPT CSV rows: `Timestamp` (s), `Model`, `Request tokens`, `Response
//! tokens`, `Total tokens`, `Log Type`. Columns are found by the header's
//! names when the file has one, else taken in that order. Rows of failed
//! requests (0 response tokens) cannot be replayed and are filtered out.

use super::{TraceError, TraceOptions, TracePrompt, TraceRequest};

/// Where each column is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Columns {
    timestamp: usize,
    model: usize,
    request: usize,
    response: usize,
    log_type: Option<usize>,
}

impl Default for Columns {
    /// The published order.
    fn default() -> Self {
        Self {
            timestamp: 0,
            model: 1,
            request: 2,
            response: 3,
            log_type: Some(5),
        }
    }
}

fn fields(line: &str) -> Vec<&str> {
    line.split(',')
        .map(|f| f.trim().trim_matches('"'))
        .collect()
}

/// The columns named by a header line; `None` when the line is data (its
/// first field is a number).
pub fn header(line: &str) -> Option<Columns> {
    let f = fields(line);
    if f.first().is_some_and(|x| x.parse::<f64>().is_ok()) {
        return None;
    }
    let find = |name: &str| f.iter().position(|x| x.eq_ignore_ascii_case(name));
    let d = Columns::default();
    Some(Columns {
        timestamp: find("Timestamp").unwrap_or(d.timestamp),
        model: find("Model").unwrap_or(d.model),
        request: find("Request tokens").unwrap_or(d.request),
        response: find("Response tokens").unwrap_or(d.response),
        log_type: find("Log Type").or(d.log_type),
    })
}

/// One data row; `Ok(None)` when a filter (or a failed request) drops it.
pub fn parse(
    line_no: u64,
    line: &str,
    cols: &Columns,
    opts: &TraceOptions,
) -> Result<Option<TraceRequest>, TraceError> {
    let f = fields(line);
    let get = |i: usize, what: &str| {
        f.get(i)
            .copied()
            .ok_or_else(|| TraceError::at(line_no, format!("no {what} column")))
    };
    let number = |i: usize, what: &str| -> Result<f64, TraceError> {
        let s = get(i, what)?;
        s.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| TraceError::at(line_no, format!("{what} {s:?} is not a number")))
    };
    let at = number(cols.timestamp, "Timestamp")?;
    let input = number(cols.request, "Request tokens")? as u64;
    let output = number(cols.response, "Response tokens")? as u64;
    let model = get(cols.model, "Model")?;
    if opts.model.as_deref().is_some_and(|m| m != model) {
        return Ok(None);
    }
    if let Some(want) = &opts.log_type {
        let have = cols.log_type.and_then(|i| f.get(i).copied()).unwrap_or("");
        if have != want {
            return Ok(None);
        }
    }
    if output == 0 {
        return Ok(None);
    }
    if input == 0 {
        return Err(TraceError::at(line_no, "Request tokens must be at least 1"));
    }
    Ok(Some(TraceRequest {
        line: line_no,
        at_s: at,
        prompt: TracePrompt::Tokens(input),
        output_tokens: output,
        hash_ids: Vec::new(),
        session_id: None,
        agent: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_data_and_filters() {
        let h = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type";
        let cols = header(h).expect("a header");
        assert_eq!(cols, Columns::default());
        assert!(header("5,ChatGPT,472,18,490,Conversation log").is_none());
        let opts = TraceOptions::default();
        let r = parse(2, "5,ChatGPT,472,18,490,Conversation log", &cols, &opts)
            .unwrap()
            .unwrap();
        assert_eq!(
            (r.at_s, r.input_tokens(), r.output_tokens),
            (5.0, Some(472), 18)
        );
        // failed request: filtered, not an error
        assert_eq!(
            parse(3, "6,GPT-4,100,0,100,API log", &cols, &opts),
            Ok(None)
        );
        let gpt4 = TraceOptions {
            model: Some("GPT-4".into()),
            log_type: Some("API log".into()),
            ..TraceOptions::default()
        };
        assert_eq!(
            parse(4, "7,ChatGPT,10,5,15,API log", &cols, &gpt4),
            Ok(None)
        );
        assert_eq!(
            parse(4, "7,GPT-4,10,5,15,Conversation log", &cols, &gpt4),
            Ok(None)
        );
        assert!(
            parse(4, "7,GPT-4,10,5,15,API log", &cols, &gpt4)
                .unwrap()
                .is_some()
        );
        let e = parse(9, "x,GPT-4,10,5", &cols, &opts).unwrap_err();
        assert_eq!(e.line, 9);
        // columns by name in another order
        let other = header("Model,Timestamp,Response tokens,Request tokens").unwrap();
        let r = parse(2, "GPT-4,3.5,9,40", &other, &opts).unwrap().unwrap();
        assert_eq!(
            (r.at_s, r.input_tokens(), r.output_tokens),
            (3.5, Some(40), 9)
        );
    }
}
