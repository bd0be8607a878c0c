#pragma once
// One rank's torch.profiler (Kineto) Chrome trace, as read: the events PrefetchLab uses, in a
// compact form (a real trace has millions of events; only what the analysis needs is kept), plus
// the header facts (rank, world size, process groups, time base). docs/traces.md lists the fields.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace prefetchlab::core {

// What an event is, from its "cat" (or, in legacy exports without "cat", from nothing: cpu).
enum class TraceCategory : std::uint8_t {
  kCpuOp,              // cpu_op, Operator, or no cat (legacy autograd-profiler export)
  kUserAnnotation,     // user_annotation: record_function ranges, ProfilerStep#N, nccl:*
  kGpuUserAnnotation,  // gpu_user_annotation: a record_function range projected on a stream
  kRuntime,            // cuda_runtime / cuda_driver / Runtime: the host side of a launch
  kKernel,             // kernel / Kernel
  kGpuMemcpy,          // gpu_memcpy / Memcpy
  kGpuMemset,          // gpu_memset / Memset
  kPythonFunction,     // python_function (with_stack)
  kOther,
};

// A thread (CPU events) or a stream (GPU events): Kineto's (pid, tid), kept as text because
// legacy exports use strings ("CPU functions").
struct TraceTrack {
  std::string pid;
  std::string tid;
  std::string name;  // from the "thread_name" metadata event; empty when none
  bool gpu = false;  // holds GPU events (kernels, copies): a stream
};

// Collective metadata, from `record_param_comms` or an NCCL kernel's args (PyTorch 2.3+ /
// Kineto 2024+), or only the sizes from an `nccl:*` annotation's "Input Dims" (record_shapes).
struct CollectiveArgs {
  std::int32_t collective_name = -1;  // index into names; -1 when absent
  std::int64_t in_nelems = -1;
  std::int64_t out_nelems = -1;
  std::int64_t group_size = -1;
  std::int32_t dtype = -1;              // index into names
  std::int32_t process_group = -1;      // "Process Group Name", index into names
  std::int64_t seq = -1;                // "Seq" (Kineto 2026+): the cross-rank key
  std::int64_t input_dims_numel = -1;   // sum over "Input Dims" tensors of their products
};

// A complete ("X") event. Times are integer nanoseconds: Kineto's microsecond floats carry 16
// significant digits, more than a double keeps, so they are read from the decimal text.
struct TraceEvent {
  std::int64_t ts_ns = 0;
  std::int64_t dur_ns = 0;
  std::int32_t name = 0;   // index into names
  std::int32_t track = 0;  // index into tracks
  TraceCategory category = TraceCategory::kOther;
  std::int32_t args = -1;  // index into collective_args; -1 when it has none
  std::int64_t external_id = -1;
  std::int64_t correlation = -1;
  std::int64_t end_ns() const { return ts_ns + dur_ns; }
};

// One `[memory]` instant event: the caching allocator after an alloc (Bytes > 0) or free (< 0).
struct MemorySample {
  std::int64_t ts_ns = 0;
  std::int64_t bytes = 0;
  std::int64_t total_allocated = -1;
  std::int64_t total_reserved = -1;
  int device_type = -1;  // 1 = CUDA (or ROCm), 0 = CPU
};

// One end of a flow ("s" start or "f" finish): ac2g (launch -> kernel) or fwdbwd (forward op
// -> its backward op).
struct TraceFlow {
  std::int64_t id = 0;
  std::int64_t ts_ns = 0;
  std::int32_t track = 0;
  bool start = false;
  bool forward_backward = false;  // fwdbwd; else ac2g
};

struct TraceFile {
  std::string path;  // as the user gave it
  // distributedInfo (absent in single-process traces and legacy exports).
  std::optional<std::int64_t> rank;
  std::optional<std::int64_t> world_size;
  std::string backend;       // "nccl", "gloo", ... ; empty when absent
  std::string nccl_version;  // empty when absent
  std::int64_t process_groups = 0;  // pg_config entries
  // Legacy autograd-profiler export (a bare JSON array, no "cat"): timestamps count from each
  // process's profiler start, so they cannot be compared across ranks.
  bool legacy_export = false;
  bool has_base_time = false;  // baseTimeNanoseconds: ts is relative to a common epoch base
  std::int64_t base_time_ns = 0;
  std::int64_t devices = 0;  // deviceProperties entries
  std::vector<std::string> device_names;  // their "name"s: the GPUs the trace ran on
  bool record_shapes = false;
  bool profile_memory = false;
  bool with_stack = false;

  std::vector<std::string> names;  // interned event names and string args
  std::vector<TraceTrack> tracks;
  std::vector<TraceEvent> events;  // complete events, in file order
  std::vector<CollectiveArgs> collective_args;
  std::vector<MemorySample> memory;
  std::vector<TraceFlow> flows;

  const std::string& name_of(const TraceEvent& event) const { return names[static_cast<std::size_t>(event.name)]; }
};

// Reads a Kineto/torch.profiler Chrome trace, plain JSON or gzip (detected from the content, not
// the name). Throws InputError naming the file for: a missing or empty file, a truncated or
// corrupt gzip stream, text that is not JSON, JSON that is not a trace (no traceEvents), and
// values of the wrong type or out of range. Memory grows with the events kept, never with
// nesting depth (capped) or ignored parts of the file.
TraceFile read_trace_file(const std::string& path);

// The same from text in memory (tests); `label` names it in errors.
TraceFile read_trace_text(const std::string& text, const std::string& label);

}  // namespace prefetchlab::core
