#include "trace_validation.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include "command_context.hpp"
#include "metric_text.hpp"
#include "core/io/csv_row_writer.hpp"
#include "core/metrics/metrics.hpp"
#include "core/scenario/scenario.hpp"
#include "core/trace_import/trace_set.hpp"
#include "core/trace_import/trace_summary.hpp"
#include "sim/export/kineto_trace.hpp"
#include "sim/export/trace_json.hpp"
#include "sim/ranks/world.hpp"

namespace prefetchlab::apps {
namespace {

namespace fs = std::filesystem;

// One compared figure per step, read the same way from either side's summary; -1 = unknown.
struct StepMetric {
  const char* name;   // validate.csv column stem (units in the name)
  const char* label;
  bool relative_to_step;  // error as a fraction of the real step time (may be ~0 itself)
  std::int64_t (*of)(const core::StepSummary&);
};

std::int64_t kind_field(const core::StepSummary& s, core::CollectiveKind kind, bool elements) {
  for (const auto& k : s.collectives) {
    if (k.kind == kind) return elements ? k.elements : k.count_max;
  }
  return 0;
}

const StepMetric kStepMetrics[] = {
    {"step_time_ns", "step time", false, [](const core::StepSummary& s) { return s.step_ns.median; }},
    {"compute_busy_ns", "compute busy", false, [](const core::StepSummary& s) { return s.compute_busy_ns.median; }},
    {"exposed_comm_ns", "exposed comm", true, [](const core::StepSummary& s) { return s.exposed_comm_ns.median; }},
    {"all_gather_count", "all-gathers", false,
     [](const core::StepSummary& s) { return kind_field(s, core::CollectiveKind::kAllGather, false); }},
    {"all_gather_elements", "all-gather elems", false,
     [](const core::StepSummary& s) { return kind_field(s, core::CollectiveKind::kAllGather, true); }},
    {"reduce_scatter_count", "reduce-scatters", false,
     [](const core::StepSummary& s) { return kind_field(s, core::CollectiveKind::kReduceScatter, false); }},
    {"reduce_scatter_elements", "reduce-scatter elems", false,
     [](const core::StepSummary& s) { return kind_field(s, core::CollectiveKind::kReduceScatter, true); }},
};

std::string shown(const std::string& name, double v) { return metric_text(name, v); }

std::string percent(double fraction) { return percent_text(fraction); }

// All-gather elements of one step on the lowest rank, in issue order.
std::vector<std::int64_t> gather_sequence(const core::TraceSet& set, std::int64_t step_number) {
  std::vector<std::int64_t> out;
  const core::RankTimeline& rank = set.ranks.front();
  for (const auto& c : rank.collectives) {
    if (c.step >= 0 && rank.steps[static_cast<std::size_t>(c.step)].number == step_number &&
        c.kind == core::CollectiveKind::kAllGather) {
      out.push_back(c.elements);
    }
  }
  return out;
}

// The first all-gather where the trace and the scenario differ, in words; empty when they agree.
std::string first_gather_mismatch(const core::TraceSet& real, std::int64_t real_step, const core::TraceSet& simulated,
                                  std::int64_t simulated_step) {
  const auto r = gather_sequence(real, real_step);
  const auto s = gather_sequence(simulated, simulated_step);
  const std::size_t n = std::min(r.size(), s.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (r[i] >= 0 && s[i] >= 0 && r[i] != s[i]) {
      return "all-gather #" + std::to_string(i) + " of step " + std::to_string(real_step) + " gathers " +
             std::to_string(r[i]) + " elements in the trace but " + std::to_string(s[i]) +
             " in the scenario (a different model, dtype, persistence threshold or prefetch bucket?)";
    }
  }
  if (r.size() != s.size()) {
    return "step " + std::to_string(real_step) + " has " + std::to_string(r.size()) + " all-gathers in the trace but " +
           std::to_string(s.size()) + " in the scenario" +
           (n > 0 ? " (the first " + std::to_string(n) + " agree)" : std::string()) +
           ": a different model, prefetch bucket or max_live_parameters?";
  }
  return "";
}

}  // namespace

int run_trace_validation(const TraceValidationOptions& o) {
  std::vector<std::string> overrides = o.overrides;
  if (!o.hardware.empty()) {
    const fs::path given(o.hardware);
    overrides.push_back("cluster.hardware=" + (fs::exists(given) ? fs::absolute(given).string() : o.hardware));
  }
  const core::Scenario scenario = core::load_scenario(o.scenario, overrides, bundled_data());
  const fs::path dir = o.output_dir.empty() ? scenario.output.dir / "validate" : fs::path(o.output_dir);
  fs::create_directories(dir);
  const int warmup = static_cast<int>(scenario.training.warmup_iterations);

  const core::TraceSet real = core::load_trace_set(o.traces, o.timeline);
  const core::TraceSummary real_summary = core::summarize_traces(real);

  sim::World world(scenario, /*record_trace=*/true);
  world.record_deepspeed_frames();  // simulated_kineto/ as with_stack=True would record it
  const sim::WorldResult simulated = world.run();
  if (simulated.status != core::RunStatus::kOk) {
    std::cerr << "error: the simulation of " << scenario.name << " ended " << core::run_status_name(simulated.status)
              << ": " << simulated.message << "\n";
    return core::run_status_exit_code(simulated.status);
  }
  const core::SummaryStats sim_stats = core::summarize(simulated.metrics, warmup);
  // The simulated run through the same reader as the real one.
  const fs::path sim_dir = dir / "simulated_kineto";
  sim::write_kineto_traces(sim_dir, world);
  sim::write_trace_json(dir / "simulated_trace.json", world);
  std::vector<std::string> sim_files;
  for (int r = 0; r < world.ranks(); ++r) sim_files.push_back((sim_dir / ("rank" + std::to_string(r) + ".pt.trace.json")).string());
  const core::TraceSet sim_set = core::load_trace_set(sim_files, {});
  const core::TraceSummary sim_summary = core::summarize_traces(sim_set);
  std::vector<const core::StepSummary*> sim_steps;  // the steady ones
  for (const auto& step : sim_summary.steps) {
    if (step.number > warmup) sim_steps.push_back(&step);
  }
  if (sim_steps.empty()) {
    for (const auto& step : sim_summary.steps) sim_steps.push_back(&step);
  }
  if (sim_steps.empty()) {
    std::cerr << "error: the simulation of " << scenario.name << " finished no iteration to compare\n";
    return kExitInternalError;
  }
  std::vector<const core::StepSummary*> real_steps;
  for (const auto& step : real_summary.steps) real_steps.push_back(&step);
  // The simulated step beside real step i: the iteration of the same number when the run has
  // it (ProfilerStep#N counts prof.step() calls, the iteration when profiling began at 0), else
  // the i-th steady one (the last when fewer).
  const auto simulated_for = [&](std::size_t i) -> const core::StepSummary& {
    for (const auto& step : sim_summary.steps) {
      if (step.number == real_steps[i]->number) return step;
    }
    return *sim_steps[std::min(i, sim_steps.size() - 1)];
  };

  // Per step: real step beside its simulated step.
  {
    std::vector<std::string> header{"iteration"};
    for (const auto& m : kStepMetrics) {
      header.push_back(std::string("real_") + m.name);
      header.push_back(std::string("simulated_") + m.name);
    }
    core::CsvRowWriter csv(dir / "validate.csv", header);
    for (std::size_t i = 0; i < real_steps.size(); ++i) {
      const core::StepSummary& s = simulated_for(i);
      std::vector<core::CsvField> row{real_steps[i]->number};
      for (const auto& m : kStepMetrics) {
        const std::int64_t r = m.of(*real_steps[i]);
        if (r >= 0) row.emplace_back(r);
        else row.emplace_back("");
        row.emplace_back(m.of(s));
      }
      csv.append(row);
    }
  }

  std::cout << scenario.name << ": real run (" << real.ranks.size() << " trace file(s), " << real_steps.size()
            << " step(s)) vs simulator (" << scenario.cluster.hardware.name << ", " << scenario.cluster.world_size()
            << " ranks, " << sim_steps.size() << " steady iterations)\n"
            << "real = median over the trace's steps (each the median over its ranks); spread = (max - min) / median "
               "over the steps; error = (simulated - real) / real, exposed comm relative to the real step time\n";
  std::printf("%-22s %14s %14s %9s %9s\n", "metric", "real", "simulated", "error", "spread");
  core::CsvRowWriter summary(dir / "validate_summary.csv",
                             {"metric", "real", "simulated", "error", "error_basis", "real_spread", "real_steps"});
  std::vector<double> real_step_times;
  for (const auto* s : real_steps) real_step_times.push_back(static_cast<double>(s->step_ns.median));
  const double real_step = core::median(real_step_times);
  const auto row = [&](const std::string& name, const std::string& label, bool relative, std::vector<double> values,
                       double sv) {
    std::erase_if(values, [](double v) { return v < 0; });
    const double r = values.empty() ? std::nan("") : core::median(values);
    double spread = std::nan("");
    if (!values.empty()) {
      const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
      spread = r > 0 ? (*hi - *lo) / r : (*hi == *lo ? 0.0 : std::nan(""));
    }
    const double basis = relative ? real_step : r;
    const double error = std::isnan(r) ? std::nan("") : basis > 0 ? (sv - r) / basis : (sv == r ? 0.0 : std::nan(""));
    std::printf("%-22s %14s %14s %9s %9s\n", label.c_str(), shown(name, r).c_str(), shown(name, sv).c_str(),
                (percent(error) + (relative ? "*" : "")).c_str(), std::isnan(spread) ? "n/a" : percent(spread).c_str() + 1);
    summary.append({name, r, sv, error, relative ? "real_step_time" : "real", spread,
                    static_cast<std::int64_t>(values.size())});
  };
  for (const auto& m : kStepMetrics) {
    std::vector<double> real_values, sim_values;
    for (const auto* s : real_steps) real_values.push_back(static_cast<double>(m.of(*s)));
    for (const auto* s : sim_steps) sim_values.push_back(static_cast<double>(m.of(*s)));
    row(m.name, m.label, m.relative_to_step, real_values, core::median(sim_values));
  }
  {
    std::vector<double> peaks;
    for (const auto* s : real_steps) peaks.push_back(static_cast<double>(s->peak_allocated_bytes));
    row("peak_allocated_bytes", "peak allocated", false, peaks, static_cast<double>(sim_stats.peak_allocated_bytes));
  }
  std::printf("(* of the real step time) simulated stalls: forward %.3f ms, backward %.3f ms per step\n",
              static_cast<double>(sim_stats.mean_forward_stall_ns) / 1e6,
              static_cast<double>(sim_stats.mean_backward_stall_ns) / 1e6);
  std::string mismatch;
  for (std::size_t i = 0; i < real_steps.size() && mismatch.empty(); ++i) {
    mismatch = first_gather_mismatch(real, real_steps[i]->number, sim_set, simulated_for(i).number);
  }
  if (!mismatch.empty()) {
    std::cout << "gathers do not match: " << mismatch << "\n";
  } else {
    std::cout << "gathers: every step's all-gather sequence matches the scenario's\n";
  }
  for (const auto& rank : real.ranks) {
    for (const auto& fact : rank.missing) {
      std::cout << "not in the trace (rank " << rank.rank << "): " << fact << "\n";
    }
  }
  std::cout << "outputs in: " << dir.string()
            << " (validate.csv, validate_summary.csv, simulated_trace.json, simulated_kineto/)\n";
  return kExitOk;
}

}  // namespace prefetchlab::apps
