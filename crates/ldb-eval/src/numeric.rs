//! Numeric answers: finding the last number a model wrote, and the two
//! scorers built on it (`numeric_exact` for fixed-answer profiles,
//! `dataset_gsm8k` for the GSM8K dataset).
//!
//! Models decorate numbers (`$1,234.50`, `45%`, `\boxed{72}`, `**48**`), so
//! the extractor strips the decorations instead of demanding a format.

use std::sync::LazyLock;

use regex::Regex;

use super::score::{Output, Score, ScoreLabel, Scorer, last_non_empty_line};
use super::task::TaskItem;

/// A signed decimal with optional thousands separators. The sign must not
/// follow a digit or letter, so the range `3-4` reads as 3 and 4, not 3, -4.
static NUMBER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[^0-9A-Za-z.])(-?)((?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)")
        .expect("valid")
});

/// `\boxed{…}` (and `\fbox{…}`): when present, the boxed text is the answer.
static BOXED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\\(?:boxed|fbox)\s*\{([^{}]*)\}").expect("valid"));

/// The last number in `text` as written (commas removed) and as a value.
/// A `\boxed{}` expression takes precedence over numbers after it (a model
/// often restates the working after the box).
pub fn last_number(text: &str) -> Option<(String, f64)> {
    if let Some(boxed) = BOXED.captures_iter(text).last()
        && let Some(n) = last_plain_number(&boxed[1])
    {
        return Some(n);
    }
    last_plain_number(text)
}

fn last_plain_number(text: &str) -> Option<(String, f64)> {
    let caps = NUMBER.captures_iter(text).last()?;
    let digits = caps[2].replace(',', "");
    let written = format!("{}{}", &caps[1], digits);
    let value: f64 = written.parse().ok()?;
    Some((normalise(&written), value))
}

/// `48.0` → `48`, `0.50` → `0.5`: the spelling used in details and JSON.
fn normalise(written: &str) -> String {
    let mut s = written.to_owned();
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    if s.starts_with('.') {
        s.insert(0, '0');
    }
    if s.starts_with("-.") {
        s.insert(1, '0');
    }
    if s == "-0" { "0".to_owned() } else { s }
}

/// Parse an expected answer (`"72"`, `"1,000"`, `"$5"`) into a value.
pub fn parse_expected(expected: &str) -> Option<f64> {
    last_number(expected).map(|(_, v)| v)
}

fn verdict(expected: f64, got: (String, f64), tolerance: f64, expected_text: &str) -> Score {
    let (written, value) = got;
    if (value - expected).abs() <= tolerance {
        Score {
            label: ScoreLabel::Pass,
            detail: String::new(),
            parsed_answer: Some(written),
        }
    } else {
        Score {
            label: ScoreLabel::Fail,
            detail: format!("expected {expected_text}, got {written}"),
            parsed_answer: Some(written),
        }
    }
}

fn no_expected() -> Score {
    Score {
        label: ScoreLabel::Fail,
        detail: "no expected answer for this item".to_owned(),
        parsed_answer: None,
    }
}

/// The dataset scorers' verdict when nothing could be parsed: a capped
/// output is `truncated` (the model ran out of room, not out of ideas).
pub fn no_answer(output: &Output<'_>) -> Score {
    if output.hit_max_tokens() {
        Score {
            label: ScoreLabel::Truncated,
            detail: "no answer: hit max_tokens limit".to_owned(),
            parsed_answer: None,
        }
    } else {
        Score {
            label: ScoreLabel::Fail,
            detail: "unparseable".to_owned(),
            parsed_answer: None,
        }
    }
}

/// `numeric_exact`: the last number of the chosen text must equal the
/// expected value (the profile's, or the item's when the profile has none).
#[derive(Debug, Clone)]
pub struct NumericExactScorer {
    /// Fixed expected answer; `None` reads `TaskItem::expected_answer`.
    pub expected: Option<String>,
    /// Where the answer is read from.
    pub source: super::score::ScoreSource,
    /// Absolute tolerance (0 for integers).
    pub tolerance: f64,
}

impl Scorer for NumericExactScorer {
    fn name(&self) -> &str {
        "numeric_exact"
    }

    fn describe(&self) -> String {
        let expected = self.expected.as_deref().unwrap_or("per item");
        format!(
            "numeric_exact: last number in {} = {expected}",
            self.source.as_str()
        )
    }

    fn score(&self, item: &TaskItem, output: &Output<'_>) -> Score {
        let Some(expected_text) = self.expected.as_deref().or(item.expected_answer.as_deref())
        else {
            return no_expected();
        };
        let Some(expected) = parse_expected(expected_text) else {
            return no_expected();
        };
        match last_number(&output.text_for(self.source)) {
            Some(got) => verdict(expected, got, self.tolerance, expected_text),
            None => Score {
                label: ScoreLabel::Fail,
                detail: "unparseable".to_owned(),
                parsed_answer: None,
            },
        }
    }
}

/// `dataset_gsm8k`: the last number on the final line of the content, else
/// the last number anywhere in the content (else in the reasoning when the
/// content is empty); absolute tolerance 1e-4.
#[derive(Debug, Clone, Default)]
pub struct Gsm8kScorer;

/// Tolerance of the GSM8K comparison (answers are integers; this only
/// absorbs `18.00001`-style float printing).
pub const GSM8K_TOLERANCE: f64 = 1e-4;

impl Scorer for Gsm8kScorer {
    fn name(&self) -> &str {
        "dataset_gsm8k"
    }

