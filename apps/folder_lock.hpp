#pragma once
// An exclusive lock on an output folder for as long as one command (run, tune, validate, sweep,
// merge) writes to it, so two processes given the same -o (two runs, two shards, a resume while
// the first still runs) cannot interleave rows. flock(2) on the folder itself: no lock file to leave behind, and the kernel
// drops the lock when the process dies, so a killed sweep never blocks its own --resume.
#include <filesystem>

namespace prefetchlab::apps {

class FolderLock {
 public:
  // Throws core::InputError naming the folder when another process holds it.
  explicit FolderLock(const std::filesystem::path& dir);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace prefetchlab::apps
