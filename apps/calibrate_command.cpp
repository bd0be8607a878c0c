#include "calibrate_command.hpp"

#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "metric_text.hpp"
#include "command_context.hpp"
#include "core/hardware/collective_fit.hpp"
#include "core/hardware/hardware_profile.hpp"
#include "core/hardware/measured_collective_curve.hpp"
#include "core/input/input_error.hpp"
#include "core/io/json_file.hpp"
#include "core/hardware/nccl_tests_log.hpp"
#include "calibrated_profile.hpp"
#include "device_calibration.hpp"
#include "host_costs_calibration.hpp"
#include "process_job.hpp"
#include "trace_calibration.hpp"

namespace prefetchlab::apps {
namespace {

struct CalibrateOptions {
  std::vector<std::string> logs;
  std::string output;
  std::string hardware;
  std::string op;
  std::optional<int> ranks;
  double tolerance = 0.02;
  bool tolerance_set = false;
  bool iterations_set = false;
  std::string backend;  // set: microbenchmarks on this device instead of logs
  int iterations = 3;
  std::vector<std::string> traces;  // set: a real run's torch.profiler traces instead
  std::string host_costs;           // set: this machine's host cost per torch call instead
  core::TimelineOptions timeline;
  std::string scenario;  // with --from-trace: the traced job, for compute_time_scale; with
                         // --backend: the shapes and bucket sizes to measure
  std::string scenario_positional;  // `calibrate --backend cuda SCENARIO`
  std::optional<double> max_fit_error;
  bool force = false;
  std::vector<std::string> overrides;
  LauncherOptions launcher;
};

struct LogFit {
  std::string file;
  core::NcclTestsOp op = core::NcclTestsOp::kAllGather;
  int ranks = 0;
  std::optional<int> nodes;
  core::CollectiveFit fit;
  core::MeasuredCollectiveCurve curve;  // what the simulator uses at this op and group
};

LogFit fit_log(const std::string& file, const CalibrateOptions& o) {
  const core::NcclTestsLog log = core::read_nccl_tests_log(file);
  LogFit result;
  result.file = file;
  if (!o.op.empty()) {
    result.op = *core::parse_nccl_tests_op(o.op);
    if (log.op && *log.op != result.op) {
      throw core::InputError({file, 0}, "--op",
                             "is " + o.op + " but the log ran " + core::nccl_tests_op_name(*log.op) + "_perf",
                             "no --op (the log names its collective), or the log of the collective --op names");
    }
  } else if (log.op) {
    result.op = *log.op;
  } else {
    throw core::InputError({file, 0}, "", "cannot tell which collective this log measured (no all_gather_perf, reduce_scatter_perf or all_reduce_perf in it)",
                           "a log that includes the command line, or --op");
  }
  if (o.ranks) {
    result.ranks = *o.ranks;
  } else if (log.ranks) {
    result.ranks = *log.ranks;
  } else {
    throw core::InputError({file, 0}, "", "cannot tell how many ranks ran (no '#  Rank' lines)",
                           "the full nccl-tests output, or --ranks");
  }
  if (result.ranks < 2 || (o.ranks && *o.ranks < 2)) throw core::InputError({file, 0}, "", "has 1 rank", "a collective over at least 2 ranks");
  std::vector<core::FitPoint> points;
  for (const auto& row : log.rows) {
    if (row.time_us > 0) points.push_back({row.bytes, row.time_us});
  }
  if (points.size() < 2) {
    throw core::InputError({file, 0}, "", "has fewer than two sizes with a time", "a sweep over sizes (nccl-tests -b .. -e)");
  }
  const double n = result.ranks;
  const double factor = (result.op == core::NcclTestsOp::kAllReduce ? 2.0 : 1.0) * (n - 1) / n;
  result.fit = core::fit_collective(points, factor, o.tolerance);
  result.nodes = log.nodes;
  result.curve.op = result.op;
  result.curve.ranks = result.ranks;
  result.curve.nodes = log.nodes;
  for (const auto& p : result.fit.points) {  // sorted by size, one per size (the parser checks)
    if (p.bytes < 1) continue;  // a 0-byte row (count 0) times nothing but the launch
    result.curve.sizes_bytes.push_back(p.bytes);
    result.curve.times_us.push_back(p.time_us);
  }
  if (result.fit.bus_bandwidth_gb_per_s() <= 0) {
    throw core::InputError({file, 0}, "", "the largest sizes' times do not grow with size, so no bus bandwidth can be fitted",
                           "a sweep that reaches bandwidth-bound sizes (e.g. -e 1G)");
  }
  return result;
}

void report(const LogFit& f) {
  std::printf("%s: %s, %d ranks, %zu sizes\n", f.file.c_str(), core::nccl_tests_op_name(f.op), f.ranks,
              f.fit.points.size());
  for (const auto& r : f.fit.ranges) {
    std::printf("  range %lld - %lld B: latency %.2f us, busBW %s GB/s, max error %.2f%%\n",
                static_cast<long long>(f.fit.points[r.first].bytes),
                static_cast<long long>(f.fit.points[r.last].bytes), r.latency_us,
                r.bus_bandwidth_gb_per_s > 0 ? fmt("%.2f", r.bus_bandwidth_gb_per_s).c_str() : "n/a (flat)",
                100 * r.max_relative_error);
  }
  std::printf("  %14s  %14s  %12s  %8s\n", "size (B)", "measured (us)", "fitted (us)", "error");
  for (std::size_t i = 0; i < f.fit.points.size(); ++i) {
    const auto& p = f.fit.points[i];
    const double err = (f.fit.predicted_us[i] - p.time_us) / p.time_us;
    std::printf("  %14lld  %14.2f  %12.2f  %7.2f%%\n", static_cast<long long>(p.bytes), p.time_us,
                f.fit.predicted_us[i], 100 * err);
  }
  std::printf("  => latency %.2f us (smallest sizes), bus bandwidth %.2f GB/s (largest sizes)\n",
              f.fit.latency_us(), f.fit.bus_bandwidth_gb_per_s());
  std::printf("  => saved as measured_collectives: %zu sizes of %s on %d ranks%s; the simulator takes this op and group's "
              "time from them (log-size interpolation between sizes, the smallest size's time below, the largest "
              "size's bandwidth above); other groups use the latency and bandwidth\n\n",
              f.curve.sizes_bytes.size(), core::nccl_tests_op_name(f.op), f.ranks,
              f.nodes ? (" on " + std::to_string(*f.nodes) + " node(s)").c_str() : "");
}

const char* bandwidth_key(core::NcclTestsOp op) {
  switch (op) {
    case core::NcclTestsOp::kAllGather:
      return "allgather_bus_bandwidth_gb_per_s";
    case core::NcclTestsOp::kReduceScatter:
      return "reduce_scatter_bus_bandwidth_gb_per_s";
    case core::NcclTestsOp::kAllReduce:
      return "all_reduce_bus_bandwidth_gb_per_s";
  }
  return "";
}

int run_calibrate(const CalibrateOptions& options) {
  CalibrateOptions o = options;
  if (o.backend.empty() && o.launcher.any_given()) {
    throw core::InputError({"<command line>", 0}, "--launcher", "is given without --backend",
                           "--backend host|cuda (microbenchmarks on ranks), or leave it out");
  }
  if (!o.scenario_positional.empty()) {
    if (!o.scenario.empty()) {
      throw core::InputError({"<command line>", 0}, "SCENARIO", "is given twice (positional and --scenario)", "one of them");
    }
    o.scenario = o.scenario_positional;
  }
  if (o.backend.empty() && (o.max_fit_error || o.force)) {
    throw core::InputError({"<command line>", 0}, o.force ? "--force" : "--max-fit-error", "is given without --backend",
                           "--backend host|cuda (the microbenchmark fits it checks)");
  }
  if (!o.scenario_positional.empty() && o.backend.empty()) {
    throw core::InputError({"<command line>", 0}, "SCENARIO", "is given without --backend",
                           "--backend host|cuda SCENARIO, or --from-trace TRACE... --scenario SCENARIO");
  }
  const int sources = (o.backend.empty() ? 0 : 1) + (o.logs.empty() ? 0 : 1) + (o.traces.empty() ? 0 : 1) +
                      (o.host_costs.empty() ? 0 : 1);
  if (sources != 1) {
    throw core::InputError({"<command line>", 0}, "--from-nccl-tests, --backend, --from-trace, --from-host-costs",
                           sources == 0 ? "none is given" : "more than one is given",
                           "one of --from-nccl-tests LOG..., --backend host|cuda, --from-trace TRACE..., "
                           "--from-host-costs COSTS.csv");
  }
  if (!o.host_costs.empty()) {
    // What only the other sources read: refused rather than ignored.
    const std::pair<bool, const char*> others[] = {
        {!o.scenario.empty(), "--scenario"}, {!o.overrides.empty(), "--set"}, {!o.op.empty(), "--op"},
        {o.ranks.has_value(), "--ranks"}, {o.tolerance_set, "--tolerance"}, {o.iterations_set, "--iterations"},
        {o.timeline.whole_file_step, "--whole-file-step"}, {!o.timeline.step_marker.empty(), "--step-marker"}};
    for (const auto& [given, name] : others) {
      if (given) {
        throw core::InputError({"<command line>", 0}, name, "is given with --from-host-costs",
                               "--from-host-costs COSTS.csv [--base PROFILE] -o OUT");
      }
    }
    HostCostsCalibrationOptions h;
    h.costs = o.host_costs;
    h.base = o.hardware;
    h.output = o.output;
    return run_host_costs_calibration(h);
  }
  if (!o.traces.empty()) {
    TraceCalibrationOptions t;
    t.traces = o.traces;
    t.base = o.hardware;
    t.output = o.output;
    t.timeline = o.timeline;
    if (o.tolerance_set) t.tolerance = o.tolerance;
    t.scenario = o.scenario;
    t.overrides = o.overrides;
    return run_trace_calibration(t);
  }
  if (!o.backend.empty()) {
    if (!o.overrides.empty() && o.scenario.empty()) {
      throw core::InputError({"<command line>", 0}, "--set", "is given without a scenario",
                             "--backend host|cuda SCENARIO --set key.path=value");
    }
    DeviceCalibrationOptions d;
    // The base: --hardware, else the scenario's own hardware, else h100-sxm-8x.
    const std::string base_name = o.hardware.empty() ? "h100-sxm-8x" : o.hardware;
    const std::filesystem::path base_path = find_base_profile(base_name, "--base");
    d.backend = o.backend;
    d.ranks = o.ranks.value_or(2);
    if (!o.hardware.empty() || o.scenario.empty()) d.base = base_path;
    d.scenario = o.scenario;
    d.overrides = o.overrides;
    d.max_fit_error = o.max_fit_error;
    d.force = o.force;
    d.output = o.output;
    d.iterations = o.iterations;
    if (o.tolerance_set) d.tolerance = o.tolerance;
    // --launcher env: this process is one rank of the group; rank 0 writes the profile.
    std::vector<std::string> identity{"--backend=" + o.backend, "--base=" + base_name, "--iterations=" + std::to_string(o.iterations)};
    for (const auto& s : o.overrides) identity.push_back("--set=" + s);
    const std::unique_ptr<gpu::ProcessLink> link = join_process_job(o.launcher, o.backend, "calibrate", o.scenario, identity);
    if (link && o.ranks && *o.ranks != link->world_size()) {
      throw core::InputError({"<command line>", 0}, "--ranks", std::to_string(*o.ranks) + " with " + std::to_string(link->world_size()) +
                             " ranks launched (" + link->launch().launcher + ")", "no --ranks with --launcher env (the launcher's count)");
    }
    if (link) {
      d.ranks = link->world_size();
      d.process = link.get();
      d.launcher = o.launcher;
    }
    return run_device_calibration(d);
  }
  if (o.hardware.empty()) {
    throw core::InputError({"<command line>", 0}, "--hardware", "is missing", "the base hardware profile: bundled name or YAML path");
  }
  const std::filesystem::path base = find_base_profile(o.hardware, "--hardware");
  core::load_hardware_profile(base);  // the base must be valid itself
  if (!o.op.empty() && !core::parse_nccl_tests_op(o.op)) {
    throw core::InputError({"<command line>", 0}, "--op", "is '" + o.op + "'", "all_gather, reduce_scatter or all_reduce");
  }
  std::vector<LogFit> fits;
  for (const auto& file : o.logs) {
    LogFit fit = fit_log(file, o);
    // Two measurements of one collective on one group would both claim its curve and figure:
    // which to keep is the user's call, not the file order's.
    for (const LogFit& earlier : fits) {
      if (earlier.op == fit.op && earlier.ranks == fit.ranks && earlier.nodes == fit.nodes) {
        throw core::InputError({file, 0}, "--from-nccl-tests",
                               "measures " + std::string(core::nccl_tests_op_name(fit.op)) + " on " +
                                   std::to_string(fit.ranks) + " ranks, as " + earlier.file + " does: one would silently "
                                   "replace the other",
                               "one log per collective and group (keep the run you trust, or calibrate each into "
                               "its own profile)");
      }
    }
    fits.push_back(std::move(fit));
    report(fits.back());
  }
  // One figure per key: of a collective's logs on several groups, the last one's; the latency
  // comes from an all_gather log when there is one (ZeRO-3's most frequent collective), else the
  // first log.
  std::map<std::string, double> values;
  const LogFit* latency_source = &fits.front();
  for (const auto& f : fits) {
    values[bandwidth_key(f.op)] = f.fit.bus_bandwidth_gb_per_s();
    if (f.op == core::NcclTestsOp::kAllGather && latency_source->op != core::NcclTestsOp::kAllGather) {
      latency_source = &f;
    }
  }
  values["collective_latency_us"] = latency_source->fit.latency_us();

  std::ostringstream header;
  header << "# Calibrated by `prefetchlab calibrate --from-nccl-tests`: latency and bus bandwidth by least squares\n"
            "# per size range (for groups no log measured), and each log's sizes and times as measured_collectives\n"
            "# (what the simulator uses for that op and group)\n";
  for (const auto& f : fits) {
    header << "#   " << f.file << ": " << core::nccl_tests_op_name(f.op) << ", " << f.ranks << " ranks: latency "
           << fmt("%.2f", f.fit.latency_us()) << " us, busBW " << fmt("%.2f", f.fit.bus_bandwidth_gb_per_s())
           << " GB/s\n";
  }
  // One curve per op and group: the last log of each wins, as for the figures above.
  std::vector<core::MeasuredCollectiveCurve> curves;
  for (const auto& f : fits) {
    if (f.curve.sizes_bytes.size() < 2) continue;  // one non-empty size is no curve: the fit alone
    std::erase_if(curves, [&](const core::MeasuredCollectiveCurve& c) {
      return c.op == f.curve.op && c.ranks == f.curve.ranks && c.nodes == f.curve.nodes;
    });
    curves.push_back(f.curve);
  }
  std::string curves_yaml;
  for (const auto& curve : curves) curves_yaml += core::measured_curve_yaml(curve, 2);
  write_calibrated_profile(base, o.output, header.str(), values, curves_yaml);
  const core::HardwareProfile written = core::load_hardware_profile(o.output);
  std::printf("wrote %s (base %s): collective_latency_us %.2f", o.output.c_str(), base.string().c_str(),
              values["collective_latency_us"]);
  for (const auto& [k, v] : values) {
    if (k != "collective_latency_us") std::printf(", %s %.2f", k.c_str(), v);
  }
  std::printf("\n");
  (void)written;
  return kExitOk;
}

}  // namespace

CLI::App* add_calibrate_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<CalibrateOptions>();
  CLI::App* c = app.add_subcommand(
      "calibrate",
      "Fit a hardware profile from nccl-tests logs, from microbenchmarks on a device (--backend), from a real "
      "run's profiler traces (--from-trace) or from this machine's host cost per torch call (--from-host-costs)");
  c->add_option("--from-nccl-tests", o->logs, "nccl-tests output files (all_gather_perf, reduce_scatter_perf, all_reduce_perf)");
  c->add_option("--from-host-costs", o->host_costs,
                "this machine's host cost per torch.distributed call (bench/host_costs/torch_call_host_costs.py's "
                "CSV): sets host_speed");
  c->add_option("--from-trace", o->traces,
                "a real run's torch.profiler traces, one per rank: fit collective latency and bus bandwidth from "
                "cross-rank true times, host_speed from the torch-level collective calls, and DeepSpeed's hook "
                "terms from with_stack=True frames (docs/traces.md)");
  c->add_option("scenario", o->scenario_positional,
                "with --backend: a scenario whose GEMM shapes (M = micro_batch x seq_len) and bucket sizes are "
                "measured, and whose hardware is the base (default: a set of 7B-class shapes on a GPU)");
  c->add_option("--scenario", o->scenario,
                "with --from-trace: the traced job's scenario, simulated to fit compute_time_scale and, paired "
                "with its calls, DeepSpeed's fetch, all-gather and release host terms; with --backend: as SCENARIO");
  c->add_option("--set", o->overrides, "with a scenario: override a scenario key: key.path=value");
  c->add_option("--max-fit-error", o->max_fit_error,
                "with --backend: the largest rms relative error of a fit (GEMMs, memory passes, copies) for the "
                "profile to be written (default 0.2 on cuda; unchecked on host)")
      ->check(CLI::Range(1e-6, 100.0));
  c->add_flag("--force", o->force, "with --backend: write the profile even when a fit is above --max-fit-error");
  c->add_flag("--whole-file-step", o->timeline.whole_file_step,
              "with --from-trace: a file without ProfilerStep#N markers is one step");
  c->add_option("--step-marker", o->timeline.step_marker,
                "with --from-trace: without ProfilerStep#N, steps run from one event of this name to the next");
  c->add_option("--backend", o->backend, "host or cuda: run microbenchmarks on this device instead of reading logs")
      ->check(CLI::IsMember({"host", "cuda"}));
  c->add_option("-o,--output", o->output, "profile YAML to write")->required();
  c->add_option("--hardware,--base", o->hardware,
                "base hardware profile: bundled name or YAML path (with --backend, --from-trace or --from-host-costs default "
                "h100-sxm-8x)");
  c->add_option("--op", o->op, "collective of every log, when a log does not name it");
  c->add_option("--ranks", o->ranks, "ranks of every log, when a log does not list them; with --backend the device "
                                      "group's size (default 2)")
      ->check(CLI::Range(1, 1 << 20));
  c->add_option("--iterations", o->iterations, "with --backend: timed repetitions per microbenchmark (default 3)")
      ->check(CLI::Range(1, 1000))
      ->each([o](const std::string&) { o->iterations_set = true; });
  c->add_option("--tolerance", o->tolerance, "largest relative error within one fitted size range (default 0.02; 0.05 with --backend)")
      ->check(CLI::Range(1e-6, 1.0))
      ->each([o](const std::string&) { o->tolerance_set = true; });
  add_launcher_options(c, o->launcher);
  c->callback([o, exit_code] { *exit_code = run_guarded([&] { return run_calibrate(*o); }); });
  return c;
}

}  // namespace prefetchlab::apps
