// prefetchlab: one binary, one subcommand per task (docs/architecture.md). Exit codes:
// apps/command_context.hpp, documented in docs/commands.md#exit-codes.

#include <CLI/CLI.hpp>

#include <string>

#include "allocator_replay_command.hpp"
#include "calibrate_command.hpp"
#include "collective_command.hpp"
#include "command_context.hpp"
#include "compare_command.hpp"
#include "describe_command.hpp"
#include "fidelity_command.hpp"
#include "large_pages.hpp"
#include "out_of_host_memory.hpp"
#include "merge_command.hpp"
#include "replay_command.hpp"
#include "run_command.hpp"
#include "sweep_command.hpp"
#include "sweep_status_command.hpp"
#include "trace_summary_command.hpp"
#include "validate_command.hpp"
#include "tune_command.hpp"
#include "prefetchlab/build_info.hpp"
#include "prefetchlab/version.hpp"

namespace {

// `--version`: what a bug report needs: the version, the commit, and what this binary can do.
std::string version_text() {
#ifdef PREFETCHLAB_HAVE_CUDA
  constexpr const char* cuda = "yes";
#else
  constexpr const char* cuda = "no (CUDA toolkit or NCCL not found at build time)";
#endif
  std::string text = std::string("prefetchlab ") + prefetchlab::kVersion + "\n";
  text += std::string("commit: ") + prefetchlab::kCommit + "\n";
  text += std::string("CUDA + NCCL backend: ") + cuda + "\n";
  text += "host-thread backend: yes\n";
  text += std::string("mimalloc: ") + (PREFETCHLAB_FEATURE_MIMALLOC ? "yes" : "no") + "\n";
  text += std::string("link-time optimisation: ") + (PREFETCHLAB_FEATURE_LTO ? "yes" : "no");
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace prefetchlab::apps;
  exit_cleanly_when_out_of_host_memory();
  prefer_large_os_pages();
  CLI::App app{"PrefetchLab: ZeRO-3 prefetch simulator and tuner"};
  app.set_version_flag("--version", version_text);
  app.require_subcommand(1);
  int exit_code = kExitOk;
  add_describe_command(app, &exit_code);
  add_compare_command(app, &exit_code);
  add_run_command(app, &exit_code);
  add_replay_command(app, &exit_code);
  add_collective_command(app, &exit_code);
  add_calibrate_command(app, &exit_code);
  add_sweep_command(app, &exit_code);
  add_sweep_status_command(app, &exit_code);
  add_merge_command(app, &exit_code);
  add_validate_command(app, &exit_code);
  add_tune_command(app, &exit_code);
  add_allocator_replay_command(app, &exit_code);
  add_fidelity_command(app, &exit_code);
  add_trace_summary_command(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Help and version are not errors; every other parse failure is bad input.
    const int cli_code = app.exit(e);
    return cli_code == 0 ? kExitOk : kExitBadInput;
  }
  return exit_code;
}
