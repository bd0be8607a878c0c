#pragma once
// Structural checks of a Chrome trace-event document (what ChromeTraceWriter produces), used by
// the tests that trace.json is well formed and viewable:
//
// - the document is {"traceEvents": [...] , ...} or a bare array of events;
// - every event is an object with a string "ph";
// - metadata ("M") events have pid, tid and name; their ts is optional (the format does not
//   require one; ChromeTraceWriter writes 0.000 anyway), but if present it must be a number;
// - every other event has numeric ts, and pid and tid (numbers or strings);
// - complete ("X") events have a numeric, non-negative dur;
// - complete events on one track (pid, tid) are disjoint or properly nested: no two spans
//   partially overlap. Touching boundaries (one ends where the next starts, or a child ends
//   exactly where its parent ends) are fine; so are zero-length spans.
//   Begin/end ("B"/"E") pairs are not matched; ChromeTraceWriter does not emit them.
//
// Times are compared in integer nanoseconds. nlohmann::json keeps no number text, so a
// fractional ts/dur (µs) becomes llround(value * 1000). For a value written from integer ns with
// three decimals this recovers the exact ns whenever |value| < 2^51 ns (about 26 days of
// simulated time): the parsed double is within half an ulp of the decimal, and the product
// within another ulp, together less than 0.5 ns below that bound. Integer-typed ts/dur are
// converted exactly.
//
// At most `kMaxTraceProblems` problems are listed; beyond that one final line says how many
// more were found.
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace prefetchlab::sim {

inline constexpr std::size_t kMaxTraceProblems = 1000;

// Empty when the trace passes every check above. Each problem names the event by its index in
// traceEvents (and, for overlaps, both events, their track and their spans in µs).
std::vector<std::string> validate_chrome_trace(const nlohmann::json& trace);

}  // namespace prefetchlab::sim
