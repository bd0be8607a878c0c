#!/usr/bin/env bash
# Issue 24's scale benchmark, side by side: Llama-2-70B, seq 4096, activation checkpointing, trace
# and memory timeline off (bench/scale/llama-2-70b-h100-cluster.yaml), at each world size, for
# each binary given, interleaved over ROUNDS rounds so both see the same machine load.
#   bench/scale_bench.sh BEFORE_BINARY AFTER_BINARY [...]
# Env: NODES (8-GPU nodes per world, default "4 16"), ITERATIONS (default 10; warm-up is 1, which
# changes no event), ROUNDS (default 2), MODES (default "collapsed every-rank": a binary with
# `run --every-rank` runs both ways, identical ranks simulated once and every rank simulated;
# one without it runs once, as "-"), SETS (more `--set KEY=VALUE` overrides, space-separated:
# SETS=noise.compute_jitter=0.02 makes every rank differ, so every rank is simulated), THREADS
# (`run --threads`, for a binary that has it; default: its own default, the CPUs it may use).
# Prints per run: wall, user and system CPU, max RSS, events simulated, events per wall second
# and per CPU second (user + system: steadier than wall on a machine shared with other work).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
scenario="$here/scale/llama-2-70b-h100-cluster.yaml"
nodes_list="${NODES:-4 16}"
iterations="${ITERATIONS:-10}"
rounds="${ROUNDS:-2}"
modes="${MODES:-collapsed every-rank}"
sets=()
for s in ${SETS:-}; do sets+=(--set "$s"); done
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
printf '%-6s %-34s %-10s %6s %9s %8s %8s %8s %10s %10s %11s %11s\n' round binary mode ranks simulated wall_s user_s sys_s maxrss_MB events ev_per_s ev_per_cpu_s
for round in $(seq 1 "$rounds"); do
  for nodes in $nodes_list; do
    for binary in "$@"; do
      binary_modes="-"
      "$binary" run --help 2>/dev/null | grep -q -- --every-rank && binary_modes=$modes
      for mode in $binary_modes; do
        flags=()
        [[ $mode == every-rank ]] && flags=(--every-rank)
        [[ -n ${THREADS:-} ]] && "$binary" run --help 2>/dev/null | grep -q -- --threads && flags+=(--threads "$THREADS")
        /usr/bin/time -f '%e %U %S %M' -o "$out/time" "$binary" run "$scenario" -o "$out/run" "${flags[@]}" \
          --set cluster.nodes="$nodes" --set training.iterations="$iterations" --set training.warmup_iterations=1 \
          "${sets[@]}" >"$out/stdout" 2>&1 || true
        read -r wall user sys rss_kb < <(tail -n 1 "$out/time")
        events=$(sed -n 's/^events simulated: *//p' "$out/stdout")
        simulated=$(sed -n 's/^ranks simulated: *\([0-9]*\) of .*/\1/p' "$out/stdout")
        awk -v r="$round" -v b="$binary" -v mo="$mode" -v n="$((nodes * 8))" -v k="${simulated:-all}" -v w="$wall" -v u="$user" \
          -v s="$sys" -v m="$rss_kb" -v e="$events" \
          'BEGIN { printf "%-6s %-34s %-10s %6d %9s %8.2f %8.2f %8.2f %10.0f %10d %10.2fM %10.2fM\n", r, b, mo, n, k, w, u, s, m / 1024, e, e / w / 1e6, e / (u + s) / 1e6 }'
      done
    done
  done
done
