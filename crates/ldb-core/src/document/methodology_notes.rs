//! The texts of the `methodology` block and the one builder that picks them
//! from a run's facts. The runner only says what the run did
//! ([`MethodologyFacts`]); the words live here, beside the result model, so
//! every writer of a result file (the run, the offline shard merge, the
//! coding-peak probe) says the same thing.

use super::methodology::{Methodology, MethodologyNote};
use crate::autostop::DurationAuto;
use crate::result::PrefillMode;

/// What a run did, as far as the notes depend on it.
#[derive(Debug, Clone, Copy, Default)]
pub struct MethodologyFacts<'a> {
    /// The prefill mode, when known.
    pub prefill_mode: Option<PrefillMode>,
    /// The file has prefill rows.
    pub prefill_present: bool,
    /// The file has sustained (duration-mode) decode cells.
    pub sustained_present: bool,
    /// The file has burst or request-count cells.
    pub burst_present: bool,
    /// A cell measured speculative decoding steps.
    pub spec_present: bool,
    /// `--duration auto`: the rule that may close a window early.
    pub duration_auto: Option<&'a DurationAuto>,
}

impl Methodology {
    /// The notes of a matrix run with these facts.
    pub fn of_run(f: &MethodologyFacts<'_>) -> Methodology {
        Methodology {
            prefill: Some(prefill_note(f)),
            sustained_decode: Some(sustained_note(f.sustained_present)),
            burst_e2e_decode: Some(burst_note(f.burst_present)),
            acceptance_normalization: Some(acceptance_note(f.spec_present)),
            window_auto_stop: f.duration_auto.map(window_auto_stop_note),
            ..Methodology::default()
        }
    }
}

fn note(name: &str, present: bool, formula: &str, notes: impl Into<String>) -> MethodologyNote {
    MethodologyNote {
        name: name.into(),
        present,
        formula: formula.into(),
        notes: notes.into(),
        ..MethodologyNote::default()
    }
}

fn prefill_note(f: &MethodologyFacts<'_>) -> MethodologyNote {
    MethodologyNote {
        mode: Some(f.prefill_mode.map_or("", PrefillMode::as_str).into()),
        ..note(
            "Prefill",
            f.prefill_present,
            "prompt_tokens / TTFT",
            "Client-visible prefill: the max_tokens=1 scout that fills each context's prefix cache before its first decode cell is timed from send to first token, so queueing, HTTP and the first decode step are included. When the server exposes prefill counters, the same request is checked against them (server_validation), counted only when exactly one prefill happened between the two idle snapshots.",
        )
    }
}

fn sustained_note(present: bool) -> MethodologyNote {
    note(
        "Sustained Decode",
        present,
        "output tokens arriving inside [ready, ready + duration] / duration",
        "C streams are kept busy (a finished request is replaced at once). The window opens when, averaged over 3 s, the server runs the C requests with an empty queue and the streams are producing (a stream briefly between two requests does not count against it), or early when the server plateaus below C (then the cell is capacity-limited). Tokens are counted by arrival time from per-chunk usage; the denominator is the whole wall window, so idle time anywhere in it lowers the rate. active_decode_tps divides by the time to the last token instead. Every chunk that belongs to the stream counts its usage increase, also when its text is empty (a token ending inside a multi-byte character). Latency covers the window only: TTFT and TTFO from requests whose first token arrived in it (null when none did), inter-token latency and token-gap percentiles from gaps between tokens inside it. A cell stays valid while at most max_error_rate of its requests fail. At window end every stream is closed and the next cell waits until the server has drained.",
    )
}

fn burst_note(present: bool) -> MethodologyNote {
    let status = if present {
        "present"
    } else {
        "not run; use --run-burst"
    };
    MethodologyNote {
        status: Some(status.into()),
        ..note(
            "Burst / E2E Decode",
            present,
            "sum(completion_tokens) / (last completion - first send)",
            "A fixed number of requests run to completion in a closed loop; includes admission, prefill and completion.",
        )
    }
}

