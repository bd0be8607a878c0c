#pragma once
// A malloc/free sequence for the caching allocator, as a CSV file both PrefetchLab and PyTorch
// can replay (gpu_backend/torch_allocator_compare.py replays it through torch.cuda):
//   op,id,bytes
//   malloc,a,1000      an allocation of 1000 bytes on the default stream, named a
//   free,a,            frees what `a` names (the bytes column stays empty)
// Ids are any non-empty text; an id may be reused once freed. Replay runs on one stream, every
// free takes effect at once (no record_stream), as `del tensor` does on the current stream.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/memory/allocator_options.hpp"
#include "core/memory/caching_allocator.hpp"
#include "core/memory/memory_stats.hpp"

namespace prefetchlab::core {

struct AllocatorStep {
  bool malloc = true;  // false: free
  std::string id;
  std::uint64_t bytes = 0;  // malloc only
  int line = 0;             // 1-based line in the file
};

// Throws InputError (file, line, column) for a bad header, op, size, an id freed that is not
// live, or an id allocated twice while live.
std::vector<AllocatorStep> load_allocator_sequence(const std::filesystem::path& file);

struct AllocatorReplay {
  MemoryStats stats;                 // after the last step
  std::optional<OutOfMemory> oom;    // the malloc that failed (replay stops there)
  int oom_line = 0;
  int steps = 0;                     // steps replayed
};

AllocatorReplay replay_allocator_sequence(const std::vector<AllocatorStep>& steps, const AllocatorOptions& options,
                                          std::uint64_t capacity_bytes);

}  // namespace prefetchlab::core
