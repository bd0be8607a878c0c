#pragma once
// Interned strings for trace names: operations store a small integer, the trace writer looks
// the text up once. Keeps millions of simulated operations free of string copies.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace prefetchlab::sim {

class LabelTable {
 public:
  std::int32_t intern(const std::string& text) {
    auto [it, inserted] = index_.try_emplace(text, static_cast<std::int32_t>(texts_.size()));
    if (inserted) texts_.push_back(text);
    return it->second;
  }
  const std::string& text(std::int32_t label) const { return texts_[static_cast<std::size_t>(label)]; }

 private:
  std::vector<std::string> texts_;
  std::map<std::string, std::int32_t> index_;
};

}  // namespace prefetchlab::sim
