#pragma once
// One rank of gpu::Executor: its host program (DeepSpeed's hooks, in the order
// sim/ranks/rank_process.cpp follows), executing the rank's core::Coordinator plans on its Device.
// Internal to executor.cpp; a header only so the pieces stay one concept per file.
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/checkpoint_units.hpp"
#include "core/zero/coordinator.hpp"
#include "core/control/fetch_samples.hpp"
#include "core/control/controller_driver.hpp"
#include "core/zero/rank_program.hpp"
#include "core/scenario/scenario.hpp"
#include "core/scenario/skipped_modules.hpp"
#include "gpu_backend/executor/executor.hpp"
#include "gpu_backend/executor/host_state_buffer.hpp"

namespace prefetchlab::gpu {

// What one rank measured in one iteration; events are read after the run's final sync.
struct RankIteration {
  int iteration = 0;
  bool optimizer_step = false;
  core::TraceMode trace_mode = core::TraceMode::kInvalid;
  std::int64_t bucket_numel = 0;
  EventId start_event = -1, forward_end_event = -1, backward_compute_end_event = -1, backward_end_event = -1,
          iteration_end_event = -1;
  struct Fetch {
    core::Phase phase = core::Phase::kForward;
    int module = -1;
    EventId start_event = -1, end_event = -1;
    std::int64_t host_start_ns = 0, host_end_ns = 0;
    std::int64_t peak_reserved_bytes = 0;
  };
  std::vector<Fetch> fetches;
  struct ComputeSpan {  // one module's own kernels in one phase, compute stream
    EventId from = -1, to = -1;
    int module = -1;
    core::Phase phase = core::Phase::kForward;
  };
  std::vector<ComputeSpan> compute_spans;
  std::vector<std::pair<EventId, EventId>> all_gather_spans;     // on the communication stream
  std::vector<std::pair<EventId, EventId>> reduce_scatter_spans;
  std::vector<std::pair<EventId, EventId>> all_reduce_spans;     // agreements, trace checks
  // Each collective span's full buffer (bytes) and element size, in the order of its spans
  // above: what a profiler trace of the run records ("In/Out msg nelems", "dtype").
  struct CollectiveSize {
    std::int64_t bytes = 0;
    std::int64_t element_bytes = 0;
  };
  std::vector<CollectiveSize> all_gather_sizes, reduce_scatter_sizes, all_reduce_sizes;
  std::vector<std::pair<EventId, EventId>> gradient_work_spans;  // reduce stream's copies and passes
  std::vector<std::pair<EventId, EventId>> optimizer_spans;      // compute stream
  std::int64_t all_gather_count = 0, reduce_scatter_count = 0, gathered_numel = 0;
  std::int64_t peak_gathered_bytes = 0, peak_allocated_bytes = 0, peak_reserved_bytes = 0;
  // Each host wait on communication (trace checks, agreement, re-gather, reduce throttle): compute
  // markers at the block and at the release (core/metrics/exposed_comm.hpp).
  std::vector<std::pair<EventId, EventId>> host_comm_waits;
  EventId reduce_sync_marker = -1;  // compute marker where the host reached the end-of-backward sync
  // Per core::Phase: compute markers around each wait on parameters (the compute stream's wait
  // on the all-gather stream; the host's fetch-throttle and no-gather waits).
  std::vector<std::pair<EventId, EventId>> stall_waits[2];
  bool samples_wanted = false;
};

class OutOfMemoryFailure : public std::runtime_error {
 public:
  OutOfMemoryFailure(std::string operation, const std::string& message)
      : std::runtime_error(message), operation_(std::move(operation)) {}
  const std::string& operation() const { return operation_; }

 private:
  std::string operation_;
};

class RankExecutor final : public RankInspector {
 public:
  RankExecutor(const core::Scenario& scenario, Device& device, const ExecutorOptions& options,
               const ExecutorGeometry& geometry, std::int64_t iterations, std::vector<std::byte> shards);
  ~RankExecutor() override;
  RankExecutor(const RankExecutor&) = delete;
  RankExecutor& operator=(const RankExecutor&) = delete;

  // The whole run on this rank's thread. Throws on failure (the caller aborts the group).
  void run();
  // What the rank was doing, for failure reports.
  std::string current_operation() const;

