#pragma once
// Exposed communication: how long one rank's compute stream sat idle because of communication in
// one iteration. The one definition both backends report (sim/ranks/world.cpp from the simulator's
// events, gpu_backend/executor/executor.cpp from the device's), each part a span between two moments that
// a marker on the compute stream observes (a marker completes once the stream has drained what
// came before it, or when it is recorded, whichever is later):
//   stalls     compute waiting on parameter all-gathers, forward and backward: each wait of the
//              compute stream on the all-gather stream (a marker before it and one after), and
//              compute idle while the host was blocked inside a fetch (the in-flight fetch
//              throttle; a single rank's no-gather wait), as for host waits below;
//   host waits each time the host blocks on communication (the persistent re-gather, the
//              reduce-bucket throttle, trace checks, the controller's agreement): from the later
//              of the block and compute draining, to the release: a marker at the block and one
//              at the release, the difference of their completions;
//   tail       the end of backward: from the later of backward's last kernel and the host
//              reaching the reduce stream's synchronisation (a marker at the sync), to the sync's
//              completion (a marker after it): the reduce-scatters compute waited for. The host's
//              own work after compute ended (the last bucket's reduce path) is the host's.
#include <cstdint>

namespace prefetchlab::core {

struct ExposedComm {
  std::int64_t forward_stall_ns = 0;   // sums of compute_idle_between_markers_ns
  std::int64_t backward_stall_ns = 0;
  std::int64_t host_wait_idle_ns = 0;  // sum of compute_idle_between_markers_ns
  std::int64_t reduce_tail_ns = 0;     // compute_idle_between_markers_ns of the sync's two markers

  std::int64_t total_ns() const { return forward_stall_ns + backward_stall_ns + host_wait_idle_ns + reduce_tail_ns; }
};

// Compute idle between two compute-stream markers: one recorded before a wait of the stream (or
// when the host blocked), one after it (or when the host was released); their completions.
std::int64_t compute_idle_between_markers_ns(std::int64_t before_marker_ns, std::int64_t after_marker_ns);

}  // namespace prefetchlab::core
