//! Pure core of llm-decode-bench.
//!
//! Everything here is free of I/O, clocks and async runtimes: parsers for the
//! wire formats (SSE, OpenAI stream chunks, Prometheus text), statistics, the
//! methodology formulas (window accounting, readiness, scheduler flags,
//! speculative-decoding normalization, KV feasibility), prompt construction and
//! the result model. Time enters as `f64` seconds measured at the I/O edge.
//!
//! See also: `ldb-client` (HTTP), `ldb-runner` (phases and cells),
//! `ldb-report` (text report), `ldb-sim` (simulated engines).

pub mod api;
pub mod arrivals;
pub mod autostop;
pub mod cellstats;
pub mod chunk;
pub mod cjk;
pub mod client_load;
pub mod coding_peak;
pub mod document;
pub mod energy_cost;
pub mod engine;
pub mod failure;
pub mod gaps;
pub mod gauge_mean;
pub mod hardware;
pub mod headroom;
pub mod histogram;
pub mod host_clock;
pub mod http1;
pub mod interference;
pub mod kv;
pub mod live;
pub mod numfmt;
pub mod open_loop;
pub mod plan;
pub mod prefix_cache;
pub mod prometheus;
pub mod prompt;
pub mod readiness;
pub mod redact;
pub mod repeat;
pub mod replay;
pub mod replicas;
pub mod result;
pub mod selftest;
pub mod shard;
pub mod shard_rate;
pub mod slo;
pub mod spec;
pub mod sse;
pub mod stats;
pub mod student;
pub mod timeline;
pub mod tokens;
pub mod tools;
pub mod trace;
pub mod ttft_breakdown;
pub mod window;
