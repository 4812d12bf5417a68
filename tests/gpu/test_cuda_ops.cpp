// CUDA backend element-wise ops and cuBLASLt linear against host references
// (double precision) on fresh random data, outputs poisoned with NaN first.
#include <gtest/gtest.h>

#include <cmath>

#include "gpu/cuda_backend_impl.h"
#include "gpu/kernels.h"
#include "tests/gpu/gpu_test_util.h"

namespace pagoda {
namespace {

using namespace gputest;

class CudaOps : public ::testing::TestWithParam<DType> {};

TEST_P(CudaOps, CopyRoundTripAndName) {
  PAGODA_REQUIRE_GPU();
  const DType dt = GetParam();
  auto b = make_cuda_backend(0, dt);
  EXPECT_NE(b->name().find("cuda:0"), std::string::npos);
  EXPECT_EQ(b->device(), Device::CUDA);
  EXPECT_GT(b->total_memory_bytes(), b->free_memory_bytes() / 2);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  auto h = random_vec(rng, 3 * 1000 + 7, dt, -100.f, 100.f);
  Tensor t = upload(*b, dt, {3007}, h);
  auto back = download(*b, t);
  // Values already representable in dt: the round trip is exact.
  ASSERT_EQ(back.size(), h.size());
  for (size_t i = 0; i < h.size(); ++i) ASSERT_EQ(back[i], h[i]) << i;
  b->fill_zero(t);
  back = download(*b, t);
  for (float v : back) ASSERT_EQ(v, 0.f);
  b->free(t);
  EXPECT_EQ(t.data, nullptr);
}

TEST_P(CudaOps, Embedding) {
  PAGODA_REQUIRE_GPU();
  const DType dt = GetParam();
  auto b = make_cuda_backend(0, dt);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const int64_t V = 517, H = 200, T = 33;
  auto table = random_vec(rng, V * H, dt);
  std::vector<int32_t> ids(T);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % V);
  ids[0] = V - 1;
  Tensor dtab = upload(*b, dt, {V, H}, table);
  Tensor dids = b->alloc(DType::I32, {T});
  b->copy_from_host(dids, ids.data(), DType::I32);
  Tensor out = b->alloc(dt, {T, H});
  poison(*b, out);
  b->embedding(dids, dtab, out);
  std::vector<double> ref(T * H);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < H; ++i) ref[t * H + i] = table[ids[t] * H + i];
  EXPECT_EQ(rel_l2(download(*b, out), ref), 0.0);  // a copy: exact
  b->free(dtab);
  b->free(dids);
  b->free(out);
}

TEST_P(CudaOps, RmsNormAndFusedResidual) {
  PAGODA_REQUIRE_GPU();
  const DType dt = GetParam();
  auto b = make_cuda_backend(0, dt);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  for (int64_t H : {64, 4096, 5120 + 3}) {
    const int64_t T = 19;
    const float eps = 1e-5f;
    auto x = random_vec(rng, T * H, dt, -3.f, 3.f);
    auto r = random_vec(rng, T * H, dt, -3.f, 3.f);
    auto w = random_vec(rng, H, dt, 0.5f, 1.5f);
    Tensor dx = upload(*b, dt, {T, H}, x), dr = upload(*b, dt, {T, H}, r), dw = upload(*b, dt, {H}, w);
    Tensor out = b->alloc(dt, {T, H});
    poison(*b, out);
    b->rms_norm(dx, dw, eps, out);
    std::vector<double> ref(T * H), ref_res(T * H), ref2(T * H);
    for (int64_t t = 0; t < T; ++t) {
      double ss = 0, ss2 = 0;
      for (int64_t i = 0; i < H; ++i) {
        ss += double(x[t * H + i]) * x[t * H + i];
        // The residual sum is rounded to the activation dtype (as HF does).
        const float s = round_to(dt, x[t * H + i] + r[t * H + i]);
        ref_res[t * H + i] = s;
        ss2 += double(s) * s;
      }
      const double inv = 1.0 / std::sqrt(ss / H + eps), inv2 = 1.0 / std::sqrt(ss2 / H + eps);
      for (int64_t i = 0; i < H; ++i) {
        ref[t * H + i] = x[t * H + i] * inv * w[i];
        ref2[t * H + i] = ref_res[t * H + i] * inv2 * w[i];
      }
    }
    EXPECT_LT(rel_l2(download(*b, out), ref), tol_for(dt)) << "rms_norm H=" << H;
    // Fused add + norm, with out aliasing x (allowed by the interface).
    b->add_rms_norm(dx, dr, dw, eps, dx);
    EXPECT_LT(rel_l2(download(*b, dr), ref_res), tol_for(dt)) << "residual H=" << H;
    EXPECT_LT(rel_l2(download(*b, dx), ref2), tol_for(dt)) << "add_rms_norm H=" << H;
    for (Tensor* t : {&dx, &dr, &dw, &out}) b->free(*t);
  }
}

