// 4-bit codes into mma.m16n8k16 A-fragment registers (internal to gpu/;
// the layout: engine/quant/packed_linear.h, tile_int4). A lane's 32-bit
// word of a tile holds its 8 codes; register p of the fragment takes the
// nibbles at bits 4p and 16 + 4p, registers 0 and 2 of row r, 1 and 3 of
// row r + 8. and_or(word >> 4p, 0x000F000F, kWord) gives two halves
// (magic + q) exactly, q in 0..15 sitting in the low mantissa bits of the
// magic value (1024 in fp16, 128 in bf16, whose ulp is 1); one HSUB2 of
// (magic + z) leaves q − z. fp16 reads registers 1 and 3 unshifted from the
// high nibbles instead (Int4Magic<__half>::hi). Marlin (Frantar et al.
// 2024) builds its fragments the same way.
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
  // The record value for rows r (z the zero point): magic + z in each half,
  // sub()'s subtrahend.
  __device__ static uint32_t lo_zero(float z) { return pair(kBase + z); }
  // The record value for rows r + 8 (z the zero point, 0..255): −(64 + z)
  // in each half, hi()'s addend.
  __device__ static uint32_t hi_zero(float z) { return pair(-(kBase / 16.f + z)); }
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
  // The record value for rows r: magic + z in each half, sub()'s subtrahend.
  __device__ static uint32_t lo_zero(float z) { return pair(kBase + z); }
  // The record value for rows r + 8: (magic + z) in each half, as for row r.
  __device__ static uint32_t hi_zero(float z) { return pair(kBase + z); }
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

// The A fragment of a lane's word w: a[p] = q − z exactly in T's pairs,
// with zr = Int4Magic::lo_zero(z) of row r and zr8 = Int4Magic::hi_zero(z)
// of row r + 8.
template <typename T>
__device__ __forceinline__ void int4_fragment(uint32_t w, uint32_t zr, uint32_t zr8,
                                              uint32_t (&a)[4]) {
  using Mg = Int4Magic<T>;
  constexpr uint32_t kLo = 0x000F000Fu;
  a[0] = Mg::sub(and_or(w, kLo, Mg::kWord), zr);
  a[2] = Mg::sub(and_or(w >> 8, kLo, Mg::kWord), zr);
  if constexpr (Mg::kHiFma) {  // rows r + 8 from the high nibbles, unshifted
    a[1] = Mg::hi(and_or(w, kLo << 4, Mg::kWord), zr8);
    a[3] = Mg::hi(and_or(w >> 8, kLo << 4, Mg::kWord), zr8);
  } else {
    a[1] = Mg::sub(and_or(w >> 4, kLo, Mg::kWord), zr8);
    a[3] = Mg::sub(and_or(w >> 12, kLo, Mg::kWord), zr8);
  }
}

}  // namespace pagoda::cuda
