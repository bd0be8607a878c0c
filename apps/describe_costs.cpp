#include "describe_costs.hpp"

#include <array>
#include <cstdio>
#include <string>

#include "core/hardware/device_memory_budget.hpp"
#include "core/hardware/hardware_derived.hpp"
#include "core/model/checkpoint_units.hpp"
#include "sim/cost/compute_model.hpp"
#include "sim/cost/zero_step_costs.hpp"

namespace prefetchlab::apps {
namespace {

constexpr double kNsPerUs = 1e3;

std::string format(const char* pattern, auto... values) {
  char buffer[256];
  std::snprintf(buffer, sizeof buffer, pattern, values...);
  return buffer;
}

// Device time by kernel kind, and the stream's remainder (launch gaps and host-issue stalls):
// every kernel issued by one host thread at its per-kernel cost, run in order on one stream.
struct KindTotals {
  std::array<std::int64_t, 3> kind_ns{};  // indexed by KernelKind
  std::vector<sim::TimeNs> stream;        // kernel durations in launch order
  std::int64_t span_ns = 0;               // the stream's span (kernels + gaps + stalls)

  void add_forward(const sim::ComputeModel& compute, const core::ModuleSpec& module, std::int64_t b, std::int64_t s) {
    for (const auto& kernel : module.kernels) {
      kind_ns[static_cast<std::size_t>(kernel.kind)] += compute.kernel_forward_ns(kernel, b, s);
    }
    const auto kernels = compute.module_forward_kernel_ns(module, b, s);
    stream.insert(stream.end(), kernels.begin(), kernels.end());
  }
  void add_backward(const sim::ComputeModel& compute, const core::ModuleSpec& module, std::int64_t b, std::int64_t s) {
    for (const auto& kernel : module.kernels) {
      kind_ns[static_cast<std::size_t>(kernel.kind)] += compute.kernel_backward_ns(kernel, b, s);
    }
    const auto kernels = compute.module_backward_kernel_ns(module, b, s);
    stream.insert(stream.end(), kernels.begin(), kernels.end());
  }
  void finish(const sim::ComputeModel& compute, sim::TimeNs issue_ns) { span_ns = compute.stream_ns(stream, issue_ns); }
  std::string text() const {
    const double span = span_ns > 0 ? static_cast<double>(span_ns) : 1.0;
    const std::int64_t busy = kind_ns[0] + kind_ns[1] + kind_ns[2];
    return format("%10.1f us in %lld kernels: gemm %.1f%%, attention %.1f%%, memory %.1f%%, gaps and launch stalls %.1f%%",
                  static_cast<double>(span_ns) / kNsPerUs, static_cast<long long>(stream.size()),
                  100.0 * static_cast<double>(kind_ns[0]) / span, 100.0 * static_cast<double>(kind_ns[1]) / span,
                  100.0 * static_cast<double>(kind_ns[2]) / span,
                  100.0 * static_cast<double>(span_ns - busy) / span);
  }
};

// The first transformer layer (checkpoint unit) and its descendants, in execution order.
std::vector<int> first_layer(const core::ModelSpec& model) {
  const core::CheckpointUnits units = core::checkpoint_units(model, true);
  std::vector<int> modules;
  int layer = -1;
  for (std::size_t m = 0; m < model.modules.size(); ++m) {
    if (layer < 0 && units.unit[m]) layer = static_cast<int>(m);
    if (layer >= 0 && units.inside[m]) {
      // stop at the next unit
      if (units.unit[m] && static_cast<int>(m) != layer) break;
      modules.push_back(static_cast<int>(m));
    }
  }
  return modules;
}

}  // namespace

void print_compute_costs(const CostsInput& input, std::ostream& out) {
  const core::ModelSpec& model = *input.model;
  const sim::ComputeModel compute(*input.hardware, input.calibration, input.dtype);
  const std::int64_t b = input.micro_batch;
  const std::int64_t s = input.seq_len;
  out << "\ncompute costs on " << input.hardware->gpu.model << " (" << core::dtype_name(input.dtype)
      << ", attention " << core::attention_impl_name(input.attention) << ", micro_batch " << b << ", seq_len " << s
      << "; host " << static_cast<double>(compute.host().forward_op_host_ns()) / kNsPerUs << " us per forward kernel, "
      << static_cast<double>(compute.host().backward_op_host_ns()) / kNsPerUs << " per backward kernel; gap "
      << static_cast<double>(input.calibration.kernel_gap_ns) / kNsPerUs << " us on the device; GEMMs and attention at "
      << format("%.3f", input.calibration.sustained_clock_fraction)
      << " of their short-benchmark rates: the clocks sustained under training load)\n";
  const std::vector<int> layer = first_layer(model);
  if (!layer.empty()) {
    out << "one layer, " << model.modules[static_cast<std::size_t>(layer.front())].display_name()
        << ", kernel by kernel (own work of each module):\n";
    // GEMMs and attention also show the rate they run at, and a GEMM the tiles of its output
    // (sim::ComputeModel::gemm_wave_fraction): "224 in 2 waves, 76%" pays for 264 tiles.
    out << format("%-40s %-24s %-9s %10s %10s %11s %10s %10s  %s\n", "module", "op", "kind", "fwd us", "bwd us",
                  "fwd GFLOP", "fwd MB", "fwd TFLOPS", "GEMM output tiles");
    for (const int m : layer) {
      const core::ModuleSpec& module = model.modules[static_cast<std::size_t>(m)];
      for (const auto& kernel : module.kernels) {
        const double forward_ns = static_cast<double>(compute.kernel_forward_ns(kernel, b, s));
        const double flops = static_cast<double>(kernel.flops.at(b, s));
        const std::string rate = kernel.kind != core::KernelKind::kMemory && forward_ns > 0
                                     ? format("%10.0f", flops / forward_ns / 1e3)
                                     : format("%10s", "-");
        std::string tiles;
        if (const auto t = compute.gemm_tiles(kernel, b, s)) {
          tiles = t->waves > 1 ? format("%.0f in %.0f waves, %.0f%%", t->tiles, t->waves, 100.0 * t->fraction)
                               : format("%.0f in 1 wave", t->tiles);
        }
        out << format("%-40s %-24s %-9s %10.1f %10.1f %11.3f %10.2f %s", module.display_name().c_str(),
                      kernel.op.c_str(), core::kernel_kind_name(kernel.kind), forward_ns / kNsPerUs,
                      static_cast<double>(compute.kernel_backward_ns(kernel, b, s)) / kNsPerUs, flops / 1e9,
                      static_cast<double>(kernel.bytes.at(b, s)) / 1e6, rate.c_str())
            << (tiles.empty() ? "" : "  " + tiles) << "\n";
      }
    }
    KindTotals forward;
    KindTotals backward;
    for (const int m : layer) forward.add_forward(compute, model.modules[static_cast<std::size_t>(m)], b, s);
    for (auto m = layer.rbegin(); m != layer.rend(); ++m) {
      backward.add_backward(compute, model.modules[static_cast<std::size_t>(*m)], b, s);
    }
    forward.finish(compute, compute.host().forward_op_host_ns());
    backward.finish(compute, compute.host().backward_op_host_ns());
    out << "layer forward " << forward.text() << "\nlayer backward" << backward.text() << "\n";
  }
  KindTotals forward;
  KindTotals backward;
  for (const auto& module : model.modules) forward.add_forward(compute, module, b, s);
  for (auto module = model.modules.rbegin(); module != model.modules.rend(); ++module) {
    backward.add_backward(compute, *module, b, s);
  }
  forward.finish(compute, compute.host().forward_op_host_ns());
  backward.finish(compute, compute.host().backward_op_host_ns());
  const double model_flops = 3.0 * static_cast<double>(model.forward_flops(b, s));
  const double seconds = static_cast<double>(forward.span_ns + backward.span_ns) / 1e9;
  const auto peak = core::peak_dense_flops_per_s(*input.hardware, input.dtype);
  out << "model forward " << forward.text() << "\nmodel backward" << backward.text() << "\n";
  if (peak && seconds > 0) {
    out << format("compute alone (one host thread issuing every kernel; no ZeRO-3 communication, hooks or "
                  "recomputation): %.2f ms per micro-batch, "
                  "MFU %.3f\n",
                  seconds * 1e3, model_flops / seconds / *peak);
  }
  if (input.scenario) {
    const core::Scenario& scenario = *input.scenario;
    out << "device memory: "
        << core::device_memory_budget(scenario.cluster.hardware, scenario.cluster.world_size(), scenario.cluster.nodes).text()
        << "\n";
    const sim::ZeroStepCosts z = sim::zero_step_costs(compute, scenario);
    const auto ms = [](sim::TimeNs ns) { return static_cast<double>(ns) / 1e6; };
    out << format("ZeRO-3's own work per optimizer step and rank (%lld ranks, %lld per node, %lld micro-batches; "
                  "work, overlapped where nothing waits for it):\n",
                  static_cast<long long>(scenario.cluster.world_size()),
                  static_cast<long long>(scenario.cluster.gpus_per_node),
                  static_cast<long long>(scenario.training.grad_accum));
    out << format("  all-gather copies (shard in, parameters out; forward and backward)  %10.2f ms\n",
                  ms(z.gather_copies_ns));
    out << format("  gradient copies (bucket, interleave, divide, partition)             %10.2f ms\n",
                  ms(z.gradient_copies_ns));
    if (scenario.zero.offload_optimizer.device == core::OffloadDevice::kNone) {
      out << format("  optimizer step on the GPU (norm, flatten, upcast, clip, Adam, copy)  %10.2f ms\n",
                    ms(z.optimizer_device_ns));
    } else {
      out << format("  CPU Adam (offload_optimizer; the node's %lld ranks share %.3g params/s) %10.2f ms\n",
                    static_cast<long long>(scenario.cluster.gpus_per_node),
                    scenario.cluster.calibration.cpu_adam_node_elements_per_s, ms(z.optimizer_cpu_ns));
      out << format("  updated 16-bit shard up the host link                                %10.2f ms\n",
                    ms(z.optimizer_upload_ns));
    }
  }
}

}  // namespace prefetchlab::apps
