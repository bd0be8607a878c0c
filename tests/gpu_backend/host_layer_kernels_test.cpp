// host_layer_kernels.hpp: the fused layer kernels' host reference (what the CUDA kernels are
// tested against) checked against finite differences and closed forms, and through the host
// device's streams.
#include "gpu_backend/device/host_layer_kernels.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <stdexcept>
#include <vector>

#include "gpu_backend/host/host_device.hpp"

namespace pg = prefetchlab::gpu;

namespace {

pg::DeviceSpan span_of(std::vector<float>& v) {
  return pg::DeviceSpan{reinterpret_cast<prefetchlab::core::DeviceAddress>(v.data()), v.size() * sizeof(float)};
}

std::vector<float> pattern(std::size_t n, int seed) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i * 7 + static_cast<std::size_t>(seed) * 13)) * 1.5f;
  return v;
}

constexpr int kRows = 3, kCols = 12;

struct LayerNormCase {
  std::vector<float> x = pattern(kRows * kCols, 1), gamma = pattern(kCols, 2), beta = pattern(kCols, 3);
  std::vector<float> y = std::vector<float>(kRows * kCols), mean = std::vector<float>(kRows), rstd = std::vector<float>(kRows);
  pg::LayerNormArgs args() {
    pg::LayerNormArgs a;
    a.x = span_of(x), a.gamma = span_of(gamma), a.beta = span_of(beta), a.y = span_of(y);
    a.mean = span_of(mean), a.rstd = span_of(rstd);
    a.rows = kRows, a.cols = kCols, a.type = pg::ElementType::kFP32;
    return a;
  }
};

// sum(dy * LayerNorm(x, gamma, beta)): its gradient is what layer_norm_backward returns.
double loss(LayerNormCase c, const std::vector<float>& dy) {
  pg::host::run_layer_norm(c.args());
  double total = 0;
  for (std::size_t i = 0; i < dy.size(); ++i) total += static_cast<double>(dy[i]) * c.y[i];
  return total;
}

}  // namespace

TEST(HostLayerKernels, GeluIsGpt2sTanhApproximationAndItsDerivative) {
  EXPECT_NEAR(pg::host::gelu_tanh(1.0f), 0.841192f, 1e-5f);  // 0.5 (1 + tanh(0.79788 x 1.044715))
  EXPECT_NEAR(pg::host::gelu_tanh(-2.0f), -0.045402f, 1e-5f);
  EXPECT_EQ(pg::host::gelu_tanh(0.0f), 0.0f);
  for (float x : {-3.0f, -0.7f, 0.0f, 0.4f, 2.5f}) {
    const double h = 1e-3;
    const double numeric = (pg::host::gelu_tanh(static_cast<float>(x + h)) - pg::host::gelu_tanh(static_cast<float>(x - h))) / (2 * h);
    EXPECT_NEAR(pg::host::gelu_tanh_derivative(x), numeric, 2e-3) << x;
  }
}

TEST(HostLayerKernels, BiasActivationAddsBiasPerColumnThenResidual) {
  std::vector<float> x = pattern(kRows * kCols, 4), bias = pattern(kCols, 5), residual = pattern(kRows * kCols, 6);
  std::vector<float> out(kRows * kCols);
  pg::BiasActivationArgs a;
  a.dst = span_of(out), a.x = span_of(x), a.bias = span_of(bias), a.residual = span_of(residual);
  a.rows = kRows, a.cols = kCols, a.type = pg::ElementType::kFP32;
  pg::host::run_bias_activation(a);
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kCols; ++c) {
      const int i = r * kCols + c;
      EXPECT_FLOAT_EQ(out[i], pg::host::gelu_tanh(x[i] + bias[c]) + residual[i]);
    }
  }
  a.activation = pg::Activation::kIdentity;
  a.bias = {};
  pg::host::run_bias_activation(a);
  EXPECT_FLOAT_EQ(out[kCols + 1], x[kCols + 1] + residual[kCols + 1]);
}

TEST(HostLayerKernels, BiasGeluBackwardMatchesFiniteDifferences) {
  std::vector<float> x = pattern(kRows * kCols, 7), bias = pattern(kCols, 8), dy = pattern(kRows * kCols, 9);
  std::vector<float> dx(kRows * kCols);
  pg::BiasActivationBackwardArgs a;
  a.dx = span_of(dx), a.dy = span_of(dy), a.x = span_of(x), a.bias = span_of(bias);
  a.rows = kRows, a.cols = kCols, a.type = pg::ElementType::kFP32;
  pg::host::run_bias_activation_backward(a);
  for (int i = 0; i < kRows * kCols; ++i) {
    const float pre = x[i] + bias[i % kCols];
    const double h = 1e-3;
    const double numeric = dy[i] * (pg::host::gelu_tanh(static_cast<float>(pre + h)) - pg::host::gelu_tanh(static_cast<float>(pre - h))) / (2 * h);
    EXPECT_NEAR(dx[i], numeric, 3e-3) << i;
  }
}

