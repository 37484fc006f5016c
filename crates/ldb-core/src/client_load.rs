//! What the benchmark's own process went through during a window, from
//! Linux's `/proc` counters: time its threads waited for a CPU, major page
//! faults, and time the hypervisor took from the machine's CPUs (steal). They
//! tell a user why a window stalled (§9.1 of the methodology): an overloaded
//! client machine shows run-queue wait, memory pressure shows major faults, a
//! busy VM host shows steal. Parsing only; the runner reads the files.

/// `/proc` reports CPU time in clock ticks of `USER_HZ`, which Linux fixes at
/// 100 for user space on every architecture it exports `/proc/stat` for.
pub const USER_HZ: f64 = 100.0;

/// One reading of the counters (absolute, since boot or process start).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ClientLoadReading {
    /// Sum over the process's threads of the time spent runnable but waiting
    /// for a CPU, nanoseconds (`/proc/self/task/*/schedstat`, 2nd field).
    pub runqueue_wait_ns: Option<u64>,
    /// Major page faults of the process (`/proc/self/stat`, field 12).
    pub major_faults: Option<u64>,
    /// Machine-wide steal time, clock ticks (`/proc/stat`, `cpu` line, 8th value).
    pub steal_ticks: Option<u64>,
    /// Sum over the process's threads of their time on a CPU, nanoseconds
    /// (`/proc/self/task/*/schedstat`, 1st field).
    pub cpu_ns: Option<u64>,
}

/// What changed between two readings.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ClientLoad {
    /// Run-queue wait summed over the process's threads, seconds.
    pub runqueue_wait_s: Option<f64>,
    /// Major page faults.
    pub major_faults: Option<u64>,
    /// Steal time of the whole machine (all CPUs together), seconds.
    pub steal_s: Option<f64>,
    /// CPU time of the process's threads, seconds.
    pub cpu_s: Option<f64>,
}

impl ClientLoadReading {
    /// The change from `earlier` to `self`; a counter missing from either
    /// reading, or one that went backwards, gives `None`.
    pub fn since(&self, earlier: &ClientLoadReading) -> ClientLoad {
        fn delta(a: Option<u64>, b: Option<u64>) -> Option<u64> {
            a?.checked_sub(b?)
        }
        ClientLoad {
            runqueue_wait_s: delta(self.runqueue_wait_ns, earlier.runqueue_wait_ns)
                .map(|ns| ns as f64 / 1e9),
            major_faults: delta(self.major_faults, earlier.major_faults),
            steal_s: delta(self.steal_ticks, earlier.steal_ticks).map(|t| t as f64 / USER_HZ),
            cpu_s: delta(self.cpu_ns, earlier.cpu_ns).map(|ns| ns as f64 / 1e9),
        }
    }
}

impl ClientLoad {
    /// The load as a window's record keeps it (see `CellExtras`).
    pub fn from_parts(
        runqueue_wait_s: Option<f64>,
        major_faults: Option<u64>,
        steal_s: Option<f64>,
    ) -> ClientLoad {
        ClientLoad {
            runqueue_wait_s,
            major_faults,
            steal_s,
            cpu_s: None,
        }
    }

    /// "waited 80.1 s for a CPU, 0 major page faults, 0.0 s VM steal": the
    /// known counters for a stall message; `None` when none is known.
    pub fn describe(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(w) = self.runqueue_wait_s {
            parts.push(format!("its threads waited {w:.1} s for a CPU"));
        }
        if let Some(f) = self.major_faults {
            parts.push(format!("{f} major page faults"));
        }
        if let Some(s) = self.steal_s {
            parts.push(format!("{s:.1} s taken by the VM host (steal)"));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// Run-queue wait (ns) from one `schedstat` file: "on-CPU ns, waiting ns, slices".
pub fn parse_schedstat(text: &str) -> Option<u64> {
    text.split_whitespace().nth(1)?.parse().ok()
}

/// On-CPU time (ns) from one `schedstat` file (its first field).
pub fn parse_schedstat_cpu(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// Major faults from `/proc/<pid>/stat`. The command name (field 2) is in
/// parentheses and may hold spaces or parentheses itself, so fields are
/// counted from the last `)`: state is field 3, majflt field 12.
pub fn parse_major_faults(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(12 - 3)?.parse().ok()
}

/// Steal ticks of all CPUs from `/proc/stat` (the `cpu ` line's 8th value;
/// older kernels without it give `None`).
pub fn parse_steal(proc_stat: &str) -> Option<u64> {
    let line = proc_stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some("cpu"))?;
    line.split_whitespace().nth(8)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_second_field_is_the_wait() {
        assert_eq!(parse_schedstat("4221540 1234567 37\n"), Some(1_234_567));
        assert_eq!(parse_schedstat("4221540\n"), None);
        assert_eq!(parse_schedstat(""), None);
        assert_eq!(parse_schedstat_cpu("4221540 1234567 37\n"), Some(4_221_540));
        assert_eq!(parse_schedstat_cpu(""), None);
    }

    #[test]
    fn major_faults_survive_a_command_name_with_spaces_and_parentheses() {
        // Fields after the name: state(3) ppid pgrp session tty tpgid flags
        // minflt cminflt majflt(12) ...
        let stat = "4242 (llm (decode) bench) S 1 4242 4242 0 -1 4194560 2180 0 17 0 12 3 0 0";
        assert_eq!(parse_major_faults(stat), Some(17));
        assert_eq!(parse_major_faults("4242 (x) S 1 2"), None);
        assert_eq!(parse_major_faults("no parenthesis"), None);
    }

    #[test]
    fn steal_is_the_eighth_value_of_the_cpu_line() {
        let text = "cpu  1993858 307606 325475 1830701 23423 0 9710 25395 0 0\n\
                    cpu0 997675 133463 145421 959253 5305 0 4048 12640 0 0\n";
        assert_eq!(parse_steal(text), Some(25395));
        assert_eq!(parse_steal("cpu  1 2 3 4 5 6 7\n"), None);
        assert_eq!(parse_steal("intr 5\n"), None);
    }

    #[test]
    fn a_stall_message_names_the_known_counters_only() {
        let all = ClientLoad::from_parts(Some(80.06), Some(0), Some(0.0));
        assert_eq!(
            all.describe().as_deref(),
            Some(
                "its threads waited 80.1 s for a CPU, 0 major page faults, \
                 0.0 s taken by the VM host (steal)"
            )
        );
        let faults = ClientLoad::from_parts(None, Some(1200), None);
        assert_eq!(faults.describe().as_deref(), Some("1200 major page faults"));
        assert_eq!(ClientLoad::default().describe(), None);
    }

    #[test]
    fn deltas_in_seconds_and_none_for_missing_or_backwards_counters() {
        let a = ClientLoadReading {
            runqueue_wait_ns: Some(1_000_000_000),
            major_faults: Some(10),
            steal_ticks: Some(500),
            cpu_ns: Some(1_000_000_000),
        };
        let b = ClientLoadReading {
            runqueue_wait_ns: Some(3_500_000_000),
            major_faults: Some(14),
            steal_ticks: Some(750),
            cpu_ns: Some(1_250_000_000),
        };
        let d = b.since(&a);
        assert_eq!(d.runqueue_wait_s, Some(2.5));
        assert_eq!(d.major_faults, Some(4));
        assert_eq!(d.steal_s, Some(2.5));
        assert_eq!(d.cpu_s, Some(0.25));
        let back = a.since(&b);
        assert_eq!(back, ClientLoad::default());
        let missing = b.since(&ClientLoadReading::default());
        assert_eq!(missing, ClientLoad::default());
    }
}
