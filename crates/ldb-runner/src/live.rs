//! Publishing the live view and the event log.

use std::sync::{Arc, Mutex};

use ldb_core::live::LiveSnapshot;
use tokio::sync::watch;

/// Events kept in the live snapshot (the JSON keeps all of them).
const LIVE_EVENTS: usize = 200;

/// Shared publisher: the runner mutates, the UI reads the watch channel.
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

    /// Change the snapshot.
    pub fn update(&self, f: impl FnOnce(&mut LiveSnapshot)) {
        self.tx.send_modify(f);
    }

    /// Append `HH:MM:SS message` to the event log.
    pub fn event(&self, message: impl AsRef<str>) {
        let line = format!(
            "{} {}",
            chrono::Local::now().format("%H:%M:%S"),
            message.as_ref()
        );
        if let Ok(mut log) = self.log.lock() {
            log.push(line.clone());
        }
        self.tx.send_modify(|s| {
            s.events.push(line);
            if s.events.len() > LIVE_EVENTS {
                let extra = s.events.len() - LIVE_EVENTS;
                s.events.drain(..extra);
            }
        });
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
