//! The generic scorer: an output passes when a case-insensitive regular
//! expression matches the chosen text (`--completion-stats-correct-regex`).

use regex::{Regex, RegexBuilder};

use super::score::{Output, Score, ScoreLabel, ScoreSource, Scorer};
use super::task::TaskItem;

/// Pass when `pattern` matches the text `source` names.
#[derive(Debug, Clone)]
pub struct RegexScorer {
    pattern: Regex,
    source: ScoreSource,
}

impl RegexScorer {
    /// Compile `pattern` (case-insensitive); the error names the pattern.
    pub fn new(pattern: &str, source: ScoreSource) -> Result<RegexScorer, String> {
        let pattern = RegexBuilder::new(pattern)
            .case_insensitive(true)
            .build()
            .map_err(|e| {
                // the regex crate explains with a caret diagram over several
                // lines; a bad flag gets one line
                let why = e
                    .to_string()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ");
                format!("invalid --completion-stats-correct-regex {pattern:?}: {why}")
            })?;
        Ok(RegexScorer { pattern, source })
    }
}

impl Scorer for RegexScorer {
    fn name(&self) -> &str {
        "regex"
    }

    fn describe(&self) -> String {
        format!(
            "regex /{}/i on {}",
            self.pattern.as_str(),
            self.source.as_str()
        )
    }

    fn score(&self, _item: &TaskItem, output: &Output<'_>) -> Score {
        let text = output.text_for(self.source);
        match self.pattern.find(&text) {
            Some(m) => Score {
                label: ScoreLabel::Pass,
                detail: String::new(),
                parsed_answer: Some(m.as_str().to_owned()),
            },
            None => Score {
                label: ScoreLabel::Fail,
                detail: "no match".to_owned(),
                parsed_answer: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item() -> TaskItem {
        TaskItem {
            item_id: None,
            category: None,
            prompt: String::new(),
            expected_answer: None,
        }
    }

    #[test]
    fn matches_case_insensitively_on_the_final_line_only() {
        let s = RegexScorer::new(r"\bestonia\b", ScoreSource::FinalAnswer).unwrap();
        let out = Output {
            reasoning: "maybe Estonia",
            content: "Thinking of Estonia...\n\nThe answer: Latvia\n",
            finish_reason: Some("stop"),
        };
        assert_eq!(s.score(&item(), &out).label, ScoreLabel::Fail);
        let s = RegexScorer::new(r"\bestonia\b", ScoreSource::Output).unwrap();
        assert_eq!(s.score(&item(), &out).label, ScoreLabel::Pass);
    }

    #[test]
    fn final_answer_falls_back_to_reasoning_when_content_is_empty() {
        let out = Output {
            reasoning: "step\nANSWER: ESTONIA\n",
            content: "  \n",
            finish_reason: Some("length"),
        };
        assert_eq!(out.final_answer(), "ANSWER: ESTONIA");
        assert!(out.hit_max_tokens());
        let s = RegexScorer::new(r"estonia", ScoreSource::FinalAnswer).unwrap();
        assert!(s.score(&item(), &out).correct());
    }

    #[test]
    fn a_bad_pattern_is_a_one_line_error() {
        let e = RegexScorer::new("(", ScoreSource::Content).unwrap_err();
        assert!(e.starts_with("invalid --completion-stats-correct-regex"));
        assert!(!e.contains('\n'), "{e}");
    }
}
