#include "core/input/size_value.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <string>
#include <utility>

namespace prefetchlab::core {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Parses a plain or scientific-notation decimal and scales it; exact for integers up to 2^53,
// integer digits beyond that are parsed as int64 directly so 9e18-sized counts stay exact.
std::optional<std::int64_t> parse_scaled(std::string_view text, std::int64_t scale) {
  text = trim(text);
  if (text.empty() || text.front() == '-' || text.front() == '+') return std::nullopt;
  std::int64_t whole = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), whole);
  if (ec == std::errc() && end == text.data() + text.size()) {
    if (whole > INT64_MAX / scale) return std::nullopt;
    return whole * scale;
  }
  double value = 0;
  auto [dend, dec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (dec != std::errc() || dend != text.data() + text.size() || !std::isfinite(value) ||
      value < 0) {
    return std::nullopt;
  }
  const double scaled = value * static_cast<double>(scale);
  if (scaled >= 9.2e18 || scaled != std::floor(scaled)) return std::nullopt;
  return static_cast<std::int64_t>(scaled);
}

}  // namespace

std::optional<std::int64_t> parse_count(std::string_view text) { return parse_scaled(text, 1); }

std::optional<std::int64_t> parse_bytes(std::string_view text) {
  text = trim(text);
  static constexpr std::array<std::pair<std::string_view, std::int64_t>, 9> kUnits{{
      {"KiB", std::int64_t{1} << 10},
      {"MiB", std::int64_t{1} << 20},
      {"GiB", std::int64_t{1} << 30},
      {"TiB", std::int64_t{1} << 40},
      {"KB", 1'000},
      {"MB", 1'000'000},
      {"GB", 1'000'000'000},
      {"TB", 1'000'000'000'000},
      {"B", 1},
  }};
  for (const auto& [suffix, scale] : kUnits) {
    if (text.size() > suffix.size() && text.ends_with(suffix)) {
      return parse_scaled(text.substr(0, text.size() - suffix.size()), scale);
    }
  }
  return parse_scaled(text, 1);
}

}  // namespace prefetchlab::core
