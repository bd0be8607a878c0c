#pragma once
// A file the run could not write, read back or rename (a full disk, a permission, a folder that
// vanished): not the user's input and not our bug, so the command line gives it its own exit
// code, 6, and names the file.
#include <filesystem>
#include <stdexcept>
#include <string>

namespace prefetchlab::core {

class IoError : public std::runtime_error {
 public:
  // "<what> '<path>'", then ": <the system's reason>" when `error` (an errno) is set.
  IoError(const std::string& what, const std::filesystem::path& path, int error);

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace prefetchlab::core
