//! Number formats of the report: the shared ones (contexts, thousands) from
//! `ldb_core::numfmt`, and the report's three compact millisecond styles
//! built on its significant-digit and kilo helpers.

pub(crate) use ldb_core::numfmt::{context, thousands, thousands_f};
use ldb_core::numfmt::{kilo, sig};

/// Compact ms of the TTFT/ITL detail: `134`, `9k`, `15k`; `—` for zero.
///
/// Below 1 s: whole milliseconds. From 1 s: whole seconds followed by `k`
/// (so 8.6 s reads `9k`, 54 s reads `54k`).
pub(crate) fn ms_detail(seconds: f64) -> String {
    let ms = seconds * 1000.0;
    if !ms.is_finite() || ms <= 0.0 {
        "—".into()
    } else if ms < 1000.0 {
        format!("{ms:.0}")
    } else {
        kilo(ms, 0)
    }
}

/// Compact ms of the latency matrix: `8.7k`, `17.2k`, `512`, `42.5`, `3.25`; `—` for zero.
pub(crate) fn ms_latency(seconds: f64) -> String {
    let ms = seconds * 1000.0;
    if !ms.is_finite() || ms <= 0.0 {
        "—".into()
    } else if ms >= 1000.0 {
        kilo(ms, 1)
    } else {
        sig(ms, 3)
    }
}

/// Plain ms of the burst table: `1,234`, `512`, `42.5`, `3.25`; `—` for zero.
pub(crate) fn ms_plain(seconds: f64) -> String {
    let ms = seconds * 1000.0;
    if !ms.is_finite() || ms <= 0.0 {
        "—".into()
    } else if ms >= 1000.0 {
        thousands_f(ms)
    } else {
        sig(ms, 3)
    }
}

/// A rate in the burst table: `1,234`, `123.4`, `12.34`; `—` for zero.
pub(crate) fn rate(v: f64) -> String {
    if !v.is_finite() || v <= 0.0 {
        "—".into()
    } else if v >= 1000.0 {
        thousands_f(v)
    } else {
        sig(v, 4)
    }
}

/// Seconds as `9m 37s`, `1h 02m 05s` or `42s`.
pub(crate) fn duration(seconds: f64) -> String {
    let total = seconds.max(0.0).round() as u64;
    let (h, m, s) = (total / 3600, (total / 60) % 60, total % 60);
    if h > 0 {
        format!("{h}h {m:02}m {s:02}s")
    } else if m > 0 {
        format!("{m}m {s}s")
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contexts() {
        assert_eq!(context(0), "0");
        assert_eq!(context(500), "500");
        assert_eq!(context(65536), "64k");
        assert_eq!(context(131072), "128k");
        // The dashboard's format too (it printed 1k here before).
        assert_eq!(context(1536), "1.5k");
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(8199), "8,199");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands_f(4319.6), "4,320");
        assert_eq!(thousands_f(-1200.0), "-1,200");
    }

    #[test]
    fn detail_ms_matches_reference_examples() {
        assert_eq!(ms_detail(0.13393967), "134");
        assert_eq!(ms_detail(0.0078036), "8");
        assert_eq!(ms_detail(8.6248575), "9k");
        assert_eq!(ms_detail(1.0), "1k");
        assert_eq!(ms_detail(15.1455), "15k");
        assert_eq!(ms_detail(53.9296), "54k");
        assert_eq!(ms_detail(0.0), "—");
    }

    #[test]
    fn latency_ms_matches_reference_examples() {
        assert_eq!(ms_latency(8.6847972), "8.7k");
        assert_eq!(ms_latency(17.2137853), "17.2k");
        assert_eq!(ms_latency(92.5519451), "92.6k");
        assert_eq!(ms_latency(0.512), "512");
        assert_eq!(ms_latency(0.0425), "42.5");
        assert_eq!(ms_latency(0.00325), "3.25");
        assert_eq!(ms_latency(0.0), "—");
    }

    #[test]
    fn burst_formats() {
        assert_eq!(ms_plain(1.2344), "1,234");
        assert_eq!(ms_plain(0.2), "200");
        assert_eq!(rate(1234.4), "1,234");
        assert_eq!(rate(123.44), "123.4");
        assert_eq!(rate(12.344), "12.34");
        assert_eq!(rate(0.0), "—");
    }

    #[test]
    fn durations() {
        assert_eq!(duration(577.387), "9m 37s");
        assert_eq!(duration(42.0), "42s");
        assert_eq!(duration(3725.0), "1h 02m 05s");
    }
}
