#include "sim/trace/chrome_trace.hpp"

#include <stdexcept>

#include "core/io/json_file.hpp"

namespace prefetchlab::sim {
namespace {

template <class Json>
void append_json(std::string& out, const Json& value) {
  // Same settings as core::write_json_atomically: invalid UTF-8 is replaced, not fatal.
  out += value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void append_string(std::string& out, std::string_view text) {
  append_json(out, nlohmann::json(std::string(text)));
}

// Appends `,\n{"name":NAME,"ph":"PH"` — the common head of every event.
void open_event(std::string& out, std::string_view name, std::string_view ph) {
  out += ",\n{\"name\":";
  append_string(out, name);
  out += ",\"ph\":\"";
  out += ph;
  out += '"';
}

void append_ts(std::string& out, TimeNs time_ns) {
  out += ",\"ts\":";
  append_ns_as_us(out, time_ns);
}

void append_ids(std::string& out, int pid, int tid) {
  out += ",\"pid\":";
  out += std::to_string(pid);
  out += ",\"tid\":";
  out += std::to_string(tid);
}

void close_event(std::string& out, const nlohmann::ordered_json& args) {
  if (!args.is_null()) {
    out += ",\"args\":";
    append_json(out, args);
  }
  out += '}';
}

void require_args_object(const nlohmann::ordered_json& args, std::string_view name) {
  if (!args.is_null() && !args.is_object()) {
    throw std::invalid_argument("trace event '" + std::string(name) +
                                "': args must be a JSON object, got " +
                                std::string(args.type_name()));
  }
}

}  // namespace

void append_ns_as_us(std::string& out, TimeNs time_ns) {
  // Work on the unsigned magnitude so INT64_MIN is formatted correctly too.
  std::uint64_t magnitude = static_cast<std::uint64_t>(time_ns);
  if (time_ns < 0) {
    out += '-';
    magnitude = ~magnitude + 1;
  }
  const std::uint64_t whole_us = magnitude / 1000;
  const auto frac_ns = static_cast<unsigned>(magnitude % 1000);
  out += std::to_string(whole_us);
  out += '.';
  out += static_cast<char>('0' + frac_ns / 100);
  out += static_cast<char>('0' + frac_ns / 10 % 10);
  out += static_cast<char>('0' + frac_ns % 10);
}

std::string format_ns_as_us(TimeNs time_ns) {
  std::string out;
  append_ns_as_us(out, time_ns);
  return out;
}

void ChromeTraceWriter::name_process(int pid, std::string_view name,
                                     std::optional<int> sort_index) {
  open_event(metadata_, "process_name", "M");
  append_ts(metadata_, 0);
  append_ids(metadata_, pid, 0);
  close_event(metadata_, nlohmann::ordered_json{{"name", std::string(name)}});
  open_event(metadata_, "process_sort_index", "M");
  append_ts(metadata_, 0);
  append_ids(metadata_, pid, 0);
  close_event(metadata_, nlohmann::ordered_json{{"sort_index", sort_index.value_or(pid)}});
  metadata_count_ += 2;
}

void ChromeTraceWriter::name_thread(int pid, int tid, std::string_view name,
                                    std::optional<int> sort_index) {
  open_event(metadata_, "thread_name", "M");
  append_ts(metadata_, 0);
  append_ids(metadata_, pid, tid);
  close_event(metadata_, nlohmann::ordered_json{{"name", std::string(name)}});
  open_event(metadata_, "thread_sort_index", "M");
  append_ts(metadata_, 0);
  append_ids(metadata_, pid, tid);
  close_event(metadata_, nlohmann::ordered_json{{"sort_index", sort_index.value_or(tid)}});
  metadata_count_ += 2;
}

void ChromeTraceWriter::complete(int pid, int tid, std::string_view name, TimeNs start_ns,
                                 TimeNs duration_ns, const nlohmann::ordered_json& args) {
  if (duration_ns < 0) {
    throw std::invalid_argument("trace event '" + std::string(name) + "': negative duration " +
                                std::to_string(duration_ns) + " ns");
  }
  require_args_object(args, name);
  open_event(events_, name, "X");
  append_ts(events_, start_ns);
  events_ += ",\"dur\":";
  append_ns_as_us(events_, duration_ns);
  append_ids(events_, pid, tid);
  close_event(events_, args);
  ++event_count_;
}

void ChromeTraceWriter::instant(int pid, int tid, std::string_view name, TimeNs time_ns,
                                const nlohmann::ordered_json& args) {
  require_args_object(args, name);
  open_event(events_, name, "i");
  events_ += ",\"s\":\"t\"";
  append_ts(events_, time_ns);
  append_ids(events_, pid, tid);
  close_event(events_, args);
  ++event_count_;
}

void ChromeTraceWriter::counter(int pid, std::string_view name, TimeNs time_ns,
                                const nlohmann::ordered_json& series) {
  if (!series.is_object() || series.empty()) {
    throw std::invalid_argument("counter '" + std::string(name) +
                                "': series must be a non-empty object of numbers");
  }
  for (const auto& [key, value] : series.items()) {
    if (!value.is_number()) {
      throw std::invalid_argument("counter '" + std::string(name) + "': series '" + key +
                                  "' is not a number");
    }
  }
  open_event(events_, name, "C");
  append_ts(events_, time_ns);
  append_ids(events_, pid, 0);
  close_event(events_, series);
  ++event_count_;
}

std::string ChromeTraceWriter::render() const {
  std::string other;
  append_json(other, other_data_);
  std::string doc;
  doc.reserve(metadata_.size() + events_.size() + other.size() + 64);
  doc += "{\"traceEvents\":[";
  std::string_view meta = metadata_;
  std::string_view events = events_;
  // Every stored event starts with ",\n"; the first one written loses its comma.
  if (!meta.empty()) {
    meta.remove_prefix(1);
  } else if (!events.empty()) {
    events.remove_prefix(1);
  }
  doc += meta;
  doc += events;
  doc += "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":";
  doc += other;
  doc += "}\n";
  return doc;
}

void ChromeTraceWriter::write(const std::filesystem::path& path) const {
  core::write_text_atomically(path, render());
}

}  // namespace prefetchlab::sim
