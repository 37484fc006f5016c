//! The long fuzz run of docs/reliability.md: millions of inputs per target
//! for every reader of server or file bytes, far more than the proptest
//! targets of `cargo test` (which shrink and check properties, and cost too
//! much per case for a run this long).
//!
//! ```text
//! cargo run --release -p ldb-client --example fuzz_long -- [INPUTS_PER_TARGET] [SEED] [TARGET…]
//! ```
//!
//! Inputs are mutations of real answers recorded from vLLM, SGLang and
//! llama.cpp (`crates/ldb-client/tests/fixtures`) and of a result file —
//! bytes flipped, inserted, deleted, duplicated, spliced between samples,
//! cut — plus one input in ten of plain random bytes. Each input must be
//! handled without a panic in under 2 s; the SSE decoder is fed each input
//! cut at random places. A failing input is written to `fuzz-failure-*.bin`
//! and the run exits 1. Prints, per target, the inputs run and the slowest
//! input's time.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ldb_client::discovery::Discovery;
use ldb_client::engine_info::{
    apply_llamacpp_props, apply_sglang_info, apply_vllm_version, engine_from_metrics, from_models,
    vllm_kv,
};
use ldb_core::chunk::parse_chunk;
use ldb_core::document::ResultDocument;
use ldb_core::prometheus::MetricSet;
use ldb_core::sse::SseDecoder;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The same bound as the proptest targets: far beyond what a few KB need.
const PER_INPUT: Duration = Duration::from_secs(2);
/// Inputs are kept to a few KB so ten million of them fit in minutes.
const MAX_INPUT: usize = 8 * 1024;

/// Byte strings a parser of these formats treats specially.
const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b"\\",
    b":",
    b",",
    b"\n",
    b"\r\n",
    b"\n\n",
    b"data: ",
    b"data:",
    b": keep-alive\n",
    b"event: x\n",
    b"[DONE]",
    b"null",
    b"true",
    b"-1",
    b"1e308",
    b"NaN",
    b"+Inf",
    b"18446744073709551616",
    b"\xff",
    b"\x00",
    b"\xe6\xb0",
    b"# TYPE ",
    b"# HELP ",
    b"{le=\"+Inf\"}",
    b"=\"",
    b"\"choices\":",
    b"\"usage\":",
    b"\"delta\":",
    b"\"content\":",
    b"\"data\":",
    b"\"id\":",
    b"\"results\":",
    b"\"metadata\":",
];

struct Target {
    name: &'static str,
    seeds: Vec<Vec<u8>>,
    run: fn(&[u8], &mut StdRng),
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let inputs: u64 = args
        .first()
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let seed: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1);
    let only: Vec<&str> = args.iter().skip(2).map(String::as_str).collect();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let targets = targets(&fixtures);
    for t in targets
        .iter()
        .filter(|t| only.is_empty() || only.contains(&t.name))
    {
        if t.seeds.is_empty() {
            eprintln!(
                "error: no seed inputs for {} under {}",
                t.name,
                fixtures.display()
            );
            std::process::exit(2);
        }
        let mut rng = StdRng::seed_from_u64(seed);
        let t0 = Instant::now();
        let mut slowest = Duration::ZERO;
        for i in 0..inputs {
            let input = make_input(&t.seeds, &mut rng);
            let mut cut_rng = StdRng::seed_from_u64(seed ^ i);
            let start = Instant::now();
            let ok = catch_unwind(AssertUnwindSafe(|| (t.run)(&input, &mut cut_rng))).is_ok();
            let took = start.elapsed();
            slowest = slowest.max(took);
            if !ok || took >= PER_INPUT {
                let file = PathBuf::from(format!("fuzz-failure-{}-{i}.bin", t.name));
                let _ = std::fs::write(&file, &input);
                eprintln!(
                    "FAIL {}: input {i} {} (saved to {})",
                    t.name,
                    if ok {
                        format!("took {took:?}")
                    } else {
                        "panicked".into()
                    },
                    file.display()
                );
                std::process::exit(1);
            }
        }
        println!(
            "{:<12} {inputs} inputs, seed {seed}, {:.0} s, slowest input {:.2} ms, no failure",
            t.name,
            t0.elapsed().as_secs_f64(),
            slowest.as_secs_f64() * 1e3
        );
    }
}

/// One input: random bytes (one in ten), else a seed with 1–8 mutations.
fn make_input(seeds: &[Vec<u8>], rng: &mut StdRng) -> Vec<u8> {
    if rng.random_ratio(1, 10) {
        let n = rng.random_range(0..MAX_INPUT);
        return (0..n).map(|_| rng.random()).collect();
    }
    let mut v = seeds[rng.random_range(0..seeds.len())].clone();
    for _ in 0..rng.random_range(1..=8) {
        mutate(&mut v, seeds, rng);
    }
    v.truncate(MAX_INPUT);
    v
}

