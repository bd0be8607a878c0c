// adam_chunk_plan.hpp: the multi-tensor Adam launch plan, and the host device's Adam run through
// it against one plain Adam per tensor.
#include "gpu_backend/device/adam_chunk_plan.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <stdexcept>
#include <utility>
#include <vector>

#include "gpu_backend/device/bf16.hpp"
#include "gpu_backend/device/host_kernels.hpp"
#include "gpu_backend/device/host_layer_kernels.hpp"

namespace pg = prefetchlab::gpu;

namespace {

// Each (tensor, chunk) the plan covers, with how often.
std::map<std::pair<int, std::int64_t>, int> coverage(const std::vector<pg::AdamLaunch>& plan) {
  std::map<std::pair<int, std::int64_t>, int> seen;
  for (const auto& launch : plan) {
    for (const auto& block : launch.blocks) ++seen[{launch.tensors.at(static_cast<std::size_t>(block.slot)), block.chunk}];
  }
  return seen;
}

}  // namespace

TEST(AdamChunkPlan, CoversEveryChunkOnceWithinTheLaunchLimits) {
  const pg::AdamChunkLimits limits{10, 3, 4};
  const std::vector<std::int64_t> numels{25, 0, 10, 1, 41, 9, 9, 9};
  const auto plan = pg::plan_adam_chunks(numels, limits);
  const auto seen = coverage(plan);
  std::size_t chunks = 0;
  for (std::size_t t = 0; t < numels.size(); ++t) {
    const std::int64_t n = (numels[t] + 9) / 10;
    chunks += static_cast<std::size_t>(n);
    for (std::int64_t c = 0; c < n; ++c) EXPECT_EQ(seen.count({static_cast<int>(t), c}), 1u) << t << "/" << c;
  }
  EXPECT_EQ(seen.size(), chunks);
  for (const auto& [key, times] : seen) EXPECT_EQ(times, 1);
  EXPECT_EQ(seen.count({1, 0}), 0u);  // the empty tensor has no block
  for (const auto& launch : plan) {
    EXPECT_LE(launch.tensors.size(), 3u);
    EXPECT_LE(launch.blocks.size(), 4u);
    EXPECT_FALSE(launch.blocks.empty());
  }
}

TEST(AdamChunkPlan, PyTorchLimitsGiveFewLaunches) {
  // 1,000 small tensors: 30 per launch. One 355M-parameter flat shard: 320 chunks per launch.
  EXPECT_EQ(pg::plan_adam_chunks(std::vector<std::int64_t>(1000, 1000)).size(), 34u);
  const auto flat = pg::plan_adam_chunks({355'000'000});
  EXPECT_EQ(flat.size(), 17u);  // ceil(355e6 / 65536) = 5,417 chunks
  EXPECT_EQ(flat.front().blocks.size(), 320u);
  EXPECT_EQ(flat[1].blocks.front().chunk, 320);  // the tensor continues where the last launch stopped
  EXPECT_TRUE(pg::plan_adam_chunks({}).empty());
  EXPECT_THROW(pg::plan_adam_chunks({-1}), std::invalid_argument);
  EXPECT_THROW(pg::plan_adam_chunks({1}, {0, 30, 320}), std::invalid_argument);
}

TEST(AdamChunkPlan, HostMultiTensorAdamMatchesOneAdamPerTensor) {
  const std::vector<std::int64_t> numels{37, 5, 64, 1};
  struct States {
    std::vector<std::uint16_t> params, grads;
    std::vector<float> master, m, v;
  };
  auto make = [&] {
    std::vector<States> all;
    for (std::size_t t = 0; t < numels.size(); ++t) {
      States s;
      for (std::int64_t i = 0; i < numels[t]; ++i) {
        const float x = static_cast<float>((i * 13 + static_cast<std::int64_t>(t) * 7) % 17) / 8.0f - 1.0f;
        s.params.push_back(pg::float_to_bf16(x));
        s.grads.push_back(pg::float_to_bf16(0.25f * x - 0.1f));
        s.master.push_back(x);
        s.m.push_back(0.01f * x);
        s.v.push_back(0.02f * x * x);
      }
      all.push_back(std::move(s));
    }
    return all;
  };
  auto span = [](auto& v) {
    return pg::DeviceSpan{reinterpret_cast<prefetchlab::core::DeviceAddress>(v.data()), v.size() * sizeof(v[0])};
  };
  auto args_of = [&](std::vector<States>& all) {
    std::vector<pg::AdamArgs> args;
    for (std::size_t t = 0; t < all.size(); ++t) {
      pg::AdamArgs a;
      a.params = span(all[t].params), a.grads = span(all[t].grads), a.master = span(all[t].master);
      a.exp_avg = span(all[t].m), a.exp_avg_sq = span(all[t].v);
      a.numel = numels[t], a.step = 3, a.lr = 1e-2f;
      args.push_back(a);
    }
    return args;
  };
  std::vector<States> one_by_one = make(), chunked = make();
  for (const auto& a : args_of(one_by_one)) pg::host::run_adam(a);
  // Small limits, so tensors split across chunks and launches.
  pg::host::run_multi_tensor_adam(args_of(chunked), {8, 2, 3});
  for (std::size_t t = 0; t < numels.size(); ++t) {
    EXPECT_EQ(chunked[t].master, one_by_one[t].master) << "tensor " << t;
    EXPECT_EQ(chunked[t].m, one_by_one[t].m);
    EXPECT_EQ(chunked[t].v, one_by_one[t].v);
    EXPECT_EQ(chunked[t].params, one_by_one[t].params);
  }
  EXPECT_NE(chunked[0].master, make()[0].master);  // it did update
  // One launch shares the hyper-parameters.
  auto mixed = args_of(chunked);
  mixed[2].lr = 1e-3f;
  EXPECT_THROW(pg::host::run_multi_tensor_adam(mixed), std::invalid_argument);
}
