// Helpers for the CUDA backend tests: skip without a GPU, random data drawn
// fresh each run (seed printed on failure), host bf16 rounding, NaN poison,
// and a relative-L2 comparison that fails on any non-finite output.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/model/backend.h"
#include "gpu/cuda_backend.h"
#include "gpu/device_info.h"
#include "gpu/kernels.h"

#define PAGODA_REQUIRE_GPU()                                                        \
  do {                                                                              \
    if (::pagoda::cuda::device_count() == 0)                                        \
      GTEST_SKIP() << "no CUDA device: GPU test skipped (needs an NVIDIA GPU)";     \
  } while (0)

namespace pagoda::gputest {

// Round-to-nearest-even to bfloat16, returned as float (what the device holds).
inline float round_bf16(float f) {
  if (std::isnan(f)) return f;
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  u &= 0xFFFF0000u;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round-to-nearest-even to IEEE half (11 significant bits; subnormals below
// 2^-14 keep a quantum of 2^-24), returned as float. Values stay in range.
inline float round_f16(float f) {
  if (f == 0.f || !std::isfinite(f)) return f;
  int e = 0;
  std::frexp(f, &e);  // f = m * 2^e, 0.5 <= |m| < 1
  const int q = std::max(e - 11, -24);
  return static_cast<float>(std::ldexp(std::nearbyint(std::ldexp(f, -q)), q));
}

inline float round_to(DType dt, float f) {
  return dt == DType::BF16 ? round_bf16(f) : dt == DType::F16 ? round_f16(f) : f;
}

// A fresh seed per call (random_device), so every run draws new inputs.
inline uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

// n values uniform in [lo, hi), rounded to what dt can hold.
inline std::vector<float> random_vec(std::mt19937_64& rng, size_t n, DType dt, float lo = -1.f,
                                     float hi = 1.f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = round_to(dt, u(rng));
  return v;
}

// Allocates on b and uploads host floats (converted to dt).
inline Tensor upload(Backend& b, DType dt, std::initializer_list<int64_t> shape,
                     const std::vector<float>& host) {
  Tensor t = b.alloc(dt, shape);
  EXPECT_EQ(static_cast<size_t>(t.numel()), host.size());
  b.copy_from_host(t, host.data(), DType::F32);
  return t;
}

inline void poison(Backend& b, Tensor& t) {
  std::vector<float> nan(static_cast<size_t>(t.numel()), std::numeric_limits<float>::quiet_NaN());
  b.copy_from_host(t, nan.data(), DType::F32);
}

inline std::vector<float> download(Backend& b, const Tensor& t) {
  std::vector<float> h(static_cast<size_t>(t.numel()));
  b.copy_to_host(h.data(), t);
  return h;
}

// ‖got − ref‖₂ / ‖ref‖₂; +inf if any element of got is NaN/inf (unwritten
// or broken output) or the sizes differ.
inline double rel_l2(const std::vector<float>& got, const std::vector<double>& ref) {
  if (got.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    const double d = got[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

inline std::vector<double> to_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// Tolerances (relative L2), from the unit roundoff u of the output dtype:
// fp32 kernels do fp32 math on exact inputs, so only accumulation-order
// rounding remains (a few u_f32 * sqrt(n) ≈ 1e-6 for n ≤ 10^4): 1e-5.
// bf16 kernels read exact bf16 inputs, compute in fp32 and round once to
// bf16 (u = 2^-9 ≈ 1.95e-3 per element, rel L2 ≈ u/√3 on average, ≤ u at
// worst): 4e-3 leaves room for fp32 noise and one extra rounding of an
// intermediate (residual sum, attention's bf16 q/k/v are exact inputs).
// f16 (u = 2^-11) gets the same bound, 4x looser than it needs.
inline double tol_for(DType dt) { return dt == DType::F32 ? 1e-5 : 4e-3; }

// The attention kernels a test runs its batch through: the one the batch
// selects; for a decode batch also the prefill kernel (it serves mixed
// batches, so it must be right on decodes too) and, where the tensor-core
// decode kernel is the default, the fp32 CUDA-core decode kernel; where the
// tensor-core prefill kernel applies, each of its CTA shapes (64 rows, 128
// rows as 8 x 16 and as 4 x 32).
struct AttentionMode {
  bool decode;                          // DeviceBatch::decode_only as run
  cuda::DecodeAttentionKernel kernel;   // set for the run, kAuto after
  cuda::PrefillAttentionTile tile;      // likewise
  const char* name;
};
inline std::vector<AttentionMode> attention_modes(bool decode_only, DType dt, int D, int Hq,
                                                  int Hk) {
  using K = cuda::DecodeAttentionKernel;
  using P = cuda::PrefillAttentionTile;
  const bool tensor_cores = dt != DType::F32 && (D == 64 || D == 128);
  std::vector<AttentionMode> m;
  if (decode_only) {
    cuda::AttentionArgs a;
    a.head_dim = D;
    a.num_heads = Hq;
    a.num_kv_heads = Hk;
    const bool mma = cuda::decode_attention_mma_applies(dt, a);
    m.push_back({true, K::kAuto, P::kAuto, mma ? "decode-mma" : "decode"});
    if (mma) m.push_back({true, K::kSimt, P::kAuto, "decode-simt"});
  }
  if (tensor_cores) {
    m.push_back({false, K::kAuto, P::k64Rows, "prefill-64"});
    m.push_back({false, K::kAuto, P::k128Rows, "prefill-128"});
    m.push_back({false, K::kAuto, P::k128RowsWarp32, "prefill-128x32"});
  } else {
    m.push_back({false, K::kAuto, P::kAuto, "prefill"});
  }
  return m;
}
// Sets a mode's kernel choices for a scope.
struct ScopedAttentionMode {
  explicit ScopedAttentionMode(const AttentionMode& m) {
    cuda::set_decode_attention_kernel(m.kernel);
    cuda::set_prefill_attention_tile(m.tile);
  }
  ~ScopedAttentionMode() {
    cuda::set_decode_attention_kernel(cuda::DecodeAttentionKernel::kAuto);
    cuda::set_prefill_attention_tile(cuda::PrefillAttentionTile::kAuto);
  }
};

}  // namespace pagoda::gputest
