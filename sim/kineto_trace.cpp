#include "kineto_trace.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/io/json_file.hpp"
#include "sim/world.hpp"

namespace prefetchlab::sim {
namespace {

// Kineto's identities: the host thread is an OS (pid, tid); GPU events use pid = device and
// tid = stream. Stream numbers as CUDA gives them in real traces (7 = the default compute stream).
constexpr int kHostPid = 1000;
constexpr int kComputeStream = 7;
constexpr int kNcclStream = 40;

int stream_of(Track track) {
  switch (track) {
    case Track::kCompute: return kComputeStream;
    case Track::kAllGather: return 20;
    case Track::kReduceScatter: return 24;
    case Track::kNccl: return kNcclStream;
    case Track::kHost: return 0;
  }
  return 0;
}

double us(TimeNs ns) { return static_cast<double>(ns) / 1000.0; }

const char* nccl_kernel_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllGather: return "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
    case CollectiveKind::kReduceScatter: return "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
    case CollectiveKind::kAllReduce: return "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
  }
  return "ncclDevKernel_Generic";
}

const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllGather: return "_allgather_base";
    case CollectiveKind::kReduceScatter: return "_reduce_scatter_base";
    case CollectiveKind::kAllReduce: return "allreduce";
  }
  return "";
}

}  // namespace

void write_kineto_traces(const std::filesystem::path& dir, const World& world) {
  std::filesystem::create_directories(dir);
  const LabelTable& labels = world.labels();
  const int ranks = world.ranks();
  for (int rank = 0; rank < ranks; ++rank) {
    nlohmann::ordered_json events = nlohmann::ordered_json::array();
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", kHostPid}, {"tid", kHostPid},
                      {"args", {{"name", "thread " + std::to_string(kHostPid) + " (pt_main_thread)"}}}});
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
          events.push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", labels.text(span.label)}, {"pid", kHostPid},
                            {"tid", kHostPid}, {"ts", us(span.start_ns)}, {"dur", us(span.duration_ns)}});
          break;
        case SpanKind::kKernel:
          events.push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", labels.text(span.label)}, {"pid", 0},
                            {"tid", stream_of(span.track)}, {"ts", us(span.start_ns)}, {"dur", us(span.duration_ns)},
                            {"args", {{"device", 0}, {"stream", stream_of(span.track)}}}});
          break;
        case SpanKind::kStall:
          break;  // idle time, not an event a profiler records
        case SpanKind::kCollective: {
          const CollectiveCall& call = world.communicator().call(span.rank, span.collective_seq);
          // Element size from the call's bytes over its elements (padding makes it a little
          // larger): the nearest of 1, 2, 4, 8.
          const double ratio = static_cast<double>(call.bytes) / static_cast<double>(std::max<std::int64_t>(call.numel, 1));
          const int element_bytes = ratio < 1.5 ? 1 : ratio < 3 ? 2 : ratio < 6 ? 4 : 8;
          const std::int64_t full = call.bytes / element_bytes;
          const std::int64_t shard = full / ranks;
          const bool gather = call.kind == CollectiveKind::kAllGather;
          const bool reduce_scatter = call.kind == CollectiveKind::kReduceScatter;
          events.push_back(
              {{"ph", "X"}, {"cat", "kernel"}, {"name", nccl_kernel_name(call.kind)}, {"pid", 0}, {"tid", kNcclStream},
               {"ts", us(span.start_ns)}, {"dur", us(span.duration_ns)},
               {"args",
                {{"device", 0}, {"stream", kNcclStream}, {"Collective name", collective_name(call.kind)},
                 {"In msg nelems", gather ? shard : full}, {"Out msg nelems", reduce_scatter ? shard : full},
                 {"Group size", ranks},
                 {"dtype", element_bytes == 2 ? "BFloat16" : element_bytes == 4 ? "Float" : element_bytes == 8 ? "Double" : "Byte"},
                 {"Process Group Name", "0"}, {"Process Group Description", "default_pg"}, {"Seq", span.collective_seq}}}});
          break;
        }
      }
    });
    // One ProfilerStep#N per iteration: from its first event to the next iteration's first.
    std::vector<std::pair<std::int32_t, std::pair<TimeNs, TimeNs>>> ordered(iterations.begin(), iterations.end());
    for (std::size_t i = 0; i < ordered.size(); ++i) {
      const TimeNs start = ordered[i].second.first;
      const TimeNs end = i + 1 < ordered.size() ? ordered[i + 1].second.first : ordered[i].second.second;
      events.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", "ProfilerStep#" + std::to_string(ordered[i].first)},
                        {"pid", kHostPid}, {"tid", kHostPid}, {"ts", us(start)}, {"dur", us(std::max<TimeNs>(end - start, 0))}});
    }
    nlohmann::ordered_json doc;
    doc["schemaVersion"] = 1;
    doc["distributedInfo"] = {{"backend", "nccl"}, {"rank", rank}, {"world_size", ranks}};
    doc["traceName"] = "prefetchlab simulated run: " + world.scenario().name;
    doc["displayTimeUnit"] = "ms";
    doc["traceEvents"] = std::move(events);
    core::write_text_atomically(dir / ("rank" + std::to_string(rank) + ".pt.trace.json"), doc.dump() + "\n");
  }
}

}  // namespace prefetchlab::sim
