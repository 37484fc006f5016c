//! Judging one output: the score labels, where the answer is read from, and
//! the scorer interface. Concrete scorers beyond the regex one live next to
//! this file.

use serde::{Deserialize, Serialize};

use super::task::TaskItem;

/// The verdict on one output (JSON `score_label`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScoreLabel {
    /// Right (pass/fail scorers).
    Pass,
    /// Exactly right (scorers with a "near" band).
    Exact,
    /// Within the scorer's tolerance band; counted as not correct.
    Near,
    /// Wrong or unparseable.
    Fail,
    /// No parseable answer because the output hit `max_tokens`.
    Truncated,
}

impl ScoreLabel {
    /// Whether this label counts as a correct answer.
    pub fn is_correct(self) -> bool {
        matches!(self, ScoreLabel::Pass | ScoreLabel::Exact)
    }

    /// The JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ScoreLabel::Pass => "pass",
            ScoreLabel::Exact => "exact",
            ScoreLabel::Near => "near",
            ScoreLabel::Fail => "fail",
            ScoreLabel::Truncated => "truncated",
        }
    }
}

/// A scorer's verdict with its evidence.
#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    /// The label.
    pub label: ScoreLabel,
    /// Why (`expected 48, got 47`, `unparseable`, …); may be empty.
    pub detail: String,
    /// The answer the scorer extracted, if any.
    pub parsed_answer: Option<String>,
}

impl Score {
    /// Whether the output counts as correct.
    pub fn correct(&self) -> bool {
        self.label.is_correct()
    }
}

/// Which text a scorer reads (`--completion-stats-score-source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScoreSource {
    /// The last non-empty line of the content (of the whole output when the
    /// content is empty).
    #[default]
    FinalAnswer,
    /// The whole content.
    Content,
    /// Reasoning and content together.
    Output,
}

impl ScoreSource {
    /// Parse the flag value.
    pub fn parse(s: &str) -> Option<ScoreSource> {
        match s {
            "final_answer" => Some(ScoreSource::FinalAnswer),
            "content" => Some(ScoreSource::Content),
            "output" => Some(ScoreSource::Output),
            _ => None,
        }
    }

    /// The flag / JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ScoreSource::FinalAnswer => "final_answer",
            ScoreSource::Content => "content",
            ScoreSource::Output => "output",
        }
    }
}

/// What a finished request produced, as the scorer sees it.
#[derive(Debug, Clone, Copy)]
pub struct Output<'a> {
    /// Concatenated `reasoning_content` / `reasoning` deltas.
    pub reasoning: &'a str,
    /// Concatenated `content` deltas.
    pub content: &'a str,
    /// The stream's `finish_reason`, if it sent one.
    pub finish_reason: Option<&'a str>,
}

impl Output<'_> {
    /// Reasoning then content, as one text.
    pub fn full_text(&self) -> String {
        if self.reasoning.is_empty() {
            self.content.to_owned()
        } else if self.content.is_empty() {
            self.reasoning.to_owned()
        } else {
            format!("{}\n{}", self.reasoning, self.content)
        }
    }

    /// The last non-empty line of the content, or of the whole output when
    /// the content is empty (JSON `final_answer`).
    pub fn final_answer(&self) -> String {
        let text = if self.content.trim().is_empty() {
            self.full_text()
        } else {
            self.content.to_owned()
        };
        last_non_empty_line(&text).to_owned()
    }

    /// Whether the output stopped at the token limit.
    pub fn hit_max_tokens(&self) -> bool {
        self.finish_reason == Some("length")
    }

    /// The text `source` names.
    pub fn text_for(&self, source: ScoreSource) -> String {
        match source {
            ScoreSource::FinalAnswer => self.final_answer(),
            ScoreSource::Content => self.content.to_owned(),
            ScoreSource::Output => self.full_text(),
        }
    }
}

/// The last line of `text` with something other than whitespace on it.
pub fn last_non_empty_line(text: &str) -> &str {
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

/// Judges outputs of one task. Implementations are pure and cheap: they run
/// on the benchmark's event loop after each request.
pub trait Scorer: Send + Sync {
    /// Scorer name for the JSON (`regex`, `numeric_exact`, `dataset_gsm8k`, …).
    fn name(&self) -> &str;
    /// One line for the report's "scoring" row.
    fn describe(&self) -> String;
    /// The verdict on `output` for `item`.
    fn score(&self, item: &TaskItem, output: &Output<'_>) -> Score;
}
