#include "gpu_backend/process/process_store.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "gpu_backend/device/host_kernels.hpp"
#include "gpu_backend/device/rank_failure.hpp"
#include "gpu_backend/process/job_secret.hpp"
#include "gpu_backend/process/tcp_frames.hpp"

namespace prefetchlab::gpu::net {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr std::chrono::milliseconds kPoll{20};
constexpr std::chrono::seconds kHeartbeat{1};
// What a connection that has not yet proved the job's secret may do: one hello of a few fields,
// within a few seconds, alongside at most a few dozen others.
constexpr std::uint64_t kStrangerHeaderBytes = 64 << 10;
constexpr std::chrono::seconds kStrangerWait{10};
constexpr std::size_t kMaxStrangers = 64;

struct Posted {
  json header;
  std::vector<std::byte> data;
  std::string what() const { return header.value("what", std::string("a collective")); }
};

struct Peer {
  TcpConnection conn;
  int rank = -1;  // -1 until its hello
  bool authenticated = false;  // its hello held the job's secret
  Clock::time_point connected{};
  bool gone = false;
  bool said_bye = false;
  std::deque<Posted> collectives;
  std::deque<std::vector<std::byte>> reports;
  std::vector<std::string> gets;  // keys asked for, not yet put
  std::string doing = "setup";    // for messages: what it last asked for
  std::string host;               // its host name, from its hello
};


}  // namespace

class ProcessStore::Server {
 public:
  Server(const StoreOptions& options)
      : options_(options),
        listener_(options.bind_address, options.port),
        started_(Clock::now()),
        // Unguessable, so that no other user can create this job's shared memory files first.
        job_("prefetchlab-" + std::to_string(options.port) + "-" + random_hex(16)) {}

  const std::string& job() const { return job_; }

  // One pass of the loop; false once every rank has left.
  bool step() {
    std::vector<pollfd> fds{{listener_.fd(), POLLIN, 0}};
    for (const Peer& p : peers_) fds.push_back({p.gone ? -1 : p.conn.fd(), POLLIN, 0});
    ::poll(fds.data(), fds.size(), static_cast<int>(kPoll.count()));
    if (fds[0].revents & POLLIN) {
      while (auto conn = listener_.accept()) {
        if (strangers() >= kMaxStrangers) continue;  // closed at once
        conn->set_send_timeout(options_.timeout);
        conn->set_frame_limits(kStrangerHeaderBytes, 0);
        peers_.emplace_back();
        peers_.back().conn = std::move(*conn);
        peers_.back().connected = Clock::now();
      }
    }
    for (std::size_t i = 0; i < peers_.size(); ++i) {
      if (i + 1 < fds.size() && fds[i + 1].revents == 0) continue;
      Peer& peer = peers_[i];
      if (peer.gone) continue;
      try {
        while (auto frame = peer.conn.receive(std::chrono::milliseconds(0))) handle(peer, std::move(*frame));
      } catch (const std::exception& e) {
        lost(peer, e.what());
      }
    }
    check_time();
    if (!refused_.empty()) return !all_left();
    return !(admitted_ && all_left());
  }

 private:
  bool all_left() const {
    return std::all_of(peers_.begin(), peers_.end(), [](const Peer& p) { return p.gone || p.said_bye; });
  }
  std::vector<Peer*> ranks() {
    std::vector<Peer*> out(static_cast<std::size_t>(options_.world_size), nullptr);
    for (Peer& p : peers_) {
      if (p.rank >= 0) out[static_cast<std::size_t>(p.rank)] = &p;
    }
    return out;
  }
  std::string name(const Peer& p) const { return p.rank >= 0 ? "rank " + std::to_string(p.rank) : "a connection"; }
  std::size_t strangers() const {
    return static_cast<std::size_t>(
        std::count_if(peers_.begin(), peers_.end(), [](const Peer& p) { return !p.gone && !p.authenticated; }));
  }

  void send(Peer& p, Message type, const json& header, std::span<const std::byte> data = {}) {
    if (p.gone) return;
    try {
      p.conn.send(static_cast<std::uint32_t>(type), header, data);
    } catch (const std::exception& e) {
      lost(p, e.what());
    }
  }

  // Tells the job's own processes only: a refusal names the job's ranks and what they run.
  void refuse(const std::string& message) {
    if (refused_.empty()) refused_ = message;
    for (Peer& p : peers_) {
      if (p.authenticated) send(p, Message::kRefused, {{"message", refused_}});
    }
  }

