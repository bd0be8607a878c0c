#pragma once
// A simulated run's row files and summary as the command writes them, for tests that compare
// two ways of running one scenario byte for byte; and the bundled scenarios they run over.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/metrics/metrics_csv.hpp"
#include "core/metrics/summary_json.hpp"
#include "core/scenario/scenario.hpp"
#include "core/scenario/scenario_json.hpp"
#include "sim/ranks/world.hpp"

namespace prefetchlab::testing {

inline std::string read_whole_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Every scenario under scenarios/, sorted.
inline std::vector<std::filesystem::path> bundled_scenario_files() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(std::filesystem::path(PREFETCHLAB_SOURCE_DIR) / "scenarios")) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

struct WorldRunFiles {
  std::string iterations, buckets, summary, samples, memory;
  std::uint64_t events = 0;
};

// Runs `scenario` (trace off; ranks apart on `threads` threads) and writes its rows under `dir`;
// returns the bytes.
inline WorldRunFiles world_run_files(const core::Scenario& scenario, sim::RankSimulation mode,
                                     const std::filesystem::path& dir,
                                     sim::EventOrder order = sim::EventOrder::kRankByRank, int threads = 1) {
  sim::World world(scenario, false, mode, order);
  world.set_threads(threads);
  const sim::WorldResult result = world.run();
  std::filesystem::create_directories(dir);
  {
    core::IterationsCsv iterations(dir / "iterations.csv", scenario.training.seq_len_distribution.varies());
    iterations.append(std::span<const core::IterationRecord>(result.metrics.iterations));
    core::BucketsCsv buckets(dir / "buckets.csv");
    buckets.append(std::span<const core::BucketRecord>(result.metrics.buckets));
    core::SamplesCsv samples(dir / "samples.csv",
                             {core::kHostWaitColumn, core::kHostIntervalColumn, core::kPeakReservedColumn});
    samples.append(std::span<const core::TimingSample>(result.metrics.samples));
  }
  std::string memory;
  for (const core::MemoryPoint& point : result.metrics.memory) {
    memory += std::to_string(point.time_ns) + ',' + std::to_string(point.rank) + ',' +
              std::to_string(point.allocated_bytes) + ',' + std::to_string(point.reserved_bytes) + '\n';
  }
  const auto stats = core::summarize(result.metrics, static_cast<int>(scenario.training.warmup_iterations));
  return {read_whole_file(dir / "iterations.csv"), read_whole_file(dir / "buckets.csv"),
          core::summary_to_json(stats, result.status, core::scenario_to_json(scenario), result.message).dump(1),
          read_whole_file(dir / "samples.csv"), std::move(memory), result.events_processed};
}

}  // namespace prefetchlab::testing
