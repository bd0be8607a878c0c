// The host-thread device on its own: collectives move the right bytes between rank threads,
// streams are ordered by events, GEMMs match a reference, and a rank that never reaches a
// collective fails the group (naming it) instead of hanging it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "gpu_backend/device/bf16.hpp"
#include "gpu_backend/host/host_device.hpp"
#include "gpu_backend/executor/seeded_data.hpp"

namespace pg = prefetchlab::gpu;

namespace {

pg::HostDeviceOptions options(int world, std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  pg::HostDeviceOptions o;
  o.world_size = world;
  o.capacity_bytes = 1ULL << 30;
  o.collective_timeout = timeout;
  return o;
}

// Runs body(rank, device) on one thread per rank.
template <class Body>
void on_every_rank(pg::DeviceGroup& group, Body body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < group.world_size(); ++r) threads.emplace_back([&, r] { body(r, group.device(r)); });
  for (auto& t : threads) t.join();
}

std::vector<float> read_floats(pg::Device& device, pg::StreamId stream, pg::DeviceSpan span) {
  std::vector<float> out(span.bytes / 4);
  device.copy_device_to_host(stream, out.data(), span);
  device.synchronize(device.record(stream));
  return out;
}

}  // namespace

TEST(HostDevice, CollectivesMoveEachRanksData) {
  constexpr int kWorld = 3;
  constexpr int kChunk = 5;
  pg::HostDeviceGroup group(options(kWorld));
  std::vector<std::vector<float>> gathered(kWorld), scattered(kWorld), reduced(kWorld);
  on_every_rank(group, [&](int r, pg::Device& d) {
    const auto s = d.create_stream("comm");
    auto gather_buf = *d.allocate(kWorld * kChunk * 4, s);
    std::vector<float> mine(kChunk);
    for (int i = 0; i < kChunk; ++i) mine[static_cast<std::size_t>(i)] = static_cast<float>(100 * r + i);
    const auto slot = gather_buf.span.sub(static_cast<std::uint64_t>(r * kChunk * 4), kChunk * 4);
    d.copy_host_to_device(s, slot, mine.data());
    d.all_gather(s, slot, gather_buf.span, pg::ElementType::kFP32);  // in place
    gathered[static_cast<std::size_t>(r)] = read_floats(d, s, gather_buf.span);

    auto send = *d.allocate(kWorld * kChunk * 4, s);
    auto recv = *d.allocate(kChunk * 4, s);
    std::vector<float> values(kWorld * kChunk);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(r + 1) * static_cast<float>(i);
    d.copy_host_to_device(s, send.span, values.data());
    d.reduce_scatter(s, send.span, recv.span, pg::ElementType::kFP32, pg::ReduceOp::kSum);
    scattered[static_cast<std::size_t>(r)] = read_floats(d, s, recv.span);

    std::vector<float> one{static_cast<float>(r), static_cast<float>(-r)};
    auto small = *d.allocate(8, s);
    d.copy_host_to_device(s, small.span, one.data());
    d.all_reduce(s, small.span, pg::ElementType::kFP32, pg::ReduceOp::kMax);
    reduced[static_cast<std::size_t>(r)] = read_floats(d, s, small.span);
    for (const auto* b : {&gather_buf, &send, &recv, &small}) d.free(*b);
  });
  ASSERT_FALSE(group.failure()) << group.failure()->message();
  for (int r = 0; r < kWorld; ++r) {
    for (int q = 0; q < kWorld; ++q) {
      for (int i = 0; i < kChunk; ++i) {
        EXPECT_EQ(gathered[static_cast<std::size_t>(r)][static_cast<std::size_t>(q * kChunk + i)], static_cast<float>(100 * q + i));
        // Slot r of the reduced input: sum over ranks q of (q+1) * (r*chunk+i) = 6 * (r*chunk+i).
      }
    }
    for (int i = 0; i < kChunk; ++i) {
      EXPECT_EQ(scattered[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)], 6.0f * static_cast<float>(r * kChunk + i));
    }
    EXPECT_EQ(reduced[static_cast<std::size_t>(r)][0], 2.0f);
    EXPECT_EQ(reduced[static_cast<std::size_t>(r)][1], 0.0f);
  }
}

TEST(HostDevice, StreamsAreOrderedByEventsAndEventsCarryTimes) {
  pg::HostDeviceGroup group(options(1));
  pg::Device& d = group.device(0);
  const auto a = d.create_stream("a");
  const auto b = d.create_stream("b");
  constexpr std::int64_t kN = 1 << 16;
  auto x = *d.allocate(kN * 4, a);
  auto y = *d.allocate(kN * 4, a);
  std::vector<float> ones(kN, 1.0f);
  d.copy_host_to_device(a, x.span, ones.data());
  pg::ElementwiseArgs scale{pg::ElementwiseOp::kScale, y.span, x.span, {}, kN, 3.0f, pg::ElementType::kFP32};
  const auto start = d.record(a);
  for (int i = 0; i < 20; ++i) d.elementwise(a, scale);  // keeps stream a busy for a while
  const auto produced = d.record(a);
  d.wait(b, produced);
  std::vector<float> out(kN);
  d.copy_device_to_host(b, out.data(), y.span);  // must see every write of stream a
  const auto done = d.record(b);
  d.synchronize(done);
  EXPECT_TRUE(d.query(produced));
  EXPECT_GT(d.elapsed_ns(start, produced), 0);
  EXPECT_GE(d.elapsed_ns(produced, done), 0);
  EXPECT_EQ(out.front(), 3.0f);
  EXPECT_EQ(out.back(), 3.0f);
  d.free(x);
  d.free(y);
}

