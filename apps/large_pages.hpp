#pragma once
// Large (2 MiB) OS pages for the heap. A many-rank run touches each rank's scattered state
// (streams, events, allocator pools, host coroutine frames) once per event, so at 1,024 ranks
// the time goes to TLB and cache misses rather than to work; 2 MiB pages cover the same state
// with 512x fewer TLB entries. Measured side by side (docs/benchmarks.md): 15% less wall at
// 1,024 ranks and 6% at 128 with compute jitter, for 9% more resident memory; outputs unchanged.
namespace prefetchlab::apps {

// Asks mimalloc (when linked in) to back the heap with large OS pages: transparent huge pages
// where the kernel allows them (`madvise`), plain pages otherwise. A user's own
// MIMALLOC_LARGE_OS_PAGES setting wins. A no-op without mimalloc.
void prefer_large_os_pages();

}  // namespace prefetchlab::apps
