#pragma once
// Helper for the model builders: fills a ModelSpec's parameter table in creation order
// (ds_id) and its module tree in forward execution order, which are two different orders.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/model/module_costs.hpp"
#include "core/model/model_spec.hpp"

namespace prefetchlab::core {

// "a.b" + "c" -> "a.b.c"; an empty prefix (the root) adds no dot.
std::string join_name(const std::string& prefix, const std::string& name);

class ModuleTreeBuilder {
 public:
  ModuleTreeBuilder(ModelSpec& spec, DType dtype) : spec_(spec), dtype_(dtype) {}

  // Appends a parameter; call in the order HF's __init__ creates them (index = ds_id).
  int add_param(const std::string& name, std::int64_t numel, std::int64_t gemm_in = 0,
                std::int64_t gemm_out = 0);
  // The id of a parameter added earlier (a logic_error if absent: a builder bug).
  int param(const std::string& name) const;

  // Opens a module as the next child of the open one (the first call makes the root).
  int begin(const std::string& name, const std::string& class_name, const ModuleCosts& own = {},
            std::vector<int> param_ids = {});
  void end();
  // begin + end: a module without children.
  int leaf(const std::string& name, const std::string& class_name, const ModuleCosts& own = {},
           std::vector<int> param_ids = {});

  // Bytes of one element of every parameter and activation.
  std::int64_t element_bytes() const { return dtype_bytes(dtype_); }

 private:
  ModelSpec& spec_;
  DType dtype_;
  std::map<std::string, int> param_ids_;
  std::vector<int> open_;
};

}  // namespace prefetchlab::core
