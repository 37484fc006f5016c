use super::*;
use crate::chunk::Channel;

fn msgs() -> Vec<Message> {
    vec![
        Message {
            role: "system",
            content: "be brief".into(),
            tool: None,
        },
        Message {
            role: "user",
            content: "hi".into(),
            tool: None,
        },
    ]
}

fn input(m: &[Message]) -> RequestInput<'_> {
    RequestInput {
        model: "m",
        messages: m,
        max_tokens: Some(7),
        ignore_eos: true,
        temperature: Some(0.0),
        ..RequestInput::default()
    }
}

#[test]
fn names_paths_and_parsing_round_trip() {
    for a in Api::ALL {
        assert_eq!(a.name().parse::<Api>(), Ok(a));
        assert!(a.path().starts_with("/v1/"));
    }
    assert!(
        "chatty"
            .parse::<Api>()
            .expect_err("test input")
            .contains("chatty")
    );
    assert_eq!(
        serde_json::to_string(&Api::Responses).expect("test input"),
        "\"responses\""
    );
}

#[test]
fn each_api_writes_its_own_body_from_one_input() {
    let m = msgs();
    let chat = Api::Chat.body(&input(&m));
    assert_eq!(chat["messages"][1]["content"], "hi");
    assert_eq!(chat["max_tokens"], 7);
    assert_eq!(chat["stream_options"]["include_usage"], true);
    assert_eq!(chat["ignore_eos"], true);
    let comp = Api::Completions.body(&input(&m));
    assert_eq!(comp["prompt"], "be brief\n\nhi");
    assert!(comp.get("messages").is_none());
    let resp = Api::Responses.body(&input(&m));
    assert_eq!(resp["input"][0]["role"], "system");
    assert_eq!(resp["max_output_tokens"], 7);
    assert!(resp.get("max_tokens").is_none() && resp.get("stream_options").is_none());
    let msg = Api::Messages.body(&input(&m));
    assert_eq!(msg["system"], "be brief");
    assert_eq!(msg["messages"].as_array().expect("test input").len(), 1);
    assert_eq!(msg["max_tokens"], 7);
    let none = RequestInput {
        max_tokens: None,
        ..input(&m)
    };
    assert_eq!(Api::Messages.body(&none)["max_tokens"], MESSAGES_NO_LIMIT);
    assert!(Api::Chat.body(&none).get("max_tokens").is_none());
    let mut extra = Map::new();
    extra.insert("max_tokens".into(), 3.into());
    let over = RequestInput {
        extra: Some(&extra),
        ..input(&m)
    };
    assert_eq!(
        Api::Chat.body(&over)["max_tokens"],
        3,
        "extra fields go on top"
    );
}

