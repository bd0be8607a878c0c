#pragma once
// A real backend that cannot run here: not built, no GPU, fewer GPUs than ranks, no usable cuBLAS.
// The message says which and what to do (validate and calibrate report it as bad input).
#include <stdexcept>

namespace prefetchlab::gpu {

class BackendUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace prefetchlab::gpu
