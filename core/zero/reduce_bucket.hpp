#pragma once
// ZeRO-3's IPG gradient bucket (DeepSpeed's stage3.py): per-parameter gradient hooks
// fire after a parameter's last use in backward (a tied weight: its second use); a gradient that
// would overflow reduce_bucket_size flushes the bucket first. Executors own the memory and the
// reduce-scatter; this owns which parameters go together.
#include <cstdint>
#include <vector>

#include "core/model/model_spec.hpp"

namespace prefetchlab::core {

// Per parameter: how many modules use it (the gradient is final after that many backward uses).
std::vector<int> gradient_uses(const ModelSpec& model);

class ReduceBucket {
 public:
  explicit ReduceBucket(std::int64_t capacity_numel) : capacity_numel_(capacity_numel) {}
  // True when adding `numel` must flush the bucket first (non-empty and would overflow).
  bool must_flush_before(std::int64_t numel) const {
    return !params_.empty() && numel_ + numel > capacity_numel_;
  }
  void add(int param, std::int64_t numel) {
    params_.push_back(param);
    numel_ += numel;
  }
  bool empty() const { return params_.empty(); }
  const std::vector<int>& params() const { return params_; }  // in the order added
  std::int64_t numel() const { return numel_; }
  void clear() {
    params_.clear();
    numel_ = 0;
  }

 private:
  std::int64_t capacity_numel_;
  std::vector<int> params_;
  std::int64_t numel_ = 0;
};

}  // namespace prefetchlab::core
