#pragma once
// A machine's measured host cost per torch.distributed call: the CSV that
// bench/host_costs/torch_call_host_costs.py writes (one row per call, size per rank and way of
// timing it). calibrate --from-host-costs turns it into the profile's host_speed.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace prefetchlab::core {

struct HostCallCost {
  std::string call;  // the torch.distributed function: all_gather, all_reduce, ...
  std::int64_t bytes_per_rank = 0;
  std::string way;  // issue, synchronized, profiled, profiled_stack
  double us_per_call = 0;
  int line = 0;  // 1-based line of the row in its file
};

// The rows of `text` (`file` names it in errors). The columns it reads are call,
// bytes_per_rank, way and us_per_call, in any order among others; a missing column, a
// non-number or a time that is not positive and finite is bad input (InputError naming the
// line and column). Rows of calls and ways other than the script's are kept: the caller picks.
std::vector<HostCallCost> parse_host_call_costs(std::string_view text, const std::string& file);
std::vector<HostCallCost> read_host_call_costs(const std::filesystem::path& file);

}  // namespace prefetchlab::core
