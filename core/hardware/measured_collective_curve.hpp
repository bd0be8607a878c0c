#pragma once
// A collective's measured time against size, as `calibrate --from-nccl-tests` saves it: one
// nccl-tests log's sizes and times for one op and group. Between two measured sizes the time is
// interpolated linearly in log-size and log-time (a power law through both points, so every
// measured size is reproduced exactly and a latency plateau stays flat); below the smallest size
// the smallest size's time holds (the latency floor); above the largest the largest size's
// algorithm bandwidth holds (time grows in proportion to size). One latency and one bandwidth
// cannot do this: NCCL switches protocol (LL, LL128, Simple), algorithm and channel count with
// size (NVIDIA/nccl src/graph/tuning.cc), so a single line through a sweep is off by tens of
// percent at the middle sizes a prefetch bucket uses.
//
// In a profile's `calibration:` section:
//   measured_collectives:
//     - op: all_gather          # all_gather | reduce_scatter | all_reduce
//       ranks: 8                # the group the log measured
//       nodes: 1                # optional: nodes the group spanned (any, when absent)
//       sizes_bytes: [65536, 131072, ...]   # nccl-tests' size column, strictly increasing
//       times_us: [19.0, 19.3, ...]         # its time column (out-of-place), > 0
// The simulator uses a curve for a collective of the same op and ranks (and nodes when given);
// any other shape keeps the cost model.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/hardware/nccl_tests_log.hpp"
#include "core/input/yaml_section.hpp"

namespace prefetchlab::core {

struct MeasuredCollectiveCurve {
  NcclTestsOp op = NcclTestsOp::kAllGather;
  int ranks = 0;
  std::optional<int> nodes;
  std::vector<std::int64_t> sizes_bytes;  // strictly increasing, >= 2 entries
  std::vector<double> times_us;           // one per size, > 0

  // The curve's time at `bytes` (see the file comment), in microseconds.
  double time_us(std::int64_t bytes) const;
  bool applies_to(NcclTestsOp shape_op, int shape_ranks, int shape_nodes) const;
};

// The first curve that applies to the shape, or null.
const MeasuredCollectiveCurve* find_measured_curve(std::span<const MeasuredCollectiveCurve> curves, NcclTestsOp op,
                                                   int ranks, int nodes);

// Reads `measured_collectives:` from a calibration section (absent = none). Strict: every
// problem is an InputError naming file, line and key.
std::vector<MeasuredCollectiveCurve> read_measured_curves(const YamlSection& calibration);

// The YAML list item for one curve, indented by `indent` spaces (the calibrate command writes it).
std::string measured_curve_yaml(const MeasuredCollectiveCurve& curve, int indent);

}  // namespace prefetchlab::core
