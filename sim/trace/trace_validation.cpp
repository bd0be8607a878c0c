#include "sim/trace/trace_validation.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "sim/trace/chrome_trace.hpp"

namespace prefetchlab::sim {
namespace {

class Problems {
 public:
  void add(std::string problem) {
    if (list_.size() < kMaxTraceProblems) {
      list_.push_back(std::move(problem));
    } else {
      ++dropped_;
    }
  }
  std::vector<std::string> finish() && {
    if (dropped_ > 0) list_.push_back("... and " + std::to_string(dropped_) + " more problems");
    return std::move(list_);
  }

 private:
  std::vector<std::string> list_;
  std::size_t dropped_ = 0;
};

std::string describe(std::size_t index, const nlohmann::json& event) {
  std::string text = "event " + std::to_string(index);
  const auto name = event.find("name");
  if (name != event.end() && name->is_string()) {
    text += " \"" + name->get<std::string>() + "\"";
  }
  return text;
}

// A ts or dur (µs) as integer ns; nullopt when it is not a number or does not fit in int64.
std::optional<std::int64_t> to_ns(const nlohmann::json& value) {
  constexpr std::int64_t kMaxUs = std::numeric_limits<std::int64_t>::max() / 1000;
  if (value.is_number_unsigned()) {
    const auto us = value.get<std::uint64_t>();
    if (us > static_cast<std::uint64_t>(kMaxUs)) return std::nullopt;
    return static_cast<std::int64_t>(us) * 1000;
  }
  if (value.is_number_integer()) {
    const auto us = value.get<std::int64_t>();
    if (us > kMaxUs || us < -kMaxUs) return std::nullopt;
    return us * 1000;
  }
  if (value.is_number_float()) {
    const double ns = value.get<double>() * 1000.0;
    // 9.2e18 is just inside int64; llround is undefined beyond.
    if (!std::isfinite(ns) || std::fabs(ns) >= 9.2e18) return std::nullopt;
    return static_cast<std::int64_t>(std::llround(ns));
  }
  return std::nullopt;
}

bool valid_id(const nlohmann::json& id) {
  return id.is_number_integer() || id.is_number_unsigned() || id.is_string();
}

struct Span {
  std::int64_t start_ns;
  std::int64_t end_ns;
  std::size_t index;  // into traceEvents
};

std::string span_text(const Span& span) {
  // Appended piece by piece: GCC 12's -Wrestrict misfires on `"[" + std::string` at -O3.
  std::string text = "[";
  append_ns_as_us(text, span.start_ns);
  text += ", ";
  append_ns_as_us(text, span.end_ns);
  text += ')';
  return text;
}

}  // namespace

std::vector<std::string> validate_chrome_trace(const nlohmann::json& trace) {
  Problems problems;
  const nlohmann::json* events = &trace;
  if (trace.is_object()) {
    const auto found = trace.find("traceEvents");
    if (found == trace.end()) {
      problems.add("the document has no \"traceEvents\"");
      return std::move(problems).finish();
    }
    events = &*found;
  }
  if (!events->is_array()) {
    problems.add("\"traceEvents\" is not an array");
    return std::move(problems).finish();
  }

  // Track key: pid and tid as JSON text (they may be numbers or strings); std::map keeps the
  // report order deterministic.
  std::map<std::pair<std::string, std::string>, std::vector<Span>> tracks;

  for (std::size_t i = 0; i < events->size(); ++i) {
    const nlohmann::json& event = (*events)[i];
    if (!event.is_object()) {
      problems.add("event " + std::to_string(i) + " is not an object");
      continue;
    }
    const std::string who = describe(i, event);
    const auto ph = event.find("ph");
    if (ph == event.end() || !ph->is_string()) {
      problems.add(who + (ph == event.end() ? ": missing \"ph\"" : ": \"ph\" is not a string"));
      continue;
    }
    const bool metadata = *ph == "M";
    bool ok = true;
    for (const char* key : {"pid", "tid"}) {
      const auto id = event.find(key);
      if (id == event.end()) {
        problems.add(who + ": missing \"" + key + "\"");
        ok = false;
      } else if (!valid_id(*id)) {
        problems.add(who + ": \"" + key + "\" is neither an integer nor a string");
        ok = false;
      }
    }
    if (metadata) {
      const auto name = event.find("name");
      if (name == event.end() || !name->is_string()) {
        problems.add(who + ": metadata event without a string \"name\"");
      }
    }
    std::optional<std::int64_t> ts_ns;
    const auto ts = event.find("ts");
    if (ts == event.end()) {
      if (!metadata) {
        problems.add(who + ": missing \"ts\"");
        ok = false;
      }
    } else {
      ts_ns = to_ns(*ts);
      if (!ts_ns) {
        problems.add(who + ": \"ts\" is not a number in range");
        ok = false;
      }
    }
    if (*ph != "X") continue;

    const auto dur = event.find("dur");
    if (dur == event.end()) {
      problems.add(who + ": complete event without \"dur\"");
      continue;
    }
    const std::optional<std::int64_t> dur_ns = to_ns(*dur);
    if (!dur_ns) {
      problems.add(who + ": \"dur\" is not a number in range");
      continue;
    }
    if (*dur_ns < 0 || (dur->is_number_float() && dur->get<double>() < 0)) {
      problems.add(who + ": negative \"dur\" " + dur->dump());
      continue;
    }
    if (!ok) continue;
    if (*ts_ns > std::numeric_limits<std::int64_t>::max() - *dur_ns) {
      problems.add(who + ": ts + dur overflows");
      continue;
    }
    tracks[{event["pid"].dump(), event["tid"].dump()}].push_back(Span{*ts_ns, *ts_ns + *dur_ns, i});
  }

  // Per track: sort by (start, longest first); a stack holds the chain of open enclosing spans.
  // A span that starts inside the top of the stack must also end inside it.
  std::vector<const Span*> open;
  for (auto& [track, spans] : tracks) {
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
      if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
      if (a.end_ns != b.end_ns) return a.end_ns > b.end_ns;
      return a.index < b.index;
    });
    open.clear();
    for (const Span& span : spans) {
      while (!open.empty() && open.back()->end_ns <= span.start_ns) open.pop_back();
      if (!open.empty() && span.end_ns > open.back()->end_ns) {
        const Span& outer = *open.back();
        problems.add(describe(span.index, (*events)[span.index]) + " " + span_text(span) +
                     " partially overlaps " + describe(outer.index, (*events)[outer.index]) + " " +
                     span_text(outer) + " on track pid " + track.first + " tid " + track.second);
        // Not pushed: its parent chain stays as it was, so one bad span is reported once.
        continue;
      }
      open.push_back(&span);
    }
  }
  return std::move(problems).finish();
}

}  // namespace prefetchlab::sim
