#include "folder_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <system_error>

#include "core/input/input_error.hpp"

namespace prefetchlab::apps {

FolderLock::FolderLock(const std::filesystem::path& dir) {
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) {
    throw std::runtime_error("cannot open folder '" + dir.string() + "': " + std::generic_category().message(errno));
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    ::close(fd_);
    fd_ = -1;
    if (error == EWOULDBLOCK) {
      throw core::InputError({dir.string(), 0}, "",
                             "is in use by another running prefetchlab command (run, tune, validate, sweep or merge)",
                             "one command per output folder at a time (a separate -o for each)");
    }
    throw std::runtime_error("cannot lock folder '" + dir.string() + "': " + std::generic_category().message(error));
  }
}

FolderLock::~FolderLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

}  // namespace prefetchlab::apps