TEST_P(CudaOps, SiluMulAndGather) {
  PAGODA_REQUIRE_GPU();
  const DType dt = GetParam();
  auto b = make_cuda_backend(0, dt);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  // silu(g) * u against float64; the uploaded gate_up is kept in dgu.
  // I = 343: one element per thread; 344: 16-byte vectors (every dtype).
  const auto check_silu = [&](int64_t T, int64_t I, std::vector<float>& gu, Tensor& dgu) {
    gu = random_vec(rng, T * 2 * I, dt, -6.f, 6.f);
    dgu = upload(*b, dt, {T, 2 * I}, gu);
    Tensor out = b->alloc(dt, {T, I});
    poison(*b, out);
    b->silu_mul(dgu, out);
    std::vector<double> ref(T * I);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < I; ++i) {
        const double g = gu[t * 2 * I + i], u = gu[t * 2 * I + I + i];
        ref[t * I + i] = g / (1 + std::exp(-g)) * u;
      }
    // __expf differs from exp by a few ulp of fp32: still far under 1e-5.
    EXPECT_LT(rel_l2(download(*b, out), ref), tol_for(dt)) << "silu_mul I=" << I;
    b->free(out);
  };
  std::vector<float> gu;
  Tensor dgu;
  check_silu(37, 343, gu, dgu);
  b->free(dgu);
  const int64_t T = 37, I = 344;
  check_silu(T, I, gu, dgu);

  std::vector<int32_t> idx = {36, 0, 5, 5, 17};
  Tensor didx = b->alloc(DType::I32, {5});
  b->copy_from_host(didx, idx.data(), DType::I32);
  Tensor g = b->alloc(dt, {5, 2 * I});
  poison(*b, g);
  b->gather_rows(dgu, didx, g);
  std::vector<double> gref;
  for (int32_t r : idx)
    for (int64_t i = 0; i < 2 * I; ++i) gref.push_back(gu[r * 2 * I + i]);
  EXPECT_EQ(rel_l2(download(*b, g), gref), 0.0);  // a copy: exact
  for (Tensor* t : {&dgu, &didx, &g}) b->free(*t);
}

TEST_P(CudaOps, FillNormalStatistics) {
  PAGODA_REQUIRE_GPU();
  const DType dt = GetParam();
  auto b = make_cuda_backend(0, dt);
  Tensor t = b->alloc(dt, {1 << 20});
  poison(*b, t);
  b->fill_normal(t, 0.5f, 0.02f, fresh_seed());
  auto h = download(*b, t);
  double s = 0, s2 = 0;
  for (float v : h) {
    ASSERT_TRUE(std::isfinite(v));
    s += v;
    s2 += double(v) * v;
  }
  const double n = static_cast<double>(h.size());
  const double mean = s / n, sd = std::sqrt(s2 / n - mean * mean);
  // Standard error of the mean: 0.02/1024 ≈ 2e-5; bf16 rounding near 0.5
  // has a step of 2^-9 (unbiased on average): 5e-4 and 3% on sd.
  EXPECT_NEAR(mean, 0.5, 5e-4);
  EXPECT_NEAR(sd, 0.02, 0.02 * 0.03);
  b->free(t);
}

