// CUDA attention_ext (AttentionOptions: sliding window, score soft-capping,
// ALiBi) against the CPU backend's attention_ext, the reference the tiny
// Mistral / Gemma 2 / BLOOM models are checked with against HF transformers.
// Every kernel the CUDA backend picks is covered: the Flash-Decoding kernel
// (decode batches, with contexts spanning several partitions), the
// tensor-core prefill kernel (bf16/f16, head_dim 64/128) and the fp32
// CUDA-core prefill kernel (F32 or other head dims), on prefill, chunked
// prefill, mixed and decode batches (decode batches also through the prefill
// kernel, which serves mixed batches), windows shorter and longer than the
// context, GQA ratios 1..4. Unused cache slots hold NaN, so a key read
// outside a sequence's context (or its window's tiles) shows as NaN.
// Each case also checks that its options change the CPU result by far more
// than the tolerance, so a kernel ignoring an option cannot pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "tests/gpu/gpu_test_util.h"

namespace pagoda {
namespace {

using namespace gputest;

struct Seq {
  int qlen;
  int ctx;
};

struct ExtCase {
  const char* name;
  DType dt;
  int D, Hq, Hk;
  std::vector<Seq> seqs;
  int window;     // AttentionOptions::sliding_window
  float softcap;  // AttentionOptions::logit_softcap
  bool alibi;
};

// Paged layout: each sequence's ceil(ctx / 16) blocks drawn from a shuffled
// pool (non-contiguous), three spare blocks.
ForwardBatch make_batch(const ExtCase& c, int bs, std::mt19937_64& rng, int& num_blocks) {
  ForwardBatch fb;
  int total = 0, mb = 1;
  for (const Seq& s : c.seqs) {
    const int nb = (s.ctx + bs - 1) / bs;
    total += nb;
    mb = std::max(mb, nb);
  }
  num_blocks = total + 3;
  std::vector<int32_t> pool(static_cast<size_t>(num_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  fb.max_blocks_per_seq = mb;
  fb.query_start_loc.push_back(0);
  size_t next = 0;
  for (const Seq& s : c.seqs) {
    const int nb = (s.ctx + bs - 1) / bs;
    std::vector<int32_t> row(static_cast<size_t>(mb), 0);
    for (int i = 0; i < nb; ++i) row[static_cast<size_t>(i)] = pool[next++];
    for (int j = 0; j < s.qlen; ++j) {
      const int pos = s.ctx - s.qlen + j;
      fb.input_ids.push_back(0);
      fb.positions.push_back(pos);
      fb.slot_mapping.push_back(row[static_cast<size_t>(pos / bs)] * bs + pos % bs);
    }
    fb.block_tables.insert(fb.block_tables.end(), row.begin(), row.end());
    fb.context_lens.push_back(s.ctx);
    fb.query_start_loc.push_back(fb.query_start_loc.back() + s.qlen);
    fb.logits_indices.push_back(fb.query_start_loc.back() - 1);
  }
  return fb;
}

// ALiBi slopes as BLOOM's for a power-of-two head count, 2^(-8 (h+1) / Hq),
// scaled down by 16 so that slope * position stays small enough for fp32
// scores to keep ~1e-6 relative precision at the contexts used here.
std::vector<float> test_slopes(int Hq) {
  std::vector<float> s(static_cast<size_t>(Hq));
  for (int h = 0; h < Hq; ++h)
    s[static_cast<size_t>(h)] = static_cast<float>(std::exp2(-8.0 * (h + 1) / Hq) / 16.0);
  return s;
}

void run_ext_case(const ExtCase& c) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(std::string(c.name) + " " + dtype_name(c.dt) + " seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  constexpr int bs = 16;
  int num_blocks = 0;
  const ForwardBatch fb = make_batch(c, bs, rng, num_blocks);
  const int T = fb.num_tokens(), D = c.D, Hq = c.Hq, Hk = c.Hk;
  const size_t slots = static_cast<size_t>(num_blocks) * bs;
  std::vector<float> kc(slots * Hk * D, NAN), vc(slots * Hk * D, NAN);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int i = 0; i < fb.num_seqs(); ++i)
    for (int pos = 0; pos < fb.context_lens[static_cast<size_t>(i)]; ++pos) {
      const size_t slot =
          static_cast<size_t>(
              fb.block_tables[static_cast<size_t>(i * fb.max_blocks_per_seq + pos / bs)]) *
              bs +
          pos % bs;
      for (int e = 0; e < Hk * D; ++e) {
        kc[slot * Hk * D + e] = round_to(c.dt, u(rng));
        vc[slot * Hk * D + e] = round_to(c.dt, u(rng));
      }
    }
  // q large enough that scores reach the soft-cap's non-linear range.
  const auto q = random_vec(rng, static_cast<size_t>(T) * Hq * D, c.dt, -3.f, 3.f);
  const float scale = 1.f / std::sqrt(static_cast<float>(D));
  const std::vector<float> slopes = test_slopes(Hq);

  // CPU reference, with the options and without (the options must matter).
  auto cpu = make_cpu_backend(2);
  std::vector<double> want, plain;
  {
    LayerKVCache cache{upload(*cpu, DType::F32, {num_blocks, bs, Hk, D}, kc),
                       upload(*cpu, DType::F32, {num_blocks, bs, Hk, D}, vc)};
    Tensor dq = upload(*cpu, DType::F32, {T, Hq * D}, q), out = cpu->alloc(DType::F32, {T, Hq * D});
    AttentionOptions o;
    o.sliding_window = c.window;
    o.logit_softcap = c.softcap;
    if (c.alibi) o.alibi_slopes = upload(*cpu, DType::F32, {Hq}, slopes);
    const DeviceBatch& db = cpu->upload_batch(fb);
    cpu->attention_ext(dq, cache, db, Hq, Hk, D, scale, o, out);
    want = to_double(download(*cpu, out));
    cpu->attention(dq, cache, db, Hq, Hk, D, scale, out);
    plain = to_double(download(*cpu, out));
    for (Tensor* t : {&cache.k, &cache.v, &dq, &out, &o.alibi_slopes})
      if (!t->empty()) cpu->free(*t);
  }
  std::vector<float> plain_f(plain.begin(), plain.end());
  const double effect = rel_l2(plain_f, want);
  std::printf("[ options ] %-12s change the CPU result by %.3g\n", c.name, effect);
  EXPECT_GT(effect, 10 * tol_for(c.dt)) << "the case does not exercise its options";

  auto b = make_cuda_backend(0, c.dt);
  LayerKVCache cache{b->alloc(c.dt, {num_blocks, bs, Hk, D}),
                     b->alloc(c.dt, {num_blocks, bs, Hk, D})};
  b->copy_from_host(cache.k, kc.data(), DType::F32);
  b->copy_from_host(cache.v, vc.data(), DType::F32);
  Tensor dq = upload(*b, c.dt, {T, Hq * D}, q), out = b->alloc(c.dt, {T, Hq * D});
  AttentionOptions o;
  o.sliding_window = c.window;
  o.logit_softcap = c.softcap;
  if (c.alibi) o.alibi_slopes = upload(*b, DType::F32, {Hq}, slopes);
  const DeviceBatch& db = b->upload_batch(fb);
  for (const AttentionMode& mode : attention_modes(db.decode_only, c.dt, D, Hq, Hk)) {
    const ScopedAttentionMode scoped(mode);
    DeviceBatch dbm = db;
    dbm.decode_only = mode.decode;
    poison(*b, out);
    b->attention_ext(dq, cache, dbm, Hq, Hk, D, scale, o, out);
    const std::vector<float> got = download(*b, out);
    const double err = rel_l2(got, want);
    std::printf("[ rel L2 ] %-12s %s %s kernel: %.3g (tolerance %.0e)\n", c.name, dtype_name(c.dt),
                mode.name, err, tol_for(c.dt));
    EXPECT_LT(err, tol_for(c.dt)) << mode.name << " kernel";
  }
  for (Tensor* t : {&cache.k, &cache.v, &dq, &out, &o.alibi_slopes})
    if (!t->empty()) b->free(*t);
}

class CudaAttentionExt : public ::testing::Test {
 protected:
  void SetUp() override { PAGODA_REQUIRE_GPU(); }
};

std::vector<Seq> decodes(std::initializer_list<int> ctxs) {
  std::vector<Seq> v;
  for (int x : ctxs) v.push_back({1, x});
  return v;
}

// Windows shorter and longer than the contexts; contexts over several
// Flash-Decoding partitions (64..512 tokens) and windows that end inside one.
TEST_F(CudaAttentionExt, DecodeSlidingWindow) {
  for (DType dt : {DType::BF16, DType::F32}) {
    run_ext_case({"dec-win24", dt, 16, 4, 2, decodes({1, 20, 24, 25, 200, 1500}), 24, 0.f, false});
    run_ext_case(
        {"dec-win700", dt, 128, 8, 2, decodes({5, 699, 700, 701, 2000, 4100}), 700, 0.f, false});
    run_ext_case({"dec-win-gqa4", dt, 64, 8, 2, decodes({3000, 33, 700, 1536}), 513, 0.f, false});
  }
}

// A one-key context's output is its value whatever the options, and would
// dominate the relative change the options make: these contexts start at 2.
TEST_F(CudaAttentionExt, DecodeSoftcapAndAlibi) {
  for (DType dt : {DType::BF16, DType::F32}) {
    run_ext_case({"dec-cap", dt, 64, 4, 4, decodes({2, 77, 600, 1100}), 0, 1.f, false});
    run_ext_case({"dec-alibi", dt, 16, 4, 4, decodes({9, 40, 300, 700}), 0, 0.f, true});
    run_ext_case({"dec-all", dt, 128, 8, 4, decodes({2, 150, 700}), 100, 2.f, true});
  }
}

// Prefill, chunked prefill (queries after cached context) and mixed
// batches; bf16 at D 64 / 128 runs the tensor-core kernel, D 16 and F32 the
// CUDA-core one.
TEST_F(CudaAttentionExt, PrefillSlidingWindow) {
  const std::vector<Seq> mixed = {{1, 1}, {37, 37}, {300, 300}, {1, 900}, {64, 700}, {100, 130}};
  for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
    run_ext_case({"pre-win24-d16", dt, 16, 4, 2, mixed, 24, 0.f, false});
    run_ext_case({"pre-win24-d64", dt, 64, 4, 2, mixed, 24, 0.f, false});
    run_ext_case({"pre-win100-d128", dt, 128, 8, 2, mixed, 100, 0.f, false});
    run_ext_case({"pre-win5000", dt, 64, 4, 1, {{300, 300}, {50, 900}}, 5000, 2.f, false});
  }
}

TEST_F(CudaAttentionExt, PrefillSoftcapAndAlibi) {
  const std::vector<Seq> mixed = {{1, 1}, {45, 45}, {200, 200}, {1, 500}, {64, 600}};
  for (DType dt : {DType::BF16, DType::F32}) {
    run_ext_case({"pre-cap-d64", dt, 64, 4, 2, mixed, 0, 2.f, false});
    run_ext_case({"pre-cap-d16", dt, 16, 4, 4, mixed, 0, 2.f, false});
    run_ext_case({"pre-alibi-d16", dt, 16, 4, 4, mixed, 0, 0.f, true});
    run_ext_case({"pre-alibi-d128", dt, 128, 4, 4, mixed, 0, 0.f, true});
    run_ext_case({"pre-all-d64", dt, 64, 8, 2, mixed, 24, 2.f, true});
  }
}

TEST_F(CudaAttentionExt, BadOptionsAreRejected) {
  auto b = make_cuda_backend(0, DType::BF16);
  ExtCase c{"bad", DType::BF16, 16, 4, 2, decodes({5}), 0, 0.f, false};
  std::mt19937_64 rng(1);
  int num_blocks = 0;
  const ForwardBatch fb = make_batch(c, 16, rng, num_blocks);
  LayerKVCache cache{b->alloc(DType::BF16, {num_blocks, 16, 2, 16}),
                     b->alloc(DType::BF16, {num_blocks, 16, 2, 16})};
  Tensor q = b->alloc(DType::BF16, {1, 64}), out = b->alloc(DType::BF16, {1, 64});
  const DeviceBatch& db = b->upload_batch(fb);
  AttentionOptions neg;
  neg.sliding_window = -1;
  EXPECT_THROW(b->attention_ext(q, cache, db, 4, 2, 16, 0.25f, neg, out), std::invalid_argument);
  AttentionOptions bad_slopes;
  bad_slopes.alibi_slopes = b->alloc(DType::F32, {3});  // 3 slopes for 4 heads
  EXPECT_THROW(b->attention_ext(q, cache, db, 4, 2, 16, 0.25f, bad_slopes, out),
               std::invalid_argument);
  for (Tensor* t : {&cache.k, &cache.v, &q, &out, &bad_slopes.alibi_slopes}) b->free(*t);
}

}  // namespace
}  // namespace pagoda
