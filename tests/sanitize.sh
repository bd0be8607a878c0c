#!/usr/bin/env bash
# The sanitizer and fuzzing jobs (docs/testing.md says what each covers and why it is trimmed).
#   tests/sanitize.sh [asan] [tsan] [fuzz]     (default: all three, in that order)
# asan  clang build with ASan+UBSan (LeakSanitizer on), libFuzzer coverage, no mimalloc, no LTO:
#       the prefetchlab command, the test binary and the fuzz harnesses; runs the ASan test set.
# tsan  clang build with TSan of the threaded tests only (prefetchlab_threaded_tests): the host
#       device and its rendezvous, the executor and its fault injection, the sweep's workers,
#       simulated ranks on threads.
# fuzz  each libFuzzer harness for FUZZ_SECONDS (default 20) on its seeded corpus, after its
#       regression inputs (tests/fuzz/run.sh); needs the asan build.
# Environment: SANITIZE_DIR (default build-sanitize), JOBS, FUZZ_SECONDS, FUZZ_CLI (a built
# prefetchlab, to seed samples.csv and nccl-tests tables). Any sanitizer report fails the job.
set -euo pipefail
cd "$(dirname "$0")/.."
root=${SANITIZE_DIR:-build-sanitize}
jobs=${JOBS:-$(nproc)}
jobs_wanted=("$@")
((${#jobs_wanted[@]})) || jobs_wanted=(asan tsan fuzz)

# The test set run under ASan+UBSan (docs/testing.md): every GoogleTest case but
# - the Python tests (plots, setup coverage, allocator comparison): their C++ side is the
#   `prefetchlab` command the GoogleTest cases run;
# - cases that repeat long simulations the short cases already cover: the fidelity corpus, the
#   compare tables (docs/controllers.md's, README's variable lengths), tune, every
#   bundled/defect scenario end to end, calibrate-then-validate, the 64-rank collapse comparison,
#   every bundled scenario in one queue and rank by rank (RankThreads runs the same code small);
# - the executor's numeric checks but three (two ranks, offload on one rank, divergence): each
#   runs real GEMMs through the same code, 10-70 s apiece under ASan.
# - the Slurm test (slurm_sweep_array): a scheduler's integration, whose sweeps the sweep and
#   merge cases cover.
asan_exclude='^(plots_|setup_covers|torch_allocator|gpu_check_|slurm_)|^Fidelity\.|^CompareDocs\.|^VariableSeqLen\.|^Tune'
asan_exclude+='|^RunCommand\.(EveryBundled|EveryDefect|Flipping)|^ValidateCommand\.CalibrateThenValidate|^RankSymmetry\.CollapsedRuns'
asan_exclude+='|^RankOrder\.RanksRunApart'
asan_exclude+='|^Executor\.(GatheredParametersAndReducedGradientsAreExact(OnOneRank|OnFourRanks|InFp32|With|When)'
asan_exclude+='|TheHostBlocks|PlansAndBuckets|OffloadedParametersCrossTheHostLinkOnTheAllGather|OffloadFrees'
asan_exclude+='|OneRankOffload|CpuAdam|CollectivesMatch)'
# The threaded tests run under TSan: all of the host device, its rendezvous and the executor's
# fault injection, the sweep's workers, simulated ranks on threads, the executor on four ranks (the most threads) and
# with offload and checkpointing (the host-link copies on their own stream), and ranks as
# processes (the store's thread, each link's reader, the failure listeners, both data paths;
# the executor with one link per rank once, on two ranks through shared memory: 10 s under TSan).
tsan_filter='HostDevice.*:ExecutorFailure.*:ParallelRunner.*:ClockConsensus.*:ProcessStore.*:ProcessTransport.*:RankThreads.*'
tsan_filter+=':*ProcessExecutor.MatchesTheThreadVersionInEveryNonTimingField/Ranks2SharedMemory'
tsan_filter+=':Executor.GatheredParametersAndReducedGradientsAreExactOnFourRanks'
tsan_filter+=':Executor.TheHostBlocksOnlyWhereDeepSpeedDoesWithOffloadAndCheckpointing'

configure() {  # dir sanitizers extra-cmake-args...
  local dir=$1 sanitize=$2
  shift 2
  # -O1: the sanitizers' usual level (fast enough to run, quicker to build than -O3); asserts on.
  CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -gline-tables-only" -DPREFETCHLAB_SANITIZE="$sanitize" \
    -DPREFETCHLAB_BENCH=OFF -DPREFETCHLAB_CUDA=OFF -DPREFETCHLAB_LTO=OFF "$@" >/dev/null
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

for job in "${jobs_wanted[@]}"; do
  start=$SECONDS
  case $job in
    asan)
      configure "$root/asan" address,undefined -DPREFETCHLAB_FUZZ=ON
      cmake --build "$root/asan" -j "$jobs" --target prefetchlab prefetchlab_tests fuzz_harnesses
      # Timeouts inside the tests (a rank's collective timeout, a CLI's `timeout 60`) are sized
      # for optimised code; ctest's own is raised for the slower sanitized runs.
      ctest --test-dir "$root/asan" --output-on-failure -j "$jobs" --timeout 600 -E "$asan_exclude"
      ;;
    tsan)
      configure "$root/tsan" thread
      cmake --build "$root/tsan" -j "$jobs" --target prefetchlab_threaded_tests
      "$root/tsan/tests/prefetchlab_threaded_tests" --gtest_brief=1 --gtest_filter="$tsan_filter"
      ;;
    fuzz)
      # One harness per core at a time: 8 harnesses x 20 s in about 1.5 minutes on 2 cores.
      FUZZ_JOBS=${FUZZ_JOBS:-$jobs} tests/fuzz/run.sh "$root/asan" "${FUZZ_SECONDS:-20}"
      ;;
    *)
      echo "tests/sanitize.sh: unknown job '$job' (asan, tsan or fuzz)" >&2
      exit 2
      ;;
  esac
  echo "sanitize: $job passed in $((SECONDS - start)) s"
done
