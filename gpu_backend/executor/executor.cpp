#include "gpu_backend/executor/executor.hpp"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <thread>

#include "core/metrics/exposed_comm.hpp"
#include "gpu_backend/process/process_link.hpp"
#include "gpu_backend/executor/rank_executor.hpp"
#include "gpu_backend/executor/rank_records.hpp"
#include "gpu_backend/executor/seeded_data.hpp"

namespace prefetchlab::gpu {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// What the real backend cannot run yet: said up front instead of running something else.
void check_supported(const core::Scenario& scenario, const DeviceGroup& group) {
  auto unsupported = [&](const std::string& what) {
    throw std::invalid_argument("the real backend does not support " + what + " yet (scenario " + scenario.name + ")");
  };
  // Offload to host memory runs; NVMe (ZeRO-Infinity's swapper) does not.
  if (scenario.zero.offload_param.device == core::OffloadDevice::kNvme) unsupported("zero.offload_param.device: nvme");
  if (scenario.zero.offload_optimizer.device == core::OffloadDevice::kNvme) {
    unsupported("zero.offload_optimizer.device: nvme");
  }
  if (scenario.cluster.world_size() != group.world_size()) {
    throw std::invalid_argument("scenario " + scenario.name + " has " + std::to_string(scenario.cluster.world_size()) +
                                " ranks but the device group has " + std::to_string(group.world_size()));
  }
}

ExecutorGeometry geometry_of(const core::Scenario& scenario) {
  ExecutorGeometry g;
  const auto& model = scenario.model;
  g.tokens = scenario.training.micro_batch * scenario.training.seq_len;
  g.max_dim = std::max<std::int64_t>(1, model.hidden_size);
  std::int64_t need = 1;
  for (const auto& param : model.params) {
    g.max_dim = std::max({g.max_dim, param.gemm_in, param.gemm_out});
    if (param.gemm_in <= 0) need = std::max(need, param.numel);  // element-wise gradient operand
  }
  // Row strides of whole 16-byte groups (8 bf16 elements): cuBLAS's tensor-core kernels need
  // 16-byte aligned leading dimensions (cuBLAS API reference, "Tensor Core Usage"; NVIDIA's
  // Matrix Multiplication Background guide: dimensions in multiples of 8 for 16-bit types).
  // GPT-2's vocabulary of 50,257 made every GEMM's leading dimension odd.
  constexpr std::int64_t kRowAlignElements = 8;
  g.max_dim = (g.max_dim + kRowAlignElements - 1) / kRowAlignElements * kRowAlignElements;
  need = std::max(need, g.tokens * g.max_dim);
  for (const auto& module : model.modules) {
    // The attention GEMMs (rank_executor.cpp, attention_gemms).
    const std::int64_t k = std::max<std::int64_t>(1, module.forward_flops.per_token_per_position / 4);
    if (module.forward_flops.per_token_per_position > 0) {
      need = std::max({need, g.tokens * k, scenario.training.seq_len * k, g.tokens * scenario.training.seq_len});
    }
  }
  g.workspace_numel = need;
  g.workspace_bytes = ExecutorGeometry::kWorkspaceBuffers * need * element_bytes(element_type_of(scenario.training.dtype));
  return g;
}

void append_timeline(RankExecutor& rank, const RankIteration& it, std::vector<TimelineSpan>& out) {
  using Kind = TimelineSpan::Kind;
  auto add = [&](Kind kind, EventId from, EventId to, int module, core::Phase phase) {
    TimelineSpan span;
    span.kind = kind;
    span.rank = rank.rank();
    span.iteration = it.iteration;
    span.module = module;
    span.phase = phase;
    span.start_ns = rank.event_ns(from);
    span.end_ns = rank.event_ns(to);
    out.push_back(span);
  };
  for (const auto& span : it.compute_spans) {
    add(span.phase == core::Phase::kForward ? Kind::kForward : Kind::kBackward, span.from, span.to, span.module,
        span.phase);
  }
  for (const auto& fetch : it.fetches) add(Kind::kFetch, fetch.start_event, fetch.end_event, fetch.module, fetch.phase);
  const auto add_collectives = [&](Kind kind, const std::vector<std::pair<EventId, EventId>>& spans,
                                   const std::vector<RankIteration::CollectiveSize>& sizes, core::Phase phase) {
    for (std::size_t i = 0; i < spans.size(); ++i) {
      add(kind, spans[i].first, spans[i].second, -1, phase);
      if (i < sizes.size()) {
        out.back().bytes = sizes[i].bytes;
        out.back().element_bytes = sizes[i].element_bytes;
      }
    }
  };
  add_collectives(Kind::kAllGather, it.all_gather_spans, it.all_gather_sizes, core::Phase::kForward);
  add_collectives(Kind::kReduceScatter, it.reduce_scatter_spans, it.reduce_scatter_sizes, core::Phase::kBackward);
  add_collectives(Kind::kAllReduce, it.all_reduce_spans, it.all_reduce_sizes, core::Phase::kForward);
  for (const auto& [from, to] : it.gradient_work_spans) add(Kind::kGradientWork, from, to, -1, core::Phase::kBackward);
  for (const auto& [from, to] : it.optimizer_spans) add(Kind::kOptimizer, from, to, -1, core::Phase::kBackward);
}

// One rank's times for an iteration: the fold's input (core/metrics/metrics.hpp).
core::RankIterationTimes times_of(RankExecutor& rank, const RankIteration& it) {
  auto t = [&](EventId e) { return rank.event_ns(e); };
  auto sum_spans = [&](const std::vector<std::pair<EventId, EventId>>& spans) {
    std::int64_t total = 0;
    for (const auto& [a, b] : spans) total += t(b) - t(a);
    return total;
  };
  std::int64_t compute_ns = 0;
  for (const auto& span : it.compute_spans) compute_ns += t(span.to) - t(span.from);
  std::int64_t stall[2] = {0, 0};
  for (int phase = 0; phase < 2; ++phase) {
    for (const auto& [before, after] : it.stall_waits[phase]) stall[phase] += core::compute_idle_between_markers_ns(t(before), t(after));
  }
  const std::int64_t backward_end = t(it.backward_end_event);
  // Exposed communication as core/metrics/exposed_comm.hpp defines it, from the compute markers
  // the rank recorded (backward_end_event is the one after the end-of-backward sync).
  core::ExposedComm exposed{.forward_stall_ns = stall[0],
                            .backward_stall_ns = stall[1],
                            .reduce_tail_ns = core::compute_idle_between_markers_ns(t(it.reduce_sync_marker), backward_end)};
  for (const auto& [block, release] : it.host_comm_waits) {
    exposed.host_wait_idle_ns += core::compute_idle_between_markers_ns(t(block), t(release));
  }
  return {.start_ns = t(it.start_event),
          .forward_end_ns = t(it.forward_end_event),
          .backward_end_ns = backward_end,
          .end_ns = t(it.iteration_end_event),
          .compute_ns = compute_ns,
          .forward_stall_ns = stall[0],
          .backward_stall_ns = stall[1],
          .exposed_comm_ns = exposed.total_ns(),
          .all_gather_ns = sum_spans(it.all_gather_spans),
          .reduce_scatter_ns = sum_spans(it.reduce_scatter_spans),
          .all_gather_count = it.all_gather_count,
          .reduce_scatter_count = it.reduce_scatter_count,
          .gathered_numel = it.gathered_numel,
          .bucket_numel = it.bucket_numel,
          .peak_gathered_param_bytes = it.peak_gathered_bytes,
          .peak_allocated_bytes = it.peak_allocated_bytes,
          .peak_reserved_bytes = it.peak_reserved_bytes};
}

// A rank's records of its first `finished` iterations (the memory timeline only when the run
// did not fail: a cut iteration's points have no end to match).
RankRecords records_of(RankExecutor& rank, std::size_t finished, bool with_memory) {
  RankRecords out;
  out.rank = rank.rank();
  for (std::size_t i = 0; i < finished; ++i) {
    const RankIteration& it = rank.iterations()[i];
    RankIterationRecord record;
    record.iteration = it.iteration;
    record.optimizer_step = it.optimizer_step;
    record.trace_mode = it.trace_mode;
    record.times = times_of(rank, it);
    append_timeline(rank, it, record.timeline);
    record.samples = rank.samples_of(it);
    out.iterations.push_back(std::move(record));
  }
  if (with_memory) out.memory = rank.take_memory_points();
  out.call_log = rank.call_log();
  out.plan_log = rank.plan_log();
  return out;
}

// Every rank's records into one result: the Metrics aggregation rule (the maximum over ranks,
// core/metrics/metrics.hpp) per iteration every rank finished; a rank without records (its
// set-up failed, its process is gone) leaves no iteration.
void fold_records(const std::vector<std::optional<RankRecords>>& ranks, bool failed, ExecutorResult& result) {
  // The iterations every reporting rank finished. A rank without records is one whose process
  // died (a failed run only): the others' rows are kept rather than lost with it.
  std::size_t finished = 0;
  bool any = false;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const auto& rank = ranks[r];
    if (!rank) {
      result.ranks_without_records.push_back(static_cast<int>(r));
      continue;
    }
    finished = any ? std::min(finished, rank->iterations.size()) : rank->iterations.size();
    any = true;
    result.call_log.insert(result.call_log.end(), rank->call_log.begin(), rank->call_log.end());
    result.plan_log.push_back(rank->plan_log);
  }
  if (!failed && !result.ranks_without_records.empty()) finished = 0;
  for (std::size_t i = 0; i < finished; ++i) {
    core::IterationRecord record;
    bool first = true;
    for (const auto& rank : ranks) {
      if (!rank) continue;
      const RankIterationRecord& it = rank->iterations[i];
      record.iteration = it.iteration;
      record.optimizer_step = it.optimizer_step;
      record.trace_mode = it.trace_mode;
      core::fold_rank(record, it.times, first);
      first = false;
    }
    result.metrics.iterations.push_back(record);
    for (const auto& rank : ranks) {
      if (!rank) continue;
      const auto& spans = rank->iterations[i].timeline;
      result.timeline.insert(result.timeline.end(), spans.begin(), spans.end());
    }
    for (const auto& rank : ranks) {
      if (!rank) continue;
      const RankIterationRecord& it = rank->iterations[i];
      result.metrics.samples.insert(result.metrics.samples.end(), it.samples.begin(), it.samples.end());
      result.metrics.buckets.push_back({it.iteration, rank->rank, it.times.bucket_numel});
    }
  }
  if (failed) return;
  for (const auto& rank : ranks) {
    if (rank) result.metrics.memory.insert(result.metrics.memory.end(), rank->memory.begin(), rank->memory.end());
  }
}

