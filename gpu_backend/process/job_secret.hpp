#pragma once
// The secret a process job's ranks share, so that rank 0's store admits them and no one else
// (the process backend runs on shared nodes, where other users can reach its port). It comes
// from the launcher's environment:
//   PREFETCHLAB_JOB_SECRET       the secret itself (16 to 4096 bytes), or
//   PREFETCHLAB_JOB_SECRET_FILE  a file holding it: a regular file (not a link) owned by this
//                                user and readable by no one else (mode 0600 or stricter).
// A one-rank job needs none: its only rank makes one up.
#include <functional>
#include <string>
#include <string_view>

namespace prefetchlab::gpu {

// Reads the job's secret through `lookup` (nullptr when unset). Throws std::invalid_argument
// naming the variable and the expected form when it is missing (world_size > 1) or unfit.
std::string job_secret_from(const std::function<const char*(const char*)>& lookup, int world_size);

// Whether two secrets are equal, in time that depends only on their lengths (so that a stranger
// cannot find a secret byte by byte from how long a refusal takes).
bool secrets_equal(std::string_view a, std::string_view b);

// `bytes` random bytes from the kernel (getrandom), in hex: unguessable names and secrets.
std::string random_hex(std::size_t bytes);

}  // namespace prefetchlab::gpu
