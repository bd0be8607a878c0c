#include "describe_command.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "command_context.hpp"
#include "describe_costs.hpp"
#include "core/input/closest_match.hpp"
#include "core/model/hf_config.hpp"
#include "core/model/model_config.hpp"
#include "core/zero/persistence.hpp"
#include "core/scenario/scenario.hpp"
#include "core/input/yaml_section.hpp"

namespace prefetchlab::apps {
namespace {

struct DescribeOptions {
  std::string target;
  std::optional<std::int64_t> seq_len;
  std::optional<std::int64_t> micro_batch;
  std::vector<std::string> overrides;
  bool costs = false;
  std::string hardware;  // --hardware, for --costs on a bare model
};

std::string with_commas(std::int64_t value) {
  std::string digits = std::to_string(value);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<std::size_t>(i), ",");
  return digits;
}

std::string flops_text(std::int64_t flops) {
  if (flops == 0) return "0";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3e", static_cast<double>(flops));
  return buffer;
}

// A module's name relative to its parent ("layers.0" under "model"); "(root)" for the root.
std::string relative_name(const core::ModelSpec& model, const core::ModuleSpec& module) {
  if (module.parent < 0) return "(root)";
  const std::string& parent = model.modules[static_cast<std::size_t>(module.parent)].name;
  return parent.empty() ? module.name : module.name.substr(parent.size() + 1);
}

// What describe prints, whatever the target was: a model plus the thresholds and batch shape.
struct DescribeInput {
  core::ModelSpec model;
  std::int64_t max_positions = 0;
  core::ZeroConfig zero;
  std::int64_t micro_batch = 1;
  std::int64_t seq_len = 0;
  // A scenario's training.seq_len when it is a distribution: FLOPs are shown at its longest
  // length (seq_len), with the distribution named beside it.
  std::string seq_len_distribution;
  std::string origin;
  std::vector<std::string> notes;
  // For --costs: the GPU and calibration the kernels are priced on.
  std::optional<core::HardwareProfile> hardware;
  core::CalibrationConstants calibration;
  core::DType dtype = core::DType::kBF16;
  core::AttentionImpl attention = core::AttentionImpl::kSdpa;
  // A scenario's whole configuration (for ZeRO-3's own work per step in --costs).
  std::optional<core::Scenario> scenario;
};

DescribeInput resolve_target(const DescribeOptions& options) {
  const core::BundledData bundled = bundled_data();
  DescribeInput input;
  std::filesystem::path model_path;
  if (core::is_hf_config_reference(options.target)) {
    // A Hugging Face config.json, or a folder holding one.
    if (!options.overrides.empty()) {
      throw core::InputError({"--set", 0}, "", "applies to scenarios only",
                             "describe SCENARIO.yaml --set key=value");
    }
    input.model = core::load_hf_config(options.target, core::DType::kBF16, core::AttentionImpl::kSdpa,
                                       &input.notes);
    input.max_positions = input.model.max_positions;
    input.seq_len = input.max_positions;
    input.origin = "Hugging Face config " + core::hf_config_file(options.target).string() +
                   " (DeepSpeed default thresholds)";
  } else if (std::filesystem::is_regular_file(options.target)) {
    const YAML::Node root = core::parse_yaml_file(options.target);
    if (!(root.IsMap() && root["architecture"])) {  // not a model file: read it as a scenario
      const core::Scenario scenario = core::load_scenario(options.target, options.overrides, bundled);
      input.model = scenario.model;
      input.max_positions = scenario.model.max_positions;
      input.zero = scenario.zero;
      input.micro_batch = scenario.training.micro_batch;
      input.seq_len = scenario.training.seq_len;
      if (scenario.training.seq_len_distribution.kind != core::SeqLenKind::kFixed) {
        input.seq_len_distribution = scenario.training.seq_len_distribution.text();
      }
      input.origin = "scenario " + options.target;
      input.notes = scenario.notes;
      input.hardware = scenario.cluster.hardware;
      input.calibration = scenario.cluster.calibration;
      input.dtype = scenario.training.dtype;
      input.attention = scenario.training.attention;
      input.scenario = scenario;
    } else {
      model_path = options.target;
    }
  } else if (options.target.find('/') == std::string::npos && !options.target.ends_with(".yaml")) {
    const auto names = core::bundled_model_names(bundled.models_dir);
    if (std::find(names.begin(), names.end(), options.target) == names.end()) {
      throw core::InputError({"<command line>", 0}, "describe",
                             "'" + options.target + "' is neither a file nor a bundled model",
                             "a scenario or model YAML path, or a bundled model name",
                             core::closest_match(options.target, names));
    }
    model_path = bundled.models_dir / (options.target + ".yaml");
  } else {
    throw core::InputError({options.target, 0}, "", "file not found",
                           "a scenario or model YAML path, or a bundled model name");
  }
  if (!model_path.empty()) {
    if (!options.overrides.empty()) {
      throw core::InputError({"--set", 0}, "", "applies to scenarios only",
                             "describe SCENARIO.yaml --set key=value");
    }
    input.model = core::load_model_file(model_path, core::DType::kBF16);
    input.max_positions = input.model.max_positions;
    input.seq_len = input.max_positions;  // a bare model: describe it at its full context
    input.origin = "model " + model_path.string() + " (DeepSpeed default thresholds)";
  }
  if (!options.hardware.empty()) {
    const bool named = options.hardware.find('/') == std::string::npos && !options.hardware.ends_with(".yaml");
    const std::filesystem::path file = named ? bundled.hardware_dir / (options.hardware + ".yaml")
                                             : std::filesystem::path(options.hardware);
    if (!std::filesystem::is_regular_file(file)) {
      throw core::InputError({"--hardware", 0}, "hardware", "'" + options.hardware + "' is not a profile",
                             "a bundled hardware profile name (hardware/*.yaml) or a profile path");
    }
    input.hardware = core::load_hardware_profile(file);
    input.calibration = input.hardware->calibration;
  }
  if (options.costs && !input.hardware) {
    throw core::InputError({"--costs", 0}, "costs", "needs a GPU to price kernels on",
                           "a scenario, or --hardware NAME with a model");
  }
  if (options.micro_batch) input.micro_batch = *options.micro_batch;
  if (options.seq_len) {
    if (*options.seq_len > input.max_positions) {
      throw core::InputError({"--seq-len", 0}, "seq_len",
                             std::to_string(*options.seq_len) + " exceeds the model's positions",
                             "at most " + std::to_string(input.max_positions));
    }
    input.seq_len = *options.seq_len;
    input.seq_len_distribution.clear();
  }
  return input;
}

int describe(const DescribeOptions& options) {
  const DescribeInput input = resolve_target(options);
  const core::ModelSpec& model = input.model;
  const std::vector<bool> persistent =
      core::persistent_params(model, input.zero.param_persistence_threshold_numel,
                              input.zero.model_persistence_threshold_numel);
  std::cout << model.name << " from " << input.origin << "\n";
  for (const auto& note : input.notes) std::cout << "note: " << note << "\n";
  std::cout << "micro_batch " << input.micro_batch << ", seq_len " << input.seq_len;
  if (!input.seq_len_distribution.empty()) {
    std::cout << " (the longest of " << input.seq_len_distribution << "; FLOPs at it)";
  }
  std::cout << ", persistence threshold " << with_commas(input.zero.param_persistence_threshold_numel)
            << " elements\n\n";
  int name_width = 6;
  for (const auto& module : model.modules) {
    name_width = std::max(name_width, 2 * module.depth + static_cast<int>(relative_name(model, module).size()));
  }
  std::printf("%-*s %-28s %15s %10s %12s\n", name_width, "module", "class", "direct numel",
              "persistent", "fwd FLOPs");
  std::int64_t persistent_numel = 0;
  for (std::size_t p = 0; p < model.params.size(); ++p) {
    if (persistent[p]) persistent_numel += model.params[p].numel;
  }
  for (std::size_t m = 0; m < model.modules.size(); ++m) {
    const core::ModuleSpec& module = model.modules[m];
    std::string label(static_cast<std::size_t>(2 * module.depth), ' ');
    label += relative_name(model, module);
    // A module's own parameters are persistent when all of them are; "-" when it has none.
    std::string persistent_text = "-";
    if (!module.param_ids.empty()) {
      bool all = true;
      for (int id : module.param_ids) all = all && persistent[static_cast<std::size_t>(id)];
      persistent_text = all ? "yes" : "no";
    }
    std::printf("%-*s %-28s %15s %10s %12s\n", name_width, label.c_str(), module.class_name.c_str(),
                with_commas(model.direct_numel(static_cast<int>(m))).c_str(),
                persistent_text.c_str(),
                flops_text(module.forward_flops.at(input.micro_batch, input.seq_len)).c_str());
  }
  std::cout << "\nmodules: " << model.modules.size() << ", parameters: " << model.params.size()
            << "\ntotal parameters: " << with_commas(model.total_numel())
            << " (tied weights counted once)\npersistent parameters: " << with_commas(persistent_numel)
            << "\nforward FLOPs per micro-batch: "
            << flops_text(model.forward_flops(input.micro_batch, input.seq_len)) << "\n";
  if (options.costs) {
    CostsInput costs{&model, &*input.hardware, input.calibration, input.dtype, input.attention,
                     input.micro_batch, input.seq_len, input.scenario ? &*input.scenario : nullptr};
    print_compute_costs(costs, std::cout);
  }
  return kExitOk;
}

}  // namespace

CLI::App* add_describe_command(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<DescribeOptions>();
  CLI::App* command = app.add_subcommand(
      "describe", "Print the module tree ZeRO-3 sees (execution order) and the parameter count");
  command->add_option("target", options->target, "scenario YAML, model YAML, or bundled model name")
      ->required();
  command->add_option("--seq-len", options->seq_len, "tokens per sequence for FLOPs")
      ->check(CLI::PositiveNumber);
  command->add_option("--micro-batch", options->micro_batch, "sequences per micro-batch for FLOPs")
      ->check(CLI::PositiveNumber);
  command->add_option("--set", options->overrides, "override a scenario key: key.path=value");
  command->add_flag("--costs", options->costs,
                    "also print where compute time goes: one layer's kernels, forward and backward, and totals by kind");
  command->add_option("--hardware", options->hardware, "GPU profile to price --costs on (bundled name or path)");
  command->callback([options, exit_code] { *exit_code = run_guarded([&] { return describe(*options); }); });
  return command;
}

}  // namespace prefetchlab::apps
