#pragma once
// Replay: recorded samples through a scenario's controller, one controller per rank, making the
// executor's calls of core/control/prefetch_controller.hpp in the same order. The trace is RECORD in
// iteration 1 and COMPLETE from 2 on (replay cannot see invalidations).
#include <vector>

#include "core/control/controller_config.hpp"
#include "core/metrics/metrics.hpp"
#include "core/control/prefetch_controller.hpp"
#include "core/control/samples_reader.hpp"

namespace prefetchlab::core {

// Buckets at each iteration's first fetch, for iterations 1..max iteration in the samples and
// every rank in [0, world_size), ordered by iteration then rank (buckets.csv's order).
// `context.rank` is set per rank. A column the policy needs that the file lacks is an
// InputError naming the column (line 1 of the file).
std::vector<BucketRecord> replay_controller(const ControllerConfig& config, ControllerContext context,
                                            int world_size, const SamplesFile& samples);

}  // namespace prefetchlab::core
