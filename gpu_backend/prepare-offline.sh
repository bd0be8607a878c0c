#!/usr/bin/env bash
# Run on a machine that has setup.sh's Debian packages: copies what PrefetchLab's build needs
# from them into one folder (default gpu_backend/offline/, git-ignored), so that
# gpu_backend/gpu-check.sh builds on a GPU machine that is offline and lacks those packages.
#   gpu_backend/prepare-offline.sh [FOLDER]
# The folder is a self-contained, relocatable prefix:
#   include/        yaml-cpp, CLI11, nlohmann_json, Eigen3 (include/eigen3), GoogleTest, zlib
#   lib/            static libraries: yaml-cpp, GoogleTest, GoogleMock, zlib
#   lib/cmake/PKG/  our own package files (gpu_backend/offline-packages/), which find those
#                   files relative to themselves: Debian's package files point at /usr or at
#                   paths computed from where they were installed, and some need old CMake
#                   policies, so they are not copied.
#   bin/ninja       when installed here
# CUDA, cuBLAS and NCCL are not copied: the GPU machine has its own (toolkit, or Python wheels).
# tests/gpu_backend/offline_configure_test.sh configures the project against this folder alone.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$repo/gpu_backend/offline}
die() { echo "prepare-offline.sh: $*" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out/include" "$out/lib/cmake" "$out/bin"
out=$(cd "$out" && pwd)
arch=$(gcc -print-multiarch 2>/dev/null || true)
lib_dirs=("/usr/lib/${arch:-x86_64-linux-gnu}" /usr/lib /usr/local/lib)

copy_header() {  # a header file or folder under /usr/include
  [[ -e /usr/include/$1 ]] || die "/usr/include/$1 not found (install $2: ./setup.sh installs it)"
  cp -a "/usr/include/$1" "$out/include/"
}
copy_library() {  # a static library, found in the usual library folders
  local f=""
  for d in "${lib_dirs[@]}"; do [[ -e $d/$1 ]] && { f=$d/$1; break; }; done
  [[ -n $f ]] || die "$1 not found in ${lib_dirs[*]} (install $2: ./setup.sh installs it)"
  cp "$f" "$out/lib/"
}
# The version an installed package file declares (its ConfigVersion file's PACKAGE_VERSION).
installed_version() {
  local pkg=$1 f
  f=$(find /usr/lib /usr/share /usr/local -path '*cmake*' -iname "${pkg}*version.cmake" 2>/dev/null | head -1)
  [[ -n $f ]] || die "no CMake version file of $pkg under /usr (install its -dev package: ./setup.sh installs it)"
  sed -n 's/^set(PACKAGE_VERSION "\([0-9][0-9.]*\)").*/\1/p' "$f" | head -1
}
write_package() {  # PACKAGE CONFIG-FILE: our package file and a version file beside it
  local pkg=$1 config=$2 version major dir
  version=$(installed_version "$pkg")
  [[ -n $version ]] || die "cannot read the version of $pkg"
  major=${version%%.*}
  dir=$out/lib/cmake/$pkg
  mkdir -p "$dir"
  cp "$repo/gpu_backend/offline-packages/$config" "$dir/"
  local version_file=$dir/${config%.cmake}
  if [[ $config == *-config.cmake ]]; then version_file=${version_file%-config}-config-version.cmake
  else version_file=${version_file%Config}ConfigVersion.cmake; fi
  sed -e "s/@VERSION@/$version/" -e "s/@MAJOR@/$major/" "$repo/gpu_backend/offline-packages/package-version.cmake.in" \
    > "$version_file"
  echo "  $pkg $version"
}

copy_header yaml-cpp libyaml-cpp-dev
copy_header CLI libcli11-dev
copy_header nlohmann nlohmann-json3-dev
copy_header eigen3 libeigen3-dev
copy_header gtest libgtest-dev
copy_header gmock libgtest-dev
copy_header zlib.h zlib1g-dev
copy_header zconf.h zlib1g-dev
copy_library libyaml-cpp.a libyaml-cpp-dev
copy_library libgtest.a libgtest-dev
copy_library libgtest_main.a libgtest-dev
copy_library libgmock.a libgtest-dev
copy_library libgmock_main.a libgtest-dev
copy_library libz.a zlib1g-dev
cp "$repo/gpu_backend/offline-packages/prefetchlab-offline-check.cmake" "$out/lib/cmake/"
echo "prepare-offline.sh: package files"
write_package yaml-cpp yaml-cpp-config.cmake
write_package CLI11 CLI11Config.cmake
write_package nlohmann_json nlohmann_jsonConfig.cmake
write_package Eigen3 Eigen3Config.cmake
write_package GTest GTestConfig.cmake
if command -v ninja >/dev/null; then cp "$(command -v ninja)" "$out/bin/"; fi
echo "prepared $out ($(du -sh "$out" | cut -f1)); copy the repository with it to the GPU machine and run gpu_backend/gpu-check.sh OUTDIR"
