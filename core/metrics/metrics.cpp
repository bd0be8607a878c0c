#include "core/metrics/metrics.hpp"

#include <algorithm>

namespace prefetchlab::core {

void fold_rank(IterationRecord& record, const RankIterationTimes& rank, bool first_rank) {
  auto slowest = [](std::int64_t& field, std::int64_t value) { field = std::max(field, value); };
  record.start_ns = first_rank ? rank.start_ns : std::min(record.start_ns, rank.start_ns);
  slowest(record.step_time_ns, rank.end_ns - rank.start_ns);
  slowest(record.forward_ns, rank.forward_end_ns - rank.start_ns);
  slowest(record.backward_ns, rank.backward_end_ns - rank.forward_end_ns);
  slowest(record.optimizer_ns, rank.end_ns - rank.backward_end_ns);
  slowest(record.compute_ns, rank.compute_ns);
  slowest(record.forward_stall_ns, rank.forward_stall_ns);
  slowest(record.backward_stall_ns, rank.backward_stall_ns);
  slowest(record.exposed_comm_ns, rank.exposed_comm_ns);
  slowest(record.all_gather_ns, rank.all_gather_ns);
  slowest(record.reduce_scatter_ns, rank.reduce_scatter_ns);
  slowest(record.all_gather_count, rank.all_gather_count);
  slowest(record.reduce_scatter_count, rank.reduce_scatter_count);
  slowest(record.gathered_numel, rank.gathered_numel);
  slowest(record.bucket_numel, rank.bucket_numel);
  slowest(record.peak_gathered_param_bytes, rank.peak_gathered_param_bytes);
  slowest(record.peak_allocated_bytes, rank.peak_allocated_bytes);
  slowest(record.peak_reserved_bytes, rank.peak_reserved_bytes);
}


namespace {
constexpr RunStatus kAllStatuses[] = {RunStatus::kOk, RunStatus::kInterrupted,
                                      RunStatus::kCollectiveMismatch, RunStatus::kOutOfMemory,
                                      RunStatus::kError};
}  // namespace

const char* run_status_name(RunStatus status) {
  switch (status) {
    case RunStatus::kOk:
      return "ok";
    case RunStatus::kInterrupted:
      return "interrupted";
    case RunStatus::kCollectiveMismatch:
      return "collective_mismatch";
    case RunStatus::kOutOfMemory:
      return "oom";
    case RunStatus::kError:
      return "error";
  }
  return "error";
}

std::optional<RunStatus> parse_run_status(std::string_view name) {
  for (const RunStatus status : kAllStatuses) {
    if (name == run_status_name(status)) return status;
  }
  return std::nullopt;
}

int run_status_exit_code(RunStatus status) {
  switch (status) {
    case RunStatus::kOk:
      return 0;
    case RunStatus::kError:
      return 1;
    case RunStatus::kCollectiveMismatch:
      return 3;
    case RunStatus::kOutOfMemory:
      return 4;
    case RunStatus::kInterrupted:
      return 130;
  }
  return 1;
}

std::int64_t median_ns(std::vector<std::int64_t> values) {
  if (values.empty()) return 0;
  const std::size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid),
                   values.end());
  const std::int64_t upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const std::int64_t lower =
      *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
  // lower <= upper and both >= 0, so this is floor((lower + upper) / 2) without overflow.
  return lower + (upper - lower) / 2;
}

