// Streaming (SAX) reader of Kineto / torch.profiler Chrome traces: one pass over the text, one
// compact record per event kept, nothing else (docs/traces.md, "What is read").
#include <nlohmann/json.hpp>

#include <cmath>
#include <istream>
#include <algorithm>
#include <limits>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/input/input_error.hpp"
#include "core/trace_import/gzip_read_buffer.hpp"
#include "core/trace_import/trace_file.hpp"

namespace prefetchlab::core {
namespace {

using json = nlohmann::json;

constexpr std::size_t kMaxDepth = 64;  // Kineto nests 5 deep ("Input Dims" of a TensorList: 6)
constexpr const char* kExpected = "a torch.profiler (Kineto) Chrome trace: {\"traceEvents\": [...]} or a JSON array of events";

// Where a value sits, decided when its container opens.
enum class Context : std::uint8_t {
  kRoot,            // the top-level object
  kEvents,          // the traceEvents array (or a bare top-level array)
  kEvent,           // one event object
  kArgs,            // an event's args
  kInputDims,       // args "Input Dims" (nested arrays of sizes)
  kInputType,       // args "Input type": the first tensor's dtype names an old trace's collective
  kDistributed,     // distributedInfo
  kPgConfig,        // distributedInfo.pg_config
  kDeviceProperties,
  kDevice,          // one deviceProperties entry (its "name": the GPU the trace ran on)
  kSkip,            // anything else: walked, not kept
};

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

// Saturating: a hostile size stays a large number instead of wrapping around.
std::int64_t saturating_mul(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  return __builtin_mul_overflow(a, b, &out) ? kInt64Max : out;
}
std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  return __builtin_add_overflow(a, b, &out) ? kInt64Max : out;
}

// Microseconds as written (integer or decimal text) -> integer nanoseconds, rounding the 4th
// decimal. Returns false for text that is not a plain finite number.
bool microseconds_text_to_ns(const std::string& text, std::int64_t* ns) {
  std::size_t i = 0;
  const bool negative = !text.empty() && text[0] == '-';
  if (negative) ++i;
  std::int64_t whole = 0;
  std::size_t digits = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++digits) {
    whole = whole * 10 + (text[i] - '0');
    if (whole > (kInt64Max - 1000) / 1000) return false;  // would not fit in int64 nanoseconds
  }
  std::int64_t fraction_ns = 0;
  if (i < text.size() && text[i] == '.') {
    ++i;
    int place = 0;
    bool round_up = false;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++place) {
      if (place < 3) fraction_ns = fraction_ns * 10 + (text[i] - '0');
      if (place == 3) round_up = text[i] >= '5';
      ++digits;
    }
    for (int p = place; p < 3; ++p) fraction_ns *= 10;
    if (round_up) ++fraction_ns;
  }
  if (digits == 0) return false;
  if (i != text.size()) {
    // Exponent notation: rare in traces; through a double (exact enough for such values).
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() || !std::isfinite(value) || std::fabs(value) > 9.2e15) return false;
    *ns = static_cast<std::int64_t>(std::llround(value * 1000.0));
    return true;
  }
  const std::int64_t total = whole * 1000 + fraction_ns;
  *ns = static_cast<std::int64_t>(negative ? -total : total);
  return true;
}

// The event being read, before it is known to be kept.
struct PendingEvent {
  std::string name;
  std::string phase;
  std::string category;
  std::string pid;
  std::string tid;
  bool has_category = false;
  bool has_ts = false;
  std::int64_t ts_ns = 0;
  bool has_dur = false;
  std::int64_t dur_ns = 0;
  std::string flow_id;
  // args
  std::int64_t external_id = -1;
  std::int64_t correlation = -1;
  std::string collective_name;
  std::string dtype;
  std::string process_group;
  std::int64_t in_nelems = -1;
  std::int64_t out_nelems = -1;
  std::int64_t group_size = -1;
  std::int64_t seq = -1;
  std::int64_t input_dims_numel = -1;
  std::int64_t bytes = 0;
  std::int64_t total_allocated = -1;
  std::int64_t total_reserved = -1;
  int device_type = -1;
  std::string thread_name;  // args.name of a metadata event
  std::string input_type;   // args "Input type"[0]
};

