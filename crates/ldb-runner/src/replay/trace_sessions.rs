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
//! sent before the replies before them).

use std::collections::HashMap;

use ldb_core::prompt::Message;
use ldb_core::trace::TracePrompt;

use super::config::{TraceConfig, requests};
use super::sessions::{Due, Shared, Turn, user_text};
use crate::ctx::RunCtx;

/// The turns of each conversation of the trace, and whether any row was a
/// literal prompt (then no intended hit rate: the tool did not build it).
pub(super) fn plans(rc: &RunCtx, sh: &Shared, cfg: &TraceConfig) -> (Vec<Vec<Turn>>, bool) {
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
        });
    }
    (plans, literal)
}
