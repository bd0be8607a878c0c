#include "quiet_run.hpp"

#include <span>

#include "sim/ranks/world.hpp"

namespace prefetchlab::apps {

QuietRunResult run_quietly(const core::Scenario& scenario, const std::atomic<bool>* interrupt) {
  // Only the summary counts: identical ranks are simulated once (the same figures).
  sim::World world(scenario, false, sim::RankSimulation::kCollapseIdentical);
  // A sink that drops samples and buckets keeps the result's memory flat; only the summary counts.
  sim::IterationSink sink;
  sink.on_iteration = [](const core::IterationRecord&, std::span<const core::TimingSample>,
                         std::span<const core::BucketRecord>) {};
  sink.on_memory = [](std::span<const core::MemoryPoint>) {};
  sink.wants_samples = false;
  const sim::WorldResult result = world.run(sink, interrupt);
  QuietRunResult out;
  out.status = result.status;
  out.stats = core::summarize(result.metrics, static_cast<int>(scenario.training.warmup_iterations));
  return out;
}

}  // namespace prefetchlab::apps
