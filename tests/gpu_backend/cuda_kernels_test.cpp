// The CUDA device's kernels against the host device's reference (host_kernels.hpp,
// host_layer_kernels.hpp), on the same inputs: vectorised element-wise passes (aligned and not),
// multi-tensor Adam, bias + GELU (+ residual) and its backward, LayerNorm and its backward,
// batched GEMMs. Each needs a GPU and skips saying so without one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_backend/device/bf16.hpp"
#include "gpu_backend/device_backend.hpp"
#include "gpu_backend/device/host_kernels.hpp"
#include "gpu_backend/device/host_layer_kernels.hpp"
#ifdef PREFETCHLAB_HAVE_CUDA
#include "gpu_backend/cuda/cuda_device.hpp"
#endif

namespace pg = prefetchlab::gpu;

#ifdef PREFETCHLAB_HAVE_CUDA

namespace {

#define SKIP_WITHOUT_GPU()                                                                                    \
  if (pg::cuda_device_count() < 1)                                                                           \
  GTEST_SKIP() << "needs a CUDA GPU to compare its kernels with the host reference; cudaGetDeviceCount reports " \
               << pg::cuda_device_count() << " on this machine"

// Bytes of `count` elements of `type` holding a deterministic pattern in [-scale, scale].
std::vector<std::byte> pattern(pg::ElementType type, std::int64_t count, int seed, float scale = 1.0f) {
  std::vector<std::byte> out(static_cast<std::size_t>(count * pg::element_bytes(type)));
  for (std::int64_t i = 0; i < count; ++i) {
    const float v = scale * std::sin(0.37f * static_cast<float>(i) + 1.3f * static_cast<float>(seed));
    if (type == pg::ElementType::kBF16) {
      const std::uint16_t bits = pg::float_to_bf16(v);
      std::memcpy(out.data() + i * 2, &bits, 2);
    } else {
      std::memcpy(out.data() + i * 4, &v, 4);
    }
  }
  return out;
}

float value_at(pg::ElementType type, const std::vector<std::byte>& bytes, std::size_t i) {
  if (type == pg::ElementType::kBF16) {
    std::uint16_t bits = 0;
    std::memcpy(&bits, bytes.data() + i * 2, 2);
    return pg::bf16_to_float(bits);
  }
  float v = 0;
  std::memcpy(&v, bytes.data() + i * 4, 4);
  return v;
}

// GPU and host agree within the rounding of `type` (one bf16 step, or fp32's) plus `slack`.
void expect_close(pg::ElementType type, const std::vector<std::byte>& gpu, const std::vector<std::byte>& host,
                  const std::string& what, float slack = 0.0f) {
  ASSERT_EQ(gpu.size(), host.size()) << what;
  const float relative = type == pg::ElementType::kBF16 ? 1.0f / 128 : 2e-6f;
  const std::size_t n = gpu.size() / static_cast<std::size_t>(pg::element_bytes(type));
  int reported = 0;
  for (std::size_t i = 0; i < n && reported < 5; ++i) {
    const float g = value_at(type, gpu, i), h = value_at(type, host, i);
    if (std::fabs(g - h) > relative * std::fabs(h) + slack + 1e-30f) {
      ADD_FAILURE() << what << ": element " << i << " is " << g << " on the GPU, " << h << " on the host";
      ++reported;
    }
  }
}

pg::DeviceSpan host_span(std::vector<std::byte>& v) {
  return pg::DeviceSpan{reinterpret_cast<prefetchlab::core::DeviceAddress>(v.data()), v.size()};
}

// One GPU, one stream; buffers uploaded from / downloaded to host vectors.
class Gpu {
 public:
  Gpu() : group_(pg::make_device_group(pg::Backend::kCuda, {})), device_(group_->device(0)), stream_(device_.create_stream("test")) {}
  ~Gpu() {
    device_.synchronize_all();
    for (const auto& b : buffers_) device_.free(b);
  }
  pg::Device& device() { return device_; }
  pg::StreamId stream() const { return stream_; }
  // A device copy of `bytes` starting `offset_bytes` into a fresh buffer (offset 2: not aligned).
  pg::DeviceSpan upload(const std::vector<std::byte>& bytes, std::uint64_t offset_bytes = 0) {
    auto buffer = device_.allocate(bytes.size() + offset_bytes + 16, stream_);
    EXPECT_TRUE(buffer.has_value());
    buffers_.push_back(*buffer);
    const pg::DeviceSpan span = buffer->span.sub(offset_bytes, bytes.size());
    if (!bytes.empty()) device_.copy_host_to_device(stream_, span, bytes.data());
    return span;
  }
  std::vector<std::byte> download(pg::DeviceSpan span) {
    std::vector<std::byte> out(span.bytes);
    device_.copy_device_to_host(stream_, out.data(), span);
    device_.synchronize_all();
    return out;
  }

