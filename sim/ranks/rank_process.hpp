#pragma once
// One data-parallel rank: its host thread (DeepSpeed's Python: hooks, coordinator calls, launches,
// the places it blocks), its compute / all-gather / reduce-scatter streams and its NCCL stream. The
// host program follows DeepSpeed's hook order (parameter_offload.py,
// partitioned_param_coordinator.py, stage3.py) and executes the core::Coordinator's plans; it never
// decides what to gather itself.
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <span>
#include <vector>

#include "core/zero/coordinator.hpp"
#include "core/control/controller_driver.hpp"
#include "core/scenario/random_stream.hpp"
#include "core/zero/rank_program.hpp"
#include "core/scenario/scenario.hpp"
#include "core/scenario/skipped_modules.hpp"
#include "core/scenario/expert_routing.hpp"
#include "sim/ranks/communicator.hpp"
#include "sim/cost/compute_model.hpp"
#include "sim/trace/deepspeed_frames.hpp"
#include "sim/ranks/device_stream.hpp"
#include "sim/engine/host_task.hpp"
#include "sim/engine/id_window.hpp"
#include "sim/trace/label_table.hpp"
#include "sim/cost/length_costs.hpp"
#include "sim/ranks/rank_memory.hpp"
#include "sim/trace/trace_recorder.hpp"

namespace prefetchlab::sim {

class SharedCores;  // sim/ranks/shared_cores.hpp: only a pointer here

// What a rank measured in one iteration, before the world combines ranks.
struct RankIteration {
  std::int32_t iteration = 0;
  bool optimizer_step = false;
  core::TraceMode trace_mode = core::TraceMode::kInvalid;
  std::int64_t bucket_numel = 0;
  // Device events on the compute stream marking the phases (kept signalled times, read at the end).
  std::int32_t forward_end_event = -1;
  std::int32_t backward_compute_end_event = -1;
  std::int32_t backward_end_event = -1;
  std::int32_t iteration_end_event = -1;
  TimeNs reduce_sync_start_ns = 0;    // host reached the end-of-backward sync
  TimeNs reduce_scatter_done_ns = 0;  // host saw the end-of-backward sync complete
  // Compute idle while the host waited on communication (the persistent re-gather, reduce
  // events, trace checks, the controller's agreement): core::compute_idle_between_markers_ns.
  TimeNs host_wait_idle_ns = 0;
  TimeNs compute_ns = 0;
  // Compute idle because of parameter fetches, per core::Phase: blocked on the all-gather
  // stream, or drained while the host was held by the fetch-event throttle.
  TimeNs stall_ns[2] = {0, 0};
  TimeNs all_gather_ns = 0;
  TimeNs reduce_scatter_ns = 0;
  std::int64_t all_gather_count = 0;
  std::int64_t reduce_scatter_count = 0;
  std::int64_t gathered_numel = 0;
  std::int64_t peak_gathered_bytes = 0;
  std::int64_t peak_allocated_bytes = 0;  // caching allocator, while this iteration's host work ran
  std::int64_t peak_reserved_bytes = 0;
  int trace_invalidations = 0;
  // Compute idle on parameter fetches after iteration 1 while the trace was not COMPLETE (after
  // an invalidation, and in the re-recording iteration): what losing the trace cost.
  TimeNs untraced_stall_ns = 0;
  std::int64_t dropped_tokens = 0;  // MoE: token-expert assignments over capacity
  // One per fetch: device events at its start and end, host times at the same points.
  struct Fetch {
    std::uint8_t phase = 0;
    std::int32_t start_event = -1;
    std::int32_t end_event = -1;
    TimeNs host_start_ns = 0;
    TimeNs host_end_ns = 0;
    std::int64_t peak_reserved_bytes = 0;  // since the iteration's reset_step, at the fetch's end
  };
  std::vector<Fetch> fetches;
  std::int32_t first_event = 0;  // the first device event this iteration created
  TimeNs end_ns = -1;            // iteration_end_event's time, kept once the world has read it
  bool samples_wanted = false;   // the controller asked for this iteration's samples
};

// Cross-rank agreement for controllers (the all-reduce MAX / broadcast of the follow-up): ranks
// post their proposals per round, and read the combined one once the round's collective is done.
class AgreementBoard {
 public:
  explicit AgreementBoard(int ranks) : ranks_(ranks) {}
  void post(std::int64_t round, int rank, core::Proposal proposal);
  core::Proposal agreed(std::int64_t round, core::Agreement agreement, int rank) const;

