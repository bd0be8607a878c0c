// sim/engine/id_window.hpp: a table keyed by growing ids that keeps only the ids in flight.
#include "sim/engine/id_window.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace prefetchlab::sim {
namespace {

TEST(IdWindow, EntriesAreMadeOnFirstUseAndGoFromTheFrontOnceFinished) {
  IdWindow<int> window(-1);
  window[2] = 7;  // ids 0 and 1 are made unused on the way
  EXPECT_EQ(window.size(), 3u);
  EXPECT_EQ(window[0], -1);
  window[0] = 5;
  const auto finished = [](int value) { return value < 0; };
  window.drop_finished(finished);  // id 0 is still in use: nothing goes
  EXPECT_EQ(window.size(), 3u);
  EXPECT_FALSE(window.dropped(0));
  window[0] = -1;
  window.drop_finished(finished);  // ids 0 and 1 go; id 2 (in use) stops the drop
  EXPECT_EQ(window.size(), 1u);
  EXPECT_TRUE(window.dropped(1));
  EXPECT_FALSE(window.dropped(2));
  EXPECT_EQ(window[2], 7);
  EXPECT_THROW(window[1], std::logic_error);
  window[2] = -1;
  window.drop_finished(finished);
  EXPECT_EQ(window.size(), 0u);
  window[3] = 1;  // later ids still come
  EXPECT_EQ(window.size(), 1u);
}

}  // namespace
}  // namespace prefetchlab::sim
