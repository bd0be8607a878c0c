// launch_config.hpp: the CUDA device's grid sizes, computed on the host.
#include "gpu_backend/device/launch_config.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace pg = prefetchlab::gpu;

TEST(LaunchConfig, VectorWidthIsSixteenBytesOnlyWhenEveryOperandIsAligned) {
  EXPECT_EQ(pg::plan_elementwise_launch(1 << 20, 2, true, 132).vector_width, 8);
  EXPECT_EQ(pg::plan_elementwise_launch(1 << 20, 4, true, 132).vector_width, 4);
  EXPECT_EQ(pg::plan_elementwise_launch(1 << 20, 2, false, 132).vector_width, 1);
  EXPECT_TRUE(pg::all_aligned_16({0x1000, 0x2010, 0}));  // 0: an operand the op does not read
  EXPECT_FALSE(pg::all_aligned_16({0x1000, 0x2002}));
}

TEST(LaunchConfig, GridCoversSmallPassesAndCapsLargeOnesAtResidentBlocks) {
  // 10,000 bf16 elements in vectors of 8: 1,250 threads, 5 blocks of 256.
  const pg::ElementwiseLaunch small = pg::plan_elementwise_launch(10'000, 2, true, 132);
  EXPECT_EQ(small.threads, 256u);
  EXPECT_EQ(small.blocks, 5u);
  EXPECT_GE(static_cast<std::int64_t>(small.blocks) * small.threads * small.vector_width, 10'000);
  // A billion elements: capped at 8 blocks per SM, the grid-stride loop does the rest.
  EXPECT_EQ(pg::plan_elementwise_launch(1'000'000'000, 2, true, 132).blocks, 132u * 8u);
  EXPECT_EQ(pg::plan_elementwise_launch(1'000'000'000, 2, true, 108).blocks, 108u * 8u);
  // Nothing to do still launches a valid grid.
  EXPECT_EQ(pg::plan_elementwise_launch(0, 4, true, 132).blocks, 1u);
  EXPECT_THROW(pg::plan_elementwise_launch(10, 0, true, 132), std::invalid_argument);
  EXPECT_THROW(pg::plan_elementwise_launch(10, 2, true, 0), std::invalid_argument);
}

TEST(LaunchConfig, RowLaunchIsOneBlockPerRowOfWholeWarps) {
  const pg::RowLaunch gpt2 = pg::plan_row_launch(4096, 1024);
  EXPECT_EQ(gpt2.blocks, 4096u);
  EXPECT_EQ(gpt2.threads, 1024u);
  EXPECT_EQ(pg::plan_row_launch(3, 5).threads, 32u);
  EXPECT_EQ(pg::plan_row_launch(3, 100).threads, 128u);
  EXPECT_EQ(pg::plan_row_launch(3, 8192).threads, 1024u);  // wide rows: threads stride over them
  EXPECT_THROW(pg::plan_row_launch(0, 10), std::invalid_argument);
  EXPECT_EQ(pg::column_sum_blocks(1024), 32u);
  EXPECT_EQ(pg::column_sum_blocks(1025), 33u);
}
