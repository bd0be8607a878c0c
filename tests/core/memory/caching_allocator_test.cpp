// CachingAllocator: the PyTorch CUDA caching allocator's rules (pytorch/pytorch
// c10/cuda/CUDACachingAllocator.cpp): a worked example byte for byte, invariants under seeded random sequences,
// cross-stream delayed free, the out-of-memory path, and one test per option that fails if the
// option were ignored.
#include "core/memory/caching_allocator.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tests/support/input_error_testing.hpp"

using prefetchlab::testing::expect_input_error;
using prefetchlab::testing::parse_yaml;
namespace pc = prefetchlab::core;

namespace {

constexpr std::uint64_t MiB = 1024ULL * 1024ULL;
constexpr std::uint64_t GiB = 1024ULL * MiB;

std::string join(const std::vector<std::string>& problems) {
  std::string out;
  for (const auto& p : problems) out += p + "\n";
  return out;
}

#define EXPECT_INVARIANTS(alloc)                         \
  do {                                                   \
    const auto problems_ = (alloc).check_invariants();   \
    EXPECT_TRUE(problems_.empty()) << join(problems_);   \
  } while (0)

pc::BlockHandle must(const pc::MallocResult& r) {
  EXPECT_TRUE(r.ok()) << (r.oom ? r.oom->message() : std::string("no result"));
  return r.block.value_or(pc::BlockHandle{});
}

std::int64_t allocated(const pc::CachingAllocator& a) { return a.stats().allocated_bytes.all.current; }
std::int64_t reserved(const pc::CachingAllocator& a) { return a.stats().reserved_bytes.all.current; }
std::int64_t segments(const pc::CachingAllocator& a) { return a.stats().segment.all.current; }
std::int64_t I(std::uint64_t v) { return static_cast<std::int64_t>(v); }

pc::AllocatorOptions with_mss(std::uint64_t mb) {
  pc::AllocatorOptions o;
  o.max_split_size_bytes = mb * MiB;
  return o;
}

}  // namespace

// ------------------------------------------------------------------ rounding and segment sizes

