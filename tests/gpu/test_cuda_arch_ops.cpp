// The CUDA backend's element-wise, norm and rotary ops of the wider model
// family (BackendOp) against the CPU backend (engine/cpu, the reference the
// tiny architectures are checked with against HF transformers), on fresh
// random inputs rounded to the dtype under test: gated_act (GELU tanh),
// activation (GELU erf and tanh), softcap (activations and F32 logits),
// scale, add, layer_norm, add_layer_norm, and rope_and_cache with partial,
// interleaved and no rotary. Tolerances: tol_for (gpu_test_util.h).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "tests/gpu/gpu_test_util.h"

namespace pagoda {
namespace {

using namespace gputest;

constexpr DType kDtypes[] = {DType::F32, DType::F16, DType::BF16};

class CudaArchOps : public ::testing::Test {
 protected:
  void SetUp() override { PAGODA_REQUIRE_GPU(); }
};

// Runs `op` on the CPU backend (F32 tensors holding x) and on a CUDA
// backend of dt (x uploaded as dt); x is [rows, cols] rounded to dt.
// `op(backend, in, out)`: in is x, out a [rows, out_cols] tensor (poisoned
// with NaN on CUDA); in-place ops write `in` and leave out alone
// (out_cols 0: the result is `in`). Returns the relative L2 of CUDA's result
// against the CPU's.
double cuda_vs_cpu(DType dt, DType tensor_dt, int64_t rows, int64_t cols, int64_t out_cols,
                   const std::vector<float>& x,
                   const std::function<void(Backend&, Tensor&, Tensor&)>& op) {
  auto cpu = make_cpu_backend(1);
  Tensor ci = upload(*cpu, DType::F32, {rows, cols}, x);
  Tensor co = cpu->alloc(DType::F32, {rows, out_cols > 0 ? out_cols : 1});
  op(*cpu, ci, co);
  const auto want = to_double(download(*cpu, out_cols > 0 ? co : ci));
  auto b = make_cuda_backend(0, dt);
  Tensor gi = upload(*b, tensor_dt, {rows, cols}, x);
  Tensor go = b->alloc(tensor_dt, {rows, out_cols > 0 ? out_cols : 1});
  poison(*b, go);
  op(*b, gi, go);
  const double e = rel_l2(download(*b, out_cols > 0 ? go : gi), want);
  cpu->free(ci);
  cpu->free(co);
  b->free(gi);
  b->free(go);
  return e;
}

TEST_F(CudaArchOps, GeluTanhGatedMatchesCpu) {
  for (DType dt : kDtypes) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(std::string(dtype_name(dt)) + " seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const int64_t T = 9, I = 300;
    const auto x = random_vec(rng, static_cast<size_t>(T * 2 * I), dt, -4.f, 4.f);
    const double e = cuda_vs_cpu(dt, dt, T, 2 * I, I, x, [](Backend& be, Tensor& in, Tensor& out) {
      be.gated_act(in, GatedActivation::GeluTanh, out);
    });
    EXPECT_LT(e, tol_for(dt));
  }
}

TEST_F(CudaArchOps, ActivationsMatchCpu) {
  for (DType dt : kDtypes)
    for (Activation act : {Activation::Gelu, Activation::GeluTanh}) {
      const uint64_t seed = fresh_seed();
      SCOPED_TRACE(std::string(dtype_name(dt)) + " act " + std::to_string(static_cast<int>(act)) +
                   " seed " + std::to_string(seed));
      std::mt19937_64 rng(seed);
      const auto x = random_vec(rng, 7 * 257, dt, -5.f, 5.f);
      // In place, as the model calls it (out aliases x).
      const double e = cuda_vs_cpu(dt, dt, 7, 257, 0, x, [act](Backend& be, Tensor& in, Tensor&) {
        be.activation(in, act, in);
      });
      EXPECT_LT(e, tol_for(dt));
    }
}

// GELU's two forms differ by up to 4.7e-4 on this grid; an activation
// that ignored `act` would pass a test of either alone.
TEST_F(CudaArchOps, GeluFormsDiffer) {
  auto b = make_cuda_backend(0, DType::F32);
  std::vector<float> x(64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -4.f + 0.125f * static_cast<float>(i);
  Tensor t = upload(*b, DType::F32, {1, 64}, x), u = b->alloc(DType::F32, {1, 64}),
         v = b->alloc(DType::F32, {1, 64});
  b->activation(t, Activation::Gelu, u);
  b->activation(t, Activation::GeluTanh, v);
  const auto a = download(*b, u), c = download(*b, v);
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - c[i]));
    const double xe = x[i];
    EXPECT_NEAR(a[i], 0.5 * xe * (1 + std::erf(xe / std::sqrt(2.0))), 1e-5) << x[i];
  }
  EXPECT_GT(diff, 1e-4);
  for (Tensor* p : {&t, &u, &v}) b->free(*p);
}

