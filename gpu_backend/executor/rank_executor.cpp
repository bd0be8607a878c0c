#include "gpu_backend/executor/rank_executor.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <variant>

#include "core/zero/host_throttle.hpp"
#include "core/zero/model_states.hpp"
#include "core/zero/persistence.hpp"
#include "core/scenario/scenario_coordinator.hpp"
#include "gpu_backend/executor/clock_consensus.hpp"
#include "gpu_backend/device/host_kernels.hpp"
#include "gpu_backend/executor/seeded_data.hpp"

namespace prefetchlab::gpu {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

std::string module_name(const core::ModelSpec& model, int module) {
  if (module < 0) return "(none)";
  return model.modules[static_cast<std::size_t>(module)].display_name();
}

}  // namespace

RankExecutor::RankExecutor(const core::Scenario& scenario, Device& device, const ExecutorOptions& options,
                           const ExecutorGeometry& geometry, std::int64_t iterations, std::vector<std::byte> shards)
    : scenario_(scenario),
      model_(scenario.model),
      device_(device),
      options_(options),
      geometry_(geometry),
      iterations_count_(iterations),
      rank_(device.rank()),
      world_size_(device.world_size()),
      type_(element_type_of(scenario.training.dtype)),
      element_bytes_(element_bytes(type_)),
      host_epoch_(std::chrono::steady_clock::now()),
      coordinator_(scenario.model, core::coordinator_config_for(scenario)),
      // The simulator's context (the executor's group has the scenario's world size).
      controller_(scenario.controller, core::controller_context(scenario, device.rank())),
      persistent_(core::persistent_params(scenario.model, scenario.zero.param_persistence_threshold_numel,
                                          scenario.zero.model_persistence_threshold_numel)),
      staged_shards_(std::move(shards)),
      program_(scenario.model, core::checkpoint_units(scenario.model, scenario.training.activation_checkpointing),
               scenario.zero.reduce_bucket_numel, scenario.training.grad_accum),
      checkpoint_input_bytes_(core::checkpoint_input_bytes(scenario.model, scenario.training.micro_batch,
                                                           scenario.training.seq_len, scenario.training.dtype)),
      skipped_modules_(core::skipped_modules(scenario.divergence, device.world_size(), scenario.model.modules.size())) {
  // MoE routing and ZeRO-3 leaf modules are simulated only: refuse rather than run another model.
  if (scenario.moe.enabled || !scenario.leaf_modules.empty()) {
    throw core::InputError({scenario.file.string(), 0}, scenario.moe.enabled ? "moe" : "zero.leaf_modules",
                           "is simulated only; the real backend neither routes tokens nor has leaf-module hooks",
                           "run the scenario with `prefetchlab run`, or leave the key out for the real backend");
  }
  // Lengths that change per iteration are simulated only: the real backend would run every
  // iteration at the longest length, another workload than the scenario's.
  if (scenario.training.seq_len_distribution.varies()) {
    throw core::InputError({scenario.file.string(), 0}, "training.seq_len",
                           "is a distribution of lengths (" + scenario.training.seq_len_distribution.text() +
                               "), which is simulated only; the real backend runs one length",
                           "run the scenario with `prefetchlab run`, or a fixed seq_len (or {packed: N}) for the real backend");
  }
  offload_param_ = scenario.zero.offload_param.device == core::OffloadDevice::kCpu;
  offload_optimizer_ = scenario.zero.offload_optimizer.device == core::OffloadDevice::kCpu;
  if (options.record_plans) program_.journal_into(&plan_log_);  // the steps, then each one's plans

  const std::size_t params = model_.params.size();
  partition_numel_.resize(params);
  shard_offset_numel_.resize(params);
  for (std::size_t p = 0; p < params; ++p) {
    partition_numel_[p] = ceil_div(model_.params[p].numel, world_size_);
    shard_offset_numel_[p] = shard_numel_;
    shard_numel_ += partition_numel_[p];
  }
  param_span_.resize(params);
  param_block_.resize(params);
  param_resident_bytes_.assign(params, 0);
  grad_uses_done_.assign(params, 0);
  grad_block_.resize(params);
  activation_block_.resize(model_.modules.size());
  bucket_offset_numel_.assign(params, -1);
  in_ipg_.assign(params, false);

  compute_ = device_.create_stream("compute");
  all_gather_stream_ = device_.create_stream("all_gather");
  reduce_stream_ = device_.create_stream("reduce_scatter");
  comm_ = device_.create_stream("communicator");
  // overlap_comm=false puts DeepSpeed's all-gather and reduce "streams" on the default stream
  // (DeepSpeed's parameter_offload.py and stage3.py).
  all_gather_ = scenario.zero.overlap_comm ? all_gather_stream_ : compute_;
  reduce_ = scenario.zero.overlap_comm ? reduce_stream_ : compute_;
}

std::string RankExecutor::current_operation() const {
  std::ostringstream out;
  out << doing_;
  if (doing_module_ >= 0) out << " of module " << module_name(model_, doing_module_);
  if (current_) out << " in iteration " << current_->iteration;
  return out.str();
}

// The host state buffers free themselves: nothing reads them any more, every stream finished
// (or the run failed).
RankExecutor::~RankExecutor() = default;

std::int64_t RankExecutor::host_now_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - host_epoch_).count();
}

void RankExecutor::plan_note(std::string_view entry) {
  if (options_.record_plans) plan_log_.emplace_back(entry);
}

// --- device helpers ---

DeviceBuffer RankExecutor::allocate(std::int64_t bytes, StreamId stream, const char* what) {
  const std::int64_t syncs = device_.memory_stats().num_sync_all_streams;
  std::optional<DeviceBuffer> buffer = device_.allocate(static_cast<std::uint64_t>(bytes), stream);
  if (device_.memory_stats().num_sync_all_streams != syncs) {
    // The device waited for every stream before retrying (PyTorch's OOM retry path).
    call_log_.push_back({rank_, current_ ? current_->iteration : 0, SyncTag::kAllocatorRetry, 0});
  }
  if (!buffer) {
    const auto oom = device_.last_out_of_memory();
    throw OutOfMemoryFailure(current_operation() + ", allocating " + what,
                             oom ? oom->message() : std::string("out of memory"));
  }
  note_memory();
  if (current_) {
    current_->peak_allocated_bytes = std::max(current_->peak_allocated_bytes, device_.memory_stats().allocated_bytes.all.current);
    current_->peak_reserved_bytes = std::max(current_->peak_reserved_bytes, device_.memory_stats().reserved_bytes.all.current);
  }
  return *buffer;
}

void RankExecutor::free_after(const DeviceBuffer& buffer, StreamId used_on) {
  if (used_on != buffer.stream) device_.record_stream(buffer, used_on);
  free(buffer);
}

void RankExecutor::free(const DeviceBuffer& buffer) {
  device_.free(buffer);
  note_memory();
}

void RankExecutor::note_memory() {
  if (!scenario_.output.memory_timeline) return;
  const auto& stats = device_.memory_stats();
  memory_points_.push_back({host_now_ns(), rank_, stats.allocated_bytes.all.current, stats.reserved_bytes.all.current});
}

