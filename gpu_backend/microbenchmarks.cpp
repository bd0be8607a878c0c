#include "gpu_backend/microbenchmarks.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/metrics/metrics.hpp"
#include "gpu_backend/process/process_link.hpp"
#include "gpu_backend/device/rank_failure.hpp"

namespace prefetchlab::gpu {
namespace {

using Clock = std::chrono::steady_clock;

// One rank's buffers, freed with the object (after the device has finished with them).
class Buffers {
 public:
  Buffers(Device& device, StreamId stream) : device_(device), stream_(stream) {}
  ~Buffers() {
    try {
      device_.synchronize_all();
      for (const auto& b : buffers_) device_.free(b);
    } catch (...) {
      // A failed group: the device is going away with it.
    }
  }
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;
  DeviceSpan get(std::uint64_t bytes) {
    auto buffer = device_.allocate(std::max<std::uint64_t>(bytes, 1), stream_);
    if (!buffer) throw std::runtime_error("microbenchmark: out of device memory allocating " + std::to_string(bytes) + " bytes");
    buffers_.push_back(*buffer);
    // Finite numbers (NaNs can be slower on a CPU), ready before any stream uses the buffer.
    device_.zero(stream_, buffer->span);
    device_.synchronize(device_.record(stream_));
    return buffer->span.sub(0, bytes);
  }

