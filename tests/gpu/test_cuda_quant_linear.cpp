// Packed int4 / int8 linears on the CUDA backend (gpu/quant_linear.h)
// against the host reference: out = x · Wᵀ + bias with W from
// dequantize_linear (the path tested against HF transformers), computed in
// double from the same rounded x:
//  * GPTQ 4-bit group 64 and 8-bit per-channel, fp16 and bf16, with and
//    without act-order, a fused weight of three parts whose act-order
//    permutations differ (each part then reads its own x order);
//  * M = 1 … 8 and 9 … 64 (4-bit codes in the tensor-core layout: mma
//    fragments dequantized in registers, qmv_kernel then qmma_kernel),
//    1 … 8 (other codes: the fp32 GEMV), and
//    above (the weight dequantized — coalesced from the tensor-core layout,
//    scattered with act-order — then cuBLASLt), out in the act dtype and
//    F32, with a bias; 4-bit codes outside that layout (K % 64 != 0, or
//    groups too many for the decode kernel's shared memory) too; large
//    batches over a wide weight;
//  * dummy packed weights: both paths agree, weights of std ~0.02;
//  * the bytes a packed linear takes, its release, and the errors.
// The register paths use the weights exactly (fp32 sums); the large-batch
// path rounds the weights to the act dtype, so its bound is that rounding's.
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <numeric>
#include <random>
#include <utility>

#include "engine/model/backend.h"
#include "engine/quant/packed_linear.h"
#include "gpu/cuda_backend.h"
#include "gpu/quant_kernels.h"
#include "tests/gpu/gpu_test_util.h"

