#include "fidelity_command.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "metric_text.hpp"
#include "command_context.hpp"
#include "core/input/input_error.hpp"
#include "core/io/json_file.hpp"
#include "core/metrics/metrics.hpp"
#include "fidelity_band.hpp"
#include "fidelity_case.hpp"
#include "fidelity_cross_validation.hpp"
#include "parallel_runner.hpp"

namespace prefetchlab::apps {
namespace {

struct FidelityOptions {
  std::string cases_dir;
  std::string category;
  std::string json_path;
  std::string markdown_path;
  unsigned jobs = 0;
};

struct CaseResult {
  FidelityCase c;
  FidelityOutcome outcome;
  FidelityVerdict verdict = FidelityVerdict::kInside;
  CaseOutOfSample out_of_sample;  // with the constants fitted without this case's source
  std::optional<double> error() const { return error_of(outcome); }
  std::optional<double> out_of_sample_error() const { return error_of(out_of_sample.outcome); }
  std::optional<double> error_of(const FidelityOutcome& o) const {
    if (!o.simulated) return std::nullopt;
    return (*o.simulated - c.real) / c.real;
  }
};

// Median and largest absolute error, and the share of cases the simulator makes too fast (the
// lean: a shorter time or a higher rate than measured).
struct ErrorSpread {
  int with_figure = 0;
  double median_abs = 0;
  double max_abs = 0;
  double share_too_fast = 0;
};

double speed_error(FidelityMetric metric, double error) { return speed_signed_error(fidelity_metric_name(metric), error); }

ErrorSpread spread_of(const std::vector<double>& speed_errors) {
  ErrorSpread s;
  std::vector<double> errors;
  int above = 0;
  for (const double e : speed_errors) {
    errors.push_back(std::fabs(e));
    above += e > 0 ? 1 : 0;
  }
  s.with_figure = static_cast<int>(errors.size());
  if (errors.empty()) return s;
  s.median_abs = core::median(errors);
  s.max_abs = *std::max_element(errors.begin(), errors.end());
  s.share_too_fast = static_cast<double>(above) / static_cast<double>(errors.size());
  return s;
}

struct KindSummary {
  FidelityKind kind = FidelityKind::kCollective;
  int cases = 0;
  ErrorSpread in_sample;
  ErrorSpread out_of_sample;
  int inside = 0;
  int known_gaps = 0;
  int failing = 0;
};

std::string percent(double fraction, bool sign) { return fmt(sign ? "%+.1f%%" : "%.1f%%", 100.0 * fraction); }

std::string value_text(double value, FidelityMetric metric, const char* format) {
  return fmt(format, value) + " " + fidelity_metric_unit(metric);
}

const char* verdict_text(FidelityVerdict verdict) {
  switch (verdict) {
    case FidelityVerdict::kInside:
      return "inside";
    case FidelityVerdict::kKnownGap:
      return "known gap";
    case FidelityVerdict::kOutside:
      return "OUTSIDE";
    case FidelityVerdict::kGapClosed:
      return "GAP CLOSED";
  }
  return "?";
}

std::vector<KindSummary> summarize(const std::vector<CaseResult>& results) {
  std::vector<KindSummary> out;
  for (const auto kind : {FidelityKind::kCollective, FidelityKind::kTraining, FidelityKind::kHost}) {
    KindSummary s;
    s.kind = kind;
    std::vector<double> errors, oos_errors;
    for (const auto& r : results) {
      if (r.c.kind != kind) continue;
      ++s.cases;
      if (const auto e = r.error()) errors.push_back(speed_error(r.c.metric, *e));
      if (const auto e = r.out_of_sample_error()) oos_errors.push_back(speed_error(r.c.metric, *e));
      if (r.verdict == FidelityVerdict::kInside) ++s.inside;
      if (r.verdict == FidelityVerdict::kKnownGap) ++s.known_gaps;
      if (!fidelity_verdict_passes(r.verdict)) ++s.failing;
    }
    if (s.cases == 0) continue;
    s.in_sample = spread_of(errors);
    s.out_of_sample = spread_of(oos_errors);
    out.push_back(s);
  }
  return out;
}

// The tables docs/fidelity.md embeds: per case, per kind (in and out of sample), the fitted
// constants, then the open known gaps.
std::string markdown(const std::vector<CaseResult>& results, const std::vector<KindSummary>& kinds,
                     const CrossValidation& cv) {
  std::ostringstream out;
  out << "| case | kind | source | metric | real | simulated | error | out of sample | band | result |\n"
         "|---|---|---|---|---:|---:|---:|---:|---:|---|\n";
  for (const auto& r : results) {
    out << "| " << r.c.name << " | " << fidelity_kind_name(r.c.kind) << " | " << r.c.source << " | "
        << fidelity_metric_name(r.c.metric) << " | " << value_text(r.c.real, r.c.metric, "%.6g") << " | ";
    if (r.outcome.simulated) {
      out << value_text(*r.outcome.simulated, r.c.metric, "%.4g") << " | " << percent(*r.error(), true);
    } else {
      out << "- | -";
    }
    out << " | " << (r.out_of_sample_error() ? percent(*r.out_of_sample_error(), true) : "-")
        << (r.out_of_sample.in_sample_because.empty() ? "" : " †");
    out << " | ±" << fmt("%.0f", 100.0 * r.c.tolerance) << "% | " << verdict_text(r.verdict);
    if (!r.outcome.simulated) out << " (" << r.outcome.failure << ")";
    out << " |\n";
  }
  out << "\n| kind | cases | median abs error | max abs error | out of sample: median | max | too fast "
         "| inside band | known gaps | failing |\n"
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& k : kinds) {
    const auto cell = [](const ErrorSpread& e, double v) { return e.with_figure ? percent(v, false) : "-"; };
    out << "| " << fidelity_kind_name(k.kind) << " | " << k.cases << " | " << cell(k.in_sample, k.in_sample.median_abs)
        << " | " << cell(k.in_sample, k.in_sample.max_abs) << " | "
        << cell(k.out_of_sample, k.out_of_sample.median_abs) << " | " << cell(k.out_of_sample, k.out_of_sample.max_abs)
        << " | " << cell(k.out_of_sample, k.out_of_sample.share_too_fast) << " | " << k.inside << " | "
        << k.known_gaps << " | " << k.failing << " |\n";
  }
  bool marked = false;
  for (const auto& r : results) {
    if (r.out_of_sample.in_sample_because.empty()) continue;
    if (!marked) out << "\n† still in sample for a constant:\n\n";
    marked = true;
    out << "- `" << r.c.name << "`: " << r.out_of_sample.in_sample_because << "\n";
  }
  out << "\nFitted constants (out of sample: each corpus constant refitted without each source in turn):\n\n"
         "| constant | default | data | fitted to | refit |\n|---|---|---|---|---|\n";
  for (const FittedConstant& k : fitted_constants()) {
    out << "| " << k.key << " | " << k.default_value << " | " << fitted_data_name(k.data) << " | " << k.fitted_to << " | ";
    const auto fit = std::find_if(cv.fits.begin(), cv.fits.end(), [&](const ConstantFit& f) { return f.constant == &k; });
    if (fit == cv.fits.end()) {
      out << "fixed";
    } else if (fit->cases == 0) {
      out << "no case to fit";
    } else {
      out << fit->cases << " cases, " << fit->sources << " sources: all-source fit " << fmt("%.3f", fit->all_sources)
          << " x default; without one source";
      for (const auto& [source, scale] : fit->without) {
        out << (&source == &fit->without.front().first ? " " : ", ")
            << (scale ? fmt("%.3f", *scale) : std::string("unfittable"));
      }
    }
    out << " |\n";
  }
  bool header = false;
  for (const auto& r : results) {
    if (!r.c.known_gap) continue;
    if (!header) out << "\nKnown gaps (each case marked `known_gap`):\n\n";
    header = true;
    out << "- `" << r.c.name << "`: " << *r.c.known_gap << "\n";
  }
  return out.str();
}

nlohmann::ordered_json spread_json(const ErrorSpread& e) {
  nlohmann::ordered_json j;
  j["with_figure"] = e.with_figure;
  j["median_abs_error"] = e.median_abs;
  j["max_abs_error"] = e.max_abs;
  j["share_too_fast"] = e.share_too_fast;
  return j;
}

nlohmann::ordered_json to_json(const std::vector<CaseResult>& results, const std::vector<KindSummary>& kinds,
                               const CrossValidation& cv, bool passed) {
  nlohmann::ordered_json doc;
  doc["passed"] = passed;
  nlohmann::ordered_json cases = nlohmann::ordered_json::array();
  const auto maybe = [](const std::optional<double>& v) { return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(); };
  for (const auto& r : results) {
    nlohmann::ordered_json c;
    c["case"] = r.c.name;
    c["file"] = r.c.file.filename().string();
    c["kind"] = fidelity_kind_name(r.c.kind);
    c["source"] = r.c.source;
    c["metric"] = fidelity_metric_name(r.c.metric);
    c["unit"] = fidelity_metric_unit(r.c.metric);
    c["real"] = r.c.real;
    c["simulated"] = maybe(r.outcome.simulated);
    c["error"] = maybe(r.error());
    c["tolerance"] = r.c.tolerance;
    c["verdict"] = fidelity_verdict_name(r.verdict);
    c["known_gap"] = r.c.known_gap ? nlohmann::ordered_json(*r.c.known_gap) : nlohmann::ordered_json();
    if (!r.outcome.simulated) c["failure"] = r.outcome.failure;
    if (r.c.scenario) {  // what `run` matches a scenario against (apps/fidelity_band.hpp)
      c["gpu"] = r.c.scenario->cluster.hardware.gpu.model;
      c["ranks"] = r.c.scenario->cluster.world_size();
    }
    nlohmann::ordered_json oos;
    oos["simulated"] = maybe(r.out_of_sample.outcome.simulated);
    oos["error"] = maybe(r.out_of_sample_error());
    oos["in_sample_because"] = r.out_of_sample.in_sample_because;
    c["out_of_sample"] = std::move(oos);
    cases.push_back(std::move(c));
  }
  doc["cases"] = std::move(cases);
  nlohmann::ordered_json per_kind = nlohmann::ordered_json::array();
  for (const auto& k : kinds) {
    nlohmann::ordered_json j;
    j["kind"] = fidelity_kind_name(k.kind);
    j["cases"] = k.cases;
    j["with_figure"] = k.in_sample.with_figure;
    j["median_abs_error"] = k.in_sample.median_abs;
    j["max_abs_error"] = k.in_sample.max_abs;
    j["share_too_fast"] = k.in_sample.share_too_fast;
    j["out_of_sample"] = spread_json(k.out_of_sample);
    j["inside"] = k.inside;
    j["known_gaps"] = k.known_gaps;
    j["failing"] = k.failing;
    per_kind.push_back(std::move(j));
  }
  doc["kinds"] = std::move(per_kind);
  nlohmann::ordered_json constants = nlohmann::ordered_json::array();
  for (const FittedConstant& k : fitted_constants()) {
    nlohmann::ordered_json j;
    j["constant"] = k.key;
    j["default"] = k.default_value;
    j["data"] = fitted_data_name(k.data);
    j["fitted_to"] = k.fitted_to;
    for (const ConstantFit& fit : cv.fits) {
      if (fit.constant != &k) continue;
      j["cases"] = fit.cases;
      j["sources"] = fit.sources;
      j["all_sources_fit"] = fit.all_sources;
      nlohmann::ordered_json without = nlohmann::ordered_json::object();
      for (const auto& [source, scale] : fit.without) without[source] = maybe(scale);
      j["without_source"] = std::move(without);
    }
    constants.push_back(std::move(j));
  }
  doc["fitted_constants"] = std::move(constants);
  return doc;
}

int run_fidelity(const FidelityOptions& o) {
  const std::filesystem::path root = data_root();
  const std::filesystem::path dir = o.cases_dir.empty() ? root / "bench" / "fidelity" : std::filesystem::path(o.cases_dir);
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw core::InputError({"<command line>", 0}, "CASES_DIR", "'" + dir.string() + "' is not a folder",
                           "a folder of fidelity case files (*.yaml), e.g. bench/fidelity");
  }
  std::optional<FidelityKind> only;
  if (!o.category.empty()) {
    only = parse_fidelity_kind(o.category);
    if (!only) {
      throw core::InputError({"<command line>", 0}, "--category", "is '" + o.category + "'",
                             "collective, training or host");
    }
  }
  // Cases are the *.yaml files directly in the folder (sub-folders hold what they refer to:
  // hardware profiles, models, scenarios), in file-name order.
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".yaml") files.push_back(entry.path());
  }
  if (ec) throw std::runtime_error("cannot list " + dir.string() + ": " + ec.message());
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    throw core::InputError({dir.string(), 0}, "CASES_DIR", "holds no case files", "one or more *.yaml fidelity cases");
  }

  FidelityData data{bundled_data(), root / "scenarios"};
  // Every case is read (and so checked) first, whatever --category selects.
  std::vector<FidelityCase> loaded;
  for (const auto& file : files) loaded.push_back(load_fidelity_case(file, data));
  std::vector<std::size_t> selected;
  for (std::size_t i = 0; i < loaded.size(); ++i) {
    if (!only || loaded[i].kind == *only) selected.push_back(i);
  }
  std::vector<FidelityOutcome> outcomes(loaded.size());
  std::atomic<bool> stop{false};
  parallel_for(selected.size(), thread_count(o.jobs, selected.size()), stop,
               [&](std::size_t i) { outcomes[selected[i]] = simulate_fidelity_case(loaded[selected[i]]); });
  // Out of sample: the corpus constants refitted without each case's own source, fitted over
  // every case read whatever --category selects, so a category's figures are the same alone.
  const CrossValidation cv = cross_validate(loaded, outcomes, selected, o.jobs);
  std::vector<CaseResult> results;
  for (const std::size_t i : selected) {
    CaseResult r{loaded[i], outcomes[i], fidelity_verdict(loaded[i], outcomes[i]), cv.cases[i]};
    results.push_back(std::move(r));
  }

  const std::vector<KindSummary> kinds = summarize(results);
  int failing = 0, inside = 0, gaps = 0;
  for (const auto& r : results) {
    failing += fidelity_verdict_passes(r.verdict) ? 0 : 1;
    inside += r.verdict == FidelityVerdict::kInside ? 1 : 0;
    gaps += r.verdict == FidelityVerdict::kKnownGap ? 1 : 0;
  }
  const std::string table = markdown(results, kinds, cv);
  if (!o.json_path.empty()) core::write_json_atomically(o.json_path, to_json(results, kinds, cv, failing == 0));
  if (!o.markdown_path.empty()) core::write_text_atomically(o.markdown_path, table);

  std::cout << "prefetchlab fidelity: " << results.size() << " case(s) from " << dir.string();
  if (only) std::cout << " (kind " << fidelity_kind_name(*only) << ")";
  std::cout << "; error = (simulated - real) / real\n\n" << table << "\n";
  for (const auto& r : results) {
    if (r.verdict == FidelityVerdict::kGapClosed) {
      std::cout << "known gap closed: remove known_gap from " << r.c.file.string() << " (error "
                << percent(*r.error(), true) << ", inside its band of ±" << fmt("%.0f", 100 * r.c.tolerance)
                << "%)\n";
    } else if (r.verdict == FidelityVerdict::kOutside) {
      std::cout << "outside its band: " << r.c.file.string() << ": ";
      if (r.outcome.simulated) {
        std::cout << "error " << percent(*r.error(), true) << " beyond ±" << fmt("%.0f", 100 * r.c.tolerance) << "%";
      } else {
        std::cout << "no simulated figure (" << r.outcome.failure << ")";
      }
      std::cout << " and no known_gap\n";
    }
  }
  std::cout << "fidelity: " << inside << " inside their band, " << gaps << " known gap(s), " << failing
            << " failing\n";
  return failing == 0 ? kExitOk : kExitExpectationFailed;
}

}  // namespace

CLI::App* add_fidelity_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<FidelityOptions>();
  CLI::App* c = app.add_subcommand(
      "fidelity", "Run the corpus of public real measurements through the simulator; error per case and per kind");
  c->add_option("cases_dir", o->cases_dir, "folder of case files (default: the bundled bench/fidelity)");
  c->add_option("--category", o->category, "only cases of this kind: collective, training or host");
  c->add_option("--json", o->json_path, "also write the table as JSON to this file");
  c->add_option("--markdown", o->markdown_path, "also write the tables as Markdown to this file");
  c->add_option("-j,--jobs", o->jobs, "threads (default: the CPUs this process may use); the output does not depend on it");
  c->callback([o, exit_code] { *exit_code = run_guarded([&] { return run_fidelity(*o); }); });
  return c;
}

}  // namespace prefetchlab::apps
