#include "sim/ranks/device_stream.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "sim/ranks/shared_cores.hpp"

namespace prefetchlab::sim {
namespace {
// Event tags: -1 wakes the stream; a non-negative tag is the generation of a kernel completion.
constexpr std::int64_t kTagWake = -1;
TimeNs stretched(double work_ns, double slowdown) {
  return static_cast<TimeNs>(std::ceil(work_ns * slowdown - 1e-9));
}
}  // namespace

const char* stream_kind_name(StreamKind kind) {
  switch (kind) {
    case StreamKind::kCompute: return "compute";
    case StreamKind::kAllGather: return "all-gather";
    case StreamKind::kReduceScatter: return "reduce-scatter";
    case StreamKind::kNccl: return "nccl";
  }
  return "?";
}

std::int32_t EventTable::create() {
  if (count_ == slots_.size()) grow();
  DeviceEvent& event = slots_[(head_ + count_) & (slots_.size() - 1)];
  event.signaled_ns = -1;
  event.notify = nullptr;
  event.notify_tag = 0;
  event.waiting_host = nullptr;
  event.waiting_stream_count = 0;
  event.kept_seq = -1;
  ++count_;
  return next_id() - 1;
}

void EventTable::keep_time(std::int32_t id) {
  if (!kept_.empty() && kept_.back().id >= id) throw std::logic_error("kept device event times out of order");
  at(id).kept_seq = kept_head_ + static_cast<std::int64_t>(kept_.size());
  kept_.push_back({id, -1});
}

std::vector<EventTable::KeptTime>::const_iterator EventTable::first_kept_from(std::int32_t id) const {
  return std::lower_bound(kept_.begin(), kept_.end(), id,
                          [](const KeptTime& k, std::int32_t wanted) { return k.id < wanted; });
}

TimeNs EventTable::signaled_ns(std::int32_t id) const {
  if (id >= base_) return slots_[index(id)].signaled_ns;
  // Forgotten: a kept time, read by the world in id order once per iteration.
  const auto it = first_kept_from(id);
  if (it == kept_.end() || it->id != id) throw_forgotten(id);
  return it->signaled_ns;
}

void EventTable::forget_kept_before(std::int32_t id) {
  const auto end = first_kept_from(id);
  kept_head_ += end - kept_.cbegin();
  kept_.erase(kept_.begin(), end);  // an iteration's worth, once per iteration
}

void EventTable::grow() {
  std::vector<DeviceEvent> bigger(slots_.empty() ? 64 : 2 * slots_.size());  // a power of two
  for (std::size_t i = 0; i < count_; ++i) bigger[i] = std::move(slots_[(head_ + i) & (slots_.size() - 1)]);
  slots_ = std::move(bigger);
  head_ = 0;
}

void EventTable::throw_forgotten(std::int32_t id) {
  throw std::logic_error("device event " + std::to_string(id) + " was already forgotten");
}

void EventTable::forget_signalled() {
  while (count_ > 0 && slots_[head_].signaled_ns >= 0) {
    head_ = (head_ + 1) & (slots_.size() - 1);
    --count_;
    ++base_;
  }
}

void EventTable::signal(std::int32_t id) {
  DeviceEvent& event = at(id);
  if (event.signaled_ns >= 0) throw std::logic_error("device event signalled twice");
  event.signaled_ns = engine_.now_ns();
  // Waiters continue through the event queue (not by direct call) so that everything that
  // happens at one instant runs in a deterministic (time, sequence) order without recursion.
  for (int i = 0; i < event.waiting_stream_count; ++i) streams_[event.waiting_streams[i]]->wake();
  if (event.waiting_host) {
    engine_.schedule_at(engine_.now_ns(), resumer_, CoroutineResumer::tag_of(event.waiting_host));
  }
  if (event.notify) engine_.schedule_at(engine_.now_ns(), *event.notify, event.notify_tag);
  event.waiting_stream_count = 0;
  event.waiting_host = nullptr;
  if (event.kept_seq >= 0) kept_[static_cast<std::size_t>(event.kept_seq - kept_head_)].signaled_ns = event.signaled_ns;
  // Nothing reads a signalled event but through signaled() (true once forgotten) or a kept
  // time, so the ring forgets from its oldest event on as soon as it can: it holds the events
  // in flight, not an iteration of them (32k per rank for Llama-2-70B).
  if (id == base_) forget_signalled();
}

std::uint8_t EventTable::add_stream(Stream* stream) {
  if (streams_.size() > 255) throw std::logic_error("more than 256 streams on one event table");
  streams_.push_back(stream);
  return static_cast<std::uint8_t>(streams_.size() - 1);
}

void EventTable::add_waiting_stream(std::int32_t id, std::uint8_t stream_index) {
  DeviceEvent& event = at(id);
  if (event.waiting_stream_count == DeviceEvent::kMaxWaitingStreams) {
    throw std::logic_error("more streams wait on one device event than it holds");
  }
  event.waiting_streams[event.waiting_stream_count++] = stream_index;
}

void EventTable::set_waiting_host(std::int32_t id, std::coroutine_handle<> host) {
  DeviceEvent& event = at(id);
  if (event.waiting_host) throw std::logic_error("two host waits on one device event");
  event.waiting_host = host;
}

void Stream::push(const StreamOp& op) {
  queue_.push_back(op);
  ++enqueued_ops_;
  // Pushes come from a host thread's event, never from inside this stream's own advance(), so a
  // ready stream can start the operation now: same time, same order, one event fewer.
  if (state_ == State::kReady && !wake_scheduled_) advance();
}

TimeNs Stream::backlog_ns(TimeNs cap_ns) const {
  if (queue_.empty()) return 0;
  double work_ns = 0;  // full-speed nanoseconds
  std::size_t i = 0;
  switch (state_) {
    case State::kRunningKernel: {
      const double done = kernel_done_work_ns_ + static_cast<double>(engine_.now_ns() - kernel_progress_at_ns_) / slowdown_;
      work_ns = std::max(0.0, static_cast<double>(queue_.front().duration_ns) - done);
      i = 1;
      break;
    }
    case State::kBlockedOnEvent:
    case State::kInCollective: return cap_ns;
    case State::kReady: break;
  }
  for (; i < queue_.size(); ++i) {
    const StreamOp& op = queue_.at(i);
    if (op.kind == OpKind::kCollective) return cap_ns;
    if (op.kind == OpKind::kWait && !events_.signaled(op.event)) return cap_ns;
    if (op.kind == OpKind::kKernel) work_ns += static_cast<double>(op.duration_ns);
    if (work_ns * slowdown_ >= static_cast<double>(cap_ns)) return cap_ns;
  }
  return std::min(cap_ns, stretched(work_ns, slowdown_));
}

void Stream::wake() {
  if (wake_scheduled_) return;
  wake_scheduled_ = true;
  engine_.schedule_at(engine_.now_ns(), *this, kTagWake);
}

void Stream::collective_done() {
  queue_.pop_front();
  state_ = State::kReady;
  last_done_ns_ = engine_.now_ns();
  advance();
}

void Stream::set_slowdown(double slowdown) {
  if (slowdown == slowdown_) return;
  if (state_ == State::kRunningKernel) {
    const TimeNs now = engine_.now_ns();
    kernel_done_work_ns_ += static_cast<double>(now - kernel_progress_at_ns_) / slowdown_;
    kernel_progress_at_ns_ = now;
    const double remaining = std::max(0.0, static_cast<double>(queue_.front().duration_ns) - kernel_done_work_ns_);
    engine_.schedule_after(stretched(remaining, slowdown), *this, ++kernel_generation_);
  }
  slowdown_ = slowdown;
}

void Stream::on_event(std::int64_t tag) {
  if (tag >= 0 && tag != kernel_generation_) return;  // superseded by a reschedule
  if (tag >= 0) {
    const StreamOp op = queue_.front();
    queue_.pop_front();
    state_ = State::kReady;
    last_done_ns_ = engine_.now_ns();
    if (cores_) cores_->kernel_finished(*this);
    observer_.on_kernel_done(*this, op, started_ns_, engine_.now_ns());
  } else {
    wake_scheduled_ = false;
  }
  advance();
}

void Stream::advance() {
  const TimeNs now = engine_.now_ns();
  while (!queue_.empty()) {
    // A copy: popping (or an observer pushing more work) must not leave us holding a dangling
    // reference into the queue.
    const StreamOp op = queue_.front();
    switch (state_) {
      case State::kRunningKernel:
      case State::kInCollective:
        return;  // a completion event will call back
      case State::kBlockedOnEvent:
        if (!events_.signaled(op.event)) return;
        observer_.on_stall(*this, op, started_ns_, now);
        queue_.pop_front();
        state_ = State::kReady;
        last_done_ns_ = now;
        continue;
      case State::kReady:
        break;
    }
    switch (op.kind) {
      case OpKind::kKernel:
        if (cores_) cores_->kernel_started(*this);  // sets slowdown_ for the node's new load
        state_ = State::kRunningKernel;
        started_ns_ = now;
        kernel_done_work_ns_ = 0;
        kernel_progress_at_ns_ = now;
        engine_.schedule_after(stretched(static_cast<double>(op.duration_ns), slowdown_), *this, ++kernel_generation_);
        return;
      case OpKind::kRecord:
        queue_.pop_front();
        last_done_ns_ = now;
        events_.signal(op.event);
        continue;
      case OpKind::kWait:
        if (events_.signaled(op.event)) {
          queue_.pop_front();
          continue;
        }
        state_ = State::kBlockedOnEvent;
        started_ns_ = now;
        events_.add_waiting_stream(op.event, event_table_index_);
        return;
      case OpKind::kCollective:
        state_ = State::kInCollective;
        started_ns_ = now;
        observer_.on_collective_reached(*this, op);
        return;
    }
  }
}

}  // namespace prefetchlab::sim
