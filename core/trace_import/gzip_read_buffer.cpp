#include "core/trace_import/gzip_read_buffer.hpp"

#include <cerrno>
#include <cstring>

#include "core/input/input_error.hpp"

namespace prefetchlab::core {

GzipReadBuffer::GzipReadBuffer(const std::string& path) : buffer_(std::size_t{1} << 18) {
  errno = 0;
  file_ = gzopen(path.c_str(), "rb");
  if (file_ == nullptr) {
    throw InputError({path, 0}, "", std::string("cannot be opened: ") + (errno ? std::strerror(errno) : "out of memory"),
                     "a readable torch.profiler trace (.json or .json.gz)");
  }
  setg(buffer_.data(), buffer_.data(), buffer_.data());
}

GzipReadBuffer::~GzipReadBuffer() {
  if (file_ != nullptr) gzclose(file_);
}

GzipReadBuffer::int_type GzipReadBuffer::underflow() {
  if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
  if (!error_.empty()) return traits_type::eof();
  const int n = gzread(file_, buffer_.data(), static_cast<unsigned>(buffer_.size()));
  if (bytes_read_ == 0 && n > 0) compressed_ = gzdirect(file_) == 0;
  if (n <= 0) {
    int code = Z_OK;
    const char* message = gzerror(file_, &code);
    // Z_BUF_ERROR: the input ended inside a gzip stream (a truncated download or copy).
    if (code == Z_BUF_ERROR) {
      error_ = "cannot be decompressed: the gzip stream ends early (truncated file)";
    } else if (n < 0 || (code != Z_OK && code != Z_STREAM_END)) {
      error_ = std::string("cannot be decompressed: corrupt gzip data (") + (message ? message : "unknown zlib error") + ")";
    }
    return traits_type::eof();
  }
  bytes_read_ += static_cast<std::uint64_t>(n);
  if (!strings_within_limit(buffer_.data(), buffer_.data() + n)) {
    error_ = "holds a JSON string longer than " + std::to_string(kMaxStringBytes >> 20) +
             " MiB (no trace has one: a damaged or hostile file)";
    return traits_type::eof();
  }
  setg(buffer_.data(), buffer_.data(), buffer_.data() + n);
  return traits_type::to_int_type(*gptr());
}

bool GzipReadBuffer::strings_within_limit(const char* begin, const char* end) {
  for (const char* p = begin; p < end; ++p) {
    if (!in_string_) {
      if (*p == '"') {
        in_string_ = true;
        string_bytes_ = 0;
      }
      continue;
    }
    if (escaped_) {
      escaped_ = false;
    } else if (*p == '\\') {
      escaped_ = true;
    } else if (*p == '"') {
      in_string_ = false;
      continue;
    }
    if (++string_bytes_ > kMaxStringBytes) return false;
  }
  return true;
}

}  // namespace prefetchlab::core