TEST(HostLayerKernels, LayerNormNormalisesEachRowAndSavesItsStatistics) {
  LayerNormCase c;
  std::fill(c.gamma.begin(), c.gamma.end(), 1.0f);
  std::fill(c.beta.begin(), c.beta.end(), 0.0f);
  pg::host::run_layer_norm(c.args());
  for (int r = 0; r < kRows; ++r) {
    double sum = 0, squares = 0, x_sum = 0;
    for (int col = 0; col < kCols; ++col) {
      sum += c.y[r * kCols + col];
      squares += c.y[r * kCols + col] * c.y[r * kCols + col];
      x_sum += c.x[r * kCols + col];
    }
    EXPECT_NEAR(sum / kCols, 0.0, 1e-5) << r;
    EXPECT_NEAR(squares / kCols, 1.0, 1e-3) << r;  // eps 1e-5 shrinks it a little
    EXPECT_NEAR(c.mean[r], x_sum / kCols, 1e-5);
    EXPECT_GT(c.rstd[r], 0.0f);
  }
}

TEST(HostLayerKernels, LayerNormBackwardMatchesFiniteDifferences) {
  LayerNormCase c;
  std::vector<float> dy = pattern(kRows * kCols, 10);
  pg::host::run_layer_norm(c.args());
  std::vector<float> dx(kRows * kCols), dgamma(kCols), dbeta(kCols);
  pg::LayerNormBackwardArgs b;
  b.dx = span_of(dx), b.dgamma = span_of(dgamma), b.dbeta = span_of(dbeta), b.dy = span_of(dy), b.x = span_of(c.x);
  b.gamma = span_of(c.gamma), b.mean = span_of(c.mean), b.rstd = span_of(c.rstd);
  b.rows = kRows, b.cols = kCols, b.type = pg::ElementType::kFP32;
  pg::host::run_layer_norm_backward(b);
  const float h = 1e-2f;
  auto derivative = [&](std::vector<float> LayerNormCase::*member, std::size_t i) {
    LayerNormCase plus = c, minus = c;
    (plus.*member)[i] += h;
    (minus.*member)[i] -= h;
    return (loss(plus, dy) - loss(minus, dy)) / (2.0 * h);
  };
  for (std::size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx[i], derivative(&LayerNormCase::x, i), 2e-2) << "dx " << i;
  for (std::size_t i = 0; i < dgamma.size(); ++i) {
    EXPECT_NEAR(dgamma[i], derivative(&LayerNormCase::gamma, i), 2e-2) << "dgamma " << i;
    EXPECT_NEAR(dbeta[i], derivative(&LayerNormCase::beta, i), 2e-2) << "dbeta " << i;
  }
}

TEST(HostLayerKernels, ShortSpansAndBadShapesAreRejectedBeforeAnyRead) {
  LayerNormCase c;
  pg::LayerNormArgs a = c.args();
  a.rstd.bytes = 4;  // rows need 12 bytes
  EXPECT_THROW(pg::host::run_layer_norm(a), std::invalid_argument);
  a = c.args();
  a.cols = 0;
  EXPECT_THROW(pg::host::run_layer_norm(a), std::invalid_argument);
  pg::BiasActivationArgs b;
  b.rows = 2, b.cols = 2, b.type = pg::ElementType::kFP32;
  EXPECT_THROW(pg::host::run_bias_activation(b), std::invalid_argument);  // no dst
}

TEST(HostLayerKernels, HostDeviceRunsThemOnItsStreams) {
  pg::HostDeviceGroup group(pg::HostDeviceOptions{});
  pg::Device& d = group.device(0);
  const pg::StreamId s = d.create_stream("compute");
  std::vector<float> x = pattern(kRows * kCols, 11), gamma(kCols, 2.0f), beta(kCols, 0.5f);
  auto dx = d.allocate(x.size() * 4, s), dy = d.allocate(x.size() * 4, s), dg = d.allocate(kCols * 4, s),
       db = d.allocate(kCols * 4, s), dm = d.allocate(kRows * 4, s), dr = d.allocate(kRows * 4, s);
  ASSERT_TRUE(dx && dy && dg && db && dm && dr);
  d.copy_host_to_device(s, dx->span, x.data());
  d.copy_host_to_device(s, dg->span, gamma.data());
  d.copy_host_to_device(s, db->span, beta.data());
  pg::LayerNormArgs a;
  a.y = dy->span, a.x = dx->span, a.gamma = dg->span, a.beta = db->span, a.mean = dm->span, a.rstd = dr->span;
  a.rows = kRows, a.cols = kCols, a.type = pg::ElementType::kFP32;
  d.layer_norm(s, a);
  std::vector<float> y(x.size());
  d.copy_device_to_host(s, y.data(), dy->span);
  d.synchronize_all();
  LayerNormCase reference;
  reference.x = x, reference.gamma = gamma, reference.beta = beta;
  pg::host::run_layer_norm(reference.args());
  EXPECT_EQ(y, reference.y);
  a.cols = 1000;  // checked at the call, as a CUDA launch would fail
  EXPECT_THROW(d.layer_norm(s, a), std::invalid_argument);
  for (auto* b : {&dx, &dy, &dg, &db, &dm, &dr}) d.free(**b);
}
