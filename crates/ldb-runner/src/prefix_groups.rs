//! Prefix groups in closed-loop cells: with `--prefix-groups G` the C
//! streams of a matrix cell (sustained or request-count) are spread over the
//! G shared prefixes, stream s behind prefix s mod G, each sending the
//! cell's prompt after its own group's system prompt. The scout measures
//! group 0's prompt; one unmeasured `max_tokens = 1` request per other group
//! warms that group's whole prompt, so every stream finds its prompt cached
//! as it would with one group, and the intended cache is fed what each
//! stream really sends (`PrefixState::repeat_last_scout`).

use bytes::Bytes;
use ldb_client::stream::StreamEnv;
use ldb_core::prompt::Message;
use tokio_util::sync::CancellationToken;

use crate::ctx::RunCtx;
use crate::prefix::PrefixState;
use crate::prompts::{BodyOptions, stream_body};

/// `msgs` behind each of the shared prefixes in `texts`, group 0 first;
/// `msgs` alone when it does not open with one of them (no shared prefix,
/// or a prompt the groups do not apply to).
pub fn variants(texts: &[String], msgs: &[Message]) -> Vec<Vec<Message>> {
    let opens_with_group = msgs
        .first()
        .is_some_and(|m| m.role == "system" && texts.contains(&m.content));
    if texts.len() < 2 || !opens_with_group {
        return vec![msgs.to_vec()];
    }
    texts
        .iter()
        .map(|t| {
            let mut v = msgs.to_vec();
            v[0].content.clone_from(t);
            v
        })
        .collect()
}

impl PrefixState {
    /// [`variants`] of `msgs` over the run's shared prefixes.
    pub(crate) fn group_variants(&self, msgs: &[Message]) -> Vec<Vec<Message>> {
        variants(&self.shared_texts(), msgs)
    }
}

/// The request body of each group (one without groups): stream s sends
/// body s mod the count.
pub(crate) fn group_bodies(rc: &RunCtx, msgs: &[Message], options: BodyOptions) -> Vec<Bytes> {
    rc.prefix
        .group_variants(msgs)
        .iter()
        .map(|m| stream_body(&rc.model, m, options.clone()))
        .collect()
}

/// [`warm_other_groups`] (at a context above 0, which has a scout), then
/// [`group_bodies`].
pub(crate) async fn warmed_bodies(
    rc: &RunCtx,
    ctx: u64,
    msgs: &[Message],
    skip: &CancellationToken,
    options: BodyOptions,
) -> Vec<Bytes> {
    if ctx > 0 {
        warm_other_groups(rc, ctx, msgs, skip).await;
    }
    group_bodies(rc, msgs, options)
}

/// After the scout: one `max_tokens = 1` request per group other than 0
/// with the cell's prompt behind that group's prefix, fed to the intended
/// cache, so the streams of every group find their prompt cached.
pub(crate) async fn warm_other_groups(
    rc: &RunCtx,
    ctx: u64,
    msgs: &[Message],
    skip: &CancellationToken,
) {
    let env = StreamEnv {
        cancel: skip.clone(),
        first_token_timeout: Some(crate::cell_io::scout_limit(rc, ctx)),
        ..StreamEnv::new(rc.http.clone(), rc.clock)
    };
    for (g, v) in rc.prefix.group_variants(msgs).iter().enumerate().skip(1) {
        if skip.is_cancelled() {
            return;
        }
        rc.sent_prompts.mark(v);
        rc.prefix.admit_messages(ctx, v);
        let p = crate::prefill::probe(&env, &rc.model, v, skip).await;
        if let Some(e) = p.error {
            rc.live.event(format!(
                "prefix group {g}: warming the cell's prompt failed ({e}); its streams prefill it"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldb_core::prompt::{messages, with_system};

    #[test]
    fn each_group_gets_the_same_rest_behind_its_own_prefix() {
        let texts = vec!["[g0] aaa".to_string(), "[g1] bbb".to_string()];
        let m = with_system(&texts[0], messages("[n]", 40));
        let v = variants(&texts, &m);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0], m);
        assert_eq!(v[1][0].content, texts[1]);
        assert_eq!(v[1][1..], m[1..]);
        // one group, or a prompt without a group's prefix: itself only
        assert_eq!(variants(&texts[..1], &m), vec![m.clone()]);
        let bare = messages("[n]", 40);
        assert_eq!(variants(&texts, &bare), vec![bare.clone()]);
    }
}
