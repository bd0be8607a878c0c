// gemm_plan.hpp: the row-major -> cuBLAS column-major mapping, the shape checks every device
// runs, and the host device's batched GEMM (attention's per-head products) against plain loops.
#include "gpu_backend/device/gemm_plan.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "gpu_backend/device/host_kernels.hpp"

namespace pg = prefetchlab::gpu;

namespace {

pg::DeviceSpan span_of(std::vector<float>& v) {
  return pg::DeviceSpan{reinterpret_cast<prefetchlab::core::DeviceAddress>(v.data()), v.size() * sizeof(float)};
}

pg::GemmArgs plain(std::int64_t m, std::int64_t n, std::int64_t k, std::vector<float>& a, std::vector<float>& b,
                   std::vector<float>& c) {
  pg::GemmArgs g;
  g.m = m, g.n = n, g.k = k;
  g.a = span_of(a), g.b = span_of(b), g.c = span_of(c);
  g.lda = k, g.ldb = n, g.ldc = n;
  g.type = pg::ElementType::kFP32;
  return g;
}

std::string error_of(const pg::GemmArgs& g) {
  try {
    pg::check_gemm(g);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(GemmPlan, SwapsOperandsAndSizesForColumnMajorCublas) {
  std::vector<float> a(6 * 4), b(5 * 6), c(4 * 5);
  pg::GemmArgs g = plain(4, 5, 6, a, b, c);
  g.transpose_a = true, g.lda = 4;  // A stored k x m
  g.transpose_b = true, g.ldb = 6;  // B stored n x k
  const pg::CublasGemmPlan p = pg::plan_cublas_gemm(g);
  EXPECT_EQ(p.m, 5);
  EXPECT_EQ(p.n, 4);
  EXPECT_EQ(p.k, 6);
  EXPECT_EQ(p.first.address, g.b.address);
  EXPECT_EQ(p.second.address, g.a.address);
  EXPECT_TRUE(p.transpose_first);
  EXPECT_TRUE(p.transpose_second);
  EXPECT_EQ(p.ld_first, 6);
  EXPECT_EQ(p.ld_second, 4);
  EXPECT_EQ(p.ldc, 5);
  g.transpose_a = false, g.lda = 6;
  EXPECT_FALSE(pg::plan_cublas_gemm(g).transpose_second);
}

TEST(GemmPlan, BatchedPlanKeepsStridesWithTheirOperands) {
  const int batch = 3, m = 2, n = 3, k = 4;
  std::vector<float> a(batch * m * k), b(batch * k * n), c(batch * m * n);
  pg::GemmArgs g = plain(m, n, k, a, b, c);
  g.batch_count = batch, g.stride_a = m * k, g.stride_b = k * n, g.stride_c = m * n;
  const pg::CublasGemmPlan p = pg::plan_cublas_gemm(g);
  EXPECT_EQ(p.batch_count, batch);
  EXPECT_EQ(p.stride_first, k * n);
  EXPECT_EQ(p.stride_second, m * k);
  EXPECT_EQ(p.stride_c, m * n);
}

TEST(GemmPlan, RejectsBadShapesNamingTheOperand) {
  std::vector<float> a(4 * 6), b(6 * 5), c(4 * 5);
  pg::GemmArgs g = plain(4, 5, 6, a, b, c);
  EXPECT_EQ(error_of(g), "");
  pg::GemmArgs bad = g;
  bad.lda = 5;
  EXPECT_NE(error_of(bad).find("lda 5 is shorter than a row of a"), std::string::npos) << error_of(bad);
  bad = g;
  bad.c.bytes -= 4;
  EXPECT_NE(error_of(bad).find("operand c needs 80 bytes"), std::string::npos) << error_of(bad);
  bad = g;
  bad.k = 0;
  EXPECT_NE(error_of(bad).find("must be positive"), std::string::npos);
  bad = g;
  bad.m = std::int64_t{1} << 32;
  EXPECT_NE(error_of(bad).find("32-bit"), std::string::npos);
  // Two batches writing the same output.
  std::vector<float> c2(2 * 4 * 5);
  bad = g;
  bad.batch_count = 2, bad.stride_c = 5, bad.c = span_of(c2);
  bad.stride_a = 0, bad.stride_b = 0;  // A and B broadcast to both batches
  EXPECT_NE(error_of(bad).find("overlap"), std::string::npos) << error_of(bad);
  bad.stride_c = 20;
  EXPECT_EQ(error_of(bad), "");
  // A batch past the end of its span.
  bad.stride_a = 24;
  EXPECT_NE(error_of(bad).find("operand a needs"), std::string::npos) << error_of(bad);
}

TEST(GemmPlan, HostBatchedGemmMatchesOneProductPerBatch) {
  // scores[h] = Q[h] K[h]^T per head, row strides wider than the matrices (heads interleaved
  // in one row, as attention's (b, s, heads, d) layout has them).
  const int heads = 3, s = 4, d = 5, row = heads * d;
  std::vector<float> q(s * row), kmat(s * row), out(heads * s * s, -1.0f);
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>((i * 7) % 11) - 5.0f;
  for (std::size_t i = 0; i < kmat.size(); ++i) kmat[i] = static_cast<float>((i * 5) % 9) - 4.0f;
  pg::GemmArgs g;
  g.m = s, g.n = s, g.k = d;
  g.a = span_of(q), g.lda = row, g.stride_a = d;
  g.b = span_of(kmat), g.ldb = row, g.stride_b = d, g.transpose_b = true;
  g.c = span_of(out), g.ldc = s, g.stride_c = s * s;
  g.batch_count = heads;
  g.type = pg::ElementType::kFP32;
  pg::host::run_gemm(g);
  for (int h = 0; h < heads; ++h) {
    for (int i = 0; i < s; ++i) {
      for (int j = 0; j < s; ++j) {
        float expect = 0;
        for (int x = 0; x < d; ++x) expect += q[i * row + h * d + x] * kmat[j * row + h * d + x];
        EXPECT_FLOAT_EQ(out[h * s * s + i * s + j], expect) << "head " << h << " (" << i << "," << j << ")";
      }
    }
  }
}

TEST(GemmPlan, GemmBatchShiftsEachOperandByItsStride) {
  std::vector<float> a(40), b(40), c(40);
  pg::GemmArgs g = plain(2, 2, 2, a, b, c);
  g.batch_count = 3, g.stride_a = 4, g.stride_b = 0, g.stride_c = 6;
  const pg::GemmArgs second = pg::gemm_batch(g, 2);
  EXPECT_EQ(second.a.address, g.a.address + 8 * 4);
  EXPECT_EQ(second.b.address, g.b.address);
  EXPECT_EQ(second.c.address, g.c.address + 12 * 4);
  EXPECT_EQ(second.batch_count, 1);
  EXPECT_THROW(pg::gemm_batch(g, 3), std::out_of_range);
}
