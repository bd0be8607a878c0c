#include "core/zero/model_states.hpp"

namespace prefetchlab::core {

std::int64_t partition_numel(const ModelSpec& model, std::int64_t world_size) {
  std::int64_t numel = 0;
  for (const ParamSpec& param : model.params) numel += (param.numel + world_size - 1) / world_size;
  return numel;
}

std::vector<ModelStateBuffer> device_model_states(const ZeroConfig& zero, std::int64_t partition_numel,
                                                  std::int64_t element_bytes) {
  const bool params_on_device = zero.offload_param.device == OffloadDevice::kNone;
  const bool optimizer_on_device = zero.offload_optimizer.device == OffloadDevice::kNone;
  const struct {
    ModelState state;
    const char* what;
    std::int64_t bytes;
    bool on_device;
  } all[] = {
      {ModelState::kParameterShards, "parameter shards", partition_numel * element_bytes, params_on_device},
      {ModelState::kMasterWeights, "fp32 master weights", partition_numel * 4, optimizer_on_device},
      {ModelState::kExpAvg, "Adam exp_avg", partition_numel * 4, optimizer_on_device},
      {ModelState::kExpAvgSq, "Adam exp_avg_sq", partition_numel * 4, optimizer_on_device},
      {ModelState::kGradientPartition, "gradient partition", partition_numel * element_bytes, true},
      {ModelState::kIpgBucket, "IPG reduce bucket", zero.reduce_bucket_numel * element_bytes, zero.contiguous_gradients},
  };
  std::vector<ModelStateBuffer> states;
  for (const auto& s : all) {
    if (s.on_device && s.bytes > 0) states.push_back({s.state, s.what, s.bytes});
  }
  return states;
}

}  // namespace prefetchlab::core
