#include "real_kineto_trace.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "core/trace_import/kineto_trace_writer.hpp"

namespace prefetchlab::apps {

void write_real_kineto_traces(const std::filesystem::path& dir, const core::Scenario& scenario, const gpu::ExecutorResult& run) {
  using Kind = gpu::TimelineSpan::Kind;
  std::filesystem::create_directories(dir);
  const int ranks = static_cast<int>(scenario.cluster.world_size());
  for (int rank = 0; rank < ranks; ++rank) {
    core::KinetoTraceWriter writer(rank, ranks, "prefetchlab real-backend run: " + scenario.name);
    std::vector<const gpu::TimelineSpan*> spans;
    for (const auto& span : run.timeline) {
      if (span.rank == rank) spans.push_back(&span);
    }
    std::stable_sort(spans.begin(), spans.end(),
                     [](const gpu::TimelineSpan* a, const gpu::TimelineSpan* b) { return a->start_ns < b->start_ns; });
    std::map<int, std::pair<std::int64_t, std::int64_t>> iterations;
    std::int64_t seq = 0;  // the communication stream runs collectives in issue order, the same on every rank
    for (const gpu::TimelineSpan* span : spans) {
      auto [it, inserted] = iterations.emplace(span->iteration, std::make_pair(span->start_ns, span->end_ns));
      if (!inserted) {
        it->second.first = std::min(it->second.first, span->start_ns);
        it->second.second = std::max(it->second.second, span->end_ns);
      }
      const std::int64_t duration = span->end_ns - span->start_ns;
      switch (span->kind) {
        case Kind::kForward:
        case Kind::kBackward: {
          std::string name = span->kind == Kind::kForward ? "fwd " : "bwd ";
          name += scenario.model.modules[static_cast<std::size_t>(span->module)].display_name();
          writer.kernel(name, core::KinetoTraceWriter::kComputeStream, span->start_ns, duration);
          break;
        }
        case Kind::kOptimizer:
          writer.kernel("optimizer step", core::KinetoTraceWriter::kComputeStream, span->start_ns, duration);
          break;
        case Kind::kGradientWork:
          writer.kernel("gradient copies", 24, span->start_ns, duration);
          break;
        case Kind::kFetch:
          break;  // a window on the compute stream, not work
        case Kind::kAllGather:
        case Kind::kReduceScatter:
        case Kind::kAllReduce: {
          const core::CollectiveKind kind = span->kind == Kind::kAllGather       ? core::CollectiveKind::kAllGather
                                            : span->kind == Kind::kReduceScatter ? core::CollectiveKind::kReduceScatter
                                                                                 : core::CollectiveKind::kAllReduce;
          const std::int64_t element_bytes = std::max<std::int64_t>(span->element_bytes, 1);
          writer.collective(kind, span->start_ns, duration, span->bytes / element_bytes, static_cast<int>(element_bytes), seq++);
          break;
        }
      }
    }
    std::vector<std::pair<int, std::pair<std::int64_t, std::int64_t>>> ordered(iterations.begin(), iterations.end());
    for (std::size_t i = 0; i < ordered.size(); ++i) {
      const std::int64_t start = ordered[i].second.first;
      const std::int64_t end = i + 1 < ordered.size() ? ordered[i + 1].second.first : ordered[i].second.second;
      writer.step(ordered[i].first, start, std::max<std::int64_t>(end - start, 0));
    }
    writer.write(dir / ("rank" + std::to_string(rank) + ".pt.trace.json"));
  }
}

}  // namespace prefetchlab::apps
