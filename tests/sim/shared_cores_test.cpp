// Processor sharing on a CPU-backed device (sim/ranks/shared_cores.hpp): streams and a communicator
// wired as World wires them, with hand-derived finish times.
#include "sim/ranks/shared_cores.hpp"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "sim/ranks/communicator.hpp"
#include "sim/ranks/device_stream.hpp"
#include "sim/engine/event_engine.hpp"
#include "sim/engine/host_task.hpp"

namespace prefetchlab::sim {
namespace {

// Every collective takes the same modelled time.
class FixedCost final : public CollectiveCostModel {
 public:
  explicit FixedCost(TimeNs ns) : ns_(ns) {}
  TimeNs duration_ns(const CollectiveShape&) const override { return ns_; }

 private:
  TimeNs ns_;
};

class Harness final : public StreamObserver, public CollectiveListener {
 public:
  Harness(int cores, int ranks, int ranks_per_node, TimeNs collective_ns, double collective_penalty = 0)
      : cost_(collective_ns),
        communicator_(engine_, cost_, ranks, ranks, ranks / ranks_per_node, *this),
        cores_(cores, ranks, ranks_per_node, collective_penalty, communicator_) {
    for (int r = 0; r < ranks; ++r) {
      events_.push_back(std::make_unique<EventTable>(engine_, resumer_));
      auto& table = *events_.back();
      compute_.push_back(std::make_unique<Stream>(engine_, table, *this, r, StreamKind::kCompute));
      copy_.push_back(std::make_unique<Stream>(engine_, table, *this, r, StreamKind::kReduceScatter));
      nccl_.push_back(std::make_unique<Stream>(engine_, table, *this, r, StreamKind::kNccl));
      compute_.back()->share_cores(&cores_);
      copy_.back()->share_cores(&cores_);
    }
  }

  void kernel(Stream& stream, TimeNs work_ns, int label) {
    StreamOp op;
    op.kind = OpKind::kKernel;
    op.duration_ns = work_ns;
    op.label = label;
    stream.push(op);
  }
  void collective(int rank) {
    CollectiveCall call;
    call.bytes = 1 << 20;
    StreamOp op;
    op.kind = OpKind::kCollective;
    op.collective = static_cast<std::int32_t>(communicator_.issue(rank, call));
    nccl_[static_cast<std::size_t>(rank)]->push(op);
  }

  void on_kernel_done(const Stream&, const StreamOp& op, TimeNs, TimeNs end_ns) override { done_ns[op.label] = end_ns; }
  void on_stall(const Stream&, const StreamOp&, TimeNs, TimeNs) override {}
  void on_collective_reached(Stream& stream, const StreamOp& op) override {
    communicator_.arrive(stream.rank(), op.collective, stream);
  }
  bool computing_at_arrival(int) override { return false; }
  double on_collective_start(std::int64_t, const CollectiveCall&, bool) override { return cores_.collective_started(); }
  void on_collective_done(std::int64_t seq, const CollectiveCall&, TimeNs, TimeNs end_ns) override {
    cores_.collective_finished();
    collective_done_ns[seq] = end_ns;
  }

  EventEngine engine_;
  CoroutineResumer resumer_;
  FixedCost cost_;
  Communicator communicator_;
  SharedCores cores_;
  std::vector<std::unique_ptr<EventTable>> events_;
  std::vector<std::unique_ptr<Stream>> compute_, copy_, nccl_;
  std::map<int, TimeNs> done_ns;
  std::map<std::int64_t, TimeNs> collective_done_ns;
};

TEST(SharedCores, TwoKernelsShareOneCoreAndNotTwo) {
  // One core: both start at 0 at half speed; the 100 ns kernel ends at 200 ns, having let the
  // 300 ns one do 100 ns of work, whose remaining 200 ns run alone until 400 ns (work is
  // conserved). Two cores: each kernel has one and runs at full speed.
  struct Case {
    int cores;
    TimeNs short_end_ns, long_end_ns;
  };
  for (const Case c : {Case{1, 200, 400}, Case{2, 100, 300}}) {
    Harness h(c.cores, /*ranks=*/1, /*ranks_per_node=*/1, 0);
    h.kernel(*h.compute_[0], 100, 1);
    h.kernel(*h.copy_[0], 300, 2);
    h.engine_.run();
    EXPECT_EQ(h.done_ns[1], c.short_end_ns) << c.cores << " core(s)";
    EXPECT_EQ(h.done_ns[2], c.long_end_ns) << c.cores << " core(s)";
  }
}

TEST(SharedCores, KernelsQueuedOnOneStreamDoNotCompete) {
  // One stream runs its kernels one after another: never more than one piece of work.
  Harness h(1, 1, 1, 0);
  h.kernel(*h.compute_[0], 100, 1);
  h.kernel(*h.compute_[0], 50, 2);
  h.engine_.run();
  EXPECT_EQ(h.done_ns[1], 100);
  EXPECT_EQ(h.done_ns[2], 150);
}

TEST(SharedCores, ACollectiveTakesOneCorePerRankAndPaysItsPenaltyOnlyWhileOversubscribed) {
  // 2 ranks on one node with 2 cores: the collective's two parts plus both compute kernels are
  // 4 pieces on 2 cores, all at half speed: the 100 ns kernels end at 200 ns, when the 400 ns
  // collective has done 100 ns; its other 300 ns run at full speed (2 parts on 2 cores): 500 ns.
  // With penalty 0.5 it runs at 1/3 speed (2 x 1.5) while oversubscribed, so by 200 ns it has
  // done 200/3 ns; the remaining 333.3 ns at full speed end at ceil(533.3) = 534 ns.
  struct Case {
    double penalty;
    TimeNs collective_end_ns;
  };
  for (const Case c : {Case{0, 500}, Case{0.5, 534}}) {
    Harness h(2, 2, 2, 400, c.penalty);
    h.kernel(*h.compute_[0], 100, 1);
    h.kernel(*h.compute_[1], 100, 2);
    h.collective(0);
    h.collective(1);
    h.engine_.run();
    EXPECT_EQ(h.done_ns[1], 200) << "penalty " << c.penalty;
    EXPECT_EQ(h.done_ns[2], 200) << "penalty " << c.penalty;
    EXPECT_EQ(h.collective_done_ns[0], c.collective_end_ns) << "penalty " << c.penalty;
  }
}

TEST(SharedCores, NodesDoNotShareCores) {
  // Ranks 0 and 1 on separate nodes of one core each: their kernels never compete.
  Harness h(1, 2, 1, 0);
  h.kernel(*h.compute_[0], 100, 1);
  h.kernel(*h.compute_[1], 100, 2);
  h.engine_.run();
  EXPECT_EQ(h.done_ns[1], 100);
  EXPECT_EQ(h.done_ns[2], 100);
}

TEST(SharedCores, AKernelStartingMidwaySlowsTheRunningOne) {
  // A: 300 ns from 0 alone; B: 100 ns pushed at 100 ns. From 100 ns both run at half speed:
  // B ends at 300 ns, A has done 100 + 100 = 200 ns by then and finishes its last 100 ns at 400.
  Harness h(1, 1, 1, 0);
  h.kernel(*h.compute_[0], 300, 1);
  struct Push final : EventHandler {
    Harness* h;
    void on_event(std::int64_t) override { h->kernel(*h->copy_[0], 100, 2); }
  } push;
  push.h = &h;
  h.engine_.schedule_at(100, push);
  h.engine_.run();
  EXPECT_EQ(h.done_ns[2], 300);
  EXPECT_EQ(h.done_ns[1], 400);
}

}  // namespace
}  // namespace prefetchlab::sim