TEST(HostDevice, Bf16GemmMatchesADoubleReference) {
  pg::HostDeviceGroup group(options(1));
  pg::Device& d = group.device(0);
  const auto s = d.create_stream("compute");
  const std::int64_t m = 7, n = 5, k = 9, ld = 12;  // row strides wider than the matrices
  const auto a_values = pg::seeded_values(3, "a", m * ld);
  const auto b_values = pg::seeded_values(3, "b", n * ld);  // B stored transposed: n x k
  const auto a_bytes = pg::encode(pg::ElementType::kBF16, a_values);
  const auto b_bytes = pg::encode(pg::ElementType::kBF16, b_values);
  auto a = *d.allocate(a_bytes.size(), s);
  auto b = *d.allocate(b_bytes.size(), s);
  auto c = *d.allocate(static_cast<std::uint64_t>(m * n * 2), s);
  d.copy_host_to_device(s, a.span, a_bytes.data());
  d.copy_host_to_device(s, b.span, b_bytes.data());
  pg::GemmArgs g;
  g.m = m, g.n = n, g.k = k;
  g.a = a.span, g.lda = ld;
  g.b = b.span, g.ldb = ld, g.transpose_b = true;
  g.c = c.span, g.ldc = n;
  d.gemm(s, g);
  std::vector<std::byte> c_bytes(static_cast<std::size_t>(m * n * 2));
  d.copy_device_to_host(s, c_bytes.data(), c.span);
  d.synchronize(d.record(s));
  const auto got = pg::decode(pg::ElementType::kBF16, c_bytes);
  const auto av = pg::decode(pg::ElementType::kBF16, a_bytes);
  const auto bv = pg::decode(pg::ElementType::kBF16, b_bytes);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (std::int64_t p = 0; p < k; ++p) want += av[static_cast<std::size_t>(i * ld + p)] * bv[static_cast<std::size_t>(j * ld + p)];
      EXPECT_NEAR(got[static_cast<std::size_t>(i * n + j)], want, 1e-2 * (1 + std::abs(want))) << i << "," << j;
    }
  }
  EXPECT_EQ(pg::float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(pg::float_to_bf16(pg::bf16_to_float(0x3f81)), 0x3f81);
}

TEST(HostDevice, ARankThatNeverArrivesFailsTheGroupNamingIt) {
  pg::HostDeviceGroup group(options(3, std::chrono::milliseconds(200)));
  const auto started = std::chrono::steady_clock::now();
  on_every_rank(group, [&](int r, pg::Device& d) {
    const auto s = d.create_stream("comm");
    auto buf = *d.allocate(64, s);
    if (r != 2) d.all_reduce(s, buf.span, pg::ElementType::kFP32, pg::ReduceOp::kSum);  // rank 2 never comes
    try {
      d.synchronize(d.record(s));
    } catch (const pg::RunAborted&) {
    }
    d.free(buf);
  });
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  ASSERT_TRUE(group.failure());
  EXPECT_EQ(group.failure()->rank, 2);
  EXPECT_EQ(group.failure()->kind, pg::FailureKind::kTimeout);
  EXPECT_NE(group.failure()->message().find("all_reduce #0"), std::string::npos) << group.failure()->message();
}

// The timeout runs from the latest arrival: ranks that are slow but keep coming (a loaded CPU)
// are waited for, and the one named is the rank nobody heard from for a whole timeout. Rank 1
// arrives 0.7 T after rank 0, rank 2 another 0.7 T later, rank 3 never: a deadline counted from
// the first arrival would expire at T with ranks 2 and 3 missing and blame rank 2.
TEST(HostDevice, ACollectiveTimeoutCountsFromTheLatestArrival) {
  constexpr auto kTimeout = std::chrono::milliseconds(300);
  pg::HostDeviceGroup group(options(4, kTimeout));
  const auto started = std::chrono::steady_clock::now();
  on_every_rank(group, [&](int r, pg::Device& d) {
    const auto s = d.create_stream("comm");
    auto buf = *d.allocate(64, s);
    try {  // a rank that comes after the group failed is turned away at the door
      if (r != 3) {
        std::this_thread::sleep_until(started + r * kTimeout * 7 / 10);
        d.all_reduce(s, buf.span, pg::ElementType::kFP32, pg::ReduceOp::kSum);
      }
      d.synchronize(d.record(s));
    } catch (const pg::RunAborted&) {
    }
    d.free(buf);
  });
  ASSERT_TRUE(group.failure());
  EXPECT_EQ(group.failure()->rank, 3) << group.failure()->message();
  EXPECT_EQ(group.failure()->kind, pg::FailureKind::kTimeout);
  // Not before the latest arrival (1.4 T) plus a whole timeout.
  EXPECT_GE(std::chrono::steady_clock::now() - started, kTimeout * 24 / 10);
}
