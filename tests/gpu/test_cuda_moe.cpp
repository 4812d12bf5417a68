// The CUDA backend's mixture-of-experts MLP (gpu/cuda_moe.cpp, gpu/moe.cu)
// against the CPU backend (engine/cpu/cpu_moe.cpp, the reference the tiny
// Mixtral and Qwen2-MoE are checked with against HF transformers), on fresh
// random weights and inputs rounded to the dtype under test, and inside
// CUDA graphs:
//  * MatchesCpuBackend: Mixtral-like (E 8, top-2 renormalised, H 256,
//    I 384), Qwen2-MoE-like (E 60, top-4 not renormalised, a sigmoid-gated
//    shared expert; Qwen1.5-MoE-A2.7B's H 2048 / I 1408 / Is 5632 over 8),
//    three experts that no token picks, and shapes the tensor-core GEMM
//    declines (K % 8 != 0: the CUDA-core kernel); T in {1, 3, 4, 8, 17, 300}
//    (<= 8: the expert-indexed GEMV for bf16 / f16; 300: several tiles per
//    expert, uneven counts), F32 / F16 / BF16. The output within a relative L2 bound, the routing
//    (topk ids) equal to a double-precision host routing wherever the probabilities' gaps exceed
//    bf16 noise.
//  * ExpertGemvMatchesReference: launch_moe_gemv alone on a routing with
//    an expert shared by all 8 tokens and experts with no slot.
//  * CapturedGraphMatchesEager: the op captured into a CUDA graph on the
//    backend's stream replays bit for bit as the eager op, also after the
//    input changed (the routing is recomputed on the device).
//  * ReservedScratchSurvivesLargerEagerSteps / GrowingScratchInsideCapture-
//    IsRefused: the scratch-sizing rules of cuda_moe.cpp.
//  * Mixtral / Qwen2-MoE decode through the executor: graphed == eager.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/model_executor.h"
#include "gpu/cuda_backend_impl.h"
#include "gpu/moe_kernels.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/model_test_helpers.h"

