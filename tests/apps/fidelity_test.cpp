// `prefetchlab fidelity` (apps/fidelity_command.hpp): the bundled corpus of public measurements
// passes (every case inside its band or a still-open known gap) and its table in docs/fidelity.md
// is current; malformed case files stop with exit 2 naming file, line and key; a case outside its
// band without known_gap, and a known gap that has closed, fail with exit 5; the JSON is the same
// bytes whatever the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/cli_runner.hpp"

namespace {

using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;
namespace fs = std::filesystem;

const fs::path kSourceDir(PREFETCHLAB_SOURCE_DIR);

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// A valid collective case; `replace` swaps whole lines (1-based), `append` adds lines.
std::string collective_case(const std::map<int, std::string>& replace = {}, const std::string& append = "") {
  const std::vector<std::string> lines{
      "source: \"https://github.com/NVIDIA/nccl/issues/1530\"",  // 1
      "kind: collective",                                        // 2
      "collective:",                                             // 3
      "  hardware: rtx4090-8x-pcie4-nop2p",                      // 4
      "  op: all_reduce",                                        // 5
      "  ranks: 8",                                              // 6
      "  bytes: 8",                                              // 7
      "  dtype: float",                                          // 8
      "metric: time_us",                                         // 9
      "real: 42.14",                                             // 10
      "unit: us",                                                // 11
      "tolerance: 0.25",                                         // 12
  };
  std::string text;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto it = replace.find(static_cast<int>(i + 1));
    text += (it == replace.end() ? lines[i] : it->second) + "\n";
  }
  return text + append;
}

// A valid training case with an inline scenario (tiny-llama: fast).
std::string training_case(const std::map<int, std::string>& replace = {}, const std::string& append = "") {
  const std::vector<std::string> lines{
      "source: \"https://example.org/a-paper\"",  // 1
      "kind: training",                           // 2
      "scenario:",                                // 3
      "  model: tiny-llama",                      // 4
      "  training:",                              // 5
      "    micro_batch: 2",                       // 6
      "    seq_len: 256",                         // 7
      "    iterations: 4",                        // 8
      "  cluster:",                               // 9
      "    hardware: h100-sxm-8x",                // 10
      "    gpus_per_node: 2",                     // 11
      "metric: step_time_s",                      // 12
      "real: 1.0",                                // 13: far from the model: an open known gap
      "unit: s",                                  // 14
      "tolerance: 0.25",                          // 15
      "known_gap: \"a test case\"",               // 16
  };
  std::string text;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto it = replace.find(static_cast<int>(i + 1));
    text += (it == replace.end() ? lines[i] : it->second) + "\n";
  }
  return text + append;
}

std::string host_case() {
  return "source: \"https://github.com/KuangjuX/NVSHMEM-Tutorial/issues/23\"\n"
         "kind: host\n"
         "host:\n"
         "  hardware: h100-sxm-8x\n"
         "  call: all_gather\n"
         "  ranks: 8\n"
         "  bytes_per_rank: 4KiB\n"
         "  dtype: bfloat16\n"
         "  timing: synchronized\n"
         "metric: host_us_per_call\n"
         "real: 100000\n"
         "unit: us\n"
         "tolerance: 0.25\n"
         "known_gap: \"host cost per torch call too low\"\n";
}

double simulated_of(const fs::path& json, const std::string& name) {
  const auto doc = nlohmann::json::parse(read_text(json));
  for (const auto& c : doc["cases"]) {
    if (c["case"] == name) return c["simulated"].get<double>();
  }
  ADD_FAILURE() << name << " not in " << json;
  return 0;
}

std::string fixed(double v) {
  std::ostringstream out;
  out.precision(17);
  out << v;
  return out.str();
}

}  // namespace

