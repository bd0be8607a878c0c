#include "core/trace_import/rank_timeline.hpp"

#include "core/trace_import/saturating_sum.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <utility>

#include "core/input/input_error.hpp"

namespace prefetchlab::core {
namespace {

using Interval = std::pair<std::int64_t, std::int64_t>;

// Sorted, disjoint union of intervals.
std::vector<Interval> merge_intervals(std::vector<Interval> spans) {
  std::sort(spans.begin(), spans.end());
  std::vector<Interval> merged;
  for (const auto& span : spans) {
    if (span.second <= span.first) continue;
    if (!merged.empty() && span.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, span.second);
    } else {
      merged.push_back(span);
    }
  }
  return merged;
}

std::int64_t total_length(const std::vector<Interval>& merged) {
  std::int64_t total = 0;
  for (const auto& [a, b] : merged) add_saturating(total, saturating_sub(b, a));
  return total;
}

// Length of `a` not covered by `b` (both merged).
std::int64_t uncovered_length(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::int64_t covered = 0;
  std::size_t j = 0;
  for (const auto& [start, end] : a) {
    while (j < b.size() && b[j].second <= start) ++j;
    for (std::size_t k = j; k < b.size() && b[k].first < end; ++k) {
      add_saturating(covered, saturating_sub(std::min(end, b[k].second), std::max(start, b[k].first)));
    }
  }
  return total_length(a) - covered;
}

bool starts_with(const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; }

// ProfilerStep#N -> N; false for any other name.
bool step_number(const std::string& name, std::int64_t* number) {
  if (!starts_with(name, "ProfilerStep#")) return false;
  const std::string digits = name.substr(13);
  if (digits.empty() || digits.size() > 12 || digits.find_first_not_of("0123456789") != std::string::npos) return false;
  *number = std::stoll(digits);
  return true;
}

bool is_cpu(TraceCategory c) {
  return c == TraceCategory::kCpuOp || c == TraceCategory::kUserAnnotation || c == TraceCategory::kRuntime ||
         c == TraceCategory::kPythonFunction;
}

// "path/file.py(123): function" -> "function" when the path is DeepSpeed's; else empty.
std::string deepspeed_function(const std::string& frame) {
  if (frame.find("deepspeed/") == std::string::npos) return "";
  const std::size_t colon = frame.rfind("): ");
  return colon == std::string::npos ? "" : frame.substr(colon + 3);
}

}  // namespace

const char* hook_wrapper_of(const std::string& function) {
  if (function == "pre_sub_module_forward_function") return "_pre_forward_module_hook";
  if (function == "post_sub_module_forward_function") return "_post_forward_module_hook";
  if (function == "pre_sub_module_backward_function") return "_pre_backward_module_hook";
  if (function == "post_sub_module_backward_function") return "_post_backward_module_hook";
  return nullptr;
}

bool is_synchronize_call(const std::string& name) {
  return (starts_with(name, "cuda") || starts_with(name, "hip")) && name.ends_with("Synchronize");
}

bool is_deepspeed_coordinator_function(const std::string& function) {
  return function == "fetch_sub_module" || function == "release_sub_module";
}

bool is_deepspeed_hook_function(const std::string& function) {
  static const char* const kFunctions[] = {
      "_pre_forward_module_hook",        "_post_forward_module_hook",        "_pre_backward_module_hook",
      "_post_backward_module_hook",      "pre_sub_module_forward_function",  "post_sub_module_forward_function",
      "pre_sub_module_backward_function", "post_sub_module_backward_function", "fetch_sub_module",
      "release_sub_module",              "all_gather_coalesced",             "reduce_partition_and_remove_grads",
      "__reduce_and_partition_ipg_grads",
  };
  for (const char* f : kFunctions) {
    if (function == f) return true;
  }
  return false;
}

