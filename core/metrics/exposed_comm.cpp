#include "core/metrics/exposed_comm.hpp"

#include <algorithm>

namespace prefetchlab::core {

std::int64_t compute_idle_during_host_wait_ns(std::int64_t block_marker_ns, std::int64_t release_marker_ns) {
  return std::max<std::int64_t>(0, release_marker_ns - block_marker_ns);
}

std::int64_t reduce_tail_ns(std::int64_t sync_marker_ns, std::int64_t after_sync_marker_ns) {
  return std::max<std::int64_t>(0, after_sync_marker_ns - sync_marker_ns);
}

}  // namespace prefetchlab::core
