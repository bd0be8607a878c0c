// The secret a process job's ranks share (gpu_backend/process/job_secret.hpp): where it comes
// from, what is refused, and how it is compared.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "gpu_backend/process/job_secret.hpp"
#include "gpu_backend/process/launch_env.hpp"
#include "tests/support/cli_runner.hpp"

namespace pg = prefetchlab::gpu;
namespace fs = std::filesystem;
using prefetchlab::testing::TempDir;

namespace {

std::string secret_of(const std::map<std::string, std::string>& env, int world = 2) {
  return pg::job_secret_from(
      [&](const char* name) -> const char* {
        const auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      world);
}

std::string error_of(const std::map<std::string, std::string>& env, int world = 2) {
  try {
    secret_of(env, world);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(JobSecret, ComesFromTheLaunchersEnvironmentOrAPrivateFile) {
  EXPECT_EQ(secret_of({{"PREFETCHLAB_JOB_SECRET", "0123456789abcdef"}}), "0123456789abcdef");
  TempDir dir("job-secret");
  const fs::path file = dir.write("secret", "fedcba9876543210fedcba\n");
  ::chmod(file.c_str(), 0600);
  EXPECT_EQ(secret_of({{"PREFETCHLAB_JOB_SECRET_FILE", file.string()}}), "fedcba9876543210fedcba");
  // A one-rank job makes its own; two of them differ.
  EXPECT_EQ(secret_of({}, 1).size(), 64u);
  EXPECT_NE(secret_of({}, 1), secret_of({}, 1));
}

TEST(JobSecret, MissingShortSharedOrLinkedSecretsAreRefused) {
  const std::string missing = error_of({});
  EXPECT_NE(missing.find("neither PREFETCHLAB_JOB_SECRET nor PREFETCHLAB_JOB_SECRET_FILE is set"), std::string::npos) << missing;
  EXPECT_NE(missing.find("head -c 32 /dev/urandom"), std::string::npos) << missing;
  EXPECT_NE(error_of({{"PREFETCHLAB_JOB_SECRET", "short"}}).find("holds 5 bytes"), std::string::npos);
  EXPECT_NE(error_of({{"PREFETCHLAB_JOB_SECRET", std::string(4097, 'x')}}).find("holds 4097 bytes"), std::string::npos);
  TempDir dir("job-secret-bad");
  const fs::path open_file = dir.write("open", "0123456789abcdef0123");
  ::chmod(open_file.c_str(), 0644);
  EXPECT_NE(error_of({{"PREFETCHLAB_JOB_SECRET_FILE", open_file.string()}}).find("readable or writable by other users"),
            std::string::npos);
  const fs::path good = dir.write("good", "0123456789abcdef0123");
  ::chmod(good.c_str(), 0600);
  const fs::path link = dir.path() / "link";
  fs::create_symlink(good, link);
  EXPECT_NE(error_of({{"PREFETCHLAB_JOB_SECRET_FILE", link.string()}}).find("cannot be opened"), std::string::npos);
  EXPECT_NE(error_of({{"PREFETCHLAB_JOB_SECRET_FILE", dir.path().string()}}).find("not a regular file"), std::string::npos);
  EXPECT_NE(error_of({{"PREFETCHLAB_JOB_SECRET", "0123456789abcdef"}, {"PREFETCHLAB_JOB_SECRET_FILE", good.string()}})
                .find("both"),
            std::string::npos);
}

TEST(JobSecret, LaunchEnvironmentCarriesIt) {
  const std::map<std::string, std::string> env{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
                                               {"PREFETCHLAB_JOB_SECRET", "0123456789abcdef-job"}};
  const auto lookup = [&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  EXPECT_EQ(pg::launch_rank_from(lookup).secret, "0123456789abcdef-job");
}

TEST(JobSecret, ComparesWholeSecrets) {
  EXPECT_TRUE(pg::secrets_equal("0123456789abcdef", "0123456789abcdef"));
  EXPECT_FALSE(pg::secrets_equal("0123456789abcdef", "0123456789abcdeF"));
  EXPECT_FALSE(pg::secrets_equal("0123456789abcdef", "0123456789abcde"));
  EXPECT_FALSE(pg::secrets_equal("", "0123456789abcdef"));
  EXPECT_FALSE(pg::secrets_equal("0123456789abcdef", ""));
  EXPECT_EQ(pg::random_hex(16).size(), 32u);
}
