#pragma once
// What every subcommand shares: where bundled data lives and how errors become exit codes.
#include <filesystem>
#include <functional>
#include <string>

#include "core/scenario/scenario.hpp"

namespace prefetchlab::apps {

// Exit codes (documented once: docs/commands.md#exit-codes).
enum ExitCode : int {
  kExitOk = 0,
  kExitInternalError = 1,
  kExitBadInput = 2,
  kExitCollectiveMismatch = 3,
  kExitOutOfMemory = 4,
  kExitExpectationFailed = 5,  // a scenario's `expect:` (or a fidelity case) not met
  kExitIoError = 6,            // an output could not be written (full disk, permission, ...)
};

// The tree holding models/ and hardware/: $PREFETCHLAB_HOME when set, else the source tree
// this binary was built from.
std::filesystem::path data_root();
core::BundledData bundled_data();

// Runs a subcommand body: InputError -> message on stderr and exit 2; an I/O failure (IoError,
// or a filesystem error such as a folder that cannot be made) -> "I/O error" naming the file and
// exit 6; any other exception -> "internal error" and exit 1.
int run_guarded(const std::function<int()>& body);

// One line naming the calibration keys a scenario's results rest on as default estimates
// (CalibrationConstants::uncalibrated); empty when there are none.
std::string uncalibrated_note(const core::Scenario& scenario);

// Cuts a torn last record (a kill mid-append) off a row file that `command` (sweep, tune) is
// about to append to again, so appends start on a clean line, and says so on stderr.
void drop_torn_tail(const std::filesystem::path& path, std::size_t complete_bytes, bool torn, const char* command);

}  // namespace prefetchlab::apps
