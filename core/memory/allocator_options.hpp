#pragma once
// Options of the PyTorch CUDA caching allocator (PYTORCH_CUDA_ALLOC_CONF), read from the
// environment-variable string form or from a scenario's `memory.allocator:` YAML section.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/input/yaml_section.hpp"

namespace prefetchlab::core {

// Allocator constants (pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp).
inline constexpr std::uint64_t kMiB = 1024ULL * 1024ULL;
inline constexpr std::uint64_t kMinBlockBytes = 512;           // kMinBlockSize
inline constexpr std::uint64_t kSmallSizeBytes = 1 * kMiB;     // kSmallSize: small pool limit
inline constexpr std::uint64_t kSmallBufferBytes = 2 * kMiB;   // kSmallBuffer: small segment
inline constexpr std::uint64_t kMinLargeAllocBytes = 10 * kMiB;  // kMinLargeAlloc
inline constexpr std::uint64_t kRoundLargeBytes = 2 * kMiB;    // kRoundLarge
inline constexpr std::uint64_t kLargeBufferBytes = 20 * kMiB;  // kLargeBuffer: large segment
inline constexpr std::size_t kRoundupPower2Intervals = 16;     // 1 MiB .. 64 GiB

struct AllocatorOptions {
  // max_split_size_mb: blocks of at least this size are never split; nullopt = unlimited.
  std::optional<std::uint64_t> max_split_size_bytes;
  // max_non_split_rounding_mb: a request >= max_split_size may take a cached block smaller
  // than request + this.
  std::uint64_t max_non_split_rounding_bytes = kLargeBufferBytes;
  // roundup_power2_divisions per power-of-two interval: index 0 is [1 MiB, 2 MiB) (and every
  // smaller size), index 15 is [32 GiB, ...). 0 or 1 = plain 512-byte rounding.
  std::array<std::uint64_t, kRoundupPower2Intervals> roundup_power2_divisions{};
  // garbage_collection_threshold (0 = off; otherwise 0 < t < 1). Only acts when a memory
  // fraction is set, as in PyTorch.
  double garbage_collection_threshold = 0.0;
  bool expandable_segments = false;
  // torch.cuda.set_per_process_memory_fraction: reserved memory may not exceed
  // fraction × device capacity. nullopt = not set (the whole device).
  std::optional<double> per_process_memory_fraction;

  std::uint64_t max_split_size() const;  // bytes; UINT64_MAX when unlimited
  std::uint64_t divisions_for(std::uint64_t size_bytes) const;

  friend bool operator==(const AllocatorOptions&, const AllocatorOptions&) = default;
};

// Parses "max_split_size_mb:128,roundup_power2_divisions:[256:1,512:2,>:8],expandable_segments:True".
// Errors are InputErrors located at `origin` (e.g. "PYTORCH_CUDA_ALLOC_CONF") with the option as key.
// Accepted without effect on the model: backend:native, release_lock_on_cudamalloc,
// pinned_use_cuda_host_register, pinned_num_register_threads, pinned_use_background_threads.
AllocatorOptions parse_alloc_conf(std::string_view conf,
                                  std::string_view origin = "PYTORCH_CUDA_ALLOC_CONF");

// Reads a `memory.allocator:` section strictly (unknown keys are InputErrors). Keys:
//   max_split_size_mb: 128           max_non_split_rounding_mb: 20
//   roundup_power2_divisions: 4      or a map {256: 1, 512: 2, ">": 8} (interval MB -> divisions)
//   garbage_collection_threshold: 0.6
//   expandable_segments: true
//   per_process_memory_fraction: 0.9
//   alloc_conf: "max_split_size_mb:128,..."   (PYTORCH_CUDA_ALLOC_CONF form; not with the above)
AllocatorOptions load_allocator_options(const YamlSection& section);

}  // namespace prefetchlab::core
