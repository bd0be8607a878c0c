// Allocator sequences (`allocator-replay SEQUENCE.csv`): read, then replayed through the caching
// allocator on an 80 GiB device as the command does.
#include <cstddef>
#include <cstdint>

#include "core/memory/allocator_sequence.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace pc = prefetchlab::core;
namespace pf = prefetchlab::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = pf::write_input("sequence.csv", std::string_view(reinterpret_cast<const char*>(data), size));
  pf::expect_input_error_or_success([&] {
    const auto steps = pc::load_allocator_sequence(file);
    pc::replay_allocator_sequence(steps, pc::AllocatorOptions{}, std::uint64_t{80} << 30);
  });
  return 0;
}
