#!/usr/bin/env bash
# PrefetchLab set-up: installs the Debian packages that are missing, then builds.
#   ./setup.sh          install what is missing, configure and build the prefetchlab command
#   ./setup.sh test     the same, then build everything (tests, benchmarks) and run the test suite,
#                       then the sanitizer and fuzzing jobs (tests/sanitize.sh)
# CUDA and NCCL are used when present (the CUDA backend is built then) and never installed.
# Environment: CI=true turns warnings into errors; BUILD_DIR (default build); JOBS.
set -euo pipefail
cd "$(dirname "$0")"

# Every Debian package the project needs, each with what it provides to the build or the
# plots. tests/setup_coverage_test.py checks that this list covers every find_package and
# find_program in CMake and every import in plots/, and that each package really provides it.
PACKAGES=(
  g++                 # program:c++
  cmake               # program:cmake
  ninja-build         # program:ninja
  pkg-config          # program:pkg-config
  libyaml-cpp-dev     # cmake:yaml-cpp
  libcli11-dev        # cmake:CLI11
  nlohmann-json3-dev  # cmake:nlohmann_json
  libeigen3-dev       # cmake:Eigen3
  zlib1g-dev          # header:zlib.h
  libmimalloc-dev     # cmake:mimalloc
  libgtest-dev        # cmake:GTest
  libbenchmark-dev    # cmake:benchmark
  python3             # program:python3
  python3-matplotlib  # python:matplotlib
  python3-numpy       # python:numpy
)

# Installed by `./setup.sh test` only: clang and its sanitizer and libFuzzer runtimes for the
# sanitizer and fuzzing builds (tests/sanitize.sh, docs/testing.md); Slurm and munge for the
# one-node cluster that tests `sweep --slurm` (tests/slurm/; no daemon is started by installing).
TEST_PACKAGES=(
  clang               # program:clang++
  libclang-rt-14-dev  # file:/usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a
  slurm-wlm           # program:sbatch
  munge               # program:munge
)
[[ ${1:-} == test ]] && PACKAGES+=("${TEST_PACKAGES[@]}")

missing=()
for entry in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$entry" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$entry")
  fi
done
if ((${#missing[@]})); then
  echo "setup.sh: installing missing Debian packages: ${missing[*]}"
  as_root=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "setup.sh: need root or sudo to install ${missing[*]}" >&2; exit 1; }
    as_root=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

build_dir=${BUILD_DIR:-build}
werror=OFF
[[ ${CI:-} == true ]] && werror=ON
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPREFETCHLAB_WERROR="$werror" >/dev/null
if [[ ${1:-} == test ]]; then
  cmake --build "$build_dir" -j "${JOBS:-$(nproc)}"
  ctest --test-dir "$build_dir" --output-on-failure -j "${JOBS:-$(nproc)}"
  # ASan+UBSan and TSan builds of the tests, and each fuzz harness for 20 s (docs/testing.md).
  FUZZ_CLI="$build_dir/apps/prefetchlab" tests/sanitize.sh
else
  # The quick start runs only the command line: the test suite and the benchmarks (about half
  # of the build) are built by `./setup.sh test`.
  cmake --build "$build_dir" -j "${JOBS:-$(nproc)}" --target prefetchlab
fi
