//! The phantom-queue fault of `/metrics` (`faults.metrics_queue_blip_after_s`):
//! a waiting-requests gauge that one read catches and the next does not,
//! as a restarting request waits one engine step in a real server's queue.
//! The benchmark must not call a cell capacity-limited on such a reading
//! alone; this lets a test put it exactly where it wants.

use crate::scenario::FaultConfig;
use crate::server::HttpStats;

/// Waiting requests this read adds (0 almost always): the first
/// `metrics_queue_blip_reads` reads that arrive at least
/// `metrics_queue_blip_after_s` after the latest generation request get
/// `metrics_queue_blip` each; the next quiet stretch starts with a new
/// generation request. `now` is seconds since the simulator started.
pub(super) fn phantom_queue(f: &FaultConfig, http: &mut HttpStats, now: f64) -> usize {
    let after = f.metrics_queue_blip_after_s;
    let Some(&last) = http.arrivals.last() else {
        return 0;
    };
    if after <= 0.0 || now - last < after {
        return 0;
    }
    if http.queue_blip_state.0 != last {
        http.queue_blip_state = (last, f.metrics_queue_blip_reads);
    }
    if http.queue_blip_state.1 == 0 {
        return 0;
    }
    http.queue_blip_state.1 -= 1;
    http.injected_queue_blips += 1;
    f.metrics_queue_blip
}
