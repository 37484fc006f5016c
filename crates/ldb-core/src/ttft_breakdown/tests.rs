use std::collections::BTreeMap;

use super::*;
use crate::engine::{Engine, server_snapshot};
use crate::histogram::Histogram;
use crate::prometheus::MetricSet;

fn h(bounds: &[f64], cumulative: &[f64], sum: f64) -> Histogram {
    Histogram {
        bounds: bounds.to_vec(),
        cumulative: cumulative.to_vec(),
        sum,
    }
}

fn comp(name: &str, series: &[(&str, Histogram)]) -> ComponentSeries {
    ComponentSeries {
        name: name.into(),
        metric: format!("m:{name}"),
        series: series
            .iter()
            .map(|(k, h)| ((*k).to_string(), h.clone()))
            .collect::<BTreeMap<_, _>>(),
    }
}

fn hists(lazy: bool, comps: Vec<ComponentSeries>, preempt: Option<f64>) -> LatencyHistograms {
    LatencyHistograms {
        components: comps,
        lazy_series: lazy,
        preemptions: preempt,
        preemptions_source: preempt.map(|_| "vllm:num_preemptions_total"),
    }
}

const B: &[f64] = &[0.1, 0.2, 0.4];

/// Two engines: the window adds 4 TTFTs on engine 0 (two in (0.1, 0.2],
/// two in (0.2, 0.4]) and 4 on engine 1 (all in (0.1, 0.2]).
#[test]
fn window_deltas_sum_series_and_give_known_quantiles_and_overhead() {
    let start = hists(
        false,
        vec![comp(
            "ttft",
            &[
                ("engine=0", h(B, &[1.0, 3.0, 3.0, 3.0], 0.5)),
                ("engine=1", h(B, &[0.0, 0.0, 0.0, 0.0], 0.0)),
            ],
        )],
        Some(2.0),
    );
    let end = hists(
        false,
        vec![
            comp(
                "ttft",
                &[
                    ("engine=0", h(B, &[1.0, 5.0, 7.0, 7.0], 1.6)),
                    ("engine=1", h(B, &[0.0, 4.0, 4.0, 4.0], 0.6)),
                ],
            ),
            comp("decode", &[]),
        ],
        Some(5.0),
    );
    // client: mean 0.3, median 0.25
    let client = ClientTtft::from_values(&[0.2, 0.25, 0.25, 0.5]);
    let b = from_histograms(&start, &end, client);
    let t = b.engine_ttft().unwrap();
    assert_eq!(t.count, Some(8));
    // Δsum = 1.1 + 0.6 = 1.7 over 8
    assert!((t.mean_s.unwrap() - 1.7 / 8.0).abs() < 1e-12);
    // merged window: 6 in (0.1, 0.2], 2 in (0.2, 0.4]; p50: rank 4 → 0.1 + 0.1 × 4/6
    let p50 = t.p50.unwrap();
    assert!((p50.value - (0.1 + 0.1 * 4.0 / 6.0)).abs() < 1e-12);
    assert_eq!((p50.low, p50.high), (0.1, Some(0.2)));
    // p90: rank 7.2 → 0.2 + 0.2 × 1.2/2 = 0.32
    assert!((t.p90.unwrap().value - 0.32).abs() < 1e-12);
    assert!((b.frontend_overhead_mean_s.unwrap() - (0.3 - 1.7 / 8.0)).abs() < 1e-12);
    let range = b.frontend_overhead_p50_range_s.unwrap();
    assert!((range[0].unwrap() - 0.05).abs() < 1e-12 && (range[1].unwrap() - 0.15).abs() < 1e-12);
    assert!(!b.frontend_dominant);
    assert_eq!(b.preemptions, Some(3));
    let decode = b.component("decode").unwrap();
    assert_eq!(
        decode.reason.as_deref(),
        Some("not exported by this server")
    );
    assert_eq!(decode.mean_s, None);
}

