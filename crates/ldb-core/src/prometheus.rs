//! Prometheus text exposition format (0.0.4), parsed without I/O.
//!
//! Only samples are kept (`# HELP`/`# TYPE` lines are skipped). Labels are
//! parsed by name with escapes (`\\`, `\"`, `\n`), so label order does not
//! matter. NaN and ±Inf samples are dropped.
//!
//! SGLang rank series: each attention-TP rank 0 reports scheduler state,
//! labelled with its *global* `tp_rank` (under DP attention with `--tp 4
//! --dp 2` that is `tp_rank` 0 and 2, with `dp_rank` 0 and 1), and with
//! `--enable-metrics-for-all-schedulers` the other ranks repeat their group's
//! values. So of the series that differ only in `tp_rank` the one with the
//! smallest rank is kept, and of pipeline stages only `pp_rank="0"`: one
//! series per DP group, which then sum. Keeping only `tp_rank="0"` would
//! drop every DP-attention group but the first.
//!
//! Series without a `dp_rank` under DP attention (a server whose DP-attention
//! schedulers carry no DP rank) would look like repeats of one group and
//! count once, dividing running, queue and token counts by the DP size. So
//! when the server's description says DP attention is on (attention-TP
//! groups of `attn_tp_size` ranks, [`MetricSet::parse_grouped`]), such series
//! are grouped by `tp_rank / attn_tp_size`, the group's lowest rank kept.

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Metric name, e.g. `vllm:num_requests_running`.
    pub name: String,
    /// Labels as (name, value) pairs in exposition order.
    pub labels: Vec<(String, String)>,
    /// The value.
    pub value: f64,
}

impl Sample {
    /// Value of label `key`, if present.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn matches(&self, filter: &[(&str, &str)]) -> bool {
        filter.iter().all(|(k, v)| self.label(k) == Some(*v))
    }
}

/// All samples of one scrape.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricSet {
    /// Samples in exposition order.
    pub samples: Vec<Sample>,
}

impl MetricSet {
    /// Parse a whole exposition; malformed lines are skipped.
    pub fn parse(text: &str) -> MetricSet {
        MetricSet::parse_grouped(text, 1)
    }

    /// Parse an SGLang exposition from a server whose attention-TP groups
    /// have `attn_tp_size` ranks (DP attention: `tp_size / dp_size`; 1 or 0
    /// without it): series without a `dp_rank` count once per group.
    pub fn parse_grouped(text: &str, attn_tp_size: u64) -> MetricSet {
        let samples: Vec<Sample> = text
            .lines()
            .filter_map(parse_line)
            .filter(|s| s.label("pp_rank").is_none_or(|r| r == "0"))
            .collect();
        MetricSet {
            samples: lowest_tp_rank_only(samples, attn_tp_size),
        }
    }

    /// True when a sample named `name` exists.
    pub fn has(&self, name: &str) -> bool {
        self.samples.iter().any(|s| s.name == name)
    }

    /// Sum over all series of `name` whose labels match `filter`; None if no series.
    pub fn sum(&self, name: &str, filter: &[(&str, &str)]) -> Option<f64> {
        let mut found = false;
        let total = self
            .samples
            .iter()
            .filter(|s| s.name == name && s.matches(filter))
            .inspect(|_| found = true)
            .map(|s| s.value)
            .sum();
        found.then_some(total)
    }

    /// Mean over all series of `name` whose labels match `filter`; None if no series.
    /// For ratio gauges that each engine of a data-parallel server reports.
    pub fn mean(&self, name: &str, filter: &[(&str, &str)]) -> Option<f64> {
        let (n, total) = self
            .samples
            .iter()
            .filter(|s| s.name == name && s.matches(filter))
            .fold((0usize, 0.0), |(n, t), s| (n + 1, t + s.value));
        (n > 0).then(|| total / n as f64)
    }

    /// First series of `name` (in exposition order).
    pub fn first(&self, name: &str) -> Option<&Sample> {
        self.samples.iter().find(|s| s.name == name)
    }

    /// True if any metric name starts with `prefix` (engine sniffing).
    pub fn has_prefix(&self, prefix: &str) -> bool {
        self.samples.iter().any(|s| s.name.starts_with(prefix))
    }
}

/// A series without its `tp_rank`: metric name, the other labels, sorted,
/// and the attention-TP group its rank falls in when no label names it.
type SeriesKey<'a> = (&'a str, Vec<(&'a str, &'a str)>, u64);

