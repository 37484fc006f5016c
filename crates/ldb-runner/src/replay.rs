//! Realistic workloads (docs/workloads.md): a request trace replayed at its
//! own times (`--trace`) or multi-turn sessions (`--sessions`), each one
//! open-loop phase whose latencies count from the scheduled send time.
//! The prompts the tool builds are described as segments, so the run knows
//! the prefix-cache hit rate it intended and sets it beside the server's.

mod check;
pub mod config;
pub mod corpus;
mod dispatch;
mod progress;
mod sessions;
mod trace;
mod trace_sessions;

pub use config::{ReplayConfig, SessionConfig, TraceConfig, TraceScan, scan};
pub use corpus::{PromptCorpus, load as load_corpus};

use ldb_client::discovery::Discovery;
use ldb_core::live::{LiveEvent, Phase};

use crate::ctx::RunCtx;
use crate::recorder::Recorder;

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
