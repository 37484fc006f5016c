//! Small text formatters shared by the panels and the plain printer.

/// Seconds as `12s`, `4m 03s` or `1h 02m`.
pub fn duration(secs: f64) -> String {
    let s = if secs.is_finite() && secs > 0.0 {
        secs.round() as u64
    } else {
        0
    };
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m {:02}s", s / 60, s % 60)
    } else {
        format!("{}h {:02}m", s / 3600, (s % 3600) / 60)
    }
}

/// Throughput with one decimal (`129.5`); `precise == false` gives the compact
/// form (`130`, `1.2k`, `12k`) for narrow columns.
pub fn tps(v: f64, precise: bool) -> String {
    if !v.is_finite() {
        return "-".to_owned();
    }
    if precise {
        format!("{v:.1}")
    } else if v >= 9_999.5 {
        ldb_core::numfmt::kilo(v, 0)
    } else if v >= 999.5 {
        ldb_core::numfmt::kilo(v, 1)
    } else {
        format!("{v:.0}")
    }
}

/// Seconds as whole milliseconds (`85`), or `-` when not a number.
pub fn ms(secs: f64) -> String {
    if secs.is_finite() && secs >= 0.0 {
        format!("{:.0}", secs * 1000.0)
    } else {
        "-".to_owned()
    }
}

/// An optional number with a unit suffix, `-` when absent.
pub fn opt(v: Option<f64>, decimals: usize, unit: &str) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.decimals$}{unit}"),
        _ => "-".to_owned(),
    }
}

/// MiB as GiB with one decimal (`46.3G`).
pub fn gib(mib: Option<f64>) -> String {
    opt(mib.map(|m| m / 1024.0), 1, "G")
}

/// Progress bar of `width` cells: filled `━`, head `●`, empty `╌`.
pub fn bar(frac: f64, width: usize) -> String {
    if width == 0 {
        return String::new();
    }
    let frac = if frac.is_finite() {
        frac.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let filled = (frac * width as f64).round() as usize;
    let mut out = String::with_capacity(width * 3);
    for i in 0..width {
        let glyph = if i + 1 < filled || (i + 1 == filled && filled == width) {
            '━'
        } else if i + 1 == filled {
            '●'
        } else if i == 0 {
            '○'
        } else {
            '╌'
        };
        out.push(glyph);
    }
    out
}

/// ASCII progress bar for logs: `[####------]`.
pub fn ascii_bar(frac: f64, width: usize) -> String {
    let frac = if frac.is_finite() {
        frac.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let filled = (frac * width as f64).round() as usize;
    format!("[{}{}]", "#".repeat(filled), "-".repeat(width - filled))
}

const BLOCKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// Sparkline of the most recent samples, bucket-averaged to `width` glyphs.
///
/// The scale is the trace's own min..max, widened to at least ±3% of the
/// mean so a steady decode draws a calm line instead of amplified noise.
pub fn sparkline(trace: &[f64], width: usize) -> String {
    if trace.is_empty() || width == 0 {
        return String::new();
    }
    let buckets = width.min(trace.len());
    let mut values = Vec::with_capacity(buckets);
    for b in 0..buckets {
        let lo = b * trace.len() / buckets;
        let hi = ((b + 1) * trace.len() / buckets).max(lo + 1);
        let slice = &trace[lo..hi];
        values.push(slice.iter().sum::<f64>() / slice.len() as f64);
    }
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let half = ((max - min) / 2.0).max(mean.abs() * 0.03).max(1e-9);
    let mid = (max + min) / 2.0;
    values
        .iter()
        .map(|v| {
            let pos = ((v - (mid - half)) / (2.0 * half) * 7.0).round();
            BLOCKS[pos.clamp(0.0, 7.0) as usize]
        })
        .collect()
}

/// Truncate to `width` characters, ending with `…` when cut.
pub fn fit(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_owned();
    }
    if width == 0 {
        return String::new();
    }
    let mut out: String = s.chars().take(width - 1).collect();
    out.push('…');
    out
}

/// The last `max` bytes of `s` at most, cut on a character boundary.
pub fn tail(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut cut = s.len() - max;
    while !s.is_char_boundary(cut) {
        cut += 1;
    }
    &s[cut..]
}

/// Wrap `text` into lines of at most `width` characters for the output
/// viewer, breaking after the last space when there is one in the line and
/// mid-word otherwise. Tabs become spaces and other control characters are
/// dropped, so model output cannot move the cursor.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut lines = Vec::new();
    for raw in text.split('\n') {
        let mut line: Vec<char> = Vec::with_capacity(width);
        for c in raw.chars() {
            let c = match c {
                '\t' => ' ',
                c if c.is_control() => continue,
                c => c,
            };
            if line.len() == width {
                // Break after the last space, carrying the partial word over.
                let carry = match line.iter().rposition(|&c| c == ' ') {
                    Some(sp) if sp + 1 < width => line.split_off(sp + 1),
                    _ => Vec::new(),
                };
                lines.push(line.iter().collect());
                line = carry;
            }
            line.push(c);
        }
        lines.push(line.iter().collect());
    }
    lines
}