namespace pagoda {
namespace {

using namespace gputest;

struct MoeShape {
  const char* name;
  int64_t E, k, H, I, Is;  // Is 0: no shared expert
  bool renormalize;
  int64_t idle;  // experts 0 .. idle-1 are never picked (see make_weights)
};

const MoeShape kMixtralLike{"Mixtral-like (E 8, top-2, renormalised)", 8, 2, 256, 384, 0, true, 0};
const MoeShape kQwenLike{
    "Qwen2-MoE-like (E 60, top-4, shared expert)", 60, 4, 256, 176, 704, false, 0};
const MoeShape kIdle{"E 8, top-2, experts 0-2 never picked", 8, 2, 256, 384, 0, true, 3};
const MoeShape kOdd{
    "H 100, I 60 (K % 8 != 0: CUDA-core GEMM), shared expert", 4, 2, 100, 60, 36, true, 0};

// Host copies of one layer's weights, rounded to the dtype under test.
struct HostMoe {
  MoeShape s;
  std::vector<float> router, gate_up, down, sgu, sdown, sgate;
};

// Scales keep every intermediate O(1): router logits ~ N(0, 0.5^2) (a
// spread softmax), gate / up / down outputs of unit-ish size. Idle experts:
// their router row has -8 at column 0, where every token's x holds 1
// (make_x), so their logits sit ~8 below the others'.
HostMoe make_weights(const MoeShape& s, DType dt, std::mt19937_64& rng) {
  HostMoe h{s, {}, {}, {}, {}, {}, {}};
  const float ah = 1.f / std::sqrt(static_cast<float>(s.H));
  h.router = random_vec(rng, static_cast<size_t>(s.E * s.H), dt, -0.1f, 0.1f);
  for (int64_t e = 0; e < s.idle; ++e) h.router[static_cast<size_t>(e * s.H)] = -8.f;
  h.gate_up = random_vec(rng, static_cast<size_t>(s.E * 2 * s.I * s.H), dt, -ah, ah);
  const float ai = 1.f / std::sqrt(static_cast<float>(s.I));
  h.down = random_vec(rng, static_cast<size_t>(s.E * s.H * s.I), dt, -ai, ai);
  if (s.Is > 0) {
    h.sgu = random_vec(rng, static_cast<size_t>(2 * s.Is * s.H), dt, -ah, ah);
    const float as = 1.f / std::sqrt(static_cast<float>(s.Is));
    h.sdown = random_vec(rng, static_cast<size_t>(s.H * s.Is), dt, -as, as);
    h.sgate = random_vec(rng, static_cast<size_t>(s.H), dt, -2 * ah, 2 * ah);
  }
  return h;
}

std::vector<float> make_x(const MoeShape& s, int64_t T, DType dt, std::mt19937_64& rng) {
  std::vector<float> x = random_vec(rng, static_cast<size_t>(T * s.H), dt, -1.f, 1.f);
  if (s.idle > 0)
    for (int64_t t = 0; t < T; ++t) x[static_cast<size_t>(t * s.H)] = 1.f;
  return x;
}

MoeWeights upload_weights(Backend& b, DType dt, const HostMoe& h) {
  const MoeShape& s = h.s;
  MoeWeights w;
  w.router = upload(b, dt, {s.E, s.H}, h.router);
  w.gate_up = upload(b, dt, {s.E, 2 * s.I, s.H}, h.gate_up);
  w.down = upload(b, dt, {s.E, s.H, s.I}, h.down);
  if (s.Is > 0) {
    w.shared_gate_up = upload(b, dt, {2 * s.Is, s.H}, h.sgu);
    w.shared_down = upload(b, dt, {s.H, s.Is}, h.sdown);
    w.shared_gate = upload(b, dt, {1, s.H}, h.sgate);
  }
  return w;
}

void free_weights(Backend& b, MoeWeights& w) {
  for (Tensor* t :
       {&w.router, &w.gate_up, &w.down, &w.shared_gate_up, &w.shared_down, &w.shared_gate})
    if (!t->empty()) b.free(*t);
}

std::vector<int32_t> download_ids(Backend& b, const Tensor& t) {
  std::vector<int32_t> h(static_cast<size_t>(t.numel()));
  b.copy_to_host(h.data(), t);
  return h;
}

// Token t's experts by descending router probability, in double precision
// from the same (rounded) values; ties to the lower id.
std::vector<std::pair<double, int>> host_routing(const HostMoe& h, const std::vector<float>& x,
                                                 int64_t t) {
  const MoeShape& s = h.s;
  std::vector<double> l(static_cast<size_t>(s.E));
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t e = 0; e < s.E; ++e) {
    double d = 0;
    for (int64_t i = 0; i < s.H; ++i)
      d += static_cast<double>(x[static_cast<size_t>(t * s.H + i)]) *
           h.router[static_cast<size_t>(e * s.H + i)];
    l[static_cast<size_t>(e)] = d;
    mx = std::max(mx, d);
  }
  double sum = 0;
  for (double& v : l) sum += (v = std::exp(v - mx));
  std::vector<std::pair<double, int>> p;
  for (int64_t e = 0; e < s.E; ++e)
    p.emplace_back(l[static_cast<size_t>(e)] / sum, static_cast<int>(e));
  std::stable_sort(p.begin(), p.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  return p;
}

// The CUDA routing (ids [T, k]) against host_routing: the j-th expert of a
// token must be the reference's j-th wherever both of its neighbouring gaps
// in the sorted probabilities (p_{j-1} - p_j and p_j - p_{j+1}; the second
// decides whether it is in the top-k at all) exceed bf16 noise, 2^-8 p_j.
// Both sides compute the logits from the same exact values (CUDA: fp32 sums,
// error ~1e-6 relative), so a smaller gap is the only way they may differ.
// Also: ids in [0, E), distinct per token, none of the idle experts; and at
// least 80% of the positions compared for T >= 17 (else the check says
// little).
void check_routing(const HostMoe& h, const std::vector<float>& x, int64_t T,
                   const std::vector<int32_t>& ids) {
  const MoeShape& s = h.s;
  ASSERT_EQ(ids.size(), static_cast<size_t>(T * s.k)) << "moe_topk_ids() shape";
  int64_t compared = 0, reported = 0;
  for (int64_t t = 0; t < T; ++t) {
    const auto ref = host_routing(h, x, t);
    std::set<int32_t> seen;
    for (int64_t j = 0; j < s.k; ++j) {
      const int32_t got = ids[static_cast<size_t>(t * s.k + j)];
      EXPECT_TRUE(got >= 0 && got < s.E) << "token " << t << " slot " << j << ": expert id " << got;
      EXPECT_TRUE(seen.insert(got).second)
          << "token " << t << ": expert " << got << " chosen twice (top-" << s.k << ")";
      EXPECT_GE(got, s.idle) << "token " << t << ": idle expert " << got
                             << " chosen (its logit is ~8 below the others')";
      const double pj = ref[static_cast<size_t>(j)].first;
      const double up = j == 0 ? 1.0 : ref[static_cast<size_t>(j - 1)].first - pj;
      const double down = pj - ref[static_cast<size_t>(j + 1)].first;
      const double noise = pj / 256;
      if (up <= noise || down <= noise) continue;
      ++compared;
      const int want = ref[static_cast<size_t>(j)].second;
      if (got != want && reported++ < 5)
        ADD_FAILURE() << "token " << t << " choice " << j << ": CUDA picked expert " << got
                      << ", the reference expert " << want << " (p " << pj << ", gaps " << up
                      << " above and " << down << " below, bf16 noise " << noise << ")";
    }
  }
  EXPECT_EQ(reported, 0) << reported << " routing choices differ";
  if (T >= 17)  // a handful of choices may all fall in near-ties by chance
    EXPECT_GE(compared * 5, T * s.k * 4)
        << "only " << compared << " of " << T * s.k << " routing choices had clear gaps";
}

// "" when got equals want element for element (bitwise as floats; a NaN
// never equals), else how many differ and the first.
std::string diff_report(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size())
    return "sizes " + std::to_string(got.size()) + " and " + std::to_string(want.size());
  size_t n = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i]) && n++ == 0) first = i;
  if (n == 0) return "";
  return std::to_string(n) + " of " + std::to_string(got.size()) +
         " elements differ, the first at " + std::to_string(first) + ": " +
         std::to_string(got[first]) + " against " + std::to_string(want[first]);
}

