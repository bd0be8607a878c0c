#include "core/hardware/nccl_tests_log.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "core/input/input_error.hpp"
#include "core/input/input_limits.hpp"

namespace prefetchlab::core {
namespace {

constexpr std::string_view kRowExpected =
    "an nccl-tests result row: size count type redop [root] time algbw busbw #wrong, then the "
    "same four for in-place";

std::vector<std::string_view> split_ws(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    const std::size_t start = i;
    while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<std::int64_t> to_int(std::string_view s) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<double> to_double(std::string_view s) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

const char* nccl_tests_op_name(NcclTestsOp op) {
  switch (op) {
    case NcclTestsOp::kAllGather:
      return "all_gather";
    case NcclTestsOp::kReduceScatter:
      return "reduce_scatter";
    case NcclTestsOp::kAllReduce:
      return "all_reduce";
  }
  return "?";
}

std::optional<NcclTestsOp> parse_nccl_tests_op(std::string_view name) {
  for (const auto op : {NcclTestsOp::kAllGather, NcclTestsOp::kReduceScatter, NcclTestsOp::kAllReduce}) {
    if (name == nccl_tests_op_name(op)) return op;
  }
  return std::nullopt;
}

std::string_view strip_launcher_prefix(std::string_view line) {
  std::string_view s = line;
  // Open MPI --tag-output: "[job,rank]<stdout>:"
  if (s.starts_with('[')) {
    const auto close = s.find("]<");
    const auto colon = s.find(">:");
    if (close != std::string_view::npos && colon != std::string_view::npos && close < colon) {
      s.remove_prefix(colon + 2);
      if (s.starts_with(' ')) s.remove_prefix(1);
      return s;
    }
  }
  // srun --label / pdsh-style "N: "
  std::size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  const std::size_t digits = i;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i > digits && i < s.size() && s[i] == ':' && (i + 1 == s.size() || s[i + 1] == ' ')) {
    s.remove_prefix(std::min(s.size(), i + 2));
  }
  return s;
}

std::optional<int> nccl_tests_type_bytes(std::string_view type) {
  if (type == "int8" || type == "uint8" || type == "f8e4m3" || type == "f8e5m2") return 1;
  if (type == "half" || type == "bfloat16" || type == "fp16" || type == "bf16") return 2;
  if (type == "int32" || type == "uint32" || type == "float" || type == "int" || type == "float32") return 4;
  if (type == "int64" || type == "uint64" || type == "double") return 8;
  return std::nullopt;
}

NcclTestsLog parse_nccl_tests_log(std::string_view text, const std::string& file) {
  NcclTestsLog log;
  log.file = file;
  bool has_root = true;
  std::set<int> rank_ids;
  std::optional<int> threads_times_gpus;
  std::istringstream in{std::string(text)};
  std::string raw;
  int line_no = 0;
  int op_line = 0;
  int header_line = 0;  // the "# nThread" line of the run
  int footer_line = 0;  // "# Avg bus bandwidth"
  std::set<std::string> hosts;
  const std::string one_run = "one nccl-tests run per file (split pasted runs into separate logs; run -d all or -o all "
                              "as one run per type and op)";
  while (std::getline(in, raw)) {
    ++line_no;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    const std::string_view line = strip_launcher_prefix(raw);
    // The op: the first "<op>_perf" anywhere in the log (command line, banner).
    for (const auto op : {NcclTestsOp::kAllGather, NcclTestsOp::kReduceScatter, NcclTestsOp::kAllReduce}) {
      const auto at = line.find(std::string(nccl_tests_op_name(op)) + "_perf");
      if (at == std::string_view::npos) continue;
      if (!log.op) {
        log.op = op;
        op_line = line_no;
      } else if (*log.op != op) {
        throw InputError({file, line_no}, "", std::string("names ") + nccl_tests_op_name(op) + "_perf after " +
                             nccl_tests_op_name(*log.op) + "_perf at line " + std::to_string(op_line) +
                             ": two runs of different collectives pasted together",
                         one_run);
      }
    }
    const auto tokens = split_ws(line);
    if (tokens.empty()) continue;
    if (tokens[0].starts_with('#')) {
      // "#  Rank  3 Group  0 Pid ..." and "# nThread 1 nGpus 8 ..." and the column header.
      const std::string_view body = trim(line.substr(line.find('#') + 1));
      const auto words = split_ws(body);
      const std::string max_ranks = std::to_string(kMaxRanks);
      if (words.size() >= 2 && words[0] == "Rank") {
        if (const auto r = to_int(words[1])) {
          if (*r < 0 || *r >= kMaxRanks) {
            throw InputError({file, line_no}, "Rank", "rank " + std::string(words[1]) + " is out of range",
                             "a rank in [0, " + max_ranks + ")");
          }
          rank_ids.insert(static_cast<int>(*r));
          // "#  Rank  0 Group  0 Pid 1234 on HOST device 0 [..] NAME"
          for (std::size_t i = 2; i + 1 < words.size(); ++i) {
            if (words[i] == "on") {
              hosts.emplace(words[i + 1]);
              break;
            }
          }
        }
      }
      for (std::size_t i = 0; i + 3 < words.size(); ++i) {
        if (words[i] == "nThread" && words[i + 2] == "nGpus") {
          if (header_line != 0) {
            throw InputError({file, line_no}, "nThread", "starts a second run (the first starts at line " +
                                 std::to_string(header_line) + "): two runs pasted together",
                             one_run);
          }
          header_line = line_no;
          const auto t = to_int(words[i + 1]);
          const auto g = to_int(words[i + 3]);
          // Each at least 1 and their product at most kMaxRanks (checked without overflow).
          if (t && g && (*t < 1 || *g < 1 || *t > kMaxRanks / *g)) {
            throw InputError({file, line_no}, "nThread", "nThread " + std::string(words[i + 1]) + " x nGpus " +
                                 std::string(words[i + 3]) + " is out of range",
                             "nThread and nGpus of at least 1, at most " + max_ranks + " ranks in all");
          }
          if (t && g) threads_times_gpus = static_cast<int>(*t * *g);
        }
      }
      if (std::find(words.begin(), words.end(), "redop") != words.end() &&
          std::find(words.begin(), words.end(), "size") != words.end()) {
        has_root = std::find(words.begin(), words.end(), "root") != words.end();
      }
      if (body.starts_with("Avg bus bandwidth")) {
        footer_line = line_no;
        const auto colon = body.find(':');
        if (colon != std::string_view::npos) {
          const auto w = split_ws(body.substr(colon + 1));
          if (!w.empty()) log.avg_bus_bandwidth_gb_per_s = to_double(w[0]);
        }
      }
      continue;
    }
    if (!all_digits(tokens[0])) continue;  // NCCL INFO lines, warnings, other output
    if (footer_line != 0) {
      throw InputError({file, line_no}, "", "is a result row after the footer at line " + std::to_string(footer_line) +
                           ": two runs pasted together",
                       one_run);
    }
    const auto fail = [&](const std::string& problem) {
      throw InputError({file, line_no}, "", problem, std::string(kRowExpected));
    };
    const std::size_t per_placement = 4;
    const std::size_t head = has_root ? 5 : 4;
    if (tokens.size() < head + per_placement) {
      fail("a result row with " + std::to_string(tokens.size()) + " fields");
    }
    NcclTestsRow row;
    row.line = line_no;
    const auto bytes = to_int(tokens[0]);
    const auto count = to_int(tokens[1]);
    if (!bytes || !count || *count < 0) fail("size '" + std::string(tokens[0]) + "' or count '" + std::string(tokens[1]) + "' is not a whole number");
    if (*bytes > kMaxBytes || *count > *bytes) {
      fail("size " + std::string(tokens[0]) + " with count " + std::string(tokens[1]) + " is out of range");
    }
    row.bytes = *bytes;
    row.count = *count;
    row.type = std::string(tokens[2]);
    row.redop = std::string(tokens[3]);
    if (!nccl_tests_type_bytes(row.type)) fail("unknown type '" + row.type + "'");
    if (has_root && !to_int(tokens[4])) fail("root '" + std::string(tokens[4]) + "' is not a number");
    const auto placement = [&](std::size_t at, double& time, double* algbw, double& busbw) {
      const auto t = to_double(tokens[at]);
      const auto a = to_double(tokens[at + 1]);
      const auto b = to_double(tokens[at + 2]);
      if (!t || !a || !b || *t < 0) {
        fail("time/algbw/busbw '" + std::string(tokens[at]) + " " + std::string(tokens[at + 1]) +
             " " + std::string(tokens[at + 2]) + "' are not numbers");
      }
      // nccl-tests prints times to 0.01 us and no collective finishes faster (a kernel launch takes
      // microseconds); none takes 1000 s, nor moves 100 TB/s: such a row is a damaged or edited log.
      constexpr double kMinTimeUs = 0.01;
      constexpr double kMaxTimeUs = 1e9;
      constexpr double kMaxGbPerS = 1e5;
      if (*t < kMinTimeUs || *t > kMaxTimeUs) {
        fail("time " + std::string(tokens[at]) + " us is outside what a collective takes (0.01 us to 1000 s)");
      }
      if (*a < 0 || *b < 0 || *a > kMaxGbPerS || *b > kMaxGbPerS) {
        fail("algbw/busbw '" + std::string(tokens[at + 1]) + " " + std::string(tokens[at + 2]) +
             "' GB/s is outside what any link carries (0 to 1e5)");
      }
      time = *t;
      if (algbw) *algbw = *a;
      busbw = *b;
      const std::string_view wrong = tokens[at + 3];
      const auto wrong_count = to_double(wrong);
      if (wrong != "N/A" && !wrong_count) fail("#wrong '" + std::string(wrong) + "' is not a number or N/A");
      if (wrong_count && *wrong_count != 0) {
        throw InputError({file, line_no}, "#wrong",
                         "is " + std::string(wrong) + " at size " + std::string(tokens[0]) +
                             ": the collective returned wrong data, so its time is not a measurement",
                         "rows with #wrong 0 (or N/A with -c 0); fix the system, then measure again");
      }
    };
    placement(head, row.time_us, &row.algbw_gb_per_s, row.busbw_gb_per_s);
    if (tokens.size() >= head + 2 * per_placement) {
      double t = 0;
      double b = 0;
      placement(head + per_placement, t, nullptr, b);
      row.in_place_time_us = t;
      row.in_place_busbw_gb_per_s = b;
    }
    // Sizes rise; only 0 may repeat (small -b on many ranks rounds several sizes down to 0 elements).
    if (!log.rows.empty() && row.bytes <= log.rows.back().bytes && !(row.bytes == 0 && log.rows.back().bytes == 0)) {
      throw InputError({file, line_no}, "size",
                       "is " + std::to_string(row.bytes) + ", not above the row before it (line " +
                           std::to_string(log.rows.back().line) + ", " + std::to_string(log.rows.back().bytes) +
                           "): two runs pasted together, or one run over several types or ops",
                       one_run);
    }
    log.rows.push_back(std::move(row));
  }
  if (!hosts.empty()) log.nodes = static_cast<int>(hosts.size());
  if (!rank_ids.empty()) {
    log.ranks = *rank_ids.rbegin() + 1;
  } else if (threads_times_gpus && *threads_times_gpus > 1) {
    log.ranks = threads_times_gpus;
  }
  // all_gather / reduce_scatter: size = count per rank x type size x ranks.
  if (!log.ranks && log.op && *log.op != NcclTestsOp::kAllReduce) {
    for (const auto& row : log.rows) {
      // count <= bytes <= kMaxBytes (checked per row), so count * t cannot overflow.
      const std::int64_t per_rank = row.count * *nccl_tests_type_bytes(row.type);
      if (per_rank > 0 && row.bytes % per_rank == 0 && row.bytes / per_rank <= kMaxRanks) {
        log.ranks = static_cast<int>(row.bytes / per_rank);
        break;
      }
    }
  }
  return log;
}

NcclTestsLog read_nccl_tests_log(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError({file.string(), 0}, "", "cannot read the file", "an nccl-tests output log");
  std::ostringstream text;
  text << in.rdbuf();
  NcclTestsLog log = parse_nccl_tests_log(text.str(), file.string());
  if (log.rows.empty()) {
    throw InputError({file.string(), 0}, "", "no nccl-tests result rows",
                     "the output of all_gather_perf, reduce_scatter_perf or all_reduce_perf");
  }
  return log;
}

}  // namespace prefetchlab::core