// linear: M in {1, 3, 7} (the GEMV kernel for bf16/f16), 9 and 256
// (cuBLASLt), K = 60 (not a multiple of 8: cuBLASLt), with and without bias,
// act-dtype and F32 output (logits).
TEST_P(CudaOps, Linear) {
  PAGODA_REQUIRE_GPU();
  const DType dt = GetParam();
  auto b = make_cuda_backend(0, dt);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  struct Shape { int64_t M, N, K; };
  for (Shape s : {Shape{1, 11008, 4096}, Shape{7, 384, 128}, Shape{256, 768, 512}, Shape{3, 512, 64},
                  Shape{1, 100, 60}, Shape{9, 256, 136}}) {
    auto x = random_vec(rng, s.M * s.K, dt);
    auto w = random_vec(rng, s.N * s.K, dt, -0.1f, 0.1f);
    auto bias = random_vec(rng, s.N, dt);
    Tensor dx = upload(*b, dt, {s.M, s.K}, x), dw = upload(*b, dt, {s.N, s.K}, w);
    Tensor db = upload(*b, dt, {s.N}, bias);
    std::vector<double> ref(s.M * s.N);
    for (int64_t m = 0; m < s.M; ++m)
      for (int64_t n = 0; n < s.N; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < s.K; ++k) acc += double(x[m * s.K + k]) * w[n * s.K + k];
        ref[m * s.N + n] = acc;
      }
    std::vector<double> ref_b = ref;
    for (int64_t m = 0; m < s.M; ++m)
      for (int64_t n = 0; n < s.N; ++n) ref_b[m * s.N + n] += bias[n];
    for (DType out_dt : {dt, DType::F32}) {
      Tensor out = b->alloc(out_dt, {s.M, s.N});
      // F32 output of bf16 inputs: fp32 accumulation only (no final rounding).
      const double tol = out_dt == DType::F32 ? 1e-5 : tol_for(dt);
      poison(*b, out);
      b->linear(dx, dw, nullptr, out);
      EXPECT_LT(rel_l2(download(*b, out), ref), tol) << s.M << "x" << s.N << "x" << s.K << " "
                                                      << dtype_name(out_dt);
      poison(*b, out);
      b->linear(dx, dw, &db, out);
      EXPECT_LT(rel_l2(download(*b, out), ref_b), tol) << "bias " << s.M << "x" << s.N << "x" << s.K
                                                        << " " << dtype_name(out_dt);
      b->free(out);
    }
    for (Tensor* t : {&dx, &dw, &db}) b->free(*t);
  }
}

