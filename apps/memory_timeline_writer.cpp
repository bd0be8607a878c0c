#include "memory_timeline_writer.hpp"

#include <algorithm>

namespace prefetchlab::apps {
namespace {

// The most a memory.csv row takes: time_ns (16 digits: 115 days), rank (5), two byte counts
// (12 each), 3 commas and a newline. Rows average ~38 bytes (Llama-2-70B), so the file stays
// well under the budget.
constexpr std::int64_t kMemoryRowBytesBound = 50;

}  // namespace

MemoryTimelineWriter::MemoryTimelineWriter(const std::filesystem::path& path, std::int64_t budget_bytes)
    : csv_(path), budget_rows_(budget_bytes > 0 ? std::max<std::int64_t>(1, budget_bytes / kMemoryRowBytesBound) : 0) {}

void MemoryTimelineWriter::add(std::span<const core::MemoryPoint> points) {
  if (budget_rows_ == 0) {
    csv_.append(points);
    return;
  }
  if (first_left_out_ == 0) pending_.insert(pending_.end(), points.begin(), points.end());
}

void MemoryTimelineWriter::end_iteration(std::int32_t iteration) {
  last_iteration_ = iteration;
  write_pending(iteration);
}

void MemoryTimelineWriter::finish() { write_pending(last_iteration_ + 1); }

void MemoryTimelineWriter::write_pending(std::int32_t iteration) {
  if (budget_rows_ == 0 || first_left_out_ != 0) return;
  if (rows_ + static_cast<std::int64_t>(pending_.size()) > budget_rows_) {
    first_left_out_ = iteration;
  } else if (!pending_.empty()) {
    csv_.append(pending_);
    rows_ += static_cast<std::int64_t>(pending_.size());
  }
  pending_.clear();
  if (first_left_out_ != 0) pending_.shrink_to_fit();
}

}  // namespace prefetchlab::apps
