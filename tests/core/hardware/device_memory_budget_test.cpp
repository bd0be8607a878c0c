// What of a GPU's memory PyTorch's caching allocator can have (core/hardware/device_memory_budget):
// what CUDA reports on an empty device, less the CUDA context, NCCL's buffers and cuBLAS's
// workspaces, each as the bundled profiles and NCCL's own sizes make it.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/hardware/device_memory_budget.hpp"
#include "core/hardware/hardware_profile.hpp"

namespace pc = prefetchlab::core;
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kMiB = 1024 * 1024;

pc::HardwareProfile bundled(const std::string& name) {
  return pc::load_hardware_profile(fs::path(PREFETCHLAB_SOURCE_DIR) / "hardware" / (name + ".yaml"));
}

}  // namespace

// 8 H100 on NVSwitch: 81,121 MiB as CUDA reports it; context 400; NCCL 2 communicators x (24
// channels x 12 MiB + 256 MiB of NVLS); cuBLAS 2 threads x (32 + 1) MiB on sm90.
TEST(DeviceMemoryBudget, EightH100OnNvswitch) {
  const pc::DeviceMemoryBudget b = pc::device_memory_budget(bundled("h100-sxm-8x"), 8, 1);
  EXPECT_EQ(b.cuda_total_bytes, 81121 * kMiB);
  EXPECT_EQ(b.context_bytes, 400 * kMiB);
  EXPECT_EQ(b.nccl_communicators, 2);
  EXPECT_EQ(b.nccl_channels, 24);
  EXPECT_TRUE(b.nccl_nvls);
  EXPECT_EQ(b.nccl_bytes, 2 * (24 * 12 + 256) * kMiB);
  EXPECT_EQ(b.cublas_workspace_bytes, 2 * 33 * kMiB);
  EXPECT_EQ(b.allocator_capacity_bytes(), (81121 - 400 - 1088 - 66) * kMiB);
  // 2,353 MiB less than the 81,920 MiB of the card's nominal size, which the allocator was given.
  EXPECT_EQ(80 * 1024 * kMiB - b.allocator_capacity_bytes(), 2353 * kMiB);
  EXPECT_NE(b.text().find("79567 MiB for PyTorch's allocator of the 81121 MiB CUDA reports"), std::string::npos) << b.text();
}

// One rank creates no communicator; A100 has no NVLink SHARP and PyTorch's older workspace size.
TEST(DeviceMemoryBudget, OneRankHasNoNcclAndA100NoNvls) {
  const pc::DeviceMemoryBudget one = pc::device_memory_budget(bundled("h100-sxm-8x"), 1, 1);
  EXPECT_EQ(one.nccl_bytes, 0);
  const pc::DeviceMemoryBudget a100 = pc::device_memory_budget(bundled("a100-sxm-8x"), 8, 1);
  EXPECT_FALSE(a100.nccl_nvls);
  EXPECT_EQ(a100.nccl_bytes, 2 * 24 * 12 * kMiB);
  EXPECT_EQ(a100.cublas_workspace_bytes, 2 * (8 * kMiB + 128 * 1024 + kMiB));
  EXPECT_EQ(a100.cuda_total_bytes, 81152 * kMiB);
}

// PCIe without peer-to-peer: NCCL's SHM transport keeps its buffers in host memory; a profile
// without cuda_memory falls back to its nominal memory.
TEST(DeviceMemoryBudget, PcieWithoutPeerToPeerKeepsNcclBuffersOnTheHost) {
  const pc::HardwareProfile p = bundled("rtx4090-8x-pcie4-nop2p");
  const pc::DeviceMemoryBudget b = pc::device_memory_budget(p, 8, 1);
  EXPECT_EQ(b.nccl_bytes, 0);
  EXPECT_EQ(b.cuda_total_bytes, p.gpu.memory_bytes);
}
