#include "core/zero/coordinator.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace prefetchlab::core {
namespace {

// DeepSpeed's default for "most recent step fetched for": int(-1e10).
constexpr std::int64_t kNeverFetched = -10'000'000'000;

std::int64_t padded(std::int64_t numel, int world_size) {
  const std::int64_t w = world_size;
  return (numel + w - 1) / w * w;
}

// Appends to the plan's last action when it already is a Release, so consecutive releases stay
// one action while the order relative to waits is kept.
void append_release(Plan& plan, int param, std::int64_t numel) {
  if (plan.actions.empty() || !std::holds_alternative<Release>(plan.actions.back())) {
    plan.actions.emplace_back(Release{});
  }
  auto& release = std::get<Release>(plan.actions.back());
  release.param_ids.push_back(param);
  release.numel += numel;
}

}  // namespace

Coordinator::Coordinator(const ModelSpec& model, CoordinatorConfig config)
    : config_(std::move(config)) {
  if (config_.prefetch_bucket_numel < 0) {
    throw std::invalid_argument("Coordinator: prefetch_bucket_numel must be >= 0");
  }
  if (config_.max_live_numel < 0) {
    throw std::invalid_argument("Coordinator: max_live_numel must be >= 0");
  }
  if (config_.max_reuse_distance_numel < 0) {
    throw std::invalid_argument("Coordinator: max_reuse_distance_numel must be >= 0");
  }
  if (config_.world_size < 1) {
    throw std::invalid_argument("Coordinator: world_size must be >= 1");
  }
  const std::size_t n_params = model.params.size();
  if (!config_.persistent.empty() && config_.persistent.size() != n_params) {
    throw std::invalid_argument("Coordinator: persistent has " +
                                std::to_string(config_.persistent.size()) +
                                " entries, the model has " + std::to_string(n_params) +
                                " parameters");
  }
  param_numel_.reserve(n_params);
  param_dtype_.reserve(n_params);
  for (const auto& param : model.params) {
    if (param.numel < 0) throw std::invalid_argument("Coordinator: negative numel");
    param_numel_.push_back(param.numel);
    param_dtype_.push_back(param.dtype);
  }
  persistent_ = config_.persistent.empty() ? std::vector<bool>(n_params, false)
                                           : config_.persistent;
  module_params_.reserve(model.modules.size());
  for (const auto& module : model.modules) {
    std::vector<int> ids = module.param_ids;
    for (const int id : ids) {
      if (id < 0 || static_cast<std::size_t>(id) >= n_params) {
        throw std::invalid_argument("Coordinator: module '" + module.name +
                                    "' names parameter " + std::to_string(id) +
                                    ", out of range");
      }
    }
    // named_parameters(recurse=False) yields each parameter once; DeepSpeed sorts by ds_id
    // when it builds the parameter trace. Set iteration order (wait loop, release loop) is
    // Python's hash order there; ds_id order here, for determinism.
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    module_params_.push_back(std::move(ids));
  }
  // engine.py: stage3_allgather_sequential forces the prefetch bucket to 1.
  prefetch_bucket_numel_ = config_.allgather_sequential ? 1 : config_.prefetch_bucket_numel;

  state_.assign(n_params, ParamState::kNotAvailable);
  active_modules_.assign(n_params, {});
  registry_handle_.assign(n_params, -1);
  most_recent_step_.assign(n_params, kNeverFetched);
  selected_scratch_.assign(n_params, 0);
}

void Coordinator::check_param(int param) const {
  if (param < 0 || param >= num_params()) {
    throw std::out_of_range("Coordinator: parameter " + std::to_string(param) + " out of range");
  }
}

void Coordinator::check_module(int module) const {
  if (module < 0 || module >= num_modules()) {
    throw std::out_of_range("Coordinator: module " + std::to_string(module) + " out of range");
  }
}

ParamState Coordinator::param_state(int param) const {
  check_param(param);
  return state_[param];
}

bool Coordinator::is_persistent(int param) const {
  check_param(param);
  return persistent_[param];
}

bool Coordinator::in_flight(int param) const {
  check_param(param);
  return registry_handle_[param] >= 0;
}

