// `pace_search` (ours): find the bucket that minimises the measured pace of an iteration by a
// geometric search, one probe per iteration, and stop.
//
// Measurement. The pace of an iteration on a rank is P = sum of interval_ns over all its samples
// (both phases): the fetch-to-fetch wall time of forward and backward, stalls, host launch gaps
// and compute included. What the bucket does not touch (the first fetch, loss, the gradient
// epilogue, the optimizer) is a constant offset, so P ranks buckets as the step time does
// (bert-base on 2x RTX 4000: step - P = 14.15 ms at buckets 1e5, 4e6, 5e7 and 1e9 alike), unlike
// the stall ratio, which misses the host gaps of many small all-gathers. Every iteration is an
// update point while the search runs; the proposal is {invalid, P, peak reserved bytes}, agreed
// by MAX over ranks (the slowest rank sets the pace, the fullest GPU the memory), so every rank
// runs the same search on the same numbers and holds the same bucket.
//
// Search, on the agreed values of COMPLETE iterations only (RECORD iterations give the memory
// baseline, invalidated iterations are measured again):
//   1. measure the starting bucket B0 (zero.stage3_prefetch_bucket_size, clamped);
//   2. bracket: step down by search_factor (x4 = two points of a x2 grid) while the pace
//      improves; if the very first step down is worse, step up from B0 the same way;
//   3. refine: probe best / sqrt(search_factor) and best * sqrt(search_factor) (x2), move to the
//      better one if any;
//   4. hold the best bucket for the rest of the run (no further proposals, no samples needed).
// Buckets stay within [min_bucket_numel (default 1e5), min(max_bucket_numel, max_live)].
//
// Memory budget (memory_budget_bytes > 0; needs the samples column peak_reserved_bytes): a bucket
// whose iteration peaked above the budget is infeasible (never the answer; no bucket at or above
// it is probed again) and the search moves down. Reserved memory never shrinks (the caching
// allocator keeps what it reserved; nothing calls empty_cache), so one probe over the budget
// spoils the run for good: a larger bucket is probed only when it is predicted within 95% of
// the budget from the largest measured bucket below it, growing per element at the steepest of
// the measured slopes and at least 3 buckets x 2 x the gathered element size (one bucket in
// use, up to two in flight, each ≈2x while its flat buffer and per-parameter copies coexist,
// DeepSpeed's partition_parameters.py), plus one 20 MiB segment of allocator rounding
// (kLargeBuffer, PyTorch's CUDACachingAllocator.cpp). Smaller buckets are always allowed. The
// start bucket is not checked (nothing is measured before it runs): start a budgeted search
// below the budget.
//
// Why it converges fast: one complete iteration measures a bucket fully (no EMA lag, no
// sampling cadence), the update applies at the very next reset_step, and the pace is unimodal
// in log(bucket) (small buckets: launch/latency-bound all-gathers issued only one module ahead;
// large ones: the whole first bucket must arrive before the second module runs). A start d
// steps of x4 away from the optimum is bracketed after d + 1 probes (+1 when the optimum lies
// above the start), the x2 refinement adds at most 2, and the search never probes more than
// one x4 step beyond the best bucket seen, so late probes cost little. Emulated on the bundled
// scenarios (each probe answered by a static run at that bucket; x2 grid 1e5..8e8 as reference):
// bert-base 2x RTX 4000 from 5e7 reaches the best static's step time (3.2e6: 34.45 ms) at
// iteration 4, later probes within 1.4 %; gpt2-medium 4 nodes from 5e7 holds 2.5e7, within
// 0.1 % of the best static (2.56e7), from iteration 5; tiny-llama from 1e5 is within 1 % at
// iteration 4; llama-2-7b 8x H100 from 5e7 is within 0.1 % throughout.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "core/control/prefetch_controller.hpp"

namespace prefetchlab::core {
namespace {

class PaceSearchController final : public PrefetchController {
 public:
  PaceSearchController(const ControllerConfig& config, const ControllerContext& context)
      : PrefetchController(config, context), bounds_(capped_bounds(config, context.max_live_numel)) {
    set_bucket(bounds_.clamp(bucket_numel()));
    start_ = bucket_numel();
  }

  Agreement agreement() const override { return Agreement::kAllReduceMax; }

  std::vector<std::string> required_columns() const override {
    if (config().memory_budget_bytes > 0) return {kPeakReservedColumn};
    return {};
  }

  std::optional<Proposal> begin_iteration(int iteration, TraceMode mode) override {
    std::optional<Proposal> proposal;
    if (phase_ != Phase::kDone && iteration > 1) {
      Proposal own;
      own.invalid = samples_ == 0 || invalidated_;
      own.values = {static_cast<double>(pace_ns_), static_cast<double>(peak_bytes_)};
      proposal = own;
      measured_mode_ = mode_;
    }
    mode_ = mode;
    samples_ = 0;
    pace_ns_ = 0;
    peak_bytes_ = 0;
    invalidated_ = false;
    return proposal;
  }

  void apply(const Proposal& agreed) override {
    if (agreed.invalid || agreed.values.size() != 2) return;  // measure the same bucket again
    const double pace = agreed.values[0];
    const double peak = agreed.values[1];
    if (measured_mode_ != TraceMode::kComplete) return;
    const std::int64_t bucket = bucket_numel();
    const bool feasible = budget() <= 0 || peak <= static_cast<double>(budget());
    points_[bucket] = Point{feasible ? pace : kInf, peak};
    if (!feasible) lowest_infeasible_ = std::min(lowest_infeasible_, bucket);
    if (!best_ || points_[bucket].pace < points_[*best_].pace) best_ = bucket;
    set_bucket(next_bucket());
  }

