#include "core/trace_import/trace_calibration.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <stdexcept>

#include "core/metrics/metrics.hpp"

namespace prefetchlab::core {

int dtype_bytes(const std::string& dtype) {
  std::string d;
  for (const char c : dtype) d += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (const auto colon = d.rfind("::"); colon != std::string::npos) d = d.substr(colon + 2);
  if (d == "float" || d == "float32" || d == "int" || d == "int32" || d == "uint32" || d == "f32") return 4;
  if (d == "double" || d == "float64" || d == "long" || d == "int64" || d == "uint64") return 8;
  if (d == "bfloat16" || d == "half" || d == "float16" || d == "bf16" || d == "fp16" || d == "short" || d == "int16") return 2;
  if (d == "byte" || d == "char" || d == "bool" || d == "int8" || d == "uint8" || d.starts_with("float8")) return 1;
  return 0;
}

namespace {

// DeepSpeed's module hook functions (deepspeedai/DeepSpeed
// deepspeed/runtime/zero/parameter_offload.py) and their terms; each one's wrapper, registered on
// the module, is hook_wrapper_of(inner).
struct HookFunctions {
  const char* term;
  const char* inner;
};
constexpr HookFunctions kHookFunctions[] = {
    {"host_pre_forward_hook_us", "pre_sub_module_forward_function"},
    {"host_post_forward_hook_us", "post_sub_module_forward_function"},
    {"host_pre_backward_hook_us", "pre_sub_module_backward_function"},
    {"host_post_backward_hook_us", "post_sub_module_backward_function"},
};

void fit_hook_terms(const TraceSet& set, TraceCalibration* out) {
  const double speed = out->host_speed > 0 ? out->host_speed : 1.0;
  for (const auto& hook : kHookFunctions) {
    const char* wrapper = hook_wrapper_of(hook.inner);
    // The hook function's own time is the term; a trace that shows only the wrapper (older
    // releases) gives the wrapper's.
    std::vector<double> wrapper_us, inner_us;
    for (const auto& rank : set.ranks) {
      for (const auto& call : rank.hook_calls) {
        const double own_us = static_cast<double>(call.duration_ns - call.coordinator_ns) / 1e3;
        if (call.function == wrapper) wrapper_us.push_back(own_us);
        if (call.function == hook.inner) inner_us.push_back(own_us);
      }
    }
    const bool inner = !inner_us.empty();
    const std::vector<double>& own = inner ? inner_us : wrapper_us;
    if (own.empty()) continue;
    TraceCalibration::HookTerm term;
    term.term = hook.term;
    term.function = inner ? hook.inner : wrapper;
    term.events = static_cast<std::int64_t>(own.size());
    term.own_median_us = median(own);
    term.value_us = term.own_median_us * speed;
    out->hook_terms.push_back(std::move(term));
  }
  // The backward hooks' set-up: the forward wrappers' own work around their hook functions (the
  // autograd Functions applied to a module's inputs in the pre-hook and outputs in the post-hook).
  std::vector<double> pre_us, post_us;
  for (const auto& rank : set.ranks) {
    for (const auto& call : rank.hook_calls) {
      if (call.hook_function_ns <= 0) continue;
      const double rest_us = static_cast<double>(call.duration_ns - call.hook_function_ns) / 1e3;
      if (call.function == "_pre_forward_module_hook") pre_us.push_back(rest_us);
      if (call.function == "_post_forward_module_hook") post_us.push_back(rest_us);
    }
  }
  if (!pre_us.empty() && !post_us.empty()) {
    TraceCalibration::HookTerm term;
    term.term = "host_backward_hook_setup_us";
    term.function = "_pre_forward_module_hook + _post_forward_module_hook";
    term.events = static_cast<std::int64_t>(std::min(pre_us.size(), post_us.size()));
    term.own_median_us = median(pre_us) + median(post_us);
    term.value_us = term.own_median_us * speed;
    out->hook_terms.push_back(std::move(term));
  }
}

}  // namespace

TraceCalibration calibrate_from_traces(const TraceSet& set, double tolerance) {
  TraceCalibration out;
  if (!set.cross_rank_times) {
    out.not_fitted.push_back(set.ranks.size() < 2
                                 ? "collective latency and bandwidth: one rank only; a kernel's span includes waiting "
                                   "for its peers, so the transfer time needs every rank of the group"
                                 : "collective latency and bandwidth: the files' clocks cannot be compared across ranks "
                                   "(legacy export)");
  } else {
    // (kind, group size) -> size in bytes -> true times (us)
    std::map<std::pair<CollectiveKind, std::int64_t>, std::map<std::int64_t, std::vector<double>>> samples;
    std::map<std::pair<CollectiveKind, std::int64_t>, std::int64_t> events;
    std::int64_t unsized = 0, partial = 0, other_kind = 0;
    for (const auto& m : set.matched) {
      if (m.kind != CollectiveKind::kAllGather && m.kind != CollectiveKind::kReduceScatter &&
          m.kind != CollectiveKind::kAllReduce) {
        ++other_kind;
        continue;
      }
      const RankCollective& first = set.ranks[m.ranks.front()].collectives[m.members.front()];
      const int element_bytes = dtype_bytes(first.dtype);
      // Input Dims products saturate rather than overflow; no collective moves 2^50 elements.
      if (m.elements < 0 || m.elements > (std::int64_t{1} << 50) || element_bytes == 0) {
        ++unsized;
        continue;
      }
      const std::int64_t group = first.group_size > 0 ? first.group_size
                                 : set.ranks.front().world_size > 0 ? set.ranks.front().world_size
                                                                    : static_cast<std::int64_t>(m.ranks.size());
      if (static_cast<std::int64_t>(m.ranks.size()) < group) {
        ++partial;  // a missing rank may have been the last to arrive: no true time
        continue;
      }
      const auto key = std::make_pair(m.kind, group);
      samples[key][m.elements * element_bytes].push_back(static_cast<double>(m.true_ns) / 1e3);
      ++events[key];
    }
    if (unsized > 0) {
      out.not_fitted.push_back(std::to_string(unsized) + " matched all_gather/reduce_scatter/all_reduce without a size or "
                               "dtype (older traces: record_shapes=True gives sizes)");
    }
    if (partial > 0) {
      out.not_fitted.push_back(std::to_string(partial) + " matched collectives seen on fewer ranks than their group: "
                               "trace every rank of the group");
    }
    if (other_kind > 0) {
      out.not_fitted.push_back(std::to_string(other_kind) + " collectives of other kinds (all_to_all, broadcast, "
                               "send/recv, barrier): not terms of the simulator's collective model");
    }
    for (const auto& [key, by_size] : samples) {
      TraceCollectiveFit f;
      f.kind = key.first;
      f.group_size = key.second;
      f.events = events[key];
      for (const auto& [bytes, times] : by_size) f.points.push_back(FitPoint{bytes, median(times)});
      const double n = static_cast<double>(f.group_size);
      const double factor = (f.kind == CollectiveKind::kAllReduce ? 2.0 : 1.0) * (n - 1) / n;
      if (f.group_size < 2) {
        f.why_not = "a group of one rank moves no data";
      } else if (f.points.back().bytes < kMinBandwidthBytes) {
        f.why_not = "sizes up to " + std::to_string(f.points.back().bytes) +
                    " B only: latency-bound, no bandwidth can be measured (needs sizes of 1 MiB or more)";
      } else if (f.points.size() < 2) {
        f.why_not = "one size only (" + std::to_string(f.points.front().bytes) +
                    " B): latency and bandwidth cannot be told apart";
      } else {
        f.fit = fit_collective(f.points, factor, tolerance);
        if (f.fit.bus_bandwidth_gb_per_s() <= 0) {
          f.why_not = "the largest sizes' times do not grow with size";
        } else {
          f.fitted = true;
        }
      }
      out.collectives.push_back(std::move(f));
    }
    if (samples.empty() && out.not_fitted.empty()) {
      out.not_fitted.push_back("collective latency and bandwidth: no all_gather, reduce_scatter or all_reduce matched "
                               "across ranks");
    }
  }

  // Host: torch-level collective calls; all_gather's when there are any (ZeRO-3's most frequent).
  std::map<CollectiveKind, std::vector<double>> calls;
  std::vector<double> launches;
  bool gloo = false;
  for (const auto& rank : set.ranks) {
    // gloo runs a collective on its own worker thread: the c10d op only enqueues it (~1 us on
    // DeepSpeed's CPU recordings), which says nothing of a call's host cost.
    const bool enqueue_only = rank.backend == "gloo" || rank.gloo_work;
    gloo = gloo || enqueue_only;
    for (const auto& call : rank.host_calls) {
      if (!enqueue_only) calls[call.kind].push_back(static_cast<double>(call.duration_ns) / 1e3);
    }
    for (const auto ns : rank.launch_call_ns) launches.push_back(static_cast<double>(ns) / 1e3);
  }
  const std::vector<double>* chosen = nullptr;
  if (calls.count(CollectiveKind::kAllGather)) {
    out.host_call_kind = CollectiveKind::kAllGather;
    chosen = &calls[CollectiveKind::kAllGather];
  } else {
    for (const auto& [kind, list] : calls) {
      if (kind == CollectiveKind::kBarrier) continue;
      if (chosen == nullptr || list.size() > chosen->size()) {
        out.host_call_kind = kind;
        chosen = &list;
      }
    }
  }
  if (chosen != nullptr && !chosen->empty()) {
    out.host_call_events = static_cast<std::int64_t>(chosen->size());
    out.host_call_median_us = median(*chosen);
    out.host_call_reference_us =
        out.host_call_kind == CollectiveKind::kAllReduce ? kAllReduceCallReferenceUs : kHostCallReferenceUs;
    if (out.host_call_median_us > 0) out.host_speed = out.host_call_reference_us / out.host_call_median_us;
  } else {
    out.not_fitted.push_back(gloo ? "host_speed: on gloo a c10d op only enqueues the collective for gloo's worker "
                                    "thread, so its time is not a call's host cost"
                                  : "host_speed: no torch-level collective calls (c10d::*) in the traces");
  }
  if (!launches.empty()) {
    out.launch_events = static_cast<std::int64_t>(launches.size());
    out.launch_median_us = median(launches);
  }
  for (const auto& rank : set.ranks) out.python_frames = out.python_frames || rank.python_function_events > 0;
  const bool python = out.python_frames;
  fit_hook_terms(set, &out);
  if (out.hook_terms.empty()) {
    out.not_fitted.push_back(python ? "DeepSpeed hook terms (host_*_hook_us): python_function events, but none of "
                                      "DeepSpeed's ZeRO-3 module hooks among them"
                                    : "DeepSpeed hook terms (host_*_hook_us): no python_function events (record with "
                                      "with_stack=True)");
  }
  if (python) {
    out.not_fitted.push_back("host_fetch_*, host_allgather_*, host_release_*: their per-parameter terms need each "
                             "call's parameter count, which python_function events do not carry: give the traced job's "
                             "scenario (--scenario)");
  }
  out.not_fitted.push_back("compute_time_scale: needs the traced job's scenario (--scenario) to simulate beside it");
  return out;
}

}  // namespace prefetchlab::core
