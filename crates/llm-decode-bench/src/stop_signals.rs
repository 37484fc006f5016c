//! The stop signals every long-running command obeys: Ctrl-C (SIGINT),
//! SIGTERM (what `kill`, systemd, Kubernetes and Slurm send) and SIGHUP (a
//! closed terminal). The benchmark's session driver, `sim`, `selftest` and
//! `cjk-watchdog` all take them from here, so a command never dies half-way
//! on a signal another command would have handled.

use std::future::Future;

/// Ctrl-C (SIGINT), SIGTERM and SIGHUP. The streams are made once: a signal
/// arriving between two waits is then still seen.
pub(crate) struct StopSignals {
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    hup: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    pub(crate) fn new() -> StopSignals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            StopSignals {
                int: signal(SignalKind::interrupt()).ok(),
                term: signal(SignalKind::terminate()).ok(),
                hup: signal(SignalKind::hangup()).ok(),
            }
        }
        #[cfg(not(unix))]
        StopSignals {}
    }

    /// The next stop signal; false when none can be received.
    pub(crate) async fn next(&mut self) -> bool {
        #[cfg(unix)]
        {
            async fn recv(s: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
                match s {
                    Some(s) => s.recv().await,
                    None => std::future::pending().await,
                }
            }
            if self.int.is_none() && self.term.is_none() && self.hup.is_none() {
                return false;
            }
            tokio::select! {
                r = recv(&mut self.int) => r.is_some(),
                r = recv(&mut self.term) => r.is_some(),
                r = recv(&mut self.hup) => r.is_some(),
            }
        }
        #[cfg(not(unix))]
        {
            tokio::signal::ctrl_c().await.is_ok()
        }
    }
}

/// Run `work` until it ends or a stop signal arrives (`None`).
pub(crate) async fn until_stopped<F: Future>(work: F) -> Option<F::Output> {
    let mut signals = StopSignals::new();
    let stop = async {
        if !signals.next().await {
            // no signal can be received here: only the work can end
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        out = work => Some(out),
        () = stop => None,
    }
}
