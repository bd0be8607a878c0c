#pragma once
// The data path of the host device's collectives between processes on one node: each rank
// writes its input into a POSIX shared-memory file of its own (`/dev/shm`), and every rank reads
// its peers' files to compute its own output, as the threads' rendezvous reads peers' buffers.
// The files are named by the job (an unguessable name from rank 0's store), the device group and
// the rank, created exclusively with mode 0600, and a peer's is opened only if this user owns it
// and no one else may read it; they grow to the largest input;
// a peer's file is mapped when first read and mapped again when it has grown. Ordering (written
// before read, read before overwritten) comes from rank 0's store: a round trip before and after
// each collective (process_transport.cpp).
//
// Once every rank holds every peer's file open (after the first collective), each rank removes
// its file's name: the memory lives on through the open descriptors and goes with the last of
// them, so a rank killed later (kill -9, an out-of-memory kill) leaves nothing in /dev/shm. A
// file is named in /dev/shm only from a rank's start to its first collective's end.
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
  ~SharedMemorySlots();  // unmaps everything and removes this rank's file if still named

  // Opens every peer's file (each peer has created it: call after a barrier that follows every
  // rank's construction).
  void open_peers();
  // Removes this rank's file's name (call after a barrier that follows every rank's open_peers).
  void unlink_own();
  bool unlinked() const { return unlinked_; }

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
  void open(int rank, Mapping& m);

  std::string prefix_;
  int rank_;
  std::vector<Mapping> mappings_;  // per rank; this rank's is its own file
  bool unlinked_ = false;
};

}  // namespace prefetchlab::gpu::host
