#pragma once
// torch.cuda.memory_stats() as the caching allocator keeps it (c10 DeviceStats): every statistic
// has current/peak/allocated/freed for all pools, the large pool and the small pool.
#include <cstdint>
#include <map>
#include <string>

namespace prefetchlab::core {

struct Stat {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  std::int64_t allocated = 0;  // sum of increases ever
  std::int64_t freed = 0;      // sum of decreases ever

  void increase(std::int64_t amount) {
    current += amount;
    allocated += amount;
    if (current > peak) peak = current;
  }
  void decrease(std::int64_t amount) {
    current -= amount;
    freed += amount;
  }
  void reset_peak() { peak = current; }
};

// `.all`, `.large_pool`, `.small_pool` of one statistic.
struct StatArray {
  Stat all;
  Stat large_pool;
  Stat small_pool;

  void increase(bool small_pool_block, std::int64_t amount) {
    all.increase(amount);
    (small_pool_block ? small_pool : large_pool).increase(amount);
  }
  void decrease(bool small_pool_block, std::int64_t amount) {
    all.decrease(amount);
    (small_pool_block ? small_pool : large_pool).decrease(amount);
  }
  void reset_peak() {
    all.reset_peak();
    large_pool.reset_peak();
    small_pool.reset_peak();
  }
};

struct MemoryStats {
  StatArray allocation;            // allocated blocks (count)
  StatArray allocated_bytes;       // sizes of handed-out blocks (after rounding / no split)
  StatArray segment;               // segments held (count)
  StatArray reserved_bytes;        // bytes held from the device
  StatArray active;                // allocated + freed-but-waiting-on-stream-events (count)
  StatArray active_bytes;
  StatArray inactive_split;        // free blocks inside split (partly used) segments (count)
  StatArray inactive_split_bytes;
  StatArray requested_bytes;       // original request sizes of active blocks
  std::int64_t num_alloc_retries = 0;   // cudaMalloc retried after releasing every cached segment
  std::int64_t num_ooms = 0;            // malloc calls that ended out of memory
  std::int64_t num_sync_all_streams = 0;  // times the allocator waited for every stream
  std::int64_t num_device_alloc = 0;    // cudaMalloc (or page maps for expandable segments)
  std::int64_t num_device_free = 0;     // cudaFree (or page unmaps)
  Stat oversize_allocations;            // allocated blocks >= max_split_size
  Stat oversize_segments;               // segments >= max_split_size

  // torch.cuda.reset_peak_memory_stats().
  void reset_peak();
  // The flat dictionary torch.cuda.memory_stats() returns, e.g. "allocated_bytes.all.peak".
  std::map<std::string, std::int64_t> as_flat_map() const;
};

}  // namespace prefetchlab::core