// Relative L2 bound against the fp32 CPU backend on the same rounded inputs.
// F32: fp32 on both sides; accumulation order, cuBLASLt's router GEMM and
// silu_mul's __expf differ by a few ulp (~1e-6): 5e-5. BF16 / F16: the CUDA
// path rounds four times to the dtype (the gate_up rows, silu(gate) * up, the
// down rows, the output), each a relative error of at most u (bf16 u = 2^-9
// ~ 2e-3, ~u/sqrt(3) ~ 1.1e-3 RMS) that the later linear maps carry along
// at about the same relative size: sqrt(4) x 1.1e-3 ~ 2.3e-3 RMS expected;
// 1e-2 leaves a 4x margin (f16, u = 2^-11, is 4x tighter still). Routing
// cannot flip on rounding: the router logits are fp32 sums on both sides.
double moe_tol(DType dt) { return dt == DType::F32 ? 5e-5 : 1e-2; }

void check_against_cpu(const MoeShape& s, DType dt, const std::vector<int64_t>& tokens) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(std::string(s.name) + ", " + dtype_name(dt) + ", seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto cpu = make_cpu_backend(0);
  auto gpu = make_cuda_backend(0, dt);
  auto& cb = dynamic_cast<cuda::CudaBackend&>(*gpu);
  const HostMoe h = make_weights(s, dt, rng);
  MoeWeights cw = upload_weights(*cpu, DType::F32, h), gw = upload_weights(*gpu, dt, h);
  const MoeOptions opts{s.k, s.renormalize};
  for (const int64_t T : tokens) {
    SCOPED_TRACE("T = " + std::to_string(T));
    const std::vector<float> x = make_x(s, T, dt, rng);
    Tensor cx = upload(*cpu, DType::F32, {T, s.H}, x), cout = cpu->alloc(DType::F32, {T, s.H});
    cpu->moe(cx, cw, opts, cout);
    const auto want = to_double(download(*cpu, cout));
    Tensor gx = upload(*gpu, dt, {T, s.H}, x), gout = gpu->alloc(dt, {T, s.H});
    poison(*gpu, gout);
    gpu->moe(gx, gw, opts, gout);
    const double e = rel_l2(download(*gpu, gout), want);
    std::printf("[cuda moe] %s %s T %lld: relative L2 %.3g\n", s.name, dtype_name(dt),
                static_cast<long long>(T), e);
    EXPECT_LT(e, moe_tol(dt)) << "output against the CPU backend (inf: a NaN / unwritten element)";
    check_routing(h, x, T, download_ids(*gpu, cb.moe_topk_ids()));
    cpu->free(cx);
    cpu->free(cout);
    gpu->free(gx);
    gpu->free(gout);
  }
  free_weights(*cpu, cw);
  free_weights(*gpu, gw);
}

