#include "core/hardware/measured_collective_curve.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/input/input_error.hpp"
#include "core/input/input_limits.hpp"

namespace prefetchlab::core {
namespace {

constexpr const char* kKey = "measured_collectives";
constexpr const char* kListExpected =
    "a list of {op: all_gather|reduce_scatter|all_reduce, ranks: N, [nodes: N], sizes_bytes: [...], "
    "times_us: [...]} (as calibrate --from-nccl-tests writes it)";

double parse_number(const YAML::Node& item, const YamlSection& entry, std::string_view key,
                    const std::string& expected) {
  const std::string text = item.IsScalar() ? item.Scalar() : std::string();
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    throw InputError({entry.source()->file, item.Mark().line + 1}, entry.dotted(key),
                     "holds '" + (item.IsScalar() ? text : std::string("a non-number")) + "'", expected);
  }
  return value;
}

std::vector<double> read_list(const YamlSection& entry, std::string_view key, const std::string& expected) {
  const YAML::Node list = entry.raw(key);
  entry.mark_known(key);
  if (!list || !list.IsSequence() || list.size() < 2) {
    entry.fail(key, "is missing or has fewer than two values", expected);
  }
  std::vector<double> out;
  for (const auto& item : list) out.push_back(parse_number(item, entry, key, expected));
  return out;
}

}  // namespace

double MeasuredCollectiveCurve::time_us(std::int64_t bytes) const {
  if (bytes <= sizes_bytes.front()) return times_us.front();
  if (bytes >= sizes_bytes.back()) {
    return times_us.back() * static_cast<double>(bytes) / static_cast<double>(sizes_bytes.back());
  }
  const auto upper = std::upper_bound(sizes_bytes.begin(), sizes_bytes.end(), bytes);
  const auto i = static_cast<std::size_t>(upper - sizes_bytes.begin());  // sizes[i-1] <= bytes < sizes[i]
  const double x0 = std::log(static_cast<double>(sizes_bytes[i - 1]));
  const double x1 = std::log(static_cast<double>(sizes_bytes[i]));
  const double y0 = std::log(times_us[i - 1]);
  const double y1 = std::log(times_us[i]);
  const double w = (std::log(static_cast<double>(bytes)) - x0) / (x1 - x0);
  return std::exp(y0 + w * (y1 - y0));
}

bool MeasuredCollectiveCurve::applies_to(NcclTestsOp shape_op, int shape_ranks, int shape_nodes) const {
  return op == shape_op && ranks == shape_ranks && (!nodes || *nodes == shape_nodes);
}

const MeasuredCollectiveCurve* find_measured_curve(std::span<const MeasuredCollectiveCurve> curves, NcclTestsOp op,
                                                   int ranks, int nodes) {
  for (const auto& curve : curves) {
    if (curve.applies_to(op, ranks, nodes)) return &curve;
  }
  return nullptr;
}

std::vector<MeasuredCollectiveCurve> read_measured_curves(const YamlSection& calibration) {
  std::vector<MeasuredCollectiveCurve> curves;
  calibration.mark_known(kKey);
  if (!calibration.has(kKey)) return curves;
  const YAML::Node list = calibration.raw(kKey);
  if (list.IsNull()) return curves;
  if (!list.IsSequence()) calibration.fail(kKey, "is not a list", kListExpected);
  for (std::size_t i = 0; i < list.size(); ++i) {
    const YamlSection entry(list[i].IsMap() ? list[i] : YAML::Node(), calibration.source(),
                            calibration.dotted(kKey) + "[" + std::to_string(i) + "]", list[i].Mark().line + 1);
    if (!list[i].IsMap()) entry.fail("op", "is missing: the item is not a map", kListExpected);
    entry.allow_only({"op", "ranks", "nodes", "sizes_bytes", "times_us", "source"});
    MeasuredCollectiveCurve curve;
    curve.op = entry.require_enum<NcclTestsOp>("op", {{"all_gather", NcclTestsOp::kAllGather},
                                                      {"reduce_scatter", NcclTestsOp::kReduceScatter},
                                                      {"all_reduce", NcclTestsOp::kAllReduce}});
    curve.ranks = static_cast<int>(entry.require_int("ranks", 2, kMaxRanks));
    if (entry.has("nodes")) curve.nodes = static_cast<int>(entry.require_int("nodes", 1, curve.ranks));
    entry.get_string("source", "");
    const std::string sizes_expected = "a list of at least two sizes in bytes, strictly increasing, each in [1, 2^50]";
    for (const double size : read_list(entry, "sizes_bytes", sizes_expected)) {
      if (size < 1 || size > static_cast<double>(kMaxBytes) || size != std::floor(size) ||
          (!curve.sizes_bytes.empty() && static_cast<std::int64_t>(size) <= curve.sizes_bytes.back())) {
        char text[64];
        std::snprintf(text, sizeof text, "%.17g", size);
        entry.fail("sizes_bytes", std::string("has ") + text + " (not a whole size above the one before it)",
                   sizes_expected);
      }
      curve.sizes_bytes.push_back(static_cast<std::int64_t>(size));
    }
    const std::string times_expected = "one time in microseconds per size, each in (0, 1e9]";
    curve.times_us = read_list(entry, "times_us", times_expected);
    if (curve.times_us.size() != curve.sizes_bytes.size()) {
      entry.fail("times_us", "has " + std::to_string(curve.times_us.size()) + " values for " +
                                 std::to_string(curve.sizes_bytes.size()) + " sizes",
                 times_expected);
    }
    for (const double t : curve.times_us) {
      if (!(t > 0) || t > 1e9) entry.fail("times_us", "has a time out of range", times_expected);
    }
    entry.finish();
    curves.push_back(std::move(curve));
  }
  return curves;
}

std::string measured_curve_yaml(const MeasuredCollectiveCurve& curve, int indent) {
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  std::string out = pad + "- op: " + nccl_tests_op_name(curve.op) + "\n";
  out += pad + "  ranks: " + std::to_string(curve.ranks) + "\n";
  if (curve.nodes) out += pad + "  nodes: " + std::to_string(*curve.nodes) + "\n";
  out += pad + "  sizes_bytes: [";
  for (std::size_t i = 0; i < curve.sizes_bytes.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(curve.sizes_bytes[i]);
  }
  out += "]\n" + pad + "  times_us: [";
  for (std::size_t i = 0; i < curve.times_us.size(); ++i) {
    char text[32];
    std::snprintf(text, sizeof text, "%.6g", curve.times_us[i]);
    out += std::string(i ? ", " : "") + text;
  }
  return out + "]\n";
}

}  // namespace prefetchlab::core
