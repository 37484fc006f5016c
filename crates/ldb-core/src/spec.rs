//! Speculative-decoding normalization over a measurement window.
//!
//! With speculative decoding, tok/s = engine steps/s × tokens per step, and
//! tokens per step depends on the text. Separating the two lets a user compare
//! kernel speed across runs whose acceptance differs. Definitions (counter
//! deltas between the two scrapes that bracket the window, summed across DP
//! engines):
//!
//! - `accept_rate = Δaccepted / Δdraft_tokens`
//! - `accept_length = 1 + Δaccepted / Δdrafts` (tokens per drafted step, bonus included)
//! - `engine_steps = Δdrafts + max(0, out − (Δaccepted + Δdrafts))`: drafted
//!   steps emit `accepted + 1` tokens each; any remaining output tokens came from
//!   undrafted one-token steps
//! - `accept_len_effective = out / engine_steps`
//! - `steps_per_s = engine_steps / Δt`, with Δt the time between the same two
//!   scrapes (the reference divided the client rate by the ratio, mixing windows)
//!
//! Steps are counted per sequence, as the engines' draft counters are: with B
//! sequences decoding, one engine forward pass is B steps. At C = 1 the two
//! are the same; at C > 1 divide by the effective concurrency for passes/s.
//! - `pos_accept[i] = Δaccepted_at_position_i / Δdrafts`
//!
//! `out` is the server's generated-token delta over the same scrape pair.

use crate::engine::ServerSnapshot;
use crate::result::SpecFields;

/// Counter deltas of one window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpecWindow<'a> {
    /// Scrape at the window start.
    pub start: &'a ServerSnapshot,
    /// Scrape at the window end.
    pub end: &'a ServerSnapshot,
    /// Seconds between the two scrapes.
    pub scrape_seconds: f64,
    /// Output tokens between the two scrapes (server counter delta).
    pub output_tokens: f64,
}

/// A counter's growth; none when it went down (the server restarted
/// between the two reads, so the difference counts nothing).
fn delta(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    let d = b? - a?;
    (d >= 0.0).then_some(d)
}

/// Normalization fields, or `None` when no drafts happened in the window.
pub fn normalize(w: SpecWindow<'_>, ref_len: f64) -> Option<SpecFields> {
    let dn = delta(w.start.spec_drafts, w.end.spec_drafts)?;
    let dd = delta(w.start.spec_draft_tokens, w.end.spec_draft_tokens)?;
    let da = delta(w.start.spec_accepted, w.end.spec_accepted)?;
    let out = w.output_tokens;
    if dn <= 0.0 || dd <= 0.0 || out <= 0.0 || w.scrape_seconds <= 0.0 {
        return None;
    }
    let engine_steps = dn + (out - (da + dn)).max(0.0);
    let accept_len_effective = out / engine_steps;
    let steps_per_s = engine_steps / w.scrape_seconds;
    let pos_accept = w
        .end
        .spec_accepted_per_pos
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let s = w.start.spec_accepted_per_pos.get(i).copied().unwrap_or(0.0);
            (e - s).max(0.0) / dn
        })
        .collect();
    Some(SpecFields {
        accept_rate: (da / dd).clamp(0.0, 1.0),
        accept_length: 1.0 + da / dn,
        drafts: dn.round() as u64,
        draft_tokens: dd.round() as u64,
        accepted_tokens: da.round().max(0.0) as u64,
        pos_accept,
        engine_steps,
        steps_per_s,
        accept_len_effective,
        accept_norm_tps: if ref_len > 0.0 {
            steps_per_s * ref_len
        } else {
            0.0
        },
        accept_norm_ref_len: ref_len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(n: f64, d: f64, a: f64, pos: Vec<f64>) -> ServerSnapshot {
        ServerSnapshot {
            spec_drafts: Some(n),
            spec_draft_tokens: Some(d),
            spec_accepted: Some(a),
            spec_accepted_per_pos: pos,
            ..ServerSnapshot::default()
        }
    }

    #[test]
    fn reproduces_the_seed_c1_ctx0_cell() {
        // Seed: Δn=439, Δd=3073, Δa=853, out=1293 → 440 steps, len 2.9386.
        let a = snap(1000.0, 7000.0, 2000.0, vec![0.0; 7]);
        let b = snap(
            1439.0,
            10073.0,
            2853.0,
            vec![338.0, 220.0, 124.0, 79.0, 47.0, 28.0, 17.0],
        );
        let f = normalize(
            SpecWindow {
                start: &a,
                end: &b,
                scrape_seconds: 10.0,
                output_tokens: 1293.0,
            },
            0.0,
        )
        .unwrap();
        assert_eq!(f.engine_steps, 440.0);
        assert!((f.accept_len_effective - 2.938_636_363_636_363_5).abs() < 1e-12);
        assert!((f.accept_length - 2.943_052_391_799_544_6).abs() < 1e-12);
        assert!((f.accept_rate - 0.277_578_913_114_220_6).abs() < 1e-12);
        assert_eq!(f.steps_per_s, 44.0);
        assert!((f.pos_accept[0] - 0.7699).abs() < 1e-4);
        assert_eq!(f.accept_norm_tps, 0.0);
    }

    #[test]
    fn no_drafts_means_no_normalization() {
        let a = snap(5.0, 35.0, 10.0, vec![]);
        let w = SpecWindow {
            start: &a,
            end: &a,
            scrape_seconds: 1.0,
            output_tokens: 10.0,
        };
        assert!(normalize(w, 0.0).is_none());
        let none = ServerSnapshot::default();
        let w = SpecWindow {
            start: &none,
            end: &none,
            scrape_seconds: 1.0,
            output_tokens: 10.0,
        };
        assert!(normalize(w, 0.0).is_none());
    }
}
