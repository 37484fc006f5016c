#!/usr/bin/env bash
# Build the Python wheel that carries the llm-decode-bench binary (maturin,
# binary bindings; pyproject.toml), install it into a fresh venv, and run the
# installed command: --version and a short --sim run. Then check
# `cargo install --locked --path crates/llm-decode-bench` into a temporary root.
#
#   scripts/wheel.sh [--release] [OUT_DIR]
#
# By default the wheel is built from the dev profile in target/, which the
# tests have already built (CI reuses it: a release build is ~10 more minutes
# on a 2-core machine); --release builds the optimized binary users should
# get. The wheel is left in OUT_DIR (default target/wheels). maturin comes
# from PyPI, a pinned release in a venv of its own under
# ${LDB_CACHE_DIR:-$HOME/.cache/llm-decode-bench}/tools/, as uv is installed
# by scripts/lib/server-common.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

MATURIN_VERSION="1.9.4"
CACHE_DIR="${LDB_CACHE_DIR:-$HOME/.cache/llm-decode-bench}"
PYTHON="${PYTHON:-python3}"
STEP="setup"
log() { printf 'wheel.sh: %s\n' "$*" >&2; }
die() { log "step '$STEP' failed: $*"; exit 1; }

profile=dev
if [[ "${1:-}" == "--release" ]]; then profile=release; shift; fi
out="${1:-target/wheels}"

STEP="maturin"
tool="$CACHE_DIR/tools/maturin-$MATURIN_VERSION"
if ! "$tool/bin/maturin" --version >/dev/null 2>&1; then
    # made aside and moved in whole: two builds at once never see half of it
    tmp="$tool.tmp.$$"
    rm -rf "$tmp"
    mkdir -p "$(dirname "$tool")"
    "$PYTHON" -m venv "$tmp" || die "could not create a venv with $PYTHON"
    "$tmp/bin/pip" install --quiet --disable-pip-version-check --no-input "maturin==$MATURIN_VERSION" \
        || { rm -rf "$tmp"; die "pip install maturin==$MATURIN_VERSION failed"; }
    mv -T "$tmp" "$tool" 2>/dev/null || rm -rf "$tmp"
    # maturin's venv scripts name the venv's python by the path it was made at
    "$tool/bin/python" -m maturin --version >/dev/null || die "maturin does not run from $tool"
fi
maturin() { "$tool/bin/python" -m maturin "$@"; }

STEP="build the wheel ($profile profile)"
rm -rf "$out"
start=$SECONDS
maturin build --profile "$profile" --target-dir target --out "$out" --locked >&2 \
    || die "maturin build"
wheel="$(ls "$out"/llm_decode_bench-*.whl 2>/dev/null | head -n1)"
[[ -n "$wheel" ]] || die "no wheel in $out"
log "built $(basename "$wheel") in $((SECONDS - start)) s"

STEP="platform tag"
# the tag must not promise an older glibc than the binary needs
bin_path="target/$([[ $profile == dev ]] && echo debug || echo release)/llm-decode-bench"
newest="$(objdump -T "$bin_path" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n1)"
tag_glibc="$(basename "$wheel" | grep -o 'manylinux_[0-9]*_[0-9]*' | head -n1 | sed 's/manylinux_/GLIBC_/; s/_/./2')"
log "binary needs up to $newest; the wheel is tagged for $tag_glibc"
[[ "$(printf '%s\n%s\n' "$newest" "$tag_glibc" | sort -V | tail -n1)" == "$tag_glibc" ]] \
    || die "the binary needs $newest, newer than the wheel's tag $tag_glibc: raise compatibility in pyproject.toml"

STEP="install into a fresh venv"
venv="$(mktemp -d)"
trap 'rm -rf "$venv"' EXIT
"$PYTHON" -m venv "$venv/v" || die "venv"
"$venv/v/bin/pip" install --quiet --disable-pip-version-check --no-input --no-index "$wheel" \
    || die "pip install $wheel"

STEP="run the installed command"
ldb="$venv/v/bin/llm-decode-bench"
"$ldb" --version || die "--version"
"$ldb" --sim --concurrency 1 --contexts 0 --max-tokens 32 --duration 1 --decode-warmup-seconds 0 \
    --skip-prefill --display-mode plain --output "$venv/sim.json" >"$venv/sim.log" 2>&1 \
    || { cat "$venv/sim.log" >&2; die "the short --sim run"; }
grep -q '"run_status": "complete"' "$venv/sim.json" || die "the --sim run's result is not complete"
log "the installed command ran a --sim cell: $(grep -m1 -o '"aggregate_tps": [0-9.]*' "$venv/sim.json")"

STEP="cargo install --locked --path crates/llm-decode-bench"
root="$venv/cargo-root"
start=$SECONDS
if [[ $profile == dev ]]; then debug=(--debug); else debug=(); fi
cargo install --quiet --locked --path crates/llm-decode-bench "${debug[@]}" --target-dir target \
    --root "$root" || die "cargo install"
"$root/bin/llm-decode-bench" --version >/dev/null || die "the cargo-installed binary does not run"
log "cargo install into a temporary root took $((SECONDS - start)) s"
log "ok: $wheel"
