#pragma once
// The simulated cluster of one scenario: every rank's host thread and streams, one NCCL
// communicator over the data-parallel group, and the bookkeeping that turns what happened into
// core::Metrics. A run is a pure function of the scenario (and its seed).
#include <atomic>
#include <climits>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/metrics/metrics.hpp"
#include "core/scenario/scenario.hpp"
#include "sim/cost/collective_cost_model.hpp"
#include "sim/ranks/communicator.hpp"
#include "sim/cost/compute_model.hpp"
#include "sim/engine/event_engine.hpp"
#include "sim/engine/host_task.hpp"
#include "sim/trace/label_table.hpp"
#include "sim/ranks/rank_process.hpp"
#include "sim/ranks/rank_symmetry.hpp"
#include "sim/ranks/shared_cores.hpp"
#include "sim/trace/trace_recorder.hpp"

namespace prefetchlab::sim {

// Receives each iteration as soon as every rank has finished it, so outputs are written as the
// run goes (an interrupted run loses nothing already finished).
struct IterationSink {
  std::function<void(const core::IterationRecord& record, std::span<const core::TimingSample> samples,
                     std::span<const core::BucketRecord> buckets)>
      on_iteration;
  // Allocated / reserved bytes over time (memory.csv), per rank in time order, as they come.
  std::function<void(std::span<const core::MemoryPoint> points)> on_memory;
  // false: on_iteration gets no samples. Building them is a sizeable share of a short run, and
  // a sweep, which keeps only the summary, never reads them. Controllers get theirs regardless.
  bool wants_samples = true;
  // A byte per rank, 1 for the ranks whose samples on_iteration gets (output.trace_ranks);
  // empty = every rank.
  std::vector<char> sample_rank_mask;
};

struct WorldResult {
  core::RunStatus status = core::RunStatus::kOk;
  std::string message;  // what went wrong, for summary.json and the terminal
  core::Metrics metrics;
  std::uint64_t events_processed = 0;
  RankCollapse ranks;  // how many ranks were simulated, and why every one if so
};

// How the simulated ranks' events are interleaved. Both give the same figures (tests/sim/
// rank_order_test.cpp); they differ in speed, and in the order equal-time trace spans are written.
enum class EventOrder {
  // Each rank runs alone up to the next point where another could touch it (the start of a
  // collective it waits in: Communicator::horizon_ns), from its own event queue: a rank's state
  // stays in cache across a collective's worth of events instead of one event between a
  // thousand other ranks' (Chandy & Misra, "Distributed simulation: a case study in design and
  // verification of distributed programs", IEEE TSE 1979, for the conservative horizon). A
  // sweep runs every rank that far, on World::set_threads threads; arrivals are counted and
  // collectives started between sweeps. Ranks that share CPU cores (contention_model:
  // shared_cores) touch each other at every kernel, and run in one queue.
  kRankByRank,
  // Every rank's events in one queue, in time order.
  kGlobal,
};

class World final : public EventHandler, public CollectiveListener {
 public:
  // kCollapseIdentical simulates one rank for all where the scenario proves them identical
  // (rank_symmetry.hpp): every figure, iterations.csv, buckets.csv, samples and memory timeline
  // are those of the full simulation (a representative's rows given for each rank it stands
  // for); the trace holds the representative, named for the ranks it stands for.
  explicit World(const core::Scenario& scenario, bool record_trace = true,
                 RankSimulation rank_simulation = RankSimulation::kEveryRank,
                 EventOrder event_order = EventOrder::kRankByRank);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  // Runs every iteration. `interrupt`, when set by a signal handler, stops the run early with
  // status interrupted. With a sink, samples and buckets go only to the sink (not into the
  // result's Metrics), so memory stays constant however long the run.
  WorldResult run(const IterationSink& sink = {}, const std::atomic<bool>* interrupt = nullptr);

  // Ranks apart may run on up to `threads` threads, a block of ranks each, meeting between
  // collectives: the outputs are the same whatever the count (tests/sim/rank_order_test.cpp).
  // Not with DeepSpeed's frames (record_deepspeed_frames), nor where ranks share one queue.
  // Default 1.
  void set_threads(int threads) { threads_ = threads < 1 ? 1 : threads; }

  const TraceRecorder& trace() const { return trace_; }
  // Also log DeepSpeed's Python frames on the ranks the trace records (sim/trace/deepspeed_frames.hpp),
  // for the Kineto export: call before run().
  void record_deepspeed_frames() { shared_.deepspeed_frames = true; }
  const HostFrameLog& deepspeed_frames(int rank) const {
    return ranks_[static_cast<std::size_t>(rank)]->deepspeed_frames();
  }
  // Before run(): simulated rank `rank`'s program steps, each iteration's as it starts
  // (core::RankProgram::journal_into); for tests that hold the backends against each other.
  void journal_steps(int rank, std::vector<std::string>* journal) {
    ranks_[static_cast<std::size_t>(rank)]->journal_steps(journal);
  }
  const LabelTable& labels() const { return labels_; }
  const Communicator& communicator() const { return *communicator_; }
  const core::Scenario& scenario() const { return scenario_; }
  // Ranks simulated (1 when collapsed) and ranks in the job.
  int ranks() const { return static_cast<int>(ranks_.size()); }
  int world_size() const { return collapse_.world_size; }
  const RankCollapse& rank_collapse() const { return collapse_; }
  // The ranks simulated rank `rank` stands for: "0-63" when collapsed, else "rank".
  std::string stands_for(int rank) const;

