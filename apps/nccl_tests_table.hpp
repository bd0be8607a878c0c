#pragma once
// The result table of nccl-tests (all_gather_perf, reduce_scatter_perf, all_reduce_perf) as
// they print it, for anything PrefetchLab reports per collective size: `collective`'s model
// and `calibrate --backend`'s measurements. core/hardware/nccl_tests_log.hpp reads it back.
#include <cstdint>
#include <string>
#include <vector>

#include "core/hardware/nccl_tests_log.hpp"

namespace prefetchlab::apps {

struct NcclTestsTableRow {
  std::int64_t bytes = 0;  // nccl-tests' size column
  std::int64_t count = 0;  // elements (per rank for all_gather / reduce_scatter)
  double out_of_place_us = 0;
  double in_place_us = 0;
};

// nccl-tests' time column: %7.0f from 10 ms, %7.1f from 100 us, else %7.2f.
std::string nccl_tests_time_text(double us);

// The column header, one line per row (algbw = size / time, busbw = algbw x bus factor of the
// op over `ranks`), the out-of-bounds line and the average bus bandwidth footer, on stdout.
void print_nccl_tests_table(core::NcclTestsOp op, int ranks, const std::string& type,
                            const std::vector<NcclTestsTableRow>& rows);

}  // namespace prefetchlab::apps
