#include "core/hardware/calibration.hpp"

#include <array>
#include <charconv>
#include <limits>
#include <cmath>
#include <string>
#include <utility>

namespace prefetchlab::core {
namespace {

// YAML writes these in the unit their key names; the struct holds SI base units.
constexpr double kNsPerUs = 1e3;
constexpr double kBytesPerGigaByte = 1e9;

// Host costs and latencies above one second are certainly a unit mistake (ms or ns for us).
constexpr double kMaxMicroseconds = 1e6;
// A what-if scale beyond this is a typo, not a question anyone asks.
constexpr double kMaxScale = kMaxHostSpeed;

// The literal that clears an optional override (back to the value derived from link facts).
constexpr std::string_view kDerived = "derived";

struct Range {
  double min;
  bool min_exclusive;
  double max;  // inclusive; infinity = unbounded
  std::string_view expected;
};

std::string scalar_text(const YamlSection& s, std::string_view key, std::string_view expected) {
  const YAML::Node node = s.raw(key);
  if (!node.IsScalar()) s.fail(key, "is not a single number", std::string(expected));
  return node.Scalar();
}

double parse_in_range(const YamlSection& s, std::string_view key, const std::string& text,
                      const Range& range) {
  const std::string expected(range.expected);
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    s.fail(key, "is '" + text + "'", expected);
  }
  const bool below = range.min_exclusive ? value <= range.min : value < range.min;
  if (below || value > range.max) s.fail(key, "is " + text + ", out of range", expected);
  return value;
}

// Replaces `target` when `key` is present.
void read_number(const YamlSection& s, std::string_view key, const Range& range, double& target) {
  if (!s.has(key)) {
    s.mark_known(key);
    return;
  }
  target = parse_in_range(s, key, scalar_text(s, key, range.expected), range);
}

std::int64_t microseconds_to_ns(double us) { return std::llround(us * kNsPerUs); }

// A host cost written in microseconds, kept in ns; replaces `target_ns` when `key` is present.
void read_microseconds(const YamlSection& s, std::string_view key, std::int64_t& target_ns) {
  constexpr Range kHostCost{0, false, kMaxMicroseconds, "a number of microseconds in [0, 1000000]"};
  double us = static_cast<double>(target_ns) / kNsPerUs;
  read_number(s, key, kHostCost, us);
  target_ns = microseconds_to_ns(us);
}

// An optional override: a number replaces it, `derived` clears it.
template <class T, class Convert>
void read_override(const YamlSection& s, std::string_view key, const Range& range,
                   std::optional<T>& target, Convert convert) {
  if (!s.has(key)) {
    s.mark_known(key);
    return;
  }
  const std::string text = scalar_text(s, key, range.expected);
  if (text == kDerived) {
    target.reset();
    return;
  }
  target = convert(parse_in_range(s, key, text, range));
}

// Keys of earlier versions whose meaning moved to other keys: an error that says where, never
// silently ignored (an old profile would otherwise run with costs it did not ask for).
void reject_removed_keys(const YamlSection& s) {
  struct Removed {
    std::string_view key;
    std::string_view problem;
    std::string_view replaced_by;
  };
  constexpr Removed kRemoved[] = {
      {"hook_overhead_us", "was removed: the one flat hook cost became DeepSpeed's hook, fetch and release terms",
       "those keys instead: host_pre_forward_hook_us, host_post_forward_hook_us, host_pre_backward_hook_us, "
       "host_post_backward_hook_us, host_backward_hook_setup_us, host_fetch_call_us, host_fetch_per_param_us, "
       "host_fetch_per_inflight_param_us, host_fetch_gather_round_us, host_release_call_us, "
       "host_release_per_param_us, host_release_per_freed_param_us"},
      {"collective_launch_us", "was removed: the one flat launch cost became per-call and per-parameter terms",
       "those keys instead: host_allgather_call_us, host_allgather_per_param_us, host_reduce_scatter_call_us, "
       "host_reduce_scatter_per_param_us"},
      {"host_overhead_scale", "was removed: it became host_speed, its inverse",
       "host_speed instead (host_overhead_scale s is host_speed 1/s; s = 0 is host_speed inf)"},
  };
  for (const auto& [key, problem, replaced_by] : kRemoved) {
    if (s.has(key)) s.fail(key, std::string(problem), std::string(replaced_by));
  }
}

// host_speed: a positive multiplier, or `inf` for a free host.
void read_host_speed(const YamlSection& s, double& target) {
  constexpr std::string_view kKey = "host_speed";
  // Below 1/1000 of a GPU server's host no host exists (and costs would overflow a time).
  constexpr Range kSpeed{
      kMinHostSpeed, false, kMaxScale,
      "a multiplier in [0.001, 1000] (1 = a GPU server, 0.5 = host code twice as slow), or inf (a free host)"};
  if (!s.has(kKey)) {
    s.mark_known(kKey);
    return;
  }
  const std::string text = scalar_text(s, kKey, kSpeed.expected);
  if (text == "inf" || text == ".inf") {
    target = std::numeric_limits<double>::infinity();
    return;
  }
  target = parse_in_range(s, kKey, text, kSpeed);
}

constexpr Range kEfficiency{0, true, 1, "a fraction in (0, 1], e.g. 0.8"};
constexpr Range kScale{0, false, kMaxScale,
                       "a multiplier in [0, 1000] (0 = free, 1 = as modelled)"};
// 1e15 GB/s moves a terabyte in a picosecond: "infinitely fast" for any question asked here.
constexpr Range kBusBandwidth{
    0, true, 1e15, "a number in (0, 1e15] (GB/s, nccl-tests busbw, e.g. 360), or derived"};
// A slowdown factor: 0 = no contention, 1 = twice as long; beyond 10 is a typo.
constexpr Range kHalfVolume{0, true, 1e18, "a GEMM volume M*N*K in (0, 1e18], e.g. 2.54e9"};
constexpr Range kElementRate{0, true, 1e15, "parameters per second in (0, 1e15], e.g. 2e8, or derived"};
constexpr Range kContention{0, false, 10, "a slowdown fraction in [0, 10] (0 = off, e.g. 0.19)"};
constexpr Range kLatency{0, false, kMaxMicroseconds,
                         "a number of microseconds in [0, 1000000], or derived"};

}  // namespace

