// Device-side element conversions between the activation dtypes (internal).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "engine/core/tensor.h"

namespace pagoda::cuda {

template <typename T>
struct TypeTag {
  using type = T;
};

// Host-side dispatch of a 16-bit-input kernel with a 16-bit or F32 output:
// calls f(TypeTag<T>{}, TypeTag<TO>{}) with T = __nv_bfloat16 (in_dt BF16)
// or __half (F16) and TO = T, or float when out_dt is F32, and returns true;
// returns false (f not called) for any other pair.
template <typename F>
bool dispatch_half_in(DType in_dt, DType out_dt, F&& f) {
  if ((in_dt != DType::BF16 && in_dt != DType::F16) || (out_dt != in_dt && out_dt != DType::F32))
    return false;
  const bool f32_out = out_dt == DType::F32;
  if (in_dt == DType::BF16) {
    if (f32_out) f(TypeTag<__nv_bfloat16>{}, TypeTag<float>{});
    else f(TypeTag<__nv_bfloat16>{}, TypeTag<__nv_bfloat16>{});
  } else {
    if (f32_out) f(TypeTag<__half>{}, TypeTag<float>{});
    else f(TypeTag<__half>{}, TypeTag<__half>{});
  }
  return true;
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// N elements of T moved as one aligned vector (N * sizeof(T) in {2,4,8,16} bytes).
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

template <typename T, int N>
__device__ __forceinline__ void load_f32(const T* p, float (&out)[N]) {
  Vec<T, N> x = *reinterpret_cast<const Vec<T, N>*>(p);
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = to_f32(x.v[i]);
}

template <typename T, int N>
__device__ __forceinline__ void store_f32(T* p, const float (&in)[N]) {
  Vec<T, N> x;
#pragma unroll
  for (int i = 0; i < N; ++i) x.v[i] = from_f32<T>(in[i]);
  *reinterpret_cast<Vec<T, N>*>(p) = x;
}

}  // namespace pagoda::cuda

// Runs the block with `scalar_t` bound to the C++ type of an act dtype.
#define PAGODA_DISPATCH_FLOAT(dt, name, ...)                                           \
  do {                                                                                \
    switch (dt) {                                                                     \
      case ::pagoda::DType::F32: { using scalar_t = float; __VA_ARGS__; break; }      \
      case ::pagoda::DType::F16: { using scalar_t = __half; __VA_ARGS__; break; }     \
      case ::pagoda::DType::BF16: { using scalar_t = __nv_bfloat16; __VA_ARGS__; break; } \
      default:                                                                        \
        throw std::invalid_argument(std::string(name) + ": unsupported dtype " +     \
                                    ::pagoda::dtype_name(dt));                        \
    }                                                                                 \
  } while (0)
