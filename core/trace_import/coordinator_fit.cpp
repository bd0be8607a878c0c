#include "core/trace_import/coordinator_fit.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "core/hardware/median_regression.hpp"

namespace prefetchlab::core {
namespace {

double base_us(const CalibrationConstants& base, std::string_view key) {
  for (const HostTerm& t : host_terms()) {
    if (t.yaml_key == key) return static_cast<double>(base.*(t.field)) / 1e3;
  }
  return 0;
}

std::string us_text(double us) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f us", us);
  return buffer;
}

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double at = q * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(at));
  const std::size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (at - static_cast<double>(lo));
}

// One function's calls: own time (us, as recorded) and the counts its terms price (the
// intercept's column apart). terms[0] is the per-call term, terms[1 + j] covariate j's.
struct Calls {
  const char* function;
  std::vector<const char*> terms;
  std::vector<std::vector<double>> counts;
  std::vector<double> own_us;
};

void fit_calls(const Calls& calls, const CalibrationConstants& base, double speed, CoordinatorFit* out) {
  const std::size_t covariates = calls.terms.size() - 1;
  std::vector<CoordinatorTerm> terms(calls.terms.size());
  for (std::size_t t = 0; t < calls.terms.size(); ++t) {
    terms[t].term = calls.terms[t];
    terms[t].function = calls.function;
    terms[t].value_us = base_us(base, calls.terms[t]);
  }
  const std::size_t n = calls.own_us.size();
  if (n < 2 * calls.terms.size()) {
    out->not_fitted.push_back(std::string(calls.function) + " (" + std::to_string(n) + " paired calls): too few for its " +
                              std::to_string(calls.terms.size()) + " terms");
    return;
  }
  // A count that never varies cannot be told apart from the per-call term: held at the base.
  std::vector<bool> held(covariates, false);
  for (std::size_t j = 0; j < covariates; ++j) {
    bool varies = false;
    for (const auto& row : calls.counts) varies = varies || row[j] != calls.counts.front()[j];
    if (!varies) {
      held[j] = true;
      terms[j + 1].why_not = calls.counts.front()[j] == 0
                                 ? "no paired call had any"
                                 : "every paired call had " + std::to_string(static_cast<long long>(calls.counts.front()[j]));
    }
  }
  // A held term's cost per count at the traced host's speed (base / speed).
  std::vector<double> held_us_per_count(covariates);
  for (std::size_t j = 0; j < covariates; ++j) held_us_per_count[j] = terms[j + 1].value_us / speed;
  MedianRegression fit;
  std::vector<std::size_t> free_columns;
  for (;;) {
    free_columns.clear();
    for (std::size_t j = 0; j < covariates; ++j) {
      if (!held[j]) free_columns.push_back(j);
    }
    std::vector<std::vector<double>> rows;
    std::vector<double> y;
    for (std::size_t i = 0; i < n; ++i) {
      std::vector<double> row{1.0};
      double adjusted = calls.own_us[i];
      for (std::size_t j = 0; j < covariates; ++j) {
        if (held[j]) adjusted -= held_us_per_count[j] * calls.counts[i][j];
        else row.push_back(calls.counts[i][j]);
      }
      rows.push_back(std::move(row));
      y.push_back(adjusted);
    }
    fit = median_regression(rows, y);
    if (!fit.coefficients.empty() || free_columns.empty()) break;
    const std::size_t last = free_columns.back();  // counts that move together: hold the last
    held[last] = true;
    terms[last + 1].why_not = "cannot be told apart from the other counts in these calls";
  }
  if (fit.coefficients.empty()) {
    out->not_fitted.push_back(std::string(calls.function) + ": the regression has no solution");
    return;
  }
  const auto set_term = [&](CoordinatorTerm& term, double coefficient_us) {
    term.fitted = true;
    term.value_us = coefficient_us * speed;
    if (term.value_us < 0) {
      out->not_fitted.push_back(term.term + ": fitted below zero (" + us_text(term.value_us) + "), written as 0");
      term.value_us = 0;
    }
  };
  set_term(terms[0], fit.coefficients[0]);
  for (std::size_t c = 0; c < free_columns.size(); ++c) set_term(terms[free_columns[c] + 1], fit.coefficients[c + 1]);
  for (auto& term : terms) {
    if (!term.fitted) term.why_not = "held at the base's " + us_text(term.value_us) + ": " + term.why_not;
  }
  CoordinatorFunctionFit summary;
  summary.function = calls.function;
  summary.calls = static_cast<std::int64_t>(n);
  summary.residual_p10_us = percentile(fit.residuals, 0.1);
  summary.residual_p90_us = percentile(fit.residuals, 0.9);
  out->functions.push_back(summary);
  for (auto& term : terms) out->terms.push_back(std::move(term));
}

}  // namespace

