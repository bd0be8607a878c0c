// Scenario YAML and a --set override: the document, then (after a NUL byte) one `key=value`
// assignment as given to `run --set`. Bundled models and hardware come from the source tree.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/scenario/scenario.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace pc = prefetchlab::core;
namespace pf = prefetchlab::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const pc::BundledData bundled = pc::BundledData::from_root(PREFETCHLAB_SOURCE_DIR);
  const auto [yaml, assignment] = pf::split_at_nul(data, size);
  const auto file = pf::write_input("scenario.yaml", yaml);
  std::vector<std::string> overrides;
  if (!assignment.empty()) overrides.emplace_back(assignment);
  pf::expect_input_error_or_success([&] { pc::load_scenario(file, overrides, bundled); });
  return 0;
}
