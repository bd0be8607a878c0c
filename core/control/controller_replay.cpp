#include "core/control/controller_replay.hpp"

#include <algorithm>
#include <stdexcept>

#include "core/input/input_error.hpp"

namespace prefetchlab::core {

std::vector<BucketRecord> replay_controller(const ControllerConfig& config, ControllerContext context,
                                            int world_size, const SamplesFile& samples) {
  context.world_size = world_size;
  std::vector<std::unique_ptr<PrefetchController>> controllers;
  for (int r = 0; r < world_size; ++r) {
    context.rank = r;
    controllers.push_back(make_prefetch_controller(config, context));
    try {
      controllers.back()->bind_columns(samples.extra_columns);
    } catch (const MissingSampleColumn& e) {
      throw InputError({samples.path.string(), 1}, e.column(),
                       std::string("policy '") + controller_policy_name(config.policy) +
                           "' needs the samples column '" + e.column() + "', which the file lacks",
                       "samples.csv from a run that records it");
    }
  }
  // Per rank: its samples in file order, which samples_reader guarantees is iteration order, so
  // each iteration's samples are the next run of them (memory follows the file, not the
  // iteration numbers in it).
  int last_iteration = 0;
  std::vector<std::vector<const TimingSample*>> by_rank(static_cast<std::size_t>(world_size));
  for (const TimingSample& s : samples.samples) {
    last_iteration = std::max(last_iteration, s.iteration);
    by_rank.at(static_cast<std::size_t>(s.rank)).push_back(&s);
  }
  std::vector<std::size_t> next_sample(static_cast<std::size_t>(world_size), 0);

  std::vector<BucketRecord> buckets;
  std::vector<Proposal> proposals(static_cast<std::size_t>(world_size));
  for (int i = 1; i <= last_iteration; ++i) {
    const TraceMode mode = i == 1 ? TraceMode::kRecord : TraceMode::kComplete;
    // Step 1: every rank at reset_step; agreement when it is an update point.
    int proposing = 0;
    for (int r = 0; r < world_size; ++r) {
      auto p = controllers[static_cast<std::size_t>(r)]->begin_iteration(i, mode);
      if (p) {
        proposals[static_cast<std::size_t>(r)] = std::move(*p);
        ++proposing;
      }
    }
    if (proposing != 0 && proposing != world_size) {
      throw std::logic_error("controllers disagree on the update point of iteration " + std::to_string(i));
    }
    if (proposing != 0) {
      const Agreement agreement = controllers.front()->agreement();
      for (int r = 0; r < world_size; ++r) {
        controllers[static_cast<std::size_t>(r)]->apply(agree(agreement, proposals, r));
      }
    }
    // Step 2: the bucket at the first fetch.
    for (int r = 0; r < world_size; ++r) {
      buckets.push_back({i, r, controllers[static_cast<std::size_t>(r)]->bucket_numel()});
    }
    // Step 3: the iteration's samples, in fetch order, if wanted.
    for (int r = 0; r < world_size; ++r) {
      PrefetchController& controller = *controllers[static_cast<std::size_t>(r)];
      const auto& rank_samples = by_rank[static_cast<std::size_t>(r)];
      std::size_t& next = next_sample[static_cast<std::size_t>(r)];
      for (; next < rank_samples.size() && rank_samples[next]->iteration == i; ++next) {
        if (controller.wants_samples()) controller.observe(*rank_samples[next]);
      }
    }
  }
  return buckets;
}

}  // namespace prefetchlab::core
