#pragma once
// What one rank of a real run measured, in plain data: each finished iteration's times (the
// Metrics fold's input), its timeline spans and controller samples, the memory timeline, the
// host call log and the plan log. The executor folds every rank's records into one
// ExecutorResult (executor.cpp); between processes each rank sends its own to rank 0 as JSON
// (`--launcher env`), so both paths fold the very same records.
#include <optional>
#include <string>
#include <vector>

#include "core/metrics/metrics.hpp"
#include "core/zero/trace_mode.hpp"
#include "gpu_backend/device/call_log.hpp"
#include "gpu_backend/executor/executor.hpp"

namespace prefetchlab::gpu {

struct RankIterationRecord {
  int iteration = 0;
  bool optimizer_step = false;
  core::TraceMode trace_mode = core::TraceMode::kRecord;
  core::RankIterationTimes times;
  std::vector<TimelineSpan> timeline;
  std::vector<core::TimingSample> samples;
};

struct RankRecords {
  int rank = 0;
  std::vector<RankIterationRecord> iterations;  // the iterations this rank finished, in order
  std::vector<core::MemoryPoint> memory;        // the whole run's (empty after a failure)
  std::vector<CallLogEntry> call_log;
  std::vector<std::string> plan_log;
};

std::string rank_records_to_json(const RankRecords& records);
// Throws std::runtime_error on a document that is not a rank's records.
RankRecords rank_records_from_json(const std::string& text);

}  // namespace prefetchlab::gpu
