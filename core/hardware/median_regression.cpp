#include "core/hardware/median_regression.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <Eigen/Dense>

namespace prefetchlab::core {

MedianRegression median_regression(const std::vector<std::vector<double>>& rows, const std::vector<double>& y) {
  if (rows.size() != y.size()) throw std::invalid_argument("median_regression: rows and y differ in length");
  MedianRegression out;
  if (rows.empty()) return out;
  const auto n = static_cast<Eigen::Index>(rows.size());
  const auto k = static_cast<Eigen::Index>(rows.front().size());
  Eigen::MatrixXd x(n, k);
  Eigen::VectorXd target(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const auto& row = rows[static_cast<std::size_t>(i)];
    if (static_cast<Eigen::Index>(row.size()) != k) throw std::invalid_argument("median_regression: rows differ in width");
    for (Eigen::Index j = 0; j < k; ++j) x(i, j) = row[static_cast<std::size_t>(j)];
    target(i) = y[static_cast<std::size_t>(i)];
  }
  const Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(x);
  out.rank = static_cast<int>(qr.rank());
  if (out.rank < k) return out;
  Eigen::VectorXd b = qr.solve(target);  // least squares: the starting point
  // Residuals below this count as zero in the weights (1 / |r|): a fraction of the data's scale,
  // so an exact fit converges instead of dividing by zero.
  const double floor = 1e-9 * std::max(1.0, target.cwiseAbs().maxCoeff());
  for (int iteration = 0; iteration < 200; ++iteration) {
    const Eigen::VectorXd r = target - x * b;
    const Eigen::VectorXd w = r.cwiseAbs().cwiseMax(floor).cwiseInverse().cwiseSqrt();
    const Eigen::VectorXd next = (w.asDiagonal() * x).colPivHouseholderQr().solve(w.asDiagonal() * target);
    const double change = (next - b).cwiseAbs().maxCoeff();
    b = next;
    if (change <= 1e-10 * std::max(1.0, b.cwiseAbs().maxCoeff())) break;
  }
  out.coefficients.assign(b.data(), b.data() + k);
  const Eigen::VectorXd r = target - x * b;
  out.residuals.assign(r.data(), r.data() + n);
  return out;
}

}  // namespace prefetchlab::core
