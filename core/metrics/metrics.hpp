#pragma once
// The one result type of a run. The simulator and the real executor both fill a Metrics, so
// reports, plots, replay and validation never care where the numbers came from. Writers for it
// live in metrics_csv.hpp (row files) and summary_json.hpp (the summary document).
//
// Aggregation rule for IterationRecord: a quantity that differs between ranks (phase times,
// stalls, compute, collective time, counts, bucket, peaks) is the MAXIMUM over ranks, because
// the slowest rank sets the job's pace and the fullest GPU is the one that runs out of memory.
// Per-rank detail lives in TimingSample, BucketRecord and MemoryPoint, which carry a rank.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/metrics/memory_breakdown.hpp"
#include "core/zero/phase.hpp"
#include "core/zero/trace_mode.hpp"

namespace prefetchlab::core {



// One iteration = one forward + backward of one micro-batch on every rank (one reset_step),
// plus the optimizer step when `optimizer_step` is set. Iterations are numbered from 1 (the
// trace-recording one). All times are integer nanoseconds.
struct IterationRecord {
  int iteration = 0;            // 1-based
  bool optimizer_step = false;  // the optimizer stepped after this iteration (every grad_accum-th)
  TraceMode trace_mode = TraceMode::kInvalid;  // the coordinator's mode when the iteration began

  std::int64_t start_ns = 0;      // run clock when the iteration began (earliest rank)
  std::int64_t step_time_ns = 0;  // wall time of the iteration incl. optimizer step, slowest rank
  std::int64_t forward_ns = 0;    // wall time of the forward pass
  std::int64_t backward_ns = 0;   // wall time of the backward pass
  std::int64_t optimizer_ns = 0;  // optimizer step incl. persistent re-gather; 0 when no step
  std::int64_t compute_ns = 0;    // busy time of the compute stream

  std::int64_t forward_stall_ns = 0;   // compute stream waiting on parameters, forward
  std::int64_t backward_stall_ns = 0;  // same, backward
  std::int64_t exposed_comm_ns = 0;    // time communication was not hidden behind compute

  std::int64_t all_gather_ns = 0;      // summed duration of this iteration's all-gathers
  std::int64_t reduce_scatter_ns = 0;  // summed duration of its reduce-scatters
  std::int64_t all_gather_count = 0;   // all-gather collectives issued
  std::int64_t reduce_scatter_count = 0;
  std::int64_t gathered_numel = 0;     // parameters gathered (unpadded)
  std::int64_t bucket_numel = 0;       // prefetch bucket at the iteration's first fetch

  std::int64_t peak_gathered_param_bytes = 0;  // gathered (full) parameter buffers alive at once
  std::int64_t peak_allocated_bytes = 0;       // caching allocator: bytes handed out
  std::int64_t peak_reserved_bytes = 0;        // caching allocator: bytes held from the device

  // DeepSpeed trace invalidations ("Invalidate trace cache @ step"), the most on any rank, and
  // what they cost: compute idle on fetches that the lost trace left unprefetched (after the
  // invalidation and in the re-recording iteration), slowest rank. MoE: token-expert
  // assignments dropped over capacity (most on any rank).
  int trace_invalidations = 0;
  std::int64_t untraced_stall_ns = 0;
  std::int64_t dropped_tokens = 0;

