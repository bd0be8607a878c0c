#pragma once
// core::PrefetchController — the piece that adapts ZeRO-3's prefetch bucket while training
// runs, shared by the simulator (sim/) and the real backend. One instance per rank. It owns no
// clock, never sees the hardware profile and never communicates: an executor (the simulator's
// rank host program, the real backend, or `replay`) feeds it timing samples and trace events,
// performs the cross-rank agreement it asks for, and applies the bucket it reports to the
// rank's core::Coordinator. Policies (one file each): static_controller.cpp,
// pr8431_controller.cpp, ema_threshold_controller.cpp, pace_search_controller.cpp.
//
// ---------------------------------------------------------------------------------------------
// EXECUTOR CONTRACT (every executor makes exactly these calls, in this order, per rank; `replay`
// does the same, which is what makes a replay of a run's samples.csv reproduce its buckets.csv)
//
//  0. Construction: make_prefetch_controller(config, context). Then bind_columns(extra) with the
//     extra sample columns every TimingSample will carry, in order (the run's samples.csv
//     header after interval_ns). It throws MissingSampleColumn naming a column the policy needs
//     (required_columns()) that is absent. bucket_numel() now is the bucket of iteration 1.
//
//  For every iteration i = 1, 2, ... (one reset_step = one forward of one micro-batch):
//
//  1. At reset_step, after Coordinator::reset_step() (so `mode` is the trace mode iteration i
//     runs in: RECORD on 1 and after an invalidation, COMPLETE once a recording is frozen):
//       std::optional<Proposal> p = controller.begin_iteration(i, mode);
//     If p has a value (i is an update point; which iterations are is a function of i and of
//     values every rank agreed on, so ranks are never out of step), the executor combines the
//     proposals of all ranks with agree(controller.agreement(), proposals, rank) — for
//     kAllReduceMax a small MAX all-reduce of {invalid, values...}, for kBroadcastRank0 a
//     broadcast from rank 0, for kNone nothing — and calls controller.apply(agreed).
//     If p is empty the executor calls nothing (and launches no collective).
//  2. Coordinator::set_prefetch_bucket_numel(controller.bucket_numel()) before the first fetch
//     of i. That value is the row (i, rank) of buckets.csv.
//  3. controller.wants_samples() now says whether the samples of iteration i matter. If false
//     the executor delivers none (and need not synchronise on any device event for them).
//     If true it delivers every sample of iteration i, in fetch order, with observe(sample):
//       - decides_per_fetch() policies (deepspeed_pr8431): at the end of each fetch, as the
//         sample is taken; a returned value is the new bucket, set on the Coordinator at once
//         (effective from the next fetch's prefetch round);
//       - all others: at any time before step 1 of iteration i+1 (device events are read then,
//         typically after a host synchronisation on the last sample's end event); the return
//         value is always empty.
//     A sample is what samples.csv holds (TimingSample, see core/metrics/metrics.hpp): one per fetch
//     that has an earlier fetch of the same phase on this rank in this iteration; wait =
//     fetch start -> end, interval = previous same-phase fetch end -> this fetch's end; extra
//     columns as bound in step 0 (host_wait_ns / host_interval_ns: the same on host timers).
//     For decides_per_fetch() policies the device fields (wait_ns, interval_ns) may still be
//     unknown when the sample is delivered (events not yet signalled): they read host columns
//     only, so the executor may pass 0 there; replay passes the file's values, same result.
//     Samples are formed by core/control/fetch_samples.hpp (timing_samples), for samples.csv
//     and for the controller alike (same-phase previous fetch, same extras in the same order):
//     replay equality depends on it.
//  4. When Coordinator::fetch_sub_module reports FetchInfo::trace_invalidated, the executor calls
//     controller.on_trace_invalidated() during that iteration (sampled or not), after step 1.
//     Its order relative to that iteration's observe() calls does not change any result.
//
// Agreement payloads: ema_threshold proposes {invalid, ratio} (an all-reduce of 2 values every
// update_interval iterations); pace_search {invalid, pace_ns, peak_reserved_bytes} every
// iteration until its search ends (then never again); static and deepspeed_pr8431 never.
//
// Replay cannot see invalidations: it takes iteration 1 as RECORD and every later one as
// COMPLETE, so a run with a trace invalidation replays exactly only up to that iteration.
// ---------------------------------------------------------------------------------------------
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/control/controller_config.hpp"
#include "core/metrics/metrics.hpp"
#include "core/zero/trace_mode.hpp"