 private:
  Device& device_;
  StreamId stream_;
  std::vector<DeviceBuffer> buffers_;
};

// Device time of one call of `enqueue` on `stream`: the median over `reps` calls, each between
// its own pair of events. The median, not the mean: on a shared CPU (the host device, CI) one
// preempted repetition made a mean GEMM 3x its neighbours' and moved the whole fit.
double timed_ns(Device& device, StreamId stream, int reps, const std::function<void()>& enqueue) {
  std::vector<EventId> events{device.record(stream)};
  for (int i = 0; i < reps; ++i) {
    enqueue();
    events.push_back(device.record(stream));
  }
  device.synchronize(events.back());
  std::vector<double> ns;
  for (std::size_t i = 1; i < events.size(); ++i) ns.push_back(static_cast<double>(device.elapsed_ns(events[i - 1], events[i])));
  return core::median(std::move(ns));
}

// The largest of every rank's `value` (an fp64 all-reduce), so all ranks pick the same
// repetition counts and issue the same collectives.
double agree_max(Device& device, StreamId stream, Buffers& buffers, double value) {
  const DeviceSpan span = buffers.get(sizeof(double));
  device.copy_host_to_device(stream, span, &value);
  device.all_reduce(stream, span, ElementType::kFP64, ReduceOp::kMax);
  double out = 0;
  device.copy_device_to_host(stream, &out, span);
  device.synchronize(device.record(stream));
  return out;
}

// op(A)[m x k] . op(B)[k x n] into C[m x n], row-major with packed leading dimensions.
GemmArgs gemm_args(const GemmShape& s, DeviceSpan a, DeviceSpan b, DeviceSpan c, ElementType type,
                   bool transpose_a = false, bool transpose_b = false, float beta = 0.0f) {
  const auto bytes = [&](std::int64_t numel) { return static_cast<std::uint64_t>(numel * element_bytes(type)); };
  GemmArgs g;
  g.m = s.m, g.n = s.n, g.k = s.k;
  g.transpose_a = transpose_a, g.transpose_b = transpose_b;
  g.a = a.sub(0, bytes(s.m * s.k)), g.lda = transpose_a ? s.m : s.k;
  g.b = b.sub(0, bytes(s.k * s.n)), g.ldb = transpose_b ? s.k : s.n;
  g.c = c.sub(0, bytes(s.m * s.n)), g.ldc = s.n;
  g.beta = beta;
  g.type = type;
  return g;
}

// The executor's backward of a forward GEMM (m, n, k) = (tokens, out, in): dgrad
// dX[tokens x in] = dY . W^T, then wgrad dW[in x out] += X^T . dY.
std::vector<GemmArgs> backward_gemms(const GemmShape& s, DeviceSpan a, DeviceSpan b, DeviceSpan c, ElementType type) {
  return {gemm_args({s.m, s.k, s.n}, a, b, c, type, false, true),
          gemm_args({s.k, s.n, s.m}, a, b, c, type, true, false, 1.0f)};
}

struct RankResults {
  std::vector<CollectiveTiming> all_gather, reduce_scatter;
  std::vector<double> gemm_ns, gemm_backward_ns;
  double adam_elements_per_s = 0;
  std::vector<SizeTiming> memory_passes, h2d, d2h;
  double launch_ns = 0, collective_launch_ns = 0;
  ContentionTiming contention;
};

// Each rank's results in JSON, for ranks that are processes (every field; doubles round-trip).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RankResults, all_gather, reduce_scatter, gemm_ns, gemm_backward_ns, adam_elements_per_s,
                                   memory_passes, h2d, d2h, launch_ns, collective_launch_ns, contention)

std::vector<CollectiveTiming> collective_sweep(Device& device, StreamId comm, Buffers& buffers, CollectiveOp op,
                                               const MicrobenchmarkOptions& o) {
  const std::int64_t world = device.world_size();
  const std::int64_t eb = element_bytes(o.type);
  std::vector<CollectiveTiming> rows;
  for (const std::int64_t size : o.collective_sizes_bytes) {
    const std::int64_t count = size / (eb * world);
    if (count <= 0) continue;
    const auto slot = static_cast<std::uint64_t>(count * eb);
    const DeviceSpan big = buffers.get(slot * static_cast<std::uint64_t>(world));
    const DeviceSpan small = buffers.get(slot);
    const DeviceSpan own = big.sub(slot * static_cast<std::uint64_t>(device.rank()), slot);
    auto issue = [&](bool in_place) {
      if (op == CollectiveOp::kAllGather) {
        device.all_gather(comm, in_place ? own : small, big, o.type);
      } else {
        device.reduce_scatter(comm, big, in_place ? own : small, o.type, ReduceOp::kSum);
      }
    };
    CollectiveTiming row;
    row.bytes = count * eb * world;
    row.count = count;
    for (int w = 0; w < o.warmup; ++w) issue(false);
    row.out_of_place_us = timed_ns(device, comm, o.iterations, [&] { issue(false); }) / 1e3;
    row.in_place_us = timed_ns(device, comm, o.iterations, [&] { issue(true); }) / 1e3;
    rows.push_back(row);
  }
  return rows;
}

RankResults run_rank(Device& device, const MicrobenchmarkOptions& o) {
  RankResults r;
  const StreamId compute = device.create_stream("compute");
  const StreamId comm = device.create_stream("all_gather");
  Buffers buffers(device, compute);
  const std::int64_t eb = element_bytes(o.type);
  const bool collectives = device.world_size() > 1;
  if (collectives) {
    r.all_gather = collective_sweep(device, comm, buffers, CollectiveOp::kAllGather, o);
    r.reduce_scatter = collective_sweep(device, comm, buffers, CollectiveOp::kReduceScatter, o);
  }
  // GEMMs: operands sized for the largest matrix of any shape (forward or backward), reused.
  auto largest = [](const GemmShape& s) { return std::max({s.m * s.k, s.k * s.n, s.m * s.n}); };
  std::int64_t numel = largest(o.contention_gemm);
  for (const auto& s : o.gemm_shapes) numel = std::max(numel, largest(s));
  const DeviceSpan a = buffers.get(static_cast<std::uint64_t>(numel * eb));
  const DeviceSpan b = buffers.get(static_cast<std::uint64_t>(numel * eb));
  const DeviceSpan c = buffers.get(static_cast<std::uint64_t>(numel * eb));
  for (const auto& s : o.gemm_shapes) {
    const GemmArgs g = gemm_args(s, a, b, c, o.type);
    for (int w = 0; w < o.warmup; ++w) device.gemm(compute, g);
    r.gemm_ns.push_back(timed_ns(device, compute, o.iterations, [&] { device.gemm(compute, g); }));
    const std::vector<GemmArgs> backward = backward_gemms(s, a, b, c, o.type);
    r.gemm_backward_ns.push_back(timed_ns(device, compute, o.iterations, [&] {
      for (const auto& k : backward) device.gemm(compute, k);
    }));
  }
  // The memory-bound benchmarks below start together on every rank, as training's Adam steps and
  // copies do (after the same end-of-backward): ranks drifted apart over the GEMMs, and a rank
  // whose Adam overlapped another's GEMMs had the memory bus to itself (a 20% faster Adam).
  const auto line_up = [&] { agree_max(device, comm, buffers, 0.0); };
  // One Adam step over a partition (fp32 master and moments, gradients in the training type).
  line_up();
  {
    AdamArgs adam;
    adam.numel = o.adam_numel;
    const auto bytes = static_cast<std::uint64_t>(o.adam_numel * eb), fp32 = static_cast<std::uint64_t>(o.adam_numel * 4);
    adam.params = buffers.get(bytes), adam.grads = buffers.get(bytes);
    adam.master = buffers.get(fp32), adam.exp_avg = buffers.get(fp32), adam.exp_avg_sq = buffers.get(fp32);
    adam.param_type = o.type;
    device.adam(compute, adam);
    const double ns = timed_ns(device, compute, o.iterations, [&] { device.adam(compute, adam); });
    r.adam_elements_per_s = static_cast<double>(o.adam_numel) / (ns * 1e-9);
  }
  // Memory-bound passes: read `size` bytes, write as many, one buffer pair per size (freed
  // before the next, so the largest sizes fit beside the GEMM operands).
  for (const std::int64_t size : o.memory_pass_sizes_bytes) {
    line_up();
    Buffers pass_buffers(device, compute);
    ElementwiseArgs e;
    e.op = ElementwiseOp::kScale;
    e.numel = std::max<std::int64_t>(1, size / eb);
    const auto bytes = static_cast<std::uint64_t>(e.numel * eb);
    e.a = pass_buffers.get(bytes);
    e.dst = pass_buffers.get(bytes);
    e.alpha = 0.5f;
    e.type = o.type;
    device.elementwise(compute, e);
    r.memory_passes.push_back(
        {static_cast<std::int64_t>(bytes), timed_ns(device, compute, o.iterations, [&] { device.elementwise(compute, e); })});
  }
  // Host <-> device copies, one host buffer of the largest size (pinned once), each size a
  // prefix of it.
  {
    std::int64_t largest_copy = 1;
    for (const std::int64_t size : o.copy_sizes_bytes) largest_copy = std::max(largest_copy, size);
    std::vector<std::byte> host(static_cast<std::size_t>(largest_copy));
    Buffers copy_buffers(device, compute);
    const DeviceSpan span = copy_buffers.get(static_cast<std::uint64_t>(largest_copy));
    if (o.pin_host_buffers) device.pin_host_memory(host.data(), host.size());
    for (const std::int64_t size : o.copy_sizes_bytes) {
      line_up();
      const DeviceSpan part = span.sub(0, static_cast<std::uint64_t>(std::max<std::int64_t>(1, size)));
      device.copy_host_to_device(compute, part, host.data());
      r.h2d.push_back({size, timed_ns(device, compute, o.iterations, [&] { device.copy_host_to_device(compute, part, host.data()); })});
      r.d2h.push_back({size, timed_ns(device, compute, o.iterations, [&] { device.copy_device_to_host(compute, host.data(), part); })});
    }
    device.synchronize_all();
    if (o.pin_host_buffers) device.unpin_host_memory(host.data());
  }
  // Launch overhead: what the host spends enqueueing a tiny kernel / collective.
  {
    ElementwiseArgs e;
    e.op = ElementwiseOp::kScale;
    e.numel = 1;
    e.a = buffers.get(static_cast<std::uint64_t>(eb));
    e.dst = buffers.get(static_cast<std::uint64_t>(eb));
    e.type = o.type;
    device.synchronize_all();
    auto t0 = Clock::now();
    for (std::int64_t i = 0; i < o.launch_samples; ++i) device.elementwise(compute, e);
    r.launch_ns = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count()) /
                  static_cast<double>(o.launch_samples);
    device.synchronize_all();
    const auto slot = static_cast<std::uint64_t>(eb);
    const DeviceSpan recv = buffers.get(slot * static_cast<std::uint64_t>(device.world_size()));
    const DeviceSpan send = buffers.get(slot);
    const std::int64_t samples = std::max<std::int64_t>(1, o.launch_samples / 10);
    device.synchronize_all();
    t0 = Clock::now();
    for (std::int64_t i = 0; i < samples; ++i) device.all_gather(comm, send, recv, o.type);
    r.collective_launch_ns =
        static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count()) /
        static_cast<double>(samples);
    device.synchronize_all();
  }
  // Contention: a GEMM stream and an all-gather stream, alone and at once, with repetition
  // counts that make both sides last about as long (agreed over ranks).
  {
    const GemmArgs g = gemm_args(o.contention_gemm, a, b, c, o.type);
    const std::int64_t world = device.world_size();
    const std::int64_t count = std::max<std::int64_t>(1, o.contention_collective_bytes / (eb * world));
    const auto slot = static_cast<std::uint64_t>(count * eb);
    const DeviceSpan recv = buffers.get(slot * static_cast<std::uint64_t>(world));
    const DeviceSpan send = buffers.get(slot);
    device.gemm(compute, g);
    device.all_gather(comm, send, recv, o.type);
    const double gemm_one = timed_ns(device, compute, 2, [&] { device.gemm(compute, g); });
    const double ag_one = timed_ns(device, comm, 2, [&] { device.all_gather(comm, send, recv, o.type); });
    const int gemm_reps = 4;
    const int ag_reps = static_cast<int>(std::clamp(
        agree_max(device, comm, buffers, std::ceil(gemm_reps * gemm_one / std::max(ag_one, 1.0))), 1.0, 1000.0));
    // Alone and overlapped, `iterations` times in turn, each figure the median of its runs: one
    // pair on a shared CPU swung the fitted contention from 0 to +60%.
    std::vector<double> gemm_alone, collective_alone, gemm_overlapped, collective_overlapped;
    for (int rep = 0; rep < o.iterations; ++rep) {
      gemm_alone.push_back(timed_ns(device, compute, gemm_reps, [&] { device.gemm(compute, g); }) * gemm_reps);
      collective_alone.push_back(
          timed_ns(device, comm, ag_reps, [&] { device.all_gather(comm, send, recv, o.type); }) * ag_reps);
      const EventId g0 = device.record(compute);
      const EventId c0 = device.record(comm);
      for (int i = 0; i < std::max(gemm_reps, ag_reps); ++i) {
        if (i < gemm_reps) device.gemm(compute, g);
        if (i < ag_reps) device.all_gather(comm, send, recv, o.type);
      }
      const EventId g1 = device.record(compute);
      const EventId c1 = device.record(comm);
      device.synchronize(g1);
      device.synchronize(c1);
      gemm_overlapped.push_back(static_cast<double>(device.elapsed_ns(g0, g1)));
      collective_overlapped.push_back(static_cast<double>(device.elapsed_ns(c0, c1)));
    }
    auto& ct = r.contention;
    ct.gemm_alone_ns = core::median(gemm_alone);
    ct.collective_alone_ns = core::median(collective_alone);
    ct.gemm_overlapped_ns = core::median(gemm_overlapped);
    ct.collective_overlapped_ns = core::median(collective_overlapped);
  }
  return r;
}

}  // namespace

