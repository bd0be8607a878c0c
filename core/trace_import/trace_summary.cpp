#include "core/trace_import/trace_summary.hpp"

#include "core/trace_import/saturating_sum.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

namespace prefetchlab::core {
namespace {

RankSpread spread(std::vector<std::int64_t> values) {
  RankSpread s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.min = values.front();
  s.max = values.back();
  const std::size_t n = values.size();
  // The midpoint of two sorted values, without forming their (possibly overflowing) sum.
  s.median = n % 2 ? values[n / 2] : values[n / 2 - 1] / 2 + values[n / 2] / 2 + (values[n / 2 - 1] % 2 + values[n / 2] % 2) / 2;
  return s;
}

std::string ms(std::int64_t ns) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3f", static_cast<double>(ns) / 1e6);
  return buffer;
}

std::string us(std::int64_t ns) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", static_cast<double>(ns) / 1e3);
  return buffer;
}

std::string spread_ms(const RankSpread& s, std::int64_t ranks) {
  if (ranks <= 1) return ms(s.median) + " ms";
  return ms(s.median) + " ms (ranks " + ms(s.min) + " - " + ms(s.max) + ")";
}

std::string pad(const std::string& text, std::size_t width) {
  std::string padded = text;  // not a by-value parameter returned: GCC 12 warns falsely on its move
  if (padded.size() < width) padded.append(width - padded.size(), ' ');
  return padded;
}

nlohmann::ordered_json spread_json(const RankSpread& s) {
  return nlohmann::ordered_json{{"min", s.min}, {"median", s.median}, {"max", s.max}};
}

}  // namespace

TraceSummary summarize_traces(const TraceSet& set) {
  std::set<std::int64_t> numbers;
  for (const auto& rank : set.ranks) {
    for (const auto& step : rank.steps) numbers.insert(step.number);
  }
  TraceSummary summary;
  for (const std::int64_t number : numbers) {
    StepSummary out;
    out.number = number;
    std::vector<std::int64_t> step_ns, compute_ns, exposed_ns;
    // kind -> per rank count / elements / span
    std::map<CollectiveKind, std::vector<std::int64_t>> counts, spans;
    std::map<CollectiveKind, std::int64_t> elements;
    std::map<CollectiveKind, std::vector<std::int64_t>> host_ns;
    std::map<CollectiveKind, std::int64_t> host_calls_per_rank;
    std::set<CollectiveKind> kinds;
    std::map<std::string, std::vector<std::int64_t>> hook_ns;
    std::map<std::string, std::int64_t> hook_calls;
    for (const auto& rank : set.ranks) {
      int index = -1;
      for (std::size_t s = 0; s < rank.steps.size(); ++s) {
        if (rank.steps[s].number == number) index = static_cast<int>(s);
      }
      if (index < 0) continue;
      const RankStep& step = rank.steps[static_cast<std::size_t>(index)];
      ++out.ranks;
      step_ns.push_back(step.duration_ns);
      compute_ns.push_back(step.compute_busy_ns);
      exposed_ns.push_back(step.exposed_comm_ns);
      out.peak_allocated_bytes = std::max(out.peak_allocated_bytes, step.peak_allocated_bytes);
      out.peak_cpu_allocated_bytes = std::max(out.peak_cpu_allocated_bytes, step.peak_cpu_allocated_bytes);
      std::map<CollectiveKind, std::int64_t> count, span, elems;
      std::map<CollectiveKind, bool> sized;
      for (const auto& c : rank.collectives) {
        if (c.step != index) continue;
        kinds.insert(c.kind);
        ++count[c.kind];
        add_saturating(span[c.kind], saturating_sub(c.end_ns, c.start_ns));
        if (c.elements >= 0) {
          add_saturating(elems[c.kind], c.elements);
          sized[c.kind] = true;
        }
      }
      std::map<CollectiveKind, std::int64_t> calls;
      for (const auto& call : rank.host_calls) {
        if (call.step != index) continue;
        kinds.insert(call.kind);
        host_ns[call.kind].push_back(call.duration_ns);
        ++calls[call.kind];
      }
      for (const auto& [kind, n] : calls) host_calls_per_rank[kind] = std::max(host_calls_per_rank[kind], n);
      std::map<std::string, std::int64_t> hooks_here;
      for (const auto& hook : rank.hook_calls) {
        if (hook.step != index) continue;
        hook_ns[hook.function].push_back(hook.duration_ns);
        ++hooks_here[hook.function];
      }
      for (const auto& [function, n] : hooks_here) hook_calls[function] = std::max(hook_calls[function], n);
      for (const CollectiveKind kind : kinds) {
        counts[kind];
        spans[kind];
      }
      for (const auto& [kind, n] : count) {
        counts[kind].push_back(n);
        spans[kind].push_back(span[kind]);
        if (sized[kind]) elements[kind] = std::max(elements.count(kind) ? elements[kind] : -1, elems[kind]);
      }
    }
    out.step_ns = spread(step_ns);
    out.compute_busy_ns = spread(compute_ns);
    out.exposed_comm_ns = spread(exposed_ns);
    for (const CollectiveKind kind : kinds) {
      CollectiveKindSummary k;
      k.kind = kind;
      auto c = counts[kind];
      // Ranks of the step without any of this kind count as 0.
      while (static_cast<std::int64_t>(c.size()) < out.ranks) c.push_back(0);
      const RankSpread cs = spread(c);
      k.count_min = cs.min;
      k.count_max = cs.max;
      auto sp = spans[kind];
      while (static_cast<std::int64_t>(sp.size()) < out.ranks) sp.push_back(0);
      k.span_ns = spread(sp);
      k.elements = elements.count(kind) ? elements[kind] : -1;
      for (const auto& m : set.matched) {
        if (m.step_number != number || m.kind != kind) continue;
        ++k.matched;
        if (m.true_ns >= 0) {
          k.true_ns = std::max<std::int64_t>(k.true_ns, 0) + m.true_ns;
          k.skew_ns = std::max<std::int64_t>(k.skew_ns, 0) + m.skew_ns;
        }
      }
      const auto& h = host_ns[kind];
      k.host_calls = host_calls_per_rank[kind];
      if (!h.empty()) k.host_call_median_ns = spread(h).median;
      out.collectives.push_back(k);
    }
    for (const auto& [function, durations] : hook_ns) {
      out.hooks.push_back(HookSummary{function, hook_calls[function], spread(durations).median});
    }
    summary.steps.push_back(std::move(out));
  }
  return summary;
}

