#!/usr/bin/env bash
# Record what the machine is doing, one line every few seconds, until killed:
# load, CPU time split (with steal), pressure stall information, available
# memory and the busiest processes. CI runs it beside the tests so that a
# client stall the benchmark reports (its event gives the window's UTC time)
# can be lined up with what else ran then.
#
# Usage: scripts/machine-sampler.sh FILE [INTERVAL_S]
set -uo pipefail

out="${1:?usage: $0 FILE [INTERVAL_S]}"
interval="${2:-2}"
mkdir -p "$(dirname "$out")"

first_value() { awk -v k="$2" '$1 == k { print $2; exit }' "$1" 2>/dev/null; }
psi() { # "some avg10" of one pressure file, or -
  [[ -r "/proc/pressure/$1" ]] || { echo -; return; }
  awk '$1 == "some" { sub("avg10=", "", $2); print $2; exit }' "/proc/pressure/$1"
}

{
  echo "# $(date -u +%FT%TZ) machine sampler, every ${interval}s; cpu = user nice system idle iowait irq softirq steal (ticks since boot)"
  while :; do
    cpu="$(awk '$1 == "cpu" { print $2, $3, $4, $5, $6, $7, $8, $9; exit }' /proc/stat)"
    mem="$(first_value /proc/meminfo MemAvailable:)"
    # the busiest processes over the last half second (top's second frame;
    # ps would give lifetime averages), as cpu%/nice/state/name
    top="$(top -b -n 2 -d 0.5 -w 200 -o %CPU 2>/dev/null \
      | awk '/^top -/ { n++ } n == 2 && $1 ~ /^[0-9]+$/ { printf "%s%%/n%s/%s/%s ", $9, $4, $8, $12; c++ } c == 4 { exit }')"
    printf '%s load %s | cpu %s | psi cpu %s mem %s io %s | avail %s kB | %s\n' \
      "$(date -u +%T)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$cpu" \
      "$(psi cpu)" "$(psi memory)" "$(psi io)" "$mem" "$top"
    sleep "$interval"
  done
} >>"$out" 2>&1
