#!/usr/bin/env bash
# Run on a machine that has the Debian build packages (./setup.sh installed them): copies the
# headers and static libraries PrefetchLab's build needs into gpu_backend/offline/ (git-ignored),
# so gpu_backend/gpu-check.sh can build on a GPU machine that is offline and lacks them.
# CUDA and NCCL are not copied: the GPU machine has its own (toolkit, or Python wheels).
#   gpu_backend/prepare-offline.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=gpu_backend/offline
rm -rf "$out"
mkdir -p "$out/include" "$out/lib" "$out/cmake"
copy_headers() { for h in "$@"; do [[ -e /usr/include/$h ]] && cp -a "/usr/include/$h" "$out/include/"; done; }
# yaml-cpp, CLI11, nlohmann_json, Eigen3, GoogleTest: headers; yaml-cpp and gtest: static libs.
copy_headers yaml-cpp CLI nlohmann eigen3 gtest gmock
for lib in libyaml-cpp.a libgtest.a libgtest_main.a; do
  f=$(find /usr/lib /usr/local/lib -name "$lib" 2>/dev/null | head -1)
  [[ -n $f ]] || { echo "prepare-offline.sh: $lib not found (install the packages setup.sh lists)" >&2; exit 1; }
  cp "$f" "$out/lib/"
done
# Package config files so find_package works against the copies (paths are rewritten on use).
for pkg in yaml-cpp CLI11 nlohmann_json Eigen3 GTest; do
  d=$(find /usr/lib /usr/share /usr/lib/x86_64-linux-gnu -maxdepth 3 -type d -iname "$pkg" -path "*cmake*" 2>/dev/null | head -1)
  [[ -n $d ]] && cp -a "$d" "$out/cmake/$pkg"
done
cp "$(command -v ninja)" "$out/" 2>/dev/null || true
echo "prepared $out ($(du -sh "$out" | cut -f1)); copy the repository with it to the GPU machine and run gpu_backend/gpu-check.sh OUTDIR"
