//! `nvidia-smi` fallback: one `--query-gpu` call per sample plus
//! `dmon -s t -c 1` for PCIe throughput.

use super::GpuConfig;
use crate::command::{CommandOutcome, run_with_timeout};
use crate::error::TelemetryError;
use ldb_core::hardware::GpuSample;
use ldb_core::hardware::smi::{
    GpuInventory, INVENTORY_FIELDS, SAMPLE_FIELDS, THROTTLE_FIELD, merge_dmon, parse_dmon,
    parse_inventory, parse_sample_query,
};
use std::path::PathBuf;
use std::time::Duration;

/// After this many failed `dmon` calls in a row, PCIe is no longer asked for.
const DMON_GIVE_UP: u32 = 3;

/// Samples GPUs by running `nvidia-smi`.
#[derive(Debug)]
pub struct SmiSource {
    program: PathBuf,
    query_timeout: Duration,
    dmon_timeout: Duration,
    with_throttle: bool,
    dmon_failures: u32,
}

impl SmiSource {
    /// Checks that the query works (one call) and returns the source.
    pub fn open(cfg: &GpuConfig) -> Result<Self, TelemetryError> {
        let mut s = SmiSource {
            program: cfg.nvidia_smi.clone(),
            query_timeout: cfg.query_timeout,
            dmon_timeout: cfg.dmon_timeout,
            with_throttle: true,
            dmon_failures: 0,
        };
        s.query().map(|_| s)
    }

    /// Runs the query; if the driver rejects the throttle field, drops it
    /// for good and asks again.
    fn query(&mut self) -> Result<Vec<GpuSample>, TelemetryError> {
        let fields = if self.with_throttle {
            format!("--query-gpu={SAMPLE_FIELDS},{THROTTLE_FIELD}")
        } else {
            format!("--query-gpu={SAMPLE_FIELDS}")
        };
        let r = run_with_timeout(
            &self.program,
            &[&fields, "--format=csv,noheader,nounits"],
            self.query_timeout,
        );
        if self.with_throttle && r.returncode != 0 && !r.timed_out && !r.not_found {
            self.with_throttle = false;
            return self.query();
        }
        let text = r.into_result()?;
        let parsed = parse_sample_query(&text);
        if parsed.rows.is_empty() {
            let why = parsed
                .problems
                .first()
                .cloned()
                .unwrap_or_else(|| "empty output".to_string());
            return Err(TelemetryError::NoGpus(why));
        }
        Ok(parsed.rows)
    }

    /// One sample of every GPU, with PCIe throughput when `dmon` works.
    pub fn sample(&mut self) -> Result<Vec<GpuSample>, TelemetryError> {
        let mut gpus = self.query()?;
        if self.dmon_failures < DMON_GIVE_UP {
            let r = run_with_timeout(
                &self.program,
                &["dmon", "-s", "t", "-c", "1"],
                self.dmon_timeout,
            );
            let rows = r
                .into_result()
                .map(|t| parse_dmon(&t).rows)
                .unwrap_or_default();
            if rows.is_empty() {
                self.dmon_failures += 1;
            } else {
                self.dmon_failures = 0;
                merge_dmon(&mut gpus, &rows);
            }
        }
        Ok(gpus)
    }

    /// The startup inventory query.
    pub fn inventory(&mut self) -> Result<Vec<GpuInventory>, TelemetryError> {
        let fields = format!("--query-gpu={INVENTORY_FIELDS}");
        let r = run_with_timeout(
            &self.program,
            &[&fields, "--format=csv,noheader,nounits"],
            self.query_timeout,
        );
        Ok(parse_inventory(&r.into_result()?).rows)
    }
}
