// Row-wise and element-wise kernels: embedding lookup, RMSNorm (Zhang &
// Sennrich 2019, arXiv:1910.07467) with optional fused residual add,
// SwiGLU's silu(gate) * up (Shazeer 2020, arXiv:2002.05202), row gather,
// bias add, dtype conversion and a seeded normal fill. fp32 math throughout.
// The decode step's kernels here (embedding, the norms, silu_mul, row
// gather) are launched with programmatic dependent launch (gpu/pdl.h).
#include <stdexcept>
#include <string>

#include "gpu/cuda_check.h"
#include "gpu/dtype_util.cuh"
#include "gpu/gated_mul.cuh"
#include "gpu/kernels.h"
#include "gpu/pdl.cuh"

namespace pagoda::cuda {
namespace {

constexpr int kNormThreads = 256;

__device__ __forceinline__ float block_sum(float v, float* smem) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  const int nwarps = blockDim.x / 32;
  float t = lane < nwarps ? smem[lane] : 0.f;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  return t;
}

template <typename T>
__global__ void embedding_kernel(const int32_t* __restrict__ ids, const T* __restrict__ table,
                                 T* __restrict__ out, int64_t H, int64_t V) {
  pdl_wait_then_release();
  const int64_t t = blockIdx.x;
  const int64_t id = ids[t];
  T* o = out + t * H;
  if (id < 0 || id >= V) {
    for (int64_t i = threadIdx.x; i < H; i += blockDim.x) o[i] = from_f32<T>(0.f);
    return;
  }
  const T* row = table + id * H;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) o[i] = row[i];
}

template <typename T, bool kAdd>
__global__ void rms_norm_kernel(const T* x, T* residual, const T* __restrict__ w, float eps,
                                T* out, int64_t H) {
  pdl_wait_then_release();
  __shared__ float smem[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * H;
  T* rr = kAdd ? residual + row * H : nullptr;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    float v = to_f32(xr[i]);
    if constexpr (kAdd) {
      // HF adds in the activation dtype; the norm reads the rounded sum.
      const T s = from_f32<T>(v + to_f32(rr[i]));
      rr[i] = s;
      v = to_f32(s);
    }
    ss += v * v;
  }
  const float total = block_sum(ss, smem);
  const float inv = rsqrtf(total / static_cast<float>(H) + eps);
  const T* src = kAdd ? rr : xr;
  T* o = out + row * H;
  // Each thread reads back only the elements it wrote or read itself, so
  // out may alias x.
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x)
    o[i] = from_f32<T>(to_f32(src[i]) * inv * to_f32(w[i]));
}

// The same in one pass over registers, for rows of 16-byte vectors: each
// thread loads its (at most NV) vectors of x (and the residual) at once,
// so a row costs one memory round trip instead of one per loop step (a
// decode step's norms are latency-bound: docs/PERFORMANCE.md). Same
// arithmetic per element as rms_norm_kernel; only the order of the fp32
// sum of squares differs.
template <typename T, bool kAdd, int NV>
__global__ void __launch_bounds__(kNormThreads)
    rms_norm_vec_kernel(const T* x, T* residual, const T* __restrict__ w, float eps, T* out, int64_t H) {
  pdl_wait_then_release();
  constexpr int VEC = 16 / sizeof(T);
  using V = Vec<T, VEC>;
  __shared__ float smem[32];
  const int64_t row = blockIdx.x;
  const int nvec = static_cast<int>(H / VEC);
  const V* xr = reinterpret_cast<const V*>(x + row * H);
  V* rr = kAdd ? reinterpret_cast<V*>(residual + row * H) : nullptr;
  V xv[NV], rv[NV];
#pragma unroll
  for (int j = 0; j < NV; ++j) {
    const int i = threadIdx.x + j * kNormThreads;
    if (i < nvec) {
      xv[j] = xr[i];
      if constexpr (kAdd) rv[j] = rr[i];
    }
  }
  float ss = 0.f;
#pragma unroll
  for (int j = 0; j < NV; ++j) {
    const int i = threadIdx.x + j * kNormThreads;
    if (i >= nvec) continue;
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      float v = to_f32(xv[j].v[e]);
      if constexpr (kAdd) {
        xv[j].v[e] = from_f32<T>(v + to_f32(rv[j].v[e]));  // HF adds in the activation dtype
        v = to_f32(xv[j].v[e]);
      }
      ss += v * v;
    }
    if constexpr (kAdd) rr[i] = xv[j];
  }
  const float total = block_sum(ss, smem);
  const float inv = rsqrtf(total / static_cast<float>(H) + eps);
  const V* wr = reinterpret_cast<const V*>(w);
  V* o = reinterpret_cast<V*>(out + row * H);
