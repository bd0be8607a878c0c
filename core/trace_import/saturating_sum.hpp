#pragma once
// Sums of times and sizes read from a trace saturate instead of overflowing: each event is
// bounded (a day, 2^50 elements), but a damaged or hostile file may hold very many, and signed
// overflow is undefined behaviour. A saturated figure is absurd enough to be seen as such.
#include <cstdint>
#include <limits>

namespace prefetchlab::core {

inline std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
  std::int64_t sum = 0;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return b > 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
}

inline std::int64_t saturating_sub(std::int64_t a, std::int64_t b) {
  std::int64_t difference = 0;
  if (!__builtin_sub_overflow(a, b, &difference)) return difference;
  return b < 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
}

// `total += value`, saturating.
inline void add_saturating(std::int64_t& total, std::int64_t value) { total = saturating_add(total, value); }

}  // namespace prefetchlab::core
