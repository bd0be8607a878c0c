#include "core/scenario/scenario.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/hardware/calibration.hpp"
#include "core/input/closest_match.hpp"
#include "core/hardware/hardware_profile.hpp"
#include "core/model/hf_config.hpp"
#include "core/model/model_config.hpp"
#include "core/moe/leaf_modules.hpp"
#include "core/input/yaml_overrides.hpp"

namespace prefetchlab::core {
namespace {

constexpr std::int64_t kMaxInt32 = std::numeric_limits<std::int32_t>::max();

bool looks_like_path(const std::string& value) {
  return value.find('/') != std::string::npos || value.ends_with(".yaml") ||
         value.ends_with(".yml") || value.ends_with(".json");
}

std::vector<std::string> yaml_stems(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

AttentionImpl read_attention(const YamlSection& training) {
  return training.get_enum<AttentionImpl>(
      "attention", AttentionImpl::kSdpa,
      {{"eager", AttentionImpl::kEager},
       {"sdpa", AttentionImpl::kSdpa},
       {"flash", AttentionImpl::kFlash},
       {"flash3", AttentionImpl::kFlash3}});
}

TrainingConfig load_training(const YamlSection& section, std::int64_t max_positions,
                             const std::filesystem::path& scenario_dir) {
  section.allow_only({"micro_batch", "seq_len", "dtype", "iterations", "warmup_iterations", "grad_accum",
                      "activation_checkpointing", "attention"});
  TrainingConfig training;
  training.micro_batch = section.require_int("micro_batch", 1, kMaxInt32);
  training.seq_len_distribution = read_seq_len(section, max_positions, scenario_dir);
  training.seq_len = training.seq_len_distribution.max_len();
  training.dtype = section.get_enum<DType>(
      "dtype", training.dtype, {{"bf16", DType::kBF16}, {"fp16", DType::kFP16}, {"fp32", DType::kFP32}});
  training.iterations = section.get_int("iterations", training.iterations, 1, 1'000'000);
  training.warmup_iterations = section.get_int("warmup_iterations", training.warmup_iterations, 0,
                                               training.iterations - 1);
  training.grad_accum = section.get_int("grad_accum", training.grad_accum, 1, kMaxInt32);
  training.activation_checkpointing =
      section.get_bool("activation_checkpointing", training.activation_checkpointing);
  training.attention = read_attention(section);
  section.finish();
  return training;
}

ClusterConfig load_cluster(const YamlSection& section, const BundledData& bundled) {
  section.allow_only({"hardware", "nodes", "gpus_per_node", "network", "calibration"});
  ClusterConfig cluster;
  cluster.hardware_ref = section.require_string("hardware");
  cluster.hardware = load_hardware_profile(
      resolve_bundled_file(section, "hardware", bundled.hardware_dir, "hardware profile"));
  // `cluster.network` joins nodes of any profile: the network between them is a fact of the
  // cluster, not of the box, so a one-box profile (max_nodes 1) needs no copy to be a cluster.
  const bool own_network = section.has("network");
  if (own_network) {
    const YamlSection net = section.section("network");
    net.allow_only({"nics_per_node", "nic_gbit_per_s", "transport_latency_us"});
    NetworkSpec spec = cluster.hardware.network.value_or(NetworkSpec{});
    const std::string from_profile = cluster.hardware.network ? " (default: the profile's)" : "";
    spec.nics_per_node = static_cast<int>(net.get_int("nics_per_node", spec.nics_per_node, 1, 64));
    spec.nic_bits_per_s = net.get_double("nic_gbit_per_s", spec.nic_bits_per_s / 1e9, 0, 1e6) * 1e9;
    spec.transport_latency_ns = net.get_double("transport_latency_us", spec.transport_latency_ns / 1e3, 0, 10'000) * 1e3;
    if (spec.nics_per_node <= 0) {
      net.fail("nics_per_node", "is missing and profile '" + cluster.hardware_ref + "' has no network",
               "NICs per node for inter-node traffic, e.g. 8");
    }
    if (!(spec.nic_bits_per_s > 0)) {
      net.fail("nic_gbit_per_s", "is missing or 0 and profile '" + cluster.hardware_ref + "' has no network",
               "line rate of one NIC in Gbit/s, e.g. 400" + from_profile);
    }
    net.finish();
    cluster.hardware.network = spec;
  }
  constexpr std::int64_t kMaxClusterNodes = 4096;
  cluster.nodes = section.get_int("nodes", 1, 1, kMaxClusterNodes);
  if (cluster.nodes > cluster.hardware.max_nodes && !own_network) {
    section.fail("nodes",
                 "is " + std::to_string(cluster.nodes) + " but profile '" + cluster.hardware_ref +
                     "' describes at most " + std::to_string(cluster.hardware.max_nodes) +
                     " node(s)",
                 "nodes within the profile's max_nodes, or state the network that joins the nodes: "
                 "cluster.network: {nics_per_node: N, nic_gbit_per_s: G}" +
                     std::string(cluster.hardware.network ? " (both default to the profile's network; "
                                                            "network: {} takes them as they are)"
                                                          : ""));
  }
  if (own_network) cluster.hardware.max_nodes = static_cast<int>(kMaxClusterNodes);
  cluster.gpus_per_node = section.get_int("gpus_per_node", cluster.hardware.gpus_per_node, 1,
                                          cluster.hardware.gpus_per_node);
  if (cluster.nodes > 1 && !cluster.hardware.network) {
    section.fail("nodes", "is " + std::to_string(cluster.nodes) + " but profile '" +
                              cluster.hardware_ref + "' has no network section",
                 "nodes: 1, or cluster.network: {nics_per_node: N, nic_gbit_per_s: G}");
  }
  // The scenario's calibration overrides the profile's key by key.
  cluster.calibration =
      read_calibration(section.section("calibration"), cluster.hardware.calibration);
  section.finish();
  return cluster;
}

// DeepSpeed's own switch (zero.stage3_adaptive_prefetch_bucket_size, PR #8431) selects the
// fixed controller, ema_threshold, with zero's min/max; a `controller:` section that says
// otherwise is a contradiction, not a silent override.
void reconcile_adaptive_keys(const YamlSection& top, const YamlSection& controller_section,
                             const ZeroConfig& zero, ControllerConfig& controller) {
  if (!zero.adaptive_prefetch_bucket) return;
  if (!top.has("controller")) {
    controller.policy = ControllerPolicy::kEmaThreshold;
    controller.min_bucket_numel = zero.adaptive_prefetch_min_numel;
    controller.max_bucket_numel = zero.adaptive_prefetch_max_numel;
    return;
  }
  const std::string why = " contradicts zero.stage3_adaptive_prefetch_bucket_size: true";
  if (controller.policy != ControllerPolicy::kEmaThreshold) {
    controller_section.fail("policy", std::string("'") + controller_policy_name(controller.policy) + "'" + why,
                            "policy: ema_threshold (what DeepSpeed's switch selects), or drop the zero switch");
  }
  auto check_bound = [&](std::string_view key, std::int64_t& value, std::int64_t zero_value,
                         const char* zero_key) {
    if (!controller_section.has(key)) {
      value = zero_value;
    } else if (value != zero_value) {
      controller_section.fail(key, std::to_string(value) + why + " with " + zero_key + " = " +
                                       std::to_string(zero_value),
                              "the same value in both places, or only one of them");
    }
  };
  check_bound("min_bucket_numel", controller.min_bucket_numel, zero.adaptive_prefetch_min_numel,
              "stage3_adaptive_prefetch_min_size");
  check_bound("max_bucket_numel", controller.max_bucket_numel, zero.adaptive_prefetch_max_numel,
              "stage3_adaptive_prefetch_max_size");
}

NoiseConfig load_noise(const YamlSection& section, std::int64_t world_size) {
  section.allow_only({"seed", "compute_jitter", "slow_ranks", "host_jitter", "host_timer_noise_us"});
  NoiseConfig noise;
  noise.seed = static_cast<std::uint64_t>(section.get_int("seed", 0, 0, std::numeric_limits<std::int64_t>::max()));
  noise.compute_jitter = section.get_double("compute_jitter", 0, 0, 1);
  noise.host_jitter = section.get_double("host_jitter", 0, 0, 1);
  noise.host_timer_noise_ns =
      static_cast<std::int64_t>(std::llround(section.get_double("host_timer_noise_us", 0, 0, 1e6) * 1000.0));
  const YamlSection slow = section.section("slow_ranks");
  const std::string expected = "a factor >= 1 per rank, e.g. {3: 1.1}";
  for (const auto& key : slow.keys()) {
    int rank = -1;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), rank);
    if (ec != std::errc() || end != key.data() + key.size() || rank < 0 || rank >= world_size) {
      slow.fail(key, "is not a rank of this cluster (0.." + std::to_string(world_size - 1) + ")", expected);
    }
    noise.slow_ranks[rank] = slow.get_double(key, 1, 1, 100);
  }
  slow.finish();
  return noise;
}

// divergence: a list of {iteration: N, skip: [module names]}.
std::vector<DivergenceConfig> load_divergence(const YamlSection& top, const ModelSpec& model,
                                              std::int64_t iterations, std::int64_t world_size) {
  std::vector<DivergenceConfig> out;
  const YAML::Node list = top.raw("divergence");
  if (!list || list.IsNull()) return out;
  const std::string expected = "a list of {iteration: N, skip: [module names]}";
  if (!list.IsSequence()) top.fail("divergence", "is not a list", expected);
  std::vector<std::string> names;
  for (const auto& module : model.modules) names.push_back(module.name);
  for (std::size_t i = 0; i < list.size(); ++i) {
    const YamlSection entry(list[i], top.source(), "divergence[" + std::to_string(i) + "]",
                            list[i].Mark().line + 1);
    entry.allow_only({"iteration", "skip", "ranks"});
    DivergenceConfig divergence;
    divergence.iteration = entry.require_int("iteration", 1, iterations);
    const YAML::Node skip = entry.raw("skip");
    if (!skip || !skip.IsSequence() || skip.size() == 0) {
      entry.fail("skip", "is missing or not a non-empty list", "a list of module names, e.g. [model.layers.3]");
    }
    for (const auto& item : skip) {
      const std::string name = item.IsScalar() ? item.Scalar() : "";
      const auto found = std::find(names.begin(), names.end(), name);
      if (name.empty() || found == names.end() || found == names.begin()) {
        throw InputError({top.source()->file, item.Mark().line + 1}, entry.dotted("skip"),
                         "'" + name + "' is not a module of " + model.name + " that can be skipped",
                         "a fully qualified module name, e.g. model.layers.3 (not the root)",
                         closest_match(name, names));
      }
      divergence.skipped_modules.push_back(static_cast<int>(found - names.begin()));
    }
    if (const YAML::Node ranks = entry.raw("ranks"); ranks && !ranks.IsNull()) {
      const std::string ranks_expected = "a list of ranks in [0, " + std::to_string(world_size - 1) + "]";
      if (!ranks.IsSequence() || ranks.size() == 0) entry.fail("ranks", "is not a non-empty list", ranks_expected);
      for (const auto& item : ranks) {
        int rank = -1;
        try {
          rank = item.as<int>();
        } catch (const YAML::Exception&) {
        }
        if (rank < 0 || rank >= world_size) {
          throw InputError({top.source()->file, item.Mark().line + 1}, entry.dotted("ranks"),
                           "'" + (item.IsScalar() ? item.Scalar() : std::string("?")) + "' is not a rank of this cluster",
                           ranks_expected);
        }
        divergence.ranks.push_back(rank);
      }
    }
    out.push_back(std::move(divergence));
  }
  return out;
}

// The config.json path `model:` names (relative to the scenario), or empty for a model YAML.
std::filesystem::path hf_model_path(const YamlSection& top) {
  const std::string value = top.require_string("model");
  if (!looks_like_path(value)) return {};
  std::filesystem::path path(value);
  if (path.is_relative()) path = std::filesystem::path(top.source()->file).parent_path() / path;
  if (!is_hf_config_reference(path)) return {};
  std::error_code ec;
  const std::filesystem::path file = std::filesystem::is_directory(path, ec) ? path / "config.json" : path;
  if (!std::filesystem::is_regular_file(file, ec)) {
    top.fail("model", "config.json '" + file.string() + "' not found",
             "a bundled model name, a model YAML, or a Hugging Face config.json (or its folder)");
  }
  return path;
}

// NVMe offload (ZeRO-Infinity's swapper: asynchronous reads and writes of parameter and
// optimizer partitions through aio) is not modelled; simulating it as host memory would give
// CPU-offload numbers for an NVMe job, so it is refused where it is set.
void refuse_nvme_offload(const YamlSection& zero_section, const ZeroConfig& zero) {
  for (const auto& [name, nvme] : {std::pair<std::string, bool>{"offload_param", zero.offload_param.device == OffloadDevice::kNvme},
                                   {"offload_optimizer", zero.offload_optimizer.device == OffloadDevice::kNvme}}) {
    if (!nvme) continue;
    const std::string problem = "is nvme, which is not modelled (DeepSpeed's NVMe swapper); it would be simulated as "
                                "CPU offload and give CPU-offload numbers";
    const std::string expected = "device: cpu (host memory) or none";
    if (zero_section.has(name) && zero_section.raw(name).IsMap() && zero_section.section(name).has("device")) {
      zero_section.section(name).fail("device", problem, expected);
    }
    // Set through a ds_config file (or a deprecated switch): point at the scenario's key.
    const std::string key = zero_section.has("ds_config") ? "ds_config" : name;
    zero_section.fail(key, "sets " + name + ".device " + problem, expected);
  }
}

// ZeRO++ (Wang et al., arXiv:2306.10209; DeepSpeed's zero_hpz_partition_size,
// zero_quantized_weights, zero_quantized_nontrainable_weights, zero_quantized_gradients) changes
// the size, group and kernels of every all-gather and reduce-scatter: exactly what this tool
// times. It is not modelled yet, and simulating plain ZeRO-3 in its place would answer for
// another job, so a switch that turns it on is refused where it is set.
void refuse_zeropp(const YamlSection& zero_section, const ZeroConfig& zero) {
  struct Switch {
    const char* key;
    bool on;
    const char* what;
    const char* off;
  };
  const Switch switches[] = {
      {"zero_hpz_partition_size", zero.zero_hpz_partition_size > 1, "ZeRO++ hpZ (a secondary partition per node)", "1"},
      {"zero_quantized_weights", zero.zero_quantized_weights, "ZeRO++ qwZ (int8 weight all-gathers)", "false"},
      {"zero_quantized_nontrainable_weights", zero.zero_quantized_nontrainable_weights,
       "ZeRO++ quantized non-trainable weights", "false"},
      {"zero_quantized_gradients", zero.zero_quantized_gradients, "ZeRO++ qgZ (int4 gradient all-to-all)", "false"},
  };
  for (const Switch& s : switches) {
    if (!s.on) continue;
    std::ostringstream problem;
    problem << "turns on " << s.what << ", which is not modelled: the simulation would time plain ZeRO-3's "
            << "all-gathers and reduce-scatters and answer for another job";
    const std::string expected = std::string(s.off) + " (plain ZeRO-3), or leave the key out";
    if (zero_section.has(s.key)) zero_section.fail(s.key, problem.str(), expected);
    // Set through a ds_config file: point at the scenario's key.
    zero_section.fail(zero_section.has("ds_config") ? "ds_config" : s.key,
                      "sets " + std::string(s.key) + ": " + problem.str(), expected);
  }
}

// zero.leaf_modules: [class names]. DeepSpeed users call set_z3_leaf_modules(model, [classes])
// in Python (deepspeed/utils/z3_leaf_module.py); the scenario names the classes. Applied to the
// model at once, so every executor sees the leaves' hooks.
std::vector<std::string> load_leaf_modules(const YamlSection& zero_section, ModelSpec& model) {
  std::vector<std::string> classes;
  zero_section.mark_known("leaf_modules");
  const YAML::Node list = zero_section.raw("leaf_modules");
  if (!list || list.IsNull()) return classes;
  const std::string expected = "a list of module class names, e.g. [MixtralSparseMoeBlock]";
  if (!list.IsSequence() || list.size() == 0) zero_section.fail("leaf_modules", "is not a non-empty list", expected);
  std::vector<std::string> known;
  for (const auto& module : model.modules) {
    if (std::find(known.begin(), known.end(), module.class_name) == known.end()) known.push_back(module.class_name);
  }
  for (const auto& item : list) {
    const std::string name = item.IsScalar() ? item.Scalar() : "";
    if (name.empty() || std::find(known.begin(), known.end(), name) == known.end()) {
      throw InputError({zero_section.source()->file, item.Mark().line + 1}, zero_section.dotted("leaf_modules"),
                       "'" + name + "' is not a module class of " + model.name, expected,
                       closest_match(name, known));
    }
    if (model.modules.front().class_name == name) {
      throw InputError({zero_section.source()->file, item.Mark().line + 1}, zero_section.dotted("leaf_modules"),
                       "'" + name + "' is the root module's class; a root leaf would gather the whole model",
                       "a class below the root, e.g. MixtralSparseMoeBlock");
    }
    if (std::find(classes.begin(), classes.end(), name) != classes.end()) {
      throw InputError({zero_section.source()->file, item.Mark().line + 1}, zero_section.dotted("leaf_modules"),
                       "names '" + name + "' twice", expected);
    }
    classes.push_back(name);
  }
  apply_z3_leaf_modules(model, classes);
  return classes;
}

}  // namespace

BundledData BundledData::from_root(const std::filesystem::path& root) {
  return {root / "models", root / "hardware"};
}

std::filesystem::path resolve_bundled_file(const YamlSection& section, std::string_view key,
                                           const std::filesystem::path& bundled_dir,
                                           const std::string& what) {
  const std::string value = section.require_string(key);
  if (looks_like_path(value)) {
    std::filesystem::path path(value);
    if (path.is_relative()) path = std::filesystem::path(section.source()->file).parent_path() / path;
    if (!std::filesystem::is_regular_file(path)) {
      section.fail(key, what + " file '" + path.string() + "' not found",
                   "a bundled " + what + " name or an existing file path");
    }
    return path;
  }
  const auto names = yaml_stems(bundled_dir);
  if (std::find(names.begin(), names.end(), value) == names.end()) {
    std::string list;
    for (const auto& name : names) list += (list.empty() ? "" : ", ") + name;
    section.fail(key, "unknown " + what + " '" + value + "'", "one of " + list + ", or a file path",
                 closest_match(value, names));
  }
  return bundled_dir / (value + ".yaml");
}

Scenario load_scenario(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                       const BundledData& bundled) {
  // Parse once, apply --set on the tree, then read everything through the strict reader.
  auto source = std::make_shared<YamlSource>();
  source->file = file.string();
  YAML::Node root = parse_yaml_file(source->file);
  for (const auto& assignment : overrides) apply_override(root, assignment, *source);
  return load_scenario_tree(root, source, "", 1, file.stem().string(), bundled);
}

Scenario load_scenario_tree(const YAML::Node& root, std::shared_ptr<const YamlSource> source,
                            const std::string& root_path, int root_line, const std::string& name,
                            const BundledData& bundled) {
  const std::filesystem::path file(source->file);
  if (!root || root.IsNull()) {
    throw InputError({source->file, root_line}, root_path, "is empty", "a scenario mapping (model, training, cluster, ...)");
  }
  const YamlSection top = root_path.empty() ? YamlSection::from_node(root, source)
                                            : YamlSection(root, source, root_path, root_line);

  top.allow_only({"model", "training", "cluster", "zero", "controller", "noise", "output", "divergence",
                  "expect", "memory", "moe"});
  Scenario scenario;
  scenario.file = file;
  scenario.name = name;

  // Model first: training checks seq_len against its positions, zero "auto" needs its width.
  scenario.model_ref = top.require_string("model");
  const YamlSection training_section = top.section("training");
  const DType dtype = training_section.get_enum<DType>(
      "dtype", DType::kBF16, {{"bf16", DType::kBF16}, {"fp16", DType::kFP16}, {"fp32", DType::kFP32}});
  const AttentionImpl attention = read_attention(training_section);
  if (const auto hf_path = hf_model_path(top); !hf_path.empty()) {
    // A Hugging Face config.json (or a folder holding one); errors name the JSON file.
    scenario.model = load_hf_config(hf_path, dtype, attention, &scenario.notes);
  } else {
    const auto model_path = resolve_bundled_file(top, "model", bundled.models_dir, "model");
    scenario.model = load_model_file(model_path, dtype, attention);
  }
  const std::string attention_name = attention_impl_name(attention);
  if (is_flash_attn_package(attention) && dtype == DType::kFP32) {
    training_section.fail("attention", "is " + attention_name + ", but flash-attn runs only fp16 and bf16",
                          "attention: sdpa or eager with dtype fp32, or dtype bf16");
  }
  if (is_flash_attn_package(attention) && scenario.model.architecture == "bert") {
    training_section.fail("attention",
                          "is " + attention_name + ", but HF's BERT has no flash_attention_2 or _3 implementation",
                          "attention: sdpa or eager for a BERT model");
  }
  if (attention == AttentionImpl::kFlash3 && scenario.model.attention_dropout > 0) {
    // flash_attn_interface's functions take no dropout probability.
    std::ostringstream why;
    why << "is flash3, but FlashAttention-3 has no dropout and the model's attention_dropout is "
        << scenario.model.attention_dropout;
    training_section.fail("attention", why.str(), "attention: flash or sdpa, or a model with attention_dropout 0");
  }
  scenario.training = load_training(training_section, scenario.model.max_positions, file.parent_path());

  if (!top.has("cluster")) top.fail("cluster", "is missing", "a cluster section with `hardware:`");
  scenario.cluster = load_cluster(top.section("cluster"), bundled);
  if (attention == AttentionImpl::kFlash3 && (scenario.cluster.calibration.attention_flash3_efficiency <= 0 ||
                                                scenario.cluster.calibration.attention_flash3_backward_efficiency <= 0)) {
    std::ostringstream why;
    why << "is flash3, but FlashAttention-3 runs only on Hopper GPUs (sm90) and "
        << scenario.cluster.hardware.gpu.model << " has no measured FlashAttention-3 rate";
    training_section.fail("attention", why.str(),
                          "attention: flash (FlashAttention-2), or cluster.calibration."
                          "attention_flash3_efficiency and attention_flash3_backward_efficiency for this GPU");
  }

  const TrainingFacts facts{scenario.training.micro_batch, scenario.training.grad_accum,
                            scenario.training.dtype, scenario.cluster.world_size(),
                            scenario.model.hidden_size};
  const YamlSection zero_section = top.section("zero");
  scenario.leaf_modules = load_leaf_modules(zero_section, scenario.model);
  scenario.zero = load_zero_config(zero_section, facts,
                                   std::filesystem::path(source->file).parent_path(),
                                   &scenario.notes);
  refuse_nvme_offload(zero_section, scenario.zero);
  refuse_zeropp(zero_section, scenario.zero);
  const YamlSection controller_section = top.section("controller");
  scenario.controller = load_controller_config(controller_section);
  reconcile_adaptive_keys(top, controller_section, scenario.zero, scenario.controller);

  scenario.noise = load_noise(top.section("noise"), scenario.cluster.world_size());

  const YamlSection output = top.section("output");
  scenario.output.dir = output.get_string("dir", "out/" + scenario.name);
  scenario.output.trace = output.get_bool("trace", scenario.output.trace);
  scenario.output.memory_timeline = output.get_bool("memory_timeline", scenario.output.memory_timeline);
  const std::int64_t world_size = scenario.cluster.world_size();
  scenario.output.trace_ranks = read_index_selection(output, "trace_ranks", 0, world_size - 1, false, "ranks");
  scenario.output.trace_iterations =
      read_index_selection(output, "trace_iterations", 1, scenario.training.iterations, true, "iterations");
  scenario.output.timeline_budget_bytes = output.get_bytes("timeline_budget", 0);
  if (scenario.output.timeline_budget_bytes < 0) {
    output.fail("timeline_budget", "is negative", "a size such as 200MB, or 0 for no budget");
  }
  // Large worlds: the first node's ranks, and a budget unless the iterations are chosen.
  if (world_size > kLimitTimelinesAboveRanks) {
    if (!output.has("trace_ranks")) {
      scenario.output.trace_ranks.text = "first:" + std::to_string(kDefaultTraceRanks);
      for (std::int64_t r = 0; r < kDefaultTraceRanks; ++r) scenario.output.trace_ranks.indices.push_back(r);
      scenario.output.timelines_limited_by_default = true;
    }
    if (!output.has("timeline_budget") && !output.has("trace_iterations")) {
      scenario.output.timeline_budget_bytes = kDefaultTimelineBudgetBytes;
      scenario.output.timelines_limited_by_default = true;
    }
  }
  output.finish();

  scenario.divergence =
      load_divergence(top, scenario.model, scenario.training.iterations, scenario.cluster.world_size());
  scenario.moe = load_moe_config(top.section("moe"), top.has("moe") && !top.raw("moe").IsNull(), scenario.model);
  scenario.expect = load_expectations(top.section("expect"));
  const YamlSection memory = top.section("memory");
  memory.allow_only({"allocator"});
  scenario.memory.allocator = load_allocator_options(memory.section("allocator"));
  top.finish();
  return scenario;
}

ControllerContext controller_context(const Scenario& scenario, int rank) {
  ControllerContext context;
  context.rank = rank;
  context.world_size = static_cast<int>(scenario.cluster.world_size());
  context.initial_bucket_numel = scenario.zero.effective_prefetch_bucket_numel();
  context.max_live_numel = scenario.zero.max_live_numel;
  context.param_element_bytes = dtype_bytes(scenario.training.dtype);
  return context;
}

}  // namespace prefetchlab::core