 private:
  std::unique_ptr<pg::DeviceGroup> group_;
  pg::Device& device_;
  pg::StreamId stream_;
  std::vector<pg::DeviceBuffer> buffers_;
};

const pg::ElementType kTypes[] = {pg::ElementType::kBF16, pg::ElementType::kFP32};

}  // namespace

TEST(CudaKernels, ElementwisePassesMatchTheHostAlignedOrNot) {
  SKIP_WITHOUT_GPU();
  Gpu gpu;
  const std::int64_t numel = 100'003;  // not a multiple of any vector width: the tail runs too
  for (const pg::ElementType type : kTypes) {
    for (const std::uint64_t offset : {std::uint64_t{0}, std::uint64_t{4}}) {  // 4 bytes: no 16-byte vectors
      for (const pg::ElementwiseOp op : {pg::ElementwiseOp::kScale, pg::ElementwiseOp::kMultiply, pg::ElementwiseOp::kAxpy}) {
        auto a = pattern(type, numel, 1), b = pattern(type, numel, 2), dst = pattern(type, numel, 3);
        pg::ElementwiseArgs args;
        args.op = op, args.numel = numel, args.alpha = 0.75f, args.type = type;
        args.a = gpu.upload(a, offset), args.b = gpu.upload(b, offset), args.dst = gpu.upload(dst, offset);
        gpu.device().elementwise(gpu.stream(), args);
        const auto result = gpu.download(args.dst);
        args.a = host_span(a), args.b = host_span(b), args.dst = host_span(dst);
        pg::host::run_elementwise(args);
        expect_close(type, result, dst,
                     std::string(pg::element_type_name(type)) + " op " + std::to_string(static_cast<int>(op)) + " offset " +
                         std::to_string(offset),
                     1e-6f);  // a fused multiply-add where the host rounds twice, near zero
      }
    }
  }
}

TEST(CudaKernels, MultiTensorAdamMatchesTheHostOverChunksAndLaunches) {
  SKIP_WITHOUT_GPU();
  Gpu gpu;
  // Sizes across the 65,536-element chunks, more tensors than one launch takes (30), and one
  // tensor that starts off a 16-byte boundary (the scalar path).
  std::vector<std::int64_t> numels{2 * 65536 + 3, 1, 1000, 70001};
  for (int i = 0; i < 30; ++i) numels.push_back(100 + i);
  for (const pg::ElementType type : kTypes) {
    struct Tensor {
      std::vector<std::byte> params, grads, master, m, v;
    };
    std::vector<Tensor> host(numels.size());
    std::vector<pg::AdamArgs> on_gpu, on_host;
    for (std::size_t t = 0; t < numels.size(); ++t) {
      const auto n = numels[t];
      const int seed = static_cast<int>(t) * 5;
      host[t] = {pattern(type, n, seed), pattern(type, n, seed + 1, 0.1f), pattern(pg::ElementType::kFP32, n, seed),
                 pattern(pg::ElementType::kFP32, n, seed + 2, 0.01f), pattern(pg::ElementType::kFP32, n, seed + 3, 0.001f)};
      for (std::size_t i = 0; i < host[t].v.size(); i += 4) {  // exp_avg_sq >= 0
        float x = 0;
        std::memcpy(&x, host[t].v.data() + i, 4);
        x = std::fabs(x);
        std::memcpy(host[t].v.data() + i, &x, 4);
      }
      const std::uint64_t offset = t == 3 ? 4 : 0;
      pg::AdamArgs a;
      a.numel = n, a.param_type = type, a.step = 5, a.lr = 1e-3f;
      a.params = gpu.upload(host[t].params, offset), a.grads = gpu.upload(host[t].grads, offset);
      a.master = gpu.upload(host[t].master, offset), a.exp_avg = gpu.upload(host[t].m, offset);
      a.exp_avg_sq = gpu.upload(host[t].v, offset);
      on_gpu.push_back(a);
      a.params = host_span(host[t].params), a.grads = host_span(host[t].grads), a.master = host_span(host[t].master);
      a.exp_avg = host_span(host[t].m), a.exp_avg_sq = host_span(host[t].v);
      on_host.push_back(a);
    }
    gpu.device().multi_tensor_adam(gpu.stream(), on_gpu);
    pg::host::run_multi_tensor_adam(on_host);
    for (std::size_t t = 0; t < numels.size(); ++t) {
      const std::string what = std::string(pg::element_type_name(type)) + " tensor " + std::to_string(t);
      expect_close(pg::ElementType::kFP32, gpu.download(on_gpu[t].master), host[t].master, what + " master", 1e-7f);
      expect_close(pg::ElementType::kFP32, gpu.download(on_gpu[t].exp_avg), host[t].m, what + " exp_avg", 1e-8f);
      expect_close(pg::ElementType::kFP32, gpu.download(on_gpu[t].exp_avg_sq), host[t].v, what + " exp_avg_sq", 1e-10f);
      expect_close(type, gpu.download(on_gpu[t].params), host[t].params, what + " params", 1e-7f);
    }
  }
}