// A collective as ProcessGroupNCCL issues it: the communication stream first waits for the
// issuing stream's work so far (the copy-in), runs the collective in issue order, then marks
// completion with an event the user stream can wait on.
EventId RankExecutor::issue_collective(StreamId user_stream, const std::function<void()>& launch, CollectiveKind kind,
                                       std::int64_t full_bytes, std::int64_t element_bytes) {
  device_.wait(comm_, device_.record(user_stream));
  const EventId before = device_.record(comm_);
  launch();
  const EventId done = device_.record(comm_);
  if (current_) {
    auto& spans = kind == CollectiveKind::kAllGather       ? current_->all_gather_spans
                  : kind == CollectiveKind::kReduceScatter ? current_->reduce_scatter_spans
                                                           : current_->all_reduce_spans;
    spans.emplace_back(before, done);
    auto& sizes = kind == CollectiveKind::kAllGather       ? current_->all_gather_sizes
                  : kind == CollectiveKind::kReduceScatter ? current_->reduce_scatter_sizes
                                                           : current_->all_reduce_sizes;
    sizes.push_back({full_bytes, element_bytes});
  }
  return done;
}

void RankExecutor::host_sync_marked(EventId event, SyncTag tag, MarkerPairs* waits) {
  if (!waits) return host_sync(event, tag);
  const EventId block_marker = device_.record(compute_);
  host_sync(event, tag);
  waits->emplace_back(block_marker, device_.record(compute_));
}

void RankExecutor::host_sync(EventId event, SyncTag tag) {
  const std::int64_t start = host_now_ns();
  device_.synchronize(event);
  call_log_.push_back({rank_, current_ ? current_->iteration : 0, tag, host_now_ns() - start});
}

DeviceSpan RankExecutor::shard_span(int param) const {
  const auto p = static_cast<std::size_t>(param);
  return shards_->span.sub(static_cast<std::uint64_t>(shard_offset_numel_[p] * element_bytes_),
                           static_cast<std::uint64_t>(partition_numel_[p] * element_bytes_));
}

const std::byte* RankExecutor::host_shard(int param) const {
  return host_shards_.data() + shard_offset_numel_[static_cast<std::size_t>(param)] * element_bytes_;
}

DeviceSpan RankExecutor::param_data(int param) const {
  const auto& span = param_span_[static_cast<std::size_t>(param)];
  if (!span) {
    throw std::logic_error("parameter " + model_.params[static_cast<std::size_t>(param)].name +
                           " is used but not available on rank " + std::to_string(rank_));
  }
  return *span;
}

DeviceSpan RankExecutor::ws(const DeviceBuffer& buffer, std::int64_t numel) const {
  return buffer.span.sub(0, static_cast<std::uint64_t>(numel * element_bytes_));
}

// --- setup ---

// ZeRO-3's resident model states, as core/zero/model_states.hpp lists them (the simulator
// allocates the same, in the same order; offloaded states live in host memory instead), then the
// workspace the real kernels read and write.
void RankExecutor::allocate_model_states() {
  for (const core::ModelStateBuffer& state : core::device_model_states(scenario_.zero, shard_numel_, element_bytes_)) {
    std::optional<DeviceBuffer>& buffer = state.state == core::ModelState::kParameterShards ? shards_
                                          : state.state == core::ModelState::kMasterWeights ? master_
                                          : state.state == core::ModelState::kExpAvg        ? exp_avg_
                                          : state.state == core::ModelState::kExpAvgSq      ? exp_avg_sq_
                                          : state.state == core::ModelState::kGradientPartition ? grad_partition_
                                                                                                : ipg_;
    buffer = allocate(state.bytes, compute_, state.what);
  }
  const std::int64_t ws_bytes = geometry_.workspace_numel * element_bytes_;
  input_ = allocate(ws_bytes, compute_, "activations workspace");
  upstream_ = allocate(ws_bytes, compute_, "upstream gradient workspace");
  scratch_a_ = allocate(ws_bytes, compute_, "kernel output workspace");
  scratch_b_ = allocate(ws_bytes, compute_, "kernel output workspace");
}

void RankExecutor::upload_initial_state() {
  const std::vector<double> master = decode(type_, staged_shards_);
  host_master_.assign(master.begin(), master.end());
  if (offload_param_) {
    host_shards_ = HostStateBuffer(device_, staged_shards_.size(), scenario_.zero.offload_param.pin_memory);
    if (!staged_shards_.empty()) std::memcpy(host_shards_.data(), staged_shards_.data(), staged_shards_.size());
  } else {
    device_.copy_host_to_device(compute_, shards_->span, staged_shards_.data());
  }
  if (offload_optimizer_) {
    host_exp_avg_.assign(static_cast<std::size_t>(shard_numel_), 0.0f);
    host_exp_avg_sq_.assign(static_cast<std::size_t>(shard_numel_), 0.0f);
    const bool pinned = scenario_.zero.offload_optimizer.pin_memory;
    const auto bytes = static_cast<std::uint64_t>(shard_numel_ * element_bytes_);
    host_grad_partition_ = HostStateBuffer(device_, bytes, pinned);
    if (!offload_param_) host_updated_params_ = HostStateBuffer(device_, bytes, pinned);
  } else {
    device_.copy_host_to_device(compute_, master_->span, host_master_.data());
    device_.zero(compute_, exp_avg_->span);
    device_.zero(compute_, exp_avg_sq_->span);
  }
  device_.zero(compute_, grad_partition_->span);
  const auto input = encode(type_, rank_input_values(options_.data_seed, rank_, geometry_.workspace_numel));
  const auto upstream = encode(type_, rank_upstream_gradient_values(options_.data_seed, rank_, geometry_.workspace_numel));
  device_.copy_host_to_device(compute_, input_->span, input.data());
  device_.copy_host_to_device(compute_, upstream_->span, upstream.data());
  // The streams start from a state every one of them sees.
  const EventId ready = device_.record(compute_);
  for (const StreamId s : {all_gather_stream_, reduce_stream_, comm_}) device_.wait(s, ready);
  host_sync(ready, SyncTag::kSetup);
  std::vector<std::byte>().swap(staged_shards_);
  if (!offload_optimizer_) std::vector<float>().swap(host_master_);  // CPU Adam's master otherwise
}

void RankExecutor::run() {
  allocate_model_states();
  upload_initial_state();
  align_clocks();
  iterations_.reserve(static_cast<std::size_t>(iterations_count_));
  for (int i = 1; i <= iterations_count_; ++i) run_iteration(i);
  current_ = nullptr;
  doing_ = "final synchronisation";
  doing_module_ = -1;
  for (const StreamId s : {all_gather_stream_, reduce_stream_, comm_}) device_.wait(compute_, device_.record(s));
  host_sync(device_.record(compute_), SyncTag::kRunEnd);
}

std::size_t RankExecutor::finished_iterations() {
  std::size_t n = 0;
  for (const RankIteration& it : iterations_) {
    if (it.iteration_end_event < 0 || !device_.query(it.iteration_end_event)) break;
    ++n;
  }
  return n;
}

