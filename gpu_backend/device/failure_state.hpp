#pragma once
// The failure state a device group shares: the first RankFailure recorded wins; every blocking
// point polls failed() and throws RunAborted once it is set, so nothing waits forever on a rank
// that is gone.
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>

#include "gpu_backend/device/rank_failure.hpp"

namespace prefetchlab::gpu {

class FailureState {
 public:
  // How often blocked waits look at the failure flag.
  static constexpr std::chrono::milliseconds kPollInterval{2};

  // Called (outside the lock) with the first failure, on the thread that records it: a group
  // whose ranks are processes tells the others (host_device.cpp). Set before the group runs.
  void on_first_failure(std::function<void(const RankFailure&)> listener) { listener_ = std::move(listener); }

  // Returns true when this call recorded the (first) failure.
  bool abort(const RankFailure& failure) {
    {
      std::lock_guard lock(mutex_);
      if (failure_) return false;
      failure_ = failure;
      failed_.store(true, std::memory_order_release);
    }
    if (listener_) listener_(failure);
    return true;
  }
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  std::optional<RankFailure> failure() const {
    std::lock_guard lock(mutex_);
    return failure_;
  }
  void throw_if_failed() const {
    if (failed()) throw RunAborted(*failure());
  }

 private:
  mutable std::mutex mutex_;
  std::optional<RankFailure> failure_;
  std::atomic<bool> failed_{false};
  std::function<void(const RankFailure&)> listener_;
};

}  // namespace prefetchlab::gpu
