#pragma once
// DeepSpeed's `zero_optimization` section as PrefetchLab models it (stage 3 only). Defaults are
// DeepSpeed's *code* defaults (deepspeed/runtime/zero/config.py, offload_config.py, and the
// three adaptive-prefetch keys of PR #8431), not the documentation's. One table in
// zero_config.cpp maps each field to its JSON name; reading, JSON output and docs all use it.
#include <cstdint>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/zero/training_facts.hpp"
#include "core/input/yaml_section.hpp"

namespace prefetchlab::core {

enum class OffloadDevice { kNone, kCpu, kNvme };
const char* offload_device_name(OffloadDevice device);

// zero_optimization.offload_param (DeepSpeedZeroOffloadParamConfig).
struct OffloadParamConfig {
  OffloadDevice device = OffloadDevice::kNone;
  std::string nvme_path;  // "" = not set (null)
  std::int64_t buffer_count = 5;
  std::int64_t buffer_numel = 100'000'000;        // buffer_size
  std::int64_t max_in_cpu_numel = 1'000'000'000;  // max_in_cpu
  bool pin_memory = false;
};

// zero_optimization.offload_optimizer (DeepSpeedZeroOffloadOptimizerConfig).
struct OffloadOptimizerConfig {
  OffloadDevice device = OffloadDevice::kNone;
  std::string nvme_path;
  std::int64_t buffer_count = 4;
  bool pin_memory = false;
  bool pipeline_read = false;
  bool pipeline_write = false;
  bool fast_init = false;
  double ratio = 1.0;
  bool super_offload = false;
  bool convert_grad_on_cpu = true;
  double cpuadam_cores_perc = 0.8;
};

struct ZeroConfig {
  std::int64_t stage = 3;  // only 3 is accepted
  // Fetch / prefetch / release (PartitionedParameterCoordinator).
  std::int64_t prefetch_bucket_numel = 50'000'000;           // stage3_prefetch_bucket_size
  std::int64_t max_live_numel = 1'000'000'000;               // stage3_max_live_parameters
  std::int64_t max_reuse_distance_numel = 1'000'000'000;     // stage3_max_reuse_distance
  std::int64_t param_persistence_threshold_numel = 100'000;  // stage3_param_persistence_threshold
  std::int64_t model_persistence_threshold_numel =
      std::numeric_limits<std::int64_t>::max();   // sys.maxsize
  std::int64_t module_granularity_threshold = 0;  // 0 = off
  bool use_all_reduce_for_fetch_params = false;
  // One all-gather per parameter; DeepSpeed's engine then forces the prefetch bucket to 1
  // (see effective_prefetch_bucket_numel()).
  bool allgather_sequential = false;
  std::int64_t partition_stream_chunk_numel = 0;  // zero.Init only
  // Streams and gradient reduction.
  bool overlap_comm = true;  // DeepSpeed: None -> true for stage 3
  std::int64_t reduce_bucket_numel = 500'000'000;
  std::int64_t allgather_bucket_numel = 500'000'000;  // accepted; unused by stage-3 param fetch
  bool contiguous_gradients = true;
  bool reduce_scatter = true;
  std::int64_t sub_group_numel = 1'000'000'000;  // optimizer tiling only
  // ZeRO++.
  std::int64_t zero_hpz_partition_size = 1;
  bool zero_quantized_weights = false;
  bool zero_quantized_nontrainable_weights = false;
  bool zero_quantized_gradients = false;
  // Adaptive prefetch bucket (PR #8431).
  bool adaptive_prefetch_bucket = false;
  std::int64_t adaptive_prefetch_min_numel = 10'000'000;
  std::int64_t adaptive_prefetch_max_numel = 500'000'000;
  // Accepted, without effect on what PrefetchLab models.
  bool log_trace_cache_warnings = false;
  bool gather_16bit_weights_on_model_save = false;
  bool round_robin_gradients = false;
  bool ignore_unused_parameters = true;
  bool memory_efficient_linear = true;
  // Offload.
  OffloadParamConfig offload_param;
  OffloadOptimizerConfig offload_optimizer;

  // The bucket the coordinator uses: 1 when allgather_sequential (as DeepSpeed's engine does).
  std::int64_t effective_prefetch_bucket_numel() const {
    return allgather_sequential ? 1 : prefetch_bucket_numel;
  }
};

// Reads the scenario's `zero:` map: DeepSpeed key names inline, plus an optional
// `ds_config: path.json` (relative to scenario_dir). Precedence: code defaults < the file's
// zero_optimization < inline keys. "auto" sizes resolve as Hugging Face does (h = hidden size):
// reduce_bucket_size = h*h, stage3_prefetch_bucket_size = int(0.9*h*h),
// stage3_param_persistence_threshold = 10*h. Top-level ds_config keys are checked against
// `facts`. Notes (keys accepted without effect, adjustments DeepSpeed makes) go to `notes`
// when it is not null. Every problem is an InputError naming file, line and key.
ZeroConfig load_zero_config(const YamlSection& zero_section, const TrainingFacts& facts,
                            const std::filesystem::path& scenario_dir,
                            std::vector<std::string>* notes);

// The config with DeepSpeed's key names: a `zero_optimization` object ready to paste.
nlohmann::json zero_config_to_json(const ZeroConfig& config);

// One row per key PrefetchLab reads in zero_optimization (for docs and --help).
struct ZeroKeyDoc {
  std::string json_name;   // e.g. "stage3_prefetch_bucket_size" (nested: "offload_param.device")
  std::string field_name;  // e.g. "prefetch_bucket_numel"; "" for keys without a field
  nlohmann::json default_value;  // DeepSpeed's code default (null for keys without a field)
  bool modelled = true;          // false: accepted, no effect on what PrefetchLab models
  std::string note;
};
std::vector<ZeroKeyDoc> zero_config_key_docs();

}  // namespace prefetchlab::core
