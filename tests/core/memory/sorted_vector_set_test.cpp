// SortedVectorSet (core/memory/sorted_vector_set.hpp) against std::set: the same keys in the same
// order after any sequence of inserts and erases, and the same answers to lower_bound and count,
// so the caching allocator's pools choose the same blocks either way.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "core/memory/sorted_vector_set.hpp"

namespace {

struct Key {
  int stream;
  std::uint64_t size;
  std::uint32_t block;
  friend auto operator<=>(const Key&, const Key&) = default;
};

}  // namespace

TEST(SortedVectorSet, BehavesAsStdSetUnderRandomInsertsAndErases) {
  std::mt19937_64 rng(20261207);
  prefetchlab::core::SortedVectorSet<Key> flat;
  std::set<Key> tree;
  const auto random_key = [&] {
    return Key{static_cast<int>(rng() % 3), (rng() % 64) * 512, static_cast<std::uint32_t>(rng() % 200)};
  };
  for (int step = 0; step < 20000; ++step) {
    const Key key = random_key();
    switch (rng() % 4) {
      case 0:
      case 1:
        EXPECT_EQ(flat.insert(key), tree.insert(key).second) << step;
        break;
      case 2:
        EXPECT_EQ(flat.erase(key), tree.erase(key)) << step;
        break;
      default: {  // erase at the lower bound of a search, as the allocator takes a block
        const auto f = flat.lower_bound(key);
        const auto t = tree.lower_bound(key);
        ASSERT_EQ(f == flat.end(), t == tree.end()) << step;
        if (f != flat.end()) {
          EXPECT_EQ(*f, *t) << step;
          const auto f_next = flat.erase(f);
          const auto t_next = tree.erase(t);
          ASSERT_EQ(f_next == flat.end(), t_next == tree.end()) << step;
          if (f_next != flat.end()) {
            EXPECT_EQ(*f_next, *t_next) << step;
          }
        }
      }
    }
    EXPECT_EQ(flat.count(key), tree.count(key)) << step;
    ASSERT_EQ(flat.size(), tree.size()) << step;
  }
  EXPECT_TRUE(std::equal(flat.begin(), flat.end(), tree.begin(), tree.end()));
  EXPECT_GT(flat.size(), 100u) << "the sequence should leave a sizeable set to compare";
}