namespace pagoda {
namespace {

QuantConfig gptq(int bits, int64_t group) {
  QuantConfig qc;
  qc.method = QuantMethod::GPTQ;
  qc.bits = bits;
  qc.group_size = group;
  qc.sym = true;
  return qc;
}

// A random GPTQ weight [N, K] in the AutoGPTQ layout; with act_order its
// g_idx is a random assignment of group_size features to each group.
QuantizedWeight random_gptq(std::mt19937_64& rng, const QuantConfig& qc, int64_t N, int64_t K,
                            bool act_order, const std::string& name) {
  QuantizedWeight w;
  w.module = name;
  w.method = QuantMethod::GPTQ;
  w.bits = qc.bits;
  w.group_size = qc.group_size;
  w.desc_act = act_order;
  w.out_features = N;
  w.in_features = K;
  const int64_t gs = qc.group_size == -1 ? K : qc.group_size;
  w.num_groups = (K + gs - 1) / gs;  // a short last group when gs does not divide K
  const int64_t pack = 32 / qc.bits;
  w.qweight.resize(static_cast<size_t>(K / pack * N));
  for (int32_t& v : w.qweight) v = static_cast<int32_t>(rng());
  // Stored zeros (zero − 1) in [0, 2^bits − 2]: zero points that fit the
  // bits, as a real checkpoint's.
  w.qzeros.assign(static_cast<size_t>(w.num_groups * N / pack), 0);
  for (size_t i = 0; i < w.qzeros.size(); ++i)
    for (int64_t j = 0; j < pack; ++j) {
      const auto v = static_cast<uint32_t>(rng() % ((1u << qc.bits) - 1u));
      w.qzeros[i] = static_cast<int32_t>(static_cast<uint32_t>(w.qzeros[i]) | (v << (qc.bits * j)));
    }
  std::uniform_real_distribution<float> u(0.002f, 0.02f);
  w.scales.resize(static_cast<size_t>(w.num_groups * N));
  for (float& s : w.scales) s = u(rng);
  w.g_idx.resize(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) w.g_idx[static_cast<size_t>(k)] = static_cast<int32_t>(k / gs);
  if (act_order) std::shuffle(w.g_idx.begin(), w.g_idx.end(), rng);
  return w;
}

// out[m, n] = Σ_k x[m, k] · W[n, k] + bias[n] in double.
std::vector<double> reference(const std::vector<float>& x, const std::vector<float>& W,
                              const std::vector<float>& bias, int64_t M, int64_t N, int64_t K) {
  std::vector<double> out(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = bias[static_cast<size_t>(n)];
      for (int64_t k = 0; k < K; ++k)
        s += static_cast<double>(x[static_cast<size_t>(m * K + k)]) *
             W[static_cast<size_t>(n * K + k)];
      out[static_cast<size_t>(m * N + n)] = s;
    }
  return out;
}

void check_fused(DType dt, int bits, int64_t group, bool act_order, int64_t K = 512,
                 const std::vector<int64_t>& Ms = {1, 3, 8, 9, 17, 32, 33, 40, 52, 57, 64, 65, 100,
                                                   256}) {
  const uint64_t seed = gputest::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " " + dtype_name(dt) + " " + std::to_string(bits) +
               "-bit group " + std::to_string(group) + (act_order ? " act-order" : ""));
  std::mt19937_64 rng(seed);
  auto backend = make_cuda_backend(0, dt);
  const QuantConfig qc = gptq(bits, group);
  // Odd tile counts (5, 3, 5 of 16 rows; 13 when the parts merge): qmma's
  // last group of two row tiles has one.
  const int64_t rows[3] = {80, 48, 80}, N = 208;
  // Register-dequantizing kernels (exact weights) up to this many rows of x:
  // the tensor-core one for 4-bit codes in its layout, else the fp32 GEMV.
  const int64_t G = group == -1 ? 1 : (K + group - 1) / group;
  const int64_t exact_up_to = tileable(bits, N, K) && cuda::qmma_fits(K, G)
                                  ? std::min<int64_t>(64, cuda::qmma_max_rows(K, G))
                                  : 8;
  ASSERT_TRUE(backend->keeps_quantized(qc, K));
  Tensor w = backend->alloc_quantized_linear(N, K, qc);
  EXPECT_EQ(w.dtype, DType::I32);
  std::vector<float> W(static_cast<size_t>(N * K));
  int64_t r0 = 0;
  for (int p = 0; p < 3; ++p) {
    const QuantizedWeight part =
        random_gptq(rng, qc, rows[p], K, act_order, "part" + std::to_string(p));
    Tensor part_rows = w.slice_rows(r0, rows[p]);
    backend->load_quantized_linear(part_rows, part);
    dequantize_linear(part, W.data() + r0 * K);
    r0 += rows[p];
  }
  EXPECT_EQ(backend->weight_bytes(w), static_cast<size_t>(N * (K * bits / 8 + G * 5)));
  const std::vector<float> bias = gputest::random_vec(rng, static_cast<size_t>(N), dt, -0.5f, 0.5f);
  Tensor b = gputest::upload(*backend, dt, {N}, bias);
  for (const int64_t M : Ms) {
    const std::vector<float> x =
        gputest::random_vec(rng, static_cast<size_t>(M * K), dt, -1.f, 1.f);
    Tensor xt = gputest::upload(*backend, dt, {M, K}, x);
    const std::vector<double> want = reference(x, W, bias, M, N, K);
    for (const DType out_dt : {dt, DType::F32}) {
      Tensor out = backend->alloc(out_dt, {M, N});
      gputest::poison(*backend, out);
      backend->linear(xt, w, &b, out);
      const std::vector<float> got = gputest::download(*backend, out);
      // Small batches: fp32 sums of exact weights (+ the output's
      // rounding); larger: weights rounded to dt first.
      const double unit = dt == DType::BF16 ? 1.0 / 256 : 1.0 / 2048;
      const double tol = (M > exact_up_to ? unit : 1e-4) + (out_dt == dt ? unit : 0.0);
      EXPECT_LT(gputest::rel_l2(got, want), tol) << "M " << M << " out " << dtype_name(out_dt);
      backend->free(out);
    }
    backend->free(xt);
  }
  backend->free(b);
  backend->free(w);
  EXPECT_TRUE(w.empty());
}

TEST(CudaQuantLinear, Gptq4BitGroup64) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : {DType::F16, DType::BF16}) check_fused(dt, 4, 64, false);
}
// Group 128, the published checkpoints' usual: the decode kernel (M <= 8)
// scales once per two 16-byte loads; 4224 inputs split unevenly over its
// warps (66 loads a lane: runs of 8 and 10); 4160 inputs end in a short
// group of 64 (qmma then, whose groups are per chunk; 33 groups, a row's
// zero points not whole words).
TEST(CudaQuantLinear, Gptq4BitGroup128DecodeBatches) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : {DType::F16, DType::BF16}) {
    check_fused(dt, 4, 128, false, 4096, {1, 2, 5, 8, 9, 32});
    check_fused(dt, 4, 128, false, 4224, {1, 4, 7, 8});
    check_fused(dt, 4, 128, false, 4160, {1, 8, 17, 32, 33, 48, 64, 65});
  }
}
TEST(CudaQuantLinear, Gptq4BitOutsideTheTensorCoreLayout) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : {DType::F16, DType::BF16})
    check_fused(dt, 4, 32, false, 480);  // K % 64 != 0: rows
}
TEST(CudaQuantLinear, Gptq4BitActOrderPartsWithDifferentPermutations) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : {DType::F16, DType::BF16}) check_fused(dt, 4, 128, true);
}
// Rows of more than 64 16-byte loads per lane take the kernel's 16-warp
// form; small groups and per-channel scales stage the most records.
TEST(CudaQuantLinear, Gptq4BitLongRowsSmallGroupsPerChannelAndActOrder) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : {DType::F16, DType::BF16}) {
    check_fused(dt, 4, 32, false, 4608);
    check_fused(dt, 4, -1, false, 4608);
    check_fused(dt, 4, 128, true, 4608);
    check_fused(dt, 4, 32, false);
  }
}
// Group 32 over 24,576 inputs: more records than the decode kernel's shared
// memory holds, so the codes stay in rows (fp32 GEMV, dequantize + GEMM).
TEST(CudaQuantLinear, Gptq4BitTooManyGroupsForTheTensorCoreLayout) {
  PAGODA_REQUIRE_GPU();
  ASSERT_FALSE(cuda::qmma_fits(24576, 768));
  ASSERT_TRUE(cuda::qmma_fits(4096, 128));
  check_fused(DType::BF16, 4, 32, false, 24576, {1, 8, 9, 40});
}
// Group 32 over 16,384 inputs (512 groups): the tensor-core layout, but
// too many records for qmma's two-tile form, which falls back to one tile
// at 17-64 rows.
TEST(CudaQuantLinear, Gptq4BitManyGroupsOneRowTileAtATime) {
  PAGODA_REQUIRE_GPU();
  ASSERT_TRUE(cuda::qmma_fits(16384, 512));
  check_fused(DType::BF16, 4, 32, false, 16384, {1, 17, 32, 64});
}

