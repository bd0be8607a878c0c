// DeepSpeed ds_config.json, read the way a scenario reads it (`zero: {ds_config: FILE}`): the
// JSON itself, its top-level keys against the training and its zero_optimization block.
// (No reader of Hugging Face config.json exists; models are YAML, fuzz_model_hardware_yaml.)
#include <cstddef>
#include <cstdint>

#include "core/scenario/scenario.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace pc = prefetchlab::core;
namespace pf = prefetchlab::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const pc::BundledData bundled = pc::BundledData::from_root(PREFETCHLAB_SOURCE_DIR);
  static const auto scenario = pf::write_input(
      "ds_scenario.yaml",
      "model: tiny-llama\ntraining: {micro_batch: 1, seq_len: 32, iterations: 2}\n"
      "cluster: {hardware: h100-sxm-8x, gpus_per_node: 2}\nzero: {ds_config: ds_config.json}\n");
  pf::write_input("ds_config.json", std::string_view(reinterpret_cast<const char*>(data), size));
  pf::expect_input_error_or_success([&] { pc::load_scenario(scenario, {}, bundled); });
  return 0;
}
