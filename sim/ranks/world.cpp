#include "sim/ranks/world.hpp"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <exception>
#include <iterator>
#include <sstream>
#include <thread>

#include "core/model/checkpoint_units.hpp"
#include "core/hardware/hardware_derived.hpp"
#include "core/metrics/exposed_comm.hpp"
#include "core/zero/persistence.hpp"
#include "core/zero/reduce_bucket.hpp"
#include "core/scenario/index_ranges.hpp"
#include "core/scenario/skipped_modules.hpp"

namespace prefetchlab::sim {

World::World(const core::Scenario& scenario, bool record_trace, RankSimulation rank_simulation,
             EventOrder event_order)
    : scenario_(scenario),
      collapse_(plan_rank_collapse(scenario, rank_simulation)),
      trace_(record_trace),
      cost_model_(make_collective_cost_model(scenario.cluster.hardware, scenario.cluster.calibration)),
      compute_(std::make_unique<ComputeModel>(scenario.cluster.hardware, scenario.cluster.calibration,
                                              scenario.training.dtype)) {
  if (!scenario_.output.trace_ranks.all()) {
    trace_rank_mask_ = scenario_.output.trace_ranks.mask(scenario_.cluster.world_size());
  }
  build_shared_context();
  limit_trace();
  const int world_size = collapse_.world_size;
  const int simulated = collapse_.simulated_ranks;
  agreement_ = std::make_unique<AgreementBoard>(simulated);
  shared_.agreement = agreement_.get();
  const auto& calibration = scenario.cluster.calibration;
  const bool shares_cores =
      calibration.contention_model == core::CalibrationConstants::ContentionModel::kSharedCores;
  const bool apart = event_order == EventOrder::kRankByRank && simulated > 1 && !shares_cores;
  for (int r = 0; r < (apart ? simulated : 1); ++r) engines_.push_back(std::make_unique<EventEngine>());
  std::vector<EventEngine*> rank_engines;
  for (int r = 0; r < simulated; ++r) rank_engines.push_back(engines_[apart ? static_cast<std::size_t>(r) : 0].get());
  communicator_ = std::make_unique<Communicator>(rank_engines, *cost_model_, world_size,
                                                 static_cast<int>(scenario.cluster.nodes), *this);
  // Only traced ranks' calls are read after they finish (trace.json names what they moved).
  std::vector<char> keep_calls(static_cast<std::size_t>(simulated), 0);
  for (int r = 0; r < simulated; ++r) keep_calls[static_cast<std::size_t>(r)] = trace_.records_rank(r) ? 1 : 0;
  communicator_->keep_calls_of(std::move(keep_calls));
  if (shares_cores) {
    shared_cores_ = std::make_unique<SharedCores>(calibration.shared_cores, world_size,
                                                  static_cast<int>(scenario.cluster.gpus_per_node),
                                                  calibration.shared_cores_collective_penalty, *communicator_);
    shared_.shared_cores = shared_cores_.get();
  }
  const auto iterations = static_cast<std::int32_t>(scenario.training.iterations);
  ranks_done_.assign(static_cast<std::size_t>(iterations) + 1, 0);
  try {
    for (int r = 0; r < simulated; ++r) {
      ranks_.push_back(std::make_unique<RankProcess>(r, *rank_engines[static_cast<std::size_t>(r)], resumer_,
                                                     *communicator_, shared_, *this,
                                                     r * (iterations + 1)));
    }
    if (apart) {
      for (auto& rank : ranks_) rank->memory().keep_history();
    }
  } catch (const core::MissingSampleColumn& e) {
    throw core::InputError({scenario.file.string(), 0}, "controller.policy",
                           std::string("policy '") + core::controller_policy_name(scenario.controller.policy) +
                               "' needs the sample column '" + e.column() + "', which the simulator does not measure yet",
                           "a policy configuration that does not need it (e.g. no memory_budget_bytes)");
  }
}

World::~World() = default;

std::string World::stands_for(int rank) const {
  if (!collapse_.collapsed()) return std::to_string(rank);
  return "0-" + std::to_string(collapse_.world_size - 1);
}

std::vector<char> World::simulated_rank_mask(const std::vector<char>& world_mask) const {
  if (world_mask.empty() || !collapse_.collapsed()) return world_mask;
  // The representative stands for every rank: it is kept when any of them is.
  std::vector<char> mask(world_mask.size(), 0);
  mask[0] = std::any_of(world_mask.begin(), world_mask.end(), [](char keep) { return keep != 0; }) ? 1 : 0;
  return mask;
}

std::vector<int> World::rows_for(int rank, const std::vector<char>& world_mask) const {
  if (!collapse_.collapsed()) return {rank};
  std::vector<int> ranks;
  for (int r = 0; r < collapse_.world_size; ++r) {
    if (world_mask.empty() || world_mask[static_cast<std::size_t>(r)]) ranks.push_back(r);
  }
  return ranks;
}

void World::take_memory_timeline(RankProcess& rank, bool skip_empty, TimeNs through_ns) {
  memory_points_.clear();  // reused: its capacity carries over to the next iteration
  rank.take_memory_timeline(memory_points_, through_ns);
  const std::vector<int> rows = rows_for(rank.rank(), trace_rank_mask_);
  const std::size_t count = memory_points_.size();
  for (const int row_rank : rows) {
    for (std::size_t i = 0; i < count; ++i) memory_points_[i].rank = row_rank;
    if (sink_ && sink_->on_memory) {
      if (count > 0 || !skip_empty) sink_->on_memory(memory_points_);
    } else {
      result_.metrics.memory.insert(result_.metrics.memory.end(), memory_points_.begin(), memory_points_.end());
    }
  }
}

// The data-parallel communicator runs one collective at a time, so "a collective is running on
// this GPU" is exactly the span between these two calls, on every rank.
bool World::computing_at_arrival(int rank) {
  return ranks_[static_cast<std::size_t>(rank)]->compute_stream().running_kernel();
}

double World::on_collective_start(std::int64_t, const CollectiveCall&, bool computing) {
  if (shared_cores_) return shared_cores_->collective_started();
  return computing ? 1.0 + scenario_.cluster.calibration.contention_collective_factor : 1.0;
}

void World::on_rank_collective_start(int rank) {
  if (shared_cores_) return;
  ranks_[static_cast<std::size_t>(rank)]->compute_stream().set_slowdown(
      1.0 + scenario_.cluster.calibration.contention_compute_factor);
}

void World::on_collective_done(std::int64_t, const CollectiveCall&, TimeNs, TimeNs) {
  if (shared_cores_) shared_cores_->collective_finished();
}

void World::on_rank_collective_done(int rank, std::int64_t seq, const CollectiveCall& call, TimeNs start_ns,
                                    TimeNs end_ns) {
  RankProcess& process = *ranks_[static_cast<std::size_t>(rank)];
  if (!shared_cores_) process.compute_stream().set_slowdown(1.0);
  process.on_collective_done(call, start_ns, end_ns);
  if (!trace_.enabled() || !trace_.records_rank(rank)) return;
  TraceSpan span;
  span.start_ns = start_ns;
  span.duration_ns = end_ns - start_ns;
  span.rank = rank;
  span.label = call.label;
  span.iteration = call.iteration;
  span.collective_seq = seq;
  span.track = Track::kNccl;
  span.kind = SpanKind::kCollective;
  span.phase = static_cast<std::uint8_t>(call.phase);
  trace_.add(span);
}

// Bytes a span takes in trace.json, an estimate on the high side: Llama-2-70B on 32 ranks
// averages 134 (175 MB for 1.30 M spans), collectives naming many modules take more.
constexpr std::size_t kTraceBytesPerSpanEstimate = 200;

void World::limit_trace() {
  const core::OutputConfig& output = scenario_.output;
  const std::size_t max_spans =
      output.timeline_budget_bytes > 0
          ? std::max<std::size_t>(1, static_cast<std::size_t>(output.timeline_budget_bytes) / kTraceBytesPerSpanEstimate)
          : 0;
  trace_.limit(collapse_.simulated_ranks, simulated_rank_mask(trace_rank_mask_),
               output.trace_iterations.all() ? std::vector<char>{}
                                             : output.trace_iterations.mask(scenario_.training.iterations + 1),
               max_spans);
}

void World::build_shared_context() {
  const core::ModelSpec& model = scenario_.model;
  shared_.scenario = &scenario_;
  shared_.compute = compute_.get();
  shared_.labels = &labels_;
  shared_.trace = &trace_;
  shared_.persistent = core::persistent_params(model, scenario_.zero.param_persistence_threshold_numel,
                                               scenario_.zero.model_persistence_threshold_numel);
  shared_.grad_uses = core::gradient_uses(model);
  shared_.timeline_rank_mask = simulated_rank_mask(trace_rank_mask_);
  // Every rank runs an iteration at the same length: lengths come from one stream of the
  // scenario's seed, not from each rank's data. Real data-parallel ranks read different
  // batches, and DeepSpeed does not pad or bucket lengths across ranks per global batch; we
  // simply assume the lengths agree, which keeps every rank's collectives matched (ranks at
  // different lengths would wait on each other's compute at every collective; not modelled).
  seq_len_ = scenario_.training.seq_len_distribution.draw(scenario_.noise.seed, scenario_.training.iterations);
  for (const std::int64_t s : seq_len_) {
    auto [it, fresh] = length_costs_.try_emplace(s);
    if (fresh) it->second = length_costs(model, *compute_, scenario_.training.micro_batch, s, scenario_.training.dtype);
    shared_.iteration_costs.push_back(&it->second);
  }
  for (const auto& module : model.modules) {
    const std::string name = module.display_name();
    shared_.forward_label.push_back(labels_.intern("fwd " + name));
    shared_.backward_label.push_back(labels_.intern("bwd " + name));
  }
  // Checkpoint units: the layers HF's gradient_checkpointing wraps.
  core::CheckpointUnits units = core::checkpoint_units(model, scenario_.training.activation_checkpointing);
  shared_.checkpoint_unit = std::move(units.unit);
  shared_.inside_checkpoint_unit = std::move(units.inside);
  shared_.host_to_device_bytes_per_s = core::host_to_device_bytes_per_s(scenario_.cluster.hardware);
  shared_.device_to_host_bytes_per_s = core::device_to_host_bytes_per_s(scenario_.cluster.hardware);
  shared_.label_copy_in = labels_.intern("all-gather copy-in");
  shared_.label_host_copy = labels_.intern("host<->device copy (offload)");
  shared_.label_copy_out = labels_.intern("all-gather copy-out");
  shared_.label_bucket_copy = labels_.intern("gradient bucket copy");
  shared_.label_partition_copy = labels_.intern("gradient partition copy");
  shared_.label_gradient_divide = labels_.intern("gradient divide by world size");
  shared_.label_optimizer = labels_.intern("optimizer step (Adam)");
  shared_.label_stall = labels_.intern("stall: waiting for parameters");
  shared_.label_hook_fetch = labels_.intern("fetch_sub_module");
  shared_.label_hook_release = labels_.intern("release_sub_module");
  shared_.label_iteration = labels_.intern("iteration");
  shared_.label_trace_check = labels_.intern("trace check");
  const char* kinds[] = {"on_demand", "prefetch", "persistent_regather", "grad_bucket", "trace_check", "agreement"};
  for (int k = 0; k < 6; ++k) shared_.kind_label[k] = labels_.intern(kinds[k]);

  if (scenario_.moe.enabled) {
    routing_ = std::make_unique<core::ExpertRouting>(scenario_);
    shared_.routing = routing_.get();
  }
  shared_.skipped = core::skipped_modules(scenario_.divergence, static_cast<int>(scenario_.cluster.world_size()),
                                         model.modules.size());
}

void World::on_event(std::int64_t tag) {
  const auto per_rank = static_cast<std::int64_t>(ranks_done_.size());
  const auto iteration = static_cast<std::size_t>(tag % per_rank);
  // Ranks on threads end iterations at once.
  std::atomic_ref<int>(ranks_done_[iteration]).fetch_add(1, std::memory_order_relaxed);
  // Where ranks run apart, the run loop finalizes once no rank can still stop before the
  // iteration's end (run_events).
  if (!ranks_apart()) finalize_ready_iterations(INT64_MAX);
}

void World::finalize_ready_iterations(TimeNs through_ns) {
  trace_.apply_budget();  // no rank records now: it keeps the trace's memory near its budget
  while (finalized_ + 1 < static_cast<std::int32_t>(ranks_done_.size()) &&
         ranks_done_[static_cast<std::size_t>(finalized_ + 1)] == ranks()) {
    // Where ranks run apart some may be past this iteration's end already: it is finalized once
    // no rank can stop before its end, and they give their timeline up to it, as they would have
    // with every rank in one queue.
    const TimeNs end_ns = ranks_apart() ? iteration_end_ns(finalized_ + 1) : INT64_MAX;
    if (through_ns != INT64_MAX && end_ns > through_ns) break;
    ++finalized_;
    std::vector<core::TimingSample> samples;
    std::vector<core::BucketRecord> buckets;
    const bool with_samples = !sink_ || !sink_->on_iteration || sink_->wants_samples;
    const core::IterationRecord record = combine(finalized_, with_samples, samples, buckets);
    for (auto& rank : ranks_) {
      rank->forget_before_iteration(finalized_);
      take_memory_timeline(*rank, false, end_ns);
      rank->memory().forget_history_through(end_ns);
    }
    result_.metrics.iterations.push_back(record);
    // With a sink the rows are streamed out; keeping them too would grow without bound.
    if (sink_ && sink_->on_iteration) {
      sink_->on_iteration(record, samples, buckets);
    } else {
      result_.metrics.samples.insert(result_.metrics.samples.end(), std::make_move_iterator(samples.begin()),
                                     std::make_move_iterator(samples.end()));
      result_.metrics.buckets.insert(result_.metrics.buckets.end(), buckets.begin(), buckets.end());
    }
  }
}

TimeNs World::iteration_end_ns(std::int32_t iteration) const {
  TimeNs end_ns = 0;
  for (const auto& rank : ranks_) {
    end_ns = std::max(end_ns, rank->events().signaled_ns(rank->iteration(iteration).iteration_end_event));
  }
  return end_ns;
}

core::IterationRecord World::combine(std::int32_t iteration, bool with_samples,
                                     std::vector<core::TimingSample>& samples,
                                     std::vector<core::BucketRecord>& buckets) const {
  core::IterationRecord record;
  record.iteration = iteration;
  bool first = true;
  for (const auto& rank : ranks_) {
    const RankIteration& it = rank->iteration(iteration);
    const EventTable& events = rank->events();
    const TimeNs start = iteration == 1 ? 0 : rank->iteration(iteration - 1).end_ns;
    const TimeNs forward_end = events.signaled_ns(it.forward_end_event);
    const TimeNs backward_compute_end = events.signaled_ns(it.backward_compute_end_event);
    const TimeNs backward_end = events.signaled_ns(it.backward_end_event);
    const TimeNs end = events.signaled_ns(it.iteration_end_event);
    // Exposed communication as core/metrics/exposed_comm.hpp defines it. The marker at the
    // end-of-backward sync completes at the later of backward's last kernel and the host reaching
    // the sync; the one after it, when the host saw the sync complete (compute is idle then).
    const core::ExposedComm exposed{
        .forward_stall_ns = it.stall_ns[0],
        .backward_stall_ns = it.stall_ns[1],
        .host_wait_idle_ns = it.host_wait_idle_ns,
        .reduce_tail_ns = core::compute_idle_between_markers_ns(
            std::max(backward_compute_end, it.reduce_sync_start_ns), it.reduce_scatter_done_ns)};

    record.optimizer_step = it.optimizer_step;
    record.seq_len = seq_len_[static_cast<std::size_t>(iteration - 1)];
    record.model_flops_per_gpu = shared_.iteration_costs[static_cast<std::size_t>(iteration - 1)]->model_flops_per_gpu;
    record.trace_mode = it.trace_mode;
    record.trace_invalidations = std::max(record.trace_invalidations, it.trace_invalidations);
    record.untraced_stall_ns = std::max(record.untraced_stall_ns, it.untraced_stall_ns);
    record.dropped_tokens = std::max(record.dropped_tokens, it.dropped_tokens);
    core::fold_rank(record,
                    {.start_ns = start,
                     .forward_end_ns = forward_end,
                     .backward_end_ns = backward_end,
                     .end_ns = end,
                     .compute_ns = it.compute_ns,
                     .forward_stall_ns = it.stall_ns[0],
                     .backward_stall_ns = it.stall_ns[1],
                     .exposed_comm_ns = exposed.total_ns(),
                     .all_gather_ns = it.all_gather_ns,
                     .reduce_scatter_ns = it.reduce_scatter_ns,
                     .all_gather_count = it.all_gather_count,
                     .reduce_scatter_count = it.reduce_scatter_count,
                     .gathered_numel = it.gathered_numel,
                     .bucket_numel = it.bucket_numel,
                     .peak_gathered_param_bytes = it.peak_gathered_bytes,
                     .peak_allocated_bytes = it.peak_allocated_bytes,
                     .peak_reserved_bytes = it.peak_reserved_bytes},
                    first);
    first = false;

    // A row per rank of the job: the representative's for each rank it stands for.
    if (collapse_.collapsed()) {
      for (int r = 0; r < collapse_.world_size; ++r) buckets.push_back({iteration, r, it.bucket_numel});
    } else {
      buckets.push_back({iteration, rank->rank(), it.bucket_numel});
    }
    if (with_samples && (!sink_ || sample_mask_.empty() || sample_mask_[static_cast<std::size_t>(rank->rank())])) {
      auto rank_samples = rank->samples_of(iteration);
      const std::vector<int> rows = rows_for(rank->rank(), sink_ ? sink_->sample_rank_mask : std::vector<char>{});
      for (std::size_t k = 0; k < rows.size(); ++k) {
        for (auto& sample : rank_samples) sample.rank = rows[k];
        if (k + 1 < rows.size()) {
          samples.insert(samples.end(), rank_samples.begin(), rank_samples.end());
        } else {  // the last set moved, not copied: each sample owns its vector of extra column values
          samples.insert(samples.end(), std::make_move_iterator(rank_samples.begin()),
                         std::make_move_iterator(rank_samples.end()));
        }
      }
    }
  }
  return record;
}

std::string World::describe_mismatch(const CollectiveMismatch& mismatch) const {
  // Ranks that asked for the same thing are listed together: "ranks 0-2,4-7: ...; rank 3: ...".
  auto describe_call = [&](const CollectiveCall& call) {
    std::string text = std::string(collective_kind_name(call.kind)) + " of " + std::to_string(call.bytes) + " bytes";
    if (call.issued_by >= 0) {
      const std::string& name = scenario_.model.modules[static_cast<std::size_t>(call.issued_by)].name;
      text += " issued by " + (name.empty() ? std::string("the root module") : name);
    }
    return text;
  };
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (std::size_t i = 0; i < mismatch.ranks.size(); ++i) {
    const std::string what = describe_call(mismatch.calls[i]);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == what; });
    if (it == groups.end()) {
      groups.emplace_back(what, std::vector<int>{});
      it = groups.end() - 1;
    }
    it->second.push_back(mismatch.ranks[i]);
  }
  std::ostringstream out;
  out << "collective mismatch at communicator call " << mismatch.seq << " (iteration "
      << mismatch.calls.front().iteration << "): ";
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const auto& ranks = groups[g].second;
    out << (g ? "; " : "") << (ranks.size() > 1 ? "ranks " : "rank ")
        << core::index_ranges(std::vector<std::size_t>(ranks.begin(), ranks.end()), ",") << ": " << groups[g].first;
  }
  return out.str();
}

