// Element-wise and row-wise kernels of the wider model family (BackendOp):
// GeGLU's gelu_tanh(gate) * up (Shazeer 2020, arXiv:2002.05202), the ungated
// activations (GELU, Hendrycks & Gimpel 2016, arXiv:1606.08415, exact erf
// form and its tanh approximation), soft-capping cap * tanh(x / cap) (Gemma
// 2), scaling, residual add, and LayerNorm (Ba et al. 2016,
// arXiv:1607.06450) with an optional fused residual add. The formulas are
// engine/cpu's (cpu_backend.cpp, cpu_kernels.cpp), computed in fp32 with
// one rounding to the element dtype; the fused add rounds the sum to the
// activation dtype before the norm reads it, as HF adds in that dtype (and
// as rms_norm_kernel in elementwise.cu does).
#include <stdexcept>
#include <string>

#include "gpu/cuda_check.h"
#include "gpu/dtype_util.cuh"
#include "gpu/gated_mul.cuh"
#include "gpu/kernels.h"

namespace pagoda::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kSqrt2OverPi = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kInvSqrt2 = 0.7071067811865476f;     // 1 / sqrt(2)

unsigned grid_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 8 ? (b < 1 ? 1 : b) : 65535 * 8);
}

__device__ __forceinline__ float gelu_tanh(float x) {
  return 0.5f * x * (1.f + tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

__device__ __forceinline__ float gelu_erf(float x) { return 0.5f * x * (1.f + erff(x * kInvSqrt2)); }

// What map_kernel applies to each element.
enum class MapOp { Scale, Softcap, Gelu, GeluTanh };

struct GeluTanhAct {
  __device__ float operator()(float g) const { return gelu_tanh(g); }
};

// out[e] = op(x[e]); out may alias x (each element is read, then written,
// by one thread). a: the scale factor or the cap.
template <typename T, MapOp OP>
__global__ void map_kernel(const T* x, T* out, int64_t n, float a) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = to_f32(x[e]);
    float r;
    if constexpr (OP == MapOp::Scale) r = v * a;
    else if constexpr (OP == MapOp::Softcap) r = a * tanhf(v / a);
    else if constexpr (OP == MapOp::Gelu) r = gelu_erf(v);
    else r = gelu_tanh(v);
    out[e] = from_f32<T>(r);
  }
}

template <typename T>
__global__ void add_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[e] = from_f32<T>(to_f32(x[e]) + to_f32(y[e]));
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every
// thread gets the total. Ends with a barrier so that smem can be reused by
// the next call.
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
  __syncthreads();
  return t;
}

// One block per row: mean, then the biased variance as the mean of
// (x - mean)^2 (two passes, as engine/cpu's layer_norm_f32), then
// out = (x - mean) / sqrt(var + eps) * w + b. kAdd: residual += x first
// (rounded to T) and the norm reads the rounded sum. Each thread touches
// only its own indices in every pass, so out may alias x.
template <typename T, bool kAdd>
__global__ void __launch_bounds__(kThreads)
    layer_norm_kernel(const T* x, T* residual, const T* __restrict__ w, const T* __restrict__ b,
                      float eps, T* out, int64_t H) {
  __shared__ float smem[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * H;
  T* rr = kAdd ? residual + row * H : nullptr;
  float sum = 0.f;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    float v = to_f32(xr[i]);
    if constexpr (kAdd) {
      const T s = from_f32<T>(v + to_f32(rr[i]));
      rr[i] = s;
      v = to_f32(s);
    }
    sum += v;
  }
  const float mean = block_sum(sum, smem) / static_cast<float>(H);
  const T* src = kAdd ? rr : xr;
  float sq = 0.f;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    const float d = to_f32(src[i]) - mean;
    sq += d * d;
  }
  const float var = block_sum(sq, smem) / static_cast<float>(H);
  const float inv = 1.f / sqrtf(var + eps);
  T* o = out + row * H;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x)
    o[i] = from_f32<T>((to_f32(src[i]) - mean) * inv * to_f32(w[i]) + to_f32(b[i]));
}

template <MapOp OP>
void launch_map(DType dt, const void* x, void* out, int64_t n, float a, const char* name,
                cudaStream_t stream) {
  if (n == 0) return;
  PAGODA_DISPATCH_FLOAT(dt, name,
                        map_kernel<scalar_t, OP><<<grid_for(n), kThreads, 0, stream>>>(
                            static_cast<const scalar_t*>(x), static_cast<scalar_t*>(out), n, a));
  PAGODA_CUDA_CHECK_LAUNCH(name);
}

}  // namespace

void launch_gelu_tanh_mul(DType dt, const void* gate_up, void* out, int64_t T, int64_t I,
                          cudaStream_t stream) {
  if (T * I == 0) return;
  PAGODA_DISPATCH_FLOAT(
      dt, "gelu_tanh_mul",
      launch_gated_mul_t(static_cast<const scalar_t*>(gate_up), static_cast<scalar_t*>(out), T, I,
                         GeluTanhAct{}, stream));
  PAGODA_CUDA_CHECK_LAUNCH("gated_mul_kernel (gelu_tanh)");
}

void launch_scale(DType dt, void* x, int64_t n, float s, cudaStream_t stream) {
  launch_map<MapOp::Scale>(dt, x, x, n, s, "scale_kernel", stream);
}

void launch_softcap(DType dt, void* x, int64_t n, float cap, cudaStream_t stream) {
  launch_map<MapOp::Softcap>(dt, x, x, n, cap, "softcap_kernel", stream);
}

void launch_gelu(DType dt, const void* x, void* out, int64_t n, bool tanh_approx,
                 cudaStream_t stream) {
  if (tanh_approx)
    launch_map<MapOp::GeluTanh>(dt, x, out, n, 0.f, "gelu_tanh_kernel", stream);
  else
    launch_map<MapOp::Gelu>(dt, x, out, n, 0.f, "gelu_kernel", stream);
}

void launch_add(DType dt, const void* x, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  PAGODA_DISPATCH_FLOAT(dt, "add", add_kernel<scalar_t><<<grid_for(n), kThreads, 0, stream>>>(
                                       static_cast<const scalar_t*>(x), static_cast<scalar_t*>(y), n));
  PAGODA_CUDA_CHECK_LAUNCH("add_kernel");
}

void launch_layer_norm(DType dt, const void* x, void* residual, const void* w, const void* b,
                       float eps, void* out, int64_t T, int64_t H, cudaStream_t stream) {
  if (T == 0) return;
  if (residual != nullptr) {
    PAGODA_DISPATCH_FLOAT(dt, "add_layer_norm",
                          layer_norm_kernel<scalar_t, true><<<T, kThreads, 0, stream>>>(
                              static_cast<const scalar_t*>(x), static_cast<scalar_t*>(residual),
                              static_cast<const scalar_t*>(w), static_cast<const scalar_t*>(b), eps,
                              static_cast<scalar_t*>(out), H));
  } else {
    PAGODA_DISPATCH_FLOAT(dt, "layer_norm",
                          layer_norm_kernel<scalar_t, false><<<T, kThreads, 0, stream>>>(
                              static_cast<const scalar_t*>(x), nullptr,
                              static_cast<const scalar_t*>(w), static_cast<const scalar_t*>(b), eps,
                              static_cast<scalar_t*>(out), H));
  }
  PAGODA_CUDA_CHECK_LAUNCH("layer_norm_kernel");
}

}  // namespace pagoda::cuda
