#include "sim/ranks/rank_process.hpp"

#include "sim/cost/zero_step_costs.hpp"
#include "core/hardware/device_memory_budget.hpp"

#include "core/control/fetch_samples.hpp"
#include "core/metrics/exposed_comm.hpp"
#include "core/zero/model_states.hpp"
#include "core/zero/host_throttle.hpp"
#include "core/scenario/scenario_coordinator.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <variant>

namespace prefetchlab::sim {
namespace {

// The part `part_ns` of one host charge of `nominal_ns` that took `spent_ns`: host noise
// stretches a charge as a whole, so each term it covers stretches alike (the Python frames that
// split one charge, sim/trace/deepspeed_frames.hpp).
TimeNs share_of(TimeNs spent_ns, TimeNs part_ns, TimeNs nominal_ns) {
  return nominal_ns > 0 ? std::llround(static_cast<double>(part_ns) *
                                       (static_cast<double>(spent_ns) / static_cast<double>(nominal_ns)))
                        : 0;
}

// A fetch as core::FetchTiming (device times from the signalled events; 0 when `events` is
// null, for the host-timer-only per-fetch sample).
core::FetchTiming timing_of(const RankIteration::Fetch& fetch, const EventTable* events) {
  core::FetchTiming t;
  t.phase = fetch.phase == 0 ? core::Phase::kForward : core::Phase::kBackward;
  if (events) {
    t.device_start_ns = events->signaled_ns(fetch.start_event);
    t.device_end_ns = events->signaled_ns(fetch.end_event);
  }
  t.host_start_ns = fetch.host_start_ns;
  t.host_end_ns = fetch.host_end_ns;
  t.peak_reserved_bytes = fetch.peak_reserved_bytes;
  return t;
}

std::vector<core::FetchTiming> timings_of(const RankIteration& it, const EventTable* events) {
  std::vector<core::FetchTiming> timings;
  timings.reserve(it.fetches.size());
  for (const auto& fetch : it.fetches) timings.push_back(timing_of(fetch, events));
  return timings;
}

StallKind fetch_stall(core::Phase phase) {
  return phase == core::Phase::kForward ? StallKind::kFetchForward : StallKind::kFetchBackward;
}

}  // namespace

RankProcess::RankProcess(int rank, EventEngine& engine, CoroutineResumer& resumer,
                         Communicator& communicator, const SharedRankContext& shared,
                         EventHandler& iteration_done, std::int32_t iteration_done_base)
    : rank_(rank),
      engine_(engine),
      resumer_(resumer),
      communicator_(communicator),
      shared_(shared),
      iteration_done_(iteration_done),
      iteration_done_base_(iteration_done_base),
      events_(engine, resumer),
      compute_(engine, events_, *this, rank, StreamKind::kCompute),
      all_gather_stream_(engine, events_, *this, rank, StreamKind::kAllGather),
      reduce_scatter_stream_(engine, events_, *this, rank, StreamKind::kReduceScatter),
      nccl_(engine, events_, *this, rank, StreamKind::kNccl),
      coordinator_(shared.scenario->model, core::coordinator_config_for(*shared.scenario, shared.persistent)),
      controller_(shared.scenario->controller, core::controller_context(*shared.scenario, rank)),
      world_size_(shared.scenario->cluster.world_size()),
      dtype_bytes_(core::dtype_bytes(shared.scenario->training.dtype)),
      param_resident_bytes_(shared.scenario->model.params.size(), 0),
      program_(shared.scenario->model,
               core::CheckpointUnits{shared.checkpoint_unit, shared.inside_checkpoint_unit},
               shared.scenario->zero.reduce_bucket_numel, shared.scenario->training.grad_accum),
      compute_noise_(shared.scenario->noise.seed, "compute/rank" + std::to_string(rank)),
      host_noise_(shared.scenario->noise.seed, "host/rank" + std::to_string(rank)),
      timer_noise_(shared.scenario->noise.seed, "host_timer/rank" + std::to_string(rank)) {
  if (const auto slow = shared.scenario->noise.slow_ranks.find(rank); slow != shared.scenario->noise.slow_ranks.end()) {
    slow_factor_ = slow->second;
  }
  if (shared.shared_cores) {
    for (Stream* s : {&compute_, &all_gather_stream_, &reduce_scatter_stream_}) s->share_cores(shared.shared_cores);
  }
  param_block_.resize(shared.scenario->model.params.size());
  activation_block_.resize(shared.scenario->model.modules.size());
  // overlap_comm=false puts DeepSpeed's all-gather and reduce "streams" on the default stream
  // (DeepSpeed's parameter_offload.py and stage3.py).
  const bool overlap = shared.scenario->zero.overlap_comm;
  all_gather_ = overlap ? &all_gather_stream_ : &compute_;
  reduce_scatter_ = overlap ? &reduce_scatter_stream_ : &compute_;
  const Stream* const streams[3] = {&compute_, all_gather_, reduce_scatter_};
  // The caching allocator gets what CUDA reports less the context, NCCL's buffers and cuBLAS's
  // workspaces (core/hardware/device_memory_budget.hpp).
  const core::ClusterConfig& cluster = shared.scenario->cluster;
  const core::DeviceMemoryBudget budget = core::device_memory_budget(cluster.hardware, cluster.world_size(), cluster.nodes);
  memory_ = std::make_unique<RankMemory>(budget.cuda_total_bytes, budget.outside_allocator_bytes(),
                                         shared.scenario->memory.allocator, streams, rank,
                                         shared.scenario->output.memory_timeline &&
                                             (shared.timeline_rank_mask.empty() ||
                                              shared.timeline_rank_mask[static_cast<std::size_t>(rank)]));

}

std::optional<core::BlockHandle> RankProcess::allocate(std::int64_t bytes, const Stream& stream, int module,
                                                       const char* what, core::MemoryUse use) {
  auto block = memory_->allocate(bytes, stream.kind() == StreamKind::kCompute ? StreamKind::kCompute : stream.kind(),
                                 engine_.now_ns(), use);
  if (block) {
    track_memory_peaks();
    return block;
  }
  const core::OutOfMemory& oom = *memory_->oom();
  const std::string name = module < 0 ? std::string("(model states)")
                                      : shared_.scenario->model.modules[static_cast<std::size_t>(module)].display_name();
  out_of_memory_ = "out of memory on rank " + std::to_string(rank_) + " in iteration " +
                   std::to_string(current_ ? current_->iteration : 0) + ", module " +
                   name + ", allocating " + what + ": requested " +
                   std::to_string(oom.requested_bytes) + " bytes, allocated " + std::to_string(oom.allocated_bytes) +
                   ", reserved " + std::to_string(oom.reserved_bytes) + ", device capacity " +
                   std::to_string(oom.device_capacity_bytes);
  engine_.stop();
  return std::nullopt;
}

void RankProcess::track_memory_peaks() {
  if (!current_) return;
  current_->peak_allocated_bytes = std::max(current_->peak_allocated_bytes, memory_->allocated_bytes());
  current_->peak_reserved_bytes = std::max(current_->peak_reserved_bytes, memory_->reserved_bytes());
}

// ZeRO-3's resident model states, as core/zero/model_states.hpp lists them.
HostTask RankProcess::allocate_model_states() {
  const core::Scenario& scenario = *shared_.scenario;
  for (const core::ModelStateBuffer& state : core::device_model_states(
           scenario.zero, core::partition_numel(scenario.model, world_size_), dtype_bytes_)) {
    if (!allocate(state.bytes, compute_, -1, state.what, core::MemoryUse::kModelStates)) co_await Halt{};
  }
}

void RankProcess::forget_before_iteration(std::int32_t i) {
  RankIteration& it = iterations_[static_cast<std::size_t>(i - 1)];
  it.end_ns = events_.signaled_ns(it.iteration_end_event);  // the next iteration's start
  // A batch controller still has to read this iteration's samples at the next reset_step.
  if (it.samples_wanted && !controller_.controller().decides_per_fetch()) return;
  std::vector<RankIteration::Fetch>().swap(it.fetches);
  // The kept times of this iteration and before go: the world has read them all. (The events
  // themselves went as they were signalled.)
  events_.forget_kept_before(static_cast<std::size_t>(i) < iterations_.size()
                                 ? iterations_[static_cast<std::size_t>(i)].first_event
                                 : events_.next_id());
}

TimeNs RankProcess::noisy_host_ns(TimeNs host_ns) {
  const double jitter = shared_.scenario->noise.host_jitter;
  if (jitter == 0 || host_ns == 0) return host_ns;
  return std::max<TimeNs>(0, std::llround(static_cast<double>(host_ns) * (1.0 + jitter * host_noise_.normal())));
}

TimeNs RankProcess::noisy_compute_ns(TimeNs kernel_ns) {
  const double jitter = shared_.scenario->noise.compute_jitter;
  if ((jitter == 0 && slow_factor_ == 1.0) || kernel_ns == 0) return kernel_ns;
  const double factor = slow_factor_ * (jitter == 0 ? 1.0 : std::max(0.0, 1.0 + jitter * compute_noise_.normal()));
  return std::llround(static_cast<double>(kernel_ns) * factor);
}

TimeNs RankProcess::at_rate_ns(std::int64_t amount, double per_s) const {
  return static_cast<TimeNs>(std::llround(static_cast<double>(amount) / per_s * 1e9));
}

TimeNs RankProcess::host_timer_now() {
  const std::int64_t sigma = shared_.scenario->noise.host_timer_noise_ns;
  if (sigma == 0) return engine_.now_ns();
  // perf_counter is monotonic: noise moves readings, never backwards.
  last_timer_reading_ = std::max<TimeNs>(last_timer_reading_,
                                 engine_.now_ns() + std::llround(static_cast<double>(sigma) * timer_noise_.normal()));
  return last_timer_reading_;
}

// An expert's costs were built for the mean share (tokens x top_k / experts); its kernels and
// saved activations scale with the tokens it got (linearly: a simplification for the GEMM
// shape efficiency, which changes little between the mean and a few times it).
std::int64_t RankProcess::routed(int module, std::int64_t value) const {
  if (module_tokens_.empty()) return value;
  const std::int64_t tokens = module_tokens_[static_cast<std::size_t>(module)];
  if (tokens < 0) return value;
  const core::RouterSpec& r = shared_.routing->router();
  // The costs were built at this iteration's length: its mean share is of its own tokens.
  const double mean = static_cast<double>(shared_.routing->tokens_of(current_->iteration) * r.top_k) /
                      static_cast<double>(r.experts);
  return std::llround(static_cast<double>(value) * static_cast<double>(tokens) / mean);
}

const std::vector<TimeNs>& RankProcess::routed_kernel_ns(int module, const std::vector<TimeNs>& kernel_ns) {
  if (module_tokens_.empty() || module_tokens_[static_cast<std::size_t>(module)] < 0) return kernel_ns;
  routed_kernel_ns_.clear();
  for (const TimeNs ns : kernel_ns) routed_kernel_ns_.push_back(routed(module, ns));
  return routed_kernel_ns_;
}

HostTask RankProcess::host_sync_on_comm(std::int32_t event, TimeNs* idle_ns) {
  const TimeNs blocked_from = engine_.now_ns();
  co_await events_.host_wait(event);
  // The compute stream only gets work from this host. The markers core::metrics defines this by
  // (one recorded on compute at the block, one at the release) complete, if compute drained
  // before the release, at the later of the block and the drain and at the release; if it is
  // still busy, both when it drains: no idle time.
  if (compute_.idle()) {
    *idle_ns += core::compute_idle_between_markers_ns(std::max(blocked_from, compute_.last_done_ns()), engine_.now_ns());
  }
  add_frame(DeepSpeedFrame::kEventSynchronize, blocked_from, engine_.now_ns(), -1, 5);
}

std::size_t RankProcess::add_frame(DeepSpeedFrame frame, TimeNs start_ns, TimeNs end_ns, std::int64_t params, int depth) {
  if (!frames_on() || end_ns <= start_ns) return frames_.size();
  HostFrame f;
  f.start_ns = start_ns;
  f.duration_ns = end_ns - start_ns;
  f.iteration = current_ ? current_->iteration : 0;
  f.params = static_cast<std::int32_t>(params);
  f.frame = frame;
  f.depth = static_cast<std::uint8_t>(depth);
  frames_.push_back(f);
  return frames_.size() - 1;
}

void RankProcess::post_hook_frames(core::Phase phase, TimeNs start_ns, TimeNs spent_ns, TimeNs end_ns, TimeNs hook_ns,
                                   TimeNs release_ns, TimeNs after_ns, std::int64_t params, std::int64_t freed) {
  if (!frames_on()) return;
  const TimeNs nominal_ns = hook_ns + release_ns + after_ns;
  const auto at = [&](TimeNs offset_ns) { return start_ns + share_of(spent_ns - start_ns, offset_ns, nominal_ns); };
  const bool forward = phase == core::Phase::kForward;
  add_frame(forward ? DeepSpeedFrame::kPostForwardHook : DeepSpeedFrame::kPostBackwardHook, start_ns, end_ns, -1, 0);
  add_frame(forward ? DeepSpeedFrame::kPostForwardFunction : DeepSpeedFrame::kPostBackwardFunction, start_ns,
            at(hook_ns + release_ns), -1, 1);
  add_frame(DeepSpeedFrame::kRelease, at(hook_ns), at(hook_ns + release_ns), params, 2);
  // partition() of each freed parameter, at the end of the release.
  const TimeNs per_freed_ns = shared_.compute->host().release_ns(0, 1) - shared_.compute->host().release_ns(0, 0);
  for (std::int64_t i = 0; i < freed; ++i) {
    const TimeNs from = hook_ns + release_ns - (freed - i) * per_freed_ns;
    add_frame(DeepSpeedFrame::kPartitionParam, at(from), at(from + per_freed_ns), -1, 3);
  }
}

void RankProcess::host_span(std::int32_t label, TimeNs start_ns) {
  if (!shared_.trace->enabled() || engine_.now_ns() <= start_ns) return;
  TraceSpan span;
  span.start_ns = start_ns;
  span.duration_ns = engine_.now_ns() - start_ns;
  span.rank = rank_;
  span.label = label;
  span.iteration = current_ ? current_->iteration : 0;
  span.track = Track::kHost;
  span.kind = SpanKind::kHost;
  shared_.trace->add(span);
}

void RankProcess::launch_kernel(Stream& stream, TimeNs duration_ns, std::int32_t label) {
  StreamOp op;
  op.kind = OpKind::kKernel;
  op.duration_ns = duration_ns;
  op.label = label;
  op.iteration = current_->iteration;
  stream.push(op);
}

std::int32_t RankProcess::record(Stream& stream, EventHandler* notify, std::int64_t notify_tag) {
  return record_event(stream, notify, notify_tag, TimeKept::kNo);
}

std::int32_t RankProcess::record_kept(Stream& stream, EventHandler* notify, std::int64_t notify_tag) {
  return record_event(stream, notify, notify_tag, TimeKept::kYes);
}

std::int32_t RankProcess::record_event(Stream& stream, EventHandler* notify, std::int64_t notify_tag, TimeKept kept) {
  const std::int32_t event = events_.create();
  events_.at(event).notify = notify;
  events_.at(event).notify_tag = notify_tag;
  // Before the push: an idle stream signals (and forgets) the event at once.
  if (kept == TimeKept::kYes) events_.keep_time(event);
  StreamOp op;
  op.kind = OpKind::kRecord;
  op.event = event;
  op.iteration = current_->iteration;
  stream.push(op);
  return event;
}

void RankProcess::wait(Stream& stream, std::int32_t event, StallKind stall) {
  StreamOp op;
  op.kind = OpKind::kWait;
  op.event = event;
  op.stall = stall;
  op.iteration = current_->iteration;
  op.label = shared_.label_stall;
  stream.push(op);
}

// A collective as ProcessGroupNCCL issues it: the NCCL stream first waits for the issuing
// stream's work so far (the copy-in), runs the collective in communicator order, then marks
// completion with an event the user stream can wait on.
std::int64_t RankProcess::issue_collective(Stream& user_stream, const CollectiveCall& call,
                                           std::int32_t& done_event) {
  const std::int32_t ready = record(user_stream);
  wait(nccl_, ready);
  const std::int64_t seq = communicator_.issue(rank_, call);
  StreamOp op;
  op.kind = OpKind::kCollective;
  op.collective = static_cast<std::int32_t>(seq);
  op.iteration = current_->iteration;
  nccl_.push(op);
  done_event = record(nccl_);
  return seq;
}

// The end of a fetch on the host: contract steps 3 (per-fetch policies) and 4, as
// core::ControllerDriver says.
void RankProcess::after_fetch(const core::FetchInfo& info) {
  const std::size_t index = current_->fetches.size() - 1;
  if (info.trace_invalidated) ++current_->trace_invalidations;
  // A per-fetch policy reads only this fetch and its previous same-phase one: no copy of the
  // whole iteration.
  core::FetchTiming timings[2];
  std::span<const core::FetchTiming> read;
  if (controller_.reads_fetch_timings()) {
    const RankIteration::Fetch& fetch = current_->fetches[index];
    timings[1] = timing_of(fetch, nullptr);
    read = std::span<const core::FetchTiming>(timings + 1, 1);
    for (std::size_t f = index; f-- > 0;) {
      if (current_->fetches[f].phase != fetch.phase) continue;
      timings[0] = timing_of(current_->fetches[f], nullptr);
      read = std::span<const core::FetchTiming>(timings, 2);
      break;
    }
  }
  if (const auto bucket = controller_.after_fetch(current_->iteration, index, read, info.trace_invalidated)) {
    coordinator_.set_prefetch_bucket_numel(*bucket);
  }
}

void RankProcess::add_gathered_bytes(std::int64_t bytes) {
  gathered_bytes_ += bytes;
  current_->peak_gathered_bytes = std::max(current_->peak_gathered_bytes, gathered_bytes_);
}

void RankProcess::take_fetch_end_sample(Context& context) {
  if (!context.fetch) return;
  context.fetch->end_event = record_kept(compute_);
  context.fetch->host_end_ns = host_timer_now();
  context.fetch->peak_reserved_bytes = current_->peak_reserved_bytes;
  context.fetch = nullptr;
}

HostTask RankProcess::run() {
  co_await allocate_model_states();
  const auto& training = shared_.scenario->training;
  for (std::int32_t i = 1; i <= static_cast<std::int32_t>(training.iterations); ++i) {
    co_await run_iteration(i);
  }
}

HostTask RankProcess::run_iteration(std::int32_t iteration) {
  iterations_.emplace_back();
  current_ = &iterations_.back();
  current_->first_event = events_.next_id();
  current_->peak_allocated_bytes = memory_->allocated_bytes();
  current_->peak_reserved_bytes = memory_->reserved_bytes();
  current_->iteration = iteration;
  costs_ = shared_.iteration_costs[static_cast<std::size_t>(iteration - 1)];
  if (shared_.routing) current_->dropped_tokens = shared_.routing->route(iteration, rank_, module_tokens_);
  current_->optimizer_step = program_.optimizer_step(iteration);
  current_->peak_gathered_bytes = gathered_bytes_;
  current_->fetches.reserve(fetches_per_iteration_);  // iterations fetch alike: no regrowth
  iteration_host_start_ns_ = engine_.now_ns();
  for (const core::ProgramStep& step : program_.iteration(iteration, skipped_modules())) co_await run_step(step);
}

// Data-dependent control flow (the scenario's divergence) and MoE routing: the modules that do
// not run on this rank this iteration (a routed expert with no tokens does not run:
// core/scenario/expert_routing.hpp). Empty when every module runs.
const std::vector<char>& RankProcess::skipped_modules() {
  skipped_modules_.clear();
  const auto diverged = shared_.skipped.find({current_->iteration, rank_});
  if (module_tokens_.empty() && diverged == shared_.skipped.end()) return skipped_modules_;
  const std::size_t modules = shared_.scenario->model.modules.size();
  skipped_modules_.assign(modules, 0);
  for (std::size_t m = 0; m < modules; ++m) {
    skipped_modules_[m] = (!module_tokens_.empty() && module_tokens_[m] == 0) ||
                          (diverged != shared_.skipped.end() && diverged->second[m]);
  }
  return skipped_modules_;
}

// One step of core::RankProgram on this rank's streams, memory and host time.
HostTask RankProcess::run_step(const core::ProgramStep& step) {
  switch (step.kind) {
    case core::StepKind::kResetStep: {
      // Root forward pre-hook: reset_step (parameter_offload.py) — the only place it runs.
      Context context;
      co_await execute(coordinator_.reset_step(), context);
      current_->trace_mode = coordinator_.trace_mode();
      co_await update_controller(current_->iteration);
      current_->bucket_numel = coordinator_.prefetch_bucket_numel();
      break;
    }
    case core::StepKind::kFetch:
      co_await fetch_hook(step.module, step.phase);
      break;
    case core::StepKind::kOwnWork: {
      // The host launches the module's kernels one by one; the compute stream runs them as one
      // span (ComputeModel::module_forward_ns), which starts after the first launch.
      const auto m = static_cast<std::size_t>(step.module);
      const bool forward = step.phase == core::Phase::kForward;
      co_await launch_own_work(
          routed_kernel_ns(step.module, forward ? costs_->forward_kernel_ns[m] : costs_->backward_kernel_ns[m]),
          forward ? shared_.compute->host().forward_op_host_ns() : shared_.compute->host().backward_op_host_ns(),
          forward ? shared_.forward_label[m] : shared_.backward_label[m]);
      break;
    }
    case core::StepKind::kKeepActivations: {
      // What the module saves for backward stays allocated until its backward ran.
      const auto m = static_cast<std::size_t>(step.module);
      const std::int64_t saved = step.kept == core::ActivationsKept::kAll ? routed(step.module, costs_->activation_bytes[m])
                                                                          : costs_->checkpoint_input_bytes;
      if (saved > 0 && !activation_block_[m]) {
        activation_block_[m] = allocate(saved, compute_, step.module, "activations", core::MemoryUse::kActivations);
        if (!activation_block_[m]) co_await Halt{};
      }
      break;
    }
    case core::StepKind::kDropCheckpointInput:
    case core::StepKind::kDropActivations:
      if (auto& kept = activation_block_[static_cast<std::size_t>(step.module)]) {
        memory_->free(*kept, engine_.now_ns());  // compute stream: reusable by later kernels at once
        kept.reset();
      }
      break;
    case core::StepKind::kReduceWaitsForCompute:
      wait(*reduce_scatter_, record(compute_));
      break;
    case core::StepKind::kGradientReady:
      co_await gradient_ready(step);
      break;
    case core::StepKind::kFlushBucket:
      co_await flush_reduce_bucket(step.module, program_.flush_params(step));
      break;
    case core::StepKind::kRelease:
      co_await release_hook(step.module, step.phase);
      break;
    case core::StepKind::kForwardEnd:
      current_->forward_end_event = record_kept(compute_);
      break;
    case core::StepKind::kBackwardComputeEnd:
      current_->backward_compute_end_event = record_kept(compute_);
      break;
    case core::StepKind::kEndOfBackward: {
      // The host synchronises the reduce stream (stage3.py).
      const std::int32_t reduced = record(*reduce_scatter_);
      current_->reduce_sync_start_ns = engine_.now_ns();
      co_await host_sync(reduced);
      current_->reduce_scatter_done_ns = engine_.now_ns();
      current_->backward_end_event = record_kept(compute_);
      break;
    }
    case core::StepKind::kOptimizerStep: {
      Context optimizer_context;
      co_await execute(coordinator_.optimizer_step(), optimizer_context);
      break;
    }
    case core::StepKind::kIterationEnd:
      current_->iteration_end_event =
          record_kept(compute_, &iteration_done_, iteration_done_base_ + current_->iteration);
      fetches_per_iteration_ = current_->fetches.size();
      host_span(shared_.label_iteration, iteration_host_start_ns_);
      break;
  }
}

void AgreementBoard::post(std::int64_t round, int rank, core::Proposal proposal) {
  const std::lock_guard lock(mutex_);
  auto& proposals = rounds_[round];
  if (proposals.empty()) proposals.resize(static_cast<std::size_t>(ranks_));
  proposals[static_cast<std::size_t>(rank)] = std::move(proposal);
}

core::Proposal AgreementBoard::agreed(std::int64_t round, core::Agreement agreement, int rank) const {
  const std::lock_guard lock(mutex_);
  return core::agree(agreement, rounds_.at(round), rank);
}

std::vector<core::TimingSample> RankProcess::samples_of(std::int32_t i) const {
  return core::timing_samples(i, rank_, timings_of(iteration(i), &events_));
}

// Contract of core/control/prefetch_controller.hpp, steps 1-3, at reset_step
// (core::ControllerDriver).
HostTask RankProcess::update_controller(std::int32_t iteration) {
  // Step 3 for the previous iteration (batch policies): its samples, read from device events
  // after a host synchronisation on the last one, as the follow-up's update() does.
  if (controller_.previous_samples_due(iteration)) {
    const RankIteration& previous = iterations_[static_cast<std::size_t>(iteration - 2)];
    if (!previous.fetches.empty() && previous.fetches.back().end_event >= 0) {
      co_await host_sync(previous.fetches.back().end_event);
    }
    controller_.deliver_previous(iteration, timings_of(previous, &events_));
  }
  // Step 1: an update point proposes; ranks agree through a small collective.
  if (std::optional<core::Proposal> proposal = controller_.propose(iteration, current_->trace_mode)) {
    const std::int64_t round = agreement_rounds_++;
    const auto values = static_cast<std::int64_t>(proposal->values.size());
    shared_.agreement->post(round, rank_, std::move(*proposal));
    CollectiveCall call;
    call.kind = CollectiveKind::kAllReduce;  // a broadcast costs about the same at 8 bytes a value
    call.bytes = 8 * (1 + values);
    call.iteration = iteration;
    call.label = shared_.kind_label[5];
    std::int32_t done = -1;
    issue_collective(compute_, call, done);
    co_await host_sync_on_comm(done, &current_->host_wait_idle_ns);  // .item() on the result
    controller_.apply_agreed(shared_.agreement->agreed(round, controller_.agreement(), rank_));
  }
  // Step 2.
  coordinator_.set_prefetch_bucket_numel(controller_.start_fetches());
  current_->samples_wanted = controller_.samples_wanted();
}

// A module's fetch hook (pre_sub_module_*_function + fetch_sub_module): the sample window opens
// at the top of the fetch and closes once compute waits for the all-gather stream (as the
// follow-up 6e70233 samples). The host costs fall as DeepSpeed's code runs them
// (sim/cost/host_cost_model.hpp): the hook's prologue before `start`; the fetch's bookkeeping, an
// on-demand gather round and the wait loop between `start` and `end`; a prefetch round after it.
HostTask RankProcess::fetch_hook(int module, core::Phase phase) {
  const HostCostModel& host = shared_.compute->host();
  const TimeNs hook_start = engine_.now_ns();
  co_await spend(phase == core::Phase::kForward ? host.pre_forward_hook_ns() : host.pre_backward_hook_ns());
  const TimeNs fetch_start = engine_.now_ns();
  current_->fetches.push_back({static_cast<std::uint8_t>(phase), record_kept(compute_), -1, host_timer_now(), 0});
  Context context{phase, module, &current_->fetches.back()};
  core::FetchPlan fetch = coordinator_.fetch_sub_module(module, phase);
  const core::FetchInfo& info = fetch.info;
  co_await spend(host.fetch_bookkeeping_ns(info.on_demand.params + info.in_flight.params + info.available.params));
  co_await execute(fetch.plan, context);
  take_fetch_end_sample(context);
  after_fetch(fetch.info);
  host_span(shared_.label_hook_fetch, hook_start);
  if (frames_on()) {
    const bool forward = phase == core::Phase::kForward;
    const TimeNs end = engine_.now_ns();
    add_frame(forward ? DeepSpeedFrame::kPreForwardHook : DeepSpeedFrame::kPreBackwardHook, hook_start, end, -1, 0);
    add_frame(forward ? DeepSpeedFrame::kPreForwardFunction : DeepSpeedFrame::kPreBackwardFunction, hook_start, end, -1, 1);
    add_frame(DeepSpeedFrame::kFetch, fetch_start, end, info.on_demand.params + info.in_flight.params + info.available.params, 2);
  }
}

HostTask RankProcess::launch_own_work(const std::vector<TimeNs>& kernel_ns, TimeNs launch_ns, std::int32_t label) {
  const auto kernels = static_cast<TimeNs>(kernel_ns.size());
  if (kernels == 0) {
    launch_kernel(compute_, 0, label);  // a container's span in the trace; nothing to issue
    co_return;
  }
  co_await spend(launch_ns);
  const TimeNs issue_ns = (kernels - 1) * launch_ns;
  const TimeNs backlog_ns = issue_ns > 0 ? compute_.backlog_ns(issue_ns) : 0;
  launch_kernel(compute_, noisy_compute_ns(shared_.compute->stream_ns(kernel_ns, launch_ns, backlog_ns)), label);
  if (issue_ns > 0) co_await spend(issue_ns);
}

// Post-forward hooks: post_sub_module_forward_function with its release_sub_module, and the
// autograd Functions that will fire this module's backward hooks (set up on its inputs and
// outputs); all between this fetch's end and the next fetch's start, so charged as one. The
// post-backward hook: post_sub_module_backward_function with its release.
HostTask RankProcess::release_hook(int module, core::Phase phase) {
  const HostCostModel& host = shared_.compute->host();
  const auto& spec = shared_.scenario->model.modules[static_cast<std::size_t>(module)];
  const bool forward = phase == core::Phase::kForward;
  const TimeNs release_start = engine_.now_ns();
  const core::Plan release_plan = coordinator_.release_sub_module(module, phase);
  const TimeNs release_ns = release_host_ns(module, release_plan);
  const TimeNs hook_ns = forward ? host.post_forward_hook_ns() : host.post_backward_hook_ns();
  const TimeNs after_ns = forward ? host.backward_hook_setup_ns() : 0;
  co_await spend(hook_ns + release_ns + after_ns);
  const TimeNs spent = engine_.now_ns();
  Context release_context{phase, module, nullptr};
  co_await execute(release_plan, release_context);
  host_span(shared_.label_hook_release, release_start);
  post_hook_frames(phase, release_start, spent, engine_.now_ns(), hook_ns, release_ns, after_ns,
                   static_cast<std::int64_t>(spec.param_ids.size()), freed_params(release_plan));
}

// release_sub_module's host cost: per call, per parameter of the module, per parameter the plan
// partitions.
TimeNs RankProcess::release_host_ns(int module, const core::Plan& plan) const {
  const auto params = static_cast<std::int64_t>(
      shared_.scenario->model.modules[static_cast<std::size_t>(module)].param_ids.size());
  return shared_.compute->host().release_ns(params, freed_params(plan));
}

std::int64_t RankProcess::freed_params(const core::Plan& plan) {
  std::int64_t freed = 0;
  for (const core::PlanAction& action : plan.actions) {
    if (const auto* r = std::get_if<core::Release>(&action)) freed += static_cast<std::int64_t>(r->param_ids.size());
  }
  return freed;
}

// A parameter's gradient is final (core::RankProgram's per-parameter grad hook): produced by
// its module's backward on the compute stream, then copied into the contiguous IPG bucket on the
// reduce stream, or reduced from where it lies.
HostTask RankProcess::gradient_ready(const core::ProgramStep& step) {
  const auto grad =
      allocate(step.numel * dtype_bytes_, compute_, step.module, "a gradient", core::MemoryUse::kGradients);
  if (!grad) co_await Halt{};
  if (shared_.scenario->zero.contiguous_gradients) {
    launch_kernel(*reduce_scatter_, shared_.compute->copy_ns(step.numel * dtype_bytes_), shared_.label_bucket_copy);
    // Copied into the contiguous bucket: free once the reduce stream has read it.
    memory_->free_after(*grad, *reduce_scatter_, engine_.now_ns());
  } else {
    grads_in_bucket_.push_back(*grad);  // reduced from where it lies, freed after the flush
  }
}

HostTask RankProcess::flush_reduce_bucket(int module, std::span<const int> params) {
  const core::Scenario& scenario = *shared_.scenario;
  const TimeNs flush_start = engine_.now_ns();
  const auto bucket_params = static_cast<std::int64_t>(params.size());
  // Host throttle identical to the fetch path (stage3.py, max_param_reduce_events).
  if (const auto oldest = core::event_to_synchronize(reduce_events_, core::kMaxParamReduceEvents,
                                                     [&](std::int32_t e) { return events_.signaled(e); })) {
    co_await host_sync_on_comm(*oldest, &current_->host_wait_idle_ns);
    reduce_events_.pop_front();
  }
  // DeepSpeed's reduce path: one collective call, and its per-parameter slicing and partition
  // bookkeeping.
  co_await spend(shared_.compute->host().reduce_scatter_ns(bucket_params));
  std::int64_t padded_numel = 0;
  std::int64_t numel = 0;
  for (const int p : params) {
    const std::int64_t n = scenario.model.params[static_cast<std::size_t>(p)].numel;
    numel += n;
    padded_numel += (n + world_size_ - 1) / world_size_ * world_size_;
  }
  const std::int64_t bytes = padded_numel * dtype_bytes_;
  // reduce_scatter_coalesced interleaves the chunks into one flat buffer (skipped for a single
  // divisible tensor), divides it by the world size (an in-place pass over it), runs one
  // reduce_scatter_tensor in place (this rank's output is its own chunk of the buffer), then copies
  // this rank's partition out (coalesced_collectives.py). The buffer is torch.cat's new tensor on
  // the reduce stream, held until the partition is copied out; DeepSpeed's skip of the single
  // divisible tensor is there "to avoid a memory allocation". The padding pieces (torch.empty of
  // less than world-size elements each) are not modelled.
  std::optional<core::BlockHandle> flat;
  if (!(params.size() == 1 && padded_numel == numel)) {
    flat = allocate(bytes, *reduce_scatter_, module, "a reduce-scatter bucket", core::MemoryUse::kGradients);
    if (!flat) co_await Halt{};
    launch_kernel(*reduce_scatter_, shared_.compute->copy_ns(bytes), shared_.label_bucket_copy);
  }
  launch_kernel(*reduce_scatter_, shared_.compute->copy_ns(bytes), shared_.label_gradient_divide);
  if (world_size_ > 1) {
    CollectiveCall call;
    call.kind = CollectiveKind::kReduceScatter;
    call.bytes = bytes;
    call.numel = numel;
    call.iteration = current_->iteration;
    call.label = shared_.kind_label[3];
    call.phase = 1;
    if (shared_.trace->records_rank(rank_)) call.param_ids.assign(params.begin(), params.end());
    std::int32_t done = -1;
    issue_collective(*reduce_scatter_, call, done);
    wait(*reduce_scatter_, done);
    ++current_->reduce_scatter_count;
  }
  // The reduced partition goes to the gradient partition buffer — in host memory with
  // zero.offload_optimizer (copied down over the host link).
  if (scenario.zero.offload_optimizer.device != core::OffloadDevice::kNone) {
    launch_kernel(*reduce_scatter_, at_rate_ns(bytes / world_size_, shared_.device_to_host_bytes_per_s),
                  shared_.label_host_copy);
  } else {
    launch_kernel(*reduce_scatter_, shared_.compute->copy_ns(bytes / world_size_), shared_.label_partition_copy);
  }
  reduce_events_.push_back(record(*reduce_scatter_));
  // The host's cost of launching the interleave copy, the divide and the partition copy (the
  // reduce-scatter's launch was charged above); the flat buffer is dropped after them.
  const TimeNs launches_start = engine_.now_ns();
  co_await spend((flat ? 3 : 2) * shared_.compute->host().kernel_launch_ns());
  add_frame(DeepSpeedFrame::kKernelLaunch, launches_start, engine_.now_ns(), -1, 5);
  add_frame(DeepSpeedFrame::kReduceIpgGrads, flush_start, engine_.now_ns(), bucket_params, 0);
  // The reduce stream waited for the reduce-scatter, so its current point covers the NCCL use.
  if (flat) memory_->free_after(*flat, *reduce_scatter_, engine_.now_ns());
  for (const auto grad : grads_in_bucket_) memory_->free_after(grad, *reduce_scatter_, engine_.now_ns());
  grads_in_bucket_.clear();
}

HostTask RankProcess::execute(const core::Plan& plan, Context& context) {
  const core::Scenario& scenario = *shared_.scenario;
  const HostCostModel& host = shared_.compute->host();
  // A fetch issues at most one __all_gather_params round on demand and one as a prefetch; each
  // call of all_gather_coalesced is one handle (its dtype groups are collectives of that call).
  bool on_demand_round = false;
  bool prefetch_round = false;
  // The rounds' __all_gather_params frames (frames_on()): index in frames_, or npos.
  std::size_t on_demand_round_frame = static_cast<std::size_t>(-1);
  std::size_t prefetch_round_frame = static_cast<std::size_t>(-1);
  for (const core::PlanAction& action : plan.actions) {
    if (const auto* gather = std::get_if<core::Gather>(&action)) {
      TimeNs issue_ns = 0;  // the round's bookkeeping, if this gather opens the round
      bool& round = gather->kind == core::GatherKind::kPrefetch ? prefetch_round : on_demand_round;
      std::size_t& round_frame = gather->kind == core::GatherKind::kPrefetch ? prefetch_round_frame : on_demand_round_frame;
      const TimeNs spend_start = engine_.now_ns();
      // The round's frame runs from its first gather's issue to its last one's.
      const auto extend_round = [&] {
        if (round_frame < frames_.size()) frames_[round_frame].duration_ns = engine_.now_ns() - frames_[round_frame].start_ns;
      };
      if (gather->kind != core::GatherKind::kPersistentRegather && !round) {
        round = true;
        issue_ns = host.fetch_gather_round_ns();
        round_frame = frames_on() ? add_frame(DeepSpeedFrame::kGatherRound, spend_start, spend_start + 1, -1, 3)
                                  : static_cast<std::size_t>(-1);
      }
      auto& memory = handle_memory_[gather->handle_id];
      const bool new_call = !memory.alive;
      memory.alive = true;
      memory.params.insert(memory.params.end(), gather->param_ids.begin(), gather->param_ids.end());
      ++current_->all_gather_count;
      current_->gathered_numel += gather->numel;
      if (!gather->collective) {  // world size 1: a no-gather handle, no collective
        co_await spend(issue_ns);
        extend_round();
        if (scenario.zero.offload_param.device != core::OffloadDevice::kNone) {
          co_await copy_up_without_gather(*gather, context.module);
        }
        continue;
      }
      const std::int64_t flat_bytes = gather->padded_numel * dtype_bytes_;
      memory.collective = true;
      memory.flat_bytes += flat_bytes;
      add_gathered_bytes(flat_bytes);  // allocated at issue time, on the all-gather stream
      // One flat buffer per handle in the allocator (a handle's dtype groups are one here).
      if (!memory.flat_block) {
        memory.flat_block = allocate(flat_bytes, *all_gather_, context.module, "a gathered parameter buffer",
                                             core::MemoryUse::kGatheredParams);
        if (!memory.flat_block) co_await Halt{};
      }
      // The all_gather_coalesced call (the persistent re-gather's per-parameter bookkeeping is
      // part of the optimizer step's host cost), then the copy-in's launch.
      const auto gathered_params = static_cast<std::int64_t>(gather->param_ids.size());
      TimeNs call_ns = gather->kind == core::GatherKind::kPersistentRegather
                           ? 0
                           : gathered_params * host.allgather_per_param_ns();
      if (new_call) call_ns += host.allgather_call_ns();
      co_await spend(issue_ns + call_ns + host.kernel_launch_ns());
      if (frames_on() && gather->kind != core::GatherKind::kPersistentRegather) {
        // all_gather_coalesced: after the round's bookkeeping, its call and its copy-in's launch.
        const TimeNs nominal_ns = issue_ns + call_ns + host.kernel_launch_ns();
        const TimeNs spent_ns = engine_.now_ns() - spend_start;
        const TimeNs issue_part = share_of(spent_ns, issue_ns, nominal_ns);
        const TimeNs launch_part = share_of(spent_ns, host.kernel_launch_ns(), nominal_ns);
        add_frame(DeepSpeedFrame::kAllGatherCoalesced, spend_start + issue_part, engine_.now_ns(), gathered_params, 4);
        add_frame(DeepSpeedFrame::kKernelLaunch, engine_.now_ns() - launch_part, engine_.now_ns(), -1, 5);
        extend_round();
      }
      // zero.offload_param: the shards live in pinned host memory and cross the host link first.
      if (scenario.zero.offload_param.device != core::OffloadDevice::kNone) {
        launch_kernel(*all_gather_, at_rate_ns(flat_bytes / world_size_, shared_.host_to_device_bytes_per_s),
                      shared_.label_host_copy);
      }
      // Copy-in: this rank's shards into its slot of the flat buffer, on the all-gather stream.
      launch_kernel(*all_gather_, shared_.compute->copy_ns(flat_bytes / world_size_), shared_.label_copy_in);
      CollectiveCall call;
      call.kind = CollectiveKind::kAllGather;
      call.bytes = flat_bytes;
      call.numel = gather->numel;
      call.iteration = current_->iteration;
      call.label = shared_.kind_label[static_cast<int>(gather->kind)];
      call.issued_by = context.module;
      call.phase = static_cast<std::int32_t>(context.phase);
      if (shared_.trace->records_rank(rank_)) call.param_ids = gather->param_ids;
      std::int32_t done = -1;
      issue_collective(*all_gather_, call, done);
      gather_done_event_[gather->gather_id] = done;
    } else if (const auto* w = std::get_if<core::Wait>(&action)) {
      if (w->context == core::WaitContext::kFetch) {
        // The wait loop's host work for this in-flight parameter (the wait's blocking apart).
        const TimeNs wait_start = engine_.now_ns();
        co_await spend(host.fetch_per_inflight_param_ns());
        add_frame(DeepSpeedFrame::kHandleWait, wait_start, engine_.now_ns(), -1, 3);
        if (const auto oldest = core::event_to_synchronize(ongoing_fetch_events_, core::kMaxOngoingFetchEvents,
                                                           [&](std::int32_t e) { return events_.signaled(e); })) {
          co_await host_sync_on_comm(*oldest, &current_->stall_ns[static_cast<int>(context.phase)]);
          ongoing_fetch_events_.pop_front();
        }
      }
      // Fetch waits run under the all-gather stream; drains on the current (compute) stream.
      Stream& stream = w->context == core::WaitContext::kDrain ? compute_ : *all_gather_;
      HandleMemory finished_handle;  // what a dropped (finished) handle reads as: nothing alive
      HandleMemory& handle = handle_memory_.dropped(w->handle_id) ? finished_handle : handle_memory_[w->handle_id];
      if (w->first_on_handle && handle.alive && handle.collective) {
        std::int32_t last_done = -1;
        for (const std::int64_t id : w->gather_ids) {
          if (gather_done_event_.dropped(id) || gather_done_event_[id] < 0) continue;
          wait(stream, gather_done_event_[id]);
          last_done = gather_done_event_[id];
          gather_done_event_[id] = -1;
        }
        gather_done_event_.drop_finished([](std::int32_t event) { return event < 0; });
        // Materialising a coalesced handle copies each parameter out of the flat buffer (≈2x the
        // bucket until the flat buffer goes, partition_parameters.py); a single parameter is a view
        // of its buffer.
        const bool coalesced = handle.params.size() > 1;
        for (const int p : handle.params) {
          const std::int64_t numel = scenario.model.params[static_cast<std::size_t>(p)].numel;
          param_resident_bytes_[static_cast<std::size_t>(p)] =
              coalesced ? numel * dtype_bytes_ : handle.flat_bytes;
          if (coalesced) {
            add_gathered_bytes(numel * dtype_bytes_);
            param_block_[static_cast<std::size_t>(p)] =
                allocate(numel * dtype_bytes_, stream, context.module, "a parameter copied out of its bucket",
                         core::MemoryUse::kGatheredParams);
            if (!param_block_[static_cast<std::size_t>(p)]) co_await Halt{};
          } else {
            param_block_[static_cast<std::size_t>(p)] = handle.flat_block;  // the buffer is the parameter
            handle.flat_block.reset();
          }
        }
        if (coalesced) launch_kernel(stream, shared_.compute->copy_ns(handle.flat_bytes), shared_.label_copy_out);
        if (w->context == core::WaitContext::kBlocking && last_done >= 0) {
          co_await host_sync_on_comm(last_done, &current_->host_wait_idle_ns);
        }
      } else if (w->first_on_handle && handle.alive) {
        co_await wait_without_gather(stream, w->context, context.phase);
      }
      if (w->context == core::WaitContext::kFetch) ongoing_fetch_events_.push_back(record(*all_gather_));
      if (w->last_on_handle && handle.alive) {
        // The flat buffer of a coalesced handle is dropped once no registry entry needs it; its
        // views were recorded on the all-gather stream, so it is reusable there at once.
        if (handle.params.size() > 1) gathered_bytes_ -= handle.flat_bytes;
        if (handle.flat_block) memory_->free(*handle.flat_block, engine_.now_ns());
        handle = HandleMemory{};
        handle_memory_.drop_finished(
            [](const HandleMemory& h) { return !h.alive && !h.flat_block && h.params.empty(); });
      }
    } else if (const auto* release = std::get_if<core::Release>(&action)) {
      for (const int p : release->param_ids) {
        gathered_bytes_ -= param_resident_bytes_[static_cast<std::size_t>(p)];
        param_resident_bytes_[static_cast<std::size_t>(p)] = 0;
        // free_param: recordStream on the compute stream that used it, then drop it.
        if (auto& block = param_block_[static_cast<std::size_t>(p)]) {
          memory_->free_after(*block, compute_, engine_.now_ns());
          block.reset();
        }
      }
    } else if (std::holds_alternative<core::ComputeWaitsForAllGather>(action)) {
      if (all_gather_ != &compute_) {
        // After iteration 1, a fetch outside COMPLETE mode is one the lost trace left unprefetched.
        const bool untraced = current_->iteration > 1 && coordinator_.trace_mode() != core::TraceMode::kComplete;
        const StallKind stall = fetch_stall(context.phase);
        wait(compute_, record(*all_gather_),
             !untraced                             ? stall
             : stall == StallKind::kFetchForward ? StallKind::kFetchForwardUntraced
                                                 : StallKind::kFetchBackwardUntraced);
      }
      take_fetch_end_sample(context);
    } else if (std::holds_alternative<core::PrefetchRound>(action)) {
      take_fetch_end_sample(context);
    } else if (const auto* check = std::get_if<core::RankTraceCheck>(&action)) {
      // assert_ints_same_as_other_ranks: per list two blocking broadcasts from rank 0, each
      // followed by a device-to-host copy (partitioned_param_coordinator.py). Modelled as tiny
      // collectives on the same communicator that the host waits for.
      for (int i = 0; i < 2 * check->lists && world_size_ > 1; ++i) {
        CollectiveCall call;
        call.kind = CollectiveKind::kAllReduce;
        call.bytes = 8;
        call.iteration = current_->iteration;
        call.label = shared_.kind_label[4];
        std::int32_t done = -1;
        issue_collective(compute_, call, done);
        co_await host_sync_on_comm(done, &current_->host_wait_idle_ns);
      }
    } else if (std::holds_alternative<core::OptimizerUpdate>(action)) {
      co_await spend(host.optimizer_step_ns(static_cast<std::int64_t>(scenario.model.params.size())) +
                     host.kernel_launch_ns());
      const std::int64_t shard_numel = (scenario.model.total_numel() + world_size_ - 1) / world_size_;
      if (scenario.zero.offload_optimizer.device != core::OffloadDevice::kNone) {
        // CPU Adam over the host copy of the partition (the host is busy meanwhile), then the
        // updated 16-bit parameters go up to the device shards — unless zero.offload_param
        // keeps those shards in host memory too (stage3.py: the flat 16-bit partitions are
        // param_groups_fp16_flat_cpu_memory, pinned host buffers): the update is written there
        // and nothing crosses the host link.
        // The node's ranks run their CPU Adam at once on the node's cores: each gets its share.
        co_await spend(cpu_adam_ns(shard_numel, scenario.cluster.gpus_per_node, scenario.cluster.calibration));
        if (scenario.zero.offload_param.device == core::OffloadDevice::kNone) {
          launch_kernel(compute_, at_rate_ns(shard_numel * dtype_bytes_, shared_.host_to_device_bytes_per_s),
                        shared_.label_host_copy);
        }
      } else {
        launch_kernel(compute_, noisy_compute_ns(shared_.compute->optimizer_step_ns(shard_numel)),
                      shared_.label_optimizer);
      }
      // The updated shards are what the next all-gathers copy in: the all-gather stream must
      // not run ahead of the update (a data dependency DeepSpeed's ordering guarantees; where
      // exactly it synchronises is not modelled, a stream wait stands for it here).
      wait(*all_gather_, record(compute_));
    }
    // TraceInvalidated needs no device work: the coordinator already appended the drain.
  }
}

void RankProcess::on_kernel_done(const Stream& stream, const StreamOp& op, TimeNs start_ns, TimeNs end_ns) {
  RankIteration& it = iterations_[static_cast<std::size_t>(op.iteration - 1)];
  if (stream.kind() == StreamKind::kCompute) it.compute_ns += end_ns - start_ns;
  if (shared_.trace->enabled()) {
    TraceSpan span;
    span.start_ns = start_ns;
    span.duration_ns = end_ns - start_ns;
    span.rank = rank_;
    span.label = op.label;
    span.iteration = op.iteration;
    span.track = static_cast<Track>(static_cast<int>(stream.kind()) + 1);
    span.kind = SpanKind::kKernel;
    shared_.trace->add(span);
  }
}

void RankProcess::on_stall(const Stream& stream, const StreamOp& op, TimeNs start_ns, TimeNs end_ns) {
  if (op.stall == StallKind::kNone || end_ns <= start_ns) return;
  RankIteration& it = iterations_[static_cast<std::size_t>(op.iteration - 1)];
  const bool forward = op.stall == StallKind::kFetchForward || op.stall == StallKind::kFetchForwardUntraced;
  // The stream reached the wait at start_ns and passed it at end_ns: what compute markers before
  // and after the wait would complete at (core/metrics/exposed_comm.hpp).
  it.stall_ns[forward ? 0 : 1] += core::compute_idle_between_markers_ns(start_ns, end_ns);
  if (!forward && op.stall != StallKind::kFetchBackward) it.untraced_stall_ns += end_ns - start_ns;
  if (op.stall == StallKind::kFetchForwardUntraced) it.untraced_stall_ns += end_ns - start_ns;
  if (shared_.trace->enabled()) {
    TraceSpan span;
    span.start_ns = start_ns;
    span.duration_ns = end_ns - start_ns;
    span.rank = rank_;
    span.label = shared_.label_stall;
    span.iteration = op.iteration;
    span.track = static_cast<Track>(static_cast<int>(stream.kind()) + 1);
    span.kind = SpanKind::kStall;
    span.phase = forward ? 0 : 1;
    shared_.trace->add(span);
  }
}

void RankProcess::on_collective_reached(Stream& stream, const StreamOp& op) {
  communicator_.arrive(rank_, op.collective, stream);
}

void RankProcess::on_collective_done(const CollectiveCall& call, TimeNs start_ns, TimeNs end_ns) {
  RankIteration& it = iterations_[static_cast<std::size_t>(call.iteration - 1)];
  if (call.kind == CollectiveKind::kAllGather) it.all_gather_ns += end_ns - start_ns;
  if (call.kind == CollectiveKind::kReduceScatter) it.reduce_scatter_ns += end_ns - start_ns;
}


}  // namespace prefetchlab::sim
