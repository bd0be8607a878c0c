#!/usr/bin/env bash
# `sweep --slurm` under a real Slurm: a one-node cluster on this machine (local-cluster.sh), a
# 12-point sweep as a 3-task array plus its merge, compared byte for byte with a local sweep.
# One task is cancelled after its first row; the merge then fails naming the shard, and
# `--slurm --resume --submit` re-runs only that shard's missing points. Every daemon started is
# stopped by pid on exit. Exit 77 (skipped) where Slurm cannot be started, with the reason.
#   tests/slurm/slurm_sweep_test.sh PREFETCHLAB
set -euo pipefail
cli=${1:?usage: $0 PREFETCHLAB}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
wait_until() {  # wait_until SECONDS WHAT COMMAND...
  local limit=$1 what=$2; shift 2
  local deadline=$((SECONDS + limit))
  until "$@"; do
    ((SECONDS < deadline)) || fail "$what: not within $limit s"
    sleep 0.2
  done
}
rows() { [[ -f $1 ]] && tail -n +2 "$1" | wc -l || echo 0; }
queue_empty() { [[ -z $(squeue -h -j "$1" 2>/dev/null) ]]; }

source "$here/test-cluster.sh" slurm

# 12 points of about a second each (40 iterations of Llama-2-7B is ~0.3 s here).
cat >"$work/grid.yaml" <<GRID
training.iterations: [150]
zero.stage3_prefetch_bucket_size: [1e6, 5e6, 1e7, 5e7]
noise.seed: [1, 2, 3]
GRID
scenario=$repo/scenarios/default.yaml
out=$work/out
"$cli" sweep "$scenario" --grid "$work/grid.yaml" -o "$work/local" -j 2 >/dev/null 2>&1 || fail "the local sweep"

submitted=$("$cli" sweep "$scenario" --grid "$work/grid.yaml" -o "$out" --slurm --shards 3 --submit)
echo "$submitted"
array=$(sed -n 's/^submitted: array job \([0-9]*\) (tasks 0-2), merge job \([0-9]*\) after it$/\1/p' <<<"$submitted")
merge=$(sed -n 's/^submitted: array job \([0-9]*\) (tasks 0-2), merge job \([0-9]*\) after it$/\2/p' <<<"$submitted")
[[ -n $array && -n $merge ]] || fail "no job ids in the submission's output"

# Shard 1 is cancelled once it has a row and before it has all four.
wait_until 120 "a first row of shard 1" bash -c "(( \$(tail -n +2 '$out/shards/1/results.csv' 2>/dev/null | wc -l) >= 1 ))"
scancel "${array}_1"
wait_until 180 "the array and the merge to end" queue_empty "$array,$merge"
"$cli" sweep-status "$out" --no-squeue
killed_rows=$(rows "$out/shards/1/results.csv")
((killed_rows >= 1 && killed_rows < 4)) || fail "shard 1 has $killed_rows rows after the cancel (expected 1-3)"
[[ ! -e $out/results.csv ]] || fail "the merge wrote results.csv with points missing"
grep -q "points have no row in any shard" "$out"/slurm/logs/merge-*.out || fail "the merge's log does not say what is missing"
grep -q "by shard: 1/3 misses $((4 - killed_rows))" "$out"/slurm/logs/merge-*.out || fail "the merge's log does not name shard 1"

resumed=$("$cli" sweep "$scenario" --grid "$work/grid.yaml" -o "$out" --slurm --resume --submit)
echo "$resumed"
grep -q "array tasks 1," <<<"$resumed" || fail "the resume does not submit shard 1 alone"
array2=$(sed -n 's/^submitted: array job \([0-9]*\) (tasks 1), merge job \([0-9]*\) after it$/\1/p' <<<"$resumed")
merge2=$(sed -n 's/^submitted: array job \([0-9]*\) (tasks 1), merge job \([0-9]*\) after it$/\2/p' <<<"$resumed")
[[ -n $array2 && -n $merge2 ]] || fail "no job ids in the resume's output"
wait_until 180 "the resumed shard and its merge to end" queue_empty "$array2,$merge2"
"$cli" sweep-status "$out" --no-squeue

cmp "$work/local/results.csv" "$out/results.csv" || fail "results.csv differs from the local sweep's"
# Nothing lost or duplicated: shard 1's second session ran only points without a row after the
# first, and the other shards ran once.
python3 - "$out" <<'PY'
import csv, json, sys
out = sys.argv[1]
timings = list(csv.DictReader(open(f"{out}/shards/1/timings.csv")))
first = {t["point"] for t in timings if t["session"] == "1"}
second = [t["point"] for t in timings if t["session"] == "2"]
assert second and not first & set(second), f"session 2 re-ran {first & set(second)}"
assert len(second) == len(set(second)), f"session 2 ran a point twice: {second}"
points = sorted(int(p) for p in first | set(second))
assert points == [1, 4, 7, 10], points
for shard, sessions in ((0, 1), (1, 2), (2, 1)):
    got = json.load(open(f"{out}/shards/{shard}/sweep.json"))["sessions"]
    assert got == sessions, f"shard {shard}: {got} sessions"
print("timings: shard 1 ran", sorted(first), "then", sorted(second))
PY
echo "PASS: 12 points as a 3-task Slurm array, one task cancelled and resumed; results.csv identical to a local sweep"
