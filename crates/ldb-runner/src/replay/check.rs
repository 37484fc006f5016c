//! Counting built prompts with the server's tokenizer: the chat template's
//! own tokens (so a prompt's text can be sized to the trace's length) and,
//! on a sample of a few hundred prompts, how far the promise that word
//! counts add up holds (`LengthCheck`).

use std::time::Duration;

use ldb_client::Http;
use ldb_client::discovery::{Discovery, TokenizeKind};
use ldb_core::prompt::Message;
use ldb_core::trace::prompt::block_words;
use serde_json::{Value, json};

use crate::prompts::real_prompt_tokens;

/// The server's chat `/tokenize` answer for `msgs` where it has one, else
/// (llama.cpp's raw `/tokenize`, none) `None`.
async fn tokenize_chat(http: &Http, disc: &Discovery, msgs: &[Message]) -> Option<Value> {
    if disc.tokenize != TokenizeKind::Chat {
        return None;
    }
    let body = json!({"model": disc.model, "messages": msgs});
    let (status, v) = http
        .post_json("/tokenize", &body, Duration::from_secs(60))
        .await
        .ok()?;
    (status == 200).then_some(v)
}

/// Prompt tokens of `msgs` by the server's chat `/tokenize`.
pub(super) async fn count_chat(http: &Http, disc: &Discovery, msgs: &[Message]) -> Option<u64> {
    tokenize_chat(http, disc, msgs)
        .await?
        .get("count")
        .and_then(Value::as_u64)
}

/// Token ids of `msgs` by the server's chat `/tokenize`, when it lists them.
async fn chat_ids(http: &Http, disc: &Discovery, msgs: &[Message]) -> Option<Vec<u64>> {
    tokenize_chat(http, disc, msgs)
        .await?
        .get("tokens")?
        .as_array()?
        .iter()
        .map(Value::as_u64)
        .collect()
}

/// The chat template's tokens around one user message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Template {
    /// All of them.
    pub tokens: u64,
    /// Those after the message's text (the assistant turn's opening).
    pub trailing: u64,
    /// Those before the text, which every prompt opening with a user
    /// message shares (the template's default system prompt, the user
    /// turn's opening): counted as shared by the intended cache. Known only
    /// from the token ids `/tokenize` lists, else 0.
    pub head: u64,
}

/// One user message.
pub(super) fn user(text: String) -> Vec<Message> {
    vec![Message {
        role: "user",
        content: text,
        tool: None,
    }]
}

/// The chat template's tokens around one user message: the count of a
/// 64-word message minus 64 (by `/tokenize`, else by a `max_tokens=1`
/// request's usage; 0 when the server cannot say); those after the text are
/// the count less the leading tokens two such messages that differ at their
/// first word have in common (by the token ids `/tokenize` lists, else none
/// are taken to trail).
pub(super) async fn template_tokens(
    http: &Http,
    disc: &Discovery,
    salt: u64,
) -> (Template, &'static str) {
    const WORDS: u64 = 64;
    let message = |key: u64| {
        let mut text = String::new();
        block_words(key, salt, WORDS as usize, &mut text);
        user(text)
    };
    let (a, b) = (
        message(salt ^ 0x5eed),
        message((salt ^ 0x5eed).wrapping_add(1)),
    );
    let Some(ids) = chat_ids(http, disc, &a).await else {
        let (tokens, how) = match count_chat(http, disc, &a).await {
            Some(n) => (n.saturating_sub(WORDS), "tokenize"),
            None => match real_prompt_tokens(http, &disc.model, &a).await {
                Some(n) => (n.saturating_sub(WORDS), "usage"),
                None => (0, "none"),
            },
        };
        return (
            Template {
                tokens,
                trailing: 0,
                head: 0,
            },
            how,
        );
    };
    let tokens = (ids.len() as u64).saturating_sub(WORDS);
    let (leading, head) = match chat_ids(http, disc, &b).await {
        Some(other) => {
            let common = common_prefix(&ids, &other).min(tokens);
            (common, common)
        }
        None => (tokens, 0),
    };
    let trailing = tokens - leading;
    (
        Template {
            tokens,
            trailing,
            head,
        },
        "tokenize",
    )
}

/// Leading ids two token lists have in common.
fn common_prefix(a: &[u64], b: &[u64]) -> u64 {
    a.iter().zip(b).take_while(|(x, y)| x == y).count() as u64
}

/// |counted − intended| over `(prompt, intended tokens)` pairs: how many
/// were counted, the largest and the mean error.
pub(super) fn errors(pairs: &[(u64, u64)]) -> (u64, Option<u64>, Option<f64>) {
    let n = pairs.len() as u64;
    let errs: Vec<u64> = pairs.iter().map(|(c, want)| c.abs_diff(*want)).collect();
    (
        n,
        errs.iter().copied().max(),
        (n > 0).then(|| errs.iter().sum::<u64>() as f64 / n as f64),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_common_prefix_stops_at_the_first_difference() {
        assert_eq!(super::common_prefix(&[1, 2, 3, 9], &[1, 2, 4, 9]), 2);
        assert_eq!(super::common_prefix(&[1, 2], &[1, 2, 3]), 2);
        assert_eq!(super::common_prefix(&[], &[1]), 0);
    }

    #[test]
    fn errors_are_absolute() {
        assert_eq!(
            super::errors(&[(10, 12), (15, 12), (12, 12)]),
            (3, Some(3), Some(5.0 / 3.0))
        );
        assert_eq!(super::errors(&[]), (0, None, None));
    }
}