/// Of series that differ only in `tp_rank` (within one attention-TP group of
/// `attn_tp_size` ranks when they carry no `dp_rank`), keep the lowest rank.
fn lowest_tp_rank_only(samples: Vec<Sample>, attn_tp_size: u64) -> Vec<Sample> {
    fn rank(s: &Sample) -> Option<u64> {
        s.label("tp_rank").map(|r| r.parse().unwrap_or(u64::MAX))
    }
    fn group(s: &Sample, attn_tp_size: u64) -> SeriesKey<'_> {
        let mut others: Vec<(&str, &str)> = s
            .labels
            .iter()
            .filter(|(k, _)| k != "tp_rank")
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        others.sort_unstable();
        let dp_group = match (rank(s), s.label("dp_rank")) {
            (Some(r), None) if attn_tp_size > 1 => r / attn_tp_size,
            _ => 0,
        };
        (s.name.as_str(), others, dp_group)
    }
    if !samples.iter().any(|s| s.label("tp_rank").is_some()) {
        return samples;
    }
    let mut lowest: std::collections::HashMap<SeriesKey<'_>, u64> =
        std::collections::HashMap::new();
    for s in &samples {
        if let Some(r) = rank(s) {
            let e = lowest.entry(group(s, attn_tp_size)).or_insert(r);
            *e = (*e).min(r);
        }
    }
    let keep: Vec<bool> = samples
        .iter()
        .map(|s| rank(s).is_none_or(|r| lowest.get(&group(s, attn_tp_size)) == Some(&r)))
        .collect();
    samples
        .into_iter()
        .zip(keep)
        .filter_map(|(s, k)| k.then_some(s))
        .collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() {
        return None;
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        let (parsed, remaining) = parse_labels(after)?;
        labels = parsed;
        rest = remaining;
    }
    let value_text = rest.split_whitespace().next()?;
    let value: f64 = value_text.parse().ok()?;
    if !value.is_finite() {
        return None;
    }
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// Parse `k="v",k2="v2"}` and return the labels and the text after `}`.
fn parse_labels(mut s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start_matches([' ', ',']);
        if let Some(after) = s.strip_prefix('}') {
            return Some((labels, after));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim().to_string();
        let after_eq = s[eq + 1..].trim_start().strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = after_eq.char_indices();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, other)) => value.push(other),
                    None => return None,
                },
                '"' => {
                    end = Some(i);
                    break;
                }
                other => value.push(other),
            }
        }
        let end = end?;
        labels.push((key, value));
        s = &after_eq[end + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VLLM: &str = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="54",prefix="a\"b\\c"} 1.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 4.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 6.0
vllm:weird NaN
vllm:gen 1.5e3 1712345678000
"#;

    #[test]
    fn parses_labels_sums_and_skips_nan() {
        let m = MetricSet::parse(VLLM);
        assert_eq!(m.sum("vllm:num_requests_running", &[]), Some(5.0));
        assert_eq!(
            m.sum("vllm:num_requests_running", &[("engine", "1")]),
            Some(2.0)
        );
        assert_eq!(m.sum("vllm:request_success_total", &[]), Some(10.0));
        assert_eq!(m.sum("vllm:missing", &[]), None);
        assert!(!m.has("vllm:weird"));
        assert_eq!(m.sum("vllm:gen", &[]), Some(1500.0));
        let info = m.first("vllm:cache_config_info").unwrap();
        assert_eq!(info.label("num_gpu_blocks"), Some("54"));
        assert_eq!(info.label("prefix"), Some("a\"b\\c"));
        assert!(m.has_prefix("vllm:"));
    }

    #[test]
    fn drops_sglang_nonzero_tp_ranks_and_garbage() {
        let text = "sglang:num_running_reqs{tp_rank=\"0\"} 4\nsglang:num_running_reqs{tp_rank=\"1\"} 4\ngarbage line here\n{broken\nx{a=\"1\" 2\n";
        let m = MetricSet::parse(text);
        assert_eq!(m.sum("sglang:num_running_reqs", &[]), Some(4.0));
        assert_eq!(m.samples.len(), 1);
    }

    #[test]
    fn sglang_rank_series_keep_one_per_dp_group() {
        // DP attention, --tp 4 --dp 2, metrics from every scheduler: groups
        // (dp 0: tp 0, 1) and (dp 1: tp 2, 3) repeat their values.
        let text = "sglang:num_running_reqs{dp_rank=\"0\",pp_rank=\"0\",tp_rank=\"0\"} 3\n\
sglang:num_running_reqs{dp_rank=\"0\",pp_rank=\"0\",tp_rank=\"1\"} 3\n\
sglang:num_running_reqs{dp_rank=\"1\",pp_rank=\"0\",tp_rank=\"2\"} 5\n\
sglang:num_running_reqs{dp_rank=\"1\",pp_rank=\"0\",tp_rank=\"3\"} 5\n\
sglang:num_running_reqs{dp_rank=\"1\",pp_rank=\"1\",tp_rank=\"2\"} 5\n\
sglang:generation_tokens_total{model_name=\"m\"} 7\n";
        let m = MetricSet::parse(text);
        assert_eq!(m.sum("sglang:num_running_reqs", &[]), Some(8.0));
        assert_eq!(m.sum("sglang:generation_tokens_total", &[]), Some(7.0));
        // Plain tensor parallelism: rank 1 repeats rank 0.
        let tp = "sglang:num_queue_reqs{tp_rank=\"0\"} 2\nsglang:num_queue_reqs{tp_rank=\"1\"} 2\n";
        assert_eq!(
            MetricSet::parse(tp).sum("sglang:num_queue_reqs", &[]),
            Some(2.0)
        );
    }
}
