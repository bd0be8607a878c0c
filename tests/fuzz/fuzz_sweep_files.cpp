// A sweep's grid file and results.csv (what `sweep --resume` and `merge` read back): the grid,
// then (after a NUL byte) a results.csv checked against it.
#include <cstddef>
#include <cstdint>

#include "apps/search/sweep_grid.hpp"
#include "apps/search/sweep_results.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace pc = prefetchlab::core;
namespace pf = prefetchlab::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto [grid_text, results_text] = pf::split_at_nul(data, size);
  const auto grid_file = pf::write_input("grid.yaml", grid_text);
  const auto results_file = pf::write_input("results.csv", results_text);
  pf::expect_input_error_or_success([&] {
    const pc::SweepGrid grid = pc::SweepGrid::load(grid_file);
    // Every point's values as the sweep would apply them, at most a few (a grid's size is its
    // product, not its file's).
    for (std::size_t p = 0; p < grid.point_count() && p < 64; ++p) grid.overrides_at(p);
    grid.identity();
    const pc::SweepRows rows = pc::read_sweep_rows(results_file);
    pc::check_rows_match_grid(rows, grid, results_file);
  });
  return 0;
}
