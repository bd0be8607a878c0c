#!/usr/bin/env bash
# Issue 8's sweep benchmark: 1,000 BERT-base runs (2 ranks, 20 iterations each; PR #8431's own
# setting, scenarios/bert-base-qa-2x-rtx4000ada.yaml) as one `prefetchlab sweep` on 2 threads.
# Grid: 10 prefetch bucket sizes x 100 seeds with 2% kernel jitter. Reports the wall time and
# the CPU time (user + sys; on a machine shared with other work the wall time overstates what
# 2 idle cores take, the CPU time does not). Target: under 20 s wall on 2 cores.
#   bench/sweep_bench.sh [PREFETCHLAB_BINARY] [JOBS]     (default build/apps/prefetchlab, 2)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cli=${1:-$root/build/apps/prefetchlab}
jobs=${2:-2}
[[ -x $cli ]] || { echo "sweep_bench: no prefetchlab binary at $cli (build it first)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{
  echo "zero.stage3_prefetch_bucket_size: [1e6, 2e6, 3e6, 5e6, 1e7, 2e7, 3e7, 5e7, 1e8, 2e8]"
  echo "noise.seed: [$(seq -s ', ' 1 100)]"
  echo "noise.compute_jitter: [0.02]"
  echo "training.iterations: [20]"
} >"$work/grid.yaml"

TIMEFORMAT='%R %U %S'
times=$({ time "$cli" sweep "$root/scenarios/bert-base-qa-2x-rtx4000ada.yaml" --grid "$work/grid.yaml" \
  -o "$work/out" -j "$jobs" >"$work/log" 2>&1; } 2>&1) || { cat "$work/log" >&2; exit 1; }
read -r wall_s user_s sys_s <<<"$times"
rows=$(($(wc -l <"$work/out/results.csv") - 1))
[[ $rows -eq 1000 ]] || { echo "sweep_bench: $rows rows, expected 1000" >&2; exit 1; }
cpu_s=$(awk -v u="$user_s" -v s="$sys_s" 'BEGIN { printf "%.2f", u + s }')
per_run_ms=$(awk -v c="$cpu_s" 'BEGIN { printf "%.1f", c }')
echo "sweep_bench: 1000 BERT-base runs (2 ranks, 20 iterations) with -j $jobs on $(nproc) cores:" \
  "wall ${wall_s} s, CPU ${cpu_s} s (${per_run_ms} ms per run); target < 20 s wall on 2 cores"
