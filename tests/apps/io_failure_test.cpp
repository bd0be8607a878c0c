// A disk that fills during `run` is an I/O error (exit code 6) naming the file, and loses nothing
// already finished: every row file still ends on a whole row, and summary.json is either the old
// complete document or the new one. The full disk is a small tmpfs when this test may mount one
// (root, as in CI), else /dev/full behind a symlink (every write to it fails with ENOSPC).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/cli_runner.hpp"

namespace fs = std::filesystem;
using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;

namespace {

const fs::path kScenario = fs::path(PREFETCHLAB_SOURCE_DIR) / "scenarios" / "tiny-llama-2x-h100.yaml";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// A tmpfs of `kilobytes` mounted on `dir` for the test's lifetime, if this process may mount.
class SmallTmpfs {
 public:
  SmallTmpfs(const fs::path& dir, int kilobytes) : dir_(dir) {
    const std::string command = "mount -t tmpfs -o size=" + std::to_string(kilobytes) + "k tmpfs '" +
                                dir.string() + "' 2>/dev/null";
    mounted_ = std::system(command.c_str()) == 0;
  }
  ~SmallTmpfs() {
    if (mounted_) (void)std::system(("umount '" + dir_.string() + "'").c_str());
  }
  bool mounted() const { return mounted_; }

 private:
  fs::path dir_;
  bool mounted_ = false;
};

// Every CSV in `dir` ends on a whole row: non-empty, last byte '\n'.
void expect_whole_rows(const fs::path& dir) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".csv") continue;
    const std::string text = read_file(entry.path());
    ASSERT_FALSE(text.empty()) << entry.path();
    EXPECT_EQ(text.back(), '\n') << entry.path() << " ends torn";
  }
}

}  // namespace

TEST(IoFailure, FullDiskDuringRunIsExitSixNamingTheFileWithWholeRows) {
  TempDir dir("enospc");
  const fs::path mount = dir.path() / "disk";
  fs::create_directories(mount);
  SmallTmpfs tmpfs(mount, 48);  // the row files of this run need ~60 KB
  const fs::path out = mount / "out";
  fs::create_directories(out);
  if (!tmpfs.mounted()) {
    fs::create_symlink("/dev/full", out / "memory.csv");  // the seam: this file's writes fail
  }
  const auto result = run_cli("run " + kScenario.string() + " -o " + out.string());
  EXPECT_EQ(result.exit_code, 6) << result.output;
  EXPECT_NE(result.output.find("I/O error: cannot write '" + out.string()), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("No space left on device"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("internal error"), std::string::npos) << result.output;
  if (tmpfs.mounted()) {
    expect_whole_rows(out);
    EXPECT_FALSE(fs::exists(out / "summary.json.tmp"));
  }
}

TEST(IoFailure, SummaryIsTheOldCompleteDocumentWhenTheNewOneCannotBeWritten) {
  TempDir dir("enospc-summary");
  const fs::path out = dir.path() / "out";
  ASSERT_EQ(run_cli("run " + kScenario.string() + " -o " + out.string() + " --set output.trace=false").exit_code, 0);
  const std::string old_summary = read_file(out / "summary.json");
  ASSERT_FALSE(old_summary.empty());
  // The new document goes to summary.json.tmp first; that write fails.
  fs::create_symlink("/dev/full", out / "summary.json.tmp");
  const auto result =
      run_cli("run " + kScenario.string() + " -o " + out.string() + " --set output.trace=false --set noise.seed=7");
  EXPECT_EQ(result.exit_code, 6) << result.output;
  EXPECT_NE(result.output.find("summary.json.tmp"), std::string::npos) << result.output;
  EXPECT_EQ(read_file(out / "summary.json"), old_summary);
  EXPECT_FALSE(fs::exists(fs::symlink_status(out / "summary.json.tmp")));
}

TEST(IoFailure, AnOutputFolderThatCannotBeMadeIsExitSix) {
  TempDir dir("enotdir");
  const fs::path file = dir.write("not-a-folder", "x");
  const auto result = run_cli("run " + kScenario.string() + " -o " + (file / "out").string());
  EXPECT_EQ(result.exit_code, 6) << result.output;
  EXPECT_NE(result.output.find("I/O error"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find((file / "out").string()), std::string::npos) << result.output;
}

// The other commands that write folders: the same exit code and the folder named.
TEST(IoFailure, SweepTuneAndValidateOutputFoldersThatCannotBeMadeAreExitSix) {
  TempDir dir("enotdir-others");
  const fs::path file = dir.write("not-a-folder", "x");
  const fs::path grid = dir.write("grid.yaml", "zero.stage3_prefetch_bucket_size: [1e6, 2e6]\n");
  const fs::path host = fs::path(PREFETCHLAB_SOURCE_DIR) / "scenarios" / "host" / "tiny-llama-host.yaml";
  for (const std::string& command :
       {"sweep " + kScenario.string() + " --grid " + grid.string() + " -o " + (file / "sweep").string(),
        "tune " + kScenario.string() + " --budget 2 --seeds 1 -o " + (file / "tune").string(),
        "validate " + host.string() + " --backend host -o " + (file / "validate").string()}) {
    const auto result = run_cli(command);
    EXPECT_EQ(result.exit_code, 6) << command << "\n" << result.output;
    EXPECT_NE(result.output.find("I/O error"), std::string::npos) << command << "\n" << result.output;
    EXPECT_NE(result.output.find(file.string()), std::string::npos) << command << "\n" << result.output;
  }
}

// validate's row files on a full disk (the /dev/full seam): exit 6 naming the file.
TEST(IoFailure, ValidateOnAFullDiskIsExitSixNamingTheFile) {
  TempDir dir("enospc-validate");
  const fs::path out = dir.path() / "out";
  fs::create_directories(out);
  fs::create_symlink("/dev/full", out / "samples.csv");
  const fs::path host = fs::path(PREFETCHLAB_SOURCE_DIR) / "scenarios" / "host" / "tiny-llama-host.yaml";
  const auto result = run_cli("validate " + host.string() + " --backend host --set training.iterations=2 -o " + out.string());
  EXPECT_EQ(result.exit_code, 6) << result.output;
  EXPECT_NE(result.output.find((out / "samples.csv").string()), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("No space left on device"), std::string::npos) << result.output;
}