// The small-M kernels forced one at a time (LtGemm::set_small_m: the skinny
// tensor-core GEMM for every M up to kSkinnyGemmMaxRows, the CUDA-core GEMV
// up to 8, cuBLASLt) and LtGemm's own choice, on M at and around their batch-group edges (8-row
// groups, 2 tiles of 16 columns a CTA from N = 8192), N not a multiple of 16, K at the 32-element
// step (and one step short of a warp's stride), the decode shapes of o_proj (4096 × 4096, M = 1)
// and a narrow N with K = 8192 at M = 2, with and without bias, act-dtype and F32 output;
// against the double-precision product. The skinny kernel also declines what it cannot do (K % 32).
TEST_P(CudaOps, SmallBatchLinearKernelsAgree) {
  PAGODA_REQUIRE_GPU();
  const DType dt = GetParam();
  if (dt == DType::F32) GTEST_SKIP() << "the small-M kernels are bf16/f16 only";
  auto b = make_cuda_backend(0, dt);
  auto& cb = dynamic_cast<cuda::CudaBackend&>(*b);
  auto& gemm = cb.gemm();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  struct Shape {
    int64_t M, N, K;
  };
  const Shape shapes[] = {{1, 8200, 4096}, {2, 100, 32},    {7, 4096, 256},  {8, 8192, 96},
                          {9, 40, 1024},   {16, 8208, 512}, {17, 33, 4064},  {24, 4096, 128},
                          {31, 12288, 64}, {32, 9000, 160}, {33, 200, 288},  {48, 64, 512},
                          {64, 8192, 224}, {5, 17, 11008},  {1, 4096, 4096}, {2, 1000, 8192}};
  for (const Shape s : shapes) {
    auto x = random_vec(rng, s.M * s.K, dt);
    auto w = random_vec(rng, s.N * s.K, dt, -0.1f, 0.1f);
    auto bias = random_vec(rng, s.N, dt);
    Tensor dx = upload(*b, dt, {s.M, s.K}, x), dw = upload(*b, dt, {s.N, s.K}, w);
    Tensor db = upload(*b, dt, {s.N}, bias);
    std::vector<double> ref(s.M * s.N), ref_b(s.M * s.N);
    for (int64_t m = 0; m < s.M; ++m)
      for (int64_t n = 0; n < s.N; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < s.K; ++k) acc += double(x[m * s.K + k]) * w[n * s.K + k];
        ref[m * s.N + n] = acc;
        ref_b[m * s.N + n] = acc + bias[n];
      }
    using K = cuda::LtGemm::SmallM;
    for (const K kernel : {K::kSkinny, K::kGemv, K::kCublas, K::kAuto}) {
      if (kernel == K::kGemv && s.M > 8) continue;
      gemm.set_small_m(kernel);
      for (DType out_dt : {dt, DType::F32}) {
        Tensor out = b->alloc(out_dt, {s.M, s.N});
        const double tol = out_dt == DType::F32 ? 1e-5 : tol_for(dt);
        for (const bool with_bias : {false, true}) {
          poison(*b, out);
          b->linear(dx, dw, with_bias ? &db : nullptr, out);
          EXPECT_LT(rel_l2(download(*b, out), with_bias ? ref_b : ref), tol)
              << "kernel " << static_cast<int>(kernel) << " " << s.M << "x" << s.N << "x" << s.K
              << " " << dtype_name(out_dt) << (with_bias ? " bias" : "");
        }
        b->free(out);
      }
    }
    for (Tensor* t : {&dx, &dw, &db}) b->free(*t);
  }
  gemm.set_small_m(cuda::LtGemm::SmallM::kAuto);
  // K % 32 != 0: declined (the caller falls back).
  Tensor x = b->alloc(dt, {4, 40}), w = b->alloc(dt, {64, 40}), out = b->alloc(dt, {4, 64});
  EXPECT_FALSE(
      cuda::launch_skinny_gemm(dt, dt, x.data, w.data, nullptr, out.data, 4, 64, 40, cb.stream()));
  for (Tensor* t : {&x, &w, &out}) b->free(*t);
}

TEST_P(CudaOps, BadShapesThrow) {
  PAGODA_REQUIRE_GPU();
  const DType dt = GetParam();
  auto b = make_cuda_backend(0, dt);
  Tensor x = b->alloc(dt, {4, 64}), w = b->alloc(dt, {32, 63}), out = b->alloc(dt, {4, 32});
  EXPECT_THROW(b->linear(x, w, nullptr, out), std::invalid_argument);
  Tensor wn = b->alloc(dt, {65});
  EXPECT_THROW(b->rms_norm(x, wn, 1e-5f, x), std::invalid_argument);
  EXPECT_THROW(make_cuda_backend(0, DType::I32), std::invalid_argument);
  EXPECT_THROW(make_cuda_backend(99, dt), std::runtime_error);
  for (Tensor* t : {&x, &w, &out, &wn}) b->free(*t);
}

INSTANTIATE_TEST_SUITE_P(DTypes, CudaOps, ::testing::Values(DType::BF16, DType::F16, DType::F32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace pagoda
