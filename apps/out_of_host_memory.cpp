#include "out_of_host_memory.hpp"

#include <unistd.h>

#include <cerrno>
#include <new>

#include "command_context.hpp"

#if PREFETCHLAB_FEATURE_MIMALLOC
#include <mimalloc.h>
#endif

namespace prefetchlab::apps {
namespace {

// Only async-signal-safe calls: the heap is what failed.
[[noreturn]] void say_out_of_memory_and_exit() {
  static constexpr char kMessage[] =
      "error: out of host memory (the run needs more than this machine's memory or its limit allows; "
      "rows already written are kept and summary.json says the run did not end)\n";
  const ssize_t ignored = ::write(2, kMessage, sizeof kMessage - 1);
  (void)ignored;
  ::_exit(kExitOutOfMemory);
}

void on_new_failure() { say_out_of_memory_and_exit(); }

#if PREFETCHLAB_FEATURE_MIMALLOC
void on_mimalloc_error(int error, void*) {
  if (error == ENOMEM) say_out_of_memory_and_exit();
  // Other errors (a double free, heap corruption) keep mimalloc's own handling.
}
#endif

}  // namespace

void exit_cleanly_when_out_of_host_memory() {
  std::set_new_handler(on_new_failure);
#if PREFETCHLAB_FEATURE_MIMALLOC
  mi_register_error(on_mimalloc_error, nullptr);
#endif
}

}  // namespace prefetchlab::apps
