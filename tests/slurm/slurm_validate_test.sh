#!/usr/bin/env bash
# `validate --backend host --launcher env` under Slurm's srun on a one-node cluster on this
# machine (local-cluster.sh): 2 and 4 tasks (4 oversubscribe its CPUs, --overcommit), each a
# rank that reads SLURM_PROCID, SLURM_NTASKS and SLURM_LOCALID and meets the others at
# SLURM_LAUNCH_NODE_IPADDR on a port from the job id. Rank 0's records must equal those of as
# many threads in every non-timing field. Every daemon started is stopped by pid on exit. Exit
# 77 (skipped) where Slurm cannot be started, with the reason.
#   tests/slurm/slurm_validate_test.sh PREFETCHLAB
set -euo pipefail
cli=${1:?usage: $0 PREFETCHLAB}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
source "$here/test-cluster.sh" srun
fail() { echo "FAIL: $*" >&2; tail -n 5 "$work"/*.log >&2 2>/dev/null || true; exit 1; }

scenario=$repo/scenarios/host/tiny-llama-host.yaml
# srun hands the submitting shell's environment to every task: the job's secret with it.
export PREFETCHLAB_JOB_SECRET=slurm-validate-test-$RANDOM$RANDOM-secret
for tasks in 2 4; do
  args=(--set "cluster.gpus_per_node=$tasks" --repeats 1)
  "$cli" validate "$scenario" --backend host "${args[@]}" -o "$work/threads$tasks" >"$work/threads$tasks.log" 2>&1 ||
    fail "$tasks threads"
  # MASTER_ADDR and MASTER_PORT are left to the Slurm defaults (gpu_backend/process/launch_env.hpp).
  env -u MASTER_ADDR -u MASTER_PORT -u RANK -u WORLD_SIZE \
    srun --ntasks "$tasks" --overcommit --time 5 --output "$work/srun$tasks.rank%t.log" \
    "$cli" validate "$scenario" --backend host --launcher env "${args[@]}" -o "$work/srun$tasks" ||
    fail "srun --ntasks $tasks exited $?"
  grep -q "rank 1 of $tasks: 1 run(s) done" "$work/srun$tasks.rank1.log" || fail "task 1's closing line"
  grep -q "outputs in: $work/srun$tasks" "$work/srun$tasks.rank0.log" || fail "task 0 did not write the report"
  python3 "$repo/tests/gpu_backend/compare_records.py" "$work/threads$tasks" "$work/srun$tasks" ||
    fail "srun --ntasks $tasks vs $tasks threads"
done
echo "srun: 2 and 4 tasks equal as many threads in every non-timing field"
