#include "sim/export/trace_json.hpp"

#include <set>

#include "sim/trace/chrome_trace.hpp"
#include "sim/ranks/world.hpp"

namespace prefetchlab::sim {

const char* track_name(Track track) {
  switch (track) {
    case Track::kHost: return "host thread";
    case Track::kCompute: return "compute stream";
    case Track::kAllGather: return "all-gather stream";
    case Track::kReduceScatter: return "reduce-scatter stream";
    case Track::kNccl: return "NCCL FIFO (data-parallel communicator)";
  }
  return "?";
}

void write_trace_json(const std::filesystem::path& path, const World& world) {
  const core::ModelSpec& model = world.scenario().model;
  // Which module owns each parameter (the first that uses it), to name what a collective moved.
  std::vector<int> owner(model.params.size(), -1);
  for (std::size_t m = 0; m < model.modules.size(); ++m) {
    for (const int p : model.modules[m].param_ids) {
      if (owner[static_cast<std::size_t>(p)] < 0) owner[static_cast<std::size_t>(p)] = static_cast<int>(m);
    }
  }
  ChromeTraceWriter writer;
  for (int r = 0; r < world.ranks(); ++r) {
    if (!world.trace().records_rank(r)) continue;
    // A collapsed run's representative says which ranks it stands for (rank_symmetry.hpp).
    writer.name_process(r, world.rank_collapse().collapsed()
                               ? "rank " + std::to_string(r) + " (stands for ranks " + world.stands_for(r) +
                                     ": identical ranks simulated once)"
                               : "rank " + std::to_string(r));
    for (int t = 0; t < kTrackCount; ++t) writer.name_thread(r, t, track_name(static_cast<Track>(t)));
  }
  const LabelTable& labels = world.labels();
  world.trace().for_each_span([&](const TraceSpan& span) {
    const int tid = static_cast<int>(span.track);
    nlohmann::ordered_json args = {{"iteration", span.iteration}};
    switch (span.kind) {
      case SpanKind::kKernel:
      case SpanKind::kHost:
        writer.complete(span.rank, tid, labels.text(span.label), span.start_ns, span.duration_ns, args);
        break;
      case SpanKind::kStall:
        args["phase"] = span.phase == 0 ? "forward" : "backward";
        writer.complete(span.rank, tid, labels.text(span.label), span.start_ns, span.duration_ns, args);
        break;
      case SpanKind::kCollective: {
        const CollectiveCall& call = world.communicator().call(span.rank, span.collective_seq);
        args["phase"] = call.phase == 0 ? "forward" : "backward";
        args["kind"] = labels.text(call.label);
        args["issued_by"] = call.issued_by >= 0 ? model.modules[static_cast<std::size_t>(call.issued_by)].name
                                                : std::string("-");
        std::set<int> modules;
        for (const int p : call.param_ids) modules.insert(owner[static_cast<std::size_t>(p)]);
        nlohmann::ordered_json names = nlohmann::ordered_json::array();
        for (const int m : modules) names.push_back(model.modules[static_cast<std::size_t>(m)].name);
        args["modules"] = names;
        args["numel"] = call.numel;
        args["bytes"] = call.bytes;
        args["seq"] = span.collective_seq;
        writer.complete(span.rank, tid, collective_kind_name(call.kind), span.start_ns, span.duration_ns, args);
        break;
      }
    }
  });
  writer.write(path);
}

}  // namespace prefetchlab::sim
