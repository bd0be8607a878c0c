#include "sim/engine/host_task.hpp"

#include <new>
#include <vector>

namespace prefetchlab::sim {
namespace {

constexpr std::size_t kGranule = 64;
constexpr std::size_t kMaxPooledBytes = 4096;

struct FreeLists {
  std::vector<std::vector<void*>> by_class = std::vector<std::vector<void*>>(kMaxPooledBytes / kGranule + 1);
  ~FreeLists() {
    for (auto& list : by_class) {
      for (void* frame : list) ::operator delete(frame);
    }
  }
};

FreeLists& free_lists() {
  thread_local FreeLists lists;
  return lists;
}

std::size_t size_class(std::size_t bytes) { return (bytes + kGranule - 1) / kGranule; }

}  // namespace

void* FramePool::allocate(std::size_t bytes) {
  if (bytes > kMaxPooledBytes) return ::operator new(bytes);
  auto& list = free_lists().by_class[size_class(bytes)];
  if (list.empty()) return ::operator new(size_class(bytes) * kGranule);
  void* frame = list.back();
  list.pop_back();
  return frame;
}

void FramePool::release(void* frame, std::size_t bytes) noexcept {
  if (bytes > kMaxPooledBytes) {
    ::operator delete(frame);
    return;
  }
  try {
    free_lists().by_class[size_class(bytes)].push_back(frame);
  } catch (...) {
    ::operator delete(frame);
  }
}

}  // namespace prefetchlab::sim