  const std::vector<RankIteration>& iterations() const { return iterations_; }
  // The leading iterations whose end event has completed on the device: after a failure, the
  // ones that finished (their rows are kept); the iteration the failure cut is not among them.
  std::size_t finished_iterations();
  // Device time of an event on the ranks' common clock (valid after run(); see align_clocks).
  std::int64_t event_ns(EventId event) { return device_.elapsed_ns(base_event_, event) - clock_shift_ns_; }
  std::vector<core::TimingSample> samples_of(const RankIteration& it);
  const std::vector<CallLogEntry>& call_log() const { return call_log_; }
  const std::vector<std::string>& plan_log() const { return plan_log_; }
  std::vector<core::MemoryPoint> take_memory_points() { return std::move(memory_points_); }

  // RankInspector
  int rank() const override { return rank_; }
  std::vector<std::byte> gathered_parameter(int param) override;
  std::vector<std::byte> gradient_partition(int param) override;

 private:
  struct Context {
    core::Phase phase = core::Phase::kForward;
    int module = -1;
    std::optional<std::size_t> fetch;  // index of the fetch whose end is still to take
  };
  struct GatherMemory {  // one coalesced all-gather
    std::optional<DeviceBuffer> flat;
    std::vector<int> params;
    std::vector<std::int64_t> slot_offset_numel;  // per param, inside each rank's slot
    std::int64_t slot_numel = 0;
    EventId done = -1;
  };
  struct HandleMemory {
    std::vector<std::int64_t> gathers;
    std::vector<int> params;
    bool collective = false;
    bool alive = false;
    StreamId copy_out_stream = 0;
  };

  // Setup and the iteration's host program.
  void allocate_model_states();
  void upload_initial_state();
  void align_clocks();
  void run_iteration(int iteration);
  void run_step(const core::ProgramStep& step);
  void update_controller(int iteration);
  void fetch_hook(int module, core::Phase phase);
  void execute(const core::Plan& plan, Context& context);
  void execute_gather(const core::Gather& gather, Context& context);
  void execute_wait(const core::Wait& wait, Context& context);
  void execute_trace_check(const core::RankTraceCheck& check);
  void optimizer_update();
  void cpu_adam();
  AdamArgs adam_args(DeviceSpan params, DeviceSpan grads, DeviceSpan master, DeviceSpan exp_avg,
                     DeviceSpan exp_avg_sq) const;
  void gradient_ready(const core::ProgramStep& step);
  void flush_reduce_bucket(const core::ProgramStep& step);
  void take_fetch_end_sample(Context& context);
  void after_fetch(const core::FetchInfo& info);

  // Work.
  void module_forward_work(int module);
  void module_backward_work(int module);
  void attention_gemms(int module, int passes);
  void memory_pass(std::int64_t numel, int passes);
  DeviceSpan param_data(int param) const;
  DeviceSpan shard_span(int param) const;
  const std::byte* host_shard(int param) const;
  DeviceSpan ws(const DeviceBuffer& buffer, std::int64_t numel) const;

  // Device helpers.
  DeviceBuffer allocate(std::int64_t bytes, StreamId stream, const char* what);
  void free_after(const DeviceBuffer& buffer, StreamId used_on);
  void free(const DeviceBuffer& buffer);
  enum class CollectiveKind { kAllGather, kReduceScatter, kAllReduce };
  // `full_bytes`: the whole gathered / reduced buffer; `element_bytes`: its element size.
  EventId issue_collective(StreamId user_stream, const std::function<void()>& launch, CollectiveKind kind,
                           std::int64_t full_bytes, std::int64_t element_bytes);
  void host_sync(EventId event, SyncTag tag);
  // host_sync with the compute markers exposed communication is measured by: one at the block
  // and one at the release, appended to `waits` (RankIteration::host_comm_waits, or a phase's
  // stall_waits for a wait inside a fetch); null outside an iteration, then a plain host_sync.
  using MarkerPairs = std::vector<std::pair<EventId, EventId>>;
  void host_sync_marked(EventId event, SyncTag tag, MarkerPairs* waits);
  MarkerPairs* comm_waits() { return current_ ? &current_->host_comm_waits : nullptr; }
  std::int64_t host_now_ns() const;
  void note_memory();
  std::vector<double> agree_on_device(const std::vector<double>& values, ReduceOp op, SyncTag tag);
  void plan_note(std::string_view entry);