WorldResult World::run(const IterationSink& sink, const std::atomic<bool>* interrupt) {
  sink_ = &sink;
  sample_mask_ = simulated_rank_mask(sink.sample_rank_mask);
  result_ = WorldResult{};
  stop_ns_ = INT64_MAX;
  stopped_rank_ = -1;
  stop_at_mismatch_ = false;
  result_.ranks = collapse_;
  const auto& training = scenario_.training;
  result_.metrics.facts.ranks = collapse_.world_size;
  result_.metrics.report_trace_invalidations = routing_ != nullptr;
  result_.metrics.facts.micro_batch = training.micro_batch;
  result_.metrics.facts.seq_len = training.seq_len;  // the longest a distribution draws
  result_.metrics.facts.seq_len_varies = training.seq_len_distribution.varies();
  result_.metrics.facts.grad_accum = training.grad_accum;
  // MFU convention: forward + backward = 3 x forward model FLOPs (Korthikanti et al. 2022, App. A).
  result_.metrics.facts.model_flops_per_gpu_iteration =
      3 * scenario_.model.forward_flops(training.micro_batch, training.seq_len);

  // Ranks apart note their arrivals and the collectives start between sweeps (so that any
  // number of threads gives the same run): from the first step, which may reach one.
  if (ranks_apart()) communicator_->defer_starts(true);
  std::vector<HostTask> tasks;
  for (auto& rank : ranks_) tasks.push_back(rank->run());
  for (auto& task : tasks) task.start();

  if (!run_events(interrupt)) {
    result_.status = core::RunStatus::kInterrupted;
    result_.message = "interrupted after " + std::to_string(finalized_) + " finished iterations";
  }
  for (auto& task : tasks) task.rethrow_if_failed();
  trace_.apply_budget();
  for (const auto& engine : engines_) result_.events_processed += engine->events_processed();
  // What the unfinished iteration recorded (an OOM, a hang, an interrupt) still goes out: the
  // memory timeline up to the stop is what explains it.
  // Ranks that ran ahead of a stop give their timeline up to it, as one queue would have run.
  for (auto& rank : ranks_) take_memory_timeline(*rank, true, stop_ns_);
  for (const auto& rank : ranks_) {
    const RankMemory& memory = rank->memory();
    // As they stood at a stop that ranks ahead of it had run past.
    const bool at_stop = stop_ns_ != INT64_MAX;
    const auto retries = at_stop ? memory.alloc_retries_at(stop_ns_) : memory.allocator().stats().num_alloc_retries;
    result_.metrics.num_alloc_retries = std::max(result_.metrics.num_alloc_retries, static_cast<std::int64_t>(retries));
    const core::PeakMemoryBreakdown peak = at_stop ? memory.peak_breakdown_at(stop_ns_) : memory.peak_breakdown();
    if (!result_.metrics.peak_memory || peak.reserved_bytes > result_.metrics.peak_memory->reserved_bytes) {
      result_.metrics.peak_memory = peak;
    }
  }
  // The first rank to run out, in time (where ranks ran apart, several may have).
  const auto oom_rank = stopped_rank_ >= 0 && ranks_[static_cast<std::size_t>(stopped_rank_)]->out_of_memory()
                            ? ranks_.begin() + stopped_rank_
                            : std::find_if(ranks_.begin(), ranks_.end(), [](const auto& r) { return r->out_of_memory(); });
  if (oom_rank != ranks_.end()) {
    result_.status = core::RunStatus::kOutOfMemory;
    result_.message = *(*oom_rank)->out_of_memory();
  } else if (communicator_->mismatch()) {
    result_.status = core::RunStatus::kCollectiveMismatch;
    result_.message = describe_mismatch(*communicator_->mismatch());
  } else if (result_.status == core::RunStatus::kOk) {
    const bool all_done = std::all_of(tasks.begin(), tasks.end(), [](const HostTask& t) { return t.done(); });
    if (!all_done) {
      // Nothing left to happen yet some host is still blocked: ranks wait on collectives that
      // others never issue — a hang.
      std::ostringstream out;
      out << "hang: ranks blocked on a collective that not every rank issued (ranks waiting:";
      for (const int r : communicator_->ranks_waiting()) out << " " << r;
      out << ") after " << finalized_ << " finished iterations";
      result_.status = core::RunStatus::kCollectiveMismatch;
      result_.message = out.str();
    }
  }
  sink_ = nullptr;
  return std::move(result_);
}

