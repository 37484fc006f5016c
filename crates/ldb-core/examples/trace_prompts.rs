//! Builds the prompts of a synthetic Mooncake trace (docs/workloads.md):
//! writes the trace, reads it back through the streamed reader and builds
//! every prompt with its segments, as a replay does, feeding the intended
//! prefix cache. Prints the requests, tokens, time and the intended hit
//! rate; `bench/trace-prompts.sh` adds the peak memory.
//!
//! Usage: trace_prompts FILE [REQUESTS] [BLOCKS_PER_REQUEST] [GROUPS]

use std::fmt::Write as _;
use std::io::BufReader;
use std::time::Instant;

use ldb_core::prefix_cache::{CacheGranularity, IntendedPrefixCache};
use ldb_core::trace::prompt::PromptBuilder;
use ldb_core::trace::{Rows, TraceOptions, TracePrompt, Window};

fn arg(n: usize, default: u64) -> u64 {
    std::env::args()
        .nth(n)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: trace_prompts FILE [N] [BLOCKS] [GROUPS]");
    let (n, blocks, groups) = (arg(2, 100_000), arg(3, 24), arg(4, 1000));
    // Each request shares its first third of blocks with its group, like a
    // conversation trace's system prompts and earlier turns.
    let shared = blocks / 3;
    let mut text = String::new();
    let mut next_id = groups * shared;
    for i in 0..n {
        let g = i % groups;
        let len = (blocks - 1) * 512 + 1 + (i * 37) % 511;
        let ids: Vec<String> = (0..blocks)
            .map(|b| {
                if b < shared {
                    (g * shared + b).to_string()
                } else {
                    next_id += 1;
                    next_id.to_string()
                }
            })
            .collect();
        let _ = writeln!(
            text,
            r#"{{"timestamp": {i}, "input_length": {len}, "output_length": 100, "hash_ids": [{}]}}"#,
            ids.join(", ")
        );
    }
    std::fs::write(&path, text).expect("write the trace");
    let t0 = Instant::now();
    let opts = TraceOptions::default();
    let file = BufReader::new(std::fs::File::open(&path).expect("open"));
    let rows = Window::new(Rows::new(file, None, opts.clone()), &opts);
    let mut builder = PromptBuilder::new(7, 12);
    let mut cache = IntendedPrefixCache::new(CacheGranularity::TOKEN);
    let (mut requests, mut bytes) = (0u64, 0u64);
    for r in rows {
        let r = r.expect("row");
        let TracePrompt::Tokens(tokens) = r.prompt else {
            continue;
        };
        let p = builder.blocks(tokens, &r.hash_ids);
        cache.admit(&p.segments);
        bytes += p.text.len() as u64;
        requests += 1;
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "requests {requests}, prompt tokens {}, text {:.1} GB, {secs:.2} s ({:.0} requests/s), \
         block texts generated {}, intended hit rate {:.1}%",
        cache.prompt_tokens(),
        bytes as f64 / 1e9,
        requests as f64 / secs,
        builder.built_blocks(),
        cache.hit_rate().unwrap_or(0.0) * 100.0
    );
}
