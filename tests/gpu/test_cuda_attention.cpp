// CUDA rope_and_cache and paged attention (decode and prefill kernels)
// against host references in double on fresh random data: block sizes 16
// and 32, head_dim 8/16/32/64/128, GQA ratios 1/2/4/7/8, contexts 1..8192,
// batches mixing short and long sequences, prefill, chunked prefill and
// decode; bf16 and fp32. Unused cache slots hold NaN, so reading a slot
// outside a sequence's context poisons the output and fails the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tests/gpu/gpu_test_util.h"

namespace pagoda {
namespace {

using namespace gputest;

struct SeqSpec {
  int qlen;
  int ctx;
};

struct AttnCase {
  const char* name;
  DType dt;
  int block_size, D, Hq, Hk;
  std::vector<SeqSpec> seqs;
};

// Builds the paged layout: each sequence gets ceil(ctx/bs) blocks drawn from
// a shuffled pool (non-contiguous), plus spare blocks left as NaN.
struct Paged {
  ForwardBatch fb;
  int num_blocks = 0;
};

Paged make_layout(const AttnCase& c, std::mt19937_64& rng) {
  Paged p;
  int total = 0, mb = 1;
  for (auto s : c.seqs) {
    const int nb = (s.ctx + c.block_size - 1) / c.block_size;
    total += nb;
    mb = std::max(mb, nb);
  }
  p.num_blocks = total + 3;
  std::vector<int32_t> pool(static_cast<size_t>(p.num_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  ForwardBatch& fb = p.fb;
  fb.max_blocks_per_seq = mb;
  fb.query_start_loc.push_back(0);
  size_t next = 0;
  for (auto s : c.seqs) {
    const int nb = (s.ctx + c.block_size - 1) / c.block_size;
    std::vector<int32_t> row(static_cast<size_t>(mb), 0);
    for (int i = 0; i < nb; ++i) row[static_cast<size_t>(i)] = pool[next++];
    for (int j = 0; j < s.qlen; ++j) {
      const int pos = s.ctx - s.qlen + j;
      fb.input_ids.push_back(0);
      fb.positions.push_back(pos);
      fb.slot_mapping.push_back(row[static_cast<size_t>(pos / c.block_size)] * c.block_size +
                                pos % c.block_size);
    }
    fb.block_tables.insert(fb.block_tables.end(), row.begin(), row.end());
    fb.context_lens.push_back(s.ctx);
    fb.query_start_loc.push_back(fb.query_start_loc.back() + s.qlen);
    fb.logits_indices.push_back(fb.query_start_loc.back() - 1);
  }
  return p;
}

void run_attention_case(const AttnCase& c) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(std::string(c.name) + " seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto b = make_cuda_backend(0, c.dt);
  Paged p = make_layout(c, rng);
  const ForwardBatch& fb = p.fb;
  const int T = fb.num_tokens(), D = c.D, Hq = c.Hq, Hk = c.Hk, G = Hq / Hk, bs = c.block_size;
  const size_t slots = static_cast<size_t>(p.num_blocks) * bs;
  // Cache: NaN everywhere, random values in each sequence's first ctx slots.
  std::vector<float> kc(slots * Hk * D, NAN), vc(slots * Hk * D, NAN);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int i = 0; i < fb.num_seqs(); ++i)
    for (int pos = 0; pos < fb.context_lens[i]; ++pos) {
      const size_t slot = static_cast<size_t>(fb.block_tables[i * fb.max_blocks_per_seq + pos / bs]) * bs + pos % bs;
      for (int e = 0; e < Hk * D; ++e) {
        kc[slot * Hk * D + e] = round_to(c.dt, u(rng));
        vc[slot * Hk * D + e] = round_to(c.dt, u(rng));
      }
    }
  auto q = random_vec(rng, static_cast<size_t>(T) * Hq * D, c.dt, -2.f, 2.f);
  const float scale = 1.f / std::sqrt(static_cast<float>(D));

  // Host reference (double).
  std::vector<double> ref(static_cast<size_t>(T) * Hq * D);
  for (int i = 0; i < fb.num_seqs(); ++i) {
    const int q0 = fb.query_start_loc[i], ql = fb.query_start_loc[i + 1] - q0, ctx = fb.context_lens[i];
    for (int j = 0; j < ql; ++j) {
      const int pos = ctx - ql + j;
      for (int h = 0; h < Hq; ++h) {
        const int kvh = h / G;
        const float* qv = &q[(static_cast<size_t>(q0 + j) * Hq + h) * D];
        std::vector<double> s(static_cast<size_t>(pos) + 1);
        double m = -INFINITY;
        for (int k = 0; k <= pos; ++k) {
          const size_t slot = static_cast<size_t>(fb.block_tables[i * fb.max_blocks_per_seq + k / bs]) * bs + k % bs;
          const float* kv = &kc[(slot * Hk + kvh) * D];
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += double(qv[d]) * kv[d];
          s[k] = dot * scale;
          m = std::max(m, s[k]);
        }
        double l = 0;
        for (auto& x : s) l += (x = std::exp(x - m));
        double* o = &ref[(static_cast<size_t>(q0 + j) * Hq + h) * D];
        for (int k = 0; k <= pos; ++k) {
          const size_t slot = static_cast<size_t>(fb.block_tables[i * fb.max_blocks_per_seq + k / bs]) * bs + k % bs;
          const float* vv = &vc[(slot * Hk + kvh) * D];
          for (int d = 0; d < D; ++d) o[d] += s[k] / l * vv[d];
        }
      }
    }
  }

  LayerKVCache cache;
  cache.k = b->alloc(c.dt, {p.num_blocks, bs, Hk, D});
  cache.v = b->alloc(c.dt, {p.num_blocks, bs, Hk, D});
  b->copy_from_host(cache.k, kc.data(), DType::F32);
  b->copy_from_host(cache.v, vc.data(), DType::F32);
  Tensor dq = upload(*b, c.dt, {T, Hq * D}, q);
  Tensor out = b->alloc(c.dt, {T, Hq * D});
  const DeviceBatch& db = b->upload_batch(fb);
  for (const AttentionMode& mode : attention_modes(db.decode_only, c.dt, D, Hq, Hk)) {
    const ScopedAttentionMode scoped(mode);
    DeviceBatch dbm = db;
    dbm.decode_only = mode.decode;
    poison(*b, out);
    b->attention(dq, cache, dbm, Hq, Hk, D, scale, out);
    // bf16: exact bf16 q/k/v, fp32 softmax and sums, one rounding of the
    // output (tol_for's 4e-3 argument). fp32: exp2f vs exp and summation
    // order over up to 8192 keys, relative ~1e-6.
    const std::vector<float> got = download(*b, out);
    const double err = rel_l2(got, ref);
    // Same inputs, same bits: no atomics or order-dependent reductions.
    poison(*b, out);
    b->attention(dq, cache, dbm, Hq, Hk, D, scale, out);
    const std::vector<float> again = download(*b, out);
    EXPECT_EQ(0, std::memcmp(got.data(), again.data(), got.size() * sizeof(float)))
        << mode.name << " kernel is not bitwise reproducible";
    std::printf("[ rel L2 ] %-8s %s %s kernel: %.3g (tolerance %.0e)\n", c.name, dtype_name(c.dt),
                mode.name, err, tol_for(c.dt));
    EXPECT_LT(err, tol_for(c.dt)) << mode.name << " kernel";
  }
  for (Tensor* t : {&cache.k, &cache.v, &dq, &out}) b->free(*t);
}

class CudaAttention : public ::testing::Test {
 protected:
  void SetUp() override { PAGODA_REQUIRE_GPU(); }
};

std::vector<SeqSpec> decodes(std::initializer_list<int> ctxs) {
  std::vector<SeqSpec> v;
  for (int c : ctxs) v.push_back({1, c});
  return v;
}

TEST_F(CudaAttention, DecodeMHA_bf16_bs16_D128_LongAndShort) {
  run_attention_case({"mha", DType::BF16, 16, 128, 8, 8, decodes({1, 17, 512, 513, 2048, 8192})});
}
TEST_F(CudaAttention, DecodeGQA2_f32_bs32_D64) {
  run_attention_case({"gqa2", DType::F32, 32, 64, 8, 4, decodes({1, 100, 1000, 4097})});
}
TEST_F(CudaAttention, DecodeGQA4_bf16_bs16_D128) {
  run_attention_case({"gqa4", DType::BF16, 16, 128, 16, 4, decodes({3000, 33, 1, 1536, 777})});
}
TEST_F(CudaAttention, DecodeGQA7_bf16_bs32_D128) {
  run_attention_case({"gqa7", DType::BF16, 32, 128, 14, 2, decodes({1, 511, 1025, 8192})});
}
// The tensor-core decode kernel's edges: 16 query heads per KV head (its M
// rows full), a group that is not a power of two, head_dim 64, and a batch
// of 40 sequences (512-key partitions, several per long sequence).
TEST_F(CudaAttention, DecodeGQA16_bf16_D64_and_GQA12_f16_D128) {
  run_attention_case({"gqa16", DType::BF16, 16, 64, 32, 2, decodes({1, 16, 17, 700, 4100})});
  run_attention_case({"gqa12", DType::F16, 16, 128, 24, 2, decodes({2, 63, 64, 65, 1500})});
}
TEST_F(CudaAttention, DecodeGQA7_bf16_40Sequences) {
  std::vector<int> ctxs;
  for (int i = 0; i < 40; ++i) ctxs.push_back(1 + (i * 997) % 1900);
  std::vector<SeqSpec> seqs;
  for (int c : ctxs) seqs.push_back({1, c});
  run_attention_case({"gqa7x40", DType::BF16, 16, 128, 28, 4, seqs});
}
TEST_F(CudaAttention, DecodeGQA8_f32_bs16_D128) {
  run_attention_case({"gqa8", DType::F32, 16, 128, 32, 4, decodes({3000, 1, 8192})});
}
TEST_F(CudaAttention, DecodeGQA2_f32_bs16_D8) {
  run_attention_case({"d8", DType::F32, 16, 8, 8, 4, decodes({1, 2, 300, 512, 1500})});
}
TEST_F(CudaAttention, DecodeSmallHeads_bf16_D16_D32) {
  run_attention_case({"d16", DType::BF16, 16, 16, 4, 2, decodes({5, 600})});
  run_attention_case({"d32", DType::BF16, 32, 32, 4, 4, decodes({1, 1200})});
}

TEST_F(CudaAttention, PrefillMixed_bf16_bs16_D128) {
  // Prefills, a decode and a chunked-prefill chunk (64 queries on 636 cached).
  run_attention_case({"mixed", DType::BF16, 16, 128, 4, 4, {{1, 1}, {37, 37}, {300, 300}, {1, 900}, {64, 700}}});
}
TEST_F(CudaAttention, PrefillGQA7_f32_bs32_D64) {
  run_attention_case({"gqa7", DType::F32, 32, 64, 7, 1, {{200, 200}, {1, 5000}, {50, 1050}}});
}
TEST_F(CudaAttention, PrefillGQA8_bf16_bs16_D128) {
  run_attention_case({"gqa8", DType::BF16, 16, 128, 16, 2, {{129, 129}, {1, 2000}, {33, 97}}});
}
TEST_F(CudaAttention, PrefillGQA2_f32_D8_and_D16_D32) {
  run_attention_case({"d8", DType::F32, 16, 8, 8, 4, {{513, 513}, {1, 1}, {10, 40}}});
  run_attention_case({"d16", DType::F32, 32, 16, 4, 2, {{300, 300}, {7, 20}}});
  run_attention_case({"d32", DType::BF16, 16, 32, 4, 4, {{1000, 1000}}});
}
TEST_F(CudaAttention, PrefillGQA4_bf16_bs32_D64) {
  run_attention_case({"gqa4d64", DType::BF16, 32, 64, 8, 2, {{300, 300}, {1, 1000}, {70, 170}}});
}
TEST_F(CudaAttention, DecodeAndPrefill_f16_GQA2_D128) {
  run_attention_case({"f16dec", DType::F16, 16, 128, 4, 2, decodes({1, 1000, 5000})});
  run_attention_case({"f16pre", DType::F16, 16, 128, 4, 2, {{100, 100}, {1, 600}, {20, 60}}});
}
TEST_F(CudaAttention, PrefillLong_bf16_GQA4_2048) {
  run_attention_case({"long", DType::BF16, 16, 128, 4, 1, {{2048, 2048}, {1, 8192}}});
}
TEST_F(CudaAttention, PrefillGQA1_bs32_f32_chunks) {
  run_attention_case({"chunks", DType::F32, 32, 128, 2, 2, {{128, 4096}, {255, 255}, {1, 3}}});
}

// rope_and_cache: rotate-half RoPE of q and k, v copied, k/v written at the
// slot mapping; untouched slots stay NaN; slot -1 writes nothing.
class CudaRope : public ::testing::TestWithParam<std::tuple<DType, int, int, int>> {};

TEST_P(CudaRope, RopeAndCache) {
  PAGODA_REQUIRE_GPU();
  const auto [dt, D, Hq, Hk] = GetParam();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  auto b = make_cuda_backend(0, dt);
  const int T = 21, bs = 16, nblocks = 4, max_pos = 4096;
  const double theta = 10000.0;
  std::vector<float> cs(static_cast<size_t>(max_pos) * D);
  for (int pos = 0; pos < max_pos; ++pos)
    for (int j = 0; j < D / 2; ++j) {
      const double inv = std::pow(theta, -2.0 * j / D);
      cs[static_cast<size_t>(pos) * D + j] = static_cast<float>(std::cos(pos * inv));
      cs[static_cast<size_t>(pos) * D + D / 2 + j] = static_cast<float>(std::sin(pos * inv));
    }
  ForwardBatch fb;
  std::vector<int32_t> slots(nblocks * bs);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  for (int t = 0; t < T; ++t) {
    fb.input_ids.push_back(0);
    fb.positions.push_back(t == 0 ? max_pos - 1 : static_cast<int32_t>(rng() % max_pos));
    fb.slot_mapping.push_back(t == 3 ? -1 : slots[t]);
  }
  fb.query_start_loc = {0, T};
  fb.context_lens = {T};
  fb.max_blocks_per_seq = nblocks;
  fb.block_tables = {0, 1, 2, 3};
  const int W = (Hq + 2 * Hk) * D;
  auto qkv = random_vec(rng, static_cast<size_t>(T) * W, dt, -2.f, 2.f);
  Tensor dqkv = upload(*b, dt, {T, W}, qkv);
  RopeTable rope;
  rope.cos_sin = upload(*b, DType::F32, {max_pos, D}, cs);
  rope.rotary_dim = D;
  LayerKVCache cache;
  cache.k = b->alloc(dt, {nblocks, bs, Hk, D});
  cache.v = b->alloc(dt, {nblocks, bs, Hk, D});
  poison(*b, cache.k);
  poison(*b, cache.v);
  Tensor qo = b->alloc(dt, {T, Hq * D});
  poison(*b, qo);
  const DeviceBatch& db = b->upload_batch(fb);
  b->rope_and_cache(dqkv, rope, db, Hq, Hk, D, qo, cache);

  auto rot = [&](const float* x, int pos, double* out) {
    for (int j = 0; j < D / 2; ++j) {
      const double inv = std::pow(theta, -2.0 * j / D);
      const double c = std::cos(pos * inv), s = std::sin(pos * inv);
      out[j] = x[j] * c - x[j + D / 2] * s;
      out[j + D / 2] = x[j + D / 2] * c + x[j] * s;
    }
  };
  std::vector<double> qref(static_cast<size_t>(T) * Hq * D);
  const size_t nslots = static_cast<size_t>(nblocks) * bs;
  std::vector<double> kref(nslots * Hk * D, NAN), vref(nslots * Hk * D, NAN);
  for (int t = 0; t < T; ++t) {
    const float* row = &qkv[static_cast<size_t>(t) * W];
    for (int h = 0; h < Hq; ++h) rot(row + h * D, fb.positions[t], &qref[(static_cast<size_t>(t) * Hq + h) * D]);
    const int slot = fb.slot_mapping[t];
    if (slot < 0) continue;
    for (int h = 0; h < Hk; ++h) {
      rot(row + (Hq + h) * D, fb.positions[t], &kref[(static_cast<size_t>(slot) * Hk + h) * D]);
      for (int d = 0; d < D; ++d) vref[(static_cast<size_t>(slot) * Hk + h) * D + d] = row[(Hq + Hk + h) * D + d];
    }
  }
  // fp32 cos/sin table vs double: ~1e-7 relative; bf16: one output rounding.
  EXPECT_LT(rel_l2(download(*b, qo), qref), tol_for(dt));
  auto kgot = download(*b, cache.k), vgot = download(*b, cache.v);
  std::vector<float> kw, vw;
  std::vector<double> kr, vr;
  for (size_t i = 0; i < kref.size(); ++i) {
    if (std::isnan(kref[i])) {
      EXPECT_TRUE(std::isnan(kgot[i])) << "slot element " << i << " written but not mapped";
      EXPECT_TRUE(std::isnan(vgot[i])) << "slot element " << i << " written but not mapped";
    } else {
      kw.push_back(kgot[i]);
      kr.push_back(kref[i]);
      vw.push_back(vgot[i]);
      vr.push_back(vref[i]);
    }
  }
  EXPECT_EQ(kw.size(), static_cast<size_t>(T - 1) * Hk * D);
  EXPECT_LT(rel_l2(kw, kr), tol_for(dt));
  EXPECT_EQ(rel_l2(vw, vr), 0.0);  // v is copied exactly

  // A position beyond the table is refused before any launch.
  fb.positions[5] = max_pos;
  const DeviceBatch& bad = b->upload_batch(fb);
  EXPECT_THROW(b->rope_and_cache(dqkv, rope, bad, Hq, Hk, D, qo, cache), std::invalid_argument);
  for (Tensor* t : {&dqkv, &rope.cos_sin, &cache.k, &cache.v, &qo}) b->free(*t);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaRope,
                         ::testing::Values(std::make_tuple(DType::BF16, 128, 32, 8),
                                           std::make_tuple(DType::F32, 128, 4, 4),
                                           std::make_tuple(DType::F32, 8, 8, 4),
                                           std::make_tuple(DType::BF16, 64, 14, 2)));

}  // namespace
}  // namespace pagoda
