#include "engine/kv/block_manager.h"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

namespace pagoda {
namespace {

TEST(BlockManager, RejectsBadSizes) {
  EXPECT_THROW(BlockManager(0, 16), std::invalid_argument);
  EXPECT_THROW(BlockManager(4, 0), std::invalid_argument);
}

TEST(BlockManager, AllocatesCeilTokensOverBlockSizeAndFreesAll) {
  BlockManager bm(8, 4);
  EXPECT_EQ(bm.blocks_for(0), 0);
  EXPECT_EQ(bm.blocks_for(1), 1);
  EXPECT_EQ(bm.blocks_for(4), 1);
  EXPECT_EQ(bm.blocks_for(5), 2);
  BlockTable a, b;
  ASSERT_TRUE(bm.can_allocate(a, 9));
  bm.allocate(a, 9);  // 3 blocks
  EXPECT_EQ(a.size(), 3u);
  EXPECT_EQ(bm.num_used(), 3);
  EXPECT_EQ(bm.num_free(), 5);
  bm.allocate(a, 12);  // still 3: growing within the last block needs nothing
  EXPECT_EQ(a.size(), 3u);
  EXPECT_TRUE(bm.can_allocate(b, 20));   // 5 blocks: exactly what is free
  EXPECT_FALSE(bm.can_allocate(b, 21));  // 6 blocks
  EXPECT_THROW(bm.allocate(b, 21), std::runtime_error);
  EXPECT_TRUE(b.empty());
  bm.allocate(b, 20);
  std::set<int32_t> ids(a.begin(), a.end());
  ids.insert(b.begin(), b.end());
  EXPECT_EQ(ids.size(), 8u);  // every block handed out once
  EXPECT_EQ(bm.num_free(), 0);
  bm.free(a);
  bm.free(b);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(bm.num_used(), 0);
}

TEST(BlockManager, AppendSlotTakesANewBlockOnlyAtABlockBoundary) {
  BlockManager bm(2, 4);
  BlockTable t;
  bm.allocate(t, 4);
  EXPECT_EQ(bm.num_used(), 1);
  // Token at position 4 (sequence now 5 long) starts block 2.
  ASSERT_TRUE(bm.can_append(t, 5));
  EXPECT_FALSE(bm.append_slot(t, 5).has_value());
  EXPECT_EQ(t.size(), 2u);
  EXPECT_TRUE(bm.can_append(t, 8));  // positions 5..7 fit the last block
  EXPECT_FALSE(bm.can_append(t, 9)); // position 8 needs a third block
  EXPECT_THROW(bm.append_slot(t, 9), std::runtime_error);
  bm.free(t);
}

TEST(BlockManager, ForkSharesBlocksAndCopiesOnWrite) {
  BlockManager bm(4, 4);
  BlockTable parent;
  bm.allocate(parent, 6);  // 2 blocks, the last one half full
  BlockTable child = bm.fork(parent);
  EXPECT_EQ(child, parent);
  EXPECT_EQ(bm.ref_count(parent[0]), 2);
  EXPECT_EQ(bm.num_used(), 2);
  // The child writes position 6 in the shared last block: it gets a copy.
  auto copy = bm.append_slot(child, 7);
  ASSERT_TRUE(copy.has_value());
  EXPECT_EQ(copy->src, parent[1]);
  EXPECT_EQ(copy->dst, child[1]);
  EXPECT_NE(child[1], parent[1]);
  EXPECT_EQ(child[0], parent[0]);
  EXPECT_EQ(bm.ref_count(parent[1]), 1);
  EXPECT_EQ(bm.ref_count(child[1]), 1);
  EXPECT_EQ(bm.num_used(), 3);
  // The parent now owns its last block alone: no copy.
  EXPECT_FALSE(bm.append_slot(parent, 7).has_value());
  bm.free(parent);
  EXPECT_EQ(bm.num_used(), 2);  // shared first block still held by the child
  EXPECT_EQ(bm.ref_count(child[0]), 1);
  bm.free(child);
  EXPECT_EQ(bm.num_used(), 0);
}

TEST(BlockManager, FreeingABlockTwiceIsALogicError) {
  BlockManager bm(2, 4);
  BlockTable t;
  bm.allocate(t, 4);
  BlockTable copy = t;
  bm.free(t);
  EXPECT_THROW(bm.free(copy), std::logic_error);
}

}  // namespace
}  // namespace pagoda
