//! The fast path of `parse_chunk`: a strict scanner for the usual chunk.
//!
//! Why by hand: serde_json's derived parse was a quarter of the client's CPU
//! at a thousand streams (`perf` on `bench/client-speed.sh`, see
//! docs/performance.md), most of it scanning keys and strings the
//! measurement never reads (`object`, `model`, `created`, `logprobs`, …).
//! This walks the payload once, takes the few fields `Raw` holds and skips
//! the rest without building anything.
//!
//! It only ever answers for payloads it fully understands, and then exactly
//! as serde_json would (a differential property test holds it to that). For
//! anything unusual it answers `None` and serde_json decides, including
//! every error: strings with escapes, counts that are not plain integers,
//! `error`/`timings`/`message` fields, a key given twice, nesting deeper
//! than [`MAX_DEPTH`], trailing bytes, or any grammar it does not accept.

use std::borrow::Cow;

use super::{Choices, Raw, RawChoice, RawCompletionDetails, RawDelta, RawDetails, RawUsage};

/// Deeper nesting in a skipped value is left to serde_json (which has its
/// own limit), so the scanner's recursion stays shallow.
const MAX_DEPTH: u32 = 32;

/// Counts with more digits than this are left to serde_json's float parse.
const MAX_COUNT_DIGITS: usize = 15;

/// `Raw` for `payload`, or `None` when serde_json must decide.
pub(super) fn raw(payload: &[u8]) -> Option<Raw<'_>> {
    // One UTF-8 check for the whole payload: every string then lies between
    // two ASCII quotes, so slicing the checked text there needs no check of
    // its own (serde_json would reject the same bytes in a string it reads).
    let text = std::str::from_utf8(payload).ok()?;
    // Engines never put a raw control byte in a chunk (a string may not hold
    // one, and their encoders put no tab between tokens). Refusing them all
    // here, in one pass the compiler vectorises, lets the string scan look
    // for only the quote and the backslash.
    if payload.iter().fold(0u8, |any, &c| any | u8::from(c < 0x20)) != 0 {
        return None;
    }
    let mut s = Scan {
        b: payload,
        text,
        i: 0,
    };
    let raw = s.top()?;
    s.ws();
    (s.i == payload.len()).then_some(raw)
}

/// Marks a key as seen; `None` (hand over to serde_json, which rejects a
/// duplicate field) when it was seen before.
fn once(seen: &mut u8, bit: u8) -> Option<()> {
    if *seen & bit != 0 {
        return None;
    }
    *seen |= bit;
    Some(())
}

struct Scan<'a> {
    b: &'a [u8],
    /// The same bytes, known to be UTF-8.
    text: &'a str,
    i: usize,
}

