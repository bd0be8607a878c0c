#pragma once
// Leave-one-source-out cross-validation of the fidelity corpus (docs/fidelity.md, "Out of
// sample"). Each constant fitted to corpus data (apps/fitted_constants.hpp) is refitted once on
// every source's cases and once per source on the others', and each case is simulated again with
// the constants fitted without its own source: what a user whose run no corpus case holds gets.
//
// A fit chooses the scale s of the shipped default that minimises the sum over its cases of
// log(simulated(s) / real)^2 (cases marked known_gap are left out: the model says it cannot
// do them). The shipped defaults are taken as the all-source fit, so a case is simulated out of
// sample with each constant at default x fit(without its source) / fit(all sources).
#include <optional>
#include <string>
#include <vector>

#include "fidelity_case.hpp"
#include "fitted_constants.hpp"

namespace prefetchlab::apps {

struct ConstantFit {
  const FittedConstant* constant = nullptr;
  int cases = 0;           // cases the all-source fit used
  int sources = 0;         // their distinct sources
  double all_sources = 1;  // the all-source fit, as a scale of the shipped default
  // The fit without each contributing source, as a scale of the all-source fit; nullopt where no
  // other source is left to fit it.
  std::vector<std::pair<std::string, std::optional<double>>> without;
};

struct CaseOutOfSample {
  FidelityOutcome outcome;  // simulated with the constants fitted without the case's source
  // Why the case is still in sample for some constant (empty when it is fully out of sample):
  // a corpus constant no other source fits, or a fixed constant resting on its source.
  std::string in_sample_because;
};

struct CrossValidation {
  std::vector<ConstantFit> fits;           // one per corpus constant
  std::vector<CaseOutOfSample> cases;      // aligned with the input cases
};

// Fits over every case of `cases`; simulates out of sample only the `wanted` ones (indexes into
// `cases`). `in_sample` holds the cases' outcomes at the shipped defaults (aligned with `cases`):
// a wanted case that no refit touches keeps its outcome. Deterministic whatever `jobs`.
CrossValidation cross_validate(const std::vector<FidelityCase>& cases, const std::vector<FidelityOutcome>& in_sample,
                               const std::vector<std::size_t>& wanted, unsigned jobs);

}  // namespace prefetchlab::apps
