#pragma once
// The host device's kernels on plain host memory: Eigen GEMMs (bf16 emulated: operands widened
// to fp32, result rounded back, as tensor cores accumulate in fp32), memory-bound passes, Adam,
// and the element-wise reductions collectives need. All single-threaded: each runs on one
// stream's worker thread.
#include <cstdint>
#include <vector>

#include "gpu_backend/device/device.hpp"

namespace prefetchlab::gpu::host {

inline void* pointer(DeviceSpan span) { return reinterpret_cast<void*>(span.address); }

void run_gemm(const GemmArgs& args);
void run_elementwise(const ElementwiseArgs& args);
void run_adam(const AdamArgs& args);

// Widen `numel` elements of `type` at `src` to double, and back (rounded to `type`).
void load_as_double(ElementType type, const void* src, std::int64_t numel, double* out);
void store_from_double(ElementType type, const double* in, std::int64_t numel, void* dst);

// Reduces slot `slot` of every rank's send buffer, in rank order (deterministic), into `out`.
void reduce_into(ElementType type, ReduceOp op, const std::vector<const void*>& sources,
                 std::int64_t numel, void* out);

}  // namespace prefetchlab::gpu::host
