#include "device_calibration.hpp"

#include "core/io/json_file.hpp"

#include <sched.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include "metric_text.hpp"
#include "bandwidth_fit.hpp"
#include "calibration_plan.hpp"
#include "command_context.hpp"
#include "core/hardware/calibration.hpp"
#include "core/hardware/collective_fit.hpp"
#include "core/hardware/measured_collective_curve.hpp"
#include "core/hardware/hardware_derived.hpp"
#include "core/hardware/hardware_profile.hpp"
#include "core/input/input_error.hpp"
#include "gpu_backend/device_backend.hpp"
#include "gpu_backend/microbenchmarks.hpp"
#include "core/scenario/scenario.hpp"
#include "measured_collectives.hpp"
#include "process_job.hpp"
#include "sim/cost/compute_model.hpp"

namespace prefetchlab::apps {
namespace {

// CPUs this process may run on (its affinity mask: a container's or taskset's limit, not the
// machine's whole count).
int usable_cpu_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return 1;
}

// One observation for the fit: the simulator's GEMM model at `shape` against a measured time.
struct GemmPoint {
  gpu::GemmShape shape;
  double time_ns = 0;
};

// Both kernels of a Linear, each at the forward's shape, because that is how the simulator
// charges them (sim::ComputeModel: backward = 2 kernels of the forward's M*N*K): the forward
// GEMM, and half the executor's dgrad + wgrad pair (their operands and transposes differ, so
// on a CPU they do not cost what the forward does).
std::vector<GemmPoint> gemm_points(const std::vector<gpu::GemmTiming>& timings) {
  std::vector<GemmPoint> points;
  for (const auto& t : timings) {
    points.push_back({t.shape, t.time_ns});
    points.push_back({t.shape, t.backward_time_ns / 2});
  }
  return points;
}

struct GemmFit {
  double flops_per_s = 0;
  double half_volume_mnk = 0;
  std::vector<double> predicted_ns;  // per point
  double rms_relative_error = 0;
};

// The simulator's own GEMM model (sim::ComputeModel::gemm_ns: peak x efficiency x shape
// fraction 1 / (1 + (v0 / MNK)^p)) fitted to the measurements: v0 over a log grid, the rate in
// closed form per v0 (least squares of relative errors), the best pair kept.
GemmFit fit_gemms(const core::HardwareProfile& base, const std::vector<GemmPoint>& points) {
  constexpr double kReferenceFlops = 1e9;
  core::HardwareProfile ref = base;
  ref.gpu.bf16_dense_flops_per_s = kReferenceFlops;
  ref.gpu.fp16_dense_flops_per_s.reset();
  GemmFit best;
  best.rms_relative_error = INFINITY;
  for (int step = 0; step <= 130; ++step) {
    const double v0 = std::pow(10.0, step / 10.0);
    core::CalibrationConstants c = ref.calibration;
    c.gemm_efficiency = 1.0;
    c.compute_time_scale = 1.0;
    c.gemm_half_volume_mnk = v0;
    const sim::ComputeModel model(ref, c, core::DType::kBF16);
    std::vector<double> p;
    double num = 0, den = 0;
    for (const auto& t : points) {
      p.push_back(static_cast<double>(model.gemm_ns(t.shape.m, t.shape.n, t.shape.k)));
      const double r = p.back() / t.time_ns;
      num += r, den += r * r;
    }
    if (den <= 0) continue;
    const double s = num / den;  // measured ~ predicted x s
    double err = 0;
    for (std::size_t i = 0; i < points.size(); ++i) err += std::pow(p[i] * s / points[i].time_ns - 1, 2);
    err = std::sqrt(err / static_cast<double>(points.size()));
    if (err < best.rms_relative_error) {
      best.rms_relative_error = err;
      best.half_volume_mnk = v0;
      best.flops_per_s = kReferenceFlops / s;
      best.predicted_ns.clear();
      for (const double x : p) best.predicted_ns.push_back(x * s);
    }
  }
  return best;
}

// One bandwidth fit's table: each size's measured and fitted time and the error.
void print_bandwidth_fit(const char* what, const std::vector<gpu::SizeTiming>& points, const BandwidthFit& f,
                         double bytes_per_time) {
  std::printf("#\n# %s\n# %14s %14s %14s %10s %8s\n", what, "size (B)", "measured (us)", "fitted (us)", "GB/s", "error");
  for (std::size_t i = 0; i < points.size(); ++i) {
    const auto& p = points[i];
    std::printf("  %14lld %14.2f %14.2f %10.2f %7.1f%%\n", static_cast<long long>(p.bytes), p.time_ns / 1e3,
                f.predicted_ns[i] / 1e3, bytes_per_time * static_cast<double>(p.bytes) / p.time_ns,
                100 * (f.predicted_ns[i] - p.time_ns) / p.time_ns);
  }
  std::printf("# fit: %.2f GB/s, rms error %.1f%%\n", f.bytes_per_s / 1e9, 100 * f.rms_relative_error);
}

}  // namespace

