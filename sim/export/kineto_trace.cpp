#include "sim/export/kineto_trace.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "core/trace_import/kineto_trace_writer.hpp"
#include "sim/trace/deepspeed_frames.hpp"
#include "sim/ranks/world.hpp"

namespace prefetchlab::sim {
namespace {

int stream_of(Track track) {
  switch (track) {
    case Track::kCompute: return core::KinetoTraceWriter::kComputeStream;
    case Track::kAllGather: return 20;
    case Track::kReduceScatter: return 24;
    case Track::kNccl: return core::KinetoTraceWriter::kNcclStream;
    case Track::kHost: return 0;
  }
  return 0;
}

core::CollectiveKind kind_of(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllGather: return core::CollectiveKind::kAllGather;
    case CollectiveKind::kReduceScatter: return core::CollectiveKind::kReduceScatter;
    case CollectiveKind::kAllReduce: return core::CollectiveKind::kAllReduce;
  }
  return core::CollectiveKind::kOther;
}

}  // namespace

void write_kineto_traces(const std::filesystem::path& dir, const World& world) {
  std::filesystem::create_directories(dir);
  const LabelTable& labels = world.labels();
  const int ranks = world.ranks();
  for (int rank = 0; rank < ranks; ++rank) {
    if (!world.trace().records_rank(rank)) continue;  // output.trace_ranks left it out
    core::KinetoTraceWriter writer(rank, ranks, "prefetchlab simulated run: " + world.scenario().name);
    std::map<std::int32_t, std::pair<TimeNs, TimeNs>> iterations;  // iteration -> first start, last end
    world.trace().for_each_span([&](const TraceSpan& span) {
      if (span.rank != rank) return;
      auto [it, inserted] = iterations.emplace(span.iteration, std::make_pair(span.start_ns, span.start_ns + span.duration_ns));
      if (!inserted) {
        it->second.first = std::min(it->second.first, span.start_ns);
        it->second.second = std::max(it->second.second, span.start_ns + span.duration_ns);
      }
      switch (span.kind) {
        case SpanKind::kHost:
          writer.host_op(labels.text(span.label), span.start_ns, span.duration_ns);
          break;
        case SpanKind::kKernel:
          writer.kernel(labels.text(span.label), stream_of(span.track), span.start_ns, span.duration_ns);
          break;
        case SpanKind::kStall:
          break;  // idle time, not an event a profiler records
        case SpanKind::kCollective: {
          const CollectiveCall& call = world.communicator().call(span.rank, span.collective_seq);
          // Element size from the call's bytes over its elements (padding makes it a little
          // larger): the nearest of 1, 2, 4, 8.
          const double ratio = static_cast<double>(call.bytes) / static_cast<double>(std::max<std::int64_t>(call.numel, 1));
          const int element_bytes = ratio < 1.5 ? 1 : ratio < 3 ? 2 : ratio < 6 ? 4 : 8;
          writer.collective(kind_of(call.kind), span.start_ns, span.duration_ns, call.bytes / element_bytes, element_bytes,
                            span.collective_seq);
          break;
        }
      }
    });
    // DeepSpeed's Python frames (when the world logged them), of the iterations kept, each
    // caller before its callees where they start together (the reader nests by start, then
    // length, then file order).
    std::vector<HostFrame> frames;
    for (const HostFrame& f : world.deepspeed_frames(rank)) {
      if (iterations.count(f.iteration)) frames.push_back(f);
    }
    std::stable_sort(frames.begin(), frames.end(), [](const HostFrame& a, const HostFrame& b) {
      if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
      if (a.duration_ns != b.duration_ns) return a.duration_ns > b.duration_ns;
      return a.depth < b.depth;
    });
    for (const HostFrame& f : frames) {
      if (is_python_frame(f.frame)) {
        writer.python_function(deepspeed_frame_name(f.frame), f.start_ns, f.duration_ns);
      } else {
        writer.runtime(deepspeed_frame_name(f.frame), f.start_ns, f.duration_ns);
      }
    }
    // One ProfilerStep#N per iteration: from its first event to the next iteration's first.
    std::vector<std::pair<std::int32_t, std::pair<TimeNs, TimeNs>>> ordered(iterations.begin(), iterations.end());
    for (std::size_t i = 0; i < ordered.size(); ++i) {
      const TimeNs start = ordered[i].second.first;
      const TimeNs end = i + 1 < ordered.size() ? ordered[i + 1].second.first : ordered[i].second.second;
      writer.step(ordered[i].first, start, std::max<TimeNs>(end - start, 0));
    }
    writer.write(dir / ("rank" + std::to_string(rank) + ".pt.trace.json"));
  }
}

}  // namespace prefetchlab::sim