// Device events of different ranks share no clock (on CUDA not even a device), so every rank's
// times count from the end of a set-up all-reduce, which no rank leaves before all have entered:
// iteration 1 then starts together on every rank and the real trace's ranks line up. One exit is
// not enough on a busy host: a rank whose stream thread wakes late starts its clock late and its
// whole trace shifts (2.9 ms seen in CI). So kClockRounds all-reduces, each followed by an event,
// and the ranks' consensus on where each one's first exit lies (gpu_backend/executor/clock_consensus.hpp).
void RankExecutor::align_clocks() {
  constexpr int kClockRounds = 9;
  const auto world = static_cast<std::uint64_t>(world_size_);
  const std::uint64_t row_bytes = kClockRounds * sizeof(double);
  const DeviceBuffer buffer =
      allocate(static_cast<std::int64_t>(sizeof(double) + world * row_bytes), compute_, "the clock-alignment buffer");
  const DeviceSpan token = buffer.span.sub(0, sizeof(double));
  const DeviceSpan times = buffer.span.sub(sizeof(double), world * row_bytes);
  device_.zero(compute_, buffer.span);
  device_.wait(comm_, device_.record(compute_));
  std::vector<EventId> exits;
  for (int k = 0; k < kClockRounds; ++k) {
    device_.all_reduce(comm_, token, ElementType::kFP64, ReduceOp::kMax);
    exits.push_back(device_.record(comm_));
  }
  base_event_ = exits.front();
  clock_shift_ns_ = 0;
  if (world_size_ > 1) {
    host_sync(exits.back(), SyncTag::kSetup);
    // Each rank fills its own row of a zeroed table; a sum all-reduce gives everyone the table
    // (the executor's only collectives outside iterations stay all-reduces).
    std::vector<double> all(world * kClockRounds, 0.0);
    for (int k = 0; k < kClockRounds; ++k) {
      all[static_cast<std::size_t>(rank_ * kClockRounds + k)] =
          static_cast<double>(device_.elapsed_ns(exits.front(), exits[static_cast<std::size_t>(k)]));
    }
    device_.copy_host_to_device(comm_, times, all.data());
    device_.all_reduce(comm_, times, ElementType::kFP64, ReduceOp::kSum);
    device_.copy_device_to_host(comm_, all.data(), times);
    host_sync(device_.record(comm_), SyncTag::kSetup);
    clock_shift_ns_ = consensus_clock_shift_ns(all, world_size_, kClockRounds, rank_);
  }
  device_.wait(compute_, device_.record(comm_));
  first_start_event_ = device_.record(compute_);
  free_after(buffer, comm_);
}

// --- the iteration ---

void RankExecutor::run_iteration(int iteration) {
  iterations_.emplace_back();
  current_ = &iterations_.back();
  current_->iteration = iteration;
  current_->optimizer_step = program_.optimizer_step(iteration);
  current_->start_event = iteration == 1 ? first_start_event_ : iterations_[iterations_.size() - 2].iteration_end_event;
  current_->peak_gathered_bytes = gathered_bytes_;
  device_.reset_peak_memory_stats();
  current_->peak_allocated_bytes = device_.memory_stats().allocated_bytes.all.current;
  current_->peak_reserved_bytes = device_.memory_stats().reserved_bytes.all.current;
  std::fill(grad_uses_done_.begin(), grad_uses_done_.end(), 0);
  // Data-dependent control flow (the scenario's divergence): a skipped module and its subtree
  // do not run on this rank in this iteration, so none of their hooks fire.
  skipped_.clear();
  if (const auto it = skipped_modules_.find({iteration, rank_}); it != skipped_modules_.end()) {
    skipped_.assign(it->second.begin(), it->second.end());
  }
  for (const core::ProgramStep& step : program_.iteration(iteration, skipped_)) run_step(step);
}

// One step of core::RankProgram on this rank's device.
void RankExecutor::run_step(const core::ProgramStep& step) {
  const bool forward = step.phase == core::Phase::kForward;
  doing_module_ = step.module;
  switch (step.kind) {
    case core::StepKind::kResetStep: {
      // Root forward pre-hook: reset_step (parameter_offload.py) — the only place it runs.
      doing_ = "reset_step";
      Context context;
      execute(coordinator_.reset_step(), context);
      current_->trace_mode = coordinator_.trace_mode();
      update_controller(current_->iteration);
      current_->bucket_numel = coordinator_.prefetch_bucket_numel();
      break;
    }
    case core::StepKind::kFetch:
      fetch_hook(step.module, step.phase);
      break;
    case core::StepKind::kOwnWork:
      doing_ = !forward ? "backward compute" : step.recompute ? "recompute forward" : "forward compute";
      if (forward) {
        module_forward_work(step.module);
      } else {
        module_backward_work(step.module);
      }
      break;
    case core::StepKind::kKeepActivations: {
      // What the module saves for backward stays allocated until its backward ran.
      const auto m = static_cast<std::size_t>(step.module);
      const std::int64_t saved =
          step.kept == core::ActivationsKept::kAll
              ? model_.modules[m].activation_bytes.at(scenario_.training.micro_batch, scenario_.training.seq_len)
              : checkpoint_input_bytes_;
      if (saved > 0 && !activation_block_[m]) activation_block_[m] = allocate(saved, compute_, "activations");
      break;
    }
    case core::StepKind::kDropCheckpointInput:
    case core::StepKind::kDropActivations:
      if (auto& kept = activation_block_[static_cast<std::size_t>(step.module)]) {
        free(*kept);  // compute stream: reusable by later kernels at once
        kept.reset();
      }
      break;
    case core::StepKind::kReduceWaitsForCompute:
      device_.wait(reduce_, device_.record(compute_));
      break;
    case core::StepKind::kGradientReady:
      gradient_ready(step);
      break;
    case core::StepKind::kFlushBucket:
      doing_ = "gradient reduce-scatter";
      flush_reduce_bucket(step);
      break;
    case core::StepKind::kRelease: {
      doing_ = forward ? "forward release" : "backward release";
      Context release_context{step.phase, step.module, std::nullopt};
      execute(coordinator_.release_sub_module(step.module, step.phase), release_context);
      break;
    }
    case core::StepKind::kForwardEnd:
      current_->forward_end_event = device_.record(compute_);
      break;
    case core::StepKind::kBackwardComputeEnd:
      current_->backward_compute_end_event = device_.record(compute_);
      break;
    case core::StepKind::kEndOfBackward:
      // The host synchronises the reduce stream (stage3.py).
      doing_ = "end of backward";
      // A tied parameter whose other use was skipped (divergence) never completed its gradient:
      // it goes with the iteration, as autograd drops it.
      for (auto& grad : grad_block_) {
        if (!grad) continue;
        free(*grad);
        grad.reset();
      }
      current_->reduce_sync_marker = device_.record(compute_);
      host_sync(device_.record(reduce_), SyncTag::kEndOfBackward);
      current_->backward_end_event = device_.record(compute_);
      if (options_.on_backward_done) options_.on_backward_done(*this, current_->iteration);
      break;
    case core::StepKind::kOptimizerStep: {
      doing_ = "optimizer step";
      Context optimizer_context;
      execute(coordinator_.optimizer_step(), optimizer_context);
      break;
    }
    case core::StepKind::kIterationEnd:
      current_->iteration_end_event = device_.record(compute_);
      break;
  }
}

