#pragma once
// A simulated CUDA stream and CUDA events. A stream runs its operations strictly in the order
// they were enqueued: kernels occupy it for their duration, a wait on an unsignalled event
// blocks it (and everything behind it), a record signals an event when the stream reaches it,
// and a collective blocks it until every rank's matching collective has run (Communicator).
#include <coroutine>
#include <cstdint>
#include <vector>

#include "sim/engine/event_engine.hpp"
#include "sim/engine/fifo_queue.hpp"
#include "sim/engine/host_task.hpp"

namespace prefetchlab::sim {

enum class StreamKind { kCompute, kAllGather, kReduceScatter, kNccl };
const char* stream_kind_name(StreamKind kind);

// What time a blocked wait is charged to (a stall on the compute stream is what ZeRO-3 tuning
// is about; waits on other streams are ordering, not exposed communication).
// The Untraced kinds: the same waits while DeepSpeed's trace was lost (no prefetch).
enum class StallKind : std::uint8_t { kNone, kFetchForward, kFetchBackward, kFetchForwardUntraced, kFetchBackwardUntraced };

enum class OpKind : std::uint8_t { kKernel, kWait, kRecord, kCollective };

struct StreamOp {
  OpKind kind = OpKind::kKernel;
  StallKind stall = StallKind::kNone;
  std::int32_t iteration = 0;
  std::int32_t label = -1;       // interned kernel name (trace)
  std::int32_t event = -1;       // kWait / kRecord
  std::int32_t collective = -1;  // kCollective: index into the rank's collective calls
  TimeNs duration_ns = 0;        // kKernel
};

class Stream;
class SharedCores;

// 48 bytes, no heap. A rank keeps only the events not yet signalled, and those signalled after
// the oldest of them (the ring below), so a 1,024-rank world holds a few hundred per rank.
// Waiters fit inline: a stream waits on one event at a time and a rank has a handful of
// streams; its one host thread waits on one event at a time.
struct DeviceEvent {
  static constexpr int kMaxWaitingStreams = 7;
  TimeNs signaled_ns = -1;
  EventHandler* notify = nullptr;  // told (with notify_tag) when the event is signalled
  std::int64_t notify_tag = 0;
  std::coroutine_handle<> waiting_host;  // null when none
  // Where its signalled time is kept past the event (EventTable::keep_time), or -1: the world
  // reads phase and fetch times once every rank finished the iteration.
  std::int64_t kept_seq = -1;
  std::uint8_t waiting_stream_count = 0;
  std::uint8_t waiting_streams[kMaxWaitingStreams] = {};  // EventTable stream indices, in wait order
};

// Receives what a stream did, for metrics and traces.
class StreamObserver {
 public:
  virtual void on_kernel_done(const Stream& stream, const StreamOp& op, TimeNs start_ns, TimeNs end_ns) = 0;
  virtual void on_stall(const Stream& stream, const StreamOp& op, TimeNs start_ns, TimeNs end_ns) = 0;
  virtual void on_collective_reached(Stream& stream, const StreamOp& op) = 0;

 protected:
  ~StreamObserver() = default;
};

// One rank's events: created by the host, signalled by streams, waited on by streams or host.
class EventTable {
 public:
  EventTable(EventEngine& engine, CoroutineResumer& resumer) : engine_(engine), resumer_(resumer) {}
  // A stream that may wait on this table's events; returns its index (std::logic_error past 255).
  std::uint8_t add_stream(Stream* stream);
  // `stream` (added) waits for event `id`, woken in wait order when it is signalled.
  void add_waiting_stream(std::int32_t id, std::uint8_t stream_index);
  std::int32_t create();
  std::int32_t next_id() const { return base_ + static_cast<std::int32_t>(count_); }
  DeviceEvent& at(std::int32_t id) { return slots_[index(id)]; }
  // Forgotten events were all signalled: a signalled event is forgotten as soon as every older
  // one is signalled too, so only kept times (keep_time) can be read after the signal.
  bool signaled(std::int32_t id) const { return id < base_ || slots_[index(id)].signaled_ns >= 0; }
  // The event's signalled time (-1 before): a live event's, or a kept one's after it was
  // forgotten (std::logic_error for any other forgotten event).
  TimeNs signaled_ns(std::int32_t id) const;
  // The time event `id` (just created: ids kept in increasing order) is signalled at stays
  // readable after the event is forgotten, until forget_kept_before drops it.
  void keep_time(std::int32_t id);
  // Drops kept times of events with id < `id`.
  void forget_kept_before(std::int32_t id);
  void signal(std::int32_t id);
  std::size_t live_events() const { return count_; }

  // `co_await events.host_wait(id)`: the host thread blocks until the event is signalled.
  struct HostWait {
    EventTable& table;
    std::int32_t id;
    bool await_ready() const { return table.signaled(id); }
    void await_suspend(std::coroutine_handle<> self) { table.set_waiting_host(id, self); }
    void await_resume() const noexcept {}
  };
  HostWait host_wait(std::int32_t id) { return HostWait{*this, id}; }