 private:
  int ranks_;
  mutable std::mutex mutex_;  // ranks on threads post at once (World::set_threads)
  std::map<std::int64_t, std::vector<core::Proposal>> rounds_;
};

// Per-scenario facts every rank shares, computed once by the world.
struct SharedRankContext {
  const core::Scenario* scenario = nullptr;
  const ComputeModel* compute = nullptr;
  LabelTable* labels = nullptr;
  TraceRecorder* trace = nullptr;
  SharedCores* shared_cores = nullptr;  // contention_model: shared_cores (else contention factors)
  // Per iteration (index iteration - 1), its sequence length's costs: one LengthCosts per
  // distinct length the run draws (training.seq_len_distribution), shared by every rank.
  std::vector<const LengthCosts*> iteration_costs;
  // Activation checkpointing: the transformer layers (units) and the modules inside them.
  std::vector<bool> checkpoint_unit;
  std::vector<bool> inside_checkpoint_unit;
  // Pinned host<->device copy rates (offload), bytes per second.
  double host_to_device_bytes_per_s = 0;
  double device_to_host_bytes_per_s = 0;
  std::vector<std::int32_t> forward_label;
  std::vector<std::int32_t> backward_label;
  std::vector<bool> persistent;     // per param
  std::vector<int> grad_uses;       // per param: modules using it (a tied weight: 2)
  // Modules skipped on an iteration (data-dependent control flow): per (iteration, rank), a flag
  // per module; absent = nothing skipped.
  core::SkippedModules skipped;
  // MoE routing (scenario `moe:`): tokens per expert module each iteration; null without it.
  const core::ExpertRouting* routing = nullptr;
  std::int32_t label_copy_in = -1, label_copy_out = -1, label_bucket_copy = -1,
               label_partition_copy = -1, label_gradient_divide = -1, label_optimizer = -1, label_stall = -1,
               label_hook_fetch = -1, label_hook_release = -1, label_iteration = -1,
               label_trace_check = -1, label_host_copy = -1;
  std::int32_t kind_label[6] = {};  // on_demand, prefetch, persistent_regather, grad_bucket, trace_check, agreement
  AgreementBoard* agreement = nullptr;
  // output.trace_ranks by simulated rank (a representative is kept when any rank it stands for
  // is): the ranks that record a memory timeline. Empty = every rank.
  std::vector<char> timeline_rank_mask;
  // Log DeepSpeed's Python frames on the ranks the trace records (the Kineto export's
  // python_function events; sim/trace/deepspeed_frames.hpp).
  bool deepspeed_frames = false;
};

class RankProcess final : public StreamObserver {
 public:
  RankProcess(int rank, EventEngine& engine, CoroutineResumer& resumer, Communicator& communicator,
              const SharedRankContext& shared, EventHandler& iteration_done, std::int32_t iteration_done_base);

  HostTask run();  // all iterations

  int rank() const { return rank_; }
  const RankIteration& iteration(std::int32_t i) const { return iterations_.at(static_cast<std::size_t>(i - 1)); }
  // The iteration's timing samples (samples.csv rows), in fetch order; every event they read
  // must be signalled.
  std::vector<core::TimingSample> samples_of(std::int32_t i) const;
  // The world has turned iteration `i` into records: its per-fetch detail and every device event
  // from before it (all signalled by now) can go, so long runs keep constant memory.
  void forget_before_iteration(std::int32_t i);
  const EventTable& events() const { return events_; }
  const RankMemory& memory() const { return *memory_; }
  RankMemory& memory() { return *memory_; }
  void take_memory_timeline(std::vector<core::MemoryPoint>& out, TimeNs through_ns = INT64_MAX) {
    memory_->take_timeline(out, through_ns);
  }
  // Set when an allocation failed on this rank: where and what (the run then stops, exit 4).
  const std::optional<std::string>& out_of_memory() const { return out_of_memory_; }
  const core::Coordinator& coordinator() const { return coordinator_; }
  Stream& compute_stream() { return compute_; }
  // Appends each iteration's program steps to `journal` (core::RankProgram::journal_into).
  void journal_steps(std::vector<std::string>* journal) { program_.journal_into(journal); }
  // DeepSpeed's Python frames so far (SharedRankContext::deepspeed_frames; else empty).
  const HostFrameLog& deepspeed_frames() const { return frames_; }

