// ModelRunner::build_batch against a batch worked out by hand.
#include <gtest/gtest.h>

#include "engine/model_runner.h"
#include "engine_test_fakes.h"

namespace pagoda {
namespace {

TEST(ModelRunner, BuildsSlotMappingBlockTablesAndLogitsIndicesByHand) {
  GenerateRequest a{std::string("a"), {1, 10, 11, 12, 13, 14}};  // decoding: 6 computed + 1 new
  GenerateRequest b{std::string("b"), {1, 20, 21, 22, 23, 24, 25, 26, 27, 28}};  // chunk 3..7 of 10
  GenerateRequest c{std::string("c"), {1, 30, 31}};  // whole prefill
  Sequence sa(a, 10, 0), sb(b, 10, 0), sc(c, 10, 0);
  sa.token_ids.push_back(15);
  sa.num_computed_tokens = 6;
  sa.block_table = {7, 2};  // block_size 4: positions 0-3 in 7, 4-7 in 2
  sb.num_computed_tokens = 3;
  sb.block_table = {0, 5};
  sc.block_table = {9};
  SchedulerOutput out;
  out.seqs = {{&sa, 1, true}, {&sb, 5, false}, {&sc, 3, true}};
  ForwardBatch fb = ModelRunner::build_batch(out, 4);
  EXPECT_EQ(fb.input_ids, (std::vector<int32_t>{15, 22, 23, 24, 25, 26, 1, 30, 31}));
  EXPECT_EQ(fb.positions, (std::vector<int32_t>{6, 3, 4, 5, 6, 7, 0, 1, 2}));
  // a: pos 6 → block 2, offset 2 → 10. b: pos 3 → 0*4+3; 4..7 → 20..23.
  // c: 0..2 → 36..38.
  EXPECT_EQ(fb.slot_mapping, (std::vector<int32_t>{10, 3, 20, 21, 22, 23, 36, 37, 38}));
  EXPECT_EQ(fb.query_start_loc, (std::vector<int32_t>{0, 1, 6, 9}));
  EXPECT_EQ(fb.context_lens, (std::vector<int32_t>{7, 8, 3}));
  EXPECT_EQ(fb.max_blocks_per_seq, 2);
  EXPECT_EQ(fb.block_tables, (std::vector<int32_t>{7, 2, 0, 5, 9, 0}));
  EXPECT_EQ(fb.logits_indices, (std::vector<int32_t>{0, 8}));  // not b's chunk
  EXPECT_FALSE(fb.is_decode_only());

  sb.block_table = {0};  // too short for position 7
  EXPECT_THROW(ModelRunner::build_batch(out, 4), std::logic_error);
}

}  // namespace
}  // namespace pagoda
