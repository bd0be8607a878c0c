#pragma once
// Small Kineto-shaped traces built in the test, for figures known exactly.
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace prefetchlab::testing {

class SyntheticTrace {
 public:
  SyntheticTrace(int rank, int world_size) {
    doc_["schemaVersion"] = 1;
    doc_["distributedInfo"] = {{"backend", "nccl"}, {"rank", rank}, {"world_size", world_size}};
    doc_["traceEvents"] = nlohmann::json::array();
    thread_name(100, 100, "thread 100 (pt_main_thread)");
  }
  // Times in microseconds (Kineto's unit).
  void step(int number, double ts_us, double dur_us) {
    cpu("ProfilerStep#" + std::to_string(number), ts_us, dur_us, "user_annotation", {});
  }
  void cpu(const std::string& name, double ts_us, double dur_us, const std::string& cat, nlohmann::json args,
           int tid = 100) {
    add({{"ph", "X"}, {"cat", cat}, {"name", name}, {"pid", 100}, {"tid", tid}, {"ts", ts_us}, {"dur", dur_us}, {"args", args}});
  }
  void launch(double ts_us, std::int64_t correlation, std::int64_t external_id = -1, int tid = 100) {
    nlohmann::json args{{"correlation", correlation}};
    if (external_id >= 0) args["External id"] = external_id;
    cpu("cudaLaunchKernel", ts_us, 5, "cuda_runtime", args, tid);
  }
  void kernel(const std::string& name, double ts_us, double dur_us, std::int64_t correlation, int stream,
              nlohmann::json extra = nlohmann::json::object()) {
    extra["correlation"] = correlation;
    add({{"ph", "X"}, {"cat", "kernel"}, {"name", name}, {"pid", 0}, {"tid", stream}, {"ts", ts_us}, {"dur", dur_us}, {"args", extra}});
  }
  void memory(double ts_us, std::int64_t bytes, std::int64_t total_allocated, int device_type = 1) {
    add({{"ph", "i"}, {"cat", "cpu_instant_event"}, {"s", "t"}, {"name", "[memory]"}, {"pid", 100}, {"tid", 100}, {"ts", ts_us},
         {"args", {{"Bytes", bytes}, {"Total Allocated", total_allocated}, {"Total Reserved", 1 << 30}, {"Device Type", device_type}, {"Device Id", 0}}}});
  }
  void thread_name(int pid, int tid, const std::string& name) {
    add({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
  }
  void add(nlohmann::json event) { doc_["traceEvents"].push_back(std::move(event)); }
  nlohmann::json& doc() { return doc_; }
  std::string text() const { return doc_.dump(); }

  std::filesystem::path write(const std::filesystem::path& path, bool gzip = false) const {
    const std::string data = text();
    if (gzip) {
      gzFile file = gzopen(path.c_str(), "wb");
      gzwrite(file, data.data(), static_cast<unsigned>(data.size()));
      gzclose(file);
    } else {
      FILE* file = std::fopen(path.c_str(), "wb");
      std::fwrite(data.data(), 1, data.size(), file);
      std::fclose(file);
    }
    return path;
  }

 private:
  nlohmann::json doc_;
};

}  // namespace prefetchlab::testing