TEST(CudaKernels, BiasGeluResidualAndItsBackwardMatchTheHost) {
  SKIP_WITHOUT_GPU();
  Gpu gpu;
  for (const pg::ElementType type : kTypes) {
    for (const std::int64_t cols : {std::int64_t{1024}, std::int64_t{1003}}) {  // vectorised, then not
      const std::int64_t rows = 37;
      auto x = pattern(type, rows * cols, 1, 3.0f), bias = pattern(type, cols, 2), residual = pattern(type, rows * cols, 3);
      auto out = pattern(type, rows * cols, 4), dy = pattern(type, rows * cols, 5), dx = pattern(type, rows * cols, 6);
      pg::BiasActivationArgs f;
      f.rows = rows, f.cols = cols, f.type = type;
      f.x = gpu.upload(x), f.bias = gpu.upload(bias), f.residual = gpu.upload(residual), f.dst = gpu.upload(out);
      gpu.device().bias_activation(gpu.stream(), f);
      const auto gpu_out = gpu.download(f.dst);
      f.x = host_span(x), f.bias = host_span(bias), f.residual = host_span(residual), f.dst = host_span(out);
      pg::host::run_bias_activation(f);
      const std::string what = std::string(pg::element_type_name(type)) + " cols " + std::to_string(cols);
      // tanhf's last bits, and 1 + tanh cancelling for negative inputs.
      expect_close(type, gpu_out, out, "bias_activation " + what, 1e-5f);

      pg::BiasActivationBackwardArgs b;
      b.rows = rows, b.cols = cols, b.type = type;
      b.x = gpu.upload(x), b.bias = gpu.upload(bias), b.dy = gpu.upload(dy), b.dx = gpu.upload(dx);
      gpu.device().bias_activation_backward(gpu.stream(), b);
      const auto gpu_dx = gpu.download(b.dx);
      b.x = host_span(x), b.bias = host_span(bias), b.dy = host_span(dy), b.dx = host_span(dx);
      pg::host::run_bias_activation_backward(b);
      expect_close(type, gpu_dx, dx, "bias_activation_backward " + what, 1e-5f);
    }
  }
}

