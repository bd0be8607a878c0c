// host_state_buffer.hpp: offloaded model states in the device's own pinned memory when the
// offload section's pin_memory says so (cudaHostAlloc on the CUDA device), pageable otherwise,
// freed through the device that made them; and the executor keeping its offloaded states there.
#include "gpu_backend/executor/host_state_buffer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/scenario/scenario.hpp"
#include "gpu_backend/executor/executor.hpp"
#include "gpu_backend/host/host_device.hpp"
#include "tests/gpu_backend/forwarding_device.hpp"

namespace pc = prefetchlab::core;
namespace pg = prefetchlab::gpu;
namespace pt = prefetchlab::testing;

namespace {

// Counts pinned allocations and frees; refuses them when `refuse`.
class PinCountingDevice : public pt::ForwardingDevice {
 public:
  using ForwardingDevice::ForwardingDevice;
  void* allocate_pinned_host(std::uint64_t bytes) override {
    if (refuse) return nullptr;
    ++allocated;
    pinned_bytes += bytes;
    return inner_.allocate_pinned_host(bytes);
  }
  void free_pinned_host(void* host) override {
    ++freed;
    inner_.free_pinned_host(host);
  }
  std::atomic<int> allocated{0}, freed{0};
  std::atomic<std::uint64_t> pinned_bytes{0};
  bool refuse = false;
};

}  // namespace

TEST(HostStateBuffer, PinnedThroughTheDeviceZeroedAndFreedOnce) {
  pg::HostDeviceGroup group(pg::HostDeviceOptions{});
  PinCountingDevice device(group.device(0));
  {
    pg::HostStateBuffer pinned(device, 1000, true);
    EXPECT_TRUE(pinned.pinned());
    EXPECT_EQ(pinned.size(), 1000u);
    EXPECT_TRUE(std::all_of(pinned.data(), pinned.data() + 1000, [](std::byte b) { return b == std::byte{0}; }));
    pg::HostStateBuffer moved = std::move(pinned);  // ownership moves: still one free
    EXPECT_TRUE(moved.pinned());
    EXPECT_TRUE(pinned.empty());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
    pg::HostStateBuffer pageable(device, 64, false);
    EXPECT_FALSE(pageable.pinned());
    EXPECT_EQ(pageable.size(), 64u);
    moved = std::move(pageable);  // frees the pinned memory it held
    EXPECT_EQ(device.freed, 1);
  }
  EXPECT_EQ(device.allocated, 1);
  EXPECT_EQ(device.freed, 1);
  device.refuse = true;
  try {
    pg::HostStateBuffer refused(device, 4096, true);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("4096 bytes of pinned host memory"), std::string::npos) << e.what();
  }
}

TEST(HostStateBuffer, TheExecutorKeepsOffloadedStatesInPinnedMemoryOnlyWhenAsked) {
  for (const bool pin : {true, false}) {
    const pc::Scenario s = pc::load_scenario(
        std::string(PREFETCHLAB_SOURCE_DIR) + "/scenarios/host/tiny-llama-offload-1gpu.yaml",
        {"training.iterations=2", "output.trace=false", "zero.offload_optimizer.device=cpu",
         std::string("zero.offload_param.pin_memory=") + (pin ? "true" : "false"),
         std::string("zero.offload_optimizer.pin_memory=") + (pin ? "true" : "false")},
        pc::BundledData::from_root(PREFETCHLAB_SOURCE_DIR));
    pg::HostDeviceOptions o;
    o.capacity_bytes = static_cast<std::uint64_t>(s.cluster.hardware.gpu.memory_bytes);
    o.allocator = s.memory.allocator;
    pg::HostDeviceGroup inner(o);
    pt::WrappingGroup<PinCountingDevice> group(inner, [](pg::Device& d) { return std::make_unique<PinCountingDevice>(d); });
    const pg::ExecutorResult result = pg::Executor(s, group).run();
    ASSERT_EQ(result.status, pc::RunStatus::kOk) << result.message;
    PinCountingDevice& d = group.wrapped(0);
    // Parameter shards and the gradient partition (Adam writes the shards in place with both
    // offloaded): each the rank's whole shard in bf16.
    EXPECT_EQ(d.allocated, pin ? 2 : 0) << "pin_memory " << pin;
    EXPECT_EQ(d.freed, d.allocated.load()) << "pin_memory " << pin;
    std::uint64_t shard_bytes = 0;  // one rank holds every parameter whole
    for (const auto& param : s.model.params) shard_bytes += static_cast<std::uint64_t>(param.numel) * 2;
    EXPECT_EQ(d.pinned_bytes, pin ? 2 * shard_bytes : 0u);
  }
}
