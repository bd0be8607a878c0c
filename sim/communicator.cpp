#include "communicator.hpp"

#include <cmath>
#include <stdexcept>

namespace prefetchlab::sim {

Communicator::Communicator(EventEngine& engine, const CollectiveCostModel& cost_model, int ranks,
                           int nodes, CollectiveListener& listener)
    : engine_(engine),
      cost_model_(cost_model),
      ranks_(ranks),
      nodes_(nodes),
      listener_(listener),
      issued_(static_cast<std::size_t>(ranks)) {}

std::int64_t Communicator::issue(int rank, const CollectiveCall& call) {
  auto& calls = issued_[static_cast<std::size_t>(rank)];
  calls.push_back(call);
  return static_cast<std::int64_t>(calls.size() - 1);
}

const CollectiveCall& Communicator::call(int rank, std::int64_t seq) const {
  return issued_[static_cast<std::size_t>(rank)][static_cast<std::size_t>(seq)];
}

Communicator::Slot& Communicator::slot(std::int64_t seq) {
  while (static_cast<std::int64_t>(slots_.size()) <= seq) {
    slots_.push_back(Slot{});
    arrived_.resize(arrived_.size() + static_cast<std::size_t>(ranks_), nullptr);
  }
  return slots_[static_cast<std::size_t>(seq)];
}

void Communicator::arrive(int rank, std::int64_t seq, Stream& stream) {
  Slot& s = slot(seq);
  if (arrived(seq, rank)) throw std::logic_error("rank arrived twice at a collective");
  arrived(seq, rank) = &stream;
  if (++s.arrivals < ranks_) return;

  // Everyone is here: the calls must be the same collective, or real NCCL would hang (or
  // corrupt memory) — stop the world and say where.
  const CollectiveCall& reference = call(0, seq);
  for (int r = 1; r < ranks_; ++r) {
    const CollectiveCall& other = call(r, seq);
    if (other.kind != reference.kind || other.bytes != reference.bytes) {
      CollectiveMismatch m;
      m.seq = seq;
      for (int q = 0; q < ranks_; ++q) {
        m.ranks.push_back(q);
        m.calls.push_back(call(q, seq));
      }
      mismatch_ = std::move(m);
      engine_.stop();
      return;
    }
  }
  s.start_ns = engine_.now_ns();
  const TimeNs base_ns = cost_model_.duration_ns({reference.kind, reference.bytes, ranks_, nodes_});
  const double stretch = listener_.on_collective_start(seq, reference);
  engine_.schedule_after(static_cast<TimeNs>(std::llround(static_cast<double>(base_ns) * stretch)), *this, seq);
}

void Communicator::on_event(std::int64_t seq) {
  Slot& s = slot(seq);
  listener_.on_collective_done(seq, call(0, seq), s.start_ns, engine_.now_ns());
  for (int r = 0; r < ranks_; ++r) arrived(seq, r)->collective_done();
}

std::vector<int> Communicator::ranks_waiting() const {
  std::vector<int> waiting;
  for (std::size_t seq = 0; seq < slots_.size(); ++seq) {
    const Slot& s = slots_[seq];
    if (s.arrivals == 0 || s.arrivals == ranks_) continue;
    for (int r = 0; r < ranks_; ++r) {
      if (arrived_[seq * static_cast<std::size_t>(ranks_) + static_cast<std::size_t>(r)]) waiting.push_back(r);
    }
    break;
  }
  return waiting;
}

}  // namespace prefetchlab::sim