std::span<const HostTerm> host_terms() {
  static constexpr HostTerm kTerms[] = {
      {"host_pre_forward_hook_us", "host_pre_forward_hook_ns",
       &CalibrationConstants::host_pre_forward_hook_ns},
      {"host_post_forward_hook_us", "host_post_forward_hook_ns",
       &CalibrationConstants::host_post_forward_hook_ns},
      {"host_pre_backward_hook_us", "host_pre_backward_hook_ns",
       &CalibrationConstants::host_pre_backward_hook_ns},
      {"host_post_backward_hook_us", "host_post_backward_hook_ns",
       &CalibrationConstants::host_post_backward_hook_ns},
      {"host_backward_hook_setup_us", "host_backward_hook_setup_ns",
       &CalibrationConstants::host_backward_hook_setup_ns},
      {"host_fetch_call_us", "host_fetch_call_ns", &CalibrationConstants::host_fetch_call_ns},
      {"host_fetch_per_param_us", "host_fetch_per_param_ns", &CalibrationConstants::host_fetch_per_param_ns},
      {"host_fetch_per_inflight_param_us", "host_fetch_per_inflight_param_ns",
       &CalibrationConstants::host_fetch_per_inflight_param_ns},
      {"host_fetch_gather_round_us", "host_fetch_gather_round_ns",
       &CalibrationConstants::host_fetch_gather_round_ns},
      {"host_allgather_call_us", "host_allgather_call_ns", &CalibrationConstants::host_allgather_call_ns},
      {"host_allgather_per_param_us", "host_allgather_per_param_ns",
       &CalibrationConstants::host_allgather_per_param_ns},
      {"host_release_call_us", "host_release_call_ns", &CalibrationConstants::host_release_call_ns},
      {"host_release_per_param_us", "host_release_per_param_ns",
       &CalibrationConstants::host_release_per_param_ns},
      {"host_release_per_freed_param_us", "host_release_per_freed_param_ns",
       &CalibrationConstants::host_release_per_freed_param_ns},
      {"host_reduce_scatter_call_us", "host_reduce_scatter_call_ns",
       &CalibrationConstants::host_reduce_scatter_call_ns},
      {"host_reduce_scatter_per_param_us", "host_reduce_scatter_per_param_ns",
       &CalibrationConstants::host_reduce_scatter_per_param_ns},
      {"host_all_reduce_call_us", "host_all_reduce_call_ns", &CalibrationConstants::host_all_reduce_call_ns},
      {"host_optimizer_step_per_param_us", "host_optimizer_step_per_param_ns",
       &CalibrationConstants::host_optimizer_step_per_param_ns},
  };
  return kTerms;
}

