// `prefetchlab tune`: searches settings across scenarios and seeds (issue 8).
//
// Objective (higher is better), per candidate: for each scenario, its throughput relative to
// its own best static bucket = best-static mean steady step / candidate mean steady step, means
// over the tuning seeds 1..N. score = worst scenario's ratio + 0.1 x mean ratio (the mean only
// breaks near-ties of the worst). A candidate that runs out of memory (or fails otherwise) or
// exceeds the memory cap (peak reserved bytes) on any scenario and seed is infeasible: its score
// is below -1, lower the more it violates, so the search is pulled back to feasible settings.
// The search is core::PatternSearch (tune_search.hpp) with --budget candidates. The winner, the
// defaults and each scenario's best static bucket are then run on 5 held-out seeds for report.md.
// Then each knob the winner changed is run alone on the defaults (held-out seeds); only knobs
// worth more than the seeds' spread stay in the recommendation (tune_attribution.hpp). A cap no
// candidate meets is an error that names the lowest peak reached and what filled it.
#include "tune_command.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "command_context.hpp"
#include "core/io/csv_reader.hpp"
#include "folder_lock.hpp"
#include "stop_signals.hpp"
#include "fidelity_band.hpp"
#include "core/io/csv_row_writer.hpp"
#include "core/input/input_error.hpp"
#include "core/io/json_file.hpp"
#include "core/scenario/scenario.hpp"
#include "core/input/size_value.hpp"
#include "apps/search/tune_search.hpp"
#include "parallel_runner.hpp"
#include "static_bucket_grid.hpp"
#include "quiet_run.hpp"
#include "tune_attribution.hpp"
#include "tune_space.hpp"

namespace prefetchlab::apps {
namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t kFirstHeldOutSeed = 1001;  // tuning seeds are 1..N, far below
constexpr int kHeldOutSeeds = 5;
constexpr double kMeanWeight = 0.1;

struct TuneOptions {
  std::vector<std::string> scenarios;
  std::string policy = "static";
  std::string memory_cap;
  int seeds = 3;
  int budget = 150;
  bool deployable = false;
  unsigned jobs = 0;
  std::string output_dir;
  bool slurm = false;  // refused: see tune()
  bool resume = false;  // reuse the folder's evaluations.csv rows (the search is deterministic)
};

// One simulation to run: a scenario, a seed and the overrides of one configuration.
struct Job {
  std::string role;  // baseline, search, heldout
  std::string configuration;
  std::size_t scenario = 0;
  std::uint64_t seed = 0;
  std::vector<std::string> overrides;
};

struct Outcome {
  core::RunStatus status = core::RunStatus::kOk;
  std::int64_t steady_step_ns = 0;
  // The run's peak, the model states and an unfinished (OOM) iteration included.
  std::int64_t peak_reserved_bytes = 0;
  std::optional<core::PeakMemoryBreakdown> peak_memory;
};

// A configuration's outcome on one scenario over a set of seeds.
using Aggregate = SeedSet;

Aggregate aggregate(const std::vector<Outcome>& runs) {
  Aggregate a;
  for (const auto& run : runs) {
    if (run.status != core::RunStatus::kOk && a.ok) {
      a.ok = false;
      a.status = core::run_status_name(run.status);
    }
    a.step_ns.push_back(static_cast<double>(run.steady_step_ns));
    a.peak_reserved_bytes = std::max(a.peak_reserved_bytes, run.peak_reserved_bytes);
  }
  return a;
}

// The lowest peak any simulation of a scenario reached, and what filled memory then.
struct LowestPeak {
  std::int64_t peak_reserved_bytes = 0;
  std::string configuration;
  std::optional<core::PeakMemoryBreakdown> breakdown;
  std::optional<Job> job;  // set when the breakdown is missing (read back from a resumed row)
};

const std::vector<std::string> kEvaluationColumns{"evaluation", "role", "configuration", "scenario", "seed",
                                                  "status", "steady_step_time_ns", "peak_reserved_bytes"};

// Ctrl-C, SIGTERM or SIGHUP during a tune: what finished is in evaluations.csv, and
// `tune ... --resume` continues from it.
struct TuneInterrupted {};

// One evaluations.csv row an earlier session of this tune wrote.
struct DoneRow {
  int line = 0;
  std::string role, configuration, scenario, status;
  std::uint64_t seed = 0;
  std::int64_t steady_step_ns = 0, peak_reserved_bytes = 0;