// Contract of core/control/prefetch_controller.hpp, steps 1-3, at reset_step
// (core::ControllerDriver).
void RankExecutor::update_controller(int iteration) {
  doing_ = "controller update";
  if (controller_.previous_samples_due(iteration)) {
    const RankIteration& previous = iterations_[static_cast<std::size_t>(iteration - 2)];
    // The follow-up reads the previous iteration's compute-stream events (after the last).
    if (!previous.fetches.empty()) host_sync(previous.fetches.back().end_event, SyncTag::kControllerSamples);
    std::vector<core::FetchTiming> timings;
    for (const auto& f : previous.fetches) {
      timings.push_back({f.phase, event_ns(f.start_event), event_ns(f.end_event), f.host_start_ns, f.host_end_ns,
                         f.peak_reserved_bytes});
    }
    controller_.deliver_previous(iteration, timings);
  }
  if (std::optional<core::Proposal> proposal = controller_.propose(iteration, current_->trace_mode)) {
    // {invalid, values...} through a real all-reduce: MAX, or rank 0's values as a SUM in
    // which every other rank contributes zeros (a broadcast).
    std::vector<double> payload{proposal->invalid ? 1.0 : 0.0};
    payload.insert(payload.end(), proposal->values.begin(), proposal->values.end());
    const bool broadcast = controller_.agreement() == core::Agreement::kBroadcastRank0;
    if (broadcast && rank_ != 0) std::fill(payload.begin(), payload.end(), 0.0);
    const std::vector<double> agreed = agree_on_device(payload, broadcast ? ReduceOp::kSum : ReduceOp::kMax, SyncTag::kAgreement);
    core::Proposal result;
    result.invalid = agreed[0] != 0.0;
    result.values.assign(agreed.begin() + 1, agreed.end());
    controller_.apply_agreed(result);
  }
  coordinator_.set_prefetch_bucket_numel(controller_.start_fetches());
  current_->samples_wanted = controller_.samples_wanted();
}

std::vector<double> RankExecutor::agree_on_device(const std::vector<double>& values, ReduceOp op, SyncTag tag) {
  const auto bytes = static_cast<std::int64_t>(values.size() * sizeof(double));
  agreement_host_.resize(static_cast<std::size_t>(bytes));
  std::memcpy(agreement_host_.data(), values.data(), agreement_host_.size());
  const DeviceBuffer buffer = allocate(bytes, compute_, "an agreement buffer");
  device_.copy_host_to_device(compute_, buffer.span, agreement_host_.data());
  const EventId done = issue_collective(compute_, [&] { device_.all_reduce(comm_, buffer.span, ElementType::kFP64, op); }, CollectiveKind::kAllReduce,
                                        bytes, static_cast<std::int64_t>(sizeof(double)));
  device_.wait(compute_, done);
  device_.copy_device_to_host(compute_, agreement_host_.data(), buffer.span);
  host_sync_marked(device_.record(compute_), tag, comm_waits());
  free_after(buffer, comm_);
  std::vector<double> out(values.size());
  std::memcpy(out.data(), agreement_host_.data(), agreement_host_.size());
  return out;
}

// A module's fetch hook (fetch_sub_module): the sample window opens at the top of the fetch and
// closes once compute waits for the all-gather stream (as the follow-up 6e70233 samples).
void RankExecutor::fetch_hook(int module, core::Phase phase) {
  doing_ = phase == core::Phase::kForward ? "forward fetch" : "backward fetch";
  doing_module_ = module;
  RankIteration::Fetch fetch;
  fetch.phase = phase;
  fetch.module = module;
  fetch.start_event = device_.record(compute_);
  fetch.host_start_ns = host_now_ns();
  current_->fetches.push_back(fetch);
  Context context{phase, module, current_->fetches.size() - 1};
  const core::FetchPlan plan = coordinator_.fetch_sub_module(module, phase);
  execute(plan.plan, context);
  take_fetch_end_sample(context);
  after_fetch(plan.info);
  if (options_.on_module_ready) options_.on_module_ready(*this, current_->iteration, module, phase);
}

void RankExecutor::take_fetch_end_sample(Context& context) {
  if (!context.fetch) return;
  RankIteration::Fetch& fetch = current_->fetches[*context.fetch];
  fetch.end_event = device_.record(compute_);
  fetch.host_end_ns = host_now_ns();
  fetch.peak_reserved_bytes = current_->peak_reserved_bytes;
  context.fetch.reset();
}

// Contract steps 3 (per-fetch policies) and 4 (core::ControllerDriver).
void RankExecutor::after_fetch(const core::FetchInfo& info) {
  std::vector<core::FetchTiming> timings;
  if (controller_.reads_fetch_timings()) {
    for (const auto& f : current_->fetches) timings.push_back({f.phase, 0, 0, f.host_start_ns, f.host_end_ns, f.peak_reserved_bytes});
  }
  if (const auto bucket = controller_.after_fetch(current_->iteration, current_->fetches.size() - 1, timings,
                                                  info.trace_invalidated)) {
    coordinator_.set_prefetch_bucket_numel(*bucket);
  }
}

// --- module work: GEMMs of the module's real shapes and memory-bound passes ---

void RankExecutor::module_forward_work(int module) {
  const auto& spec = model_.modules[static_cast<std::size_t>(module)];
  const EventId before = device_.record(compute_);
  const std::int64_t tokens = geometry_.tokens;
  std::int64_t gemm_bytes = 0;
  for (const int p : spec.param_ids) {
    const auto& param = model_.params[static_cast<std::size_t>(p)];
    if (param.gemm_in <= 0) continue;
    // Y[tokens x out] = X[tokens x in] . W[in x out]
    GemmArgs g;
    g.m = tokens, g.n = param.gemm_out, g.k = param.gemm_in;
    g.a = input_->span, g.lda = geometry_.max_dim;
    g.b = param_data(p), g.ldb = param.gemm_out;
    g.c = scratch_a_->span, g.ldc = geometry_.max_dim;
    g.type = type_;
    device_.gemm(compute_, g);
    gemm_bytes += (tokens * param.gemm_in + param.numel + tokens * param.gemm_out) * element_bytes_;
  }
  attention_gemms(module, 1);
  // The rest of the module's memory traffic (norms, activations, residual adds, embedding
  // lookups, the loss) as one read-and-write pass.
  const std::int64_t bytes = spec.forward_bytes.at(scenario_.training.micro_batch, scenario_.training.seq_len);
  memory_pass(std::max<std::int64_t>(0, bytes - gemm_bytes) / (2 * element_bytes_), 1);
  current_->compute_spans.push_back({before, device_.record(compute_), module, core::Phase::kForward});
}

void RankExecutor::module_backward_work(int module) {
  const auto& spec = model_.modules[static_cast<std::size_t>(module)];
  const EventId before = device_.record(compute_);
  const std::int64_t tokens = geometry_.tokens;
  std::int64_t gemm_bytes = 0;
  for (const int p : spec.param_ids) {
    const auto pi = static_cast<std::size_t>(p);
    const auto& param = model_.params[pi];
    // This use's gradient accumulates into the parameter's gradient buffer (a tied weight has
    // two uses); the buffer lives on the compute stream until it goes into the bucket.
    const bool first_use = grad_uses_done_[pi]++ == 0;
    if (first_use) grad_block_[pi] = allocate(param.numel * element_bytes_, compute_, "a gradient");
    const DeviceSpan grad = grad_block_[pi]->span.sub(0, static_cast<std::uint64_t>(param.numel * element_bytes_));
    if (param.gemm_in > 0) {
      // dX[tokens x in] = dY[tokens x out] . W^T
      GemmArgs dgrad;
      dgrad.m = tokens, dgrad.n = param.gemm_in, dgrad.k = param.gemm_out;
      dgrad.a = upstream_->span, dgrad.lda = geometry_.max_dim;
      dgrad.b = param_data(p), dgrad.ldb = param.gemm_out, dgrad.transpose_b = true;
      dgrad.c = scratch_a_->span, dgrad.ldc = geometry_.max_dim;
      dgrad.type = type_;
      device_.gemm(compute_, dgrad);
      // dW[in x out] (+)= X^T . dY
      GemmArgs wgrad;
      wgrad.m = param.gemm_in, wgrad.n = param.gemm_out, wgrad.k = tokens;
      wgrad.a = input_->span, wgrad.lda = geometry_.max_dim, wgrad.transpose_a = true;
      wgrad.b = upstream_->span, wgrad.ldb = geometry_.max_dim;
      wgrad.c = grad, wgrad.ldc = param.gemm_out;
      wgrad.beta = first_use ? 0.0f : 1.0f;
      wgrad.type = type_;
      device_.gemm(compute_, wgrad);
      gemm_bytes += 2 * (tokens * param.gemm_in + param.numel + tokens * param.gemm_out) * element_bytes_;
    } else {
      // Element-wise parameters (norms, embeddings, biases): grad (+)= W * dY, a memory pass.
      ElementwiseArgs e;
      e.numel = param.numel;
      e.a = param_data(p);
      e.b = ws(*upstream_, param.numel);
      e.type = type_;
      if (first_use) {
        e.op = ElementwiseOp::kMultiply;
        e.dst = grad;
        device_.elementwise(compute_, e);
      } else {
        e.op = ElementwiseOp::kMultiply;
        e.dst = ws(*scratch_b_, param.numel);
        device_.elementwise(compute_, e);
        ElementwiseArgs add;
        add.op = ElementwiseOp::kAxpy;
        add.numel = param.numel;
        add.dst = grad;
        add.a = ws(*scratch_b_, param.numel);
        add.type = type_;
        device_.elementwise(compute_, add);
      }
      gemm_bytes += 3 * param.numel * element_bytes_;
    }
  }
  attention_gemms(module, 2);
  const std::int64_t bytes = 2 * spec.forward_bytes.at(scenario_.training.micro_batch, scenario_.training.seq_len);
  memory_pass(std::max<std::int64_t>(0, bytes - gemm_bytes) / (2 * element_bytes_), 1);
  current_->compute_spans.push_back({before, device_.record(compute_), module, core::Phase::kBackward});
}

