#!/usr/bin/env bash
# The README's test command: what a fresh clone with only rustup runs.
#
#   scripts/test.sh [ARGS…]      (ARGS go to the test runner, e.g. a filter)
#
# The documentation examples first (nextest does not run them), then every
# test: with cargo-nextest when it is installed (tests of different files side
# by side, scheduled by .config/nextest.toml, as CI runs them), else with plain
# `cargo test --workspace`, which needs nothing but the toolchain and is
# slower (the timing tests then take their in-process locks instead). Nothing
# outside the repository is needed: the reference result the tests compare
# with is recorded in crates/ldb-core/tests/fixtures/.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --doc
if cargo nextest --version >/dev/null 2>&1; then
    exec cargo nextest run --workspace "$@"
fi
echo "scripts/test.sh: cargo-nextest is not installed, so plain cargo test runs the tests" \
     "(slower; 'cargo install --locked cargo-nextest' for the fast path)" >&2
exec cargo test --workspace --lib --bins --tests "$@"