int run_device_calibration(const DeviceCalibrationOptions& o) {
  const auto backend = gpu::parse_backend(o.backend);
  if (!backend) throw core::InputError({"<command line>", 0}, "--backend", "is '" + o.backend + "'", "host or cuda");
  std::optional<core::Scenario> scenario;
  if (!o.scenario.empty()) scenario = core::load_scenario(o.scenario, o.overrides, bundled_data());
  // The base profile: given, else the scenario's own hardware.
  const std::filesystem::path base_path =
      !o.base.empty() ? o.base : std::filesystem::path(scenario->cluster.hardware.source_file);
  const core::HardwareProfile base = core::load_hardware_profile(base_path);
  // Ranks as processes may span nodes: their count per node is checked once they have run.
  if (!o.process && o.ranks > base.gpus_per_node) {
    throw core::InputError({"<command line>", 0}, "--ranks", std::to_string(o.ranks) + " ranks but the base profile " +
                           base.name + " has " + std::to_string(base.gpus_per_node) + " GPUs per node",
                           "at most gpus_per_node ranks, or another --base");
  }
  // GPUs are checked against a tight fit; the host device's times are a shared CPU's, which
  // swing 2-5x between runs (a CI machine: GEMM fits of 30-50% rms), so only on request.
  const bool check_fits = o.max_fit_error.has_value() || *backend == gpu::Backend::kCuda;
  const double max_fit_error = o.max_fit_error.value_or(kGpuMaxFitError);
  const CalibrationPlan plan = make_calibration_plan(*backend, scenario ? &*scenario : nullptr, bundled_data().models_dir, o.ranks);
  gpu::DeviceGroupOptions group_options;
  group_options.world_size = o.ranks;
  group_options.capacity_bytes = static_cast<std::uint64_t>(base.gpu.memory_bytes);
  const std::unique_ptr<gpu::DeviceGroup> group = make_command_device_group(*backend, group_options, o.launcher, o.process);

  gpu::MicrobenchmarkOptions mb;
  mb.iterations = o.iterations;
  mb.collective_sizes_bytes = plan.collective_sizes_bytes;
  mb.gemm_shapes = plan.gemm_shapes;
  mb.memory_pass_sizes_bytes = plan.memory_pass_sizes_bytes;
  mb.copy_sizes_bytes = plan.copy_sizes_bytes;
  const gpu::MicrobenchmarkResults r = gpu::run_microbenchmarks(*group, mb);
  if (!r.has_results) {
    std::printf("rank %d of %d: microbenchmarks done; rank 0 writes the profile\n", o.process->rank(), o.process->world_size());
    return kExitOk;
  }
  if (r.ranks_per_node > base.gpus_per_node) {
    throw core::InputError({"<environment>", 0}, "--launcher env", std::to_string(r.ranks_per_node) + " ranks ran on one node but the base profile " +
                           base.name + " has " + std::to_string(base.gpus_per_node) + " GPUs per node",
                           "at most gpus_per_node ranks per node, or another --base");
  }

  std::printf("# calibrate --backend %s: %d rank(s), bf16, %d timed repetitions per point\n", o.backend.c_str(),
              o.ranks, o.iterations);
  std::map<std::string, std::string> values;  // calibration key -> text
  std::ostringstream notes;
  // Each op's measured times by size, saved beside the fit: the simulator reads this curve at
  // every bucket size (core/hardware/measured_collective_curve), where one latency and one
  // bandwidth miss the mid sizes prefetch buckets use.
  std::string curves_yaml;
  if (o.ranks > 1) {
    const MeasuredCollectives collectives = fit_measured_collectives(r, o.ranks, o.backend, o.tolerance);
    values.insert(collectives.values.begin(), collectives.values.end());
    notes << collectives.profile_notes;
    curves_yaml = collectives.curves_yaml;
  } else {
    std::printf("#\n# one rank: collective fits skipped (a collective needs 2+ ranks); the base's stay\n");
    notes << "#   one rank: collective fits skipped, the base profile's collective figures stay\n";
  }

  const std::vector<GemmPoint> points = gemm_points(r.gemms);
  const GemmFit g = fit_gemms(base, points);
  std::printf("#\n# GEMMs (%s): forward, and\n"
              "# backward (dgrad + wgrad) / 2, each fitted at the forward's M*N*K as the simulator charges it\n",
              plan.gemm_source.c_str());
  std::printf("# %6s %6s %6s %9s %14s %14s %8s\n", "M", "N", "K", "kernel", "measured (us)", "fitted (us)", "error");
  for (std::size_t i = 0; i < points.size(); ++i) {
    const auto& t = points[i];
    std::printf("  %6lld %6lld %6lld %9s %14.2f %14.2f %7.1f%%\n", static_cast<long long>(t.shape.m),
                static_cast<long long>(t.shape.n), static_cast<long long>(t.shape.k), i % 2 ? "bwd / 2" : "forward",
                t.time_ns / 1e3, g.predicted_ns[i] / 1e3, 100 * (g.predicted_ns[i] - t.time_ns) / t.time_ns);
  }
  std::printf("# fit: plateau %.4g TFLOPS, half-rate volume M*N*K %.3g, rms error %.1f%%\n", g.flops_per_s / 1e12,
              g.half_volume_mnk, 100 * g.rms_relative_error);
  std::printf("# Adam step %.4g M parameters/s\n", r.adam_elements_per_s / 1e6);
  // Memory-bound passes read and write their size: 2 x bytes per pass.
  const BandwidthFit memory = fit_bandwidth(r.memory_passes, 2.0);
  print_bandwidth_fit("memory-bound pass (read + write of each size)", r.memory_passes, memory, 2.0);
  const BandwidthFit h2d = fit_bandwidth(r.host_to_device);
  print_bandwidth_fit(mb.pin_host_buffers ? "host -> device copies (pinned host memory)" : "host -> device copies",
                      r.host_to_device, h2d, 1.0);
  const BandwidthFit d2h = fit_bandwidth(r.device_to_host);
  print_bandwidth_fit(mb.pin_host_buffers ? "device -> host copies (pinned host memory)" : "device -> host copies",
                      r.device_to_host, d2h, 1.0);
  for (const auto& note : plan.notes) std::printf("# note: %s\n", note.c_str());
  std::printf("# launch: kernel %.2f us, collective %.2f us (host enqueue)\n", r.kernel_launch_ns / 1e3,
              r.collective_launch_ns / 1e3);
  const auto& ct = r.contention;  // a GEMM per rank overlapped with an all-gather
  const double compute_factor = std::clamp(ct.gemm_overlapped_ns / ct.gemm_alone_ns - 1, 0.0, 10.0);
  const double collective_factor = std::clamp(ct.collective_overlapped_ns / ct.collective_alone_ns - 1, 0.0, 10.0);
  std::printf("# contention: GEMMs %.3f -> %.3f ms overlapped (+%.1f%%), all-gathers %.3f -> %.3f ms (+%.1f%%)\n",
              ct.gemm_alone_ns / 1e6, ct.gemm_overlapped_ns / 1e6, 100 * compute_factor, ct.collective_alone_ns / 1e6,
              ct.collective_overlapped_ns / 1e6, 100 * collective_factor);

  // Each fit's error against the limit: a profile whose fits miss the measurements would make
  // every later simulation wrong (issue 20: a 55% GEMM fit), so it is not written unless forced.
  const std::vector<std::pair<std::string, double>> fit_errors = {
      {"GEMM", g.rms_relative_error},
      {"memory-bound pass", memory.rms_relative_error},
      {"host -> device copy", h2d.rms_relative_error},
      {"device -> host copy", d2h.rms_relative_error}};
  std::ostringstream fit_lines;
  std::string failed;
  for (const auto& [name, error] : fit_errors) {
    const bool over = check_fits && error > max_fit_error;
    fit_lines << "#   " << name << " fit: rms error " << fmt("%.1f", 100 * error) << "%" << (over ? " (above the limit)" : "")
              << "\n";
    if (over) failed += (failed.empty() ? "" : ", ") + name + " " + fmt("%.1f", 100 * error) + "%";
  }
  if (check_fits) {
    std::printf("# fit errors (rms over each fit's points) against --max-fit-error %.1f%%: %s\n", 100 * max_fit_error,
                failed.empty() ? "all within" : ("above: " + failed).c_str());
  } else {
    std::printf("# fit errors not checked on the host device (a shared CPU's times; --max-fit-error checks them)\n");
  }
  if (!failed.empty()) {
    if (!o.force) {
      throw core::InputError({"<command line>", 0}, "--max-fit-error",
                             "the fits of " + failed + " (rms) are above " + fmt("%.1f", 100 * max_fit_error) +
                                 "%, so " + o.output + " was not written (the per-shape errors are above)",
                             "fits within the limit: calibrate again on an idle device with more --iterations, raise "
                             "--max-fit-error, or --force to write the profile anyway");
    }
    std::printf("# --force: writing the profile although the fits of %s are above the limit\n", failed.c_str());
    fit_lines << "#   written with --force: fit error above --max-fit-error " << fmt("%.1f", 100 * max_fit_error) << "%\n";
  }

  // Rates above the base's peaks raise the peaks (efficiency 1): the profile says what the
  // device does, not what the base's datasheet says.
  YAML::Node root = YAML::LoadFile(base_path.string());
  const double peak = *core::peak_dense_flops_per_s(base, core::DType::kBF16);
  double gemm_efficiency = g.flops_per_s / peak;
  if (gemm_efficiency > 1) {
    root["gpu"]["bf16_dense_tflops"] = fmt("%.6g", g.flops_per_s / 1e12);
    root["gpu"]["fp16_dense_tflops"] = fmt("%.6g", g.flops_per_s / 1e12);
    gemm_efficiency = 1;
  }
  double memory_efficiency = memory.bytes_per_s / base.gpu.memory_bandwidth_bytes_per_s;
  if (memory_efficiency > 1) {
    root["gpu"]["memory_bandwidth_gb_per_s"] = fmt("%.6g", memory.bytes_per_s / 1e9);
    memory_efficiency = 1;
  }
  values["gemm_efficiency"] = fmt("%.6g", gemm_efficiency);
  values["gemm_half_volume_mnk"] = fmt("%.6g", g.half_volume_mnk);
  // The fit above covers the executor's forward and backward GEMMs together (gemm_points).
  values["gemm_backward_rate_ratio"] = "1";
  values["memory_efficiency"] = fmt("%.6g", memory_efficiency);
  values["device_adam_elements_per_s"] = fmt("%.6g", r.adam_elements_per_s);
  // Host costs of the executor this profile models (gpu_backend/, our C++ host program, not
  // DeepSpeed's Python): its measured launches for the calls it makes, at host_speed 1 (the
  // costs are this machine's own), and nothing for DeepSpeed's Python bookkeeping terms — its
  // hooks, fetch and release are C++ coordinator calls of well under a microsecond.
  values["host_speed"] = "1";
  values["kernel_launch_us"] = fmt("%.6g", r.kernel_launch_ns / 1e3);
  // The executor launches a module's kernels straight from C++, forward and backward alike.
  values["forward_op_host_us"] = fmt("%.6g", r.kernel_launch_ns / 1e3);
  values["backward_op_host_us"] = fmt("%.6g", r.kernel_launch_ns / 1e3);
  for (const core::HostTerm& term : core::host_terms()) values[std::string(term.yaml_key)] = "0";
  values["host_allgather_call_us"] = fmt("%.6g", r.collective_launch_ns / 1e3);
  values["host_reduce_scatter_call_us"] = fmt("%.6g", r.collective_launch_ns / 1e3);
  if (*backend == gpu::Backend::kHost) {
    // The host device's streams and collective parts are threads on this machine's cores, so
    // its contention is processor sharing (sim/ranks/shared_cores.hpp), not a GPU's fixed factors.
    // The microbenchmark above is the check: ranks GEMMs and ranks all-gather parts on `cores`.
    const int cores = usable_cpu_cores();
    const double predicted = std::max(1.0, 2.0 * o.ranks / cores) - 1;
    std::printf("# contention model: shared_cores over %d CPU core(s); predicts +%.0f%% for both sides above\n", cores,
                100 * predicted);
    values["contention_model"] = "shared_cores";
    values["shared_cores"] = std::to_string(cores);
    // What the overlapped all-gather lost beyond its fair share: the barrier (gang) penalty.
    const double penalty = std::clamp((1 + collective_factor) / (1 + predicted) - 1, 0.0, 10.0);
    values["shared_cores_collective_penalty"] = fmt("%.6g", penalty);
    std::printf("# all-gathers beyond their share: +%.0f%% (shared_cores_collective_penalty)\n", 100 * penalty);
    if (root["calibration"]) {
      root["calibration"].remove("contention_compute_factor");
      root["calibration"].remove("contention_collective_factor");
    }
  } else {
    values["contention_compute_factor"] = fmt("%.6g", compute_factor);
    values["contention_collective_factor"] = fmt("%.6g", collective_factor);
  }
  root["name"] = std::filesystem::path(o.output).stem().string();
  root["host_link"]["measured_host_to_device_gb_per_s"] = fmt("%.6g", h2d.bytes_per_s / 1e9);
  root["host_link"]["measured_device_to_host_gb_per_s"] = fmt("%.6g", d2h.bytes_per_s / 1e9);
  for (const auto& [k, v] : values) root["calibration"][k] = v;
  if (curves_yaml.empty()) {
    if (root["calibration"]) root["calibration"].remove("measured_collectives");  // the base's, not measured here
  } else {
    YAML::Node curve_nodes = YAML::Load(curves_yaml);
    for (auto item : curve_nodes) {
      item["sizes_bytes"].SetStyle(YAML::EmitterStyle::Flow);
      item["times_us"].SetStyle(YAML::EmitterStyle::Flow);
    }
    root["calibration"]["measured_collectives"] = curve_nodes;
  }

  YAML::Emitter emitter;
  emitter << root;
  {
    // Whole, never through a link, never half-written over a good profile (core/io/json_file.hpp).
    std::ostringstream out;
    out << "# Calibrated by `prefetchlab calibrate --backend " << o.backend << "` on " << o.ranks
        << " rank(s) over base " << base_path.string() << " (microbenchmarks only; no scenario run)\n"
        << "#   GEMM shapes: " << plan.gemm_source << "\n" << fit_lines.str()
        << notes.str() << "#   GEMM plateau " << fmt("%.4g", g.flops_per_s / 1e12) << " TFLOPS (bf16), half-rate M*N*K "
        << fmt("%.3g", g.half_volume_mnk) << ", rms error " << fmt("%.1f", 100 * g.rms_relative_error) << "%\n"
        << "#   host costs: this executor's measured launches (kernel, collective); DeepSpeed's Python terms 0\n"
        << emitter.c_str() << "\n";
    core::write_text_atomically(o.output, out.str());
  }
  core::load_hardware_profile(o.output);  // what was written must load
  std::printf("wrote %s\n", o.output.c_str());
  return kExitOk;
}

}  // namespace prefetchlab::apps