  void abort(const RankFailure& failure) {
    if (failure_) return;
    failure_ = failure;
    for (Peer& p : peers_) {
      p.collectives.clear();
      if (p.rank >= 0) send(p, Message::kAbort, failure_header(failure));
    }
  }

  void lost(Peer& p, const std::string& why) {
    if (p.gone) return;
    p.gone = true;
    p.conn.close();
    if (p.said_bye || p.rank < 0) return;
    if (!admitted_) {
      refuse(name(p) + " left before every rank connected (" + why + ")");
      return;
    }
    abort(RankFailure{p.rank, p.doing, "its process exited or its connection to the store broke (" + why + ")",
                      FailureKind::kTimeout});
    try_gather();  // it sends no records now
  }

  void handle(Peer& p, Frame frame) {
    const auto type = static_cast<Message>(frame.type);
    if (p.rank < 0 && type != Message::kHello) throw std::runtime_error("spoke before saying hello");
    switch (type) {
      case Message::kHello: hello(p, frame.header); break;
      case Message::kPut: {
        const std::string key = frame.header.at("key");
        values_[key] = std::move(frame.data);
        for (Peer& q : peers_) {
          auto it = std::find(q.gets.begin(), q.gets.end(), key);
          if (it == q.gets.end()) continue;
          q.gets.erase(it);
          send(q, Message::kValue, {{"key", key}}, values_[key]);
        }
        break;
      }
      case Message::kGet: {
        const std::string key = frame.header.at("key");
        if (auto it = values_.find(key); it != values_.end()) {
          send(p, Message::kValue, {{"key", key}}, it->second);
        } else {
          p.gets.push_back(key);
        }
        break;
      }
      case Message::kCollective: {
        Posted posted{std::move(frame.header), std::move(frame.data)};
        p.doing = posted.what();
        if (failure_) {
          send(p, Message::kAbort, failure_header(*failure_));
          break;
        }
        p.collectives.push_back(std::move(posted));
        last_arrival_ = Clock::now();
        try_collective();
        break;
      }
      case Message::kAbort: {
        abort(failure_from_header(frame.header));
        break;
      }
      case Message::kReport:
        p.doing = "sending its records";
        p.reports.push_back(std::move(frame.data));
        last_report_ = Clock::now();
        try_gather();
        break;
      case Message::kBye:
        p.said_bye = true;
        p.gone = true;
        p.conn.close();
        break;
      default: throw std::runtime_error("sent an unknown message " + std::to_string(frame.type));
    }
  }

  void hello(Peer& p, const json& h) {
    if (p.authenticated) throw std::runtime_error("said hello twice");
    const auto secret = h.find("secret");
    if (secret == h.end() || !secret->is_string() ||
        !secrets_equal(secret->get_ref<const std::string&>(), options_.secret)) {
      // Nothing of the job in the answer, and no effect on it.
      send(p, Message::kRefused,
           {{"message", "rank 0's store did not accept this process's job secret (PREFETCHLAB_JOB_SECRET or "
                        "PREFETCHLAB_JOB_SECRET_FILE must be the same for every rank)"}});
      p.gone = true;
      p.conn.close();
      return;
    }
    p.authenticated = true;
    p.conn.set_frame_limits(std::uint64_t{1} << 20, std::uint64_t{1} << 40);
    if (!refused_.empty()) {
      send(p, Message::kRefused, {{"message", refused_}});
      return;
    }
    const int rank = h.at("rank").get<int>();
    const int world = h.at("world_size").get<int>();
    const std::string version = h.at("version").get<std::string>();
    const std::string run = h.at("run").get<std::string>();
    std::ostringstream refusal;
    if (world != options_.world_size) {
      refusal << "rank " << rank << " says WORLD_SIZE " << world << " but rank 0 serves " << options_.world_size << " ranks";
    } else if (rank < 0 || rank >= world) {
      refusal << "a process says rank " << rank << ", outside 0 .. " << world - 1;
    } else if (ranks()[static_cast<std::size_t>(rank)] != nullptr) {
      refusal << "two processes say rank " << rank << " (check RANK / SLURM_PROCID)";
    } else if (first_hello_ && version != first_hello_->at("version").get<std::string>()) {
      refusal << "rank " << rank << " runs prefetchlab " << version << " but rank " << first_hello_->at("rank").get<int>()
              << " runs " << first_hello_->at("version").get<std::string>();
    } else if (first_hello_ && run != first_hello_->at("run").get<std::string>()) {
      refusal << "rank " << rank << " runs '" << run << "' but rank " << first_hello_->at("rank").get<int>() << " runs '"
              << first_hello_->at("run").get<std::string>() << "' (every rank must run the same command and scenario)";
    }
    if (refusal.tellp() > 0) {
      refuse(refusal.str());
      return;
    }
    p.rank = rank;
    if (!first_hello_) first_hello_ = h;
    const auto all = ranks();
    p.host = h.value("host", std::string());
    if (std::all_of(all.begin(), all.end(), [](const Peer* q) { return q != nullptr; })) {
      admitted_ = true;
      std::map<std::string, int> per_host;
      for (const Peer* q : all) ++per_host[q->host];
      int ranks_per_node = 0;
      for (const auto& [host, count] : per_host) ranks_per_node = std::max(ranks_per_node, count);
      const json welcome{{"nodes", per_host.size()}, {"ranks_per_node", ranks_per_node}, {"job", job_}};
      for (Peer* q : all) send(*q, Message::kWelcome, welcome);
    }
  }

