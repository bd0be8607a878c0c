#pragma once
// Shared by the libFuzzer harnesses (tests/fuzz/README.md). Each harness feeds its bytes to one
// reader of outside input through a file, as the command line does. The contract: the reader
// returns, or throws core::InputError (exit code 2 on the command line). Any other exception
// escapes the harness, and libFuzzer reports the uncaught exception (std::terminate) as a crash,
// as it does an abort, a sanitizer report, a hang (-timeout) or memory out of proportion
// (-rss_limit_mb, -malloc_limit_mb).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>

#include "core/input/input_error.hpp"

namespace prefetchlab::fuzz {

// A folder of this process's own under the system temp dir (harnesses write their input there).
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("prefetchlab-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

// Writes `bytes` to scratch_dir()/name and returns the path.
inline std::filesystem::path write_input(const std::string& name, std::string_view bytes) {
  const auto file = scratch_dir() / name;
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return file;
}

// The input split at its first NUL byte: a file and one more part (a --set, a second file).
inline std::pair<std::string_view, std::string_view> split_at_nul(const std::uint8_t* data, std::size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const auto nul = all.find('\0');
  if (nul == std::string_view::npos) return {all, {}};
  return {all.substr(0, nul), all.substr(nul + 1)};
}

// Runs `read`; an InputError is the reader's contract kept.
template <typename Read>
void expect_input_error_or_success(Read&& read) {
  try {
    read();
  } catch (const core::InputError&) {
  }
}

}  // namespace prefetchlab::fuzz
