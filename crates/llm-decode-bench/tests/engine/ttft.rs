//! The TTFT breakdown (docs/methodology.md §9.4) judged by a real engine:
//! one request-count cell of short requests, so that every request's first
//! token, queue time and prefill time fall inside the cell (the engines
//! observe queue and prefill time when a request finishes). What must hold
//! whatever the machine's speed: the engine's TTFT is inside the client's
//! (the client sends before the engine receives and reads after it
//! writes), and the engine's queue and prefill fit inside its TTFT.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::{assert_valid, f, run_bench, s};

/// How each engine reports the parts.
pub struct Expect {
    /// For messages.
    pub name: &'static str,
    /// `prometheus_histograms` or `llamacpp_timings`.
    pub source: &'static str,
    /// The component that is the engine's TTFT.
    pub engine_ttft: &'static str,
    /// Components that must have observations in the cell, besides it.
    pub parts: &'static [&'static str],
}

/// Populations differ by a request at the cell's edges; a slack of this
/// much (seconds) keeps such a request from failing an inequality.
const SLACK_S: f64 = 0.05;

/// Runs the cell against the server on `port` and checks its breakdown;
/// prints the figures (docs/engines.md quotes them).
pub fn ttft_breakdown_checks(port: u16, dir: &Path, e: &Expect) {
    let (status, doc, out) = run_bench(
        port,
        dir,
        "ttft-breakdown",
        Duration::from_secs(300),
        &[],
        &[
            "--request-count",
            "8",
            "--concurrency",
            "2",
            "--contexts",
            "512",
            "--max-tokens",
            "8",
            "--skip-prefill",
            // no hidden C=1 cell first: it would only add a minute on SGLang
            "--decode-warmup-seconds",
            "0",
        ],
    );
    assert_eq!(status.code(), Some(0), "{}: {out}", e.name);
    assert_valid("ttft-breakdown", &doc);
    let cell = &doc["results"][0];
    let b = &cell["ttft_breakdown"];
    assert!(b.is_object(), "{}: no ttft_breakdown in {cell}", e.name);
    assert_eq!(s(b, "source"), e.source, "{b}");
    assert_eq!(s(b, "engine_ttft_component"), e.engine_ttft, "{b}");
    let component = |name: &str| -> &Value {
        b["components"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["name"] == name))
            .unwrap_or_else(|| panic!("{}: no {name} component in {b}", e.name))
    };
    for name in std::iter::once(&e.engine_ttft).chain(e.parts) {
        let c = component(name);
        assert!(
            f(c, "count") >= 1.0,
            "{}: {name} has no observation: {c}",
            e.name
        );
    }
    let client = f(b, "client_ttft_mean_s");
    let engine = f(component(e.engine_ttft), "mean_s");
    let overhead = f(b, "frontend_overhead_mean_s");
    eprintln!(
        "{}: client TTFT {:.1} ms, engine {:.1} ms, front end {:.1} ms ({})",
        e.name,
        client * 1e3,
        engine * 1e3,
        overhead * 1e3,
        e.parts
            .iter()
            .map(|p| format!("{p} {:.1} ms", f(component(p), "mean_s") * 1e3))
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert!(
        engine <= client + SLACK_S,
        "{}: engine {engine} > client {client}",
        e.name
    );
    assert!(
        (client - engine - overhead).abs() < 1e-9,
        "{}: client {client} ≠ engine {engine} + front end {overhead}",
        e.name
    );
    // The parts that come before the first token fit inside the engine's TTFT.
    let before_first: f64 = e
        .parts
        .iter()
        .filter(|p| matches!(**p, "queue" | "prefill"))
        .map(|p| f(component(p), "mean_s"))
        .sum();
    assert!(
        before_first <= engine + SLACK_S,
        "{}: queue + prefill {before_first} s > engine TTFT {engine} s: {b}",
        e.name
    );
}
