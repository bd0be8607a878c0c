#pragma once
// A finished run as torch.profiler would have recorded it: one Kineto-schema Chrome trace per
// rank (rank<N>.pt.trace.json), so that a simulated run goes through the same reader as a real
// one (core/trace_import/, docs/traces.md): ProfilerStep#N per iteration on the host thread,
// host spans as cpu_op, DeepSpeed's Python frames as python_function events where the world
// logged them (World::record_deepspeed_frames, sim/trace/deepspeed_frames.hpp) and the host's
// blocking as cudaEventSynchronize, kernels on their streams, collectives as NCCL kernels carrying
// PyTorch's collective metadata ("Collective name", "In/Out msg nelems", "Group size", "dtype",
// "Process Group Name", "Seq"). The simulator starts a collective when every rank has arrived,
// so a simulated collective's span is its transfer on every rank: no skew (the waiting shows
// as compute-stream stalls, which are not kernels and are left out).
#include <filesystem>

namespace prefetchlab::sim {

class World;

void write_kineto_traces(const std::filesystem::path& dir, const World& world);

}  // namespace prefetchlab::sim
