// The experts' linears for decode-sized batches (launcher: launch_moe_gemv
// in gpu/moe_kernels.h): the grouped GEMM of launch_moe_gemm computed as an
// "expert-indexed GEMV", in the manner of the dense gemv.cu. At T <= 8
// tokens an expert holds at most T slots (a token picks an expert once), so
// the grouped GEMM's 16-row tensor-core tiles are mostly padding and its
// shared-memory pipeline does not keep enough bytes in flight to stream the
// weights at DRAM speed (Mixtral-8x7B batch 1: 39% of the weight-read
// roofline on the H200); here the weight stream is all there is:
//  * grid (ceil(N / 8), max_tiles): one CTA per (8 outputs, tile of
//    launch_moe_align); tiles past *num_tiles return at once, so the grid is
//    fixed for a given T and the routing is read on the device only (CUDA
//    graphs). With 16-slot tiles and T <= 8 every used expert has exactly
//    one tile, so all the slots that route to an expert are in one CTA and
//    each of its weight rows is read from DRAM once per step however many
//    tokens share the expert; experts with no slot have no tile (no CTA
//    does anything for them);
//  * one warp per output row n of the tile's expert: each lane streams
//    16-byte chunks of w[e, n, :] (kUnroll chunks in flight, read-only
//    non-allocating loads: 2-4 KiB a warp, 16-32 KiB a CTA of 8 warps),
//    converts each to fp32 once and dots it with the matching 16-byte chunk
//    of every slot's input row (x's token row for gate_up, the slot's
//    activation row for down: L1/L2 hits, re-read by the 8 warps); per slot
//    an fp32 accumulator, a warp-shuffle sum, rounded once to T;
//  * the tile's slots are taken MAXS at a time (MAXS = 1, 2, 4 or 8, the
//    smallest >= the caller's bound on slots per tile); a tile with more
//    slots than that (not in the op's use) is still computed, its weight
//    rows then read once per group.
// Each slot's sum runs over the same chunks in the same order (lane, then
// ascending k) whatever MAXS, kUnroll and the other slots of its tile: the
// result of a slot depends only on its input row and its expert, so it is
// the same at every batch size this kernel serves (graph replays of a
// padded batch equal the eager op bit for bit).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "gpu/cuda_check.h"
#include "gpu/dtype_util.cuh"
#include "gpu/moe_kernels.h"
#include "gpu/moe_tile_args.h"
#include "gpu/ptx.cuh"

namespace pagoda::cuda {
namespace {

constexpr int kWarpsPerCta = 8;  // output rows per CTA
constexpr int kMaxTileRows = 64;

// The 8 elements of a 16-byte chunk as fp32 (bf16: a shift per element).
template <typename T>
__device__ __forceinline__ void chunk_f32(const uint4& v, float (&f)[8]) {
  const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      f[2 * i] = __uint_as_float(u[i] << 16);
      f[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
    } else {
      f[2 * i] = __half2float(__ushort_as_half(static_cast<unsigned short>(u[i] & 0xffffu)));
      f[2 * i + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(u[i] >> 16)));
    }
  }
}

// acc += Σ_i wf[i] · x[i], in ascending i (fp32 FMA).
template <typename T>
__device__ __forceinline__ float dot_chunk(const float (&wf)[8], const uint4& xv, float acc) {
  float xf[8];
  chunk_f32<T>(xv, xf);
#pragma unroll
  for (int i = 0; i < 8; ++i) acc = fmaf(wf[i], xf[i], acc);
  return acc;
}

