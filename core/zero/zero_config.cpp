#include "core/zero/zero_config.hpp"

#include <map>
#include <string_view>
#include <utility>
#include <variant>

#include "core/zero/ds_config_file.hpp"
#include "core/input/size_value.hpp"

namespace prefetchlab::core {
namespace {

// How an "auto" value resolves (Hugging Face Trainer / Accelerate, h = hidden size).
enum class AutoRule { kNone, kHiddenSquared, kNineTenthsHiddenSquared, kTenHidden };

// kOptionalBool: DeepSpeed's Optional[bool]; null keeps the default (overlap_comm: None means
// true for stage 3).
enum class Kind { kStage, kCount, kInt, kBool, kOptionalBool, kFraction, kDevice, kPath };

template <class T>
using Member =
    std::variant<std::int64_t T::*, bool T::*, double T::*, OffloadDevice T::*, std::string T::*>;

// One DeepSpeed key: its JSON name (what DeepSpeed's docs and HF configs write), the other names
// DeepSpeed accepts for it (pydantic field name, deprecated names), the field it fills.
template <class T>
struct KeySpec {
  std::string_view json_name;
  std::string_view field_name;
  Member<T> member;
  Kind kind;
  std::vector<std::string_view> aliases;
  AutoRule auto_rule;
  bool modelled;          // false: accepted, no effect on what PrefetchLab models
  std::string_view note;  // why, for docs and notes
};

const std::vector<KeySpec<ZeroConfig>>& zero_table() {
  using Z = ZeroConfig;
  constexpr auto kNo = AutoRule::kNone;
  static const std::vector<KeySpec<Z>> table{
      {"stage", "stage", &Z::stage, Kind::kStage, {}, kNo, true, "only 3 is modelled"},
      {"stage3_prefetch_bucket_size",
       "prefetch_bucket_numel",
       &Z::prefetch_bucket_numel,
       Kind::kCount,
       {"prefetch_bucket_size"},
       AutoRule::kNineTenthsHiddenSquared,
       true,
       "elements issued per prefetch round; docs say 5e8, code says 5e7"},
      {"stage3_max_live_parameters",
       "max_live_numel",
       &Z::max_live_numel,
       Kind::kCount,
       {"max_live_parameters"},
       kNo,
       true,
       "bounds prefetch issuance"},
      {"stage3_max_reuse_distance",
       "max_reuse_distance_numel",
       &Z::max_reuse_distance_numel,
       Kind::kCount,
       {"max_reuse_distance"},
       kNo,
       true,
       "trace look-ahead that keeps a parameter"},
      {"stage3_param_persistence_threshold",
       "param_persistence_threshold_numel",
       &Z::param_persistence_threshold_numel,
       Kind::kCount,
       {"param_persistence_threshold"},
       AutoRule::kTenHidden,
       true,
       "parameters this small stay gathered"},
      {"stage3_model_persistence_threshold",
       "model_persistence_threshold_numel",
       &Z::model_persistence_threshold_numel,
       Kind::kCount,
       {"model_persistence_threshold"},
       kNo,
       true,
       "cap on total persistent elements (default sys.maxsize)"},
      {"stage3_module_granularity_threshold",
       "module_granularity_threshold",
       &Z::module_granularity_threshold,
       Kind::kInt,
       {"module_granularity_threshold"},
       kNo,
       true,
       "> 0 turns fine-grained modules into ZeRO-3 leaf modules"},
      {"stage3_use_all_reduce_for_fetch_params",
       "use_all_reduce_for_fetch_params",
       &Z::use_all_reduce_for_fetch_params,
       Kind::kBool,
       {"use_all_reduce_for_fetch_params"},
       kNo,
       true,
       "fetch with all-reduce of a zero-filled buffer"},
      {"stage3_allgather_sequential",
       "allgather_sequential",
       &Z::allgather_sequential,
       Kind::kBool,
       {"allgather_sequential"},
       kNo,
       true,
       "one all-gather per parameter; the engine forces the prefetch bucket to 1"},
      {"stage3_partition_stream_chunk_size",
       "partition_stream_chunk_numel",
       &Z::partition_stream_chunk_numel,
       Kind::kCount,
       {"partition_stream_chunk_size"},
       kNo,
       false,
       "used only while zero.Init partitions parameters"},
      {"overlap_comm",
       "overlap_comm",
       &Z::overlap_comm,
       Kind::kOptionalBool,
       {},
       kNo,
       true,
       "DeepSpeed default None means true for stage 3"},
      {"reduce_bucket_size",
       "reduce_bucket_numel",
       &Z::reduce_bucket_numel,
       Kind::kCount,
       {},
       AutoRule::kHiddenSquared,
       true,
       "gradient bucket (elements)"},
      {"allgather_bucket_size",
       "allgather_bucket_numel",
       &Z::allgather_bucket_numel,
       Kind::kCount,
       {},
       kNo,
       false,
       "not used by stage-3 parameter fetch (DeepSpeed #6420)"},
      {"contiguous_gradients",
       "contiguous_gradients",
       &Z::contiguous_gradients,
       Kind::kBool,
       {},
       kNo,
       true,
       "gradients copied into one IPG bucket"},
      {"reduce_scatter", "reduce_scatter", &Z::reduce_scatter, Kind::kBool, {}, kNo, true, ""},
      {"sub_group_size",
       "sub_group_numel",
       &Z::sub_group_numel,
       Kind::kCount,
       {},
       kNo,
       false,
       "optimizer-step tiling only"},
      {"zero_hpz_partition_size",
       "zero_hpz_partition_size",
       &Z::zero_hpz_partition_size,
       Kind::kInt,
       {},
       kNo,
       true,
       "ZeRO++ hpZ: refused above 1 (not modelled)"},
      {"zero_quantized_weights",
       "zero_quantized_weights",
       &Z::zero_quantized_weights,
       Kind::kBool,
       {},
       kNo,
       true,
       "ZeRO++ qwZ: refused when true (not modelled)"},
      {"zero_quantized_nontrainable_weights",
       "zero_quantized_nontrainable_weights",
       &Z::zero_quantized_nontrainable_weights,
       Kind::kBool,
       {},
       kNo,
       true,
       "ZeRO++: refused when true (not modelled)"},
      {"zero_quantized_gradients",
       "zero_quantized_gradients",
       &Z::zero_quantized_gradients,
       Kind::kBool,
       {},
       kNo,
       true,
       "ZeRO++ qgZ: refused when true (not modelled)"},
      {"stage3_adaptive_prefetch_bucket_size",
       "adaptive_prefetch_bucket",
       &Z::adaptive_prefetch_bucket,
       Kind::kBool,
       {"adaptive_prefetch_bucket_size"},
       kNo,
       true,
       "PR #8431: selects the ema_threshold controller"},
      {"stage3_adaptive_prefetch_min_size",
       "adaptive_prefetch_min_numel",
       &Z::adaptive_prefetch_min_numel,
       Kind::kCount,
       {"adaptive_prefetch_min_size"},
       kNo,
       true,
       "PR #8431 lower clamp"},
      {"stage3_adaptive_prefetch_max_size",
       "adaptive_prefetch_max_numel",
       &Z::adaptive_prefetch_max_numel,
       Kind::kCount,
       {"adaptive_prefetch_max_size"},
       kNo,
       true,
       "PR #8431 upper clamp"},
      {"log_trace_cache_warnings",
       "log_trace_cache_warnings",
       &Z::log_trace_cache_warnings,
       Kind::kBool,
       {},
       kNo,
       false,
       "logging only"},
      {"stage3_gather_16bit_weights_on_model_save",
       "gather_16bit_weights_on_model_save",
       &Z::gather_16bit_weights_on_model_save,
       Kind::kBool,
       {"gather_16bit_weights_on_model_save", "stage3_gather_fp16_weights_on_model_save"},
       kNo,
       false,
       "checkpoint saving only"},
      {"round_robin_gradients",
       "round_robin_gradients",
       &Z::round_robin_gradients,
       Kind::kBool,
       {},
       kNo,
       false,
       "stage 1/2 only"},
      {"ignore_unused_parameters",
       "ignore_unused_parameters",
       &Z::ignore_unused_parameters,
       Kind::kBool,
       {},
       kNo,
       false,
       "stage 2 only"},
      {"memory_efficient_linear",
       "memory_efficient_linear",
       &Z::memory_efficient_linear,
       Kind::kBool,
       {},
       kNo,
       false,
       "autograd detail of linear layers"},
  };
  return table;
}

const std::vector<KeySpec<OffloadParamConfig>>& offload_param_table() {
  using P = OffloadParamConfig;
  constexpr auto kNo = AutoRule::kNone;
  static const std::vector<KeySpec<P>> table{
      {"device", "device", &P::device, Kind::kDevice, {}, kNo, true, "none | cpu | nvme"},
      {"nvme_path", "nvme_path", &P::nvme_path, Kind::kPath, {}, kNo, true, ""},
      {"buffer_count", "buffer_count", &P::buffer_count, Kind::kInt, {}, kNo, true, ""},
      {"buffer_size", "buffer_numel", &P::buffer_numel, Kind::kCount, {}, kNo, true, ""},
      {"max_in_cpu", "max_in_cpu_numel", &P::max_in_cpu_numel, Kind::kCount, {}, kNo, true, ""},
      {"pin_memory", "pin_memory", &P::pin_memory, Kind::kBool, {}, kNo, true, ""},
  };
  return table;
}

const std::vector<KeySpec<OffloadOptimizerConfig>>& offload_optimizer_table() {
  using O = OffloadOptimizerConfig;
  constexpr auto kNo = AutoRule::kNone;
  static const std::vector<KeySpec<O>> table{
      {"device", "device", &O::device, Kind::kDevice, {}, kNo, true, "none | cpu | nvme"},
      {"nvme_path", "nvme_path", &O::nvme_path, Kind::kPath, {}, kNo, true, ""},
      {"buffer_count", "buffer_count", &O::buffer_count, Kind::kInt, {}, kNo, true, ""},
      {"pin_memory", "pin_memory", &O::pin_memory, Kind::kBool, {}, kNo, true, ""},
      {"pipeline_read", "pipeline_read", &O::pipeline_read, Kind::kBool, {}, kNo, true, ""},
      {"pipeline_write", "pipeline_write", &O::pipeline_write, Kind::kBool, {}, kNo, true, ""},
      {"fast_init", "fast_init", &O::fast_init, Kind::kBool, {}, kNo, false, "initialisation only"},
      {"ratio",
       "ratio",
       &O::ratio,
       Kind::kFraction,
       {},
       kNo,
       true,
       "share of optimizer states offloaded"},
      {"super_offload", "super_offload", &O::super_offload, Kind::kBool, {}, kNo, true, ""},
      {"convert_grad_on_cpu",
       "convert_grad_on_cpu",
       &O::convert_grad_on_cpu,
       Kind::kBool,
       {},
       kNo,
       true,
       ""},
      {"cpuadam_cores_perc",
       "cpuadam_cores_perc",
       &O::cpuadam_cores_perc,
       Kind::kFraction,
       {},
       kNo,
       true,
       ""},
  };
  return table;
}

// Real zero_optimization keys without a ZeroConfig field (the offload sections and deprecated
// offload switches are handled separately).
struct PlainKey {
  std::string_view name;
  std::string_view note;
};
const std::vector<PlainKey>& zero_keys_without_field() {
  static const std::vector<PlainKey> keys{
      {"load_from_fp32_weights", "checkpoint loading only"},
      {"elastic_checkpoint", "checkpoint loading only"},
      {"use_multi_rank_bucket_allreduce", "stage 1/2 only"},
      {"allgather_partitions", "stage 1/2 only"},
      {"cpu_offload_use_pin_memory", "deprecated; use offload_*.pin_memory"},
      {"legacy_stage1", "stage 1 only"},
      {"zenflow", "ZenFlow optimizer-step overlap is not modelled"},
      {"zeropp_loco_param", "LoCo error feedback is not modelled"},
      {"mics_shard_size", "MiCS is not modelled"},
      {"mics_hierarchical_params_gather", "MiCS is not modelled"},
      {"pipeline_loading_checkpoint", "checkpoint loading only"},
      {"override_module_apply", "model construction only"},
      {"enable_sanity_checks", "debugging only"},
      {"save_muon_momentum_buffer_in_memory", "NVMe optimizer swapping only"},
      {"leaf_module", "leaf modules come from the model description"},
  };
  return keys;
}

std::int64_t resolve_auto(AutoRule rule, std::int64_t h) {
  switch (rule) {
    case AutoRule::kHiddenSquared:
      return h * h;
    // HF: int(0.9 * hidden_size * hidden_size), evaluated left to right in double.
    case AutoRule::kNineTenthsHiddenSquared:
      return static_cast<std::int64_t>(0.9 * static_cast<double>(h) * static_cast<double>(h));
    case AutoRule::kTenHidden:
      return 10 * h;
    case AutoRule::kNone:
      break;
  }
  return 0;
}

struct Origin {
  InputLocation where;
  std::string key;
  std::size_t sequence = 0;  // later settings have larger numbers
};

struct ReadContext {
  const TrainingFacts& facts;
  std::vector<std::string>* notes;
  std::string note_label;                  // "ds_config key" or "scenario key"
  std::map<std::string, Origin>* origins;  // canonical dotted name -> where it was last set
  std::size_t* sequence;                   // counts settings across layers

