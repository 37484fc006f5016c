//! Conversion of a snapshot into the dashboard's hardware panel model.

use ldb_core::hardware::GpuSample;
use ldb_core::hardware::HardwareSnapshot;
use ldb_core::live::HardwareLive;

/// The panel model for `snap`, with at most `gpu_limit` GPU rows (lowest
/// indices first). `None` when the snapshot has no GPU: the dashboard then
/// shows no hardware panel rather than an empty one.
pub fn to_live(snap: &HardwareSnapshot, gpu_limit: usize) -> Option<HardwareLive> {
    if snap.gpus.is_empty() {
        return None;
    }
    let mut gpus: Vec<GpuSample> = snap.gpus.clone();
    gpus.sort_by_key(|g| g.index);
    gpus.truncate(gpu_limit.max(1));
    Some(HardwareLive {
        gpus,
        cpu_util_pct: snap.cpu.util_pct,
        cpu_freq_mhz: snap.cpu.freq_mhz,
        cpu_temp_c: snap.cpu.temp_max_c(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldb_core::hardware::GpuSample;

    #[test]
    fn caps_rows_and_hides_gpu_less_snapshots() {
        let snap = HardwareSnapshot {
            t_s: 1.0,
            gpus: (0..4)
                .rev()
                .map(|index| GpuSample {
                    index,
                    power_w: Some(100.0),
                    ..GpuSample::default()
                })
                .collect(),
            ..HardwareSnapshot::default()
        };
        let live = to_live(&snap, 2);
        let idx: Vec<u32> = live
            .iter()
            .flat_map(|l| l.gpus.iter().map(|g| g.index))
            .collect();
        assert_eq!(idx, [0, 1]);
        assert!(to_live(&HardwareSnapshot::default(), 8).is_none());
    }
}
