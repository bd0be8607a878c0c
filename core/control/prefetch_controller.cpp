#include "core/control/prefetch_controller.hpp"

#include <algorithm>

namespace prefetchlab::core {

Proposal agree(Agreement agreement, std::span<const Proposal> proposals, int rank) {
  if (rank < 0 || static_cast<std::size_t>(rank) >= proposals.size()) {
    throw std::invalid_argument("agree: rank " + std::to_string(rank) + " outside " +
                                std::to_string(proposals.size()) + " proposals");
  }
  for (const Proposal& p : proposals) {
    if (p.values.size() != proposals.front().values.size()) {
      throw std::invalid_argument("agree: proposals of different lengths");
    }
  }
  switch (agreement) {
    case Agreement::kNone: return proposals[static_cast<std::size_t>(rank)];
    case Agreement::kBroadcastRank0: return proposals.front();
    case Agreement::kAllReduceMax: {
      Proposal out = proposals.front();
      for (const Proposal& p : proposals.subspan(1)) {
        out.invalid = out.invalid || p.invalid;
        for (std::size_t i = 0; i < p.values.size(); ++i) out.values[i] = std::max(out.values[i], p.values[i]);
      }
      return out;
    }
  }
  return proposals[static_cast<std::size_t>(rank)];
}

MissingSampleColumn::MissingSampleColumn(std::string column)
    : std::invalid_argument("samples lack column '" + column + "'"), column_(std::move(column)) {}

BucketBounds capped_bounds(const ControllerConfig& config, std::int64_t max_live_numel) {
  BucketBounds bounds;
  bounds.max = std::min(config.max_bucket_numel, max_live_numel);
  bounds.min = std::min(config.min_bucket_numel, bounds.max);
  return bounds;
}

PrefetchController::PrefetchController(const ControllerConfig& config, const ControllerContext& context)
    : config_(config), context_(context), bucket_(context.initial_bucket_numel) {}

std::vector<std::string> PrefetchController::required_columns() const {
  if (config_.timing == TimingSource::kHostTimers) return {kHostWaitColumn, kHostIntervalColumn};
  return {};
}

void PrefetchController::bind_columns(std::span<const std::string> extra) {
  bound_.assign(extra.begin(), extra.end());
  for (const std::string& needed : required_columns()) {
    if (bound_index(needed) < 0) throw MissingSampleColumn(needed);
  }
  host_wait_index_ = bound_index(kHostWaitColumn);
  host_interval_index_ = bound_index(kHostIntervalColumn);
  bound_called_ = true;
}

int PrefetchController::bound_index(const std::string& name) const {
  const auto it = std::find(bound_.begin(), bound_.end(), name);
  return it == bound_.end() ? -1 : static_cast<int>(it - bound_.begin());
}

std::int64_t PrefetchController::column(const TimingSample& sample, int index) const {
  if (index < 0 || static_cast<std::size_t>(index) >= sample.extra.size()) {
    throw std::invalid_argument("sample (iteration " + std::to_string(sample.iteration) + ", rank " +
                                std::to_string(sample.rank) + ") lacks a bound extra column");
  }
  return sample.extra[static_cast<std::size_t>(index)];
}

std::int64_t PrefetchController::wait_of(const TimingSample& sample) const {
  return config_.timing == TimingSource::kHostTimers ? column(sample, host_wait_index_) : sample.wait_ns;
}

std::int64_t PrefetchController::interval_of(const TimingSample& sample) const {
  return config_.timing == TimingSource::kHostTimers ? column(sample, host_interval_index_)
                                                     : sample.interval_ns;
}

std::optional<std::int64_t> PrefetchController::observe(const TimingSample& sample) {
  if (!bound_called_) {
    // Columns must be bound first; with none needed, binding "no extras" is implied.
    bind_columns({});
  }
  return on_sample(sample);
}

std::unique_ptr<PrefetchController> make_prefetch_controller(const ControllerConfig& config,
                                                             const ControllerContext& context) {
  switch (config.policy) {
    case ControllerPolicy::kStatic: return make_static_controller(config, context);
    case ControllerPolicy::kDeepSpeedPr8431: return make_pr8431_controller(config, context);
    case ControllerPolicy::kEmaThreshold: return make_ema_threshold_controller(config, context);
    case ControllerPolicy::kPaceSearch: return make_pace_search_controller(config, context);
  }
  throw std::invalid_argument("unknown controller policy");
}

}  // namespace prefetchlab::core
