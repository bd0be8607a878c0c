#include "calibration_plan.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "core/model/model_config.hpp"

namespace prefetchlab::apps {
namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;
constexpr std::int64_t kGiB = std::int64_t{1} << 30;
constexpr std::int64_t kElementBytes = 2;  // bf16: what the microbenchmarks run

// The bundled tiny model's width and tokens: on the host device every bundled model's GEMM
// shapes are scaled to it, so the sweep covers their aspect ratios at sizes a CPU runs in
// seconds.
constexpr std::int64_t kTinyHidden = 256;
constexpr std::int64_t kTinyTokens = 32;  // micro_batch x seq_len of the bundled host scenario
// The largest GEMM volume (M*N*K) the host device runs: the scaled bundled shapes reach 1.4e8
// (32 x 16752 x 256), tens of milliseconds on a CPU core.
constexpr double kHostMaxGemmVolume = 1.5e8;
// Token counts of the default GPU set: from 512 (shapes below the plateau, which fix the fit's
// half-rate volume: 512 x 4096 x 4096 is ~3x an H100's fitted 2.5e9) to 2 x 4096 (the plateau).
constexpr std::int64_t kDefaultTokens[] = {512, 1024, 4096, 8192};

// The collective sweep's top size, whose range gives the fitted bus bandwidth. A GPU's is
// nccl-tests' usual 16 MiB, with the buckets above it added. The host device's stops at 4 MiB:
// host scenarios are sized for a CPU (the tiny model is 7 MB in all, its buckets under 1 MiB),
// and at 16 MiB the reduction's fp64 scratch (2 x 32 MB per rank) leaves the 32 MiB L3 of a CI
// machine: measured 5-8x the per-byte cost of 1-4 MiB, a regime no host run reaches, which
// made the fitted reduce-scatter busBW 0.057 GB/s where the 256 KiB-1 MiB points give 0.14.
std::int64_t largest_collective_bytes(gpu::Backend backend) { return backend == gpu::Backend::kHost ? 4 * kMiB : 16 * kMiB; }
// Buckets above this are left out of a GPU's sweep (a 1 GiB reduce bucket is DeepSpeed's
// default; larger ones would only cost lease time).
constexpr std::int64_t kLargestGpuBucketBytes = kGiB;
// Copies on the host device are memcpy between threads' buffers: 16 MiB is past a CPU's caches.
constexpr std::int64_t kLargestHostCopyBytes = 16 * kMiB;

void sort_unique(std::vector<std::int64_t>& sizes) {
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
}

std::vector<gpu::GemmShape> to_shapes(const std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>>& seen) {
  std::vector<gpu::GemmShape> shapes;
  for (const auto& [m, n, k] : seen) shapes.push_back({m, n, k});
  return shapes;
}

// A model's distinct Linear shapes at `tokens` (forward: tokens x out x in).
void add_linear_shapes(const core::ModelSpec& model, std::int64_t tokens,
                       std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>>& seen) {
  for (const auto& p : model.params) {
    if (p.gemm_in > 0) seen.insert({tokens, p.gemm_out, p.gemm_in});
  }
}

// Every bundled model's distinct Linear shapes, scaled to the tiny width at the tiny tokens.
std::vector<gpu::GemmShape> bundled_scaled_shapes(const std::filesystem::path& models_dir) {
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> seen;
  for (const auto& name : core::bundled_model_names(models_dir)) {
    const core::ModelSpec model = core::load_model_file(models_dir / (name + ".yaml"), core::DType::kBF16);
    const double scale = static_cast<double>(kTinyHidden) / static_cast<double>(std::max<std::int64_t>(1, model.hidden_size));
    for (const auto& p : model.params) {
      if (p.gemm_in <= 0) continue;
      const auto in = std::max<std::int64_t>(8, std::llround(static_cast<double>(p.gemm_in) * scale));
      const auto out = std::max<std::int64_t>(8, std::llround(static_cast<double>(p.gemm_out) * scale));
      seen.insert({kTinyTokens, out, in});
    }
  }
  return to_shapes(seen);
}

// A shape scaled (each side by the cube root of the excess, at least 8) to the host device's
// largest volume.
gpu::GemmShape scaled_for_host(const gpu::GemmShape& s) {
  const double volume = static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
  if (volume <= kHostMaxGemmVolume) return s;
  const double f = std::cbrt(kHostMaxGemmVolume / volume);
  auto side = [f](std::int64_t x) { return std::max<std::int64_t>(8, std::llround(static_cast<double>(x) * f)); };
  return {side(s.m), side(s.n), side(s.k)};
}

}  // namespace

