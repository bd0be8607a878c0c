#pragma once
// A real-backend run (validate --backend) in the torch.profiler (Kineto) schema, one file per
// rank, so that it goes through the same reader as a user's trace (docs/traces.md): the loop
// validate --backend -> calibrate --from-trace -> validate --against-trace.
#include <filesystem>

#include "core/scenario/scenario.hpp"
#include "gpu_backend/executor/executor.hpp"

namespace prefetchlab::apps {

void write_real_kineto_traces(const std::filesystem::path& dir, const core::Scenario& scenario, const gpu::ExecutorResult& run);

}  // namespace prefetchlab::apps