fn mutate(v: &mut Vec<u8>, seeds: &[Vec<u8>], rng: &mut StdRng) {
    let at = |rng: &mut StdRng, v: &Vec<u8>| rng.random_range(0..=v.len());
    match rng.random_range(0..7) {
        0 if !v.is_empty() => {
            let i = rng.random_range(0..v.len());
            v[i] = rng.random();
        }
        1 => {
            let i = at(rng, v);
            let tok = TOKENS[rng.random_range(0..TOKENS.len())];
            v.splice(i..i, tok.iter().copied());
        }
        2 if !v.is_empty() => {
            let a = rng.random_range(0..v.len());
            let b = (a + rng.random_range(1..64)).min(v.len());
            v.drain(a..b);
        }
        3 if !v.is_empty() => {
            let a = rng.random_range(0..v.len());
            let b = (a + rng.random_range(1..256)).min(v.len());
            let piece: Vec<u8> = v[a..b].to_vec();
            let i = at(rng, v);
            v.splice(i..i, piece);
        }
        4 => {
            let other = &seeds[rng.random_range(0..seeds.len())];
            if !other.is_empty() {
                let a = rng.random_range(0..other.len());
                let b = (a + rng.random_range(1..512)).min(other.len());
                let i = at(rng, v);
                v.splice(i..i, other[a..b].iter().copied());
            }
        }
        5 => {
            let n = at(rng, v);
            v.truncate(n);
        }
        _ => {
            // a run of one byte (long numbers, deep nesting, endless lines)
            let i = at(rng, v);
            let b = TOKENS[rng.random_range(0..TOKENS.len())][0];
            let n = rng.random_range(1..2048);
            v.splice(i..i, std::iter::repeat_n(b, n));
        }
    }
}

/// Every target with its seeds.
fn targets(fixtures: &Path) -> Vec<Target> {
    let sse = files(fixtures, ".sse");
    let chunks: Vec<Vec<u8>> = sse
        .iter()
        .flat_map(|s| {
            s.split(|&b| b == b'\n')
                .filter_map(|l| l.strip_prefix(b"data: "))
                .filter(|l| l.first() == Some(&b'{'))
                .map(<[u8]>::to_vec)
                .take(40)
                .collect::<Vec<_>>()
        })
        .collect();
    // /metrics pages are long: seed with windows of them
    let metrics: Vec<Vec<u8>> = files(fixtures, ".txt")
        .iter()
        .flat_map(|m| m.chunks(4096).map(<[u8]>::to_vec).collect::<Vec<_>>())
        .collect();
    let info = files(fixtures, ".json");
    let result = serde_json::to_vec_pretty(&ResultDocument::default()).unwrap_or_default();
    vec![
        Target {
            name: "sse",
            seeds: sse
                .iter()
                .map(|s| s[..s.len().min(MAX_INPUT)].to_vec())
                .collect(),
            run: run_sse,
        },
        Target {
            name: "chunk",
            seeds: chunks,
            run: |b, _| {
                let _ = parse_chunk(b);
            },
        },
        Target {
            name: "prometheus",
            seeds: metrics.clone(),
            run: |b, _| {
                let text = String::from_utf8_lossy(b);
                let m = MetricSet::parse(&text);
                let mut d = Discovery::default();
                vllm_kv(&m, &mut d);
                let _ = engine_from_metrics(&text);
            },
        },
        Target {
            name: "result",
            seeds: vec![result],
            run: |b, _| {
                let _ = ResultDocument::from_json_str(&String::from_utf8_lossy(b));
            },
        },
        Target {
            name: "engine-info",
            seeds: info,
            run: run_engine_info,
        },
    ]
}

/// The SSE decoder fed the input in up to 8 pieces cut at random places.
fn run_sse(b: &[u8], rng: &mut StdRng) {
    let mut cuts: Vec<usize> = (0..rng.random_range(0..8))
        .map(|_| rng.random_range(0..=b.len()))
        .collect();
    cuts.sort_unstable();
    let mut dec = SseDecoder::new();
    let mut n = 0usize;
    let mut start = 0;
    for cut in cuts.into_iter().chain(std::iter::once(b.len())) {
        dec.feed(&b[start..cut], |p| n += p.len());
        start = cut;
    }
    dec.finish(|p| n += p.len());
    std::hint::black_box(n);
}

/// Every engine-info reader on the input read as JSON (inputs that are not
/// JSON stop at the JSON parser, which is serde's and not ours to fuzz).
fn run_engine_info(b: &[u8], _: &mut StdRng) {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(b) else {
        return;
    };
    let _ = from_models(&v, None);
    let _ = from_models(&v, Some("m"));
    let mut d = Discovery::default();
    apply_sglang_info(&v, "/server_info", &mut d);
    let mut d = Discovery::default();
    let _ = apply_llamacpp_props(&v, &mut d);
    let mut d = Discovery::default();
    let _ = apply_vllm_version(&v, &mut d);
}

/// The contents of every fixture file whose name ends with `suffix`.
fn files(dir: &Path, suffix: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            out.extend(files(&p, suffix));
        } else if p.to_string_lossy().ends_with(suffix)
            && let Ok(bytes) = std::fs::read(&p)
        {
            out.push(bytes);
        }
    }
    out
}