// The s^2 part of a module's FLOPs (the attention core: QK^T and AV) as GEMMs of the same FLOP
// count, one strided-batched GEMM per product with one batch per sequence of the micro-batch
// (cublasGemmStridedBatchedEx on the CUDA device): scores[s x s] = Q[s x K] . K^T, then
// out[s x K] = scores . V, K = per-position FLOPs / 4 (heads merged into K, so the scores fit
// the same workspace). `passes` = 1 forward, 2 backward.
void RankExecutor::attention_gemms(int module, int passes) {
  const auto& spec = model_.modules[static_cast<std::size_t>(module)];
  const std::int64_t per_position = spec.forward_flops.per_token_per_position;
  if (per_position <= 0) return;
  const std::int64_t s = scenario_.training.seq_len;
  const std::int64_t k = std::max<std::int64_t>(1, per_position / 4);
  const std::int64_t sequences = geometry_.tokens / s;
  for (int pass = 0; pass < passes; ++pass) {
    GemmArgs scores;
    scores.m = s, scores.n = s, scores.k = k;
    scores.a = input_->span, scores.lda = k, scores.stride_a = s * k;
    scores.b = upstream_->span, scores.ldb = k, scores.stride_b = s * k, scores.transpose_b = true;
    scores.c = scratch_a_->span, scores.ldc = s, scores.stride_c = s * s;
    scores.batch_count = sequences;
    scores.type = type_;
    device_.gemm(compute_, scores);
    GemmArgs out;
    out.m = s, out.n = k, out.k = s;
    out.a = scratch_a_->span, out.lda = s, out.stride_a = s * s;
    out.b = input_->span, out.ldb = k, out.stride_b = s * k;
    out.c = scratch_b_->span, out.ldc = k, out.stride_c = s * k;
    out.batch_count = sequences;
    out.type = type_;
    device_.gemm(compute_, out);
  }
}

void RankExecutor::memory_pass(std::int64_t numel, int passes) {
  for (std::int64_t done = 0; done < numel * passes;) {
    const std::int64_t chunk = std::min(numel * passes - done, geometry_.workspace_numel);
    ElementwiseArgs e;
    e.op = ElementwiseOp::kScale;
    e.numel = chunk;
    e.a = ws(*input_, chunk);
    e.dst = ws(*scratch_b_, chunk);
    e.alpha = 0.5f;
    e.type = type_;
    device_.elementwise(compute_, e);
    done += chunk;
  }
}

// --- backward gradients: the IPG bucket and its reduce-scatter (DeepSpeed's stage3.py) ---

// A parameter's gradient is final (core::RankProgram's per-parameter grad hook).
void RankExecutor::gradient_ready(const core::ProgramStep& step) {
  const auto pi = static_cast<std::size_t>(step.param);
  const std::int64_t numel = step.numel;
  const DeviceBuffer grad = *grad_block_[pi];
  grad_block_[pi].reset();
  // Copied into the contiguous bucket when it fits (a gradient larger than the bucket is
  // reduced from where it lies, as stage3's __add_grad_to_ipg_bucket does); freed once the
  // reduce stream has read it.
  in_ipg_[pi] = scenario_.zero.contiguous_gradients &&
                step.bucket_offset_numel + numel <= scenario_.zero.reduce_bucket_numel;
  if (in_ipg_[pi]) {
    bucket_offset_numel_[pi] = step.bucket_offset_numel;
    const EventId copy_start = device_.record(reduce_);
    device_.copy_device_to_device(reduce_, ipg_->span.sub(static_cast<std::uint64_t>(step.bucket_offset_numel * element_bytes_),
                                                          static_cast<std::uint64_t>(numel * element_bytes_)),
                                  grad.span.sub(0, static_cast<std::uint64_t>(numel * element_bytes_)));
    current_->gradient_work_spans.emplace_back(copy_start, device_.record(reduce_));
    free_after(grad, reduce_);
  } else {
    bucket_offset_numel_[pi] = static_cast<std::int64_t>(grads_in_bucket_.size());
    grads_in_bucket_.push_back(grad);  // reduced from where it lies, freed after the flush
  }
}

