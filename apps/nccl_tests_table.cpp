#include "nccl_tests_table.hpp"

#include <cstdio>

namespace prefetchlab::apps {

std::string nccl_tests_time_text(double us) {
  char buf[32];
  if (us >= 10000.0) {
    std::snprintf(buf, sizeof buf, "%7.0f", us);
  } else if (us >= 100.0) {
    std::snprintf(buf, sizeof buf, "%7.1f", us);
  } else {
    std::snprintf(buf, sizeof buf, "%7.2f", us);
  }
  return buf;
}

void print_nccl_tests_table(core::NcclTestsOp op, int ranks, const std::string& type,
                            const std::vector<NcclTestsTableRow>& rows) {
  const double bus_factor = (op == core::NcclTestsOp::kAllReduce ? 2.0 : 1.0) * (ranks - 1) / ranks;
  std::printf("#                                                              out-of-place                       in-place          \n");
  std::printf("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n");
  std::printf("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n");
  const char* redop = op == core::NcclTestsOp::kAllGather ? "none" : "sum";
  double bw_sum = 0;
  for (const NcclTestsTableRow& row : rows) {
    std::printf("%12lld  %12lld  %8s  %6s  %6i", static_cast<long long>(row.bytes),
                static_cast<long long>(row.count), type.c_str(), redop, -1);
    for (const double us : {row.out_of_place_us, row.in_place_us}) {
      const double algbw = us > 0 ? static_cast<double>(row.bytes) / 1e9 / (us * 1e-6) : 0;
      const double busbw = algbw * bus_factor;
      bw_sum += busbw;
      std::printf("  %7s  %6.2f  %6.2f  %5s", nccl_tests_time_text(us).c_str(), algbw, busbw, "N/A");
    }
    std::printf("\n");
  }
  std::printf("# Out of bounds values : 0 OK\n");
  std::printf("# %-20s : %g \n", "Avg bus bandwidth", rows.empty() ? 0.0 : bw_sum / (2.0 * static_cast<double>(rows.size())));
  std::printf("#\n");
}

}  // namespace prefetchlab::apps
