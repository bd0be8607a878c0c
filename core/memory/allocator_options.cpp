#include "core/memory/allocator_options.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <limits>
#include <string>
#include <vector>

#include "core/input/closest_match.hpp"

namespace prefetchlab::core {
namespace {

constexpr std::uint64_t kLargeBufferMb = kLargeBufferBytes / kMiB;  // 20

struct ConfError {
  std::string problem;
  std::string expected;
};

std::string trim(std::string_view text) {
  std::size_t begin = 0;
  std::size_t end = text.size();
  while (begin < end && (text[begin] == ' ' || text[begin] == '\t')) ++begin;
  while (end > begin && (text[end - 1] == ' ' || text[end - 1] == '\t')) --end;
  return std::string(text.substr(begin, end - begin));
}

std::optional<std::uint64_t> parse_unsigned(std::string_view text) {
  std::uint64_t value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end || text.empty()) return std::nullopt;
  return value;
}

std::optional<double> parse_real(std::string_view text) {
  double value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end || text.empty()) return std::nullopt;
  return value;
}

bool is_power_of_two(std::uint64_t v) { return v != 0 && std::has_single_bit(v); }

// max_split_size_mb must be at least 20 (kLargeBuffer in MB). Older PyTorch checked > 20; the
// current c10/core/AllocatorConfig.cpp checks >= 20, which we follow.
std::optional<ConfError> set_max_split(AllocatorOptions& o, std::uint64_t mb) {
  if (mb < kLargeBufferMb) return ConfError{"too small: " + std::to_string(mb), "an integer >= 20 (MB)"};
  if (mb > std::numeric_limits<std::uint64_t>::max() / kMiB) return ConfError{"too large", "a size in MB"};
  o.max_split_size_bytes = mb * kMiB;
  return std::nullopt;
}

std::optional<ConfError> set_non_split_rounding(AllocatorOptions& o, std::uint64_t mb) {
  if (mb < kLargeBufferMb) return ConfError{"too small: " + std::to_string(mb), "an integer >= 20 (MB)"};
  if (mb > std::numeric_limits<std::uint64_t>::max() / kMiB) return ConfError{"too large", "a size in MB"};
  o.max_non_split_rounding_bytes = mb * kMiB;
  return std::nullopt;
}

std::optional<ConfError> set_gc_threshold(AllocatorOptions& o, double t) {
  if (!(t > 0.0 && t < 1.0)) return ConfError{"out of range", "a number with 0 < t < 1"};
  o.garbage_collection_threshold = t;
  return std::nullopt;
}

// One entry of the list form: `interval_mb` is a power of two in MB, or ">" (every interval
// above the last one named). The first named interval also sets every interval below it. This
// is PyTorch's parseRoundUpPower2Divisions. For ">" we fill from the interval *after* the last
// named one, as current PyTorch (c10/core/AllocatorConfig.cpp) does; older versions (e.g. 2.1 to
// 2.5, c10/cuda/CUDAAllocatorConfig.cpp) also overwrote the last named interval itself.
class DivisionsBuilder {
 public:
  explicit DivisionsBuilder(std::array<std::uint64_t, kRoundupPower2Intervals>& table) : table_(table) {}

  std::optional<ConfError> add(std::string_view interval_mb, std::uint64_t divisions) {
    if (divisions != 0 && !is_power_of_two(divisions))
      return ConfError{"divisions " + std::to_string(divisions) + " is not a power of two",
                       "a power of two, or 0 to disable rounding"};
    if (interval_mb == ">") {
      std::fill(table_.begin() + static_cast<std::ptrdiff_t>(std::min(last_index_ + 1, kRoundupPower2Intervals)),
                table_.end(), divisions);
      return std::nullopt;
    }
    const auto mb = parse_unsigned(interval_mb);
    if (!mb || !is_power_of_two(*mb))
      return ConfError{"interval '" + std::string(interval_mb) + "' is not a power of two",
                       "interval sizes in MB that are powers of two (256, 512, ...) or '>'"};
    const std::size_t index = std::min<std::size_t>(static_cast<std::size_t>(std::bit_width(*mb) - 1),
                                                    kRoundupPower2Intervals - 1);
    if (first_) {
      std::fill(table_.begin(), table_.begin() + static_cast<std::ptrdiff_t>(index), divisions);
      first_ = false;
    }
    table_[index] = divisions;
    last_index_ = index;
    return std::nullopt;
  }

 private:
  std::array<std::uint64_t, kRoundupPower2Intervals>& table_;
  bool first_ = true;
  std::size_t last_index_ = 0;
};

