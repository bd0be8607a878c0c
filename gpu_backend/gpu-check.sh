#!/usr/bin/env bash
# The prepared check for a machine with an NVIDIA GPU (possibly offline), sized for a 15-minute
# lease: it runs within 8 minutes on one GPU. Steps, each with its own time limit; a failing
# step is recorded and the next one runs:
#   configure, build        PrefetchLab with the CUDA + NCCL device (prefetchlab and the tests)
#   cuda-tests              the tests of the CUDA device and kernels (Cuda*)
#   calibrate-gpt2-medium   calibrate --backend cuda at the bundled GPT-2 medium scenario's shapes
#   calibrate-default       calibrate --backend cuda at the default 7B-class shapes
#   validate-tiny-offload   validate scenarios/host/tiny-llama-offload-1gpu.yaml on one GPU
#   validate-gpt2-medium    validate scenarios/gpu/gpt2-medium-offload-1gpu.yaml on one GPU
#   validate-process        the tiny offload scenario as one rank of a process job (--launcher
#                           env: NCCL's unique id through rank 0's store, ncclCommInitRank)
#   executor-speed          the executor's forward + backward and Adam step against PyTorch's
#   torch-layers            PyTorch's own layers timed part by part (bench/layers/)
#   torch-call-host         torch.distributed calls' host cost, with and without torch.profiler
#                           (bench/host_costs/)
#   calibrate-2gpu, validate-2gpu, validate-2gpu-processes   only with 2+ GPUs
#   allocator-compare       torch.cuda's caching allocator against core's (torch_allocator_compare.py)
# Everything small lands in OUTDIR (default $OUT): one log per step, the profiles and validate
# folders, gpus.csv, and summary.tsv (step, exit code, seconds, log) with gpu-check.log.
#   gpu_backend/gpu-check.sh [--dry-run | --configure-only] [--build-dir DIR [--skip-build]] [OUTDIR]
#     --dry-run         write the summary with every step's command, run nothing
#     --configure-only  stop after the configure step (tests/gpu_backend/offline_configure_test.sh)
#     --build-dir DIR   build there (default build-gpu-check/, outside OUTDIR: it is large);
#                       --skip-build uses it as it is
# Exit code: 0 when every step passed, 1 otherwise (summary.tsv says which), 2 for bad usage.
# Finds CUDA in $CUDA_HOME or /usr/local/cuda, cuBLAS and NCCL there or inside Python wheels
# (nvidia-cublas*, nvidia-nccl-cu*), the other build dependencies installed or in the folder
# gpu_backend/prepare-offline.sh made ($PREFETCHLAB_OFFLINE_DIR, default gpu_backend/offline).
# PREFETCHLAB_FIND_ONLY_OFFLINE=1 hides the system's packages from CMake (only the offline
# folder and the CUDA directories are searched), as on a machine without them;
# PREFETCHLAB_GPU_CHECK_CUDA=AUTO lets the configure go on without nvcc (a test on a CPU machine).
set -uo pipefail
usage() { echo "usage: gpu_backend/gpu-check.sh [--dry-run | --configure-only] [--build-dir DIR [--skip-build]] [OUTDIR]" >&2; exit 2; }
mode=run build="" skip_build=0 outdir=${OUT:-}
while (($#)); do
  case $1 in
    --dry-run) mode="dry-run" ;;
    --configure-only) mode="configure-only" ;;
    --build-dir) (($# >= 2)) || usage; build=$2; shift ;;
    --skip-build) skip_build=1 ;;
    -*) usage ;;
    *) outdir=$1 ;;
  esac
  shift
