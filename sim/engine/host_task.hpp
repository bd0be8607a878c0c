#pragma once
// A rank's host thread written as straight-line code: a C++20 coroutine that suspends where
// DeepSpeed's Python thread spends time (hooks, launches) or blocks (event synchronisation).
// Tasks nest (`co_await child_task`) with symmetric transfer, so the hook recursion of a module
// tree reads like the framework code it models.
#include <coroutine>
#include <cstddef>
#include <exception>
#include <utility>

#include "sim/engine/event_engine.hpp"

namespace prefetchlab::sim {

// Coroutine frames come and go for every module hook; recycling them through per-size free
// lists (one pool per thread, frames never cross threads) keeps the allocator off the hot path.
class FramePool {
 public:
  static void* allocate(std::size_t bytes);
  static void release(void* frame, std::size_t bytes) noexcept;
};

class HostTask {
 public:
  struct promise_type {
    static void* operator new(std::size_t bytes) { return FramePool::allocate(bytes); }
    static void operator delete(void* frame, std::size_t bytes) noexcept { FramePool::release(frame, bytes); }

    std::coroutine_handle<> continuation;
    std::exception_ptr error;

    HostTask get_return_object() {
      return HostTask(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct FinalAwaiter {
      bool await_ready() noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> self) noexcept {
        const auto next = self.promise().continuation;
        return next ? next : std::noop_coroutine();
      }
      void await_resume() noexcept {}
    };
    FinalAwaiter final_suspend() noexcept { return {}; }
    void return_void() {}
    void unhandled_exception() { error = std::current_exception(); }
  };

  HostTask(HostTask&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  HostTask& operator=(HostTask&& other) noexcept {
    if (this != &other) {
      if (handle_) handle_.destroy();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  HostTask(const HostTask&) = delete;
  HostTask& operator=(const HostTask&) = delete;
  ~HostTask() {
    if (handle_) handle_.destroy();
  }

  // Awaiting a task runs it as a subroutine of the awaiting task.
  bool await_ready() const noexcept { return false; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiting) noexcept {
    handle_.promise().continuation = awaiting;
    return handle_;
  }
  void await_resume() const {
    if (handle_.promise().error) std::rethrow_exception(handle_.promise().error);
  }

  // For the top-level task of a rank.
  void start() { handle_.resume(); }
  bool done() const { return handle_.done(); }
  void rethrow_if_failed() const {
    if (handle_ && handle_.done() && handle_.promise().error) {
      std::rethrow_exception(handle_.promise().error);
    }
  }

 private:
  explicit HostTask(std::coroutine_handle<promise_type> handle) : handle_(handle) {}
  std::coroutine_handle<promise_type> handle_;
};

// Resumes a suspended coroutine from the event queue (the tag carries its address), so that
// host threads interleave with device activity in (time, sequence) order.
class CoroutineResumer final : public EventHandler {
 public:
  void on_event(std::int64_t tag) override {
    std::coroutine_handle<>::from_address(reinterpret_cast<void*>(tag)).resume();
  }
  static std::int64_t tag_of(std::coroutine_handle<> handle) {
    return reinterpret_cast<std::int64_t>(handle.address());
  }
};

// `co_await Halt{}`: this host thread stops for good (its rank hit a fatal condition such as
// out of memory; the world is stopping).
struct Halt {
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<>) const noexcept {}
  void await_resume() const noexcept {}
};

// `co_await sleep_for(engine, resumer, ns)`: the host spends `ns` (Python, launches).
struct SleepFor {
  EventEngine& engine;
  CoroutineResumer& resumer;
  TimeNs duration_ns;
  // Spent without an event where nothing could come between (EventEngine::advance_inline):
  // most of a host's time at a large world is these steps.
  bool await_ready() const noexcept { return duration_ns <= 0 || engine.advance_inline(duration_ns); }
  void await_suspend(std::coroutine_handle<> self) {
    engine.schedule_after(duration_ns, resumer, CoroutineResumer::tag_of(self));
  }
  void await_resume() const noexcept {}
};

}  // namespace prefetchlab::sim