std::string format_trace_summary(const TraceSet& set, const TraceSummary& summary) {
  std::string text;
  text += "trace-summary: " + std::to_string(set.ranks.size()) + (set.ranks.size() == 1 ? " rank\n" : " ranks\n");
  for (const auto& rank : set.ranks) {
    text += "  rank " + std::to_string(rank.rank) + (rank.world_size >= 0 ? " of " + std::to_string(rank.world_size) : "") +
            ": " + rank.path + " (" + std::to_string(rank.steps.size()) + " steps, " +
            std::to_string(rank.collectives.size()) + " collectives";
    if (!rank.autograd_thread.empty()) {
      text += ", backward on '" + rank.autograd_thread + "': " + std::to_string(rank.autograd_thread_ops) + " ops, " +
              std::to_string(rank.forward_backward_links) + " fwdbwd links";
    }
    text += ")\n";
  }
  // Facts missing in every file once, else per file.
  std::map<std::string, std::vector<std::int64_t>> missing;
  for (const auto& rank : set.ranks) {
    for (const auto& m : rank.missing) missing[m].push_back(rank.rank);
  }
  if (!missing.empty() || set.ranks.size() < 2) text += "not in these traces:\n";
  if (set.ranks.size() < 2) {
    text += "  - cross-rank times: one rank only; a collective's span includes waiting for peers, so its "
            "true time and skew need every rank of its group\n";
  }
  for (const auto& [fact, ranks] : missing) {
    text += "  - ";
    text += fact;
    if (ranks.size() != set.ranks.size()) {
      text += " (rank";
      for (const auto r : ranks) {
        text += ' ';
        text += std::to_string(r);
      }
      text += ")";
    }
    text += "\n";
  }
  for (const auto& note : set.notes) text += "note: " + note + "\n";

  for (const auto& step : summary.steps) {
    text += "\nstep " + (step.number < 0 ? std::string("(whole file)") : std::to_string(step.number)) + ", " +
            std::to_string(step.ranks) + (step.ranks == 1 ? " rank" : " ranks") + "\n";
    text += "  step time       " + spread_ms(step.step_ns, step.ranks) + "\n";
    text += "  compute busy    " + spread_ms(step.compute_busy_ns, step.ranks) + "\n";
    text += "  exposed comm    " + spread_ms(step.exposed_comm_ns, step.ranks) + "\n";
    if (step.peak_allocated_bytes >= 0) {
      text += "  peak allocated  " + std::to_string(step.peak_allocated_bytes) + " B (device)\n";
    }
    if (step.peak_cpu_allocated_bytes >= 0) {
      text += "  peak allocated  " + std::to_string(step.peak_cpu_allocated_bytes) + " B (host allocator)\n";
    }
    for (const auto& hook : step.hooks) {
      text += "  hook " + pad(hook.function, 36) + std::to_string(hook.calls) + " calls, median " + us(hook.median_ns) +
              " us (nested calls included)\n";
    }
    if (step.collectives.empty()) continue;
    text += "  " + pad("collective", 16) + pad("count", 9) + pad("elements", 14) + pad("span ms", 10) +
            pad("matched", 9) + pad("true ms", 10) + pad("skew ms", 10) + pad("calls", 7) + "host us/call\n";
    for (const auto& k : step.collectives) {
      const std::string count =
          k.count_min == k.count_max ? std::to_string(k.count_max) : std::to_string(k.count_min) + "-" + std::to_string(k.count_max);
      text += "  " + pad(collective_kind_name(k.kind), 16) + pad(count, 9) +
              pad(k.elements >= 0 ? std::to_string(k.elements) : "unknown", 14) + pad(ms(k.span_ns.median), 10) +
              pad(std::to_string(k.matched), 9) + pad(k.true_ns >= 0 ? ms(k.true_ns) : "-", 10) +
              pad(k.skew_ns >= 0 ? ms(k.skew_ns) : "-", 10) + pad(std::to_string(k.host_calls), 7) +
              (k.host_call_median_ns >= 0 ? us(k.host_call_median_ns) : "-") + "\n";
    }
  }
  return text;
}

