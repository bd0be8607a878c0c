#pragma once
// trace.json of a finished run: Chrome trace events (open in Perfetto or chrome://tracing).
// pid = rank; one tid per track (host thread, compute, all-gather, reduce-scatter streams and
// the NCCL FIFO), each named by metadata events; collectives carry what they moved and why.
#include <filesystem>

namespace prefetchlab::sim {

class World;

void write_trace_json(const std::filesystem::path& path, const World& world);

}  // namespace prefetchlab::sim
