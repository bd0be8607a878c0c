#include "large_pages.hpp"

#include <cstdlib>

#if PREFETCHLAB_FEATURE_MIMALLOC
#include <mimalloc.h>
#endif

namespace prefetchlab::apps {

void prefer_large_os_pages() {
#if PREFETCHLAB_FEATURE_MIMALLOC
  // mimalloc reads its options from the environment at start-up, so setting the option here
  // would override a user's choice: leave it alone when they made one.
  if (std::getenv("MIMALLOC_LARGE_OS_PAGES") == nullptr) mi_option_set_enabled(mi_option_large_os_pages, true);
#endif
}

}  // namespace prefetchlab::apps
