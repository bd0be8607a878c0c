#include "gpu_backend/device/gemm_plan.hpp"

#include <limits>
#include <stdexcept>
#include <string>

namespace prefetchlab::gpu {
namespace {

constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();

std::string describe(const GemmArgs& g) {
  return "gemm " + std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k) +
         (g.batch_count > 1 ? " (batch " + std::to_string(g.batch_count) + ")" : "");
}

// One stored operand: `rows` x `cols` row-major with row stride `ld`, `batch_count` of them
// `stride` elements apart, inside `span`.
void check_operand(const GemmArgs& g, const char* name, DeviceSpan span, std::int64_t rows, std::int64_t cols,
                   std::int64_t ld, std::int64_t stride) {
  if (ld < cols) {
    throw std::invalid_argument(describe(g) + ": ld" + name + " " + std::to_string(ld) + " is shorter than a row of " +
                                name + " (" + std::to_string(cols) + " elements)");
  }
  if (ld > kMaxInt || stride < 0) {
    throw std::invalid_argument(describe(g) + ": ld" + name + " or stride_" + name + " out of range");
  }
  const std::int64_t last = (g.batch_count - 1) * stride + (rows - 1) * ld + cols;  // elements touched
  const auto needed_bytes = static_cast<std::uint64_t>(last) * static_cast<std::uint64_t>(element_bytes(g.type));
  if (span.bytes < needed_bytes) {
    throw std::invalid_argument(describe(g) + ": operand " + name + " needs " + std::to_string(needed_bytes) +
                                " bytes but its span holds " + std::to_string(span.bytes));
  }
}

}  // namespace

void check_gemm(const GemmArgs& g) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || g.batch_count <= 0) {
    throw std::invalid_argument(describe(g) + ": sizes and batch count must be positive");
  }
  if (g.m > kMaxInt || g.n > kMaxInt || g.k > kMaxInt || g.batch_count > kMaxInt) {
    throw std::invalid_argument(describe(g) + ": a size beyond cuBLAS's 32-bit int");
  }
  // op(A) is m x k, so A is stored k x m when transposed; likewise B.
  check_operand(g, "a", g.a, g.transpose_a ? g.k : g.m, g.transpose_a ? g.m : g.k, g.lda, g.stride_a);
  check_operand(g, "b", g.b, g.transpose_b ? g.n : g.k, g.transpose_b ? g.k : g.n, g.ldb, g.stride_b);
  check_operand(g, "c", g.c, g.m, g.n, g.ldc, g.stride_c);
  // Batches write C concurrently: each must own its output.
  if (g.batch_count > 1 && g.stride_c < (g.m - 1) * g.ldc + g.n) {
    throw std::invalid_argument(describe(g) + ": stride_c " + std::to_string(g.stride_c) +
                                " makes the batches' outputs overlap (one output spans " +
                                std::to_string((g.m - 1) * g.ldc + g.n) + " elements)");
  }
}

CublasGemmPlan plan_cublas_gemm(const GemmArgs& g) {
  check_gemm(g);
  CublasGemmPlan p;
  p.transpose_first = g.transpose_b;
  p.transpose_second = g.transpose_a;
  p.m = g.n;
  p.n = g.m;
  p.k = g.k;
  p.first = g.b;
  p.second = g.a;
  p.c = g.c;
  p.ld_first = g.ldb;
  p.ld_second = g.lda;
  p.ldc = g.ldc;
  p.stride_first = g.stride_b;
  p.stride_second = g.stride_a;
  p.stride_c = g.stride_c;
  p.batch_count = g.batch_count;
  return p;
}

GemmArgs gemm_batch(const GemmArgs& g, std::int64_t index) {
  if (index < 0 || index >= g.batch_count) throw std::out_of_range("gemm batch " + std::to_string(index));
  const auto bytes = static_cast<std::uint64_t>(element_bytes(g.type));
  auto shift = [&](DeviceSpan span, std::int64_t stride) {
    const std::uint64_t offset = static_cast<std::uint64_t>(index * stride) * bytes;
    return span.sub(offset, span.bytes - offset);
  };
  GemmArgs one = g;
  one.a = shift(g.a, g.stride_a);
  one.b = shift(g.b, g.stride_b);
  one.c = shift(g.c, g.stride_c);
  one.batch_count = 1;
  one.stride_a = one.stride_b = one.stride_c = 0;
  return one;
}

}  // namespace prefetchlab::gpu