  // Its outcome, once checked to be `job`'s: the search is deterministic, so evaluation k of the
  // same tune is the same simulation; a row that is not says the folder holds another tune.
  Outcome outcome_for(const Job& job, std::size_t evaluation, const std::vector<std::string>& files,
                      const fs::path& csv) const {
    const std::string stem = fs::path(files[job.scenario]).stem().string();
    if (role != job.role || configuration != job.configuration || scenario != stem || seed != job.seed) {
      throw core::InputError({csv.string(), line}, "evaluation",
                             std::to_string(evaluation) + " is " + role + " '" + configuration + "' on " + scenario +
                                 " seed " + std::to_string(seed) + ", but this tune's is " + job.role + " '" +
                                 job.configuration + "' on " + stem + " seed " + std::to_string(job.seed) +
                                 ": the folder holds another tune",
                             "--resume with the command that wrote the folder, or an empty or new folder for -o");
    }
    Outcome out;
    out.status = *core::parse_run_status(status);  // checked when the row was read
    out.steady_step_ns = steady_step_ns;
    out.peak_reserved_bytes = peak_reserved_bytes;
    return out;
  }
};

// The rows of an earlier session's evaluations.csv, by evaluation number (a torn last row, a
// kill mid-append, is cut off so that appends start on a clean line).
std::map<std::size_t, DoneRow> read_done_rows(const fs::path& csv) {
  std::map<std::size_t, DoneRow> done;
  if (!fs::exists(csv)) return done;
  std::ifstream in(csv, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const core::CsvText parsed = core::parse_csv(text);
  drop_torn_tail(csv, parsed.complete_bytes, parsed.torn_tail, "tune");
  const std::string expected = "the evaluations.csv an earlier `prefetchlab tune` wrote";
  if (parsed.records.empty()) return done;
  if (parsed.records.front().fields != kEvaluationColumns) {
    throw core::InputError({csv.string(), 1}, "", "is not a tune's evaluations.csv (its header differs)", expected);
  }
  for (std::size_t r = 1; r < parsed.records.size(); ++r) {
    const core::CsvRecord& record = parsed.records[r];
    const auto& f = record.fields;
    DoneRow row;
    row.line = record.line;
    try {
      if (f.size() != kEvaluationColumns.size()) throw std::invalid_argument("columns");
      const std::size_t evaluation = std::stoull(f[0]);
      row.role = f[1];
      row.configuration = f[2];
      row.scenario = f[3];
      row.seed = std::stoull(f[4]);
      row.status = f[5];
      if (!core::parse_run_status(row.status)) throw std::invalid_argument("status");
      row.steady_step_ns = std::stoll(f[6]);
      row.peak_reserved_bytes = std::stoll(f[7]);
      if (!done.emplace(evaluation, row).second) throw std::invalid_argument("evaluation twice");
    } catch (const std::exception&) {
      throw core::InputError({csv.string(), record.line}, "", "is not a row a tune writes", expected);
    }
  }
  return done;
}

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? separator : "") + parts[i];
  return out;
}

// Runs jobs on all threads and appends one evaluations.csv row per finished simulation, so an
// interrupted tune loses nothing finished. Rows carry a running evaluation number assigned in
// job order; finish() rewrites the file sorted by it, so -j does not change a byte.
class Evaluator {
 public:
  // `done`: the rows an earlier session of this tune wrote (resume), by evaluation number: those
  // evaluations are read back instead of simulated again, and keep their rows.
  Evaluator(std::vector<std::string> files, unsigned jobs, const fs::path& csv_path, std::map<std::size_t, DoneRow> done)
      : files_(std::move(files)),
        jobs_(jobs),
        bundled_(bundled_data()),
        lowest_(files_.size()),
        lowest_index_(files_.size(), 0),
        csv_path_(csv_path),
        done_(std::move(done)),
        csv_(done_.empty() ? core::CsvRowWriter(csv_path, kEvaluationColumns)
                           : core::CsvRowWriter::append_to(csv_path, kEvaluationColumns)) {}

  std::vector<Outcome> run(const std::vector<Job>& jobs) {
    std::vector<Outcome> outcomes(jobs.size());
    const std::size_t first = next_evaluation_;
    next_evaluation_ += jobs.size();
    std::atomic<bool> stop{false};
    parallel_for(jobs.size(), thread_count(jobs_, jobs.size()), stop, [&](std::size_t i) {
      const Job& job = jobs[i];
      if (const auto it = done_.find(first + i); it != done_.end()) {
        outcomes[i] = it->second.outcome_for(job, first + i, files_, csv_path_);
        std::lock_guard lock(mutex_);
        note_peak(job, outcomes[i], first + i);
        return;
      }
      if (StopSignals::requested()) {
        stop.store(true);
        return;
      }
      std::vector<std::string> overrides = job.overrides;
      overrides.push_back("noise.seed=" + std::to_string(job.seed));
      overrides.push_back("output.trace=false");
      overrides.push_back("output.memory_timeline=false");
      const core::Scenario scenario = core::load_scenario(files_[job.scenario], overrides, bundled_);
      const QuietRunResult result = run_quietly(scenario, nullptr);
      Outcome& out = outcomes[i];
      out.status = result.status;
      out.steady_step_ns = result.stats.steady_step_time_ns;
      out.peak_reserved_bytes = result.stats.peak_reserved_bytes;
      out.peak_memory = result.stats.peak_memory;
      if (out.peak_memory) out.peak_reserved_bytes = std::max(out.peak_reserved_bytes, out.peak_memory->reserved_bytes);
      std::lock_guard lock(mutex_);
      note_peak(job, out, first + i);
      csv_.append({first + i, job.role, job.configuration, fs::path(files_[job.scenario]).stem().string(), job.seed,
                   core::run_status_name(out.status), out.steady_step_ns, out.peak_reserved_bytes});
    });
    if (StopSignals::requested()) throw TuneInterrupted{};
    return outcomes;
  }

  // The lowest peaks' breakdowns that came from earlier sessions' rows (which hold the peak, not
  // its parts): simulated again, so a resumed tune reports what an uninterrupted one does.
  void complete_lowest_breakdowns() {
    for (LowestPeak& lowest : lowest_) {
      if (lowest.breakdown || !lowest.job) continue;
      std::vector<std::string> overrides = lowest.job->overrides;
      overrides.push_back("noise.seed=" + std::to_string(lowest.job->seed));
      overrides.push_back("output.trace=false");
      overrides.push_back("output.memory_timeline=false");
      const core::Scenario scenario = core::load_scenario(files_[lowest.job->scenario], overrides, bundled_);
      lowest.breakdown = run_quietly(scenario, nullptr).stats.peak_memory;
    }
  }