std::optional<ConfError> set_divisions_scalar(AllocatorOptions& o, std::uint64_t divisions) {
  if (!is_power_of_two(divisions))
    return ConfError{"divisions " + std::to_string(divisions) + " is not a power of two",
                     "a power of two (1, 2, 4, 8, ...) or a list [256:1,512:2,>:8]"};
  o.roundup_power2_divisions.fill(divisions);
  return std::nullopt;
}

const std::vector<std::string>& conf_keys() {
  static const std::vector<std::string> keys{
      "backend",
      "max_split_size_mb",
      "max_non_split_rounding_mb",
      "roundup_power2_divisions",
      "garbage_collection_threshold",
      "expandable_segments",
      "release_lock_on_cudamalloc",
      "pinned_use_cuda_host_register",
      "pinned_num_register_threads",
      "pinned_use_background_threads"};
  return keys;
}

// Splits at commas that are not inside [ ].
std::vector<std::string> split_top_level(std::string_view conf) {
  std::vector<std::string> parts;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= conf.size(); ++i) {
    if (i == conf.size() || (conf[i] == ',' && depth == 0)) {
      const std::string part = trim(conf.substr(start, i - start));
      if (!part.empty()) parts.push_back(part);
      start = i + 1;
    } else if (conf[i] == '[') {
      ++depth;
    } else if (conf[i] == ']') {
      --depth;
    }
  }
  return parts;
}

std::optional<ConfError> apply_conf_option(AllocatorOptions& o, const std::string& key,
                                           const std::string& value) {
  auto need_unsigned = [&](auto&& then) -> std::optional<ConfError> {
    const auto v = parse_unsigned(value);
    if (!v) return ConfError{"not an integer: '" + value + "'", "a non-negative integer"};
    return then(*v);
  };
  auto need_bool = [&](auto&& then) -> std::optional<ConfError> {
    if (value == "True" || value == "true") return then(true);
    if (value == "False" || value == "false") return then(false);
    return ConfError{"not a boolean: '" + value + "'", "True or False"};
  };
  if (key == "backend") {
    if (value == "native") return std::nullopt;
    return ConfError{"backend '" + value + "' is not modelled", "native"};
  }
  if (key == "max_split_size_mb") return need_unsigned([&](std::uint64_t v) { return set_max_split(o, v); });
  if (key == "max_non_split_rounding_mb")
    return need_unsigned([&](std::uint64_t v) { return set_non_split_rounding(o, v); });
  if (key == "garbage_collection_threshold") {
    const auto v = parse_real(value);
    if (!v) return ConfError{"not a number: '" + value + "'", "a number with 0 < t < 1"};
    return set_gc_threshold(o, *v);
  }
  if (key == "expandable_segments") return need_bool([&](bool b) {
      o.expandable_segments = b;
      return std::optional<ConfError>{};
    });
  if (key == "roundup_power2_divisions") {
    if (!value.empty() && value.front() == '[') {
      if (value.back() != ']') return ConfError{"unterminated list", "[256:1,512:2,>:8]"};
      DivisionsBuilder builder(o.roundup_power2_divisions);
      for (const auto& entry : split_top_level(std::string_view(value).substr(1, value.size() - 2))) {
        const auto colon = entry.find(':');
        if (colon == std::string::npos) return ConfError{"entry '" + entry + "' has no ':'", "interval_mb:divisions"};
        const auto divisions = parse_unsigned(trim(std::string_view(entry).substr(colon + 1)));
        if (!divisions) return ConfError{"entry '" + entry + "' has no integer divisions", "interval_mb:divisions"};
        if (auto error = builder.add(trim(std::string_view(entry).substr(0, colon)), *divisions)) return error;
      }
      return std::nullopt;
    }
    return need_unsigned([&](std::uint64_t v) { return set_divisions_scalar(o, v); });
  }
  if (key == "release_lock_on_cudamalloc" || key == "pinned_use_cuda_host_register" ||
      key == "pinned_use_background_threads")
    return need_bool([](bool) { return std::optional<ConfError>{}; });
  if (key == "pinned_num_register_threads")
    return need_unsigned([](std::uint64_t) { return std::optional<ConfError>{}; });
  return ConfError{"unknown allocator option", "one of the PYTORCH_CUDA_ALLOC_CONF options"};
}

}  // namespace

std::uint64_t AllocatorOptions::max_split_size() const {
  return max_split_size_bytes.value_or(std::numeric_limits<std::uint64_t>::max());
}

