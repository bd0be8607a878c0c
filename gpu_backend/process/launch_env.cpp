#include "gpu_backend/process/launch_env.hpp"

#include "gpu_backend/process/job_secret.hpp"

#include <charconv>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

namespace prefetchlab::gpu {
namespace {

// PyTorch's default MASTER_PORT (torch.distributed, env:// initialisation).
constexpr int kDefaultPort = 29500;

struct Reader {
  const std::function<const char*(const char*)>& lookup;

  const char* raw(const char* name) const {
    const char* value = lookup(name);
    return value && *value ? value : nullptr;
  }
  [[noreturn]] void bad(const char* name, const std::string& value, const std::string& expected) const {
    throw std::invalid_argument("--launcher env: " + std::string(name) + " is '" + value + "'; expected " + expected);
  }
  long long integer(const char* name, long long low, long long high, const std::string& expected) const {
    const char* text = raw(name);
    if (!text) bad(name, "", expected);
    const std::string_view s(text);
    long long value = 0;
    const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (error != std::errc() || end != s.data() + s.size() || value < low || value > high) bad(name, text, expected);
    return value;
  }
};

}  // namespace

LaunchRank launch_rank_from(const std::function<const char*(const char*)>& lookup) {
  const Reader env{lookup};
  constexpr long long kMaxRanks = 1 << 20;
  LaunchRank out;
  const bool torchrun = env.raw("RANK") || env.raw("WORLD_SIZE");
  const bool slurm = env.raw("SLURM_PROCID") != nullptr;
  if (torchrun) {
    out.launcher = "torchrun-style environment";
    out.world_size = static_cast<int>(env.integer("WORLD_SIZE", 1, kMaxRanks, "the number of ranks, 1 or more"));
    out.rank = static_cast<int>(env.integer("RANK", 0, out.world_size - 1,
                                            "this process's rank, 0 .. WORLD_SIZE-1 (" + std::to_string(out.world_size - 1) + ")"));
    out.local_rank = env.raw("LOCAL_RANK") ? static_cast<int>(env.integer("LOCAL_RANK", 0, kMaxRanks, "the rank on this node, 0 or more"))
                                           : 0;
  } else if (slurm) {
    out.launcher = "Slurm (srun)";
    out.world_size = static_cast<int>(env.integer("SLURM_NTASKS", 1, kMaxRanks, "the job step's task count, 1 or more"));
    out.rank = static_cast<int>(env.integer("SLURM_PROCID", 0, out.world_size - 1, "the task's rank, 0 .. SLURM_NTASKS-1"));
    out.local_rank = env.raw("SLURM_LOCALID") ? static_cast<int>(env.integer("SLURM_LOCALID", 0, kMaxRanks, "the task's rank on its node"))
                                              : 0;
  } else {
    throw std::invalid_argument(
        "--launcher env: neither RANK and WORLD_SIZE (torchrun) nor SLURM_PROCID (srun) is set; launch one process "
        "per rank with them (README, \"Multi-node validation\"), or leave out --launcher to run the ranks as threads");
  }
  if (const char* addr = env.raw("MASTER_ADDR")) {
    out.master_addr = addr;
  } else if (const char* launch_node = slurm && !torchrun ? env.raw("SLURM_LAUNCH_NODE_IPADDR") : nullptr) {
    out.master_addr = launch_node;
  } else if (out.world_size == 1) {
    out.master_addr = "127.0.0.1";
  } else {
    env.bad("MASTER_ADDR", "", "the host name or address of rank 0's node");
  }
  if (env.raw("PREFETCHLAB_STORE_PORT")) {
    out.master_port = static_cast<int>(env.integer("PREFETCHLAB_STORE_PORT", 1, 65535, "a TCP port, 1 .. 65535"));
  } else if (env.raw("MASTER_PORT")) {
    out.master_port = static_cast<int>(env.integer("MASTER_PORT", 1, 65535, "a TCP port, 1 .. 65535"));
    const char* agent_store = env.raw("TORCHELASTIC_USE_AGENT_STORE");
    if (agent_store && (std::string_view(agent_store) == "True" || std::string_view(agent_store) == "true" ||
                        std::string_view(agent_store) == "1")) {
      if (out.master_port == 65535) env.bad("MASTER_PORT", "65535", "a port below 65535 (torchrun's agent holds it; ours is the next)");
      ++out.master_port;
    }
  } else if (slurm && !torchrun && env.raw("SLURM_JOB_ID")) {
    out.master_port = kDefaultPort + static_cast<int>(env.integer("SLURM_JOB_ID", 0, 1LL << 62, "a job id") % 10000);
  } else {
    out.master_port = kDefaultPort;
  }
  out.secret = job_secret_from(lookup, out.world_size);
  return out;
}

LaunchRank launch_rank_from_environment() {
  return launch_rank_from([](const char* name) { return std::getenv(name); });
}

}  // namespace prefetchlab::gpu
