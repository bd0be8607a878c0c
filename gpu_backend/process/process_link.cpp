#include "gpu_backend/process/process_link.hpp"

#include <unistd.h>

#include <algorithm>

#include "prefetchlab/version.hpp"

namespace prefetchlab::gpu {
namespace {

using Clock = std::chrono::steady_clock;
using net::Message;
constexpr std::chrono::milliseconds kPoll{50};

}  // namespace

ProcessLink::ProcessLink(const LaunchRank& me, const std::string& run, std::chrono::milliseconds timeout)
    : me_(me), timeout_(timeout) {
  if (me.rank == 0) {
    net::StoreOptions options;
    options.bind_address = me.master_addr;
    options.port = me.master_port;
    options.secret = me.secret;
    options.world_size = me.world_size;
    options.timeout = timeout;
    store_ = std::make_unique<net::ProcessStore>(options);
  }
  connection_ = net::TcpConnection::connect(me.master_addr, me.master_port, timeout);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  send(Message::kHello, {{"secret", me.secret},
                         {"rank", me.rank},
                         {"world_size", me.world_size},
                         {"version", kVersion},
                         {"run", run},
                         {"host", host}});
  const auto deadline = Clock::now() + timeout + std::chrono::seconds(5);
  for (;;) {
    std::optional<net::Frame> frame;
    try {
      frame = connection_.receive(kPoll);
    } catch (const net::ConnectionLost& e) {
      throw std::runtime_error("rank " + std::to_string(me.rank) + ": rank 0's store at " + me.master_addr + ":" +
                               std::to_string(me.master_port) + " closed the connection before every rank joined (" + e.what() + ")");
    }
    if (frame && frame->type == static_cast<std::uint32_t>(Message::kWelcome)) {
      nodes_ = frame->header.value("nodes", 1);
      ranks_per_node_ = frame->header.value("ranks_per_node", 1);
      job_ = frame->header.value("job", std::string("prefetchlab-job"));
      last_heard_ = Clock::now();
      reader_ = std::thread([this] { read_loop(); });
      return;
    }
    if (frame && frame->type == static_cast<std::uint32_t>(Message::kRefused)) {
      throw ProcessJobRefused("--launcher env: the job's ranks disagree: " + frame->header.value("message", std::string("?")));
    }
    if (Clock::now() > deadline) {
      throw std::runtime_error("rank " + std::to_string(me.rank) + ": not every rank joined within " +
                               std::to_string(timeout.count()) + " ms");
    }
  }
}

ProcessLink::~ProcessLink() {
  try {
    send(Message::kBye, nlohmann::json::object());
  } catch (const std::exception&) {
    // The store is gone already: nothing to say goodbye to.
  }
  {
    std::lock_guard lock(inbox_mutex_);
    stopping_ = true;
  }
  if (reader_.joinable()) reader_.join();
  connection_.close();
  store_.reset();  // rank 0: waits for the others
}

void ProcessLink::read_loop() {
  for (;;) {
    {
      std::lock_guard lock(inbox_mutex_);
      if (stopping_) return;
    }
    std::optional<net::Frame> frame;
    try {
      frame = connection_.receive(kPoll);
    } catch (const std::exception& e) {
      {
        std::lock_guard lock(inbox_mutex_);
        if (stopping_) return;  // saying goodbye: the store may close first
        lost_ = e.what();
        arrived_.notify_all();
      }
      // The run fails at once, not at its next collective.
      fail_locally(store_failure("the run", std::string("closed the connection (rank 0's process exited?): ") + e.what()));
      return;
    }
    if (!frame) continue;
    if (frame->type == static_cast<std::uint32_t>(Message::kAbort)) fail_locally(net::failure_from_header(frame->header));
    std::lock_guard lock(inbox_mutex_);
    last_heard_ = Clock::now();
    if (frame->type != static_cast<std::uint32_t>(Message::kHeartbeat)) inbox_.push_back(std::move(*frame));
    arrived_.notify_all();
  }
}

void ProcessLink::send(Message type, const nlohmann::json& header, std::span<const std::byte> data) {
  std::lock_guard lock(send_mutex_);
  connection_.send(static_cast<std::uint32_t>(type), header, data);
}

RankFailure ProcessLink::store_failure(const std::string& what, const std::string& why) const {
  return RankFailure{0, what, "rank 0's store at " + me_.master_addr + ":" + std::to_string(me_.master_port) + " " + why,
                     FailureKind::kTimeout};
}

void ProcessLink::store_lost(const std::string& what, const std::string& why) {
  fail_locally(store_failure(what, why));
  std::lock_guard lock(failure_mutex_);
  throw RunAborted(*failure_);  // the job's first failure, which may be an earlier one
}

void ProcessLink::request(Message type, const nlohmann::json& header, std::span<const std::byte> data, const std::string& what) {
  try {
    send(type, header, data);
  } catch (const net::ConnectionLost& e) {
    store_lost(what, std::string("is unreachable: ") + e.what());
  }
}

void ProcessLink::attach(FailureState& state, std::function<void()> also) {
  state.on_first_failure([this, also = std::move(also)](const RankFailure& failure) {
    abort(failure);
    if (also) also();
  });
  std::optional<RankFailure> known;
  {
    std::lock_guard lock(failure_mutex_);
    sink_ = &state;
    known = failure_;
  }
  if (known) state.abort(*known);
}

void ProcessLink::detach() {
  std::lock_guard lock(failure_mutex_);
  sink_ = nullptr;
}

// The sink is told outside the lock: its first-failure listener calls abort() below, which
// then finds the failure known and sends nothing.
void ProcessLink::fail_locally(const RankFailure& failure) {
  FailureState* sink = nullptr;
  RankFailure first;
  {
    std::lock_guard lock(failure_mutex_);
    if (!failure_) failure_ = failure;
    first = *failure_;
    sink = sink_;
  }
  if (sink) sink->abort(first);
}

std::optional<RankFailure> ProcessLink::failure() const {
  std::lock_guard lock(failure_mutex_);
  return failure_;
}

void ProcessLink::abort(const RankFailure& failure) {
  {
    std::lock_guard lock(failure_mutex_);
    if (failure_) return;  // known here already, so the store knows it (or told us)
    failure_ = failure;
  }
  try {
    send(Message::kAbort, net::failure_header(failure));
  } catch (const std::exception&) {
    // The store is gone: the other ranks find out from their own connections.
  }
}

net::Frame ProcessLink::wait_for(Message type, bool abort_throws, const std::string& what) {
  // The store answers within its timeout (it aborts the job otherwise) and sends a waiting rank a
  // heartbeat every second: silence this long means rank 0's process is stuck or unreachable.
  const auto silence_limit = timeout_ + std::chrono::seconds(10);
  std::string lost;
  {
    std::unique_lock lock(inbox_mutex_);
    last_heard_ = std::max(last_heard_, Clock::now());
    for (;;) {
      for (auto it = inbox_.begin(); it != inbox_.end(); ++it) {
        if (it->type == static_cast<std::uint32_t>(Message::kAbort)) {
          if (!abort_throws) continue;
          const RankFailure failure = net::failure_from_header(it->header);
          throw RunAborted(failure);
        }
        if (it->type != static_cast<std::uint32_t>(type)) continue;
        net::Frame frame = std::move(*it);
        inbox_.erase(it);
        return frame;
      }
      if (!lost_.empty()) {
        lost = "closed the connection (rank 0's process exited?): " + lost_;
        break;
      }
      if (Clock::now() - last_heard_ > silence_limit) {
        lost = "went silent for " + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(silence_limit).count()) + " ms";
        break;
      }
      arrived_.wait_for(lock, kPoll);
    }
  }
  store_lost(what, lost);
}

