#pragma once
// One NCCL communicator over a group of ranks. Collectives on a communicator run in host issue
// order on every rank (ProcessGroupNCCL uses one internal stream per communicator: pytorch/pytorch
// torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp; docs/source/notes/fsdp.rst says the same of
// FSDP), and a collective starts only when every rank has reached it. Ranks that reach different
// collectives (kind or size) are a *collective mismatch*: the hang a real job would suffer,
// reported with where it happened.
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "sim/collective_cost_model.hpp"
#include "sim/device_stream.hpp"
#include "sim/event_engine.hpp"

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
  std::vector<int> ranks;
  std::vector<CollectiveCall> calls;  // per rank in `ranks`
};

// Told when a collective starts (everyone arrived) and ends; the start hook returns a factor that
// stretches the collective (contention with compute: Lee et al., arXiv:2507.03114;
// NVIDIA/nccl #1433).
class CollectiveListener {
 public:
  // Whether rank `rank`'s compute stream runs a kernel as the rank reaches a collective: taken at
  // each rank's own arrival, so the answer does not depend on the order in which ranks reaching
  // it at the same nanosecond are processed (nor on how many identical ranks are simulated).
  virtual bool computing_at_arrival(int rank) = 0;
  // `computing`: some rank was computing at its arrival.
  virtual double on_collective_start(std::int64_t seq, const CollectiveCall& call, bool computing) = 0;
  virtual void on_collective_done(std::int64_t seq, const CollectiveCall& call, TimeNs start_ns,
                                  TimeNs end_ns) = 0;

 protected:
  ~CollectiveListener() = default;
};

class Communicator final : public EventHandler {
 public:
  // `ranks` members arrive at each collective; its cost is that of `world_size` ranks on `nodes`
  // nodes. They differ where one rank stands for identical others (rank_symmetry.hpp).
  Communicator(EventEngine& engine, const CollectiveCostModel& cost_model, int ranks, int world_size, int nodes,
               CollectiveListener& listener);

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

  // The running collective runs `slowdown` times slower from now on (1 = its modelled time);
  // its remaining work is rescheduled at the new speed. No-op when none runs.
  void set_slowdown(double slowdown);

 private:
  struct Slot {
    int arrivals = 0;
    bool computing = false;  // some rank's compute stream ran a kernel at its arrival
    TimeNs start_ns = 0;
  };
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

  EventEngine& engine_;
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
};

}  // namespace prefetchlab::sim
