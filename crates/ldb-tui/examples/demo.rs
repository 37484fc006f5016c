//! Feeds made-up snapshots to the UI for a few seconds, to try the dashboard
//! in a real terminal (or under tmux):
//!
//! ```text
//! cargo run -p ldb-tui --example demo               # screen mode, 8 s
//! cargo run -p ldb-tui --example demo -- --plain    # plain mode
//! cargo run -p ldb-tui --example demo -- --seconds 30
//! cargo run -p ldb-tui --example demo -- --panic-at 3   # panic hook check
//! ```
//!
//! `q` stops early; `s` logs a skip; the line printed after the UI finishes
//! shows the terminal was handed back.

use std::time::{Duration, Instant};

use ldb_core::live::Control;
use ldb_tui::{DisplayMode, UiOptions, choose_mode, demo, spawn};
use tokio::sync::{mpsc, watch};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let requested = args
        .iter()
        .any(|a| a == "--plain")
        .then_some(DisplayMode::Plain);
    let seconds = args
        .iter()
        .position(|a| a == "--seconds")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(8.0);
    let panic_at = args
        .iter()
        .position(|a| a == "--panic-at")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse::<f64>().ok());
    let mode = choose_mode(requested);
    let (snap_tx, snap_rx) = watch::channel(demo::at(0.0));
    let (ctl_tx, mut ctl_rx) = mpsc::channel(8);
    let ui = spawn(mode, snap_rx, ctl_tx, UiOptions::default());
    let start = Instant::now();
    let mut extra = Vec::new();
    let mut outcome = "finished";
    loop {
        tokio::select! {
            c = ctl_rx.recv() => match c {
                Some(Control::Stop) => { outcome = "stopped by the user"; break; }
                Some(Control::Skip) => extra.push(format!("skip requested at {:.1}s", start.elapsed().as_secs_f64())),
                None => {}
            },
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
        let t = start.elapsed().as_secs_f64();
        if t >= seconds {
            break;
        }
        if panic_at.is_some_and(|p| t >= p) {
            panic!("demo panic on the runner side at {t:.1}s (the terminal must be restored)");
        }
        let mut snap = demo::at(t * 8.0 / seconds.max(0.1));
        snap.elapsed = t;
        snap.events.extend(extra.iter().cloned());
        snap_tx.send_replace(snap);
    }
    ui.finish().await;
    println!(
        "demo {outcome} after {:.1}s ({mode} mode); terminal restored",
        start.elapsed().as_secs_f64()
    );
}
