//! What the parser fuzz tests share.

use std::time::{Duration, Instant};

/// The longest one fuzzed input may take to parse: far above any real
/// parse, so only a runaway (a loop, a quadratic blow-up) fails.
pub const PER_INPUT: Duration = Duration::from_secs(2);

/// Runs `f` on one input and fails when it took longer than [`PER_INPUT`].
pub fn bounded<T>(f: impl FnOnce() -> T) -> T {
    let t0 = Instant::now();
    let out = f();
    assert!(
        t0.elapsed() < PER_INPUT,
        "took {:?} on one input",
        t0.elapsed()
    );
    out
}