template <typename T, int MAXS, int kUnroll>
__global__ void __launch_bounds__(kWarpsPerCta * 32) moe_gemv_kernel(MoeTileArgs a) {
  __shared__ int s_slot[kMaxTileRows];
  const int tile = blockIdx.y;
  if (tile >= *a.num_tiles) return;  // the whole CTA: no barrier is reached
  for (int i = threadIdx.x; i < a.tile_rows; i += blockDim.x) {
    const int s = a.sorted_ids[static_cast<int64_t>(tile) * a.tile_rows + i];
    s_slot[i] = s >= 0 && s < a.num_slots ? s : -1;
  }
  const int expert = a.tile_expert[tile];
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n = blockIdx.x * kWarpsPerCta + warp;
  if (n >= a.N || expert < 0) return;  // no barrier below

  const int N = a.N, K = a.K, nchunks = K / 8;
  const T* __restrict__ A = static_cast<const T*>(a.a);
  const T* __restrict__ wr =
      static_cast<const T*>(a.w) + (static_cast<int64_t>(expert) * N + n) * K;
  T* __restrict__ out = static_cast<T*>(a.out);
  const uint4 zero{0, 0, 0, 0};

  // The align kernel puts a tile's slots first, then its padding: groups
  // of MAXS until the first padding entry (a padding entry inside a group
  // is skipped).
  for (int g0 = 0; g0 < a.tile_rows && s_slot[g0] >= 0; g0 += MAXS) {
    int slot[MAXS];
    const T* xr[MAXS];
#pragma unroll
    for (int i = 0; i < MAXS; ++i) {
      slot[i] = g0 + i < a.tile_rows ? s_slot[g0 + i] : -1;
      xr[i] = A + static_cast<int64_t>(slot[i] >= 0 ? slot[i] / a.a_div : 0) * K;
    }
    float acc[MAXS];
#pragma unroll
    for (int i = 0; i < MAXS; ++i) acc[i] = 0.f;
    for (int c0 = lane; c0 < nchunks; c0 += 32 * kUnroll) {
      uint4 wv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int c = c0 + 32 * u;
        wv[u] = c < nchunks ? ld_stream(wr + static_cast<int64_t>(c) * 8) : zero;
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int c = c0 + 32 * u;
        if (c >= nchunks) break;
        float wf[8];
        chunk_f32<T>(wv[u], wf);
#pragma unroll
        for (int i = 0; i < MAXS; ++i)
          if (slot[i] >= 0)  // the same for the whole warp
            acc[i] = dot_chunk<T>(
                wf, __ldg(reinterpret_cast<const uint4*>(xr[i] + static_cast<int64_t>(c) * 8)),
                acc[i]);
      }
    }
#pragma unroll
    for (int i = 0; i < MAXS; ++i) {
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], o);
      // Lane i stores slot i's output (every lane holds every sum).
      if (lane == i && slot[i] >= 0)
        out[static_cast<int64_t>(slot[i]) * N + n] = from_f32<T>(acc[i]);
    }
  }
}

template <typename T, int MAXS>
void launch_t(const MoeTileArgs& g, int64_t max_tiles, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((g.N + kWarpsPerCta - 1) / kWarpsPerCta),
                  static_cast<unsigned>(max_tiles));
  // More chunks in flight when few slots leave registers to spare.
  constexpr int kUnroll = MAXS <= 2 ? 8 : 4;
  moe_gemv_kernel<T, MAXS, kUnroll><<<grid, kWarpsPerCta * 32, 0, stream>>>(g);
  PAGODA_CUDA_CHECK_LAUNCH("moe_gemv_kernel");
}

template <typename T>
void launch_maxs(const MoeTileArgs& g, int64_t max_tiles, int64_t maxs, cudaStream_t stream) {
  if (maxs <= 1)
    launch_t<T, 1>(g, max_tiles, stream);
  else if (maxs <= 2)
    launch_t<T, 2>(g, max_tiles, stream);
  else if (maxs <= 4)
    launch_t<T, 4>(g, max_tiles, stream);
  else
    launch_t<T, 8>(g, max_tiles, stream);
}

}  // namespace

bool moe_use_gemv(int64_t num_tokens) { return num_tokens >= 1 && num_tokens <= kMoeGemvMaxTokens; }

bool launch_moe_gemv(DType dt, const void* a, int64_t a_div, const void* w, void* out,
                     const int32_t* sorted_ids, const int32_t* tile_expert,
                     const int32_t* num_tiles, int64_t max_tiles, int tile_rows, int64_t num_slots,
                     int64_t max_tile_slots, int64_t N, int64_t K, cudaStream_t stream) {
  if ((dt != DType::BF16 && dt != DType::F16) || K % 8 != 0 || !aligned16(a) || !aligned16(w) ||
      max_tiles > 65535)
    return false;
  const std::optional<MoeTileArgs> g = moe_tile_args(
      a, a_div, w, out, sorted_ids, tile_expert, num_tiles, max_tiles, tile_rows, num_slots, N, K);
  if (!g || tile_rows > kMaxTileRows || N > INT_MAX - kWarpsPerCta || max_tile_slots < 1)
    throw std::invalid_argument("moe kernels: expert GEMV of " + std::to_string(num_slots) +
                                " slots, N " + std::to_string(N) + ", K " + std::to_string(K) +
                                ", " + std::to_string(max_tiles) + " tiles of " +
                                std::to_string(tile_rows) + ", at most " +
                                std::to_string(max_tile_slots) + " slots a tile: out of range");
  if (max_tiles == 0) return true;
  const int64_t maxs = std::min<int64_t>(max_tile_slots, tile_rows);
  if (dt == DType::BF16)
    launch_maxs<__nv_bfloat16>(*g, max_tiles, maxs, stream);
  else
    launch_maxs<__half>(*g, max_tiles, maxs, stream);
  return true;
}

}  // namespace pagoda::cuda
