#include "fidelity_cross_validation.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <set>

#include "parallel_runner.hpp"

namespace prefetchlab::apps {
namespace {

// The scale searched, as log(s): 1/8 .. 8 of the shipped default.
constexpr double kLogScaleLow = -2.0794415416798357;  // log(1/8)
constexpr double kLogScaleHigh = 2.0794415416798357;
constexpr int kGoldenSteps = 48;                        // the bracket shrinks to ~1e-10 of its width

double objective(const FittedConstant& k, const std::vector<const FidelityCase*>& data, double scale) {
  double sum = 0;
  for (const FidelityCase* original : data) {
    FidelityCase c = *original;
    k.scale(c, scale);
    const FidelityOutcome o = simulate_fidelity_case(c);
    // A case the model cannot simulate at this scale counts as far off, not as free.
    const double e = o.simulated && *o.simulated > 0 ? std::log(*o.simulated / c.real) : 10.0;
    sum += e * e;
  }
  return sum;
}

// Golden-section search of log(scale); the objective is smooth and unimodal in every fit here
// (each case's figure moves monotonically with the constant).
double fit_scale(const FittedConstant& k, const std::vector<const FidelityCase*>& data) {
  const double ratio = (std::sqrt(5.0) - 1.0) / 2.0;
  double a = kLogScaleLow, b = kLogScaleHigh;
  double x1 = b - ratio * (b - a), x2 = a + ratio * (b - a);
  double f1 = objective(k, data, std::exp(x1)), f2 = objective(k, data, std::exp(x2));
  for (int i = 0; i < kGoldenSteps; ++i) {
    if (f1 <= f2) {
      b = x2, x2 = x1, f2 = f1;
      x1 = b - ratio * (b - a);
      f1 = objective(k, data, std::exp(x1));
    } else {
      a = x1, x1 = x2, f1 = f2;
      x2 = a + ratio * (b - a);
      f2 = objective(k, data, std::exp(x2));
    }
  }
  return std::exp(0.5 * (a + b));
}

// The cases a constant is fitted to: its own selection, less the known gaps and, when given, one
// source's cases.
std::vector<const FidelityCase*> data_of(const FittedConstant& k, const std::vector<FidelityCase>& cases,
                                         const std::string* left_out) {
  std::vector<const FidelityCase*> out;
  for (const auto& c : cases) {
    if (c.known_gap || !k.fits(c)) continue;
    if (left_out && c.source == *left_out) continue;
    out.push_back(&c);
  }
  return out;
}

}  // namespace

CrossValidation cross_validate(const std::vector<FidelityCase>& cases, const std::vector<FidelityOutcome>& in_sample,
                               const std::vector<std::size_t>& wanted, unsigned jobs) {
  CrossValidation cv;
  for (const FittedConstant& k : fitted_constants()) {
    if (k.data != FittedData::kCorpus) continue;
    ConstantFit fit;
    fit.constant = &k;
    const auto all = data_of(k, cases, nullptr);
    fit.cases = static_cast<int>(all.size());
    std::set<std::string> sources;
    for (const FidelityCase* c : all) sources.insert(c->source);
    fit.sources = static_cast<int>(sources.size());
    if (all.empty()) {
      cv.fits.push_back(std::move(fit));
      continue;
    }
    fit.all_sources = fit_scale(k, all);
    for (const std::string& source : sources) {
      const auto rest = data_of(k, cases, &source);
      if (rest.empty()) {
        fit.without.emplace_back(source, std::nullopt);
      } else {
        fit.without.emplace_back(source, fit_scale(k, rest) / fit.all_sources);
      }
    }
    cv.fits.push_back(std::move(fit));
  }

  cv.cases.resize(cases.size());
  std::vector<char> refit(cases.size(), 0);
  for (const std::size_t i : wanted) {
    const FidelityCase& c = cases[i];
    std::string because;
    const auto note = [&](std::string_view why) {
      if (!because.empty()) because += "; ";
      because += why;
    };
    for (const ConstantFit& fit : cv.fits) {
      for (const auto& [source, scale] : fit.without) {
        if (source != c.source) continue;
        if (!scale) {
          note(std::string(fit.constant->key) + ": no other source fits it");
        } else if (*scale != 1.0) {
          refit[i] = 1;
        }
      }
    }
    for (const FittedConstant& k : fitted_constants()) {
      if (std::find(k.corpus_sources.begin(), k.corpus_sources.end(), c.source) != k.corpus_sources.end()) {
        note(std::string(k.key) + " rests on this source");
      }
    }
    cv.cases[i].in_sample_because = because;
    cv.cases[i].outcome = in_sample[i];
  }

  std::atomic<bool> stop{false};
  parallel_for(cases.size(), thread_count(jobs, cases.size()), stop, [&](std::size_t i) {
    if (!refit[i]) return;
    FidelityCase c = cases[i];
    for (const ConstantFit& fit : cv.fits) {
      for (const auto& [source, scale] : fit.without) {
        if (source == c.source && scale) fit.constant->scale(c, *scale);
      }
    }
    cv.cases[i].outcome = simulate_fidelity_case(c);
  });
  return cv;
}

}  // namespace prefetchlab::apps
