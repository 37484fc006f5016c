//! Publishing the live view and the event log. The runner sends
//! [`LiveEvent`]s; the snapshot takes them in through
//! `LiveSnapshot::apply` (ldb-core), the only code that changes it.

use std::sync::{Arc, Mutex};

use ldb_client::discovery::Discovery;
use ldb_core::live::{LiveEvent, LiveSnapshot, MatrixCell, MatrixCellState, RunLayout};
use tokio::sync::watch;

use crate::config::RunConfig;
use crate::plan::test_order;

/// Shared publisher: the runner sends events, the UI reads the watch channel.
#[derive(Clone)]
pub struct Live {
    tx: watch::Sender<LiveSnapshot>,
    log: Arc<Mutex<Vec<String>>>,
}

impl Live {
    /// A publisher and the receiver the UI reads.
    pub fn new() -> (Live, watch::Receiver<LiveSnapshot>) {
        let (tx, rx) = watch::channel(LiveSnapshot::default());
        (
            Live {
                tx,
                log: Arc::new(Mutex::new(Vec::new())),
            },
            rx,
        )
    }

    /// Tell the live view what happened.
    pub fn send(&self, event: LiveEvent) {
        self.tx.send_modify(|s| s.apply(event));
    }

    /// Append `HH:MM:SS message` to the event log. URLs in the message
    /// lose their credentials (`user:password@`, `?api_key=`): the line
    /// reaches the screen, stderr and the result's `event_log`.
    pub fn event(&self, message: impl AsRef<str>) {
        let line = format!(
            "{} {}",
            chrono::Local::now().format("%H:%M:%S"),
            ldb_core::redact::redact_text(message.as_ref())
        );
        if let Ok(mut log) = self.log.lock() {
            log.push(line.clone());
        }
        self.send(LiveEvent::Logged(line));
    }

    /// The whole event log so far.
    pub fn events(&self) -> Vec<String> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// A copy of the current snapshot.
    pub fn snapshot(&self) -> LiveSnapshot {
        self.tx.borrow().clone()
    }
}

/// The live matrix of a run: who serves, its columns (concurrencies, or
/// open-loop rates keyed 1, 2, … in the order they run) and every cell,
/// pending; `--prefill-only` runs no decode cell.
pub(crate) fn layout(cfg: &RunConfig, disc: &Discovery, kv_budget: u64) -> RunLayout {
    let mut l = RunLayout {
        model: disc.model.clone(),
        engine: disc.engine.display_name().into(),
        server: cfg.target.server_label.clone(),
        kv_budget,
        concurrencies: cfg.matrix.concurrency.clone(),
        contexts: cfg.matrix.contexts.clone(),
        ..RunLayout::default()
    };
    let cells = if cfg.prefill.prefill_only {
        vec![]
    } else if cfg.open_loop.is_on() {
        let mut rates = cfg.open_loop.request_rates.clone();
        rates.sort_by(f64::total_cmp);
        l.column_labels = rates
            .iter()
            .map(|&r| crate::recorder::rate_label(r))
            .collect();
        l.concurrencies = (1..=rates.len())
            .map(|i| u32::try_from(i).unwrap_or(u32::MAX))
            .collect();
        test_order(&l.concurrencies, &cfg.matrix.contexts)
    } else {
        test_order(&cfg.matrix.concurrency, &cfg.matrix.contexts)
    };
    l.matrix = cells
        .into_iter()
        .map(|(c, x)| MatrixCell {
            context: x,
            concurrency: c,
            state: MatrixCellState::Pending,
        })
        .collect();
    l
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(conc: &[u32], ctxs: &[u64]) -> RunConfig {
        RunConfig {
            target: crate::config::TargetConfig {
                server_label: "http://127.0.0.1:8000".into(),
                ..Default::default()
            },
            matrix: crate::config::MatrixConfig {
                concurrency: conc.to_vec(),
                contexts: ctxs.to_vec(),
                ..Default::default()
            },
            ..RunConfig::default()
        }
    }

    fn disc() -> Discovery {
        Discovery {
            model: "m".into(),
            ..Discovery::default()
        }
    }

    #[test]
    fn the_matrix_is_laid_out_pending_in_test_order() {
        let l = layout(&config(&[1, 4], &[0, 8192]), &disc(), 1000);
        assert_eq!((l.model.as_str(), l.kv_budget), ("m", 1000));
        assert_eq!(l.server, "http://127.0.0.1:8000");
        assert_eq!(l.concurrencies, [1, 4]);
        assert!(l.column_labels.is_empty());
        let cells: Vec<(u32, u64)> = l
            .matrix
            .iter()
            .map(|m| (m.concurrency, m.context))
            .collect();
        assert_eq!(cells, test_order(&[1, 4], &[0, 8192]));
        assert!(l.matrix.iter().all(|m| m.state == MatrixCellState::Pending));
    }

    #[test]
    fn open_loop_columns_are_the_rates_in_order_and_prefill_only_has_no_cell() {
        let mut cfg = config(&[1], &[0]);
        cfg.open_loop.request_rates = vec![4.0, 0.5];
        let l = layout(&cfg, &disc(), 0);
        assert_eq!(l.column_labels, ["R=0.5/s", "R=4/s"]);
        assert_eq!(l.concurrencies, [1, 2]);
        assert_eq!(l.matrix.len(), 2);
        cfg.prefill.prefill_only = true;
        assert!(layout(&cfg, &disc(), 0).matrix.is_empty());
    }
}