TEST(CachingAllocatorRounding, RoundSizeAndSegmentSize) {
  const pc::AllocatorOptions defaults;
  EXPECT_EQ(pc::round_allocation_size(0, defaults), 512u);
  EXPECT_EQ(pc::round_allocation_size(100, defaults), 512u);
  EXPECT_EQ(pc::round_allocation_size(512, defaults), 512u);
  EXPECT_EQ(pc::round_allocation_size(513, defaults), 1024u);
  EXPECT_EQ(pc::round_allocation_size(1200, defaults), 1536u);
  EXPECT_EQ(pc::segment_size_for(512), 2 * MiB);
  EXPECT_EQ(pc::segment_size_for(1 * MiB), 2 * MiB);
  EXPECT_EQ(pc::segment_size_for(1 * MiB + 512), 20 * MiB);
  EXPECT_EQ(pc::segment_size_for(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(pc::segment_size_for(10 * MiB), 10 * MiB);
  EXPECT_EQ(pc::segment_size_for(11 * MiB), 12 * MiB);
  EXPECT_EQ(pc::segment_size_for(11 * MiB + 512), 12 * MiB);
}

// ------------------------------------------------------------------ a worked example, byte for byte

TEST(CachingAllocatorWorkedExample, EveryStepOfResearch46) {
  pc::FixedCapacityDeviceMemory device(80 * GiB);
  pc::CachingAllocator alloc(device);

  // malloc 3 MiB: large pool, cudaMalloc 20 MiB, split (17 MiB tail).
  const auto a = must(alloc.malloc(3 * MiB, 0));
  EXPECT_EQ(allocated(alloc), I(3 * MiB));
  EXPECT_EQ(reserved(alloc), I(20 * MiB));
  EXPECT_EQ(segments(alloc), 1);
  auto snap = alloc.snapshot();
  ASSERT_EQ(snap.size(), 1u);
  ASSERT_EQ(snap[0].blocks.size(), 2u);
  EXPECT_EQ(snap[0].blocks[0].size_bytes, 3 * MiB);
  EXPECT_EQ(snap[0].blocks[1].size_bytes, 17 * MiB);
  EXPECT_EQ(snap[0].blocks[1].state, pc::BlockState::kFree);
  EXPECT_INVARIANTS(alloc);

  // malloc 12 MiB: best fit is the 17 MiB tail, split (5 MiB tail > 1 MiB).
  const auto b = must(alloc.malloc(12 * MiB, 0));
  EXPECT_EQ(allocated(alloc), I(15 * MiB));
  EXPECT_EQ(reserved(alloc), I(20 * MiB));
  EXPECT_EQ(segments(alloc), 1);
  EXPECT_EQ(alloc.info(b).address, alloc.info(a).address + 3 * MiB);
  EXPECT_INVARIANTS(alloc);

  // malloc 100 B: 512 B, small pool, cudaMalloc 2 MiB, split.
  const auto c = must(alloc.malloc(100, 0));
  EXPECT_EQ(alloc.info(c).size_bytes, 512u);
  EXPECT_TRUE(alloc.info(c).small_pool);
  EXPECT_EQ(allocated(alloc), I(15 * MiB + 512));
  EXPECT_EQ(reserved(alloc), I(22 * MiB));
  EXPECT_EQ(segments(alloc), 2);
  EXPECT_EQ(alloc.stats().requested_bytes.all.current, I(15 * MiB + 100));
  EXPECT_INVARIANTS(alloc);

  // malloc 4.5 MiB: the 5 MiB tail fits; 0.5 MiB left is not > 1 MiB, so the whole 5 MiB goes.
  const auto d = must(alloc.malloc(4 * MiB + MiB / 2, 0));
  EXPECT_EQ(alloc.info(d).size_bytes, 5 * MiB);
  EXPECT_EQ(alloc.info(d).requested_bytes, 4 * MiB + MiB / 2);
  EXPECT_EQ(allocated(alloc), I(20 * MiB + 512));
  EXPECT_EQ(reserved(alloc), I(22 * MiB));
  EXPECT_EQ(segments(alloc), 2);
  EXPECT_INVARIANTS(alloc);

  // free(3 MiB): free, but its segment is split, so it is inactive split memory. (A simpler reading gives
  // 3 MiB: that is the large pool; the small segment's unused 2 MiB - 512 counts in .all too.)
  alloc.free(a);
  EXPECT_EQ(allocated(alloc), I(17 * MiB + 512));
  EXPECT_EQ(alloc.stats().inactive_split_bytes.large_pool.current, I(3 * MiB));
  EXPECT_EQ(alloc.stats().inactive_split_bytes.small_pool.current, I(2 * MiB - 512));
  EXPECT_EQ(alloc.stats().inactive_split_bytes.all.current, I(5 * MiB - 512));
  EXPECT_INVARIANTS(alloc);
  // empty_cache() releases nothing: both segments are partly in use.
  alloc.empty_cache();
  EXPECT_EQ(reserved(alloc), I(22 * MiB));
  EXPECT_EQ(segments(alloc), 2);

  // malloc 11 MiB: nothing cached fits; cudaMalloc 12 MiB (>= 10 MiB rounds to 2 MiB); 1 MiB
  // left is not > 1 MiB, so no split: allocated grows by 12 MiB.
  const auto e = must(alloc.malloc(11 * MiB, 0));
  EXPECT_EQ(alloc.info(e).size_bytes, 12 * MiB);
  EXPECT_EQ(allocated(alloc), I(29 * MiB + 512));
  EXPECT_EQ(reserved(alloc), I(34 * MiB));
  EXPECT_EQ(segments(alloc), 3);
  EXPECT_EQ(alloc.stats().reserved_bytes.all.peak, I(34 * MiB));
  EXPECT_EQ(alloc.stats().allocated_bytes.all.peak, I(29 * MiB + 512));
  EXPECT_EQ(device.used_bytes(), 34 * MiB);
  EXPECT_INVARIANTS(alloc);

  // Freeing everything merges each segment back to one block; empty_cache returns them all.
  for (const auto h : {b, c, d, e}) alloc.free(h);
  EXPECT_EQ(allocated(alloc), 0);
  EXPECT_EQ(alloc.stats().inactive_split_bytes.all.current, 0);
  for (const auto& s : alloc.snapshot()) EXPECT_EQ(s.blocks.size(), 1u);
  alloc.empty_cache();
  EXPECT_EQ(reserved(alloc), 0);
  EXPECT_EQ(device.used_bytes(), 0u);
  EXPECT_EQ(alloc.stats().reserved_bytes.all.peak, I(34 * MiB));
  alloc.reset_peak_stats();
  EXPECT_EQ(alloc.stats().reserved_bytes.all.peak, 0);
  EXPECT_INVARIANTS(alloc);
}

// ------------------------------------------------------------------ streams

TEST(CachingAllocatorStreams, BlocksAreReusedOnlyOnTheirAllocationStream) {
  pc::FixedCapacityDeviceMemory device(GiB);
  pc::CachingAllocator alloc(device);
  const auto a = must(alloc.malloc(3 * MiB, 0));
  const pc::DeviceAddress address = alloc.info(a).address;
  alloc.free(a);
  const auto other = must(alloc.malloc(3 * MiB, 1));
  EXPECT_NE(alloc.info(other).address, address);
  EXPECT_EQ(reserved(alloc), I(40 * MiB));
  const auto same = must(alloc.malloc(3 * MiB, 0));
  EXPECT_EQ(alloc.info(same).address, address);
  EXPECT_INVARIANTS(alloc);
}

TEST(CachingAllocatorStreams, RecordedBlockWaitsUntilTheStreamPassesThePointOfFree) {
  pc::FixedCapacityDeviceMemory device(GiB);
  pc::CachingAllocator alloc(device);
  const pc::StreamId compute = 0;
  const pc::StreamId gather = 1;
  const auto a = must(alloc.malloc(3 * MiB, compute));
  const pc::DeviceAddress address = alloc.info(a).address;
  alloc.record_stream(a, gather);
  alloc.record_stream(a, compute);  // its own stream: ignored
  alloc.note_enqueued(gather, 5);   // five operations enqueued on the gather stream
  alloc.free(a);
  EXPECT_FALSE(alloc.is_live(a));
  EXPECT_EQ(allocated(alloc), 0);
  EXPECT_EQ(alloc.stats().active_bytes.all.current, I(3 * MiB));
  EXPECT_EQ(alloc.pending_free_blocks(), 1u);
  EXPECT_INVARIANTS(alloc);

  // The gather stream has done 4 of 5: the block is not reusable yet.
  alloc.note_completed(gather, 4);
  const auto b = must(alloc.malloc(3 * MiB, compute));
  EXPECT_NE(alloc.info(b).address, address);
  EXPECT_EQ(alloc.pending_free_blocks(), 1u);
  EXPECT_INVARIANTS(alloc);

  // Passing the point is not enough by itself: the next malloc's process_events frees it.
  const std::vector<pc::StreamProgress> progress{{gather, 5}};
  alloc.note_completed(gather, 5);
  EXPECT_EQ(alloc.pending_free_blocks(), 1u);
  const auto c = must(alloc.malloc(3 * MiB, compute));
  EXPECT_EQ(alloc.info(c).address, address);
  EXPECT_EQ(alloc.pending_free_blocks(), 0u);
  EXPECT_EQ(reserved(alloc), I(20 * MiB));
  EXPECT_INVARIANTS(alloc);

  // process_events(points) reports and frees in one call.
  alloc.record_stream(c, gather);
  alloc.note_enqueued(gather, 9);
  alloc.free(c);
  alloc.process_events(progress);  // still at 5
  EXPECT_EQ(alloc.pending_free_blocks(), 1u);
  const std::vector<pc::StreamProgress> later{{gather, 9}};
  alloc.process_events(later);
  EXPECT_EQ(alloc.pending_free_blocks(), 0u);
  EXPECT_EQ(alloc.stats().active_bytes.all.current, I(3 * MiB));  // only b
  EXPECT_INVARIANTS(alloc);

  // mark_streams_synchronized frees whatever waits.
  alloc.record_stream(b, 7);
  alloc.note_enqueued(7, 100);
  alloc.free(b);
  EXPECT_EQ(alloc.pending_free_blocks(), 1u);
  alloc.mark_streams_synchronized();
  EXPECT_EQ(alloc.pending_free_blocks(), 0u);
  EXPECT_EQ(alloc.stats().num_sync_all_streams, 1);
  EXPECT_EQ(alloc.snapshot()[0].blocks.size(), 1u);
  EXPECT_INVARIANTS(alloc);
}

TEST(CachingAllocatorStreams, MisuseIsAnError) {
  pc::FixedCapacityDeviceMemory device(GiB);
  pc::CachingAllocator alloc(device);
  const auto a = must(alloc.malloc(1000, 0));
  alloc.free(a);
  EXPECT_THROW(alloc.free(a), std::invalid_argument);
  EXPECT_THROW(alloc.record_stream(a, 1), std::invalid_argument);
  alloc.note_enqueued(1, 10);
  EXPECT_THROW(alloc.note_enqueued(1, 9), std::invalid_argument);
}

// ------------------------------------------------------------------ out of memory

TEST(CachingAllocatorOom, RetryAfterReleasingCachedSegments) {
  pc::FixedCapacityDeviceMemory device(40 * MiB);
  pc::CachingAllocator alloc(device);
  const auto a = must(alloc.malloc(15 * MiB, 0));  // 16 MiB segment
  alloc.free(a);
  EXPECT_EQ(reserved(alloc), I(16 * MiB));
  const auto b = must(alloc.malloc(30 * MiB, 0));  // 16 + 30 > 40: release the cache, retry
  EXPECT_EQ(alloc.stats().num_alloc_retries, 1);
  EXPECT_EQ(alloc.stats().num_ooms, 0);
  EXPECT_EQ(alloc.stats().num_sync_all_streams, 1);
  EXPECT_EQ(reserved(alloc), I(30 * MiB));
  EXPECT_EQ(alloc.stats().reserved_bytes.all.peak, I(30 * MiB));
  EXPECT_EQ(alloc.info(b).size_bytes, 30 * MiB);
  EXPECT_INVARIANTS(alloc);
}

TEST(CachingAllocatorOom, RetryWaitsForPendingStreamFrees) {
  pc::FixedCapacityDeviceMemory device(40 * MiB);
  pc::CachingAllocator alloc(device);
  const auto a = must(alloc.malloc(15 * MiB, 0));
  alloc.record_stream(a, 1);
  alloc.note_enqueued(1, 3);
  alloc.free(a);  // waits on stream 1, which never reports progress
  ASSERT_EQ(alloc.pending_free_blocks(), 1u);
  const auto b = must(alloc.malloc(30 * MiB, 0));
  EXPECT_EQ(alloc.pending_free_blocks(), 0u);
  EXPECT_EQ(alloc.stats().num_alloc_retries, 1);
  EXPECT_EQ(reserved(alloc), I(30 * MiB));
  alloc.free(b);
  EXPECT_INVARIANTS(alloc);
}

TEST(CachingAllocatorOom, RealOomCarriesTheNumbers) {
  pc::FixedCapacityDeviceMemory device(40 * MiB);
  pc::CachingAllocator alloc(device);
  const auto a = must(alloc.malloc(30 * MiB, 0));
  (void)a;
  const auto r = alloc.malloc(20 * MiB, 0);
  ASSERT_FALSE(r.ok());
  ASSERT_TRUE(r.oom.has_value());
  EXPECT_EQ(r.oom->requested_bytes, 20 * MiB);
  EXPECT_EQ(r.oom->rounded_bytes, 20 * MiB);
  EXPECT_EQ(r.oom->segment_bytes, 20 * MiB);
  EXPECT_EQ(r.oom->allocated_bytes, 30 * MiB);
  EXPECT_EQ(r.oom->reserved_bytes, 30 * MiB);
  EXPECT_EQ(r.oom->device_capacity_bytes, 40 * MiB);
  EXPECT_EQ(r.oom->device_free_bytes, 10 * MiB);
  EXPECT_NE(r.oom->message().find("Tried to allocate 20.00 MiB"), std::string::npos) << r.oom->message();
  EXPECT_NE(r.oom->message().find("30.00 MiB is allocated by PyTorch"), std::string::npos);
  EXPECT_EQ(alloc.stats().num_ooms, 1);
  EXPECT_EQ(alloc.stats().num_alloc_retries, 1);  // the full retry was tried and failed
  EXPECT_EQ(reserved(alloc), I(30 * MiB));
  EXPECT_INVARIANTS(alloc);
}

// ------------------------------------------------------------------ options, one test each

TEST(CachingAllocatorOptions, MaxSplitSizeKeepsSmallRequestsOutOfOversizeBlocks) {
  for (const bool with_option : {false, true}) {
    pc::FixedCapacityDeviceMemory device(GiB);
    pc::CachingAllocator alloc(device, with_option ? with_mss(40) : pc::AllocatorOptions{});
    alloc.free(must(alloc.malloc(50 * MiB, 0)));
    const auto small = must(alloc.malloc(5 * MiB, 0));
    if (with_option) {
      EXPECT_EQ(reserved(alloc), I(70 * MiB));  // new 20 MiB segment, the 50 MiB block untouched
      EXPECT_EQ(alloc.stats().oversize_segments.current, 1);
    } else {
      EXPECT_EQ(reserved(alloc), I(50 * MiB));  // split the cached 50 MiB block
    }
    EXPECT_EQ(alloc.info(small).size_bytes, 5 * MiB);
    EXPECT_INVARIANTS(alloc);
  }
}

TEST(CachingAllocatorOptions, MaxSplitSizeNeverSplitsAndReleasesOversizeBeforeFullRetry) {
  // Large request, oversize cached block within the +20 MiB slack: taken whole, not split.
  {
    pc::FixedCapacityDeviceMemory device(GiB);
    pc::CachingAllocator alloc(device, with_mss(40));
    alloc.free(must(alloc.malloc(70 * MiB, 0)));
    const auto h = must(alloc.malloc(60 * MiB, 0));
    EXPECT_EQ(alloc.info(h).size_bytes, 70 * MiB);
    EXPECT_EQ(allocated(alloc), I(70 * MiB));
    EXPECT_EQ(alloc.stats().oversize_allocations.current, 1);
    EXPECT_INVARIANTS(alloc);
  }
  // Beyond the slack (100 >= 60 + 20): not reused, a new segment.
  {
    pc::FixedCapacityDeviceMemory device(GiB);
    pc::CachingAllocator alloc(device, with_mss(40));
    alloc.free(must(alloc.malloc(100 * MiB, 0)));
    const auto h = must(alloc.malloc(60 * MiB, 0));
    EXPECT_EQ(alloc.info(h).size_bytes, 60 * MiB);
    EXPECT_EQ(reserved(alloc), I(160 * MiB));
  }
  // Device full: the cached oversize block is released without the full (counted) retry.
  {
    pc::FixedCapacityDeviceMemory device(100 * MiB);
    pc::CachingAllocator alloc(device, with_mss(40));
    alloc.free(must(alloc.malloc(80 * MiB, 0)));
    must(alloc.malloc(30 * MiB, 0));
    EXPECT_EQ(reserved(alloc), I(30 * MiB));
    EXPECT_EQ(alloc.stats().num_alloc_retries, 0);
    EXPECT_EQ(alloc.stats().num_sync_all_streams, 0);
    EXPECT_INVARIANTS(alloc);
  }
}

TEST(CachingAllocatorOptions, MaxNonSplitRoundingWidensTheSlack) {
  for (const bool with_option : {false, true}) {
    pc::FixedCapacityDeviceMemory device(GiB);
    auto options = with_mss(40);
    if (with_option) options.max_non_split_rounding_bytes = 50 * MiB;
    pc::CachingAllocator alloc(device, options);
    alloc.free(must(alloc.malloc(100 * MiB, 0)));
    const auto h = must(alloc.malloc(60 * MiB, 0));
    EXPECT_EQ(alloc.info(h).size_bytes, with_option ? 100 * MiB : 60 * MiB);
    EXPECT_EQ(reserved(alloc), I(with_option ? 100 * MiB : 160 * MiB));
  }
}

TEST(CachingAllocatorOptions, RoundupPower2Divisions) {
  pc::AllocatorOptions four;
  four.roundup_power2_divisions.fill(4);
  const std::uint64_t request = 1 * MiB + MiB / 5;  // 1.2 MiB
  EXPECT_EQ(pc::round_allocation_size(request, pc::AllocatorOptions{}), (request + 511) / 512 * 512);
  EXPECT_EQ(pc::round_allocation_size(request, four), MiB + MiB / 4);          // 1.25 MiB
  EXPECT_EQ(pc::round_allocation_size(3 * MiB, four), 3 * MiB);               // on a step
  EXPECT_EQ(pc::round_allocation_size(2 * MiB, four), 2 * MiB);               // a power of two
  EXPECT_EQ(pc::round_allocation_size(5 * MiB + 1, four), 6 * MiB);
  EXPECT_EQ(pc::round_allocation_size(1200, four), 1536u);  // not > 512 x 4: plain rounding
  EXPECT_EQ(pc::round_allocation_size(3000, four), 3072u);
  EXPECT_EQ(pc::round_allocation_size(2100, four), 2560u);  // [2048, 4096) in steps of 512

  pc::FixedCapacityDeviceMemory device(GiB);
  pc::CachingAllocator alloc(device, four);
  const auto h = must(alloc.malloc(request, 0));
  EXPECT_EQ(alloc.info(h).size_bytes, MiB + MiB / 4);
  EXPECT_EQ(alloc.stats().requested_bytes.all.current, I(request));

  // The list form sets intervals: [1:2, 4:8, >:1] -> [1,2) and below: 2; [4,8): 8; above: 1.
  const auto listed = pc::parse_alloc_conf("roundup_power2_divisions:[1:2,4:8,>:1]");
  EXPECT_EQ(listed.roundup_power2_divisions[0], 2u);
  EXPECT_EQ(listed.roundup_power2_divisions[1], 0u);
  EXPECT_EQ(listed.roundup_power2_divisions[2], 8u);
  EXPECT_EQ(listed.roundup_power2_divisions[3], 1u);
  EXPECT_EQ(listed.roundup_power2_divisions[15], 1u);
  EXPECT_EQ(pc::round_allocation_size(5 * MiB + 1, listed), 5 * MiB + MiB / 2);
  EXPECT_EQ(pc::round_allocation_size(9 * MiB + 1, listed), 9 * MiB + 512);
}

TEST(CachingAllocatorOptions, GarbageCollectionThresholdReleasesOldCachedSegments) {
  // 200 MiB device, fraction 0.5 -> 100 MiB allowed; GC above 0.5 x 100 MiB reserved.
  for (const int mode : {0, 1, 2}) {  // 0: no GC; 1: threshold without fraction; 2: both
    pc::AllocatorOptions options;
    if (mode >= 1) options.garbage_collection_threshold = 0.5;
    if (mode != 1) options.per_process_memory_fraction = 0.5;
    pc::FixedCapacityDeviceMemory device(200 * MiB);
    pc::CachingAllocator alloc(device, options);
    const auto a = must(alloc.malloc(30 * MiB, 0));
    const auto b = must(alloc.malloc(30 * MiB, 0));
    alloc.free(a);
    alloc.free(b);
    must(alloc.malloc(40 * MiB, 0));
    EXPECT_EQ(reserved(alloc), I(mode == 2 ? 40 * MiB : 100 * MiB)) << "mode " << mode;
    EXPECT_EQ(alloc.stats().num_alloc_retries, 0);
    EXPECT_INVARIANTS(alloc);
  }
}

TEST(CachingAllocatorOptions, GarbageCollectionReleasesOldestFirstAndStopsAtTarget) {
  // 400 MiB device, fraction 0.5 -> 200 MiB allowed; threshold 0.6 -> GC above 120 MiB reserved.
  pc::AllocatorOptions options;
  options.per_process_memory_fraction = 0.5;
  options.garbage_collection_threshold = 0.6;
  pc::FixedCapacityDeviceMemory device(400 * MiB);
  pc::CachingAllocator alloc(device, options);
  alloc.free(must(alloc.malloc(40 * MiB, 0)));  // search 1; cached at age base 1
  const auto y = must(alloc.malloc(50 * MiB, 0));  // search 2
  const pc::DeviceAddress y_address = alloc.info(y).address;
  alloc.free(y);                                   // cached at age base 2
  must(alloc.malloc(60 * MiB, 0));                 // search 3: 150 MiB reserved
  EXPECT_EQ(reserved(alloc), I(150 * MiB));
  // Search 4 finds nothing: GC must reclaim 30 MiB; ages 3 and 2, average 2.5: only the 40 MiB
  // block is old enough, and 40 >= 30 ends the collection.
  must(alloc.malloc(70 * MiB, 0));
  EXPECT_EQ(reserved(alloc), I(180 * MiB));
  const auto again = must(alloc.malloc(50 * MiB, 0));
  EXPECT_EQ(alloc.info(again).address, y_address);
  EXPECT_INVARIANTS(alloc);
}

TEST(CachingAllocatorOptions, PerProcessMemoryFractionCapsReserved) {
  pc::AllocatorOptions options;
  options.per_process_memory_fraction = 0.5;
  pc::FixedCapacityDeviceMemory device(100 * MiB);
  pc::CachingAllocator alloc(device, options);
  const auto r = alloc.malloc(60 * MiB, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.oom->allowed_bytes, std::optional<std::uint64_t>(50 * MiB));
  EXPECT_EQ(device.malloc_calls(), 0u);  // refused without asking the device
  pc::CachingAllocator unlimited(device);
  EXPECT_TRUE(unlimited.malloc(60 * MiB, 0).ok());
}

TEST(CachingAllocatorOptions, ExpandableSegmentsGrowInPlace) {
  for (const bool expandable : {false, true}) {
    pc::AllocatorOptions options;
    options.expandable_segments = expandable;
    pc::FixedCapacityDeviceMemory device(GiB);
    pc::CachingAllocator alloc(device, options);
    const auto a = must(alloc.malloc(30 * MiB, 0));
    EXPECT_EQ(reserved(alloc), I(expandable ? 40 * MiB : 30 * MiB));  // 20 MiB pages
    const pc::DeviceAddress a_address = alloc.info(a).address;
    alloc.free(a);
    const auto b = must(alloc.malloc(50 * MiB, 0));
    EXPECT_INVARIANTS(alloc);
    if (expandable) {
      // The cached 40 MiB grows by one page into 60 MiB: one range, no second segment.
      EXPECT_EQ(reserved(alloc), I(60 * MiB));
      EXPECT_EQ(alloc.snapshot().size(), 1u);
      EXPECT_EQ(alloc.info(b).size_bytes, 50 * MiB);
    } else {
      EXPECT_EQ(reserved(alloc), I(80 * MiB));
      EXPECT_EQ(alloc.snapshot().size(), 2u);
    }
    EXPECT_EQ(device.used_bytes(), static_cast<std::uint64_t>(reserved(alloc)));
    // Expandable: splits the 10 MiB tail (no 1 MiB rule); otherwise splits the cached 30 MiB.
    const auto c = must(alloc.malloc(3 * MiB, 0));
    EXPECT_EQ(reserved(alloc), I(expandable ? 60 * MiB : 80 * MiB));
    EXPECT_EQ(alloc.info(c).address, expandable ? alloc.info(b).address + 50 * MiB : a_address);
    alloc.free(b);
    alloc.free(c);
    alloc.empty_cache();
    EXPECT_EQ(reserved(alloc), 0);
    EXPECT_EQ(device.used_bytes(), 0u);
    EXPECT_INVARIANTS(alloc);
  }
}

TEST(CachingAllocatorOptions, ExpandableEmptyCacheUnmapsOnlyWholeFreePages) {
  pc::AllocatorOptions options;
  options.expandable_segments = true;
  pc::FixedCapacityDeviceMemory device(GiB);
  pc::CachingAllocator alloc(device, options);
  const auto a = must(alloc.malloc(50 * MiB, 0));  // 60 MiB mapped
  const auto b = must(alloc.malloc(45 * MiB, 0));  // 10 free + 35 more -> 100 MiB mapped
  EXPECT_EQ(reserved(alloc), I(100 * MiB));
  alloc.free(a);  // [0, 50) free: page 0, 1 whole, page 2 shared with b
  alloc.empty_cache();
  EXPECT_EQ(reserved(alloc), I(60 * MiB));
  EXPECT_EQ(device.used_bytes(), 60 * MiB);
  EXPECT_INVARIANTS(alloc);
  const auto c = must(alloc.malloc(30 * MiB, 0));  // maps the hole again
  EXPECT_EQ(reserved(alloc), I(100 * MiB));
  EXPECT_INVARIANTS(alloc);
  alloc.free(b);
  alloc.free(c);
  EXPECT_INVARIANTS(alloc);
}

// ------------------------------------------------------------------ options from text

TEST(CachingAllocatorStats, FlatMapUsesTorchNames) {
  pc::FixedCapacityDeviceMemory device(GiB);
  pc::CachingAllocator alloc(device);
  must(alloc.malloc(3 * MiB, 0));
  const auto flat = alloc.stats().as_flat_map();
  EXPECT_EQ(flat.at("allocated_bytes.all.current"), I(3 * MiB));
  EXPECT_EQ(flat.at("reserved_bytes.large_pool.peak"), I(20 * MiB));
  EXPECT_EQ(flat.at("inactive_split_bytes.all.current"), I(17 * MiB));
  EXPECT_EQ(flat.at("requested_bytes.all.current"), I(3 * MiB));
  EXPECT_EQ(flat.at("active_bytes.small_pool.current"), 0);
  EXPECT_EQ(flat.at("num_alloc_retries"), 0);
  EXPECT_EQ(flat.at("num_ooms"), 0);
  EXPECT_EQ(flat.at("segment.all.current"), 1);
}

TEST(CachingAllocatorConfig, ParsesAllocConfString) {
  const auto o = pc::parse_alloc_conf(
      "max_split_size_mb:128, roundup_power2_divisions:4,garbage_collection_threshold:0.6,"
      "expandable_segments:True,max_non_split_rounding_mb:64,backend:native");
  EXPECT_EQ(o.max_split_size_bytes, std::optional<std::uint64_t>(128 * MiB));
  EXPECT_EQ(o.max_non_split_rounding_bytes, 64 * MiB);
  EXPECT_EQ(o.roundup_power2_divisions[7], 4u);
  EXPECT_DOUBLE_EQ(o.garbage_collection_threshold, 0.6);
  EXPECT_TRUE(o.expandable_segments);
  EXPECT_EQ(pc::parse_alloc_conf(""), pc::AllocatorOptions{});

  auto e = expect_input_error([] { pc::parse_alloc_conf("max_split_size:128"); });
  EXPECT_EQ(e.key(), "max_split_size");
  EXPECT_EQ(e.where().file, "PYTORCH_CUDA_ALLOC_CONF");
  EXPECT_EQ(e.suggestion(), "max_split_size_mb");
  EXPECT_EQ(pc::parse_alloc_conf("max_split_size_mb:20").max_split_size_bytes, std::optional<std::uint64_t>(20 * MiB));
  e = expect_input_error([] { pc::parse_alloc_conf("max_split_size_mb:19"); });
  EXPECT_EQ(e.key(), "max_split_size_mb");
  e = expect_input_error([] { pc::parse_alloc_conf("garbage_collection_threshold:1.5"); });
  EXPECT_EQ(e.key(), "garbage_collection_threshold");
  e = expect_input_error([] { pc::parse_alloc_conf("roundup_power2_divisions:3"); });
  EXPECT_EQ(e.key(), "roundup_power2_divisions");
  e = expect_input_error([] { pc::parse_alloc_conf("backend:cudaMallocAsync"); });
  EXPECT_EQ(e.key(), "backend");
}

TEST(CachingAllocatorConfig, LoadsYamlSectionStrictly) {
  const auto doc = parse_yaml(
      "allocator:\n"
      "  max_split_size_mb: 256\n"
      "  roundup_power2_divisions: {256: 1, 512: 2, \">\": 8}\n"
      "  garbage_collection_threshold: 0.7\n"
      "  per_process_memory_fraction: 0.9\n"
      "  expandable_segments: true\n",
      "scenario.yaml");
  const auto o = pc::load_allocator_options(doc.section("allocator"));
  EXPECT_EQ(o.max_split_size_bytes, std::optional<std::uint64_t>(256 * MiB));
  EXPECT_EQ(o.roundup_power2_divisions[0], 1u);
  EXPECT_EQ(o.roundup_power2_divisions[8], 1u);
  EXPECT_EQ(o.roundup_power2_divisions[9], 2u);
  EXPECT_EQ(o.roundup_power2_divisions[10], 8u);
  EXPECT_DOUBLE_EQ(o.garbage_collection_threshold, 0.7);
  EXPECT_EQ(o.per_process_memory_fraction, std::optional<double>(0.9));
  EXPECT_TRUE(o.expandable_segments);

  const auto conf = parse_yaml("allocator:\n  alloc_conf: \"max_split_size_mb:64,expandable_segments:True\"\n");
  const auto oc = pc::load_allocator_options(conf.section("allocator"));
  EXPECT_EQ(oc.max_split_size_bytes, std::optional<std::uint64_t>(64 * MiB));
  EXPECT_TRUE(oc.expandable_segments);

  auto e = expect_input_error([] {
    pc::load_allocator_options(
        parse_yaml("allocator:\n  max_split_size_mb: 64\n  expandable_segment: true\n", "s.yaml").section("allocator"));
  });
  EXPECT_EQ(e.where().file, "s.yaml");
  EXPECT_EQ(e.where().line, 3);
  EXPECT_NE(e.key().find("expandable_segment"), std::string::npos);
  EXPECT_EQ(e.suggestion(), "expandable_segments");
  e = expect_input_error([] {
    pc::load_allocator_options(parse_yaml("allocator:\n  max_split_size_mb: 10\n").section("allocator"));
  });
  EXPECT_NE(e.key().find("max_split_size_mb"), std::string::npos);
  EXPECT_EQ(e.where().line, 2);
  e = expect_input_error([] {
    pc::load_allocator_options(
        parse_yaml("allocator:\n  alloc_conf: \"max_split_size_mb:64\"\n  max_split_size_mb: 64\n").section("allocator"));
  });
  EXPECT_NE(e.key().find("max_split_size_mb"), std::string::npos);
  e = expect_input_error([] {
    pc::load_allocator_options(parse_yaml("allocator:\n  alloc_conf: \"bogus:1\"\n").section("allocator"));
  });
  EXPECT_NE(e.key().find("alloc_conf"), std::string::npos);
}

// ------------------------------------------------------------------ randomised invariants

namespace {

struct Live {
  pc::BlockHandle handle;
  std::uint64_t size_bytes;
};

// Runs `steps` random operations and checks every invariant after each. Returns a fingerprint.
std::string run_random(std::uint32_t seed, const pc::AllocatorOptions& options, int steps) {
  std::mt19937_64 rng(seed);
  pc::FixedCapacityDeviceMemory device(600 * MiB);
  pc::CachingAllocator alloc(device, options);
  std::vector<Live> live;
  std::vector<pc::StreamPoint> enqueued(3, 0);
  std::vector<pc::StreamPoint> completed(3, 0);
  pc::MemoryStats last = alloc.stats();
  std::string fingerprint;
  auto pick = [&](std::uint64_t n) { return static_cast<std::size_t>(rng() % n); };
  for (int step = 0; step < steps; ++step) {
    const std::uint64_t dice = rng() % 100;
    if (dice < 50 || live.empty()) {
      std::uint64_t size = 0;
      switch (rng() % 4) {
        case 0: size = 1 + rng() % 4096; break;            // tiny
        case 1: size = 1 + rng() % (1 * MiB); break;       // small pool
        case 2: size = 1 * MiB + rng() % (12 * MiB); break;  // 20 MiB segments
        default: size = 1 * MiB + rng() % (90 * MiB); break;
      }
      const auto stream = static_cast<pc::StreamId>(rng() % 3);
      const auto r = alloc.malloc(size, stream);
      if (r.ok()) {
        const auto info = alloc.info(*r.block);
        EXPECT_EQ(info.requested_bytes, size);
        EXPECT_GE(info.size_bytes, size);
        EXPECT_EQ(info.stream, stream);
        live.push_back({*r.block, info.size_bytes});
        fingerprint += std::to_string(info.address % 1000003) + ",";
      } else {
        EXPECT_TRUE(r.oom.has_value());
        fingerprint += "oom,";
      }
    } else if (dice < 85) {
      const std::size_t i = pick(live.size());
      if (rng() % 3 == 0) {
        const auto s = static_cast<pc::StreamId>(rng() % 3);
        enqueued[s] += 1 + rng() % 3;
        alloc.note_enqueued(s, enqueued[s]);
        alloc.record_stream(live[i].handle, s);
      }
      alloc.free(live[i].handle);
      live[i] = live.back();
      live.pop_back();
    } else if (dice < 97) {
      const auto s = static_cast<pc::StreamId>(rng() % 3);
      completed[s] = std::min(enqueued[s], completed[s] + rng() % 4);
      const std::vector<pc::StreamProgress> p{{s, completed[s]}};
      alloc.process_events(p);
    } else if (dice < 99) {
      alloc.empty_cache();
      completed = enqueued;
    } else {
      alloc.reset_peak_stats();
      last = alloc.stats();
    }
    const auto problems = alloc.check_invariants();
    EXPECT_TRUE(problems.empty()) << "seed " << seed << " step " << step << ":\n" << join(problems);
    if (!problems.empty()) return fingerprint;
    const auto& now = alloc.stats();
    EXPECT_GE(now.allocated_bytes.all.peak, last.allocated_bytes.all.peak);
    EXPECT_GE(now.reserved_bytes.all.peak, last.reserved_bytes.all.peak);
    EXPECT_GE(now.active_bytes.all.peak, last.active_bytes.all.peak);
    EXPECT_GE(now.requested_bytes.all.peak, last.requested_bytes.all.peak);
    EXPECT_LE(now.allocated_bytes.all.current, now.active_bytes.all.current);
    EXPECT_LE(now.active_bytes.all.current, now.reserved_bytes.all.current);
    EXPECT_EQ(device.used_bytes(), static_cast<std::uint64_t>(now.reserved_bytes.all.current));
    last = now;
  }
  for (const auto& l : live) alloc.free(l.handle);
  alloc.empty_cache();
  EXPECT_EQ(alloc.stats().allocated_bytes.all.current, 0);
  EXPECT_EQ(alloc.stats().reserved_bytes.all.current, 0);
  EXPECT_EQ(device.used_bytes(), 0u);
  EXPECT_TRUE(alloc.check_invariants().empty());
  fingerprint += "|" + std::to_string(alloc.stats().num_ooms) + "," + std::to_string(alloc.stats().num_alloc_retries);
  return fingerprint;
}

std::vector<std::pair<std::string, pc::AllocatorOptions>> option_sets() {
  std::vector<std::pair<std::string, pc::AllocatorOptions>> sets;
  sets.emplace_back("default", pc::AllocatorOptions{});
  sets.emplace_back("max_split", pc::parse_alloc_conf("max_split_size_mb:32"));
  sets.emplace_back("roundup", pc::parse_alloc_conf("roundup_power2_divisions:[1:4,8:2,>:8]"));
  auto gc = pc::parse_alloc_conf("garbage_collection_threshold:0.6,max_split_size_mb:64");
  gc.per_process_memory_fraction = 0.8;
  sets.emplace_back("gc", gc);
  sets.emplace_back("expandable", pc::parse_alloc_conf("expandable_segments:True"));
  return sets;
}

}  // namespace

TEST(CachingAllocatorRandom, InvariantsHoldAfterEveryOperation) {
  for (const auto& [name, options] : option_sets()) {
    for (const std::uint32_t seed : {1u, 2u, 3u, 42u}) {
      SCOPED_TRACE(name + " seed " + std::to_string(seed));
      run_random(seed, options, 3000);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(CachingAllocatorRandom, SameSeedSameResult) {
  for (const auto& [name, options] : option_sets()) {
    EXPECT_EQ(run_random(7, options, 1500), run_random(7, options, 1500)) << name;
  }
}

TEST(CachingAllocatorRandom, RandomSequencesHitTheOomPath) {
  // The random mix on 600 MiB does run out: the OOM path is part of what the invariants cover.
  const std::string fp = run_random(3, pc::AllocatorOptions{}, 3000);
  EXPECT_NE(fp.find("oom"), std::string::npos);
}
