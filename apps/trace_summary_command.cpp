#include "trace_summary_command.hpp"

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "command_context.hpp"
#include "core/io/json_file.hpp"
#include "core/trace_import/trace_set.hpp"
#include "core/trace_import/trace_summary.hpp"

namespace prefetchlab::apps {
namespace {

struct TraceSummaryOptions {
  std::vector<std::string> traces;
  bool whole_file_step = false;
  std::string step_marker;
  std::string json_path;
};

int trace_summary(const TraceSummaryOptions& options) {
  core::TimelineOptions timeline;
  timeline.whole_file_step = options.whole_file_step;
  timeline.step_marker = options.step_marker;
  const core::TraceSet set = core::load_trace_set(options.traces, timeline);
  const core::TraceSummary summary = core::summarize_traces(set);
  std::cout << core::format_trace_summary(set, summary);
  if (!options.json_path.empty()) core::write_json_atomically(options.json_path, core::trace_summary_json(set, summary));
  return kExitOk;
}

}  // namespace

CLI::App* add_trace_summary_command(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<TraceSummaryOptions>();
  CLI::App* command = app.add_subcommand("trace-summary", "Summarise a real run's torch.profiler traces, one file per rank");
  command->footer(
      "Reads Kineto / torch.profiler Chrome traces (.json or .json.gz, one per rank of one job) and\n"
      "prints, per ProfilerStep: step time, compute busy time, exposed communication, each\n"
      "collective kind's count, elements, per-rank span, true time (min end - max start over the\n"
      "ranks) and skew, host time per collective call, and peak allocated memory; then what the\n"
      "files cannot provide. docs/traces.md explains each figure.\n"
      "Errors (exit 2): a missing, empty, truncated or non-JSON file, a file without steps, files\n"
      "of different jobs.");
  command->add_option("traces", options->traces, "trace files, one per rank")->required();
  command->add_flag("--whole-file-step", options->whole_file_step,
                    "a file without ProfilerStep#N markers is one step (a legacy export of one iteration)");
  command->add_option("--step-marker", options->step_marker,
                      "without ProfilerStep#N: steps run from one event of this name to the next "
                      "(e.g. Optimizer.zero_grad#SGD.zero_grad)");
  command->add_option("--json", options->json_path, "also write the summary as JSON to this file");
  command->callback([options, exit_code] { *exit_code = run_guarded([&] { return trace_summary(*options); }); });
  return command;
}

}  // namespace prefetchlab::apps
