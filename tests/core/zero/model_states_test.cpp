// core::device_model_states: ZeRO-3's resident model states (stage3.py), in allocation order,
// less what zero.offload_param / offload_optimizer keep in host memory.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/zero/model_states.hpp"

namespace pc = prefetchlab::core;

namespace {

std::vector<std::string> names(const std::vector<pc::ModelStateBuffer>& states) {
  std::vector<std::string> out;
  for (const auto& s : states) out.push_back(s.what);
  return out;
}

TEST(ModelStates, EveryStateOnTheDeviceInDeepSpeedsOrder) {
  pc::ZeroConfig zero;
  zero.reduce_bucket_numel = 1000;
  const auto states = pc::device_model_states(zero, 250, 2);
  EXPECT_EQ(names(states), (std::vector<std::string>{"parameter shards", "fp32 master weights", "Adam exp_avg",
                                                     "Adam exp_avg_sq", "gradient partition", "IPG reduce bucket"}));
  const std::vector<std::int64_t> bytes{500, 1000, 1000, 1000, 500, 2000};
  for (std::size_t i = 0; i < states.size(); ++i) EXPECT_EQ(states[i].bytes, bytes[i]) << states[i].what;
}

TEST(ModelStates, OffloadedStatesAndAnUncontiguousBucketAreNotOnTheDevice) {
  pc::ZeroConfig zero;
  zero.offload_param.device = pc::OffloadDevice::kCpu;
  EXPECT_EQ(names(pc::device_model_states(zero, 10, 2)).front(), "fp32 master weights");
  zero.offload_optimizer.device = pc::OffloadDevice::kCpu;
  zero.contiguous_gradients = false;
  EXPECT_EQ(names(pc::device_model_states(zero, 10, 2)), std::vector<std::string>{"gradient partition"});
}

TEST(ModelStates, ThePartitionRoundsEachParameterUp) {
  pc::ModelSpec model;
  model.params.push_back({"a", 10, pc::DType::kBF16, 0, 0});
  model.params.push_back({"b", 7, pc::DType::kBF16, 0, 0});
  EXPECT_EQ(pc::partition_numel(model, 4), 3 + 2);
  EXPECT_EQ(pc::partition_numel(model, 1), 17);
}

}  // namespace
