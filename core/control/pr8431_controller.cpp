// `deepspeed_pr8431`: the original PR #8431 as reviewed (deepspeedai/DeepSpeed),
// defects included. Per rank, alone, on host timers:
//   wait_ema     <- EMA (alpha = ema_alpha) of each fetch's wait,
//   interval_ema <- EMA of the time between fetches,
//   every update_interval fetches: r = wait_ema / interval_ema;
//     r > grow_threshold   -> new = int(old * grow_factor)
//     r < shrink_threshold -> new = int(old * shrink_factor)
//   and only then clamp to [min_bucket_numel, max_bucket_numel] (not capped by max_live; the
//   starting bucket is never clamped). The new bucket applies from the next fetch.
// It samples in every trace mode (recording and invalid iterations too) and never agrees with
// other ranks, so ranks' buckets may diverge (review P1).
//
// Where the sources are silent:
//  - EMA start: the PR does not record how its EMAs are initialised; each EMA starts at its
//    first sample (ema := x on the first one, then ema := a*x + (1-a)*ema).
//  - "Fetches" are counted as samples: a fetch that has no earlier same-phase fetch in the
//    iteration has no interval (samples.csv has no row for it), so it neither feeds the EMAs
//    nor counts towards the cadence. This keeps replay of samples.csv exact.
//  - Growth is int(old * grow_factor) as the PR text says ("grow by 25 %"); the follow-up's
//    max(old + 1, ...) guard is not in the PR.
#include "core/control/prefetch_controller.hpp"

#include <algorithm>

namespace prefetchlab::core {
namespace {

class Pr8431Controller final : public PrefetchController {
 public:
  using PrefetchController::PrefetchController;
  bool decides_per_fetch() const override { return true; }
  std::optional<Proposal> begin_iteration(int, TraceMode) override { return std::nullopt; }
  void apply(const Proposal&) override {}
  bool wants_samples() const override { return true; }

 private:
  std::optional<std::int64_t> on_sample(const TimingSample& sample) override {
    const double alpha = config().ema_alpha;
    const auto wait = static_cast<double>(wait_of(sample));
    const auto interval = static_cast<double>(interval_of(sample));
    wait_ema_ = started_ ? alpha * wait + (1 - alpha) * wait_ema_ : wait;
    interval_ema_ = started_ ? alpha * interval + (1 - alpha) * interval_ema_ : interval;
    started_ = true;
    if (++fetches_ % config().update_interval != 0 || interval_ema_ <= 0) return std::nullopt;
    const double ratio = wait_ema_ / interval_ema_;
    const std::int64_t old = bucket_numel();
    std::int64_t next = old;
    if (ratio > config().grow_threshold) {
      next = static_cast<std::int64_t>(static_cast<double>(old) * config().grow_factor);
    } else if (ratio < config().shrink_threshold) {
      next = static_cast<std::int64_t>(static_cast<double>(old) * config().shrink_factor);
    } else {
      return std::nullopt;  // dead band: no change, no clamp
    }
    next = std::clamp(next, config().min_bucket_numel, config().max_bucket_numel);
    if (next == old) return std::nullopt;
    set_bucket(next);
    return next;
  }

  bool started_ = false;
  double wait_ema_ = 0;
  double interval_ema_ = 0;
  std::int64_t fetches_ = 0;
};

}  // namespace

std::unique_ptr<PrefetchController> make_pr8431_controller(const ControllerConfig& config,
                                                           const ControllerContext& context) {
  return std::make_unique<Pr8431Controller>(config, context);
}

}  // namespace prefetchlab::core