namespace prefetchlab::core {

// What the executor knows that a policy may use. Nothing about hardware.
struct ControllerContext {
  int rank = 0;
  int world_size = 1;
  // zero.stage3_prefetch_bucket_size as the coordinator starts with it (1 with
  // allgather_sequential: ZeroConfig::effective_prefetch_bucket_numel()).
  std::int64_t initial_bucket_numel = 50'000'000;
  // zero.stage3_max_live_parameters: caps the follow-up's bounds (6e70233's constructor:
  // max' = min(max, max_live)).
  std::int64_t max_live_numel = 1'000'000'000;
  // Bytes of one gathered parameter element (training.dtype): what a bucket element costs in
  // device memory, for policies that keep a memory budget.
  std::int64_t param_element_bytes = 2;
};

// One rank's view at an update point. Agreement combines these element by element.
struct Proposal {
  bool invalid = false;         // this rank has no usable measurement
  std::vector<double> values;   // policy-defined, same length on every rank
  friend bool operator==(const Proposal&, const Proposal&) = default;
};

// The agreed proposal rank `rank` applies: kAllReduceMax: invalid = any rank invalid, values =
// elementwise maximum over ranks; kBroadcastRank0: rank 0's; kNone: the rank's own.
// std::invalid_argument when rank is out of range or the lengths of values differ.
Proposal agree(Agreement agreement, std::span<const Proposal> proposals, int rank);

// A policy needs a sample column that the executor (or the replayed file) does not provide.
class MissingSampleColumn : public std::invalid_argument {
 public:
  explicit MissingSampleColumn(std::string column);
  const std::string& column() const { return column_; }

 private:
  std::string column_;
};

// Extra sample columns the executors know how to fill (TimingSample::extra names).
inline constexpr const char* kHostWaitColumn = "host_wait_ns";          // host timer, fetch wait
inline constexpr const char* kHostIntervalColumn = "host_interval_ns";  // host timer, interval
// The caching allocator's peak reserved bytes of this rank since this iteration's reset_step,
// read at the end of the fetch (torch.cuda.max_memory_reserved() after a peak reset at
// reset_step). Needed by pace_search with a memory budget.
inline constexpr const char* kPeakReservedColumn = "peak_reserved_bytes";

class PrefetchController {
 public:
  PrefetchController(const ControllerConfig& config, const ControllerContext& context);
  virtual ~PrefetchController() = default;
  PrefetchController(const PrefetchController&) = delete;
  PrefetchController& operator=(const PrefetchController&) = delete;

  const ControllerConfig& config() const { return config_; }
  const ControllerContext& context() const { return context_; }
  // The bucket to use from the next fetch on.
  std::int64_t bucket_numel() const { return bucket_; }
  // How the executor combines proposals (kNone for policies that never propose).
  virtual Agreement agreement() const { return Agreement::kNone; }
  // True when observe() may return a new bucket mid-iteration (contract step 3).
  virtual bool decides_per_fetch() const { return false; }

  // Extra sample columns this policy reads (host timers, memory), given its config.
  virtual std::vector<std::string> required_columns() const;
  // Contract step 0. Throws MissingSampleColumn for the first required column not in `extra`.
  void bind_columns(std::span<const std::string> extra);

  // Contract step 1. `iteration` counts reset_steps from 1 and must increase by one per call.
  virtual std::optional<Proposal> begin_iteration(int iteration, TraceMode mode) = 0;
  // Contract step 1, second half: only right after begin_iteration returned a proposal.
  virtual void apply(const Proposal& agreed) = 0;
  // Contract step 3.
  virtual bool wants_samples() const = 0;
  std::optional<std::int64_t> observe(const TimingSample& sample);
  // Contract step 4.
  virtual void on_trace_invalidated() {}

 protected:
  // The sample's wait and interval as `config().timing` selects them, and a bound extra column.
  std::int64_t wait_of(const TimingSample& sample) const;
  std::int64_t interval_of(const TimingSample& sample) const;
  std::int64_t column(const TimingSample& sample, int bound_index) const;
  int bound_index(const std::string& name) const;  // index into extra; -1 when not bound

  virtual std::optional<std::int64_t> on_sample(const TimingSample& sample) = 0;
  void set_bucket(std::int64_t numel) { bucket_ = numel; }

 private:
  ControllerConfig config_;
  ControllerContext context_;
  std::int64_t bucket_ = 0;
  std::vector<std::string> bound_;  // extra column names, in sample order
  int host_wait_index_ = -1;
  int host_interval_index_ = -1;
  bool bound_called_ = false;
};

std::unique_ptr<PrefetchController> make_prefetch_controller(const ControllerConfig& config,
                                                             const ControllerContext& context);

// One per policy file.
std::unique_ptr<PrefetchController> make_static_controller(const ControllerConfig&, const ControllerContext&);
std::unique_ptr<PrefetchController> make_pr8431_controller(const ControllerConfig&, const ControllerContext&);
std::unique_ptr<PrefetchController> make_ema_threshold_controller(const ControllerConfig&,
                                                                  const ControllerContext&);
std::unique_ptr<PrefetchController> make_pace_search_controller(const ControllerConfig&,
                                                                const ControllerContext&);

// The bound arithmetic of the follow-up's constructor (0z5a/DeepSpeed 6e70233): max' =
// min(max, max_live), min' = min(min, max'); clamp(x) into [min', max'].
struct BucketBounds {
  std::int64_t min = 0;
  std::int64_t max = 0;
  std::int64_t clamp(std::int64_t numel) const { return numel < min ? min : (numel > max ? max : numel); }
};
BucketBounds capped_bounds(const ControllerConfig& config, std::int64_t max_live_numel);

}  // namespace prefetchlab::core
