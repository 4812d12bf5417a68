#include "engine/kv/block_manager.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <stdexcept>
#include <vector>

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

// ---- prefix caching ---------------------------------------------------------

std::vector<int32_t> iota_tokens(int n, int start = 100) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(BlockManagerPrefixCache, ASecondSequenceTakesTheCachedFullBlocksOfItsPrefix) {
  BlockManager bm(8, 4, true);
  std::vector<int32_t> a = iota_tokens(10);  // blocks [100..103] [104..107] + 2 tokens
  BlockTable ta;
  EXPECT_EQ(bm.acquire_cached_prefix(a, 9, ta), 0);  // nothing cached yet
  bm.allocate(ta, 10);
  int64_t rec = 0;
  bm.cache_full_blocks(ta, a, 6, &rec);  // only block 0's K/V are all computed
  EXPECT_EQ(rec, 1);
  EXPECT_EQ(bm.num_cached_blocks(), 1);
  bm.cache_full_blocks(ta, a, 10, &rec);
  EXPECT_EQ(rec, 2);
  EXPECT_EQ(bm.num_cached_blocks(), 2);
  bm.check_invariants();

  // Same first block, different second: one block hit, shared.
  std::vector<int32_t> b = a;
  b[5] = 7;
  BlockTable tb;
  EXPECT_EQ(bm.acquire_cached_prefix(b, 2, tb), 4);
  ASSERT_EQ(tb.size(), 1u);
  EXPECT_EQ(tb[0], ta[0]);
  EXPECT_EQ(bm.ref_count(ta[0]), 2);
  // Same prefix: both blocks, but never more than max_blocks.
  BlockTable tc;
  EXPECT_EQ(bm.acquire_cached_prefix(a, 1, tc), 4);
  bm.free(tc);
  EXPECT_EQ(bm.acquire_cached_prefix(a, 2, tc), 8);
  EXPECT_EQ(tc, BlockTable(ta.begin(), ta.begin() + 2));
  EXPECT_THROW(bm.acquire_cached_prefix(a, 2, tc), std::invalid_argument);  // not empty
  bm.check_invariants();
  bm.free(ta);
  bm.free(tb);
  bm.free(tc);
  EXPECT_EQ(bm.num_used(), 0);
  bm.check_invariants();
}

TEST(BlockManagerPrefixCache, FreedBlocksStayCachedUntilEvictedLeastRecentlyFreedFirst) {
  BlockManager bm(4, 2, true);
  const std::vector<int32_t> a = iota_tokens(4, 10), b = iota_tokens(4, 20);
  BlockTable ta, tb;
  int64_t ra = 0, rb = 0;
  bm.allocate(ta, 4);
  bm.cache_full_blocks(ta, a, 4, &ra);
  bm.allocate(tb, 4);
  bm.cache_full_blocks(tb, b, 4, &rb);
  bm.free(ta);  // a's blocks freed first: evicted first (its tail before its head)
  bm.free(tb);
  EXPECT_EQ(bm.num_free(), 4);
  EXPECT_EQ(bm.num_cached_blocks(), 4);
  // A hit on b takes its free blocks back out of the free list.
  BlockTable hb;
  EXPECT_EQ(bm.acquire_cached_prefix(b, 2, hb), 4);
  EXPECT_EQ(bm.num_free(), 2);
  bm.check_invariants();
  // One fresh block evicts a's tail block (freed first), so a now hits one block.
  BlockTable fresh;
  bm.allocate(fresh, 1);
  EXPECT_EQ(bm.num_cached_blocks(), 3);
  BlockTable ha;
  EXPECT_EQ(bm.acquire_cached_prefix(a, 2, ha), 2);
  bm.check_invariants();
  for (BlockTable* t : {&hb, &fresh, &ha}) bm.free(*t);
  bm.check_invariants();
  EXPECT_EQ(bm.num_used(), 0);
}

TEST(BlockManagerPrefixCache, ADuplicateBlockIsRecordedButTheFirstServesHits) {
  BlockManager bm(6, 2, true);
  const std::vector<int32_t> a = iota_tokens(4);
  BlockTable t1, t2;
  int64_t r1 = 0, r2 = 0;
  bm.allocate(t1, 4);
  bm.allocate(t2, 4);  // the same tokens computed twice (both admitted before either cached)
  bm.cache_full_blocks(t1, a, 4, &r1);
  bm.cache_full_blocks(t2, a, 4, &r2);
  EXPECT_EQ(bm.num_cached_blocks(), 2);
  bm.check_invariants();
  BlockTable h;
  EXPECT_EQ(bm.acquire_cached_prefix(a, 2, h), 4);
  EXPECT_EQ(h, t1);
  bm.free(t1);
  bm.free(t2);
  bm.free(h);
  bm.check_invariants();
}

TEST(BlockManagerPrefixCache, WithoutCachingNothingIsRecordedOrFound) {
  BlockManager bm(4, 2);
  const std::vector<int32_t> a = iota_tokens(4);
  BlockTable t;
  int64_t r = 0;
  bm.allocate(t, 4);
  bm.cache_full_blocks(t, a, 4, &r);
  EXPECT_EQ(r, 0);
  bm.free(t);
  EXPECT_EQ(bm.acquire_cached_prefix(a, 2, t), 0);
  EXPECT_EQ(bm.num_cached_blocks(), 0);
  bm.check_invariants();
}

