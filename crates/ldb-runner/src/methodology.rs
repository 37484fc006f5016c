//! The `methodology` block of the result file: how each number is made, in brief.

use ldb_core::result::PrefillMode;
use serde_json::{Value, json};

/// Static texts, with `present` flags filled by the caller.
pub fn methodology(
    prefill_mode: Option<PrefillMode>,
    prefill_present: bool,
    sustained_present: bool,
    burst_present: bool,
    spec_present: bool,
) -> Value {
    json!({
        "prefill": {
            "name": "Prefill",
            "present": prefill_present,
            "mode": prefill_mode.map_or("", PrefillMode::as_str),
            "formula": "prompt_tokens / TTFT",
            "notes": "Client-visible prefill: the max_tokens=1 scout that fills each context's prefix cache before its first decode cell is timed from send to first token, so queueing, HTTP and the first decode step are included. When the server exposes prefill counters, the same request is checked against them (server_validation), counted only when exactly one prefill happened between the two idle snapshots."
        },
        "sustained_decode": {
            "name": "Sustained Decode",
            "present": sustained_present,
            "formula": "output tokens arriving inside [ready, ready + duration] / duration",
            "notes": "C streams are kept busy (a finished request is replaced at once). The window opens when, averaged over 3 s, the server runs the C requests with an empty queue and the streams are producing (a stream briefly between two requests does not count against it), or early when the server plateaus below C (then the cell is capacity-limited). Tokens are counted by arrival time from per-chunk usage; the denominator is the whole wall window, so idle time anywhere in it lowers the rate. active_decode_tps divides by the time to the last token instead. Every chunk that belongs to the stream counts its usage increase, also when its text is empty (a token ending inside a multi-byte character). Latency covers the window only: TTFT and TTFO from requests whose first token arrived in it (null when none did), inter-token latency and token-gap percentiles from gaps between tokens inside it. A cell stays valid while at most max_error_rate of its requests fail. At window end every stream is closed and the next cell waits until the server has drained."
        },
        "burst_e2e_decode": {
            "name": "Burst / E2E Decode",
            "present": burst_present,
            "status": if burst_present { "present" } else { "not run; use --run-burst" },
            "formula": "sum(completion_tokens) / (last completion - first send)",
            "notes": "A fixed number of requests run to completion in a closed loop; includes admission, prefill and completion."
        },
        "acceptance_normalization": {
            "name": "Acceptance-normalized decode (MTP / speculative)",
            "present": spec_present,
            "formula": "engine_steps = drafts + max(0, output_tokens - (accepted + drafts)); accept_len_effective = output_tokens / engine_steps; steps_per_s = engine_steps / scrape_interval",
            "notes": "Counter deltas between the scrapes that bracket the window, summed over data-parallel engines. steps_per_s counts decoding steps per sequence (one target-model pass yields one step for every running sequence), independent of how much of the draft was accepted; server_spec_pos_accept gives the acceptance probability of each draft position. SGLang exposes no counters, so its values come from the accept-length gauge over the window."
        }
    })
}

/// `--duration auto`: how a sustained window may close early
/// (`ldb_core::autostop`; docs/methodology.md).
pub fn add_window_auto_stop(m: &mut Value, auto: &ldb_core::autostop::DurationAuto) {
    if let Value::Object(map) = m {
        map.insert(
            "window_auto_stop".into(),
            json!({
                "name": "Window closes when its rate is known (--duration auto)",
                "present": true,
                "method": auto.method,
                "formula": "batch rates r_i over 10 equal sub-windows; mean ± t(0.975, 9) · s/√10 · √((1+ρ)/(1−ρ)), ρ = lag-1 autocorrelation of r_i + (1+3ρ)/10, clamped to [0, 0.9]; drift = slope(r_i) · 10 / mean",
                "notes": format!(
                    "A sustained cell's window closes at the first tick after {} s where the 95 % interval of its client-counted rate is within ±{} % of the mean and the rate moved by at most that much across the window (drift); otherwise at duration_per_test, the maximum. stopped_by, rate_ci95 and rate_drift_pct record each cell's close. Open-loop and request-count cells keep their counts.",
                    auto.min_duration, auto.target_ci_pct
                )
            }),
        );
    }
}
