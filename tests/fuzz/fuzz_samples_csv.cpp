// samples.csv through `replay`: read for a 2-rank scenario, then every rank's controller steps
// through it. The first byte picks the controller (the replay's memory and time follow it).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/control/controller_replay.hpp"
#include "core/control/samples_reader.hpp"
#include "core/scenario/scenario.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace pc = prefetchlab::core;
namespace pf = prefetchlab::fuzz;

namespace {

const pc::Scenario& scenario(int which) {
  static const pc::BundledData bundled = pc::BundledData::from_root(PREFETCHLAB_SOURCE_DIR);
  static const std::string file = std::string(PREFETCHLAB_SOURCE_DIR) + "/scenarios/tiny-llama-2x-h100.yaml";
  static const pc::Scenario scenarios[] = {
      pc::load_scenario(file, {}, bundled),
      pc::load_scenario(file, {"controller.policy=ema_threshold"}, bundled),
      pc::load_scenario(file, {"controller.policy=pace_search"}, bundled),
  };
  return scenarios[which % 3];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const pc::Scenario& s = scenario(data[0]);
  const auto file = pf::write_input("samples.csv", std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  const int world = static_cast<int>(s.cluster.world_size());
  pf::expect_input_error_or_success([&] {
    const pc::SamplesFile samples = pc::read_samples_csv(file, world);
    pc::replay_controller(s.controller, pc::controller_context(s, 0), world, samples);
  });
  return 0;
}
