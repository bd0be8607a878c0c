#pragma once
// What every subcommand shares: where bundled data lives and how errors become exit codes.
#include <filesystem>
#include <functional>

#include "core/scenario/scenario.hpp"

namespace prefetchlab::apps {

// Exit codes (docs/architecture.md, "Conventions").
enum ExitCode : int {
  kExitOk = 0,
  kExitInternalError = 1,
  kExitBadInput = 2,
  kExitCollectiveMismatch = 3,
  kExitOutOfMemory = 4,
  kExitExpectationFailed = 5,  // a checked expectation does not hold (fidelity: a case outside its band)
};

// The tree holding models/ and hardware/: $PREFETCHLAB_HOME when set, else the source tree
// this binary was built from.
std::filesystem::path data_root();
core::BundledData bundled_data();

// Runs a subcommand body: InputError -> message on stderr and exit 2; any other exception ->
// "internal error" and exit 1.
int run_guarded(const std::function<int()>& body);

}  // namespace prefetchlab::apps
