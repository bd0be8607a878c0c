#pragma once
// The store of a job whose ranks are processes (`--launcher env`), served by rank 0 on
// MASTER_ADDR:MASTER_PORT as torch.distributed's TCPStore is. Every rank, rank 0 included,
// connects to it (process_link.hpp). It
//   - admits the ranks: each says its rank, the world's size, its prefetchlab version and what
//     it runs (a digest of the command and scenario); any difference refuses the whole job;
//   - keeps key/value pairs (NCCL's unique id for ncclCommInitRank);
//   - is the host device's collective transport between processes: the k-th collective of every
//     rank is checked to be the same collective and answered with each rank's output, reduced
//     in rank order as the threads' rendezvous reduces (so results are bit-identical), or, when
//     the data went through shared memory, with "every rank is here" (process_transport.hpp);
//   - gathers each rank's records for rank 0, which writes the report;
//   - ends every rank, naming the rank, when one fails, exits, loses its connection or does not
//     reach a collective within the timeout (counted from the latest arrival).
// One thread with poll() over every connection; no rank thread touches its state.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "gpu_backend/process/process_protocol.hpp"

namespace prefetchlab::gpu::net {

struct StoreOptions {
  // Where to listen: MASTER_ADDR, the address the ranks were told (never every interface).
  std::string bind_address = "127.0.0.1";
  int port = 29500;
  // The job's secret (job_secret.hpp): a connection whose hello does not hold it is dropped with
  // a refusal that names nothing of the job, and cannot refuse, abort or join it.
  std::string secret;
  int world_size = 1;
  // A rank that has not reached a collective (or sent its records) this long after the latest
  // rank did, or has not connected this long after the store started, fails the job.
  std::chrono::milliseconds timeout{60'000};
};

class ProcessStore {
 public:
  // Listens at once (throws std::runtime_error when the port is taken) and serves on a thread.
  explicit ProcessStore(const StoreOptions& options);
  ProcessStore(const ProcessStore&) = delete;
  ProcessStore& operator=(const ProcessStore&) = delete;
  // Waits until every rank said goodbye or is gone (at most 30 s), then stops; removes the
  // shared memory files of this job that a killed rank left.
  ~ProcessStore();

 private:
  class Server;
  std::unique_ptr<Server> server_;
  std::thread thread_;
  std::atomic<bool> stop_{false};  // the destructor gave up waiting
  std::atomic<bool> done_{false};  // every rank left
};

}  // namespace prefetchlab::gpu::net
