//! The tokenizer model shared by `/tokenize`, `usage` and the prefix cache.
//!
//! Text of `c` characters is `⌈c / chars_per_token⌉` tokens (each token is a run of about
//! `chars_per_token` characters, and its id is a hash of those characters, so identical text
//! gives identical ids). A chat request adds `tokens_per_request` template tokens plus
//! `tokens_per_message` per message. A completion prompt adds one BOS token.

use crate::scenario::TokenizerConfig;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
const VOCAB: u64 = 151_000;
const BOS: u32 = 1;

fn fnv(h: u64, x: u64) -> u64 {
    (h ^ x).wrapping_mul(FNV_PRIME)
}

fn token_id(h: u64) -> u32 {
    // Ids 0..=99 are reserved for template tokens.
    (100 + h % VOCAB) as u32
}

/// One chat message as far as the tokenizer is concerned.
#[derive(Debug, Clone, Copy)]
pub struct ChatMessage<'a> {
    /// `system`, `user`, `assistant`, `tool`.
    pub role: &'a str,
    /// The message text (all text parts joined).
    pub content: &'a str,
}

/// Append the token ids of `text` to `out`.
pub fn encode_text(cfg: &TokenizerConfig, text: &str, out: &mut Vec<u32>) {
    let cpt = cfg.chars_per_token;
    let mut h = FNV_OFFSET;
    let mut in_token = 0u32;
    let mut chars = 0u64;
    let mut emitted = 0u64;
    // Token i covers characters floor(i·cpt) .. floor((i+1)·cpt), so c characters give
    // exactly ⌈c / cpt⌉ tokens.
    let mut boundary = cpt.floor();
    for c in text.chars() {
        h = fnv(h, u64::from(c));
        in_token += 1;
        chars += 1;
        if chars as f64 >= boundary {
            out.push(token_id(h));
            h = FNV_OFFSET;
            in_token = 0;
            emitted += 1;
            boundary = ((emitted + 1) as f64 * cpt).floor();
        }
    }
    if in_token > 0 {
        out.push(token_id(h));
    }
}

/// Number of tokens `encode_text` produces for `text`.
pub fn count_text(cfg: &TokenizerConfig, text: &str) -> u32 {
    let mut v = Vec::new();
    encode_text(cfg, text, &mut v);
    v.len() as u32
}

fn role_id(role: &str) -> u32 {
    match role {
        "system" => 10,
        "user" => 11,
        "assistant" => 12,
        "tool" => 13,
        _ => 14,
    }
}