core::RunStatus status_of(FailureKind kind) {
  switch (kind) {
    case FailureKind::kOutOfMemory: return core::RunStatus::kOutOfMemory;
    case FailureKind::kCollectiveMismatch:
    case FailureKind::kTimeout: return core::RunStatus::kCollectiveMismatch;
    case FailureKind::kError: return core::RunStatus::kError;
  }
  return core::RunStatus::kError;
}

}  // namespace

Executor::Executor(const core::Scenario& scenario, DeviceGroup& group, ExecutorOptions options)
    : scenario_(scenario), group_(group), options_(std::move(options)), geometry_(geometry_of(scenario)) {
  check_supported(scenario, group);
}

void Executor::load_parameters(const std::vector<std::vector<std::byte>>& full_parameters) {
  const auto& model = scenario_.model;
  if (full_parameters.size() != model.params.size()) {
    throw std::invalid_argument("load_parameters: " + std::to_string(full_parameters.size()) + " tensors for " +
                                std::to_string(model.params.size()) + " parameters");
  }
  const int world = group_.world_size();
  const std::int64_t bytes = element_bytes(element_type_of(scenario_.training.dtype));
  staged_shards_.assign(static_cast<std::size_t>(world), {});
  for (std::size_t p = 0; p < model.params.size(); ++p) {
    const std::int64_t numel = model.params[p].numel;
    if (static_cast<std::int64_t>(full_parameters[p].size()) != numel * bytes) {
      throw std::invalid_argument("load_parameters: " + model.params[p].name + " has the wrong size");
    }
    // Rank r's shard: elements [r * part, (r + 1) * part), zero-padded past numel.
    const std::int64_t part = ceil_div(numel, world);
    for (int r = 0; r < world; ++r) {
      auto& shards = staged_shards_[static_cast<std::size_t>(r)];
      const std::size_t at = shards.size();
      shards.resize(at + static_cast<std::size_t>(part * bytes), std::byte{0});
      const std::int64_t begin = std::min(numel, r * part);
      const std::int64_t end = std::min(numel, (r + 1) * part);
      std::copy(full_parameters[p].begin() + begin * bytes, full_parameters[p].begin() + end * bytes,
                shards.begin() + static_cast<std::ptrdiff_t>(at));
    }
  }
}