void Coordinator::set_prefetch_bucket_numel(std::int64_t numel) {
  if (numel < 0) throw std::invalid_argument("Coordinator: prefetch bucket must be >= 0");
  prefetch_bucket_numel_ = numel;
}

// ---------------------------------------------------------------------------------------------
// Gathers and waits

std::int64_t Coordinator::new_handle(std::vector<int> params) {
  const std::int64_t id = next_handle_id_++;
  Handle handle;
  handle.param_ids = std::move(params);
  handles_.push_back(std::move(handle));
  return id;
}

void Coordinator::erase_handle(std::int64_t id) {
  Handle& h = handle(id);
  h.live = false;
  h.gather_ids = {};
  h.param_ids = {};
  while (!handles_.empty() && !handles_.front().live) {
    handles_.pop_front();
    ++handles_base_;
  }
}

void Coordinator::emit_gather(std::int64_t handle, std::vector<int> params, GatherKind kind,
                              Plan& plan) {
  Gather gather;
  gather.gather_id = next_gather_id_++;
  gather.handle_id = handle;
  gather.kind = kind;
  gather.dtype = param_dtype_[params.front()];
  gather.collective = config_.world_size > 1;
  for (const int p : params) {
    gather.numel += param_numel_[p];
    gather.padded_numel += padded(param_numel_[p], config_.world_size);
  }
  gather.param_ids = std::move(params);
  this->handle(handle).gather_ids.push_back(gather.gather_id);
  plan.actions.emplace_back(std::move(gather));
}

// __all_gather_params + all_gather_coalesced (partition_parameters.py): only NOT_AVAILABLE
// parameters are submitted; n_available grows by their full numel; the params are sorted by
// ds_id; one collective per parameter (sequential, or a single parameter) or one per dtype group,
// dtype groups in order of first appearance (a dict filled in ds_id order). One handle covers the
// whole call (MultipleAllGatherHandles), except in sequential mode, where each parameter has its
// own. Quantized (qwZ), hpZ and NVMe splits are not modelled (scenarios that set them are refused).
void Coordinator::all_gather(std::vector<int> params, GatherKind kind, Plan& plan) {
  std::erase_if(params, [&](int p) { return state_[p] != ParamState::kNotAvailable; });
  if (params.empty()) return;
  std::sort(params.begin(), params.end());
  params.erase(std::unique(params.begin(), params.end()), params.end());
  for (const int p : params) {
    if (registry_handle_[p] >= 0) {
      throw std::logic_error("Coordinator: parameter " + std::to_string(p) +
                             " already in the in-flight registry");
    }
    n_available_numel_ += param_numel_[p];
    state_[p] = ParamState::kInflight;
  }
  // Registry entries in parameter order, each counted on its handle.
  auto register_param = [&](int p, std::int64_t handle_id) {
    registry_handle_[p] = handle_id;
    registry_order_.push_back(p);
    ++handle(handle_id).registry_refs;
  };
  if (config_.allgather_sequential) {
    for (const int p : params) {
      const std::int64_t handle_id = new_handle({p});
      emit_gather(handle_id, {p}, kind, plan);
      register_param(p, handle_id);
    }
    return;
  }
  const std::int64_t handle_id = new_handle(params);
  for (const int p : params) register_param(p, handle_id);
  const DType first = param_dtype_[params.front()];
  if (std::all_of(params.begin(), params.end(), [&](int p) { return param_dtype_[p] == first; })) {
    emit_gather(handle_id, std::move(params), kind, plan);  // one dtype group: the whole call
    return;
  }
  std::vector<DType> order;
  for (const int p : params) {
    if (std::find(order.begin(), order.end(), param_dtype_[p]) == order.end()) {
      order.push_back(param_dtype_[p]);
    }
  }
  for (const DType dtype : order) {
    std::vector<int> group;
    for (const int p : params) {
      if (param_dtype_[p] == dtype) group.push_back(p);
    }
    emit_gather(handle_id, std::move(group), kind, plan);
  }
}

