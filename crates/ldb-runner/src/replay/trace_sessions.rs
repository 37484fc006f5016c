//! `--trace FILE --trace-sessions`: the rows of our JSONL that share a
//! `session_id` are the turns of one conversation, in file order. Each turn
//! sends the whole conversation so far (the assistant's real replies
//! included) plus the row's new message: its `prompt` or `messages` as
//! written, or built text of its `input_tokens` (the new message's tokens;
//! the first turn's include the chat template). A turn is due at its trace
//! time, but never before the previous reply ended: the trace's gaps
//! between turns are the think time, less the reply's own time. A row
//! without a session id is a conversation of one turn. The window's rows
//! are held in memory, grouped by session (the turns of a session cannot be
//! sent before the replies before them). A turn whose own new tokens and
//! output exceed the model's context is cut, with the rest of its
//! conversation, before any text of it is built (issue 34).

use std::collections::{HashMap, HashSet};

use ldb_core::prompt::Message;
use ldb_core::trace::TracePrompt;

use super::config::{TraceConfig, requests};
use super::sessions::{Due, Shared, Turn, user_text};
use crate::ctx::RunCtx;

/// The turns of each conversation of the trace, and whether any row was a
/// literal prompt (then no intended hit rate: the tool did not build it).
/// `context` is the model's context in tokens (0: unknown, nothing cut).
pub(super) fn plans(
    rc: &RunCtx,
    sh: &Shared,
    cfg: &TraceConfig,
    context: u64,
) -> (Vec<Vec<Turn>>, bool) {
    let rows = match requests(cfg) {
        Ok(r) => r,
        Err(e) => {
            rc.live.event(format!("trace sessions: {e}"));
            return (Vec::new(), false);
        }
    };
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut plans: Vec<Vec<Turn>> = Vec::new();
    let mut literal = false;
    let mut cut = Cut::default();
    for r in rows {
        let at = match &r.session_id {
            Some(id) => *index.entry(id.clone()).or_insert_with(|| {
                plans.push(Vec::new());
                plans.len() - 1
            }),
            None => {
                plans.push(Vec::new());
                plans.len() - 1
            }
        };
        if cut.drops(at, &r, context) {
            continue;
        }
        let turn = plans[at].len() as u32 + 1;
        let (adds, built_tokens) = match &r.prompt {
            TracePrompt::Tokens(n) => {
                let words = if turn == 1 {
                    n.saturating_sub(sh.template).max(1)
                } else {
                    *n
                };
                let text = user_text(sh, at as u64, turn, words);
                (super::check::user(text), *n)
            }
            TracePrompt::Text(t) => {
                literal = true;
                (super::check::user(t.clone()), 0)
            }
            TracePrompt::Messages(m) => {
                literal = true;
                let adds = m
                    .iter()
                    .map(|m| Message {
                        role: super::trace::role(&m.role),
                        content: m.content.clone(),
                        tool: None,
                    })
                    .collect();
                (adds, 0)
            }
        };
        plans[at].push(Turn {
            due: Due::At(r.at_s),
            adds,
            built_tokens,
            max_tokens: r.output_tokens,
            tool_result: None,
        });
    }
    if let Some(note) = cut.note(context) {
        rc.live.event(note);
    }
    (plans, literal)
}

/// The conversations cut at a turn that cannot fit the model's context.
#[derive(Default)]
struct Cut {
    sessions: HashSet<usize>,
    turns: u64,
    first_line: Option<u64>,
}

impl Cut {
    /// Whether row `r` of conversation `at` is left out: it or an earlier
    /// turn of its conversation asks for more than `context` tokens on its
    /// own (every later turn resends it, so none of them fits either).
    fn drops(&mut self, at: usize, r: &ldb_core::trace::TraceRequest, context: u64) -> bool {
        let too_long = context > 0
            && r.input_tokens()
                .is_some_and(|n| n.saturating_add(r.output_tokens) > context);
        if too_long && self.sessions.insert(at) {
            self.first_line.get_or_insert(r.line);
        }
        let drop = self.sessions.contains(&at);
        self.turns += u64::from(drop);
        drop
    }

    /// The event line saying what was cut, if anything.
    fn note(&self, context: u64) -> Option<String> {
        let line = self.first_line?;
        Some(format!(
            "trace sessions: {} turns of {} conversations not sent: a turn's new tokens and output exceed the model's context ({context} tokens), first at line {line}; the rest of each such conversation is cut",
            self.turns,
            self.sessions.len()
        ))
    }
}
