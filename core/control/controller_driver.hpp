#pragma once
// One rank's side of the controller contract (core/control/prefetch_controller.hpp), as both
// executors drive it — the simulator (sim/ranks/rank_process.cpp) and the real backend
// (gpu_backend/executor/rank_executor.cpp). At reset_step: step 3 for the previous iteration (a batch
// policy reads its samples after a host synchronisation, as the follow-up's update() does),
// step 1 (a proposal, agreed across ranks through a small collective), step 2 (the bucket).
// After each fetch: step 3 for a per-fetch policy (the host-timer sample; device events are not
// readable without a synchronisation, which the original PR never does) and step 4 (a trace
// invalidation, right after its fetch's sample). The executor synchronises and runs the
// collective; this decides when, and what the controller sees.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/control/controller_config.hpp"
#include "core/control/fetch_samples.hpp"
#include "core/control/prefetch_controller.hpp"
#include "core/zero/trace_mode.hpp"

namespace prefetchlab::core {

class ControllerDriver {
 public:
  // Makes the policy and binds the columns both executors measure (measured_sample_columns).
  ControllerDriver(const ControllerConfig& config, const ControllerContext& context);
  // Drives `controller` (columns bound the same way), made for `context`.
  ControllerDriver(std::unique_ptr<PrefetchController> controller, const ControllerContext& context);

  const PrefetchController& controller() const { return *controller_; }

  // --- reset_step of `iteration`, in this order ---
  // Step 3 for the previous iteration: true when its samples are due now. The executor then
  // synchronises on that iteration's last fetch end and hands over its fetches.
  bool previous_samples_due(int iteration) const;
  void deliver_previous(int iteration, std::span<const FetchTiming> previous_fetches);
  // Step 1: a proposal every rank must agree on (the executor combines them across ranks as
  // agreement() says, then calls apply_agreed), or nullopt: nothing proposed, or applied here
  // (a policy without agreement, or one rank).
  std::optional<Proposal> propose(int iteration, TraceMode mode);
  Agreement agreement() const { return controller_->agreement(); }
  void apply_agreed(const Proposal& agreed) { controller_->apply(agreed); }
  // Step 2: the bucket from this iteration's first fetch on; opens the iteration's samples.
  std::int64_t start_fetches();
  bool samples_wanted() const { return samples_wanted_; }

  // --- after each fetch ---
  // Whether after_fetch reads host timings (a per-fetch policy that wants samples): when false
  // the executor may pass none.
  bool reads_fetch_timings() const { return per_fetch_ && samples_wanted_; }
  // Fetch `fetch_index` of the iteration ended. `timings`: host timings ending with this fetch's,
  // holding the previous fetch of its phase (if any) before it. Returns a new bucket for the
  // coordinator, if the policy decided one.
  std::optional<std::int64_t> after_fetch(int iteration, std::size_t fetch_index,
                                          std::span<const FetchTiming> timings, bool trace_invalidated);

 private:
  std::unique_ptr<PrefetchController> controller_;
  int rank_ = 0;
  int world_size_ = 1;
  bool per_fetch_ = false;
  // The iteration since the last start_fetches (at reset_step, before it: the previous one's).
  bool samples_wanted_ = false;
  std::vector<std::size_t> invalidated_after_;  // fetch indices, delivered with the samples
};

}  // namespace prefetchlab::core
