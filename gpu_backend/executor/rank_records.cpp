#include "gpu_backend/executor/rank_records.hpp"

#include <stdexcept>

#include <nlohmann/json.hpp>

namespace prefetchlab::gpu {
namespace {

using nlohmann::json;

// Every field of the fold's input, in one fixed order (arrays keep the document small: a rank
// sends thousands of spans and samples).
constexpr std::int64_t core::RankIterationTimes::* kTimes[] = {
    &core::RankIterationTimes::start_ns,          &core::RankIterationTimes::forward_end_ns,
    &core::RankIterationTimes::backward_end_ns,   &core::RankIterationTimes::end_ns,
    &core::RankIterationTimes::compute_ns,        &core::RankIterationTimes::forward_stall_ns,
    &core::RankIterationTimes::backward_stall_ns, &core::RankIterationTimes::exposed_comm_ns,
    &core::RankIterationTimes::all_gather_ns,     &core::RankIterationTimes::reduce_scatter_ns,
    &core::RankIterationTimes::all_gather_count,  &core::RankIterationTimes::reduce_scatter_count,
    &core::RankIterationTimes::gathered_numel,    &core::RankIterationTimes::bucket_numel,
    &core::RankIterationTimes::peak_gathered_param_bytes, &core::RankIterationTimes::peak_allocated_bytes,
    &core::RankIterationTimes::peak_reserved_bytes};

json span_json(const TimelineSpan& s) {
  return json::array({static_cast<int>(s.kind), s.rank, s.iteration, s.module, static_cast<int>(s.phase), s.start_ns, s.end_ns,
                      s.bytes, s.element_bytes});
}
TimelineSpan span_from(const json& j) {
  TimelineSpan s;
  s.kind = static_cast<TimelineSpan::Kind>(j.at(0).get<int>());
  s.rank = j.at(1).get<int>();
  s.iteration = j.at(2).get<int>();
  s.module = j.at(3).get<int>();
  s.phase = static_cast<core::Phase>(j.at(4).get<int>());
  s.start_ns = j.at(5).get<std::int64_t>();
  s.end_ns = j.at(6).get<std::int64_t>();
  s.bytes = j.at(7).get<std::int64_t>();
  s.element_bytes = j.at(8).get<std::int64_t>();
  return s;
}

json sample_json(const core::TimingSample& s) {
  return json::array({s.iteration, s.rank, static_cast<int>(s.phase), s.wait_ns, s.interval_ns, s.extra});
}
core::TimingSample sample_from(const json& j) {
  core::TimingSample s;
  s.iteration = j.at(0).get<int>();
  s.rank = j.at(1).get<int>();
  s.phase = static_cast<core::Phase>(j.at(2).get<int>());
  s.wait_ns = j.at(3).get<std::int64_t>();
  s.interval_ns = j.at(4).get<std::int64_t>();
  s.extra = j.at(5).get<std::vector<std::int64_t>>();
  return s;
}

}  // namespace

std::string rank_records_to_json(const RankRecords& r) {
  json iterations = json::array();
  for (const auto& it : r.iterations) {
    json times = json::array();
    for (auto field : kTimes) times.push_back(it.times.*field);
    json spans = json::array(), samples = json::array();
    for (const auto& s : it.timeline) spans.push_back(span_json(s));
    for (const auto& s : it.samples) samples.push_back(sample_json(s));
    iterations.push_back({{"iteration", it.iteration},
                          {"optimizer_step", it.optimizer_step},
                          {"trace_mode", static_cast<int>(it.trace_mode)},
                          {"times", times},
                          {"timeline", spans},
                          {"samples", samples}});
  }
  json memory = json::array(), calls = json::array();
  for (const auto& p : r.memory) memory.push_back(json::array({p.time_ns, p.rank, p.allocated_bytes, p.reserved_bytes}));
  for (const auto& c : r.call_log) calls.push_back(json::array({c.rank, c.iteration, static_cast<int>(c.tag), c.host_blocked_ns}));
  return json{{"rank_records", 1},
              {"rank", r.rank},
              {"iterations", iterations},
              {"memory", memory},
              {"call_log", calls},
              {"plan_log", r.plan_log}}
      .dump();
}

RankRecords rank_records_from_json(const std::string& text) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || doc.value("rank_records", 0) != 1) {
    throw std::runtime_error("a rank's records are not a rank_records document of version 1");
  }
  try {
    RankRecords r;
    r.rank = doc.at("rank").get<int>();
    for (const auto& it : doc.at("iterations")) {
      RankIterationRecord record;
      record.iteration = it.at("iteration").get<int>();
      record.optimizer_step = it.at("optimizer_step").get<bool>();
      record.trace_mode = static_cast<core::TraceMode>(it.at("trace_mode").get<int>());
      const json& times = it.at("times");
      if (times.size() != std::size(kTimes)) throw std::runtime_error("an iteration's times have the wrong length");
      for (std::size_t i = 0; i < std::size(kTimes); ++i) record.times.*kTimes[i] = times.at(i).get<std::int64_t>();
      for (const auto& s : it.at("timeline")) record.timeline.push_back(span_from(s));
      for (const auto& s : it.at("samples")) record.samples.push_back(sample_from(s));
      r.iterations.push_back(std::move(record));
    }
    for (const auto& p : doc.at("memory")) {
      r.memory.push_back({p.at(0).get<std::int64_t>(), p.at(1).get<int>(), p.at(2).get<std::int64_t>(), p.at(3).get<std::int64_t>()});
    }
    for (const auto& c : doc.at("call_log")) {
      r.call_log.push_back({c.at(0).get<int>(), c.at(1).get<int>(), static_cast<SyncTag>(c.at(2).get<int>()), c.at(3).get<std::int64_t>()});
    }
    r.plan_log = doc.at("plan_log").get<std::vector<std::string>>();
    return r;
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("a rank's records are malformed: ") + e.what());
  }
}

}  // namespace prefetchlab::gpu
