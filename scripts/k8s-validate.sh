#!/usr/bin/env bash
# Validate Kubernetes manifests against the Kubernetes API schema, strictly
# (unknown fields are errors):
#
#   scripts/k8s-validate.sh FILE...
#
# The schemas come with PyPI's kubernetes-validate (it bundles them per
# Kubernetes x.y.0 release), pinned, in a venv of its own under
# ${LDB_CACHE_DIR:-$HOME/.cache/llm-decode-bench}/tools/, installed on first
# use as scripts/wheel.sh installs maturin. KUBERNETES_VERSION picks the API
# version checked against (default 1.33.0: backoffLimitPerIndex is GA there).
# The deploy test (crates/llm-decode-bench/tests/deploy.rs) runs it on what
# `deploy k8s` prints.
set -euo pipefail

VALIDATE_VERSION="1.37.0"
KUBERNETES_VERSION="${KUBERNETES_VERSION:-1.33.0}"
CACHE_DIR="${LDB_CACHE_DIR:-$HOME/.cache/llm-decode-bench}"
PYTHON="${PYTHON:-python3}"
die() { printf 'k8s-validate.sh: %s\n' "$*" >&2; exit 1; }

[[ $# -ge 1 ]] || die "usage: scripts/k8s-validate.sh FILE..."
tool="$CACHE_DIR/tools/kubernetes-validate-$VALIDATE_VERSION"
# (checked through the venv's python: its entry scripts name the path the venv was made at)
if ! "$tool/bin/python" -m kubernetes_validate --version >/dev/null 2>&1; then
    # made aside and moved in whole: two installs at once never see half of it
    tmp="$tool.tmp.$$"
    rm -rf "$tmp"
    mkdir -p "$(dirname "$tool")"
    "$PYTHON" -m venv "$tmp" || die "could not create a venv with $PYTHON"
    "$tmp/bin/pip" install --quiet --disable-pip-version-check --no-input \
        "kubernetes-validate==$VALIDATE_VERSION" \
        || { rm -rf "$tmp"; die "pip install kubernetes-validate==$VALIDATE_VERSION failed"; }
    mv -T "$tmp" "$tool" 2>/dev/null || rm -rf "$tmp"
fi
exec "$tool/bin/python" -m kubernetes_validate -k "$KUBERNETES_VERSION" --strict "$@"
