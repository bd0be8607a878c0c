// torch.profiler (Kineto) traces as `trace-summary`, `calibrate --from-trace` and `validate
// --against-trace` read them: up to two ranks' files (the input split at its first NUL byte),
// each read (gzip when it starts with gzip's magic bytes), turned into a rank timeline, matched
// across ranks, summarised and fitted.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/trace_import/trace_calibration.hpp"
#include "core/trace_import/trace_set.hpp"
#include "core/trace_import/trace_summary.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace pc = prefetchlab::core;
namespace pf = prefetchlab::fuzz;

namespace {

std::string write_rank(int rank, std::string_view bytes) {
  const bool gzip = bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
                    static_cast<unsigned char>(bytes[1]) == 0x8b;
  return pf::write_input("rank" + std::to_string(rank) + (gzip ? ".pt.trace.json.gz" : ".pt.trace.json"), bytes)
      .string();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto [first, second] = pf::split_at_nul(data, size);
  std::vector<std::string> paths{write_rank(0, first)};
  if (!second.empty()) paths.push_back(write_rank(1, second));
  pf::expect_input_error_or_success([&] {
    const pc::TraceSet set = pc::load_trace_set(paths, pc::TimelineOptions{});
    const pc::TraceSummary summary = pc::summarize_traces(set);
    (void)pc::format_trace_summary(set, summary);
    (void)pc::trace_summary_json(set, summary);
    (void)pc::calibrate_from_traces(set, 0.05);
  });
  return 0;
}