TEST(CudaKernels, LayerNormAndItsBackwardMatchTheHost) {
  SKIP_WITHOUT_GPU();
  Gpu gpu;
  for (const pg::ElementType type : kTypes) {
    for (const std::int64_t cols : {std::int64_t{1024}, std::int64_t{77}, std::int64_t{5000}}) {
      const std::int64_t rows = 129;
      auto x = pattern(type, rows * cols, 1, 2.0f), gamma = pattern(type, cols, 2), beta = pattern(type, cols, 3);
      auto y = pattern(type, rows * cols, 4);
      auto mean = pattern(pg::ElementType::kFP32, rows, 5), rstd = pattern(pg::ElementType::kFP32, rows, 6);
      pg::LayerNormArgs f;
      f.rows = rows, f.cols = cols, f.type = type;
      f.x = gpu.upload(x), f.gamma = gpu.upload(gamma), f.beta = gpu.upload(beta), f.y = gpu.upload(y);
      f.mean = gpu.upload(mean), f.rstd = gpu.upload(rstd);
      gpu.device().layer_norm(gpu.stream(), f);
      const auto gpu_y = gpu.download(f.y), gpu_mean = gpu.download(f.mean), gpu_rstd = gpu.download(f.rstd);
      pg::LayerNormArgs h = f;
      h.x = host_span(x), h.gamma = host_span(gamma), h.beta = host_span(beta), h.y = host_span(y);
      h.mean = host_span(mean), h.rstd = host_span(rstd);
      pg::host::run_layer_norm(h);
      const std::string what = std::string(pg::element_type_name(type)) + " cols " + std::to_string(cols);
      // fp32 row sums in another order than the host's fp64 ones.
      expect_close(pg::ElementType::kFP32, gpu_mean, mean, "layer_norm mean " + what, 1e-5f);
      expect_close(pg::ElementType::kFP32, gpu_rstd, rstd, "layer_norm rstd " + what, 1e-5f);
      expect_close(type, gpu_y, y, "layer_norm y " + what, 1e-4f);

      auto dy = pattern(type, rows * cols, 7), dx = pattern(type, rows * cols, 8);
      auto dgamma = pattern(type, cols, 9), dbeta = pattern(type, cols, 10);
      pg::LayerNormBackwardArgs b;
      b.rows = rows, b.cols = cols, b.type = type;
      // The host's saved statistics go to both, so only the backward is compared.
      b.x = gpu.upload(x), b.gamma = gpu.upload(gamma), b.mean = gpu.upload(mean), b.rstd = gpu.upload(rstd);
      b.dy = gpu.upload(dy), b.dx = gpu.upload(dx), b.dgamma = gpu.upload(dgamma), b.dbeta = gpu.upload(dbeta);
      gpu.device().layer_norm_backward(gpu.stream(), b);
      const auto gpu_dx = gpu.download(b.dx), gpu_dgamma = gpu.download(b.dgamma), gpu_dbeta = gpu.download(b.dbeta);
      b.x = host_span(x), b.gamma = host_span(gamma), b.mean = host_span(mean), b.rstd = host_span(rstd);
      b.dy = host_span(dy), b.dx = host_span(dx), b.dgamma = host_span(dgamma), b.dbeta = host_span(dbeta);
      pg::host::run_layer_norm_backward(b);
      expect_close(type, gpu_dx, dx, "layer_norm_backward dx " + what, 1e-3f);
      expect_close(type, gpu_dgamma, dgamma, "layer_norm_backward dgamma " + what, 1e-3f * static_cast<float>(rows));
      expect_close(type, gpu_dbeta, dbeta, "layer_norm_backward dbeta " + what, 1e-3f * static_cast<float>(rows));
    }
  }
}

TEST(CudaKernels, BatchedGemmMatchesTheHost) {
  SKIP_WITHOUT_GPU();
  Gpu gpu;
  // Attention's scores for 2 sequences x 4 heads: per (sequence, head) Q[s x d] K^T with the
  // heads interleaved in each row (row stride heads * d), as cublasGemmStridedBatchedEx runs it
  // with one batch per head of one sequence.
  const std::int64_t heads = 4, s = 64, d = 32, row = heads * d;
  for (const pg::ElementType type : kTypes) {
    auto q = pattern(type, s * row, 1), k = pattern(type, s * row, 2), out = pattern(type, heads * s * s, 3);
    pg::GemmArgs g;
    g.m = s, g.n = s, g.k = d, g.type = type, g.alpha = 0.125f;
    g.lda = row, g.ldb = row, g.ldc = s, g.transpose_b = true;
    g.batch_count = heads, g.stride_a = d, g.stride_b = d, g.stride_c = s * s;
    g.a = gpu.upload(q), g.b = gpu.upload(k), g.c = gpu.upload(out);
    gpu.device().gemm(gpu.stream(), g);
    const auto gpu_out = gpu.download(g.c);
    g.a = host_span(q), g.b = host_span(k), g.c = host_span(out);
    pg::host::run_gemm(g);
    expect_close(type, gpu_out, out, std::string("batched gemm ") + pg::element_type_name(type), 1e-4f);
  }
}

#endif
