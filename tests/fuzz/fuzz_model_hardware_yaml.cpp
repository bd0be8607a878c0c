// Model and hardware files: the first byte picks the reader ('h' a hardware profile, 'j' a
// Hugging Face config.json, anything else a model architecture YAML), the rest is the file.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/hardware/hardware_profile.hpp"
#include "core/model/hf_config.hpp"
#include "core/model/model_config.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace pc = prefetchlab::core;
namespace pf = prefetchlab::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] == 'j') {
    const auto file = pf::write_input("config.json", text);
    pf::expect_input_error_or_success([&] { pc::load_hf_config(file, pc::DType::kBF16); });
  } else if (data[0] == 'h') {
    const auto file = pf::write_input("hardware.yaml", text);
    pf::expect_input_error_or_success([&] { pc::load_hardware_profile(file); });
  } else {
    const auto file = pf::write_input("model.yaml", text);
    const pc::DType dtype = (data[0] & 1) ? pc::DType::kBF16 : pc::DType::kFP32;
    pf::expect_input_error_or_success([&] { pc::load_model_file(file, dtype); });
  }
  return 0;
}
