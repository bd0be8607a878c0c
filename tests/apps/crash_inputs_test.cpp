// The inputs that once crashed or hung a reader (a fuzzer and a full disk found them; they are
// kept outside the repository, in shared/reliability/crash-inputs beside the checkout): each
// must now be a clear input error, exit code 2, naming the file, through the real command line
// and under a memory limit. Skipped with a message when the folder is absent; under CI=true its
// absence fails (tests/support/shared_data.hpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "tests/support/cli_runner.hpp"
#include "tests/support/sanitizer.hpp"
#include "tests/support/shared_data.hpp"

namespace fs = std::filesystem;

using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;

namespace {

const fs::path kCrashInputs = PREFETCHLAB_SOURCE_DIR "/../shared/reliability/crash-inputs";
const std::string kRoot = PREFETCHLAB_SOURCE_DIR;

std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The command that reads a crash input, by the reader its name starts with. A scenario input is
// the fuzz harness's form: the YAML document, a NUL byte, then one --set assignment.
std::string command_for(const fs::path& input, const TempDir& dir) {
  const std::string name = input.filename().string();
  const std::string file = input.string();
  if (name.starts_with("allocator-replay")) return "allocator-replay " + file;
  if (name.starts_with("nccl")) {
    return "calibrate --from-nccl-tests " + file + " --hardware h100-sxm-8x -o " + (dir.path() / "p.yaml").string();
  }
  if (name.starts_with("replay")) {
    return "replay --scenario " + kRoot + "/scenarios/tiny-llama-2x-h100.yaml --samples " + file;
  }
  if (name.starts_with("scenario")) {
    const std::string bytes = read_bytes(input);
    const auto nul = bytes.find('\0');
    const fs::path yaml = dir.write("scenario.yaml", bytes.substr(0, nul));
    const std::string set = nul == std::string::npos ? "" : " --set '" + bytes.substr(nul + 1) + "'";
    return "run " + yaml.string() + set + " -o " + (dir.path() / "out").string();
  }
  return "";
}

}  // namespace

TEST(CrashInputs, EachIsAClearInputErrorNamingTheFile) {
  PREFETCHLAB_REQUIRE_SHARED(kCrashInputs);
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(kCrashInputs)) {
    if (!entry.is_regular_file()) continue;
    TempDir dir("crash");
    const std::string command = command_for(entry.path(), dir);
    ASSERT_FALSE(command.empty()) << entry.path() << ": no reader known for this input; add one here";
    // 2 GB of address space at most: a reader whose memory follows a number in the file, not the
    // file's size, dies here instead of passing.
#ifdef PREFETCHLAB_SANITIZED
    // Sanitizers reserve terabytes of shadow address space: their RSS limit stands in.
    const auto result = run_cli(command, "ASAN_OPTIONS=\"$ASAN_OPTIONS:hard_rss_limit_mb=2000\" timeout 60 ");
#else
    const auto result = run_cli(command, "ulimit -v 2000000; timeout 60 ");
#endif
    // A scenario input is run from the YAML file it was split into; that file is named.
    const std::string named = entry.path().filename().string().starts_with("scenario")
                                  ? (dir.path() / "scenario.yaml").string()
                                  : entry.path().string();
    EXPECT_EQ(result.exit_code, 2) << command << "\n" << result.output;
    EXPECT_NE(result.output.find("error: " + named), std::string::npos) << command << "\n" << result.output;
    EXPECT_EQ(result.output.find("internal error"), std::string::npos) << result.output;
    ++checked;
  }
  EXPECT_GE(checked, 6);
}