  void on_event(std::int64_t tag) override;  // an iteration-end event on some rank
  bool computing_at_arrival(int rank) override;
  double on_collective_start(std::int64_t seq, const CollectiveCall& call, bool computing) override;
  void on_rank_collective_start(int rank) override;
  void on_collective_done(std::int64_t seq, const CollectiveCall& call, TimeNs start_ns, TimeNs end_ns) override;
  void on_rank_collective_done(int rank, std::int64_t seq, const CollectiveCall& call, TimeNs start_ns,
                               TimeNs end_ns) override;
  // Whether ranks ran from their own queues (EventOrder::kRankByRank where it applies).
  bool ranks_apart() const { return engines_.size() > 1; }

 private:
  void build_shared_context();
  void limit_trace();  // output.trace_ranks, trace_iterations and the timeline budget
  // Finalizes every iteration all ranks finished that ended by `through_ns`.
  void finalize_ready_iterations(TimeNs through_ns);
  // Leaves `samples` empty when `with_samples` is false.
  core::IterationRecord combine(std::int32_t iteration, bool with_samples, std::vector<core::TimingSample>& samples,
                                std::vector<core::BucketRecord>& buckets) const;
  std::string describe_mismatch(const CollectiveMismatch& mismatch) const;
  // Runs every rank's events; false when interrupted.
  bool run_events(const std::atomic<bool>* interrupt);
  bool stopping() const;  // a rank ran out of memory, or a collective mismatch
  // Ranks apart, sweep by sweep, each rank up to where it must wait for the others, on
  // threads_ threads (a block of ranks each); collectives start between sweeps. Until the end,
  // a stop or a hang; false when interrupted.
  bool run_sweeps(const std::atomic<bool>* interrupt);
  // Rank `rank` stopped the world at `stop_ns` (ranks apart): kept if it is the earliest stop.
  void note_stop(int rank, TimeNs stop_ns, bool at_mismatch);
  // Ranks apart: the time every rank has run all its events before.
  TimeNs everyone_past_ns() const;
  // The last time any rank finished iteration `iteration` (where the world finalizes it).
  TimeNs iteration_end_ns(std::int32_t iteration) const;
  // A byte per rank of the job (output.trace_ranks) as one per simulated rank.
  std::vector<char> simulated_rank_mask(const std::vector<char>& world_mask) const;
  // The ranks of the job that simulated rank `rank` gives rows for in samples.csv (with
  // `world_mask`, the sink's or output.trace_ranks': empty = every rank) and memory.csv: itself,
  // or, for a representative, each rank it stands for, so a collapsed run writes the rows of the
  // full simulation.
  std::vector<int> rows_for(int rank, const std::vector<char>& world_mask) const;
  // `rank`'s memory timeline so far, to the sink or the result (a row set per rows_for rank).
  void take_memory_timeline(RankProcess& rank, bool skip_empty, TimeNs through_ns = INT64_MAX);

  const core::Scenario& scenario_;
  RankCollapse collapse_;
  // One per simulated rank where ranks run apart, else one for all.
  std::vector<std::unique_ptr<EventEngine>> engines_;
  CoroutineResumer resumer_;
  LabelTable labels_;
  TraceRecorder trace_;
  std::unique_ptr<CollectiveCostModel> cost_model_;
  std::unique_ptr<ComputeModel> compute_;
  SharedRankContext shared_;
  std::unique_ptr<AgreementBoard> agreement_;
  std::unique_ptr<Communicator> communicator_;
  std::unique_ptr<core::ExpertRouting> routing_;  // scenario `moe:` only
  // training.seq_len_distribution: each iteration's length (index iteration - 1) and the costs of
  // every distinct length drawn (a map: node addresses stay put for SharedRankContext).
  std::vector<std::int64_t> seq_len_;
  std::map<std::int64_t, LengthCosts> length_costs_;
  std::unique_ptr<SharedCores> shared_cores_;  // contention_model: shared_cores only
  std::vector<std::unique_ptr<RankProcess>> ranks_;
  std::vector<int> ranks_done_;  // per iteration (1-based)
  std::int32_t finalized_ = 0;
  const IterationSink* sink_ = nullptr;
  std::vector<char> sample_mask_;  // the sink's sample_rank_mask, by simulated rank
  // output.trace_ranks by rank of the job (empty = every rank): trace, memory timelines and the
  // ranks a representative's memory rows are written for.
  std::vector<char> trace_rank_mask_;
  std::vector<core::MemoryPoint> memory_points_;  // one rank's timeline on its way to the sink
  // Where ranks run apart: the earliest time a rank stopped the world, and that rank.
  TimeNs stop_ns_ = INT64_MAX;
  int stopped_rank_ = -1;
  bool stop_at_mismatch_ = false;  // the stop is a collective mismatch's (run_events)
  int threads_ = 1;                // set_threads
  WorldResult result_;
};

}  // namespace prefetchlab::sim
