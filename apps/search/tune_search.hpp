#pragma once
// The derivative-free search behind `prefetchlab tune`: a compass (pattern) search with
// complete polling and shrinking steps, in a unit cube mapped onto each parameter's range
// (log-scaled for sizes and rates, so a step is a factor, not an offset).
//
// From the current point x (the start is evaluated first), each round polls the 2·D points
// x ± step·e_d (clipped to the cube). All polled points are scored as one batch (so the caller
// can run them in parallel); the best of them that beats x by more than `min_gain` becomes the
// new x (ties: the lowest poll index), otherwise the step halves. The search ends when the
// step falls below `min_step` or `budget` candidates have been scored. Points that decode to
// the same parameter values (integers round) are scored once. Deterministic: the same
// dimensions, budget and scores give the same path and result.
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace prefetchlab::core {

struct SearchDimension {
  std::string name;
  double lower = 0;
  double upper = 1;
  double start = 0;   // within [lower, upper]
  bool log_scale = false;  // requires lower > 0
  bool integer = false;    // decoded values round to whole numbers
};

struct SearchOptions {
  std::size_t budget = 60;    // candidates scored, the start included (>= 1)
  double initial_step = 0.5;  // in unit-cube coordinates: half of each range first, so plateaus are crossed
  double min_step = 1.0 / 64;
  double min_gain = 1e-4;     // an improvement smaller than this is noise, not progress
};

struct ScoredCandidate {
  std::vector<double> values;  // decoded, one per dimension
  double score = 0;
};

struct SearchResult {
  ScoredCandidate best;
  std::vector<ScoredCandidate> history;  // every scored candidate, in scoring order
  std::size_t rounds = 0;
  // Why it ended: true = the budget ran out while the step was still above min_step (a larger
  // budget could go on); false = it stopped on its own (its step fell below min_step).
  bool stopped_by_budget = false;
};

// Scores candidates (decoded values); higher is better. Called with batches; must return one
// score per candidate, in order.
using BatchScorer = std::function<std::vector<double>(const std::vector<std::vector<double>>&)>;

class PatternSearch {
 public:
  // Throws std::invalid_argument for an empty dimension list, a bad range or a budget of 0.
  PatternSearch(std::vector<SearchDimension> dimensions, SearchOptions options);

  SearchResult run(const BatchScorer& score) const;

  // Unit-cube coordinate u in [0, 1] -> the dimension's value (rounded when integer).
  double decode(std::size_t dimension, double u) const;
  // The inverse (before rounding), clamped to [0, 1].
  double encode(std::size_t dimension, double value) const;

 private:
  std::vector<SearchDimension> dimensions_;
  SearchOptions options_;
};

}  // namespace prefetchlab::core
