// The radix heap under the event engine must pop in exactly the order of a binary heap on
// (time, sequence number): checked against std::priority_queue on random monotone workloads
// with many equal times, far-future events and pushes at the current time.
#include <gtest/gtest.h>

#include <cstdint>
#include <queue>
#include <random>
#include <vector>

#include "sim/engine/monotone_event_queue.hpp"

namespace ps = prefetchlab::sim;

namespace {

struct Item {
  std::int64_t time_ns;
  std::uint64_t seq;
};

struct Later {
  bool operator()(const Item& a, const Item& b) const {
    return a.time_ns != b.time_ns ? a.time_ns > b.time_ns : a.seq > b.seq;
  }
};

// Interleaves pushes and pops as a simulation does: every push is at or after the last popped
// time, drawn from `delay` (which may return 0: an event at the current instant).
template <class Delay>
void expect_heap_order(std::uint32_t seed, int operations, Delay delay) {
  std::mt19937_64 rng(seed);
  ps::MonotoneEventQueue<Item> queue;
  std::priority_queue<Item, std::vector<Item>, Later> reference;
  std::int64_t now_ns = 0;
  std::uint64_t seq = 0;
  for (int op = 0; op < operations; ++op) {
    const bool push = reference.empty() || rng() % 100 < 55;
    if (push) {
      const Item item{now_ns + delay(rng), seq++};
      queue.push(item);
      reference.push(item);
    } else {
      const Item got = queue.pop();
      const Item want = reference.top();
      reference.pop();
      ASSERT_EQ(got.time_ns, want.time_ns) << "operation " << op;
      ASSERT_EQ(got.seq, want.seq) << "operation " << op << ", time " << want.time_ns;
      now_ns = got.time_ns;
    }
    ASSERT_EQ(queue.size(), reference.size());
  }
  while (!reference.empty()) {
    ASSERT_FALSE(queue.empty());
    const Item got = queue.pop();
    ASSERT_EQ(got.seq, reference.top().seq);
    reference.pop();
  }
  EXPECT_TRUE(queue.empty());
}

}  // namespace

TEST(MonotoneEventQueue, PopsInTimeThenInsertionOrderLikeAHeap) {
  // Few distinct delays: many equal times, in and out of the current bucket.
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    expect_heap_order(seed, 20'000, [](std::mt19937_64& rng) { return static_cast<std::int64_t>(rng() % 4) * 100; });
  }
}

TEST(MonotoneEventQueue, HandlesWideDelaysAndFarFutureEvents) {
  // Delays from 0 to ~2^40 ns: events move down through many buckets before they run.
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    expect_heap_order(seed, 20'000, [](std::mt19937_64& rng) {
      const int bits = static_cast<int>(rng() % 41);
      return bits == 0 ? std::int64_t{0} : static_cast<std::int64_t>(rng() % (std::uint64_t{1} << bits));
    });
  }
}

TEST(MonotoneEventQueue, EqualTimesPushedBeforeAndAfterARefillStayFirstInFirstOut) {
  ps::MonotoneEventQueue<Item> queue;
  queue.push({1000, 0});
  queue.push({5, 1});
  queue.push({1000, 2});
  EXPECT_EQ(queue.pop().seq, 1u);  // refills from the bucket holding time 5
  queue.push({1000, 3});           // same time as 0 and 2, pushed after them
  queue.push({5, 4});              // at the current time: runs next
  EXPECT_EQ(queue.pop().seq, 4u);
  EXPECT_EQ(queue.pop().seq, 0u);
  EXPECT_EQ(queue.pop().seq, 2u);
  EXPECT_EQ(queue.pop().seq, 3u);
  EXPECT_TRUE(queue.empty());
}
