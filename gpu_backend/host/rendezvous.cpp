#include "gpu_backend/host/rendezvous.hpp"

#include <cstring>
#include <sstream>

#include "gpu_backend/device/host_kernels.hpp"

namespace prefetchlab::gpu::host {

Rendezvous::Rendezvous(int world_size, std::chrono::milliseconds timeout, FailureState& failure)
    : world_size_(world_size),
      timeout_(timeout),
      failure_(failure),
      posted_(static_cast<std::size_t>(world_size)),
      arrived_(static_cast<std::size_t>(world_size), false) {}

void Rendezvous::barrier(int rank, const CollectiveCall& call, const char* stage) {
  std::unique_lock lock(mutex_);
  const std::int64_t generation = generation_;
  arrived_[static_cast<std::size_t>(rank)] = true;
  last_arrival_ = std::chrono::steady_clock::now();
  if (++count_ == world_size_) {
    count_ = 0;
    std::fill(arrived_.begin(), arrived_.end(), false);
    ++generation_;
    changed_.notify_all();
    return;
  }
  while (generation_ == generation) {
    failure_.throw_if_failed();
    // The timeout runs from the latest arrival: a rank that is merely slow (a loaded CPU) and
    // arrives restarts it, so the rank named is one that made no progress for the whole timeout.
    if (std::chrono::steady_clock::now() >= last_arrival_ + timeout_) {
      std::ostringstream waiting;
      int missing = -1;
      for (int r = 0; r < world_size_; ++r) {
        if (arrived_[static_cast<std::size_t>(r)]) {
          waiting << (waiting.tellp() > 0 ? "," : "") << r;
        } else if (missing < 0) {
          missing = r;
        }
      }
      RankFailure failure;
      failure.rank = missing;
      failure.operation = call.describe();
      failure.reason = std::string("did not reach the collective (") + stage + ") within " +
                       std::to_string(timeout_.count()) + " ms; ranks " + waiting.str() + " were waiting in it";
      failure.kind = FailureKind::kTimeout;
      failure_.abort(failure);
      lock.unlock();
      failure_.throw_if_failed();
    }
    changed_.wait_for(lock, FailureState::kPollInterval);
  }
}

void Rendezvous::run(int rank, const CollectiveCall& call) {
  failure_.throw_if_failed();
  {
    std::lock_guard lock(mutex_);
    posted_[static_cast<std::size_t>(rank)] = call;
  }
  barrier(rank, call, "arrival");
  std::vector<CollectiveCall> calls;
  {
    std::lock_guard lock(mutex_);
    calls = posted_;
  }
  // Every rank runs the same check on the same calls, so all agree on the verdict.
  for (int r = 1; r < world_size_; ++r) {
    const CollectiveCall& a = calls[0];
    const CollectiveCall& b = calls[static_cast<std::size_t>(r)];
    if (a.kind != b.kind || a.send.bytes != b.send.bytes || a.recv.bytes != b.recv.bytes || a.type != b.type ||
        a.op != b.op || a.seq != b.seq) {
      std::ostringstream reason;
      reason << "collective mismatch:";
      for (int q = 0; q < world_size_; ++q) reason << " rank " << q << " issued " << calls[static_cast<std::size_t>(q)].describe() << ";";
      failure_.abort(RankFailure{r, b.describe(), reason.str(), FailureKind::kCollectiveMismatch});
      failure_.throw_if_failed();
    }
  }
  const auto numel_of = [&](std::uint64_t bytes) {
    return static_cast<std::int64_t>(bytes / static_cast<std::uint64_t>(element_bytes(call.type)));
  };
  switch (call.kind) {
    case CollectiveKind::kAllGather: {
      const std::uint64_t slot = call.send.bytes;
      for (int q = 0; q < world_size_; ++q) {
        const DeviceSpan source = calls[static_cast<std::size_t>(q)].send;
        const DeviceSpan target = call.recv.sub(static_cast<std::uint64_t>(q) * slot, slot);
        if (target.address != source.address || q != rank) std::memcpy(pointer(target), pointer(source), slot);
      }
      break;
    }
    case CollectiveKind::kReduceScatter: {
      const std::uint64_t chunk = call.recv.bytes;
      std::vector<const void*> sources;
      for (const CollectiveCall& c : calls) {
        sources.push_back(pointer(c.send.sub(static_cast<std::uint64_t>(rank) * chunk, chunk)));
      }
      reduce_into(call.type, call.op, sources, numel_of(chunk), pointer(call.recv));
      break;
    }
    case CollectiveKind::kAllReduce: {
      // In place: reduce into private scratch, wait until every rank has read every input, then
      // write the own buffer.
      std::vector<const void*> sources;
      for (const CollectiveCall& c : calls) sources.push_back(pointer(c.send));
      std::vector<std::byte> scratch(call.send.bytes);
      reduce_into(call.type, call.op, sources, numel_of(call.send.bytes), scratch.data());
      barrier(rank, call, "reduction");
      std::memcpy(pointer(call.recv), scratch.data(), scratch.size());
      break;
    }
  }
  // Nobody leaves (and reuses its input) before every rank has read it.
  barrier(rank, call, "departure");
}

}  // namespace prefetchlab::gpu::host
