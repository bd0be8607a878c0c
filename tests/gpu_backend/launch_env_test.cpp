// Where a process stands in a job, from torchrun's or srun's variables (gpu_backend/process/launch_env.hpp).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "gpu_backend/process/launch_env.hpp"

namespace pg = prefetchlab::gpu;

namespace {

// The job's secret is its own concern (job_secret_test.cpp): every environment here holds one.
constexpr const char* kSecret = "launch-env-test-secret-0123";

pg::LaunchRank read(const std::map<std::string, std::string>& env) {
  return pg::launch_rank_from([&](const char* name) -> const char* {
    if (std::string(name) == "PREFETCHLAB_JOB_SECRET" && !env.count(name)) return kSecret;
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

std::string error_of(const std::map<std::string, std::string>& env) {
  try {
    read(env);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(LaunchEnv, ReadsTorchrunsVariables) {
  const auto me = read({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "1234"}});
  EXPECT_EQ(me.rank, 3);
  EXPECT_EQ(me.world_size, 8);
  EXPECT_EQ(me.local_rank, 1);
  EXPECT_EQ(me.master_addr, "node7");
  EXPECT_EQ(me.master_port, 1234);
  EXPECT_EQ(me.launcher, "torchrun-style environment");
}

TEST(LaunchEnv, ReadsSrunsVariablesWithItsDefaults) {
  const auto me = read({{"SLURM_PROCID", "5"},
                        {"SLURM_NTASKS", "16"},
                        {"SLURM_LOCALID", "1"},
                        {"SLURM_LAUNCH_NODE_IPADDR", "10.0.0.4"},
                        {"SLURM_JOB_ID", "123456"}});
  EXPECT_EQ(me.rank, 5);
  EXPECT_EQ(me.world_size, 16);
  EXPECT_EQ(me.local_rank, 1);
  EXPECT_EQ(me.master_addr, "10.0.0.4");
  EXPECT_EQ(me.master_port, 29500 + 123456 % 10000);
  EXPECT_EQ(me.launcher, "Slurm (srun)");
}

TEST(LaunchEnv, TorchrunsVariablesWinInsideAnAllocation) {
  const auto me = read({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
  EXPECT_EQ(me.rank, 1);
  EXPECT_EQ(me.world_size, 2);
  EXPECT_EQ(me.master_port, 29500);  // PyTorch's default
}

TEST(LaunchEnv, ExplicitMasterAddressAndPortWinUnderSrun) {
  const auto me = read({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LAUNCH_NODE_IPADDR", "10.0.0.4"},
                        {"SLURM_JOB_ID", "7"}, {"MASTER_ADDR", "head"}, {"MASTER_PORT", "4000"}});
  EXPECT_EQ(me.master_addr, "head");
  EXPECT_EQ(me.master_port, 4000);
}

TEST(LaunchEnv, BadValuesNameTheVariableAndTheExpectedForm) {
  EXPECT_NE(error_of({}).find("neither RANK and WORLD_SIZE (torchrun) nor SLURM_PROCID (srun) is set"), std::string::npos);
  EXPECT_NE(error_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}}).find("RANK is '2'; expected this process's rank, 0 .. WORLD_SIZE-1 (1)"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "two"}}).find("WORLD_SIZE is 'two'"), std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}}).find("MASTER_ADDR is ''; expected the host name or address of rank 0's node"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "70000"}}).find("MASTER_PORT is '70000'; expected a TCP port"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"LOCAL_RANK", "-1"}}).find("LOCAL_RANK is '-1'"),
            std::string::npos);
}

TEST(LaunchEnv, OneRankNeedsNoAddress) {
  const auto me = read({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  EXPECT_EQ(me.master_addr, "127.0.0.1");
}

TEST(LaunchEnv, StepsAsideFromTorchrunsAgentStore) {
  const std::map<std::string, std::string> torchrun{
      {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "29500"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"}};
  EXPECT_EQ(read(torchrun).master_port, 29501);
  auto chosen = torchrun;
  chosen["PREFETCHLAB_STORE_PORT"] = "40000";
  EXPECT_EQ(read(chosen).master_port, 40000);
  auto no_agent = torchrun;
  no_agent["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  EXPECT_EQ(read(no_agent).master_port, 29500);
}