void RankExecutor::flush_reduce_bucket(const core::ProgramStep& step) {
  // Host throttle identical to the fetch path (stage3.py, max_param_reduce_events).
  if (const auto oldest = core::event_to_synchronize(reduce_events_, core::kMaxParamReduceEvents,
                                                     [&](EventId e) { return device_.query(e); })) {
    host_sync_marked(*oldest, SyncTag::kReduceThrottle, comm_waits());
    reduce_events_.pop_front();
  }
  // reduce_scatter_coalesced: sorted by ds_id, each gradient padded to a multiple of W and its
  // W chunks interleaved so rank q's chunk of every gradient is contiguous; divided by W; one
  // reduce-scatter; this rank's chunks added into the gradient partition.
  const std::span<const int> bucket = program_.flush_params(step);
  std::vector<int> params(bucket.begin(), bucket.end());
  std::sort(params.begin(), params.end());
  std::vector<std::int64_t> slot_offset;
  std::int64_t slot_numel = 0;
  for (const int p : params) {
    slot_offset.push_back(slot_numel);
    slot_numel += partition_numel_[static_cast<std::size_t>(p)];
  }
  const std::int64_t padded_numel = slot_numel * world_size_;
  auto source_of = [&](int p) {
    const auto pi = static_cast<std::size_t>(p);
    const auto bytes = static_cast<std::uint64_t>(model_.params[pi].numel * element_bytes_);
    if (in_ipg_[pi]) {
      return ipg_->span.sub(static_cast<std::uint64_t>(bucket_offset_numel_[pi] * element_bytes_), bytes);
    }
    return grads_in_bucket_[static_cast<std::size_t>(bucket_offset_numel_[pi])].span.sub(0, bytes);
  };
  const EventId prepare_start = device_.record(reduce_);
  // A single gradient that divides evenly is reduced where it lies (its chunks are already
  // contiguous): reduce_scatter_coalesced skips the interleaving copy then
  // (coalesced_collectives.py).
  const bool interleave = !(params.size() == 1 && padded_numel == model_.params[static_cast<std::size_t>(params[0])].numel);
  std::optional<DeviceBuffer> flat;
  DeviceSpan flat_span = source_of(params[0]);
  if (interleave) {
    flat = allocate(padded_numel * element_bytes_, reduce_, "a reduce-scatter bucket");
    flat_span = flat->span;
  }
  auto bytes_of = [&](std::int64_t numel) { return static_cast<std::uint64_t>(numel * element_bytes_); };
  for (std::size_t i = 0; interleave && i < params.size(); ++i) {
    const auto pi = static_cast<std::size_t>(params[i]);
    const std::int64_t numel = model_.params[pi].numel;
    const std::int64_t part = partition_numel_[pi];
    const DeviceSpan source = source_of(params[i]);
    for (int q = 0; q < world_size_; ++q) {
      const std::int64_t begin = q * part;
      const std::int64_t length = std::clamp<std::int64_t>(numel - begin, 0, part);
      const DeviceSpan chunk = flat_span.sub(bytes_of(q * slot_numel + slot_offset[i]), bytes_of(part));
      if (length > 0) device_.copy_device_to_device(reduce_, chunk.sub(0, bytes_of(length)), source.sub(bytes_of(begin), bytes_of(length)));
      // DeepSpeed pads with uninitialised memory (the padded tail of the output is dropped);
      // zeros here keep the run deterministic at the cost of the padding alone.
      if (length < part) device_.zero(reduce_, chunk.sub(bytes_of(length), bytes_of(part - length)));
    }
  }
  ElementwiseArgs divide;
  divide.op = ElementwiseOp::kScale;
  divide.numel = padded_numel;
  divide.a = flat_span;
  divide.dst = flat_span;
  divide.alpha = 1.0f / static_cast<float>(world_size_);
  divide.type = type_;
  device_.elementwise(reduce_, divide);
  current_->gradient_work_spans.emplace_back(prepare_start, device_.record(reduce_));
  // In place, as reduce_scatter_coalesced runs it: the output is this rank's own chunk of the
  // flat buffer, so no second buffer is allocated.
  DeviceSpan mine = flat_span.sub(bytes_of(rank_ * slot_numel), bytes_of(slot_numel));
  if (world_size_ > 1) {
    const EventId done = issue_collective(reduce_, [&] {
      device_.reduce_scatter(comm_, flat_span, mine, type_, ReduceOp::kSum);
    }, CollectiveKind::kReduceScatter, static_cast<std::int64_t>(flat_span.bytes), element_bytes_);
    device_.wait(reduce_, done);
    ++current_->reduce_scatter_count;
  }
  const EventId add_start = device_.record(reduce_);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto pi = static_cast<std::size_t>(params[i]);
    ElementwiseArgs add;
    add.op = ElementwiseOp::kAxpy;
    add.numel = partition_numel_[pi];
    add.dst = grad_partition_->span.sub(static_cast<std::uint64_t>(shard_offset_numel_[pi] * element_bytes_),
                                        static_cast<std::uint64_t>(partition_numel_[pi] * element_bytes_));
    add.a = mine.sub(static_cast<std::uint64_t>(slot_offset[i] * element_bytes_), static_cast<std::uint64_t>(partition_numel_[pi] * element_bytes_));
    add.type = type_;
    device_.elementwise(reduce_, add);
    // zero.offload_optimizer: the partition goes down to host memory for CPU Adam (the
    // accumulated value, so the last micro-batch's copy is the step's gradient). The end-of-
    // backward synchronisation of the reduce stream completes it before the step reads it.
    if (offload_optimizer_) {
      device_.copy_device_to_host(reduce_, host_grad_partition_.data() + shard_offset_numel_[pi] * element_bytes_, add.dst);
    }
  }
  reduce_events_.push_back(device_.record(reduce_));
  current_->gradient_work_spans.emplace_back(add_start, reduce_events_.back());
  if (flat) free_after(*flat, comm_);
  for (const DeviceBuffer& grad : grads_in_bucket_) free_after(grad, reduce_);
  grads_in_bucket_.clear();
  plan_note("reduce_scatter " + std::to_string(step.numel));
}

// --- plans ---

void RankExecutor::execute(const core::Plan& plan, Context& context) {
  for (const core::PlanAction& action : plan.actions) {
    if (const auto* gather = std::get_if<core::Gather>(&action)) {
      execute_gather(*gather, context);
    } else if (const auto* wait = std::get_if<core::Wait>(&action)) {
      execute_wait(*wait, context);
    } else if (const auto* release = std::get_if<core::Release>(&action)) {
      std::string note = "release";
      for (const int p : release->param_ids) {
        const auto pi = static_cast<std::size_t>(p);
        gathered_bytes_ -= param_resident_bytes_[pi];
        param_resident_bytes_[pi] = 0;
        param_span_[pi].reset();
        // free_param: recordStream on the compute stream that used it, then drop it.
        if (auto& block = param_block_[pi]) {
          free_after(*block, compute_);
          block.reset();
        }
        note += ' ';
        note += std::to_string(p);
      }
      plan_note(note);
    } else if (std::holds_alternative<core::ComputeWaitsForAllGather>(action)) {
      if (all_gather_ != compute_) {
        const EventId before = device_.record(compute_);
        device_.wait(compute_, device_.record(all_gather_));
        current_->stall_waits[static_cast<int>(context.phase)].emplace_back(before, device_.record(compute_));
      }
      take_fetch_end_sample(context);
    } else if (std::holds_alternative<core::PrefetchRound>(action)) {
      take_fetch_end_sample(context);
    } else if (const auto* check = std::get_if<core::RankTraceCheck>(&action)) {
      execute_trace_check(*check);
    } else if (std::holds_alternative<core::OptimizerUpdate>(action)) {
      optimizer_update();
    }
    // TraceInvalidated needs no device work: the coordinator already appended the drain.
  }
}

