//! Shared prefixes (`--shared-prefix-tokens N --prefix-groups G`): G system
//! prompts of about N tokens each, placed before the uniqueness nonce, so a
//! cell can measure decode (and prefill of the rest) behind a warm system
//! prompt. Group g's text opens with its own name, so groups share nothing
//! but the chat template; the rest of every prompt is as without a prefix.

use std::time::Duration;

use ldb_core::prompt::{Message, messages, nonce, shared_prefix, with_system};

use crate::ctx::RunCtx;
use crate::prompts::{PromptPlan, real_prompt_tokens};

/// The run's shared prefixes.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedPrefixes {
    /// One system prompt per group.
    pub texts: Vec<String>,
    /// Tokens asked (`--shared-prefix-tokens`).
    pub asked: u64,
    /// Tokens of one prefix as the server counted them, when it could.
    pub counted: Option<u64>,
}

impl SharedPrefixes {
    /// The texts for `groups` groups of `asked` tokens at `chars_per_token`.
    pub fn new(run_id: &str, asked: u64, groups: u32, chars_per_token: f64) -> Self {
        let chars = (asked as f64 * chars_per_token).round() as usize;
        SharedPrefixes {
            texts: (0..groups.max(1))
                .map(|g| shared_prefix(run_id, g, chars))
                .collect(),
            asked,
            counted: None,
        }
    }

    /// Tokens of one prefix: counted, else as asked.
    pub fn tokens(&self) -> u64 {
        self.counted.unwrap_or(self.asked)
    }

    /// `msgs` behind group `g`'s prefix (groups taken in turn).
    pub fn wrap(&self, g: u32, msgs: Vec<Message>) -> Vec<Message> {
        match self.texts.get(g as usize % self.texts.len().max(1)) {
            Some(t) => with_system(t, msgs),
            None => msgs,
        }
    }
}

impl PromptPlan {
    /// Messages for `ctx` with a nonce tagged `tag`, behind shared prefix
    /// `group` when the run has shared prefixes.
    pub fn messages_in_group(&self, ctx: u64, tag: &str, group: u32) -> Vec<Message> {
        let chars = self.by_ctx.get(&ctx).map_or(0, |p| p.padding_chars);
        let m = messages(&nonce(&self.run_id, tag), chars);
        match &self.shared {
            Some(s) => s.wrap(group, m),
            None => m,
        }
    }

    /// Prompt tokens of context `ctx`: the server's count, else the context
    /// (else, for the bare prompt, the size model's framing plus the prefix).
    pub fn prompt_tokens(&self, ctx: u64) -> u64 {
        let shared = self.shared.as_ref().map_or(0, SharedPrefixes::tokens);
        match self.by_ctx.get(&ctx).and_then(|p| p.tokens) {
            Some(t) => t,
            None if ctx > 0 => ctx,
            None => self.model.overhead_tokens.max(1.0).round() as u64 + shared,
        }
    }
}

/// Sends one `max_tokens = 1` request per group, so every shared prefix is
/// cached before a scout is timed as the prefill of the rest (at the start
/// of the run and after every reset). Fed to the intended cache.
pub(crate) async fn warm_shared_prefixes(
    rc: &RunCtx,
    prompts: &PromptPlan,
    round: u64,
    groups: std::ops::Range<u32>,
) {
    let Some(shared) = &prompts.shared else {
        return;
    };
    for g in groups.take_while(|&g| (g as usize) < shared.texts.len()) {
        let tag = format!("warm-prefix-{round}-g{g}");
        let msgs = prompts.messages_in_group(0, &tag, g);
        rc.prefix.admit_messages(0, &msgs);
        let warm = real_prompt_tokens(&rc.http, &rc.model, &msgs);
        if tokio::time::timeout(Duration::from_secs(600), warm)
            .await
            .ok()
            .flatten()
            .is_none()
        {
            rc.live.event(format!(
                "shared prefix {g}: the warm-up request failed (its cells may prefill it)"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_wrap_in_turn_and_tokens_prefer_the_count() {
        let mut s = SharedPrefixes::new("run", 100, 2, 4.0);
        assert_eq!(s.texts.len(), 2);
        assert_eq!(s.texts[0].len(), 400);
        let m = messages("[n]", 0);
        assert_eq!(s.wrap(2, m.clone())[0].content, s.texts[0]);
        assert_eq!(s.wrap(3, m)[0].content, s.texts[1]);
        assert_eq!(s.tokens(), 100);
        s.counted = Some(97);
        assert_eq!(s.tokens(), 97);
    }
}