// Pop one registry entry and wait on its handle. The first wait on a handle makes all of the
// handle's parameters AVAILABLE (they stay in the registry until their own module pops them).
void Coordinator::pop_and_wait(int param, WaitContext context, Plan& plan) {
  const std::int64_t handle_id = registry_handle_[param];
  registry_handle_[param] = -1;
  registry_order_.erase(std::find(registry_order_.begin(), registry_order_.end(), param));
  Handle& handle = this->handle(handle_id);
  Wait wait;
  wait.param_id = param;
  wait.handle_id = handle_id;
  wait.gather_ids = handle.gather_ids;
  wait.context = context;
  wait.first_on_handle = !handle.complete;
  if (!handle.complete) {
    handle.complete = true;
    for (const int p : handle.param_ids) {
      if (state_[p] == ParamState::kInflight) state_[p] = ParamState::kAvailable;
    }
  }
  wait.last_on_handle = --handle.registry_refs == 0;
  if (wait.last_on_handle) erase_handle(handle_id);
  plan.actions.emplace_back(std::move(wait));
}

// __release_param: partitions only an AVAILABLE parameter that no active module uses.
void Coordinator::release_param(int param, Plan& plan) {
  if (state_[param] != ParamState::kAvailable || !active_modules_[param].empty()) return;
  state_[param] = ParamState::kNotAvailable;
  n_available_numel_ -= param_numel_[param];
  append_release(plan, param, param_numel_[param]);
}

// _clean_inflight_param_registry: wait every handle still registered and release its param
// (whatever its persistence), in registry insertion order.
void Coordinator::drain_inflight(Plan& plan) {
  const std::vector<int> entries = registry_order_;
  for (const int p : entries) {
    pop_and_wait(p, WaitContext::kDrain, plan);
    release_param(p, plan);
  }
}

// ---------------------------------------------------------------------------------------------
// Trace

void Coordinator::clear_per_iteration_state() {
  queue_pos_ = 0;
  std::fill(most_recent_step_.begin(), most_recent_step_.end(), kNeverFetched);
  step_id_ = 0;
  n_available_numel_ = 0;
}

Plan Coordinator::reset_step() {
  Plan plan;
  drain_inflight(plan);
  if (mode_ != TraceMode::kComplete) {
    if (mode_ == TraceMode::kRecord) {
      // Recording succeeded: build the parameter trace, freeze, COMPLETE. DeepSpeed checks the
      // module list, then the param-id list and the step-id list, across ranks.
      plan.actions.emplace_back(RankTraceCheck{3});
      trace_ = ParameterTrace::build(recorded_modules_, module_params_);
      mode_ = TraceMode::kComplete;
    } else {
      // INVALID: check the (empty) module list across ranks, record the next iteration.
      plan.actions.emplace_back(RankTraceCheck{1});
      recorded_modules_.clear();
      trace_ = ParameterTrace{};
      mode_ = TraceMode::kRecord;
    }
  }
  clear_per_iteration_state();
  return plan;
}

// _invalidate_trace: INVALID, clear the trace structures, drain the in-flight registry.
void Coordinator::invalidate_trace(int module, Plan& plan) {
  TraceInvalidated marker;
  marker.step_id = step_id_;
  marker.trace_length = static_cast<int>(recorded_modules_.size());
  marker.expected_module = static_cast<std::size_t>(step_id_) < recorded_modules_.size()
                               ? recorded_modules_[static_cast<std::size_t>(step_id_)]
                               : -1;
  marker.actual_module = module;
  plan.actions.emplace_back(marker);
  mode_ = TraceMode::kInvalid;
  recorded_modules_.clear();
  trace_ = ParameterTrace{};
  queue_pos_ = 0;
  std::fill(most_recent_step_.begin(), most_recent_step_.end(), kNeverFetched);
  drain_inflight(plan);
}

// ---------------------------------------------------------------------------------------------
// Fetch and release