  // StreamObserver
  void on_kernel_done(const Stream& stream, const StreamOp& op, TimeNs start_ns, TimeNs end_ns) override;
  void on_stall(const Stream& stream, const StreamOp& op, TimeNs start_ns, TimeNs end_ns) override;
  void on_collective_reached(Stream& stream, const StreamOp& op) override;
  // The communicator finished one of this rank's collectives.
  void on_collective_done(const CollectiveCall& call, TimeNs start_ns, TimeNs end_ns);

 private:
  struct Context {
    core::Phase phase = core::Phase::kForward;
    int module = -1;
    RankIteration::Fetch* fetch = nullptr;  // the fetch whose end sample is still to take
  };
  // Gathered memory of one coalesced-gather handle (partition_parameters.py).
  struct HandleMemory {
    std::optional<core::BlockHandle> flat_block;
    std::int64_t flat_bytes = 0;
    std::vector<int> params;
    bool collective = false;
    bool alive = false;
  };

  HostTask run_iteration(std::int32_t iteration);
  HostTask run_step(const core::ProgramStep& step);
  const std::vector<char>& skipped_modules();
  HostTask fetch_hook(int module, core::Phase phase);
  // Launches a module's own work: one launch per kernel, `launch_ns` apart on the host, and one
  // span on the compute stream after the first (ComputeModel::stream_ns, given the stream's
  // backlog at that moment, so issue stalls the queued work hides are not charged).
  HostTask launch_own_work(const std::vector<TimeNs>& kernel_ns, TimeNs launch_ns, std::int32_t label);
  HostTask release_hook(int module, core::Phase phase);
  TimeNs release_host_ns(int module, const core::Plan& release_plan) const;
  static std::int64_t freed_params(const core::Plan& release_plan);  // the parameters it partitions
  HostTask execute(const core::Plan& plan, Context& context);
  // World size 1: DeepSpeed's no-gather handles (sim/ranks/no_gather_handle.cpp). Issue: with
  // zero.offload_param, each parameter is copied up into its own buffer; wait: the host
  // synchronises the waiting stream.
  HostTask copy_up_without_gather(const core::Gather& gather, int module);
  HostTask wait_without_gather(Stream& stream, core::WaitContext wait_context, core::Phase phase);
  HostTask gradient_ready(const core::ProgramStep& step);
  HostTask allocate_model_states();
  // Allocates through the caching allocator; on OOM records where and stops the world (the
  // caller then halts its host task with `co_await Halt{}`).
  std::optional<core::BlockHandle> allocate(std::int64_t bytes, const Stream& stream, int module, const char* what,
                                            core::MemoryUse use);
  void track_memory_peaks();
  // Contract of core/control/prefetch_controller.hpp, steps 1-3, at reset_step.
  HostTask update_controller(std::int32_t iteration);
  HostTask flush_reduce_bucket(int module, std::span<const int> params);  // `module`: whose hook flushes (names an OOM)
  // Awaitables, not coroutines: these run on every hook and launch, so they must not allocate.
  EventTable::HostWait host_sync(std::int32_t event) { return events_.host_wait(event); }
  SleepFor spend(TimeNs host_ns) { return SleepFor{engine_, resumer_, noisy_host_ns(host_ns)}; }
  // Noise (scenario `noise:`): each draw comes from this rank's own named stream.
  TimeNs noisy_host_ns(TimeNs host_ns);
  TimeNs noisy_compute_ns(TimeNs kernel_ns);
  TimeNs host_timer_now();  // what perf_counter would read now
  // Time to move (or process) `amount` at `per_s` units per second: host-link copies, CPU Adam.
  TimeNs at_rate_ns(std::int64_t amount, double per_s) const;
  // A host synchronisation on communication: returns (via *idle_ns) how long the compute stream
  // sat drained meanwhile — exposed communication that no stream wait shows.
  HostTask host_sync_on_comm(std::int32_t event, TimeNs* idle_ns);