class CudaMoe : public ::testing::Test {
 protected:
  void SetUp() override { PAGODA_REQUIRE_GPU(); }
};

// T <= cuda::kMoeGemvMaxTokens (1, 3, 4; kIdle 4) runs the experts on the
// expert-indexed GEMV for bf16 / f16 (T 4 of Mixtral-like: 8 slots over 8
// experts, some expert with several; kIdle T 4: 8 slots over 5 experts,
// experts 0-2 with none); 8, 17 and 300 on the grouped GEMM; F32 and kOdd on
// the CUDA-core grouped GEMM at every T (the GEMV declines them).
TEST_F(CudaMoe, MatchesCpuBackend) {
  const std::vector<int64_t> tokens = {1, 3, 4, 8, 17, 300};
  for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
    check_against_cpu(kMixtralLike, dt, tokens);
    check_against_cpu(kQwenLike, dt, tokens);
    check_against_cpu(kIdle, dt, {4, 17, 300});
    check_against_cpu(kOdd, dt, {3, 300});
  }
}

// The tile sizes the op picks, and the bound on the tiles it may use (host
// functions: runs without a GPU too).
TEST(CudaMoeHost, TileSizesAndBounds) {
  EXPECT_EQ(cuda::moe_tile_rows(1, 8, 2), 16);
  EXPECT_EQ(cuda::moe_tile_rows(300, 8, 2), 64);   // 75 slots an expert
  EXPECT_EQ(cuda::moe_tile_rows(300, 60, 4), 16);  // 20 slots an expert
  // 1 token, top-2 of 8: at most 2 tiles (one per chosen expert).
  EXPECT_EQ(cuda::moe_max_tiles(2, 8, 16), 2);
  // 600 slots over 8 experts in tiles of 64: at most (600 + 8 * 63) / 64.
  EXPECT_EQ(cuda::moe_max_tiles(600, 8, 64), (600 + 8 * 63) / 64);
  // The expert GEMV for decode-sized batches, the grouped GEMM beyond; at
  // those T the tiles are 16 rows, each expert's <= T slots in one tile,
  // and there are tiles for min(E, T*k) experts.
  EXPECT_FALSE(cuda::moe_use_gemv(0));
  for (int64_t T = 1; T <= cuda::kMoeGemvMaxTokens; ++T) {
    EXPECT_TRUE(cuda::moe_use_gemv(T)) << T;
    for (const auto& [E, k] : {std::pair<int64_t, int64_t>{8, 2}, {60, 4}, {8, 8}, {128, 8}}) {
      EXPECT_EQ(cuda::moe_tile_rows(T, E, k), 16) << T << " tokens, top-" << k << " of " << E;
      EXPECT_GE(cuda::moe_max_tiles(T * k, E, 16), std::min(E, T * k));
    }
  }
  EXPECT_FALSE(cuda::moe_use_gemv(cuda::kMoeGemvMaxTokens + 1));
  EXPECT_FALSE(cuda::moe_use_gemv(300));
}