#pragma unroll
  for (int j = 0; j < NV; ++j) {
    const int i = threadIdx.x + j * kNormThreads;
    if (i >= nvec) continue;
    const V wv = wr[i];
    V ov;
#pragma unroll
    for (int e = 0; e < VEC; ++e) ov.v[e] = from_f32<T>(to_f32(xv[j].v[e]) * inv * to_f32(wv.v[e]));
    o[i] = ov;
  }
}

// Launches the register form when rows are whole, aligned 16-byte vectors
// of at most 4 per thread; the looping form otherwise.
template <typename T, bool kAdd>
void launch_norm_t(const void* x, void* residual, const void* w, float eps, void* out, int64_t T_, int64_t H,
                   cudaStream_t stream) {
  constexpr int VEC = 16 / sizeof(T);
  const auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const int64_t per = (H / VEC + kNormThreads - 1) / kNormThreads;
  const auto* xp = static_cast<const T*>(x);
  auto* rp = static_cast<T*>(residual);
  const auto* wp = static_cast<const T*>(w);
  auto* op = static_cast<T*>(out);
  if (H % VEC != 0 || per > 4 || !al(x) || !al(w) || !al(out) || (kAdd && !al(residual))) {
    launch_pdl(rms_norm_kernel<T, kAdd>, T_, kNormThreads, 0, stream, xp, rp, wp, eps, op, H);
    return;
  }
  const auto go = [&](auto kernel) {
    launch_pdl(kernel, T_, kNormThreads, 0, stream, xp, rp, wp, eps, op, H);
  };
  switch (per) {
    case 1:
      go(rms_norm_vec_kernel<T, kAdd, 1>);
      break;
    case 2:
      go(rms_norm_vec_kernel<T, kAdd, 2>);
      break;
    default:
      go(rms_norm_vec_kernel<T, kAdd, 4>);
      break;
  }
}

// silu(g) = g / (1 + e^-g) (SwiGLU).
struct SiluAct {
  __device__ float operator()(float g) const { return g / (1.f + __expf(-g)); }
};

__global__ void gather_rows_kernel(const char* __restrict__ x, const int32_t* __restrict__ idx,
                                   char* __restrict__ out, int64_t row_bytes, int64_t T) {
  pdl_wait_then_release();
  const int64_t l = blockIdx.x;
  const int64_t r = idx[l];
  char* o = out + l * row_bytes;
  const bool ok = r >= 0 && r < T;
  const char* s = x + (ok ? r : 0) * row_bytes;
  if (row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
      reinterpret_cast<uintptr_t>(out) % 16 == 0) {
    for (int64_t i = threadIdx.x; i < row_bytes / 16; i += blockDim.x)
      reinterpret_cast<uint4*>(o)[i] = ok ? reinterpret_cast<const uint4*>(s)[i] : uint4{0, 0, 0, 0};
  } else {
    for (int64_t i = threadIdx.x; i < row_bytes; i += blockDim.x) o[i] = ok ? s[i] : 0;
  }
}

template <typename TO, typename TB>
__global__ void add_bias_kernel(TO* out, const TB* __restrict__ bias, int64_t T_, int64_t N) {
  const int64_t n = T_ * N;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[e] = from_f32<TO>(to_f32(out[e]) + to_f32(bias[e % N]));
}

template <typename TI, typename TO>
__global__ void convert_kernel(const TI* __restrict__ in, TO* __restrict__ out, int64_t n) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[e] = from_f32<TO>(to_f32(in[e]));
}

__device__ __forceinline__ uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

template <typename T>
__global__ void fill_normal_kernel(T* out, int64_t n, float mean, float std, uint64_t seed) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t r = splitmix64(seed * 0x632be59bd9b4e019ull + static_cast<uint64_t>(e));
    // Two 24-bit uniforms in (0, 1] and [0, 1): Box-Muller.
    const float u1 = (static_cast<float>(r >> 40) + 1.f) * (1.f / 16777216.f);
    const float u2 = static_cast<float>((r >> 8) & 0xffffffu) * (1.f / 16777216.f);
    const float z = sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
    out[e] = from_f32<T>(mean + std * z);
  }
}

