//! Reading the benchmark's own load counters from `/proc` (Linux) at the
//! window's edges; parsing lives in `ldb_core::client_load`. Elsewhere every
//! counter reads as unknown.

use std::path::Path;

use ldb_core::client_load::{
    ClientLoadReading, parse_major_faults, parse_schedstat, parse_schedstat_cpu, parse_steal,
};

/// The counters now, from the real `/proc`.
pub fn read_client_load() -> ClientLoadReading {
    read_from(Path::new("/proc"))
}

/// CPUs this process may run on (its affinity mask on Linux), at least 1.
pub fn usable_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// The counters from a `/proc`-shaped folder (`self/task/*/schedstat`,
/// `self/stat`, `stat`); a file that cannot be read leaves its counter unknown.
fn read_from(proc_root: &Path) -> ClientLoadReading {
    let text = |p: &Path| std::fs::read_to_string(p).ok();
    let tasks = proc_root.join("self/task");
    ClientLoadReading {
        runqueue_wait_ns: sum_over_threads(&tasks, parse_schedstat),
        cpu_ns: sum_over_threads(&tasks, parse_schedstat_cpu),
        major_faults: text(&proc_root.join("self/stat")).and_then(|s| parse_major_faults(&s)),
        steal_ticks: text(&proc_root.join("stat")).and_then(|s| parse_steal(&s)),
    }
}

/// One `schedstat` field summed over the threads alive now. A thread that
/// ended since the last reading takes its share with it, so the delta can
/// only undercount (threads here live for the whole run).
fn sum_over_threads(tasks: &Path, field: fn(&str) -> Option<u64>) -> Option<u64> {
    let mut sum = 0u64;
    let mut any = false;
    for entry in std::fs::read_dir(tasks).ok()?.flatten() {
        if let Some(ns) = std::fs::read_to_string(entry.path().join("schedstat"))
            .ok()
            .and_then(|s| field(&s))
        {
            sum = sum.saturating_add(ns);
            any = true;
        }
    }
    any.then_some(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proc_shaped_folder_is_read_and_summed_over_threads() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path();
        for (tid, wait) in [("100", 1_500_000_000u64), ("101", 250_000_000)] {
            let t = p.join("self/task").join(tid);
            std::fs::create_dir_all(&t).expect("mkdir");
            std::fs::write(t.join("schedstat"), format!("999 {wait} 7\n")).expect("write");
        }
        std::fs::write(
            p.join("self/stat"),
            "100 (llm-decode-bench) S 1 100 100 0 -1 0 50 0 3 0 1 1 0 0",
        )
        .expect("write");
        std::fs::write(p.join("stat"), "cpu  1 2 3 4 5 6 7 42 0 0\n").expect("write");
        let r = read_from(p);
        assert_eq!(r.runqueue_wait_ns, Some(1_750_000_000));
        assert_eq!(r.cpu_ns, Some(1998));
        assert_eq!(r.major_faults, Some(3));
        assert_eq!(r.steal_ticks, Some(42));
    }

    #[test]
    fn nothing_readable_is_all_unknown() {
        let d = tempfile::tempdir().expect("tempdir");
        assert_eq!(read_from(d.path()), ClientLoadReading::default());
    }

    #[test]
    fn this_process_has_counters_on_linux() {
        if !cfg!(target_os = "linux") {
            return;
        }
        let r = read_client_load();
        assert!(r.runqueue_wait_ns.is_some() || !Path::new("/proc/self/task").exists());
        assert!(r.major_faults.is_some());
    }
}