// launch_moe_gemv alone on a crafted routing, against a double-precision
// host reference and the tensor-core grouped GEMM: E 8, top-2, 8 tokens,
// every token's first expert is 5 (a tile of 8 slots: all slots of one
// expert in one CTA), the second 0, 2 or 7 (2-3 slots each), experts 1, 3,
// 4, 6 with no slot (no tile). Gathered rows (a_div = k, gate_up) and rows
// per slot (a_div = 1, down); shapes with N % 8 != 0 and K not a multiple
// of the 256-element step (tails), and one of Mixtral's K / 4. The slots
// per tile bound at 8 (the op's) and at 1 and 2 (the tile's 8 slots taken
// 1 or 2 at a time) must give the same bits: a slot's sum does not depend
// on the other slots in its CTA.
TEST_F(CudaMoe, ExpertGemvMatchesReference) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t E = 8, k = 2, T = 8, slots = T * k, tile_rows = 16;
  const std::vector<int32_t> ids = {5, 0, 5, 0, 5, 2, 5, 2, 5, 2, 5, 7, 5, 7, 5, 7};
  ASSERT_EQ(static_cast<int64_t>(ids.size()), slots);
  const int64_t max_tiles = cuda::moe_max_tiles(slots, E, tile_rows);
  const int64_t sorted_n = max_tiles * tile_rows;
  const int64_t counts_n = cuda::moe_align_scratch_ints(E);
  int32_t* d = nullptr;  // ids, sorted, tile_expert, num_tiles, counts
  const int64_t ints = slots + sorted_n + max_tiles + 1 + counts_n;
  ASSERT_EQ(cudaMalloc(&d, static_cast<size_t>(ints) * 4), cudaSuccess);
  int32_t* d_ids = d;
  int32_t* d_sorted = d_ids + slots;
  int32_t* d_tile_expert = d_sorted + sorted_n;
  int32_t* d_num_tiles = d_tile_expert + max_tiles;
  int32_t* d_counts = d_num_tiles + 1;
  ASSERT_EQ(cudaMemcpy(d_ids, ids.data(), static_cast<size_t>(slots) * 4, cudaMemcpyHostToDevice),
            cudaSuccess);

  struct Shape {
    int64_t N, K;
  };
  for (const DType dt : {DType::BF16, DType::F16}) {
    auto gpu = make_cuda_backend(0, dt);
    auto& cb = dynamic_cast<cuda::CudaBackend&>(*gpu);
    cuda::launch_moe_align(d_ids, slots, E, static_cast<int>(tile_rows), max_tiles, d_sorted,
                           d_tile_expert, d_num_tiles, d_counts, cb.stream());
    int32_t used = 0;
    ASSERT_EQ(cudaStreamSynchronize(cb.stream()), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(&used, d_num_tiles, 4, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(used, 4) << "tiles for experts 0, 2, 5, 7";
    for (const Shape sh : {Shape{100, 328}, Shape{384, 1024}}) {
      for (const int64_t a_div : {k, int64_t{1}}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + ", N " + std::to_string(sh.N) + ", K " +
                     std::to_string(sh.K) + ", a_div " + std::to_string(a_div));
        const int64_t rows = slots / a_div;
        const std::vector<float> a = random_vec(rng, static_cast<size_t>(rows * sh.K), dt);
        const float sc = 1.f / std::sqrt(static_cast<float>(sh.K));
        const std::vector<float> w =
            random_vec(rng, static_cast<size_t>(E * sh.N * sh.K), dt, -sc, sc);
        std::vector<double> want(static_cast<size_t>(slots * sh.N));
        for (int64_t s = 0; s < slots; ++s)
          for (int64_t n = 0; n < sh.N; ++n) {
            double acc = 0;
            const int64_t e = ids[static_cast<size_t>(s)];
            for (int64_t j = 0; j < sh.K; ++j)
              acc += static_cast<double>(a[static_cast<size_t>(s / a_div * sh.K + j)]) *
                     w[static_cast<size_t>((e * sh.N + n) * sh.K + j)];
            want[static_cast<size_t>(s * sh.N + n)] = acc;
          }
        Tensor ga = upload(*gpu, dt, {rows, sh.K}, a);
        Tensor gw = upload(*gpu, dt, {E, sh.N, sh.K}, w);
        Tensor out = gpu->alloc(dt, {slots, sh.N});
        auto run_gemv = [&](int64_t bound) {
          poison(*gpu, out);
          EXPECT_TRUE(cuda::launch_moe_gemv(
              dt, ga.data, a_div, gw.data, out.data, d_sorted, d_tile_expert, d_num_tiles,
              max_tiles, static_cast<int>(tile_rows), slots, bound, sh.N, sh.K, cb.stream()))
              << "the GEMV declined";
          return download(*gpu, out);
        };
        const std::vector<float> got = run_gemv(T);
        const double e = rel_l2(got, want);
        EXPECT_LT(e, tol_for(dt)) << "GEMV against the reference (inf: an unwritten slot)";
        EXPECT_EQ(diff_report(run_gemv(1), got), "") << "1 slot at a time differs from 8";
        EXPECT_EQ(diff_report(run_gemv(2), got), "") << "2 slots at a time differ from 8";
        poison(*gpu, out);
        EXPECT_TRUE(cuda::launch_moe_gemm_mma(
            dt, ga.data, a_div, gw.data, out.data, d_sorted, d_tile_expert, d_num_tiles, max_tiles,
            static_cast<int>(tile_rows), slots, sh.N, sh.K, cb.stream()));
        const double em = rel_l2(download(*gpu, out), want);
        EXPECT_LT(em, tol_for(dt)) << "grouped GEMM against the reference";
        std::printf("[cuda moe gemv] %s N %lld K %lld a_div %lld: relative L2 %.3g (mma %.3g)\n",
                    dtype_name(dt), static_cast<long long>(sh.N), static_cast<long long>(sh.K),
                    static_cast<long long>(a_div), e, em);
        for (Tensor* t : {&ga, &gw, &out}) gpu->free(*t);
      }
    }
    // Declined, launching nothing: F32, K % 8 != 0.
    EXPECT_FALSE(cuda::launch_moe_gemv(DType::F32, d_ids, 1, d_ids, d_ids, d_sorted, d_tile_expert,
                                       d_num_tiles, max_tiles, static_cast<int>(tile_rows), slots,
                                       T, 8, 8, cb.stream()));
    EXPECT_FALSE(cuda::launch_moe_gemv(dt, d_ids, 1, d_ids, d_ids, d_sorted, d_tile_expert,
                                       d_num_tiles, max_tiles, static_cast<int>(tile_rows), slots,
                                       T, 8, 12, cb.stream()));
    gpu->synchronize();
  }
  cudaFree(d);
}

