//! How a cell is written: a borrowed view of [`CellResult`] whose field order
//! is the key order of the file.
//!
//! It exists for one key: the reference wrote `capacity_limited`, a
//! scheduler verdict, after the readiness keys, so the scheduler part cannot
//! be written in one piece. Reading needs no view: the derived
//! `Deserialize` of `CellResult` finds keys by name in any order.

use serde::{Serialize, Serializer};

use super::wire::{round3, round6};
use super::{
    AggregateSource, CellExtras, CellResult, DecodeMode, LatencyStats, RequestSample,
    SchedulerFields, SpecFields,
};
use crate::hardware::HardwareSummary;

#[derive(Serialize)]
struct CellOut<'a> {
    concurrency: u32,
    context_tokens: u64,
    benchmark_mode: DecodeMode,
    request_count_target: u64,
    warmup_request_count: u64,
    #[serde(serialize_with = "round6")] // see `measurement_seconds_as_written`
    measurement_seconds: f64,
    #[serde(serialize_with = "round6")]
    measurement_wall_seconds: f64,
    client_output_tokens: u64,
    server_output_tokens: u64,
    aggregate_source: AggregateSource,
    aggregate_tps: Option<f64>,
    per_request_avg_tps: Option<f64>,
    #[serde(flatten)]
    latency: &'a LatencyStats,
    request_samples: &'a [RequestSample],
    total_tokens: u64,
    wall_time: f64,
    num_completed: u64,
    num_errors: u64,
    server_gen_throughput: f64,
    server_utilization: f64,
    #[serde(flatten)]
    spec: &'a SpecFields,
    #[serde(flatten)]
    sched: &'a SchedulerFields,
    warmup_timed_out: bool,
    #[serde(serialize_with = "round3")]
    warmup_duration: f64,
    ready_reason: &'a str,
    timeout_reason: &'a str,
    capacity_limited: bool,
    hardware_summary: &'a HardwareSummary,
    #[serde(flatten)]
    ext: &'a CellExtras,
}

impl CellResult {
    /// `measurement_seconds` as the file holds it (6 decimals). What is
    /// judged from a cell both in the run and from its saved file (goodput)
    /// reads it this way, or the two differ in the last bits.
    pub fn measurement_seconds_as_written(&self) -> f64 {
        super::round(self.measurement_seconds, 6)
    }
}

impl Serialize for CellResult {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        CellOut {
            concurrency: self.concurrency,
            context_tokens: self.context_tokens,
            benchmark_mode: self.benchmark_mode,
            request_count_target: self.request_count_target,
            warmup_request_count: self.warmup_request_count,
            measurement_seconds: self.measurement_seconds,
            measurement_wall_seconds: self.measurement_wall_seconds,
            client_output_tokens: self.client_output_tokens,
            server_output_tokens: self.server_output_tokens,
            aggregate_source: self.aggregate_source,
            aggregate_tps: self.aggregate_tps,
            per_request_avg_tps: self.per_request_avg_tps,
            latency: &self.latency,
            request_samples: &self.request_samples,
            total_tokens: self.total_tokens,
            wall_time: self.wall_time,
            num_completed: self.num_completed,
            num_errors: self.num_errors,
            server_gen_throughput: self.server_gen_throughput,
            server_utilization: self.server_utilization,
            spec: &self.spec,
            sched: &self.sched,
            warmup_timed_out: self.warmup_timed_out,
            warmup_duration: self.warmup_duration,
            ready_reason: &self.ready_reason,
            timeout_reason: &self.timeout_reason,
            capacity_limited: self.sched.capacity_limited,
            hardware_summary: &self.hardware_summary,
            ext: &self.ext,
        }
        .serialize(s)
    }
}
