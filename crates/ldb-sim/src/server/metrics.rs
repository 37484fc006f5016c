//! `GET /metrics`: Prometheus text exposition with each engine's names, types and labels.

mod blip;
mod llamacpp;
mod sglang;
mod vllm;

use std::fmt::Write;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::AppState;
use crate::engine::lock;
use crate::engine::stats::{EngineStats, Histogram};
use crate::personality::Personality;
use crate::scenario::Scenario;

/// `GET /metrics`, with the scenario's slow/failing faults.
pub(crate) async fn metrics(State(st): State<Arc<AppState>>) -> Response {
    st.count("GET /metrics");
    let f = &st.cfg.faults;
    // One lock: note when this read arrived, and how many came before it.
    let (served, blip) = {
        let mut http = lock(&st.http);
        if http.metrics_arrivals_unix.len() < super::MAX_ARRIVALS {
            let at = st.started_unix_f + st.started.elapsed().as_secs_f64();
            http.metrics_arrivals_unix.push(at);
        }
        let blip = blip::phantom_queue(f, &mut http, st.started.elapsed().as_secs_f64());
        let served = http
            .requests_by_endpoint
            .get("GET /metrics")
            .copied()
            .unwrap_or(0);
        (served, blip)
    };
    if f.metrics_hang_after > 0 && served > u64::from(f.metrics_hang_after) {
        // Long enough for any client to give up; the task ends with the server.
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    if f.metrics_garbage_after > 0 && served > u64::from(f.metrics_garbage_after) {
        lock(&st.http).metrics_failures += 1;
        return (
            [(header::CONTENT_TYPE, "text/plain")],
            "\u{0}\u{1}<html>not metrics {{{{ \u{fffd}\n}}}} ::: 42 x\n",
        )
            .into_response();
    }
    if f.metrics_delay_s > 0.0 {
        tokio::time::sleep(Duration::from_secs_f64(f.metrics_delay_s)).await;
    }
    if f.metrics_fail_share > 0.0 && st.draw() < f.metrics_fail_share {
        lock(&st.http).metrics_failures += 1;
        return (StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error").into_response();
    }
    let mut s = st.engine.snapshot();
    s.waiting += blip;
    let mut body = render(st.personality, &st.cfg, &s);
    // Python's Prometheus client (vLLM, SGLang) adds the process's start time.
    if matches!(st.personality, Personality::Vllm | Personality::Sglang) {
        let _ = write!(
            body,
            "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n\
             # TYPE process_start_time_seconds gauge\nprocess_start_time_seconds {:.3}\n",
            st.started_unix_f
        );
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

/// The exposition text for `p` (empty for the OpenAI proxy).
pub(crate) fn render(p: Personality, cfg: &Scenario, s: &EngineStats) -> String {
    match p {
        Personality::Vllm => vllm::render(cfg, s),
        Personality::Sglang => sglang::render(cfg, s),
        Personality::LlamaCpp => llamacpp::render(cfg, s),
        Personality::OpenAi => String::new(),
    }
}

/// Formats a float the way prometheus_client does (`12.0`, `0.4375`).
fn num(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

pub(super) struct Out {
    pub(super) text: String,
}

impl Out {
    pub(super) fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    pub(super) fn sample(&mut self, name: &str, labels: &str, v: f64) {
        if labels.is_empty() {
            let _ = writeln!(self.text, "{name} {}", num(v));
        } else {
            let _ = writeln!(self.text, "{name}{{{labels}}} {}", num(v));
        }
    }

    pub(super) fn metric(&mut self, name: &str, kind: &str, help: &str, labels: &str, v: f64) {
        // vLLM and SGLang (prometheus_client) name a counter family without
        // `_total`; llama.cpp names it with the suffix, as its samples.
        let base = name
            .strip_suffix("_total")
            .filter(|_| kind == "counter" && !name.starts_with("llamacpp:"))
            .unwrap_or(name);
        self.family(base, kind, help);
        self.sample(name, labels, v);
    }

    pub(super) fn histogram(&mut self, name: &str, help: &str, labels: &str, h: &Histogram) {
        self.family(name, "histogram", help);
        let sep = if labels.is_empty() { "" } else { "," };
        for (b, c) in h
            .bounds
            .iter()
            .map(|b| num(*b))
            .chain(["+Inf".to_string()])
            .zip(h.cumulative())
        {
            let _ = writeln!(
                self.text,
                "{name}_bucket{{{labels}{sep}le=\"{b}\"}} {}",
                num(c as f64)
            );
        }
        self.sample(&format!("{name}_sum"), labels, h.sum);
        self.sample(&format!("{name}_count"), labels, h.count as f64);
    }
}