// A captured graph of the op replays as the eager op, bit for bit, and
// recomputes the routing on the device when the input changes.
TEST_F(CudaMoe, CapturedGraphMatchesEager) {
  for (const MoeShape& s : {kQwenLike, kMixtralLike}) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(std::string(s.name) + ", seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const DType dt = DType::BF16;
    auto gpu = make_cuda_backend(0, dt);
    auto& cb = dynamic_cast<cuda::CudaBackend&>(*gpu);
    const HostMoe h = make_weights(s, dt, rng);
    MoeWeights w = upload_weights(*gpu, dt, h);
    const MoeOptions opts{s.k, s.renormalize};
    for (const int64_t T : {int64_t{1}, int64_t{4}, int64_t{8}, int64_t{17}, int64_t{300}}) {
      SCOPED_TRACE("T = " + std::to_string(T));
      const std::vector<float> x1 = make_x(s, T, dt, rng), x2 = make_x(s, T, dt, rng);
      Tensor x = upload(*gpu, dt, {T, s.H}, x1);
      Tensor eager = gpu->alloc(dt, {T, s.H}), graphed = gpu->alloc(dt, {T, s.H});
      gpu->moe(x, w, opts, eager);  // also sizes the scratch and plans cuBLASLt
      const std::vector<float> want1 = download(*gpu, eager);
      const std::vector<int32_t> ids1 = download_ids(*gpu, cb.moe_topk_ids());
      cb.begin_capture();
      try {
        gpu->moe(x, w, opts, graphed);
      } catch (...) {
        cudaGraph_t g = nullptr;
        cudaStreamEndCapture(cb.stream(), &g);
        if (g) cudaGraphDestroy(g);
        throw;
      }
      cudaGraphExec_t exec = cb.end_capture();
      auto replay = [&] {
        poison(*gpu, graphed);
        cb.launch_graph(exec);
        return download(*gpu, graphed);
      };
      EXPECT_EQ(diff_report(replay(), want1), "") << "graph replay differs from the eager op";
      // A new input in the same tensor: eager and replay agree again, and
      // the routing did change (the graph holds no host-side routing).
      gpu->copy_from_host(x, x2.data(), DType::F32);
      gpu->moe(x, w, opts, eager);
      const std::vector<float> want2 = download(*gpu, eager);
      const std::vector<int32_t> ids2 = download_ids(*gpu, cb.moe_topk_ids());
      EXPECT_EQ(diff_report(replay(), want2), "")
          << "graph replay on a new input differs from the eager op";
      EXPECT_NE(diff_report(want1, want2), "") << "two random inputs gave the same output";
      if (T >= 17) EXPECT_TRUE(ids1 != ids2) << "the new input routed exactly as the old one";
      cudaGraphExecDestroy(exec);
      for (Tensor* t : {&x, &eager, &graphed}) gpu->free(*t);
    }
    free_weights(*gpu, w);
  }
}

