//! Value checks that serde cannot express, and one-line rendering of TOML errors.

use super::{FaultConfig, KvConfig, Scenario, SchedulerConfig, SpecConfig, StepTimeConfig};

/// Turn a TOML/serde error into one line: `line N: <message> (at `<source line>`)`.
pub(super) fn describe_toml_error(text: &str, err: &toml::de::Error) -> String {
    let message = err.message().replace('\n', " ");
    match err.span() {
        Some(span) => {
            let line_no = text[..span.start.min(text.len())].matches('\n').count() + 1;
            let line = text.lines().nth(line_no - 1).unwrap_or("").trim();
            format!("line {line_no}: {message} (at `{line}`)")
        }
        None => message,
    }
}

fn check(ok: bool, key: &str, expected: &str, got: impl std::fmt::Display) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(format!("key `{key}`: expected {expected}, got {got}"))
    }
}

fn share(key: &str, v: f64) -> Result<(), String> {
    check((0.0..=1.0).contains(&v), key, "a share between 0 and 1", v)
}

fn non_negative(key: &str, v: f64) -> Result<(), String> {
    check(v.is_finite() && v >= 0.0, key, "a finite number >= 0", v)
}

impl Scenario {
    /// Check every value; the error names the key and the expected form.
    pub(super) fn validate(&self) -> Result<(), String> {
        self.validate_answers()?;
        self.validate_model()?;
        validate_scheduler(&self.scheduler)?;
        validate_step_time(&self.step_time)?;
        validate_kv(&self.kv)?;
        if let Some(spec) = &self.spec {
            validate_spec(spec)?;
        }
        self.validate_tokenizer_and_server()?;
        validate_faults(&self.faults)
    }

    /// Every scripted answer: at least one token, a finish reason we send.
    fn validate_answers(&self) -> Result<(), String> {
        for (i, a) in self.output.answers.iter().enumerate() {
            check(
                a.completion_tokens >= 1,
                &format!("output.answers[{i}].completion_tokens"),
                "at least 1",
                a.completion_tokens,
            )?;
            let fin = a.finish_reason.as_deref().unwrap_or("stop");
            check(
                matches!(fin, "stop" | "length"),
                &format!("output.answers[{i}].finish_reason"),
                "stop or length",
                fin,
            )?;
        }
        Ok(())
    }

    /// The served model's name and context length.
    fn validate_model(&self) -> Result<(), String> {
        check(
            !self.model.is_empty(),
            "model",
            "a non-empty model name",
            "\"\"",
        )?;
        check(
            self.max_model_len >= 16,
            "max_model_len",
            "an integer >= 16",
            self.max_model_len,
        )
    }

    /// The tokenizer's ratio and the decode log's interval.
    fn validate_tokenizer_and_server(&self) -> Result<(), String> {
        let t = &self.tokenizer;
        check(
            t.chars_per_token.is_finite() && t.chars_per_token >= 1.0,
            "tokenizer.chars_per_token",
            "a number >= 1.0",
            t.chars_per_token,
        )?;
        check(
            self.server.decode_log_interval >= 1,
            "server.decode_log_interval",
            "an integer >= 1",
            self.server.decode_log_interval,
        )
    }
}

/// Batch cap, prefill speed and chunk, stream interval: all positive.
fn validate_scheduler(s: &SchedulerConfig) -> Result<(), String> {
    check(
        s.max_running >= 1,
        "scheduler.max_running",
        "an integer >= 1",
        s.max_running,
    )?;
    check(
        s.prefill_tok_s.is_finite() && s.prefill_tok_s > 0.0,
        "scheduler.prefill_tok_s",
        "a number > 0 (tokens per second)",
        s.prefill_tok_s,
    )?;
    check(
        s.prefill_chunk_tokens >= 1,
        "scheduler.prefill_chunk_tokens",
        "an integer >= 1",
        s.prefill_chunk_tokens,
    )?;
    if let Some(b) = s.max_num_batched_tokens {
        // Room for a full batch of decodes and at least one prompt token,
        // or a prompt arriving beside a full batch would never prefill.
        check(
            b > s.max_running,
            "scheduler.max_num_batched_tokens",
            "an integer > scheduler.max_running",
            b,
        )?;
    }
    check(
        s.stream_interval >= 1,
        "scheduler.stream_interval",
        "an integer >= 1",
        s.stream_interval,
    )
}

/// The step-time formula's terms: finite and never negative.
fn validate_step_time(st: &StepTimeConfig) -> Result<(), String> {
    non_negative("step_time.base_s", st.base_s)?;
    non_negative("step_time.per_seq_s", st.per_seq_s)?;
    non_negative("step_time.per_kv_token_s", st.per_kv_token_s)?;
    non_negative("step_time.drift_per_s", st.drift_per_s)
}

/// Block size, block count and context-parallel degree: all positive.
fn validate_kv(kv: &KvConfig) -> Result<(), String> {
    check(
        kv.block_size >= 1,
        "kv.block_size",
        "an integer >= 1",
        kv.block_size,
    )?;
    check(
        kv.num_blocks >= 1,
        "kv.num_blocks",
        "an integer >= 1",
        kv.num_blocks,
    )?;
    check(kv.cp >= 1, "kv.cp", "an integer >= 1", kv.cp)
}

/// Draft length, and one non-increasing acceptance probability per position.
fn validate_spec(spec: &SpecConfig) -> Result<(), String> {
    let k = spec.num_speculative_tokens as usize;
    check(
        (1..=16).contains(&k),
        "spec.num_speculative_tokens",
        "an integer from 1 to 16",
        k,
    )?;
    check(
        spec.accept_probs.len() == k,
        "spec.accept_probs",
        "one probability per draft position (num_speculative_tokens entries)",
        format!("{} entries", spec.accept_probs.len()),
    )?;
    let mut prev = 1.0;
    for (i, &p) in spec.accept_probs.iter().enumerate() {
        check(
            (0.0..=prev).contains(&p),
            "spec.accept_probs",
            "non-increasing probabilities in [0, 1] (unconditional per position)",
            format!("{p} at position {i}"),
        )?;
        prev = p;
    }
    Ok(())
}

/// Fault shares in [0, 1], a positive keep-alive interval, a 5xx status,
/// and non-negative delays.
fn validate_faults(f: &FaultConfig) -> Result<(), String> {
    share("faults.error_share", f.error_share)?;
    share("faults.drop_share", f.drop_share)?;
    share("faults.metrics_fail_share", f.metrics_fail_share)?;
    share("faults.keepalive_only_share", f.keepalive_only_share)?;
    check(
        f.keepalive_interval_s.is_finite() && f.keepalive_interval_s > 0.0,
        "faults.keepalive_interval_s",
        "a number of seconds > 0",
        f.keepalive_interval_s,
    )?;
    check(
        (500..=599).contains(&f.error_status),
        "faults.error_status",
        "an HTTP status from 500 to 599",
        f.error_status,
    )?;
    non_negative("faults.stall_seconds", f.stall_seconds)?;
    non_negative("faults.metrics_delay_s", f.metrics_delay_s)?;
    non_negative("faults.frontend_chunk_delay_s", f.frontend_chunk_delay_s)
}
