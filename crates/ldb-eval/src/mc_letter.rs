//! `dataset_mc_letter`: the multiple-choice scorer of the MMLU-Pro and GPQA
//! profiles. It looks for the chosen letter in order of how deliberate the
//! model's statement is:
//!
//! 1. an `answer … X` tag on the final line (`Answer: C`, `**Answer:** (C)`,
//!    `The answer is C.`);
//! 2. a final line that is a bare letter (`C`, `(C)`, `**C**`);
//! 3. the last such tag anywhere in the content.
//!
//! Only the item's valid letters count (an MMLU-Pro item may have fewer than
//! ten options), so `Answer: J` on a four-option item is not an answer.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;

use super::numeric::no_answer;
use super::score::{Output, Score, ScoreLabel, Scorer, last_non_empty_line};
use super::task::TaskItem;

/// "answer", optionally "is"/":", decorations, then one capital letter
/// standing alone. Only the word is case-insensitive: a lower-case `a` after
/// "answer is" is an article far more often than an option.
static TAG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i:answer)(?:\s+(?i:is))?\s*[:：]?[\s*_(\[]*(?:(?i:option)\s+)?([A-Z])(?:[^A-Za-z0-9]|$)")
        .expect("valid")
});

/// Letters `A`..`J`: the most options any supported dataset has.
pub const MAX_OPTIONS: usize = 10;

/// The letter of option `index` (0 → `A`).
pub fn option_letter(index: usize) -> char {
    (b'A' + index as u8) as char
}

/// Judges a multiple-choice answer against the item's expected letter.
#[derive(Debug, Clone, Default)]
pub struct McLetterScorer {
    /// Options per item id; items not listed accept `A`..`J`.
    pub options_per_item: HashMap<String, usize>,
}

impl McLetterScorer {
    fn valid(&self, item: &TaskItem, letter: char) -> bool {
        let n = item
            .item_id
            .as_ref()
            .and_then(|id| self.options_per_item.get(id))
            .copied()
            .unwrap_or(MAX_OPTIONS);
        letter.is_ascii_uppercase() && ((letter as u8 - b'A') as usize) < n
    }

    /// The letter the output commits to, if any.
    pub fn extract(&self, item: &TaskItem, output: &Output<'_>) -> Option<char> {
        let body = if output.content.trim().is_empty() {
            output.full_text()
        } else {
            output.content.to_owned()
        };
        let last = last_non_empty_line(&body);
        let tag_in = |text: &str| {
            TAG.captures_iter(text)
                .filter_map(|c| c[1].chars().next())
                .filter(|&l| self.valid(item, l))
                .last()
        };
        if let Some(l) = tag_in(last) {
            return Some(l);
        }
        let bare: String = last
            .chars()
            .filter(|c| !matches!(c, '*' | '_' | '(' | ')' | '[' | ']' | '.' | ' ' | '`'))
            .collect();
        if bare.len() == 1
            && let Some(l) = bare.chars().next()
            && self.valid(item, l)
        {
            return Some(l);
        }
        tag_in(&body)
    }
}

impl Scorer for McLetterScorer {
    fn name(&self) -> &str {
        "dataset_mc_letter"
    }

    fn describe(&self) -> String {
        "dataset_mc_letter: `answer X` on the final line, else a bare letter line, else the last answer tag in the content"
            .to_owned()
    }

    fn score(&self, item: &TaskItem, output: &Output<'_>) -> Score {
        let Some(expected) = item
            .expected_answer
            .as_deref()
            .map(str::trim)
            .filter(|e| e.len() == 1)
        else {
            return Score {
                label: ScoreLabel::Fail,
                detail: "no expected answer for this item".to_owned(),
                parsed_answer: None,
            };
        };
        match self.extract(item, output) {
            Some(l) if expected.eq_ignore_ascii_case(&l.to_string()) => Score {
                label: ScoreLabel::Pass,
                detail: String::new(),
                parsed_answer: Some(l.to_string()),
            },
            Some(l) => Score {
                label: ScoreLabel::Fail,
                detail: format!("expected {expected}, got {l}"),
                parsed_answer: Some(l.to_string()),
            },
            None => no_answer(output),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(expected: &str) -> TaskItem {
        TaskItem {
            item_id: Some("gpqa-rec1".into()),
            category: None,
            prompt: String::new(),
            expected_answer: Some(expected.into()),
        }
    }

    fn four() -> McLetterScorer {
        McLetterScorer {
            options_per_item: [("gpqa-rec1".to_owned(), 4)].into(),
        }
    }

    fn got(s: &McLetterScorer, content: &str) -> Option<char> {
        let o = Output {
            reasoning: "",
            content,
            finish_reason: Some("stop"),
        };
        s.extract(&item("B"), &o)
    }

    #[test]
    fn the_final_line_tag_wins() {
        let s = four();
        assert_eq!(got(&s, "Answer: A looks tempting\n\nAnswer: C"), Some('C'));
        assert_eq!(got(&s, "...\n**Answer:** (D)"), Some('D'));
        assert_eq!(got(&s, "So the answer is B."), Some('B'));
        assert_eq!(got(&s, "Final answer: option C"), Some('C'));
    }

    #[test]
    fn a_bare_letter_line_then_any_tag() {
        let s = four();
        assert_eq!(got(&s, "Reasoning...\n\n**(B)**"), Some('B'));
        assert_eq!(
            got(&s, "The answer is C, because...\nHope this helps!"),
            Some('C')
        );
        // "a" as an article is not an option
        assert_eq!(got(&s, "The answer is a bit subtle"), None);
    }

    #[test]
    fn letters_outside_the_item_do_not_count() {
        let s = four();
        // J is not an option of a four-option item; the earlier tag is used
        assert_eq!(got(&s, "Answer: B\nAnswer: J"), Some('B'));
        // without a per-item count, A..J are valid
        let open = McLetterScorer::default();
        assert_eq!(got(&open, "Answer: J"), Some('J'));
        assert_eq!(got(&open, "Answer: K"), None);
    }

    #[test]
    fn answer_in_reasoning_only_counts_without_content() {
        let s = four();
        let o = Output {
            reasoning: "Answer: B",
            content: "I am not sure.",
            finish_reason: Some("stop"),
        };
        let r = s.score(&item("B"), &o);
        assert_eq!(
            (r.label, r.detail.as_str()),
            (ScoreLabel::Fail, "unparseable")
        );
        let o = Output {
            reasoning: "thinking\nAnswer: B",
            content: "",
            finish_reason: Some("stop"),
        };
        assert!(s.score(&item("B"), &o).correct());
    }

    #[test]
    fn wrong_truncated_and_expected_detail() {
        let s = four();
        let o = Output {
            reasoning: "",
            content: "Answer: D",
            finish_reason: Some("stop"),
        };
        let r = s.score(&item("B"), &o);
        assert_eq!(r.detail, "expected B, got D");
        let o = Output {
            reasoning: "option A seems",
            content: "",
            finish_reason: Some("length"),
        };
        assert_eq!(s.score(&item("B"), &o).label, ScoreLabel::Truncated);
    }
}