// After reserve() for steps of up to 512 tokens (what DecodeGraphs::capture
// does with max_num_batched_tokens), the first moe() sizes the scratch for
// 512 tokens: a graph captured at 8 tokens stays valid (buffer_generation
// unchanged) and correct after an eager 512-token step.
TEST_F(CudaMoe, ReservedScratchSurvivesLargerEagerSteps) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  const MoeShape& s = kQwenLike;
  const DType dt = DType::BF16;
  auto gpu = make_cuda_backend(0, dt);
  auto& cb = dynamic_cast<cuda::CudaBackend&>(*gpu);
  const HostMoe h = make_weights(s, dt, rng);
  MoeWeights w = upload_weights(*gpu, dt, h);
  const MoeOptions opts{s.k, s.renormalize};
  cb.reserve(512, 8, 4, 8, 4, 64, 64);
  Tensor xs = upload(*gpu, dt, {8, s.H}, make_x(s, 8, dt, rng));
  Tensor xl = upload(*gpu, dt, {512, s.H}, make_x(s, 512, dt, rng));
  Tensor small = gpu->alloc(dt, {8, s.H}), large = gpu->alloc(dt, {512, s.H});
  Tensor graphed = gpu->alloc(dt, {8, s.H});
  gpu->moe(xs, w, opts, small);  // warm-up: the scratch grows here, before any capture
  const uint64_t gen = cb.buffer_generation();
  cb.begin_capture();
  gpu->moe(xs, w, opts, graphed);
  cudaGraphExec_t exec = cb.end_capture();
  gpu->moe(xl, w, opts, large);  // a prefill-sized step
  EXPECT_EQ(cb.buffer_generation(), gen)
      << "a step of the reserved size moved the scratch a captured graph holds";
  poison(*gpu, graphed);
  cb.launch_graph(exec);
  EXPECT_EQ(diff_report(download(*gpu, graphed), download(*gpu, small)), "")
      << "replay after the 512-token step differs from the eager 8-token op";
  cudaGraphExecDestroy(exec);
  for (Tensor* t : {&xs, &xl, &small, &large, &graphed}) gpu->free(*t);
  free_weights(*gpu, w);
}

// A capture that would need a larger scratch is refused before anything is
// enqueued, and the capture still ends cleanly.
TEST_F(CudaMoe, GrowingScratchInsideCaptureIsRefused) {
  std::mt19937_64 rng(7);
  const MoeShape& s = kMixtralLike;
  const DType dt = DType::BF16;
  auto gpu = make_cuda_backend(0, dt);
  auto& cb = dynamic_cast<cuda::CudaBackend&>(*gpu);
  const HostMoe h = make_weights(s, dt, rng);
  MoeWeights w = upload_weights(*gpu, dt, h);
  Tensor x = upload(*gpu, dt, {8, s.H}, make_x(s, 8, dt, rng)), out = gpu->alloc(dt, {8, s.H});
  cb.begin_capture();
  EXPECT_THROW(gpu->moe(x, w, MoeOptions{s.k, s.renormalize}, out), std::logic_error);
  cudaGraph_t g = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(cb.stream(), &g), cudaSuccess);
  if (g) cudaGraphDestroy(g);
  gpu->moe(x, w, MoeOptions{s.k, s.renormalize}, out);  // eagerly: fine
  gpu->synchronize();
  for (Tensor* t : {&x, &out}) gpu->free(*t);
  free_weights(*gpu, w);
}

TEST_F(CudaMoe, BadArgumentsThrow) {
  std::mt19937_64 rng(3);
  const MoeShape& s = kMixtralLike;
  const DType dt = DType::BF16;
  auto gpu = make_cuda_backend(0, dt);
  const HostMoe h = make_weights(s, dt, rng);
  MoeWeights w = upload_weights(*gpu, dt, h);
  Tensor x = upload(*gpu, dt, {4, s.H}, make_x(s, 4, dt, rng)), out = gpu->alloc(dt, {4, s.H});
  EXPECT_THROW(gpu->moe(x, w, MoeOptions{s.E + 1, true}, out), std::invalid_argument);
  EXPECT_THROW(gpu->moe(x, w, MoeOptions{0, true}, out), std::invalid_argument);
  EXPECT_THROW(gpu->moe(x, w, MoeOptions{2, true}, x), std::invalid_argument);  // out aliases x
  MoeWeights bad = w;
  bad.down = w.down.view({s.E, s.I, s.H});
  EXPECT_THROW(gpu->moe(x, bad, MoeOptions{2, true}, out), std::invalid_argument);
  Tensor x32 = gpu->alloc(DType::F32, {4, s.H});
  EXPECT_THROW(gpu->moe(x32, w, MoeOptions{2, true}, out), std::invalid_argument);
  for (Tensor* t : {&x, &out, &x32}) gpu->free(*t);
  free_weights(*gpu, w);
}

