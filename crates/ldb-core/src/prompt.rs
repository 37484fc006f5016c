//! Prompts: padding text, chat layout, nonces, and prompt-size fitting.
//!
//! Every prompt starts with a nonce `[ldb <run>-<tag>]` so that no two cells or
//! runs share a prefix-cache entry by accident, and so that the nonce sits
//! before any shared text even on token-level radix caches. All streams of one
//! cell send the same prompt on purpose: after the scout, their prefill comes
//! from the prefix cache and the cell measures decode.

use serde::Serialize;

/// Padding sentences, cycled in order. Written for this tool; the topic is
/// dull on purpose (river geology) so models do not latch onto instructions.
const PADDING: [&str; 20] = [
    "Rivers carve their valleys slowly, moving sand and gravel a little farther downstream with every flood season.",
    "A meander forms where the outer bank erodes faster than the inner bank, so the channel drifts sideways over decades.",
    "Oxbow lakes are the abandoned loops of meanders, cut off when the river finds a shorter path during high water.",
    "Alluvial fans spread where a steep mountain stream reaches a flat plain and suddenly loses the energy to carry its load.",
    "Braided channels appear in rivers with abundant coarse sediment and strongly varying discharge through the year.",
    "The long profile of a mature river is concave, steep near the source and almost level close to its mouth.",
    "Terraces along a valley record older floodplains that were left high and dry when the river cut down again.",
    "Deltas grow outward where sediment arrives faster than waves and tides can redistribute it along the coast.",
    "Groundwater feeds many rivers during dry months, keeping a base flow long after the last rainfall has passed.",
    "Gauging stations measure water level continuously and convert it to discharge with a carefully surveyed rating curve.",
    "Levees built by natural floods are highest next to the channel and slope gently away toward the back swamps.",
    "Bedrock rivers lower their beds by abrasion, plucking of jointed blocks and the slow dissolution of soluble rock.",
    "Waterfalls retreat upstream as the hard cap rock is undercut and collapses into the plunge pool below it.",
    "Sediment budgets compare what enters a river reach with what leaves it, revealing zones of storage and erosion.",
    "Floodplain soils are often fertile because each overbank flow leaves a thin layer of fine silt and organic matter.",
    "Dams trap most of the sediment upstream, so the river below them tends to scour its bed and banks for years.",
    "Channel width adjusts to the dominant discharge, a flow that moves the most sediment over the long run.",
    "Ice jams in cold climates can raise water levels suddenly and push blocks of ice far onto the surrounding land.",
    "Estuaries mix fresh river water with sea water, and the salt wedge moves up and down with each tide.",
    "Old maps and aerial photographs let researchers trace how a channel has migrated across its valley floor.",
];

/// The generation request: asks for a long, open-ended text so that
/// `max_tokens` is reached even when the server honours end-of-sequence.
pub const GENERATION_PROMPT: &str = "Write a very long and detailed encyclopedia article about the history of astronomy, \
from the earliest sky watchers to modern space telescopes. Cover every period, the people involved, \
their instruments and their methods, and keep going in full detail; do not summarize or stop early.";

/// One chat message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: &'static str,
    /// Text.
    pub content: String,
    /// The tool-call part of a message of the sessions' tool loop (absent
    /// from every other message, so their JSON is unchanged).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolPart>,
}

/// The keys the chat API adds to an assistant message that called a tool
/// (`tool_calls`) and to the `tool` message that answers it (`tool_call_id`),
/// and the reasoning an agent passes back with an assistant message
/// (`reasoning_content`, replayed from a trace).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ToolPart {
    /// The assistant's calls, in the API's shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<serde_json::Value>,
    /// The call a `tool` message answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// An assistant message's reasoning, sent back with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
}

/// Padding text of exactly `chars` characters (cut at a character boundary).
pub fn padding(chars: usize) -> String {
    let mut out = String::with_capacity(chars + 128);
    let mut i = 0;
    while out.len() < chars {
        out.push_str(PADDING[i % PADDING.len()]);
        out.push(' ');
        i += 1;
    }
    // The sentences are ASCII, so byte length equals character count.
    out.truncate(chars);
    out
}

/// The messages of a prompt with `padding_chars` characters of padding.
///
/// With no padding, one user message (nonce + generation prompt). With
/// padding: a user message holding the document, an assistant
/// acknowledgement, and the generation prompt as the last user message.
pub fn messages(nonce: &str, padding_chars: usize) -> Vec<Message> {
    if padding_chars == 0 {
        return vec![Message {
            role: "user",
            content: format!("{nonce} {GENERATION_PROMPT}"),
            tool: None,
        }];
    }
    vec![
        Message {
            role: "user",
            content: format!(
                "{nonce} Read the reference document below; a question about something else follows it.\n\n\
                 <document>\n{}\n</document>",
                padding(padding_chars)
            ),
            tool: None,
        },
        Message {
            role: "assistant",
            content: "I have read the document. Please go ahead with the question.".to_string(),
            tool: None,
        },
        Message {
            role: "user",
            content: GENERATION_PROMPT.to_string(),
            tool: None,
        },
    ]
}

/// The nonce for `tag` in run `run_id`.
pub fn nonce(run_id: &str, tag: &str) -> String {
    format!("[ldb {run_id}-{tag}]")
}