// "Input Dims" sums: one frame per open array; a list of numbers is a shape (its product), a
// list of lists adds its members up (a TensorList or an op's several inputs).
struct DimsFrame {
  std::int64_t product = 1;
  std::int64_t numbers = 0;
  std::int64_t children = 0;
};

class TraceSax : public nlohmann::json_sax<json> {
 public:
  TraceSax(TraceFile* out, std::string label) : out_(out), label_(std::move(label)) {}

  const std::string& failure() const { return failure_; }
  bool saw_events() const { return saw_events_; }
  std::int64_t event_index() const { return event_index_; }
  std::size_t error_position() const { return error_position_; }

  bool null() override { return scalar_done(); }
  bool boolean(bool value) override { return integer_value(value ? 1 : 0, value ? "1" : "0"); }
  bool number_integer(number_integer_t value) override { return integer_value(value, std::to_string(value)); }
  bool number_unsigned(number_unsigned_t value) override {
    if (value > static_cast<number_unsigned_t>(std::numeric_limits<std::int64_t>::max())) {
      return fail("value " + std::to_string(value) + " of \"" + key_ + "\" is out of range");
    }
    return integer_value(static_cast<std::int64_t>(value), std::to_string(value));
  }
  bool number_float(number_float_t value, const string_t& text) override { return float_value(value, text); }
  bool string(string_t& value) override { return string_value(value); }
  bool binary(binary_t&) override { return scalar_done(); }

  bool start_object(std::size_t) override {
    const Context parent = stack_.empty() ? Context::kSkip : stack_.back();
    Context child = Context::kSkip;
    if (stack_.empty()) {
      child = Context::kRoot;
    } else if (parent == Context::kEvents) {
      child = Context::kEvent;
      pending_ = PendingEvent{};
      event_keys_.clear();
    } else if (parent == Context::kEvent && key_ == "args") {
      child = Context::kArgs;
      args_keys_.clear();
    } else if (parent == Context::kRoot && key_ == "distributedInfo") {
      child = Context::kDistributed;
    } else if (parent == Context::kDeviceProperties) {
      ++out_->devices;
      child = Context::kDevice;
    } else if (parent == Context::kPgConfig) {
      ++out_->process_groups;
    }
    return push(child);
  }
  bool key(string_t& value) override {
    key_ = value;
    // A key twice in one event (or its args) would let the file say two things, of which a JSON
    // reader keeps either: refused (RFC 8259 says names SHOULD be unique).
    if (!stack_.empty() && (stack_.back() == Context::kEvent || stack_.back() == Context::kArgs)) {
      std::vector<std::string>& seen = stack_.back() == Context::kEvent ? event_keys_ : args_keys_;
      if (std::find(seen.begin(), seen.end(), value) != seen.end()) {
        return fail(where() + ": \"" + value + "\" appears twice in one " +
                    (stack_.back() == Context::kEvent ? "event" : "event's args"));
      }
      seen.push_back(value);
    }
    return true;
  }
  bool end_object() override {
    const Context closing = stack_.back();
    stack_.pop_back();
    if (closing == Context::kEvent) {
      if (!finish_event()) return false;
      ++event_index_;
    }
    key_.clear();
    return true;
  }
  bool start_array(std::size_t) override {
    const Context parent = stack_.empty() ? Context::kSkip : stack_.back();
    Context child = Context::kSkip;
    if (stack_.empty()) {
      child = Context::kEvents;
      out_->legacy_export = true;
      saw_events_ = true;
    } else if (parent == Context::kRoot && key_ == "traceEvents") {
      child = Context::kEvents;
      saw_events_ = true;
    } else if (parent == Context::kRoot && key_ == "deviceProperties") {
      child = Context::kDeviceProperties;
    } else if (parent == Context::kDistributed && key_ == "pg_config") {
      child = Context::kPgConfig;
    } else if (parent == Context::kArgs && key_ == "Input type") {
      child = Context::kInputType;
    } else if ((parent == Context::kArgs && key_ == "Input Dims") || parent == Context::kInputDims) {
      child = Context::kInputDims;
      dims_.push_back(DimsFrame{});
    }
    return push(child);
  }
  bool end_array() override {
    const Context closing = stack_.back();
    stack_.pop_back();
    if (closing == Context::kInputDims) {
      const DimsFrame frame = dims_.back();
      dims_.pop_back();
      const std::int64_t value = saturating_add(frame.children, frame.numbers > 0 ? frame.product : 0);
      if (dims_.empty()) {
        pending_.input_dims_numel = value;
      } else {
        dims_.back().children = saturating_add(dims_.back().children, value);
      }
    }
    return true;
  }
  bool parse_error(std::size_t position, const std::string& last_token, const nlohmann::detail::exception& error) override {
    if (failure_.empty()) {
      error_position_ = position;
      std::string what = error.what();
      // nlohmann's text starts "[json.exception.parse_error.101] parse error at line 1, column 2: ".
      if (const auto colon = what.find(": "); colon != std::string::npos) what = what.substr(colon + 2);
      failure_ = "is not valid JSON at byte " + std::to_string(position) + " (near '" + last_token.substr(0, 40) +
                 "'): " + what;
    }
    return false;
  }

