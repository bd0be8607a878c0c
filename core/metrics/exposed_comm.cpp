#include "core/metrics/exposed_comm.hpp"

#include <algorithm>

namespace prefetchlab::core {

std::int64_t compute_idle_between_markers_ns(std::int64_t before_marker_ns, std::int64_t after_marker_ns) {
  return std::max<std::int64_t>(0, after_marker_ns - before_marker_ns);
}

}  // namespace prefetchlab::core