void RankExecutor::execute_gather(const core::Gather& gather, Context& context) {
  const auto h = static_cast<std::size_t>(gather.handle_id);
  if (handles_.size() <= h) handles_.resize(h + 1);
  HandleMemory& handle = handles_[h];
  handle.alive = true;
  handle.params.insert(handle.params.end(), gather.param_ids.begin(), gather.param_ids.end());
  ++current_->all_gather_count;
  current_->gathered_numel += gather.numel;
  std::string note = std::string("gather ") + core::gather_kind_name(gather.kind) + " " + std::to_string(gather.padded_numel);
  for (const int p : gather.param_ids) {
    note += ' ';
    note += std::to_string(p);
  }
  plan_note(note);
  if (!gather.collective) {
    for (const int p : gather.param_ids) {
      const auto pi = static_cast<std::size_t>(p);
      if (!offload_param_) {
        param_span_[pi] = shard_span(p);  // world size 1: the shard is the parameter
        continue;
      }
      // World size 1 with the shard in host memory: NoGatherCoalescedHandle's
      // ds_tensor.to(device, non_blocking=True), issued under the all-gather stream.
      const std::int64_t bytes = model_.params[pi].numel * element_bytes_;
      if (!param_block_[pi]) {
        param_block_[pi] = allocate(bytes, all_gather_, "a parameter copied from host memory");
        param_resident_bytes_[pi] = bytes;
        gathered_bytes_ += bytes;
        current_->peak_gathered_bytes = std::max(current_->peak_gathered_bytes, gathered_bytes_);
      }
      param_span_[pi] = param_block_[pi]->span.sub(0, static_cast<std::uint64_t>(bytes));
      device_.copy_host_to_device(all_gather_, *param_span_[pi], host_shard(p));
    }
    return;
  }
  handle.collective = true;
  const auto g = static_cast<std::size_t>(gather.gather_id);
  if (gathers_.size() <= g) gathers_.resize(g + 1);
  GatherMemory& memory = gathers_[g];
  handle.gathers.push_back(gather.gather_id);
  memory.params = gather.param_ids;
  for (const int p : gather.param_ids) {
    memory.slot_offset_numel.push_back(memory.slot_numel);
    memory.slot_numel += partition_numel_[static_cast<std::size_t>(p)];
  }
  const std::int64_t flat_bytes = gather.padded_numel * element_bytes_;
  gathered_bytes_ += flat_bytes;  // allocated at issue time, on the all-gather stream
  current_->peak_gathered_bytes = std::max(current_->peak_gathered_bytes, gathered_bytes_);
  memory.flat = allocate(flat_bytes, all_gather_, "a gathered parameter buffer");
  // Copy-in: this rank's shards into its slot of the flat buffer, on the all-gather stream.
  // With zero.offload_param the shards are in pinned host memory and cross the host link here,
  // before the all-gather (sim/ranks/rank_process.cpp; DeepSpeed's ds_tensor.to(device) per shard,
  // then the cat into the slot: the copy lands in the slot directly, no temporary).
  const std::uint64_t slot_bytes = static_cast<std::uint64_t>(memory.slot_numel * element_bytes_);
  const DeviceSpan my_slot = memory.flat->span.sub(static_cast<std::uint64_t>(rank_) * slot_bytes, slot_bytes);
  for (std::size_t i = 0; i < memory.params.size(); ++i) {
    const int p = memory.params[i];
    const auto shard_bytes = static_cast<std::uint64_t>(partition_numel_[static_cast<std::size_t>(p)] * element_bytes_);
    const DeviceSpan slot = my_slot.sub(static_cast<std::uint64_t>(memory.slot_offset_numel[i] * element_bytes_), shard_bytes);
    if (offload_param_) {
      device_.copy_host_to_device(all_gather_, slot, host_shard(p));
    } else {
      device_.copy_device_to_device(all_gather_, slot, shard_span(p));
    }
  }
  (void)context;
  memory.done = issue_collective(all_gather_, [&] { device_.all_gather(comm_, my_slot, memory.flat->span, type_); }, CollectiveKind::kAllGather,
                                 static_cast<std::int64_t>(memory.flat->span.bytes), element_bytes_);
}

void RankExecutor::execute_wait(const core::Wait& wait, Context& context) {
  if (wait.context == core::WaitContext::kFetch) {
    if (const auto oldest = core::event_to_synchronize(ongoing_fetch_events_, core::kMaxOngoingFetchEvents,
                                                       [&](EventId e) { return device_.query(e); })) {
      host_sync_marked(*oldest, SyncTag::kFetchThrottle, &current_->stall_waits[static_cast<int>(context.phase)]);
      ongoing_fetch_events_.pop_front();
    }
  }
  plan_note("wait " + std::to_string(wait.param_id) + " handle " + std::to_string(wait.handle_id));
  // Fetch waits run under the all-gather stream; drains on the current (compute) stream.
  const StreamId stream = wait.context == core::WaitContext::kDrain ? compute_ : all_gather_;
  HandleMemory& handle = handles_.at(static_cast<std::size_t>(wait.handle_id));
  if (wait.first_on_handle && handle.alive && handle.collective) {
    handle.copy_out_stream = stream;
    EventId last_done = -1;
    for (const std::int64_t id : handle.gathers) {
      GatherMemory& memory = gathers_[static_cast<std::size_t>(id)];
      device_.wait(stream, memory.done);
      last_done = memory.done;
    }
    // Materialising a coalesced handle copies each parameter out of the flat buffer (the
    // W chunks of each, concatenated): ~2x the bucket until the flat buffer goes
    // (partition_parameters.py). A single parameter is a view of its buffer.
    const bool coalesced = handle.params.size() > 1;
    for (const std::int64_t id : handle.gathers) {
      GatherMemory& memory = gathers_[static_cast<std::size_t>(id)];
      for (std::size_t i = 0; i < memory.params.size(); ++i) {
        const int p = memory.params[i];
        const auto pi = static_cast<std::size_t>(p);
        const std::int64_t numel = model_.params[pi].numel;
        const std::int64_t part = partition_numel_[pi];
        if (!coalesced) {
          param_block_[pi] = memory.flat;  // the buffer is the parameter
          param_span_[pi] = memory.flat->span.sub(0, static_cast<std::uint64_t>(numel * element_bytes_));
          param_resident_bytes_[pi] = static_cast<std::int64_t>(memory.flat->span.bytes);
          memory.flat.reset();
          continue;
        }
        const DeviceBuffer block = allocate(numel * element_bytes_, stream, "a parameter copied out of its bucket");
        gathered_bytes_ += numel * element_bytes_;
        current_->peak_gathered_bytes = std::max(current_->peak_gathered_bytes, gathered_bytes_);
        for (int q = 0; q < world_size_; ++q) {
          const std::int64_t begin = q * part;
          const std::int64_t length = std::min(part, numel - begin);
          if (length <= 0) continue;
          device_.copy_device_to_device(
              stream, block.span.sub(static_cast<std::uint64_t>(begin * element_bytes_), static_cast<std::uint64_t>(length * element_bytes_)),
              memory.flat->span.sub(static_cast<std::uint64_t>((q * memory.slot_numel + memory.slot_offset_numel[i]) * element_bytes_),
                                    static_cast<std::uint64_t>(length * element_bytes_)));
        }
        param_block_[pi] = block;
        param_span_[pi] = block.span.sub(0, static_cast<std::uint64_t>(numel * element_bytes_));
        param_resident_bytes_[pi] = numel * element_bytes_;
      }
    }
    if (wait.context == core::WaitContext::kBlocking && last_done >= 0) {
      host_sync_marked(last_done, SyncTag::kPersistentRegather, comm_waits());
    }
  } else if (wait.first_on_handle && handle.alive) {
    // World size 1, a no-gather handle: its first wait synchronises the host with the stream
    // it runs under (NoGatherCoalescedHandle.wait, `current_stream().synchronize()` unless the
    // device is synchronized; sim/ranks/no_gather_handle.cpp), then __complete makes later waits free.
    // Inside a fetch the compute it idles is a stall; elsewhere, a host wait on communication.
    host_sync_marked(device_.record(stream), SyncTag::kNoGatherWait,
                     wait.context == core::WaitContext::kFetch ? &current_->stall_waits[static_cast<int>(context.phase)]
                                                               : comm_waits());
  }
  if (wait.context == core::WaitContext::kFetch) ongoing_fetch_events_.push_back(device_.record(all_gather_));
  if (wait.last_on_handle && handle.alive) {
    // The flat buffers of a coalesced handle go once no registry entry needs them.
    for (const std::int64_t id : handle.gathers) {
      GatherMemory& memory = gathers_[static_cast<std::size_t>(id)];
      if (memory.flat) {
        gathered_bytes_ -= static_cast<std::int64_t>(memory.flat->span.bytes);
        free_after(*memory.flat, handle.copy_out_stream);
      }
      memory = GatherMemory{};
    }
    handle = HandleMemory{};
  }
  (void)context;
}