  void set_origin(const std::string& name, const YamlSection& sec, std::string_view key) const {
    (*origins)[name] = {sec.location(key), sec.dotted(key), ++*sequence};
  }
};

// DeepSpeed's deprecated Optional[bool] switches: missing or null read as false.
bool optional_switch(const YamlSection& sec, std::string_view key) {
  const YAML::Node node = sec.raw(key);
  if (!node || node.IsNull()) return false;
  return sec.require_bool(key);
}

void add_note(std::vector<std::string>* notes, std::string text) {
  if (notes) notes->push_back(std::move(text));
}

std::string no_effect_note(const std::string& label, const std::string& key, std::string_view why) {
  std::string text = label + " " + key + " has no effect on ZeRO-3 fetch timing";
  if (!why.empty()) text += " (" + std::string(why) + ")";
  return text;
}

template <class T>
void read_value(T& target, const KeySpec<T>& spec, const YamlSection& sec, std::string_view key,
                const ReadContext& ctx) {
  std::visit(
      [&](auto member) {
        using V = std::remove_reference_t<decltype(target.*member)>;
        V& out = target.*member;
        if constexpr (std::is_same_v<V, std::int64_t>) {
          const YAML::Node node = sec.raw(key);
          if (spec.auto_rule != AutoRule::kNone && node.IsScalar() && node.Scalar() == "auto") {
            if (ctx.facts.hidden_size <= 0) {
              sec.fail(key, "is \"auto\" but the model's hidden size is not known",
                       "a whole number of elements");
            }
            out = resolve_auto(spec.auto_rule, ctx.facts.hidden_size);
          } else if (spec.kind == Kind::kStage) {
            out = sec.require_int(key, 0, 3);
            if (out != 3) {
              sec.fail(key, "is " + std::to_string(out) + "; PrefetchLab models ZeRO stage 3 only",
                       "3");
            }
          } else if (spec.kind == Kind::kInt) {
            out = sec.require_int(key, 0, std::numeric_limits<std::int64_t>::max());
          } else {
            // Keys with an "auto" rule say so when the value is neither a count nor "auto".
            if (spec.auto_rule != AutoRule::kNone && node.IsScalar() &&
                !parse_count(node.Scalar())) {
              sec.fail(key, "is '" + node.Scalar() + "'",
                       "a whole number of elements >= 0 (e.g. 5e7) or \"auto\"");
            }
            out = sec.require_count(key);
          }
        } else if constexpr (std::is_same_v<V, bool>) {
          const YAML::Node node = sec.raw(key);
          if (spec.kind == Kind::kOptionalBool && node.IsNull()) {
            out = T{}.*member;
          } else {
            out = sec.require_bool(key);
          }
        } else if constexpr (std::is_same_v<V, double>) {
          out = sec.require_double(key, 0.0, 1.0);
        } else if constexpr (std::is_same_v<V, OffloadDevice>) {
          out = sec.require_enum<OffloadDevice>(key, {{"none", OffloadDevice::kNone},
                                                      {"cpu", OffloadDevice::kCpu},
                                                      {"nvme", OffloadDevice::kNvme}});
        } else {
          const YAML::Node node = sec.raw(key);
          out = (!node || node.IsNull()) ? std::string() : sec.require_string(key);
        }
      },
      spec.member);
}

template <class T>
void read_keys(T& target, const std::vector<KeySpec<T>>& table, const YamlSection& sec,
               const std::string& canonical_prefix, const ReadContext& ctx) {
  for (const auto& spec : table) {
    std::string_view used;
    std::vector<std::string_view> names{spec.json_name};
    names.insert(names.end(), spec.aliases.begin(), spec.aliases.end());
    for (const auto name : names) {
      sec.mark_known(name);
      if (!sec.has(name)) continue;
      if (!used.empty()) {
        sec.fail(name, "sets the same DeepSpeed option as '" + std::string(used) + "'",
                 "only one of the two names");
      }
      used = name;
    }
    if (used.empty()) continue;
    read_value(target, spec, sec, used, ctx);
    ctx.set_origin(canonical_prefix + std::string(spec.json_name), sec, used);
    if (!spec.modelled)
      add_note(ctx.notes, no_effect_note(ctx.note_label, sec.dotted(used), spec.note));
  }
}

// One layer (the file's zero_optimization or the inline zero: map) over `config`.
void apply_zero_layer(ZeroConfig& config, const YamlSection& sec, const ReadContext& ctx) {
  read_keys(config, zero_table(), sec, "", ctx);
  for (const auto& key : zero_keys_without_field()) {
    sec.mark_known(key.name);
    if (sec.has(key.name))
      add_note(ctx.notes, no_effect_note(ctx.note_label, sec.dotted(key.name), key.note));
  }
  // Deprecated switches that DeepSpeed maps onto the offload sections.
  if (optional_switch(sec, "cpu_offload")) {
    config.offload_optimizer.device = OffloadDevice::kCpu;
    ctx.set_origin("offload_optimizer.device", sec, "cpu_offload");
    add_note(ctx.notes,
             sec.dotted("cpu_offload") + " is deprecated; read as offload_optimizer.device: cpu");
  }
  if (optional_switch(sec, "cpu_offload_param")) {
    config.offload_param.device = OffloadDevice::kCpu;
    ctx.set_origin("offload_param.device", sec, "cpu_offload_param");
    add_note(ctx.notes,
             sec.dotted("cpu_offload_param") + " is deprecated; read as offload_param.device: cpu");
  }
  // offload_param / offload_optimizer: null means "no offload" (DeepSpeed's None).
  if (sec.has("offload_param")) {
    const YAML::Node node = sec.raw("offload_param");
    if (node.IsNull()) {
      config.offload_param = OffloadParamConfig{};
    } else {
      const YamlSection sub = sec.section("offload_param");
      read_keys(config.offload_param, offload_param_table(), sub, "offload_param.", ctx);
      sub.finish();
    }
  }
  sec.mark_known("offload_param");
  if (sec.has("offload_optimizer")) {
    const YAML::Node node = sec.raw("offload_optimizer");
    if (node.IsNull()) {
      config.offload_optimizer = OffloadOptimizerConfig{};
    } else {
      const YamlSection sub = sec.section("offload_optimizer");
      read_keys(config.offload_optimizer, offload_optimizer_table(), sub, "offload_optimizer.",
                ctx);
      sub.finish();
    }
  }
  sec.mark_known("offload_optimizer");
}

[[noreturn]] void fail_at(const std::map<std::string, Origin>& origins, const std::string& name,
                          const InputLocation& fallback, const std::string& problem,
                          const std::string& expected) {
  const auto it = origins.find(name);
  if (it != origins.end()) throw InputError(it->second.where, it->second.key, problem, expected);
  throw InputError(fallback, name, problem, expected);
}

void validate(const ZeroConfig& config, const std::map<std::string, Origin>& origins,
              const InputLocation& fallback, std::vector<std::string>* notes) {
  if (config.adaptive_prefetch_min_numel > config.adaptive_prefetch_max_numel) {
    // Blame the one of the two that was set last (the inline key over the file's).
    const auto min_it = origins.find("stage3_adaptive_prefetch_min_size");
    const auto max_it = origins.find("stage3_adaptive_prefetch_max_size");
    const bool blame_min =
        max_it == origins.end() ||
        (min_it != origins.end() && min_it->second.sequence > max_it->second.sequence);
    const std::string which =
        blame_min ? "stage3_adaptive_prefetch_min_size" : "stage3_adaptive_prefetch_max_size";
    fail_at(origins, which, fallback,
            "makes stage3_adaptive_prefetch_min_size (" +
                std::to_string(config.adaptive_prefetch_min_numel) +
                ") larger than stage3_adaptive_prefetch_max_size (" +
                std::to_string(config.adaptive_prefetch_max_numel) + ")",
            "min_size <= max_size");
  }
  if (config.offload_param.device == OffloadDevice::kNvme &&
      config.offload_param.nvme_path.empty()) {
    fail_at(origins, "offload_param.device", fallback,
            "is nvme but offload_param.nvme_path is not set", "an nvme_path with device nvme");
  }
  if (config.offload_optimizer.device == OffloadDevice::kNvme &&
      config.offload_optimizer.nvme_path.empty()) {
    fail_at(origins, "offload_optimizer.device", fallback,
            "is nvme but offload_optimizer.nvme_path is not set", "an nvme_path with device nvme");
  }
  if (config.allgather_sequential) {
    add_note(notes,
             "stage3_allgather_sequential is true: DeepSpeed's engine sets the prefetch bucket "
             "to 1 element (stage3_prefetch_bucket_size " +
                 std::to_string(config.prefetch_bucket_numel) + " is not used)");
  }
}

template <class T>
nlohmann::json table_to_json(const T& value, const std::vector<KeySpec<T>>& table) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& spec : table) {
    std::visit(
        [&](auto member) {
          using V = std::remove_cv_t<std::remove_reference_t<decltype(value.*member)>>;
          const V& field = value.*member;
          if constexpr (std::is_same_v<V, OffloadDevice>) {
            out[std::string(spec.json_name)] = offload_device_name(field);
          } else if constexpr (std::is_same_v<V, std::string>) {
            if (field.empty()) {
              out[std::string(spec.json_name)] = nullptr;
            } else {
              out[std::string(spec.json_name)] = field;
            }
          } else {
            out[std::string(spec.json_name)] = field;
          }
        },
        spec.member);
  }
  return out;
}

