//! `--trace FILE --trace-sessions`: the rows of our JSONL that share a
//! `session_id` are the turns of one conversation, in file order. Each turn
//! sends the whole conversation so far (the assistant's real replies
//! included) plus the row's new message: its `prompt` or `messages` as
//! written, or built text of its `input_tokens` (the new message's tokens;
//! the first turn's include the chat template). A turn is due at its trace
//! time, but never before the previous reply ended: the trace's gaps
//! between turns are the think time, less the reply's own time; a row with
//! its own `think_time`/`tool_time` is due that long after the previous
//! reply instead. An agent row's messages say what becomes of the previous
//! reply (`agent.rs`: a recorded reply stands in for it). A session's
//! first turn with `hash_ids` is built from those blocks, as a replay's
//! prompt is, so sessions share what their first prompts share. A row
//! without a session id is a conversation of one turn. The window's rows
//! are held in memory, grouped by session (the turns of a session cannot be
//! sent before the replies before them). A turn whose own new tokens and
//! output exceed the model's context is cut, with the rest of its
//! conversation, before any text of it is built (issue 34).

use std::collections::{HashMap, HashSet};

use ldb_core::trace::prompt::PromptBuilder;
use ldb_core::trace::{TracePrompt, TraceRequest};

use super::agent::{self, Opening};
use super::config::{TraceConfig, requests};
use super::sessions::{Due, Shared, Turn, message_text, user_text};
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
    let speed = Some(cfg.options.speed)
        .filter(|s| *s > 0.0 && s.is_finite())
        .unwrap_or(1.0);
    // A first turn with hash_ids is built block by block, as a replay's
    // prompt is: conversations whose first prompts share blocks share them.
    let mut blocks = PromptBuilder::new(sh.salt, sh.template)
        .with_source(sh.source.clone())
        .with_trailing_template(sh.trailing);
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
        literal |= r.prompt.literal();
        plans[at].push(planned_turn(sh, &mut blocks, &r, (at as u64, turn), speed));
    }
    if let Some(note) = cut.note(context) {
        rc.live.event(note);
    }
    (plans, literal)
}

/// Row `r` as turn `turn` of conversation `at`: due at its trace time, or
/// the row's own think and tool time after the previous reply (trace
/// seconds: `speed` scales them as it scales the timestamps); its new
/// messages (a prompt or messages as written, built text of `input_tokens`
/// or of a message's `tokens`; a first turn's `input_tokens` with
/// `hash_ids` from those blocks, by `blocks`) and their built tokens.
fn planned_turn(
    sh: &Shared,
    blocks: &mut PromptBuilder,
    r: &TraceRequest,
    (at, turn): (u64, u32),
    speed: f64,
) -> Turn {
    let mut shared = None;
    let (adds, built_tokens) = match &r.prompt {
        TracePrompt::Tokens(n) if turn == 1 && !r.hash_ids.is_empty() => {
            let b = blocks.blocks(*n, &r.hash_ids);
            shared = Some(b.segments);
            (super::check::user(b.text), *n)
        }
        TracePrompt::Tokens(n) => {
            let words = if turn == 1 {
                n.saturating_sub(sh.template).max(1)
            } else {
                *n
            };
            (super::check::user(user_text(sh, at, turn, words)), *n)
        }
        TracePrompt::Text(t) => (super::check::user(t.clone()), 0),
        TracePrompt::Messages(m) => {
            let adds = agent::messages(m, |i, n| message_text(sh, (at, turn, i as u64), n));
            (adds, r.prompt.built_tokens())
        }
    };
    let a = r.agent.as_deref();
    let wait = a
        .and_then(|a| a.wait())
        .filter(|_| turn > 1)
        .map(|w| w / speed);
    let opening = match &r.prompt {
        TracePrompt::Messages(m) => Opening::of(m),
        _ => Opening::New,
    };
    Turn {
        due: wait.map_or(Due::At(r.at_s), Due::AfterReply),
        tool_result: adds.iter().any(|m| m.role == "tool"),
        adds,
        built_tokens,
        max_tokens: r.output_tokens,
        opening,
        tools: agent::tools(r),
        tool_wait: a.and_then(|a| a.tool_time).unwrap_or(0.0) / speed,
        blocks: shared,
        tool_result_text: None,
    }
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
    fn drops(&mut self, at: usize, r: &TraceRequest, context: u64) -> bool {
        let too_long =
            context > 0 && r.prompt.built_tokens().saturating_add(r.output_tokens) > context;
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
