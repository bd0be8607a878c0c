// `prefetchlab --version`: the version, the commit it was built from and the features built in,
// so a bug report says exactly what ran.
#include <gtest/gtest.h>

#include <regex>

#include "prefetchlab/version.hpp"
#include "tests/support/cli_runner.hpp"

using prefetchlab::testing::run_cli;

TEST(VersionFlag, NamesVersionCommitAndFeatures) {
  const auto result = run_cli("--version");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find(std::string("prefetchlab ") + prefetchlab::kVersion + "\n"), std::string::npos)
      << result.output;
  // A source tree that is a git checkout names its commit (abbreviated hash, maybe "-dirty").
  EXPECT_TRUE(std::regex_search(result.output, std::regex("commit: [0-9a-f]{7,40}(-dirty)?\n")) ||
              result.output.find("commit: unknown (not built from a git checkout)") != std::string::npos)
      << result.output;
#ifdef PREFETCHLAB_HAVE_CUDA
  EXPECT_NE(result.output.find("CUDA + NCCL backend: yes"), std::string::npos) << result.output;
#else
  EXPECT_NE(result.output.find("CUDA + NCCL backend: no"), std::string::npos) << result.output;
#endif
  EXPECT_NE(result.output.find("host-thread backend: yes"), std::string::npos) << result.output;
}