  const core::Scenario& scenario_;
  const core::ModelSpec& model_;
  Device& device_;
  const ExecutorOptions& options_;
  ExecutorGeometry geometry_;
  std::int64_t iterations_count_;
  int rank_;
  int world_size_;
  ElementType type_;
  std::int64_t element_bytes_;
  std::chrono::steady_clock::time_point host_epoch_;

  StreamId compute_ = 0, all_gather_stream_ = 0, reduce_stream_ = 0, comm_ = 0;
  StreamId all_gather_ = 0, reduce_ = 0;  // == compute_ without overlap_comm
  EventId base_event_ = -1;         // this rank's clock origin: its exit from the set-up all-reduce
  std::int64_t clock_shift_ns_ = 0;  // how late that exit was against the ranks' consensus
  EventId first_start_event_ = -1;   // iteration 1 starts once the clocks are aligned

  core::Coordinator coordinator_;
  core::ControllerDriver controller_;
  std::vector<bool> persistent_;

  // Model states and workspace.
  std::vector<std::int64_t> partition_numel_;     // per param: ceil(numel / W)
  std::vector<std::int64_t> shard_offset_numel_;  // per param: offset in the flat shard buffers
  std::int64_t shard_numel_ = 0;
  std::vector<std::byte> staged_shards_;  // until uploaded
  std::optional<DeviceBuffer> shards_, master_, exp_avg_, exp_avg_sq_, grad_partition_, ipg_;
  std::optional<DeviceBuffer> input_, upstream_, scratch_a_, scratch_b_;
  std::vector<float> host_master_;  // source of the master upload (kept until setup sync)
  // Offloaded model states (zero.offload_param / offload_optimizer, device cpu), in pinned
  // memory from cudaHostAlloc when the section's pin_memory says so (pageable copies are
  // synchronous on CUDA; host_state_buffer.hpp): the
  // 16-bit shards the fetches copy up; the reduced gradient partition copied down after each
  // flush; CPU Adam's fp32 master (host_master_) and moments, and its 16-bit output copied up
  // to the device shards when those stay on the device.
  bool offload_param_ = false, offload_optimizer_ = false;
  HostStateBuffer host_shards_, host_grad_partition_, host_updated_params_;
  std::vector<float> host_exp_avg_, host_exp_avg_sq_;
  std::int64_t optimizer_steps_ = 0;

  // Gathered parameters.
  std::vector<GatherMemory> gathers_;         // by gather id
  std::vector<HandleMemory> handles_;         // by handle id
  std::vector<std::optional<DeviceSpan>> param_span_;      // gathered data per param
  std::vector<std::optional<DeviceBuffer>> param_block_;   // its own buffer (copied out)
  std::vector<std::int64_t> param_resident_bytes_;
  std::int64_t gathered_bytes_ = 0;
  std::deque<EventId> ongoing_fetch_events_;
  std::deque<EventId> reduce_events_;

  // Backward.
  std::vector<int> grad_uses_done_;  // per param: backward uses so far this iteration
  std::vector<std::optional<DeviceBuffer>> grad_block_;  // per param while being produced / bucketed
  std::vector<std::int64_t> bucket_offset_numel_;  // per bucketed param: IPG offset, or index in grads_in_bucket_
  std::vector<bool> in_ipg_;                       // per bucketed param: copied into the IPG buffer
  std::vector<DeviceBuffer> grads_in_bucket_;      // non-contiguous gradients, freed after the flush
  std::vector<std::optional<DeviceBuffer>> activation_block_;
  // DeepSpeed's host program (core::RankProgram, the simulator's): the steps of each iteration,
  // with training.activation_checkpointing and the divergence's skipped modules.
  core::RankProgram program_;
  std::int64_t checkpoint_input_bytes_ = 0;
  core::SkippedModules skipped_modules_;
  std::vector<char> skipped_;  // this iteration's, per module (empty: none)

  // Measurements.
  std::vector<RankIteration> iterations_;
  RankIteration* current_ = nullptr;
  std::vector<CallLogEntry> call_log_;
  std::vector<std::string> plan_log_;
  std::vector<core::MemoryPoint> memory_points_;
  std::vector<std::byte> agreement_host_;  // staging of the agreement all-reduce
  // Where the host is, for failure reports.
  const char* doing_ = "setup";
  int doing_module_ = -1;
};

}  // namespace prefetchlab::gpu
