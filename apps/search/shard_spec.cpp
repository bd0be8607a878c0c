#include "apps/search/shard_spec.hpp"

#include <charconv>
#include <optional>

#include "core/input/input_error.hpp"

namespace prefetchlab::core {
namespace {

std::optional<std::size_t> parse_index(std::string_view text) {
  std::size_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

ShardSpec parse_shard_spec(std::string_view text) {
  const InputLocation where{"--shard " + std::string(text), 0};
  constexpr const char* kForm = "i/N with 0 <= i < N, e.g. 0/4 (shards are numbered from 0)";
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) throw InputError(where, "", "is not of the form i/N", kForm);
  const auto index = parse_index(text.substr(0, slash));
  const auto count = parse_index(text.substr(slash + 1));
  if (!index || !count) throw InputError(where, "", "is not two whole numbers i/N", kForm);
  if (*count == 0) throw InputError(where, "", "has N = 0 shards", kForm);
  if (*index >= *count) {
    throw InputError(where, "", "has shard index " + std::to_string(*index) + ", not below N = " +
                                    std::to_string(*count),
                     kForm);
  }
  return {*index, *count};
}

}  // namespace prefetchlab::core
