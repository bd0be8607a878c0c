#pragma once
// Median (least-absolute-deviation) regression: the coefficients b minimising sum |y - X b|, by
// iteratively reweighted least squares (Eigen). Host times have long upper tails (a descheduled
// thread, a garbage collection), which pull a least-squares line; the median line follows the
// typical call, as DeepSpeed's host-cost terms were fitted (core/hardware/calibration.hpp).
#include <vector>

namespace prefetchlab::core {

struct MedianRegression {
  std::vector<double> coefficients;  // one per column of X
  // Rank of X: below its column count, some columns cannot be told apart and `coefficients`
  // is empty.
  int rank = 0;
  std::vector<double> residuals;  // y - X b, per row
};

// `rows`: one vector of the same length per observation (the design matrix X, row by row).
// Throws std::invalid_argument when rows and y differ in length or rows differ in width.
MedianRegression median_regression(const std::vector<std::vector<double>>& rows, const std::vector<double>& y);

}  // namespace prefetchlab::core
