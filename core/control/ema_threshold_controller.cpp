// `ema_threshold`: the follow-up controller, commit 6e70233 of 0z5a/DeepSpeed (on PR #8431),
// with four switches that each turn one review defect back on (all off = the fix):
//   agreement            allreduce_max (fix) | broadcast_rank0 | none (defect a)
//   timing               device_events (fix) | host_timers (defect b)
//   sample_during_record false (fix) | true (defect c): samples of RECORD/INVALID iterations count
//   clamp_initial        true (fix) | false (defect d): the starting bucket is not clamped
//
// Bounds: max' = min(max_bucket_numel, max_live), min' = min(min_bucket_numel, max').
// Cadence: reset_step number i (= iteration i) sets sample_step = (i % update_interval == 0);
// iteration k*update_interval is sampled and the update runs at the start of iteration
// k*update_interval + 1, before its first fetch.
// Update: per phase, ratio_p = sum(wait) / sum(interval) over the sampled iteration (phases
// with sum(interval) > 0); proposal = {invalid: no ratio or the trace was invalidated since the
// last update, value: max over phases}. Agreed (see agreement); if invalid: EMA := none, no
// resize. Else ema := r the first time, then alpha*r + (1-alpha)*ema;
//   ema > grow_threshold   -> new = max(old + 1, int(old * grow_factor))
//   ema < shrink_threshold -> new = int(old * shrink_factor)
//   otherwise unchanged (and not clamped); a resize is clamped into [min', max'].
// Invalidation clears the sampled iteration's sums and sets a flag that makes the next update
// (whenever it comes) skip and reset the EMA.
#include <algorithm>

#include "core/control/prefetch_controller.hpp"

namespace prefetchlab::core {
namespace {

class EmaThresholdController final : public PrefetchController {
 public:
  EmaThresholdController(const ControllerConfig& config, const ControllerContext& context)
      : PrefetchController(config, context), bounds_(capped_bounds(config, context.max_live_numel)) {
    if (config.clamp_initial) set_bucket(bounds_.clamp(bucket_numel()));
  }

  Agreement agreement() const override { return config().agreement; }

  std::optional<Proposal> begin_iteration(int iteration, TraceMode mode) override {
    std::optional<Proposal> proposal;
    if (sample_step_) {
      Proposal own;
      double ratio = -1;
      for (int p = 0; p < 2; ++p) {
        if (interval_sum_[p] > 0) {
          ratio = std::max(ratio, static_cast<double>(wait_sum_[p]) / static_cast<double>(interval_sum_[p]));
        }
      }
      own.invalid = ratio < 0 || invalidated_;
      own.values = {std::max(ratio, 0.0)};
      invalidated_ = false;
      proposal = own;
    }
    wait_sum_[0] = wait_sum_[1] = interval_sum_[0] = interval_sum_[1] = 0;
    sample_step_ = iteration % config().update_interval == 0;
    counting_ = sample_step_ && (mode == TraceMode::kComplete || config().sample_during_record);
    return proposal;
  }

  void apply(const Proposal& agreed) override {
    if (agreed.invalid || agreed.values.empty()) {
      ema_.reset();
      return;
    }
    const double r = agreed.values.front();
    ema_ = ema_ ? config().ema_alpha * r + (1 - config().ema_alpha) * *ema_ : r;
    const std::int64_t old = bucket_numel();
    if (*ema_ > config().grow_threshold) {
      const auto grown = static_cast<std::int64_t>(static_cast<double>(old) * config().grow_factor);
      set_bucket(bounds_.clamp(std::max(old + 1, grown)));
    } else if (*ema_ < config().shrink_threshold) {
      set_bucket(bounds_.clamp(static_cast<std::int64_t>(static_cast<double>(old) * config().shrink_factor)));
    }
  }

  bool wants_samples() const override { return counting_; }

  void on_trace_invalidated() override {
    invalidated_ = true;
    counting_ = false;  // DeepSpeed samples only in COMPLETE mode; the rest of the iteration is not
    wait_sum_[0] = wait_sum_[1] = interval_sum_[0] = interval_sum_[1] = 0;
  }

  std::optional<double> ema() const { return ema_; }

 private:
  std::optional<std::int64_t> on_sample(const TimingSample& sample) override {
    if (!counting_) return std::nullopt;
    const int p = sample.phase == Phase::kForward ? 0 : 1;
    wait_sum_[p] += wait_of(sample);
    interval_sum_[p] += interval_of(sample);
    return std::nullopt;
  }

  BucketBounds bounds_;
  bool sample_step_ = false;
  bool counting_ = false;
  bool invalidated_ = false;
  std::int64_t wait_sum_[2] = {0, 0};
  std::int64_t interval_sum_[2] = {0, 0};
  std::optional<double> ema_;
};

}  // namespace

std::unique_ptr<PrefetchController> make_ema_threshold_controller(const ControllerConfig& config,
                                                                  const ControllerContext& context) {
  return std::make_unique<EmaThresholdController>(config, context);
}

}  // namespace prefetchlab::core
