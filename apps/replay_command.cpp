#include "replay_command.hpp"

#include <iostream>
#include <memory>
#include <string>

#include "command_context.hpp"
#include "core/control/controller_replay.hpp"
#include "core/metrics/metrics_csv.hpp"
#include "core/control/samples_reader.hpp"
#include "core/scenario/scenario.hpp"

namespace prefetchlab::apps {
namespace {

struct ReplayOptions {
  std::string scenario;
  std::string samples;
  std::string output;
  std::vector<std::string> overrides;
};

int replay(const ReplayOptions& options) {
  const core::Scenario scenario = core::load_scenario(options.scenario, options.overrides, bundled_data());
  const int world = static_cast<int>(scenario.cluster.world_size());
  const core::SamplesFile samples = core::read_samples_csv(options.samples, world);
  const std::vector<core::BucketRecord> buckets =
      core::replay_controller(scenario.controller, core::controller_context(scenario, 0), world, samples);
  if (!options.output.empty()) {
    core::BucketsCsv csv(options.output);
    csv.append(buckets);
    csv.close();
  } else {
    const auto header = core::BucketsCsv::header();
    for (std::size_t i = 0; i < header.size(); ++i) std::cout << (i ? "," : "") << header[i];
    std::cout << "\n";
    for (const auto& b : buckets) std::cout << b.iteration << "," << b.rank << "," << b.bucket_numel << "\n";
  }
  return kExitOk;
}

}  // namespace

CLI::App* add_replay_command(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<ReplayOptions>();
  CLI::App* command =
      app.add_subcommand("replay", "Feed a run's samples.csv through the scenario's controller");
  command->add_option("--scenario", options->scenario, "scenario YAML")->required();
  command->add_option("--samples", options->samples, "samples.csv of a run")->required();
  command->add_option("-o,--output", options->output, "output CSV (default: stdout)");
  command->add_option("--set", options->overrides, "override a scenario key: key.path=value (as given to run)");
  command->callback([options, exit_code] { *exit_code = run_guarded([&] { return replay(*options); }); });
  return command;
}

}  // namespace prefetchlab::apps
