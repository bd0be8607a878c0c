#include "core/scenario/index_ranges.hpp"

namespace prefetchlab::core {

std::string index_ranges(const std::vector<std::size_t>& indices, const std::string& separator, std::size_t limit) {
  std::string out;
  std::size_t ranges = 0;
  for (std::size_t i = 0; i < indices.size();) {
    std::size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
    if (limit > 0 && ranges++ == limit) return out + separator + "...";
    // Appended piecewise: GCC 12's LTO flags `const char* + std::string` here with a false
    // -Wstringop-overflow.
    if (!out.empty()) out += separator;
    out += std::to_string(indices[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(indices[j]);
    }
    i = j + 1;
  }
  return out;
}

}  // namespace prefetchlab::core
