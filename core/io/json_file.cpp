#include "core/io/json_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <string>
#include <system_error>

#include "core/io/io_error.hpp"
#include "core/io/output_file.hpp"

namespace prefetchlab::core {
namespace {

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};

template <class Json>
std::string pretty(const Json& document) {
  return document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace

void write_text_atomically(const std::filesystem::path& path, std::string_view text) {
  // A fresh, exclusively created temporary (never a planted link), renamed over `path`: rename
  // replaces a link at `path` itself, never what it points at.
  std::filesystem::path tmp;
  std::unique_ptr<std::FILE, FileCloser> file(create_temporary_beside(path, tmp));
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
      const int rename_error = ec.value();
      std::filesystem::remove(tmp, ec);
      throw IoError("cannot rename '" + tmp.string() + "' to", path, rename_error);
    }
  }
  file.reset();
  std::error_code ignored;
  std::filesystem::remove(tmp, ignored);
  throw IoError("cannot write", tmp, error);
}

void write_json_atomically(const std::filesystem::path& path, const nlohmann::json& document) {
  write_text_atomically(path, pretty(document));
}

void write_json_atomically(const std::filesystem::path& path,
                           const nlohmann::ordered_json& document) {
  write_text_atomically(path, pretty(document));
}

}  // namespace prefetchlab::core
