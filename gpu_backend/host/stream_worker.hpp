#pragma once
// One stream of the host device: a worker thread that runs the stream's operations in enqueue
// order. Counts enqueued and completed operations, which is the "stream point" the caching
// allocator reasons with. An operation that throws fails the whole group, naming the rank,
// the stream and the operation; after a failure the remaining operations are dropped.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "gpu_backend/device/failure_state.hpp"

namespace prefetchlab::gpu::host {

class StreamWorker {
 public:
  StreamWorker(int rank, std::string name, FailureState& failure);
  ~StreamWorker();  // drops what is queued once the group failed; otherwise drains; joins
  StreamWorker(const StreamWorker&) = delete;
  StreamWorker& operator=(const StreamWorker&) = delete;

  // `what` names the operation in failure reports ("gemm 512x256x688").
  void push(std::string what, std::function<void()> work);
  std::uint64_t enqueued() const { return enqueued_; }  // host thread only
  std::uint64_t completed() const { return completed_.load(std::memory_order_acquire); }
  const std::string& name() const { return name_; }

 private:
  struct Op {
    std::string what;
    std::function<void()> work;
  };
  void loop();

  int rank_;
  std::string name_;
  FailureState& failure_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Op> queue_;
  bool stopping_ = false;
  std::uint64_t enqueued_ = 0;
  std::atomic<std::uint64_t> completed_{0};
  std::thread thread_;
};

}  // namespace prefetchlab::gpu::host
