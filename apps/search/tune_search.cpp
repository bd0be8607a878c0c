#include "apps/search/tune_search.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace prefetchlab::core {

PatternSearch::PatternSearch(std::vector<SearchDimension> dimensions, SearchOptions options)
    : dimensions_(std::move(dimensions)), options_(options) {
  if (dimensions_.empty()) throw std::invalid_argument("pattern search: no dimensions");
  if (options_.budget < 1) throw std::invalid_argument("pattern search: budget must be at least 1");
  if (!(options_.initial_step > 0) || !(options_.min_step > 0)) {
    throw std::invalid_argument("pattern search: steps must be positive");
  }
  for (const auto& d : dimensions_) {
    if (!(d.lower <= d.upper) || (d.log_scale && !(d.lower > 0)) || d.start < d.lower || d.start > d.upper) {
      throw std::invalid_argument("pattern search: bad range for " + d.name);
    }
  }
}

double PatternSearch::decode(std::size_t i, double u) const {
  const SearchDimension& d = dimensions_[i];
  u = std::clamp(u, 0.0, 1.0);
  double value = d.log_scale ? std::exp(std::log(d.lower) + u * (std::log(d.upper) - std::log(d.lower)))
                             : d.lower + u * (d.upper - d.lower);
  value = std::clamp(value, d.lower, d.upper);  // exp(log(x)) may land a hair outside
  return d.integer ? std::round(value) : value;
}

double PatternSearch::encode(std::size_t i, double value) const {
  const SearchDimension& d = dimensions_[i];
  if (d.upper == d.lower) return 0;
  const double u = d.log_scale ? (std::log(value) - std::log(d.lower)) / (std::log(d.upper) - std::log(d.lower))
                               : (value - d.lower) / (d.upper - d.lower);
  return std::clamp(u, 0.0, 1.0);
}

SearchResult PatternSearch::run(const BatchScorer& score) const {
  const std::size_t dims = dimensions_.size();
  auto decode_all = [&](const std::vector<double>& u) {
    std::vector<double> values(dims);
    for (std::size_t i = 0; i < dims; ++i) values[i] = decode(i, u[i]);
    return values;
  };
  SearchResult result;
  std::map<std::vector<double>, double> seen;  // decoded values -> score

  std::vector<double> current(dims);
  for (std::size_t i = 0; i < dims; ++i) current[i] = encode(i, dimensions_[i].start);
  {
    const std::vector<double> values = decode_all(current);
    const double s = score({values}).at(0);
    seen[values] = s;
    result.history.push_back({values, s});
    result.best = {values, s};
  }

  double step = options_.initial_step;
  while (step >= options_.min_step && result.history.size() < options_.budget) {
    ++result.rounds;
    // The poll: ±step along each axis; a point already scored keeps its score (no budget).
    std::vector<std::vector<double>> polled_u;
    std::vector<std::vector<double>> polled_values;
    for (std::size_t i = 0; i < dims; ++i) {
      for (const double sign : {+1.0, -1.0}) {
        std::vector<double> u = current;
        u[i] = std::clamp(u[i] + sign * step, 0.0, 1.0);
        std::vector<double> values = decode_all(u);
        if (values == result.best.values) continue;
        if (std::find(polled_values.begin(), polled_values.end(), values) != polled_values.end()) continue;
        polled_u.push_back(std::move(u));
        polled_values.push_back(std::move(values));
      }
    }
    std::vector<std::vector<double>> fresh;
    for (const auto& values : polled_values) {
      if (!seen.count(values) && result.history.size() + fresh.size() < options_.budget) fresh.push_back(values);
    }
    if (!fresh.empty()) {
      const std::vector<double> scores = score(fresh);
      if (scores.size() != fresh.size()) throw std::logic_error("pattern search: scorer returned the wrong count");
      for (std::size_t k = 0; k < fresh.size(); ++k) {
        seen[fresh[k]] = scores[k];
        result.history.push_back({fresh[k], scores[k]});
      }
    }
    std::size_t winner = polled_values.size();
    double winner_score = result.best.score + options_.min_gain;
    for (std::size_t k = 0; k < polled_values.size(); ++k) {
      const auto it = seen.find(polled_values[k]);
      if (it == seen.end()) continue;  // cut off by the budget
      if (it->second > winner_score) {
        winner = k;
        winner_score = it->second;
      }
    }
    if (winner < polled_values.size()) {
      current = polled_u[winner];
      result.best = {polled_values[winner], winner_score};
    } else {
      step /= 2;
    }
  }
  result.stopped_by_budget = step >= options_.min_step;
  return result;
}

}  // namespace prefetchlab::core