nlohmann::ordered_json trace_summary_json(const TraceSet& set, const TraceSummary& summary) {
  nlohmann::ordered_json out;
  out["ranks"] = nlohmann::ordered_json::array();
  for (const auto& rank : set.ranks) {
    out["ranks"].push_back({{"rank", rank.rank},
                            {"file", rank.path},
                            {"world_size", rank.world_size},
                            {"steps", rank.steps.size()},
                            {"collectives", rank.collectives.size()},
                            {"missing", rank.missing}});
  }
  out["cross_rank_times"] = set.cross_rank_times;
  out["notes"] = set.notes;
  out["steps"] = nlohmann::ordered_json::array();
  for (const auto& step : summary.steps) {
    nlohmann::ordered_json s{{"step", step.number},
                             {"ranks", step.ranks},
                             {"step_ns", spread_json(step.step_ns)},
                             {"compute_busy_ns", spread_json(step.compute_busy_ns)},
                             {"exposed_comm_ns", spread_json(step.exposed_comm_ns)},
                             {"peak_allocated_bytes", step.peak_allocated_bytes},
                             {"peak_cpu_allocated_bytes", step.peak_cpu_allocated_bytes}};
    s["collectives"] = nlohmann::ordered_json::array();
    for (const auto& k : step.collectives) {
      s["collectives"].push_back({{"kind", collective_kind_name(k.kind)},
                                  {"count_min", k.count_min},
                                  {"count_max", k.count_max},
                                  {"elements", k.elements},
                                  {"span_ns", spread_json(k.span_ns)},
                                  {"matched", k.matched},
                                  {"true_ns", k.true_ns},
                                  {"skew_ns", k.skew_ns},
                                  {"host_calls", k.host_calls},
                                  {"host_call_median_ns", k.host_call_median_ns}});
    }
    s["hooks"] = nlohmann::ordered_json::array();
    for (const auto& hook : step.hooks) {
      s["hooks"].push_back({{"function", hook.function}, {"calls", hook.calls}, {"median_ns", hook.median_ns}});
    }
    out["steps"].push_back(std::move(s));
  }
  return out;
}

}  // namespace prefetchlab::core
