//! Comparing the prefill–decode interference probes of two results
//! (`--mixed-prefill-contexts`): injections matched by concurrency, context
//! and injected length, each figure side by side with its change. Shown,
//! not judged: a probe is one injection per cell, too few for a verdict,
//! so it never makes `compare` report a regression (docs/compare.md).

use ldb_core::document::ResultDocument;
use ldb_core::interference::Injection;

use crate::text::format::context;
use crate::text::interference::rows;

/// How a compared figure is read off an injection.
type Figure = fn(&Injection) -> Option<f64>;

/// The figures compared, their names and how each is shown.
const FIGURES: [(&str, Figure); 5] = [
    ("TTFT ×", |i| i.ttft_inflation),
    ("decode loss %", |i| i.decode_loss_pct),
    ("stall p50 ms", |i| i.stall_p50_s.map(|s| s * 1000.0)),
    ("stall max ms", |i| i.stall_max_s.map(|s| s * 1000.0)),
    ("stalled streams", |i| {
        i.skipped.is_none().then_some(f64::from(i.streams_stalled))
    }),
];

/// One figure of one injection in both runs.
#[derive(Debug, Clone, PartialEq)]
pub struct InterferenceRow {
    /// Concurrency.
    pub concurrency: u32,
    /// The cell's context, tokens.
    pub context: u64,
    /// The injected length, tokens.
    pub prompt_tokens: u64,
    /// Which figure ([`FIGURES`]).
    pub figure: &'static str,
    /// Base run's value (None: not measured there).
    pub base: Option<f64>,
    /// New run's value.
    pub new: Option<f64>,
}

impl InterferenceRow {
    /// `new − base`, when both have the figure.
    pub fn delta(&self) -> Option<f64> {
        Some(self.new? - self.base?)
    }
}

/// Every figure of every injection either run has, base order first.
pub fn compare_interference(base: &ResultDocument, new: &ResultDocument) -> Vec<InterferenceRow> {
    let key = |c: &ldb_core::result::CellResult, i: &Injection| {
        (c.concurrency, c.context_tokens, i.prompt_tokens)
    };
    let (b, n) = (rows(base), rows(new));
    let mut keys: Vec<(u32, u64, u64)> = Vec::new();
    for (c, i) in b.iter().chain(&n) {
        if !keys.contains(&key(c, i)) {
            keys.push(key(c, i));
        }
    }
    let find = |side: &[(&ldb_core::result::CellResult, &Injection)], k| {
        side.iter()
            .find(|(c, i)| key(c, i) == k)
            .map(|(_, i)| (*i).clone())
    };
    let mut out = Vec::new();
    for k in keys {
        let (bi, ni) = (find(&b, k), find(&n, k));
        for (figure, get) in FIGURES {
            out.push(InterferenceRow {
                concurrency: k.0,
                context: k.1,
                prompt_tokens: k.2,
                figure,
                base: bi.as_ref().and_then(get),
                new: ni.as_ref().and_then(get),
            });
        }
    }
    out
}

/// The rows as a text table (empty when neither run probed).
pub fn render_interference_text(rows: &[InterferenceRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let v = |x: Option<f64>| x.map_or_else(|| "—".to_string(), |x| format!("{x:.2}"));
    let d = |x: Option<f64>| x.map_or_else(|| "—".to_string(), |x| format!("{x:+.2}"));
    let mut s = String::from(
        "Prefill–decode interference (shown, not judged)\n  C  ctx      L      figure            \
         base       new     delta\n",
    );
    for r in rows {
        s.push_str(&format!(
            "{:>3}  {:<7} {:<6} {:<15} {:>8} {:>9} {:>9}\n",
            r.concurrency,
            context(r.context),
            context(r.prompt_tokens),
            r.figure,
            v(r.base),
            v(r.new),
            d(r.delta())
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use ldb_core::interference::Interference;
    use ldb_core::result::CellResult;

    use super::*;

    fn doc(stall: f64, with_second: bool) -> ResultDocument {
        let mut c = CellResult {
            concurrency: 4,
            context_tokens: 1024,
            ..CellResult::default()
        };
        let inj = |l, s| Injection {
            prompt_tokens: l,
            stall_max_s: Some(s),
            ttft_inflation: Some(1.5),
            streams: 4,
            streams_stalled: 2,
            ..Injection::default()
        };
        let mut injections = vec![inj(4096, stall)];
        if with_second {
            injections.push(inj(8192, 0.2));
        }
        c.ext.interference = Some(Interference {
            injections,
            ..Interference::default()
        });
        let mut d = ResultDocument::default();
        d.results.push(c);
        d
    }

    /// Matched injections show their change; one probed in one run only
    /// shows a dash on the other side.
    #[test]
    fn injections_pair_by_cell_and_length() {
        let rows = compare_interference(&doc(0.05, true), &doc(0.08, false));
        let stall = rows
            .iter()
            .find(|r| r.prompt_tokens == 4096 && r.figure == "stall max ms")
            .expect("row");
        assert_eq!(stall.base, Some(50.0));
        assert!((stall.delta().expect("delta") - 30.0).abs() < 1e-9);
        let only = rows
            .iter()
            .find(|r| r.prompt_tokens == 8192 && r.figure == "TTFT ×")
            .expect("row");
        assert_eq!((only.base, only.new), (Some(1.5), None));
        let t = render_interference_text(&rows);
        assert!(t.contains("+30.00"), "{t}");
        assert!(
            render_interference_text(&compare_interference(
                &ResultDocument::default(),
                &ResultDocument::default()
            ))
            .is_empty()
        );
    }
}