namespace {

// Sum / count rounded down; 0 for no values.
std::int64_t mean_ns(const std::vector<const IterationRecord*>& records,
                     std::int64_t IterationRecord::*field) {
  if (records.empty()) return 0;
  std::int64_t sum = 0;
  for (const IterationRecord* record : records) sum += record->*field;
  return sum / static_cast<std::int64_t>(records.size());
}

// RunFacts::seq_len_varies: means and totals over the steady window (the steady optimizer
// steps' iterations, else the steady iterations) replace the medians (SummaryStats).
void summarize_mixed_lengths(const Metrics& metrics, const std::vector<const IterationRecord*>& steady,
                             const std::vector<OptimizerStepTime>& steps, int warmup_iterations, SummaryStats& stats) {
  stats.steady_is_mean_over_lengths = true;
  stats.steady_micro_batch_time_ns = mean_ns(steady, &IterationRecord::step_time_ns);
  const std::int64_t accum = std::max<std::int64_t>(1, metrics.facts.grad_accum);
  std::vector<const OptimizerStepTime*> window_steps;
  for (const OptimizerStepTime& step : steps) {
    if (step.first_iteration > warmup_iterations) window_steps.push_back(&step);
  }
  if (window_steps.empty()) {
    for (const OptimizerStepTime& step : steps) window_steps.push_back(&step);
  }
  std::vector<const IterationRecord*> window;
  if (window_steps.empty()) {
    window = steady;
    stats.steady_step_time_ns = stats.steady_micro_batch_time_ns * accum;
  } else {
    std::int64_t total_ns = 0;
    for (const OptimizerStepTime* step : window_steps) total_ns += step->time_ns;
    stats.steady_step_time_ns = total_ns / static_cast<std::int64_t>(window_steps.size());
    for (const IterationRecord& record : metrics.iterations) {
      for (const OptimizerStepTime* step : window_steps) {
        if (record.iteration >= step->first_iteration && record.iteration <= step->last_iteration) {
          window.push_back(&record);
          break;
        }
      }
    }
  }
  std::int64_t time_ns = 0;
  double samples = 0, tokens = 0, flops = 0;
  for (const IterationRecord* record : window) {
    const std::int64_t seq_len = record->seq_len > 0 ? record->seq_len : metrics.facts.seq_len;
    const double iteration_samples = static_cast<double>(metrics.facts.micro_batch) * metrics.facts.ranks;
    time_ns += record->step_time_ns;
    samples += iteration_samples;
    tokens += iteration_samples * static_cast<double>(seq_len);
    flops += static_cast<double>(record->model_flops_per_gpu > 0 ? record->model_flops_per_gpu
                                                                   : metrics.facts.model_flops_per_gpu_iteration);
  }
  if (time_ns <= 0) return;
  const double seconds = static_cast<double>(time_ns) * 1e-9;
  stats.samples_per_second = samples / seconds;
  stats.tokens_per_second = tokens / seconds;
  stats.tflops_per_gpu = flops / seconds / 1e12;
}

}  // namespace

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n == 0 ? 0.0 : (n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]));
}

std::vector<OptimizerStepTime> optimizer_step_times(const std::vector<IterationRecord>& iterations,
                                                    std::int64_t grad_accum) {
  std::vector<OptimizerStepTime> steps;
  OptimizerStepTime open;
  for (const IterationRecord& record : iterations) {
    if (open.first_iteration == 0) open.first_iteration = record.iteration;
    open.time_ns += record.step_time_ns;
    if (grad_accum <= 1 || record.optimizer_step) {
      open.last_iteration = record.iteration;
      steps.push_back(open);
      open = OptimizerStepTime{};
    }
  }
  return steps;
}

