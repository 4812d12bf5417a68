// 4-bit codes into mma.m16n8k16 A-fragment registers (internal to gpu/;
// the layout: engine/quant/packed_linear.h, tile_int4). A lane's 32-bit
// word of a tile holds its 8 codes; register p of the fragment is
// and_or(word >> 4p, 0x000F000F, kWord): two halves (magic + q) exactly,
// q in 0..15 sitting in the low mantissa bits of the magic value (1024 in
// fp16, 128 in bf16, whose ulp is 1). Marlin (Frantar et al. 2024) builds
// its fragments the same way.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace pagoda::cuda {

// The shift that maps a 32-position chunk to its group (chunk >> shift)
// when group_size is 32 · 2^j; −1 otherwise (irregular or act-order groups,
// group_size <= 0: the chunk-group table).
inline int chunk_group_shift(int64_t group_size) {
  for (int j = 0; j < 24; ++j)
    if (group_size > 0 && (int64_t{32} << j) == group_size) return j;
  return -1;
}

// (a & mask) | magic in one LOP3.
__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t mask, uint32_t magic) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(r) : "r"(a), "r"(mask), "r"(magic));
  return r;
}

template <typename T>
struct Int4Magic;
template <>
struct Int4Magic<__half> {
  static constexpr uint32_t kWord = 0x64006400u;  // 1024.0 in each half: 1024 + q exactly
  static constexpr float kBase = 1024.f;
  // A code in a byte's high nibble reads as 1024 + 16 q: hi(v, c) = v / 16
  // + c, exact, gives q − z in one HFMA2 with c = −(64 + z) (Marlin's fp16
  // dequantization), so registers 1 and 3 need no shift.
  static constexpr bool kHiFma = true;
  __device__ static uint32_t hi(uint32_t a, uint32_t c) {
    const uint32_t sixteenth = 0x2C002C00u;  // 1/16 in each half
    const __half2 r = __hfma2(*reinterpret_cast<const __half2*>(&a),
                              *reinterpret_cast<const __half2*>(&sixteenth),
                              *reinterpret_cast<const __half2*>(&c));
    return *reinterpret_cast<const uint32_t*>(&r);
  }
  __device__ static uint32_t sub(uint32_t a, uint32_t b) {
    const __half2 r =
        __hsub2(*reinterpret_cast<const __half2*>(&a), *reinterpret_cast<const __half2*>(&b));
    return *reinterpret_cast<const uint32_t*>(&r);
  }
  __device__ static uint32_t pair(float v) {
    const __half2 r = __float2half2_rn(v);
    return *reinterpret_cast<const uint32_t*>(&r);
  }
};
template <>
struct Int4Magic<__nv_bfloat16> {
  static constexpr uint32_t kWord = 0x43004300u;  // 128.0 in each bf16: 128 + q exactly
  static constexpr float kBase = 128.f;
  // bf16's 7-bit mantissa holds no high nibble: every register is shifted.
  static constexpr bool kHiFma = false;
  __device__ static uint32_t sub(uint32_t a, uint32_t b) {
    const __nv_bfloat162 r = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&a),
                                     *reinterpret_cast<const __nv_bfloat162*>(&b));
    return *reinterpret_cast<const uint32_t*>(&r);
  }
  __device__ static uint32_t pair(float v) {
    const __nv_bfloat162 r = __float2bfloat162_rn(v);
    return *reinterpret_cast<const uint32_t*>(&r);
  }
};

}  // namespace pagoda::cuda
