#include "core/io/io_error.hpp"

#include <system_error>

namespace prefetchlab::core {
namespace {

std::string describe(const std::string& what, const std::filesystem::path& path, int error) {
  std::string message = what + " '" + path.string() + "'";
  if (error != 0) message += ": " + std::generic_category().message(error);
  return message;
}

}  // namespace

IoError::IoError(const std::string& what, const std::filesystem::path& path, int error)
    : std::runtime_error(describe(what, path, error)), path_(path) {}

}  // namespace prefetchlab::core
