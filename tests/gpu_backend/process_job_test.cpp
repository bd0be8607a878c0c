// The real backend's ranks as processes (`--launcher env`), here as threads that each hold their
// own ProcessLink, as a process would: rank 0's store admits them, carries their collectives,
// gathers their records, and names a rank that disagrees or stays away
// (gpu_backend/process/process_store.hpp, process_link.hpp, process_transport.hpp, rank_records.hpp).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "core/scenario/scenario.hpp"
#include "gpu_backend/executor/executor.hpp"
#include "gpu_backend/host/host_device.hpp"
#include "gpu_backend/process/process_link.hpp"
#include "gpu_backend/process/job_secret.hpp"
#include "gpu_backend/process/process_transport.hpp"
#include "gpu_backend/process/shared_memory_slots.hpp"
#include "gpu_backend/process/tcp_frames.hpp"
#include "gpu_backend/executor/rank_records.hpp"
#include "tests/support/host_scenario.hpp"
#include "tests/support/sanitizer.hpp"

namespace pc = prefetchlab::core;
namespace pg = prefetchlab::gpu;
namespace pt = prefetchlab::testing;

namespace {

// The store's timeout: a rank that stays away is named after it. (Admission waits as long, so a
// loaded machine's slow thread start is not a refusal.)
constexpr auto kTimeout = std::chrono::milliseconds(2000 * pt::kSanitizerSlowdown);

// The job's secret (gpu_backend/process/job_secret.hpp).
constexpr const char* kSecret = "process-job-test-secret-0123";

// A TCP port nothing listens on now (the kernel's pick).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t size = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &size);
  ::close(fd);
  return ntohs(addr.sin_port);
}

pg::LaunchRank rank_of(int rank, int world, int port) {
  pg::LaunchRank me;
  me.rank = rank;
  me.world_size = world;
  me.local_rank = rank;
  me.master_addr = "127.0.0.1";
  me.master_port = port;
  me.launcher = "test";
  me.secret = kSecret;
  return me;
}