  void finish() {
    csv_.close();
    std::ifstream in(csv_path_, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::istringstream lines(text);
    std::string header;
    std::getline(lines, header);
    std::map<std::size_t, std::string> rows;
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty()) rows[std::stoull(line.substr(0, line.find(',')))] = line;
    }
    std::string sorted = header + "\n";
    for (const auto& [index, line] : rows) sorted += line + "\n";
    core::write_text_atomically(csv_path_, sorted);
  }

  std::size_t simulations() const { return next_evaluation_; }
  // Per scenario, over every simulation so far (ties: the earliest, so -j changes nothing).
  const std::vector<LowestPeak>& lowest_peaks() const { return lowest_; }

 private:
  std::vector<std::string> files_;
  unsigned jobs_;
  core::BundledData bundled_;
  std::vector<LowestPeak> lowest_;
  std::vector<std::size_t> lowest_index_;
  fs::path csv_path_;
  std::map<std::size_t, DoneRow> done_;
  core::CsvRowWriter csv_;

  // Keeps the lowest peak per scenario (ties: the earliest evaluation, so -j changes nothing).
  void note_peak(const Job& job, const Outcome& out, std::size_t evaluation) {
    LowestPeak& lowest = lowest_[job.scenario];
    if (lowest.configuration.empty() || out.peak_reserved_bytes < lowest.peak_reserved_bytes ||
        (out.peak_reserved_bytes == lowest.peak_reserved_bytes && evaluation < lowest_index_[job.scenario])) {
      lowest = {out.peak_reserved_bytes, job.configuration, out.peak_memory,
                out.peak_memory ? std::nullopt : std::optional<Job>(job)};
      lowest_index_[job.scenario] = evaluation;
    }
  }
  std::mutex mutex_;
  std::size_t next_evaluation_ = 0;
};

// A configuration run on every scenario and seed: aggregates per scenario.
std::vector<Aggregate> run_configuration(Evaluator& evaluator, std::size_t scenarios,
                                         const std::vector<std::uint64_t>& seeds, const std::string& role,
                                         const std::string& configuration, const std::vector<std::string>& overrides) {
  std::vector<Job> jobs;
  for (std::size_t s = 0; s < scenarios; ++s) {
    for (const auto seed : seeds) jobs.push_back({role, configuration, s, seed, overrides});
  }
  const std::vector<Outcome> outcomes = evaluator.run(jobs);
  std::vector<Aggregate> out;
  for (std::size_t s = 0; s < scenarios; ++s) {
    out.push_back(aggregate({outcomes.begin() + static_cast<std::ptrdiff_t>(s * seeds.size()),
                             outcomes.begin() + static_cast<std::ptrdiff_t>((s + 1) * seeds.size())}));
  }
  return out;
}

struct Score {
  double value = 0;
  double worst_ratio = 0;
  double mean_ratio = 0;
  bool feasible = true;
};

Score score_of(const std::vector<Aggregate>& per_scenario, const std::vector<double>& best_static_ns,
               std::int64_t cap_bytes) {
  Score score;
  double violation = 0;
  double sum = 0;
  score.worst_ratio = 1e300;
  for (std::size_t s = 0; s < per_scenario.size(); ++s) {
    const Aggregate& a = per_scenario[s];
    if (!a.ok) {
      violation += 1;
      continue;
    }
    if (cap_bytes > 0 && a.peak_reserved_bytes > cap_bytes) {
      violation += static_cast<double>(a.peak_reserved_bytes - cap_bytes) / static_cast<double>(cap_bytes);
    }
    const double ratio = best_static_ns[s] / a.mean_step_ns();
    score.worst_ratio = std::min(score.worst_ratio, ratio);
    sum += ratio;
  }
  score.feasible = violation == 0;
  score.mean_ratio = sum / static_cast<double>(per_scenario.size());
  if (!score.feasible) {
    score.worst_ratio = 0;  // some scenario has no usable ratio
    score.value = -1.0 - violation;
    return score;
  }
  score.value = score.worst_ratio + kMeanWeight * score.mean_ratio;
  return score;
}

std::string ms(double ns) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3f", ns / 1e6);
  return buffer;
}

std::string gib(std::int64_t bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buffer;
}

std::string percent(double ratio) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%+.2f%%", (ratio - 1.0) * 100.0);
  return buffer;
}