TEST_F(CudaArchOps, SoftcapAndScaleMatchCpu) {
  for (DType dt : kDtypes) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(std::string(dtype_name(dt)) + " seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const auto x = random_vec(rng, 5 * 513, dt, -80.f, 80.f);
    EXPECT_LT(cuda_vs_cpu(dt, dt, 5, 513, 0, x,
                          [](Backend& be, Tensor& in, Tensor&) { be.softcap(in, 30.f); }),
              tol_for(dt));
    EXPECT_LT(cuda_vs_cpu(dt, dt, 5, 513, 0, x,
                          [](Backend& be, Tensor& in, Tensor&) { be.scale(in, 8.f); }),
              tol_for(dt));
    // Final-logit soft-capping runs on F32 logits whatever the act dtype.
    const auto logits = random_vec(rng, 3 * 512, DType::F32, -80.f, 80.f);
    EXPECT_LT(cuda_vs_cpu(dt, DType::F32, 3, 512, 0, logits,
                          [](Backend& be, Tensor& in, Tensor&) { be.softcap(in, 30.f); }),
              tol_for(DType::F32));
  }
}

TEST_F(CudaArchOps, AddMatchesCpu) {
  for (DType dt : kDtypes) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(std::string(dtype_name(dt)) + " seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const int64_t T = 6, H = 200;
    const auto y = random_vec(rng, static_cast<size_t>(T * H), dt, -2.f, 2.f);
    const auto x = random_vec(rng, static_cast<size_t>(T * H), dt, -2.f, 2.f);
    const double e = cuda_vs_cpu(dt, dt, T, H, 0, y, [&](Backend& be, Tensor& in, Tensor&) {
      Tensor xt = upload(be, be.act_dtype(), {T, H}, x);
      be.add(xt, in);
      be.synchronize();
      be.free(xt);
    });
    EXPECT_LT(e, tol_for(dt));
  }
}

// layer_norm, and add_layer_norm's two results (out and the new residual),
// for row widths below, at and above the block size, out aliasing x or not.
TEST_F(CudaArchOps, LayerNormMatchesCpu) {
  for (DType dt : kDtypes)
    for (int64_t H : {64, 256, 1000, 4096})
      for (bool fused : {false, true})
        for (bool alias : {false, true}) {
          const uint64_t seed = fresh_seed();
          SCOPED_TRACE(std::string(dtype_name(dt)) + " H " + std::to_string(H) +
                       (fused ? " add_layer_norm" : " layer_norm") + (alias ? " aliased" : "") +
                       " seed " + std::to_string(seed));
          std::mt19937_64 rng(seed);
          const int64_t T = 5;
          // A shifted mean (0.5) so that a missing mean subtraction shows.
          const auto x = random_vec(rng, static_cast<size_t>(T * H), dt, -1.5f, 2.5f);
          const auto r = random_vec(rng, static_cast<size_t>(T * H), dt, -2.f, 2.f);
          const auto w = random_vec(rng, static_cast<size_t>(H), dt, 0.5f, 1.5f);
          const auto bias = random_vec(rng, static_cast<size_t>(H), dt, -0.5f, 0.5f);
          std::vector<double> res_err;
          const double e = cuda_vs_cpu(
              dt, dt, T, H, alias ? 0 : H, x, [&](Backend& be, Tensor& in, Tensor& out) {
                const DType adt = be.act_dtype();
                Tensor wt = upload(be, adt, {H}, w), bt = upload(be, adt, {H}, bias);
                Tensor& dst = alias ? in : out;
                if (fused) {
                  Tensor rt = upload(be, adt, {T, H}, r);
                  be.add_layer_norm(in, rt, wt, bt, 1e-5f, dst);
                  // The residual must now hold x + r (in the dtype).
                  const auto got = download(be, rt);
                  std::vector<double> want(got.size());
                  for (size_t i = 0; i < want.size(); ++i)
                    want[i] = static_cast<double>(x[i]) + static_cast<double>(r[i]);
                  res_err.push_back(rel_l2(got, want));
                  be.free(rt);
                } else {
                  be.layer_norm(in, wt, bt, 1e-5f, dst);
                }
                be.synchronize();
                be.free(wt);
                be.free(bt);
              });
          EXPECT_LT(e, tol_for(dt));
          for (double re : res_err) EXPECT_LT(re, tol_for(dt)) << "residual";
        }
}

TEST_F(CudaArchOps, BadArgumentsAreRejected) {
  auto b = make_cuda_backend(0, DType::BF16);
  Tensor x = b->alloc(DType::BF16, {2, 8}), y = b->alloc(DType::BF16, {2, 3}),
         w = b->alloc(DType::BF16, {8});
  EXPECT_THROW(b->add(x, y), std::invalid_argument);
  EXPECT_THROW(b->activation(x, Activation::Gelu, y), std::invalid_argument);
  EXPECT_THROW(b->softcap(x, 0.f), std::invalid_argument);
  EXPECT_THROW(b->layer_norm(x, y, w, 1e-5f, x), std::invalid_argument);
  EXPECT_THROW(b->gated_act(x, GatedActivation::GeluTanh, x), std::invalid_argument);
  for (Tensor* p : {&x, &y, &w}) b->free(*p);
}

