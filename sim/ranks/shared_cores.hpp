#pragma once
// Processor sharing on a CPU-backed device (calibration `contention_model: shared_cores`): the
// host-thread device (gpu_backend/host/host_device.hpp) runs every stream of every rank as a thread,
// and all ranks of a node share the machine's cores. With n pieces of work running on c cores,
// each runs at min(1, c / n) of its own speed: a stream's running kernel is one piece, a running
// collective one per participating rank (each rank's communication worker copies or reduces its
// own part). Whenever n changes, every running piece on that node is re-timed.
//
// Not modelled: the host (executor) threads' own CPU time, which is small beside kernels here
// (hook and launch costs of microseconds), and the scheduler's wake-up latency.
#include <vector>

namespace prefetchlab::sim {

class Communicator;
class Stream;

class SharedCores {
 public:
  // `ranks_per_node` consecutive ranks form a node.
  // `collective_penalty`: a collective's extra stretch while its node is oversubscribed
  // (calibration shared_cores_collective_penalty).
  SharedCores(int cores, int ranks, int ranks_per_node, double collective_penalty, Communicator& communicator);

  // A stream of its rank starts (before it schedules the completion) / finished a kernel.
  void kernel_started(Stream& stream);
  void kernel_finished(Stream& stream);
  // Every rank's part of a collective starts / ended. The start returns the collective's
  // slowdown: that of its most loaded node, since the slowest rank finishes it.
  double collective_started();
  void collective_finished();

 private:
  struct Node {
    int collective_parts = 0;      // ranks of this node inside a running collective
    std::vector<Stream*> kernels;  // streams running a kernel, in start order
    int running() const { return collective_parts + static_cast<int>(kernels.size()); }
  };
  Node& node_of(const Stream& stream);
  double slowdown(const Node& node) const;
  double collective_slowdown() const;
  void retime(Node& node);

  double cores_;
  int ranks_per_node_;
  double collective_penalty_;
  int collectives_running_ = 0;
  std::vector<Node> nodes_;
  Communicator& communicator_;
};

}  // namespace prefetchlab::sim
