#include "core/memory/allocator_sequence.hpp"

#include <charconv>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/io/csv_reader.hpp"
#include "core/memory/device_memory.hpp"
#include "core/input/input_error.hpp"
#include "core/input/input_limits.hpp"

namespace prefetchlab::core {

std::vector<AllocatorStep> load_allocator_sequence(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError({file.string(), 0}, "sequence", "cannot be opened", "a readable CSV file with columns op,id,bytes");
  std::stringstream text;
  text << in.rdbuf();
  const CsvText csv = parse_csv(text.str());
  if (csv.records.empty() || csv.records[0].fields != std::vector<std::string>{"op", "id", "bytes"}) {
    throw InputError({file.string(), 1}, "header", "is not op,id,bytes", "the header line op,id,bytes");
  }
  if (csv.torn_tail) {
    throw InputError({file.string(), 0}, "sequence", "ends inside a record", "a complete last line");
  }
  std::vector<AllocatorStep> steps;
  std::set<std::string> live;
  for (std::size_t r = 1; r < csv.records.size(); ++r) {
    const CsvRecord& record = csv.records[r];
    const InputLocation at{file.string(), record.line};
    if (record.fields.size() != 3) {
      throw InputError(at, "row", "has " + std::to_string(record.fields.size()) + " fields", "3 fields: op,id,bytes");
    }
    AllocatorStep step;
    step.line = record.line;
    step.id = record.fields[1];
    if (step.id.empty()) throw InputError(at, "id", "is empty", "a name for the allocation");
    const std::string& op = record.fields[0];
    const std::string& bytes = record.fields[2];
    if (op == "malloc") {
      const char* end = bytes.data() + bytes.size();
      const auto [ptr, ec] = std::from_chars(bytes.data(), end, step.bytes);
      // At least 1: torch.empty of 0 bytes never reaches the allocator, so it would not compare.
      // At most kMaxBytes: a size near 2^64 would wrap in the allocator's rounding, where PyTorch
      // refuses it; anything above the device's capacity is an out-of-memory step instead.
      if (bytes.empty() || ec != std::errc{} || ptr != end || step.bytes == 0 ||
          step.bytes > static_cast<std::uint64_t>(kMaxBytes)) {
        throw InputError(at, "bytes", "is '" + bytes + "'",
                         "a whole number of bytes, at least 1 and at most 2^50 (1 PiB), for malloc");
      }
      if (!live.insert(step.id).second) {
        throw InputError(at, "id", "'" + step.id + "' is allocated again while live", "a free of it first, or another id");
      }
    } else if (op == "free") {
      step.malloc = false;
      if (!bytes.empty()) throw InputError(at, "bytes", "is '" + bytes + "' on a free", "an empty bytes column");
      if (live.erase(step.id) == 0) {
        throw InputError(at, "id", "'" + step.id + "' is freed but not allocated", "the id of a live allocation");
      }
    } else {
      throw InputError(at, "op", "is '" + op + "'", "malloc or free");
    }
    steps.push_back(std::move(step));
  }
  return steps;
}

AllocatorReplay replay_allocator_sequence(const std::vector<AllocatorStep>& steps, const AllocatorOptions& options,
                                          std::uint64_t capacity_bytes) {
  FixedCapacityDeviceMemory device(capacity_bytes);
  CachingAllocator allocator(device, options);
  AllocatorReplay replay;
  std::map<std::string, BlockHandle> live;
  for (const AllocatorStep& step : steps) {
    if (step.malloc) {
      MallocResult result = allocator.malloc(step.bytes, 0);
      if (!result) {
        replay.oom = result.oom;
        replay.oom_line = step.line;
        break;
      }
      live[step.id] = *result.block;
    } else {
      allocator.free(live.at(step.id));
      live.erase(step.id);
    }
    ++replay.steps;
  }
  replay.stats = allocator.stats();
  return replay;
}

}  // namespace prefetchlab::core
