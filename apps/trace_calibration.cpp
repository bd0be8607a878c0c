#include "trace_calibration.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <map>
#include <unistd.h>
#include <sstream>

#include "metric_text.hpp"
#include "calibrated_profile.hpp"
#include "command_context.hpp"
#include "core/hardware/hardware_profile.hpp"
#include "core/input/input_error.hpp"
#include "core/trace_import/coordinator_fit.hpp"
#include "core/trace_import/trace_calibration.hpp"
#include "core/metrics/metrics.hpp"
#include "core/scenario/scenario.hpp"
#include "core/trace_import/trace_set.hpp"
#include "core/trace_import/trace_summary.hpp"
#include "sim/trace/deepspeed_frames.hpp"
#include "sim/export/kineto_trace.hpp"
#include "sim/ranks/world.hpp"

namespace prefetchlab::apps {
namespace {

const char* bandwidth_key(core::CollectiveKind kind) {
  switch (kind) {
    case core::CollectiveKind::kAllGather: return "allgather_bus_bandwidth_gb_per_s";
    case core::CollectiveKind::kReduceScatter: return "reduce_scatter_bus_bandwidth_gb_per_s";
    default: return "all_reduce_bus_bandwidth_gb_per_s";
  }
}

// The GPU the traces name in deviceProperties when it is another kind than `profile_gpu`
// ("NVIDIA V100-SXM2-32GB" against "NVIDIA H100 SXM 80GB"), else "". Compared by the family
// names NVIDIA's product names carry; a name without one compares as unknown (no warning).
std::string other_gpu_than_profile(const core::TraceSet& set, const std::string& profile_gpu) {
  static constexpr std::string_view kFamilies[] = {"H100", "H200", "H800", "H20", "B200", "B300", "GB200", "A100",
                                                   "A800", "A40", "A10", "V100", "P100", "T4", "L40S", "L40", "L4",
                                                   "4090", "3090", "2080", "4000 Ada", "6000 Ada", "MI300", "MI250"};
  const auto family = [](const std::string& name) -> std::string_view {
    for (const std::string_view f : kFamilies) {
      if (name.find(f) != std::string::npos) return f;
    }
    return {};
  };
  const std::string_view profile_family = family(profile_gpu);
  if (profile_family.empty()) return "";
  for (const auto& rank : set.ranks) {
    for (const std::string& device : rank.device_names) {
      const std::string_view traced = family(device);
      if (!traced.empty() && traced != profile_family) return device;
    }
  }
  return "";
}

}  // namespace

int run_trace_calibration(const TraceCalibrationOptions& o) {
  const std::filesystem::path base = find_base_profile(o.base, "--base");
  const core::HardwareProfile base_profile = core::load_hardware_profile(base);
  const core::TraceSet set = core::load_trace_set(o.traces, o.timeline);
  const core::TraceCalibration cal = core::calibrate_from_traces(set, o.tolerance);

  std::map<std::string, double> values;
  std::ostringstream header;
  header << "# Calibrated by `prefetchlab calibrate --from-trace` from " << set.ranks.size()
         << " torch.profiler trace(s) (docs/traces.md):\n";
  if (const std::string other = other_gpu_than_profile(set, base_profile.gpu.model); !other.empty()) {
    const std::string warning = "the traces ran on " + other + " but the base profile is " + base_profile.gpu.model +
                                ": the fitted values describe that machine under this profile's name (give a --base "
                                "of the traced GPU)";
    std::fprintf(stderr, "warning: %s\n", warning.c_str());
    header << "# warning: " << warning << "\n";
  }
  std::printf("calibrate --from-trace: %zu rank(s), %zu collectives matched across ranks\n", set.ranks.size(),
              set.matched.size());
  const core::TraceCollectiveFit* latency_source = nullptr;
  for (const auto& f : cal.collectives) {
    const char* kind = core::collective_kind_name(f.kind);
    if (!f.fitted) {
      std::printf("  %s on %lld ranks: not fitted: %s (%lld events)\n", kind, static_cast<long long>(f.group_size),
                  f.why_not.c_str(), static_cast<long long>(f.events));
      continue;
    }
    std::printf("  %s on %lld ranks: latency %.2f us, bus bandwidth %.2f GB/s (%lld events, %zu sizes, true time = "
                "min(end) - max(start) over the ranks)\n",
                kind, static_cast<long long>(f.group_size), f.fit.latency_us(), f.fit.bus_bandwidth_gb_per_s(),
                static_cast<long long>(f.events), f.points.size());
    for (std::size_t i = 0; i < f.points.size(); ++i) {
      std::printf("    %14lld B  true %10.2f us  fitted %10.2f us\n", static_cast<long long>(f.points[i].bytes),
                  f.points[i].time_us, f.fit.predicted_us[i]);
    }
    header << "#   " << kind << ", " << f.group_size << " ranks: latency " << fmt("%.2f", f.fit.latency_us())
           << " us, busBW " << fmt("%.2f", f.fit.bus_bandwidth_gb_per_s()) << " GB/s from " << f.events << " events\n";
    // The last group of an op wins its key, as for nccl-tests logs.
    values[bandwidth_key(f.kind)] = f.fit.bus_bandwidth_gb_per_s();
    if (latency_source == nullptr || (f.kind == core::CollectiveKind::kAllGather &&
                                      latency_source->kind != core::CollectiveKind::kAllGather)) {
      latency_source = &f;
    }
  }
  if (latency_source != nullptr) values["collective_latency_us"] = latency_source->fit.latency_us();
  if (cal.host_call_events > 0) {
    values["host_speed"] = cal.host_speed;
    std::printf("  host_speed %.3f: median torch-level %s call %.1f us (%lld calls) against the %.0f us the host "
                "defaults assume\n",
                cal.host_speed, core::collective_kind_name(cal.host_call_kind), cal.host_call_median_us,
                static_cast<long long>(cal.host_call_events), cal.host_call_reference_us);
    header << "#   host_speed " << fmt("%.3f", cal.host_speed) << " from " << cal.host_call_events
           << " torch-level collective calls (median " << fmt("%.1f", cal.host_call_median_us) << " us)\n";
  }
  for (const auto& hook : cal.hook_terms) {
    values[hook.term] = hook.value_us;
    std::printf("  %s %.1f us: %s's own time, median %.1f us over %lld calls%s (the Python tracer's overhead "
                "included)\n",
                hook.term.c_str(), hook.value_us, hook.function.c_str(), hook.own_median_us,
                static_cast<long long>(hook.events), cal.host_speed > 0 ? ", times host_speed" : "");
    header << "#   " << hook.term << " " << fmt("%.1f", hook.value_us) << " from " << hook.events << " "
           << hook.function << " calls\n";
  }
  if (cal.launch_events > 0) {
    std::printf("  measured, not written: kernel launch call median %.1f us (%lld launches; kernel_launch_us also "
                "counts the dispatcher)\n",
                cal.launch_median_us, static_cast<long long>(cal.launch_events));
  }
  std::vector<std::string> not_fitted = cal.not_fitted;
  if (!o.scenario.empty()) {
    // compute_time_scale: the scenario simulated, written and read back like the traces, so
    // both compute busy times are measured the same way.
    std::erase_if(not_fitted, [](const std::string& why) {
      return why.starts_with("compute_time_scale") || why.starts_with("host_fetch_*");
    });
    // The simulated compute busy time per step (median of the steady iterations) at a given
    // compute_time_scale (none: the scenario's own).
    std::string scenario_name;
    std::optional<core::CoordinatorCallCounts> call_counts;  // one iteration's, from the first run
    const auto simulated_busy_ns = [&](std::optional<double> scale, double* used_scale) {
      std::vector<std::string> overrides = o.overrides;
      if (scale) overrides.push_back("cluster.calibration.compute_time_scale=" + fmt("%.9g", *scale));
      const core::Scenario scenario = core::load_scenario(o.scenario, overrides, bundled_data());
      scenario_name = scenario.name;
      *used_scale = scenario.cluster.calibration.compute_time_scale;
      sim::World world(scenario, /*record_trace=*/true);
      world.record_deepspeed_frames();
      const sim::WorldResult simulated = world.run();
      if (simulated.status != core::RunStatus::kOk) {
        throw core::InputError({o.scenario, 0}, "", "could not be simulated (" + simulated.message + ")",
                               "a scenario that runs (prefetchlab run checks it)");
      }
      const std::filesystem::path tmp = std::filesystem::temp_directory_path() /
                                        ("prefetchlab-calibrate-" + std::to_string(::getpid()));
      if (!call_counts) call_counts = sim::coordinator_call_counts(world.deepspeed_frames(0));
      sim::write_kineto_traces(tmp, world);
      std::vector<std::string> files;
      for (int r = 0; r < world.ranks(); ++r) files.push_back((tmp / ("rank" + std::to_string(r) + ".pt.trace.json")).string());
      const core::TraceSummary summary = core::summarize_traces(core::load_trace_set(files, {}));
      std::filesystem::remove_all(tmp);
      std::vector<double> busy;
      for (const auto& step : summary.steps) {
        if (step.number > scenario.training.warmup_iterations) busy.push_back(static_cast<double>(step.compute_busy_ns.median));
      }
      return busy.empty() ? 0.0 : core::median(busy);
    };
    const core::TraceSummary real_summary = core::summarize_traces(set);
    std::vector<double> real_busy;
    for (const auto& step : real_summary.steps) real_busy.push_back(static_cast<double>(step.compute_busy_ns.median));
    const double real_ns = real_busy.empty() ? 0 : core::median(real_busy);
    double s0 = 1, s1 = 1;
    const double busy0 = simulated_busy_ns(std::nullopt, &s0);
    if (real_ns > 0 && busy0 > 0 && s0 > 0) {
      // Compute time is nearly affine in the scale (fixed per-kernel costs do not scale; where
      // the host issues kernels slower than they run, a module's span is the larger of the two,
      // a kink): a second run at the proportional guess, then secant steps through the last two
      // points until the simulated busy time is within 0.5% of the trace's (at most 4 more runs).
      const double guess = s0 * real_ns / busy0;
      const double busy1 = simulated_busy_ns(guess, &s1);
      double scale = guess;
      double sa = s0, ba = busy0, sb = s1, bb = busy1;
      for (int step = 0; step < 5; ++step) {
        if (!(std::abs(bb - ba) > 0 && std::abs(sb - sa) > 0)) break;
        scale = std::max(sb + (real_ns - bb) * (sb - sa) / (bb - ba), 0.0);
        if (step == 4 || std::abs(bb - real_ns) <= 0.005 * real_ns) break;
        double used = scale;
        const double busy = simulated_busy_ns(scale, &used);
        sa = sb, ba = bb, sb = used, bb = busy;
        if (std::abs(busy - real_ns) <= 0.005 * real_ns) {
          scale = used;
          break;
        }
      }
      values["compute_time_scale"] = scale;
      std::printf("  compute_time_scale %.3f: compute busy %.3f ms per step in the trace (median of %zu steps) against "
                  "%.3f ms simulated at scale %.3g and %.3f ms at %.3g (%s, steady iterations)\n",
                  scale, real_ns / 1e6, real_busy.size(), busy0 / 1e6, s0, busy1 / 1e6, s1, scenario_name.c_str());
      header << "#   compute_time_scale " << fmt("%.3f", scale) << " from " << real_busy.size() << " steps against "
             << scenario_name << "\n";
    } else {
      not_fitted.push_back("compute_time_scale: no compute in the trace's steps or in the simulation");
    }
    if (cal.python_frames && call_counts) {
      const core::CoordinatorFit coordinator =
          core::fit_coordinator_terms(set, *call_counts, base_profile.calibration, cal.host_speed);
      for (const auto& f : coordinator.functions) {
        std::printf("  %s: %lld calls paired with the scenario's over %lld step(s); own time minus the fitted line, "
                    "p10 %+.1f / p90 %+.1f us\n",
                    f.function.c_str(), static_cast<long long>(f.calls), static_cast<long long>(coordinator.steps_paired),
                    f.residual_p10_us, f.residual_p90_us);
      }
      for (const auto& term : coordinator.terms) {
        if (!term.fitted) {
          std::printf("  %s not fitted: %s\n", term.term.c_str(), term.why_not.c_str());
          continue;
        }
        values[term.term] = term.value_us;
        std::printf("  %s %.2f us: %s's own time, median regression%s\n", term.term.c_str(), term.value_us,
                    term.function.c_str(), cal.host_speed > 0 ? ", times host_speed" : "");
        header << "#   " << term.term << " " << fmt("%.2f", term.value_us) << " from " << term.function << " calls\n";
      }
      for (const auto& why : coordinator.not_fitted) not_fitted.push_back(why);
    }
  }
  for (const auto& why : not_fitted) std::printf("  not fitted: %s\n", why.c_str());
  if (values.empty()) {
    throw core::InputError({o.traces.front(), 0}, "", "support no constant: " + not_fitted.front(),
                           "traces of every rank of a group, with collective sizes (PyTorch >= 2.3, or record_shapes=True)");
  }
  write_calibrated_profile(base, o.output, header.str(), values, std::nullopt);
  std::printf("wrote %s (base %s):", o.output.c_str(), base.string().c_str());
  for (const auto& [key, value] : values) std::printf(" %s %.4g", key.c_str(), value);
  std::printf("\n");
  return kExitOk;
}

}  // namespace prefetchlab::apps
