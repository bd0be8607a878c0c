#!/usr/bin/env bash
# `validate --backend host --launcher env`: the ranks as processes launched by a plain shell loop
# on loopback, as torchrun would set them (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
# MASTER_PORT). Checks that
#   - 2 and 4 processes give the records of 2 and 4 threads in every non-timing field, with the
#     data through shared memory and through rank 0's store (TCP), and
#     `calibrate --backend host` as 2 processes writes the profile the thread version writes;
#   - a rank killed mid-run (rank 0, whose process serves the store, or another) ends the
#     others with exit 3 and a message naming it, at once;
#   - a rank that stops answering (SIGSTOP) ends them within --rank-timeout, naming it;
#   - ranks that run different scenarios, a WORLD_SIZE that is not the scenario's, a missing
#     environment, and launcher options that would change nothing are bad input (exit 2) with a
#     clear message.
#   tests/gpu_backend/process_launch_test.sh PREFETCHLAB
set -euo pipefail
cli=${1:?usage: $0 PREFETCHLAB}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/prefetchlab-launch-XXXXXX")
pids=()
jobs_launched=()  # each job's port: the prefix of its shared memory files (prefetchlab-PORT-<random>-...)
# The job's secret, in the launcher's environment as a user would export it (job_secret.hpp).
export PREFETCHLAB_JOB_SECRET=process-launch-test-$RANDOM$RANDOM-secret
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  # What a failed check left, so that no run of this test fills /dev/shm.
  for job in "${jobs_launched[@]}"; do rm -f /dev/shm/prefetchlab-"$job"-*; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$work"/*.log; do [[ -f $f ]] && { echo "--- $f" >&2; tail -n 5 "$f" >&2; }; done; exit 1; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
scenario=$repo/scenarios/host/tiny-llama-host.yaml

# launch WORLD NAME [ARGS...]: one process per rank in the background; pids in rank_pids.
launch() {
  local world=$1 name=$2; shift 2
  port=$(free_port)  # the job's: its shared memory files are named by it
  rank_pids=()
  for ((r = 0; r < world; r++)); do
    RANK=$r WORLD_SIZE=$world LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$cli" validate "$scenario" --backend host --launcher env -o "$work/$name" "$@" >"$work/$name.rank$r.log" 2>&1 &
    rank_pids+=($!)
    pids+=($!)
  done
  job="$port"
  jobs_launched+=("$job")
}
# The last launched job's shared memory files still named in /dev/shm. Each rank removes its
# file's name once every rank holds every file open (after the first collective), so nothing is
# left even by a rank killed later. Files are named by the port and a random part: another job's
# (another test, or a run killed long ago) never counts.
shm_left() { ls /dev/shm 2>/dev/null | grep -c "^prefetchlab-$job-" || true; }
# wait_rank PID: its exit code in rc (not in a subshell, which cannot wait for this shell's children)
wait_rank() { rc=0; wait "$1" || rc=$?; }

# 2 processes move collective data through shared memory (every rank is on this node), 4
# through rank 0's store (TCP), as ranks on several nodes do.
for world in 2 4; do
  set_world=(--set "cluster.gpus_per_node=$world" --repeats 1)
  data=shm
  ((world == 4)) && data=tcp
  "$cli" validate "$scenario" --backend host "${set_world[@]}" -o "$work/threads$world" >"$work/threads$world.log" 2>&1 ||
    fail "$world threads"
  launch "$world" "processes$world" "${set_world[@]}" --process-data "$data"
  for ((r = 0; r < world; r++)); do
    wait_rank "${rank_pids[r]}"
    [[ $rc == 0 ]] || fail "rank $r of $world processes exited $rc"
  done
  grep -q "rank 1 of $world: 1 run(s) done; rank 0 writes the report" "$work/processes$world.rank1.log" || fail "rank 1's closing line"
  python3 "$here/compare_records.py" "$work/threads$world" "$work/processes$world" || fail "$world processes ($data) vs $world threads"
  [[ $(shm_left) == 0 ]] || fail "$world processes left shared memory files"
done


