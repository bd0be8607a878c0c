#pragma once
// What fills a GPU's memory at its peak: the caching allocator's reserved bytes split by what
// the allocated blocks hold, plus what the allocator keeps cached (reserved but not allocated:
// freed blocks awaiting reuse and fragmentation). The simulator tags every allocation with its
// use (sim/ranks/rank_memory.hpp) and keeps the split at the moment reserved bytes last rose to their
// peak, on the rank whose peak is highest.
#include <cstdint>

namespace prefetchlab::core {

enum class MemoryUse {
  kModelStates,     // parameter shards, fp32 master weights, Adam moments, gradient partition, IPG bucket
  kActivations,     // what the forward saves for the backward
  kGatheredParams,  // all-gathered (full) parameter buffers
  kGradients,       // full gradients before their reduce-scatter, reduce-scatter buckets
};
inline constexpr int kMemoryUses = 4;

struct PeakMemoryBreakdown {
  int rank = 0;
  std::int64_t reserved_bytes = 0;
  std::int64_t allocated_bytes = 0;
  std::int64_t model_states_bytes = 0;
  std::int64_t activation_bytes = 0;
  std::int64_t gathered_param_bytes = 0;
  std::int64_t gradient_bytes = 0;
  // Reserved but not allocated: the allocator's cache (and fragmentation).
  std::int64_t cache_bytes() const { return reserved_bytes - allocated_bytes; }
};

}  // namespace prefetchlab::core
