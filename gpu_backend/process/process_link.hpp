#pragma once
// One rank's connection to its job (`--launcher env`): rank 0 serves the store
// (process_store.hpp) and every rank, rank 0 included, talks to it through a ProcessLink. It
// admits this rank (the same world, version and run as every other, or a clear error), carries
// the host device's collectives between processes, NCCL's unique id, and each rank's records
// to rank 0. A failure anywhere reaches every rank at once: a reader thread takes every frame
// off the connection, records the store's abort in the current run's FailureState (which wakes
// whatever waits), and hands answers to the thread that asked.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu_backend/device/failure_state.hpp"
#include "gpu_backend/process/launch_env.hpp"
#include "gpu_backend/process/process_store.hpp"
#include "gpu_backend/process/tcp_frames.hpp"

namespace prefetchlab::gpu {

// The ranks disagree (world size, rank numbers, version, what they run): bad input, not a crash.
class ProcessJobRefused : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

class ProcessLink {
 public:
  // Rank 0 starts the store first. Connects (retrying while rank 0 starts), says hello and waits
  // until every rank has (at most `timeout`). `run` names what this rank runs (command and a
  // digest of the scenario): every rank's must be the same.
  ProcessLink(const LaunchRank& me, const std::string& run, std::chrono::milliseconds timeout);
  ProcessLink(const ProcessLink&) = delete;
  ProcessLink& operator=(const ProcessLink&) = delete;
  ~ProcessLink();  // says goodbye; rank 0 then waits for the others to leave

  const LaunchRank& launch() const { return me_; }
  int rank() const { return me_.rank; }
  int world_size() const { return me_.world_size; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // The hosts (distinct host names) the ranks run on, and the most ranks on one of them.
  int nodes() const { return nodes_; }
  int ranks_per_node() const { return ranks_per_node_; }
  // Every rank runs on one host: shared memory can carry collectives.
  bool same_host() const { return nodes_ == 1; }
  // A name for this job, the same on every rank, unique on the node while it runs.
  const std::string& job() const { return job_; }
  // The device groups made on this link, counted (every rank makes them in the same order).
  int next_group() { return groups_++; }

  // Joins a device group's failure state to the job, both ways: its first failure goes to the
  // store (and `also` runs, e.g. aborting NCCL), and the store's aborts are recorded in it.
  // detach() before the state is destroyed.
  void attach(FailureState& state, std::function<void()> also = {});
  void detach();
  // A failure on this rank: the store tells every rank (the first one wins there).
  void abort(const RankFailure& failure);
  // The job's failure, once known here (from this rank or from the store).
  std::optional<RankFailure> failure() const;

  // Key/value pairs (NCCL's unique id): get waits until some rank put the key.
  void put(const std::string& key, std::span<const std::byte> value);
  std::vector<std::byte> get(const std::string& key);

  // One collective: `header` says what it is ({kind, type, op, seq, send_bytes, recv_bytes,
  // what}), `send` this rank's input; returns this rank's output. Throws RunAborted when the job
  // failed (here or on another rank).
  std::vector<std::byte> collective(const nlohmann::json& header, std::span<const std::byte> send);

  // Every rank's records at rank 0, in rank order (nullopt for a rank that is gone); an empty
  // vector on the other ranks, once the store has them.
  std::vector<std::optional<std::string>> gather(const std::string& mine);

 private:
  // Waits for the answer of `type` (throws RunAborted when the job failed and `abort_throws`,
  // or when the store is gone or silent).
  net::Frame wait_for(net::Message type, bool abort_throws, const std::string& what);
  void read_loop();
  void fail_locally(const RankFailure& failure);
  void send(net::Message type, const nlohmann::json& header, std::span<const std::byte> data = {});
  // A request while doing `what`: a broken connection fails the job (store_lost).
  void request(net::Message type, const nlohmann::json& header, std::span<const std::byte> data, const std::string& what);
  // Rank 0's store is gone or silent (`why`): the failure naming it, and recording + throwing it.
  RankFailure store_failure(const std::string& what, const std::string& why) const;
  [[noreturn]] void store_lost(const std::string& what, const std::string& why);

  LaunchRank me_;
  std::chrono::milliseconds timeout_;
  int nodes_ = 1, ranks_per_node_ = 1;
  std::string job_;
  int groups_ = 0;
  std::unique_ptr<net::ProcessStore> store_;  // rank 0
  net::TcpConnection connection_;
  std::mutex send_mutex_;
  mutable std::mutex failure_mutex_;
  FailureState* sink_ = nullptr;
  std::optional<RankFailure> failure_;  // the job's, once known here

  // Filled by the reader thread.
  std::mutex inbox_mutex_;
  std::condition_variable arrived_;
  std::deque<net::Frame> inbox_;  // answers (results, values, records)
  std::chrono::steady_clock::time_point last_heard_;
  std::string lost_;  // set: the connection broke, and why
  bool stopping_ = false;
  std::thread reader_;
};

}  // namespace prefetchlab::gpu