FetchPlan Coordinator::fetch_sub_module(int module, Phase phase) {
  check_module(module);
  FetchPlan out;
  Plan& plan = out.plan;
  plan.actions.reserve(8);  // a typical fetch: gather, wait, compute wait, round, prefetch
  FetchInfo& info = out.info;
  info.module = module;
  info.phase = phase;
  info.step_id = step_id_;

  // trace_prologue
  if (mode_ == TraceMode::kComplete) {
    const auto& trace = recorded_modules_;
    if (static_cast<std::size_t>(step_id_) >= trace.size() ||
        trace[static_cast<std::size_t>(step_id_)] != module) {
      invalidate_trace(module, plan);
      info.trace_invalidated = true;
    }
  }
  // record_module
  if (mode_ == TraceMode::kRecord) recorded_modules_.push_back(module);
  info.trace_mode = mode_;

  const std::vector<int>& params = module_params_[module];
  for (const int p : params) {
    ParamCount& bucket = registry_handle_[p] >= 0                  ? info.in_flight
                         : state_[p] == ParamState::kNotAvailable ? info.on_demand
                                                                  : info.available;
    ++bucket.params;
    bucket.numel += param_numel_[p];
  }

  // A. On-demand gather of whatever is not available; not limited by bucket or max_live.
  if (std::any_of(params.begin(), params.end(), [&](int p) { return state_[p] == ParamState::kNotAvailable; })) {
    all_gather(params, GatherKind::kOnDemand, plan);
  }

  // B. Wait loop: mark the module active on each param; wait on each registered one.
  for (const int p : params) {
    if (std::find(active_modules_[p].begin(), active_modules_[p].end(), module) == active_modules_[p].end()) {
      active_modules_[p].push_back(module);
    }
    if (registry_handle_[p] >= 0) pop_and_wait(p, WaitContext::kFetch, plan);
  }
  // C. compute stream waits for the all-gather stream.
  plan.actions.emplace_back(ComputeWaitsForAllGather{});

  if (mode_ == TraceMode::kComplete) {
    // D. Pop this module's own entries off the queue unless a prefetch scan already passed
    // them ("most recent step fetched for" >= this step).
    std::vector<int>& expected = expected_scratch_;
    expected.clear();
    for (const int p : params) {
      if (most_recent_step_[p] < step_id_) expected.push_back(p);
    }
    std::vector<int>& discarded = discarded_scratch_;
    discarded.clear();
    const auto& queue = trace_.params();
    while (queue_pos_ < queue.size() && discarded.size() < expected.size()) {
      const ParamInTrace& entry = queue[queue_pos_++];
      most_recent_step_[entry.param_id] = entry.step_id;
      if (std::find(discarded.begin(), discarded.end(), entry.param_id) == discarded.end()) {
        discarded.push_back(entry.param_id);
      }
    }
    std::sort(discarded.begin(), discarded.end());
    if (discarded != expected) {
      throw std::logic_error("Coordinator: tracing error at step " + std::to_string(step_id_) +
                             ", module " + std::to_string(module) +
                             ": the fetch queue does not start with this module's parameters");
    }

    // E. Prefetch round: pop entries until the selected numel reaches the budget (checked
    // before each pop, so it can overshoot by one parameter); entries already available or in
    // flight, and duplicates, are popped for free.
    if (prefetch_bucket_numel_ > 0) {
      const std::int64_t budget =
          std::min(config_.max_live_numel - n_available_numel_, prefetch_bucket_numel_);
      plan.actions.emplace_back(PrefetchRound{budget});
      std::vector<int> selected;
      std::int64_t numel = 0;
      while (queue_pos_ < queue.size() && numel < budget) {
        const ParamInTrace& entry = queue[queue_pos_++];
        const int p = entry.param_id;
        const bool take = state_[p] == ParamState::kNotAvailable && !selected_scratch_[p];
        most_recent_step_[p] = std::max<std::int64_t>(most_recent_step_[p], entry.step_id);
        if (take) {
          selected_scratch_[p] = 1;
          selected.push_back(p);
          numel += param_numel_[p];
        }
      }
      for (const int p : selected) selected_scratch_[p] = 0;
      if (numel > 0) {
        info.prefetched.params = static_cast<int>(selected.size());
        info.prefetched.numel = numel;
        all_gather(std::move(selected), GatherKind::kPrefetch, plan);
      }
    }
  }

  ++step_id_;
  info.n_available_numel = n_available_numel_;
  return out;
}