std::string fixed(double value, int digits) {
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

TunePolicy parse_policy(const std::string& name) {
  if (name == "static") return TunePolicy::kStatic;
  if (name == "ema_threshold") return TunePolicy::kEmaThreshold;
  if (name == "pace_search") return TunePolicy::kPaceSearch;
  throw core::InputError({"--policy", 0}, "policy", "'" + name + "' is not a policy tune can search",
                         "static, ema_threshold or pace_search");
}

std::int64_t parse_cap(const std::string& text) {
  if (text.empty()) return 0;
  const std::optional<std::int64_t> bytes = core::parse_bytes(text);
  if (!bytes || *bytes <= 0) {
    throw core::InputError({"--memory-cap", 0}, "memory-cap", "'" + text + "' is not a positive size in bytes",
                           "bytes such as 16GiB, 1.5e10 or 20000000000");
  }
  return *bytes;
}

int tune(const TuneOptions& options) {
  using Clock = std::chrono::steady_clock;
  const auto started = Clock::now();
  if (options.slurm) {
    // A Slurm array runs a fixed list of points; tune's search picks each round's candidates from
    // the scores of the rounds before it, so its evaluations cannot be laid out as an array.
    throw core::InputError({"--slurm", 0}, "slurm",
                           "is not supported by tune: each round of its search picks candidates from the earlier rounds' "
                           "scores, so its evaluations cannot be submitted as one array ahead of time",
                           "tune inside one allocation (srun -c N prefetchlab tune ... -j N, or sbatch --cpus-per-task=N), "
                           "or `sweep --slurm` for a fixed grid");
  }
  const TunePolicy policy = parse_policy(options.policy);
  if (options.deployable && policy == TunePolicy::kPaceSearch) {
    throw core::InputError({"--deployable", 0}, "deployable", "is impossible with pace_search: DeepSpeed has no such policy",
                           "--policy ema_threshold (its three DeepSpeed keys) or --policy static");
  }
  if (options.budget < 1) {
    throw core::InputError({"--budget", 0}, "budget", std::to_string(options.budget) + " is below 1",
                           "a number of candidates >= 1");
  }
  if (options.seeds < 1) {
    throw core::InputError({"--seeds", 0}, "seeds", std::to_string(options.seeds) + " is below 1", "a count >= 1");
  }
  const std::int64_t cap_bytes = parse_cap(options.memory_cap);
  const TuneSpace space(policy, options.deployable || policy == TunePolicy::kStatic);

  // Every scenario must load before anything runs; names label rows, so they must differ.
  const core::BundledData bundled = bundled_data();
  std::vector<core::Scenario> bases;
  std::set<std::string> names;
  for (const auto& file : options.scenarios) {
    bases.push_back(core::load_scenario(file, {}, bundled));
    if (const std::string note = uncalibrated_note(bases.back()); !note.empty()) std::cerr << note << "\n";
    if (const std::string note = fidelity_band_note(bases.back()); !note.empty()) std::cerr << note << "\n";
    if (!names.insert(bases.back().name).second) {
      throw core::InputError({file, 0}, "", "has the same name (file stem) as another scenario given",
                             "scenario files with different names");
    }
  }
  const std::size_t n = bases.size();
  std::vector<std::uint64_t> seeds(static_cast<std::size_t>(options.seeds));
  std::iota(seeds.begin(), seeds.end(), 1);
  std::vector<std::uint64_t> held_out(kHeldOutSeeds);
  std::iota(held_out.begin(), held_out.end(), kFirstHeldOutSeed);

  const fs::path dir(options.output_dir);
  fs::create_directories(dir);
  const FolderLock lock(dir);  // two tunes into one folder would interleave evaluations.csv
  const fs::path evaluations = dir / "evaluations.csv";
  if (!options.resume && fs::exists(evaluations) && fs::file_size(evaluations) > 0) {
    throw core::InputError({evaluations.string(), 0}, "-o",
                           "holds an earlier tune's evaluations, which a new tune would overwrite",
                           "--resume to continue that tune (its finished evaluations are reused), or an empty or new "
                           "folder for -o");
  }
  std::map<std::size_t, DoneRow> done = options.resume ? read_done_rows(evaluations) : std::map<std::size_t, DoneRow>{};
  if (!done.empty()) std::fprintf(stderr, "tune: resuming: %zu evaluation(s) of the earlier session reused\n", done.size());
  const StopSignals stop_signals;  // Ctrl-C, SIGTERM, SIGHUP: finish what runs, keep every row
  Evaluator evaluator(options.scenarios, options.jobs, evaluations, std::move(done));

  // Baseline: each scenario's static bucket grid (x2 from 1e5 to its max_live, as `compare`).
  std::vector<std::vector<std::int64_t>> grids(n);
  std::vector<Job> grid_jobs;
  for (std::size_t s = 0; s < n; ++s) {
    grids[s] = static_bucket_grid(bases[s].zero.max_live_numel);
    for (const auto b : grids[s]) {
      for (const auto seed : seeds) {
        grid_jobs.push_back({"baseline", "static bucket " + std::to_string(b), s, seed,
                             {"controller={policy: static}", "zero.stage3_prefetch_bucket_size=" + std::to_string(b)}});
      }
    }
  }
  const std::vector<Outcome> grid_outcomes = evaluator.run(grid_jobs);
  std::vector<double> best_static_ns(n);
  std::vector<std::int64_t> best_static_bucket(n);
  {
    std::size_t at = 0;
    for (std::size_t s = 0; s < n; ++s) {
      std::optional<std::pair<double, std::int64_t>> best_fit, best_any;
      for (const auto b : grids[s]) {
        const Aggregate a = aggregate({grid_outcomes.begin() + static_cast<std::ptrdiff_t>(at),
                                       grid_outcomes.begin() + static_cast<std::ptrdiff_t>(at + seeds.size())});
        at += seeds.size();
        if (!a.ok) continue;
        if (!best_any || a.mean_step_ns() < best_any->first) best_any = {a.mean_step_ns(), b};
        if ((cap_bytes == 0 || a.peak_reserved_bytes <= cap_bytes) && (!best_fit || a.mean_step_ns() < best_fit->first)) {
          best_fit = {a.mean_step_ns(), b};
        }
      }
      if (!best_any) {
        throw core::InputError({options.scenarios[s], 0}, "", "runs out of memory (or fails) with every static bucket",
                               "a scenario that fits its GPUs with some prefetch bucket");
      }
      if (!best_fit) {
        std::cerr << "note: " << bases[s].name << ": no static bucket fits the memory cap; its best static "
                  << "reference ignores the cap\n";
      }
      const auto best = best_fit ? *best_fit : *best_any;
      best_static_ns[s] = best.first;
      best_static_bucket[s] = best.second;
    }
  }

  // The search. Candidates of one poll round run together (all their scenarios and seeds).
  core::SearchOptions search_options;
  search_options.budget = static_cast<std::size_t>(options.budget);
  core::CsvRowWriter candidates(dir / "candidates.csv", {"candidate", "settings", "feasible", "worst_ratio",
                                                         "mean_ratio", "score"});
  std::size_t candidate_count = 0;
  double best_score = -1e300;
  const core::PatternSearch search(space.dimensions(), search_options);
  const core::SearchResult result = search.run([&](const std::vector<std::vector<double>>& batch) {
    std::vector<Job> jobs;
    std::vector<std::string> labels;
    for (std::size_t c = 0; c < batch.size(); ++c) {
      labels.push_back(join(space.overrides(batch[c]), " "));
      for (std::size_t s = 0; s < n; ++s) {
        for (const auto seed : seeds) {
          jobs.push_back({"search", "candidate " + std::to_string(candidate_count + c), s, seed, space.overrides(batch[c])});
        }
      }
    }
    const std::vector<Outcome> outcomes = evaluator.run(jobs);
    std::vector<double> scores;
    for (std::size_t c = 0; c < batch.size(); ++c) {
      std::vector<Aggregate> per_scenario;
      for (std::size_t s = 0; s < n; ++s) {
        const std::size_t at = (c * n + s) * seeds.size();
        per_scenario.push_back(aggregate({outcomes.begin() + static_cast<std::ptrdiff_t>(at),
                                          outcomes.begin() + static_cast<std::ptrdiff_t>(at + seeds.size())}));
      }
      const Score score = score_of(per_scenario, best_static_ns, cap_bytes);
      candidates.append({candidate_count + c, labels[c], score.feasible, score.worst_ratio, score.mean_ratio,
                         score.value});
      scores.push_back(score.value);
    }
    candidate_count += batch.size();
    best_score = std::max(best_score, *std::max_element(scores.begin(), scores.end()));
    std::printf("tune: search: %zu of at most %d candidates scored; best score so far %.4f%s\n", candidate_count,
                options.budget, best_score, best_score < 0 ? " (none fits yet)" : "");
    std::fflush(stdout);
    return scores;
  });
  candidates.close();
  const std::string stop_text =
      result.stopped_by_budget
          ? "the search used its whole --budget (" + std::to_string(result.history.size()) +
                " candidates) while its steps were still large: a larger --budget may go further"
          : "the search stopped on its own after " + std::to_string(result.history.size()) + " of " +
                std::to_string(options.budget) + " candidates (its steps shrank below the smallest): a larger --budget "
                "would not change the result";
  std::printf("tune: %s\n", stop_text.c_str());
  if (result.best.score < 0) {
    // Say what fills memory where it is lowest, so the user knows what to change.
    evaluator.complete_lowest_breakdowns();
    evaluator.finish();
    std::ostringstream why;
    why << "# Tune report: no setting fits the memory cap\n\n- memory cap (peak reserved): "
        << (cap_bytes > 0 ? gib(cap_bytes) + " GiB" : std::string("none: every candidate runs out of device memory somewhere"))
        << "\n- " << stop_text << "\n\n## The lowest peak any tried point reached\n\n"
        << "| scenario | lowest peak reserved (GiB) | at | model states | activations | gathered parameters | "
           "gradients | allocator cache |\n|---|---|---|---|---|---|---|---|\n";
    std::int64_t needed = 0;
    for (std::size_t s = 0; s < n; ++s) {
      const LowestPeak& low = evaluator.lowest_peaks()[s];
      needed = std::max(needed, low.peak_reserved_bytes);
      why << "| " << bases[s].name << " | " << gib(low.peak_reserved_bytes) << " | " << low.configuration << " | ";
      if (low.breakdown) {
        const core::PeakMemoryBreakdown& b = *low.breakdown;
        why << gib(b.model_states_bytes) << " | " << gib(b.activation_bytes) << " | " << gib(b.gathered_param_bytes)
            << " | " << gib(b.gradient_bytes) << " | " << gib(b.cache_bytes()) << " |\n";
      } else {
        why << "- | - | - | - | - |\n";
      }
    }
    why << "\nModel states are the rank's parameter shards, fp32 master weights, Adam moments, gradient partition "
           "and IPG bucket: no prefetch setting changes them (more ranks, offload or a smaller model does). "
           "Activations follow the micro batch and sequence length (activation checkpointing cuts them). Gathered "
           "parameters and the allocator's cache are what the searched keys move.\n";
    core::write_text_atomically(dir / "report.md", why.str());
    std::fprintf(stderr, "%s", why.str().substr(why.str().find("## The lowest")).c_str());
    throw core::InputError({options.scenarios.front(), 0}, "memory-cap",
                           "cannot be met: no candidate fits it on every scenario and seed; the lowest peak any "
                           "tried point reached is " + gib(needed) + " GiB (" + stop_text + "; report.md says what "
                           "fills memory)",
                           "a --memory-cap of at least " + gib(needed) + " GiB" +
                               (result.stopped_by_budget ? std::string(", or a larger --budget") : std::string()) +
                               ", or less in the model states or activations (more ranks, offload, a smaller micro "
                               "batch, activation checkpointing)");
  }
  const std::vector<double>& tuned = result.best.values;

  // Held-out seeds: the tuned setting against the defaults and each scenario's best static bucket.
  const std::string default_label =
      policy == TunePolicy::kStatic ? std::string("DeepSpeed default") : std::string("default ") + space.policy_name();
  const std::vector<Aggregate> tuned_held = run_configuration(evaluator, n, held_out, "heldout", "tuned", space.overrides(tuned));
  // DeepSpeed's defaults for all four static keys (the static search's starting point).
  const std::vector<Aggregate> deepspeed_held =
      run_configuration(evaluator, n, held_out, "heldout", "DeepSpeed default",
                        TuneSpace(TunePolicy::kStatic, true).default_overrides());
  // For static, the policy's default is DeepSpeed's default.
  const std::vector<Aggregate> policy_default_held =
      policy == TunePolicy::kStatic
          ? deepspeed_held
          : run_configuration(evaluator, n, held_out, "heldout", default_label, space.default_overrides());
  std::vector<Job> best_jobs;
  for (std::size_t s = 0; s < n; ++s) {
    for (const auto seed : held_out) {
      best_jobs.push_back({"heldout", "best static", s, seed,
                           {"controller={policy: static}",
                            "zero.stage3_prefetch_bucket_size=" + std::to_string(best_static_bucket[s])}});
    }
  }
  const std::vector<Outcome> best_outcomes = evaluator.run(best_jobs);
  std::vector<Aggregate> best_held;
  for (std::size_t s = 0; s < n; ++s) {
    best_held.push_back(aggregate({best_outcomes.begin() + static_cast<std::ptrdiff_t>(s * held_out.size()),
                                   best_outcomes.begin() + static_cast<std::ptrdiff_t>((s + 1) * held_out.size())}));
  }

  // Attribution: every knob the search changed, alone on the defaults, on the held-out seeds.
  // Knobs not worth more than the seeds' spread go back to their defaults (tune_attribution.hpp).
  std::vector<double> default_values;
  for (const auto& d : space.dimensions()) default_values.push_back(d.start);
  std::vector<KnobChange> knobs;
  for (std::size_t i = 0; i < tuned.size(); ++i) {
    const core::SearchDimension& d = space.dimensions()[i];
    const std::string default_text = format_tuned_value(d.start, d.integer);
    const std::string tuned_text = format_tuned_value(tuned[i], d.integer);
    if (default_text == tuned_text) continue;
    std::vector<double> alone = default_values;
    alone[i] = tuned[i];
    std::printf("tune: attribution: %s alone (%s -> %s) on %zu held-out seeds\n", d.name.c_str(), default_text.c_str(),
                tuned_text.c_str(), held_out.size());
    std::fflush(stdout);
    knobs.push_back({i, d.name, default_text, tuned_text,
                     run_configuration(evaluator, n, held_out, "attribution", d.name + " alone", space.overrides(alone))});
  }
  std::vector<std::string> scenario_names;
  for (const auto& base : bases) scenario_names.push_back(base.name);
  std::vector<KnobVerdict> verdicts = judge_knobs(scenario_names, policy_default_held, knobs);
  const auto fits = [&](const std::vector<Aggregate>& runs) {
    return std::all_of(runs.begin(), runs.end(), [&](const Aggregate& a) {
      return a.ok && (cap_bytes == 0 || a.peak_reserved_bytes <= cap_bytes);
    });
  };
  std::vector<double> recommended;
  std::vector<Aggregate> recommended_held;
  const auto recommend = [&] {
    recommended = default_values;
    std::size_t kept = 0;
    for (std::size_t k = 0; k < knobs.size(); ++k) {
      if (!verdicts[k].kept()) continue;
      recommended[knobs[k].dimension] = tuned[knobs[k].dimension];
      ++kept;
    }
    if (kept == knobs.size()) {
      recommended = tuned;
      recommended_held = tuned_held;
    } else if (kept == 0) {
      recommended_held = policy_default_held;
    } else {
      recommended_held = run_configuration(evaluator, n, held_out, "attribution", "recommended",
                                           space.overrides(recommended));
    }
  };
  recommend();
  for (const std::size_t k : memory_order(knobs, verdicts)) {
    if (fits(recommended_held)) break;
    verdicts[k].kept_for_memory = true;
    verdicts[k].reason += "; kept all the same: without it the recommendation peaks above the memory cap";
    recommend();
  }
  const std::size_t kept_count = static_cast<std::size_t>(
      std::count_if(verdicts.begin(), verdicts.end(), [](const KnobVerdict& v) { return v.kept(); }));
  evaluator.finish();

  // Outputs. Nothing below depends on the clock, the host or -j.
  std::string scenario_list;
  for (const auto& base : bases) scenario_list += (scenario_list.empty() ? "" : ", ") + base.name;
  const std::string cap_text = cap_bytes > 0 ? std::to_string(cap_bytes) + " bytes (" + gib(cap_bytes) + " GiB)" : "none";
  std::string seeds_text = "1";
  if (seeds.size() > 1) seeds_text += "-" + std::to_string(seeds.back());

  const std::string header = "# prefetchlab tune --policy " + std::string(space.policy_name()) +
                             (options.deployable ? " --deployable" : "") + ": tuned on " + scenario_list +
                             " (seeds " + seeds_text + "), memory cap " + cap_text + "\n";
  std::string yaml_header = header;
  if (policy == TunePolicy::kStatic) {
    yaml_header += "# The static settings are DeepSpeed keys: see ds_config.json (a scenario loads it with\n"
                   "# zero: {ds_config: ds_config.json}).\n";
  }
  core::write_text_atomically(dir / "controller.yaml", space.controller_yaml(recommended, yaml_header));
  core::write_json_atomically(dir / "ds_config.json", space.ds_config(recommended));

  nlohmann::json summary;
  summary["policy"] = space.policy_name();
  summary["deployable"] = space.deployable();
  summary["memory_cap_bytes"] = cap_bytes;
  summary["tuning_seeds"] = seeds;
  summary["held_out_seeds"] = held_out;
  summary["budget"] = options.budget;
  summary["candidates_scored"] = result.history.size();
  summary["score"] = result.best.score;
  summary["stopped_by_budget"] = result.stopped_by_budget;
  summary["overrides"] = space.overrides(recommended);
  summary["search_overrides"] = space.overrides(tuned);
  nlohmann::json rows = nlohmann::json::array();

  std::ostringstream md;
  md << "# Tune report: " << space.policy_name() << (options.deployable ? " (deployable)" : "") << "\n\n"
     << "- scenarios: " << scenario_list << "\n"
     << "- tuning seeds: " << seeds_text << "; held-out seeds: " << held_out.front() << "-" << held_out.back() << "\n"
     << "- memory cap (peak reserved): " << cap_text << "\n"
     << "- budget: " << options.budget << " candidates; scored " << result.history.size() << " (each on "
     << n * seeds.size() << " simulations); " << evaluator.simulations() << " simulations in all\n"
     << "- objective: worst scenario's throughput relative to its own best static bucket, + "
     << fixed(kMeanWeight, 1) << " x the mean of those ratios (tie-breaker); infeasible = any run out of memory "
     << "or over the cap. Tuned score " << fixed(result.best.score, 4) << "\n"
     << "- search: pattern (compass) search with shrinking steps in log space (apps/search/tune_search.hpp)\n\n"
     << "- " << stop_text << "\n\n"
     << "## Tuned settings\n\n"
     << "The recommendation (controller.yaml, ds_config.json) keeps only the knobs worth more than the seeds' "
        "spread (see the attribution below); the others are back at their defaults.\n\n"
     << "| key | search's best | recommended | in DeepSpeed |\n|---|---|---|---|\n";
  {
    const std::vector<TunedSetting> found = space.settings(tuned);
    const std::vector<TunedSetting> kept_settings = space.settings(recommended);
    for (std::size_t i = 0; i < found.size(); ++i) {
      md << "| " << found[i].key << " | " << found[i].value << " | " << kept_settings[i].value << " | "
         << kept_settings[i].deepspeed << " |\n";
    }
  }
  md << "\n## What each knob is worth\n\n"
     << "Each knob the search changed, alone on the " << default_label << " settings, then all together, on the "
     << held_out.size() << " held-out seeds. \"seeds' spread\" is (slowest - fastest) / mean over those seeds; a "
     << "knob is kept when alone it is faster than the " << default_label << " by more than that spread on some "
     << "scenario (and runs everywhere); a dropped knob comes back only if the memory cap needs it.\n\n";
  if (knobs.empty()) {
    md << "The search's best is the " << default_label << " setting itself: nothing to attribute.\n";
  } else {
    std::vector<AttributionRow> attribution_rows;
    for (std::size_t k = 0; k < knobs.size(); ++k) {
      attribution_rows.push_back({knobs[k].key + " " + knobs[k].default_value + " -> " + knobs[k].tuned_value + " alone",
                                  &knobs[k].alone,
                                  verdicts[k].faster ? "kept" : verdicts[k].kept_for_memory ? "kept (memory cap)" : "dropped"});
    }
    attribution_rows.push_back({"all " + std::to_string(knobs.size()) + " together (search's best)", &tuned_held, ""});
    if (kept_count != knobs.size() && kept_count != 0) {
      attribution_rows.push_back({"recommended (" + std::to_string(kept_count) + " kept)", &recommended_held, ""});
    }
    md << attribution_table(scenario_names, policy_default_held, default_label, attribution_rows) << "\n";
    for (std::size_t k = 0; k < knobs.size(); ++k) {
      md << "- `" << knobs[k].key << "` " << (verdicts[k].kept() ? "kept" : "back to " + knobs[k].default_value)
         << ": " << verdicts[k].reason << "\n";
    }
    for (std::size_t s = 0; s < n; ++s) {
      if (policy_default_held[s].spread() == 0) {
        md << "\n" << bases[s].name << ": the seeds do not change its step time (its `noise:` section has no jitter), "
           << "so its spread is 0 and any change counts; set noise.compute_jitter to judge against seed noise.\n";
      }
    }
    if (kept_count == 0) {
      md << "\nNo knob is worth more than the seeds' spread: the recommendation is the " << default_label
         << " setting.\n";
    }
  }
  md << "\n## Per scenario, mean of " << held_out.size() << " held-out seeds\n\n"
     << "| scenario | configuration | steady step (ms) | vs " << default_label << " | vs best static | peak reserved (GiB) | status |\n"
     << "|---|---|---|---|---|---|---|\n";
  for (std::size_t s = 0; s < n; ++s) {
    auto line = [&](const std::string& label, const Aggregate& a) {
      md << "| " << bases[s].name << " | " << label << " | " << ms(a.mean_step_ns()) << " | "
         << percent(policy_default_held[s].mean_step_ns() / a.mean_step_ns()) << " | "
         << percent(best_held[s].mean_step_ns() / a.mean_step_ns()) << " | " << gib(a.peak_reserved_bytes) << " | "
         << a.status << " |\n";
    };
    line("best static (bucket " + std::to_string(best_static_bucket[s]) + ")", best_held[s]);
    line("DeepSpeed default (static 5e7)", deepspeed_held[s]);
    if (policy != TunePolicy::kStatic) line(default_label, policy_default_held[s]);
    line("tuned", tuned_held[s]);
    if (kept_count != knobs.size()) line("recommended", recommended_held[s]);
    nlohmann::json row;
    row["scenario"] = bases[s].name;
    row["best_static_bucket_numel"] = best_static_bucket[s];
    auto put = [&](const char* key, const Aggregate& a) {
      row[key] = {{"mean_steady_step_ns", a.mean_step_ns()}, {"peak_reserved_bytes", a.peak_reserved_bytes},
                  {"status", a.status}};
    };
    put("best_static", best_held[s]);
    put("deepspeed_default", deepspeed_held[s]);
    put("policy_default", policy_default_held[s]);
    put("tuned", tuned_held[s]);
    put("recommended", recommended_held[s]);
    rows.push_back(row);
  }
  md << "\n\"vs\" columns are throughput ratios (+ = the row is faster).\n";
  const std::vector<std::string> notes = space.hard_coded_notes(tuned);
  if (policy == TunePolicy::kPaceSearch) {
    md << "\n## Not in DeepSpeed\n\n";
    for (const auto& note : notes) md << "- " << note << "\n";
    md << "\nUse it in PrefetchLab scenarios (controller.yaml); `--policy ema_threshold --deployable` tunes what "
          "DeepSpeed reads.\n";
  } else if (!notes.empty()) {
    md << "\n## Not deployable as is: constants DeepSpeed hard-codes\n\n"
       << "The adaptive keys themselves need PR #8431 (stage3_adaptive_prefetch_bucket_size, "
       << "stage3_adaptive_prefetch_min_size, stage3_adaptive_prefetch_max_size); ds_config.json carries only "
       << "those. The follow-up controller (6e70233) hard-codes the rest:\n\n";
    for (const auto& note : notes) md << "- " << note << "\n";
    md << "\nRerun with --deployable to tune only what DeepSpeed reads.\n";
  } else if (policy == TunePolicy::kEmaThreshold) {
    md << "\nDeployable: ds_config.json holds only the three adaptive keys, which need PR #8431.\n";
  }
  summary["scenarios"] = rows;
  nlohmann::json attribution = nlohmann::json::array();
  for (std::size_t k = 0; k < knobs.size(); ++k) {
    nlohmann::json knob = {{"key", knobs[k].key},
                           {"default", knobs[k].default_value},
                           {"tuned", knobs[k].tuned_value},
                           {"kept", verdicts[k].kept()},
                           {"kept_for_memory", verdicts[k].kept_for_memory},
                           {"reason", verdicts[k].reason}};
    for (std::size_t s = 0; s < n; ++s) {
      knob["alone"][bases[s].name] = {{"mean_steady_step_ns", knobs[k].alone[s].mean_step_ns()},
                                      {"seed_spread", knobs[k].alone[s].spread()},
                                      {"defaults_seed_spread", policy_default_held[s].spread()},
                                      {"peak_reserved_bytes", knobs[k].alone[s].peak_reserved_bytes},
                                      {"status", knobs[k].alone[s].status}};
    }
    attribution.push_back(knob);
  }
  summary["attribution"] = attribution;
  core::write_text_atomically(dir / "report.md", md.str());
  core::write_json_atomically(dir / "tune.json", summary);

  const double wall_s = std::chrono::duration<double>(Clock::now() - started).count();
  std::printf("tune: %s, %zu candidates, %zu simulations in %.1f s\n", space.policy_name(), result.history.size(),
              evaluator.simulations(), wall_s);
  std::printf("%s", md.str().substr(md.str().find("## Tuned settings")).c_str());
  std::printf("outputs: %s/{controller.yaml, ds_config.json, report.md, tune.json, evaluations.csv, candidates.csv}\n",
              dir.string().c_str());
  return kExitOk;
}

}  // namespace

