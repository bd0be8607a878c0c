#pragma once
// One NCCL communicator over a group of ranks. Collectives on a communicator run in host issue
// order on every rank (ProcessGroupNCCL uses one internal stream per communicator: pytorch/pytorch
// torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp; docs/source/notes/fsdp.rst says the same of
// FSDP), and a collective starts only when every rank has reached it. Ranks that reach different
// collectives (kind or size) are a *collective mismatch*: the hang a real job would suffer,
// reported with where it happened.
#include <cstdint>
#include <climits>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "sim/cost/collective_cost_model.hpp"
#include "sim/ranks/device_stream.hpp"
#include "sim/engine/event_engine.hpp"

namespace prefetchlab::sim {

// What one rank asked for; ranks must agree on `kind` and `bytes`.
struct CollectiveCall {
  CollectiveKind kind = CollectiveKind::kAllGather;
  std::int64_t bytes = 0;  // nccl-tests size: the whole gathered / reduced buffer
  std::int64_t numel = 0;  // unpadded elements (trace)
  std::int32_t iteration = 0;
  std::int32_t label = -1;  // interned "kind" of the call (on_demand, prefetch, grad_bucket, …)
  std::int32_t issued_by = -1;  // module index whose hook issued it (-1: none)
  std::int32_t phase = 0;       // core::Phase as int
  std::vector<int> param_ids;   // what is gathered / reduced (trace only; not compared)
};

struct CollectiveMismatch {
  std::int64_t seq = 0;  // position in the communicator's issue order
  TimeNs time_ns = 0;    // the last arrival's, when the hang shows
  std::vector<int> ranks;
  std::vector<CollectiveCall> calls;  // per rank in `ranks`
};

// Told when a collective starts (everyone arrived) and ends; the start hook returns a factor that
// stretches the collective (contention with compute: Lee et al., arXiv:2507.03114;
// NVIDIA/nccl #1433). The per-rank hooks come at that instant of each rank's own timeline: all at
// once where ranks share one event engine, each from its own queue where they run apart.
class CollectiveListener {
 public:
  // Whether rank `rank`'s compute stream runs a kernel as the rank reaches a collective: taken at
  // each rank's own arrival, so the answer does not depend on the order in which ranks reaching
  // it at the same nanosecond are processed (nor on how many identical ranks are simulated).
  virtual bool computing_at_arrival(int rank) = 0;
  // `computing`: some rank was computing at its arrival.
  virtual double on_collective_start(std::int64_t seq, const CollectiveCall& call, bool computing) = 0;
  virtual void on_rank_collective_start(int /*rank*/) {}
  virtual void on_collective_done(std::int64_t seq, const CollectiveCall& call, TimeNs start_ns,
                                  TimeNs end_ns) = 0;
  virtual void on_rank_collective_done(int /*rank*/, std::int64_t /*seq*/, const CollectiveCall& /*call*/,
                                       TimeNs /*start_ns*/, TimeNs /*end_ns*/) {}

 protected:
  ~CollectiveListener() = default;
};

class Communicator final : public EventHandler {
 public:
  // `ranks` members arrive at each collective; its cost is that of `world_size` ranks on `nodes`
  // nodes. They differ where one rank stands for identical others (rank_symmetry.hpp).
  Communicator(EventEngine& engine, const CollectiveCostModel& cost_model, int ranks, int world_size, int nodes,
               CollectiveListener& listener);
  // Each rank with its own event engine (`rank_engines[r]`, one per member): ranks run apart
  // between the points where they meet (World's rank-by-rank order), so a collective's start
  // and end reach each rank as events in its own queue, and horizon_ns() says how far a rank
  // may run before the collective it waits in could start. Where every entry is one engine this
  // is the constructor above.
  Communicator(std::vector<EventEngine*> rank_engines, const CollectiveCostModel& cost_model, int world_size,
               int nodes, CollectiveListener& listener);

  // Rank `rank` issues its next collective (host time); returns the call's sequence number.
  std::int64_t issue(int rank, const CollectiveCall& call);
  // A call of `rank`: any it issued when its calls are kept (the default), else one not yet
  // finished (std::logic_error for a forgotten one).
  const CollectiveCall& call(int rank, std::int64_t seq) const;
  // A byte per rank: 1 keeps every call the rank issues for the whole run (its trace names them),
  // 0 forgets each once finished, so memory does not grow with the run's collectives x ranks.
  void keep_calls_of(std::vector<char> rank_mask);
  // The rank's NCCL stream reached call `seq`.
  void arrive(int rank, std::int64_t seq, Stream& stream);

  const std::optional<CollectiveMismatch>& mismatch() const { return mismatch_; }
  // Calls some rank issued that not every rank has reached (a hang if the run stops there).
  std::vector<int> ranks_waiting() const;

  void on_event(std::int64_t tag) override;

  // Until when rank `rank` may run on its own: the earliest the collective it has reached (and
  // others not yet) can start, which is the latest arrival so far (it starts at the last one);
  // kNoHorizon when the rank waits in no collective that has yet to start. Its events before
  // this time cannot be touched by any other rank.
  static constexpr TimeNs kNoHorizon = INT64_MAX;
  TimeNs horizon_ns(int rank) const {
    // An arrival not yet counted: the collective starts no earlier than it, nor than any counted.
    if (deferred_ && noted_seq_[static_cast<std::size_t>(rank)] >= 0) {
      const TimeNs noted_ns = noted_arrival_ns_[static_cast<std::size_t>(rank)];
      return open_seq_ >= 0 && open_latest_arrival_ns_ > noted_ns ? open_latest_arrival_ns_ : noted_ns;
    }
    if (open_seq_ < 0 || !arrived_[static_cast<std::size_t>(open_seq_ - slot_base_) * static_cast<std::size_t>(ranks_) +
                                   static_cast<std::size_t>(rank)]) {
      return kNoHorizon;
    }
    return open_latest_arrival_ns_;
  }

