// The CUDA + NCCL device: on a machine with GPUs, GEMMs and collectives agree with the host
// device and the executor runs the bundled host scenario with the simulator's plans; without a
// GPU every test skips saying so, and a build without CUDA says so through make_device_group.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/scenario/scenario.hpp"
#include "gpu_backend/device_backend.hpp"
#include "gpu_backend/executor/executor.hpp"
#include "gpu_backend/microbenchmarks.hpp"
#include "sim/ranks/world.hpp"
#ifdef PREFETCHLAB_HAVE_CUDA
#include "gpu_backend/cuda/cuda_device.hpp"
#endif

namespace pg = prefetchlab::gpu;
namespace pc = prefetchlab::core;

namespace {

#ifdef PREFETCHLAB_HAVE_CUDA
int gpus_or_skip_count() { return pg::cuda_device_count(); }
#define SKIP_WITHOUT_GPUS(n)                                                                              \
  if (gpus_or_skip_count() < (n))                                                                         \
  GTEST_SKIP() << "needs " << (n) << " CUDA GPU(s); cudaGetDeviceCount reports " << gpus_or_skip_count() \
               << " on this machine"
#endif

}  // namespace

#ifdef PREFETCHLAB_HAVE_CUDA

TEST(CudaDevice, AllGatherAndReduceScatterMoveTheRightNumbers) {
  SKIP_WITHOUT_GPUS(1);
  const int world = std::min(2, pg::cuda_device_count());
  pg::DeviceGroupOptions o;
  o.world_size = world;
  auto group = pg::make_device_group(pg::Backend::kCuda, o);
  constexpr int kCount = 1024;  // fp32 elements per rank
  std::vector<std::vector<float>> gathered(world), reduced(world);
  pg::run_on_ranks(*group, [&](pg::Device& d) {
    const int r = d.rank();
    const pg::StreamId s = d.create_stream("comm");
    std::vector<float> mine(kCount * world);
    for (int i = 0; i < kCount * world; ++i) mine[i] = static_cast<float>(r * 100000 + i);
    auto send = d.allocate(kCount * 4, s), big = d.allocate(kCount * 4 * world, s), out = d.allocate(kCount * 4, s);
    ASSERT_TRUE(send && big && out);
    d.copy_host_to_device(s, send->span, mine.data());
    d.all_gather(s, send->span, big->span, pg::ElementType::kFP32);
    gathered[r].resize(kCount * world);
    d.copy_device_to_host(s, gathered[r].data(), big->span);
    d.copy_host_to_device(s, big->span, mine.data());
    d.reduce_scatter(s, big->span, out->span, pg::ElementType::kFP32, pg::ReduceOp::kSum);
    reduced[r].resize(kCount);
    d.copy_device_to_host(s, reduced[r].data(), out->span);
    d.synchronize_all();
    d.free(*send), d.free(*big), d.free(*out);
  });
  for (int r = 0; r < world; ++r) {
    for (int src = 0; src < world; ++src) EXPECT_EQ(gathered[r][src * kCount + 5], static_cast<float>(src * 100000 + 5));
    float expect = 0;
    for (int src = 0; src < world; ++src) expect += static_cast<float>(src * 100000 + r * kCount + 7);
    EXPECT_EQ(reduced[r][7], expect) << "rank " << r;
  }
}

TEST(CudaDevice, GemmMatchesAHostReference) {
  SKIP_WITHOUT_GPUS(1);
  pg::DeviceGroupOptions o;
  auto group = pg::make_device_group(pg::Backend::kCuda, o);
  pg::Device& d = group->device(0);
  const pg::StreamId s = d.create_stream("compute");
  const int m = 3, n = 4, k = 5;
  std::vector<float> a(m * k), b(k * n), c(m * n, 0);
  for (int i = 0; i < m * k; ++i) a[i] = static_cast<float>(i % 7) - 3;
  for (int i = 0; i < k * n; ++i) b[i] = static_cast<float>(i % 5) - 2;
  auto da = d.allocate(a.size() * 4, s), db = d.allocate(b.size() * 4, s), dc = d.allocate(c.size() * 4, s);
  d.copy_host_to_device(s, da->span, a.data());
  d.copy_host_to_device(s, db->span, b.data());
  pg::GemmArgs g;
  g.m = m, g.n = n, g.k = k, g.a = da->span, g.b = db->span, g.c = dc->span, g.lda = k, g.ldb = n, g.ldc = n;
  g.type = pg::ElementType::kFP32;
  d.gemm(s, g);
  d.copy_device_to_host(s, c.data(), dc->span);
  d.synchronize_all();
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      float ref = 0;
      for (int x = 0; x < k; ++x) ref += a[i * k + x] * b[x * n + j];
      EXPECT_FLOAT_EQ(c[i * n + j], ref) << i << "," << j;
    }
  }
  d.free(*da), d.free(*db), d.free(*dc);
}

TEST(CudaDevice, ExecutorRunsTheHostScenarioWithTheSimulatorsPlans) {
  SKIP_WITHOUT_GPUS(1);
  const pc::Scenario s = pc::load_scenario(std::string(PREFETCHLAB_SOURCE_DIR) + "/scenarios/host/tiny-llama-host.yaml",
                                           {"cluster.gpus_per_node=1", "output.trace=false"},
                                           pc::BundledData::from_root(PREFETCHLAB_SOURCE_DIR));
  pg::DeviceGroupOptions o;
  auto group = pg::make_device_group(pg::Backend::kCuda, o);
  const pg::ExecutorResult real = pg::Executor(s, *group).run();
  ASSERT_EQ(real.status, pc::RunStatus::kOk) << real.message;
  prefetchlab::sim::World world(s, false);
  const auto simulated = world.run();
  ASSERT_EQ(real.metrics.iterations.size(), simulated.metrics.iterations.size());
  for (std::size_t i = 0; i < real.metrics.iterations.size(); ++i) {
    EXPECT_EQ(real.metrics.iterations[i].all_gather_count, simulated.metrics.iterations[i].all_gather_count);
    EXPECT_GT(real.metrics.iterations[i].step_time_ns, 0);
  }
}

#else

TEST(CudaDevice, ABuildWithoutCudaSaysSoWhenAskedForTheCudaBackend) {
  EXPECT_FALSE(pg::cuda_backend_built());
  try {
    pg::make_device_group(pg::Backend::kCuda, {});
    FAIL() << "expected BackendUnavailable";
  } catch (const pg::BackendUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find("built without the CUDA + NCCL device"), std::string::npos) << e.what();
  }
}

#endif