/// Token ids of a chat request under the scenario's template model.
pub fn encode_chat(cfg: &TokenizerConfig, messages: &[ChatMessage<'_>]) -> Vec<u32> {
    let mut out = Vec::new();
    for i in 0..cfg.tokens_per_request {
        out.push(if i == 0 { BOS } else { 2 });
    }
    for m in messages {
        for i in 0..cfg.tokens_per_message {
            out.push(if i == 0 { role_id(m.role) } else { 3 });
        }
        encode_text(cfg, m.content, &mut out);
    }
    out
}

/// Token ids of a completion prompt (one BOS token, then the text).
pub fn encode_prompt(cfg: &TokenizerConfig, prompt: &str) -> Vec<u32> {
    let mut out = vec![BOS];
    encode_text(cfg, prompt, &mut out);
    out
}

/// Chained hashes of the full `block_tokens`-sized blocks of `tokens` (for the prefix cache).
pub fn block_hashes(tokens: &[u32], block_tokens: u32) -> Vec<u64> {
    let mut out = Vec::with_capacity(tokens.len() / block_tokens.max(1) as usize);
    let mut prev = FNV_OFFSET;
    for block in tokens.chunks_exact(block_tokens.max(1) as usize) {
        let mut h = fnv(prev, 0x9e37_79b9);
        for &t in block {
            h = fnv(h, u64::from(t));
        }
        out.push(h);
        prev = h;
    }
    out
}

/// The tokens a finished chat request leaves cached, as the next turn of
/// its conversation has them: the prompt, the assistant message's opening,
/// then the reply's text as the tokenizer encodes it, cut at `prompt +
/// generated − 1` tokens. Real engines keep the prompt and every generated
/// token but the last, whose KV is never computed (vLLM caches full blocks
/// as they fill, SGLang inserts the finished sequence into its radix tree:
/// recorded in `crates/ldb-client/tests/fixtures/cache-sharing/`); here the
/// reply's opening stands where the real template's generation prompt does,
/// so the count is the same.
pub fn finished_sequence(cfg: &TokenizerConfig, prompt: &[u32], generated: u32) -> Vec<u32> {
    let keep = prompt.len() + generated.saturating_sub(1) as usize;
    let mut out = prompt.to_vec();
    for i in 0..cfg.tokens_per_message {
        out.push(if i == 0 { role_id("assistant") } else { 3 });
    }
    let text: String = (0..generated).map(output_piece).collect();
    encode_text(cfg, &text, &mut out);
    out.truncate(keep);
    out
}

/// The text of generated token number `index` (0-based). Plain ASCII, no JSON escaping needed.
pub fn output_piece(index: u32) -> &'static str {
    const WORDS: [&str; 16] = [
        " The",
        " engine",
        " keeps",
        " every",
        " token",
        " in",
        " a",
        " block,",
        " and",
        " the",
        " scheduler",
        " admits",
        " new",
        " work",
        " each",
        " step.",
    ];
    WORDS[(index % 16) as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(cpt: f64) -> TokenizerConfig {
        TokenizerConfig {
            chars_per_token: cpt,
            tokens_per_request: 8,
            tokens_per_message: 4,
        }
    }

    #[test]
    fn a_finished_sequence_is_a_prefix_of_the_next_turn() {
        let c = cfg(4.0);
        let user = ChatMessage {
            role: "user",
            content: "what does the engine keep",
        };
        let prompt = encode_chat(&c, &[user]);
        let seq = finished_sequence(&c, &prompt, 20);
        assert_eq!(seq.len(), prompt.len() + 19);
        let reply: String = (0..20).map(output_piece).collect();
        let next = encode_chat(
            &c,
            &[
                user,
                ChatMessage {
                    role: "assistant",
                    content: &reply,
                },
                ChatMessage {
                    role: "user",
                    content: "go on",
                },
            ],
        );
        assert_eq!(next[..seq.len()], seq[..]);
        assert_eq!(finished_sequence(&c, &prompt, 0), prompt);
    }

    #[test]
    fn counts_follow_chars_per_token() {
        let c = cfg(4.0);
        assert_eq!(count_text(&c, ""), 0);
        assert_eq!(count_text(&c, "abcd"), 1);
        assert_eq!(count_text(&c, "abcde"), 2);
        assert_eq!(count_text(&c, &"x".repeat(4000)), 1000);
        let c = cfg(6.18);
        assert_eq!(count_text(&c, &"x".repeat(61_800)), 10_000);
        let c = cfg(3.8);
        assert_eq!(count_text(&c, "abcdefgh"), 3);
        for n in 0..200usize {
            let want = (n as f64 / 3.8).ceil() as u32;
            assert_eq!(count_text(&c, &"y".repeat(n)), want, "{n} chars");
        }
    }

    #[test]
    fn chat_overhead_and_determinism() {
        let c = cfg(4.0);
        let msgs = [ChatMessage {
            role: "user",
            content: "hello world!",
        }];
        let a = encode_chat(&c, &msgs);
        assert_eq!(a.len(), 8 + 4 + 3);
        assert_eq!(a, encode_chat(&c, &msgs));
    }

    #[test]
    fn block_hashes_share_prefix() {
        let a: Vec<u32> = (0..64).collect();
        let mut b = a.clone();
        b[40] = 999;
        let ha = block_hashes(&a, 16);
        let hb = block_hashes(&b, 16);
        assert_eq!(ha.len(), 4);
        assert_eq!(ha[..2], hb[..2]);
        assert_ne!(ha[2], hb[2]);
    }
}
