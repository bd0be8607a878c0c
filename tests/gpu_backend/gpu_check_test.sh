#!/usr/bin/env bash
# gpu_backend/gpu-check.sh and prepare-offline.sh on a machine without a GPU (CI).
#   tests/gpu_backend/gpu_check_test.sh offline-configure
#     prepare-offline.sh into a temporary folder, then gpu-check.sh --configure-only with the
#     system's packages hidden from CMake (PREFETCHLAB_FIND_ONLY_OFFLINE=1): the configure the
#     offline GPU machine runs. Every package must come from the folder; the folder must still
#     work once moved; a folder missing a library must fail naming it.
#   tests/gpu_backend/gpu_check_test.sh steps BUILD_DIR
#     --dry-run lists every step of the check; a run on BUILD_DIR (--skip-build) records each
#     step's exit code and seconds, goes on past failing steps (here: every `--backend cuda`
#     step, without a GPU) and exits 1 when one failed.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# The exit code column of a step in a summary.tsv ("" when the step is missing).
step_rc() { awk -F'\t' -v s="$2" '$1 == s { print $2 }' "$1"; }

offline_configure() {
  "$repo/gpu_backend/prepare-offline.sh" "$tmp/offline" > "$tmp/prepare.log" || { cat "$tmp/prepare.log"; fail "prepare-offline.sh"; }
  local cuda=${CUDA_HOME:-/usr/local/cuda}
  [[ -x $cuda/bin/nvcc ]] || export PREFETCHLAB_GPU_CHECK_CUDA=AUTO
  local rc=0
  PREFETCHLAB_OFFLINE_DIR=$tmp/offline PREFETCHLAB_FIND_ONLY_OFFLINE=1 \
    "$repo/gpu_backend/gpu-check.sh" --configure-only --build-dir "$tmp/build" "$tmp/out" > "$tmp/check.log" 2>&1 || rc=$?
  if ((rc != 0)); then cat "$tmp/check.log" "$tmp/out/configure.log" >&2; fail "gpu-check.sh --configure-only exited $rc"; fi
  [[ $(step_rc "$tmp/out/summary.tsv" configure) == 0 ]] || fail "summary.tsv has no configure step with exit code 0"
  # Where CMake found each package, header and library: inside the offline folder only.
  local key value
  for key in yaml-cpp_DIR CLI11_DIR nlohmann_json_DIR Eigen3_DIR GTest_DIR PREFETCHLAB_ZLIB_INCLUDE_DIR PREFETCHLAB_ZLIB_LIBRARY; do
    value=$(sed -n "s/^$key:[A-Z]*=//p" "$tmp/build/CMakeCache.txt")
    [[ $value == "$tmp/offline/"* ]] || fail "$key is '$value', not inside the offline folder $tmp/offline"
  done
  # Moved elsewhere, the folder's package files still find their files; with a library
  # missing, the package is not found and the message names the file.
  mv "$tmp/offline" "$tmp/moved"
  mkdir -p "$tmp/probe"
  cat > "$tmp/probe/CMakeLists.txt" <<'PROBE'
cmake_minimum_required(VERSION 3.22)
project(offline_probe LANGUAGES CXX)
find_package(yaml-cpp REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(Eigen3 3.3 REQUIRED NO_MODULE)
find_package(GTest REQUIRED)
foreach(target yaml-cpp CLI11::CLI11 nlohmann_json::nlohmann_json Eigen3::Eigen GTest::gtest GTest::gtest_main)
  if(NOT TARGET ${target})
    message(FATAL_ERROR "no target ${target}")
  endif()
endforeach()
get_target_property(location yaml-cpp IMPORTED_LOCATION)
message(STATUS "yaml-cpp at ${location}")
find_path(ZLIB_HEADER_DIR zlib.h REQUIRED)
find_library(ZLIB_FILE z REQUIRED)
add_executable(probe probe.cpp)
target_link_libraries(probe PRIVATE yaml-cpp GTest::gtest_main ${ZLIB_FILE})
target_include_directories(probe PRIVATE ${ZLIB_HEADER_DIR})
PROBE
  # One program that links every library of the folder (the header-only packages' files are
  # checked by their package files) and runs.
  cat > "$tmp/probe/probe.cpp" <<'PROBE'
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>
#include <zlib.h>
TEST(OfflineProbe, EveryLibraryWorks) {
  EXPECT_EQ(YAML::Load("a: 3")["a"].as<int>(), 3);
  EXPECT_NE(zlibVersion(), nullptr);
}
PROBE
  local probe=(cmake -S "$tmp/probe" -DCMAKE_PREFIX_PATH="$tmp/moved" -DCMAKE_FIND_ROOT_PATH="$tmp/moved"
    -DCMAKE_FIND_ROOT_PATH_MODE_PACKAGE=ONLY -DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY -DCMAKE_FIND_ROOT_PATH_MODE_LIBRARY=ONLY)
  "${probe[@]}" -B "$tmp/probe-build" > "$tmp/probe.log" 2>&1 || { cat "$tmp/probe.log" >&2; fail "the moved folder does not configure"; }
  grep -q "yaml-cpp at $tmp/moved/lib/libyaml-cpp.a" "$tmp/probe.log" || fail "yaml-cpp does not point into the moved folder"
  cmake --build "$tmp/probe-build" > "$tmp/probe-build.log" 2>&1 || { cat "$tmp/probe-build.log" >&2; fail "the probe does not build against the folder"; }
  "$tmp/probe-build/probe" > "$tmp/probe-run.log" 2>&1 || { cat "$tmp/probe-run.log" >&2; fail "the probe linked against the folder fails"; }
  rm "$tmp/moved/lib/libyaml-cpp.a"
  if "${probe[@]}" -B "$tmp/probe-missing" > "$tmp/missing.log" 2>&1; then fail "configured without libyaml-cpp.a"; fi
  grep -q "lacks $tmp/moved/lib/libyaml-cpp.a" "$tmp/missing.log" || { cat "$tmp/missing.log" >&2; fail "the error does not name the missing file"; }
  echo "offline configure: ok"
}

steps() {
  local build=$1 rc=0 s
  "$repo/gpu_backend/gpu-check.sh" --dry-run "$tmp/dry" > /dev/null || fail "--dry-run exited non-zero"
  for s in configure build cuda-tests calibrate-gpt2-medium calibrate-default validate-tiny-offload validate-gpt2-medium \
           executor-speed torch-layers torch-call-host allocator-compare; do
    [[ -n $(step_rc "$tmp/dry/summary.tsv" "$s") ]] || fail "--dry-run lists no step $s"
  done
  # Every scenario the check validates or calibrates at is bundled.
  for s in $(grep -o 'scenarios/[a-z0-9/_.-]*\.yaml' "$tmp/dry/summary.tsv" | sort -u); do
    [[ -e $repo/$s ]] || fail "gpu-check.sh names $s, which does not exist"
  done
  "$repo/gpu_backend/gpu-check.sh" --build-dir "$build" --skip-build "$tmp/run" > "$tmp/run.log" 2>&1 || rc=$?
  local any_failed=0 n=0 code
  while IFS=$'\t' read -r s code _; do
    [[ $s == step ]] && continue
    n=$((n + 1))
    [[ -e $tmp/run/$s.log || $code == not-wired ]] || fail "step $s has no log"
    [[ $code =~ ^[0-9]+$ || $code == not-wired ]] || fail "step $s has exit code '$code'"
    [[ $code == 0 || $code == not-wired ]] || any_failed=1
  done < "$tmp/run/summary.tsv"
  ((n >= 7)) || fail "only $n steps recorded"
  ((rc == any_failed)) || fail "gpu-check.sh exited $rc but its steps' failures say $any_failed"
  # Without a GPU the calibration fails, and the steps after it still run.
  if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L > /dev/null 2>&1; then
    [[ $(step_rc "$tmp/run/summary.tsv" calibrate-gpt2-medium) == 2 ]] || fail "calibrate --backend cuda without a GPU did not exit 2"
    [[ $(step_rc "$tmp/run/summary.tsv" allocator-compare) == 0 ]] || fail "the allocator comparison did not run past the failed steps"
    [[ $(step_rc "$tmp/run/summary.tsv" torch-call-host) == 0 ]] || fail "the torch call timing did not exit 0 without a GPU"
  fi
  echo "steps: ok ($n steps, exit $rc)"
}

case ${1:-} in
  offline-configure) offline_configure ;;
  steps) (($# == 2)) || fail "usage: $0 steps BUILD_DIR"; steps "$2" ;;
  *) fail "usage: $0 offline-configure | steps BUILD_DIR" ;;
esac
