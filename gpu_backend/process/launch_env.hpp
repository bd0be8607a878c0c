#pragma once
// Where this process stands in a job whose ranks are processes (`validate|calibrate --launcher
// env`): its rank, the world's size, its rank on its node, and the store rank 0 serves. Read from
// the variables launchers set:
//   torchrun (and most wrappers): RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
//     (PyTorch documentation, "torchrun (Elastic Launch)", environment variables)
//   Slurm's srun: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID (sbatch/srun man pages, "OUTPUT
//     ENVIRONMENT VARIABLES"); MASTER_ADDR defaults to SLURM_LAUNCH_NODE_IPADDR (the node srun
//     ran on, which is in the allocation under sbatch), MASTER_PORT to 29500 + SLURM_JOB_ID mod
//     10000, so two jobs sharing a node do not meet.
// RANK/WORLD_SIZE win over the Slurm names when both are set (a torchrun inside an allocation).
// torchrun's agent itself serves a TCPStore on MASTER_PORT when it sets
// TORCHELASTIC_USE_AGENT_STORE=True (pytorch/pytorch#125743), so rank 0's store then takes
// MASTER_PORT + 1. PREFETCHLAB_STORE_PORT, when set, is the port in every case. The job's secret
// comes from PREFETCHLAB_JOB_SECRET or PREFETCHLAB_JOB_SECRET_FILE (job_secret.hpp).
#include <functional>
#include <string>

namespace prefetchlab::gpu {

struct LaunchRank {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;        // the GPU this rank uses on its node (cuda)
  std::string master_addr;   // host name or address of rank 0's store
  int master_port = 0;
  std::string launcher;      // "torchrun-style environment" or "Slurm (srun)": for messages
  std::string secret;        // the job's shared secret (job_secret.hpp): rank 0's store admits only its holders
};

// Reads the variables through `lookup` (nullptr when unset). Throws std::invalid_argument naming
// the variable, its value and the expected form.
LaunchRank launch_rank_from(const std::function<const char*(const char*)>& lookup);
// The same, from this process's environment.
LaunchRank launch_rank_from_environment();

}  // namespace prefetchlab::gpu
