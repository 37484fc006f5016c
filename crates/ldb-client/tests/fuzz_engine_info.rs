//! Property-based fuzzing of the engine-info readers (`/v1/models`, SGLang's
//! server info, llama.cpp's `/props`, vLLM's `/version` and `/metrics`): any
//! JSON shape, with the keys these readers look for holding values of every
//! type and size, must give an answer (or a one-line reason) without a
//! panic, in bounded time. CI runs the default number of cases; a long run
//! sets `PROPTEST_CASES` (docs/reliability.md).

use std::time::{Duration, Instant};

use ldb_client::discovery::Discovery;
use ldb_client::engine_info::{
    apply_llamacpp_props, apply_sglang_info, apply_vllm_version, engine_from_metrics, from_models,
    vllm_kv,
};
use ldb_core::prometheus::MetricSet;
use proptest::prelude::*;
use serde_json::{Value, json};

const PER_INPUT: Duration = Duration::from_secs(2);

fn bounded<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let t0 = Instant::now();
    let out = f();
    assert!(t0.elapsed() < PER_INPUT, "{what} took {:?}", t0.elapsed());
    out
}

/// A JSON value of any type, biased to the numbers servers get wrong
/// (huge, negative, fractional, numeric strings).
fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<u64>().prop_map(|n| json!(n)),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("JSON has no NaN or infinity", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "\\PC{0,20}".prop_map(Value::String),
        "[0-9]{1,25}".prop_map(Value::String),
    ]
}

/// The shapes the readers expect, every value hostile: `/v1/models`,
/// SGLang's server info, llama.cpp's `/props`, vLLM's `/version`.
fn shaped_info() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::collection::vec((leaf(), leaf()), 0..4).prop_map(|cards| {
            let data: Vec<Value> = cards
                .into_iter()
                .map(|(id, len)| json!({"id": id, "max_model_len": len}))
                .collect();
            json!({"data": data})
        }),
        (leaf(), leaf(), leaf(), leaf()).prop_map(|(v, kv, run, ctx)| json!({
            "version": v, "max_total_num_tokens": kv,
            "max_running_requests": run, "context_length": ctx
        })),
        (leaf(), leaf(), leaf()).prop_map(|(slots, n_ctx, build)| json!({
            "total_slots": slots,
            "default_generation_settings": {"n_ctx": n_ctx},
            "build_info": build
        })),
        leaf().prop_map(|v| json!({"version": v})),
    ]
}

/// JSON whose objects use the keys the readers look for, in any nesting.
fn info_json() -> impl Strategy<Value = Value> {
    let keys = prop::sample::select(vec![
        "data",
        "id",
        "max_model_len",
        "version",
        "max_total_num_tokens",
        "max_running_requests",
        "context_length",
        "total_slots",
        "default_generation_settings",
        "n_ctx",
        "build_info",
    ]);
    let any_shape = leaf().prop_recursive(4, 40, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(keys.clone(), inner, 0..6).prop_map(|m| {
                Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    });
    prop_oneof![any_shape, shaped_info()]
}

/// `/metrics` text with vLLM's config-info series and hostile label values.
fn vllm_metrics() -> impl Strategy<Value = String> {
    let value = prop_oneof![
        "[0-9]{1,25}",
        "-?[0-9]{1,5}",
        "\\PC{0,8}".prop_map(|s| s.replace(['"', '\\', '\n'], "")),
    ];
    let label = prop::sample::select(vec![
        "block_size",
        "num_gpu_blocks",
        "cp_world_size",
        "prefill_context_parallel_size",
        "decode_context_parallel_size",
        "dcp_world_size",
    ]);
    let name = prop::sample::select(vec![
        "vllm:cache_config_info",
        "vllm:parallel_config_info",
        "vllm:vllm_config_info",
    ]);
    prop::collection::vec((name, prop::collection::vec((label, value), 0..6)), 0..4).prop_map(
        |series| {
            series
                .into_iter()
                .map(|(name, labels)| {
                    let l: Vec<String> =
                        labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
                    format!("{name}{{{}}} 1.0\n", l.join(","))
                })
                .collect()
        },
    )
}

proptest! {
    #[test]
    fn models_of_any_shape_never_panic(v in info_json(), requested in proptest::option::of("\\PC{0,6}")) {
        let r = bounded("/v1/models reader", || from_models(&v, requested.as_deref()));
        if let Err(e) = r {
            prop_assert!(!e.contains('\n') || e.contains("served models"), "{e}");
        }
    }

    #[test]
    fn server_descriptions_of_any_shape_never_panic(v in info_json()) {
        bounded("engine-info readers", || {
            let mut d = Discovery::default();
            apply_sglang_info(&v, "/server_info", &mut d);
            let mut d = Discovery::default();
            if apply_llamacpp_props(&v, &mut d) {
                assert!(d.max_running >= 1);
            }
            let mut d = Discovery::default();
            apply_vllm_version(&v, &mut d);
        });
    }

    #[test]
    fn vllm_config_labels_of_any_value_never_panic(text in vllm_metrics()) {
        bounded("vLLM KV reader", || {
            let mut d = Discovery::default();
            vllm_kv(&MetricSet::parse(&text), &mut d);
            let _ = engine_from_metrics(&text);
        });
    }

    #[test]
    fn engine_from_any_metrics_text_never_panics(text in "\\PC{0,5000}") {
        bounded("engine from /metrics", || engine_from_metrics(&text));
    }
}