    fn describe(&self) -> String {
        "dataset_gsm8k: last number on the final line, else in the content (abs tol 1e-4)"
            .to_owned()
    }

    fn score(&self, item: &TaskItem, output: &Output<'_>) -> Score {
        let Some(expected_text) = item.expected_answer.as_deref() else {
            return no_expected();
        };
        let Some(expected) = parse_expected(expected_text) else {
            return no_expected();
        };
        let body = if output.content.trim().is_empty() {
            output.full_text()
        } else {
            output.content.to_owned()
        };
        let got = last_number(last_non_empty_line(&body)).or_else(|| last_number(&body));
        match got {
            Some(got) => verdict(expected, got, GSM8K_TOLERANCE, expected_text),
            None => no_answer(output),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::score::ScoreSource;
    use super::*;

    fn item(expected: &str) -> TaskItem {
        TaskItem {
            item_id: Some("gsm8k-0001".into()),
            category: None,
            prompt: String::new(),
            expected_answer: Some(expected.into()),
        }
    }

    fn out<'a>(reasoning: &'a str, content: &'a str, finish: &'a str) -> Output<'a> {
        Output {
            reasoning,
            content,
            finish_reason: Some(finish),
        }
    }

    #[test]
    fn last_number_tolerates_decorations() {
        let n = |t: &str| last_number(t).map(|(s, _)| s);
        assert_eq!(n("The total is $1,234.50."), Some("1234.5".into()));
        assert_eq!(n("about 45% of them"), Some("45".into()));
        assert_eq!(n(r"so \boxed{72} is it, from 3 steps"), Some("72".into()));
        assert_eq!(n("**-18**"), Some("-18".into()));
        assert_eq!(n("pages 3-4"), Some("4".into()));
        assert_eq!(n("x = .5"), Some("0.5".into()));
        assert_eq!(n("Answer: 48.0"), Some("48".into()));
        assert_eq!(n("no digits here"), None);
        // a thousands group must have three digits: `1,23` is two numbers
        assert_eq!(n("1,23"), Some("23".into()));
        // digits inside an identifier are not an answer
        assert_eq!(n("see step2"), None);
    }

    #[test]
    fn gsm8k_reads_the_final_line_first() {
        let s = Gsm8kScorer;
        // the working mentions 17 last in the content; the final line says 18
        let o = out("", "3 + 17 = 20, minus 2\n\n18", "stop");
        let r = s.score(&item("18"), &o);
        assert_eq!(r.label, ScoreLabel::Pass, "{r:?}");
        assert_eq!(r.parsed_answer.as_deref(), Some("18"));
        // the final line has no number: last number in the content
        let o = out("", "The answer is 1,000 dollars\n\nDone.", "stop");
        assert_eq!(s.score(&item("1000"), &o).label, ScoreLabel::Pass);
    }

    #[test]
    fn gsm8k_wrong_and_tolerance() {
        let s = Gsm8kScorer;
        let r = s.score(&item("18"), &out("", "Final: $17", "stop"));
        assert_eq!(r.label, ScoreLabel::Fail);
        assert_eq!(r.detail, "expected 18, got 17");
        assert!(s.score(&item("18"), &out("", "18.00001", "stop")).correct());
        assert!(!s.score(&item("18"), &out("", "18.001", "stop")).correct());
        assert!(
            s.score(&item("5"), &out("", r"\boxed{5\%}", "stop"))
                .correct()
        );
    }

    #[test]
    fn gsm8k_ignores_reasoning_when_there_is_content() {
        let s = Gsm8kScorer;
        // right number only in the reasoning, content says something else
        let r = s.score(&item("18"), &out("it is 18", "I think 19", "stop"));
        assert_eq!(r.label, ScoreLabel::Fail);
        // empty content (reasoning model cut off mid-thought but wrote a number)
        let r = s.score(&item("18"), &out("so 18", "", "stop"));
        assert_eq!(r.label, ScoreLabel::Pass);
    }

    #[test]
    fn gsm8k_truncated_versus_unparseable() {
        let s = Gsm8kScorer;
        let r = s.score(&item("18"), &out("let me think about", "", "length"));
        assert_eq!(r.label, ScoreLabel::Truncated);
        assert_eq!(r.detail, "no answer: hit max_tokens limit");
        let r = s.score(&item("18"), &out("", "I cannot say.", "stop"));
        assert_eq!(r.label, ScoreLabel::Fail);
        assert_eq!(r.detail, "unparseable");
        // a capped output that did write a number is judged on it
        let r = s.score(&item("18"), &out("", "18", "length"));
        assert_eq!(r.label, ScoreLabel::Pass);
    }

    #[test]
    fn numeric_exact_uses_the_fixed_expected_value() {
        let s = NumericExactScorer {
            expected: Some("48".into()),
            source: ScoreSource::FinalAnswer,
            tolerance: 0.0,
        };
        let blank = TaskItem {
            item_id: None,
            category: None,
            prompt: String::new(),
            expected_answer: None,
        };
        assert!(
            s.score(&blank, &out("", "lots of 47s\nAnswer: 48", "stop"))
                .correct()
        );
        let r = s.score(&blank, &out("", "Answer: 47", "stop"));
        assert_eq!(r.detail, "expected 48, got 47");
        let r = s.score(&blank, &out("", "no idea", "length"));
        assert_eq!(
            (r.label, r.detail.as_str()),
            (ScoreLabel::Fail, "unparseable")
        );
    }
}
