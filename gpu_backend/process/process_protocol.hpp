#pragma once
// The messages between the ranks of a process job and rank 0's store (process_store.hpp,
// process_link.hpp), each a frame of tcp_frames.hpp: a type, a JSON header, raw data.
#include <cstdint>

#include <nlohmann/json.hpp>

#include "gpu_backend/device/rank_failure.hpp"

namespace prefetchlab::gpu::net {

enum class Message : std::uint32_t {
  kHello = 1,   // rank -> store: {rank, world_size, version, run, host}
  kWelcome,     // store -> rank: every rank is here; {nodes, ranks_per_node, job}
  kRefused,     // store -> rank: {message}; the job cannot run (ranks disagree)
  kPut,         // rank -> store: {key}, data
  kGet,         // rank -> store: {key}
  kValue,       // store -> rank: {key}, data
  kCollective,  // rank -> store: {kind, type, op, seq, send_bytes, recv_bytes, what}, send data
  kResult,      // store -> rank: the rank's output
  kAbort,       // either way: {rank, kind, operation, reason}; the first one wins
  kReport,      // rank -> store: the rank's records
  kReports,     // store -> rank 0: {sizes: [bytes or -1 per rank]}, the records; to others: ack
  kBye,         // rank -> store: finished, closing
  kHeartbeat,   // store -> waiting ranks, every second: the store is alive
};

inline nlohmann::json failure_header(const RankFailure& f) {
  return {{"rank", f.rank}, {"kind", static_cast<int>(f.kind)}, {"operation", f.operation}, {"reason", f.reason}};
}
inline RankFailure failure_from_header(const nlohmann::json& h) {
  return RankFailure{h.at("rank").get<int>(), h.at("operation").get<std::string>(), h.at("reason").get<std::string>(),
                     static_cast<FailureKind>(h.at("kind").get<int>())};
}

}  // namespace prefetchlab::gpu::net