// The tiny MoE checkpoints through the executor: a decode step of five
// sequences after their prefill (261 tokens) returns the same logits, bit
// for bit, from the captured graphs (batch padded to 8) as eagerly.
void check_graphed_decode(const std::string& name) {
  const std::string dir = test::shared_model("arch/" + name);
  const ModelConfig cfg = ModelConfig::from_dir(dir);
  const std::vector<int32_t> lens = {3, 17, 1, 40, 200};
  auto run = [&](bool eager, int64_t* graphs) {
    ExecutorOptions o;
    o.model_dir = dir;
    o.device = "cuda";
    o.dtype = "bfloat16";
    o.block_size = 16;
    o.max_model_len = 256;
    o.max_num_seqs = 8;
    o.max_num_batched_tokens = 512;
    o.num_gpu_blocks_override = 100;
    o.enforce_eager = eager;
    auto ex = make_model_executor(cfg, o);
    *graphs = ex->num_cuda_graphs();
    ForwardBatch pre, dec;
    const int32_t mb = 16;
    pre.max_blocks_per_seq = dec.max_blocks_per_seq = mb;
    pre.query_start_loc = {0};
    dec.query_start_loc = {0};
    for (size_t i = 0; i < lens.size(); ++i) {
      const auto si = static_cast<int32_t>(i);
      for (int32_t p = 0; p < lens[i]; ++p) {
        pre.input_ids.push_back((p * 37 + si * 11) % static_cast<int32_t>(cfg.vocab_size));
        pre.positions.push_back(p);
        pre.slot_mapping.push_back(si * mb * 16 + p);
      }
      pre.query_start_loc.push_back(pre.num_tokens());
      pre.context_lens.push_back(lens[i]);
      pre.logits_indices.push_back(pre.num_tokens() - 1);
      dec.input_ids.push_back((si * 97 + 5) % static_cast<int32_t>(cfg.vocab_size));
      dec.positions.push_back(lens[i]);
      dec.slot_mapping.push_back(si * mb * 16 + lens[i]);
      dec.query_start_loc.push_back(si + 1);
      dec.context_lens.push_back(lens[i] + 1);
      dec.logits_indices.push_back(si);
      for (int32_t k = 0; k < mb; ++k) {
        pre.block_tables.push_back(si * mb + k);
        dec.block_tables.push_back(si * mb + k);
      }
    }
    std::vector<float> lp, ld;
    ex->execute(pre, lp);
    ex->execute(dec, ld);
    return ld;
  };
  int64_t g_graphed = 0, g_eager = 0;
  const std::vector<float> graphed = run(false, &g_graphed);
  const std::vector<float> eager = run(true, &g_eager);
  EXPECT_EQ(g_eager, 0);
  EXPECT_EQ(g_graphed, 4) << "capture sizes for max_num_seqs 8: 1, 2, 4, 8";
  ASSERT_EQ(graphed.size(), eager.size());
  ASSERT_EQ(graphed.size(), lens.size() * static_cast<size_t>(cfg.vocab_size));
  size_t diff = 0;
  for (size_t i = 0; i < graphed.size(); ++i)
    diff += graphed[i] != eager[i] || std::isnan(graphed[i]);
  EXPECT_EQ(diff, 0u) << name << ": logits differing between graph replay and eager";
}

TEST_F(CudaMoe, MixtralGraphedDecodeEqualsEagerBitwise) {
  check_graphed_decode("tiny-random-mixtral");
}

TEST_F(CudaMoe, Qwen2MoeGraphedDecodeEqualsEagerBitwise) {
  check_graphed_decode("tiny-random-qwen2-moe");
}

}  // namespace
}  // namespace pagoda
