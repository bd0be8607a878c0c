#pragma once
// Named, seeded random streams: every stream derives from the scenario seed and a name
// ("compute/rank3"), so adding a stream never shifts another and a run is a pure function of
// (scenario, seed). The generator (xoshiro256**) and the distributions are written out here,
// not taken from <random>, whose distributions differ between standard libraries — outputs must
// be byte-identical everywhere.
#include <cstdint>
#include <string_view>

namespace prefetchlab::core {

class RandomStream {
 public:
  RandomStream(std::uint64_t seed, std::string_view name);

  std::uint64_t next_u64();
  // Uniform in [0, 1), 53 random bits.
  double uniform();
  // Standard normal (Box-Muller; the second value is kept for the next call).
  double normal();

 private:
  std::uint64_t state_[4];
  bool has_spare_ = false;
  double spare_ = 0;
};

}  // namespace prefetchlab::core
