#pragma once
// The real run's timeline as a Chrome trace (real_trace.json, written by `validate` beside the
// simulator's simulated_trace.json), so the two can be opened side by side in Perfetto or
// chrome://tracing. Per rank (pid): module kernels on the compute stream, each fetch's window
// (the hook up to compute's wait for the all-gather stream: the stall sample), the collectives
// on the communication stream, the reduce stream's gradient copies and the optimizer step, all
// timed by the device's own events on one clock for every rank.
#include <filesystem>

#include "core/scenario/scenario.hpp"
#include "gpu_backend/executor/executor.hpp"

namespace prefetchlab::apps {

void write_real_trace_json(const std::filesystem::path& path, const core::Scenario& scenario,
                           const gpu::ExecutorResult& run);

}  // namespace prefetchlab::apps