  // Answers the oldest collective once every rank has posted it.
  void try_collective() {
    for (;;) {
      const auto all = ranks();
      for (Peer* q : all) {
        if (q == nullptr || q->collectives.empty()) return;
      }
      std::vector<Posted> calls;
      for (Peer* q : all) {
        calls.push_back(std::move(q->collectives.front()));
        q->collectives.pop_front();
      }
      answer(all, calls);
      if (failure_) return;
    }
  }

  void answer(const std::vector<Peer*>& all, const std::vector<Posted>& calls) {
    const json& a = calls[0].header;
    for (std::size_t r = 1; r < calls.size(); ++r) {
      const json& b = calls[r].header;
      for (const char* field : {"kind", "type", "op", "seq", "send_bytes", "recv_bytes", "shared_memory"}) {
        if (a.value(field, json()) != b.value(field, json())) {
          std::ostringstream reason;
          reason << "collective mismatch:";
          for (std::size_t q = 0; q < calls.size(); ++q) reason << " rank " << q << " issued " << calls[q].what() << ";";
          abort(RankFailure{static_cast<int>(r), calls[r].what(), reason.str(), FailureKind::kCollectiveMismatch});
          return;
        }
      }
    }
    const auto kind = a.at("kind").get<std::string>();
    // The data went through shared memory (or this is the barrier after it): every rank only
    // needs to know that all have arrived.
    if (a.value("shared_memory", false) || kind == "barrier") {
      for (Peer* q : all) send(*q, Message::kResult, json::object());
      return;
    }
    const auto type = static_cast<ElementType>(a.at("type").get<int>());
    const auto op = static_cast<ReduceOp>(a.at("op").get<int>());
    const auto send_bytes = a.at("send_bytes").get<std::uint64_t>();
    const auto recv_bytes = a.at("recv_bytes").get<std::uint64_t>();
    for (const Posted& c : calls) {
      if (c.data.size() != send_bytes) throw std::runtime_error("a collective's data is not its size");
    }
    const std::int64_t elem = element_bytes(type);
    if (kind == "all_gather") {
      std::vector<std::byte> out;
      out.reserve(recv_bytes);
      for (const Posted& c : calls) out.insert(out.end(), c.data.begin(), c.data.end());
      for (Peer* q : all) send(*q, Message::kResult, json::object(), out);
    } else if (kind == "reduce_scatter") {
      for (std::size_t r = 0; r < all.size(); ++r) {
        std::vector<const void*> sources;
        for (const Posted& c : calls) sources.push_back(c.data.data() + r * recv_bytes);
        std::vector<std::byte> out(recv_bytes);
        host::reduce_into(type, op, sources, static_cast<std::int64_t>(recv_bytes) / elem, out.data());
        send(*all[r], Message::kResult, json::object(), out);
      }
    } else if (kind == "all_reduce") {
      std::vector<const void*> sources;
      for (const Posted& c : calls) sources.push_back(c.data.data());
      std::vector<std::byte> out(send_bytes);
      host::reduce_into(type, op, sources, static_cast<std::int64_t>(send_bytes) / elem, out.data());
      for (Peer* q : all) send(*q, Message::kResult, json::object(), out);
    } else {
      throw std::runtime_error("an unknown collective " + kind);
    }
  }

