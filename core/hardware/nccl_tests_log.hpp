#pragma once
// Reads the text nccl-tests' all_gather_perf, reduce_scatter_perf and all_reduce_perf print
// (nccl-tests src/util.cu, writeResultHeader): result rows
//   size count type redop root  time algbw busbw #wrong  time algbw busbw #wrong
// (out-of-place, then in-place; older versions have no root column), plus what the header tells
// about the run. Lines may carry a launcher prefix ("0: " from srun -l, "[1,0]<stdout>:" from
// Open MPI); NCCL INFO lines and other text are skipped. A line that starts like a result row
// but does not parse is an InputError naming the file and line, and so is a log that is not one
// clean run: a row with #wrong other than 0 or N/A (the collective returned wrong data, so its
// time measures nothing), two different <op>_perf names, a second run header ("# nThread") or
// result rows after the footer, and sizes that repeat or fall (two runs pasted together, or one
// run over several types or ops: -d all / -o all).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace prefetchlab::core {

enum class NcclTestsOp { kAllGather, kReduceScatter, kAllReduce };
// "all_gather", "reduce_scatter", "all_reduce" (the binaries are <name>_perf).
const char* nccl_tests_op_name(NcclTestsOp op);
std::optional<NcclTestsOp> parse_nccl_tests_op(std::string_view name);

struct NcclTestsRow {
  int line = 0;  // 1-based line in the file
  std::int64_t bytes = 0;
  std::int64_t count = 0;
  std::string type;
  std::string redop;
  double time_us = 0;  // out-of-place
  double algbw_gb_per_s = 0;
  double busbw_gb_per_s = 0;
  std::optional<double> in_place_time_us;
  std::optional<double> in_place_busbw_gb_per_s;
};

struct NcclTestsLog {
  std::string file;
  std::optional<NcclTestsOp> op;    // from "<op>_perf" in the text (command line or banner)
  std::optional<int> ranks;         // from "#  Rank" lines, else nThread x nGpus, else sizes
  std::optional<int> nodes;         // distinct host names of the "#  Rank ... on HOST" lines
  std::vector<NcclTestsRow> rows;   // in file order
  std::optional<double> avg_bus_bandwidth_gb_per_s;  // the footer
};

// Removes one launcher prefix: "12: ", "[1,0]<stdout>:", "[1,0]<stderr>: ".
std::string_view strip_launcher_prefix(std::string_view line);

// Bytes per element of an nccl-tests type name (int8 .. double, bfloat16, half, fp8); nullopt
// for an unknown name.
std::optional<int> nccl_tests_type_bytes(std::string_view type);

NcclTestsLog parse_nccl_tests_log(std::string_view text, const std::string& file);
// Reads and parses; a missing file or one without result rows is an InputError.
NcclTestsLog read_nccl_tests_log(const std::filesystem::path& file);

}  // namespace prefetchlab::core