#[test]
fn a_late_series_counts_from_zero_only_where_the_engine_creates_it_lazily() {
    let start = |lazy| {
        hists(
            lazy,
            vec![comp(
                "ttft",
                &[("s=true", h(B, &[1.0, 1.0, 1.0, 1.0], 0.05))],
            )],
            None,
        )
    };
    let end = |lazy| {
        hists(
            lazy,
            vec![comp(
                "ttft",
                &[
                    ("s=true", h(B, &[2.0, 2.0, 2.0, 2.0], 0.1)),
                    ("s=false", h(B, &[0.0, 0.0, 1.0, 1.0], 0.3)),
                ],
            )],
            None,
        )
    };
    let client = ClientTtft::from_values(&[0.2]);
    // SGLang: the new is_streaming series began at 0
    let lazy = from_histograms(&start(true), &end(true), client);
    let t = lazy.engine_ttft().unwrap();
    // (0.1 − 0.05) + 0.3 over 2
    assert_eq!(t.count, Some(2));
    assert!((t.mean_s.unwrap() - 0.175).abs() < 1e-12);
    // vLLM: no value, and why
    let strict = from_histograms(&start(false), &end(false), client);
    let t = strict.engine_ttft().unwrap();
    assert_eq!(t.count, None);
    assert!(
        t.reason
            .as_deref()
            .unwrap()
            .contains("appeared during the window")
    );
    assert_eq!(strict.frontend_overhead_mean_s, None);
    assert!(strict.note.as_deref().unwrap().contains("appeared"));
    // a series that vanished, and a restart (buckets went down)
    let gone = from_histograms(&end(true), &start(true), client);
    assert!(
        gone.components[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("vanished")
    );
    let restarted = hists(
        true,
        vec![comp(
            "ttft",
            &[
                ("s=true", h(B, &[0.0, 0.0, 0.0, 0.0], 0.0)),
                ("s=false", h(B, &[0.0, 0.0, 1.0, 1.0], 0.3)),
            ],
        )],
        None,
    );
    let r = from_histograms(&end(true), &restarted, client);
    assert!(
        r.components[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("went down")
    );
}

#[test]
fn a_client_far_above_the_engine_is_flagged() {
    let start = hists(
        false,
        vec![comp("ttft", &[("", h(B, &[0.0; 4], 0.0))])],
        None,
    );
    let end = hists(
        false,
        vec![comp("ttft", &[("", h(B, &[2.0, 2.0, 2.0, 2.0], 0.1))])],
        None,
    );
    let b = from_histograms(&start, &end, ClientTtft::from_values(&[0.3, 0.3]));
    assert!(b.frontend_dominant);
    assert!(
        b.note.as_deref().unwrap().contains("not the engine"),
        "{:?}",
        b.note
    );
    // engine mean 0.05 s: a client at 0.09 s is under twice it
    let b = from_histograms(&start, &end, ClientTtft::from_values(&[0.09, 0.09]));
    assert!(!b.frontend_dominant && b.note.is_none());
    // engine 1 ms, client 10 ms: ten times, but by 9 ms only
    let fast = hists(
        false,
        vec![comp("ttft", &[("", h(B, &[2.0, 2.0, 2.0, 2.0], 0.002))])],
        None,
    );
    let b = from_histograms(&start, &fast, ClientTtft::from_values(&[0.01, 0.01]));
    assert!(!b.frontend_dominant);
    // no observation in the window: a count of 0, no mean, no overhead
    let b = from_histograms(&start, &start, ClientTtft::from_values(&[0.3]));
    let t = b.engine_ttft().unwrap();
    assert_eq!((t.count, t.mean_s), (Some(0), None));
    assert_eq!(b.frontend_overhead_mean_s, None);
}

#[test]
fn llamacpp_timings_give_exact_values_over_the_same_requests() {
    let r = |p: f64, d: f64, c: f64, t: f64| TimedRequest {
        prompt_s: p,
        predicted_s: d,
        cache_n: c,
        client_ttft: t,
    };
    let b = from_timings(&[r(0.1, 2.0, 0.0, 0.15), r(0.3, 4.0, 10.0, 0.35)]);
    assert_eq!(b.source, "llamacpp_timings");
    let prefill = b.engine_ttft().unwrap();
    assert_eq!(prefill.name, "prefill");
    assert!((prefill.mean_s.unwrap() - 0.2).abs() < 1e-12);
    let p50 = prefill.p50.unwrap();
    assert_eq!(p50.error_bound(), Some(0.0));
    assert_eq!(b.mean_of("decode"), Some(3.0));
    assert!((b.frontend_overhead_mean_s.unwrap() - 0.05).abs() < 1e-12);
    assert_eq!(b.cached_prompt_tokens_mean, Some(5.0));
    let empty = from_timings(&[]);
    assert_eq!(empty.engine_ttft().unwrap().count, Some(0));
    assert_eq!(empty.frontend_overhead_mean_s, None);
}

fn fixture(dir: &str, f: &str) -> String {
    let path = format!(
        "{}/../ldb-client/tests/fixtures/{dir}/{f}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).expect(&path)
}

/// The recorded vLLM 0.32 pages carry every histogram we read, with the
/// edges the simulator copies, and two requests between idle and after.
#[test]
fn recorded_vllm_pages_have_the_histograms_read() {
    let read_page =
        |f| server_snapshot(Engine::Vllm, &MetricSet::parse(&fixture("vllm-0.32.0", f)));
    let (idle, after) = (
        read_page("metrics-idle.txt"),
        read_page("metrics-after.txt"),
    );
    let names: Vec<&str> = after
        .latency
        .components
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["ttft", "queue", "prefill", "decode", "inference"]);
    for c in &after.latency.components {
        assert_eq!(c.series.len(), 1, "{}", c.metric);
    }
    let ttft = &after.latency.components[0].series["engine=0,model_name=SmolLM2-135M-Instruct"];
    assert_eq!(ttft.bounds.len(), 22);
    assert_eq!((ttft.bounds[0], ttft.bounds[21]), (0.001, 2560.0));
    let queue = after.latency.components[1].series.values().next().unwrap();
    assert_eq!(queue.bounds[..3], [0.3, 0.5, 0.8]);
    let b = from_histograms(&idle.latency, &after.latency, ClientTtft::default());
    for c in &b.components {
        assert!(c.reason.is_none(), "{}: {:?}", c.name, c.reason);
    }
    let t = b.engine_ttft().unwrap();
    assert_eq!(t.count, Some(2));
    assert_eq!((t.p50.unwrap().low, t.p50.unwrap().high), (0.25, Some(0.5)));
    assert_eq!(b.preemptions, Some(0));
    assert_eq!(
        b.preemptions_source.as_deref(),
        Some("vllm:num_preemptions_total")
    );
}

/// SGLang 0.5.23: TTFT split by `is_streaming`, queue time, and the
/// per-stage latencies (prefill forward and request processing).
#[test]
fn recorded_sglang_pages_have_the_histograms_read() {
    let read_page = |f| {
        server_snapshot(
            Engine::Sglang,
            &MetricSet::parse(&fixture("sglang-0.5.23", f)),
        )
    };
    let (idle, fin) = (
        read_page("metrics-idle.txt"),
        read_page("metrics-final.txt"),
    );
    let names: Vec<&str> = fin
        .latency
        .components
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["ttft", "queue", "prefill", "stage:request_process"]);
    assert_eq!(
        fin.latency.components[0].series.len(),
        2,
        "is_streaming true and false"
    );
    assert_eq!(idle.latency.components[0].series.len(), 1);
    assert!(fin.latency.lazy_series);
    let b = from_histograms(&idle.latency, &fin.latency, ClientTtft::default());
    for c in &b.components {
        assert!(c.reason.is_none(), "{}: {:?}", c.name, c.reason);
        assert!(c.count.unwrap() > 0, "{}", c.name);
    }
    // the queue histogram's first edge is 0 (le="0.0")
    let q = fin.latency.components[1].series.values().next().unwrap();
    assert_eq!(q.bounds[0], 0.0);
}

/// Behind a router (`--metrics-url`) each replica's series stay its own:
/// replica 1's series appearing late is no value on vLLM, and a replica's
/// restart does not mix with the other's counts.
#[test]
fn replicas_keep_their_own_series() {
    let one = |cum: &[f64], sum: f64| {
        hists(
            false,
            vec![comp("ttft", &[("engine=0", h(B, cum, sum))])],
            Some(1.0),
        )
    };
    let start =
        LatencyHistograms::combine(&[one(&[1.0, 1.0, 1.0, 1.0], 0.05), one(&[0.0; 4], 0.0)]);
    let end = LatencyHistograms::combine(&[
        one(&[2.0, 2.0, 2.0, 2.0], 0.1),
        one(&[0.0, 3.0, 3.0, 3.0], 0.45),
    ]);
    assert_eq!(end.components[0].series.len(), 2);
    assert!(end.components[0].series.contains_key("replica=1,engine=0"));
    assert_eq!(end.preemptions, Some(2.0));
    let b = from_histograms(&start, &end, ClientTtft::default());
    let t = b.engine_ttft().unwrap();
    // replica 0: 1 at 0.05; replica 1: 3 summing 0.45
    assert_eq!(t.count, Some(4));
    assert!((t.mean_s.unwrap() - 0.125).abs() < 1e-12);
    // replica 1 had no series at the start: not trusted on vLLM
    let mut late = start.clone();
    late.components[0].series.remove("replica=1,engine=0");
    let b = from_histograms(&late, &end, ClientTtft::default());
    assert!(
        b.components[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("replica=1")
    );
}
