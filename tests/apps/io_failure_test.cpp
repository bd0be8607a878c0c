// A disk that fills during `run` is an I/O error (exit code 6) naming the file, and loses nothing
// already finished: every row file still ends on a whole row, and summary.json is either the old
// complete document or the new one. The full disk is a small tmpfs, which this test mounts (root,
// as in CI; elsewhere those cases skip saying so). Outputs are never written through a symbolic
// link planted in the output folder (issue 46, S4).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

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
  // No new file can be made from now on (every inode is in use); existing files can still be
  // rewritten while space lasts.
  bool fill_inodes() const {
    struct statvfs info {};
    if (!mounted_ || ::statvfs(dir_.c_str(), &info) != 0) return false;
    const auto used = info.f_files - info.f_ffree;
    return std::system(("mount -o remount,nr_inodes=" + std::to_string(used) + " '" + dir_.string() + "'").c_str()) == 0;
  }

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
  if (!tmpfs.mounted()) GTEST_SKIP() << "needs to mount a small tmpfs (root, as in CI)";
  const fs::path out = mount / "out";
  fs::create_directories(out);
  const auto result = run_cli("run " + kScenario.string() + " -o " + out.string());
  EXPECT_EQ(result.exit_code, 6) << result.output;
  EXPECT_NE(result.output.find("I/O error: cannot write '" + out.string()), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("No space left on device"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("internal error"), std::string::npos) << result.output;
  expect_whole_rows(out);
  for (const auto& entry : fs::directory_iterator(out)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path() << " left behind";
  }
}

TEST(IoFailure, SummaryIsTheOldCompleteDocumentWhenTheNewOneCannotBeWritten) {
  TempDir dir("enospc-summary");
  const fs::path mount = dir.path() / "disk";
  fs::create_directories(mount);
  SmallTmpfs tmpfs(mount, 8192);
  if (!tmpfs.mounted()) GTEST_SKIP() << "needs to mount a small tmpfs (root, as in CI)";
  const fs::path out = mount / "out";
  ASSERT_EQ(run_cli("run " + kScenario.string() + " -o " + out.string() + " --set output.trace=false").exit_code, 0);
  const std::string old_summary = read_file(out / "summary.json");
  ASSERT_FALSE(old_summary.empty());
  // The rerun's row files overwrite the old ones; the new summary needs a new file (its
  // temporary), which cannot be made.
  ASSERT_TRUE(tmpfs.fill_inodes());
  const auto result =
      run_cli("run " + kScenario.string() + " -o " + out.string() + " --set output.trace=false --set noise.seed=7");
  EXPECT_EQ(result.exit_code, 6) << result.output;
  EXPECT_NE(result.output.find((out / "summary.json").string()), std::string::npos) << result.output;
  EXPECT_EQ(read_file(out / "summary.json"), old_summary);
  for (const auto& entry : fs::directory_iterator(out)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path() << " left behind";
  }
}

// A link planted in an output folder (another user's, or a stale one) is never written through:
// a row file that is a link refuses the run (exit 6 naming it), and summary.json replaces a link
// in its place rather than writing where it points.
TEST(IoFailure, OutputsAreNeverWrittenThroughASymbolicLink) {
  TempDir dir("symlink-outputs");
  const fs::path victim = dir.write("victim.txt", "precious\n");
  const fs::path out = dir.path() / "out";
  fs::create_directories(out);
  fs::create_symlink(victim, out / "iterations.csv");
  auto result = run_cli("run " + kScenario.string() + " -o " + out.string() + " --set output.trace=false");
  EXPECT_EQ(result.exit_code, 6) << result.output;
  EXPECT_NE(result.output.find("symbolic link"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find((out / "iterations.csv").string()), std::string::npos) << result.output;
  EXPECT_EQ(read_file(victim), "precious\n");
  // The run that failed says it never finished.
  EXPECT_EQ(nlohmann::json::parse(read_file(out / "summary.json"))["status"], "running");
  fs::remove(out / "iterations.csv");
  fs::remove(out / "summary.json");
  fs::create_symlink(victim, out / "summary.json");
  result = run_cli("run " + kScenario.string() + " -o " + out.string() + " --set output.trace=false");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(read_file(victim), "precious\n");
  EXPECT_FALSE(fs::is_symlink(out / "summary.json"));
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

// validate's row files on a full disk: exit 6 naming the file.
TEST(IoFailure, ValidateOnAFullDiskIsExitSixNamingTheFile) {
  TempDir dir("enospc-validate");
  const fs::path mount = dir.path() / "disk";
  fs::create_directories(mount);
  SmallTmpfs tmpfs(mount, 24);
  if (!tmpfs.mounted()) GTEST_SKIP() << "needs to mount a small tmpfs (root, as in CI)";
  const fs::path out = mount / "out";
  fs::create_directories(out);
  const fs::path host = fs::path(PREFETCHLAB_SOURCE_DIR) / "scenarios" / "host" / "tiny-llama-host.yaml";
  const auto result = run_cli("validate " + host.string() + " --backend host --set training.iterations=2 -o " + out.string());
  EXPECT_EQ(result.exit_code, 6) << result.output;
  EXPECT_NE(result.output.find("I/O error: cannot write '" + out.string()), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("No space left on device"), std::string::npos) << result.output;
}

// Two commands writing one folder would interleave its rows (issue 46, D5): while another process
// holds the folder, run, tune and validate are refused (exit 2) naming it, and write nothing.
TEST(IoFailure, ACommandWhoseFolderIsInUseIsRefused) {
  TempDir dir("folder-in-use");
  const fs::path out = dir.path() / "out";
  fs::create_directories(out);
  const int fd = ::open(out.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);  // as a running command holds it
  const fs::path host = fs::path(PREFETCHLAB_SOURCE_DIR) / "scenarios" / "host" / "tiny-llama-host.yaml";
  for (const std::string& command :
       {"run " + kScenario.string() + " -o " + out.string(),
        "validate " + host.string() + " --backend host --set training.iterations=2 -o " + out.string()}) {
    const auto result = run_cli(command);
    EXPECT_EQ(result.exit_code, 2) << command << "\n" << result.output;
    EXPECT_NE(result.output.find("is in use by another running prefetchlab command"), std::string::npos) << result.output;
  }
  EXPECT_TRUE(fs::is_empty(out));
  // run's --kineto-trace folder is held the same way.
  const fs::path fresh = dir.path() / "fresh";
  const auto kineto = run_cli("run " + kScenario.string() + " -o " + fresh.string() + " --kineto-trace " + out.string());
  EXPECT_EQ(kineto.exit_code, 2) << kineto.output;
  EXPECT_NE(kineto.output.find("is in use by another running prefetchlab command"), std::string::npos) << kineto.output;
  ::close(fd);
  EXPECT_EQ(run_cli("run " + kScenario.string() + " -o " + out.string() + " --set output.trace=false").exit_code, 0);
}