ExecutorResult Executor::run() {
  if (staged_shards_.empty()) {
    load_parameters(seeded_parameters(scenario_.model, element_type_of(scenario_.training.dtype), options_.data_seed));
  }
  const int world = group_.world_size();
  const std::int64_t iterations = options_.iterations.value_or(scenario_.training.iterations);
  const std::vector<int> local = group_.local_ranks();
  std::vector<std::unique_ptr<RankExecutor>> ranks(local.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < local.size(); ++i) {
    threads.emplace_back([&, i] {
      const int r = local[i];
      auto& slot = ranks[i];
      try {
        // Built on its own thread: a CUDA device binds its GPU to the thread that uses it.
        slot = std::make_unique<RankExecutor>(scenario_, group_.device(r), options_, geometry_, iterations,
                                              std::move(staged_shards_[static_cast<std::size_t>(r)]));
        slot->run();
      } catch (const RunAborted&) {
        // Another rank failed first; its report stands.
      } catch (const OutOfMemoryFailure& e) {
        group_.abort(RankFailure{r, e.operation(), e.what(), FailureKind::kOutOfMemory});
      } catch (const std::exception& e) {
        group_.abort(RankFailure{r, slot ? slot->current_operation() : std::string("setup"), e.what(), FailureKind::kError});
      }
    });
  }
  for (auto& thread : threads) thread.join();
  staged_shards_.clear();

  // This process's ranks' records: every iteration, or after a failure those the rank finished
  // (none from a device that cannot say, a broken CUDA context).
  const bool failed_here = group_.failure().has_value();
  std::vector<std::optional<RankRecords>> records(static_cast<std::size_t>(world));
  for (std::size_t i = 0; i < local.size(); ++i) {
    RankExecutor* rank = ranks[i].get();
    if (!rank) continue;
    auto& slot = records[static_cast<std::size_t>(local[i])];
    if (!failed_here) {
      slot = records_of(*rank, static_cast<std::size_t>(iterations), /*with_memory=*/true);
      continue;
    }
    try {
      slot = records_of(*rank, rank->finished_iterations(), /*with_memory=*/false);
    } catch (const std::exception&) {
      slot = records_of(*rank, 0, /*with_memory=*/false);
    }
  }

  ExecutorResult result;
  const auto& training = scenario_.training;
  result.metrics.facts.ranks = world;
  result.metrics.facts.micro_batch = training.micro_batch;
  result.metrics.facts.seq_len = training.seq_len;
  result.metrics.facts.grad_accum = training.grad_accum;
  result.metrics.facts.model_flops_per_gpu_iteration = 3 * scenario_.model.forward_flops(training.micro_batch, training.seq_len);
  // Ranks that are processes: each sends its records to rank 0, which folds them all. (The
  // gather also brings a failure on another rank here, before the status is read.)
  if (ProcessLink* link = group_.process_link()) {
    const auto& mine = records[static_cast<std::size_t>(link->rank())];
    const auto all = link->gather(mine ? rank_records_to_json(*mine) : std::string());
    if (link->rank() != 0) {
      result.has_records = false;
    } else {
      for (int r = 0; r < world; ++r) {
        const auto& text = all.at(static_cast<std::size_t>(r));
        records[static_cast<std::size_t>(r)] =
            text && !text->empty() ? std::optional<RankRecords>(rank_records_from_json(*text)) : std::nullopt;
      }
    }
  }
  const auto failure = group_.failure();
  if (failure) {
    result.status = status_of(failure->kind);
    result.message = failure->message();
    result.failure = failure;
  }
  if (result.has_records) fold_records(records, failure.has_value(), result);
  return result;
}

}  // namespace prefetchlab::gpu