  // MoE: the module's kernels (or activation bytes) for this iteration's routed tokens.
  const std::vector<TimeNs>& routed_kernel_ns(int module, const std::vector<TimeNs>& kernel_ns);
  std::int64_t routed(int module, std::int64_t value) const;
  void launch_kernel(Stream& stream, TimeNs duration_ns, std::int32_t label);
  // Records an event on `stream`; `notify` (if any) is told when it is signalled.
  std::int32_t record(Stream& stream, EventHandler* notify = nullptr, std::int64_t notify_tag = 0);
  // record() of an event whose signalled time the world reads after the event is forgotten
  // (phase ends and fetch bounds: EventTable::keep_time).
  std::int32_t record_kept(Stream& stream, EventHandler* notify = nullptr, std::int64_t notify_tag = 0);
  enum class TimeKept { kNo, kYes };
  std::int32_t record_event(Stream& stream, EventHandler* notify, std::int64_t notify_tag, TimeKept kept);
  void wait(Stream& stream, std::int32_t event, StallKind stall = StallKind::kNone);
  std::int64_t issue_collective(Stream& user_stream, const CollectiveCall& call, std::int32_t& done_event);
  void take_fetch_end_sample(Context& context);
  void after_fetch(const core::FetchInfo& info);
  void add_gathered_bytes(std::int64_t bytes);
  void host_span(std::int32_t label, TimeNs start_ns);
  bool frames_on() const { return shared_.deepspeed_frames && shared_.trace->records_rank(rank_); }
  // Logs a frame of [start_ns, end_ns) when frames_on() and it is not empty; returns its index.
  std::size_t add_frame(DeepSpeedFrame frame, TimeNs start_ns, TimeNs end_ns, std::int64_t params, int depth);
  // A post-module hook's frames: the hook's one charge of `hook_ns` + `release_ns` + `after_ns`
  // (the backward hooks' set-up), spent from `start_ns` to `spent_ns`, split in proportion (host
  // noise stretches the whole), and the hook ending at `end_ns`.
  void post_hook_frames(core::Phase phase, TimeNs start_ns, TimeNs spent_ns, TimeNs end_ns, TimeNs hook_ns,
                        TimeNs release_ns, TimeNs after_ns, std::int64_t params, std::int64_t freed);

  int rank_;
  EventEngine& engine_;
  CoroutineResumer& resumer_;
  Communicator& communicator_;
  const SharedRankContext& shared_;
  EventHandler& iteration_done_;
  std::int32_t iteration_done_base_;
  EventTable events_;
  Stream compute_;
  Stream all_gather_stream_;
  Stream reduce_scatter_stream_;
  Stream nccl_;
  Stream* all_gather_;      // == &compute_ when overlap_comm is false
  Stream* reduce_scatter_;  // idem
  core::Coordinator coordinator_;
  core::ControllerDriver controller_;
  std::int64_t agreement_rounds_ = 0;
  std::int64_t world_size_;
  std::int64_t dtype_bytes_;

  std::deque<RankIteration> iterations_;  // stable addresses: current_ and fetch pointers
  RankIteration* current_ = nullptr;
  const LengthCosts* costs_ = nullptr;  // the current iteration's sequence length's
  std::size_t fetches_per_iteration_ = 0;  // the last iteration's fetch count (a capacity hint)
  // Indexed by the coordinator's gather and handle ids (dense, increasing): no tree lookups on
  // the hot path. -1 / !alive marks ids that are done with.
  IdWindow<std::int32_t> gather_done_event_{-1};  // gather_id -> NCCL done event (-1: waited for)
  IdWindow<HandleMemory> handle_memory_;          // handle_id -> gathered memory
  std::vector<std::int64_t> param_resident_bytes_;          // gathered bytes held per param
  std::deque<std::int32_t> ongoing_fetch_events_;           // DeepSpeed __ongoing_fetch_events
  std::deque<std::int32_t> reduce_events_;                  // stage3 param reduce events
  std::int64_t gathered_bytes_ = 0;
  // DeepSpeed's host program: the steps of each iteration (one IPG gradient bucket per
  // communication dtype; every parameter here shares one dtype).
  core::RankProgram program_;
  std::vector<char> skipped_modules_;  // this iteration's (skipped_modules())
  TimeNs iteration_host_start_ns_ = 0;
  std::unique_ptr<RankMemory> memory_;
  std::optional<std::string> out_of_memory_;
  std::vector<std::optional<core::BlockHandle>> param_block_;       // gathered tensor per param
  std::vector<std::optional<core::BlockHandle>> activation_block_;  // saved activations per module
  std::vector<core::BlockHandle> grads_in_bucket_;                  // freed after their bucket copy
  std::vector<std::int64_t> module_tokens_;  // MoE: this iteration's tokens per module (-1: not an expert)
  std::vector<TimeNs> routed_kernel_ns_;     // routed_kernel_ns's buffer
  core::RandomStream compute_noise_;
  core::RandomStream host_noise_;
  core::RandomStream timer_noise_;
  double slow_factor_ = 1.0;
  TimeNs last_timer_reading_ = 0;
  HostFrameLog frames_;
};

}  // namespace prefetchlab::sim
