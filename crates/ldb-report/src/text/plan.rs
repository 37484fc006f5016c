//! The run plan in words (`--dry-run`, and the runner's tests of what a
//! plan says).

use std::fmt;

use ldb_core::plan::RunPlan;
use ldb_core::tokens::format_context;

/// A plan, printable: `println!("{}", PlanText(&plan))`.
pub struct PlanText<'a>(pub &'a RunPlan);

impl fmt::Display for PlanText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plan = self.0;
        let list = |xs: &[u64]| {
            if xs.is_empty() {
                "none".to_string()
            } else {
                xs.iter()
                    .map(|&x| format_context(x))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        writeln!(f, "Run plan")?;
        writeln!(f, "  prompts sized: {}", list(&plan.prompt_contexts))?;
        writeln!(
            f,
            "  prefill: integrated {}; scout-only {}; standalone {}",
            list(&plan.integrated_prefill),
            list(&plan.scout_only),
            list(&plan.standalone)
        )?;
        if !plan.prefill_carried.is_empty() {
            writeln!(
                f,
                "  prefill carried over from the file: {}",
                list(&plan.prefill_carried)
            )?;
        }
        for s in &plan.prefill_skipped {
            writeln!(
                f,
                "  prefill ctx={} skipped: {}",
                format_context(s.context),
                s.reason
            )?;
        }
        match plan.decode_warmup {
            Some(x) => writeln!(f, "  decode warmup: C=1 ctx={}", format_context(x))?,
            None => writeln!(f, "  decode warmup: off")?,
        }
        if let Some(line) = &plan.open_loop {
            writeln!(f, "  {line}")?;
            for (x, why) in &plan.rate_skips {
                writeln!(f, "  open loop ctx={} skipped: {why}", format_context(*x))?;
            }
        }
        let measured = plan.measured_cells().count();
        let carried = plan.cells.iter().filter(|c| c.carried.is_some()).count();
        write!(
            f,
            "  cells: {} in order, {} measured, {} skipped",
            plan.cells.len(),
            measured,
            plan.cells.len() - measured
        )?;
        if carried > 0 {
            write!(f, ", {carried} carried over from the file")?;
        }
        writeln!(f)?;
        for (i, c) in plan.cells.iter().enumerate() {
            let what = match (&c.carried, &c.skip) {
                (Some(st), _) => format!("carried over ({})", st.as_str()),
                (None, None) if c.carried_repeats > 0 => {
                    format!(
                        "measure the repeats after {} carried over",
                        c.carried_repeats
                    )
                }
                (None, None) => "measure".to_string(),
                (None, Some(inf)) => format!("skip: {}", inf.reason()),
            };
            let burst = c
                .burst_carried
                .map(|st| format!("; burst carried over ({})", st.as_str()))
                .unwrap_or_default();
            writeln!(
                f,
                "  {:>3}. C={} ctx={}  {what}{burst}",
                i + 1,
                c.concurrency,
                format_context(c.context)
            )?;
        }
        write!(
            f,
            "  estimated time: at least {} (windows, warmups and fixed overheads; slow \
             ramp-ups and long prefills add to it)",
            human_seconds(plan.estimated_seconds)
        )
    }
}

fn human_seconds(s: f64) -> String {
    let s = s.round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}
