#pragma once
// Runs the built `prefetchlab` binary from tests, capturing its exit code and output.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "tests/support/temp_dir.hpp"

namespace prefetchlab::testing {

struct CliResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// `prefix` goes before the binary (e.g. "timeout -s INT 1 ").
inline CliResult run_cli(const std::string& args, const std::string& prefix = "") {
  CliResult result;
  const std::string command = prefix + std::string(PREFETCHLAB_CLI) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return result;
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace prefetchlab::testing
