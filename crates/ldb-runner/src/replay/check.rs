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

/// Prompt tokens of `msgs` by the server: its chat `/tokenize` where it has
/// one, else (llama.cpp's raw `/tokenize`, none) `None`.
pub(super) async fn count_chat(http: &Http, disc: &Discovery, msgs: &[Message]) -> Option<u64> {
    if disc.tokenize != TokenizeKind::Chat {
        return None;
    }
    let body = json!({"model": disc.model, "messages": msgs});
    let (status, v) = http
        .post_json("/tokenize", &body, Duration::from_secs(60))
        .await
        .ok()?;
    (status == 200).then(|| v.get("count").and_then(Value::as_u64))?
}

/// One user message.
pub(super) fn user(text: String) -> Vec<Message> {
    vec![Message {
        role: "user",
        content: text,
    }]
}

/// The chat template's tokens around one user message: the count of a
/// 64-word message minus 64 (by `/tokenize`, else by a `max_tokens=1`
/// request's usage); 0 when the server cannot say.
pub(super) async fn template_tokens(
    http: &Http,
    disc: &Discovery,
    salt: u64,
) -> (u64, &'static str) {
    const WORDS: u64 = 64;
    let mut text = String::new();
    block_words(salt ^ 0x5eed, salt, WORDS as usize, &mut text);
    let msgs = user(text);
    if let Some(n) = count_chat(http, disc, &msgs).await {
        return (n.saturating_sub(WORDS), "tokenize");
    }
    match real_prompt_tokens(http, &disc.model, &msgs).await {
        Some(n) => (n.saturating_sub(WORDS), "usage"),
        None => (0, "none"),
    }
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
    fn errors_are_absolute() {
        assert_eq!(
            super::errors(&[(10, 12), (15, 12), (12, 12)]),
            (3, Some(3), Some(5.0 / 3.0))
        );
        assert_eq!(super::errors(&[]), (0, None, None));
    }
}