 private:
  EventEngine& engine_;
  CoroutineResumer& resumer_;
  // Inline: streams and the host look events up several times per operation.
  std::size_t index(std::int32_t id) const {
    if (id < base_) [[unlikely]] throw_forgotten(id);
    return (head_ + static_cast<std::size_t>(id - base_)) & (slots_.size() - 1);
  }
  [[noreturn]] static void throw_forgotten(std::int32_t id);
  void set_waiting_host(std::int32_t id, std::coroutine_handle<> host);
  // Drops events from the oldest up to the first one not yet signalled.
  void forget_signalled();
  void grow();
  std::vector<Stream*> streams_;  // by index (add_stream)
  // A ring of live events (power-of-two size): the oldest, id base_, at slots_[head_]. Slots
  // are reused as events are forgotten, waiter lists keeping their capacity, so creating an
  // event allocates nothing in steady state. References stay valid until the next create().
  std::vector<DeviceEvent> slots_;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
  std::int32_t base_ = 0;
  // Kept times (keep_time), by increasing event id: the phase and fetch events the world reads
  // once every rank finished the iteration, long after the ring forgot them.
  // kept_[i - kept_head_] is kept time number i (DeviceEvent::kept_seq); entries before
  // kept_head_ were dropped.
  struct KeptTime {
    std::int32_t id;
    TimeNs signaled_ns;
  };
  std::vector<KeptTime> kept_;
  std::int64_t kept_head_ = 0;
  std::vector<KeptTime>::const_iterator first_kept_from(std::int32_t id) const;  // lower bound by id
};

class Stream final : public EventHandler {
 public:
  Stream(EventEngine& engine, EventTable& events, StreamObserver& observer, int rank, StreamKind kind)
      : engine_(engine), events_(events), observer_(observer), rank_(rank), kind_(kind),
        event_table_index_(events.add_stream(this)) {}
  Stream(const Stream&) = delete;  // its table holds its address
  Stream& operator=(const Stream&) = delete;

  // Enqueued by the host at the current simulated time.
  void push(const StreamOp& op);
  // The collective at the head finished (called by the communicator at its end time).
  void collective_done();
  // An event this stream waits on was signalled.
  void wake();

  // Kernels on this stream run `slowdown` times slower from now on (1 = full speed); the
  // running kernel's remaining work is rescheduled at the new speed.
  void set_slowdown(double slowdown);
  bool running_kernel() const { return state_ == State::kRunningKernel; }
  // Kernels on this stream share CPU cores with other work (contention_model: shared_cores):
  // told when each kernel starts and finishes, `cores` sets this stream's slowdown.
  void share_cores(SharedCores* cores) { cores_ = cores; }

  int rank() const { return rank_; }
  StreamKind kind() const { return kind_; }
  bool idle() const { return queue_.empty() && state_ == State::kReady; }
  // How long, from now, until the work already enqueued is done, if that is known and below
  // `cap_ns`: the running kernel's remainder plus the queued kernels at the current speed.
  // Returns cap_ns when the queue holds a wait on an unsignalled event or a collective (the
  // end is unknown), or when the work reaches cap_ns.
  TimeNs backlog_ns(TimeNs cap_ns) const;
  // Time the last operation finished (or 0): with idle(), when the stream drained.
  TimeNs last_done_ns() const { return last_done_ns_; }
  // Operations enqueued and finished so far: the stream "points" recordStream events wait for.
  std::uint64_t enqueued_ops() const { return enqueued_ops_; }
  std::uint64_t completed_ops() const { return enqueued_ops_ - queue_.size(); }

  void on_event(std::int64_t tag) override;

 private:
  enum class State { kReady, kRunningKernel, kBlockedOnEvent, kInCollective };
  void advance();

  EventEngine& engine_;
  EventTable& events_;
  StreamObserver& observer_;
  int rank_;
  StreamKind kind_;
  std::uint8_t event_table_index_;
  FifoQueue<StreamOp> queue_;
  State state_ = State::kReady;
  TimeNs started_ns_ = 0;  // of the head operation's current state
  // The running kernel's progress in full-speed nanoseconds, and when it was last updated;
  // completion events carry a generation so that a rescheduled kernel's old event is ignored.
  double kernel_done_work_ns_ = 0;
  TimeNs kernel_progress_at_ns_ = 0;
  std::int64_t kernel_generation_ = 0;
  double slowdown_ = 1.0;
  TimeNs last_done_ns_ = 0;
  bool wake_scheduled_ = false;
  std::uint64_t enqueued_ops_ = 0;
  SharedCores* cores_ = nullptr;
};

}  // namespace prefetchlab::sim
