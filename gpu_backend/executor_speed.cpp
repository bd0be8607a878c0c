// prefetchlab_executor_speed: how fast the real backend's executor runs GPT-2 medium and large
// (micro batch 4, seq 1024, bf16, one GPU, nothing offloaded) against PyTorch on the same work:
// forward + backward and the Adam step, each the median over the steady iterations, printed
// beside PyTorch 2.11's figures on one H200 (issue 20: HF GPT-2 medium, bf16, sdpa: 56 ms
// forward + backward, 3.1 ms fused AdamW) as ratios (target: within 25%, ratio <= 1.25).
//
//   prefetchlab_executor_speed [--models gpt2-medium,gpt2-large] [--iterations 6] [--check]
//                              [--backend cuda|host] [--micro-batch 4] [--seq-len 1024]
//
// Without a GPU (or in a build without the CUDA device) it says so and exits 0: the speed check
// needs a GPU. --check only loads the scenarios it would run (exit 2 on bad input); --backend
// host runs the same measurement on the host-thread device (CI runs it on the tiny model at a
// small shape, to test the measurement itself).
// Exit codes: 0 ok or skipped, 1 internal error or a failed run, 2 bad input.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/input/input_error.hpp"
#include "core/scenario/scenario.hpp"
#include "gpu_backend/device_backend.hpp"
#include "gpu_backend/executor/executor.hpp"
#ifdef PREFETCHLAB_HAVE_CUDA
#include "gpu_backend/cuda/cuda_device.hpp"
#endif

namespace pc = prefetchlab::core;
namespace pg = prefetchlab::gpu;

