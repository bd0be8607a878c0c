#pragma once
// One case of the fidelity corpus (bench/fidelity/*.yaml, docs/fidelity.md): a public, real
// measurement with its source, the configuration that produced it in this project's terms (a
// scenario, an nccl-tests query or a torch-level call), the metric with its unit, and the
// reviewed band the simulator must stay inside — or a `known_gap` saying why it does not yet.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "core/hardware/hardware_profile.hpp"
#include "core/hardware/nccl_tests_log.hpp"
#include "core/scenario/scenario.hpp"
#include "fidelity_host_cost.hpp"
#include "sim/cost/nccl_tuner_cost_model.hpp"

namespace prefetchlab::apps {

enum class FidelityKind { kCollective, kTraining, kHost };
// "collective", "training", "host".
const char* fidelity_kind_name(FidelityKind kind);
std::optional<FidelityKind> parse_fidelity_kind(std::string_view name);

// What a case measures; each has one unit, written exactly so in the case's `unit:`.
enum class FidelityMetric {
  kTimeUs,            // collective: nccl-tests time column, "us"
  kBusBwGbps,         // collective: nccl-tests busbw, "GB/s"
  kAlgBwGbps,         // collective: nccl-tests algbw, "GB/s"
  kHostUsPerCall,     // host: one torch-level call, "us"
  kStepTimeS,         // training: one optimizer step (grad_accum iterations), "s"
  kTokensPerSPerGpu,  // training: micro_batch x seq_len per GPU per iteration time, "tokens/s/GPU"
  kSamplesPerS,       // training: sequences per second over all GPUs, "samples/s"
  kTflopsPerGpu,      // training: model FLOPs (no recomputation) per GPU, "TFLOPS"
  kMfu,               // training: TFLOPS per GPU over the dense peak for the dtype, "fraction"
};
const char* fidelity_metric_name(FidelityMetric metric);
const char* fidelity_metric_unit(FidelityMetric metric);
FidelityKind fidelity_metric_kind(FidelityMetric metric);

// An nccl-tests measurement: `bytes` is nccl-tests' size column (the whole gathered buffer for
// all_gather, the whole input for reduce_scatter).
struct CollectiveQuery {
  core::HardwareProfile profile;
  core::NcclTestsOp op = core::NcclTestsOp::kAllReduce;
  int ranks = 0;
  int nodes = 1;
  std::int64_t bytes = 0;
  std::string dtype;
  sim::AlgorithmFilter algorithm = sim::AlgorithmFilter::kAuto;
  sim::NcclAllowed allowed;  // the run's NCCL_ALGO / NCCL_PROTO (nccl_algo:, nccl_proto:)
};

struct HostCase {
  core::HardwareProfile profile;
  HostQuery query;
};

struct FidelityCase {
  std::filesystem::path file;  // as found in the corpus folder
  std::string name;            // file stem
  std::string source;
  FidelityKind kind = FidelityKind::kCollective;
  FidelityMetric metric = FidelityMetric::kTimeUs;
  double real = 0;
  double tolerance = 0;  // relative band: |simulated - real| / real <= tolerance
  std::optional<std::string> known_gap;
  std::optional<CollectiveQuery> collective;  // kind collective
  std::optional<HostCase> host;               // kind host
  std::optional<core::Scenario> scenario;     // kind training
};

// Where bundled scenarios, models and hardware profiles are found.
struct FidelityData {
  core::BundledData bundled;
  std::filesystem::path scenarios_dir;
};

// Reads one case strictly: unknown keys, wrong forms, units that are not the metric's unit and
// configurations that do not fit their hardware are core::InputErrors naming file, line and key.
FidelityCase load_fidelity_case(const std::filesystem::path& file, const FidelityData& data);

// What the simulator says for a case. `simulated` is set when the model produced a figure;
// otherwise `failure` says why (a simulated run that ran out of memory, ...).
struct FidelityOutcome {
  std::optional<double> simulated;
  std::string failure;
};
FidelityOutcome simulate_fidelity_case(const FidelityCase& c);

// The verdict of one case (docs/fidelity.md, "The known-gap rule").
enum class FidelityVerdict {
  kInside,      // inside its band, no known gap: passes
  kKnownGap,    // outside its band (or not simulated) and marked known_gap: passes, reported
  kOutside,     // outside its band (or not simulated) without known_gap: fails
  kGapClosed,   // inside its band but still marked known_gap: fails until the marker is removed
};
FidelityVerdict fidelity_verdict(const FidelityCase& c, const FidelityOutcome& outcome);
// "inside", "known_gap", "outside", "known_gap_closed".
const char* fidelity_verdict_name(FidelityVerdict verdict);
bool fidelity_verdict_passes(FidelityVerdict verdict);

}  // namespace prefetchlab::apps
