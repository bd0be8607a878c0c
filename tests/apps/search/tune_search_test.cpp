// core::PatternSearch: finds the optimum of a smooth function in log space, respects its
// budget, scores a decoded point once, and is deterministic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "apps/search/tune_search.hpp"

using prefetchlab::core::PatternSearch;
using prefetchlab::core::SearchDimension;
using prefetchlab::core::SearchOptions;

namespace {

std::vector<SearchDimension> two_dimensions() {
  return {{"bucket", 1e5, 1e9, 5e7, true, true}, {"alpha", 0.0, 1.0, 0.9, false, false}};
}

// Best at bucket 3e6, alpha 0.3.
double bowl(const std::vector<double>& v) {
  const double a = std::log10(v[0]) - std::log10(3e6);
  const double b = v[1] - 0.3;
  return -(a * a + b * b);
}

}  // namespace

TEST(TuneSearch, FindsTheOptimumInLogSpace) {
  SearchOptions options;
  options.budget = 200;
  const PatternSearch search(two_dimensions(), options);
  const auto result = search.run([](const std::vector<std::vector<double>>& batch) {
    std::vector<double> scores;
    for (const auto& v : batch) scores.push_back(bowl(v));
    return scores;
  });
  EXPECT_NEAR(std::log10(result.best.values[0]), std::log10(3e6), 0.15);
  EXPECT_NEAR(result.best.values[1], 0.3, 0.05);
  EXPECT_EQ(result.best.values[0], std::round(result.best.values[0]));  // integer dimension
  EXPECT_LE(result.history.size(), 200u);
}

TEST(TuneSearch, RespectsTheBudgetAndScoresEachPointOnce) {
  SearchOptions options;
  options.budget = 7;
  const PatternSearch search(two_dimensions(), options);
  std::size_t calls = 0;
  std::vector<std::vector<double>> scored;
  const auto result = search.run([&](const std::vector<std::vector<double>>& batch) {
    std::vector<double> scores;
    for (const auto& v : batch) {
      EXPECT_EQ(std::count(scored.begin(), scored.end(), v), 0);
      scored.push_back(v);
      scores.push_back(bowl(v));
      ++calls;
    }
    return scores;
  });
  EXPECT_EQ(calls, 7u);
  EXPECT_EQ(result.history.size(), 7u);
  EXPECT_GE(result.best.score, bowl({5e7, 0.9}));  // never worse than the start
}

TEST(TuneSearch, IsDeterministic) {
  SearchOptions options;
  options.budget = 40;
  const PatternSearch search(two_dimensions(), options);
  auto scorer = [](const std::vector<std::vector<double>>& batch) {
    std::vector<double> scores;
    for (const auto& v : batch) scores.push_back(bowl(v));
    return scores;
  };
  const auto a = search.run(scorer);
  const auto b = search.run(scorer);
  ASSERT_EQ(a.history.size(), b.history.size());
  for (std::size_t i = 0; i < a.history.size(); ++i) EXPECT_EQ(a.history[i].values, b.history[i].values);
}

TEST(TuneSearch, RejectsBadInput) {
  SearchOptions zero_budget;
  zero_budget.budget = 0;
  EXPECT_THROW(PatternSearch(two_dimensions(), zero_budget), std::invalid_argument);
  EXPECT_THROW(PatternSearch({}, SearchOptions{}), std::invalid_argument);
  EXPECT_THROW(PatternSearch({{"x", 0.0, 1.0, 0.5, true, false}}, SearchOptions{}), std::invalid_argument);
}

// The result says why the search ended, so tune advises a larger --budget only when it would help.
TEST(TuneSearch, SaysWhetherTheBudgetOrConvergenceStoppedIt) {
  const auto score = [](const std::vector<std::vector<double>>& batch) {
    std::vector<double> scores;
    for (const auto& v : batch) scores.push_back(bowl(v));
    return scores;
  };
  SearchOptions options;
  options.budget = 500;
  const auto converged = PatternSearch(two_dimensions(), options).run(score);
  EXPECT_LT(converged.history.size(), options.budget);
  EXPECT_FALSE(converged.stopped_by_budget);
  options.budget = 5;
  const auto cut = PatternSearch(two_dimensions(), options).run(score);
  EXPECT_EQ(cut.history.size(), 5u);
  EXPECT_TRUE(cut.stopped_by_budget);
}
