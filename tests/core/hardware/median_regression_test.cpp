// Median regression: an exact line through most points is recovered whatever the outliers do
// (least squares is pulled by them), and columns that move together are refused.
#include <gtest/gtest.h>

#include <vector>

#include "core/hardware/median_regression.hpp"

namespace pc = prefetchlab::core;

TEST(MedianRegression, FollowsTheTypicalCallNotTheTail) {
  // y = 10 + 2 a + 30 b on 40 points; every fifth is 500 higher (a descheduled thread).
  std::vector<std::vector<double>> rows;
  std::vector<double> y;
  for (int i = 0; i < 40; ++i) {
    const double a = i % 7, b = (i * 3) % 5;
    rows.push_back({1.0, a, b});
    y.push_back(10 + 2 * a + 30 * b + (i % 5 == 0 ? 500 : 0));
  }
  const pc::MedianRegression fit = pc::median_regression(rows, y);
  ASSERT_EQ(fit.rank, 3);
  ASSERT_EQ(fit.coefficients.size(), 3u);
  EXPECT_NEAR(fit.coefficients[0], 10, 1e-3);
  EXPECT_NEAR(fit.coefficients[1], 2, 1e-3);
  EXPECT_NEAR(fit.coefficients[2], 30, 1e-3);
  int exact = 0;
  for (const double r : fit.residuals) exact += std::abs(r) < 1e-3 ? 1 : 0;
  EXPECT_EQ(exact, 32);  // the 8 outliers keep their 500
}

TEST(MedianRegression, ColumnsThatMoveTogetherHaveNoSolution) {
  std::vector<std::vector<double>> rows;
  std::vector<double> y;
  for (int i = 0; i < 10; ++i) {
    rows.push_back({1.0, double(i), 2.0 * i});
    y.push_back(i);
  }
  const pc::MedianRegression fit = pc::median_regression(rows, y);
  EXPECT_EQ(fit.rank, 2);
  EXPECT_TRUE(fit.coefficients.empty());
  EXPECT_THROW(pc::median_regression(rows, {1.0}), std::invalid_argument);
}