RankTimeline build_rank_timeline(const TraceFile& trace, std::int64_t fallback_rank, const TimelineOptions& options) {
  RankTimeline out;
  out.path = trace.path;
  out.rank_from_file = trace.rank.has_value();
  out.rank = trace.rank.value_or(fallback_rank);
  out.world_size = trace.world_size.value_or(-1);
  out.backend = trace.backend;
  out.device_names = trace.device_names;
  out.absolute_clock = !trace.legacy_export;
  const auto& events = trace.events;
  if (events.empty()) {
    throw InputError({trace.path, 0}, "traceEvents", "has no complete (\"X\") events: nothing was profiled",
                     "a trace recorded with torch.profiler around training steps");
  }

  // Steps: ProfilerStep#N on the host, one per N (Kineto writes each once).
  std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> step_windows;
  if (!options.step_marker.empty()) {
    std::vector<std::int64_t> starts;
    for (const auto& event : events) {
      if (is_cpu(event.category) && trace.name_of(event) == options.step_marker) starts.push_back(event.ts_ns);
    }
    std::sort(starts.begin(), starts.end());
    starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
    if (starts.size() < 2) {
      throw InputError({trace.path, 0}, "--step-marker",
                       "has " + std::to_string(starts.size()) + " event(s) named '" + options.step_marker +
                           "': steps need at least two (a step runs from one to the next)",
                       "the name of an event that starts every iteration (Perfetto or chrome://tracing shows names)");
    }
    for (std::size_t i = 0; i + 1 < starts.size(); ++i) {
      step_windows.emplace(static_cast<std::int64_t>(i), std::make_pair(starts[i], starts[i + 1] - starts[i]));
    }
  }
  for (const auto& event : events) {
    std::int64_t number = 0;
    if (options.step_marker.empty() && is_cpu(event.category) && step_number(trace.name_of(event), &number)) {
      step_windows.emplace(number, std::make_pair(event.ts_ns, event.dur_ns));
    }
  }
  if (step_windows.empty()) {
    if (!options.whole_file_step) {
      throw InputError({trace.path, 0}, "ProfilerStep#N",
                       "has no steps: no ProfilerStep#N event (the profiler marks one per prof.step())",
                       "a trace recorded with a torch.profiler schedule and prof.step() each iteration; or "
                       "--step-marker NAME (an event starting every iteration), or --whole-file-step for a file "
                       "of exactly one iteration");
    }
    std::int64_t first = events.front().ts_ns, last = events.front().end_ns();
    for (const auto& event : events) {
      first = std::min(first, event.ts_ns);
      last = std::max(last, event.end_ns());
    }
    step_windows.emplace(-1, std::make_pair(first, last - first));
    out.missing.push_back("steps: no ProfilerStep#N markers; the whole file is one step (--whole-file-step)");
  }
  for (const auto& [number, window] : step_windows) {
    RankStep step;
    step.number = number;
    step.start_ns = window.first;
    step.duration_ns = window.second;
    out.steps.push_back(step);
  }
  std::sort(out.steps.begin(), out.steps.end(), [](const RankStep& a, const RankStep& b) { return a.start_ns < b.start_ns; });
  const auto step_at = [&](std::int64_t ts) -> int {
    auto it = std::upper_bound(out.steps.begin(), out.steps.end(), ts,
                               [](std::int64_t t, const RankStep& s) { return t < s.start_ns; });
    if (it == out.steps.begin()) return -1;
    --it;
    return ts < it->start_ns + it->duration_ns ? static_cast<int>(it - out.steps.begin()) : -1;
  };

  // Autograd thread, by the name Kineto gives it.
  std::vector<bool> autograd_track(trace.tracks.size(), false);
  for (std::size_t t = 0; t < trace.tracks.size(); ++t) {
    if (trace.tracks[t].name.find("pt_autograd") != std::string::npos) {
      autograd_track[t] = true;
      if (out.autograd_thread.empty()) out.autograd_thread = trace.tracks[t].name;
    }
  }

  // Host nesting, per thread: which collective call (outermost) and which nccl:* annotation
  // (innermost, the one with "Input Dims") each launch sits in.
  std::map<std::int32_t, std::vector<std::size_t>> by_track;
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (is_cpu(events[i].category)) by_track[events[i].track].push_back(i);
  }
  struct Launch {
    std::int64_t ts_ns = 0;
    std::int64_t annotation = -1;  // event index of the enclosing nccl:* / record_param_comms with sizes
    CollectiveKind call_kind = CollectiveKind::kOther;  // of the innermost enclosing collective call
  };
  std::unordered_map<std::int64_t, Launch> launch_by_correlation;
  std::unordered_map<std::int64_t, std::size_t> param_comms_by_external_id;
  std::vector<bool> comm_work_track(trace.tracks.size(), false);
  std::vector<Interval> host_compute;  // CPU-only traces: host ops as the compute
  for (auto& [track, indices] : by_track) {
    std::stable_sort(indices.begin(), indices.end(), [&](std::size_t a, std::size_t b) {
      if (events[a].ts_ns != events[b].ts_ns) return events[a].ts_ns < events[b].ts_ns;
      return events[a].dur_ns > events[b].dur_ns;  // the parent first
    });
    std::vector<std::size_t> open;
    std::map<std::size_t, std::size_t> hook_call_of_event;  // open DeepSpeed frames -> hook_calls
    // The innermost open DeepSpeed call of hook_calls, if it is `function`; stops (null) at a
    // torch-level collective call when `collective_stops`.
    const auto innermost_call = [&](const char* function, bool collective_stops) -> HostHookCall* {
      for (auto it = open.rbegin(); it != open.rend(); ++it) {
        CollectiveKind ignored = CollectiveKind::kOther;
        if (collective_stops && collective_call_kind(trace.name_of(events[*it]), &ignored)) return nullptr;
        const auto found = hook_call_of_event.find(*it);
        if (found == hook_call_of_event.end()) continue;
        HostHookCall& call = out.hook_calls[found->second];
        return call.function == function ? &call : nullptr;
      }
      return nullptr;
    };
    for (const std::size_t i : indices) {
      const TraceEvent& event = events[i];
      while (!open.empty() && events[open.back()].end_ns() <= event.ts_ns) open.pop_back();
      const std::string& name = trace.name_of(event);
      CollectiveKind kind = CollectiveKind::kOther;
      if (gloo_work_kind(name, &kind)) {
        comm_work_track[static_cast<std::size_t>(track)] = true;
        out.gloo_work = true;
      }
      if (event.category == TraceCategory::kRuntime &&
          (starts_with(name, "cudaLaunchKernel") || starts_with(name, "hipLaunchKernel") || starts_with(name, "hipExtLaunchKernel"))) {
        out.launch_call_ns.push_back(event.dur_ns);
        if (HostHookCall* gather = innermost_call("all_gather_coalesced", true)) add_saturating(gather->launch_ns, event.dur_ns);
        if (HostHookCall* reduce = innermost_call("__reduce_and_partition_ipg_grads", true)) add_saturating(reduce->launch_ns, event.dur_ns);
      }
      // The host blocked (an event, stream or device synchronisation) inside a fetch.
      if (event.category == TraceCategory::kRuntime && is_synchronize_call(name)) {
        if (HostHookCall* fetch = innermost_call("fetch_sub_module", false)) add_saturating(fetch->blocked_ns, event.dur_ns);
        if (HostHookCall* reduce = innermost_call("__reduce_and_partition_ipg_grads", false)) add_saturating(reduce->blocked_ns, event.dur_ns);
      }
      if (event.category == TraceCategory::kRuntime && event.correlation >= 0) {
        Launch launch{event.ts_ns, -1, CollectiveKind::kOther};
        for (auto it = open.rbegin(); it != open.rend(); ++it) {
          if (launch.annotation < 0 && events[*it].args >= 0) launch.annotation = static_cast<std::int64_t>(*it);
          CollectiveKind call = CollectiveKind::kOther;
          if (launch.call_kind == CollectiveKind::kOther && collective_call_kind(trace.name_of(events[*it]), &call)) {
            launch.call_kind = call;
          }
        }
        launch_by_correlation[event.correlation] = launch;
      }
      if (name == "record_param_comms" && event.external_id >= 0 && event.args >= 0) {
        param_comms_by_external_id[event.external_id] = i;
      }
      if (event.category != TraceCategory::kRuntime && collective_call_kind(name, &kind)) {
        bool nested = false;
        CollectiveKind parent_kind = CollectiveKind::kOther;
        for (const std::size_t parent : open) nested = nested || collective_call_kind(trace.name_of(events[parent]), &parent_kind);
        if (kind == CollectiveKind::kOther && event.args >= 0) {
          const auto& args = trace.collective_args[static_cast<std::size_t>(event.args)];
          if (args.collective_name >= 0) kind = collective_kind_from_operation(trace.names[static_cast<std::size_t>(args.collective_name)]);
        }
        // A record_param_comms that names no collective is a wait or a barrier helper: no call.
        if (!nested && kind != CollectiveKind::kOther) {
          out.host_calls.push_back(
              HostCollectiveCall{kind, event.ts_ns, event.dur_ns, autograd_track[static_cast<std::size_t>(track)], step_at(event.ts_ns)});
        }
      }
      if (autograd_track[static_cast<std::size_t>(track)] && event.category == TraceCategory::kCpuOp) ++out.autograd_thread_ops;
      if (event.category == TraceCategory::kPythonFunction) {
        ++out.python_function_events;
        const std::string function = deepspeed_function(name);
        // Counted, not calls of their own: a fetch's rounds and handle waits, a release's
        // partitioned parameters.
        if (function == "__all_gather_params") {
          if (HostHookCall* fetch = innermost_call("fetch_sub_module", false)) ++fetch->gather_rounds;
        } else if (function == "wait" && name.find("partition_parameters.py(") != std::string::npos) {
          if (HostHookCall* fetch = innermost_call("fetch_sub_module", false)) ++fetch->handle_waits;
        } else if (function == "_partition_param") {
          if (HostHookCall* release = innermost_call("release_sub_module", false)) ++release->partitioned_params;
        }
        if (function == "all_gather_coalesced") {
          if (HostHookCall* fetch = innermost_call("fetch_sub_module", false)) add_saturating(fetch->gather_ns, event.dur_ns);
        }
        if (!function.empty() && is_deepspeed_hook_function(function)) {
          HostHookCall call{function, event.dur_ns, step_at(event.ts_ns)};
          // Charge a coordinator call to each enclosing DeepSpeed frame once: to those that no
          // coordinator frame between them and it already holds.
          bool inside_coordinator = false;
          for (auto it = open.rbegin(); it != open.rend(); ++it) {
            const auto found = hook_call_of_event.find(*it);
            if (found == hook_call_of_event.end()) continue;
            call.nested_in_hook = true;
            HostHookCall& parent = out.hook_calls[found->second];
            if (is_deepspeed_coordinator_function(function) && !inside_coordinator) add_saturating(parent.coordinator_ns, event.dur_ns);
            inside_coordinator = inside_coordinator || is_deepspeed_coordinator_function(parent.function);
          }
          if (function == "all_gather_coalesced") call.in_fetch = innermost_call("fetch_sub_module", false) != nullptr;
          if (const char* wrapper = hook_wrapper_of(function)) {
            if (HostHookCall* outer = innermost_call(wrapper, false)) add_saturating(outer->hook_function_ns, event.dur_ns);
          }
          hook_call_of_event[i] = out.hook_calls.size();
          out.hook_calls.push_back(std::move(call));
        }
      }
      open.push_back(i);
    }
  }
  std::sort(out.host_calls.begin(), out.host_calls.end(),
            [](const HostCollectiveCall& a, const HostCollectiveCall& b) { return a.start_ns < b.start_ns; });

  // ac2g flows: where a kernel carries no correlation (AMD traces of 2024), its flow's start
  // is the launch.
  std::map<std::pair<std::int32_t, std::int64_t>, std::int64_t> flow_into;  // (track, ts) -> id
  std::unordered_map<std::int64_t, std::int64_t> flow_start_ts;
  std::map<std::int64_t, int> fwdbwd_ends;
  for (const auto& flow : trace.flows) {
    if (flow.forward_backward) {
      fwdbwd_ends[flow.id] |= flow.start ? 1 : 2;
    } else if (flow.start) {
      flow_start_ts[flow.id] = flow.ts_ns;
    } else {
      flow_into[{flow.track, flow.ts_ns}] = flow.id;
    }
  }
  for (const auto& [id, ends] : fwdbwd_ends) out.forward_backward_links += ends == 3 ? 1 : 0;

  // Device work: collectives (NCCL kernels) and compute (every other kernel), each given to
  // the step that launched it — GPU work of step N may run in step N+1's host window.
  std::vector<std::vector<Interval>> compute_by_step(out.steps.size()), comm_by_step(out.steps.size());
  bool any_sizes = false, any_group = false;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const TraceEvent& event = events[i];
    const std::string& name = trace.name_of(event);
    CollectiveKind kind = CollectiveKind::kOther;
    const bool kernel = event.category == TraceCategory::kKernel;
    const bool nccl = kernel && nccl_kernel_kind(name, &kind);
    const bool gloo = !nccl && is_cpu(event.category) && gloo_work_kind(name, &kind);
    if (kernel) out.has_gpu_kernels = true;
    if (!kernel && !gloo) continue;
    std::int64_t launch_ts = event.ts_ns;
    std::int64_t annotation = -1;
    CollectiveKind call_kind = CollectiveKind::kOther;
    if (kernel) {
      auto it = event.correlation >= 0 ? launch_by_correlation.find(event.correlation) : launch_by_correlation.end();
      if (it != launch_by_correlation.end()) {
        launch_ts = it->second.ts_ns;
        annotation = it->second.annotation;
        call_kind = it->second.call_kind;
        ++out.launch_links;
      } else if (auto f = flow_into.find({event.track, event.ts_ns}); f != flow_into.end()) {
        if (auto s = flow_start_ts.find(f->second); s != flow_start_ts.end()) {
          launch_ts = s->second;
          ++out.launch_links;
        }
      }
    }
    const int step = step_at(launch_ts);
    if (!nccl && !gloo) {
      if (step >= 0) compute_by_step[static_cast<std::size_t>(step)].emplace_back(event.ts_ns, event.end_ns());
      continue;
    }
    RankCollective collective;
    // The call names the operation better than the kernel: NCCL runs all_to_all as SendRecv
    // kernels. The metadata's "Collective name", when present, decides (below).
    collective.kind = call_kind != CollectiveKind::kOther ? call_kind : kind;
    collective.start_ns = event.ts_ns;
    collective.end_ns = event.end_ns();
    collective.step = step;
    // Metadata: the kernel's own args (Kineto copies them from record_param_comms), else that
    // record_param_comms (same External id), else the enclosing annotation's "Input Dims".
    const CollectiveArgs* args = event.args >= 0 ? &trace.collective_args[static_cast<std::size_t>(event.args)] : nullptr;
    if ((args == nullptr || (args->in_nelems < 0 && args->out_nelems < 0)) && event.external_id >= 0) {
      if (auto p = param_comms_by_external_id.find(event.external_id); p != param_comms_by_external_id.end()) {
        args = &trace.collective_args[static_cast<std::size_t>(events[p->second].args)];
      }
    }
    if ((args == nullptr || (args->in_nelems < 0 && args->out_nelems < 0 && args->input_dims_numel < 0)) && annotation >= 0) {
      args = &trace.collective_args[static_cast<std::size_t>(events[static_cast<std::size_t>(annotation)].args)];
    }
    if (args != nullptr) {
      collective.in_nelems = args->in_nelems;
      collective.out_nelems = args->out_nelems;
      collective.elements = std::max(args->in_nelems, args->out_nelems);
      if (collective.elements < 0) collective.elements = args->input_dims_numel;
      if (args->dtype >= 0) collective.dtype = trace.names[static_cast<std::size_t>(args->dtype)];
      if (args->process_group >= 0) collective.process_group = trace.names[static_cast<std::size_t>(args->process_group)];
      collective.group_size = args->group_size;
      collective.seq = args->seq;
      if (args->collective_name >= 0) {
        const CollectiveKind named = collective_kind_from_operation(trace.names[static_cast<std::size_t>(args->collective_name)]);
        if (named != CollectiveKind::kOther) collective.kind = named;
      }
    }
    any_sizes = any_sizes || collective.elements >= 0;
    any_group = any_group || !collective.process_group.empty();
    if (step >= 0) comm_by_step[static_cast<std::size_t>(step)].emplace_back(collective.start_ns, collective.end_ns);
    out.collectives.push_back(std::move(collective));
  }
  std::stable_sort(out.collectives.begin(), out.collectives.end(),
                   [](const RankCollective& a, const RankCollective& b) { return a.start_ns < b.start_ns; });

  // A CPU-only trace computes on the host: its compute is the host ops outside collective
  // work threads, calls and annotations (which also span waits).
  if (!out.has_gpu_kernels) {
    for (const auto& event : events) {
      if (event.category != TraceCategory::kCpuOp || comm_work_track[static_cast<std::size_t>(event.track)]) continue;
      CollectiveKind kind = CollectiveKind::kOther;
      const std::string& name = trace.name_of(event);
      std::int64_t number = 0;
      if (collective_call_kind(name, &kind) || step_number(name, &number)) continue;
      const int step = step_at(event.ts_ns);
      if (step >= 0) compute_by_step[static_cast<std::size_t>(step)].emplace_back(event.ts_ns, event.end_ns());
    }
  }
  for (std::size_t s = 0; s < out.steps.size(); ++s) {
    const auto compute = merge_intervals(std::move(compute_by_step[s]));
    const auto comm = merge_intervals(std::move(comm_by_step[s]));
    out.steps[s].compute_busy_ns = total_length(compute);
    out.steps[s].exposed_comm_ns = uncovered_length(comm, compute);
  }

  // Memory: the allocator's total after each event, its peak per step window.
  for (const auto& sample : trace.memory) {
    ++out.memory_events;
    if (sample.device_type == 1) ++out.gpu_memory_events;
    const int step = step_at(sample.ts_ns);
    if (step < 0 || sample.total_allocated < 0) continue;
    auto& peak = sample.device_type == 1 ? out.steps[static_cast<std::size_t>(step)].peak_allocated_bytes
                                         : out.steps[static_cast<std::size_t>(step)].peak_cpu_allocated_bytes;
    if (sample.device_type == 1 || sample.device_type == 0) peak = std::max(peak, sample.total_allocated);
  }

  // What the file cannot say.
  if (!trace.rank) out.missing.push_back("rank: no distributedInfo.rank; taken from the file's position on the command line");
  if (trace.legacy_export) {
    out.missing.push_back("clock: legacy autograd-profiler export, time counts from this process's profiler start: "
                          "no cross-rank true time or skew");
  }
  if (!out.has_gpu_kernels) out.missing.push_back("device: no GPU kernels (a CPU-only trace): compute busy is host op time");
  if (!out.collectives.empty() && !any_sizes) {
    out.missing.push_back("collective sizes: no metadata (PyTorch >= 2.3 writes \"In msg nelems\") and no \"Input Dims\" "
                          "(record_shapes=True)");
  }
  if (!out.collectives.empty() && !any_group) {
    out.missing.push_back("process groups: not recorded; collectives are matched across ranks in one group by order");
  }
  if (out.memory_events == 0) {
    out.missing.push_back("memory: no [memory] events (profile_memory=True records them)");
  } else if (out.gpu_memory_events == 0) {
    out.missing.push_back("device memory: [memory] events are host (CPU) allocations only");
  }
  if (out.python_function_events == 0) {
    out.missing.push_back("host hooks: no python_function events (with_stack=True records DeepSpeed's hooks)");
  }
  return out;
}

}  // namespace prefetchlab::core
