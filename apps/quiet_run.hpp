#pragma once
// One simulation that keeps only its summary: no per-iteration rows, samples or memory points
// are held, so thousands of runs (sweep, tune) stay flat in memory.
#include <atomic>

#include "core/metrics/metrics.hpp"
#include "core/scenario/scenario.hpp"

namespace prefetchlab::apps {

struct QuietRunResult {
  core::RunStatus status = core::RunStatus::kOk;
  core::SummaryStats stats;  // steady statistics after the scenario's warmup iterations
};

// Simulates `scenario`; `interrupt` (may be null) stops the run early when it becomes true.
QuietRunResult run_quietly(const core::Scenario& scenario, const std::atomic<bool>* interrupt);

}  // namespace prefetchlab::apps
