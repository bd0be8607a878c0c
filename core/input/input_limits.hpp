#pragma once
// Upper bounds on sizes read from outside files, so that a typo or a hostile file is a clear
// error instead of a wrap-around, a division by zero or memory out of proportion to the input.
// Each is far above any real job and documented in docs/scenarios.md ("Limits").
#include <cstdint>

namespace prefetchlab::core {

// Ranks of one job. The largest published training jobs use tens of thousands of GPUs.
inline constexpr std::int64_t kMaxRanks = 1 << 20;
// Iterations of one run (samples.csv). A replay writes one bucket row per rank and iteration.
inline constexpr std::int64_t kMaxIterations = 1'000'000;
// Bytes of one collective or one allocation: 1 PiB, far beyond any device's memory.
inline constexpr std::int64_t kMaxBytes = std::int64_t{1} << 50;

}  // namespace prefetchlab::core
