#include "apps/slurm/sbatch_scripts.hpp"

#include <algorithm>
#include <initializer_list>

#include "core/input/input_error.hpp"
#include "core/scenario/index_ranges.hpp"

namespace prefetchlab::apps {
namespace {

namespace fs = std::filesystem;

// Appends each piece in turn (GCC 12 at -O3 flags `"literal" + std::string` chains with false
// -Wrestrict and -Wstringop-overflow warnings).
void append(std::string& text, std::initializer_list<std::string_view> pieces) {
  for (const auto piece : pieces) text += piece;
}

std::string sbatch_lines(const std::vector<SbatchOption>& options) {
  std::string text;
  for (const auto& option : options) append(text, {"#SBATCH --", option.key, "=", option.value, "\n"});
  return text;
}

}  // namespace

std::string shell_quote(std::string_view text) {
  const bool safe = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("/._-+=:,@%").find(c) != std::string_view::npos;
  });
  if (safe) return std::string(text);
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

void check_script_path(const fs::path& path, const std::string& key, bool in_sbatch_line) {
  const std::string text = path.string();
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) {
      throw core::InputError({"<command line>", 0}, key, "is " + core::quoted_input(text) + ", with a control character",
                             "a path without line breaks or control characters (it is written into batch scripts)");
    }
    if (in_sbatch_line && (ch == ' ' || ch == '\t' || ch == '"' || ch == '\'')) {
      throw core::InputError({"<command line>", 0}, key, "is " + core::quoted_input(text) + ", with a blank or a quote",
                             "a folder without blanks or quotes (sbatch reads #SBATCH --output= up to the first blank)");
    }
  }
}

std::string sweep_array_script(const SlurmSweepPlan& plan, const fs::path& dir, const std::vector<std::size_t>& tasks) {
  const std::string n = std::to_string(plan.shards);
  const std::string shards_dir = (dir / "shards").string();
  std::string text = "#!/bin/bash\n";
  append(text, {"# Written by `prefetchlab sweep --slurm`: shard i/", n, " of the sweep of ",
                std::to_string(plan.sweep.points), " points per array task, in ", shards_dir, "/i.\n"});
  text += "# A task re-run after a kill or a time limit continues its shard (--resume).\n";
  text += "#SBATCH --job-name=prefetchlab-sweep\n";
  append(text, {"#SBATCH --array=", core::index_ranges(tasks, ","), "\n"});
  append(text, {"#SBATCH --output=", (dir / "slurm" / "logs" / "shard-%a.out").string(), "\n"});
  text += "#SBATCH --open-mode=append\n";
  text += sbatch_lines(plan.sbatch_options);
  text += "set -euo pipefail\n";
  text += "shard=$SLURM_ARRAY_TASK_ID\n";
  text += "# One simulation per CPU of the task's allocation (1 unless --cpus-per-task is given).\n";
  append(text, {"exec ", shell_quote(plan.prefetchlab), " sweep ", shell_quote(plan.scenario), " --grid ",
                shell_quote(plan.grid), " -o ", shell_quote(shards_dir), "/\"$shard\" --shard \"$shard/", n,
                "\" --resume -j \"${SLURM_CPUS_PER_TASK:-1}\"\n"});
  return text;
}

std::string sweep_merge_script(const SlurmSweepPlan& plan, const fs::path& dir) {
  std::string text = "#!/bin/bash\n";
  append(text, {"# Written by `prefetchlab sweep --slurm`: joins the ", std::to_string(plan.shards), " shards into ",
                (dir / "results.csv").string(), " once the array has ended.\n"});
  text += "#SBATCH --job-name=prefetchlab-merge\n";
  append(text, {"#SBATCH --output=", (dir / "slurm" / "logs" / "merge-%j.out").string(), "\n"});
  text += sbatch_lines(merge_job_options(plan.sbatch_options));
  text += "set -uo pipefail\n";
  append(text, {shell_quote(plan.prefetchlab), " sweep-status --no-squeue ", shell_quote(dir.string()), "\n"});
  append(text, {"exec ", shell_quote(plan.prefetchlab), " merge ", shell_quote(dir.string())});
  for (std::size_t i = 0; i < plan.shards; ++i) append(text, {" ", shell_quote(shard_folder(dir, i).string())});
  text += "\n";
  return text;
}

}  // namespace prefetchlab::apps
