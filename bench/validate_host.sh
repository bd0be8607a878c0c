#!/usr/bin/env bash
# Median step-time error of the bundled host scenario beside the measurement's own spread.
# Each round is what a user does: calibrate the host-thread device (microbenchmarks only), then
# validate scenarios/host/tiny-llama-host.yaml against the simulator with that profile (the
# real side runs --repeats times). A round calibrates afresh because a shared CPU's speed drifts
# within minutes: a profile measured once and reused for every round would fold that drift into
# the error. Prints one line per round and the medians.
#   bench/validate_host.sh [BUILD_DIR] [ROUNDS] [RANKS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-3}
ranks=${3:-2}
cli=$build/apps/prefetchlab
[[ -x $cli ]] || { echo "validate_host.sh: no $cli; build first (./setup.sh)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 9 repetitions per microbenchmark (CI's calibrate runs 3): each figure is their median, and on a
# shared CPU fewer let one calibration's simulated step swing by tens of percent.
errors=() spreads=()
for ((i = 1; i <= rounds; i++)); do
  "$cli" calibrate --backend host --ranks "$ranks" --iterations 9 -o "$work/host.yaml" > "$work/calibrate$i.log"
  "$cli" validate scenarios/host/tiny-llama-host.yaml --backend host --hardware "$work/host.yaml" \
    --set cluster.gpus_per_node="$ranks" --repeats 3 -o "$work/v$i" > "$work/v$i.log"
  line=$(grep '^step_time_ns,' "$work/v$i/validate_summary.csv")
  IFS=, read -r _ real sim err _ spread _ <<< "$line"
  # awk, not bc: the CSV writes doubles such as 1.45974e+08.
  awk -v i="$i" -v r="$real" -v s="$sim" -v e="$err" -v p="$spread" 'BEGIN {
    printf "round %d: real %.3f ms, simulated %.3f ms, error %+.1f%%, spread of 3 real runs %.1f%%\n", i, r / 1e6, s / 1e6, 100 * e, 100 * p }'
  errors+=("$err") spreads+=("$spread")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
abs_errors=()
for e in "${errors[@]}"; do abs_errors+=("${e#-}"); done
awk -v e="$(median "${abs_errors[@]}")" -v n="$rounds" -v p="$(median "${spreads[@]}")" 'BEGIN {
  printf "median |step-time error| %.1f%% over %d rounds (target 10%%); median run-to-run spread %.1f%%\n", 100 * e, n, 100 * p }'