CLI::App* add_tune_command(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<TuneOptions>();
  CLI::App* command = app.add_subcommand(
      "tune", "Search DeepSpeed settings or a controller's parameters across scenarios, seeds and a memory cap");
  command->footer(
      "--policy static: stage3_prefetch_bucket_size, stage3_max_live_parameters,\n"
      "stage3_max_reuse_distance and stage3_param_persistence_threshold, one setting for all\n"
      "scenarios. --policy ema_threshold|pace_search: the controller's parameters; --deployable\n"
      "keeps to the keys DeepSpeed reads (ema_threshold's min/max, needs PR #8431). Objective:\n"
      "the worst scenario's throughput relative to its own best static bucket (+0.1 x the mean),\n"
      "mean over --seeds seeds 1..N; nothing that runs out of memory or over --memory-cap.\n"
      "Writes DIR/controller.yaml, ds_config.json, report.md (held-out seeds 1001-1005),\n"
      "tune.json, evaluations.csv (a row per simulation as it finishes) and candidates.csv.\n"
      "report.md runs each changed knob alone against the defaults on the held-out seeds and keeps\n"
      "only knobs worth more than the seeds' spread; a cap no point meets is exit 2 with the lowest\n"
      "peak reached and what filled memory there.");
  command->add_option("scenarios", options->scenarios, "scenario YAML files")->required();
  command->add_option("--policy", options->policy, "static (default), ema_threshold or pace_search");
  command->add_option("--memory-cap", options->memory_cap, "peak reserved bytes allowed per GPU (e.g. 16GiB)");
  command->add_option("--seeds", options->seeds, "tuning seeds 1..N (default 3)");
  command->add_option("--budget", options->budget, "candidates to score (default 150)");
  command->add_flag("--deployable", options->deployable, "only keys DeepSpeed reads");
  command->add_option("-j,--jobs", options->jobs, "simulations in parallel (default: the CPUs this process may use, sched_getaffinity)");
  command->add_option("-o,--output", options->output_dir, "output folder")->required();
  command->add_flag("--slurm", options->slurm,
                    "refused, with the reason: the search's rounds depend on earlier scores (run tune inside one "
                    "allocation, or sweep --slurm for a fixed grid)");
  command->add_flag("--resume", options->resume,
                    "continue the tune in -o: its evaluations.csv rows are reused (the search is deterministic), the "
                    "rest is simulated");
  command->callback([options, exit_code] {
    *exit_code = run_guarded([&] {
      try {
        return tune(*options);
      } catch (const TuneInterrupted&) {
        std::fprintf(stderr, "interrupted: every finished evaluation is in %s/evaluations.csv; `prefetchlab tune ... "
                             "--resume` continues from them\n", options->output_dir.c_str());
        return 130;
      }
    });
  });
  return command;
}

}  // namespace prefetchlab::apps