namespace {

// PyTorch on one H200 (issue 20's table): GPT-2 medium only.
struct Reference {
  double forward_backward_ms = 0, adam_ms = 0;
};
const std::map<std::string, Reference> kPyTorch{{"gpt2-medium", {56.0, 3.1}}};

// GPT-2 at the shapes on one GPU: the bundled GPT-2 medium scenario's training
// settings, one rank, the H200 profile (the executor runs real work; the profile only names the
// GPU), nothing offloaded (PyTorch's figures keep everything on the GPU).
pc::Scenario scenario_for(const std::string& model, int iterations, int micro_batch, int seq_len) {
  const std::string root = PREFETCHLAB_SOURCE_DIR;
  return pc::load_scenario(root + "/scenarios/gpt2-medium-4-nodes.yaml",
                           {"model=" + model, "cluster.hardware=h200-sxm-8x", "cluster.nodes=1", "cluster.gpus_per_node=1",
                            "training.micro_batch=" + std::to_string(micro_batch), "training.seq_len=" + std::to_string(seq_len),
                            "training.dtype=bf16",
                            "training.iterations=" + std::to_string(iterations), "training.warmup_iterations=2",
                            "output.trace=false"},
                           pc::BundledData::from_root(root));
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Measured {
  double forward_backward_ms = 0, adam_ms = 0;
};

Measured measure(const pc::Scenario& s, pg::DeviceGroup& group) {
  const pg::ExecutorResult result = pg::Executor(s, group).run();
  if (result.status != pc::RunStatus::kOk) throw std::runtime_error("the executor run failed: " + result.message);
  const auto warmup = static_cast<int>(s.training.warmup_iterations);
  std::vector<double> forward_backward, adam;
  for (const auto& it : result.metrics.iterations) {
    if (it.iteration <= warmup) continue;
    forward_backward.push_back(static_cast<double>(it.forward_ns + it.backward_ns) / 1e6);
  }
  for (const auto& span : result.timeline) {
    if (span.kind == pg::TimelineSpan::Kind::kOptimizer && span.iteration > warmup) {
      adam.push_back(static_cast<double>(span.end_ns - span.start_ns) / 1e6);
    }
  }
  if (forward_backward.empty() || adam.empty()) {
    throw std::runtime_error("no steady iteration with an optimizer step was measured (more --iterations?)");
  }
  const Measured got{median(forward_backward), median(adam)};
  if (!(got.forward_backward_ms > 0) || !(got.adam_ms > 0)) throw std::runtime_error("a measured time is not positive");
  return got;
}

std::string ratio_text(double measured, std::optional<double> reference) {
  if (!reference) return "      n/a";
  char text[32];
  std::snprintf(text, sizeof text, "%8.2fx", measured / *reference);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Times the executor's forward + backward and Adam step on one GPU against PyTorch's (issue 20)"};
  std::vector<std::string> models{"gpt2-medium", "gpt2-large"};
  int iterations = 6;
  bool check_only = false;
  std::string backend_name = "cuda";
  int micro_batch = 4, seq_len = 1024;
  app.add_option("--models", models, "bundled models to run")->delimiter(',');
  app.add_option("--iterations", iterations, "iterations per model (the first 2 are warm-up)")->check(CLI::Range(3, 1000));
  app.add_flag("--check", check_only, "only load the scenarios it would run");
  app.add_option("--backend", backend_name, "cuda, or host (the host-thread device: a test of the measurement)")
      ->check(CLI::IsMember({"cuda", "host"}));
  app.add_option("--micro-batch", micro_batch, "sequences per micro-batch (PyTorch's figures: 4)")->check(CLI::PositiveNumber);
  app.add_option("--seq-len", seq_len, "tokens per sequence (PyTorch's figures: 1024)")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    std::vector<std::pair<std::string, pc::Scenario>> scenarios;
    for (const auto& m : models) scenarios.emplace_back(m, scenario_for(m, iterations, micro_batch, seq_len));
    if (check_only) {
      for (const auto& [m, s] : scenarios) {
        std::cout << m << ": micro batch " << s.training.micro_batch << ", seq " << s.training.seq_len << ", "
                  << s.training.iterations << " iterations on 1 GPU\n";
      }
      return 0;
    }
#ifdef PREFETCHLAB_HAVE_CUDA
    const int gpus = pg::cuda_device_count();
#else
    const int gpus = 0;
#endif
    const pg::Backend backend = backend_name == "host" ? pg::Backend::kHost : pg::Backend::kCuda;
    if (backend == pg::Backend::kCuda && (!pg::cuda_backend_built() || gpus < 1)) {
      std::cout << "executor speed: skipped: "
                << (pg::cuda_backend_built() ? "no CUDA GPU on this machine (cudaGetDeviceCount reports 0)"
                                             : "this build has no CUDA + NCCL device")
                << "; the measurement needs one GPU\n";
      return 0;
    }
    std::printf("%-12s %14s %12s %9s %10s %12s %9s\n", "model", "fwd+bwd ms", "PyTorch ms", "ratio", "Adam ms",
                "PyTorch ms", "ratio");
    bool all_met = true;
    int compared = 0;
    for (const auto& [m, s] : scenarios) {
      pg::DeviceGroupOptions options;
      options.capacity_bytes = static_cast<std::uint64_t>(s.cluster.hardware.gpu.memory_bytes);
      options.allocator = s.memory.allocator;
      auto group = pg::make_device_group(backend, options);
      const Measured got = measure(s, *group);
      // PyTorch's figures are for one shape on one GPU.
      const bool comparable = backend == pg::Backend::kCuda && micro_batch == 4 && seq_len == 1024;
      const auto ref = comparable ? kPyTorch.find(m) : kPyTorch.end();
      const std::optional<double> fb = ref == kPyTorch.end() ? std::nullopt : std::optional(ref->second.forward_backward_ms);
      const std::optional<double> adam = ref == kPyTorch.end() ? std::nullopt : std::optional(ref->second.adam_ms);
      std::printf("%-12s %14.2f %12s %9s %10.2f %12s %9s\n", m.c_str(), got.forward_backward_ms,
                  fb ? std::to_string(*fb).substr(0, 5).c_str() : "n/a", ratio_text(got.forward_backward_ms, fb).c_str(),
                  got.adam_ms, adam ? std::to_string(*adam).substr(0, 4).c_str() : "n/a", ratio_text(got.adam_ms, adam).c_str());
      if (fb) ++compared;
      if (fb && (got.forward_backward_ms > 1.25 * *fb || got.adam_ms > 1.25 * *adam)) all_met = false;
    }
    if (compared == 0) {
      std::cout << "no PyTorch figure for these models at this shape on this backend: no ratio\n";
    } else {
      std::cout << (all_met ? "target (within 25% of PyTorch) met\n" : "target (within 25% of PyTorch) NOT met\n");
    }
    return 0;
  } catch (const pc::InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
