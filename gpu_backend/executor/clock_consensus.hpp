#pragma once
// Ranks' device clocks made one (RankExecutor::align_clocks). Every rank leaves each of R
// set-up all-reduces at the same true instant T_k, but records its exit late by a delay of its
// own (a stream thread woken late on a busy host, a kernel-launch gap). Each rank knows only its
// exits' times since its first exit, x[r][k] = T_k - T_0 + d[r][k] - d[r][0]. The distance of
// rank r's row from the ranks' mean in round k is d[r][k] - mean_k(d) - (d[r][0] - mean(d0));
// its median over the rounds k >= 1 estimates -(d[r][0] - mean(d0)), how late rank r's first
// exit (its clock origin) was against the ranks' mean, as long as fewer than half of the later
// exits were themselves late.
#include <cstdint>
#include <span>

namespace prefetchlab::gpu {

// `exits_since_first_ns`: world x rounds, row-major (rank r's row: its exits since its first,
// so column 0 is all zeros). Returns the shift to subtract from rank `rank`'s event times
// (measured from its first exit) to put them on the ranks' common clock.
std::int64_t consensus_clock_shift_ns(std::span<const double> exits_since_first_ns, int world, int rounds, int rank);

}  // namespace prefetchlab::gpu
