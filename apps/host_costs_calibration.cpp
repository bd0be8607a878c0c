#include "host_costs_calibration.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "calibrated_profile.hpp"
#include "fidelity_host_cost.hpp"
#include "metric_text.hpp"
#include "core/hardware/hardware_profile.hpp"
#include "core/hardware/host_call_costs.hpp"
#include "core/input/input_error.hpp"
#include "core/metrics/metrics.hpp"

namespace prefetchlab::apps {
namespace {

// The calls whose host cost the defaults price (apps/fidelity_host_cost.cpp): the list forms
// of all_gather and reduce_scatter, which the DeepSpeed host path's level rests on, and the
// in-place all_reduce.
struct PricedCall {
  const char* call;
  core::NcclTestsOp op;
};
constexpr PricedCall kPricedCalls[] = {{"all_gather", core::NcclTestsOp::kAllGather},
                                       {"reduce_scatter", core::NcclTestsOp::kReduceScatter},
                                       {"all_reduce", core::NcclTestsOp::kAllReduce}};

// The row of `call` timed `way` at `bytes_per_rank`, if any (the last one wins, as a rerun
// appended to the file would).
const core::HostCallCost* find_row(const std::vector<core::HostCallCost>& rows, const std::string& call,
                                   const std::string& way, std::int64_t bytes_per_rank) {
  const core::HostCallCost* found = nullptr;
  for (const auto& row : rows) {
    if (row.call == call && row.way == way && row.bytes_per_rank == bytes_per_rank) found = &row;
  }
  return found;
}

}  // namespace

int run_host_costs_calibration(const HostCostsCalibrationOptions& o) {
  const std::filesystem::path base = find_base_profile(o.base, "--base");
  const core::HardwareProfile profile = core::load_hardware_profile(base);
  const std::vector<core::HostCallCost> rows = core::read_host_call_costs(o.costs);
  // The defaults' price of each call at host_speed 1: the level a speed is measured against.
  core::CalibrationConstants at_speed_one = profile.calibration;
  at_speed_one.host_speed = 1.0;

  std::printf("calibrate --from-host-costs %s: %zu rows\n", o.costs.c_str(), rows.size());
  std::printf("  %-16s %10s %12s %14s %8s  %s\n", "call", "bytes", "measured us", "default us", "speed",
              "under torch.profiler");
  std::vector<double> speeds;
  std::ostringstream header;
  header << "# Calibrated by `prefetchlab calibrate --from-host-costs` from " << o.costs
         << " (bench/host_costs/torch_call_host_costs.py, calls issued back to back):\n";
  for (const PricedCall& priced : kPricedCalls) {
    // The smallest size timed `issue`: the host, not the wire, sets its pace (of repeated rows,
    // the last, as a rerun appended to the file would be).
    const core::HostCallCost* issue = nullptr;
    for (const auto& row : rows) {
      if (row.call == priced.call && row.way == "issue" && (!issue || row.bytes_per_rank <= issue->bytes_per_rank)) {
        issue = &row;
      }
    }
    if (!issue) {
      std::printf("  %-16s not measured (no row timed `issue`)\n", priced.call);
      continue;
    }
    const std::int64_t bytes = issue->bytes_per_rank;
    HostQuery query;
    query.call = priced.call;
    query.op = priced.op;
    query.ranks = 8;  // a host-only price does not depend on the group
    query.bytes_per_rank = bytes;
    query.timing = HostQuery::Timing::kHostOnly;
    const double default_us = simulated_host_us(profile, at_speed_one, query);
    const double speed = default_us / issue->us_per_call;
    speeds.push_back(speed);
    std::string profiled = "-";
    if (const auto* p = find_row(rows, priced.call, "profiled", bytes)) {
      profiled = fmt("%+.1f us", p->us_per_call - issue->us_per_call);
      if (const auto* s = find_row(rows, priced.call, "profiled_stack", bytes)) {
        profiled += fmt(" (%+.1f us with stacks)", s->us_per_call - issue->us_per_call);
      }
    }
    std::printf("  %-16s %10lld %12.1f %14.1f %8.3f  %s\n", priced.call, static_cast<long long>(bytes),
                issue->us_per_call, default_us, speed, profiled.c_str());
    header << "#   " << priced.call << ": " << fmt("%.1f", issue->us_per_call) << " us per call (line " << issue->line
           << ") against the defaults' " << fmt("%.1f", default_us) << " us: speed " << fmt("%.3f", speed) << "\n";
  }
  if (speeds.empty()) {
    throw core::InputError({o.costs, 0}, "call", "has no all_gather, reduce_scatter or all_reduce row timed `issue`",
                           "rows of those calls with way `issue`, as bench/host_costs/torch_call_host_costs.py writes");
  }
  const double host_speed = core::median(speeds);
  if (!(host_speed >= core::kMinHostSpeed && host_speed <= core::kMaxHostSpeed)) {
    throw core::InputError({o.costs, 0}, "us_per_call",
                           "gives host_speed " + fmt("%.3g", host_speed) +
                               ", outside what any host is (0.001 to 1000 times a GPU server's)",
                           "times measured in microseconds per call, as bench/host_costs/torch_call_host_costs.py writes them");
  }
  const double spread = *std::max_element(speeds.begin(), speeds.end()) / *std::min_element(speeds.begin(), speeds.end());
  std::printf("  => host_speed %.3f (median of %zu call(s)); every host cost of the profile is divided by it\n",
              host_speed, speeds.size());
  if (spread > 1.5) {
    std::printf("  note: the calls' speeds differ %.1fx: this machine's costs are not the defaults' in proportion, "
                "so one host_speed fits some calls better than others\n",
                spread);
  }
  header << "#   host_speed " << fmt("%.3f", host_speed) << ": the median over " << speeds.size() << " call(s)\n";
  write_calibrated_profile(base, o.output, header.str(), {{"host_speed", host_speed}}, std::nullopt);
  std::printf("wrote %s\n", o.output.c_str());
  return 0;
}

}  // namespace prefetchlab::apps
