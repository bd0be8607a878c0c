#pragma once
// What each knob of `tune`'s recommendation is worth on its own (issue 22): every knob the search
// changed is run alone on DeepSpeed's (or the policy's) defaults, on the held-out seeds, and set
// against the defaults and against all knobs together. A knob is kept when, on some scenario, it
// alone is faster than the defaults by more than the seeds' spread (the defaults' own max - min
// over the held-out seeds, relative to their mean), and it fails on none; the others go back to
// their defaults. (A knob that helps one scenario and slows another stays: the search's objective
// already weighed that trade; its slowdowns are named in the reason.) A knob dropped for speed may come back if the kept ones
// alone break the memory cap (the knobs whose alone runs peak lowest first).
#include <cstdint>
#include <string>
#include <vector>

namespace prefetchlab::apps {

// One configuration on one scenario over a set of seeds.
struct SeedSet {
  bool ok = true;
  std::string status = "ok";  // the first non-ok status, if any
  std::vector<double> step_ns;  // steady step per seed, in seed order
  std::int64_t peak_reserved_bytes = 0;  // the most over the seeds

  double mean_step_ns() const;
  // (slowest - fastest) / mean over the seeds; 0 with fewer than two seeds.
  double spread() const;
};

struct KnobChange {
  std::size_t dimension = 0;
  std::string key;
  std::string default_value;
  std::string tuned_value;
  std::vector<SeedSet> alone;  // per scenario: the defaults with only this knob at its tuned value
};

struct KnobVerdict {
  bool faster = false;  // worth more than the seeds' spread on some scenario, and ok on all
  bool kept_for_memory = false;  // not faster, but the cap needs it
  bool kept() const { return faster || kept_for_memory; }
  std::string reason;  // one line for report.md
};

// Per scenario: its name and the defaults' SeedSet; per knob: its runs. Judges speed only (see the file comment).
std::vector<KnobVerdict> judge_knobs(const std::vector<std::string>& scenario_names, const std::vector<SeedSet>& defaults,
                                     const std::vector<KnobChange>& knobs);

// The order in which dropped knobs come back for the memory cap: lowest alone peak first.
std::vector<std::size_t> memory_order(const std::vector<KnobChange>& knobs, const std::vector<KnobVerdict>& verdicts);

// report.md's attribution table: per scenario the defaults, each knob alone, all together and
// (when it differs) the recommendation, with step time, gain, the seeds' spread and peak.
struct AttributionRow {
  std::string configuration;
  const std::vector<SeedSet>* runs = nullptr;  // per scenario
  std::string kept;  // "kept", "dropped", "" for rows that are not one knob
};
std::string attribution_table(const std::vector<std::string>& scenario_names, const std::vector<SeedSet>& defaults,
                              const std::string& defaults_label, const std::vector<AttributionRow>& rows);

}  // namespace prefetchlab::apps