template <class T>
void append_docs(std::vector<ZeroKeyDoc>& docs, const std::vector<KeySpec<T>>& table,
                 const std::string& prefix) {
  const nlohmann::json defaults = table_to_json(T{}, table);
  for (const auto& spec : table) {
    docs.push_back({prefix + std::string(spec.json_name), std::string(spec.field_name),
                    defaults.at(std::string(spec.json_name)), spec.modelled,
                    std::string(spec.note)});
  }
}

}  // namespace

const char* offload_device_name(OffloadDevice device) {
  switch (device) {
    case OffloadDevice::kNone:
      return "none";
    case OffloadDevice::kCpu:
      return "cpu";
    case OffloadDevice::kNvme:
      return "nvme";
  }
  return "none";
}

ZeroConfig load_zero_config(const YamlSection& zero_section, const TrainingFacts& facts,
                            const std::filesystem::path& scenario_dir,
                            std::vector<std::string>* notes) {
  ZeroConfig config;
  std::map<std::string, Origin> origins;
  std::size_t sequence = 0;
  bool file_sets_stage = false;
  bool has_file = false;
  if (zero_section.has("ds_config")) {
    has_file = true;
    const std::string name = zero_section.require_string("ds_config");
    std::filesystem::path file = name;
    if (file.is_relative()) file = scenario_dir / file;
    const YamlSection root = load_ds_config_json(file, zero_section.location("ds_config"),
                                                 zero_section.dotted("ds_config"));
    check_ds_config_top_level(root, facts, notes);
    if (!root.has("zero_optimization")) {
      throw InputError(root.location(), "zero_optimization",
                       "is missing; without it DeepSpeed runs ZeRO stage 0",
                       "a zero_optimization section with \"stage\": 3");
    }
    const YamlSection zero = root.section("zero_optimization");
    file_sets_stage = zero.has("stage");
    apply_zero_layer(config, zero, {facts, notes, "ds_config key", &origins, &sequence});
    zero.finish();
    root.finish();
  }
  zero_section.mark_known("ds_config");
  if (has_file && !file_sets_stage && !zero_section.has("stage")) {
    throw InputError(zero_section.location("ds_config"), zero_section.dotted("ds_config"),
                     "names a ds_config whose zero_optimization has no \"stage\" (DeepSpeed's "
                     "default is 0)",
                     "\"stage\": 3 in zero_optimization, or stage: 3 in the scenario");
  }
  apply_zero_layer(config, zero_section, {facts, notes, "scenario key", &origins, &sequence});
  zero_section.finish();
  validate(config, origins, zero_section.location(), notes);
  return config;
}

nlohmann::json zero_config_to_json(const ZeroConfig& config) {
  nlohmann::json out = table_to_json(config, zero_table());
  out["offload_param"] = table_to_json(config.offload_param, offload_param_table());
  out["offload_optimizer"] = table_to_json(config.offload_optimizer, offload_optimizer_table());
  return out;
}

std::vector<ZeroKeyDoc> zero_config_key_docs() {
  std::vector<ZeroKeyDoc> docs;
  append_docs(docs, zero_table(), "");
  append_docs(docs, offload_param_table(), "offload_param.");
  append_docs(docs, offload_optimizer_table(), "offload_optimizer.");
  for (const auto& key : zero_keys_without_field()) {
    docs.push_back({std::string(key.name), "", nullptr, false, std::string(key.note)});
  }
  docs.push_back({"cpu_offload", "", nullptr, true, "deprecated: offload_optimizer.device cpu"});
  docs.push_back({"cpu_offload_param", "", nullptr, true, "deprecated: offload_param.device cpu"});
  return docs;
}

}  // namespace prefetchlab::core