CalibrationPlan make_calibration_plan(gpu::Backend backend, const core::Scenario* scenario,
                                      const std::filesystem::path& models_dir, int ranks) {
  const bool host = backend == gpu::Backend::kHost;
  CalibrationPlan plan;

  // GEMMs.
  if (scenario != nullptr) {
    const std::int64_t tokens = scenario->training.micro_batch * scenario->training.seq_len;
    std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> seen;
    add_linear_shapes(scenario->model, tokens, seen);
    plan.gemm_shapes = to_shapes(seen);
    plan.gemm_source = scenario->name + "'s Linear shapes at M = micro_batch x seq_len = " + std::to_string(tokens) + " tokens";
    if (host) {
      std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> scaled;
      for (const auto& s : plan.gemm_shapes) {
        const gpu::GemmShape h = scaled_for_host(s);
        scaled.insert({h.m, h.n, h.k});
      }
      if (scaled != seen) {
        plan.notes.push_back("GEMM shapes above M*N*K " + std::to_string(static_cast<long long>(kHostMaxGemmVolume)) +
                             " scaled down for the host device (each side alike)");
        plan.gemm_source += ", scaled down for the host device";
      }
      plan.gemm_shapes = to_shapes(scaled);
    }
  } else if (host) {
    plan.gemm_shapes = bundled_scaled_shapes(models_dir);
    plan.gemm_source = "bundled models' Linear shapes scaled to hidden " + std::to_string(kTinyHidden) + ", " +
                       std::to_string(kTinyTokens) + " tokens";
  } else {
    const core::ModelSpec model = core::load_model_file(models_dir / "llama-2-7b.yaml", core::DType::kBF16);
    std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> seen;
    for (const std::int64_t tokens : kDefaultTokens) add_linear_shapes(model, tokens, seen);
    plan.gemm_shapes = to_shapes(seen);
    plan.gemm_source = "Llama-2-7B's Linear shapes at M =";
    for (const std::int64_t tokens : kDefaultTokens) plan.gemm_source += " " + std::to_string(tokens);
    plan.gemm_source += " tokens (no scenario given)";
  }

  // Buckets: the scenario's, or on a GPU DeepSpeed's defaults (the host device's default set
  // has none: its sizes are a CPU's).
  const core::ZeroConfig zero = scenario != nullptr ? scenario->zero : core::ZeroConfig{};
  const bool buckets = scenario != nullptr || !host;
  const std::int64_t prefetch_bytes = buckets ? zero.effective_prefetch_bucket_numel() * kElementBytes : 0;
  const std::int64_t reduce_bytes = buckets ? zero.reduce_bucket_numel * kElementBytes : 0;

  // Collectives: nccl-tests' sweep by 4x, and the bucket sizes (a GPU's only: the host device's
  // sweep stops at 4 MiB, see largest_collective_bytes).
  const std::int64_t slot = kElementBytes * std::max(1, ranks);
  const auto whole_slots = [slot](std::int64_t bytes) { return std::max(slot, bytes / slot * slot); };
  for (std::int64_t size = 4 << 10; size <= largest_collective_bytes(backend); size *= 4) {
    plan.collective_sizes_bytes.push_back(whole_slots(size));
  }
  for (const std::int64_t bucket : {prefetch_bytes, reduce_bytes}) {
    if (bucket <= 0) continue;
    if (host && bucket > largest_collective_bytes(backend)) {
      plan.notes.push_back("collective bucket size " + std::to_string(bucket) + " B left out on the host device (above " +
                           std::to_string(largest_collective_bytes(backend)) + " B)");
    } else if (!host && bucket > kLargestGpuBucketBytes) {
      plan.notes.push_back("collective bucket size " + std::to_string(bucket) + " B left out (above 1 GiB)");
    } else {
      plan.collective_sizes_bytes.push_back(whole_slots(bucket));
    }
  }
  sort_unique(plan.collective_sizes_bytes);

  // Memory-bound passes: a GPU reaches steady bandwidth only at large buffers (>= 1 GiB); the
  // host device's stay at the 1-2 MiB its executor's passes use.
  plan.memory_pass_sizes_bytes = host ? std::vector<std::int64_t>{kMiB, 2 * kMiB} : std::vector<std::int64_t>{kGiB, 2 * kGiB};

  // Host <-> device copies: offload copies whole prefetch buckets, and the optimizer's go by
  // reduce bucket; plus 16-256 MiB around them (16 MiB on the host device, past a CPU's caches
  // as copies between ranks' memory are).
  plan.copy_sizes_bytes = host ? std::vector<std::int64_t>{kLargestHostCopyBytes}
                               : std::vector<std::int64_t>{16 * kMiB, 64 * kMiB, 256 * kMiB};
  for (const std::int64_t bucket : {prefetch_bytes, reduce_bytes}) {
    if (bucket <= 0) continue;
    const std::int64_t cap = host ? kLargestHostCopyBytes : kLargestGpuBucketBytes;
    if (bucket > cap) {
      plan.notes.push_back("copy bucket size " + std::to_string(bucket) + " B left out (above " + std::to_string(cap) + " B)");
    } else {
      plan.copy_sizes_bytes.push_back(bucket);
    }
  }
  sort_unique(plan.copy_sizes_bytes);
  return plan;
}

}  // namespace prefetchlab::apps