// rope_and_cache with a RopeTable of rotary_dim R (0, part of D, all of D)
// in both pair layouts, against the CPU backend: q_out and both whole
// caches (zeroed first, so a write to a wrong slot or element shows).
void run_rope_case(DType dt, int64_t D, int64_t R, bool interleaved) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(std::string(dtype_name(dt)) + " D " + std::to_string(D) + " R " + std::to_string(R) +
               (interleaved ? " interleaved" : " rotate-half") + " seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t Hq = 4, Hk = 2, W = (Hq + 2 * Hk) * D, max_pos = 300, num_blocks = 8, bs = 16;
  // Positions of a prefill chunk and a padding token (slot -1: no cache write).
  ForwardBatch fb;
  const std::vector<int32_t> pos = {0, 1, 7, 100, 250, 299, 5};
  const std::vector<int32_t> slots = {3, 17, 40, 64, 90, 127, -1};
  const auto T = static_cast<int64_t>(pos.size());
  fb.input_ids.assign(pos.size(), 0);
  fb.positions = pos;
  fb.slot_mapping = slots;
  fb.query_start_loc = {0, static_cast<int32_t>(T)};
  fb.context_lens = {300};
  fb.max_blocks_per_seq = static_cast<int32_t>(num_blocks);
  for (int32_t i = 0; i < num_blocks; ++i) fb.block_tables.push_back(i);
  fb.logits_indices = {static_cast<int32_t>(T - 1)};
  const auto qkv = random_vec(rng, static_cast<size_t>(T * W), dt, -2.f, 2.f);
  // A table of the RopeTable layout: cos(p f_j) then sin(p f_j), j < R/2.
  std::vector<float> table(static_cast<size_t>(max_pos * std::max<int64_t>(R, 1)));
  for (int64_t p = 0; p < max_pos; ++p)
    for (int64_t j = 0; j < R / 2; ++j) {
      const double f = std::pow(10000.0, -2.0 * static_cast<double>(j) / static_cast<double>(R));
      table[static_cast<size_t>(p * R + j)] =
          static_cast<float>(std::cos(static_cast<double>(p) * f));
      table[static_cast<size_t>(p * R + R / 2 + j)] =
          static_cast<float>(std::sin(static_cast<double>(p) * f));
    }
  std::vector<float> zeros(static_cast<size_t>(num_blocks * bs * Hk * D), 0.f);

  auto run = [&](Backend& be, DType tdt) {
    RopeTable rope;
    rope.rotary_dim = R;
    rope.interleaved = interleaved;
    if (R > 0) rope.cos_sin = upload(be, DType::F32, {max_pos, R}, table);
    Tensor x = upload(be, tdt, {T, W}, qkv), q = be.alloc(tdt, {T, Hq * D});
    LayerKVCache cache{upload(be, tdt, {num_blocks, bs, Hk, D}, zeros),
                       upload(be, tdt, {num_blocks, bs, Hk, D}, zeros)};
    const DeviceBatch& db = be.upload_batch(fb);
    be.rope_and_cache(x, rope, db, Hq, Hk, D, q, cache);
    std::vector<std::vector<float>> out = {download(be, q), download(be, cache.k),
                                           download(be, cache.v)};
    for (Tensor* p : {&x, &q, &cache.k, &cache.v}) be.free(*p);
    if (R > 0) be.free(rope.cos_sin);
    return out;
  };
  auto cpu = make_cpu_backend(1);
  const auto want = run(*cpu, DType::F32);
  auto b = make_cuda_backend(0, dt);
  const auto got = run(*b, dt);
  const char* names[] = {"q_out", "k cache", "v cache"};
  for (size_t i = 0; i < 3; ++i)
    EXPECT_LT(rel_l2(got[i], to_double(want[i])), tol_for(dt)) << names[i];
  // The pass-through part is exact: the values are copied, not recomputed.
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t d = R; d < D; ++d) {
        const auto i = static_cast<size_t>((t * Hq + h) * D + d);
        ASSERT_EQ(got[0][i], qkv[static_cast<size_t>(t * W + h * D + d)])
            << "t " << t << " h " << h << " d " << d;
      }
}

TEST_F(CudaArchOps, RopePartialInterleavedAndNoneMatchCpu) {
  for (DType dt : {DType::F32, DType::BF16}) {
    run_rope_case(dt, 16, 16, false);  // full rotate-half (the Llama path)
    run_rope_case(dt, 16, 4, false);   // GPT-NeoX's 25 %
    run_rope_case(dt, 16, 8, true);    // GPT-J: interleaved on 8 of 16
    run_rope_case(dt, 64, 64, true);   // interleaved over the whole head
    run_rope_case(dt, 128, 32, false);
    run_rope_case(dt, 16, 0, false);  // no rotary (GPT-2, BLOOM)
  }
}

}  // namespace
}  // namespace pagoda
