#pragma once
// memory.csv as `run` writes it: every point as it comes, or, under a byte budget (the default
// above 64 ranks, core/scenario/timeline_selection.hpp), whole iterations from the first while
// the file stays under the budget.
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "core/metrics/metrics_csv.hpp"

namespace prefetchlab::apps {

class MemoryTimelineWriter {
 public:
  // `budget_bytes` 0: no budget.
  MemoryTimelineWriter(const std::filesystem::path& path, std::int64_t budget_bytes);

  // Points of one rank (World's on_memory). Under a budget they wait for end_iteration.
  void add(std::span<const core::MemoryPoint> points);
  // Every rank's points up to `iteration`'s end were added: written if they fit.
  void end_iteration(std::int32_t iteration);
  // After the run: what an unfinished iteration left (an OOM, an interrupt), if it fits.
  void finish();

  // The first iteration left out for the budget, or 0 when none was.
  std::int32_t first_iteration_over_budget() const { return first_left_out_; }

 private:
  void write_pending(std::int32_t iteration);
  core::MemoryCsv csv_;
  std::int64_t budget_rows_ = 0;  // 0: no budget
  std::int64_t rows_ = 0;
  std::int32_t last_iteration_ = 0;
  std::int32_t first_left_out_ = 0;
  std::vector<core::MemoryPoint> pending_;
};

}  // namespace prefetchlab::apps
