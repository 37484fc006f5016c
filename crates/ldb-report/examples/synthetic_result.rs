//! Writes a made-up result file for `bench/report-speed.sh`:
//! `synthetic_result OUT.json [CONCURRENCIES CONTEXTS SAMPLES_PER_CELL REPEATS]`
//! (default 20 × 10 = 200 cells, 667 samples in each of the 150 measured
//! ones: just over 100,000 request samples; REPEATS > 1 gives every cell
//! that many repeats, as `--repeat` does, with values 1 % apart).

use std::path::PathBuf;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(out) = args.first().map(PathBuf::from) else {
        eprintln!(
            "usage: synthetic_result OUT.json [CONCURRENCIES CONTEXTS SAMPLES_PER_CELL REPEATS]"
        );
        std::process::exit(2);
    };
    let num = |i: usize, d: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let mut doc = ldb_report::html::synthetic_result(
        u32::try_from(num(1, 20)).unwrap_or(20),
        num(2, 10),
        usize::try_from(num(3, 667)).unwrap_or(667),
    );
    let repeats = u32::try_from(num(4, 1)).unwrap_or(1);
    if repeats > 1 {
        doc.metadata.repeat = repeats;
        for cell in &mut doc.results {
            for k in 2..=repeats {
                let mut again = cell.clone();
                again.ext.repeats.clear();
                let f = 1.0 + 0.01 * f64::from(k - 1);
                again.aggregate_tps = again.aggregate_tps.map(|v| v * f);
                again.per_request_avg_tps = again.per_request_avg_tps.map(|v| v * f);
                ldb_core::repeat::add(cell, again, k);
            }
        }
    }
    let samples: usize = doc.results.iter().map(|c| c.request_samples.len()).sum();
    if let Err(e) = ldb_report::json::write_atomic(&out, &doc) {
        eprintln!("error: {e}");
        std::process::exit(5);
    }
    println!(
        "{}: {} cells, {samples} request samples",
        out.display(),
        doc.results.len()
    );
}
