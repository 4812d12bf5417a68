// HostBlockPool (the swap space's block bookkeeping) and block_runs (how a
// step's swap pairs are coalesced into copies).
#include "engine/kv/host_block_pool.h"

#include <gtest/gtest.h>

#include <vector>

#include "engine/kv/block_swap.h"

namespace pagoda {
namespace {

TEST(HostBlockPool, AllocatesLowestIdsFirstAndFreesBack) {
  HostBlockPool pool(6);
  EXPECT_EQ(pool.num_free(), 6);
  EXPECT_EQ(pool.usage(), 0.0);
  BlockTable a = pool.allocate(3);
  EXPECT_EQ(a, (BlockTable{0, 1, 2}));
  BlockTable b = pool.allocate(2);
  EXPECT_EQ(b, (BlockTable{3, 4}));
  EXPECT_EQ(pool.num_used(), 5);
  EXPECT_DOUBLE_EQ(pool.usage(), 5.0 / 6.0);
  EXPECT_TRUE(pool.in_use(4));
  EXPECT_FALSE(pool.in_use(5));
  EXPECT_FALSE(pool.can_allocate(2));
  EXPECT_THROW(pool.allocate(2), std::runtime_error);
  pool.check_invariants();
  pool.free(a);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(pool.allocate(2), (BlockTable{0, 1}));  // a's first blocks again, in order
  pool.check_invariants();
}

TEST(HostBlockPool, FreeingABlockNotInUseThrows) {
  HostBlockPool pool(3);
  BlockTable t = pool.allocate(1);
  BlockTable again = t;
  pool.free(t);
  EXPECT_THROW(pool.free(again), std::logic_error);
  BlockTable out_of_range{7};
  EXPECT_THROW(pool.free(out_of_range), std::logic_error);
  pool.check_invariants();
}

TEST(HostBlockPool, AnEmptyPoolHoldsNothing) {
  HostBlockPool pool(0);
  EXPECT_EQ(pool.usage(), 0.0);
  EXPECT_TRUE(pool.can_allocate(0));
  EXPECT_FALSE(pool.can_allocate(1));
  EXPECT_TRUE(pool.allocate(0).empty());
  EXPECT_THROW(HostBlockPool(-1), std::invalid_argument);
}

TEST(BlockRuns, MergesPairsWhoseDeviceAndHostIdsBothFollowOn) {
  const std::vector<BlockSwap> pairs = {{4, 0}, {5, 1}, {6, 2}, {9, 3}, {10, 7}, {11, 8}, {3, 9}};
  EXPECT_EQ(block_runs(pairs),
            (std::vector<BlockRun>{{4, 0, 3}, {9, 3, 1}, {10, 7, 2}, {3, 9, 1}}));
  EXPECT_TRUE(block_runs({}).empty());
}

}  // namespace
}  // namespace pagoda
