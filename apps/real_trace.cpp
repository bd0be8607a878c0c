#include "real_trace.hpp"

#include <string>

#include "prefetchlab/version.hpp"
#include "sim/trace/chrome_trace.hpp"

namespace prefetchlab::apps {
namespace {

// One track per kind of span; each holds spans that cannot overlap (one stream, in order).
enum Track { kCompute = 0, kFetch = 1, kCommunication = 2, kReduce = 3 };

const char* kind_name(gpu::TimelineSpan::Kind kind) {
  switch (kind) {
    case gpu::TimelineSpan::Kind::kForward: return "fwd";
    case gpu::TimelineSpan::Kind::kBackward: return "bwd";
    case gpu::TimelineSpan::Kind::kFetch: return "fetch";
    case gpu::TimelineSpan::Kind::kAllGather: return "all_gather";
    case gpu::TimelineSpan::Kind::kReduceScatter: return "reduce_scatter";
    case gpu::TimelineSpan::Kind::kAllReduce: return "all_reduce";
    case gpu::TimelineSpan::Kind::kGradientWork: return "gradient copies";
    case gpu::TimelineSpan::Kind::kOptimizer: return "optimizer step";
  }
  return "?";
}

}  // namespace

void write_real_trace_json(const std::filesystem::path& path, const core::Scenario& scenario,
                           const gpu::ExecutorResult& run) {
  sim::ChromeTraceWriter writer;
  for (int r = 0; r < static_cast<int>(scenario.cluster.world_size()); ++r) {
    writer.name_process(r, "rank " + std::to_string(r));
    writer.name_thread(r, kCompute, "compute stream (module kernels)");
    writer.name_thread(r, kFetch, "compute stream (fetch windows)");
    writer.name_thread(r, kCommunication, "communication stream");
    writer.name_thread(r, kReduce, "reduce stream (gradient copies)");
  }
  using Kind = gpu::TimelineSpan::Kind;
  for (const gpu::TimelineSpan& span : run.timeline) {
    nlohmann::ordered_json args = {{"iteration", span.iteration}};
    std::string name = kind_name(span.kind);
    int tid = span.kind == Kind::kGradientWork ? kReduce : span.kind == Kind::kOptimizer ? kCompute : kCommunication;
    if (span.kind == Kind::kForward || span.kind == Kind::kBackward || span.kind == Kind::kFetch) {
      // Appended piece by piece: `" " + name` trips GCC 12's -Wrestrict false positive at -O3.
      name += ' ';
      name += scenario.model.modules[static_cast<std::size_t>(span.module)].display_name();
      args["module"] = span.module;
      tid = span.kind == Kind::kFetch ? kFetch : kCompute;
      if (span.kind == Kind::kFetch) args["phase"] = span.phase == core::Phase::kForward ? "forward" : "backward";
    }
    writer.complete(span.rank, tid, name, span.start_ns, span.end_ns - span.start_ns, args);
  }
  writer.other_data() = {{"scenario", scenario.name}, {"source", "real run (device events)"},
                         {"tool_version", kVersion}};
  writer.write(path);
}

}  // namespace prefetchlab::apps
