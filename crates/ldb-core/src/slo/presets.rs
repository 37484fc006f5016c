//! `--slo-preset NAME`: named sets of public latency targets, so a run can
//! be judged against a published limit without copying its numbers.
//!
//! Every preset is MLPerf Inference's Server-scenario limit for one LLM
//! benchmark: TTFT and TPOT (time per output token after the first), both
//! at the 99th percentile over requests. Source: MLCommons, `mlcommons/
//! inference`, `loadgen/mlperf.conf` (the `*.Server.ttft_latency` and
//! `*.Server.tpot_latency` keys, milliseconds; `*.Server.
//! target_latency_percentile = 99`), as listed in docs/slo.md. Our TTFT
//! and TPOT are measured on a closed-loop matrix, not on MLPerf's Poisson
//! arrivals, so a pass here is a comparison point, not an MLPerf result.

use super::spec::{Metric, Percentile, SloError, SloSpec, Target};

/// One preset: name, TTFT p99 limit and TPOT p99 limit, seconds.
struct Preset {
    name: &'static str,
    ttft_s: f64,
    tpot_s: f64,
}

const PRESETS: &[Preset] = &[
    Preset {
        name: "mlperf-llama2-70b",
        ttft_s: 2.0,
        tpot_s: 0.200,
    },
    Preset {
        name: "mlperf-llama2-70b-interactive",
        ttft_s: 0.450,
        tpot_s: 0.040,
    },
    Preset {
        name: "mlperf-mixtral-8x7b",
        ttft_s: 2.0,
        tpot_s: 0.200,
    },
    Preset {
        name: "mlperf-llama3.1-405b",
        ttft_s: 6.0,
        tpot_s: 0.175,
    },
    Preset {
        name: "mlperf-llama3.1-405b-interactive",
        ttft_s: 4.5,
        tpot_s: 0.080,
    },
    Preset {
        name: "mlperf-llama3.1-8b",
        ttft_s: 2.0,
        tpot_s: 0.100,
    },
    Preset {
        name: "mlperf-llama3.1-8b-interactive",
        ttft_s: 0.500,
        tpot_s: 0.030,
    },
    Preset {
        name: "mlperf-deepseek-r1",
        ttft_s: 2.0,
        tpot_s: 0.080,
    },
    Preset {
        name: "mlperf-deepseek-r1-interactive",
        ttft_s: 1.5,
        tpot_s: 0.015,
    },
];

/// The names of every preset, comma separated (for errors and `--help`).
pub fn preset_names() -> String {
    PRESETS
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The targets of preset `name`.
pub fn preset(name: &str) -> Result<SloSpec, SloError> {
    let Some(p) = PRESETS.iter().find(|p| p.name == name.trim()) else {
        return Err(SloError(format!(
            "unknown --slo-preset {name:?} (use one of: {})",
            preset_names()
        )));
    };
    Ok(SloSpec::from_targets(vec![
        Target {
            metric: Metric::Ttft,
            percentile: Percentile::P99,
            seconds: p.ttft_s,
        },
        Target {
            metric: Metric::Tpot,
            percentile: Percentile::P99,
            seconds: p.tpot_s,
        },
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_read_as_their_published_limits() {
        let s = preset("mlperf-llama2-70b").unwrap();
        assert_eq!(s.to_string(), "ttft_p99=2,tpot_p99=0.2");
        let s = preset("mlperf-llama3.1-405b-interactive").unwrap();
        assert_eq!(s.to_string(), "ttft_p99=4.5,tpot_p99=0.08");
    }

    #[test]
    fn an_unknown_preset_names_the_known_ones() {
        let e = preset("mlperf-gpt5").unwrap_err().to_string();
        assert!(e.contains("mlperf-llama2-70b-interactive"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn explicit_targets_win_over_the_preset() {
        let p = preset("mlperf-llama2-70b").unwrap();
        let explicit = SloSpec::parse("ttft_p99=1,e2e_p99=30").unwrap();
        let merged = p.overridden_by(&explicit);
        assert_eq!(merged.to_string(), "ttft_p99=1,e2e_p99=30,tpot_p99=0.2");
    }
}
