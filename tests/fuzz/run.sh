#!/usr/bin/env bash
# Runs every libFuzzer harness of tests/fuzz for SECONDS each (tests/fuzz/README.md).
#   tests/fuzz/run.sh BUILD_DIR SECONDS [HARNESS...]
# BUILD_DIR is a clang build with -DPREFETCHLAB_FUZZ=ON (tests/sanitize.sh makes one). Each
# harness first replays its regressions (tests/fuzz/regressions/HARNESS/: inputs that once
# crashed), then fuzzes a corpus seeded from the bundled files (BUILD_DIR/fuzz/corpus/HARNESS,
# kept between runs). A crash, an abort, a sanitizer report, a hang over 10 s or memory over
# 2 GB fails the script; the input lands in BUILD_DIR/fuzz/artifacts/. Set FUZZ_CLI to a built
# prefetchlab to add a run's samples.csv and nccl-tests tables to the seeds, FUZZ_JOBS to run
# that many harnesses at once.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:?usage: tests/fuzz/run.sh BUILD_DIR SECONDS [HARNESS...]}
seconds=${2:?usage: tests/fuzz/run.sh BUILD_DIR SECONDS [HARNESS...]}
shift 2
harnesses=("$@")
((${#harnesses[@]})) || harnesses=(scenario_yaml model_hardware_yaml ds_config_json samples_csv nccl_tests_log
                                   sweep_files allocator_sequence kineto_trace)
work=$build/fuzz
mkdir -p "$work/artifacts" "$work/logs"
PYTHONDONTWRITEBYTECODE=1 python3 tests/fuzz/make_corpus.py "$work/corpus" ${FUZZ_CLI:+--cli "$FUZZ_CLI"} >/dev/null
# Limits: 10 s per input is a hang; 2 GB of memory in all, or one allocation over 1 GB, is
# memory out of proportion to inputs of at most 1 MiB (large enough for the quadratic key
# checks and the decompression bombs that 16 KiB could not hold).
limits=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len=1048576)
# Each harness's input format as a libFuzzer dictionary (tests/fuzz/dictionaries/): its tokens
# and the keys its reader knows, so mutations reach past the syntax.
dictionary_of() {
  case $1 in
    scenario_yaml | model_hardware_yaml) echo tests/fuzz/dictionaries/yaml.dict ;;
    ds_config_json) echo tests/fuzz/dictionaries/json.dict ;;
    kineto_trace) echo tests/fuzz/dictionaries/kineto.dict ;;
    *) echo tests/fuzz/dictionaries/csv.dict ;;
  esac
}
# One harness: regressions first, then SECONDS of fuzzing; prints one line, fails on a finding.
fuzz_one() {
  local h=$1 binary=$build/tests/fuzz/fuzz_$1 log=$work/logs/$1.log status execs cov
  # Regressions are small and once took seconds or crashed: 3 s each is a failure.
  if [[ -d tests/fuzz/regressions/$h ]] &&
     ! "$binary" "${limits[@]}" -timeout=3 tests/fuzz/regressions/$h/* >"$log.regressions" 2>&1; then
    echo "fuzz $h: a regression input fails again (log: $log.regressions)"
    return 1
  fi
  status=ok
  "$binary" "${limits[@]}" -dict="$(dictionary_of "$h")" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/$h-" "$work/corpus/$h" >"$log" 2>&1 || status=FAILED
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  cov=$(grep -E '^#[0-9]+' "$log" | tail -1 | sed -n 's/.*cov: \([0-9]*\) ft: \([0-9]*\).*corp: \([0-9]*\).*/cov \1, features \2, corpus \3/p')
  echo "fuzz $h: $status, ${seconds} s, ${execs:-?} executions, ${cov:-?} (log: $log)"
  [[ $status == ok ]]
}

# FUZZ_JOBS harnesses at a time (default 1), each on one core.
parallel=${FUZZ_JOBS:-1}
failed=()
for ((i = 0; i < ${#harnesses[@]}; i += parallel)); do
  pids=()
  for h in "${harnesses[@]:i:parallel}"; do
    fuzz_one "$h" &
    pids+=("$!:$h")
  done
  for entry in "${pids[@]}"; do
    wait "${entry%%:*}" || failed+=("${entry#*:}")
  done
done
if ((${#failed[@]})); then
  echo "fuzz: failed: ${failed[*]} (inputs in $work/artifacts/)" >&2
  exit 1
fi
