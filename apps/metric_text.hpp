#pragma once
// How validate's tables print a metric and an error: a value by the unit its name ends in
// (_ns as ms, _bytes as MiB, else a count), a fraction as a signed percent; NaN as "n/a".
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

namespace prefetchlab::apps {

inline std::string metric_text(std::string_view name, double v) {
  if (std::isnan(v)) return "n/a";
  char buf[48];
  if (name.ends_with("_ns")) {
    std::snprintf(buf, sizeof buf, "%.3f ms", v / 1e6);
  } else if (name.ends_with("_bytes")) {
    std::snprintf(buf, sizeof buf, "%.2f MiB", v / (1024.0 * 1024.0));
  } else {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  }
  return buf;
}

// One number printed with a printf format ("%.2f"): profile values and report lines.
inline std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

inline std::string percent_text(double fraction) {
  if (std::isnan(fraction)) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", 100 * fraction);
  return buf;
}

}  // namespace prefetchlab::apps