fn acceptance_note(present: bool) -> MethodologyNote {
    note(
        "Acceptance-normalized decode (MTP / speculative)",
        present,
        "engine_steps = drafts + max(0, output_tokens - (accepted + drafts)); accept_len_effective = output_tokens / engine_steps; steps_per_s = engine_steps / scrape_interval",
        "Counter deltas between the scrapes that bracket the window, summed over data-parallel engines. steps_per_s counts decoding steps per sequence (one target-model pass yields one step for every running sequence), independent of how much of the draft was accepted; server_spec_pos_accept gives the acceptance probability of each draft position. SGLang exposes no counters, so its values come from the accept-length gauge over the window.",
    )
}

/// `--duration auto`: how a sustained window may close early
/// (`crate::autostop`; docs/methodology.md).
fn window_auto_stop_note(auto: &DurationAuto) -> MethodologyNote {
    MethodologyNote {
        method: Some(auto.method.clone()),
        ..note(
            "Window closes when its rate is known (--duration auto)",
            true,
            "batch rates r_i over k = ⌊window s⌋ (3…30) equal sub-windows, never under 1 s; mean ± t(0.975, k−1) · s/√k · √((1+ρ)/(1−ρ)), ρ = lag-1 autocorrelation of r_i + (1+3ρ)/k, clamped to [0, 0.9]; drift = slope(r_i) per second · duration_per_test / mean, with its 95 % interval from the residuals (same inflation)",
            format!(
                "A sustained cell's window closes at the first tick after {} s where the 95 % interval of its client-counted rate is within ±{} % of the mean, the rate's trend would move it by at most that much across the longest window (drift over duration_per_test), and the drift's own 95 % interval lies within three times that; otherwise at duration_per_test, the maximum. stopped_by, rate_ci95 and rate_drift_pct record each cell's close. Open-loop and request-count cells keep their counts.",
                auto.min_duration, auto.target_ci_pct
            ),
        )
    }
}

/// The `--coding-peak` probe's note (added after the matrix).
pub fn coding_peak_note() -> MethodologyNote {
    note(
        "Coding Peak",
        true,
        "usage.completion_tokens / (last_stream_time - first_token_time)",
        "After the matrix, single requests run one after another (nothing else in flight) with a coding prompt, continuous usage and the server's own end-of-sequence (no ignore_eos). Each run's generation rate divides the server-reported completion tokens by the time from its first token to the end of its stream, so prefill and queueing are left out; total_tok_s divides by the whole request time instead. The summary is taken over the runs that completed; cjk_runs counts those whose reasoning or answer held a Han ideograph. A failed run is a sample with ok false and its error.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys each note writes, in order: the layout the goldens and the
    /// reference's files have.
    #[test]
    fn notes_write_their_keys_in_the_files_order() {
        let auto = DurationAuto {
            method: "batch_means".into(),
            min_duration: 5.0,
            target_ci_pct: 2.5,
            ..DurationAuto::default()
        };
        let m = Methodology::of_run(&MethodologyFacts {
            prefill_mode: Some(PrefillMode::StandaloneCold),
            burst_present: true,
            duration_auto: Some(&auto),
            ..MethodologyFacts::default()
        });
        let v = serde_json::to_value(&m).expect("JSON");
        let keys = |k: &str| -> Vec<String> {
            v[k].as_object()
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default()
        };
        let top: Vec<&str> = v
            .as_object()
            .expect("map")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            top,
            [
                "prefill",
                "sustained_decode",
                "burst_e2e_decode",
                "acceptance_normalization",
                "window_auto_stop"
            ]
        );
        assert_eq!(
            keys("prefill"),
            ["name", "present", "mode", "formula", "notes"]
        );
        assert_eq!(v["prefill"]["mode"], "standalone_cold");
        assert_eq!(keys("burst_e2e_decode")[2], "status");
        assert_eq!(v["burst_e2e_decode"]["status"], "present");
        assert_eq!(keys("window_auto_stop")[2], "method");
        let notes = v["window_auto_stop"]["notes"].as_str().unwrap_or("");
        assert!(
            notes.contains("after 5 s") && notes.contains("±2.5 %"),
            "{notes}"
        );
        let off = Methodology::of_run(&MethodologyFacts::default());
        assert_eq!(
            off.burst_e2e_decode.and_then(|n| n.status).as_deref(),
            Some("not run; use --run-burst")
        );
        assert!(off.window_auto_stop.is_none());
    }
}