# calibrate --backend host as 2 processes: rank 0 writes a profile with the keys the thread
# version writes, and the collective curves of 2 ranks on 1 node. Each size is the median of 3
# repetitions. On a loaded CI machine (the ASan run, two tests at a time) every collective of
# 2 processes can take one scheduler time slice whatever its size (2.0-2.7 ms from 4 KiB to
# 4 MiB); calibrate then leaves that op at the base's figures and says so ("# not fitted:").
# Each calibration is tried up to 3 times for a fitted one; if the machine stays too busy, the
# key and curve checks give way to checking that the unfitted op is named and the profile written.
calibrate_threads() {
  "$cli" calibrate --backend host --iterations 3 -o "$work/threads.yaml" >"$work/calibrate-threads.log" 2>&1 ||
    fail "calibrate, threads"
}
calibrate_processes() {
  port=$(free_port)
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$cli" calibrate --backend host --launcher env --iterations 3 \
      -o "$work/processes.yaml" >"$work/calibrate.rank$r.log" 2>&1 &
    rank_pids[r]=$!
    pids+=($!)
  done
  for r in 0 1; do
    wait_rank "${rank_pids[r]}"
    [[ $rc == 0 ]] || fail "calibrate rank $r exited $rc"
  done
  grep -q "rank 1 of 2: microbenchmarks done; rank 0 writes the profile" "$work/calibrate.rank1.log" || fail "calibrate rank 1's line"
}
unfitted() { grep -q "^# not fitted: " "$1"; }
for attempt in 1 2 3; do
  calibrate_threads
  unfitted "$work/calibrate-threads.log" || break
done
for attempt in 1 2 3; do
  calibrate_processes
  unfitted "$work/calibrate.rank0.log" || break
done
[[ -s $work/threads.yaml && -s $work/processes.yaml ]] || fail "calibrate: a profile was not written"
if unfitted "$work/calibrate-threads.log" || unfitted "$work/calibrate.rank0.log"; then
  for log in "$work/calibrate-threads.log" "$work/calibrate.rank0.log"; do
    if unfitted "$log"; then
      grep -q "^# not fitted: [a-z_]*: times did not grow with size at all.*the base profile's latency and bus bandwidth stay" "$log" ||
        fail "calibrate: an unfitted op without its reason ($log)"
    fi
  done
  echo "calibrate: the machine stayed too busy to fit a collective in 3 tries; checked that it says so" >&2
else
  # The calibration section's keys (two-space indented under `calibration:`).
  calibration_keys() { awk '/^calibration:/ {on = 1; next} /^[^ ]/ {on = 0} on && /^  [a-z_]+:/ {print $1}' "$1" | sort; }
  [[ $(calibration_keys "$work/threads.yaml") == "$(calibration_keys "$work/processes.yaml")" ]] ||
    fail "calibrate: the profiles' calibration keys differ"
  grep -A2 -- "- op: all_gather" "$work/processes.yaml" | grep -q "ranks: 2" || fail "calibrate: no 2-rank all_gather curve"
fi

# kill_mid_run NAME VICTIM SURVIVOR MESSAGE: 2 ranks of a long run (2,000 iterations take
# minutes here); VICTIM is killed after 2 s; SURVIVOR must end within 10 s with exit 3 and a
# message matching MESSAGE.
long=(--set training.iterations=2000 --repeats 1)
kill_mid_run() {
  local name=$1 victim=$2 survivor=$3 message=$4
  launch 2 "$name" "${long[@]}"
  sleep 2
  kill -9 "${rank_pids[victim]}"
  local killed_at=$SECONDS
  wait_rank "${rank_pids[survivor]}"
  [[ $rc == 3 ]] || fail "rank $survivor after rank $victim was killed: exit $rc, expected 3"
  ((SECONDS - killed_at <= 10)) || fail "rank $survivor took $((SECONDS - killed_at)) s to end after rank $victim was killed"
  grep -q "$message" "$work/$name.rank$survivor.log" || fail "rank $survivor's message does not name rank $victim"
}
kill_mid_run killed 1 0 "rank 1 failed in .*its process exited or its connection to the store broke"
[[ $(shm_left) == 0 ]] || fail "the killed rank 1's shared memory file is left"
# What rank 0 finished is kept, though rank 1's records died with its process.
[[ $(wc -l <"$work/killed/iterations.csv") -gt 1 ]] || fail "rank 0 kept no rows after rank 1 was killed"
grep -q "without rank(s) 1, whose records died with their process" "$work/killed.rank0.log" ||
  fail "rank 0 does not say which rank's rows are missing"

# A rank killed in the second of three repeats: the first repeat stands, and the report rests on
# it (exit 3 all the same).
launch 2 repeats --set training.iterations=60 --repeats 3
for ((i = 0; i < 600; i++)); do
  grep -q "validate: run 1 of 3 done" "$work/repeats.rank0.log" 2>/dev/null && break
  sleep 0.1
done
grep -q "validate: run 1 of 3 done" "$work/repeats.rank0.log" || fail "the first repeat did not finish within 60 s"
kill -9 "${rank_pids[1]}"
wait_rank "${rank_pids[0]}"
[[ $rc == 3 ]] || fail "rank 0 after rank 1 was killed in repeat 2: exit $rc, expected 3"
grep -q "the report below rests on the 1 run(s) that finished before it" "$work/repeats.rank0.log" ||
  fail "rank 0 does not say the report rests on the finished repeat"