void ProcessLink::put(const std::string& key, std::span<const std::byte> value) {
  request(Message::kPut, {{"key", key}}, value, "setup");
}

std::vector<std::byte> ProcessLink::get(const std::string& key) {
  request(Message::kGet, {{"key", key}}, {}, "setup");
  return wait_for(Message::kValue, /*abort_throws=*/true, "setup").data;
}

std::vector<std::byte> ProcessLink::collective(const nlohmann::json& header, std::span<const std::byte> data) {
  {
    std::lock_guard lock(failure_mutex_);
    if (failure_) throw RunAborted(*failure_);
  }
  const std::string what = header.value("what", std::string("a collective"));
  request(Message::kCollective, header, data, what);
  net::Frame result = wait_for(Message::kResult, /*abort_throws=*/true, what);
  return std::move(result.data);
}

std::vector<std::optional<std::string>> ProcessLink::gather(const std::string& mine) {
  // With the store gone (rank 0's process died) there is nothing to gather: the failure is
  // recorded, and rank 0's vector holds no rank's records.
  const std::vector<std::optional<std::string>> none(me_.rank == 0 ? static_cast<std::size_t>(me_.world_size) : 0);
  const std::string what = "sending the records to rank 0";
  net::Frame bundle;
  try {
    request(Message::kReport, nlohmann::json::object(), std::as_bytes(std::span(mine.data(), mine.size())), what);
    bundle = wait_for(Message::kReports, /*abort_throws=*/false, what);
  } catch (const RunAborted&) {
    return none;
  }
  std::vector<std::optional<std::string>> out;
  if (me_.rank != 0) return out;
  std::size_t at = 0;
  for (const auto& size : bundle.header.at("sizes")) {
    const std::int64_t bytes = size.get<std::int64_t>();
    if (bytes < 0) {
      out.emplace_back(std::nullopt);
      continue;
    }
    if (at + static_cast<std::size_t>(bytes) > bundle.data.size()) throw std::runtime_error("the store's records bundle is cut short");
    out.emplace_back(std::string(reinterpret_cast<const char*>(bundle.data.data() + at), static_cast<std::size_t>(bytes)));
    at += static_cast<std::size_t>(bytes);
  }
  return out;
}

}  // namespace prefetchlab::gpu
