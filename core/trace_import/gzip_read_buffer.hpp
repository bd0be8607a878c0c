#pragma once
// A std::streambuf over zlib's gzread: reads .json.gz and plain .json alike (zlib passes data
// without a gzip header through unchanged), a block at a time, so a large trace is parsed
// without holding its text in memory.
#include <zlib.h>

#include <cstdint>
#include <streambuf>
#include <string>
#include <vector>

namespace prefetchlab::core {

class GzipReadBuffer : public std::streambuf {
 public:
  // Throws InputError when the file cannot be opened.
  explicit GzipReadBuffer(const std::string& path);
  ~GzipReadBuffer() override;
  GzipReadBuffer(const GzipReadBuffer&) = delete;
  GzipReadBuffer& operator=(const GzipReadBuffer&) = delete;

  // Why reading stopped before the end (a truncated or corrupt gzip stream); empty when it did not.
  const std::string& error() const { return error_; }
  std::uint64_t bytes_read() const { return bytes_read_; }
  bool compressed() const { return compressed_; }

 protected:
  int_type underflow() override;

 private:
  gzFile file_ = nullptr;
  std::vector<char> buffer_;
  std::string error_;
  std::uint64_t bytes_read_ = 0;
  bool compressed_ = false;
};

}  // namespace prefetchlab::core
