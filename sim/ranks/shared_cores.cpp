#include "sim/ranks/shared_cores.hpp"

#include <algorithm>
#include <stdexcept>

#include "sim/ranks/communicator.hpp"
#include "sim/ranks/device_stream.hpp"

namespace prefetchlab::sim {

SharedCores::SharedCores(int cores, int ranks, int ranks_per_node, double collective_penalty,
                         Communicator& communicator)
    : cores_(cores), ranks_per_node_(ranks_per_node), collective_penalty_(collective_penalty), communicator_(communicator) {
  if (cores < 1 || ranks < 1 || ranks_per_node < 1) throw std::invalid_argument("SharedCores: counts must be >= 1");
  nodes_.resize(static_cast<std::size_t>((ranks + ranks_per_node - 1) / ranks_per_node));
}

SharedCores::Node& SharedCores::node_of(const Stream& stream) {
  return nodes_.at(static_cast<std::size_t>(stream.rank() / ranks_per_node_));
}

double SharedCores::slowdown(const Node& node) const {
  return std::max(1.0, static_cast<double>(node.running()) / cores_);
}

double SharedCores::collective_slowdown() const {
  double worst = 1.0;
  for (const Node& node : nodes_) {
    if (node.collective_parts > 0) worst = std::max(worst, slowdown(node));
  }
  return worst > 1.0 ? worst * (1.0 + collective_penalty_) : worst;
}

// Every running kernel of the node, and the running collective (if it has parts here), at the
// node's new speed. Streams and the communicator ignore a slowdown they already run at.
void SharedCores::retime(Node& node) {
  const double s = slowdown(node);
  for (Stream* stream : node.kernels) stream->set_slowdown(s);
  if (node.collective_parts > 0) communicator_.set_slowdown(collective_slowdown());
}

void SharedCores::kernel_started(Stream& stream) {
  Node& node = node_of(stream);
  node.kernels.push_back(&stream);
  retime(node);
}

void SharedCores::kernel_finished(Stream& stream) {
  Node& node = node_of(stream);
  const auto it = std::find(node.kernels.begin(), node.kernels.end(), &stream);
  if (it == node.kernels.end()) throw std::logic_error("SharedCores: a kernel finished that never started");
  node.kernels.erase(it);
  stream.set_slowdown(1.0);
  retime(node);
}

double SharedCores::collective_started() {
  if (collectives_running_++ > 0) throw std::logic_error("SharedCores: two collectives at once on one communicator");
  // The data-parallel communicator spans every rank (world size = nodes x ranks per node).
  for (Node& node : nodes_) node.collective_parts = ranks_per_node_;
  for (Node& node : nodes_) retime(node);
  return collective_slowdown();
}

void SharedCores::collective_finished() {
  if (collectives_running_-- != 1) throw std::logic_error("SharedCores: a collective finished that never started");
  for (Node& node : nodes_) {
    node.collective_parts = 0;
    retime(node);
  }
}

}  // namespace prefetchlab::sim