  bool wants_samples() const override { return phase_ != Phase::kDone; }

  void on_trace_invalidated() override { invalidated_ = true; }

 private:
  enum class Phase { kBracketDown, kBracketUp, kRefine, kDone };
  struct Point {
    double pace = 0;  // +inf when over the memory budget
    double peak = 0;
  };
  static constexpr double kInf = std::numeric_limits<double>::infinity();
  // Buckets whose gathered memory can be alive at once: the one in use and up to two more in
  // flight (the host blocks beyond 2 outstanding fetch events: DeepSpeed's
  // __max_ongoing_fetch_events).
  static constexpr double kBucketsAlive = 3;
  // Reserved memory is not linear in the bucket (fragmentation; longer prefetch scans keep more
  // parameters alive): predictions must land this far under the budget. On
  // scenarios/gpt2-medium-8-nodes-memory-budget.yaml a 2x step from 8e6 grew reserved memory by
  // 3x the linear prediction; 5% headroom refuses it.
  static constexpr double kBudgetHeadroom = 0.05;
  // The caching allocator's large segment (kLargeBuffer in PyTorch's CUDACachingAllocator.cpp).
  static constexpr double kSegmentSlackBytes = 20.0 * 1024 * 1024;

  std::int64_t budget() const { return config().memory_budget_bytes; }

  std::optional<std::int64_t> on_sample(const TimingSample& sample) override {
    if (phase_ == Phase::kDone) return std::nullopt;
    ++samples_;
    pace_ns_ += interval_of(sample);
    if (peak_index_ < 0 && budget() > 0) peak_index_ = bound_index(kPeakReservedColumn);
    if (peak_index_ >= 0) peak_bytes_ = std::max(peak_bytes_, column(sample, peak_index_));
    return std::nullopt;
  }

  std::int64_t scaled(std::int64_t bucket, double factor) const {
    return bounds_.clamp(static_cast<std::int64_t>(std::llround(static_cast<double>(bucket) * factor)));
  }

  // A bucket worth one iteration: not measured yet, inside the bounds, below any bucket that
  // broke the budget, and predicted within it.
  bool probe_allowed(std::int64_t bucket) const {
    if (points_.contains(bucket) || bucket >= lowest_infeasible_) return false;
    if (budget() <= 0) return true;
    const auto below = points_.lower_bound(bucket);
    if (below == points_.begin()) return true;  // smaller than anything measured
    const auto& [anchor_bucket, anchor] = *std::prev(below);
    // Bytes per bucket element, at least kBucketsAlive buckets of 2x the element size.
    double slope = kBucketsAlive * 2.0 * static_cast<double>(context().param_element_bytes);
    for (auto it = points_.begin(); it != points_.end() && std::next(it) != points_.end(); ++it) {
      const auto& [b0, p0] = *it;
      const auto& [b1, p1] = *std::next(it);
      slope = std::max(slope, (p1.peak - p0.peak) / static_cast<double>(b1 - b0));
    }
    const double predicted = anchor.peak + slope * static_cast<double>(bucket - anchor_bucket) + kSegmentSlackBytes;
    return predicted <= (1.0 - kBudgetHeadroom) * static_cast<double>(budget());
  }

  std::int64_t next_bucket() {
    const std::int64_t best = *best_;
    if (points_.at(best).pace == kInf) {
      // Nothing within the budget yet: keep stepping down from the smallest bucket tried.
      const std::int64_t down = scaled(points_.begin()->first, 1.0 / config().search_factor);
      if (probe_allowed(down)) return down;
      phase_ = Phase::kDone;
      return points_.begin()->first;
    }
    const double factor = config().search_factor;
    while (phase_ != Phase::kDone) {
      if (phase_ == Phase::kBracketDown) {
        const std::int64_t down = scaled(best, 1.0 / factor);
        if (probe_allowed(down)) return down;
        // Unimodal pace: only when the first step down lost is the optimum above the start.
        phase_ = best == start_ ? Phase::kBracketUp : Phase::kRefine;
      } else if (phase_ == Phase::kBracketUp) {
        const std::int64_t up = scaled(best, factor);
        if (probe_allowed(up)) return up;
        phase_ = Phase::kRefine;
      } else {
        const double half = std::sqrt(factor);
        for (const std::int64_t candidate : {scaled(best, 1.0 / half), scaled(best, half)}) {
          if (probe_allowed(candidate)) return candidate;
        }
        phase_ = Phase::kDone;
      }
    }
    return best;
  }

  BucketBounds bounds_;
  std::int64_t start_ = 0;
  Phase phase_ = Phase::kBracketDown;
  TraceMode mode_ = TraceMode::kInvalid;
  TraceMode measured_mode_ = TraceMode::kInvalid;
  std::int64_t samples_ = 0;
  std::int64_t pace_ns_ = 0;
  std::int64_t peak_bytes_ = 0;
  bool invalidated_ = false;
  int peak_index_ = -1;
  std::map<std::int64_t, Point> points_;
  std::optional<std::int64_t> best_;
  std::int64_t lowest_infeasible_ = std::numeric_limits<std::int64_t>::max();
};

}  // namespace

std::unique_ptr<PrefetchController> make_pace_search_controller(const ControllerConfig& config,
                                                                const ControllerContext& context) {
  return std::make_unique<PaceSearchController>(config, context);
}

}  // namespace prefetchlab::core
