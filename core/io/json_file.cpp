#include "core/io/json_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>

namespace prefetchlab::core {
namespace {

[[noreturn]] void throw_io_error(const char* what, const std::filesystem::path& path, int error) {
  std::string message = std::string(what) + " '" + path.string() + "'";
  if (error != 0) message += ": " + std::generic_category().message(error);
  throw std::runtime_error(message);
}

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};

template <class Json>
std::string pretty(const Json& document) {
  return document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace

void write_text_atomically(const std::filesystem::path& path, std::string_view text) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  errno = 0;
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(tmp.c_str(), "wb"));
  if (!file) throw_io_error("cannot open for writing", tmp, errno);
  errno = 0;
  const bool written = std::fwrite(text.data(), 1, text.size(), file.get()) == text.size() &&
                       std::fflush(file.get()) == 0 && ::fsync(::fileno(file.get())) == 0;
  int error = errno;
  if (written) {
    errno = 0;
    const int closed = std::fclose(file.release());
    error = errno;
    if (closed == 0) {
      std::error_code ec;
      std::filesystem::rename(tmp, path, ec);
      if (!ec) return;
      std::filesystem::remove(tmp, ec);
      throw std::runtime_error("cannot rename '" + tmp.string() + "' to '" + path.string() +
                               "': " + ec.message());
    }
  }
  file.reset();
  std::error_code ignored;
  std::filesystem::remove(tmp, ignored);
  throw_io_error("cannot write", tmp, error);
}

void write_json_atomically(const std::filesystem::path& path, const nlohmann::json& document) {
  write_text_atomically(path, pretty(document));
}

void write_json_atomically(const std::filesystem::path& path,
                           const nlohmann::ordered_json& document) {
  write_text_atomically(path, pretty(document));
}

}  // namespace prefetchlab::core