bool World::stopping() const {
  return communicator_->mismatch() ||
         std::any_of(engines_.begin(), engines_.end(), [](const auto& engine) { return engine->stopped(); });
}

bool World::run_events(const std::atomic<bool>* interrupt) {
  std::uint64_t since_check = 0;
  const auto interrupted = [&] {
    if (!interrupt || ++since_check < 4096) return false;
    since_check = 0;
    return interrupt->load(std::memory_order_relaxed);
  };
  if (!ranks_apart()) {
    EventEngine& engine = *engines_.front();
    while (engine.run_one()) {
      if (interrupted()) return false;
      if (stopping()) break;  // a rank ran out of memory, or a mismatch
    }
    return true;
  }
  // Rank by rank, each as far as it can go alone: up to the start of a collective it waits in
  // (the latest arrival so far), or without bound when it waits in none. A rank that has not
  // reached the collective yet will, so each sweep moves every rank about one collective on.
  // When no rank can move, the collective they wait in will never start (some rank never
  // issues it): every rank then runs out its queue, as one queue would have, and the world
  // reports the hang.
  //
  // A rank that stops the world (out of memory, a mismatch at its arrival) does so at its own
  // time: the others, some behind it, first run up to that time, and the earliest stop is the
  // one reported, as in one queue. An iteration is finalized (written out) only once every rank
  // is past its end, so a stop before that end, found later, leaves it out as one queue would.
  //
  // The sweeps run on threads_ threads (one with DeepSpeed's frames) until a stop, a hang or the
  // end, and this loop, on one, takes over from there.
  const bool finished = run_sweeps(interrupt);
  communicator_->defer_starts(false);
  if (!finished) return false;
  bool unbounded = false;
  for (;;) {
    bool moved = false;
    for (std::size_t r = 0; r < engines_.size(); ++r) {
      EventEngine& engine = *engines_[r];
      const int rank = static_cast<int>(r);
      const RankProcess& process = *ranks_[r];
      while (!engine.empty() && !process.out_of_memory()) {
        const bool bounded = !unbounded && communicator_->horizon_ns(rank) != Communicator::kNoHorizon;
        if ((bounded || stop_ns_ != INT64_MAX) &&
            (engine.next_time_ns() > stop_ns_ - (stop_at_mismatch_ ? 1 : 0) ||
             (bounded && engine.next_time_ns() >= communicator_->horizon_ns(rank)))) {
          break;
        }
        const bool mismatched = communicator_->mismatch().has_value();
        // A host step inside this event may skip its own event only where this loop would
        // have run that event next (EventEngine::advance_inline); an arrival lowers it further.
        TimeNs limit_ns = bounded ? communicator_->horizon_ns(rank) : INT64_MAX;
        if (stop_ns_ != INT64_MAX) limit_ns = std::min(limit_ns, stop_ns_ - (stop_at_mismatch_ ? 1 : 0) + 1);
        engine.set_limit_ns(limit_ns);
        engine.run_one();
        moved = true;
        if (interrupted()) return false;
        if (!engine.stopped()) continue;
        // This rank ran out of memory, or its arrival showed a mismatch. It stops the world at
        // its time unless an earlier stop is found; the rank that found a mismatch runs on up to
        // it like the others (its arrival may have come before the last one in time).
        engine.resume();
        const bool out_of_memory = process.out_of_memory().has_value();
        if (!out_of_memory && mismatched) continue;
        note_stop(rank, out_of_memory ? engine.now_ns() : communicator_->mismatch()->time_ns, !out_of_memory);
      }
    }
    if (stop_ns_ == INT64_MAX) finalize_ready_iterations(everyone_past_ns());
    if (!moved) {
      if (unbounded) break;
      unbounded = true;
    }
  }
  if (stop_ns_ != INT64_MAX) finalize_ready_iterations(stop_ns_);
  return true;
}