#[test]
fn responses_events_map_to_chunks() {
    let p = |s: &'static str| Api::Responses.parse_event(s.as_bytes());
    let d = p(r#"{"type":"response.output_text.delta","delta":"He","item_id":"i"}"#)
        .expect("test input");
    assert_eq!(
        (d.chunk.channel, d.chunk.has_choices, d.end),
        (Channel::Content, true, false)
    );
    assert_eq!(d.chunk.text.as_deref(), Some("He"));
    let r = p(r#"{"type":"response.reasoning_text.delta","delta":"th"}"#).expect("test input");
    assert_eq!(r.chunk.channel, Channel::Reasoning);
    let e = p(r#"{"type":"response.output_text.delta","delta":""}"#).expect("test input");
    assert!(!e.chunk.has_tokens && e.chunk.has_choices);
    let done = p(r#"{"type":"response.completed","response":{"id":"r","status":"completed","usage":{"input_tokens":9,"output_tokens":4,"input_tokens_details":{"cached_tokens":8},"output_tokens_details":{"reasoning_tokens":1}}}}"#).expect("test input");
    assert!(done.end && !done.chunk.has_choices);
    let c = &done.chunk;
    assert_eq!(
        (c.prompt_tokens, c.completion_tokens, c.cached_tokens),
        (Some(9), Some(4), Some(8))
    );
    assert_eq!(c.reasoning_tokens, Some(1));
    // `completed` says nothing of why the answer ended; an incomplete one's
    // reason reads in chat's words
    assert_eq!(c.finish_reason, None);
    let cut = p(r#"{"type":"response.completed","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}}"#).expect("test input");
    assert_eq!(cut.chunk.finish_reason.as_deref(), Some("length"));
    let filtered = p(r#"{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"content_filter"}}}"#).expect("test input");
    assert_eq!(
        filtered.chunk.finish_reason.as_deref(),
        Some("content_filter")
    );
    assert!(
        p(r#"{"type":"response.created","response":{}}"#).expect("test input")
            == ApiEvent::default()
    );
    assert!(
        p(r#"{"type":"response.brand_new","x":{}}"#)
            .expect("test input")
            .unknown
    );
    let err = p(r#"{"type":"error","message":"boom","code":"x"}"#).expect("test input");
    assert_eq!(err.chunk.error.as_deref(), Some("boom (error)"));
    let failed =
        p(r#"{"type":"response.failed","response":{"status":"failed","error":{"message":"oom"}}}"#)
            .expect("test input");
    assert_eq!(failed.chunk.error.as_deref(), Some("oom"));
    // malformed known events are errors with their reason
    for bad in [
        r#"{"type":"response.output_text.delta"}"#,
        r#"{"type":"response.output_text.delta","delta":5}"#,
        r#"{"type":"response.completed"}"#,
        r#"{"delta":"x"}"#,
        r#"not json"#,
    ] {
        assert!(p(bad).is_err(), "{bad}");
    }
}

#[test]
fn messages_events_map_to_chunks() {
    let p = |s: &'static str| Api::Messages.parse_event(s.as_bytes());
    let s = p(r#"{"type":"message_start","message":{"id":"m1","usage":{"input_tokens":3,"output_tokens":0,"cache_read_input_tokens":16,"cache_creation_input_tokens":2}}}"#).expect("test input");
    assert_eq!(
        (s.chunk.prompt_tokens, s.chunk.cached_tokens),
        (Some(21), Some(16))
    );
    assert!(!s.chunk.has_choices && s.chunk.completion_tokens.is_none());
    let t =
        p(r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#)
            .expect("test input");
    assert_eq!(
        (t.chunk.channel, t.chunk.text.as_deref()),
        (Channel::Content, Some("Hi"))
    );
    let th = p(r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}"#).expect("test input");
    assert_eq!(th.chunk.channel, Channel::Reasoning);
    let tool = p(r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\""}}"#).expect("test input");
    assert!(tool.chunk.has_tokens && tool.chunk.text.is_none());
    let md = p(r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":5}}"#).expect("test input");
    assert_eq!(
        (
            md.chunk.completion_tokens,
            md.chunk.finish_reason.as_deref()
        ),
        (Some(5), Some("length"))
    );
    for (stop, chat) in [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool_calls"),
        ("refusal", "refusal"),
    ] {
        let ev = format!(
            r#"{{"type":"message_delta","delta":{{"stop_reason":"{stop}"}},"usage":{{"output_tokens":1}}}}"#
        );
        let e = Api::Messages
            .parse_event(ev.as_bytes())
            .expect("test input");
        assert_eq!(e.chunk.finish_reason.as_deref(), Some(chat), "{stop}");
    }
    assert!(p(r#"{"type":"message_stop"}"#).expect("test input").end);
    assert_eq!(
        p(r#"{"type":"ping"}"#).expect("test input"),
        ApiEvent::default()
    );
    assert!(p(r#"{"type":"surprise"}"#).expect("test input").unknown);
    let err = p(r#"{"type":"error","error":{"type":"overloaded_error","message":"busy"}}"#)
        .expect("test input");
    assert_eq!(err.chunk.error.as_deref(), Some("busy (overloaded_error)"));
    for bad in [
        r#"{"type":"message_start"}"#,
        r#"{"type":"content_block_delta","delta":{"type":"text_delta"}}"#,
        r#"{"type":"content_block_delta"}"#,
        r#"{"type":"message_delta","usage":{"output_tokens":1}}"#,
    ] {
        assert!(p(bad).is_err(), "{bad}");
    }
}
