#!/usr/bin/env bash
# Check that a Linux binary stays portable across distributions:
#
#   scripts/check-portable.sh BINARY
#
# 1. Its dynamic section (readelf -d) needs no shared library beyond glibc's
#    own (libc, libm, libpthread, libdl, librt, the ld-linux loader) and
#    libgcc_s: anything else (OpenSSL, zlib, libstdc++, CUDA…) would have to
#    be installed on every machine the binary is copied to.
# 2. The newest glibc symbol version it needs (readelf -V, the version needs
#    section) is at most MAX_GLIBC (default 2.34: Debian 12, Ubuntu 22.04,
#    RHEL 9 and newer run it). The release and debug builds link the same
#    libraries and symbols, so CI checks the debug binary its tests built.
#
# Prints one line per finding and exits 1 when any check fails (2: usage).
# READELF names the readelf to use (the test points it at fixtures).
set -euo pipefail

MAX_GLIBC="${MAX_GLIBC:-2.34}"
READELF="${READELF:-readelf}"
ALLOWED='^(libc\.so\.6|libm\.so\.6|libgcc_s\.so\.1|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|ld-linux[-a-z0-9_.]*\.so\.[0-9]+)$'

[[ $# -eq 1 ]] || { echo "usage: scripts/check-portable.sh BINARY" >&2; exit 2; }
bin="$1"
[[ -f "$bin" ]] || { echo "check-portable: no such file: $bin" >&2; exit 2; }

dynamic="$("$READELF" -d -W "$bin")" || { echo "check-portable: $READELF -d failed on $bin" >&2; exit 2; }
versions="$("$READELF" -V -W "$bin")" || { echo "check-portable: $READELF -V failed on $bin" >&2; exit 2; }

bad=0
needed="$(sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' <<<"$dynamic")"
while IFS= read -r lib; do
    [[ -z "$lib" ]] && continue
    if [[ "$lib" =~ $ALLOWED ]]; then
        echo "check-portable: needs $lib (allowed)"
    else
        echo "check-portable: FAIL: needs $lib, which is neither glibc nor libgcc_s"
        bad=1
    fi
done <<<"$needed"

newest="$(sed -n '/\.gnu\.version_r/,$p' <<<"$versions" | grep -o 'Name: GLIBC_[0-9][0-9.]*' \
    | sed 's/Name: GLIBC_//' | sort -uV | tail -n1)"
if [[ -z "$newest" ]]; then
    echo "check-portable: needs no versioned glibc symbol"
elif [[ "$(printf '%s\n%s\n' "$newest" "$MAX_GLIBC" | sort -V | tail -n1)" == "$MAX_GLIBC" ]]; then
    echo "check-portable: newest glibc symbol version GLIBC_$newest (at most GLIBC_$MAX_GLIBC: ok)"
else
    echo "check-portable: FAIL: needs GLIBC_$newest, newer than GLIBC_$MAX_GLIBC"
    bad=1
fi
exit "$bad"