CoordinatorFit fit_coordinator_terms(const TraceSet& set, const CoordinatorCallCounts& per_iteration,
                                     const CalibrationConstants& base, double host_speed) {
  CoordinatorFit out;
  const double speed = host_speed > 0 ? host_speed : 1.0;
  Calls fetches{"fetch_sub_module",
                {"host_fetch_call_us", "host_fetch_per_param_us", "host_fetch_per_inflight_param_us",
                 "host_fetch_gather_round_us"},
                {},
                {}};
  Calls gathers{"all_gather_coalesced", {"host_allgather_call_us", "host_allgather_per_param_us"}, {}, {}};
  Calls releases{"release_sub_module",
                 {"host_release_call_us", "host_release_per_param_us", "host_release_per_freed_param_us"},
                 {},
                 {}};
  Calls reduces{"__reduce_and_partition_ipg_grads",
                {"host_reduce_scatter_call_us", "host_reduce_scatter_per_param_us"},
                {},
                {}};
  std::int64_t unpaired = 0;
  std::string first_mismatch;
  for (const RankTimeline& rank : set.ranks) {
    // Per step (index into rank.steps): its calls of each function, in start order.
    std::map<int, std::vector<const HostHookCall*>> fetch, gather, release, reduce;
    for (const HostHookCall& call : rank.hook_calls) {
      if (call.step < 0) continue;
      if (call.function == "fetch_sub_module") fetch[call.step].push_back(&call);
      if (call.function == "all_gather_coalesced" && call.in_fetch) gather[call.step].push_back(&call);
      if (call.function == "release_sub_module") release[call.step].push_back(&call);
      if (call.function == "__reduce_and_partition_ipg_grads") reduce[call.step].push_back(&call);
    }
    for (int step = 0; step < static_cast<int>(rank.steps.size()); ++step) {
      const auto& f = fetch[step];
      const auto& g = gather[step];
      const auto& r = release[step];
      const auto& b = reduce[step];
      if (f.empty() && g.empty() && r.empty() && b.empty()) continue;
      if (f.size() != per_iteration.fetch_params.size() || g.size() != per_iteration.gather_params.size() ||
          r.size() != per_iteration.release_params.size() || b.size() != per_iteration.reduce_params.size()) {
        ++unpaired;
        if (first_mismatch.empty()) {
          first_mismatch = "rank " + std::to_string(rank.rank) + " step " +
                           std::to_string(rank.steps[static_cast<std::size_t>(step)].number) + " has " +
                           std::to_string(f.size()) + " fetch_sub_module, " + std::to_string(g.size()) +
                           " all_gather_coalesced (from fetches), " + std::to_string(r.size()) +
                           " release_sub_module and " + std::to_string(b.size()) +
                           " __reduce_and_partition_ipg_grads calls; the scenario makes " +
                           std::to_string(per_iteration.fetch_params.size()) + ", " +
                           std::to_string(per_iteration.gather_params.size()) + ", " +
                           std::to_string(per_iteration.release_params.size()) + " and " +
                           std::to_string(per_iteration.reduce_params.size()) + " per iteration";
        }
        continue;
      }
      ++out.steps_paired;
      for (std::size_t i = 0; i < f.size(); ++i) {
        const HostHookCall& c = *f[i];
        fetches.counts.push_back({static_cast<double>(per_iteration.fetch_params[i]), static_cast<double>(c.handle_waits),
                                  static_cast<double>(c.gather_rounds)});
        fetches.own_us.push_back(static_cast<double>(c.duration_ns - c.gather_ns - c.blocked_ns) / 1e3);
      }
      for (std::size_t i = 0; i < g.size(); ++i) {
        gathers.counts.push_back({static_cast<double>(per_iteration.gather_params[i])});
        gathers.own_us.push_back(static_cast<double>(g[i]->duration_ns - g[i]->launch_ns) / 1e3);
      }
      for (std::size_t i = 0; i < r.size(); ++i) {
        releases.counts.push_back(
            {static_cast<double>(per_iteration.release_params[i]), static_cast<double>(r[i]->partitioned_params)});
        releases.own_us.push_back(static_cast<double>(r[i]->duration_ns) / 1e3);
      }
      for (std::size_t i = 0; i < b.size(); ++i) {
        reduces.counts.push_back({static_cast<double>(per_iteration.reduce_params[i])});
        reduces.own_us.push_back(static_cast<double>(b[i]->duration_ns - b[i]->blocked_ns - b[i]->launch_ns) / 1e3);
      }
    }
  }
  if (unpaired > 0) {
    out.not_fitted.push_back(std::to_string(unpaired) + " step(s) not paired with the scenario's calls (DeepSpeed's first "
                             "iteration records its trace and gathers without prefetching; in steady steps, check that "
                             "the scenario has the traced job's model and ZeRO settings); the first: " + first_mismatch);
  }
  if (out.steps_paired == 0) {
    if (unpaired == 0) {
      out.not_fitted.push_back("host_fetch_*, host_allgather_*, host_release_*, host_reduce_scatter_*: no "
                               "fetch_sub_module, all_gather_coalesced, release_sub_module or "
                               "__reduce_and_partition_ipg_grads python_function events in the steps");
    }
    return out;
  }
  fit_calls(fetches, base, speed, &out);
  fit_calls(gathers, base, speed, &out);
  fit_calls(releases, base, speed, &out);
  fit_calls(reduces, base, speed, &out);
  return out;
}

}  // namespace prefetchlab::core
