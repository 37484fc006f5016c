//! The measurement window's bounds, shared between the runner (which opens
//! and closes it) and the streams (which read it at every read).

use std::sync::atomic::{AtomicU64, Ordering};

use ldb_core::window::WindowBounds;

/// Window bounds shared between the runner and its streams (f64 bits; NaN = unset).
#[derive(Debug)]
pub struct SharedWindow {
    start: AtomicU64,
    end: AtomicU64,
}

impl Default for SharedWindow {
    fn default() -> Self {
        SharedWindow {
            start: AtomicU64::new(f64::NAN.to_bits()),
            end: AtomicU64::new(f64::NAN.to_bits()),
        }
    }
}

impl SharedWindow {
    /// Current bounds.
    pub fn get(&self) -> WindowBounds {
        let f =
            |a: &AtomicU64| Some(f64::from_bits(a.load(Ordering::Acquire))).filter(|v| !v.is_nan());
        WindowBounds {
            start: f(&self.start),
            end: f(&self.end),
        }
    }

    /// Open the window at `t`.
    pub fn open(&self, t: f64) {
        self.start.store(t.to_bits(), Ordering::Release);
    }

    /// Close the window at `t`.
    pub fn close(&self, t: f64) {
        self.end.store(t.to_bits(), Ordering::Release);
    }
}