unsigned grid_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 65535 * 8 ? (b < 1 ? 1 : b) : 65535 * 8);
}

}  // namespace

void launch_embedding(DType dt, const int32_t* ids, const void* table, void* out, int64_t T,
                      int64_t H, int64_t V, cudaStream_t stream) {
  if (T == 0) return;
  PAGODA_DISPATCH_FLOAT(
      dt, "embedding",
      launch_pdl(embedding_kernel<scalar_t>, T, 256, 0, stream, ids,
                 static_cast<const scalar_t*>(table), static_cast<scalar_t*>(out), H, V));
  PAGODA_CUDA_CHECK_LAUNCH("embedding_kernel");
}

void launch_rms_norm(DType dt, const void* x, const void* w, float eps, void* out, int64_t T,
                     int64_t H, cudaStream_t stream) {
  if (T == 0) return;
  PAGODA_DISPATCH_FLOAT(dt, "rms_norm", launch_norm_t<scalar_t, false>(x, nullptr, w, eps, out, T, H, stream));
  PAGODA_CUDA_CHECK_LAUNCH("rms_norm_kernel");
}

void launch_add_rms_norm(DType dt, const void* x, void* residual, const void* w, float eps,
                         void* out, int64_t T, int64_t H, cudaStream_t stream) {
  if (T == 0) return;
  PAGODA_DISPATCH_FLOAT(dt, "add_rms_norm",
                        launch_norm_t<scalar_t, true>(x, residual, w, eps, out, T, H, stream));
  PAGODA_CUDA_CHECK_LAUNCH("add_rms_norm_kernel");
}

void launch_silu_mul(DType dt, const void* gate_up, void* out, int64_t T, int64_t I,
                     cudaStream_t stream) {
  if (T * I == 0) return;
  PAGODA_DISPATCH_FLOAT(dt, "silu_mul",
                        launch_gated_mul_t(static_cast<const scalar_t*>(gate_up),
                                           static_cast<scalar_t*>(out), T, I, SiluAct{}, stream));
  PAGODA_CUDA_CHECK_LAUNCH("gated_mul_kernel (silu)");
}

void launch_gather_rows(const void* x, const int32_t* idx, void* out, int64_t L,
                        int64_t row_bytes, int64_t T, cudaStream_t stream) {
  if (L == 0) return;
  launch_pdl(gather_rows_kernel, L, 256, 0, stream, static_cast<const char*>(x), idx,
             static_cast<char*>(out), row_bytes, T);
  PAGODA_CUDA_CHECK_LAUNCH("gather_rows_kernel");
}

void launch_add_bias(DType out_dt, DType bias_dt, void* out, const void* bias, int64_t T,
                     int64_t N, cudaStream_t stream) {
  if (T * N == 0) return;
  PAGODA_DISPATCH_FLOAT(out_dt, "add_bias", {
    using out_t = scalar_t;
    PAGODA_DISPATCH_FLOAT(bias_dt, "add_bias",
        add_bias_kernel<out_t, scalar_t><<<grid_for(T * N, 256), 256, 0, stream>>>(
            static_cast<out_t*>(out), static_cast<const scalar_t*>(bias), T, N));
  });
  PAGODA_CUDA_CHECK_LAUNCH("add_bias_kernel");
}

void launch_convert(DType src_dt, DType dst_dt, const void* in, void* out, int64_t n,
                    cudaStream_t stream) {
  if (n == 0) return;
  PAGODA_DISPATCH_FLOAT(src_dt, "convert", {
    using in_t = scalar_t;
    PAGODA_DISPATCH_FLOAT(dst_dt, "convert",
        convert_kernel<in_t, scalar_t><<<grid_for(n, 256), 256, 0, stream>>>(
            static_cast<const in_t*>(in), static_cast<scalar_t*>(out), n));
  });
  PAGODA_CUDA_CHECK_LAUNCH("convert_kernel");
}

void launch_fill_normal(DType dt, void* out, int64_t n, float mean, float std, uint64_t seed,
                        cudaStream_t stream) {
  if (n == 0) return;
  PAGODA_DISPATCH_FLOAT(dt, "fill_normal",
      fill_normal_kernel<scalar_t><<<grid_for(n, 256), 256, 0, stream>>>(
          static_cast<scalar_t*>(out), n, mean, std, seed));
  PAGODA_CUDA_CHECK_LAUNCH("fill_normal_kernel");
}

}  // namespace pagoda::cuda