[[ -s "$work/repeats/validate.csv" ]] || fail "no report from the finished repeat"
wait_rank "${rank_pids[1]}"
[[ $(shm_left) == 0 ]] || fail "the killed rank 1's shared memory file is left (repeats)"
# Rank 0 killed: its store goes with it, and nothing is left to remove its file but itself.
kill_mid_run killed0 0 1 "rank 0 failed in .*rank 0's store at 127.0.0.1:[0-9]* closed the connection"
[[ $(shm_left) == 0 ]] || fail "the killed rank 0's shared memory file is left"

# A rank that stops answering: the others end within --rank-timeout (2 s), naming it.
launch 2 stopped "${long[@]}" --rank-timeout 2
sleep 2
kill -STOP "${rank_pids[1]}"
stopped_at=$SECONDS
wait_rank "${rank_pids[0]}"
kill -9 "${rank_pids[1]}" 2>/dev/null || true
[[ $rc == 3 ]] || fail "rank 0 after rank 1 stopped: exit $rc, expected 3"
((SECONDS - stopped_at <= 15)) || fail "rank 0 took $((SECONDS - stopped_at)) s to end after rank 1 stopped"
grep -q "rank 1 failed in .*did not reach the collective within 2000 ms" "$work/stopped.rank0.log" ||
  fail "rank 0's message does not name the stopped rank 1"
wait_rank "${rank_pids[1]}"
[[ $(shm_left) == 0 ]] || fail "the stopped and killed rank 1's shared memory file is left"

# Ranks that run different scenarios (rank 1 with one more override).
port=$(free_port)
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$cli" validate "$scenario" --backend host --launcher env \
  --repeats 1 -o "$work/mismatch" >"$work/mismatch.rank0.log" 2>&1 & pids+=($!); r0=$!
RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$cli" validate "$scenario" --backend host --launcher env \
  --repeats 1 --set training.iterations=5 -o "$work/mismatch" >"$work/mismatch.rank1.log" 2>&1 & pids+=($!); r1=$!
for pid in $r0 $r1; do
  wait_rank "$pid"
  [[ $rc == 2 ]] || fail "ranks with different overrides: exit $rc, expected 2"
done
grep -q "the job's ranks disagree: rank [01] runs 'validate tiny-llama-host.yaml@" "$work/mismatch.rank1.log" ||
  fail "the disagreement's message"

# One process for a 2-rank scenario.
rc=0
RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) "$cli" validate "$scenario" --backend host --launcher env \
  --repeats 1 -o "$work/world" >"$work/world.log" 2>&1 || rc=$?
[[ $rc == 2 ]] || fail "WORLD_SIZE 1 for a 2-rank scenario: exit $rc, expected 2"
grep -q "has 2 ranks but the launcher started 1" "$work/world.log" || fail "the world size message"

# Two processes without the job's secret: refused before anything starts (issue 46, S1).
rc=0
env -u PREFETCHLAB_JOB_SECRET RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) "$cli" validate "$scenario" \
  --backend host --launcher env --repeats 1 -o "$work/nosecret" >"$work/nosecret.log" 2>&1 || rc=$?
[[ $rc == 2 ]] || fail "no job secret: exit $rc, expected 2"
grep -q "neither PREFETCHLAB_JOB_SECRET nor PREFETCHLAB_JOB_SECRET_FILE is set" "$work/nosecret.log" || fail "the missing secret's message"

# No launch environment at all.
rc=0
env -u RANK -u WORLD_SIZE -u SLURM_PROCID "$cli" validate "$scenario" --backend host --launcher env -o "$work/none" \
  >"$work/none.log" 2>&1 || rc=$?
[[ $rc == 2 ]] || fail "no launch environment: exit $rc, expected 2"
grep -q "neither RANK and WORLD_SIZE (torchrun) nor SLURM_PROCID (srun) is set" "$work/none.log" || fail "the missing environment's message"
# Launcher options that would change nothing are bad input, never silently ignored.
expect_bad_input() {  # expect_bad_input MESSAGE ARGS...
  local message=$1; shift
  rc=0
  "$cli" "$@" >"$work/ignored.log" 2>&1 || rc=$?
  [[ $rc == 2 ]] || fail "$* exited $rc, expected 2"
  grep -q -- "$message" "$work/ignored.log" || fail "$*: the message does not say '$message'"
}
expect_bad_input "key '--rank-timeout': is given without --launcher env" validate "$scenario" --backend host --rank-timeout 3
expect_bad_input "key '--process-data': is given with --backend cuda" validate "$scenario" --backend cuda --launcher env --process-data shm
expect_bad_input "key '--launcher': is given with --against-trace" validate "$scenario" --against-trace x.json --launcher env
expect_bad_input "key '--launcher': is given without --backend" calibrate --from-trace x.json -o "$work/x.yaml" --launcher env
echo "process launch: 2 and 4 processes equal threads, calibrate as 2 processes; killed, stopped, mismatched and unlaunched ranks reported"