double default_gemm_efficiency(std::string_view gpu_model) {
  // Most specific names first: "GH200" contains "H200", "GB200" contains "B200".
  struct Measured {
    std::string_view name;
    double efficiency;
  };
  constexpr std::array<Measured, 8> kMamf{{
      {"GH200", 0.838},  // 828.6 TFLOPS
      {"GB200", 0.729},  // 1822
      {"B300", 0.786},   // 1769
      {"B200", 0.776},   // 1745
      {"H200", 0.803},   // "H200 is the same" as H100 SXM
      {"H100", 0.803},   // 794.5 of 989 (SXM; the MAMF table has no H100 PCIe row)
      {"A100", 0.869},   // 271.2 of 312 (SXM); PCIe handled below
      {"A800", 0.869},   // not measured: A100 silicon with a cut NVLink, assumed the same
  }};
  // MAMF is the best shape of a sweep; a model's own GEMMs run below it, by their output's tile
  // and wave quantization (sim::ComputeModel::gemm_wave_fraction, applied per GEMM) and by this
  // factor: measured over modelled rate, geometric mean over the four GEMM measurements of one
  // H200 (PyTorch 2.11, bf16): 8192^3 at 762 TFLOPS, a Llama-2-7B layer's forward GEMMs at
  // M = 4096 at 743 and 751, a GPT-2-XL layer's at 582 (0.99, 0.98, 0.99, 0.91 of the MAMF
  // rate x volume curve x quantization). Taken for every GPU's MAMF.
  constexpr double kModelGemmsOfMamf = 0.966;
  const bool pcie = gpu_model.find("PCIe") != std::string_view::npos;
  if (pcie && gpu_model.find("A100") != std::string_view::npos) return 0.811 * kModelGemmsOfMamf;  // 252.9 TFLOPS
  for (const auto& [name, efficiency] : kMamf) {
    if (gpu_model.find(name) != std::string_view::npos) return efficiency * kModelGemmsOfMamf;
  }
  return CalibrationConstants{}.gemm_efficiency;
}

std::optional<AttentionEfficiency> measured_attention_efficiency(std::string_view gpu_model) {
  // H100 SXM, FlashAttention-2 (the kernels torch's sdpa bundles), head dim 128, bf16, at 16k
  // tokens: 335 TFLOPS forward (causal), 322 backward, of 989 (Shah et al. 2024,
  // FlashAttention-3, arXiv:2407.08608, figures 5 and 6). H200 has the H100's SMs and clocks.
  if (gpu_model.find("H100") != std::string_view::npos || gpu_model.find("H200") != std::string_view::npos) {
    return AttentionEfficiency{335.0 / 989.0, 322.0 / 989.0};
  }
  // A100: "50-73% of the theoretical maximum FLOPs/s" forward, up to 63% backward (Dao 2023,
  // FlashAttention-2, arXiv:2307.08691); the causal, head-dim-128 forward taken at the H100
  // figures' causal/non-causal ratio below the maximum (335/370 x 0.73 = 0.66).
  if (gpu_model.find("A100") != std::string_view::npos || gpu_model.find("A800") != std::string_view::npos) {
    return AttentionEfficiency{0.66, 0.63};
  }
  return std::nullopt;
}