// One random GPTQ linear [N, K] (with a random bias when `with_bias`) on
// x of each M rows in Ms: out (out_dt) against the double reference within
// relative L2 `tol`.
void check_single(std::mt19937_64& rng, DType dt, const QuantConfig& qc, int64_t N, int64_t K,
                  bool act_order, bool with_bias, DType out_dt, std::initializer_list<int64_t> Ms,
                  double tol) {
  auto backend = make_cuda_backend(0, dt);
  Tensor w = backend->alloc_quantized_linear(N, K, qc);
  const QuantizedWeight qw = random_gptq(rng, qc, N, K, act_order, "w");
  backend->load_quantized_linear(w, qw);
  std::vector<float> W(static_cast<size_t>(N * K));
  dequantize_linear(qw, W.data());
  const std::vector<float> bias =
      with_bias ? gputest::random_vec(rng, static_cast<size_t>(N), dt, -0.5f, 0.5f)
                : std::vector<float>(static_cast<size_t>(N), 0.f);
  Tensor b;
  if (with_bias) b = gputest::upload(*backend, dt, {N}, bias);
  for (const int64_t M : Ms) {
    const std::vector<float> x =
        gputest::random_vec(rng, static_cast<size_t>(M * K), dt, -1.f, 1.f);
    Tensor xt = gputest::upload(*backend, dt, {M, K}, x);
    Tensor out = backend->alloc(out_dt, {M, N});
    gputest::poison(*backend, out);
    backend->linear(xt, w, with_bias ? &b : nullptr, out);
    EXPECT_LT(gputest::rel_l2(gputest::download(*backend, out), reference(x, W, bias, M, N, K)),
              tol)
        << dtype_name(dt) << " M " << M;
    backend->free(out);
    backend->free(xt);
  }
  if (with_bias) backend->free(b);
  backend->free(w);
}

// A linear of 12,800 features (800 row tiles, four or more a CTA slot on
// GPUs of up to 200 SMs): qmv's 4-warp CTAs, at decode batches (fp32 sums
// of the exact weights).
TEST(CudaQuantLinear, Gptq4BitWideDecodeLinear) {
  PAGODA_REQUIRE_GPU();
  if (std::getenv("PAGODA_QMV_WARPS") != nullptr || std::getenv("PAGODA_INT4_DECODE") != nullptr)
    GTEST_SKIP() << "a benchmark switch chooses the decode kernel";
  const uint64_t seed = gputest::fresh_seed();
  std::mt19937_64 rng(seed);
  // Steps of 4 chunks (group 128), of 1 (group 32), and act-order (the
  // chunk-group table).
  for (const auto& [group, act_order] :
       {std::pair<int64_t, bool>{128, false}, {32, false}, {64, true}}) {
    SCOPED_TRACE("seed " + std::to_string(seed) + " group " + std::to_string(group) +
                 (act_order ? " act-order" : ""));
    for (DType dt : {DType::F16, DType::BF16})
      check_single(rng, dt, gptq(4, group), 12800, 512, act_order, true, DType::F32, {1, 3, 8},
                   1e-4);
  }
}