  // Tokens per sequence of this iteration (training.seq_len_distribution; every rank alike) and
  // its model FLOPs on one GPU (RunFacts::model_flops_per_gpu_iteration at this length). 0 =
  // not recorded (the run's fixed length applies).
  std::int64_t seq_len = 0;
  std::int64_t model_flops_per_gpu = 0;
};

// One rank's account of an iteration on the run clock. IterationRecord holds, per quantity, the
// slowest rank's value (the aggregation rule above) and the earliest start.
struct RankIterationTimes {
  std::int64_t start_ns = 0;
  std::int64_t forward_end_ns = 0;
  std::int64_t backward_end_ns = 0;  // after the end-of-backward synchronisation
  std::int64_t end_ns = 0;           // after the optimizer step, if any
  std::int64_t compute_ns = 0;
  std::int64_t forward_stall_ns = 0;
  std::int64_t backward_stall_ns = 0;
  std::int64_t exposed_comm_ns = 0;
  std::int64_t all_gather_ns = 0;
  std::int64_t reduce_scatter_ns = 0;
  std::int64_t all_gather_count = 0;
  std::int64_t reduce_scatter_count = 0;
  std::int64_t gathered_numel = 0;
  std::int64_t bucket_numel = 0;
  std::int64_t peak_gathered_param_bytes = 0;
  std::int64_t peak_allocated_bytes = 0;
  std::int64_t peak_reserved_bytes = 0;
};

// Folds one rank into `record`; `first_rank` starts a fresh record (iteration, optimizer_step
// and trace_mode are the caller's to set).
void fold_rank(IterationRecord& record, const RankIterationTimes& rank, bool first_rank);

// What a controller sees for one fetch: how long compute waited for it and the time since the
// previous same-phase fetch on that rank in that iteration. Extra named columns (e.g. a policy's
// own measurements) follow in a fixed order; their names are declared once per run (SamplesCsv,
// PrefetchController::bind_columns), not carried by each sample: a run makes a sample per fetch.
struct TimingSample {
  int iteration = 0;
  int rank = 0;
  Phase phase = Phase::kForward;
  std::int64_t wait_ns = 0;
  std::int64_t interval_ns = 0;
  std::vector<std::int64_t> extra;  // the run's extra column values, in their declared order
};

// The prefetch bucket one rank used at the first fetch of an iteration.
struct BucketRecord {
  int iteration = 0;
  int rank = 0;
  std::int64_t bucket_numel = 0;
};

// One point of a rank's memory timeline (caching allocator state after an event).
struct MemoryPoint {
  std::int64_t time_ns = 0;
  int rank = 0;
  std::int64_t allocated_bytes = 0;
  std::int64_t reserved_bytes = 0;
};

// How a run ended. summary.json carries the name; the command line exits with the code.
enum class RunStatus { kOk, kInterrupted, kCollectiveMismatch, kOutOfMemory, kError };

// "ok", "interrupted", "collective_mismatch", "oom", "error".
const char* run_status_name(RunStatus status);
std::optional<RunStatus> parse_run_status(std::string_view name);
// 0 ok, 1 internal error, 3 collective mismatch, 4 out of memory, 130 interrupted (128 + SIGINT,
// the shell's convention). 2 (bad input) has no RunStatus: no summary is written for it.
int run_status_exit_code(RunStatus status);

// Facts about the run that turn times into throughput.
struct RunFacts {
  int ranks = 1;                  // data-parallel world size (nodes x gpus_per_node)
  std::int64_t micro_batch = 0;   // samples per rank per iteration
  std::int64_t seq_len = 0;       // the longest length of the run (its only one when fixed)
  std::int64_t grad_accum = 1;    // iterations per optimizer step
  // Model FLOPs of one iteration on one GPU: forward + backward of one micro-batch, counted the
  // MFU way (no activation-recomputation FLOPs), typically 3 x ModelSpec::forward_flops(b, s).
  std::int64_t model_flops_per_gpu_iteration = 0;
  // Iterations differ in length (IterationRecord::seq_len): steady figures are then means over
  // the steady steps and throughput counts each iteration's own tokens and FLOPs.
  bool seq_len_varies = false;
};

struct Metrics {
  RunFacts facts;
  std::vector<IterationRecord> iterations;  // in iteration order
  std::vector<TimingSample> samples;
  std::vector<BucketRecord> buckets;
  std::vector<MemoryPoint> memory;
  // The caching allocator's own counters, the most on any rank: times it freed its whole cache
  // and retried a malloc (torch.cuda.memory_stats()'s num_alloc_retries).
  std::int64_t num_alloc_retries = 0;
  // What filled the fullest rank's memory at its peak (from the start of the run, the model
  // states included, up to its end or OOM); unset where no allocator was simulated.
  std::optional<PeakMemoryBreakdown> peak_memory;
  // summary.json gets a trace_invalidations block (MoE runs; others read as before).
  bool report_trace_invalidations = false;
};

// Trace invalidations over the steady iterations (IterationRecord::trace_invalidations).
struct TraceInvalidationStats {
  int total = 0;                         // every iteration
  double per_iteration = 0;              // steady iterations' mean
  std::int64_t mean_cost_ns = 0;         // steady mean of untraced_stall_ns
  std::int64_t mean_dropped_tokens = 0;  // steady mean
};

// What summary.json reports. Rates are doubles (they are not times); times stay integer ns.
struct SummaryStats {
  RunFacts facts;
  int iterations = 0;         // iteration records seen
  int warmup_iterations = 0;  // as requested
  // Iterations the steady statistics come from: those numbered > warmup_iterations. When there
  // are none (a short or interrupted run), every iteration is used instead and
  // steady_from_all_iterations is true. With no iterations at all every statistic is 0.
  int steady_iterations = 0;
  bool steady_from_all_iterations = false;