std::optional<AttentionEfficiency> measured_flash3_attention_efficiency(std::string_view gpu_model) {
  // H100 SXM, FlashAttention-3, head dim 128, bf16, at 16k tokens: 616 TFLOPS forward (causal),
  // 561 backward, of 989: the same figures as FlashAttention-2's above (Shah et al. 2024,
  // arXiv:2407.08608, figures 5 and 6). H200 and H800 have the H100's SMs and clocks.
  for (const std::string_view hopper : {"H100", "H200", "H800"}) {
    if (gpu_model.find(hopper) != std::string_view::npos) return AttentionEfficiency{616.0 / 989.0, 561.0 / 989.0};
  }
  return std::nullopt;
}

double default_sustained_clock_fraction(std::string_view gpu_model) {
  // Same tool, same GPU, burst against sustained (calibration.hpp: sustained_clock_fraction).
  // Hopper: measured on an H200, whose SMs, clocks and 700 W limit the H100 SXM and H800 share.
  for (const std::string_view hopper : {"H100", "H200", "H800"}) {
    if (gpu_model.find(hopper) != std::string_view::npos) return 708.5 / 841.9;
  }
  for (const std::string_view blackwell : {"B200", "B300"}) {
    if (gpu_model.find(blackwell) != std::string_view::npos) return 1456.3 / 1770.9;
  }
  return 1.0;
}

CalibrationConstants default_calibration(std::string_view gpu_model) {
  CalibrationConstants c;
  c.gemm_efficiency = default_gemm_efficiency(gpu_model);
  c.sustained_clock_fraction = default_sustained_clock_fraction(gpu_model);
  if (c.sustained_clock_fraction == 1.0) c.uncalibrated.emplace_back("sustained_clock_fraction");
  const bool gemm_measured = c.gemm_efficiency != CalibrationConstants{}.gemm_efficiency ||
                             gpu_model.find("A100") != std::string_view::npos;
  if (!gemm_measured) c.uncalibrated.emplace_back("gemm_efficiency");
  // The memory-bandwidth fraction was measured on an A100 only.
  if (gpu_model.find("A100") == std::string_view::npos) c.uncalibrated.emplace_back("memory_efficiency");
  if (const auto attention = measured_attention_efficiency(gpu_model)) {
    c.attention_efficiency = attention->forward;
    c.attention_backward_efficiency = attention->backward;
  } else {
    c.uncalibrated.emplace_back("attention_efficiency");
    c.uncalibrated.emplace_back("attention_backward_efficiency");
  }
  if (const auto flash3 = measured_flash3_attention_efficiency(gpu_model)) {
    c.attention_flash3_efficiency = flash3->forward;
    c.attention_flash3_backward_efficiency = flash3->backward;
  }
  c.uncalibrated.emplace_back("kernel_launch_us");
  c.uncalibrated.emplace_back("forward_op_host_us");
  c.uncalibrated.emplace_back("backward_op_host_us");
  // Fitted on an H200; H100 SXM has the same SMs and clocks.
  if (gpu_model.find("H100") == std::string_view::npos && gpu_model.find("H200") == std::string_view::npos) {
    c.uncalibrated.emplace_back("gemm_backward_rate_ratio");
  }
  return c;
}

