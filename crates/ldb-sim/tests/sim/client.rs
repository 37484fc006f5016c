//! A small plain client for the tests.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use ldb_sim::{Personality, Scenario, SimHandle, SimServer};
use serde_json::Value;

pub async fn start(scenario: Scenario, p: Option<Personality>) -> SimHandle {
    SimServer::start(scenario, p, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

pub fn tiny() -> Scenario {
    Scenario::builtin("tiny-test").unwrap()
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// One SSE event as seen by the client.
#[derive(Debug, Clone)]
pub struct Event {
    pub at: Duration,
    pub data: String,
}

impl Event {
    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.data).ok()
    }
}

/// Read a whole SSE body, stamping each `data:` line.
pub async fn sse(resp: reqwest::Response, start: Instant) -> Vec<Event> {
    let mut out = Vec::new();
    let mut buf = String::new();
    let mut body = resp.bytes_stream();
    while let Some(piece) = body.next().await {
        let Ok(piece) = piece else { break };
        buf.push_str(&String::from_utf8_lossy(&piece));
        while let Some(pos) = buf.find("\n\n") {
            let frame: String = buf.drain(..pos + 2).collect();
            for line in frame.lines() {
                if let Some(d) = line.strip_prefix("data: ") {
                    out.push(Event {
                        at: start.elapsed(),
                        data: d.to_string(),
                    });
                }
            }
        }
    }
    out
}

pub fn chat_body(text: &str, max_tokens: u32, extra: Value) -> Value {
    let mut v = serde_json::json!({
        "messages": [{"role": "user", "content": text}],
        "max_tokens": max_tokens,
        "stream": true,
        "ignore_eos": true,
    });
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        for (k, x) in e {
            o.insert(k.clone(), x.clone());
        }
    }
    v
}

pub async fn post(base: &str, path: &str, body: &Value) -> reqwest::Response {
    client()
        .post(format!("{base}{path}"))
        .json(body)
        .send()
        .await
        .unwrap()
}

/// Completion tokens per content event (from continuous usage).
pub fn usage_tokens(events: &[Event]) -> Option<u64> {
    events
        .iter()
        .filter_map(|e| e.json())
        .filter_map(|v| {
            v.get("usage")
                .and_then(|u| u.get("completion_tokens"))
                .and_then(Value::as_u64)
        })
        .max()
}

/// Poll `cond` on the stats for up to `limit`.
pub async fn wait_for(
    sim: &SimHandle,
    limit: Duration,
    cond: impl Fn(&ldb_sim::SimStats) -> bool,
) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if cond(&sim.stats()) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    false
}
