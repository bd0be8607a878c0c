#include "allocator_replay_command.hpp"

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "command_context.hpp"
#include "core/memory/allocator_options.hpp"
#include "core/memory/allocator_sequence.hpp"
#include "core/input/input_error.hpp"
#include "core/io/json_file.hpp"
#include "core/input/size_value.hpp"

namespace prefetchlab::apps {
namespace {

struct AllocatorReplayOptions {
  std::string sequence;
  std::string alloc_conf;      // PYTORCH_CUDA_ALLOC_CONF's form
  std::string capacity = "80GiB";  // the device's total memory (an H100's by default)
  std::string output;          // empty: stdout only
};

int run_allocator_replay(const AllocatorReplayOptions& o) {
  const auto capacity = core::parse_bytes(o.capacity);
  if (!capacity || *capacity <= 0) {
    throw core::InputError({"<command line>", 0}, "--capacity", "is '" + o.capacity + "'",
                           "a positive byte size such as 80GiB");
  }
  const core::AllocatorOptions options = core::parse_alloc_conf(o.alloc_conf, "--alloc-conf");
  const auto steps = core::load_allocator_sequence(o.sequence);
  const core::AllocatorReplay replay =
      core::replay_allocator_sequence(steps, options, static_cast<std::uint64_t>(*capacity));
  nlohmann::ordered_json out;
  out["sequence"] = o.sequence;
  out["alloc_conf"] = o.alloc_conf;
  out["capacity_bytes"] = *capacity;
  out["steps"] = replay.steps;
  out["out_of_memory"] = replay.oom ? nlohmann::ordered_json(replay.oom->message()) : nlohmann::ordered_json(nullptr);
  if (replay.oom) out["out_of_memory_line"] = replay.oom_line;
  out["memory_stats"] = replay.stats.as_flat_map();
  const std::string text = out.dump(2) + "\n";
  std::cout << text;
  if (!o.output.empty()) {
    core::write_text_atomically(o.output, text);
  }
  return replay.oom ? kExitOutOfMemory : kExitOk;
}

}  // namespace

CLI::App* add_allocator_replay_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<AllocatorReplayOptions>();
  CLI::App* c = app.add_subcommand(
      "allocator-replay", "Replay a malloc/free sequence through the caching allocator; print memory_stats as JSON");
  c->add_option("sequence", o->sequence, "CSV with columns op,id,bytes (op: malloc or free)")->required();
  c->add_option("--alloc-conf", o->alloc_conf, "allocator options in PYTORCH_CUDA_ALLOC_CONF form");
  c->add_option("--capacity", o->capacity, "device memory (default 80GiB)");
  c->add_option("-o,--output", o->output, "also write the JSON to this file");
  c->callback([o, exit_code] { *exit_code = run_guarded([&] { return run_allocator_replay(*o); }); });
  return c;
}

}  // namespace prefetchlab::apps
