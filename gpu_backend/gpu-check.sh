#!/usr/bin/env bash
# On a machine with NVIDIA GPUs (possibly offline): builds PrefetchLab with the CUDA + NCCL
# device, runs the CUDA tests, calibrates, validates the bundled single-GPU parameter-offload
# scenario on one GPU (fetches cross PCIe) and, with 2+ GPUs, the host scenario on two, and,
# where PyTorch is present, compares its caching allocator with core's on one malloc/free
# sequence; everything lands in OUTDIR. Budget: about 5 minutes.
#   gpu_backend/gpu-check.sh OUTDIR
# Finds CUDA in /usr/local/cuda or $CUDA_HOME, cuBLAS and NCCL there or inside Python wheels
# (nvidia-cublas*, nvidia-nccl-cu*), and the other build dependencies either installed or in
# gpu_backend/offline/ (made by gpu_backend/prepare-offline.sh on a machine with the packages).
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: gpu_backend/gpu-check.sh OUTDIR" >&2; exit 2; }
cd "$(dirname "$0")/.."
out=$(mkdir -p "$1" && cd "$1" && pwd)
log() { echo "[gpu-check $(date +%T)] $*" | tee -a "$out/gpu-check.log"; }
deadline=$((SECONDS + 300))
left() { echo $((deadline - SECONDS)); }

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv > "$out/gpus.csv" || true
cuda=${CUDA_HOME:-/usr/local/cuda}
[[ -x $cuda/bin/nvcc ]] || { log "no nvcc under $cuda (set CUDA_HOME)"; exit 1; }
# cuBLAS / NCCL from Python wheels when the toolkit lacks them.
hints=("$cuda")
py=$(command -v python3 || true)
if [[ -n $py ]]; then
  for mod in nvidia.cublas nvidia.nccl; do
    d=$("$py" -c "import importlib.util as u, os; s=u.find_spec('$mod'); print(os.path.dirname(s.origin) if s and s.origin else (list(s.submodule_search_locations)[0] if s else ''))" 2>/dev/null || true)
    [[ -n $d && -d $d ]] && hints+=("$d") && log "found $mod in $d"
  done
fi
nccl_home=""
for h in "${hints[@]}"; do
  if [[ -e $h/include/nccl.h ]]; then nccl_home=$h; break; fi
done
[[ -n $nccl_home ]] || { log "no nccl.h in ${hints[*]} (pip install nvidia-nccl-cu13, or set NCCL_HOME)"; exit 1; }
# Wheels ship libnccl.so.2 only: give CMake the unversioned name it looks for.
for h in "${hints[@]}"; do
  for lib in nccl cublas cublasLt; do
    if [[ ! -e $h/lib/lib$lib.so ]] && compgen -G "$h/lib/lib$lib.so.*" >/dev/null; then
      mkdir -p "$out/libs" && ln -sf "$(ls "$h"/lib/lib$lib.so.* | head -1)" "$out/libs/lib$lib.so"
    fi
  done
done
export LD_LIBRARY_PATH="$out/libs:$(printf '%s/lib:' "${hints[@]}")${LD_LIBRARY_PATH:-}"
prefix=("${hints[@]}" "$out/libs")
offline=gpu_backend/offline
if [[ -d $offline ]]; then
  prefix+=("$PWD/$offline" "$PWD/$offline/cmake")
  export CPATH="$PWD/$offline/include:$PWD/$offline/include/eigen3:${CPATH:-}"
  export PATH="$PWD/$offline:$PATH"
fi
generator=(-G Ninja); command -v ninja >/dev/null || generator=()
build=$out/build
log "configure (CUDA $cuda, NCCL $nccl_home)"
NCCL_HOME=$nccl_home cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DPREFETCHLAB_CUDA=ON \
  -DPREFETCHLAB_BENCH=OFF -DCMAKE_CUDA_COMPILER="$cuda/bin/nvcc" -DCUDAToolkit_ROOT="$cuda" \
  -DCMAKE_PREFIX_PATH="$(IFS=';'; echo "${prefix[*]}")" -DCMAKE_LIBRARY_PATH="$out/libs" > "$out/configure.log" 2>&1 \
  || { log "configure failed: $out/configure.log"; exit 1; }
log "build"
timeout "$(left)" cmake --build "$build" -j "$(nproc)" > "$out/build.log" 2>&1 || { log "build failed: $out/build.log"; exit 1; }
cli=$build/apps/prefetchlab
log "CUDA tests"
timeout "$(left)" "$build/tests/prefetchlab_tests" --gtest_filter='CudaDevice.*' > "$out/cuda-tests.log" 2>&1 \
  || log "CUDA tests FAILED (see cuda-tests.log)"
gpus=$(nvidia-smi -L 2>/dev/null | wc -l || echo 1)
log "calibrate on 1 GPU (collective fits skipped on one GPU)"
timeout "$(left)" "$cli" calibrate --backend cuda --ranks 1 -o "$out/cuda-1gpu.yaml" > "$out/calibrate-1gpu.log" 2>&1 \
  || log "calibrate 1 GPU failed (see calibrate-1gpu.log)"
# The bundled single-GPU scenario: its parameters live in pinned host memory, so every fetch
# copies them up over PCIe on the all-gather stream (one GPU has nothing to all-gather; the
# profile's collective fits were skipped above, so validate's collective terms are the bundled
# profile's).
log "validate scenarios/host/tiny-llama-offload-1gpu.yaml on 1 GPU (parameters offloaded: fetches cross PCIe)"
timeout "$(left)" "$cli" validate scenarios/host/tiny-llama-offload-1gpu.yaml --backend cuda --hardware "$out/cuda-1gpu.yaml" \
  -o "$out/validate-1gpu" > "$out/validate-1gpu.log" 2>&1 || log "validate 1 GPU failed"
if ((gpus >= 2)); then
  log "calibrate and validate on 2 GPUs"
  timeout "$(left)" "$cli" calibrate --backend cuda --ranks 2 -o "$out/cuda-2gpu.yaml" > "$out/calibrate-2gpu.log" 2>&1 \
    || log "calibrate 2 GPUs failed"
  timeout "$(left)" "$cli" validate scenarios/host/tiny-llama-host.yaml --backend cuda --hardware "$out/cuda-2gpu.yaml" \
    --set cluster.gpus_per_node=2 -o "$out/validate-2gpu" > "$out/validate-2gpu.log" 2>&1 || log "validate 2 GPUs failed"
fi
# The same malloc/free sequence through torch.cuda's caching allocator and core's; without
# PyTorch (or a GPU under it) the script says so and runs the C++ side only.
if [[ -n $py ]]; then
  log "allocator comparison (torch.cuda vs core::CachingAllocator)"
  timeout "$(left)" "$py" gpu_backend/torch_allocator_compare.py --cli "$cli" --out "$out/allocator-compare" \
    > "$out/allocator-compare.log" 2>&1 || log "allocator stats differ or the comparison failed (see allocator-compare.log)"
  tail -n 1 "$out/allocator-compare.log" | sed 's/^/  /' | tee -a "$out/gpu-check.log"
else
  log "no python3: allocator comparison skipped"
fi
log "done in ${SECONDS}s; results in $out"
