// prefetchlab: one binary, one subcommand per task (DESIGN.md). Exit codes: 0 ok, 1 internal
// error, 2 bad input, 3 collective mismatch, 4 out of memory.
#include <CLI/CLI.hpp>
#include <iostream>

#include "core/input_error.hpp"
#include "prefetchlab/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{"PrefetchLab: ZeRO-3 prefetch simulator and tuner"};
  app.set_version_flag("--version", prefetchlab::kVersion);
  app.require_subcommand(1);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return 0;
}
