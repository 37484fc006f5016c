//! A fake GPU machine for tests: per-pair figures as a recorded machine
//! gave them, and one simple contention rule, so every pattern has a known
//! answer. Each GPU's copy engine sends at most `out_cap_gbps` in total: k
//! streams leaving one GPU at once share it evenly (each gets
//! min(its link, cap / k)). Latency under load grows by 10 % per other
//! stream reading the same owner's memory. Allreduce: the custom kernel
//! costs `6 µs + bytes / 40 GB/s`, NCCL `14 µs + bytes / 60 GB/s`, so the
//! custom kernel wins small sizes and NCCL large ones.

use super::{Allreduce, P2pBackend};

/// The fake machine.
#[derive(Debug, Clone)]
pub struct FakeMachine {
    /// GPUs.
    pub gpus: usize,
    /// `access[a][b]`: peer access a→b.
    pub access: Vec<Vec<bool>>,
    /// `link[s][d]`: GB/s of one copy alone.
    pub link: Vec<Vec<f64>>,
    /// Total outgoing GB/s of one GPU.
    pub out_cap_gbps: f64,
    /// `latency[r][o]`: µs per dependent read, alone.
    pub latency: Vec<Vec<f64>>,
}

impl FakeMachine {
    /// `n` GPUs on PCIe: every peer link `link` GB/s, local copies 1500,
    /// outgoing cap `cap`, 2 µs remote reads.
    pub fn pcie(n: usize, link: f64, cap: f64) -> FakeMachine {
        FakeMachine {
            gpus: n,
            access: vec![vec![true; n]; n],
            link: (0..n)
                .map(|s| (0..n).map(|d| if s == d { 1500.0 } else { link }).collect())
                .collect(),
            out_cap_gbps: cap,
            latency: (0..n)
                .map(|r| (0..n).map(|o| if r == o { 0.5 } else { 2.0 }).collect())
                .collect(),
        }
    }
}

impl P2pBackend for FakeMachine {
    fn gpu_count(&self) -> Result<usize, String> {
        Ok(self.gpus)
    }
    fn peer_access(&self, a: usize, b: usize) -> bool {
        self.access[a][b]
    }
    fn copy_gbps(&self, src: usize, dst: usize) -> Result<f64, String> {
        Ok(self.link[src][dst])
    }
    fn concurrent_gbps(&self, pairs: &[(usize, usize)]) -> Result<Vec<f64>, String> {
        Ok(pairs
            .iter()
            .map(|&(s, d)| {
                let k = pairs.iter().filter(|(x, _)| *x == s).count() as f64;
                self.link[s][d].min(self.out_cap_gbps / k)
            })
            .collect())
    }
    fn read_latency_us(&self, pairs: &[(usize, usize)]) -> Result<Vec<f64>, String> {
        Ok(pairs
            .iter()
            .map(|&(r, o)| {
                let others = pairs.iter().filter(|(_, x)| *x == o).count() as f64 - 1.0;
                self.latency[r][o] * (1.0 + 0.1 * others)
            })
            .collect())
    }
    fn allreduce_us(&self, kind: Allreduce, bytes: u64) -> Result<f64, String> {
        let b = bytes as f64;
        Ok(match kind {
            Allreduce::Custom => 6.0 + b / 40e3,
            Allreduce::Nccl => 14.0 + b / 60e3,
        })
    }
}
