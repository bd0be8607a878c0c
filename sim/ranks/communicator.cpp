#include "sim/ranks/communicator.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

namespace prefetchlab::sim {

Communicator::Communicator(EventEngine& engine, const CollectiveCostModel& cost_model, int ranks, int world_size,
                           int nodes, CollectiveListener& listener)
    : Communicator(std::vector<EventEngine*>(static_cast<std::size_t>(ranks), &engine), cost_model, world_size, nodes,
                   listener) {}

Communicator::Communicator(std::vector<EventEngine*> rank_engines, const CollectiveCostModel& cost_model,
                           int world_size, int nodes, CollectiveListener& listener)
    : engines_(std::move(rank_engines)),
      cost_model_(cost_model),
      ranks_(static_cast<int>(engines_.size())),
      world_size_(world_size),
      nodes_(nodes),
      listener_(listener),
      issued_(engines_.size()),
      issued_base_(engines_.size(), 0) {
  if (std::any_of(engines_.begin(), engines_.end(), [&](const EventEngine* e) { return e != engines_.front(); })) {
    ports_.reserve(engines_.size());  // stays put: engines hold the ports' addresses
    for (int r = 0; r < ranks_; ++r) ports_.emplace_back(*this, r);
  }
}

std::int64_t Communicator::issue(int rank, const CollectiveCall& call) {
  auto& calls = issued_[static_cast<std::size_t>(rank)];
  calls.push_back(call);
  return issued_base_[static_cast<std::size_t>(rank)] + static_cast<std::int64_t>(calls.size() - 1);
}

const CollectiveCall& Communicator::call(int rank, std::int64_t seq) const {
  const std::int64_t base = issued_base_[static_cast<std::size_t>(rank)];
  if (seq < base) throw std::logic_error("collective call " + std::to_string(seq) + " of rank " + std::to_string(rank) + " was forgotten");
  return issued_[static_cast<std::size_t>(rank)][static_cast<std::size_t>(seq - base)];
}

void Communicator::keep_calls_of(std::vector<char> rank_mask) { keep_calls_ = std::move(rank_mask); }

Communicator::Slot& Communicator::slot(std::int64_t seq) {
  while (slot_base_ + static_cast<std::int64_t>(slots_.size()) <= seq) {
    slots_.push_back(Slot{});
    arrived_.resize(arrived_.size() + static_cast<std::size_t>(ranks_), nullptr);
  }
  return slots_[static_cast<std::size_t>(seq - slot_base_)];
}

void Communicator::forget_through(std::int64_t seq) {
  while (slot_base_ <= seq && !slots_.empty()) {
    slots_.pop_front();
    arrived_.erase(arrived_.begin(), arrived_.begin() + ranks_);
    ++slot_base_;
  }
  if (keep_calls_.empty()) return;
  for (std::size_t r = 0; r < issued_.size(); ++r) {
    if (keep_calls_[r]) continue;
    auto& calls = issued_[r];
    while (issued_base_[r] <= seq && !calls.empty()) {
      calls.pop_front();
      ++issued_base_[r];
    }
  }
}

void Communicator::arrive(int rank, std::int64_t seq, Stream& stream) {
  if (deferred_) {
    // Its slot was made when the collective before it started (settle_arrivals): growing the
    // slot list here would race with the other threads' arrivals.
    if (seq < slot_base_ || seq >= slot_base_ + static_cast<std::int64_t>(slots_.size())) {
      throw std::logic_error("a deferred arrival at a collective with no slot yet");
    }
    if (arrived(seq, rank)) throw std::logic_error("rank arrived twice at a collective");
    arrived(seq, rank) = &stream;
    const auto r = static_cast<std::size_t>(rank);
    noted_seq_[r] = seq;
    noted_arrival_ns_[r] = engine_of(rank).now_ns();
    noted_computing_[r] = listener_.computing_at_arrival(rank) ? 1 : 0;
    engine_of(rank).lower_limit_ns(noted_arrival_ns_[r]);
    return;
  }
  slot(seq);  // made by the first to arrive
  if (arrived(seq, rank)) throw std::logic_error("rank arrived twice at a collective");
  arrived(seq, rank) = &stream;
  count_arrival(seq, engine_of(rank).now_ns(), listener_.computing_at_arrival(rank));
  // Ranks apart: this rank's host may no longer run alone past the collective's earliest start.
  if (ranks_apart()) engine_of(rank).lower_limit_ns(open_latest_arrival_ns_);
  if (!complete_if_everyone_arrived(seq)) engine_of(rank).stop();
}

void Communicator::count_arrival(std::int64_t seq, TimeNs arrival_ns, bool computing) {
  Slot& s = slot(seq);
  if (s.arrivals == 0 || arrival_ns > open_latest_arrival_ns_) open_latest_arrival_ns_ = arrival_ns;
  open_seq_ = seq;
  s.computing = s.computing || computing;
  ++s.arrivals;
}

bool Communicator::complete_if_everyone_arrived(std::int64_t seq) {
  if (slot(seq).arrivals < ranks_) return true;
  open_seq_ = -1;
  // Everyone is here: the calls must be the same collective, or real NCCL would hang (or
  // corrupt memory) — stop the world and say where.
  const CollectiveCall& reference = call(0, seq);
  for (int r = 1; r < ranks_; ++r) {
    const CollectiveCall& other = call(r, seq);
    if (other.kind != reference.kind || other.bytes != reference.bytes) {
      CollectiveMismatch m;
      m.seq = seq;
      m.time_ns = open_latest_arrival_ns_;
      for (int q = 0; q < ranks_; ++q) {
        m.ranks.push_back(q);
        m.calls.push_back(call(q, seq));
      }
      mismatch_ = std::move(m);
      return false;
    }
  }
  start(seq, reference);
  return true;
}

void Communicator::defer_starts(bool defer) {
  if (defer == deferred_) return;
  if (!ranks_apart()) throw std::logic_error("deferred collective starts need ranks apart");
  if (!defer) settle_arrivals();
  deferred_ = defer;
  const auto ranks = static_cast<std::size_t>(ranks_);
  noted_seq_.assign(ranks, -1);
  noted_arrival_ns_.assign(ranks, 0);
  noted_computing_.assign(ranks, 0);
  if (!defer) {
    // Back to counting at once: the ranks that left the running collective while deferred.
    if (running_.seq >= 0) {
      Slot& s = slot(running_.seq);
      s.done = static_cast<int>(std::count_if(left_seq_.begin(), left_seq_.end(),
                                              [&](std::int64_t left) { return left >= running_.seq; }));
    }
    return;
  }
  if (running_.seq >= 0 || open_seq_ >= 0) throw std::logic_error("collective starts deferred mid-collective");
  left_seq_.assign(ranks, slot_base_ - 1);
  // Nothing open or running: the next arrivals land at slot_base_.
  if (slots_.empty()) slot(slot_base_);
}

bool Communicator::settle_arrivals() {
  if (!deferred_) return false;
  finish_running_if_left();
  std::int64_t seq = -1;
  for (int r = 0; r < ranks_; ++r) {
    const auto i = static_cast<std::size_t>(r);
    if (noted_seq_[i] < 0) continue;
    if (seq >= 0 && noted_seq_[i] != seq) throw std::logic_error("ranks arrived at two open collectives");
    seq = noted_seq_[i];
    count_arrival(seq, noted_arrival_ns_[i], noted_computing_[i] != 0);
    noted_seq_[i] = -1;
  }
  if (seq < 0 || slot(seq).arrivals < ranks_) return false;
  const bool started = complete_if_everyone_arrived(seq);
  if (started) slot(seq + 1);  // where the next arrivals land
  return started;
}

void Communicator::finish_running_if_left() {
  if (running_.seq < 0) return;
  const std::int64_t seq = running_.seq;
  for (const std::int64_t left : left_seq_) {
    if (left < seq) return;
  }
  running_.seq = -1;
  listener_.on_collective_done(seq, call(0, seq), slot(seq).start_ns, running_end_ns_);
  forget_through(seq);
}

// It starts at the last arrival in time: where ranks run apart, the last to arrive in the order
// they were run need not be the latest.
void Communicator::start(std::int64_t seq, const CollectiveCall& reference) {
  Slot& s = slot(seq);
  s.start_ns = open_latest_arrival_ns_;
  const TimeNs base_ns = cost_model_.duration_ns({reference.kind, reference.bytes, world_size_, nodes_});
  // The communicator's FIFO: every rank's NCCL stream is inside the running collective, so the
  // next one cannot have arrived everywhere yet.
  if (running_.seq >= 0) throw std::logic_error("two collectives running on one communicator");
  const double stretch = listener_.on_collective_start(seq, reference, s.computing);
  running_ = Running{seq, static_cast<double>(base_ns), 0.0, s.start_ns, stretch, running_.generation + 1};
  const TimeNs duration_ns = static_cast<TimeNs>(std::llround(static_cast<double>(base_ns) * stretch));
  running_end_ns_ = s.start_ns + duration_ns;
  if (!ranks_apart()) {
    for (int r = 0; r < ranks_; ++r) listener_.on_rank_collective_start(r);
    engines_.front()->schedule_after(duration_ns, *this, seq * kGenerations + running_.generation % kGenerations);
    return;
  }
  // Every other rank has run no further than this start (horizon_ns): one that is there now
  // starts it at once, as it would have with all ranks in one queue; one still behind gets it
  // as an event at that time.
  for (int r = 0; r < ranks_; ++r) {
    EventEngine& engine = engine_of(r);
    auto& port = ports_[static_cast<std::size_t>(r)];
    if (engine.now_ns() == s.start_ns && !deferred_) {
      listener_.on_rank_collective_start(r);
    } else {
      engine.schedule_at(s.start_ns, port, seq * 2);
    }
    engine.schedule_at(s.start_ns + duration_ns, port, seq * 2 + 1);
  }
}

void Communicator::set_slowdown(double slowdown) {
  if (running_.seq < 0 || slowdown == running_.slowdown) return;
  if (ranks_apart()) throw std::logic_error("a collective re-timed while ranks run apart");
  EventEngine& engine = *engines_.front();
  const TimeNs now = engine.now_ns();
  running_.done_work_ns += static_cast<double>(now - running_.progress_at_ns) / running_.slowdown;
  running_.progress_at_ns = now;
  running_.slowdown = slowdown;
  ++running_.generation;
  const double remaining = std::max(0.0, running_.work_ns - running_.done_work_ns);
  engine.schedule_after(static_cast<TimeNs>(std::ceil(remaining * slowdown - 1e-9)), *this,
                        running_.seq * kGenerations + running_.generation % kGenerations);
}

void Communicator::on_event(std::int64_t tag) {
  const std::int64_t seq = tag / kGenerations;
  if (seq != running_.seq || tag % kGenerations != running_.generation % kGenerations) return;  // rescheduled
  running_.seq = -1;
  Slot& s = slot(seq);
  const CollectiveCall& c = call(0, seq);
  const TimeNs end_ns = engines_.front()->now_ns();
  listener_.on_collective_done(seq, c, s.start_ns, end_ns);
  for (int r = 0; r < ranks_; ++r) listener_.on_rank_collective_done(r, seq, c, s.start_ns, end_ns);
  for (int r = 0; r < ranks_; ++r) arrived(seq, r)->collective_done();
  forget_through(seq);
}

void Communicator::on_rank_event(int rank, std::int64_t tag) {
  const std::int64_t seq = tag / 2;
  if (tag % 2 == 0) {
    listener_.on_rank_collective_start(rank);
    return;
  }
  Slot& s = slot(seq);
  if (deferred_) {
    // Only this rank's entries: its own call (every rank's matched), and that it left;
    // settle_arrivals finishes the collective once all have.
    listener_.on_rank_collective_done(rank, seq, call(rank, seq), s.start_ns, engine_of(rank).now_ns());
    left_seq_[static_cast<std::size_t>(rank)] = seq;
    arrived(seq, rank)->collective_done();
    return;
  }
  const CollectiveCall& c = call(0, seq);
  const TimeNs end_ns = engine_of(rank).now_ns();
  listener_.on_rank_collective_done(rank, seq, c, s.start_ns, end_ns);
  // The last rank to leave frees the communicator before its stream moves on: that may reach
  // the next collective, and be its last arrival.
  const bool last = ++s.done == ranks_;
  if (last) {
    running_.seq = -1;
    listener_.on_collective_done(seq, c, s.start_ns, end_ns);
  }
  arrived(seq, rank)->collective_done();
  if (last) forget_through(seq);
}

std::vector<int> Communicator::ranks_waiting() const {
  std::vector<int> waiting;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (s.arrivals == 0 || s.arrivals == ranks_) continue;
    for (int r = 0; r < ranks_; ++r) {
      if (arrived_[i * static_cast<std::size_t>(ranks_) + static_cast<std::size_t>(r)]) waiting.push_back(r);
    }
    break;
  }
  return waiting;
}

}  // namespace prefetchlab::sim
