#pragma once
// gpu::Executor — runs a scenario's model for N iterations on a DeviceGroup as real work, one
// host thread per rank, driven by core::Coordinator and the scenario's core controller: the
// very code the simulator runs (docs/architecture.md). Fills the same core::Metrics.
//
// Per rank: parameter shards (real numbers) in device memory; the coordinator's plans run as
// coalesced all-gathers into one flat buffer per bucket on an all-gather stream (through a
// communication stream, as ProcessGroupNCCL does), copy-out per parameter at the first wait;
// modules run GEMMs of their real shapes and memory-bound kernels on the compute stream, which
// waits on the all-gather stream; backward runs data- and weight-gradient GEMMs and reduce-
// scatters IPG gradient buckets on the reduce stream; releases free gathered memory. Offload
// to host memory (zero.offload_param / offload_optimizer, device cpu), full activation
// checkpointing and divergence run as the simulator runs them (gpu_backend/executor/rank_executor.cpp).
// Timing comes from device events on the compute stream. The host blocks only where DeepSpeed's does;
// each block is in the call log with its tag.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/metrics/metrics.hpp"
#include "core/zero/phase.hpp"
#include "core/scenario/scenario.hpp"
#include "gpu_backend/device/call_log.hpp"
#include "gpu_backend/device/device_group.hpp"

namespace prefetchlab::gpu {

// Reads a rank's device memory for tests and tools (synchronises the device: logged as
// kInspection). Valid only inside the hook it is passed to.
class RankInspector {
 public:
  virtual ~RankInspector() = default;
  virtual int rank() const = 0;
  // The parameter as the module about to run sees it (full numel, gathered); the parameter must
  // be available (the on_module_ready hook's module's own parameters are).
  virtual std::vector<std::byte> gathered_parameter(int param) = 0;
  // This rank's partition of the parameter's reduced (averaged over ranks) gradient,
  // ceil(numel / world_size) elements (zero-padded past numel).
  virtual std::vector<std::byte> gradient_partition(int param) = 0;
};

struct ExecutorOptions {
  std::optional<std::int64_t> iterations;  // default: the scenario's training.iterations
  std::uint64_t data_seed = 1;             // parameters, activations, upstream gradients
  // Fill ExecutorResult::plan_log: each iteration's program steps as core::describe writes them
  // (core/zero/rank_program.hpp), then the plans and reduce-scatters it ran.
  bool record_plans = false;
  // Hooks (on the rank's host thread): after a module's fetch (its parameters are available),
  // and after the end-of-backward synchronisation (gradients reduced into the partitions).
  std::function<void(RankInspector&, int iteration, int module, core::Phase phase)> on_module_ready;
  std::function<void(RankInspector&, int iteration)> on_backward_done;
};

// The workspace every rank computes with (the test rebuilds references from it): activations
// and upstream gradients are `tokens x max_dim` row-major matrices (the first workspace_numel
// values of rank_input_values / rank_upstream_gradient_values); a GEMM with in x out weights
// reads their leading in / out columns.
struct ExecutorGeometry {
  std::int64_t tokens = 0;  // micro_batch x seq_len
  std::int64_t max_dim = 0;  // the widest GEMM dimension, rounded up to a multiple of 8 (row alignment)
  std::int64_t workspace_numel = 0;
  // The executor's own buffers, held all run on each rank and counted in its memory stats: the
  // input data, the upstream gradient and two kernel outputs, workspace_numel each. A model's
  // kernel outputs are its activations, which the executor allocates as the simulator does;
  // these are test-harness memory with no simulated counterpart.
  static constexpr int kWorkspaceBuffers = 4;
  std::int64_t workspace_bytes = 0;
};

// One span of the real run on a rank's device, timed by its device events (ns on the ranks'
// common clock, RankExecutor::align_clocks): a module's own kernels
// (forward or backward), a fetch's window on the compute stream (the fetch hook up to compute's
// wait for the all-gather stream: the stall sample), a collective on the communication stream,
// the reduce stream's gradient work, or the optimizer step.
struct TimelineSpan {
  // kGradientWork: the reduce stream's own kernels (bucket copies, interleave and divide,
  // partition adds); kOptimizer: the step (Adam, the partition cleared) on the compute stream.
  enum class Kind { kForward, kBackward, kFetch, kAllGather, kReduceScatter, kAllReduce, kGradientWork, kOptimizer };
  Kind kind = Kind::kForward;
  int rank = 0;
  int iteration = 0;
  int module = -1;  // kForward, kBackward, kFetch
  core::Phase phase = core::Phase::kForward;  // kFetch
  std::int64_t start_ns = 0, end_ns = 0;
  // Collectives: the whole gathered / reduced buffer and its element size (0 otherwise).
  std::int64_t bytes = 0;
  std::int64_t element_bytes = 0;
};

struct ExecutorResult {
  // False on the ranks other than 0 of a job whose ranks are processes (`--launcher env`):
  // rank 0's result holds every rank's records; here only status and failure are set.
  bool has_records = true;
  core::RunStatus status = core::RunStatus::kOk;
  std::string message;
  std::optional<RankFailure> failure;
  core::Metrics metrics;                      // finished iterations
  // Ranks of a failed process job whose records died with their process (kill -9): the rows
  // above fold the ranks that reported, so what they finished is not lost with them.
  std::vector<int> ranks_without_records;
  std::vector<CallLogEntry> call_log;         // all ranks, each rank's entries in order
  std::vector<TimelineSpan> timeline;         // finished iterations, rank by rank
  std::vector<std::vector<std::string>> plan_log;  // per rank, with record_plans
};

class Executor {
 public:
  // Throws core::InputError-like std::invalid_argument for what the backend cannot run (NVMe
  // offload) and for a group of another size than the scenario's.
  Executor(const core::Scenario& scenario, DeviceGroup& group, ExecutorOptions options = {});

  // The unsharded initial parameters (index = ds_id, bytes in the training dtype). Each rank
  // takes its shards (to its device at run(), or into its host memory with zero.offload_param);
  // nothing keeps the caller's tensors, so the caller may overwrite them. Without a call, run()
  // uses seeded_parameters().
  void load_parameters(const std::vector<std::vector<std::byte>>& full_parameters);

  ExecutorResult run();

  const ExecutorGeometry& geometry() const { return geometry_; }

 private:
  const core::Scenario& scenario_;
  DeviceGroup& group_;
  ExecutorOptions options_;
  ExecutorGeometry geometry_;
  std::vector<std::vector<std::byte>> staged_shards_;  // per rank: its shards, flat; until run()
};

}  // namespace prefetchlab::gpu