// A released sequence's partly filled last block serves the longest prefix
// of its tokens to a sequence continuing the same full blocks.
TEST(BlockManagerPartialCache, ARecordedPartialBlockServesPrefixesOfItsTokens) {
  BlockManager bm(8, 4, true);
  const std::vector<int32_t> a = iota_tokens(11, 10);  // 2 full blocks + 3 tokens
  BlockTable t;
  int64_t rec = 0;
  bm.allocate(t, 11);
  bm.cache_full_blocks(t, a, 10, &rec);  // 10 computed: the 11th was only sampled
  const int32_t last = t[2];
  bm.cache_partial_block(t, a, 10);  // tokens 8, 9 in the third block
  bm.free(t);
  EXPECT_EQ(bm.num_partial_blocks(), 1);
  bm.check_invariants();

  // The same 10 tokens and one more: 2 full blocks, then both partial tokens.
  std::vector<int32_t> b(a.begin(), a.begin() + 10);
  b.push_back(99);
  BlockTable h;
  ASSERT_EQ(bm.acquire_cached_prefix(b, (11 - 1) / 4, h), 8);
  int32_t src = -1;
  EXPECT_EQ(bm.acquire_cached_partial(b, 10, h, &src), 2);
  EXPECT_EQ(src, last);
  EXPECT_EQ(bm.ref_count(last), 1);  // pinned: out of the free list
  const int64_t free_pinned = bm.num_free();
  bm.check_invariants();
  bm.release_pinned(src);
  EXPECT_EQ(bm.num_free(), free_pinned + 1);
  EXPECT_EQ(bm.num_partial_blocks(), 1);  // the record stays

  // The first 10 tokens alone (their last one is computed, so 9 at most)
  // take 1 of them; tokens that differ at the first partial one take none.
  int32_t src2 = -1;
  EXPECT_EQ(bm.acquire_cached_partial(std::vector<int32_t>(a.begin(), a.begin() + 10), 9, h, &src2),
            1);
  bm.release_pinned(src2);
  std::vector<int32_t> c = b;
  c[8] = 77;
  int32_t src3 = -1;
  EXPECT_EQ(bm.acquire_cached_partial(c, 10, h, &src3), 0);
  EXPECT_EQ(src3, -1);
  bm.free(h);

  // Other full blocks before the same partial tokens: no hit.
  std::vector<int32_t> d = b;
  d[0] = 55;
  BlockTable hd;
  EXPECT_EQ(bm.acquire_cached_prefix(d, 2, hd), 0);
  EXPECT_EQ(bm.acquire_cached_partial(d, 10, hd, &src3), 0);
  bm.check_invariants();
  EXPECT_EQ(bm.num_used(), 0);
}

TEST(BlockManagerPartialCache, SharedOrFullOrUncachedBlocksAreNotRecordedAndTakingEvicts) {
  BlockManager bm(4, 4, true);
  const std::vector<int32_t> a = iota_tokens(6, 30);
  BlockTable t;
  int64_t rec = 0;
  bm.allocate(t, 6);
  bm.cache_full_blocks(t, a, 6, &rec);
  BlockTable f = bm.fork(t);  // shared: not recorded
  bm.cache_partial_block(t, a, 6);
  EXPECT_EQ(bm.num_partial_blocks(), 0);
  bm.free(f);
  bm.cache_partial_block(t, a, 8);  // ends on a block boundary: nothing partial
  EXPECT_EQ(bm.num_partial_blocks(), 0);
  bm.cache_partial_block(t, a, 6);
  EXPECT_EQ(bm.num_partial_blocks(), 1);
  bm.free(t);
  // Taking every free block for new tokens evicts the record with its block.
  BlockTable all;
  bm.allocate(all, 16);
  EXPECT_EQ(bm.num_partial_blocks(), 0);
  bm.check_invariants();
  bm.free(all);
  BlockTable h;
  int32_t src = -1;
  bm.acquire_cached_prefix(a, 1, h);
  EXPECT_EQ(bm.acquire_cached_partial(a, 5, h, &src), 0);
  bm.free(h);

  BlockManager plain(4, 4);  // no caching: no records at all
  BlockTable p;
  plain.allocate(p, 6);
  plain.cache_partial_block(p, a, 6);
  EXPECT_EQ(plain.num_partial_blocks(), 0);
  plain.free(p);
  EXPECT_EQ(plain.acquire_cached_partial(a, 5, p, &src), 0);
  EXPECT_THROW(plain.release_pinned(0), std::logic_error);
}

TEST(BlockManagerPartialCache, APinnedBlockIsNeverTakenForNewTokens) {
  BlockManager bm(3, 4, true);
  const std::vector<int32_t> a = iota_tokens(6, 40);
  BlockTable t;
  int64_t rec = 0;
  bm.allocate(t, 6);
  bm.cache_full_blocks(t, a, 6, &rec);
  bm.cache_partial_block(t, a, 6);
  bm.free(t);
  BlockTable h;
  ASSERT_EQ(bm.acquire_cached_prefix(a, 1, h), 4);
  int32_t src = -1;
  ASSERT_EQ(bm.acquire_cached_partial(a, 5, h, &src), 1);
  // 3 blocks: h's one, the pinned one, one free: room for one more only.
  EXPECT_TRUE(bm.can_allocate(h, 8));
  EXPECT_FALSE(bm.can_allocate(h, 12));
  bm.allocate(h, 8);
  EXPECT_NE(h[1], src);
  bm.check_invariants();
  bm.release_pinned(src);
  bm.free(h);
  EXPECT_EQ(bm.num_used(), 0);
  bm.check_invariants();
}

}  // namespace
}  // namespace pagoda