std::uint64_t AllocatorOptions::divisions_for(std::uint64_t size_bytes) const {
  // Interval index = floor(log2(size)) - 20, clamped to [0, 15].
  const int log_size = size_bytes == 0 ? 0 : static_cast<int>(std::bit_width(size_bytes)) - 1;
  const int index = std::clamp(log_size - 20, 0, static_cast<int>(kRoundupPower2Intervals) - 1);
  return roundup_power2_divisions[static_cast<std::size_t>(index)];
}

AllocatorOptions parse_alloc_conf(std::string_view conf, std::string_view origin) {
  AllocatorOptions options;
  const InputLocation where{std::string(origin), 0};
  for (const auto& part : split_top_level(conf)) {
    const auto colon = part.find(':');
    const std::string key = trim(std::string_view(part).substr(0, colon));
    if (colon == std::string::npos)
      throw InputError(where, key, "option without a value", "key:value");
    const std::string value = trim(std::string_view(part).substr(colon + 1));
    if (auto error = apply_conf_option(options, key, value)) {
      const bool known = std::find(conf_keys().begin(), conf_keys().end(), key) != conf_keys().end();
      throw InputError(where, key, error->problem, error->expected,
                       known ? std::string{} : closest_match(key, conf_keys()));
    }
  }
  return options;
}

AllocatorOptions load_allocator_options(const YamlSection& section) {
  section.allow_only({"max_split_size_mb", "max_non_split_rounding_mb", "roundup_power2_divisions",
                      "garbage_collection_threshold", "expandable_segments",
                      "per_process_memory_fraction", "alloc_conf"});
  AllocatorOptions options;
  if (section.has("alloc_conf")) {
    for (const char* other : {"max_split_size_mb", "max_non_split_rounding_mb", "roundup_power2_divisions",
                              "garbage_collection_threshold", "expandable_segments"}) {
      if (section.has(other))
        section.fail(other, "given together with alloc_conf",
                     "either alloc_conf or the separate keys, not both");
    }
    const std::string conf = section.require_string("alloc_conf");
    try {
      options = parse_alloc_conf(conf, section.location("alloc_conf").file);
    } catch (const InputError& e) {
      section.fail("alloc_conf", "option '" + e.key() + "': " + e.problem(), e.expected(), e.suggestion());
    }
  }
  auto check = [&](std::string_view key, const std::optional<ConfError>& error) {
    if (error) section.fail(key, error->problem, error->expected);
  };
  if (section.has("max_split_size_mb"))
    check("max_split_size_mb",
          set_max_split(options, static_cast<std::uint64_t>(section.require_int("max_split_size_mb", 0, std::numeric_limits<std::int64_t>::max()))));
  if (section.has("max_non_split_rounding_mb"))
    check("max_non_split_rounding_mb",
          set_non_split_rounding(options, static_cast<std::uint64_t>(section.require_int(
                                              "max_non_split_rounding_mb", 0, std::numeric_limits<std::int64_t>::max()))));
  if (section.has("garbage_collection_threshold"))
    check("garbage_collection_threshold",
          set_gc_threshold(options, section.require_double("garbage_collection_threshold", 0.0, 1.0)));
  options.expandable_segments = section.get_bool("expandable_segments", options.expandable_segments);
  if (section.has("per_process_memory_fraction")) {
    const double fraction = section.require_double("per_process_memory_fraction", 0.0, 1.0);
    if (!(fraction > 0.0)) section.fail("per_process_memory_fraction", "must be above 0", "0 < fraction <= 1");
    options.per_process_memory_fraction = fraction;
  }
  if (section.has("roundup_power2_divisions")) {
    const YAML::Node node = section.raw("roundup_power2_divisions");
    const char* expected = "a power of two, or a map of interval MB (power of two) or \">\" to divisions";
    if (node.IsScalar()) {
      const auto v = parse_unsigned(node.Scalar());
      if (!v) section.fail("roundup_power2_divisions", "not an integer: '" + node.Scalar() + "'", expected);
      check("roundup_power2_divisions", set_divisions_scalar(options, *v));
    } else if (node.IsMap()) {
      DivisionsBuilder builder(options.roundup_power2_divisions);
      for (const auto& entry : node) {
        const std::string interval = entry.first.Scalar();
        const auto divisions = entry.second.IsScalar() ? parse_unsigned(entry.second.Scalar()) : std::nullopt;
        if (!divisions)
          section.fail("roundup_power2_divisions", "divisions for '" + interval + "' is not an integer", expected);
        check("roundup_power2_divisions", builder.add(interval, *divisions));
      }
    } else {
      section.fail("roundup_power2_divisions", "neither a number nor a map", expected);
    }
  }
  section.finish();
  return options;
}

}  // namespace prefetchlab::core