SummaryStats summarize(const Metrics& metrics, int warmup_iterations) {
  SummaryStats stats;
  stats.facts = metrics.facts;
  stats.iterations = static_cast<int>(metrics.iterations.size());
  stats.warmup_iterations = warmup_iterations;

  std::vector<const IterationRecord*> steady;
  for (const IterationRecord& record : metrics.iterations) {
    if (record.iteration > warmup_iterations) steady.push_back(&record);
  }
  if (steady.empty() && !metrics.iterations.empty()) {
    stats.steady_from_all_iterations = true;
    for (const IterationRecord& record : metrics.iterations) steady.push_back(&record);
  }
  stats.steady_iterations = static_cast<int>(steady.size());

  std::vector<std::int64_t> micro_times;
  micro_times.reserve(steady.size());
  for (const IterationRecord* record : steady) micro_times.push_back(record->step_time_ns);
  stats.steady_micro_batch_time_ns = median_ns(std::move(micro_times));

  // Per optimizer step: the steady steps, else every complete one, else the micro-batches.
  const std::int64_t accum = std::max<std::int64_t>(1, metrics.facts.grad_accum);
  const std::vector<OptimizerStepTime> steps = optimizer_step_times(metrics.iterations, accum);
  std::vector<std::int64_t> step_times;
  for (const OptimizerStepTime& step : steps) {
    if (step.first_iteration > warmup_iterations) step_times.push_back(step.time_ns);
  }
  if (step_times.empty()) {
    for (const OptimizerStepTime& step : steps) step_times.push_back(step.time_ns);
  }
  stats.steady_optimizer_steps = static_cast<int>(step_times.size());
  if (!step_times.empty()) {
    stats.steady_step_time_ns = median_ns(std::move(step_times));
  } else {
    stats.step_time_from_micro_batches = !metrics.iterations.empty();
    stats.steady_step_time_ns = stats.steady_micro_batch_time_ns * accum;
  }

  if (metrics.facts.seq_len_varies) {
    summarize_mixed_lengths(metrics, steady, steps, warmup_iterations, stats);
  } else if (stats.steady_step_time_ns > 0) {
    const double step_s = static_cast<double>(stats.steady_step_time_ns) * 1e-9;
    const double samples_per_step =
        static_cast<double>(metrics.facts.micro_batch) * metrics.facts.ranks * static_cast<double>(accum);
    stats.samples_per_second = samples_per_step / step_s;
    stats.tokens_per_second = stats.samples_per_second * static_cast<double>(metrics.facts.seq_len);
    stats.tflops_per_gpu = static_cast<double>(metrics.facts.model_flops_per_gpu_iteration) *
                           static_cast<double>(accum) / step_s / 1e12;
  }

  stats.mean_exposed_comm_ns = mean_ns(steady, &IterationRecord::exposed_comm_ns);
  stats.mean_forward_stall_ns = mean_ns(steady, &IterationRecord::forward_stall_ns);
  if (metrics.report_trace_invalidations) {
    TraceInvalidationStats t;
    for (const IterationRecord& record : metrics.iterations) t.total += record.trace_invalidations;
    int steady_total = 0;
    for (const IterationRecord* record : steady) steady_total += record->trace_invalidations;
    t.per_iteration = steady.empty() ? 0.0 : static_cast<double>(steady_total) / static_cast<double>(steady.size());
    t.mean_cost_ns = mean_ns(steady, &IterationRecord::untraced_stall_ns);
    t.mean_dropped_tokens = mean_ns(steady, &IterationRecord::dropped_tokens);
    stats.trace_invalidations = t;
  }
  stats.mean_backward_stall_ns = mean_ns(steady, &IterationRecord::backward_stall_ns);

  for (const IterationRecord& record : metrics.iterations) {
    stats.peak_gathered_param_bytes =
        std::max(stats.peak_gathered_param_bytes, record.peak_gathered_param_bytes);
    stats.peak_allocated_bytes = std::max(stats.peak_allocated_bytes, record.peak_allocated_bytes);
    stats.peak_reserved_bytes = std::max(stats.peak_reserved_bytes, record.peak_reserved_bytes);
    stats.bucket_trajectory_numel.push_back(record.bucket_numel);
  }
  for (const MemoryPoint& point : metrics.memory) {
    stats.peak_allocated_bytes = std::max(stats.peak_allocated_bytes, point.allocated_bytes);
    stats.peak_reserved_bytes = std::max(stats.peak_reserved_bytes, point.reserved_bytes);
  }
  stats.num_alloc_retries = metrics.num_alloc_retries;
  stats.peak_memory = metrics.peak_memory;
  // The allocator's own whole-run peak: it also covers an iteration that never finished (an
  // OOM's), which no iteration record holds.
  if (metrics.peak_memory) {
    stats.peak_reserved_bytes = std::max(stats.peak_reserved_bytes, metrics.peak_memory->reserved_bytes);
    stats.peak_allocated_bytes = std::max(stats.peak_allocated_bytes, metrics.peak_memory->allocated_bytes);
  }
  return stats;
}

}  // namespace prefetchlab::core
