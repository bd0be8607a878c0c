#pragma once
// A std::streambuf over zlib's gzread: reads .json.gz and plain .json alike (zlib passes data
// without a gzip header through unchanged), a block at a time, so a large trace is parsed
// without holding its text in memory. It also bounds what a hostile file can make the JSON
// parser hold: a string longer than kMaxStringBytes (a 1.5 MB .json.gz can hold a 1.5 GiB
// string) ends the stream with error() set, before the parser has buffered it.
#include <zlib.h>

#include <cstdint>
#include <streambuf>
#include <string>
#include <vector>

namespace prefetchlab::core {

class GzipReadBuffer : public std::streambuf {
 public:
  // Kernel names, the longest strings of a real trace, are a few kB.
  static constexpr std::uint64_t kMaxStringBytes = std::uint64_t{16} << 20;

  // Throws InputError when the file cannot be opened.
  explicit GzipReadBuffer(const std::string& path);
  ~GzipReadBuffer() override;
  GzipReadBuffer(const GzipReadBuffer&) = delete;
  GzipReadBuffer& operator=(const GzipReadBuffer&) = delete;

  // Why reading stopped before the end (a truncated or corrupt gzip stream, a string past
  // kMaxStringBytes); empty when it did not.
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
  // The JSON scanner's state across blocks: inside a string, after a backslash, its length.
  bool in_string_ = false;
  bool escaped_ = false;
  std::uint64_t string_bytes_ = 0;
  // Whether the block [begin, end) keeps every string within kMaxStringBytes.
  bool strings_within_limit(const char* begin, const char* end);
};

}  // namespace prefetchlab::core