// Act-order group 32 over 22,016 inputs (688 groups): the tensor-core
// layout, but qmma's shared memory holds the warps' sums of fewer batch
// tiles than 8 (on the H200: 7, one row tile a CTA), so the largest decode
// batches dequantize and run cuBLASLt (check_fused's bound follows
// qmma_max_rows).
TEST(CudaQuantLinear, Gptq4BitGroupsThatCapQmmaRows) {
  PAGODA_REQUIRE_GPU();
  ASSERT_TRUE(cuda::qmma_fits(22016, 688));
  check_fused(DType::BF16, 4, 32, true, 22016, {1, 9, 56, 64, 65});
}

// Batches of a prefill chunk's size over a wide weight (4096 features).
TEST(CudaQuantLinear, Gptq4BitLargeBatches) {
  PAGODA_REQUIRE_GPU();
  const uint64_t seed = gputest::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (DType dt : {DType::F16, DType::BF16}) {
    const double unit = dt == DType::BF16 ? 1.0 / 256 : 1.0 / 2048;
    check_single(rng, dt, gptq(4, 64), 4096, 256, false, false, dt, {300, 1100}, 2 * unit);
  }
}

TEST(CudaQuantLinear, Gptq8BitPerChannelAndActOrder) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : {DType::F16, DType::BF16}) {
    check_fused(dt, 8, -1, false);
    check_fused(dt, 8, 64, true);
  }
}

TEST(CudaQuantLinear, DummyWeightsAgreeOnBothPaths) {
  PAGODA_REQUIRE_GPU();
  std::mt19937_64 rng(7);
  auto backend = make_cuda_backend(0, DType::BF16);
  const int64_t N = 256, K = 1024;
  Tensor w = backend->alloc_quantized_linear(N, K, gptq(4, 128));
  Tensor top = w.slice_rows(0, 128), bottom = w.slice_rows(128, 128);
  backend->fill_quantized_dummy(top, 1);
  backend->fill_quantized_dummy(bottom, 2);
  // Rows 0..63 of x through the tensor-core kernel (M = 64) and through the
  // M = 65 path (dequantized weight + cuBLASLt).
  const std::vector<float> x = gputest::random_vec(rng, static_cast<size_t>(65 * K), DType::BF16);
  Tensor x9 = gputest::upload(*backend, DType::BF16, {65, K}, x);
  Tensor x8 = x9.first_rows(64);
  Tensor o8 = backend->alloc(DType::F32, {64, N}), o9 = backend->alloc(DType::F32, {65, N});
  backend->linear(x8, w, nullptr, o8);
  backend->linear(x9, w, nullptr, o9);
  const std::vector<float> a = gputest::download(*backend, o8),
                           b9 = gputest::download(*backend, o9);
  std::vector<double> b(b9.begin(), b9.begin() + 64 * N);
  EXPECT_LT(gputest::rel_l2(a, b), 1.0 / 256);
  // Weights of std ~0.02 and inputs uniform in [-1, 1): outputs of std
  // ~0.02 * sqrt(K / 3).
  double ss = 0;
  for (float v : a) ss += static_cast<double>(v) * v;
  const double std_out = std::sqrt(ss / static_cast<double>(a.size()));
  EXPECT_NEAR(std_out, 0.02 * std::sqrt(K / 3.0), 0.1 * 0.02 * std::sqrt(K / 3.0));
  for (Tensor* t : {&x9, &o8, &o9, &w}) backend->free(*t);
}

TEST(CudaQuantLinear, RefusesWhatItCannotKeepPacked) {
  PAGODA_REQUIRE_GPU();
  auto bf16 = make_cuda_backend(0, DType::BF16);
  auto f32 = make_cuda_backend(0, DType::F32);
  EXPECT_FALSE(f32->keeps_quantized(gptq(4, 128), 4096));  // fp32 runs dequantize at load
  EXPECT_FALSE(bf16->keeps_quantized(gptq(4, 128), 4096 + 16));
  EXPECT_THROW(bf16->alloc_quantized_linear(64, 4096 + 16, gptq(4, 128)), std::invalid_argument);
  Tensor w = bf16->alloc_quantized_linear(64, 256, gptq(4, 64));
  std::mt19937_64 rng(3);
  // A part of the wrong shape, and a linear on rows never loaded.
  EXPECT_THROW(bf16->load_quantized_linear(w, random_gptq(rng, gptq(4, 64), 64, 128, false, "m")),
               std::invalid_argument);
  Tensor x = bf16->alloc(DType::BF16, {1, 256}), out = bf16->alloc(DType::BF16, {1, 64});
  bf16->fill_zero(x);
  EXPECT_THROW(bf16->linear(x, w, nullptr, out), std::invalid_argument);
  for (Tensor* t : {&x, &out, &w}) bf16->free(*t);
}

}  // namespace
}  // namespace pagoda