// assert_ints_same_as_other_ranks (partitioned_param_coordinator.py): per list, rank 0's length and
// then its contents are broadcast (a SUM all-reduce to which other ranks contribute zeros) and
// compared with this rank's own; a difference fails the run naming the rank.
void RankExecutor::execute_trace_check(const core::RankTraceCheck& check) {
  if (world_size_ == 1) return;
  std::vector<std::vector<int>> lists;
  if (check.lists == 3) {
    const core::ParameterTrace& trace = coordinator_.parameter_trace();
    lists = {trace.modules(), trace.param_ids(), trace.param_step_ids()};
  } else {
    lists = {coordinator_.recorded_modules()};
  }
  static const char* const kNames[] = {"module trace", "parameter trace ids", "parameter trace steps"};
  for (std::size_t l = 0; l < lists.size(); ++l) {
    const std::vector<int>& mine = lists[l];
    const std::vector<double> length = agree_on_device({rank_ == 0 ? static_cast<double>(mine.size()) : 0.0}, ReduceOp::kSum, SyncTag::kTraceCheck);
    if (static_cast<std::size_t>(length[0]) != mine.size()) {
      throw std::runtime_error(std::string(kNames[l]) + " has " + std::to_string(mine.size()) +
                               " entries on rank " + std::to_string(rank_) + " but " +
                               std::to_string(static_cast<std::size_t>(length[0])) + " on rank 0");
    }
    std::vector<double> values(mine.size() + 1, 0.0);  // never empty: NCCL takes no zero-size buffers here
    if (rank_ == 0) std::copy(mine.begin(), mine.end(), values.begin());
    const std::vector<double> rank0 = agree_on_device(values, ReduceOp::kSum, SyncTag::kTraceCheck);
    for (std::size_t i = 0; i < mine.size(); ++i) {
      if (static_cast<int>(rank0[i]) != mine[i]) {
        throw std::runtime_error(std::string(kNames[l]) + " differs from rank 0's at entry " + std::to_string(i) +
                                 " on rank " + std::to_string(rank_));
      }
    }
  }
}

// Inside Coordinator::optimizer_step(): Adam over this rank's partition, then the gradient
// partition starts over.
void RankExecutor::optimizer_update() {
  ++optimizer_steps_;
  const EventId step_start = device_.record(compute_);
  if (offload_optimizer_) {
    cpu_adam();
  } else {
    // The reduced gradients were produced on the reduce stream (synchronised at the end of
    // backward, so already complete); the update runs on the compute stream.
    std::optional<DeviceBuffer> updated_params;  // offloaded shards: Adam's 16-bit output, copied down
    if (offload_param_) updated_params = allocate(shard_numel_ * element_bytes_, compute_, "updated parameter shards");
    device_.adam(compute_, adam_args(offload_param_ ? updated_params->span : shards_->span, grad_partition_->span,
                                     master_->span, exp_avg_->span, exp_avg_sq_->span));
    if (updated_params) {
      // Later H2D copies of the shards run after this on the all-gather stream (it waits below).
      device_.copy_device_to_host(compute_, host_shards_.data(), updated_params->span);
      free(*updated_params);
    }
  }
  device_.zero(compute_, grad_partition_->span);
  // The updated shards are what the next all-gathers copy in, and the reduce stream adds into
  // the cleared partition: neither may run ahead of the update.
  const EventId updated = device_.record(compute_);
  current_->optimizer_spans.emplace_back(step_start, updated);
  device_.wait(all_gather_, updated);
  device_.wait(reduce_, updated);
  plan_note("optimizer_update");
}

// Adam over this rank's shard at the current step, wherever its states live.
AdamArgs RankExecutor::adam_args(DeviceSpan params, DeviceSpan grads, DeviceSpan master, DeviceSpan exp_avg,
                                 DeviceSpan exp_avg_sq) const {
  AdamArgs adam;
  adam.params = params;
  adam.grads = grads;
  adam.master = master;
  adam.exp_avg = exp_avg;
  adam.exp_avg_sq = exp_avg_sq;
  adam.numel = shard_numel_;
  adam.param_type = type_;
  adam.step = optimizer_steps_;
  return adam;
}

// zero.offload_optimizer: DeepSpeedCPUAdam over the host partition on this rank's thread (the
// host is busy meanwhile, as in the simulator), then the updated 16-bit parameters go up to the
// device shards on the compute stream — or, with the shards offloaded too, are written in place.
// The gradients came down before the end-of-backward synchronisation, so no other wait is needed
// (DeepSpeed's host waits there too, stage3.py). Every earlier fetch copy out
// of the host shards was awaited by compute work that the reduce stream, and so that
// synchronisation, came after: rewriting them in place is safe.
void RankExecutor::cpu_adam() {
  auto host_span = [](void* host, std::int64_t bytes) {
    return DeviceSpan{reinterpret_cast<core::DeviceAddress>(host), static_cast<std::uint64_t>(bytes)};
  };
  HostStateBuffer& out = offload_param_ ? host_shards_ : host_updated_params_;
  doing_ = "CPU Adam";
  host::run_adam(adam_args(host_span(out.data(), shard_numel_ * element_bytes_),
                           host_span(host_grad_partition_.data(), shard_numel_ * element_bytes_),
                           host_span(host_master_.data(), shard_numel_ * 4),
                           host_span(host_exp_avg_.data(), shard_numel_ * 4),
                           host_span(host_exp_avg_sq_.data(), shard_numel_ * 4)));
  if (!offload_param_) device_.copy_host_to_device(compute_, shards_->span, host_updated_params_.data());
}

// --- inspection ---

std::vector<std::byte> RankExecutor::gathered_parameter(int param) {
  const DeviceSpan span = param_data(param);
  std::vector<std::byte> out(span.bytes);
  // The data is ready once compute's wait on the all-gather stream is passed.
  device_.copy_device_to_host(compute_, out.data(), span);
  host_sync(device_.record(compute_), SyncTag::kInspection);
  return out;
}

std::vector<std::byte> RankExecutor::gradient_partition(int param) {
  const auto pi = static_cast<std::size_t>(param);
  if (offload_optimizer_) {
    // What CPU Adam reads: the host copy, complete after the end-of-backward synchronisation.
    const auto* begin = host_grad_partition_.data() + shard_offset_numel_[pi] * element_bytes_;
    return {begin, begin + partition_numel_[pi] * element_bytes_};
  }
  const DeviceSpan span = grad_partition_->span.sub(static_cast<std::uint64_t>(shard_offset_numel_[pi] * element_bytes_),
                                                    static_cast<std::uint64_t>(partition_numel_[pi] * element_bytes_));
  std::vector<std::byte> out(span.bytes);
  device_.wait(compute_, device_.record(reduce_));
  device_.copy_device_to_host(compute_, out.data(), span);
  host_sync(device_.record(compute_), SyncTag::kInspection);
  return out;
}

std::vector<core::TimingSample> RankExecutor::samples_of(const RankIteration& it) {
  std::vector<core::FetchTiming> timings;
  for (const auto& f : it.fetches) {
    timings.push_back({f.phase, event_ns(f.start_event), event_ns(f.end_event), f.host_start_ns, f.host_end_ns,
                       f.peak_reserved_bytes});
  }
  return core::timing_samples(it.iteration, rank_, timings);
}

}  // namespace prefetchlab::gpu
