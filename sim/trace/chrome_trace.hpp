#pragma once
// Chrome trace-event JSON (the "JSON Object Format" that chrome://tracing, Perfetto and
// speedscope read) for trace.json:
//
//   {"traceEvents":[
//   {"name":"process_name","ph":"M","ts":0.000,"pid":0,"tid":0,"args":{"name":"rank 0"}},
//   ...
//   {"name":"all_gather","ph":"X","ts":1234.567,"dur":10.000,"pid":0,"tid":2,"args":{...}}
//   ],
//   "displayTimeUnit":"ns",
//   "otherData":{...}}
//
// One event per line, metadata (M) events first, then every other event in the order it was
// added: the same calls give the same bytes on every run and platform.
//
// Times: the simulator keeps integer nanoseconds; the format wants microseconds. ts and dur are
// written as the integer ns formatted as µs with exactly three decimals (1234567 ns ->
// "1234.567"), never through a double, so nothing is rounded. Every event, metadata included,
// carries a ts (metadata at 0.000): the format does not require it on M events, but every viewer
// accepts it and it lets a plain "every event has ph/ts/pid/tid" check hold.
//
// Memory: a run emits a few hundred thousand events. Each event is serialised to its final JSON
// text as soon as it is added and appended to one contiguous buffer (~150-250 bytes per event,
// no per-event heap block). Keeping nlohmann::json objects instead would cost several heap
// nodes and ~1 KiB per event, and they would be serialised to exactly this text at the end anyway.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "sim/engine/event_engine.hpp"

namespace prefetchlab::sim {

// `time_ns` as microseconds with exactly three decimals: 0 -> "0.000", 1 -> "0.001",
// 1234567 -> "1234.567", -1500 -> "-1.500". Exact for every int64 value.
std::string format_ns_as_us(TimeNs time_ns);
// Same, appended to `out` (no temporary string).
void append_ns_as_us(std::string& out, TimeNs time_ns);

class ChromeTraceWriter {
 public:
  // Metadata. The sort index orders tracks in the viewer (lower first); it defaults to the pid
  // (processes) or the tid (threads), so ranks appear in rank order and, within a rank, tracks
  // in tid order. Naming the same process or thread twice adds a second event; viewers keep the
  // last one.
  void name_process(int pid, std::string_view name, std::optional<int> sort_index = std::nullopt);
  void name_thread(int pid, int tid, std::string_view name,
                   std::optional<int> sort_index = std::nullopt);

  // A complete ("X") event: a span [start_ns, start_ns + duration_ns) on track (pid, tid).
  // `args` must be a JSON object or null (null: no "args" key). Throws std::invalid_argument
  // for a negative duration or non-object args.
  void complete(int pid, int tid, std::string_view name, TimeNs start_ns, TimeNs duration_ns,
                const nlohmann::ordered_json& args = nullptr);

  // An instant ("i") event with thread scope ("s":"t"): a mark on track (pid, tid).
  void instant(int pid, int tid, std::string_view name, TimeNs time_ns,
               const nlohmann::ordered_json& args = nullptr);

  // A counter ("C") event: `series` is an object of numbers, one per series shown on the
  // counter track named `name` in process `pid`, e.g. {"allocated": 123, "reserved": 456}.
  // Counters belong to the process; they are written with tid 0 so every event has a tid.
  // Throws std::invalid_argument unless `series` is a non-empty object of numbers.
  void counter(int pid, std::string_view name, TimeNs time_ns,
               const nlohmann::ordered_json& series);

  // Written as the document's "otherData" object (scenario name, seed, tool version...).
  nlohmann::ordered_json& other_data() { return other_data_; }
  const nlohmann::ordered_json& other_data() const { return other_data_; }

  std::size_t metadata_count() const { return metadata_count_; }
  std::size_t event_count() const { return event_count_; }  // non-metadata events

  // The whole document (ends with a newline).
  std::string render() const;
  // render(), written atomically (temporary file + rename, see core/io/json_file.hpp).
  void write(const std::filesystem::path& path) const;

 private:
  // Both buffers hold events as ",\n{...}": each event preceded by its separator; render()
  // drops the very first comma.
  std::string metadata_;
  std::string events_;
  std::size_t metadata_count_ = 0;
  std::size_t event_count_ = 0;
  nlohmann::ordered_json other_data_ = nlohmann::ordered_json::object();
};

}  // namespace prefetchlab::sim
