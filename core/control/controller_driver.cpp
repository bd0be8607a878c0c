#include "core/control/controller_driver.hpp"

#include <utility>

namespace prefetchlab::core {

ControllerDriver::ControllerDriver(const ControllerConfig& config, const ControllerContext& context)
    : ControllerDriver(make_prefetch_controller(config, context), context) {}

ControllerDriver::ControllerDriver(std::unique_ptr<PrefetchController> controller, const ControllerContext& context)
    : controller_(std::move(controller)), rank_(context.rank), world_size_(context.world_size) {
  controller_->bind_columns(measured_sample_columns());
  per_fetch_ = controller_->decides_per_fetch();
}

bool ControllerDriver::previous_samples_due(int iteration) const {
  return iteration > 1 && !per_fetch_ && samples_wanted_;
}

void ControllerDriver::deliver_previous(int iteration, std::span<const FetchTiming> previous_fetches) {
  deliver_samples(*controller_, iteration - 1, rank_, previous_fetches, invalidated_after_);
}

std::optional<Proposal> ControllerDriver::propose(int iteration, TraceMode mode) {
  std::optional<Proposal> proposal = controller_->begin_iteration(iteration, mode);
  if (!proposal) return std::nullopt;
  if (controller_->agreement() == Agreement::kNone || world_size_ == 1) {
    controller_->apply(*proposal);
    return std::nullopt;
  }
  return proposal;
}

std::int64_t ControllerDriver::start_fetches() {
  invalidated_after_.clear();
  samples_wanted_ = controller_->wants_samples();
  return controller_->bucket_numel();
}

std::optional<std::int64_t> ControllerDriver::after_fetch(int iteration, std::size_t fetch_index,
                                                          std::span<const FetchTiming> timings,
                                                          bool trace_invalidated) {
  std::optional<std::int64_t> bucket;
  if (reads_fetch_timings() && !timings.empty()) {
    if (const auto sample = host_sample_at_fetch_end(iteration, rank_, timings, timings.size() - 1)) {
      bucket = controller_->observe(*sample);
    }
  }
  if (trace_invalidated) {
    if (per_fetch_ || !samples_wanted_) {
      controller_->on_trace_invalidated();
    } else {
      invalidated_after_.push_back(fetch_index);  // delivered with the samples
    }
  }
  return bucket;
}

}  // namespace prefetchlab::core