// CI runs the corpus: every bundled case inside its band or a still-open known gap, and the table
// docs/fidelity.md shows is this run's (PREFETCHLAB_UPDATE_DOCS=1 rewrites it).
TEST(Fidelity, BundledCorpusPassesAndDocsTableIsCurrent) {
  TempDir dir("fidelity-corpus");
  const auto md = dir.path() / "table.md";
  const auto json = dir.path() / "table.json";
  const auto result = run_cli("fidelity --markdown " + md.string() + " --json " + json.string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("| collective |"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("| training |"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("| host |"), std::string::npos) << result.output;

  // The corpus issues 19 and 43 ask for: at least 25 training cases from at least 12 sources,
  // each with a source a reader can check.
  const auto doc = nlohmann::json::parse(read_text(json));
  EXPECT_TRUE(doc["passed"].get<bool>());
  int training = 0;
  std::set<std::string> training_sources;
  for (const auto& c : doc["cases"]) {
    training += c["kind"] == "training" ? 1 : 0;
    if (c["kind"] == "training") training_sources.insert(c["source"].get<std::string>());
    EXPECT_FALSE(c["source"].get<std::string>().empty());
    EXPECT_EQ(c["source"].get<std::string>().find("/work"), std::string::npos);
  }
  EXPECT_GE(doc["cases"].size(), 25u);
  EXPECT_GE(training, 25);
  EXPECT_GE(training_sources.size(), 12u);

  const std::string begin = "<!-- fidelity:begin -->\n";
  const std::string end = "<!-- fidelity:end -->";
  const fs::path page = kSourceDir / "docs/fidelity.md";
  std::string text = read_text(page);
  const auto b = text.find(begin);
  const auto e = text.find(end);
  ASSERT_NE(b, std::string::npos) << "docs/fidelity.md lacks the fidelity table markers";
  ASSERT_NE(e, std::string::npos);
  const std::string current = text.substr(b + begin.size(), e - b - begin.size());
  const std::string fresh = read_text(md);
  if (current != fresh && std::getenv("PREFETCHLAB_UPDATE_DOCS")) {
    text.replace(b + begin.size(), e - b - begin.size(), fresh);
    std::ofstream(page) << text;
    return;
  }
  EXPECT_EQ(current, fresh) << "docs/fidelity.md's fidelity table is stale: rerun with PREFETCHLAB_UPDATE_DOCS=1";

  // run, compare and tune read the corpus's errors from bench/fidelity/results.json (the error
  // band of every answer, apps/fidelity_band.hpp): it is this run's JSON.
  const fs::path results = kSourceDir / "bench/fidelity/results.json";
  if (read_text(results) != read_text(json) && std::getenv("PREFETCHLAB_UPDATE_DOCS")) {
    fs::copy_file(json, results, fs::copy_options::overwrite_existing);
    return;
  }
  EXPECT_EQ(read_text(results), read_text(json))
      << "bench/fidelity/results.json is stale: rerun with PREFETCHLAB_UPDATE_DOCS=1";
}

// Open gap passes; closed gap fails until the marker goes; outside without a marker fails.
TEST(Fidelity, KnownGapRuleIsStrict) {
  TempDir dir("fidelity-gap");
  const auto json = dir.path() / "out.json";
  const auto cases = dir.path() / "cases";
  fs::create_directories(cases);
  const auto file = cases / "c.yaml";
  // real far from anything the model says (1 us for 8 B over 8 PCIe GPUs): an open known gap.
  std::ofstream(file) << collective_case({{10, "real: 1000"}}, "known_gap: \"a test gap\"\n");
  auto r = run_cli("fidelity " + cases.string() + " --json " + json.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("known gap"), std::string::npos) << r.output;
  const double simulated = simulated_of(json, "c");

  // The model now lands inside the band: the marker is stale, and the command says so.
  std::ofstream(file) << collective_case({{10, "real: " + fixed(simulated)}}, "known_gap: \"a test gap\"\n");
  r = run_cli("fidelity " + cases.string());
  EXPECT_EQ(r.exit_code, 5) << r.output;
  EXPECT_NE(r.output.find("known gap closed: remove known_gap from " + file.string()), std::string::npos)
      << r.output;

  // Without the marker it passes.
  std::ofstream(file) << collective_case({{10, "real: " + fixed(simulated)}});
  r = run_cli("fidelity " + cases.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;

  // 50% off with a 25% band and no marker: a failed expectation.
  std::ofstream(file) << collective_case({{10, "real: " + fixed(simulated * 1.5)}});
  r = run_cli("fidelity " + cases.string());
  EXPECT_EQ(r.exit_code, 5) << r.output;
  EXPECT_NE(r.output.find("outside its band: " + file.string()), std::string::npos) << r.output;
}

// A host case's `timing`: a synchronised loop pays host and device in turn, a pipelined one the
// larger of the two (the host issues the next call while the device runs the last).
TEST(Fidelity, HostTimingSynchronizedAddsPipelinedOverlaps) {
  TempDir dir("fidelity-timing");
  const auto json = dir.path() / "out.json";
  const auto cases = dir.path() / "cases";
  fs::create_directories(cases);
  const auto host_case_at = [](const std::string& bytes, const std::string& timing) {
    return "source: \"https://example.org\"\nkind: host\nhost:\n  hardware: h100-sxm-8x\n  call: all_gather\n"
           "  ranks: 8\n  bytes_per_rank: " + bytes + "\n  dtype: bfloat16\n  timing: " + timing + "\n"
           "metric: host_us_per_call\nreal: 100\nunit: us\ntolerance: 0.25\n";
  };
  std::ofstream(cases / "small-sync.yaml") << host_case_at("4KiB", "synchronized");
  std::ofstream(cases / "small-pipe.yaml") << host_case_at("4KiB", "pipelined");
  std::ofstream(cases / "small-host.yaml") << host_case_at("4KiB", "host_only");
  std::ofstream(cases / "big-sync.yaml") << host_case_at("256MiB", "synchronized");
  std::ofstream(cases / "big-pipe.yaml") << host_case_at("256MiB", "pipelined");
  // Every real figure here is a placeholder, so cases fall outside their band (exit 5); the
  // simulated figures are what is checked.
  const auto r = run_cli("fidelity " + cases.string() + " --json " + json.string());
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 5) << r.output;
  const double host = simulated_of(json, "small-host");
  EXPECT_GT(host, 0);
  // 4 KiB: the collective is shorter than the host's call, so the pipelined loop is host-bound.
  EXPECT_NEAR(simulated_of(json, "small-pipe"), host, 1e-6 * host);
  EXPECT_GT(simulated_of(json, "small-sync"), host);
  // 256 MiB per rank: the device is the bound; synchronised adds the host's call to it.
  const double big_device = simulated_of(json, "big-pipe");
  EXPECT_GT(big_device, 10 * host);
  EXPECT_NEAR(simulated_of(json, "big-sync"), big_device + host, 1e-3 * big_device);
}

// Out of sample: the host level is refitted without each case's source. Source A measures 1.2x
// the model's host cost, source B 1/1.2 of it: together they fit the default (the geometric
// mean); without A the fit is B's level, and A is predicted from it (1/1.44 of its figure);
// without B, A's level (1.44x B's figure).
TEST(Fidelity, OutOfSampleRefitsEachCorpusConstantWithoutTheCasesSource) {
  TempDir dir("fidelity-oos");
  const auto cases = dir.path() / "cases";
  fs::create_directories(cases);
  const auto host_case_from = [](const std::string& source, double real) {
    return "source: \"" + source + "\"\nkind: host\nhost:\n  hardware: h100-sxm-8x\n  call: all_gather\n"
           "  ranks: 8\n  bytes_per_rank: 4KiB\n  dtype: bfloat16\n  timing: host_only\n"
           "metric: host_us_per_call\nreal: " + fixed(real) + "\nunit: us\ntolerance: 0.25\n";
  };
  std::ofstream(cases / "probe.yaml") << host_case_from("https://example.org/probe", 100);
  const auto probe = dir.path() / "probe.json";
  ASSERT_EQ(run_cli("fidelity " + cases.string() + " --json " + probe.string()).exit_code, 0);
  const double model_us = simulated_of(probe, "probe");
  fs::remove(cases / "probe.yaml");

  std::ofstream(cases / "a.yaml") << host_case_from("https://example.org/a", 1.2 * model_us);
  std::ofstream(cases / "b.yaml") << host_case_from("https://example.org/b", model_us / 1.2);
  // A case from a source a fixed constant rests on stays in sample, and says so.
  std::ofstream(cases / "c.yaml") << collective_case();
  const auto json = dir.path() / "oos.json";
  const auto r = run_cli("fidelity " + cases.string() + " --json " + json.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto doc = nlohmann::json::parse(read_text(json));
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& c : doc["cases"]) by_name[c["case"].get<std::string>()] = c;
  // In sample: the shipped default.
  EXPECT_NEAR(by_name["a"]["error"].get<double>(), 1 / 1.2 - 1, 1e-3);
  EXPECT_NEAR(by_name["b"]["error"].get<double>(), 0.2, 1e-3);
  // Out of sample: A at B's level, B at A's.
  EXPECT_NEAR(by_name["a"]["out_of_sample"]["error"].get<double>(), 1 / 1.44 - 1, 2e-3);
  EXPECT_NEAR(by_name["b"]["out_of_sample"]["error"].get<double>(), 0.44, 2e-3);
  EXPECT_EQ(by_name["a"]["out_of_sample"]["in_sample_because"], "");
  EXPECT_NE(by_name["c"]["out_of_sample"]["in_sample_because"].get<std::string>().find("SHM extra hop"),
            std::string::npos);
  // The constants table: the host level's joint fit, the transport latency with nothing to fit.
  const auto& host_level = doc["fitted_constants"][0];
  EXPECT_EQ(host_level["data"], "corpus");
  EXPECT_EQ(host_level["cases"], 2);
  EXPECT_NEAR(host_level["all_sources_fit"].get<double>(), 1.0, 2e-3);
  EXPECT_EQ(doc["fitted_constants"][1]["cases"], 0);
  // The kinds table carries the out-of-sample spread and the lean (a host cost below the
  // measurement is too fast: B, out of sample).
  for (const auto& k : doc["kinds"]) {
    if (k["kind"] != "host") continue;
    EXPECT_NEAR(k["out_of_sample"]["median_abs_error"].get<double>(), 0.5 * (0.44 + (1 - 1 / 1.44)), 2e-3);
    EXPECT_NEAR(k["out_of_sample"]["share_too_fast"].get<double>(), 0.5, 1e-9);
  }
}

// The same corpus gives the same bytes, whatever the thread count; --category filters. The
// training case also exercises `set:` over a bundled scenario.
TEST(Fidelity, JsonIsDeterministicAndCategoryFilters) {
  TempDir dir("fidelity-det");
  const auto cases = dir.path() / "cases";
  fs::create_directories(cases);
  std::ofstream(cases / "a-collective.yaml") << collective_case({{10, "real: 1000"}}, "known_gap: \"-\"\n");
  std::ofstream(cases / "b-host.yaml") << host_case();
  std::ofstream(cases / "c-training.yaml") << training_case();
  std::ofstream(cases / "d-training-bundled.yaml")
      << training_case({{3, "scenario: tiny-llama-2x-h100"},
                        {4, "set:"},
                        {5, "  training.iterations: 4"},
                        {6, "  training.micro_batch: 1"},
                        {7, "#"},
                        {8, "#"},
                        {9, "#"},
                        {10, "#"},
                        {11, "#"}});
  const auto one = dir.path() / "one.json";
  const auto two = dir.path() / "two.json";
  const auto r1 = run_cli("fidelity " + cases.string() + " -j 1 --json " + one.string());
  const auto r2 = run_cli("fidelity " + cases.string() + " -j 3 --json " + two.string());
  ASSERT_EQ(r1.exit_code, 0) << r1.output;
  ASSERT_EQ(r2.exit_code, 0) << r2.output;
  EXPECT_EQ(read_text(one), read_text(two));
  EXPECT_EQ(r1.output, r2.output);
  const auto doc = nlohmann::json::parse(read_text(one));
  ASSERT_EQ(doc["cases"].size(), 4u);
  // set: took effect: micro_batch 1 halves the tokens of an iteration of the bundled scenario.
  EXPECT_NE(doc["cases"][3]["simulated"], doc["cases"][2]["simulated"]);

  const auto only = dir.path() / "host.json";
  const auto r3 = run_cli("fidelity " + cases.string() + " --category host --json " + only.string());
  ASSERT_EQ(r3.exit_code, 0) << r3.output;
  const auto host_doc = nlohmann::json::parse(read_text(only));
  ASSERT_EQ(host_doc["cases"].size(), 1u);
  EXPECT_EQ(host_doc["cases"][0]["kind"], "host");
}

struct BadCase {
  std::string name;
  std::string text;    // written as cases/bad.yaml
  std::string where;   // "bad.yaml:LINE"
  std::string key;     // "key '<key>'"
  std::string suggestion;
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

class FidelityBadInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(FidelityBadInput, ExitsTwoNamingFileLineAndKey) {
  const BadCase& c = GetParam();
  TempDir dir("fidelity-bad");
  const auto cases = dir.path() / "cases";
  fs::create_directories(cases);
  std::ofstream(cases / "bad.yaml") << c.text;
  const auto r = run_cli("fidelity " + cases.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(c.where), std::string::npos) << r.output;
  if (!c.key.empty()) {
    EXPECT_NE(r.output.find("key '" + c.key + "'"), std::string::npos) << r.output;
  }
  if (!c.suggestion.empty()) {
    EXPECT_NE(r.output.find("did you mean '" + c.suggestion + "'"), std::string::npos) << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, FidelityBadInput,
    ::testing::Values(
        BadCase{"unknown_key", collective_case({{12, "tolerence: 0.25"}}), "bad.yaml:12", "tolerence", "tolerance"},
        BadCase{"missing_source", collective_case({{1, "# no source"}}), "bad.yaml:1", "source", ""},
        BadCase{"local_source", collective_case({{1, "source: /work/notes.md"}}), "bad.yaml:1", "source", ""},
        BadCase{"unknown_kind", collective_case({{2, "kind: colective"}}), "bad.yaml:2", "kind", "collective"},
        BadCase{"wrong_unit", collective_case({{11, "unit: ms"}}), "bad.yaml:11", "unit", ""},
        BadCase{"metric_of_another_kind", collective_case({{9, "metric: step_time_s"}}), "bad.yaml:9", "metric", ""},
        BadCase{"band_too_wide", collective_case({{12, "tolerance: 0.5"}}), "bad.yaml:12", "tolerance", ""},
        BadCase{"real_not_a_number", collective_case({{10, "real: fast"}}), "bad.yaml:10", "real", ""},
        BadCase{"empty_known_gap", collective_case({}, "known_gap: \"\"\n"), "bad.yaml:13", "known_gap", ""},
        BadCase{"collective_key_misspelt", collective_case({{6, "  rank: 8"}}), "bad.yaml:6", "collective.rank",
                "ranks"},
        BadCase{"collective_unknown_op", collective_case({{5, "  op: all_to_all"}}), "bad.yaml:5", "collective.op",
                ""},
        BadCase{"collective_unknown_hardware", collective_case({{4, "  hardware: rtx4090-8x"}}), "bad.yaml:4",
                "collective.hardware", ""},
        BadCase{"collective_too_many_ranks", collective_case({{6, "  ranks: 16"}}), "bad.yaml:6",
                "collective.ranks", ""},
        BadCase{"collective_partial_elements",
                collective_case({{5, "  op: all_gather"}, {7, "  bytes: 100"}}), "bad.yaml:7", "collective.bytes",
                ""},
        BadCase{"collective_unknown_dtype", collective_case({{8, "  dtype: float33"}}), "bad.yaml:8",
                "collective.dtype", ""},
        BadCase{"nvls_on_pcie", collective_case({{8, "  dtype: float\n  algorithm: nvls"}}), "bad.yaml:9", "collective.algorithm",
                ""},
        BadCase{"unknown_algorithm", collective_case({{8, "  dtype: float\n  algorithm: butterfly"}}), "bad.yaml:9",
                "collective.algorithm", ""},
        BadCase{"nccl_proto_unknown", collective_case({{8, "  dtype: float\n  nccl_proto: Simple,LL256"}}), "bad.yaml:9",
                "collective.nccl_proto", ""},
        BadCase{"nccl_algo_leaves_nothing", collective_case({{8, "  dtype: float\n  nccl_algo: NVLS"}}), "bad.yaml:9",
                "collective.nccl_algo", ""},
        BadCase{"scenario_in_collective_case", collective_case({}, "scenario: default\n"), "bad.yaml:13",
                "scenario", ""},
        BadCase{"inline_scenario_key_misspelt", training_case({{7, "    seq_lne: 256"}}), "bad.yaml:7",
                "scenario.training.seq_lne", "seq_len"},
        BadCase{"inline_scenario_unknown_model", training_case({{4, "  model: tiny-lama"}}), "bad.yaml:4",
                "scenario.model", "tiny-llama"},
        BadCase{"set_value_out_of_range", training_case({}, "set:\n  training.micro_batch: -1\n"), "bad.yaml:18",
                "scenario.training.micro_batch", ""},
        BadCase{"set_unknown_key", training_case({}, "set:\n  training.micro_bach: 2\n"), "bad.yaml:18",
                "scenario.training.micro_bach", "micro_batch"},
        BadCase{"unknown_bundled_scenario", training_case({{3, "scenario: defualt"}, {4, "#"}, {5, "#"}, {6, "#"},
                                                           {7, "#"}, {8, "#"}, {9, "#"}, {10, "#"}, {11, "#"}}),
                "bad.yaml:3", "scenario", "default"},
        BadCase{"training_metric_unit", training_case({{14, "unit: ms"}}), "bad.yaml:14", "unit", ""},
        BadCase{"host_unknown_call",
                "source: \"https://example.org\"\nkind: host\nhost:\n  hardware: h100-sxm-8x\n  call: broadcast\n"
                "  ranks: 8\n  bytes_per_rank: 4KiB\n  dtype: bfloat16\n  timing: synchronized\n"
                "metric: host_us_per_call\nreal: 100\nunit: us\ntolerance: 0.25\n",
                "bad.yaml:5", "host.call", ""},
        BadCase{"host_unknown_timing",
                "source: \"https://example.org\"\nkind: host\nhost:\n  hardware: h100-sxm-8x\n  call: all_gather\n"
                "  ranks: 8\n  bytes_per_rank: 4KiB\n  dtype: bfloat16\n  timing: overlapped\n"
                "metric: host_us_per_call\nreal: 100\nunit: us\ntolerance: 0.25\n",
                "bad.yaml:9", "host.timing", ""},
        BadCase{"host_replaced_key",
                "source: \"https://example.org\"\nkind: host\nhost:\n  hardware: h100-sxm-8x\n  call: all_gather\n"
                "  ranks: 8\n  bytes_per_rank: 4KiB\n  dtype: bfloat16\n  includes_device_time: true\n"
                "metric: host_us_per_call\nreal: 100\nunit: us\ntolerance: 0.25\n",
                "bad.yaml:9", "host.includes_device_time", ""},
        BadCase{"host_barrier_not_synchronized",
                "source: \"https://example.org\"\nkind: host\nhost:\n  hardware: h100-sxm-8x\n  call: all_reduce\n"
                "  ranks: 8\n  bytes_per_rank: 4KiB\n  dtype: float\n  timing: pipelined\n  barrier_per_call: true\n"
                "metric: host_us_per_call\nreal: 100\nunit: us\ntolerance: 0.25\n",
                "bad.yaml:10", "host.barrier_per_call", ""},
        BadCase{"yaml_syntax", collective_case({{6, "  ranks: [8"}}), "bad.yaml:", "", ""}),
    [](const ::testing::TestParamInfo<BadCase>& param_info) { return param_info.param.name; });

TEST(Fidelity, MissingFolderIsBadInput) {
  const auto r = run_cli("fidelity /nonexistent/fidelity-cases");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("CASES_DIR"), std::string::npos) << r.output;
}
