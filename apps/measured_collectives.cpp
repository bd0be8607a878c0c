#include "measured_collectives.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "metric_text.hpp"
#include "core/hardware/collective_fit.hpp"
#include "core/hardware/measured_collective_curve.hpp"
#include "nccl_tests_table.hpp"

namespace prefetchlab::apps {
namespace {

std::vector<NcclTestsTableRow> table_rows(const std::vector<gpu::CollectiveTiming>& timings) {
  std::vector<NcclTestsTableRow> rows;
  for (const auto& t : timings) rows.push_back({t.bytes, t.count, t.out_of_place_us, t.in_place_us});
  return rows;
}

// Out-of-place and in-place move the same bytes; on a busy CPU one of the two often catches a
// time slice lost to another process, so each size takes the faster (nccl-tests prints both).
double best_time_us(const gpu::CollectiveTiming& t) {
  return t.in_place_us > 0 ? std::min(t.out_of_place_us, t.in_place_us) : t.out_of_place_us;
}

core::CollectiveFit fit(const std::vector<gpu::CollectiveTiming>& timings, int ranks, double tolerance) {
  std::vector<core::FitPoint> points;
  for (const auto& t : timings) points.push_back({t.bytes, best_time_us(t)});
  return core::fit_collective(points, static_cast<double>(ranks - 1) / ranks, tolerance);
}

// The measured time at each size (the faster placement, as the fit takes), sizes increasing
// and times made non-decreasing: a later size that measured faster on a busy machine would
// make a bigger bucket cheaper than a smaller one.
core::MeasuredCollectiveCurve measured_curve(core::NcclTestsOp op, int ranks, int nodes,
                                             const std::vector<gpu::CollectiveTiming>& timings) {
  core::MeasuredCollectiveCurve curve;
  curve.op = op;
  curve.ranks = ranks;
  curve.nodes = nodes;  // one machine, unless the ranks were processes on several
  for (const auto& t : timings) {
    if (t.bytes <= 0 || (!curve.sizes_bytes.empty() && t.bytes <= curve.sizes_bytes.back())) continue;
    const double time_us = std::max(best_time_us(t), curve.times_us.empty() ? 0.0 : curve.times_us.back());
    if (time_us <= 0) continue;
    curve.sizes_bytes.push_back(t.bytes);
    curve.times_us.push_back(time_us);
  }
  return curve;
}

}  // namespace

MeasuredCollectives fit_measured_collectives(const gpu::MicrobenchmarkResults& results, int ranks,
                                             const std::string& backend, double tolerance) {
  MeasuredCollectives out;
  std::ostringstream notes;
  int measured_ops = 0;  // ops whose curve is saved
  for (const auto& [op, timings] : {std::pair{core::NcclTestsOp::kAllGather, &results.all_gather},
                                    std::pair{core::NcclTestsOp::kReduceScatter, &results.reduce_scatter}}) {
    std::printf("#\n# %s_perf (measured on the %s device)\n", core::nccl_tests_op_name(op), backend.c_str());
    print_nccl_tests_table(op, ranks, "bfloat16", table_rows(*timings));
    const core::CollectiveFit f = fit(*timings, ranks, tolerance);
    std::printf("# %14s %14s %14s %8s\n", "size (B)", "measured (us)", "fitted (us)", "error");
    for (std::size_t i = 0; i < f.points.size(); ++i) {
      const auto& p = f.points[i];
      std::printf("  %14lld %14.2f %14.2f %7.1f%%\n", static_cast<long long>(p.bytes), p.time_us, f.predicted_us[i],
                  100 * (f.predicted_us[i] - p.time_us) / p.time_us);
    }
    double bus_bandwidth_gb_per_s = f.bus_bandwidth_gb_per_s();
    std::printf("# fit: latency %.2f us, busBW %.3f GB/s\n", f.latency_us(), bus_bandwidth_gb_per_s);
    if (bus_bandwidth_gb_per_s <= 0) {
      bus_bandwidth_gb_per_s = f.end_to_end_bus_bandwidth_gb_per_s();
      std::printf("# the largest sizes' times did not grow with size (a busy machine?); busBW from the smallest "
                  "and largest sizes: %.3f GB/s\n", bus_bandwidth_gb_per_s);
    }
    if (bus_bandwidth_gb_per_s <= 0) {
      // A measurement condition, not an error: every size took about as long, so the times are
      // the machine's scheduling (on a loaded CPU each rendezvous waits for a time slice). The
      // other fits stand; this op keeps the base's figures.
      std::printf("# not fitted: %s: times did not grow with size at all, so no bus bandwidth can be fitted (the "
                  "machine was too busy to measure: calibrate again, with more --iterations); the base profile's "
                  "latency and bus bandwidth stay, and no measured curve is saved\n",
                  core::nccl_tests_op_name(op));
      notes << "#   " << core::nccl_tests_op_name(op)
            << ": not fitted (times did not grow with size); the base profile's figures stay\n";
      out.not_fitted.push_back(core::nccl_tests_op_name(op));
      continue;
    }
    const char* key = op == core::NcclTestsOp::kAllGather ? "allgather_bus_bandwidth_gb_per_s"
                                                           : "reduce_scatter_bus_bandwidth_gb_per_s";
    out.values[key] = fmt("%.6g", bus_bandwidth_gb_per_s);
    if (op == core::NcclTestsOp::kAllGather) out.values["collective_latency_us"] = fmt("%.6g", std::max(0.0, f.latency_us()));
    notes << "#   " << core::nccl_tests_op_name(op) << ": latency " << fmt("%.2f", f.latency_us()) << " us, busBW "
          << fmt("%.3f", bus_bandwidth_gb_per_s) << " GB/s\n";
    const core::MeasuredCollectiveCurve curve = measured_curve(op, ranks, results.nodes, *timings);
    out.curves_yaml += core::measured_curve_yaml(curve, 0);
    std::printf("# saved as measured_collectives: %zu sizes\n", curve.sizes_bytes.size());
    ++measured_ops;
  }
  if (measured_ops > 0) out.values["collective_model"] = "ring";  // the measured figures, not NCCL's tuner tables
  out.profile_notes = notes.str();
  return out;
}

}  // namespace prefetchlab::apps
