#pragma once
// What `calibrate --backend` measures: the GEMM shapes, and the sizes of its memory-bound
// passes, host<->device copies and collectives. With a scenario, the shapes its modules run
// (M = micro_batch x seq_len tokens) and its bucket sizes; without one, on a GPU, Llama-2-7B's
// layers over a range of token counts. The host device (CPU threads, CI) gets sizes it runs in
// seconds: the bundled models' shapes scaled to the tiny width, or the scenario's scaled down.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/scenario/scenario.hpp"
#include "gpu_backend/device_backend.hpp"
#include "gpu_backend/microbenchmarks.hpp"

namespace prefetchlab::apps {

struct CalibrationPlan {
  std::vector<gpu::GemmShape> gemm_shapes;  // forward (tokens x out x in), distinct, sorted
  std::string gemm_source;                  // one line: where the shapes come from
  std::vector<std::int64_t> collective_sizes_bytes;  // increasing, multiples of ranks x element size
  std::vector<std::int64_t> memory_pass_sizes_bytes;  // increasing
  std::vector<std::int64_t> copy_sizes_bytes;         // increasing
  std::vector<std::string> notes;  // sizes left out or scaled down, said out loud
};

// `scenario` may be null (the default shape set). Sizes are bytes of bf16 data.
CalibrationPlan make_calibration_plan(gpu::Backend backend, const core::Scenario* scenario,
                                      const std::filesystem::path& models_dir, int ranks);

}  // namespace prefetchlab::apps
