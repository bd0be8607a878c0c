#include "tune_attribution.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace prefetchlab::apps {
namespace {

std::string text(const char* format, double value) {
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

// Throughput gain of `variant` over `base`: + = faster.
double gain(const SeedSet& base, const SeedSet& variant) { return base.mean_step_ns() / variant.mean_step_ns() - 1.0; }

}  // namespace

double SeedSet::mean_step_ns() const {
  return step_ns.empty() ? 0 : std::accumulate(step_ns.begin(), step_ns.end(), 0.0) / static_cast<double>(step_ns.size());
}

double SeedSet::spread() const {
  if (step_ns.size() < 2) return 0;
  const auto [lo, hi] = std::minmax_element(step_ns.begin(), step_ns.end());
  return (*hi - *lo) / mean_step_ns();
}

std::vector<KnobVerdict> judge_knobs(const std::vector<std::string>& scenario_names, const std::vector<SeedSet>& defaults,
                                     const std::vector<KnobChange>& knobs) {
  std::vector<KnobVerdict> verdicts;
  for (const auto& knob : knobs) {
    KnobVerdict v;
    std::string faster_on, slower_on, failed_on;
    for (std::size_t s = 0; s < defaults.size(); ++s) {
      const SeedSet& alone = knob.alone[s];
      if (!alone.ok) {
        failed_on += std::string(failed_on.empty() ? "" : ", ") + scenario_names[s] + " (" + alone.status + ")";
        continue;
      }
      if (!defaults[s].ok) continue;
      const double g = gain(defaults[s], alone);
      const double spread = defaults[s].spread();
      const std::string figure =
          scenario_names[s] + " " + text("%+.2f%%", 100 * g) + ", spread " + text("%.2f%%", 100 * spread);
      if (g > spread) faster_on += std::string(faster_on.empty() ? "" : "; ") + figure;
      if (g < -spread) slower_on += std::string(slower_on.empty() ? "" : "; ") + figure;
    }
    v.faster = !faster_on.empty() && failed_on.empty();
    if (!failed_on.empty()) {
      v.reason = "alone it fails on " + failed_on;
    } else if (v.faster) {
      v.reason = "alone it is faster than the defaults by more than the seeds' spread (" + faster_on + ")";
      if (!slower_on.empty()) v.reason += ", though slower elsewhere (" + slower_on + ")";
    } else if (!slower_on.empty()) {
      v.reason = "alone it is only slower than the defaults (" + slower_on + ")";
    } else {
      v.reason = "alone it is within the seeds' spread of the defaults";
    }
    verdicts.push_back(v);
  }
  return verdicts;
}

std::vector<std::size_t> memory_order(const std::vector<KnobChange>& knobs, const std::vector<KnobVerdict>& verdicts) {
  std::vector<std::size_t> order;
  for (std::size_t k = 0; k < knobs.size(); ++k) {
    if (!verdicts[k].kept()) order.push_back(k);
  }
  const auto peak = [&](std::size_t k) {
    std::int64_t most = 0;
    for (const auto& run : knobs[k].alone) most = std::max(most, run.peak_reserved_bytes);
    return most;
  };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return peak(a) < peak(b); });
  return order;
}

std::string attribution_table(const std::vector<std::string>& scenario_names, const std::vector<SeedSet>& defaults,
                              const std::string& defaults_label, const std::vector<AttributionRow>& rows) {
  std::string md = "| scenario | configuration | steady step (ms) | vs " + defaults_label +
                   " | seeds' spread | peak reserved (GiB) | status | verdict |\n|---|---|---|---|---|---|---|---|\n";
  for (std::size_t s = 0; s < scenario_names.size(); ++s) {
    const auto line = [&](const std::string& label, const SeedSet& run, const std::string& verdict) {
      md += "| " + scenario_names[s] + " | " + label + " | " + text("%.3f", run.mean_step_ns() / 1e6) + " | " +
            (run.ok && defaults[s].ok ? text("%+.2f%%", 100 * gain(defaults[s], run)) : std::string("-")) + " | " +
            text("%.2f%%", 100 * run.spread()) + " | " +
            text("%.2f", static_cast<double>(run.peak_reserved_bytes) / (1024.0 * 1024.0 * 1024.0)) + " | " +
            run.status + " | " + verdict + " |\n";
    };
    line(defaults_label, defaults[s], "baseline");
    for (const auto& row : rows) line(row.configuration, (*row.runs)[s], row.kept);
  }
  return md;
}

}  // namespace prefetchlab::apps