CalibrationConstants read_calibration(const YamlSection& section,
                                      const CalibrationConstants& base) {
  CalibrationConstants c = base;
  read_number(section, "gemm_efficiency", kEfficiency, c.gemm_efficiency);
  read_number(section, "memory_efficiency", kEfficiency, c.memory_efficiency);
  read_number(section, "attention_efficiency", kEfficiency, c.attention_efficiency);
  read_number(section, "attention_backward_efficiency", kEfficiency, c.attention_backward_efficiency);
  read_number(section, "attention_flash3_efficiency", kEfficiency, c.attention_flash3_efficiency);
  read_number(section, "attention_flash3_backward_efficiency", kEfficiency,
              c.attention_flash3_backward_efficiency);
  read_number(section, "gemm_backward_rate_ratio", kEfficiency, c.gemm_backward_rate_ratio);
  read_number(section, "sustained_clock_fraction", kEfficiency, c.sustained_clock_fraction);
  read_microseconds(section, "kernel_gap_us", c.kernel_gap_ns);
  read_number(section, "compute_time_scale", kScale, c.compute_time_scale);
  read_number(section, "copy_time_scale", kScale, c.copy_time_scale);
  reject_removed_keys(section);
  read_host_speed(section, c.host_speed);
  read_microseconds(section, "kernel_launch_us", c.kernel_launch_ns);
  read_microseconds(section, "forward_op_host_us", c.forward_op_host_ns);
  read_microseconds(section, "backward_op_host_us", c.backward_op_host_ns);
  for (const HostTerm& term : host_terms()) read_microseconds(section, term.yaml_key, c.*term.field);
  const auto gb_per_s = [](double v) { return v * kBytesPerGigaByte; };
  read_override(section, "allgather_bus_bandwidth_gb_per_s", kBusBandwidth,
                c.allgather_bus_bandwidth_bytes_per_s, gb_per_s);
  read_override(section, "reduce_scatter_bus_bandwidth_gb_per_s", kBusBandwidth,
                c.reduce_scatter_bus_bandwidth_bytes_per_s, gb_per_s);
  read_override(section, "all_reduce_bus_bandwidth_gb_per_s", kBusBandwidth,
                c.all_reduce_bus_bandwidth_bytes_per_s, gb_per_s);
  read_override(section, "collective_latency_us", kLatency, c.collective_latency_ns,
                microseconds_to_ns);
  c.measured_collectives = read_measured_curves(section);
  read_override(section, "gemm_half_volume_mnk", kHalfVolume, c.gemm_half_volume_mnk,
                [](double v) { return v; });
  read_number(section, "contention_compute_factor", kContention, c.contention_compute_factor);
  read_number(section, "contention_collective_factor", kContention,
              c.contention_collective_factor);
  c.collective_model = section.get_enum<CalibrationConstants::CollectiveModel>(
      "collective_model", c.collective_model,
      {{"nccl_tuner", CalibrationConstants::CollectiveModel::kNcclTuner},
       {"ring", CalibrationConstants::CollectiveModel::kRing}});
  c.contention_model = section.get_enum<CalibrationConstants::ContentionModel>(
      "contention_model", c.contention_model,
      {{"factors", CalibrationConstants::ContentionModel::kFactors},
       {"shared_cores", CalibrationConstants::ContentionModel::kSharedCores}});
  c.shared_cores = static_cast<int>(section.get_int("shared_cores", c.shared_cores, 1, 4096));
  read_number(section, "shared_cores_collective_penalty", kContention, c.shared_cores_collective_penalty);
  if (c.contention_model == CalibrationConstants::ContentionModel::kSharedCores) {
    if (c.shared_cores < 1) {
      section.fail("shared_cores", "missing: contention_model shared_cores needs the core count",
                   "a number of CPU cores in [1, 4096], e.g. 2");
    }
    for (const char* factor : {"contention_compute_factor", "contention_collective_factor"}) {
      if (section.has(factor)) {
        section.fail(factor, "has no effect with contention_model: shared_cores",
                     "no contention factor, or contention_model: factors");
      }
    }
  } else {
    for (const char* key : {"shared_cores", "shared_cores_collective_penalty"}) {
      if (section.has(key)) {
        section.fail(key, "has no effect with contention_model: factors",
                     "contention_model: shared_cores beside it, or no " + std::string(key));
      }
    }
  }
  if (section.has("cpu_adam_elements_per_s")) {
    section.fail("cpu_adam_elements_per_s", "was a per-rank rate and is replaced",
                 "cpu_adam_node_elements_per_s: parameters per second of CPU Adam over one node's cores, "
                 "shared by the node's ranks");
  }
  c.cpu_adam_node_elements_per_s =
      section.get_double("cpu_adam_node_elements_per_s", c.cpu_adam_node_elements_per_s, 1, 1e15);
  read_override(section, "device_adam_elements_per_s", kElementRate, c.device_adam_elements_per_s,
                [](double v) { return v; });
  section.finish();
  // A key set here is no longer a default estimate.
  std::erase_if(c.uncalibrated, [&](const std::string& key) { return section.has(key); });
  return c;
}

}  // namespace prefetchlab::core