 private:
  bool push(Context context) {
    if (stack_.size() >= kMaxDepth) return fail("is nested deeper than " + std::to_string(kMaxDepth) + " levels");
    stack_.push_back(context);
    return true;
  }
  bool fail(const std::string& why) {
    if (failure_.empty()) failure_ = why;
    return false;
  }
  bool scalar_done() { return true; }
  std::string where() const {
    return "event #" + std::to_string(event_index_) + (pending_.name.empty() ? "" : " ('" + pending_.name + "')");
  }

  bool integer_value(std::int64_t value, const std::string& text) {
    if (stack_.empty()) return true;
    switch (stack_.back()) {
      case Context::kEvent:
        return event_number(text, false);
      case Context::kArgs:
        return args_integer(value);
      case Context::kInputDims:
        if (value < 0) return fail(where() + ": \"Input Dims\" has a negative size");
        dims_.back().product = saturating_mul(dims_.back().product, value);
        ++dims_.back().numbers;
        return true;
      case Context::kRoot:
        if (key_ == "baseTimeNanoseconds") {
          out_->has_base_time = true;
          out_->base_time_ns = value;
        } else if (key_ == "record_shapes") {
          out_->record_shapes = value != 0;
        } else if (key_ == "profile_memory") {
          out_->profile_memory = value != 0;
        } else if (key_ == "with_stack") {
          out_->with_stack = value != 0;
        }
        return true;
      case Context::kDistributed:
        if (key_ == "rank" || key_ == "world_size") {
          if (value < 0 || value >= (std::int64_t{1} << 20)) {
            return fail("distributedInfo." + key_ + " = " + std::to_string(value) + " is out of range");
          }
          (key_ == "rank" ? out_->rank : out_->world_size) = value;
        }
        return true;
      default:
        return true;
    }
  }
  bool float_value(double value, const std::string& text) {
    if (stack_.empty()) return true;
    if (stack_.back() == Context::kEvent) return event_number(text, true);
    if (!std::isfinite(value)) return true;
    // Integral-valued floats (some exporters write 12.0) count as integers elsewhere.
    if (std::floor(value) == value && std::fabs(value) < 9.0e18) {
      return integer_value(static_cast<std::int64_t>(value), text);
    }
    if (stack_.back() == Context::kInputDims) return fail(where() + ": \"Input Dims\" has a fractional size");
    return true;
  }
  bool event_number(const std::string& text, bool) {
    if (key_ == "ts" || key_ == "dur") {
      std::int64_t ns = 0;
      if (!microseconds_text_to_ns(text, &ns)) return fail(where() + ": \"" + key_ + "\" = " + text + " is not a time in microseconds");
      if (key_ == "ts") {
        pending_.has_ts = true;
        pending_.ts_ns = ns;
      } else {
        if (ns < 0) return fail(where() + ": negative \"dur\" " + text);
        // No profiled event lasts a day: a longer one is a damaged file (or seconds written as
        // microseconds), and its time would swamp every sum downstream.
        constexpr std::int64_t kMaxDurationNs = std::int64_t{86'400} * 1'000'000'000;
        if (ns > kMaxDurationNs) return fail(where() + ": \"dur\" " + text + " us is longer than a day");
        pending_.has_dur = true;
        pending_.dur_ns = ns;
      }
    } else if (key_ == "pid") {
      pending_.pid = text;
    } else if (key_ == "tid") {
      pending_.tid = text;
    } else if (key_ == "id") {
      pending_.flow_id = text;
    }
    return true;
  }
  bool args_integer(std::int64_t value) {
    if (key_ == "External id") pending_.external_id = value;
    else if (key_ == "correlation") pending_.correlation = value;
    else if (key_ == "In msg nelems" || key_ == "Out msg nelems" || key_ == "Group size") {
      if (value < 0) return fail(where() + ": negative \"" + key_ + "\"");
      // 2^50 elements is a petabyte of bf16, beyond any device: a size past it is a damaged file,
      // and its bytes would overflow every sum downstream.
      constexpr std::int64_t kMaxElements = std::int64_t{1} << 50;
      if (key_ != "Group size" && value > kMaxElements) {
        return fail(where() + ": \"" + key_ + "\" is " + std::to_string(value) +
                    ", more than any device holds (at most 2^50 elements)");
      }
      (key_ == "In msg nelems" ? pending_.in_nelems : key_ == "Out msg nelems" ? pending_.out_nelems : pending_.group_size) = value;
    } else if (key_ == "Seq") pending_.seq = value;
    else if (key_ == "Bytes") pending_.bytes = value;
    else if (key_ == "Total Allocated") pending_.total_allocated = value;
    else if (key_ == "Total Reserved") pending_.total_reserved = value;
    else if (key_ == "Device Type") pending_.device_type = static_cast<int>(value);
    else if (key_ == "Process Group Name") pending_.process_group = std::to_string(value);
    return true;
  }
  bool string_value(const std::string& value) {
    if (stack_.empty()) return true;
    switch (stack_.back()) {
      case Context::kEvent:
        if (key_ == "name") pending_.name = value;
        else if (key_ == "ph") pending_.phase = value;
        else if (key_ == "cat") {
          pending_.category = value;
          pending_.has_category = true;
        } else if (key_ == "pid") pending_.pid = value;
        else if (key_ == "tid") pending_.tid = value;
        else if (key_ == "id") pending_.flow_id = value;
        else if (key_ == "ts" || key_ == "dur") return fail(where() + ": \"" + key_ + "\" is a string, not a number");
        return true;
      case Context::kArgs:
        if (key_ == "Collective name") pending_.collective_name = value;
        else if (key_ == "dtype") pending_.dtype = value;
        else if (key_ == "Process Group Name") pending_.process_group = value;
        else if (key_ == "name") pending_.thread_name = value;
        else if (key_ == "Seq") {
          try {
            pending_.seq = std::stoll(value);
          } catch (const std::exception&) {
            return fail(where() + ": \"Seq\" = '" + value + "' is not an integer");
          }
        }
        return true;
      case Context::kDevice:
        if (key_ == "name" && out_->device_names.size() < 1024) out_->device_names.push_back(value);
        return true;
      case Context::kDistributed:
        if (key_ == "backend") out_->backend = value;
        else if (key_ == "nccl_version") out_->nccl_version = value;
        else if (key_ == "rank" || key_ == "world_size") {
          return fail("distributedInfo." + key_ + " is a string ('" + value + "'), not an integer");
        }
        return true;
      case Context::kInputDims:
        return fail(where() + ": \"Input Dims\" holds a string");
      case Context::kInputType:
        if (pending_.input_type.empty()) pending_.input_type = value;
        return true;
      default:
        return true;
    }
  }

  std::int32_t intern(const std::string& text) {
    const auto [it, inserted] = name_index_.emplace(text, static_cast<std::int32_t>(out_->names.size()));
    if (inserted) out_->names.push_back(text);
    return it->second;
  }
  std::int32_t track_of(const PendingEvent& event) {
    std::string key = event.pid;
    key += '\x1f';
    key += event.tid;
    const auto [it, inserted] = track_index_.emplace(key, static_cast<std::int32_t>(out_->tracks.size()));
    if (inserted) out_->tracks.push_back(TraceTrack{event.pid, event.tid, "", false});
    return it->second;
  }
  static TraceCategory category_of(const PendingEvent& event) {
    const std::string& c = event.category;
    if (!event.has_category || c == "cpu_op" || c == "Operator") return TraceCategory::kCpuOp;
    if (c == "user_annotation") return TraceCategory::kUserAnnotation;
    if (c == "gpu_user_annotation") return TraceCategory::kGpuUserAnnotation;
    if (c == "cuda_runtime" || c == "cuda_driver" || c == "Runtime") return TraceCategory::kRuntime;
    if (c == "kernel" || c == "Kernel") return TraceCategory::kKernel;
    if (c == "gpu_memcpy" || c == "Memcpy") return TraceCategory::kGpuMemcpy;
    if (c == "gpu_memset" || c == "Memset") return TraceCategory::kGpuMemset;
    if (c == "python_function") return TraceCategory::kPythonFunction;
    return TraceCategory::kOther;
  }

  bool finish_event() {
    PendingEvent& e = pending_;
    if (e.phase == "X") {
      if (!e.has_ts) return fail(where() + ": a complete (\"X\") event without \"ts\"");
      TraceEvent event;
      event.ts_ns = e.ts_ns;
      event.dur_ns = e.has_dur ? e.dur_ns : 0;
      if (event.ts_ns > std::numeric_limits<std::int64_t>::max() - event.dur_ns) return fail(where() + ": ts + dur overflows");
      event.name = intern(e.name);
      event.track = track_of(e);
      event.category = category_of(e);
      event.external_id = e.external_id;
      event.correlation = e.correlation;
      const bool gpu = event.category == TraceCategory::kKernel || event.category == TraceCategory::kGpuMemcpy ||
                       event.category == TraceCategory::kGpuMemset || event.category == TraceCategory::kGpuUserAnnotation;
      if (gpu) out_->tracks[static_cast<std::size_t>(event.track)].gpu = true;
      // "Input Dims" is on every op with record_shapes: kept only on collective calls.
      const bool collective_call = e.name.rfind("nccl:", 0) == 0 || e.name.rfind("c10d::", 0) == 0 ||
                                   e.name.rfind("rccl:", 0) == 0 || e.name == "record_param_comms";
      if (!e.collective_name.empty() || e.in_nelems >= 0 || e.out_nelems >= 0 || !e.process_group.empty() ||
          e.seq >= 0 || (collective_call && e.input_dims_numel >= 0)) {
        CollectiveArgs args;
        args.collective_name = e.collective_name.empty() ? -1 : intern(e.collective_name);
        args.in_nelems = e.in_nelems;
        args.out_nelems = e.out_nelems;
        args.group_size = e.group_size;
        const std::string& dtype = !e.dtype.empty() ? e.dtype : collective_call ? e.input_type : e.dtype;
        args.dtype = dtype.empty() ? -1 : intern(dtype);
        args.process_group = e.process_group.empty() ? -1 : intern(e.process_group);
        args.seq = e.seq;
        args.input_dims_numel = collective_call ? e.input_dims_numel : -1;
        event.args = static_cast<std::int32_t>(out_->collective_args.size());
        out_->collective_args.push_back(args);
      }
      out_->events.push_back(event);
    } else if ((e.phase == "i" || e.phase == "I") && e.name == "[memory]") {
      if (!e.has_ts) return fail(where() + ": a [memory] event without \"ts\"");
      out_->memory.push_back(MemorySample{e.ts_ns, e.bytes, e.total_allocated, e.total_reserved, e.device_type});
    } else if ((e.phase == "s" || e.phase == "f") && (e.category == "ac2g" || e.category == "fwdbwd")) {
      if (!e.has_ts || e.flow_id.empty()) return true;  // a flow end without a place is no link
      TraceFlow flow;
      try {
        flow.id = std::stoll(e.flow_id);
      } catch (const std::exception&) {
        return true;  // string ids ("0x1a") are not used by Kineto flows; skip
      }
      flow.ts_ns = e.ts_ns;
      flow.track = track_of(e);
      flow.start = e.phase == "s";
      flow.forward_backward = e.category == "fwdbwd";
      out_->flows.push_back(flow);
    } else if (e.phase == "M" && e.name == "thread_name" && !e.thread_name.empty()) {
      out_->tracks[static_cast<std::size_t>(track_of(e))].name = e.thread_name;
    }
    return true;
  }

  TraceFile* out_;
  std::string label_;
  std::vector<Context> stack_;
  std::vector<DimsFrame> dims_;
  std::string key_;
  std::vector<std::string> event_keys_;  // the open event's keys so far (duplicates are refused)
  std::vector<std::string> args_keys_;   // its args' keys so far
  PendingEvent pending_;
  std::string failure_;
  bool saw_events_ = false;
  std::int64_t event_index_ = 0;
  std::size_t error_position_ = 0;  // of a JSON syntax error; 0 for none
  std::unordered_map<std::string, std::int32_t> name_index_;
  std::unordered_map<std::string, std::int32_t> track_index_;
};

// `size`: the bytes of JSON text (after decompression) the parser could read.
TraceFile parse(std::istream& in, const std::string& label, const GzipReadBuffer* gzip, std::uint64_t text_size) {
  TraceFile trace;
  trace.path = label;
  TraceSax sax(&trace, label);
  const bool ok = json::sax_parse(in, &sax, nlohmann::detail::input_format_t::json, true);
  // A gzip failure shows up to the parser as an early end of its input: report the cause.
  if (gzip != nullptr && !gzip->error().empty()) {
    throw InputError({label, 0}, "", gzip->error() + " after " +
                                         std::to_string(gzip->bytes_read()) + " bytes",
                     "a complete torch.profiler trace (.json, or .json.gz: gzip -t FILE checks one)");
  }
  if (gzip != nullptr && gzip->bytes_read() == 0) {
    throw InputError({label, 0}, "", "is empty", kExpected);
  }
  if (!ok) {
    std::string why = sax.failure().empty() ? "could not be parsed" : sax.failure();
    const std::uint64_t size = gzip != nullptr ? gzip->bytes_read() : text_size;
    // A syntax error at the very end: the text stops mid-document (an interrupted export).
    if (sax.error_position() > 0 && sax.error_position() + 1 >= size) why += " (the file is cut short)";
    throw InputError({label, 0}, "", why, kExpected);
  }
  if (!sax.saw_events()) {
    throw InputError({label, 0}, "traceEvents", "is JSON but not a trace: it has no \"traceEvents\" array", kExpected);
  }
  return trace;
}

}  // namespace

TraceFile read_trace_file(const std::string& path) {
  GzipReadBuffer buffer(path);
  std::istream in(&buffer);
  return parse(in, path, &buffer, 0);
}

TraceFile read_trace_text(const std::string& text, const std::string& label) {
  if (text.empty()) throw InputError({label, 0}, "", "is empty", kExpected);
  std::istringstream in(text);
  return parse(in, label, nullptr, text.size());
}

}  // namespace prefetchlab::core
