#include "gpu_backend/host/stream_worker.hpp"

#include <exception>

namespace prefetchlab::gpu::host {

StreamWorker::StreamWorker(int rank, std::string name, FailureState& failure)
    : rank_(rank), name_(std::move(name)), failure_(failure), thread_([this] { loop(); }) {}

StreamWorker::~StreamWorker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  thread_.join();
}

void StreamWorker::push(std::string what, std::function<void()> work) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(Op{std::move(what), std::move(work)});
  }
  ++enqueued_;
  ready_.notify_one();
}

void StreamWorker::loop() {
  for (;;) {
    Op op;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      op = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!failure_.failed()) {
      try {
        op.work();
      } catch (const RunAborted&) {
        // Another rank (or stream) failed first; its report stands.
      } catch (const std::exception& e) {
        failure_.abort(RankFailure{rank_, op.what + " on stream " + name_, e.what()});
      }
    }
    completed_.fetch_add(1, std::memory_order_acq_rel);
  }
}

}  // namespace prefetchlab::gpu::host
