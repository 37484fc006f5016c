//! Realistic workloads (docs/workloads.md): a request trace replayed at its
//! own times (`--trace`) or multi-turn sessions (`--sessions`), each one
//! open-loop phase whose latencies count from the scheduled send time.
//! The prompts the tool builds are described as segments, so the run knows
//! the prefix-cache hit rate it intended and sets it beside the server's.

mod agent;
mod check;
pub mod config;
pub mod corpus;
mod dispatch;
mod first_request;
mod progress;
pub mod router;
mod sessions;
mod tool_loop;
mod trace;
mod trace_sessions;
mod trace_shards;

pub use config::{ReplayConfig, SessionConfig, ToolLoop, TraceConfig, TraceScan, scan};
pub use corpus::{PromptCorpus, load as load_corpus};
pub(crate) use sessions::part::{check as check_session_part, run as run_session_part};

use ldb_client::discovery::Discovery;
use ldb_core::live::{LiveEvent, Phase};
use ldb_core::prompt::SizeModel;
use ldb_core::trace::prompt::WORD_BYTES;

use crate::ctx::RunCtx;
use crate::prompts::PromptPlan;
use crate::recorder::Recorder;

/// The prompt plan of a replay: nothing sized, so no calibration probe is
/// sent (a replay builds its own prompts from words of one token each,
/// sized by the chat template's measured tokens; `TraceResult::lengths`
/// says how exact they came out). The metadata then records the words'
/// model: 4 characters per token, `estimate`, no context sized. Shared
/// prefixes of the matrix (`--shared-prefix-tokens`) do not apply.
pub(crate) fn unsized_prompts() -> PromptPlan {
    PromptPlan {
        run_id: crate::prompts::run_id(),
        by_ctx: Default::default(),
        model: SizeModel {
            chars_per_token: WORD_BYTES as f64,
            overhead_tokens: 0.0,
        },
        targeting: "estimate",
        notes: Vec::new(),
        shared: None,
    }
}

/// Runs the configured replay and records its result.
pub(crate) async fn run(rc: &RunCtx, disc: &Discovery, rec: &mut Recorder) {
    let Some(cfg) = rc.cfg.replay.clone() else {
        return;
    };
    rc.live.send(LiveEvent::PhaseChanged(Phase::Burst));
    match cfg {
        ReplayConfig::Trace(t) if t.sessions => {
            let r = sessions::run_trace(rc, disc, &t).await;
            rec.session_result(r);
        }
        ReplayConfig::Trace(t) => {
            let r = trace::replay(rc, disc, &t).await;
            rec.trace_result(r);
        }
        ReplayConfig::Sessions(s) => {
            let r = sessions::run(rc, disc, &s).await;
            rec.session_result(r);
        }
    }
}
