#pragma once
// The data path of the host device's collectives between processes on one node: each rank
// writes its input into a POSIX shared-memory file of its own (`/dev/shm`), and every rank reads
// its peers' files to compute its own output, as the threads' rendezvous reads peers' buffers.
// The files are named by the job, the device group and the rank, and grow to the largest input;
// a peer's file is mapped when first read and mapped again when it has grown. Ordering (written
// before read, read before overwritten) comes from rank 0's store: a round trip before and after
// each collective (process_transport.cpp).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace prefetchlab::gpu::host {

class SharedMemorySlots {
 public:
  // `prefix` names the job and the group (the same on every rank); this rank creates its file.
  SharedMemorySlots(std::string prefix, int rank, int world_size);
  SharedMemorySlots(const SharedMemorySlots&) = delete;
  SharedMemorySlots& operator=(const SharedMemorySlots&) = delete;
  ~SharedMemorySlots();  // unmaps everything and removes this rank's file

  // Copies `bytes` from `data` into this rank's file (growing it first).
  void write_own(const void* data, std::uint64_t bytes);
  // Rank `rank`'s file, at least `bytes` long (that rank has written them). Throws
  // std::runtime_error when it cannot be opened or is shorter.
  const std::byte* slot(int rank, std::uint64_t bytes);

  // The file name of `rank`'s slot under `prefix` (for the store's clean-up of a crashed job).
  static std::string name(const std::string& prefix, int rank);

 private:
  struct Mapping {
    int fd = -1;
    std::byte* address = nullptr;
    std::uint64_t bytes = 0;
  };
  void map(Mapping& m, std::uint64_t bytes, bool writable);

  std::string prefix_;
  int rank_;
  std::vector<Mapping> mappings_;  // per rank; this rank's is its own file
};

}  // namespace prefetchlab::gpu::host