// __params_to_release (COMPLETE only), cached on (module, step) for the coordinator's life.
const std::vector<int>& Coordinator::params_to_release(int module, int step) {
  const auto step_index = static_cast<std::size_t>(step);
  if (release_cache_.size() <= step_index) release_cache_.resize(step_index + 1);
  for (const auto& [cached_module, cached] : release_cache_[step_index]) {
    if (cached_module == module) return cached;
  }
  std::vector<int> candidates;
  for (const int p : module_params_[module]) {
    // Not persistent, and no prefetch scan has already passed a later use.
    if (!persistent_[p] && most_recent_step_[p] <= step) candidates.push_back(p);
  }
  // Keep whatever the next max_reuse_distance numel of the trace uses again (the check is
  // before each module, so 0 scans nothing).
  std::int64_t traversed = 0;
  for (std::size_t i = static_cast<std::size_t>(step); i < recorded_modules_.size(); ++i) {
    // Nothing left to keep: scanning further cannot change the result.
    if (traversed >= config_.max_reuse_distance_numel || candidates.empty()) break;
    for (const int p : module_params_[recorded_modules_[i]]) {
      std::erase(candidates, p);
      traversed += param_numel_[p];
    }
  }
  return release_cache_[step_index].emplace_back(module, std::move(candidates)).second;
}

Plan Coordinator::release_sub_module(int module, Phase /*phase*/) {
  check_module(module);
  Plan plan;
  // In RECORD / INVALID every direct parameter is a candidate, persistent ones included.
  const std::vector<int>& candidates = mode_ == TraceMode::kComplete
                                           ? params_to_release(module, step_id_)
                                           : module_params_[module];
  for (const int p : module_params_[module]) {
    std::erase(active_modules_[p], module);
    if (std::find(candidates.begin(), candidates.end(), p) != candidates.end()) {
      release_param(p, plan);
    }
  }
  return plan;
}

// ---------------------------------------------------------------------------------------------
// Optimizer step

Plan Coordinator::release_and_reset_all() {
  Plan plan;
  for (int p = 0; p < num_params(); ++p) {
    if (registry_handle_[p] >= 0) pop_and_wait(p, WaitContext::kDrain, plan);
    active_modules_[p].clear();
    release_param(p, plan);
  }
  return plan;
}

// stage3 _post_step: persistent_parameters[0].all_gather(persistent_parameters), a synchronous
// call over the not-available ones; the params become AVAILABLE without touching n_available
// (the coordinator is bypassed) and without entering the in-flight registry.
Plan Coordinator::regather_persistent() {
  Plan plan;
  std::vector<int> params;
  for (int p = 0; p < num_params(); ++p) {
    if (persistent_[p] && state_[p] == ParamState::kNotAvailable) params.push_back(p);
  }
  if (params.empty()) return plan;
  std::vector<std::vector<int>> per_handle;
  if (config_.allgather_sequential || params.size() == 1) {
    for (const int p : params) per_handle.push_back({p});
  } else {
    per_handle.push_back(params);
  }
  for (auto& handle_params : per_handle) {
    const std::int64_t handle_id = new_handle(handle_params);
    std::vector<DType> order;
    for (const int p : handle_params) {
      if (std::find(order.begin(), order.end(), param_dtype_[p]) == order.end()) {
        order.push_back(param_dtype_[p]);
      }
    }
    for (const DType dtype : order) {
      std::vector<int> group;
      for (const int p : handle_params) {
        if (param_dtype_[p] == dtype) group.push_back(p);
      }
      emit_gather(handle_id, std::move(group), GatherKind::kPersistentRegather, plan);
    }
    Wait wait;
    wait.param_id = -1;
    wait.handle_id = handle_id;
    wait.gather_ids = handle(handle_id).gather_ids;
    wait.context = WaitContext::kBlocking;
    wait.first_on_handle = true;
    wait.last_on_handle = true;
    plan.actions.emplace_back(std::move(wait));
    for (const int p : handle_params) state_[p] = ParamState::kAvailable;
    erase_handle(handle_id);
  }
  return plan;
}

Plan Coordinator::optimizer_step() {
  Plan plan = release_and_reset_all();
  plan.actions.emplace_back(OptimizerUpdate{});
  Plan regather = regather_persistent();
  for (auto& action : regather.actions) plan.actions.push_back(std::move(action));
  return plan;
}

}  // namespace prefetchlab::core
