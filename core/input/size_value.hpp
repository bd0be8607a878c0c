#pragma once
// Sizes as users write them: "5e7", "50000000", "1.5e9" for element counts and, for bytes,
// also "70GiB", "80GB", "512MiB" (binary and decimal suffixes, case-sensitive as written).
#include <cstdint>
#include <optional>
#include <string_view>

namespace prefetchlab::core {

// A non-negative whole number, possibly in scientific notation ("5e7"). Fractions ("1.5") and
// values beyond int64 are rejected (nullopt): a count of elements has no fractional part.
std::optional<std::int64_t> parse_count(std::string_view text);

// parse_count plus a unit suffix: B, KB, MB, GB, TB (powers of 1000), KiB, MiB, GiB, TiB
// (powers of 1024). "1.5GiB" is allowed when the result is a whole number of bytes.
std::optional<std::int64_t> parse_bytes(std::string_view text);

}  // namespace prefetchlab::core