done
[[ -n $outdir ]] || usage
((skip_build == 0)) || [[ -n $build ]] || { echo "gpu-check.sh: --skip-build needs --build-dir" >&2; exit 2; }
out=$(mkdir -p "$outdir" && cd "$outdir" && pwd) || { echo "gpu-check.sh: cannot create $outdir" >&2; exit 2; }
[[ -z $build || $build == /* ]] || build=$PWD/$build
cd "$(dirname "$0")/.." || exit 1
repo=$PWD
[[ -n $build ]] || build=$repo/build-gpu-check
summary=$out/summary.tsv
printf 'step\texit_code\tseconds\tlog\n' > "$summary"
: > "$out/gpu-check.log"
log() { echo "[gpu-check $(date +%T)] $*" | tee -a "$out/gpu-check.log"; }
budget_s=480
deadline=$((SECONDS + budget_s))
failed=0

# step NAME LIMIT_S COMMAND...: runs COMMAND (cwd: the repository) for at most LIMIT_S seconds
# and what is left of the budget, its output in NAME.log; records exit code and seconds.
step() {
  local name=$1 limit=$2; shift 2
  local left=$((deadline - SECONDS)) rc start
  ((limit < left)) || limit=$left
  if [[ $mode == dry-run ]]; then
    printf '%s\t-\t0\t%s\n' "$name" "$*" >> "$summary"
    log "dry run: $name: $*"
    return 0
  fi
  if ((limit <= 0)); then
    printf '%s\tskipped\t0\tno time left of the %ss budget\n' "$name" "$budget_s" >> "$summary"
    log "$name skipped: no time left"
    failed=1
    return 1
  fi
  log "$name (at most ${limit}s)"
  start=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  rc=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - start))" "$name.log" >> "$summary"
  if ((rc != 0)); then
    failed=1
    log "$name FAILED (exit $rc$( ((rc == 124)) && echo ", time limit")); see $name.log"
  fi
  return "$rc"
}
# A step that is not (yet) part of the check: recorded as such.
not_wired() {
  printf '%s\tnot-wired\t0\t%s\n' "$1" "$2" >> "$summary"
  log "$1: $2"
}

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv \
  > "$out/gpus.csv" 2>/dev/null
gpus=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' )
# The bundled profile of this GPU: the base of every calibration, and the simulator's hardware
# where a calibration refused its fit (PREFETCHLAB_GPU_CHECK_BASE overrides it).
gpu_name=$( (nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || true) | head -1)
case $gpu_name in
  *H200*) base=h200-sxm-8x ;;
  *B200*) base=b200-sxm-8x ;;
  *A100*) base=a100-sxm-8x ;;
  *L40S*) base=l40s-8x-pcie4 ;;
  *) base=h100-sxm-8x ;;
esac
base=${PREFETCHLAB_GPU_CHECK_BASE:-$base}

# --- where CUDA, cuBLAS, NCCL and the offline packages are ---
cuda=${CUDA_HOME:-/usr/local/cuda}
[[ -x $cuda/bin/nvcc ]] || log "no nvcc under $cuda (set CUDA_HOME): the configure step will fail"
hints=("$cuda")
py=$(command -v python3 || true)
if [[ -n $py ]]; then
  for mod in nvidia.cublas nvidia.nccl; do
    d=$("$py" -c "import importlib.util as u, os; s=u.find_spec('$mod'); print(os.path.dirname(s.origin) if s and s.origin else (list(s.submodule_search_locations)[0] if s else ''))" 2>/dev/null || true)
    [[ -n $d && -d $d ]] && hints+=("$d") && log "found $mod in $d"
  done
fi
nccl_home=${NCCL_HOME:-}
if [[ -z $nccl_home ]]; then
  for h in "${hints[@]}"; do
    if [[ -e $h/include/nccl.h ]]; then nccl_home=$h; break; fi
  done
fi
[[ -n $nccl_home ]] || log "no nccl.h in ${hints[*]} (pip install nvidia-nccl-cu13, or set NCCL_HOME): the configure step will fail"
# Wheels ship libnccl.so.2 only: give CMake the unversioned name it looks for.
for h in "${hints[@]}"; do
  for lib in nccl cublas cublasLt; do
    if [[ ! -e $h/lib/lib$lib.so ]] && compgen -G "$h/lib/lib$lib.so.*" >/dev/null; then
      mkdir -p "$build/libs" && ln -sf "$(ls "$h"/lib/lib$lib.so.* | head -1)" "$build/libs/lib$lib.so"
    fi
  done
done
hint_libs=$(printf '%s/lib:' "${hints[@]}")
export LD_LIBRARY_PATH="$build/libs:$hint_libs${LD_LIBRARY_PATH:-}"
prefix=("${hints[@]}" "$build/libs")
offline=${PREFETCHLAB_OFFLINE_DIR:-$repo/gpu_backend/offline}
if [[ -d $offline ]]; then
  offline=$(cd "$offline" && pwd)
  prefix=("$offline" "${prefix[@]}")
  export PATH="$offline/bin:$PATH"  # its ninja, when this machine has none
  log "offline packages: $offline"
fi
log "GPUs: $gpus (${gpu_name:-none found}); base profile $base"
# CMake 4 refuses package files that ask for policies older than 3.5 unless told this.
export CMAKE_POLICY_VERSION_MINIMUM=3.5
join() { local IFS=';'; echo "$*"; }
configure=(cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release -DPREFETCHLAB_CUDA="${PREFETCHLAB_GPU_CHECK_CUDA:-ON}" -DPREFETCHLAB_BENCH=OFF
  -DPREFETCHLAB_LTO=OFF -DCMAKE_CUDA_COMPILER="$cuda/bin/nvcc" -DCUDAToolkit_ROOT="$cuda"
  -DCMAKE_PREFIX_PATH="$(join "${prefix[@]}")" -DCMAKE_LIBRARY_PATH="$build/libs")
command -v ninja >/dev/null && configure+=(-G Ninja)
if [[ ${PREFETCHLAB_FIND_ONLY_OFFLINE:-0} == 1 ]]; then
  # Packages, headers and libraries only under these roots; programs (compilers, ninja) as usual.
  configure+=(-DCMAKE_FIND_ROOT_PATH="$(join "${prefix[@]}")" -DCMAKE_FIND_ROOT_PATH_MODE_PACKAGE=ONLY
    -DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY -DCMAKE_FIND_ROOT_PATH_MODE_LIBRARY=ONLY
    -DCMAKE_FIND_ROOT_PATH_MODE_PROGRAM=NEVER -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
    -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
fi
cli=$build/apps/prefetchlab
tests=$build/tests/prefetchlab_tests

# --- the steps ---
if ((skip_build == 0)); then
  step configure 120 env NCCL_HOME="$nccl_home" "${configure[@]}"
  if [[ $mode == configure-only ]]; then
    log "configure only: done in ${SECONDS}s; summary in $summary"
    exit $failed
  fi
  step build 300 cmake --build "$build" -j "$(nproc)" --target prefetchlab prefetchlab_tests prefetchlab_executor_speed
fi
step cuda-tests 60 "$tests" --gtest_filter='Cuda*'
# Calibrate at the shapes of the GPT-2 medium scenario (M = 4 x 1024 tokens) and at the default
# 7B-class set, over this GPU's bundled profile. A profile whose fit error is above the limit is
# not written (exit 2): the validations below then simulate with the bundled profile.
step calibrate-gpt2-medium 90 "$cli" calibrate --backend cuda --ranks 1 scenarios/gpu/gpt2-medium-offload-1gpu.yaml \
  --base "$base" -o "$out/cuda-gpt2-medium.yaml"
step calibrate-default 90 "$cli" calibrate --backend cuda --ranks 1 --base "$base" -o "$out/cuda-default.yaml"
hardware_of() { if [[ -e $1 ]]; then echo --hardware "$1"; else echo --hardware "$base"; fi; }
# Parameters in pinned host memory: every fetch copies them up over PCIe (one GPU has nothing to
# all-gather; the collective terms are the base profile's).
# shellcheck disable=SC2046  # hardware_of's words are two arguments
step validate-tiny-offload 60 "$cli" validate scenarios/host/tiny-llama-offload-1gpu.yaml --backend cuda \
  $(hardware_of "$out/cuda-gpt2-medium.yaml") -o "$out/validate-tiny-offload"
# shellcheck disable=SC2046
step validate-gpt2-medium 120 "$cli" validate scenarios/gpu/gpt2-medium-offload-1gpu.yaml --backend cuda \
  $(hardware_of "$out/cuda-gpt2-medium.yaml") -o "$out/validate-gpt2-medium"
# One rank as a process of a job (--launcher env, docs/real-backend.md): rank 0's store carries
# NCCL's unique id to ncclCommInitRank.
step validate-process 60 env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29517 \
  "$cli" validate scenarios/host/tiny-llama-offload-1gpu.yaml --backend cuda --launcher env --repeats 1 \
  -o "$out/validate-process"
# The executor's own speed (GPT-2 medium and large, micro batch 4, seq 1024, one GPU): forward +
# backward and the Adam step beside PyTorch's figures, as ratios (gpu_backend/executor_speed.cpp).
step executor-speed 150 "$build/gpu_backend/prefetchlab_executor_speed"
# PyTorch's own layers split by part (GEMMs, attention per backend, synchronised and pipelined
# timing): what the compute model's layer checks rest on (bench/layers/torch_layer_timings.py).
if [[ -n $py ]]; then
  step torch-layers 120 "$py" bench/layers/torch_layer_timings.py "$out/torch-layers.csv"
else
  not_wired torch-layers "no python3 on this machine"
fi
# The host's cost per torch.distributed call, unprofiled and under torch.profiler, on this
# machine: what the torch-call host level and its fidelity cases rest on (docs/fidelity.md).
if [[ -n $py ]]; then
  step torch-call-host 90 "$py" bench/host_costs/torch_call_host_costs.py "$out/torch-call-host.csv" \
    --repeats 5 --calls 40 --warmup 10
else
  not_wired torch-call-host "no python3 on this machine"
fi
if ((gpus >= 2)); then
  step calibrate-2gpu 60 "$cli" calibrate --backend cuda --ranks 2 --base "$base" -o "$out/cuda-2gpu.yaml"
  # shellcheck disable=SC2046
  step validate-2gpu 60 "$cli" validate scenarios/host/tiny-llama-host.yaml --backend cuda \
    $(hardware_of "$out/cuda-2gpu.yaml") --set cluster.gpus_per_node=2 -o "$out/validate-2gpu"
  # The same as two processes, one GPU each (LOCAL_RANK), as torchrun would start them.
  step validate-2gpu-processes 90 env PREFETCHLAB_JOB_SECRET="gpu-check-$RANDOM$RANDOM-secret" \
    bash -c 'pids=(); for r in 0 1; do RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r \
    MASTER_ADDR=127.0.0.1 MASTER_PORT=29518 "$0" validate scenarios/host/tiny-llama-host.yaml --backend cuda \
    --launcher env --repeats 1 --set cluster.gpus_per_node=2 -o "$1" & pids+=($!); done
    rc=0; for p in "${pids[@]}"; do wait "$p" || rc=1; done; exit $rc' "$cli" "$out/validate-2gpu-processes"
fi
# The same malloc/free sequence through torch.cuda's caching allocator and core's; without
# PyTorch (or a GPU under it) the script says so and runs the C++ side only.
if [[ -n $py ]]; then
  step allocator-compare 60 "$py" gpu_backend/torch_allocator_compare.py --cli "$cli" --out "$out/allocator-compare"
  [[ $mode == dry-run ]] || tail -n 1 "$out/allocator-compare.log" | sed 's/^/  /' | tee -a "$out/gpu-check.log"
else
  not_wired allocator-compare "no python3 on this machine"
fi
log "done in ${SECONDS}s of ${budget_s}s; summary in $summary"
column -t -s $'\t' "$summary" 2>/dev/null | tee -a "$out/gpu-check.log" || cat "$summary"
exit $failed
