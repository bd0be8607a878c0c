#include "gpu_backend/process/shared_memory_slots.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace prefetchlab::gpu::host {
namespace {

std::string errno_text() { return std::strerror(errno); }

}  // namespace

std::string SharedMemorySlots::name(const std::string& prefix, int rank) { return "/" + prefix + "-r" + std::to_string(rank); }

SharedMemorySlots::SharedMemorySlots(std::string prefix, int rank, int world_size)
    : prefix_(std::move(prefix)), rank_(rank), mappings_(static_cast<std::size_t>(world_size)) {
  const std::string own = name(prefix_, rank_);
  // Exclusive: a file of that name that someone else made first is refused, never adopted.
  const int fd = ::shm_open(own.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot create the shared memory file " + own + ": " + errno_text());
  mappings_[static_cast<std::size_t>(rank_)].fd = fd;
}

SharedMemorySlots::~SharedMemorySlots() {
  for (Mapping& m : mappings_) {
    if (m.address) ::munmap(m.address, m.bytes);
    if (m.fd >= 0) ::close(m.fd);
  }
  if (!unlinked_) ::shm_unlink(name(prefix_, rank_).c_str());
}

void SharedMemorySlots::open(int rank, Mapping& m) {
  if (m.fd >= 0) return;
  const std::string file = name(prefix_, rank);
  m.fd = ::shm_open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
  if (m.fd < 0) throw std::runtime_error("cannot open rank " + std::to_string(rank) + "'s shared memory " + file + ": " + errno_text());
  // A peer's file is this user's, private: one another user planted is refused.
  struct stat info {};
  std::string problem;
  if (::fstat(m.fd, &info) != 0) problem = errno_text();
  else if (info.st_uid != ::geteuid()) problem = "is owned by another user";
  else if ((info.st_mode & 077) != 0) problem = "is open to other users";
  if (!problem.empty()) {
    ::close(m.fd);
    m.fd = -1;
    throw std::runtime_error("rank " + std::to_string(rank) + "'s shared memory " + file + " " + problem +
                             " (not this job's: refused)");
  }
}

void SharedMemorySlots::open_peers() {
  for (std::size_t q = 0; q < mappings_.size(); ++q) open(static_cast<int>(q), mappings_[q]);
}

void SharedMemorySlots::unlink_own() {
  if (unlinked_) return;
  if (::shm_unlink(name(prefix_, rank_).c_str()) != 0) {
    throw std::runtime_error("cannot remove the shared memory file " + name(prefix_, rank_) + ": " + errno_text());
  }
  unlinked_ = true;
}

void SharedMemorySlots::map(Mapping& m, std::uint64_t bytes, bool writable) {
  if (m.address) ::munmap(m.address, m.bytes);
  m.address = nullptr;
  m.bytes = 0;
  void* address = ::mmap(nullptr, bytes, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, m.fd, 0);
  if (address == MAP_FAILED) throw std::runtime_error("cannot map shared memory: " + errno_text());
  m.address = static_cast<std::byte*>(address);
  m.bytes = bytes;
}

void SharedMemorySlots::write_own(const void* data, std::uint64_t bytes) {
  if (bytes == 0) return;
  Mapping& own = mappings_[static_cast<std::size_t>(rank_)];
  if (own.bytes < bytes) {
    if (::ftruncate(own.fd, static_cast<off_t>(bytes)) != 0) {
      throw std::runtime_error("cannot grow the shared memory file " + name(prefix_, rank_) + " to " + std::to_string(bytes) +
                               " bytes: " + errno_text() + " (is /dev/shm large enough?)");
    }
    map(own, bytes, /*writable=*/true);
  }
  std::memcpy(own.address, data, bytes);
}

const std::byte* SharedMemorySlots::slot(int rank, std::uint64_t bytes) {
  Mapping& m = mappings_.at(static_cast<std::size_t>(rank));
  if (m.bytes >= bytes) return m.address;
  open(rank, m);
  const std::string file = name(prefix_, rank);
  struct stat info {};
  if (::fstat(m.fd, &info) != 0 || static_cast<std::uint64_t>(info.st_size) < bytes) {
    throw std::runtime_error("rank " + std::to_string(rank) + "'s shared memory " + file + " holds fewer than " + std::to_string(bytes) + " bytes");
  }
  map(m, static_cast<std::uint64_t>(info.st_size), /*writable=*/false);
  return m.address;
}

}  // namespace prefetchlab::gpu::host