  // Sends rank 0 every rank's records once each rank has sent its own or is gone.
  void try_gather() {
    const auto all = ranks();
    if (!admitted_) return;
    bool any = false;
    for (Peer* q : all) {
      if (!q->gone && q->reports.empty()) return;
      any = any || !q->reports.empty();
    }
    if (!any) return;
    json sizes = json::array();
    std::vector<std::byte> data;
    for (Peer* q : all) {
      if (q->reports.empty()) {
        sizes.push_back(-1);
        continue;
      }
      sizes.push_back(q->reports.front().size());
      data.insert(data.end(), q->reports.front().begin(), q->reports.front().end());
      q->reports.pop_front();
    }
    for (Peer* q : all) send(*q, Message::kReports, {{"sizes", sizes}}, q->rank == 0 ? std::span<const std::byte>(data) : std::span<const std::byte>());
  }

  void check_time() {
    const auto now = Clock::now();
    for (Peer& p : peers_) {
      if (!p.gone && !p.authenticated && now - p.connected > kStrangerWait) {
        p.gone = true;
        p.conn.close();
      }
    }
    if (!admitted_ && refused_.empty() && now - started_ > options_.timeout) {
      std::ostringstream missing;
      const auto all = ranks();
      for (std::size_t r = 0; r < all.size(); ++r) {
        if (!all[r]) missing << (missing.tellp() > 0 ? "," : "") << r;
      }
      refuse("rank(s) " + missing.str() + " did not connect to the store within " + std::to_string(options_.timeout.count()) +
             " ms (are they launched, with the same MASTER_ADDR and MASTER_PORT?)");
      return;
    }
    if (!admitted_) return;
    const auto all = ranks();
    // A collective some ranks wait in, that another has not reached.
    if (!failure_ && now - last_arrival_ > options_.timeout) {
      std::ostringstream waiting;
      int missing = -1;
      std::string what;
      for (Peer* q : all) {
        if (!q->collectives.empty()) {
          waiting << (waiting.tellp() > 0 ? "," : "") << q->rank;
          if (what.empty()) what = q->collectives.front().what();
        } else if (missing < 0) {
          missing = q->rank;
        }
      }
      if (!what.empty() && missing >= 0) {
        abort(RankFailure{missing, what,
                          "did not reach the collective within " + std::to_string(options_.timeout.count()) + " ms; ranks " +
                              waiting.str() + " were waiting in it",
                          FailureKind::kTimeout});
      }
    }
    // Records some ranks sent while another never does: it is dropped from the gather.
    const bool some_reported = std::any_of(all.begin(), all.end(), [](const Peer* q) { return !q->reports.empty(); });
    if (some_reported && now - last_report_ > options_.timeout) {
      for (Peer* q : all) {
        if (q->reports.empty() && !q->gone) {
          abort(RankFailure{q->rank, q->doing, "did not send its records within " + std::to_string(options_.timeout.count()) + " ms",
                            FailureKind::kTimeout});
          lost(*q, "timed out");
        }
      }
      try_gather();
    }
    if (now - last_heartbeat_ > kHeartbeat) {
      last_heartbeat_ = now;
      for (Peer& p : peers_) {
        if (p.rank >= 0 && (!p.collectives.empty() || !p.reports.empty() || !p.gets.empty() )) {
          send(p, Message::kHeartbeat, json::object());
        }
      }
    }
  }

  StoreOptions options_;
  TcpListener listener_;
  Clock::time_point started_;
  std::deque<Peer> peers_;  // stable addresses
  std::optional<json> first_hello_;
  bool admitted_ = false;
  std::string refused_;
  std::optional<RankFailure> failure_;
  std::map<std::string, std::vector<std::byte>> values_;
  Clock::time_point last_arrival_{}, last_report_{}, last_heartbeat_{};
  std::string job_;  // names this job's shared memory files (shared_memory_slots.hpp)
};

ProcessStore::ProcessStore(const StoreOptions& options) {
  // An empty secret would admit anyone.
  if (options.secret.size() < 16) throw std::invalid_argument("the store needs the job's secret, 16 bytes or more");
  server_ = std::make_unique<Server>(options);
  thread_ = std::thread([this] {
    try {
      while (!stop_.load() && server_->step()) {
      }
    } catch (const std::exception&) {
      // A broken store ends every connection, which every rank reports.
    }
    done_.store(true);
  });
}

ProcessStore::~ProcessStore() {
  // The other ranks may still be sending their records or saying goodbye.
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (!done_.load() && Clock::now() < deadline) std::this_thread::sleep_for(kPoll);
  stop_.store(true);
  thread_.join();
  // Shared memory files a killed rank on this node left behind (each rank removes its own).
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", error)) {
    if (entry.path().filename().string().rfind(server_->job() + "-", 0) == 0) std::filesystem::remove(entry.path(), error);
  }
}

}  // namespace prefetchlab::gpu::net