/// The same prompt under a fresh uniqueness prefix: `~N` opens the nonce
/// that opens the first message after any shared system prompt
/// (`[ldb ~1 run-ctx8192] …`), so it shares with any earlier prompt no more
/// than the shared prefix, the chat template and `[ldb `, and a prefix cache
/// cannot serve the rest. Three or four characters more: about one token. A
/// prompt without our nonce gets one in front.
pub fn renewed(msgs: &[Message], n: u32) -> Vec<Message> {
    let mut out = msgs.to_vec();
    if let Some(first) = out.iter_mut().find(|m| m.role != "system") {
        first.content = match first.content.strip_prefix("[ldb ") {
            Some(rest) => format!("[ldb ~{n} {rest}"),
            None => format!("[ldb ~{n}] {}", first.content),
        };
    }
    out
}

/// The text of shared prefix `group` of run `run_id` (`--shared-prefix-tokens`):
/// a system prompt of about `chars` characters whose opening names the run
/// and the group, so two groups differ from their first tokens on and no
/// other run shares them.
pub fn shared_prefix(run_id: &str, group: u32, chars: usize) -> String {
    let head = format!("[ldb-shared {run_id}-g{group}] ");
    let body = chars.saturating_sub(head.len());
    format!("{head}{}", padding(body))
}

/// `msgs` behind a system message holding `prefix` (a shared prefix), which
/// then comes before the uniqueness nonce.
pub fn with_system(prefix: &str, msgs: Vec<Message>) -> Vec<Message> {
    let mut out = Vec::with_capacity(msgs.len() + 1);
    out.push(Message {
        role: "system",
        content: prefix.to_string(),
        tool: None,
    });
    out.extend(msgs);
    out
}

/// Linear prompt-size model: `tokens = overhead + chars / chars_per_token`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SizeModel {
    /// Padding characters per token.
    pub chars_per_token: f64,
    /// Tokens the prompt has with no padding beyond the framing.
    pub overhead_tokens: f64,
}

impl SizeModel {
    /// Fit from two measurements `(padding_chars, prompt_tokens)` (two-point
    /// calibration; separates the fixed overhead from the per-character rate).
    pub fn fit(a: (usize, u64), b: (usize, u64)) -> Option<SizeModel> {
        let (c0, t0) = (a.0 as f64, a.1 as f64);
        let (c1, t1) = (b.0 as f64, b.1 as f64);
        if c1 <= c0 || t1 <= t0 {
            return None;
        }
        let cpt = (c1 - c0) / (t1 - t0);
        Some(SizeModel {
            chars_per_token: cpt,
            overhead_tokens: t0 - c0 / cpt,
        })
    }

    /// Padding characters that should give `target` prompt tokens.
    pub fn chars_for(&self, target: u64) -> usize {
        let padding_tokens = (target as f64 - self.overhead_tokens).max(0.0);
        (padding_tokens * self.chars_per_token).round() as usize
    }

    /// Next guess after measuring `tokens` for `chars` (secant through the model's slope).
    pub fn refine(&self, chars: usize, tokens: u64, target: u64) -> usize {
        let err = target as f64 - tokens as f64;
        ((chars as f64 + err * self.chars_per_token).round().max(0.0)) as usize
    }
}

/// Acceptable distance between a prompt's token count and its target.
pub fn tolerance(target: u64) -> u64 {
    (target / 500).max(8)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_renewed_prompt_differs_right_after_the_nonce_opening() {
        let m = messages(&nonce("r1", "ctx8192"), 40);
        let r = renewed(&m, 2);
        assert!(
            r[0].content.starts_with("[ldb ~2 r1-ctx8192] "),
            "{}",
            r[0].content
        );
        assert_eq!(r[0].content.replacen("~2 ", "", 1), m[0].content);
        assert_eq!(&r[1..], &m[1..]);
        assert_ne!(renewed(&m, 1), r);
        let bare = renewed(&messages("x", 0), 1);
        assert!(bare[0].content.starts_with("[ldb ~1] x "));
        // A shared system prompt stays as it is: the nonce after it changes.
        let shared = with_system(&shared_prefix("r1", 1, 300), m.clone());
        let r = renewed(&shared, 2);
        assert_eq!(r[0], shared[0]);
        assert!(r[1].content.starts_with("[ldb ~2 r1-ctx8192] "));
    }

    #[test]
    fn shared_prefixes_have_their_length_and_differ_by_group_at_once() {
        let a = shared_prefix("run", 0, 1000);
        let b = shared_prefix("run", 1, 1000);
        assert_eq!((a.len(), b.len()), (1000, 1000));
        assert_ne!(a[..20], b[..20]);
        assert_eq!(a[20..], b[20..]);
        let m = with_system(&a, messages("[n]", 0));
        assert_eq!((m[0].role, m[1].role), ("system", "user"));
    }

    use super::*;

    #[test]
    fn padding_has_exact_length_and_nonce_leads() {
        assert_eq!(padding(0), "");
        assert_eq!(padding(10_007).len(), 10_007);
        let m = messages(&nonce("abc", "ctx8192"), 5000);
        assert_eq!(m.len(), 3);
        assert!(m[0].content.starts_with("[ldb abc-ctx8192] "));
        assert_eq!(messages("[n]", 0).len(), 1);
    }

    #[test]
    fn two_point_fit_separates_overhead() {
        // 4 chars/token, 90 tokens of framing.
        let m = SizeModel::fit((4000, 1090), (40_000, 10_090)).unwrap();
        assert!((m.chars_per_token - 4.0).abs() < 1e-9);
        assert!((m.overhead_tokens - 90.0).abs() < 1e-9);
        assert_eq!(m.chars_for(65_536), (65_536 - 90) * 4);
        assert_eq!(m.refine(1000, 240, 250), 1040);
        assert!(SizeModel::fit((10, 5), (10, 5)).is_none());
        assert_eq!(tolerance(65_536), 131);
    }
}