// Runs fn(link) for every rank on a thread of its own, each with its own link, as processes
// would; `rank_number` and `run_of` say what each says it is and runs (the same, unless a test
// wants them to disagree). Returns each rank's exception message ("" for none).
std::vector<std::string> on_process_ranks(int world, const std::function<void(pg::ProcessLink&)>& fn,
                                          const std::function<std::string(int)>& run_of = [](int) { return std::string("test run"); },
                                          const std::function<int(int)>& rank_number = [](int r) { return r; },
                                          std::chrono::milliseconds timeout = kTimeout) {
  const int port = free_port();
  std::vector<std::string> errors(static_cast<std::size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        pg::ProcessLink link(rank_of(rank_number(r), world, port), run_of(r), timeout);
        fn(link);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

nlohmann::json header(const char* kind, std::uint64_t send_bytes, std::uint64_t recv_bytes, int seq) {
  return {{"kind", kind},
          {"type", static_cast<int>(pg::ElementType::kFP32)},
          {"op", static_cast<int>(pg::ReduceOp::kSum)},
          {"seq", seq},
          {"send_bytes", send_bytes},
          {"recv_bytes", recv_bytes},
          {"what", std::string(kind) + " #" + std::to_string(seq)}};
}

std::vector<float> floats(const std::vector<std::byte>& bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

using prefetchlab::testing::host_scenario;

// Whole executor runs: a generous timeout, so that a loaded machine's slow rank is no failure.
constexpr auto kRunTimeout = std::chrono::milliseconds(20'000 * pt::kSanitizerSlowdown);

pg::HostDeviceOptions options_of(const pc::Scenario& s) { return prefetchlab::testing::host_device_options(s, kRunTimeout); }

}  // namespace

TEST(ProcessStore, CarriesCollectivesBetweenRanks) {
  constexpr int kWorld = 3;
  on_process_ranks(kWorld, [](pg::ProcessLink& link) {
    const int r = link.rank();
    const auto f = static_cast<float>(r);
    // all_gather: every rank's 2 values, in rank order.
    const std::vector<float> mine{static_cast<float>(r), static_cast<float>(10 * r)};
    const auto gathered = floats(link.collective(header("all_gather", 8, 8 * kWorld, 0), std::as_bytes(std::span(mine))));
    EXPECT_EQ(gathered, (std::vector<float>{0, 0, 1, 10, 2, 20}));
    // reduce_scatter: slot q of the sum of every rank's buffer, q = this rank.
    const std::vector<float> buffer{1.0f * f, 2.0f * f, 3.0f * f};
    const auto reduced = floats(link.collective(header("reduce_scatter", 12, 4, 1), std::as_bytes(std::span(buffer))));
    EXPECT_EQ(reduced, (std::vector<float>{static_cast<float>((r + 1) * (0 + 1 + 2))}));
    // all_reduce: the sum everywhere.
    const std::vector<float> one{1.0f + f};
    EXPECT_EQ(floats(link.collective(header("all_reduce", 4, 4, 2), std::as_bytes(std::span(one)))), (std::vector<float>{6}));
    // The records' gather: rank 0 gets every rank's, in rank order.
    const auto all = link.gather("records of rank " + std::to_string(r));
    if (r == 0) {
      ASSERT_EQ(all.size(), 3u);
      for (int q = 0; q < kWorld; ++q) EXPECT_EQ(all[static_cast<std::size_t>(q)], "records of rank " + std::to_string(q));
    } else {
      EXPECT_TRUE(all.empty());
    }
  });
}

TEST(ProcessStore, HandsRankZerosValueToEveryRank) {
  on_process_ranks(3, [](pg::ProcessLink& link) {
    const std::vector<std::byte> id{std::byte{7}, std::byte{42}};
    if (link.rank() == 0) link.put("nccl_unique_id", id);
    EXPECT_EQ(link.get("nccl_unique_id"), id);
  });
}

TEST(ProcessStore, AMismatchedCollectiveFailsEveryRankNamingIt) {
  on_process_ranks(2, [](pg::ProcessLink& link) {
    const std::vector<float> data(link.rank() == 1 ? 4 : 2, 1.0f);
    try {
      link.collective(header("all_reduce", data.size() * 4, data.size() * 4, 0), std::as_bytes(std::span(data)));
      ADD_FAILURE() << "rank " << link.rank() << " got a result";
    } catch (const pg::RunAborted& e) {
      EXPECT_EQ(e.failure().rank, 1);
      EXPECT_EQ(e.failure().kind, pg::FailureKind::kCollectiveMismatch);
      EXPECT_NE(e.failure().reason.find("rank 0 issued all_reduce #0; rank 1 issued all_reduce #0"), std::string::npos);
    }
  });
}

TEST(ProcessStore, ARankThatStaysAwayFailsTheOthersWithinTheTimeout) {
  // A short timeout: this case waits it out (admission of three threads takes milliseconds).
  constexpr auto kStayAwayTimeout = std::chrono::milliseconds(500 * pt::kSanitizerSlowdown);
  const auto started = std::chrono::steady_clock::now();
  on_process_ranks(3, [&](pg::ProcessLink& link) {
    if (link.rank() == 2) {
      // Stays away from the collective; the store's abort still reaches it (the link's reader).
      const auto until = std::chrono::steady_clock::now() + kStayAwayTimeout * 4;
      while (!link.failure() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      ASSERT_TRUE(link.failure().has_value());
      EXPECT_EQ(link.failure()->rank, 2);
      return;
    }
    const std::vector<float> one{1.0f};
    try {
      link.collective(header("all_reduce", 4, 4, 0), std::as_bytes(std::span(one)));
      ADD_FAILURE() << "rank " << link.rank() << " got a result";
    } catch (const pg::RunAborted& e) {
      EXPECT_EQ(e.failure().rank, 2);
      EXPECT_EQ(e.failure().kind, pg::FailureKind::kTimeout);
      EXPECT_NE(e.failure().reason.find("did not reach the collective within"), std::string::npos);
      EXPECT_NE(e.failure().reason.find("ranks 0,1 were waiting in it"), std::string::npos);
    }
  }, [](int) { return std::string("test run"); }, [](int r) { return r; }, kStayAwayTimeout);
  EXPECT_LT(std::chrono::steady_clock::now() - started, kStayAwayTimeout * 4);
}

TEST(ProcessStore, RanksThatRunDifferentThingsAreRefused) {
  const auto errors = on_process_ranks(
      2, [](pg::ProcessLink&) { ADD_FAILURE() << "admitted"; },
      [](int r) { return r == 0 ? std::string("validate a.yaml@1") : std::string("validate a.yaml@2"); });
  for (const auto& e : errors) {
    EXPECT_NE(e.find("the job's ranks disagree"), std::string::npos) << e;
    EXPECT_NE(e.find("(every rank must run the same command and scenario)"), std::string::npos) << e;
  }
}

TEST(ProcessStore, TwoProcessesWithOneRankNumberAreRefused) {
  const auto errors = on_process_ranks(
      3, [](pg::ProcessLink&) { ADD_FAILURE() << "admitted"; }, [](int) { return std::string("run"); },
      [](int r) { return r == 2 ? 1 : r; });
  for (const auto& e : errors) EXPECT_NE(e.find("two processes say rank 1 (check RANK / SLURM_PROCID)"), std::string::npos) << e;
}

TEST(ProcessStore, AnotherPrefetchlabVersionIsRefused) {
  // Rank 1 speaks the protocol by hand, as a build of another version would.
  const int port = free_port();
  std::string rank0_error;
  std::thread rank0([&] {
    try {
      pg::ProcessLink link(rank_of(0, 2, port), "run", kTimeout);
    } catch (const pg::ProcessJobRefused& e) {
      rank0_error = e.what();
    }
  });
  auto connection = pg::net::TcpConnection::connect("127.0.0.1", port, kTimeout);
  connection.send(static_cast<std::uint32_t>(pg::net::Message::kHello),
                  {{"secret", kSecret}, {"rank", 1}, {"world_size", 2}, {"version", "0.0-other"}, {"run", "run"}, {"host", "elsewhere"}});
  std::optional<pg::net::Frame> answer;
  const auto until = std::chrono::steady_clock::now() + kTimeout;
  while (!answer && std::chrono::steady_clock::now() < until) answer = connection.receive(std::chrono::milliseconds(50));
  connection.close();
  rank0.join();
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->type, static_cast<std::uint32_t>(pg::net::Message::kRefused));
  // Whichever hello reaches the store first sets the job's version, so the refusal names the two
  // ranks in either order: "rank 1 runs prefetchlab 0.0-other but rank 0 runs X" or "rank 0 runs
  // prefetchlab X but rank 1 runs 0.0-other".
  const auto names_both = [](const std::string& message) {
    return (message.find("rank 1 runs prefetchlab 0.0-other but rank 0 runs ") != std::string::npos) ||
           (message.find("rank 0 runs prefetchlab ") != std::string::npos &&
            message.find(" but rank 1 runs 0.0-other") != std::string::npos);
  };
  EXPECT_TRUE(names_both(answer->header.value("message", std::string()))) << answer->header.dump();
  EXPECT_TRUE(names_both(rank0_error)) << rank0_error;
}

TEST(RankRecords, SurviveTheirJsonForm) {
  pg::RankRecords r;
  r.rank = 3;
  pg::RankIterationRecord it;
  it.iteration = 2;
  it.optimizer_step = true;
  it.trace_mode = pc::TraceMode::kComplete;
  it.times.start_ns = 5;
  it.times.peak_reserved_bytes = std::int64_t{1} << 40;
  it.times.bucket_numel = 123;
  pg::TimelineSpan span;
  span.kind = pg::TimelineSpan::Kind::kAllGather;
  span.rank = 3;
  span.iteration = 2;
  span.start_ns = -7;
  span.end_ns = 9;
  span.bytes = 4096;
  span.element_bytes = 2;
  it.timeline.push_back(span);
  it.samples.push_back({2, 3, pc::Phase::kBackward, 11, 12, {13, -14}});
  r.iterations.push_back(it);
  r.memory.push_back({100, 3, 200, 300});
  r.call_log.push_back({3, 2, pg::SyncTag::kAgreement, 17});
  r.plan_log = {"gather 1,2", "wait 1"};
  const pg::RankRecords back = pg::rank_records_from_json(pg::rank_records_to_json(r));
  EXPECT_EQ(pg::rank_records_to_json(back), pg::rank_records_to_json(r));
  ASSERT_EQ(back.iterations.size(), 1u);
  EXPECT_EQ(back.iterations[0].times.peak_reserved_bytes, std::int64_t{1} << 40);
  EXPECT_EQ(back.iterations[0].trace_mode, pc::TraceMode::kComplete);
  EXPECT_EQ(back.iterations[0].timeline[0].kind, pg::TimelineSpan::Kind::kAllGather);
  EXPECT_EQ(back.iterations[0].samples[0].extra, (std::vector<std::int64_t>{13, -14}));
  EXPECT_EQ(back.call_log[0].tag, pg::SyncTag::kAgreement);
  EXPECT_EQ(back.plan_log, r.plan_log);
  EXPECT_THROW(pg::rank_records_from_json("{\"rank_records\": 1, \"rank\": 0}"), std::runtime_error);
  EXPECT_THROW(pg::rank_records_from_json("not json"), std::runtime_error);
}

// The executor with one rank per "process" gives rank 0 the very records of the thread version
// in every field that is not a time (reserved memory follows when each stream's work finishes)
// and every rank the same plans.
class ProcessExecutor : public ::testing::TestWithParam<std::tuple<int, pg::host::ProcessDataPath>> {};

TEST_P(ProcessExecutor, MatchesTheThreadVersionInEveryNonTimingField) {
  const int world = std::get<0>(GetParam());
  const pg::host::ProcessDataPath data_path = std::get<1>(GetParam());
  const pc::Scenario s = host_scenario(world, {"training.iterations=3"});
  pg::ExecutorOptions options;
  options.record_plans = true;
  pg::HostDeviceGroup threads_group(options_of(s));
  const pg::ExecutorResult threads = pg::Executor(s, threads_group, options).run();
  ASSERT_EQ(threads.status, pc::RunStatus::kOk) << threads.message;

  std::vector<std::optional<pg::ExecutorResult>> results(static_cast<std::size_t>(world));
  const auto errors = on_process_ranks(
      world,
      [&](pg::ProcessLink& link) {
    pg::HostDeviceOptions o = options_of(s);
    o.process = &link;
    o.process_data = data_path;
    pg::HostDeviceGroup group(o);
    EXPECT_EQ(group.local_ranks(), std::vector<int>{link.rank()});
    EXPECT_TRUE(link.same_host());
    results[static_cast<std::size_t>(link.rank())] = pg::Executor(s, group, options).run();
      },
      [](int) { return std::string("test run"); }, [](int r) { return r; }, kRunTimeout);
  for (const auto& e : errors) ASSERT_EQ(e, "");
  for (int r = 1; r < world; ++r) {
    EXPECT_EQ(results[static_cast<std::size_t>(r)]->status, pc::RunStatus::kOk);
    EXPECT_FALSE(results[static_cast<std::size_t>(r)]->has_records);
  }
  const pg::ExecutorResult& processes = *results[0];
  ASSERT_EQ(processes.status, pc::RunStatus::kOk) << processes.message;
  ASSERT_TRUE(processes.has_records);
  ASSERT_EQ(processes.metrics.iterations.size(), threads.metrics.iterations.size());
  for (std::size_t i = 0; i < threads.metrics.iterations.size(); ++i) {
    const auto& a = threads.metrics.iterations[i];
    const auto& b = processes.metrics.iterations[i];
    EXPECT_EQ(a.iteration, b.iteration);
    EXPECT_EQ(a.trace_mode, b.trace_mode);
    EXPECT_EQ(a.all_gather_count, b.all_gather_count);
    EXPECT_EQ(a.reduce_scatter_count, b.reduce_scatter_count);
    EXPECT_EQ(a.gathered_numel, b.gathered_numel);
    EXPECT_EQ(a.bucket_numel, b.bucket_numel);
    EXPECT_EQ(a.peak_gathered_param_bytes, b.peak_gathered_param_bytes);
    EXPECT_EQ(a.peak_allocated_bytes, b.peak_allocated_bytes);
  }
  ASSERT_EQ(processes.metrics.samples.size(), threads.metrics.samples.size());
  for (std::size_t i = 0; i < threads.metrics.samples.size(); ++i) {
    EXPECT_EQ(processes.metrics.samples[i].iteration, threads.metrics.samples[i].iteration);
    EXPECT_EQ(processes.metrics.samples[i].rank, threads.metrics.samples[i].rank);
    EXPECT_EQ(processes.metrics.samples[i].phase, threads.metrics.samples[i].phase);
  }
  ASSERT_EQ(processes.metrics.buckets.size(), threads.metrics.buckets.size());
  for (std::size_t i = 0; i < threads.metrics.buckets.size(); ++i) {
    EXPECT_EQ(processes.metrics.buckets[i].rank, threads.metrics.buckets[i].rank);
    EXPECT_EQ(processes.metrics.buckets[i].bucket_numel, threads.metrics.buckets[i].bucket_numel);
  }
  EXPECT_EQ(processes.plan_log, threads.plan_log);
  EXPECT_EQ(processes.timeline.size(), threads.timeline.size());
  // (The call log's throttle blocks are not compared: whether the host blocks at a throttle
  // depends on whether the stream finished in time, on threads as on processes.)
  EXPECT_FALSE(processes.call_log.empty());
  EXPECT_FALSE(processes.metrics.memory.empty());
}

INSTANTIATE_TEST_SUITE_P(RanksAndDataPaths, ProcessExecutor,
                         ::testing::Combine(::testing::Values(2, 3),
                                            ::testing::Values(pg::host::ProcessDataPath::kSharedMemory, pg::host::ProcessDataPath::kTcp)),
                         [](const auto& param_info) {
                           return "Ranks" + std::to_string(std::get<0>(param_info.param)) +
                                  (std::get<1>(param_info.param) == pg::host::ProcessDataPath::kTcp ? "Tcp" : "SharedMemory");
                         });

TEST(ProcessTransport, SharedMemoryMovesTheSameBytesAsTheStore) {
  // One all-reduce of 3 ranks' bf16 values each way: the same bits.
  std::vector<std::vector<std::byte>> out[2];
  int path_index = 0;
  for (auto path : {pg::host::ProcessDataPath::kSharedMemory, pg::host::ProcessDataPath::kTcp}) {
    auto& results = out[path_index++];
    results.assign(3, {});
    on_process_ranks(3, [&](pg::ProcessLink& link) {
      pg::host::ProcessTransport transport(link, path);
      EXPECT_EQ(transport.uses_shared_memory(), path == pg::host::ProcessDataPath::kSharedMemory);
      std::vector<std::uint16_t> values(1000);
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<std::uint16_t>(0x3f80 + (i * 7 + link.rank() * 13) % 200);
      pg::host::CollectiveCall call;
      call.kind = pg::host::CollectiveKind::kAllReduce;
      call.type = pg::ElementType::kBF16;
      call.send = call.recv = pg::DeviceSpan{reinterpret_cast<std::uint64_t>(values.data()), values.size() * 2};
      transport.run(link.rank(), call);
      const auto bytes = std::as_bytes(std::span(values));
      results[static_cast<std::size_t>(link.rank())].assign(bytes.begin(), bytes.end());
    });
  }
  EXPECT_EQ(out[0], out[1]);
  EXPECT_EQ(out[0][0], out[0][2]);
}

// Another user on the node, who can reach the store's port but does not know the job's secret
// (issue 46, S1): a hello that claims a rank, a forged abort, a frame that announces gigabytes.
// None of it refuses, aborts, delays or fills the job, and no answer names it.
TEST(ProcessStoreSecurity, AStrangerCannotJoinAbortFillOrLearnTheJob) {
  const int port = free_port();
  const std::string run = "run: the job's own scenario digest";
  std::vector<std::string> errors(2);
  std::vector<float> results(2, -1);
  const auto rank = [&](int r) {
    try {
      pg::ProcessLink link(rank_of(r, 2, port), run, kTimeout);
      const std::vector<float> one{1.0f + static_cast<float>(r)};
      results[static_cast<std::size_t>(r)] =
          floats(link.collective(header("all_reduce", 4, 4, 0), std::as_bytes(std::span(one)))).at(0);
    } catch (const std::exception& e) {
      errors[static_cast<std::size_t>(r)] = e.what();
    }
  };
  std::thread rank0(rank, 0);
  const auto until_closed = [](pg::net::TcpConnection& c) {
    std::vector<pg::net::Frame> frames;
    const auto until = std::chrono::steady_clock::now() + kTimeout;
    try {
      while (std::chrono::steady_clock::now() < until) {
        if (auto f = c.receive(std::chrono::milliseconds(20))) frames.push_back(std::move(*f));
      }
    } catch (const pg::net::ConnectionLost&) {
      return std::make_pair(true, frames);
    }
    return std::make_pair(false, frames);
  };
  // Claims rank 1 with a wrong secret and a WORLD_SIZE that would refuse the job.
  auto impostor = pg::net::TcpConnection::connect("127.0.0.1", port, kTimeout);
  impostor.send(static_cast<std::uint32_t>(pg::net::Message::kHello),
                {{"secret", "not-the-secret-0123456789"}, {"rank", 1}, {"world_size", 9}, {"version", "x"}, {"run", "x"}});
  const auto [impostor_closed, impostor_frames] = until_closed(impostor);
  EXPECT_TRUE(impostor_closed);
  ASSERT_EQ(impostor_frames.size(), 1u);
  EXPECT_EQ(impostor_frames[0].type, static_cast<std::uint32_t>(pg::net::Message::kRefused));
  const std::string told = impostor_frames[0].header.dump();
  EXPECT_NE(told.find("job secret"), std::string::npos) << told;
  for (const char* secret_of_the_job : {"run:", "prefetchlab-", "rank 0 serves", "digest"}) {
    EXPECT_EQ(told.find(secret_of_the_job), std::string::npos) << told;
  }
  // A forged abort without a hello, and a frame that announces 2 GiB before any hello: dropped.
  auto forger = pg::net::TcpConnection::connect("127.0.0.1", port, kTimeout);
  forger.send(static_cast<std::uint32_t>(pg::net::Message::kAbort),
              {{"rank", 1}, {"kind", 0}, {"operation", "x"}, {"reason", "forged"}});
  EXPECT_TRUE(until_closed(forger).first);
  auto filler = pg::net::TcpConnection::connect("127.0.0.1", port, kTimeout);
  std::vector<std::byte> head(20);
  const auto put = [&](std::size_t at, std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) head[at + static_cast<std::size_t>(i)] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
  };
  put(0, 0x50464c31, 4);                    // the frames' magic
  put(4, 1, 4);                             // a hello
  put(8, 2, 4);                             // "{}"
  put(12, std::uint64_t{2} << 30, 8);       // and 2 GiB of data to come
  ASSERT_EQ(::send(filler.fd(), head.data(), head.size(), MSG_NOSIGNAL), 20);
  EXPECT_TRUE(until_closed(filler).first);
  // The job's real rank 1 joins and the job runs as if no one had knocked.
  std::thread rank1(rank, 1);
  rank0.join();
  rank1.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(results[0], 3.0f);
  EXPECT_EQ(results[1], 3.0f);
}

// The store listens at MASTER_ADDR only: bound to 127.0.0.1, it is not reachable at another
// address of this machine (127.0.0.2 is loopback too, but not the address it was given).
TEST(ProcessStoreSecurity, TheStoreListensOnlyAtMasterAddr) {
  const int port = free_port();
  pg::net::StoreOptions options;
  options.bind_address = "127.0.0.1";
  options.port = port;
  options.world_size = 1;
  options.secret = kSecret;
  options.timeout = std::chrono::milliseconds(300);
  {
    pg::net::ProcessStore store(options);
    EXPECT_NO_THROW(pg::net::TcpConnection::connect("127.0.0.1", port, std::chrono::milliseconds(2000)));
    EXPECT_THROW(pg::net::TcpConnection::connect("127.0.0.2", port, std::chrono::milliseconds(300)), std::runtime_error);
  }
  options.secret = "";
  EXPECT_THROW(pg::net::ProcessStore{options}, std::invalid_argument);
}

// Shared memory (issue 46, S2): a file another user made first under a rank's name is refused,
// not adopted, and a peer's file that others may read or write is refused on open.
TEST(ProcessStoreSecurity, SharedMemoryIsCreatedExclusivelyAndPrivate) {
  const std::string prefix = "prefetchlab-test-" + pg::random_hex(8);
  const std::string planted = pg::host::SharedMemorySlots::name(prefix, 0);
  const int fd = ::shm_open(planted.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ::fchmod(fd, 0666);
  ::close(fd);
  EXPECT_THROW(pg::host::SharedMemorySlots(prefix, 0, 2), std::runtime_error);
  ::shm_unlink(planted.c_str());
  // Rank 1's file opened to everyone: rank 0 refuses to read it.
  pg::host::SharedMemorySlots rank0(prefix, 0, 2);
  {
    pg::host::SharedMemorySlots rank1(prefix, 1, 2);
    const std::string name1 = pg::host::SharedMemorySlots::name(prefix, 1);
    const int fd1 = ::shm_open(name1.c_str(), O_RDWR, 0);
    ASSERT_GE(fd1, 0);
    ::fchmod(fd1, 0644);
    ::close(fd1);
    try {
      rank0.open_peers();
      ADD_FAILURE() << "a peer file open to other users was read";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("is open to other users"), std::string::npos) << e.what();
    }
  }
  // A peer's file owned by another user (here: nobody, where this test may give a file away) is
  // refused however private its mode.
  if (::geteuid() == 0) {
    pg::host::SharedMemorySlots reader(prefix + "-c", 0, 2);
    const std::string foreign = pg::host::SharedMemorySlots::name(prefix + "-c", 1);
    const int fd2 = ::shm_open(foreign.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    ASSERT_GE(fd2, 0);
    ASSERT_EQ(::fchown(fd2, 65534, 65534), 0);
    ::close(fd2);
    try {
      reader.open_peers();
      ADD_FAILURE() << "a peer file owned by another user was read";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("is owned by another user"), std::string::npos) << e.what();
    }
    ::shm_unlink(foreign.c_str());
  }
  // The job's own files (0600) are read.
  pg::host::SharedMemorySlots peer(prefix + "-b", 1, 2);
  pg::host::SharedMemorySlots own(prefix + "-b", 0, 2);
  EXPECT_NO_THROW(own.open_peers());
}
