#include "core/io/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "core/io/io_error.hpp"

namespace prefetchlab::core {
namespace {

// 0666 less the process's umask: what fopen would have created.
mode_t created_mode() {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return static_cast<mode_t>(0666 & ~mask);
}

}  // namespace

std::FILE* open_output_file(const std::filesystem::path& path, OutputMode mode) {
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (mode == OutputMode::kAppend ? O_APPEND : O_TRUNC);
  errno = 0;
  const int fd = ::open(path.c_str(), flags, 0666);
  if (fd < 0) {
    if (errno == ELOOP) throw IoError("refusing to write through a symbolic link (remove it, or choose another -o):", path, 0);
    throw IoError("cannot open for writing", path, errno);
  }
  std::FILE* file = ::fdopen(fd, mode == OutputMode::kAppend ? "ab" : "wb");
  if (!file) {
    const int error = errno;
    ::close(fd);
    throw IoError("cannot open for writing", path, error);
  }
  return file;
}

std::FILE* create_temporary_beside(const std::filesystem::path& path, std::filesystem::path& tmp) {
  std::string pattern = path.string() + ".tmp.XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  errno = 0;
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);  // O_CREAT | O_EXCL: nothing is followed
  if (fd < 0) throw IoError("cannot create a temporary file for", path, errno);
  tmp = std::filesystem::path(name.data());
  ::fchmod(fd, created_mode());  // mkostemp makes it 0600; an output is as readable as fopen's
  std::FILE* file = ::fdopen(fd, "wb");
  if (!file) {
    const int error = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw IoError("cannot open for writing", tmp, error);
  }
  return file;
}

}  // namespace prefetchlab::core