void run_on_ranks(DeviceGroup& group, const std::function<void(Device&)>& fn) {
  std::vector<std::thread> threads;
  for (const int rank : group.local_ranks()) {
    threads.emplace_back([&group, &fn, rank] {
      try {
        fn(group.device(rank));
      } catch (const RunAborted&) {
        // Another rank failed first; its report stands.
      } catch (const std::exception& e) {
        group.abort(RankFailure{rank, "microbenchmark", e.what(), FailureKind::kError});
      }
    });
  }
  for (auto& t : threads) t.join();
  if (const auto failure = group.failure()) throw std::runtime_error(failure->message());
}

MicrobenchmarkResults run_microbenchmarks(DeviceGroup& group, const MicrobenchmarkOptions& options) {
  if (options.iterations < 1 || options.warmup < 0) throw std::invalid_argument("microbenchmarks need iterations >= 1");
  const int world = group.world_size();
  std::vector<RankResults> ranks(static_cast<std::size_t>(world));
  run_on_ranks(group, [&](Device& device) { ranks[static_cast<std::size_t>(device.rank())] = run_rank(device, options); });

  MicrobenchmarkResults out;
  out.world_size = world;
  out.ranks_per_node = world;  // threads of one process
  if (ProcessLink* link = group.process_link()) {
    // Each process measured its own rank: rank 0 gathers them all.
    const nlohmann::json mine = ranks[static_cast<std::size_t>(link->rank())];
    const auto all = link->gather(mine.dump());
    if (const auto failure = group.failure()) throw std::runtime_error(failure->message());
    if (link->rank() != 0) {
      out.has_results = false;
      return out;
    }
    for (int r = 0; r < world; ++r) {
      const auto& text = all.at(static_cast<std::size_t>(r));
      if (!text) throw std::runtime_error("rank " + std::to_string(r) + " sent no microbenchmark results");
      ranks[static_cast<std::size_t>(r)] = nlohmann::json::parse(*text).get<RankResults>();
    }
    out.nodes = link->nodes();
    out.ranks_per_node = link->ranks_per_node();
  }
  const double n = world;
  auto mean = [&](auto field) {
    double sum = 0;
    for (const auto& r : ranks) sum += field(r);
    return sum / n;
  };
  // Collectives end when the slowest rank does: the maximum over ranks.
  auto combine = [&](auto member) {
    std::vector<CollectiveTiming> rows = ranks[0].*member;
    for (const auto& r : ranks) {
      for (std::size_t i = 0; i < rows.size(); ++i) {
        rows[i].out_of_place_us = std::max(rows[i].out_of_place_us, (r.*member)[i].out_of_place_us);
        rows[i].in_place_us = std::max(rows[i].in_place_us, (r.*member)[i].in_place_us);
      }
    }
    return rows;
  };
  out.all_gather = combine(&RankResults::all_gather);
  out.reduce_scatter = combine(&RankResults::reduce_scatter);
  for (std::size_t i = 0; i < options.gemm_shapes.size(); ++i) {
    out.gemms.push_back({options.gemm_shapes[i], mean([&](const RankResults& r) { return r.gemm_ns[i]; }),
                         mean([&](const RankResults& r) { return r.gemm_backward_ns[i]; })});
  }
  // Per size: the mean over ranks of each rank's median time.
  auto mean_sizes = [&](auto member) {
    std::vector<SizeTiming> rows = ranks[0].*member;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      rows[i].time_ns = mean([&](const RankResults& r) { return (r.*member)[i].time_ns; });
    }
    return rows;
  };
  out.memory_passes = mean_sizes(&RankResults::memory_passes);
  out.adam_elements_per_s = mean([](const RankResults& r) { return r.adam_elements_per_s; });
  out.host_to_device = mean_sizes(&RankResults::h2d);
  out.device_to_host = mean_sizes(&RankResults::d2h);
  out.kernel_launch_ns = mean([](const RankResults& r) { return r.launch_ns; });
  out.collective_launch_ns = mean([](const RankResults& r) { return r.collective_launch_ns; });
  out.contention.gemm_alone_ns = mean([](const RankResults& r) { return r.contention.gemm_alone_ns; });
  out.contention.gemm_overlapped_ns = mean([](const RankResults& r) { return r.contention.gemm_overlapped_ns; });
  out.contention.collective_alone_ns = mean([](const RankResults& r) { return r.contention.collective_alone_ns; });
  out.contention.collective_overlapped_ns =
      mean([](const RankResults& r) { return r.contention.collective_overlapped_ns; });
  return out;
}

}  // namespace prefetchlab::gpu
