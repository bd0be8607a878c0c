#include "fidelity_case.hpp"

#include <cmath>
#include <memory>
#include <tuple>
#include <vector>

#include "core/hardware/hardware_derived.hpp"
#include "core/input/input_error.hpp"
#include "core/input/yaml_overrides.hpp"
#include "core/input/yaml_section.hpp"
#include "quiet_run.hpp"

namespace prefetchlab::apps {
namespace {

struct MetricRow {
  FidelityMetric metric;
  const char* name;
  const char* unit;
  FidelityKind kind;
};

constexpr MetricRow kMetrics[] = {
    {FidelityMetric::kTimeUs, "time_us", "us", FidelityKind::kCollective},
    {FidelityMetric::kBusBwGbps, "busbw_gbps", "GB/s", FidelityKind::kCollective},
    {FidelityMetric::kAlgBwGbps, "algbw_gbps", "GB/s", FidelityKind::kCollective},
    {FidelityMetric::kHostUsPerCall, "host_us_per_call", "us", FidelityKind::kHost},
    {FidelityMetric::kStepTimeS, "step_time_s", "s", FidelityKind::kTraining},
    {FidelityMetric::kTokensPerSPerGpu, "tokens_per_s_per_gpu", "tokens/s/GPU", FidelityKind::kTraining},
    {FidelityMetric::kSamplesPerS, "samples_per_s", "samples/s", FidelityKind::kTraining},
    {FidelityMetric::kTflopsPerGpu, "tflops_per_gpu", "TFLOPS", FidelityKind::kTraining},
    {FidelityMetric::kMfu, "mfu", "fraction", FidelityKind::kTraining},
};

const MetricRow& metric_row(FidelityMetric metric) {
  for (const auto& row : kMetrics) {
    if (row.metric == metric) return row;
  }
  return kMetrics[0];
}

std::string metric_names_for(FidelityKind kind) {
  std::string out;
  for (const auto& row : kMetrics) {
    if (row.kind != kind) continue;
    if (!out.empty()) out += " | ";
    out += row.name;
  }
  return out;
}

sim::CollectiveKind collective_kind(core::NcclTestsOp op) {
  return op == core::NcclTestsOp::kAllGather       ? sim::CollectiveKind::kAllGather
         : op == core::NcclTestsOp::kReduceScatter ? sim::CollectiveKind::kReduceScatter
                                                   : sim::CollectiveKind::kAllReduce;
}

core::HardwareProfile load_profile(const core::YamlSection& section, const FidelityData& data) {
  return core::load_hardware_profile(
      core::resolve_bundled_file(section, "hardware", data.bundled.hardware_dir, "hardware profile"));
}

// ranks (+ optional nodes), or nodes + gpus_per_node; checked against the profile.
std::pair<int, int> read_ranks(const core::YamlSection& section, const core::HardwareProfile& profile) {
  const std::string either = "either ranks (and optionally nodes), or nodes and gpus_per_node";
  int ranks = 0;
  int nodes = 0;
  if (section.has("ranks")) {
    if (section.has("gpus_per_node")) {
      section.fail("gpus_per_node", "is given together with ranks", either);
    }
    ranks = static_cast<int>(section.require_int("ranks", 2, 1 << 20));
    nodes = static_cast<int>(
        section.get_int("nodes", (ranks + profile.gpus_per_node - 1) / profile.gpus_per_node, 1, 1 << 20));
  } else {
    if (!section.has("nodes") || !section.has("gpus_per_node")) section.fail("ranks", "is missing", either);
    nodes = static_cast<int>(section.require_int("nodes", 1, 1 << 20));
    const int per_node = static_cast<int>(section.require_int("gpus_per_node", 1, profile.gpus_per_node));
    ranks = nodes * per_node;
    if (ranks < 2) section.fail("gpus_per_node", "gives a single rank", "at least 2 ranks in all");
  }
  if (ranks % nodes != 0 || ranks / nodes > profile.gpus_per_node || nodes > profile.max_nodes) {
    section.fail(section.has("ranks") ? "ranks" : "nodes",
                 std::to_string(ranks) + " ranks on " + std::to_string(nodes) + " nodes do not fit " + profile.name,
                 "ranks spread evenly, at most " + std::to_string(profile.gpus_per_node) + " per node and " +
                     std::to_string(profile.max_nodes) + " nodes");
  }
  if (nodes > 1 && !profile.network) {
    section.fail("nodes", "is " + std::to_string(nodes) + " but " + profile.name + " has no network section",
                 "one node, or a profile with NICs between nodes");
  }
  return {ranks, nodes};
}

core::NcclTestsOp read_op(const core::YamlSection& section, std::string_view key) {
  return section.require_enum<core::NcclTestsOp>(key, {{"all_gather", core::NcclTestsOp::kAllGather},
                                                       {"reduce_scatter", core::NcclTestsOp::kReduceScatter},
                                                       {"all_reduce", core::NcclTestsOp::kAllReduce}});
}

int read_dtype_bytes(const core::YamlSection& section, std::string* name) {
  const std::string dtype = section.require_string("dtype");
  const auto bytes = core::nccl_tests_type_bytes(dtype);
  if (!bytes) {
    section.fail("dtype", "is '" + dtype + "'", "an nccl-tests type: float, bfloat16, half, double, int8, int32, ...");
  }
  if (name) *name = dtype;
  return *bytes;
}

CollectiveQuery load_collective(const core::YamlSection& section, const FidelityData& data) {
  section.allow_only(
      {"hardware", "op", "ranks", "nodes", "gpus_per_node", "bytes", "dtype", "algorithm", "nccl_algo", "nccl_proto"});
  CollectiveQuery q;
  q.profile = load_profile(section, data);
  q.op = read_op(section, "op");
  std::tie(q.ranks, q.nodes) = read_ranks(section, q.profile);
  const int type_bytes = read_dtype_bytes(section, &q.dtype);
  q.bytes = section.require_bytes("bytes");
  const std::int64_t per_elem = static_cast<std::int64_t>(type_bytes) * (q.op == core::NcclTestsOp::kAllReduce ? 1 : q.ranks);
  if (q.bytes <= 0 || q.bytes % per_elem != 0) {
    section.fail("bytes", "is " + std::to_string(q.bytes) + ", not a whole number of " + q.dtype + " elements" +
                              (q.op == core::NcclTestsOp::kAllReduce ? "" : " per rank"),
                 "nccl-tests' size column, a positive multiple of " + std::to_string(per_elem));
  }
  const std::string algorithm = section.get_string("algorithm", "auto");
  const auto filter = sim::algorithm_filter_from_name(algorithm);
  if (!filter) section.fail("algorithm", "is '" + algorithm + "'", "auto, ring, tree, nvls, nvls_tree or pat");
  q.algorithm = *filter;
  // The run's environment, where its source states it: NCCL_ALGO and NCCL_PROTO as it set them.
  if (section.has("nccl_algo") && !q.allowed.restrict_algorithms(section.require_string("nccl_algo"))) {
    section.fail("nccl_algo", "is '" + section.require_string("nccl_algo") + "'",
                 std::string("NCCL_ALGO as the run set it: a comma-separated list of ") + sim::NcclAllowed::kAlgorithmNames);
  }
  if (section.has("nccl_proto") && !q.allowed.restrict_protocols(section.require_string("nccl_proto"))) {
    section.fail("nccl_proto", "is '" + section.require_string("nccl_proto") + "'",
                 std::string("NCCL_PROTO as the run set it: a comma-separated list of ") + sim::NcclAllowed::kProtocolNames);
  }
  const sim::NcclTunerCostModel model(q.profile, q.profile.calibration);
  const auto only = sim::only_algorithm(q.algorithm);
  if (only && !model.available({collective_kind(q.op), 0, q.ranks, q.nodes}, *only)) {
    section.fail("algorithm", algorithm + " is not available on " + q.profile.name + " (" + model.path_description() +
                                  ", " + std::to_string(q.nodes) + " node(s))",
                 "auto or an algorithm NCCL runs for this op here");
  }
  if (!q.allowed.everything()) {
    try {
      model.choose({collective_kind(q.op), q.bytes, q.ranks, q.nodes}, q.algorithm, q.allowed);
    } catch (const std::invalid_argument& e) {
      section.fail(section.has("nccl_algo") ? "nccl_algo" : "nccl_proto", e.what(),
                   "lists that leave an algorithm and protocol NCCL runs for this call");
    }
  }
  section.finish();
  return q;
}

HostCase load_host(const core::YamlSection& section, const FidelityData& data) {
  section.allow_only({"hardware", "call", "ranks", "nodes", "gpus_per_node", "bytes_per_rank", "dtype",
                      "timing", "barrier_per_call", "includes_device_time"});
  HostCase h;
  h.profile = load_profile(section, data);
  h.query.call = section.require_string("call");
  if (h.query.call == "all_gather" || h.query.call == "all_gather_into_tensor") {
    h.query.op = core::NcclTestsOp::kAllGather;
  } else if (h.query.call == "all_reduce") {
    h.query.op = core::NcclTestsOp::kAllReduce;
  } else if (h.query.call == "reduce_scatter_tensor") {
    h.query.op = core::NcclTestsOp::kReduceScatter;
  } else {
    section.fail("call", "is '" + h.query.call + "'",
                 "a torch.distributed function: all_gather | all_gather_into_tensor | all_reduce | reduce_scatter_tensor");
  }
  std::tie(h.query.ranks, h.query.nodes) = read_ranks(section, h.profile);
  std::string dtype;
  const int type_bytes = read_dtype_bytes(section, &dtype);
  h.query.bytes_per_rank = section.require_bytes("bytes_per_rank");
  if (h.query.bytes_per_rank <= 0 || h.query.bytes_per_rank % type_bytes != 0) {
    section.fail("bytes_per_rank", "is " + std::to_string(h.query.bytes_per_rank) + ", not a whole number of " +
                                       dtype + " elements",
                 "each rank's tensor in bytes, a positive multiple of " + std::to_string(type_bytes));
  }
  if (section.has("includes_device_time")) {
    section.fail("includes_device_time", "was replaced by `timing`",
                 "timing: synchronized (each call waited for: host + device), pipelined (back-to-back async calls: "
                 "the larger of host and device) or host_only");
  }
  const std::string timing = section.require_string("timing");
  if (timing == "synchronized") {
    h.query.timing = HostQuery::Timing::kSynchronized;
  } else if (timing == "pipelined") {
    h.query.timing = HostQuery::Timing::kPipelined;
  } else if (timing == "host_only") {
    h.query.timing = HostQuery::Timing::kHostOnly;
  } else {
    section.fail("timing", "is '" + timing + "'", "synchronized, pipelined or host_only");
  }
  h.query.barrier_per_call = section.get_bool("barrier_per_call", false);
  if (h.query.barrier_per_call && h.query.timing != HostQuery::Timing::kSynchronized) {
    section.fail("barrier_per_call", "is true with timing other than synchronized",
                 "true only with timing: synchronized (a barrier waits for every rank's call)");
  }
  section.finish();
  return h;
}

// `set:` — dotted scenario keys and their values, written into the scenario before it is read.
void apply_set(const core::YamlSection& top, YAML::Node& scenario_root, core::YamlSource& source,
               const std::string& root_path) {
  const YAML::Node set_node = top.raw("set");
  if (!set_node || set_node.IsNull()) return;
  const core::YamlSection set(set_node, top.source(), "set", top.location("set").line);
  for (const auto& key : set.keys()) {
    set.raw(key);
    core::apply_override_from(scenario_root, key, set_node[key], source, set.location(key), "set.", root_path);
  }
  set.finish();
}

core::Scenario load_training(const core::YamlSection& top, YAML::Node case_root,
                             const std::shared_ptr<core::YamlSource>& case_source, const std::string& name,
                             const FidelityData& data) {
  if (!top.has("scenario")) top.fail("scenario", "is missing", "a scenario: an inline mapping, a path or a bundled name");
  const YAML::Node node = top.raw("scenario");
  if (node.IsMap()) {
    // Inline: written into the case's own tree (errors name the case file and `scenario.*`).
    YAML::Node root = case_root["scenario"];
    const int line = top.location("scenario").line;  // before set: adds keys under it
    apply_set(top, root, *case_source, "scenario");
    return core::load_scenario_tree(root, case_source, "scenario", line, name, data.bundled);
  }
  if (!node.IsScalar()) {
    top.fail("scenario", "is neither a mapping nor a string",
             "an inline scenario mapping, a path relative to this file, or a bundled scenario name");
  }
  const std::filesystem::path file = core::resolve_bundled_file(top, "scenario", data.scenarios_dir, "scenario");
  auto source = std::make_shared<core::YamlSource>();
  source->file = file.string();
  YAML::Node root = core::parse_yaml_file(source->file);
  apply_set(top, root, *source, "");
  return core::load_scenario_tree(root, source, "", 1, name, data.bundled);
}

}  // namespace

const char* fidelity_kind_name(FidelityKind kind) {
  switch (kind) {
    case FidelityKind::kCollective:
      return "collective";
    case FidelityKind::kTraining:
      return "training";
    case FidelityKind::kHost:
      return "host";
  }
  return "?";
}

std::optional<FidelityKind> parse_fidelity_kind(std::string_view name) {
  for (const auto kind : {FidelityKind::kCollective, FidelityKind::kTraining, FidelityKind::kHost}) {
    if (name == fidelity_kind_name(kind)) return kind;
  }
  return std::nullopt;
}

const char* fidelity_metric_name(FidelityMetric metric) { return metric_row(metric).name; }
const char* fidelity_metric_unit(FidelityMetric metric) { return metric_row(metric).unit; }
FidelityKind fidelity_metric_kind(FidelityMetric metric) { return metric_row(metric).kind; }

FidelityCase load_fidelity_case(const std::filesystem::path& file, const FidelityData& data) {
  auto source = std::make_shared<core::YamlSource>();
  source->file = file.string();
  YAML::Node root = core::parse_yaml_file(source->file);
  const core::YamlSection top = core::YamlSection::from_node(root, source);
  top.allow_only({"source", "kind", "scenario", "set", "collective", "host", "metric", "real", "unit",
                  "tolerance", "known_gap"});

  FidelityCase c;
  c.file = file;
  c.name = file.stem().string();
  c.source = top.require_string("source");
  if (c.source.empty() || c.source.front() == '/' || c.source.find('\n') != std::string::npos) {
    top.fail("source", "is '" + c.source + "'",
             "one line a reader can check: a URL, a repository with a path, issue or PR number, or a paper");
  }
  c.kind = top.require_enum<FidelityKind>(
      "kind", {{"collective", FidelityKind::kCollective}, {"training", FidelityKind::kTraining}, {"host", FidelityKind::kHost}});

  // Metric and unit first: they decide nothing about the configuration, but a wrong unit is the
  // commonest slip when copying a figure.
  const std::string metric_name = top.require_string("metric");
  bool found = false;
  for (const auto& row : kMetrics) {
    if (metric_name == row.name && row.kind == c.kind) {
      c.metric = row.metric;
      found = true;
    }
  }
  if (!found) {
    top.fail("metric", "'" + metric_name + "' is not a metric of a " + fidelity_kind_name(c.kind) + " case",
             "one of " + metric_names_for(c.kind));
  }
  c.real = top.require_double("real", 1e-300, 1e300);
  const std::string unit = top.require_string("unit");
  if (unit != fidelity_metric_unit(c.metric)) {
    top.fail("unit", "is '" + unit + "', but " + metric_name + " is measured in '" + fidelity_metric_unit(c.metric) + "'",
             std::string("'") + fidelity_metric_unit(c.metric) + "' (convert the published figure)");
  }
  c.tolerance = top.require_double("tolerance", 0.01, 0.25);
  if (top.has("known_gap")) {
    const std::string gap = top.require_string("known_gap");
    if (gap.empty() || gap.find('\n') != std::string::npos) {
      top.fail("known_gap", "is empty or spans lines", "one line saying what is wrong in the model");
    }
    c.known_gap = gap;
  }

  const std::vector<std::pair<const char*, FidelityKind>> owners{
      {"scenario", FidelityKind::kTraining}, {"set", FidelityKind::kTraining},
      {"collective", FidelityKind::kCollective}, {"host", FidelityKind::kHost}};
  for (const auto& [key, owner] : owners) {
    if (top.has(key) && owner != c.kind) {
      top.fail(key, std::string("does not belong in a ") + fidelity_kind_name(c.kind) + " case",
               std::string(c.kind == FidelityKind::kTraining ? "scenario (and set)"
                           : c.kind == FidelityKind::kCollective ? "collective"
                                                                 : "host") +
                   " for kind " + fidelity_kind_name(c.kind));
    }
  }
  switch (c.kind) {
    case FidelityKind::kCollective:
      if (!top.has("collective")) top.fail("collective", "is missing", "a collective section (hardware, op, ranks, bytes, dtype)");
      c.collective = load_collective(top.section("collective"), data);
      break;
    case FidelityKind::kHost:
      if (!top.has("host")) top.fail("host", "is missing", "a host section (hardware, call, ranks, bytes_per_rank, dtype)");
      c.host = load_host(top.section("host"), data);
      break;
    case FidelityKind::kTraining:
      c.scenario = load_training(top, root, source, c.name, data);
      break;
  }
  top.finish();
  return c;
}

FidelityOutcome simulate_fidelity_case(const FidelityCase& c) {
  FidelityOutcome out;
  switch (c.kind) {
    case FidelityKind::kCollective: {
      const CollectiveQuery& q = *c.collective;
      const sim::NcclTunerCostModel model(q.profile, q.profile.calibration);
      const auto kind = collective_kind(q.op);
      const auto choice = model.choose({kind, q.bytes, q.ranks, q.nodes}, q.algorithm, q.allowed);
      const double seconds = static_cast<double>(choice.duration_ns) * 1e-9;
      // nccl-tests' doc/PERFORMANCE.md: algbw = size / time; busbw = algbw x 2(n-1)/n for
      // all_reduce, x (n-1)/n for all_gather and reduce_scatter.
      const double n = q.ranks;
      const double factor = (kind == sim::CollectiveKind::kAllReduce ? 2.0 : 1.0) * (n - 1) / n;
      const double algbw = static_cast<double>(q.bytes) / seconds / 1e9;
      if (c.metric == FidelityMetric::kTimeUs) out.simulated = seconds * 1e6;
      if (c.metric == FidelityMetric::kAlgBwGbps) out.simulated = algbw;
      if (c.metric == FidelityMetric::kBusBwGbps) out.simulated = algbw * factor;
      break;
    }
    case FidelityKind::kHost:
      out.simulated = simulated_host_us(c.host->profile, c.host->profile.calibration, c.host->query);
      break;
    case FidelityKind::kTraining: {
      const core::Scenario& s = *c.scenario;
      const QuietRunResult run = run_quietly(s, nullptr);
      if (run.status != core::RunStatus::kOk) {
        out.failure = std::string("simulated run ended with status ") + core::run_status_name(run.status);
        break;
      }
      // Per optimizer step (grad_accum micro-batches), as summarize reports it.
      const double step_s = static_cast<double>(run.stats.steady_step_time_ns) * 1e-9;
      if (!(step_s > 0)) {
        out.failure = "simulated run has no steady iterations";
        break;
      }
      switch (c.metric) {
        case FidelityMetric::kStepTimeS:
          out.simulated = step_s;
          break;
        case FidelityMetric::kTokensPerSPerGpu:
          out.simulated =
              static_cast<double>(s.training.micro_batch * s.training.seq_len * s.training.grad_accum) / step_s;
          break;
        case FidelityMetric::kSamplesPerS:
          out.simulated = run.stats.samples_per_second;
          break;
        case FidelityMetric::kTflopsPerGpu:
          out.simulated = run.stats.tflops_per_gpu;
          break;
        case FidelityMetric::kMfu: {
          const auto peak = core::peak_dense_flops_per_s(s.cluster.hardware, s.training.dtype);
          if (!peak || *peak <= 0) {
            out.failure = "the hardware profile states no dense peak for the training dtype";
          } else {
            out.simulated = run.stats.tflops_per_gpu * 1e12 / *peak;
          }
          break;
        }
        default:
          break;
      }
      break;
    }
  }
  if (out.simulated && !std::isfinite(*out.simulated)) {
    out.simulated.reset();
    out.failure = "the model gave a non-finite figure";
  }
  return out;
}

FidelityVerdict fidelity_verdict(const FidelityCase& c, const FidelityOutcome& outcome) {
  const bool inside =
      outcome.simulated && std::fabs(*outcome.simulated - c.real) / c.real <= c.tolerance;
  if (inside) return c.known_gap ? FidelityVerdict::kGapClosed : FidelityVerdict::kInside;
  return c.known_gap ? FidelityVerdict::kKnownGap : FidelityVerdict::kOutside;
}

const char* fidelity_verdict_name(FidelityVerdict verdict) {
  switch (verdict) {
    case FidelityVerdict::kInside:
      return "inside";
    case FidelityVerdict::kKnownGap:
      return "known_gap";
    case FidelityVerdict::kOutside:
      return "outside";
    case FidelityVerdict::kGapClosed:
      return "known_gap_closed";
  }
  return "?";
}

bool fidelity_verdict_passes(FidelityVerdict verdict) {
  return verdict == FidelityVerdict::kInside || verdict == FidelityVerdict::kKnownGap;
}

}  // namespace prefetchlab::apps