  // Per optimizer step (one global batch: grad_accum micro-batch iterations, the last with the
  // optimizer step). A step's time is the sum of its iterations' step_time_ns; the steady step
  // time is the median over the steady steps, those whose first iteration is past the warm-up
  // (all complete steps when none is). For an even count it is the mean of the two middle values
  // rounded down. With grad_accum 1 a step is an iteration. When the run holds no complete step
  // (fewer iterations than grad_accum, or records without optimizer_step), it is grad_accum x the
  // micro-batch median and step_time_from_micro_batches is true (the optimizer is left out).
  std::int64_t steady_step_time_ns = 0;
  int steady_optimizer_steps = 0;
  bool step_time_from_micro_batches = false;
  // RunFacts::seq_len_varies: the steady step (and micro-batch) time is the mean over the steady
  // steps instead of the median, which of a mix of lengths picks one length's time; samples/s,
  // tokens/s and TFLOPS are totals over those steps divided by their summed time, counting each
  // iteration's own tokens (micro_batch x ranks x seq_len) and FLOPs.
  bool steady_is_mean_over_lengths = false;
  // Median of step_time_ns over the steady iterations (one micro-batch each, the optimizer step
  // included in every grad_accum-th).
  std::int64_t steady_micro_batch_time_ns = 0;
  // micro_batch x ranks x grad_accum samples per step / steady step time; 0 when it is 0.
  double samples_per_second = 0;
  // samples_per_second x seq_len.
  double tokens_per_second = 0;
  // model_flops_per_gpu_iteration x grad_accum / steady step time, in 1e12 FLOP/s.
  double tflops_per_gpu = 0;

  // Means over the steady iterations, rounded down to a whole nanosecond.
  std::int64_t mean_exposed_comm_ns = 0;
  std::int64_t mean_forward_stall_ns = 0;
  std::int64_t mean_backward_stall_ns = 0;

  // Peaks over every iteration (warmup included: memory that ran out during warmup still ran
  // out) and, for allocated/reserved, also over every MemoryPoint and the allocator's own
  // whole-run peak (Metrics::peak_memory), so an OOM's unfinished iteration counts.
  std::int64_t peak_gathered_param_bytes = 0;
  std::int64_t peak_allocated_bytes = 0;
  std::int64_t peak_reserved_bytes = 0;

  // IterationRecord::bucket_numel of every iteration in iteration order (element i belongs to
  // the (i+1)-th record), i.e. the maximum over ranks at each iteration's first fetch.
  // Per-rank values are in Metrics::buckets (buckets.csv).
  std::vector<std::int64_t> bucket_trajectory_numel;

  // Metrics::num_alloc_retries and Metrics::peak_memory, as they are.
  std::int64_t num_alloc_retries = 0;
  std::optional<PeakMemoryBreakdown> peak_memory;
  std::optional<TraceInvalidationStats> trace_invalidations;  // Metrics::report_trace_invalidations
};

// Median of `values` (odd count: the middle one; even: the mean of the two middle ones rounded
// down). 0 for an empty input. Values must be non-negative.
std::int64_t median_ns(std::vector<std::int64_t> values);
// The same for measured figures: an even count gives the mean of the two middle values.
double median(std::vector<double> values);

// One optimizer step: consecutive iterations up to and including one with optimizer_step set.
struct OptimizerStepTime {
  int first_iteration = 0;
  int last_iteration = 0;
  std::int64_t time_ns = 0;  // sum of the iterations' step_time_ns
};
// The complete optimizer steps of a run, in order (a trailing group without its optimizer step
// is left out). With grad_accum 1 every iteration is one step, whatever optimizer_step says.
std::vector<OptimizerStepTime> optimizer_step_times(const std::vector<IterationRecord>& iterations,
                                                    std::int64_t grad_accum);

SummaryStats summarize(const Metrics& metrics, int warmup_iterations);

}  // namespace prefetchlab::core
