#include "core/hardware/device_memory_budget.hpp"

#include <algorithm>
#include <string_view>
#include <variant>

namespace prefetchlab::core {
namespace {

constexpr std::int64_t kMiB = 1024 * 1024;

// The CUDA context with lazy module loading (PyTorch's default since 1.13): "around 400MB if
// CUDA >= 11.7" (ptrblck, pytorch/pytorch #109888); 274 MiB right after the first tensor
// (pytorch/pytorch PR #86509), more once cuBLAS, NCCL and attention kernels load.
constexpr std::int64_t kContextBytes = 400 * kMiB;

// NCCL's buffers per channel of a ring connection: the receiver holds the LL (512 KiB), LL128
// (4.69 MiB) and Simple (NCCL_BUFFSIZE, 4 MiB) buffers, the sender 2 MiB, each rounded to cuMem's
// 2 MiB granularity: 10 + 2 MiB (NVIDIA/nccl src/transport/p2p.cc and src/init.cc
// computeBuffSizes; the 10,485,760 and 2,097,152-byte buffers of H100 allocation logs in
// NVIDIA/nccl #1685).
constexpr std::int64_t kBytesPerChannel = 12 * kMiB;
// Collective channels on an NVSwitch node: 24 on HGX A100 (NVIDIA/nccl-tests #100) and on 8x
// H100 (AWS p5's NCCL log). Elsewhere (NVLink without a switch, PCIe with peer-to-peer) 2, an
// estimate: NCCL opens few channels where the links are few.
constexpr int kNvswitchChannels = 24;
constexpr int kFewLinkChannels = 2;
// NVLink SHARP's buffers per communicator on NVSwitch Hopper and later (NCCL >= 2.22: 16
// channels x 2 x 1 MiB x 8 heads; NVIDIA/nccl src/transport/nvls.cc). Older NCCL held more
// (2.25 GiB with 2.18-2.20: vllm-project/vllm #9699's log).
constexpr std::int64_t kNvlsBytes = 256 * kMiB;
// Full-world communicators a DeepSpeed ZeRO-3 rank holds: its data-parallel group is a clone of
// the world group (deepspeed/utils/groups.py, _clone_world_group) beside WORLD's own.
constexpr int kCommunicators = 2;

// cuBLAS's workspace per (thread, stream) in PyTorch: 32 MiB on sm90, 8 MiB + 128 KiB elsewhere
// (aten/src/ATen/cuda/CublasHandlePool.cpp, parseChosenWorkspaceSize), plus cuBLASLt's 1 MiB;
// training has two threads issuing GEMMs (the forward's and autograd's backward thread).
constexpr int kGemmThreads = 2;
constexpr std::int64_t kCublasLtBytes = 1 * kMiB;

bool is_hopper(std::string_view model) {
  for (const std::string_view name : {"H100", "H200", "H800", "GH200"}) {
    if (model.find(name) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace

std::int64_t DeviceMemoryBudget::allocator_capacity_bytes() const {
  return std::max<std::int64_t>(0, cuda_total_bytes - outside_allocator_bytes());
}

std::string DeviceMemoryBudget::text() const {
  const auto mib = [](std::int64_t bytes) { return std::to_string(bytes / kMiB); };
  std::string nccl = mib(nccl_bytes);
  if (nccl_communicators > 0) {
    nccl += ": " + std::to_string(nccl_communicators) + " communicators x " + std::to_string(nccl_channels) +
            " channels" + (nccl_nvls ? " + NVLS" : "");
  }
  return mib(allocator_capacity_bytes()) + " MiB for PyTorch's allocator of the " + mib(cuda_total_bytes) +
         " MiB CUDA reports (context " + mib(context_bytes) + ", NCCL " + nccl + ", cuBLAS " +
         mib(cublas_workspace_bytes) + ")";
}

DeviceMemoryBudget device_memory_budget(const HardwareProfile& profile, std::int64_t world_size, std::int64_t nodes) {
  DeviceMemoryBudget b;
  b.cuda_total_bytes = profile.gpu.cuda_memory_bytes > 0 ? profile.gpu.cuda_memory_bytes : profile.gpu.memory_bytes;
  b.context_bytes = kContextBytes;
  if (world_size > 1) {
    b.nccl_communicators = kCommunicators;
    if (const auto* nvlink = std::get_if<NvlinkLink>(&profile.intra_node_link)) {
      b.nccl_channels = nvlink->nvswitch ? kNvswitchChannels : kFewLinkChannels;
      b.nccl_nvls = nvlink->nvswitch && nvlink->generation >= 4 && world_size == nodes * profile.gpus_per_node &&
                    profile.gpus_per_node > 2;
    } else {
      const auto& pcie = std::get<PcieLink>(profile.intra_node_link);
      // Without peer-to-peer NCCL's SHM transport keeps its buffers in host memory; across nodes
      // the network transport's receive buffers are on the device.
      b.nccl_channels = pcie.peer_to_peer || nodes > 1 ? kFewLinkChannels : 0;
    }
    b.nccl_bytes = b.nccl_communicators * (b.nccl_channels * kBytesPerChannel + (b.nccl_nvls ? kNvlsBytes : 0));
  }
  const std::int64_t workspace = is_hopper(profile.gpu.model) ? 32 * kMiB : 8 * kMiB + 128 * 1024;
  b.cublas_workspace_bytes = kGemmThreads * (workspace + kCublasLtBytes);
  return b;
}

}  // namespace prefetchlab::core
