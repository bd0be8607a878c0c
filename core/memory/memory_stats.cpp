#include "core/memory/memory_stats.hpp"

#include <utility>

namespace prefetchlab::core {

void MemoryStats::reset_peak() {
  for (StatArray* s : {&allocation, &allocated_bytes, &segment, &reserved_bytes, &active, &active_bytes,
                       &inactive_split, &inactive_split_bytes, &requested_bytes}) {
    s->reset_peak();
  }
  oversize_allocations.reset_peak();
  oversize_segments.reset_peak();
}

std::map<std::string, std::int64_t> MemoryStats::as_flat_map() const {
  std::map<std::string, std::int64_t> out;
  auto put_stat = [&](const std::string& name, const Stat& s) {
    out[name + ".current"] = s.current;
    out[name + ".peak"] = s.peak;
    out[name + ".allocated"] = s.allocated;
    out[name + ".freed"] = s.freed;
  };
  const std::pair<const char*, const StatArray*> arrays[] = {
      {"allocation", &allocation},         {"allocated_bytes", &allocated_bytes},
      {"segment", &segment},               {"reserved_bytes", &reserved_bytes},
      {"active", &active},                 {"active_bytes", &active_bytes},
      {"inactive_split", &inactive_split}, {"inactive_split_bytes", &inactive_split_bytes},
      {"requested_bytes", &requested_bytes}};
  for (const auto& [name, array] : arrays) {
    put_stat(std::string(name) + ".all", array->all);
    put_stat(std::string(name) + ".large_pool", array->large_pool);
    put_stat(std::string(name) + ".small_pool", array->small_pool);
  }
  put_stat("oversize_allocations", oversize_allocations);
  put_stat("oversize_segments", oversize_segments);
  out["num_alloc_retries"] = num_alloc_retries;
  out["num_ooms"] = num_ooms;
  out["num_sync_all_streams"] = num_sync_all_streams;
  out["num_device_alloc"] = num_device_alloc;
  out["num_device_free"] = num_device_free;
  return out;
}

}  // namespace prefetchlab::core
