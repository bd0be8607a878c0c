#pragma once
// The cost models' constants whose defaults were fitted to measurements, and what each was fitted
// to (docs/fidelity.md, "Out of sample"). Three kinds of data:
// - the fidelity corpus itself: the constant is refitted by `prefetchlab fidelity` leaving out
//   one source at a time (apps/fidelity_cross_validation.hpp), so every case is also judged with
//   constants that never saw its source;
// - one machine's measurements outside the corpus (one H200 server's layer timings, one H100's
//   GEMM sweep): not refittable here, listed so that a reader knows a result rests on one machine;
// - public series of which some sources are also corpus cases: fixed in code, so those cases stay
//   in sample for that constant and are marked so.
#include <span>
#include <string_view>

#include "fidelity_case.hpp"

namespace prefetchlab::apps {

enum class FittedData { kCorpus, kOneMachine, kPublicSeries };
// "corpus", "one machine", "public series".
const char* fitted_data_name(FittedData data);

struct FittedConstant {
  std::string_view key;        // the calibration or profile key, as a user sets it
  std::string_view default_value;  // as shipped, with its unit
  FittedData data = FittedData::kCorpus;
  std::string_view fitted_to;  // what data, in words, with public sources
  // kCorpus: the cases whose measurements the fit uses (before known gaps are left out), and
  // how a scale of the constant (1 = as shipped) is set in a case's configuration.
  bool (*fits)(const FidelityCase&) = nullptr;
  void (*scale)(FidelityCase&, double factor) = nullptr;
  // kPublicSeries: corpus sources the fixed constant rests on (their cases stay in sample).
  std::span<const std::string_view> corpus_sources{};
};

// Every fitted constant, corpus ones first.
std::span<const FittedConstant> fitted_constants();

}  // namespace prefetchlab::apps