/// The live interval of a `--duration auto` window:
/// `ci ±0.8% (target ±1%) drift -0.3%`, with `trending` when the drift alone
/// keeps the window open.
pub fn rate_ci(ci: &ldb_core::live::LiveRateCi) -> String {
    let rel = if ci.mean > 0.0 {
        ci.half_width / ci.mean * 100.0
    } else {
        f64::INFINITY
    };
    let mut s = format!(
        "ci ±{rel:.1}% (target ±{}%) drift {:+.1}%",
        ci.target_rel * 100.0,
        ci.drift_rel * 100.0
    );
    if ci.drift_rel.abs() > ci.target_rel {
        s.push_str(" trending");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_rate_interval() {
        let mut ci = ldb_core::live::LiveRateCi {
            mean: 500.0,
            half_width: 4.0,
            drift_rel: -0.003,
            target_rel: 0.01,
            min_s: 5.0,
        };
        assert_eq!(rate_ci(&ci), "ci ±0.8% (target ±1%) drift -0.3%");
        ci.drift_rel = 0.04;
        assert_eq!(rate_ci(&ci), "ci ±0.8% (target ±1%) drift +4.0% trending");
    }

    #[test]
    fn durations() {
        assert_eq!(duration(0.4), "0s");
        assert_eq!(duration(59.0), "59s");
        assert_eq!(duration(243.0), "4m 03s");
        assert_eq!(duration(3720.0), "1h 02m");
        assert_eq!(duration(f64::NAN), "0s");
    }

    #[test]
    fn throughput() {
        assert_eq!(tps(129.46, true), "129.5");
        assert_eq!(tps(129.46, false), "129");
        assert_eq!(tps(1234.0, false), "1.2k");
        assert_eq!(tps(12345.0, false), "12k");
    }

    #[test]
    fn bars() {
        assert_eq!(bar(0.0, 5), "○╌╌╌╌");
        assert_eq!(bar(0.5, 4), "━●╌╌");
        assert_eq!(bar(1.0, 3), "━━━");
        assert_eq!(ascii_bar(0.6, 5), "[###--]");
    }

    #[test]
    fn spark() {
        assert_eq!(sparkline(&[1.0, 2.0, 3.0], 10), "▁▅█");
        assert_eq!(sparkline(&[100.0, 100.0], 4), "▅▅");
        assert_eq!(sparkline(&[1.0, 1.0, 5.0, 5.0], 2), "▁█");
    }

    #[test]
    fn wrapping() {
        assert_eq!(wrap("abcdef\ngh\tx\u{1b}", 4), vec!["abcd", "ef", "gh x"]);
        assert_eq!(
            wrap("the quick brown fox", 10),
            vec!["the quick ", "brown fox"]
        );
        // A space in the last column: the next word starts the next line.
        assert_eq!(wrap("abcd efgh", 5), vec!["abcd ", "efgh"]);
        assert_eq!(wrap("", 4), vec![""]);
    }

    #[test]
    fn tails() {
        assert_eq!(tail("abcdef", 3), "def");
        assert_eq!(tail("ab", 3), "ab");
        // Never splits a character: `é` is two bytes.
        assert_eq!(tail("aéb", 2), "b");
    }

    #[test]
    fn fitting() {
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("abc", 4), "abc");
    }
}
