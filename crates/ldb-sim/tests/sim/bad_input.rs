//! Bad input: one-line errors, engine error JSON, never a panic.

use ldb_sim::{Personality, Scenario, SimServer};
use serde_json::{Value, json};

use super::client::{chat_body, post, start, tiny};

#[test]
fn unknown_engine_is_one_line() {
    let e = "tgi".parse::<Personality>().unwrap_err().to_string();
    assert!(
        e.contains("unknown engine `tgi`") && !e.contains('\n'),
        "{e}"
    );
}

#[test]
fn unknown_scenario_key_names_file_key_and_form() {
    let text = include_str!("../../../../scenarios/tiny-test.toml")
        .replace("[kv]", "[kv]\nblock_sise = 3");
    let e = Scenario::from_toml_str(&text, "my.toml")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("my.toml: line "), "{e}");
    assert!(
        e.contains("unknown field `block_sise`") && e.contains("block_size"),
        "{e}"
    );
    assert!(!e.contains('\n'), "{e}");
}

#[test]
fn bad_value_names_key_and_form() {
    let text = include_str!("../../../../scenarios/tiny-test.toml")
        .replace("accept_probs = [0.9, 0.6]", "accept_probs = [0.6, 0.9]");
    let e = Scenario::from_toml_str(&text, "s.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("s.toml: key `spec.accept_probs`: expected non-increasing"),
        "{e}"
    );
    let text = include_str!("../../../../scenarios/tiny-test.toml")
        .replace("prefill_tok_s = 10000.0", "prefill_tok_s = \"fast\"");
    let e = Scenario::from_toml_str(&text, "s.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("prefill_tok_s") && e.contains("expected") && !e.contains('\n'),
        "{e}"
    );
    let e = Scenario::load("no-such-scenario").unwrap_err().to_string();
    assert!(
        e.contains("unknown scenario `no-such-scenario`") && e.contains("quickstart"),
        "{e}"
    );
}

#[test]
fn step_time_drift_reads_and_must_not_be_negative() {
    let base = include_str!("../../../../scenarios/tiny-test.toml");
    assert!(base.contains("[step_time]"));
    let with = |v: &str| base.replace("[step_time]", &format!("[step_time]\ndrift_per_s = {v}"));
    let sc = Scenario::from_toml_str(&with("0.01"), "s.toml").unwrap();
    assert_eq!(sc.step_time.drift_per_s, 0.01);
    let steady = sc.step_time.decode_seconds(4, 0);
    assert!((sc.step_time.decode_seconds_at(4, 0, 10.0) / steady - 1.1).abs() < 1e-12);
    let e = Scenario::from_toml_str(&with("-0.01"), "s.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("step_time.drift_per_s") && !e.contains('\n'),
        "{e}"
    );
}

#[test]
fn every_builtin_loads() {
    for name in Scenario::builtin_names() {
        Scenario::builtin(name).unwrap();
    }
}

#[tokio::test]
async fn port_in_use_is_clear() {
    let sim = start(tiny(), None).await;
    let e = SimServer::start(tiny(), None, sim.addr())
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.starts_with(&format!("cannot bind {}: ", sim.addr())),
        "{e}"
    );
    assert!(e.contains("in use"), "{e}");
    sim.shutdown().await;
}

async fn error_json(p: Personality, body: Value) -> (u16, Value) {
    let sim = start(tiny(), Some(p)).await;
    let r = post(&sim.base_url(), "/v1/chat/completions", &body).await;
    let status = r.status().as_u16();
    let v: Value = r.json().await.unwrap();
    sim.shutdown().await;
    (status, v)
}

#[tokio::test]
async fn context_errors_in_each_shape() {
    let long = "a".repeat(4 * 5000);
    let (s, v) = error_json(Personality::Vllm, chat_body(&long, 10, json!({}))).await;
    assert_eq!(s, 400);
    assert_eq!(v["error"]["type"], "BadRequestError");
    assert_eq!(v["error"]["code"], 400);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("This model's maximum context length is 4096 tokens.")
    );
    let (s, v) = error_json(Personality::Vllm, chat_body("hi", 5000, json!({}))).await;
    assert_eq!(
        (s, v["error"]["param"].as_str()),
        (400, Some("input_tokens"))
    );
    let (s, v) = error_json(Personality::Sglang, chat_body(&long, 10, json!({}))).await;
    assert_eq!((s, v["object"].as_str()), (400, Some("error")));
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .starts_with("The input (5012 tokens) is longer than")
    );
    let (s, v) = error_json(Personality::LlamaCpp, chat_body(&long, 10, json!({}))).await;
    assert_eq!(s, 400);
    assert_eq!(v["error"]["type"], "exceed_context_size_error");
    assert_eq!(v["error"]["n_prompt_tokens"], 5012);
    assert_eq!(v["error"]["n_ctx"], 4096);
}

#[tokio::test]
async fn malformed_requests_get_engine_errors() {
    let (s, v) = error_json(Personality::Vllm, json!({"messages": "nope"})).await;
    assert_eq!(
        (s, v["error"]["type"].as_str()),
        (400, Some("BadRequestError"))
    );
    let (s, v) = error_json(
        Personality::Vllm,
        json!({"model": "other", "messages": [{"role": "user", "content": "x"}]}),
    )
    .await;
    assert_eq!(
        (s, v["error"]["message"].as_str()),
        (404, Some("The model `other` does not exist."))
    );
    let (s, _) = error_json(Personality::Vllm, json!({"messages": [{"role": "user", "content": "x"}], "stream_options": {"include_usage": true}})).await;
    assert_eq!(s, 400);
    let (s, v) = error_json(Personality::Sglang, json!({"messages": []})).await;
    assert_eq!((s, v["type"].as_str()), (400, Some("Bad Request")));
    let (s, v) = error_json(
        Personality::LlamaCpp,
        json!({"messages": [{"role": "user", "content": "x"}], "max_tokens": "many"}),
    )
    .await;
    assert_eq!(
        (s, v["error"]["type"].as_str()),
        (400, Some("invalid_request_error"))
    );
    let sim = start(tiny(), Some(Personality::OpenAi)).await;
    let r = super::client::client()
        .get(format!("{}/metrics", sim.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    sim.shutdown().await;
}
