// `prefetchlab allocator-replay`: a hand-written malloc/free sequence through core's
// CachingAllocator gives the memory stats derived by hand from PyTorch's caching-allocator rules
// (pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp; the same rules caching_allocator.hpp lists), with and
// without the out-of-memory retry; bad sequence files are clear errors naming file and line.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/cli_runner.hpp"

using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;

namespace {

constexpr std::int64_t kMiB = 1024 * 1024;

// Each step with what the rules make of it (R = rounded request, S = segment, alloc = allocated
// bytes after the step, reserved = reserved bytes after it):
//  1 malloc a 1000      R 1024 (512 B multiple), small pool (<= 1 MiB): new 2 MiB small
//                       segment S1, split (>= 512 B left).               alloc 1024, reserved 2 MiB
//  2 malloc b 614400    small, best fit = S1's free tail, split.          alloc 615424
//  3 malloc c 1572864   large (> 1 MiB) and < 10 MiB: new 20 MiB segment L1, split (18.5 MiB
//                       left > 1 MiB).                                     alloc 2188288, reserved 22 MiB
//  4 malloc d 3145728   L1's free 18.5 MiB tail, split (15.5 MiB left).   alloc 5334016
//  5 free b             merges with S1's free tail (2 MiB - 1024 free).   alloc 4719616
//  6 malloc e 26215400  R 26215424; no cached block fits; >= 10 MiB: segment = R rounded up to
//                       2 MiB = 27262976 (L2); 1047552 left is not > 1 MiB: no split, the block
//                       is the whole segment and counts whole.           alloc 31982592, reserved 48 MiB
//  7 free c             L1's first 1.5 MiB free (d, allocated, follows). alloc 30409728
//  8 malloc f 1048576   exactly 1 MiB: still the small pool; S1's free 2096128 split.
//                                                                          alloc 31458304
//  9 malloc g 1048577   R 1049088, large; best fit = c's old 1572864 block; 523776 left is not
//                       > 1 MiB: no split, counts 1572864.                alloc 33031168
// 10 free d             merges with L1's free tail: 19398656 free.        alloc 29885440
// 11 free e             L2 whole and free: cached, not given back.        alloc 2622464
// 12 malloc h 41943040  40 MiB: no cached block fits (26 MiB, 18.5 MiB): new segment of exactly
//                       40 MiB (L3).                                       alloc 44565504, reserved 88 MiB
// Live at the end: a, f, g, h (4 blocks; 5 after step 9 is the most); 4 segments (3 large).
// requested bytes of the live blocks: 1000 + 1048576 + 1048577 + 41943040 = 44041193.
const char* kSequence =
    "op,id,bytes\n"
    "malloc,a,1000\n"
    "malloc,b,614400\n"
    "malloc,c,1572864\n"
    "malloc,d,3145728\n"
    "free,b,\n"
    "malloc,e,26215400\n"
    "free,c,\n"
    "malloc,f,1048576\n"
    "malloc,g,1048577\n"
    "free,d,\n"
    "free,e,\n"
    "malloc,h,41943040\n";

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::json replay(const std::string& sequence, const std::string& flags, int expected_exit = 0) {
  TempDir dir("allocator-replay");
  const auto file = dir.path() / "sequence.csv";
  std::ofstream(file) << sequence;
  const auto out = dir.path() / "stats.json";
  const auto result = run_cli("allocator-replay " + file.string() + " -o " + out.string() + flags);
  EXPECT_EQ(result.exit_code, expected_exit) << result.output;
  return nlohmann::json::parse(slurp(out));
}

}  // namespace

TEST(AllocatorReplay, StatsFollowTheCachingAllocatorRules) {
  const nlohmann::json j = replay(kSequence, "");
  EXPECT_EQ(j["steps"], 12);
  EXPECT_TRUE(j["out_of_memory"].is_null());
  const auto& s = j["memory_stats"];
  EXPECT_EQ(s["allocated_bytes.all.current"], 44565504);
  EXPECT_EQ(s["allocated_bytes.all.peak"], 44565504);
  EXPECT_EQ(s["reserved_bytes.all.current"], 88 * kMiB);
  EXPECT_EQ(s["reserved_bytes.all.peak"], 88 * kMiB);
  EXPECT_EQ(s["reserved_bytes.small_pool.peak"], 2 * kMiB);
  EXPECT_EQ(s["segment.all.peak"], 4);
  EXPECT_EQ(s["segment.large_pool.current"], 3);
  EXPECT_EQ(s["segment.small_pool.current"], 1);
  EXPECT_EQ(s["allocation.all.current"], 4);
  EXPECT_EQ(s["allocation.all.peak"], 5);
  EXPECT_EQ(s["requested_bytes.all.current"], 44041193);
  EXPECT_EQ(s["num_alloc_retries"], 0);
  EXPECT_EQ(s["num_ooms"], 0);
  EXPECT_EQ(s["num_device_alloc"], 4);
  EXPECT_EQ(s["num_device_free"], 0);
}

// With 64 MiB of device memory, step 12's 40 MiB segment does not fit beside the 48 MiB held:
// PyTorch frees every cached whole segment (L2, 26 MiB: L1 and S1 still hold blocks) after
// synchronising, and retries (num_alloc_retries 1): 22 + 40 = 62 MiB fits.
TEST(AllocatorReplay, TheOutOfMemoryRetryReleasesCachedSegments) {
  const nlohmann::json j = replay(kSequence, " --capacity 64MiB");
  const auto& s = j["memory_stats"];
  EXPECT_EQ(s["num_alloc_retries"], 1);
  EXPECT_EQ(s["num_device_free"], 1);
  EXPECT_EQ(s["reserved_bytes.all.current"], 62 * kMiB);
  EXPECT_EQ(s["reserved_bytes.all.peak"], 62 * kMiB);
  EXPECT_EQ(s["segment.all.current"], 3);
  EXPECT_EQ(s["allocated_bytes.all.peak"], 44565504);
}

// With 48 MiB even the retry fails: exit 4, the stats up to the failing malloc, its line.
TEST(AllocatorReplay, AnOutOfMemoryEndsTheReplayWithItsLine) {
  const nlohmann::json j = replay(kSequence, " --capacity 48MiB", 4);
  EXPECT_EQ(j["steps"], 11);
  EXPECT_EQ(j["out_of_memory_line"], 13);
  EXPECT_FALSE(j["out_of_memory"].is_null());
  EXPECT_EQ(j["memory_stats"]["num_ooms"], 1);
}

TEST(AllocatorReplay, BadSequencesNameFileLineAndColumn) {
  TempDir dir("allocator-replay-bad");
  const std::vector<std::pair<std::string, std::string>> cases{
      {"op,id,bytes\nmalloc,a,1000\nfree,b,\n", ":3: key 'id'"},
      {"op,id,bytes\nmalloc,a,ten\n", ":2: key 'bytes'"},
      {"op,id,bytes\nmalloc,a,0\n", ":2: key 'bytes'"},
      {"op,id,bytes\nmalloc,a,1\nmalloc,a,2\n", ":3: key 'id'"},
      {"op,id,bytes\nrealloc,a,1\n", ":2: key 'op'"},
      {"kind,id,bytes\n", ":1: key 'header'"},
  };
  for (const auto& [text, where] : cases) {
    const auto file = dir.path() / "bad.csv";
    std::ofstream(file) << text;
    const auto result = run_cli("allocator-replay " + file.string());
    EXPECT_EQ(result.exit_code, 2) << text << result.output;
    EXPECT_NE(result.output.find("bad.csv" + where), std::string::npos) << text << result.output;
  }
}
