//! Scripted answers (`output.answers`): which answer a chat request gets, and
//! which piece of its text each generated token writes.
//!
//! The answer's text is spread over its tokens so that every chunk keeps the
//! timing of a real stream: the first and the last token of each part
//! (reasoning, content) carry text, and a part with fewer characters than
//! tokens leaves some tokens textless (an empty delta; usage still counts
//! them, as when a token ends inside a multi-byte character).

use std::sync::atomic::Ordering;

use super::AppState;
use crate::engine::FinishReason;
use crate::scenario::ScriptedAnswer;

/// One request's scripted answer, ready to be written token by token.
#[derive(Debug, Clone)]
pub(crate) struct Script {
    reasoning: Vec<char>,
    content: Vec<char>,
    /// Tokens of the reasoning part.
    pub reasoning_tokens: u32,
    /// Tokens of the whole answer.
    pub total: u32,
    /// Report `length` where the engine says `stop`.
    pub as_length: bool,
}

impl Script {
    /// The next scripted answer in request order, if the scenario has any.
    pub(crate) fn next(st: &AppState) -> Option<Script> {
        let answers = &st.cfg.output.answers;
        if answers.is_empty() {
            return None;
        }
        let n = st.next_answer.fetch_add(1, Ordering::Relaxed);
        Some(Script::of(&answers[(n % answers.len() as u64) as usize]))
    }

    fn of(a: &ScriptedAnswer) -> Script {
        Script {
            reasoning: a.reasoning.chars().collect(),
            content: a.content.chars().collect(),
            reasoning_tokens: a.reasoning_share(),
            total: a.completion_tokens,
            as_length: a.finish_reason.as_deref() == Some("length"),
        }
    }

    /// The finish reason to report for the engine's `r`.
    pub(crate) fn finish(&self, r: FinishReason) -> FinishReason {
        if self.as_length && r == FinishReason::Stop {
            FinishReason::Length
        } else {
            r
        }
    }

    /// The text of token `i` (0-based over the whole answer).
    pub(crate) fn piece(&self, i: u32) -> String {
        let r = self.reasoning_tokens;
        if i < r {
            part_piece(&self.reasoning, r, i)
        } else {
            part_piece(&self.content, self.total.saturating_sub(r), i - r)
        }
    }

    /// The reasoning and content texts of the first `n` tokens.
    pub(crate) fn texts(&self, n: u32) -> (String, String) {
        let (mut reasoning, mut content) = (String::new(), String::new());
        for i in 0..n {
            if i < self.reasoning_tokens {
                reasoning.push_str(&self.piece(i));
            } else {
                content.push_str(&self.piece(i));
            }
        }
        (reasoning, content)
    }
}

/// Characters of `text` that token `j` of `tokens` writes: character `c`
/// goes to token `c · (tokens − 1) / (len − 1)`, which spreads the text from
/// the first token to the last.
fn part_piece(text: &[char], tokens: u32, j: u32) -> String {
    let len = text.len() as u64;
    let k = u64::from(tokens);
    if len == 0 || k == 0 {
        return String::new();
    }
    let slot = |c: u64| {
        if len == 1 {
            k - 1
        } else {
            c * (k - 1) / (len - 1)
        }
    };
    // the characters of slot j form one run: find its bounds
    let j = u64::from(j);
    let first = (0..len).find(|&c| slot(c) >= j).unwrap_or(len);
    text[first as usize..]
        .iter()
        .enumerate()
        .take_while(|&(off, _)| slot(first + off as u64) == j)
        .map(|(_, ch)| *ch)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(reasoning: &str, content: &str, n: u32) -> Script {
        Script::of(&ScriptedAnswer {
            content: content.into(),
            reasoning: reasoning.into(),
            completion_tokens: n,
            ..ScriptedAnswer::default()
        })
    }

    #[test]
    fn the_whole_text_is_written_once_over_the_tokens() {
        for n in [1, 2, 3, 7, 40, 200] {
            let s = script("think about it", "step\nANSWER: 42", n);
            let (r, c) = s.texts(n);
            if n >= 2 {
                assert_eq!(r, "think about it", "n={n}");
                assert_eq!(c, "step\nANSWER: 42", "n={n}");
            }
            assert_eq!(s.reasoning_tokens + (n - s.reasoning_tokens), n);
        }
    }

    #[test]
    fn the_first_and_last_token_of_a_part_carry_text() {
        let s = script("", "abc", 10);
        assert_eq!(s.reasoning_tokens, 0);
        assert_eq!(s.piece(0), "a");
        assert_eq!(s.piece(9), "c");
        assert_eq!(s.piece(5), "");
        let s = script("", "a long answer text", 3);
        assert!(!s.piece(0).is_empty() && !s.piece(2).is_empty());
    }

    #[test]
    fn length_replaces_stop_only_when_scripted() {
        let mut a = ScriptedAnswer {
            completion_tokens: 5,
            finish_reason: Some("length".into()),
            ..ScriptedAnswer::default()
        };
        assert_eq!(
            Script::of(&a).finish(FinishReason::Stop),
            FinishReason::Length
        );
        a.finish_reason = None;
        assert_eq!(
            Script::of(&a).finish(FinishReason::Stop),
            FinishReason::Stop
        );
    }
}