impl<'a> Scan<'a> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    /// The next byte after whitespace (not consumed).
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.b[self.i..]
            .starts_with(word)
            .then(|| self.i += word.len())
    }

    /// `true` when a `null` was there (and is consumed).
    fn null(&mut self) -> Option<bool> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Some(true);
        }
        Some(false)
    }

    /// A string without escapes, borrowed (control bytes were refused
    /// for the whole payload).
    fn str(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.i;
        let end = memchr::memchr2(b'"', b'\\', &self.b[start..])?;
        if self.b[start + end] != b'"' {
            return None;
        }
        self.i = start + end + 1;
        self.text.get(start..start + end)
    }

    fn opt_str(&mut self) -> Option<Option<Cow<'a, str>>> {
        if self.null()? {
            return Some(None);
        }
        Some(Some(Cow::Borrowed(self.str()?)))
    }

    /// A count as serde reads it into `Option<f64>`: `null`, or a plain
    /// non-negative integer (anything else goes to serde_json).
    fn opt_count(&mut self) -> Option<Option<f64>> {
        if self.null()? {
            return Some(None);
        }
        let start = self.i;
        while let Some(b'0'..=b'9') = self.b.get(self.i) {
            self.i += 1;
        }
        let digits = &self.b[start..self.i];
        if digits.is_empty()
            || digits.len() > MAX_COUNT_DIGITS
            || (digits.len() > 1 && digits[0] == b'0')
            || matches!(self.b.get(self.i), Some(b'.' | b'e' | b'E'))
        {
            return None;
        }
        let n = digits
            .iter()
            .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
        // Exact: at most 15 digits is below 2^53.
        Some(Some(n as f64))
    }

    /// A JSON number, checked against the grammar and skipped.
    fn number(&mut self) -> Option<()> {
        if self.b.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        match self.b.get(self.i)? {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            self.some_digits()?;
        }
        if let Some(b'e' | b'E') = self.b.get(self.i) {
            self.i += 1;
            if let Some(b'+' | b'-') = self.b.get(self.i) {
                self.i += 1;
            }
            self.some_digits()?;
        }
        Some(())
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn some_digits(&mut self) -> Option<()> {
        let start = self.i;
        self.digits();
        (self.i > start).then_some(())
    }

    /// Any value, skipped.
    fn skip(&mut self, depth: u32) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.str().map(drop),
            b'{' => self.object(|s, _| s.skip(depth + 1)),
            b'[' => self.array(|s| s.skip(depth + 1)),
            b'n' => self.literal(b"null"),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// An object: `value` reads the value of each key.
    fn object(&mut self, mut value: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        loop {
            let key = self.str()?;
            self.eat(b':')?;
            value(self, key)?;
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// An array: `item` reads each element.
    fn array(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        if self.peek()? == b']' {
            self.i += 1;
            return Some(());
        }
        loop {
            item(self)?;
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn top(&mut self) -> Option<Raw<'a>> {
        let mut raw = Raw {
            id: None,
            choices: None,
            usage: None,
            error: None,
            timings: None,
            object: None,
            message: None,
        };
        let mut seen = 0;
        self.object(|s, key| {
            match key {
                "id" => {
                    once(&mut seen, 1)?;
                    raw.id = s.opt_str()?;
                }
                "choices" => {
                    once(&mut seen, 2)?;
                    raw.choices = if s.null()? { None } else { Some(s.choices()?) };
                }
                "usage" => {
                    once(&mut seen, 4)?;
                    raw.usage = if s.null()? { None } else { Some(s.usage()?) };
                }
                "object" => {
                    once(&mut seen, 8)?;
                    raw.object = s.opt_str()?;
                }
                // Errors and llama.cpp's timings are rare: serde_json reads them.
                "error" | "timings" | "message" => return None,
                _ => s.skip(1)?,
            }
            Some(())
        })?;
        Some(raw)
    }

    fn choices(&mut self) -> Option<Choices<'a>> {
        let mut acc = Choices::default();
        self.array(|s| {
            acc.fold(s.choice()?);
            Some(())
        })?;
        Some(acc)
    }

    fn choice(&mut self) -> Option<RawChoice<'a>> {
        let mut c = RawChoice {
            delta: None,
            text: None,
            finish_reason: None,
        };
        let mut seen = 0;
        self.object(|s, key| {
            match key {
                "delta" => {
                    once(&mut seen, 1)?;
                    c.delta = if s.null()? { None } else { Some(s.delta()?) };
                }
                "text" => {
                    once(&mut seen, 2)?;
                    c.text = s.opt_str()?;
                }
                "finish_reason" => {
                    once(&mut seen, 4)?;
                    c.finish_reason = s.opt_str()?;
                }
                _ => s.skip(2)?,
            }
            Some(())
        })?;
        Some(c)
    }

    fn delta(&mut self) -> Option<RawDelta<'a>> {
        let mut d = RawDelta {
            content: None,
            reasoning: None,
            reasoning_content: None,
            tool_calls: None,
        };
        let mut seen = 0;
        self.object(|s, key| {
            match key {
                "content" => {
                    once(&mut seen, 1)?;
                    d.content = s.opt_str()?;
                }
                "reasoning" => {
                    once(&mut seen, 2)?;
                    d.reasoning = s.opt_str()?;
                }
                "reasoning_content" => {
                    once(&mut seen, 4)?;
                    d.reasoning_content = s.opt_str()?;
                }
                "tool_calls" => {
                    once(&mut seen, 8)?;
                    // A call's fragments are left to serde_json, which also
                    // checks their shape: they are a few chunks of a request
                    // (the call), not its usual stream of text.
                    if !s.null()? {
                        return None;
                    }
                }
                _ => s.skip(3)?,
            }
            Some(())
        })?;
        Some(d)
    }

    fn usage(&mut self) -> Option<RawUsage> {
        let mut u = RawUsage {
            completion_tokens: None,
            prompt_tokens: None,
            prompt_tokens_details: None,
            completion_tokens_details: None,
        };
        let mut seen = 0;
        self.object(|s, key| {
            match key {
                "completion_tokens" => {
                    once(&mut seen, 1)?;
                    u.completion_tokens = s.opt_count()?;
                }
                "prompt_tokens" => {
                    once(&mut seen, 2)?;
                    u.prompt_tokens = s.opt_count()?;
                }
                "prompt_tokens_details" => {
                    once(&mut seen, 4)?;
                    u.prompt_tokens_details = if s.null()? {
                        None
                    } else {
                        Some(RawDetails {
                            cached_tokens: s.one_count("cached_tokens")?,
                        })
                    };
                }
                "completion_tokens_details" => {
                    once(&mut seen, 8)?;
                    u.completion_tokens_details = if s.null()? {
                        None
                    } else {
                        Some(RawCompletionDetails {
                            reasoning_tokens: s.one_count("reasoning_tokens")?,
                        })
                    };
                }
                _ => s.skip(2)?,
            }
            Some(())
        })?;
        Some(u)
    }

    /// An object of which only the count under `name` is read.
    fn one_count(&mut self, name: &str) -> Option<Option<f64>> {
        let (mut count, mut seen) = (None, 0);
        self.object(|s, key| {
            if key == name {
                once(&mut seen, 1)?;
                count = s.opt_count()?;
            } else {
                s.skip(3)?;
            }
            Some(())
        })?;
        Some(count)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{parse_chunk, parse_chunk_serde, reduce};
    use super::*;
    use proptest::prelude::*;

    /// The fast path's answer, when it gives one.
    fn fast(p: &[u8]) -> Option<super::super::ChunkInfo<'_>> {
        raw(p).map(reduce)
    }

    /// The fast path answers only as serde_json would.
    fn agrees(p: &[u8]) {
        if let Some(f) = fast(p) {
            let s = parse_chunk_serde(p);
            assert_eq!(
                s.as_ref().ok(),
                Some(&f),
                "fast path disagrees with serde_json on {:?}",
                String::from_utf8_lossy(p)
            );
        }
    }

    const FIXTURES: [(&str, &str); 9] = [
        (
            "vllm continuous usage",
            include_str!(
                "../../../ldb-client/tests/fixtures/vllm-0.32.0/chat-stream-continuous-usage.sse"
            ),
        ),
        (
            "vllm cjk",
            include_str!(
                "../../../ldb-client/tests/fixtures/vllm-0.32.0/chat-stream-cjk-emoji.sse"
            ),
        ),
        (
            "vllm spec",
            include_str!(
                "../../../ldb-client/tests/fixtures/vllm-0.32.0/spec-ngram-chat-stream-continuous-usage.sse"
            ),
        ),
        (
            "sglang continuous usage",
            include_str!(
                "../../../ldb-client/tests/fixtures/sglang-0.5.23/chat-stream-continuous-usage.sse"
            ),
        ),
        (
            "sglang zh",
            include_str!(
                "../../../ldb-client/tests/fixtures/sglang-0.5.23/chat-stream-continuous-usage-zh.sse"
            ),
        ),
        (
            "sglang long",
            include_str!("../../../ldb-client/tests/fixtures/sglang-0.5.23/chat-stream-long.sse"),
        ),
        (
            "llama.cpp continuous usage",
            include_str!(
                "../../../ldb-client/tests/fixtures/llamacpp-11434.0.0/chat-stream-continuous-usage.sse"
            ),
        ),
        (
            "llama.cpp timings",
            include_str!(
                "../../../ldb-client/tests/fixtures/llamacpp/chat-stream-timings-per-token.sse"
            ),
        ),
        (
            "llama.cpp completions",
            include_str!("../../../ldb-client/tests/fixtures/llamacpp/completions-stream.sse"),
        ),
    ];

    fn payloads(sse: &str) -> impl Iterator<Item = &str> {
        sse.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .filter(|p| *p != "[DONE]")
    }

    #[test]
    fn recorded_engine_chunks_read_the_same_either_way() {
        for (name, sse) in FIXTURES {
            let mut n = 0;
            for p in payloads(sse) {
                n += 1;
                // Equal whichever path parse_chunk took; where the fast path
                // answered, that is its agreement with serde_json.
                assert_eq!(
                    parse_chunk(p.as_bytes()),
                    parse_chunk_serde(p.as_bytes()),
                    "{name}: {p}"
                );
            }
            assert!(n > 0, "{name}: no payloads");
        }
    }

    #[test]
    fn the_usual_vllm_and_sglang_chunks_take_the_fast_path() {
        // Without this the fast path could quietly hand everything to
        // serde_json and every other test would still pass.
        for (name, sse) in &FIXTURES[..6] {
            let all: Vec<&str> = payloads(sse).collect();
            let fast_n = all.iter().filter(|p| raw(p.as_bytes()).is_some()).count();
            // Chunks with escapes (a newline in the text) go to serde_json.
            let plain = all.iter().filter(|p| !p.contains('\\')).count();
            assert_eq!(
                fast_n, plain,
                "{name}: {fast_n} of {plain} plain chunks were fast"
            );
            assert!(
                plain * 10 >= all.len() * 7,
                "{name}: too few plain chunks to mean anything"
            );
        }
    }

    #[test]
    fn unusual_payloads_go_to_serde_json() {
        for p in [
            r#"{"id":"a","id":"b","choices":[]}"#,
            r#"{"choices":[{"delta":{"content":"a","content":"b"}}]}"#,
            r#"{"choices":[{"delta":{"content":"a\nb"}}]}"#,
            r#"{"x":{"y":["s\"q"]}}"#,
            r#"{"usage":{"completion_tokens":1.5}}"#,
            r#"{"usage":{"completion_tokens":-3}}"#,
            r#"{"usage":{"completion_tokens":1e3}}"#,
            r#"{"usage":{"completion_tokens":1234567890123456}}"#,
            r#"{"error":{"message":"boom"}}"#,
            r#"{"object":"error","message":"boom"}"#,
            r#"{"timings":{"predicted_n":3}}"#,
            r#"{"choices":[]} x"#,
            r#"{"choices":[null]}"#,
            r#"{"choices":{}}"#,
            r#"{"a":01}"#,
            r#"{"a":[1,]}"#,
            r#"{"a":tru}"#,
            "{\"a\":\"\u{1}\"}",
            r#"[1]"#,
            "",
        ] {
            assert!(raw(p.as_bytes()).is_none(), "{p}");
            agrees(p.as_bytes());
        }
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(40), "]".repeat(40));
        assert!(raw(deep.as_bytes()).is_none());
    }

    #[test]
    fn usual_variants_take_the_fast_path() {
        for p in [
            r#"{}"#,
            r#" { "choices" : [ ] , "usage" : null } "#,
            r#"{"choices":null,"usage":{"prompt_tokens":5,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":4}}}"#,
            r#"{"choices":[{"delta":{"reasoning_content":"x","tool_calls":null}}]}"#,
            r#"{"choices":[{"index":0,"text":"xy","finish_reason":"length"}],"created":-1.5e-3}"#,
            r#"{"object":"chat.completion.chunk","x":{"y":[true,false,null,"sq"]}}"#,
        ] {
            assert!(raw(p.as_bytes()).is_some(), "{p}");
            agrees(p.as_bytes());
        }
    }

    /// A JSON-ish value for the property test: valid and invalid pieces.
    fn value() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just("null".to_string()),
            Just("true".to_string()),
            Just("false".to_string()),
            Just("tru".to_string()),
            prop::sample::select(vec![
                "0",
                "7",
                "42",
                "-3",
                "1.5",
                "1e3",
                "2E-2",
                "01",
                "-",
                "1.",
                ".5",
                "-0",
                "123456789012345",
                "1234567890123456789",
                "9e999",
            ])
            .prop_map(str::to_string),
            prop::sample::select(vec![
                r#""""#,
                r#""a""#,
                r#""héllo""#,
                r#""你好""#,
                r#""a\nb""#,
                r#""q\"q""#,
                r#""\u00e9""#,
                r#""\ud800""#,
                r#""\x""#,
                "\"\u{1}\"",
                r#""stop""#,
                r#""length""#,
                r#""unterminated"#,
            ])
            .prop_map(str::to_string),
        ];
        leaf.prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                prop::collection::vec((key(), inner), 0..5).prop_map(|kv| {
                    let body: Vec<String> =
                        kv.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
                    format!("{{{}}}", body.join(","))
                }),
            ]
        })
    }

    /// Keys the parser reads, at every level, and others.
    fn key() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "id",
            "object",
            "choices",
            "usage",
            "error",
            "timings",
            "message",
            "delta",
            "content",
            "reasoning",
            "reasoning_content",
            "tool_calls",
            "text",
            "finish_reason",
            "index",
            "completion_tokens",
            "prompt_tokens",
            "prompt_tokens_details",
            "completion_tokens_details",
            "cached_tokens",
            "reasoning_tokens",
            "model",
            "logprobs",
            "i\\u0064",
        ])
        .prop_map(|k| format!("\"{k}\""))
    }

    /// Mostly what the slot usually holds, sometimes anything.
    fn mostly(usual: impl Strategy<Value = String> + 'static) -> BoxedStrategy<String> {
        prop_oneof![12 => usual, 1 => value()].boxed()
    }

    fn plain_string() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "null",
            r#""""#,
            r#""a""#,
            r#"" the""#,
            r#""héllo""#,
            r#""你好""#,
            r#""🙂""#,
            r#""stop""#,
            r#""length""#,
        ])
        .prop_map(str::to_string)
    }

    fn plain_count() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("null".to_string()),
            (0u64..100_000).prop_map(|n| n.to_string())
        ]
    }

    fn object_of(fields: Vec<(&'static str, BoxedStrategy<String>)>) -> BoxedStrategy<String> {
        let parts: Vec<BoxedStrategy<Option<String>>> = fields
            .into_iter()
            .map(|(k, v)| {
                prop::option::weighted(0.8, v.prop_map(move |v| format!("\"{k}\":{v}"))).boxed()
            })
            .collect();
        (parts, prop::option::weighted(0.1, (key(), value())))
            .prop_map(|(parts, extra)| {
                let mut body: Vec<String> = parts.into_iter().flatten().collect();
                // now and then one more key: one the parser reads (again), or any other
                body.extend(extra.map(|(k, v)| format!("{k}:{v}")));
                format!("{{{}}}", body.join(","))
            })
            .boxed()
    }

    /// A chunk shaped like the engines' ones: mostly usual values, with
    /// odd ones, extra keys and repeated keys now and then.
    fn chunk() -> impl Strategy<Value = String> {
        let details = |k: &'static str| {
            mostly(prop_oneof![
                Just("null".to_string()),
                plain_count().prop_map(move |c| format!("{{\"{k}\":{c}}}")),
            ])
        };
        let delta = object_of(vec![
            ("role", mostly(Just(r#""assistant""#.to_string()))),
            ("content", mostly(plain_string())),
            ("reasoning", mostly(plain_string())),
            ("reasoning_content", mostly(plain_string())),
            ("tool_calls", mostly(Just("null".to_string()))),
        ]);
        let choice = object_of(vec![
            ("index", mostly(Just("0".to_string()))),
            ("delta", mostly(delta)),
            ("text", mostly(plain_string())),
            ("logprobs", mostly(Just("null".to_string()))),
            ("finish_reason", mostly(plain_string())),
        ]);
        let usage = object_of(vec![
            ("prompt_tokens", mostly(plain_count())),
            ("total_tokens", mostly(plain_count())),
            ("completion_tokens", mostly(plain_count())),
            ("prompt_tokens_details", details("cached_tokens")),
            ("completion_tokens_details", details("reasoning_tokens")),
        ]);
        let choices =
            mostly(prop::collection::vec(choice, 0..3).prop_map(|c| format!("[{}]", c.join(","))));
        let top = object_of(vec![
            ("id", mostly(Just(r#""chatcmpl-1""#.to_string()))),
            (
                "object",
                mostly(Just(r#""chat.completion.chunk""#.to_string())),
            ),
            ("created", mostly(Just("1796139462".to_string()))),
            ("model", mostly(Just(r#""SmolLM2""#.to_string()))),
            ("choices", choices),
            ("usage", mostly(usage)),
        ]);
        (
            top,
            prop::collection::vec((key(), value()), 0..2),
            any::<bool>(),
        )
            .prop_map(|(top, extra, add)| {
                if !add || extra.is_empty() {
                    return top;
                }
                // extra keys (possibly repeating one the parser reads) at the end
                let more: Vec<String> =
                    extra.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
                let inner = top.trim_end_matches('}');
                let sep = if inner.ends_with('{') { "" } else { "," };
                format!("{inner}{sep}{}}}", more.join(","))
            })
    }

    #[test]
    fn the_generated_chunks_reach_the_fast_path_often() {
        // A differential test whose inputs all go to serde_json tests nothing.
        use proptest::strategy::ValueTree;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let strategy = chunk();
        let fast_n = (0..2000)
            .filter(|_| {
                let p = strategy.new_tree(&mut runner).expect("tree").current();
                raw(p.as_bytes()).is_some()
            })
            .count();
        eprintln!("{fast_n} of 2000 generated chunks were fast");
        assert!(
            fast_n >= 400,
            "only {fast_n} of 2000 generated chunks were fast"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn the_fast_path_agrees_with_serde_json(p in chunk()) {
            agrees(p.as_bytes());
        }

        #[test]
        fn mutated_chunks_too(p in chunk(), at in any::<prop::sample::Index>(), b in any::<u8>(), cut in any::<bool>()) {
            let mut bytes = p.into_bytes();
            let i = at.index(bytes.len());
            if cut { bytes.truncate(i) } else { bytes[i] = b }
            agrees(&bytes);
        }

        #[test]
        fn any_json_value_too(p in value()) {
            agrees(p.as_bytes());
        }
    }
}