  // Ranks apart on several threads (World::run_events): an arrival is only noted (by the
  // arriving rank's thread, in that rank's own entries) and settle_arrivals(), called between
  // the threads' runs, counts it, and starts the collective once every rank is there. Every rank
  // then gets the start as an event, the last to arrive too, so which thread ran first never
  // shows. Off (the default), an arrival is counted at once and the last one starts the
  // collective.
  void defer_starts(bool defer);
  // Counts the arrivals noted since the last call and starts the collective they complete (or
  // notes a mismatch: mismatch()); finishes the collective every rank has left first. Returns
  // whether a collective started.
  bool settle_arrivals();

  // The running collective runs `slowdown` times slower from now on (1 = its modelled time);
  // its remaining work is rescheduled at the new speed. No-op when none runs.
  void set_slowdown(double slowdown);

 private:
  struct Slot {
    int arrivals = 0;
    int done = 0;            // ranks told of its end (ranks apart)
    bool computing = false;  // some rank's compute stream ran a kernel at its arrival
    TimeNs start_ns = 0;
  };
  // A rank's own view of the communicator where ranks run apart: the start and end of a
  // collective arrive as events in that rank's queue (tag = seq * 2 + 1 for the end).
  class RankPort final : public EventHandler {
   public:
    RankPort(Communicator& communicator, int rank) : communicator_(&communicator), rank_(rank) {}
    void on_event(std::int64_t tag) override { communicator_->on_rank_event(rank_, tag); }

   private:
    Communicator* communicator_;
    int rank_;
  };
  bool ranks_apart() const { return !ports_.empty(); }
  EventEngine& engine_of(int rank) const { return *engines_[static_cast<std::size_t>(rank)]; }
  void start(std::int64_t seq, const CollectiveCall& reference);
  // Counts an arrival at `seq` at `arrival_ns`.
  void count_arrival(std::int64_t seq, TimeNs arrival_ns, bool computing);
  // Where every rank has arrived at `seq`, checks the calls match and starts the collective;
  // false when they do not (mismatch() says how).
  bool complete_if_everyone_arrived(std::int64_t seq);
  // Ends the running collective's bookkeeping once every rank has left it (deferred starts).
  void finish_running_if_left();
  void on_rank_event(int rank, std::int64_t tag);
  // The collective in progress: modelled work, the part done (at full speed) as of
  // `progress_at_ns`, its current slowdown, and a generation that tells a rescheduled
  // completion from the superseded one (event tag = seq * kGenerations + generation).
  struct Running {
    std::int64_t seq = -1;
    double work_ns = 0;
    double done_work_ns = 0;
    TimeNs progress_at_ns = 0;
    double slowdown = 1.0;
    std::int64_t generation = 0;
  };
  static constexpr std::int64_t kGenerations = 1 << 16;
  Slot& slot(std::int64_t seq);
  // The stream each rank arrived on at collective `seq` (null until it arrives); one flat
  // array from slot_base_ on, `ranks_` entries per seq, so a collective allocates no list of
  // its own; finished collectives' entries are dropped from the front.
  Stream*& arrived(std::int64_t seq, int rank) {
    return arrived_[static_cast<std::size_t>(seq - slot_base_) * static_cast<std::size_t>(ranks_) +
                    static_cast<std::size_t>(rank)];
  }
  // Drops what finished collectives up to `seq` left: their slots, arrivals and (for ranks
  // whose calls are not kept) calls.
  void forget_through(std::int64_t seq);

  std::vector<EventEngine*> engines_;  // per rank; every entry the same one unless ranks run apart
  std::vector<RankPort> ports_;        // per rank where ranks run apart, else empty
  const CollectiveCostModel& cost_model_;
  int ranks_;
  int world_size_;
  int nodes_;
  CollectiveListener& listener_;
  std::vector<std::deque<CollectiveCall>> issued_;  // per rank, in issue order from issued_base_
  std::vector<std::int64_t> issued_base_;           // per rank: seq of issued_[rank].front()
  std::vector<char> keep_calls_;                    // per rank; empty = keep every rank's
  std::deque<Slot> slots_;                          // by seq from slot_base_
  std::int64_t slot_base_ = 0;
  std::deque<Stream*> arrived_;                     // by seq from slot_base_, then rank
  std::optional<CollectiveMismatch> mismatch_;
  Running running_;
  // The collective some ranks reached and that has yet to start (-1: none), and its latest
  // arrival so far.
  std::int64_t open_seq_ = -1;
  TimeNs open_latest_arrival_ns_ = 0;
  // Deferred starts (defer_starts): per rank, the arrival noted and not yet counted (seq, or -1;
  // its time and whether its compute stream ran), and the last collective it has left. Each
  // rank's thread writes only its own entries; settle_arrivals reads them between runs.
  bool deferred_ = false;
  std::vector<std::int64_t> noted_seq_;
  std::vector<TimeNs> noted_arrival_ns_;
  std::vector<char> noted_computing_;
  std::vector<std::int64_t> left_seq_;
  TimeNs running_end_ns_ = 0;  // the running collective's end (deferred starts)
};

}  // namespace prefetchlab::sim
