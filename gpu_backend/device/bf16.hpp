#pragma once
// bfloat16 on the host: the upper 16 bits of an IEEE float, rounded to nearest even (what
// CUDA's __float2bfloat16 does), so the host device's bf16 numbers are those a GPU would hold.
#include <bit>
#include <cstdint>

namespace prefetchlab::gpu {

inline float bf16_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

inline std::uint16_t float_to_bf16(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);  // NaN stays a (quiet) NaN
  }
  const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

}  // namespace prefetchlab::gpu
