// The measurement files `calibrate` reads: nccl-tests logs as `--from-nccl-tests` reads them
// (parsed, then, when the log names its collective and ranks as calibrate requires, its sizes and
// times fitted to a curve), and the same bytes as `--from-host-costs` reads a host-costs CSV.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/hardware/collective_fit.hpp"
#include "core/hardware/host_call_costs.hpp"
#include "core/hardware/nccl_tests_log.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace pc = prefetchlab::core;
namespace pf = prefetchlab::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = pf::write_input("nccl.log", std::string_view(reinterpret_cast<const char*>(data), size));
  pf::expect_input_error_or_success([&] {
    const pc::NcclTestsLog log = pc::read_nccl_tests_log(file);
    if (!log.op || !log.ranks || *log.ranks < 2) return;
    std::vector<pc::FitPoint> points;
    for (const auto& row : log.rows) {
      if (row.time_us > 0) points.push_back({row.bytes, row.time_us});
    }
    if (points.size() < 2) return;
    const double n = *log.ranks;
    pc::fit_collective(points, (*log.op == pc::NcclTestsOp::kAllReduce ? 2.0 : 1.0) * (n - 1) / n, 0.05);
  });
  const auto costs = pf::write_input("costs.csv", std::string_view(reinterpret_cast<const char*>(data), size));
  pf::expect_input_error_or_success([&] { pc::read_host_call_costs(costs); });
  return 0;
}
