// CPU backend ops vs naive double-precision references written from the
// op definitions in engine/model/backend.h; thread pool; conversions.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>

#include "engine/cpu/half.h"
#include "engine/cpu/thread_pool.h"
#include "engine/model/backend.h"

namespace pagoda {
namespace {

std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

struct Fixture {
  std::unique_ptr<Backend> be = make_cpu_backend(3);
  std::vector<Tensor> owned;
  ~Fixture() {
    for (Tensor& t : owned) be->free(t);
  }
  Tensor make(std::initializer_list<int64_t> shape, const std::vector<float>& v) {
    Tensor t = be->alloc(DType::F32, shape);
    EXPECT_EQ(static_cast<size_t>(t.numel()), v.size());
    be->copy_from_host(t, v.data(), DType::F32);
    owned.push_back(t);
    return t;
  }
  Tensor zeros(std::initializer_list<int64_t> shape, DType dt = DType::F32) {
    Tensor t = be->alloc(dt, shape);
    be->fill_zero(t);
    owned.push_back(t);
    return t;
  }
  std::vector<float> host(const Tensor& t) {
    std::vector<float> v(static_cast<size_t>(t.numel()));
    be->copy_to_host(v.data(), t);
    return v;
  }
};

TEST(CpuThreadPool, CoversEveryIndexOnceAndRethrows) {
  cpu::ThreadPool pool(4);
  EXPECT_EQ(pool.num_threads(), 4);
  for (int64_t n : {1, 7, 100, 10007}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
  EXPECT_THROW(pool.parallel_for(1000, 1, [](int64_t b, int64_t) {
                 if (b > 0) throw std::runtime_error("boom");
               }),
               std::runtime_error);
  // Still usable afterwards.
  std::atomic<int64_t> sum{0};
  pool.parallel_for(100, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 4950);
}

TEST(CpuBackend, HalfConversions) {
  EXPECT_EQ(cpu::f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(cpu::f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(cpu::f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(cpu::f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(cpu::f16_to_f32(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_TRUE(std::isinf(cpu::f16_to_f32(0x7c00)));
  EXPECT_TRUE(std::isnan(cpu::f16_to_f32(0x7e00)));
  EXPECT_EQ(cpu::bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(cpu::bf16_to_f32(0xc0a0), -5.0f);
  EXPECT_EQ(cpu::f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(cpu::f32_to_bf16(1.00390625f), 0x3f80);  // tie rounds to even
  Fixture f;
  Tensor t = f.zeros({3});
  const uint16_t h[3] = {0x3c00, 0x3800, 0xbc00};
  f.be->copy_from_host(t, h, DType::F16);
  EXPECT_EQ(f.host(t), (std::vector<float>{1.0f, 0.5f, -1.0f}));
  const uint16_t b[3] = {0x4000, 0x3f00, 0xbf80};
  f.be->copy_from_host(t, b, DType::BF16);
  EXPECT_EQ(f.host(t), (std::vector<float>{2.0f, 0.5f, -1.0f}));
}

TEST(CpuBackend, LinearWithBias) {
  Fixture f;
  for (auto [T, K, N] : {std::tuple<int64_t, int64_t, int64_t>{1, 13, 5}, {70, 40, 37}, {3, 64, 129}}) {
    const auto x = randn(static_cast<size_t>(T * K), 1), w = randn(static_cast<size_t>(N * K), 2),
               bias = randn(static_cast<size_t>(N), 3);
    Tensor tx = f.make({T, K}, x), tw = f.make({N, K}, w), tb = f.make({N}, bias), out = f.zeros({T, N});
    f.be->linear(tx, tw, &tb, out);
    const auto got = f.host(out);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t n = 0; n < N; ++n) {
        double ref = bias[static_cast<size_t>(n)];
        for (int64_t k = 0; k < K; ++k) ref += double(x[static_cast<size_t>(t * K + k)]) * w[static_cast<size_t>(n * K + k)];
        ASSERT_NEAR(got[static_cast<size_t>(t * N + n)], ref, 1e-4) << T << "x" << K << "x" << N;
      }
    Tensor bad = f.zeros({T, N + 1});
    EXPECT_THROW(f.be->linear(tx, tw, nullptr, bad), std::invalid_argument);
  }
}

TEST(CpuBackend, RmsNormAddRmsNormSiluMulGatherEmbedding) {
  Fixture f;
  const int64_t T = 4, H = 10;
  const auto x = randn(T * H, 4), r = randn(T * H, 5), w = randn(H, 6);
  Tensor tx = f.make({T, H}, x), tr = f.make({T, H}, r), tw = f.make({H}, w), out = f.zeros({T, H});
  const float eps = 1e-5f;
  auto ref_norm = [&](const std::vector<double>& v, int64_t t, int64_t i) {
    double ms = 0;
    for (int64_t j = 0; j < H; ++j) ms += v[static_cast<size_t>(t * H + j)] * v[static_cast<size_t>(t * H + j)];
    return v[static_cast<size_t>(t * H + i)] / std::sqrt(ms / H + eps) * w[static_cast<size_t>(i)];
  };
  f.be->rms_norm(tx, tw, eps, out);
  auto got = f.host(out);
  std::vector<double> xd(x.begin(), x.end()), sum(static_cast<size_t>(T * H));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < H; ++i) EXPECT_NEAR(got[static_cast<size_t>(t * H + i)], ref_norm(xd, t, i), 1e-5);
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = double(x[i]) + r[i];
  f.be->add_rms_norm(tx, tr, tw, eps, tx);  // out aliases x
  got = f.host(tx);
  const auto res = f.host(tr);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < H; ++i) {
      EXPECT_NEAR(res[static_cast<size_t>(t * H + i)], sum[static_cast<size_t>(t * H + i)], 1e-6);
      EXPECT_NEAR(got[static_cast<size_t>(t * H + i)], ref_norm(sum, t, i), 1e-5);
    }

  const auto gu = randn(T * 2 * 3, 7);
  Tensor tgu = f.make({T, 6}, gu), act = f.zeros({T, 3});
  f.be->silu_mul(tgu, act);
  got = f.host(act);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < 3; ++i) {
      const double g = gu[static_cast<size_t>(t * 6 + i)], u = gu[static_cast<size_t>(t * 6 + 3 + i)];
      EXPECT_NEAR(got[static_cast<size_t>(t * 3 + i)], g / (1 + std::exp(-g)) * u, 1e-6);
    }

  std::vector<int32_t> idx = {3, 0};
  Tensor tidx = f.zeros({2}, DType::I32);
  f.be->copy_from_host(tidx, idx.data(), DType::I32);
  Tensor g2 = f.zeros({2, H});
  f.be->gather_rows(tr, tidx, g2);
  got = f.host(g2);
  for (int64_t i = 0; i < H; ++i) {
    EXPECT_EQ(got[static_cast<size_t>(i)], res[static_cast<size_t>(3 * H + i)]);
    EXPECT_EQ(got[static_cast<size_t>(H + i)], res[static_cast<size_t>(i)]);
  }
  Tensor e2 = f.zeros({2, H});
  f.be->embedding(tidx, tr, e2);  // table = 4 rows
  EXPECT_EQ(f.host(e2), got);
  idx[0] = 4;  // out of range
  f.be->copy_from_host(tidx, idx.data(), DType::I32);
  EXPECT_THROW(f.be->embedding(tidx, tr, e2), std::invalid_argument);
  EXPECT_THROW(f.be->gather_rows(tr, tidx, g2), std::invalid_argument);
}

// Two sequences, GQA (Hq=4, Hk=2), scattered blocks: rope_and_cache writes the
// rotated K and raw V to the slots, and attention equals dense causal
// softmax attention computed here in double.
TEST(CpuBackend, RopeCacheAndPagedAttentionMatchDenseReference) {
  Fixture f;
  const int64_t Hq = 4, Hk = 2, D = 8, bs = 4, nblocks = 12, maxpos = 64;
  const int64_t W = (Hq + 2 * Hk) * D;
  // seq 0: prefill 6 tokens (pos 0..5) in blocks {7, 2}; seq 1: 3 tokens at
  // pos 0..2 in block {5}, then (second batch) a decode at pos 3.
  std::vector<float> table(static_cast<size_t>(maxpos * D));
  for (int64_t p = 0; p < maxpos; ++p)
    for (int64_t j = 0; j < D / 2; ++j) {
      const double a = double(p) * std::pow(10000.0, -2.0 * double(j) / double(D));
      table[static_cast<size_t>(p * D + j)] = static_cast<float>(std::cos(a));
      table[static_cast<size_t>(p * D + D / 2 + j)] = static_cast<float>(std::sin(a));
    }
  RopeTable rope{f.make({maxpos, D}, table), D};
  LayerKVCache kv{f.zeros({nblocks, bs, Hk, D}), f.zeros({nblocks, bs, Hk, D})};

  // Dense reference state: per sequence, rotated k and v per position.
  auto rot = [&](const float* x, int64_t p, double* out) {
    for (int64_t j = 0; j < D / 2; ++j) {
      const double c = table[static_cast<size_t>(p * D + j)], s = table[static_cast<size_t>(p * D + D / 2 + j)];
      out[j] = x[j] * c - x[j + D / 2] * s;
      out[j + D / 2] = x[j + D / 2] * c + x[j] * s;
    }
  };
  std::vector<std::vector<double>> K(2), Vv(2);  // [pos][Hk*D]
  auto run = [&](const ForwardBatch& b, uint32_t seed) {
    const int64_t T = b.num_tokens();
    const auto qkv = randn(static_cast<size_t>(T * W), seed);
    Tensor tq = f.make({T, W}, qkv), q = f.zeros({T, Hq * D}), out = f.zeros({T, Hq * D});
    const DeviceBatch& db = f.be->upload_batch(b);
    f.be->rope_and_cache(tq, rope, db, Hq, Hk, D, q, kv);
    f.be->attention(q, kv, db, Hq, Hk, D, 0.35f, out);
    const auto got = f.host(out), gq = f.host(q), kc = f.host(kv.k), vc = f.host(kv.v);
    for (int64_t s = 0; s < b.num_seqs(); ++s)
      for (int32_t t = b.query_start_loc[static_cast<size_t>(s)]; t < b.query_start_loc[static_cast<size_t>(s) + 1]; ++t) {
        const int64_t p = b.positions[static_cast<size_t>(t)];
        std::vector<double> kr(static_cast<size_t>(Hk * D)), vr(static_cast<size_t>(Hk * D)), qr(static_cast<size_t>(Hq * D));
        for (int64_t h = 0; h < Hk; ++h) {
          rot(&qkv[static_cast<size_t>(t * W + (Hq + h) * D)], p, &kr[static_cast<size_t>(h * D)]);
          for (int64_t d = 0; d < D; ++d) vr[static_cast<size_t>(h * D + d)] = qkv[static_cast<size_t>(t * W + (Hq + Hk + h) * D + d)];
        }
        for (int64_t h = 0; h < Hq; ++h) rot(&qkv[static_cast<size_t>(t * W + h * D)], p, &qr[static_cast<size_t>(h * D)]);
        ASSERT_EQ(static_cast<int64_t>(K[static_cast<size_t>(s)].size()), p * Hk * D);
        K[static_cast<size_t>(s)].insert(K[static_cast<size_t>(s)].end(), kr.begin(), kr.end());
        Vv[static_cast<size_t>(s)].insert(Vv[static_cast<size_t>(s)].end(), vr.begin(), vr.end());
        // Cache contents at the slot.
        const int64_t slot = b.slot_mapping[static_cast<size_t>(t)];
        for (int64_t i = 0; i < Hk * D; ++i) {
          EXPECT_NEAR(kc[static_cast<size_t>(slot * Hk * D + i)], kr[static_cast<size_t>(i)], 1e-5);
          EXPECT_EQ(vc[static_cast<size_t>(slot * Hk * D + i)], float(vr[static_cast<size_t>(i)]));
        }
        for (int64_t i = 0; i < Hq * D; ++i) EXPECT_NEAR(gq[static_cast<size_t>(t * Hq * D + i)], qr[static_cast<size_t>(i)], 1e-5);
        // Dense causal attention over positions 0..p (within this batch, a
        // later token of the same sequence is not yet in K: p is the last).
        for (int64_t h = 0; h < Hq; ++h) {
          const int64_t kvh = h / (Hq / Hk);
          std::vector<double> sc(static_cast<size_t>(p + 1));
          double mx = -1e300, den = 0;
          for (int64_t j = 0; j <= p; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < D; ++d)
              dot += qr[static_cast<size_t>(h * D + d)] * K[static_cast<size_t>(s)][static_cast<size_t>(j * Hk * D + kvh * D + d)];
            sc[static_cast<size_t>(j)] = dot * 0.35;
            mx = std::max(mx, sc[static_cast<size_t>(j)]);
          }
          for (double& v : sc) den += (v = std::exp(v - mx));
          for (int64_t d = 0; d < D; ++d) {
            double o = 0;
            for (int64_t j = 0; j <= p; ++j)
              o += sc[static_cast<size_t>(j)] / den * Vv[static_cast<size_t>(s)][static_cast<size_t>(j * Hk * D + kvh * D + d)];
            EXPECT_NEAR(got[static_cast<size_t>(t * Hq * D + h * D + d)], o, 1e-5) << "seq " << s << " pos " << p << " head " << h;
          }
        }
      }
  };
  auto slot = [&](int32_t blk, int32_t p) { return static_cast<int32_t>(blk * bs + p % bs); };
  ForwardBatch b1;
  b1.input_ids = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  b1.positions = {0, 1, 2, 3, 4, 5, 0, 1, 2};
  b1.slot_mapping = {slot(7, 0), slot(7, 1), slot(7, 2), slot(7, 3), slot(2, 4), slot(2, 5), slot(5, 0), slot(5, 1), slot(5, 2)};
  b1.query_start_loc = {0, 6, 9};
  b1.context_lens = {6, 3};
  b1.max_blocks_per_seq = 2;
  b1.block_tables = {7, 2, 5, 0};
  b1.logits_indices = {5, 8};
  run(b1, 11);
  ForwardBatch b2;  // decode: seq 0 at pos 6, seq 1 at pos 3
  b2.input_ids = {0, 0};
  b2.positions = {6, 3};
  b2.slot_mapping = {slot(2, 6), slot(5, 3)};
  b2.query_start_loc = {0, 1, 2};
  b2.context_lens = {7, 4};
  b2.max_blocks_per_seq = 2;
  b2.block_tables = {7, 2, 5, 0};
  b2.logits_indices = {0, 1};
  run(b2, 12);

  // Bad metadata is rejected before touching memory.
  ForwardBatch bad = b2;
  bad.block_tables = {7, 99, 5, 0};
  const DeviceBatch& db = f.be->upload_batch(bad);
  Tensor q = f.zeros({2, Hq * D}), out = f.zeros({2, Hq * D});
  EXPECT_THROW(f.be->attention(q, kv, db, Hq, Hk, D, 1.0f, out), std::invalid_argument);
  bad = b2;
  bad.query_start_loc = {0, 1, 3};
  EXPECT_THROW(f.be->upload_batch(bad), std::invalid_argument);
}

}  // namespace
}  // namespace pagoda