void World::note_stop(int rank, TimeNs stop_ns, bool at_mismatch) {
  if (stop_ns < stop_ns_ || (stop_ns == stop_ns_ && rank < stopped_rank_)) {
    stop_ns_ = stop_ns;
    stopped_rank_ = rank;
    // A mismatch shows at its last arrival, an event every rank has run: what the others have
    // at that time comes after it. An out-of-memory shows inside an event of its own: the
    // others run that time's events up to their own (identical ranks stop at the same
    // allocation).
    stop_at_mismatch_ = at_mismatch;
  }
}

TimeNs World::everyone_past_ns() const {
  TimeNs past_ns = INT64_MAX;  // every rank has run all its events before this
  for (const auto& engine : engines_) {
    if (!engine->empty()) past_ns = std::min(past_ns, engine->next_time_ns());
  }
  return past_ns;
}

bool World::run_sweeps(const std::atomic<bool>* interrupt) {
  // DeepSpeed's frames (for the Kineto export, a few ranks at most) run on one.
  const auto threads = static_cast<std::size_t>(shared_.deepspeed_frames ? 1 : std::min<int>(threads_, ranks()));
  std::vector<char> moved(threads, 0);
  std::vector<char> interrupted(threads, 0);
  std::vector<std::exception_ptr> errors(threads);
  bool done = false;
  bool finished = true;  // false when interrupted
  // Between sweeps, on one thread while the others wait: what one rank's run may not touch.
  const auto between_sweeps = [&]() noexcept {
    try {
      if (std::any_of(interrupted.begin(), interrupted.end(), [](char i) { return i != 0; })) finished = false;
      if (!finished || std::any_of(errors.begin(), errors.end(), [](const auto& e) { return e != nullptr; })) {
        done = true;
        return;
      }
      for (std::size_t r = 0; r < engines_.size(); ++r) {
        EventEngine& engine = *engines_[r];
        if (!engine.stopped()) continue;
        engine.resume();  // out of memory: arrivals are deferred, so no mismatch stops a rank
        note_stop(static_cast<int>(r), engine.now_ns(), false);
      }
      trace_.apply_budget();
      const bool started = communicator_->settle_arrivals();
      if (const auto& mismatch = communicator_->mismatch()) note_stop(ranks() - 1, mismatch->time_ns, true);
      if (stop_ns_ == INT64_MAX) finalize_ready_iterations(everyone_past_ns());
      // A stop or a hang: the one-thread loop knows what to do from here.
      done = stop_ns_ != INT64_MAX || (!started && std::none_of(moved.begin(), moved.end(), [](char m) { return m != 0; }));
    } catch (...) {
      errors.front() = errors.front() ? errors.front() : std::current_exception();
      done = true;
    }
  };
  std::barrier sync(static_cast<std::ptrdiff_t>(threads), between_sweeps);
  const auto work = [&](std::size_t t) {
    // Ranks stay on one thread (their coroutine frames come from its pool): a block each.
    const std::size_t first = t * engines_.size() / threads;
    const std::size_t last = (t + 1) * engines_.size() / threads;
    std::uint64_t since_check = 0;
    for (;;) {
      moved[t] = 0;
      try {
        for (std::size_t r = first; r < last && !interrupted[t]; ++r) {
          EventEngine& engine = *engines_[r];
          const int rank = static_cast<int>(r);
          while (!engine.empty() && !engine.stopped() && !ranks_[r]->out_of_memory()) {
            const TimeNs horizon_ns = communicator_->horizon_ns(rank);
            if (engine.next_time_ns() >= horizon_ns) break;
            engine.set_limit_ns(horizon_ns);
            engine.run_one();
            moved[t] = 1;
            if (interrupt && ++since_check == 4096) {
              since_check = 0;
              if (interrupt->load(std::memory_order_relaxed)) {
                interrupted[t] = 1;
                break;
              }
            }
          }
        }
      } catch (...) {
        errors[t] = std::current_exception();
      }
      sync.arrive_and_wait();
      if (done) return;
    }
  };
  {
    std::vector<std::jthread> helpers;
    for (std::size_t t = 1; t < threads; ++t) helpers.emplace_back(work, t);
    work(0);
  }
  for (const auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  return finished;
}

}  // namespace prefetchlab::sim
